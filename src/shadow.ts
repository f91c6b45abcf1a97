// The shadow mount: mount(lowerDir) returns a Shadow whose mountPoint shows lowerDir live, and
// whose writes land in an in-memory layer. Checks every input before the native module sees it.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { fromNative, ShadowError } from './errors';
import { addon, type ChangeBase, LayerStats, NativeChange, NativeDirEntry, NativeFolderChanges, NativeShadow, NativeStat } from './native';
import * as os from 'os';
import { constants as osConstants } from 'os';
import { normalizeRelPath } from './paths';
import { checkAllowOther, isInside, platform } from './platform';
import { JobOptions, LayerScheduler, SchedulerStats } from './scheduler';

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
  /** Where those temporary files go (default: the OS temporary directory). */
  spillDir?: string;
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
   * daemon; where the kernel or the privileges do not allow it, the mount behaves as "open" and `transport().passthrough`
   * is false. Default: $SHADOWFS_IO, else "cached". fuse_hl always opens.
   */
  io?: IoMode;
  /**
   * fuse_ll: take the kernel's requests through FUSE over io_uring (Linux 6.14+) instead of reading them from /dev/fuse,
   * when the kernel offers it, which it does only while root has turned it on system-wide
   * (/sys/module/fuse/parameters/enable_uring = Y; shadowfs never changes that). Any failure to set the rings up falls
   * back to /dev/fuse; `Shadow.transport().ioUring` says which the mount got. Default: false when $SHADOWFS_IO_URING is
   * "0", else true. fuse_hl ignores it.
   */
  ioUring?: boolean;
}

export type IoMode = 'cached' | 'open' | 'passthrough';

export type WindowsVolume = 'network' | 'disk';

/** A mount of the shadow that ended without being asked to (see Shadow.onGone). */
export interface GoneEvent {
  /** A sentence saying why. */
  reason: string;
  /** The view's mount point when a view went; undefined when the shared mount went. */
  view?: string;
}

/**
 * The network volume prefix for a winfsp mount named `name` ("\shadowfs\<name>-<random>", as WinFsp's VolumeParams.Prefix
 * takes it: one leading backslash): unique per mount, so that no two volumes of this machine claim one UNC name.
 */
function networkPrefix(name: string): string {
  const clean = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 48) || 'shadow';
  return `\\shadowfs\\${clean}-${crypto.randomBytes(3).toString('hex')}`;
}

/**
 * The volume form of a winfsp mount at the mount point asked for (see MountOptions.volume; none asked: a drive letter);
 * undefined for other backends and OSes. Decided before the mount point is prepared, so that a refusal touches nothing.
 */
function volumeFor(backend: string, mountPoint: string | undefined, requested: WindowsVolume | undefined): WindowsVolume | undefined {
  if (backend !== 'winfsp') return undefined; // the winfsp backend exists on Windows only
  if (requested !== undefined && requested !== 'network' && requested !== 'disk')
    throw new ShadowError('INVALID_ARGUMENT', `volume must be "network" or "disk", got ${JSON.stringify(requested)}`);
  const drive = mountPoint === undefined || /^[A-Za-z]:\\?$/.test(mountPoint);
  const form = requested ?? (drive ? 'network' : 'disk');
  if (form === 'network' && !drive)
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `a network volume goes on a drive letter (WinFsp cannot put one on a directory such as ${String(mountPoint)}); give a free drive letter, or volume "disk" (realpath then fails in the shadow)`,
    );
  return form;
}

export type { LayerStats };

export type Change = NativeChange;

/** The scheduler queue of jobs that need no layer active (no agent id has a NUL byte). */
const FOLDER_QUEUE = '\0folder';

function checkLower(lowerDir: string): string {
  if (typeof lowerDir !== 'string' || lowerDir === '') throw new ShadowError('LOWER_NOT_FOUND', 'no folder given to shadow');
  let real: string;
  try {
    real = fs.realpathSync(lowerDir);
  } catch (err) {
    throw new ShadowError('LOWER_NOT_FOUND', `the folder ${lowerDir} does not exist`, {
      errno: (err as NodeJS.ErrnoException).errno,
      cause: err,
    });
  }
  if (!fs.statSync(real).isDirectory()) throw new ShadowError('LOWER_NOT_DIRECTORY', `${lowerDir} is not a directory; shadow a folder`);
  return real;
}

