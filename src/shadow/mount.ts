// Mounting a shadow: the options, each checked before anything is touched, the backend picked,
// the mount point prepared and the native mount made; a refusal or failure leaves nothing behind.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { fromNative, ShadowError } from '../common/errors';
import { addon } from './native';
import { applyMemoryBudget, parseSize, setMemoryBudget } from './budget';
import { checkAllowOther, isInside, platform } from '../platform';
import { checkAgent, checkFolder } from './checks';
import { ERRNOS } from './errnos';
import { networkPrefix, prepareMountPoint, volumeFor, type WindowsVolume } from './mount-point';
import { folderGitDirs, folderGitGlobs } from './git-guard';
import { Shadow } from './shadow';

export type { WindowsVolume };

export interface MountOptions {
  /**
   * Where to mount. Linux: a directory, created when missing, that must be empty; default: a fresh directory under the
   * per-user runtime directory. Windows: a free drive letter ("X:") or a directory that does not exist yet (WinFsp
   * creates it and removes it at unmount; an existing empty one is removed first); default: the highest free drive letter.
   */
  mountPoint?: string;
  /**
   * Windows, winfsp backend: the kind of WinFsp volume. "network": a volume WinFsp registers as \\shadowfs\<name>, on
   * which GetFinalPathNameByHandleW works without administrator rights (Node's fs.realpath.native, Python's
   * os.path.realpath and Java's toRealPath answer with that UNC path); it goes on a drive letter only. "disk": a local
   * disk volume, the only kind WinFsp puts on a directory; realpath fails there (Windows error 1005: the Mount Manager
   * does not know the volume). Default: "network" on a drive letter, "disk" on a directory. Ignored elsewhere.
   */
  volume?: WindowsVolume;
  /** Seconds the kernel may cache names, attributes and "not found" answers (default 60). Edits in the folder are pushed through inotify; this only bounds the delay where no watch could be set. */
  cacheTimeout?: number;
  /** Mount backend: "fuse_ll" (Linux, fastest), "fuse_hl" (the portable FUSE3 backend Windows uses), or "default" (the first of those built). Default: $SHADOWFS_BACKEND, else "default". */
  backend?: string;
  /** Agent layer that is created and active from the start (default "default"); null for none. */
  layer?: string | null;
  /** Invalidate the kernel's names with one epoch notification on a switch when the kernel supports it (default true). */
  useEpoch?: boolean;
  /** Files larger than this many bytes are kept in unlinked temporary files instead of memory (default 64 MiB). */
  spillThreshold?: number;
  /** Where those temporary files go, and the contents the memory budget moves out of memory (default: the OS temporary directory). */
  spillDir?: string;
  /**
   * The memory budget for layer contents, in bytes or as a size ("512M", "2G", "none"): past it, the least recently used
   * contents (small files included) move to files in spillDir. One budget for the whole process, shared by all its
   * shadows and layers: setting it here sets it for every shadow of the process (the last one set wins). Default: the
   * daemon's --memory-budget, else $SHADOWFS_MEMORY_BUDGET, else a quarter of the machine's memory.
   */
  memoryBudget?: string | number;
  /** Let other users use the shadow (FUSE allow_other), the kernel checking permissions as on any file system. A mounter other than root needs "user_allow_other" in /etc/fuse.conf (else ALLOW_OTHER_DENIED). */
  allowOther?: boolean;
  /**
   * Case-insensitive, case-preserving names, as Windows users expect: `Foo.txt` and `foo.txt` are one entry, spelt the
   * way it was created (or the way the folder spells it); a rename to another case changes the spelling. Applies to the
   * mount and to every path the API takes. ASCII letters are folded (names the folder holds follow the folder's own
   * rules on Windows). Default: true on Windows, false elsewhere. Needs the fuse_hl backend: the Linux kernel caches
   * names by their exact spelling, so fuse_ll refuses it (INVALID_ARGUMENT).
   */
  caseInsensitive?: boolean;
  /**
   * How the fuse_ll backend serves opens. "cached" (the default): the kernel opens files and directories without asking
   * the daemon and keeps their pages and listings until the daemon says they changed (layer switches, API writes, edits
   * in the folder); reads and writes come by node. "open": one OPEN (or OPENDIR) and one RELEASE round trip per open
   * file, as before issue #18 (for comparison, and a fallback should the cached mode misbehave somewhere).
   * "passthrough": like "open", and a read-only open of a file whose content is still the folder's is handed to the
   * kernel as the folder's own file (FUSE passthrough, Linux 6.9+, needs CAP_SYS_ADMIN), so its reads never reach the
   * daemon; where the kernel or the privileges do not allow it, the mount behaves as "open" and `kernelTransport().passthrough`
   * is false. Default: $SHADOWFS_IO, else "cached". fuse_hl always opens.
   */
  io?: IoMode;
  /**
   * fuse_ll: take the kernel's requests through FUSE over io_uring (Linux 6.14+) instead of reading them from /dev/fuse,
   * when the kernel offers it, which it does only while root has turned it on system-wide
   * (/sys/module/fuse/parameters/enable_uring = Y; shadowfs never changes that). Any failure to set the rings up falls
   * back to /dev/fuse; `Shadow.kernelTransport().ioUring` says which the mount got. Default: false when $SHADOWFS_IO_URING is
   * "0", else true. fuse_hl ignores it.
   */
  ioUring?: boolean;
  /**
   * Refuse, with EPERM ("Operation not permitted"), every write a layer would make to git's control files: the name
   * `.git` itself at any depth (so no new or replaced repository), and beneath a `.git` its `config`,
   * `config.worktree`, `commondir` and `hooks` (outside refs, logs and objects), plus the folder's own hooks directory
   * when core.hooksPath puts it inside the folder. git run in the mount outside any confinement (your shell, a prompt
   * that runs `git status`, an editor) obeys those files, so an agent's `core.fsmonitor` or hook there would run as
   * you. The agent's git still commits, branches and stashes; `git config --local`, new hooks and `git init` fail.
   * Default true; false lets a layer write them (then run git in the mount only inside `shadowfs shell`).
   */
  protectGit?: boolean;
}

