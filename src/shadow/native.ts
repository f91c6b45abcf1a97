// Typed facade over the raw addon. Arguments are checked in TypeScript before they reach C++.
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { platform } from '../platform';
import type { AuditRecord } from './audit';

export interface NativeMountOptions {
  entryTimeout?: number;
  attrTimeout?: number;
  negativeTimeout?: number;
  /** Use the kernel's epoch notification on layer switches when it takes it (default true). */
  useEpoch?: boolean;
  /** FUSE allow_other: users other than the mounter may use the mount. */
  allowOther?: boolean;
  /** Names match ignoring case, keeping it (Windows' behaviour); fuse_hl only (fuse_ll refuses it). */
  caseInsensitive?: boolean;
  /** fuse_ll: send the kernel an OPEN/OPENDIR/CREATE round trip per open (the "open" I/O mode) instead of letting it open without asking. */
  openRoundTrips?: boolean;
  /** fuse_ll, with openRoundTrips: read-only opens of the folder's files go straight to the folder's file (FUSE passthrough) where the kernel and privileges allow. */
  passthrough?: boolean;
  /** fuse_ll: take requests through FUSE over io_uring when the kernel offers it and enable_uring is on (default true). */
  ioUring?: boolean;
  /** Directory for spill files (unlinked temporary files); empty keeps everything in memory. */
  spillDir?: string;
  /** Files larger than this many bytes move to a spill file. */
  spillThreshold?: number;
  /** winfsp: a network volume with this prefix ("\shadowfs\name", one leading backslash), reachable as \\shadowfs\name; absent: a disk volume. Other backends ignore it. */
  volumePrefix?: string;
  /** Refuse every layer write to git's control files (native/core/write_guard.h; default true). */
  protectGit?: boolean;
  /** Anchored globs (mask syntax) no layer may write, each with everything beneath it. */
  protectedPaths?: string[];
  /** Relative paths of git directories not called `.git`: no link or special file may be made beneath them, as beneath a `.git`. */
  protectedGitDirs?: string[];
  debug?: boolean;
}

/** What the folder's file was when a layer took its content (copy-up) or replaced it. */
export interface ChangeBase {
  /** The folder file's inode number then. */
  ino: number;
  size: number;
  /** Modification and change times then, in nanoseconds since the epoch (decimal strings: exact). */
  mtimeNs: string;
  ctimeNs: string;
  /** 64-bit content hash (hex) of the bytes copied, or null when the layer replaced the file without reading it. */
  hash: string | null;
}

export interface NativeChange {
  path: string;
  kind: 'added' | 'modified' | 'deleted' | 'metadata';
  type: 'file' | 'directory' | 'symlink' | 'special';
  /** Files whose content the layer took from the folder: what it was then. */
  base?: ChangeBase;
  /**
   * Where in the folder the layer still reads this entry from, when not from its own path: a file or directory the
   * agent moved or renamed (for a directory, everything under it too), until the agent writes it.
   */
  origin?: string;
}

export interface LayerStats {
  /** Bytes the layer holds in memory (contents plus bookkeeping). */
  memoryBytes: number;
  /** Paths the layer holds (files, directories, deletions). */
  paths: number;
  /** Bytes of contents moved to spill files on disk. */
  spilledBytes: number;
}

/**
 * The raw addon object (native/addon/shadow_object.h and addon.cc). Layer names are checked in TypeScript first.
 * Every method that can wait on the overlay's locks, the folder or the kernel runs on the
 * shadow's own native worker thread and returns a Promise; jobs of one shadow run one at a
 * time, in the order they were called. Only the getters below are synchronous.
 */
// The single native jobs behind the agent file tools (work/files.ts writeText and editText):
// each is one Overlay::updateFile, so nothing else changes the file between what it looks at and
// what it writes.
/** What a caller saw of a file; a write or edit with it happens only if the file still is that. */
export interface FileExpectation {
  /** false: the file must not exist yet (create only); true: it must exist. */
  exists?: boolean;
  size?: number;
  /** As Layer.stat reports it. */
  mtimeMs?: number;
  /** contentHash of its bytes (what the results of writeText and editText carry). */
  hash?: string;
}

