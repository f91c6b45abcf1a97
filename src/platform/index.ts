// The one place that knows which OS this is. Each OS has a module behind one interface (types.ts):
// linux.ts (other POSIX systems get it too) and win32.ts; `platform` is the one for this OS. The
// rest of src imports what it needs from here; `process.platform` appears nowhere else (a lint
// rule says so).
import { linux } from './linux';
import type { MountLine, Platform } from './types';
import { win32 } from './win32';

export const platform: Platform = process.platform === 'win32' ? win32 : linux;

export type {
  DaemonFiles,
  DaemonLocation,
  DaemonEndpoint,
  LaunchOptions,
  LimitHit,
  MountLine,
  Platform,
  ProcessGroup,
  ProcessSnapshot,
  ProcessTrees,
  RunLimits,
} from './types';
export { isInside, RUN_MARKER, runWithin } from './common';
// Linux-only helpers; each answers harmlessly where there is no mount table (nothing may hang,
// no shadowfs mount is listed).
export { checkAllowOther, FUSE_CONF, mayHang, shadowfsMounts, unanswered } from './linux-mounts';
// Windows-only, used by doctor and the tests of the mount-point rules.
export { prepareWin32MountPoint, winfspInstallDir } from './win32-mounts';
export { type Endpoint, newPipeName, newSecret, readEndpoint, writeEndpoint } from './win32-endpoint';

/** The private per-user directory: mount points and the daemon's socket, state and log. */
export function runtimeDir(): string {
  return platform.runtimeDir();
}

/** The per-user directory for what must outlive the daemon and a reboot (checkpoints). */
export function stateDir(): string {
  return platform.stateDir();
}

/** The mount table as this process sees it (Linux; empty elsewhere). */
export function mountTable(): MountLine[] {
  return platform.mountTable();
}

/** Mount points currently in the mount table. */
export function mountedPaths(): Set<string> {
  return new Set(platform.mountTable().map((m) => m.mountPoint));
}