/** Returns the real mount point path and whether we created it (then we remove it on unmount). */
function prepareMountPoint(requested: string | undefined, lower: string, name?: string): { mountPoint: string; created: boolean } {
  return platform.prepareMountPoint(requested, lower, name ?? (path.basename(lower) || 'root'));
}

const AGENT_MAX = 128;
const { EEXIST } = osConstants.errno;

function checkAgent(agentId: unknown): string {
  if (typeof agentId !== 'string' || agentId === '' || Buffer.byteLength(agentId) > AGENT_MAX || /[/\0]/.test(agentId)) {
    throw new ShadowError(
      'INVALID_AGENT',
      `agent id must be a non-empty string of at most ${AGENT_MAX} bytes without "/" or NUL, got ${JSON.stringify(agentId)}`,
    );
  }
  return agentId;
}

function toBuffer(data: string | Uint8Array): Buffer {
  if (typeof data === 'string') return Buffer.from(data);
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new ShadowError('INVALID_ARGUMENT', 'data must be a string or a Uint8Array');
}

/** The most bytes one Layer.readRange returns (the native module's cap). */
export const MAX_RANGE_BYTES = 64 * 1024 * 1024;

function checkByteCount(what: string, n: number, max: number): void {
  if (!Number.isSafeInteger(n) || n < 0 || n > max)
    throw new ShadowError('INVALID_ARGUMENT', `${what} must be a whole number of bytes from 0 to ${max}, got ${n}`);
}

function checkMode(mode: number): number {
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)
    throw new ShadowError('INVALID_ARGUMENT', `mode must be an integer permission mask such as 0o644, got ${mode}`);
  return mode;
}

/**
 * One agent's layer of changes on a shadow, whether or not it is active. A Layer is a handle:
 * getting one never creates anything. The layer itself is created by its first write() or
 * remove() (or by shadow.createLayer()); the read-only queries (readFile, changes, stats) and
 * reset() of an agent that has no layer fail with UNKNOWN_AGENT.
 */
export class Layer {
  /** @internal use shadow.layer() */
  constructor(
    private readonly shadow: Shadow,
    readonly agentId: string,
  ) {}