/** What the file is after a write (or, for a conflict, what it was found to be). */
export interface FileState {
  size: number;
  mtimeMs: number;
  mode: number;
  hash?: string;
}
export type NativeConflict = { status: 'conflict'; reason: string; exists: boolean } & Partial<FileState>;
export type NativeWriteResult = ({ status: 'written'; created: boolean } & FileState) | NativeConflict;
export type NativeEditResult =
  | ({ status: 'written'; replacements: number[] } & FileState)
  | NativeConflict
  | { status: 'no-match' | 'ambiguous' | 'binary' | 'not-utf8' | 'unchanged'; edit: number; count: number; lines: number[] }
  | { status: 'too-large'; size: number };

export interface NativeShadow {
  /** One job: a whole file with its mode (null: an existing file keeps its own, a new one gets 0644), if `expect` holds. */
  writeFile(
    layer: string,
    path: string,
    data: Buffer,
    mode: number | null,
    uid: number,
    gid: number,
    expect?: FileExpectation | null,
  ): Promise<NativeWriteResult>;
  /** One job: exact-text edits applied in order to a UTF-8 file of at most maxBytes, if `expect` holds. */
  editFile(
    layer: string,
    path: string,
    edits: Array<{ oldText: string; newText: string; replaceAll?: boolean }>,
    maxBytes: number,
    expect?: FileExpectation | null,
  ): Promise<NativeEditResult>;

