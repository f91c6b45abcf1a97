// Typed facade over the raw addon. Arguments are checked in TypeScript before they reach C++.
import * as path from 'path';
import { ShadowError } from './errors';

export interface NativeMountOptions {
  entryTimeout?: number;
  attrTimeout?: number;
  negativeTimeout?: number;
  debug?: boolean;
}

export interface NativeChange {
  path: string;
  kind: 'added' | 'modified' | 'deleted' | 'metadata';
  type: 'file' | 'directory' | 'symlink' | 'special';
}

export interface NativeMount {
  readonly mounted: boolean;
  write(path: string, data: Buffer, mode: number, uid: number, gid: number): void;
  remove(path: string): void;
  reset(): number;
  changes(): NativeChange[];
  stats(): { layerBytes: number };
  unmount(lazy: boolean): void;
}

interface Addon {
  Mount: new (backend: string, lower: string, mountPoint: string, options: NativeMountOptions) => NativeMount;
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