export type IoMode = 'cached' | 'open' | 'passthrough';
/** The backend a mount uses: the one asked for, else $SHADOWFS_BACKEND, else the first built. */
export function pickBackend(requested: string | undefined, built: readonly string[]): string {
  const env = process.env.SHADOWFS_BACKEND;
  const name = requested ?? (env === undefined || env === '' ? 'default' : env);
  if (name === 'default' && built.length > 0) return built[0];
  if (!built.includes(name)) {
    const from = requested === undefined ? ' (from $SHADOWFS_BACKEND)' : '';
    throw new ShadowError(
      'UNKNOWN_BACKEND',
      `this build has no backend ${JSON.stringify(name)}${from}; it has: ${built.join(', ') || 'none'}`,
    );
  }
  return name;
}

/** Mounts a shadow of `folder`. */
export async function mount(folder: string, options: MountOptions = {}): Promise<Shadow> {
  // The folder by its real path from here on (the native module calls it "lower", the overlay's word).
  const realFolder = checkFolder(folder);
  platform.checkMountable();
  if (options.allowOther) checkAllowOther();
  // Long kernel caching is safe: every change behind the kernel's back (API writes, switches,
  // edits in the folder seen by inotify) is invalidated explicitly; the timeout only bounds how
  // late an edit in the folder shows where no inotify watch could be set.
  const timeout = options.cacheTimeout ?? 60;
  if (typeof timeout !== 'number' || !(timeout >= 0))
    throw new ShadowError('INVALID_ARGUMENT', `cacheTimeout must be a number of seconds >= 0, got ${timeout}`);
  const layer = options.layer === undefined ? 'default' : options.layer === null ? null : checkAgent(options.layer);
  const spillThreshold = options.spillThreshold ?? 64 * 1024 * 1024;
  if (!Number.isSafeInteger(spillThreshold) || spillThreshold < 0) {
    throw new ShadowError('INVALID_ARGUMENT', `spillThreshold must be a whole number of bytes >= 0, got ${spillThreshold}`);
  }
  const spillDir = path.resolve(options.spillDir ?? os.tmpdir());
  if (isInside(spillDir, realFolder)) {
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `the spill directory ${spillDir} is inside the folder being shadowed; the folder is never written, pick another`,
    );
  }
  if (options.memoryBudget !== undefined) parseSize(options.memoryBudget, 'memoryBudget'); // checked before anything is touched
  const caseInsensitive = options.caseInsensitive ?? platform.caseInsensitiveNames;
  if (typeof caseInsensitive !== 'boolean')
    throw new ShadowError('INVALID_ARGUMENT', `caseInsensitive must be true or false, got ${String(caseInsensitive)}`);
  const lib = addon();
  if (options.memoryBudget !== undefined) setMemoryBudget(options.memoryBudget);
  applyMemoryBudget();
  const backend = pickBackend(options.backend, lib.backends);
  if (caseInsensitive && backend !== 'fuse_hl' && backend !== 'winfsp') {
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `caseInsensitive needs the fuse_hl or winfsp backend (this mount would use ${backend}: the Linux kernel caches names by their exact spelling)`,
    );
  }
  const io = options.io ?? (process.env.SHADOWFS_IO || 'cached');
  if (io !== 'cached' && io !== 'open' && io !== 'passthrough')
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `io must be "cached", "open" or "passthrough" (from the option or $SHADOWFS_IO), got ${JSON.stringify(io)}`,
    );
  const protectGit = options.protectGit ?? true;
  if (typeof protectGit !== 'boolean')
    throw new ShadowError('INVALID_ARGUMENT', `protectGit must be true or false, got ${String(protectGit)}`);
  const ioUring = options.ioUring ?? process.env.SHADOWFS_IO_URING !== '0';
  if (typeof ioUring !== 'boolean') throw new ShadowError('INVALID_ARGUMENT', `ioUring must be true or false, got ${String(ioUring)}`);
  const volume = volumeFor(backend, options.mountPoint, options.volume);
  const protectedPaths = protectGit ? folderGitGlobs(realFolder) : [];
  const protectedGitDirs = protectGit ? folderGitDirs(realFolder) : [];
  const { mountPoint, created } = prepareMountPoint(options.mountPoint, realFolder);
  const native = new lib.Shadow(backend, realFolder, mountPoint, {
    ...(volume === 'network' ? { volumePrefix: networkPrefix(path.basename(realFolder) || 'root') } : {}),
    openRoundTrips: io !== 'cached',
    passthrough: io === 'passthrough',
    ioUring,
    entryTimeout: timeout,
    attrTimeout: timeout,
    negativeTimeout: timeout,
    useEpoch: options.useEpoch ?? true,
    allowOther: options.allowOther === true,
    caseInsensitive,
    spillThreshold,
    spillDir,
    protectGit,
    protectedPaths,
    protectedGitDirs,
  });
  try {
    await native.mount();
  } catch (err) {
    if (created) {
      try {
        fs.rmdirSync(mountPoint);
      } catch {
        // leave it: not ours to clean if something appeared there
      }
    }
    throw fromNative(err, `cannot mount a shadow of ${realFolder} at ${mountPoint}`, ERRNOS.mount);
  }
  const shadow = new Shadow(native, realFolder, mountPoint, created, backend, io, volume, { protectGit, protectedPaths, caseInsensitive });
  if (layer !== null) {
    try {
      await shadow.createLayer(layer);
      await shadow.activate(layer);
    } catch (err) {
      await shadow.unmount({ lazy: true }).catch(() => undefined);
      throw err;
    }
  }
  return shadow;
}