  /** Whether the shared mount is mounted (synchronous, cheap). */
  readonly mounted: boolean;
  /**
   * Set by the owner: called on the JS thread when a mount ends without being asked to (its volume, driver or kernel
   * connection went away), with a sentence saying why and the view's id (null: the shared mount).
   */
  onGone?: (reason: string, view: number | null) => void;
  /** The layer the last activate() made active, or null (synchronous, cheap). */
  readonly active: string | null;
  /** Opens the folder and mounts at the mount point given to the constructor. */
  mount(): Promise<void>;
  /** Creates a layer; an existing one is kept as it is. */
  createLayer(name: string): Promise<void>;
  /** Rejects with code EEXIST when `to` exists, ENXIO when `from` does not. */
  cloneLayer(from: string, to: string): Promise<void>;
  dropLayer(name: string): Promise<void>;
  layers(): Promise<string[]>;
  /** `ms`: how long the switch itself took on the worker thread. */
  activate(name: string | null): Promise<{ paths: number; epoch: boolean; ms: number }>;
  /** `data` must not change until the Promise settles (the worker reads it in place). */
  write(layer: string, path: string, data: Buffer, mode: number, uid: number, gid: number): Promise<void>;
  remove(layer: string, path: string): Promise<void>;
  readFile(layer: string, path: string): Promise<Buffer>;
  /** At most `length` (<= 64 MiB) bytes at `offset` of a regular file, and the file's size: files of any size, a piece at a time. */
  readRange(layer: string, path: string, offset: number, length: number): Promise<{ data: Buffer; size: number }>;
  /** Where a regular file holds data ([offset, length] pairs, sorted); the rest reads as zeros (holes). */
  dataExtents(layer: string, path: string): Promise<{ size: number; extents: Array<[number, number]> }>;
  /** Writes `data` at `offset` into an existing regular file of the layer (a gap before it reads as zeros). */
  writeAt(layer: string, path: string, data: Buffer, offset: number): Promise<void>;
  /** Sets the size of a regular file of the layer (growing a spilled file leaves a hole). */
  truncate(layer: string, path: string, size: number): Promise<void>;
  reset(layer: string): Promise<number>;
  /** Gives `to` every change of `from` in place of its own, in one step; `from` is left empty. */
  moveLayer(from: string, to: string): Promise<number>;
  changes(layer: string): Promise<NativeChange[]>;
  /**
   * The folder paths are about to be changed on purpose (an apply): every layer's entries that
   * read one of them (or what is under or above one) from where an agent moved or renamed them
   * take their own copy first (native/core/origins.cc), and a move of them made before releaseMoved(hold) copies at
   * once. Resolves to each entry that did, and the hold.
   */
  keepMoved(paths: string[]): Promise<{ kept: Array<{ layer: string; path: string }>; hold: number }>;
  /** Ends what keepMoved's `hold` keeps doing: a move of those paths in any layer copying at once. */
  releaseMoved(hold: number): void;
  stats(layer: string): Promise<LayerStats>;
  /** Masked paths of the layer (native/core/mask.h): an empty list masks nothing. Mounts showing it forget their caches. */
  setMask(layer: string, globs: string[]): Promise<void>;
  /** Which of these relative paths no layer may write (the write guard, MountOptions.protectGit). */
  guarded(paths: string[], links?: boolean[]): boolean[];
  /** The layer's audit trail, whole (native/core/audit.h; queries are src/shadow/audit.ts's). */
  auditRead(layer: string): Promise<AuditRecord>;
  /** Makes `record` the layer's audit trail (a checkpoint restored). */
  auditLoad(layer: string, record: Pick<AuditRecord, 'entries' | 'dropped' | 'nextSeq'>): Promise<void>;
  /** The limits of every layer's audit trail, now and for layers made later. */
  setAuditLimits(maxEntries: number, maxBytes: number): Promise<void>;
  /** `volumePrefix`: winfsp, the view's own network volume prefix (absent: a disk volume). */
  openView(layer: string, mountPoint: string, volumePrefix?: string): Promise<number>;
  closeView(id: number, lazy: boolean): Promise<void>;
  /** `forGood`: the layers and the folder's descriptor go too (no remount after it). */
  unmount(lazy: boolean, forGood?: boolean): Promise<void>;
  /** Mounts the same overlay again (layers intact) after unmount() that was not for good. */
  remount(mountPoint: string): Promise<void>;
  /** File-system requests served so far, for idle detection (synchronous, cheap). */
  activity(): number;
  /**
   * Handles programs have open in the shared mount and its views (opens minus closes; synchronous,
   * cheap), so idle unmount and suspend can treat a shadow in use as busy: a number for the winfsp
   * backend (0 when nothing is mounted), null when a mounted backend does not count them (fuse_ll,
   * fuse_hl). Optional: native objects built before it lack it.
   */
  openHandles?(): number | null;
  /** The shared mount's requests by kind (fuse_ll counts 16 kinds: lookup, getattr, open, read, readdirplus, …; fuse_hl none). */
  requestCounts(): Record<string, number>;
  /**
   * What the shared mount's kernel connection agreed to (fuse_ll: noOpen, noOpendir, readdirplus, epoch, passthrough, ioUring;
   * fuse_hl: nothing). The addon's name for what Shadow.kernelTransport gives.
   */
  transport(): Record<string, boolean>;
  /**
   * Folder changes the shared mount's watcher reported after sequence number `since`
   * (synchronous, in memory), or null when its backend has no watcher. Sequence numbers start
   * again at each mount (`mount` counts them).
   */
  folderChanges(since: number): NativeFolderChanges | null;
  // One layer's tree as that layer shows it (pinned for the call; the shared mount is not switched).
  stat(layer: string, path: string): Promise<NativeStat>;
  readdir(layer: string, path: string): Promise<NativeDirEntry[]>;
  readlink(layer: string, path: string): Promise<string>;
  symlink(layer: string, target: string, path: string, uid: number, gid: number): Promise<void>;
  mkdir(layer: string, path: string, mode: number, uid: number, gid: number): Promise<void>;
  chmod(layer: string, path: string, mode: number): Promise<void>;
  /**
   * Drops the layer's own entry at path so the folder shows through (EXDEV under a deleted/opaque/moved directory;
   * with `through`, only under a moved one: a deleted or emptied directory above merges again, hiding the rest).
   */
  revert(layer: string, path: string, through?: boolean, stamp?: string): Promise<void>;
}

