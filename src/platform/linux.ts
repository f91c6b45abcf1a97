// The Linux platform (other POSIX systems get it too, and are told where it cannot serve them):
// per-user directories under XDG_RUNTIME_DIR (found without it too: linux-runtime.ts) and XDG_STATE_HOME, FUSE mounts, a Unix socket, and
// cgroups or /proc for process trees.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { checkFuseDevice, forceUnmount, mountTable, prepareMountPoint, remakeMountPoint } from './linux-mounts';
import { linuxProcesses } from './linux-processes';
import { announceRuntimeDir, runtimeDir } from './linux-runtime';
import { socketEndpoint } from './linux-endpoint';
import { closeOnExec, closeOnExecInherited } from './linux-fds';
import type { Platform } from './types';

/** $SHADOWFS_STATE_DIR, else $XDG_STATE_HOME/shadowfs or ~/.local/state/shadowfs; mode 0700. */
function stateDir(): string {
  const dir =
    process.env.SHADOWFS_STATE_DIR || path.join(process.env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state'), 'shadowfs');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  return dir;
}

export const linux: Platform = {
  name: process.platform,
  caseInsensitiveNames: false,
  nameSeparators: /[/\0]/,
  namespaces: process.platform === 'linux',
  runtimeDir,
  announceRuntimeDir,
  stateDir,
  configDir: () => process.env.XDG_CONFIG_HOME ?? path.join(os.homedir(), '.config'),
  mountTable,
  checkMountable(): void {
    if (process.platform !== 'linux')
      throw new ShadowError('NOT_SUPPORTED', `shadowfs mounts only on Linux in this version (this is ${process.platform})`);
    checkFuseDevice();
  },
  prepareMountPoint: (requested, folder, name) => prepareMountPoint(requested, folder, name, () => path.join(runtimeDir(), 'mounts')),
  remakeMountPoint,
  isDriveRoot: () => false,
  forceUnmount,
  // /proc and these fcntl values are Linux's.
  ...(process.platform === 'linux' ? { closeOnExec, closeOnExecInherited } : {}),
  endpoint: socketEndpoint,
  processes: linuxProcesses,
};
