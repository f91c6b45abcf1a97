// Typed facade over the raw addon. Arguments are checked in TypeScript before they reach C++.
import * as path from 'path';
import { ShadowError } from './errors';

export interface NativeMountOptions {
  entryTimeout?: number;
  attrTimeout?: number;
  negativeTimeout?: number;
  /** Use the kernel's epoch notification on layer switches when it takes it (default true). */
  useEpoch?: boolean;
  /** FUSE allow_other: users other than the mounter may use the mount. */
  allowOther?: boolean;
  /** Directory for spill files (unlinked temporary files); empty keeps everything in memory. */
  spillDir?: string;
  /** Files larger than this many bytes move to a spill file. */
  spillThreshold?: number;
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
 * The raw addon object (native/addon/addon.cc). Layer names are checked in TypeScript first.
 * Every method that can wait on the overlay's locks, the folder or the kernel runs on the
 * shadow's own native worker thread and returns a Promise; jobs of one shadow run one at a
 * time, in the order they were called. Only the getters below are synchronous.
 */
export interface NativeShadow {
  /** Whether the shared mount is mounted (synchronous, cheap). */
  readonly mounted: boolean;
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
  reset(layer: string): Promise<number>;
  changes(layer: string): Promise<NativeChange[]>;
  stats(layer: string): Promise<LayerStats>;
  openView(layer: string, mountPoint: string): Promise<number>;
  closeView(id: number, lazy: boolean): Promise<void>;
  unmount(lazy: boolean): Promise<void>;
  /** Mounts the same overlay again (layers intact) after unmount(). */
  remount(mountPoint: string): Promise<void>;
  /** File-system requests served so far, for idle detection (synchronous, cheap). */
  activity(): number;
}

interface Addon {
  /** Records the options only: nothing is opened or mounted until mount(). */
  Shadow: new (backend: string, lower: string, mountPoint: string, options: NativeMountOptions) => NativeShadow;
  backends: string[];
}

let cached: Addon | undefined;

export function addon(): Addon {
  if (cached) return cached;
  const file = path.join(__dirname, '..', '..', 'build', 'Release', 'shadowfs.node');
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    cached = require(file) as Addon;
  } catch (err) {
    throw new ShadowError(
      'NATIVE_MODULE_MISSING',
      `cannot load the native module ${file}; build it with "npm run build" (${(err as Error).message})`,
      { cause: err },
    );
  }
  return cached;
}