  /**
   * Writes a whole file into this layer (parents are created as needed, and the layer too).
   * A Uint8Array is read in place when the write runs: do not change it until this settles.
   */
  async write(relPath: string, data: string | Uint8Array, options: { mode?: number } = {}): Promise<void> {
    const p = normalizeRelPath(relPath);
    const buf = toBuffer(data);
    const mode = checkMode(options.mode ?? 0o644);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`write ${p}`, (n) => n.write(this.agentId, p, buf, mode, process.getuid?.() ?? 0, process.getgid?.() ?? 0));
  }

  /** Removes a file or a whole directory from what this layer shows (the folder is untouched; the layer is created if needed). */
  async remove(relPath: string): Promise<void> {
    const p = normalizeRelPath(relPath);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`remove ${p}`, (n) => n.remove(this.agentId, p));
  }

  /** Reads a whole file as this layer shows it, active or not. */
  async readFile(relPath: string): Promise<Buffer> {
    const p = normalizeRelPath(relPath);
    return this.shadow.call(`read ${p} in the layer of ${this.agentId}`, (n) => n.readFile(this.agentId, p));
  }

  /**
   * At most `length` bytes at `offset` of a file as this layer shows it (fewer at its end, none
   * past it), and the file's size: any file, however large, read a piece at a time.
   */
  async readRange(relPath: string, offset: number, length: number): Promise<{ data: Buffer; size: number }> {
    const p = normalizeRelPath(relPath);
    checkByteCount('offset', offset, Number.MAX_SAFE_INTEGER);
    checkByteCount('length', length, MAX_RANGE_BYTES);
    return this.shadow.call(`read ${p} in the layer of ${this.agentId}`, (n) => n.readRange(this.agentId, p, offset, length));
  }

  /**
   * Where a file as this layer shows it holds data: sorted, disjoint [offset, length] pairs; the
   * rest of its `size` bytes are holes (zeros). Where the system cannot tell, one pair covers it all.
   */
  async dataExtents(relPath: string): Promise<{ size: number; extents: Array<[number, number]> }> {
    const p = normalizeRelPath(relPath);
    return this.shadow.call(`read ${p} in the layer of ${this.agentId}`, (n) => n.dataExtents(this.agentId, p));
  }

  /** Writes `data` at `offset` into a file this layer already shows (a gap before it reads as zeros). */
  async writeAt(relPath: string, data: Uint8Array, offset: number): Promise<void> {
    const p = normalizeRelPath(relPath);
    checkByteCount('offset', offset, Number.MAX_SAFE_INTEGER);
    const buf = toBuffer(data);
    await this.shadow.call(`write ${p}`, (n) => n.writeAt(this.agentId, p, buf, offset));
  }

  /** Sets the size of a file this layer already shows (growing a large one leaves a hole, not zeros in memory). */
  async truncate(relPath: string, size: number): Promise<void> {
    const p = normalizeRelPath(relPath);
    checkByteCount('size', size, Number.MAX_SAFE_INTEGER);
    await this.shadow.call(`truncate ${p}`, (n) => n.truncate(this.agentId, p, size));
  }

  /** Drops every change of this layer. */
  async reset(): Promise<void> {
    await this.shadow.call(`reset the layer of ${this.agentId}`, (n) => n.reset(this.agentId));
    this.shadow.setLayerSince(this.agentId, Date.now());
    this.shadow.clearBaseOverrides(this.agentId);
  }

  /** What this layer changed, relative to the folder, in path order. */
  async changes(): Promise<Change[]> {
    return this.shadow.call(`list the changes of ${this.agentId}`, (n) => n.changes(this.agentId));
  }

  /** Memory and paths this layer holds. */
  async stats(): Promise<LayerStats> {
    return this.shadow.call(`read the stats of ${this.agentId}`, (n) => n.stats(this.agentId));
  }

  // The tree as this layer shows it, active or not, without switching the shared mount.

  /** Type, permission bits, size and mtime of a path as this layer shows it (symlinks not followed). */
  async stat(relPath: string): Promise<NativeStat> {
    const p = normalizeRelPath(relPath, { allowRoot: true });
    return this.shadow.call(`stat ${p || '.'} in the layer of ${this.agentId}`, (n) => n.stat(this.agentId, p));
  }

  /** A directory's entries as this layer shows it (unsorted; no "." or ".."). */
  async readdir(relPath: string): Promise<NativeDirEntry[]> {
    const p = normalizeRelPath(relPath, { allowRoot: true });
    return this.shadow.call(`list ${p || '.'} in the layer of ${this.agentId}`, (n) => n.readdir(this.agentId, p));
  }

  /** A symlink's target as this layer shows it. */
  async readlink(relPath: string): Promise<string> {
    const p = normalizeRelPath(relPath);
    return this.shadow.call(`read the link ${p} in the layer of ${this.agentId}`, (n) => n.readlink(this.agentId, p));
  }

  /** Makes a symlink in this layer (the layer is created if needed). */
  async symlink(target: string, relPath: string): Promise<void> {
    const p = normalizeRelPath(relPath);
    if (typeof target !== 'string' || target === '' || target.includes('\0'))
      throw new ShadowError('INVALID_ARGUMENT', 'a symlink target must be a non-empty string without NUL');
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`make the link ${p}`, (n) =>
      n.symlink(this.agentId, target, p, process.getuid?.() ?? 0, process.getgid?.() ?? 0),
    );
  }

  /** Makes a directory in this layer (the layer is created if needed). */
  async mkdir(relPath: string, options: { mode?: number } = {}): Promise<void> {
    const p = normalizeRelPath(relPath);
    const mode = checkMode(options.mode ?? 0o755);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`make the directory ${p}`, (n) =>
      n.mkdir(this.agentId, p, mode, process.getuid?.() ?? 0, process.getgid?.() ?? 0),
    );
  }

  /**
   * Drops this layer's own entry at a path (and everything under it), so the folder shows
   * through there again; used after apply wrote the folder. Refused (EXDEV → CONFLICT) under a
   * directory the layer deleted, replaced or moved: only that directory as a whole can go back.
   */
  async revert(relPath: string): Promise<void> {
    const p = normalizeRelPath(relPath);
    await this.shadow.call(`give ${p} back to the folder`, (n) => n.revert(this.agentId, p));
  }

  /** Changes a path's permission bits in this layer (the layer is created if needed). */
  async chmod(relPath: string, mode: number): Promise<void> {
    const p = normalizeRelPath(relPath);
    checkMode(mode);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`change the mode of ${p}`, (n) => n.chmod(this.agentId, p, mode));
  }
}

/** A mount point on which one agent's layer is always active. */
export class View {
  /** @internal use shadow.openView() */
  constructor(
    private readonly shadow: Shadow,
    private readonly id: number,
    readonly agentId: string,
    readonly mountPoint: string,
    private readonly createdMountPoint: boolean,
  ) {}

