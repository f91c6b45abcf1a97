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

export interface NativeChange {
  path: string;
  kind: 'added' | 'modified' | 'deleted' | 'metadata';
  type: 'file' | 'directory' | 'symlink' | 'special';
}

export interface LayerStats {
  /** Bytes the layer holds in memory (contents plus bookkeeping). */
  memoryBytes: number;
  /** Paths the layer holds (files, directories, deletions). */
  paths: number;
  /** Bytes of contents moved to spill files on disk. */
  spilledBytes: number;
}

/** The raw addon object (native/addon/addon.cc). Layer names are checked in TypeScript first. */
export interface NativeShadow {
  readonly mounted: boolean;
  readonly active: string | null;
  createLayer(name: string): void;
  cloneLayer(from: string, to: string): void;
  dropLayer(name: string): void;
  layers(): string[];
  activate(name: string | null): { paths: number; epoch: boolean };
  write(layer: string, path: string, data: Buffer, mode: number, uid: number, gid: number): void;
  remove(layer: string, path: string): void;
  readFile(layer: string, path: string): Buffer;
  reset(layer: string): number;
  changes(layer: string): NativeChange[];
  stats(layer: string): LayerStats;
  openView(layer: string, mountPoint: string): number;
  closeView(id: number, lazy: boolean): void;
  unmount(lazy: boolean): void;
  /** Mounts the same overlay again (layers intact) after unmount(). */
  remount(mountPoint: string): void;
  /** File-system requests served so far, for idle detection. */
  activity(): number;
}

interface Addon {
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