export interface NativeStat {
  type: NativeChange['type'];
  /** Permission bits (0o7777). */
  mode: number;
  size: number;
  mtimeMs: number;
  ino: number;
  /** Changes with every write, truncation, chmod or replacement of the object (inode, size, ctime in ns). */
  stamp: string;
}

export interface NativeDirEntry {
  name: string;
  type: NativeChange['type'];
}

export interface NativeFolderChanges {
  mount: number;
  seq: number;
  paths: string[];
  overflow: boolean;
}

interface Addon {
  /** Records the options only: nothing is opened or mounted until mount(). */
  Shadow: new (backend: string, lower: string, mountPoint: string, options: NativeMountOptions) => NativeShadow;
  backends: string[];
  /** The 64-bit content hash (16 hex digits) a layer records as a file's base. */
  contentHash(data: Buffer): string;
  /** Whether each path is masked by `globs` as a layer's mask hides it (native/core/mask.h). */
  maskHides(globs: string[], ignoreCase: boolean, paths: string[]): boolean[];
  /** Windows: WinFsp as the module found it (registry InstallDir, DLL loaded by full path); null elsewhere. */
  winfsp(): WinFspStatus | null;
  /** The process's budget for layer contents in memory (native/core/budget.h), for every shadow; negative: none. */
  setMemoryBudget(bytes: number): void;
  memoryBudget(): MemoryBudgetStats;
}

/** The process's memory budget for layer contents, and how much of it is in use (shared by all its shadows). */
export interface MemoryBudgetStats {
  /** The budget in bytes; -1: none. */
  limitBytes: number;
  /** Bytes of layer contents in memory now, all shadows and layers together. */
  inMemoryBytes: number;
  /** How many contents that is. */
  inMemoryContents: number;
  /** Contents the budget moved to spill files since the process started, and their sizes then. */
  spilledContents: number;
  spilledBytes: number;
}

export interface WinFspStatus {
  available: boolean;
  installDir: string;
  dll: string;
  /** Why it is not available, with what to install. */
  error: string;
  /** The DLL's file version ("2.0.23075.0"), "" when it carries none. */
  version: string;
  resolved: string[];
  missing: string[];
}

let cached: Addon | undefined;
let failure: ShadowError | undefined;

let loaded: Addon | undefined;
let loadedFrom: string | undefined;

/** The package's root (dist/src/shadow/native.js is three folders below it). */
const packageRoot = path.join(__dirname, '..', '..', '..');

/** Where the package keeps the prebuilt binaries for this system: prebuilds/<platform>-<arch> (scripts/pack-prebuilds.sh). */
export function prebuiltDir(): string {
  return path.join(packageRoot, 'prebuilds', `${platform.name}-${process.arch}`);
}

/**
 * Where the module may be, the ones present first (each group in this order), so that the first
 * is the one that loads when it can, and the launcher beside it (src/run/launcher.ts) is that
 * build's: a source build of the package's own first, build/Release (cmake-js on Linux, MSVC on
 * Windows; a git clone, or scripts/install.js's fallback), on Windows after build-win/Release
 * (the MinGW cross build, npm run build:win, where the MSI installs it), then the package's
 * prebuilt binary for this platform and architecture, prebuilds/<platform>-<arch>/ (npm pack puts
 * them there). Overridden by $SHADOWFS_NATIVE_MODULE.
 */
export function nativeModuleCandidates(): string[] {
  if (process.env.SHADOWFS_NATIVE_MODULE) return [process.env.SHADOWFS_NATIVE_MODULE];
  const native = path.join(packageRoot, 'build', 'Release', 'shadowfs.node');
  const cross = path.join(packageRoot, 'build-win', 'Release', 'shadowfs.node');
  const prebuilt = path.join(prebuiltDir(), 'shadowfs.node');
  const all = platform.name === 'win32' ? [cross, native, prebuilt] : [native, prebuilt];
  const present = all.filter((f) => fs.existsSync(f));
  return [...present, ...all.filter((f) => !present.includes(f))];
}

/** The file the module was loaded from, once nativeModule() has loaded it. */
export function nativeModuleFile(): string | undefined {
  return loadedFrom;
}