  private closed = false;

  get open(): boolean {
    return !this.closed && this.shadow.mounted;
  }

  /** @internal whether closing removes the mount point (it was made for this view) */
  get ownsMountPoint(): boolean {
    return this.createdMountPoint;
  }

  /** @internal */
  get viewId(): number {
    return this.id;
  }

  /** @internal its mount ended on its own (Shadow.onGone): it is closed, and the backend is let go. */
  markGone(): void {
    this.closed = true;
  }

  async close(options: { lazy?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    if (this.shadow.mounted) {
      await this.shadow.call(`close the view at ${this.mountPoint}`, (n) => n.closeView(this.id, options.lazy === true), this.mountPoint);
    }
    this.closed = true;
    this.shadow.views.delete(this);
    if (this.createdMountPoint) {
      try {
        fs.rmdirSync(this.mountPoint);
      } catch {
        // still in use after a lazy unmount: leave it
      }
    }
  }
}

export class Shadow {
  /** Where the shared, time-sliced mount is. */
  readonly mountPoint: string;
  /** The real path of the folder it shadows. */
  readonly lower: string;
  /** The mount backend serving it (and its views). */
  readonly backend: string;
  /** How fuse_ll serves opens (MountOptions.io); fuse_hl always answers "open". */
  readonly io: IoMode;
  private native: NativeShadow | undefined;
  private readonly createdMountPoint: boolean;
  /** Layers known to exist: created, cloned or activated through this object (the only way to make one). */
  private readonly known = new Set<string>();
  private readonly since = new Map<string, number>();
  private readonly overrides = new Map<string, Map<string, { base: ChangeBase; blob?: string }>>();
  /** @internal */
  readonly views = new Set<View>();
  // Jobs activate their layer themselves (see withLayer), so a scratch layer can stand in.
  private readonly scheduler = new LayerScheduler(async () => undefined);
  private readonly goneListeners = new Set<(e: GoneEvent) => void>();
  private goneReason: string | undefined;
  /** Windows, winfsp: the shared mount's volume form (MountOptions.volume); undefined elsewhere. */
  readonly volume: WindowsVolume | undefined;

  /** @internal use mount() */
  constructor(
    native: NativeShadow,
    lower: string,
    mountPoint: string,
    createdMountPoint: boolean,
    backend: string,
    io: IoMode = 'open',
    volume?: WindowsVolume,
  ) {
    this.native = native;
    this.lower = lower;
    this.backend = backend;
    this.io = backend === 'fuse_ll' ? io : 'open';
    this.mountPoint = mountPoint;
    this.createdMountPoint = createdMountPoint;
    this.volume = volume;
    // The addon calls this on the JS thread when a mount ends on its own (the native object
    // holds it as a property: a cycle within the JS heap, which the GC collects).
    native.onGone = (reason, view) => this.gone(reason, view);
  }

  /**
   * Calls `listener` whenever a mount of this shadow ends without being asked to: its WinFsp dispatcher stopped (the
   * volume or the driver went away), or its kernel connection ended. The shared mount is then `suspended` (its layers
   * are kept; resume() mounts it again); a view is closed. Returns a function that removes the listener.
   */
  onGone(listener: (e: GoneEvent) => void): () => void {
    this.goneListeners.add(listener);
    return () => this.goneListeners.delete(listener);
  }

  /** Why the shared mount ended on its own, until resume() mounts it again; undefined otherwise. */
  get lost(): string | undefined {
    return this.native !== undefined && !this.native.mounted ? this.goneReason : undefined;
  }

  private gone(reason: string, viewId: number | null): void {
    const native = this.native;
    if (!native) return; // unmounted for good meanwhile
    let event: GoneEvent;
    if (viewId === null) {
      this.goneReason = reason;
      event = { reason };
    } else {
      const v = [...this.views].find((x) => x.viewId === viewId);
      if (!v) return;
      v.markGone();
      this.views.delete(v);
      // Lets the backend go (nothing is mounted any more: a lazy close cannot be refused).
      native.closeView(viewId, true).catch(() => undefined);
      event = { reason, view: v.mountPoint };
    }
    for (const l of this.goneListeners) {
      try {
        l(event);
      } catch {
        // a listener's own failure is its own
      }
    }
  }

  get mounted(): boolean {
    return this.native?.mounted ?? false;
  }

