// The shadow mount: mount(lowerDir) returns a Shadow whose mountPoint shows lowerDir live, and
// whose writes land in an in-memory layer. Checks every input before the native module sees it.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { fromNative, ShadowError } from './errors';
import { addon, NativeChange, NativeMount } from './native';
import { normalizeRelPath } from './paths';
import { checkFuseDevice, mountedPaths, runtimeDir } from './platform';

export interface MountOptions {
  /** Where to mount. Created when missing; must be empty. Default: a fresh directory under the per-user runtime directory. */
  mountPoint?: string;
  /** Seconds the kernel may cache names, attributes and "not found" answers (default 1). Bounds how late an edit in the folder shows in the shadow. */
  cacheTimeout?: number;
  /** Backend name; "default" picks the best one built. */
  backend?: string;
}

export type Change = NativeChange;

function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

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
function prepareMountPoint(requested: string | undefined, lower: string): { mountPoint: string; created: boolean } {
  let mp: string;
  let created = false;
  if (requested === undefined) {
    const dir = path.join(runtimeDir(), 'mounts');
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    mp = path.join(dir, `${path.basename(lower) || 'root'}-${crypto.randomBytes(4).toString('hex')}`);
  } else {
    mp = path.resolve(requested);
  }
  const abs = path.resolve(mp);
  if (mountedPaths().has(abs))
    throw new ShadowError(
      'MOUNTPOINT_IN_USE',
      `something is already mounted at ${abs}; unmount it first (fusermount3 -u ${abs}) or pick another --at`,
    );
  let st: fs.Stats | undefined;
  try {
    st = fs.lstatSync(abs);
  } catch {
    st = undefined;
  }
  // Decide about nesting before creating anything, so a refused mount leaves no directory behind.
  const probe = st ? fs.realpathSync(abs) : path.join(fs.realpathSync(nearestExisting(abs)), path.relative(nearestExisting(abs), abs));
  if (isInside(lower, probe))
    throw new ShadowError('LOWER_INSIDE_MOUNTPOINT', `the folder ${lower} is inside the mount point ${abs}; mount somewhere outside it`);
  if (isInside(probe, lower))
    throw new ShadowError(
      'MOUNTPOINT_INSIDE_LOWER',
      `the mount point ${abs} is inside the folder it would shadow (${lower}); mount somewhere outside it`,
    );
  if (st) {
    if (!st.isDirectory()) throw new ShadowError('MOUNTPOINT_NOT_DIRECTORY', `the mount point ${abs} exists and is not a directory`);
    if (fs.readdirSync(abs).length > 0)
      throw new ShadowError('MOUNTPOINT_NOT_EMPTY', `the mount point ${abs} is not empty; use an empty or new directory`);
  } else {
    fs.mkdirSync(abs, { recursive: true, mode: 0o755 });
    created = true;
  }
  return { mountPoint: fs.realpathSync(abs), created };
}

function nearestExisting(p: string): string {
  let cur = p;
  while (!fs.existsSync(cur)) {
    const up = path.dirname(cur);
    if (up === cur) break;
    cur = up;
  }
  return cur;
}

export class Shadow {
  /** Where the shadow is mounted. */
  readonly mountPoint: string;
  /** The real path of the folder it shadows. */
  readonly lower: string;
  private native: NativeMount | undefined;
  private readonly createdMountPoint: boolean;

  /** @internal use mount() */
  constructor(native: NativeMount, lower: string, mountPoint: string, createdMountPoint: boolean) {
    this.native = native;
    this.lower = lower;
    this.mountPoint = mountPoint;
    this.createdMountPoint = createdMountPoint;
  }

  get mounted(): boolean {
    return this.native?.mounted ?? false;
  }

  private live(): NativeMount {
    if (!this.native || !this.native.mounted)
      throw new ShadowError('NOT_MOUNTED', `the shadow at ${this.mountPoint} is not mounted any more`);
    return this.native;
  }

  /** Writes a whole file into the layer (parents are created as needed). */
  async write(relPath: string, data: string | Uint8Array, options: { mode?: number } = {}): Promise<void> {
    const p = normalizeRelPath(relPath);
    const buf = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (typeof data !== 'string' && !(data instanceof Uint8Array))
      throw new ShadowError('INVALID_PATH', 'data must be a string or a Uint8Array');
    const mode = options.mode ?? 0o644;
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)
      throw new ShadowError('INVALID_PATH', `mode must be an integer permission mask, got ${mode}`);
    const native = this.live();
    try {
      native.write(p, buf, mode, process.getuid?.() ?? 0, process.getgid?.() ?? 0);
    } catch (err) {
      throw fromNative(err, `write ${p}`);
    }
  }

  /** Removes a file or a whole directory from the shadow (the folder itself is untouched). */
  async remove(relPath: string): Promise<void> {
    const p = normalizeRelPath(relPath);
    const native = this.live();
    try {
      native.remove(p);
    } catch (err) {
      throw fromNative(err, `remove ${p}`);
    }
  }

  /** Drops every change: the shadow shows the folder exactly again. */
  async reset(): Promise<void> {
    this.live().reset();
  }

  /** What the layer changed, relative to the folder, sorted by path. */
  async changes(): Promise<Change[]> {
    return this.live().changes();
  }

  /** Memory the layer uses. */
  stats(): { layerBytes: number } {
    return this.live().stats();
  }

  /**
   * Unmounts. Fails with MOUNT_BUSY while programs use the shadow unless `lazy` is set, which
   * detaches it at once and ends it when the last program lets go.
   */
  async unmount(options: { lazy?: boolean } = {}): Promise<void> {
    const native = this.native;
    if (!native) return;
    try {
      native.unmount(options.lazy === true);
    } catch (err) {
      const e = err as { code?: string };
      if (e.code === 'EBUSY') {
        throw new ShadowError(
          'MOUNT_BUSY',
          `the shadow at ${this.mountPoint} is in use (a shell or program has it open; see "fuser -vm ${this.mountPoint}"); close them, or unmount lazily with { lazy: true } / --lazy`,
          { cause: err },
        );
      }
      throw fromNative(err, `unmount ${this.mountPoint}`);
    }
    this.native = undefined;
    if (this.createdMountPoint) {
      try {
        fs.rmdirSync(this.mountPoint);
      } catch {
        // Still in use after a lazy unmount, or the user put something there: leave it.
      }
    }
  }
}

/** Mounts a shadow of `lowerDir`. */
export async function mount(lowerDir: string, options: MountOptions = {}): Promise<Shadow> {
  const lower = checkLower(lowerDir);
  checkFuseDevice();
  const timeout = options.cacheTimeout ?? 1;
  if (typeof timeout !== 'number' || !(timeout >= 0))
    throw new ShadowError('INVALID_PATH', `cacheTimeout must be a number of seconds >= 0, got ${timeout}`);
  const lib = addon();
  const { mountPoint, created } = prepareMountPoint(options.mountPoint, lower);
  let native: NativeMount;
  try {
    native = new lib.Mount(options.backend ?? 'default', lower, mountPoint, {
      entryTimeout: timeout,
      attrTimeout: timeout,
      negativeTimeout: timeout,
    });
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
  return new Shadow(native, lower, mountPoint, created);
}