/** The platform-arch folders of prebuilds/ this package carries. */
function prebuiltTargets(): string[] {
  try {
    return fs.readdirSync(path.join(packageRoot, 'prebuilds')).sort();
  } catch {
    return [];
  }
}

/** What to do about a module that is there but does not load, from its loader's message. */
function loadAdvice(message: string): string {
  if (/libfuse3\.so/.test(message))
    return 'it needs the FUSE 3 library: install it (Debian/Ubuntu: apt-get install fuse3; Fedora: dnf install fuse3)';
  if (/GLIBC|GLIBCXX|CXXABI/.test(message))
    return 'it was built for newer C and C++ libraries than this system has; build it from source with "npm rebuild shadowfs --build-from-source" (needs cmake, a C++ compiler and libfuse3-dev), or "npm run build" in a clone';
  return 'build it from source with "npm rebuild shadowfs --build-from-source" (needs cmake, a C++ compiler and libfuse3-dev on Linux), or "npm run build" in a clone';
}

/**
 * The module itself, whether or not it can mount (on Windows it loads without WinFsp). Throws
 * NATIVE_UNAVAILABLE when it is not built for this system or does not load.
 */
export function nativeModule(): Addon {
  if (loaded) return loaded;
  const candidates = nativeModuleCandidates();
  const present = candidates.filter((f) => fs.existsSync(f));
  let lastErr: unknown;
  for (const file of present) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      loaded = require(file) as Addon;
      loadedFrom = file;
      return loaded;
    } catch (err) {
      lastErr = err; // e.g. the Linux build in build/Release, seen from Windows
    }
  }
  const target = `${platform.name}-${process.arch}`;
  const prebuilt = prebuiltTargets();
  const message = (lastErr as Error | undefined)?.message ?? '';
  throw new ShadowError(
    'NATIVE_UNAVAILABLE',
    present.length
      ? `the native module ${present.join(' or ')} does not load on this system (${message}); ${loadAdvice(message)}`
      : `the native module is not there for ${target}: ${
          prebuilt.length ? `this package carries prebuilt ones for ${prebuilt.join(' and ')} only` : 'this copy carries no prebuilt ones'
        }, and none was built from source (${candidates[0]} is missing); build it with "npm rebuild shadowfs --build-from-source" where shadowfs is installed, or "npm run build" in a clone (needs cmake and a C++ compiler, and on Linux pkg-config and libfuse3-dev)`,
    { cause: lastErr },
  );
}

/**
 * The addon, ready to mount, loaded on first use. Throws NATIVE_UNAVAILABLE when the module is
 * not built for this system or does not load, and WINFSP_MISSING on Windows when the module
 * finds no usable WinFsp; the daemon keeps answering everything that does not mount (see
 * nativeStatus()).
 */
export function addon(): Addon {
  if (cached) return cached;
  if (failure) throw failure;
  let m: Addon;
  try {
    m = nativeModule();
  } catch (err) {
    failure = err as ShadowError;
    throw failure;
  }
  const w = platform.name === 'win32' && typeof m.winfsp === 'function' ? m.winfsp() : null;
  if (w && !w.available) {
    failure = new ShadowError(
      'WINFSP_MISSING',
      `${w.error || 'WinFsp cannot be used'}; shadowfs mounts through WinFsp 2.x on Windows (https://winfsp.dev/rel/, or "winget install WinFsp.WinFsp")`,
    );
    throw failure;
  }
  cached = m;
  return cached;
}

/** Whether the addon loads, and if not, the coded reason (for version/status and doctor). */
export function nativeStatus(): { available: boolean; code?: 'NATIVE_UNAVAILABLE' | 'WINFSP_MISSING'; message?: string } {
  try {
    addon();
    return { available: true };
  } catch (err) {
    const e = err as ShadowError;
    return { available: false, code: e.code === 'WINFSP_MISSING' ? 'WINFSP_MISSING' : 'NATIVE_UNAVAILABLE', message: e.message };
  }
}