  /** @internal whether unmounting removes the mount point (it was made for this shadow) */
  get ownsMountPoint(): boolean {
    return this.createdMountPoint;
  }

  /** The agent whose layer the shared mount shows, or null (the folder exactly, read-only). */
  get active(): string | null {
    return this.native?.active ?? null;
  }

  /** @internal runs a native call (a Promise settled off the JS thread), mapping its errors to ShadowErrors. */
  async call<T>(what: string, fn: (n: NativeShadow) => Promise<T>, mountPoint = this.mountPoint): Promise<T> {
    if (!this.native || !this.native.mounted)
      throw new ShadowError('NOT_MOUNTED', `the shadow at ${this.mountPoint} is not mounted any more`);
    try {
      return await fn(this.native);
    } catch (err) {
      if ((err as { code?: string }).code === 'EBUSY') {
        throw new ShadowError(
          'MOUNT_BUSY',
          `${mountPoint} is in use (a shell or program has it open; see "fuser -vm ${mountPoint}"); close them, or unmount lazily with { lazy: true } / --lazy`,
          { cause: err },
        );
      }
      throw fromNative(err, what);
    }
  }

  /**
   * A handle on `agentId`'s layer. Creates nothing: the layer comes into being with its first
   * write() or remove(), or with createLayer(); until then its queries fail with UNKNOWN_AGENT.
   */
  layer(agentId: string): Layer {
    return new Layer(this, checkAgent(agentId));
  }

  /** Creates `agentId`'s layer (empty) if it does not exist yet, and returns it. */
  async createLayer(agentId: string): Promise<Layer> {
    const id = checkAgent(agentId);
    await this.ensureLayer(id);
    return new Layer(this, id);
  }

  /** @internal creates the layer unless this object knows it exists. */
  async ensureLayer(id: string): Promise<void> {
    if (this.known.has(id)) return;
    await this.call(`create the layer of ${id}`, (n) => n.createLayer(id));
    this.known.add(id);
    if (!this.since.has(id)) this.since.set(id, Date.now());
  }

  /**
   * @internal When the agent's layer started (created, reset, or the start recorded in the
   * checkpoint it was restored from), in ms since the epoch; undefined when unknown. Apply uses
   * it where the layer recorded no base: a folder file changed after it is one the agent never saw.
   */
  layerSince(id: string): number | undefined {
    return this.since.get(id);
  }

  /**
   * @internal Base records carried over from the checkpoint a layer was restored from (the
   * layer's own records then name the folder file at restore time, not the one the agent
   * started from), with the checkpoint blob of that base's content when it was kept.
   */
  baseOverride(agent: string, rel: string): ChangeBase | undefined {
    return this.overrides.get(agent)?.get(rel)?.base;
  }

  /** @internal see baseOverride */
  baseBlob(agent: string, rel: string): string | undefined {
    return this.overrides.get(agent)?.get(rel)?.blob;
  }

  /** @internal see baseOverride */
  baseOverrides(agent: string): Map<string, { base: ChangeBase; blob?: string }> {
    return this.overrides.get(agent) ?? new Map();
  }

  /** @internal see baseOverride */
  setBaseOverride(agent: string, rel: string, base: ChangeBase, blob?: string): void {
    let m = this.overrides.get(agent);
    if (!m) this.overrides.set(agent, (m = new Map()));
    m.set(rel, blob === undefined ? { base } : { base, blob });
  }

  /** @internal see baseOverride */
  clearBaseOverrides(agent: string): void {
    this.overrides.delete(agent);
  }

  /** @internal see layerSince */
  setLayerSince(id: string, ms: number | undefined): void {
    if (ms === undefined) this.since.delete(id);
    else this.since.set(id, ms);
  }

  /** Makes `to` a copy of `from`'s layer (later changes to either stay apart). LAYER_EXISTS if `to` has a layer. */
  async cloneLayer(from: string, to: string): Promise<Layer> {
    const a = checkAgent(from);
    const b = checkAgent(to);
    try {
      await this.call(`copy the layer of ${a} to ${b}`, (n) => n.cloneLayer(a, b));
    } catch (err) {
      if (err instanceof ShadowError && err.code === 'INTERNAL' && err.errno === EEXIST) {
        throw new ShadowError(
          'LAYER_EXISTS',
          `cannot copy the layer of ${a} to ${b}: ${b} has a layer already; drop it first or pick another id`,
          {
            errno: err.errno,
            cause: err,
          },
        );
      }
      throw err;
    }
    this.known.add(b);
    this.setLayerSince(b, this.since.get(a));
    return new Layer(this, b);
  }

  /** Agent ids that have a layer. */
  async agents(): Promise<string[]> {
    return this.call('list layers', (n) => n.layers());
  }

  /** Drops an agent's layer and all its changes. Refused (LAYER_BUSY) while it is active or has a view. */
  async dropLayer(agentId: string): Promise<void> {
    const id = checkAgent(agentId);
    try {
      await this.call(`drop the layer of ${id}`, (n) => n.dropLayer(id));
    } catch (err) {
      if (err instanceof ShadowError && err.code === 'MOUNT_BUSY') {
        throw new ShadowError(
          'LAYER_BUSY',
          `the layer of ${id} is active or has a view open; activate another layer or close its view first`,
          { cause: err },
        );
      }
      throw err;
    } finally {
      this.known.delete(id);
      this.since.delete(id);
      this.overrides.delete(id);
    }
  }

  /**
   * Makes `agentId`'s layer the one the shared mount shows (null: the folder exactly). Waits for
   * file-system calls in flight; when it returns, no program sees the previous layer any more.
   * `ms` is the time the switch itself took (on the native worker thread).
   */
  async activate(agentId: string | null): Promise<{ paths: number; epoch: boolean; ms: number }> {
    const id = agentId === null ? null : checkAgent(agentId);
    const r = await this.call(`activate ${id ?? 'no layer'}`, (n) => n.activate(id));
    if (id !== null) this.known.add(id);
    return r;
  }

  private activeLayer(): Layer {
    if (!this.native || !this.native.mounted)
      throw new ShadowError('NOT_MOUNTED', `the shadow at ${this.mountPoint} is not mounted any more`);
    const a = this.native.active;
    if (a === null)
      throw new ShadowError('NO_ACTIVE_LAYER', 'no layer is active on this shadow; activate one with shadow.activate(agentId)');
    return new Layer(this, a);
  }

  /** Writes a whole file into the active layer (parents are created as needed). */
  async write(relPath: string, data: string | Uint8Array, options: { mode?: number } = {}): Promise<void> {
    return this.activeLayer().write(relPath, data, options);
  }

  /** Removes a file or a whole directory from the active layer's view (the folder itself is untouched). */
  async remove(relPath: string): Promise<void> {
    return this.activeLayer().remove(relPath);
  }

  /** Drops every change of the active layer. */
  async reset(): Promise<void> {
    return this.activeLayer().reset();
  }

  /** What the active layer changed, relative to the folder, in path order. */
  async changes(): Promise<Change[]> {
    return this.activeLayer().changes();
  }

  /** Memory per layer, and the time-slicing queue. */
  async stats(): Promise<{ layers: Record<string, LayerStats>; scheduler: SchedulerStats }> {
    const scheduler = this.scheduler.snapshot(); // as it is when asked
    if (scheduler.agents[FOLDER_QUEUE]) {
      scheduler.agents['(folder)'] = scheduler.agents[FOLDER_QUEUE];
      delete scheduler.agents[FOLDER_QUEUE];
    }
    if (scheduler.running === FOLDER_QUEUE) scheduler.running = '(folder)';
    const layers: Record<string, LayerStats> = {};
    const agents = await this.agents();
    const all = await Promise.all(
      agents.map((a) => this.call(`read the stats of ${a}`, (n) => n.stats(a)).catch((err: unknown) => ({ err }))),
    );
    // A layer dropped between the two questions is left out.
    agents.forEach((a, i) => {
      if (!('err' in all[i])) layers[a] = all[i] as LayerStats;
    });
    return { layers, scheduler };
  }

  /**
   * Runs `job` while `agentId`'s layer is active on the shared mount. Jobs of different agents
   * never overlap; agents are served round robin. `job` gets the mount point and an AbortSignal
   * that fires on timeout or cancellation (the shadow is released at once either way).
   */
  withLayer<T>(
    agentId: string,
    job: (dir: string, signal: AbortSignal) => Promise<T>,
    options: JobOptions & {
      /** Activate this layer instead of the agent's own (a scratch copy), still queued as the agent. */ layer?: string;
    } = {},
  ): Promise<T> {
    let id: string;
    let target: string;
    try {
      id = checkAgent(agentId);
      target = options.layer === undefined ? id : checkAgent(options.layer);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.scheduler.run(
      id,
      async (signal) => {
        if (this.active !== target) {
          await this.ensureLayer(target);
          await this.activate(target);
        }
        return job(this.mountPoint, signal);
      },
      options,
    );
  }

  /**
   * Runs `job` while no layer is active: the shared mount shows the folder itself, read-only
   * (what the diagnostics service checks a baseline on). Queued with the agents' jobs.
   */
  withFolder<T>(job: (dir: string, signal: AbortSignal) => Promise<T>, options: JobOptions = {}): Promise<T> {
    return this.scheduler.run(
      FOLDER_QUEUE,
      async (signal) => {
        if (this.active !== null) await this.activate(null);
        return job(this.mountPoint, signal);
      },
      options,
    );
  }

  /** Mounts a second mount point that always shows `agentId`'s layer, for agents that must run at the same time as others. */
  async openView(agentId: string, options: { mountPoint?: string; volume?: WindowsVolume } = {}): Promise<View> {
    const id = checkAgent(agentId);
    await this.ensureLayer(id);
    const name = `${path.basename(this.lower) || 'root'}-${id}`;
    // A view is a WinFsp volume of its own, with its own network name when it is a network one.
    const prefix = volumeFor(this.backend, options.mountPoint, options.volume) === 'network' ? networkPrefix(name) : undefined;
    const { mountPoint, created } = prepareMountPoint(options.mountPoint, this.lower, name);
    let viewId: number;
    try {
      viewId = await this.call(`open a view of ${id}`, (n) => (prefix ? n.openView(id, mountPoint, prefix) : n.openView(id, mountPoint)));
    } catch (err) {
      if (created) {
        try {
          fs.rmdirSync(mountPoint);
        } catch {
          // leave it
        }
      }
      throw err;
    }
    const v = new View(this, viewId, id, mountPoint, created);
    this.views.add(v);
    return v;
  }

  /** File-system requests served so far (all mounts of this shadow), for idle detection. */
  activity(): number {
    return this.native?.activity() ?? 0;
  }

  /**
   * Handles programs hold open on the shared mount and its views (winfsp: opens not yet closed, an image section
   * counting as one); null where the backend does not count them (the FUSE backends, where a plain unmount is refused
   * with EBUSY instead), 0 while unmounted.
   */
  openHandles(): number | null {
    return this.native?.openHandles?.() ?? (this.native ? null : 0);
  }

  /**
   * The shared mount's FUSE requests by kind since it was mounted: on fuse_ll `lookup`, `getattr`, `setattr`, `open`,
   * `create`, `mknod`, `release`, `flush`, `read`, `write`, `opendir`, `readdir`, `readdirplus`, `releasedir`,
   * `getxattr`, `forget`, and `ring`: how many requests of any kind came through io_uring ring entries (0 when
   * `transport().ioUring` is false); empty on a backend that does not count them. For measuring round trips (tests,
   * benchmarks).
   */
  requestCounts(): Record<string, number> {
    return this.native?.requestCounts() ?? {};
  }

  /**
   * What the shared mount's kernel connection agreed to, by feature: fuse_ll reports noOpen/noOpendir (opens without a
   * round trip, MountOptions.io "cached" on a kernel that offers it), readdirplus, epoch (one notification invalidates
   * every name on a switch; known after the first switch), passthrough (MountOptions.io "passthrough", agreed and not refused since) and ioUring (the
   * kernel hands requests to io_uring ring entries instead of /dev/fuse: MountOptions.ioUring). Empty for fuse_hl.
   */
  transport(): Record<string, boolean> {
    return this.native?.transport() ?? {};
  }

  /**
   * @internal The folder changes the shared mount's own watcher saw after `since` (see
   * NativeShadow.folderChanges); null when its backend has none (use FolderChanges, which falls
   * back to a watcher of its own).
   */
  folderChanges(since: number): NativeFolderChanges | null {
    return this.native?.folderChanges(since) ?? null;
  }

  /** True while unmounted by suspend(): the layers are kept and resume() mounts again. */
  get suspended(): boolean {
    return this.native !== undefined && !this.native.mounted;
  }

  /**
   * Unmounts the shared mount (and closes the views) but keeps every layer in memory, for a
   * shadow nobody uses; resume() mounts it again at the same place.
   */
  async suspend(options: { lazy?: boolean } = {}): Promise<void> {
    const native = this.native;
    if (!native || !native.mounted) return;
    try {
      await native.unmount(options.lazy === true);
    } catch (err) {
      if ((err as { code?: string }).code === 'EBUSY') {
        throw new ShadowError('MOUNT_BUSY', `the shadow at ${this.mountPoint} is in use; it stays mounted`, { cause: err });
      }
      throw fromNative(err, `suspend ${this.mountPoint}`);
    }
    for (const v of this.views) await v.close().catch(() => undefined);
    this.views.clear();
  }

  async resume(): Promise<void> {
    const native = this.native;
    if (!native) throw new ShadowError('NOT_MOUNTED', `the shadow at ${this.mountPoint} was unmounted for good`);
    if (native.mounted) return;
    // Linux mounts on a directory that exists; WinFsp makes its own (see the platform modules).
    platform.remakeMountPoint(this.mountPoint);
    try {
      await native.remount(this.mountPoint);
    } catch (err) {
      const e = err as { errno?: number; message?: string };
      throw new ShadowError('MOUNT_FAILED', `cannot mount the shadow at ${this.mountPoint} again: ${e.message ?? String(err)}`, {
        errno: e.errno,
        cause: err,
      });
    }
    this.goneReason = undefined;
  }

  /**
   * Unmounts the views and the shared mount. Fails with MOUNT_BUSY while programs use them
   * unless `lazy` is set, which detaches them at once and ends them when the last program lets go.
   */
  async unmount(options: { lazy?: boolean } = {}): Promise<void> {
    if (!this.native) return;
    const native = this.native;
    try {
      // Files closed by a process that just died are let go a few milliseconds later (the kernel
      // may finish the close on a worker thread), and until then the mount is busy: measured
      // 10-30 ms after language servers were killed. A short retry tells that apart from a
      // program that really still uses the shadow.
      for (let attempt = 0; ; attempt++) {
        try {
          await native.unmount(options.lazy === true);
          break;
        } catch (err) {
          if ((err as { code?: string }).code !== 'EBUSY' || attempt >= 10) throw err;
          await new Promise((r) => setTimeout(r, 25));
        }
      }
    } catch (err) {
      if ((err as { code?: string }).code === 'EBUSY') {
        throw new ShadowError(
          'MOUNT_BUSY',
          `the shadow at ${this.mountPoint} (or one of its views) is in use (a shell or program has it open; see "fuser -vm ${this.mountPoint}"); close them, or unmount lazily with { lazy: true } / --lazy`,
          { cause: err },
        );
      }
      throw fromNative(err, `unmount ${this.mountPoint}`);
    }
    this.native = undefined;
    for (const v of this.views) await v.close().catch(() => undefined);
    if (this.createdMountPoint) {
      try {
        fs.rmdirSync(this.mountPoint);
      } catch {
        // Still in use after a lazy unmount, or the user put something there: leave it.
      }
    }
  }
}

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

/** Mounts a shadow of `lowerDir`. */
export async function mount(lowerDir: string, options: MountOptions = {}): Promise<Shadow> {
  const lower = checkLower(lowerDir);
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
  if (isInside(spillDir, lower)) {
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `the spill directory ${spillDir} is inside the folder being shadowed; the folder is never written, pick another`,
    );
  }
  const caseInsensitive = options.caseInsensitive ?? platform.caseInsensitiveNames;
  if (typeof caseInsensitive !== 'boolean')
    throw new ShadowError('INVALID_ARGUMENT', `caseInsensitive must be true or false, got ${String(caseInsensitive)}`);
  const lib = addon();
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
  const ioUring = options.ioUring ?? process.env.SHADOWFS_IO_URING !== '0';
  if (typeof ioUring !== 'boolean') throw new ShadowError('INVALID_ARGUMENT', `ioUring must be true or false, got ${String(ioUring)}`);
  const volume = volumeFor(backend, options.mountPoint, options.volume);
  const { mountPoint, created } = prepareMountPoint(options.mountPoint, lower);
  const native = new lib.Shadow(backend, lower, mountPoint, {
    ...(volume === 'network' ? { volumePrefix: networkPrefix(path.basename(lower) || 'root') } : {}),
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
    const e = err as { errno?: number; message?: string };
    throw new ShadowError('MOUNT_FAILED', `cannot mount a shadow of ${lower} at ${mountPoint}: ${e.message ?? String(err)}`, {
      errno: e.errno,
      cause: err,
    });
  }
  const shadow = new Shadow(native, lower, mountPoint, created, backend, io, volume);
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
