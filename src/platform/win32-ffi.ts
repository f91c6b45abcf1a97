// The ffi-rs plumbing the Windows modules share: ffi-rs loaded once, when the first Win32 call is
// made (importing this module never fails, on any platform), the system libraries opened under
// names of our own, and the few helpers every caller needs to move pointers, handles and memory
// across the boundary. Pointers and handles are plain numbers (64-bit values, well below 2^53 in a
// user-mode address space), structures are Buffers (ffi-rs passes a Buffer as a pointer to its
// bytes and keeps what the call wrote), and memory that Windows hands back is read with
// RtlMoveMemory.
type Ffi = typeof import('ffi-rs');
type FieldType = import('ffi-rs').FieldType;

export const KERNEL32 = 'shadowfs-kernel32';
export const ADVAPI32 = 'shadowfs-advapi32';
export const SHELL32 = 'shadowfs-shell32';
export const OLE32 = 'shadowfs-ole32';

export interface CallResult {
  value: number;
  errnoCode: number;
  errnoMessage: string;
}

export interface Api {
  ffi: Ffi;
  /** Calls `fn` in `library`; `value` is its return value, `errnoCode` GetLastError right after it. */
  call(library: string, fn: string, ret: FieldType, params: [FieldType, unknown][]): CallResult;
}

let api: Api | undefined;

/** The Win32 calls, for `purpose` (what a failure to load ffi-rs keeps from being done: "make identity checks"). */
export function win32Api(purpose: string): Api {
  if (process.platform !== 'win32')
    throw new Error(`cannot ${purpose}: the Win32 API exists only on Windows (this is ${process.platform})`);
  if (api) return api;
  let ffi: Ffi;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ffi = require('ffi-rs') as Ffi;
  } catch (err) {
    throw new Error(`cannot ${purpose}: ffi-rs does not load (${(err as Error).message})`, { cause: err });
  }
  ffi.open({ library: KERNEL32, path: 'kernel32.dll' });
  ffi.open({ library: ADVAPI32, path: 'advapi32.dll' });
  ffi.open({ library: SHELL32, path: 'shell32.dll' });
  ffi.open({ library: OLE32, path: 'ole32.dll' });
  api = {
    ffi,
    call: (library, fn, ret, params) =>
      ffi.load({
        library,
        funcName: fn,
        retType: ret,
        paramsType: params.map((p) => p[0]),
        paramsValue: params.map((p) => p[1]),
        errno: true,
      }) as unknown as CallResult,
  };
  return api;
}

/** A pointer or handle stored in an 8-byte out-parameter. */
export function pointerIn(buf: Buffer): number {
  const v = buf.readBigUInt64LE(0);
  if (v > BigInt(Number.MAX_SAFE_INTEGER))
    throw new Error(`a Win32 call returned the pointer 0x${v.toString(16)}, beyond what this module handles`);
  return Number(v);
}

export function closeHandle(a: Api, handle: number): void {
  const T = a.ffi.DataType;
  a.call(KERNEL32, 'CloseHandle', T.I32, [[T.I64, handle]]);
}

export function localFree(a: Api, mem: number): void {
  const T = a.ffi.DataType;
  a.call(KERNEL32, 'LocalFree', T.I64, [[T.I64, mem]]);
}

/** Copies `length` bytes at the native address `address` into a new Buffer. */
export function readMemory(a: Api, address: number, length: number): Buffer {
  const T = a.ffi.DataType;
  const out = Buffer.alloc(length);
  if (length > 0)
    a.call(KERNEL32, 'RtlMoveMemory', T.Void, [
      [T.U8Array, out],
      [T.I64, address],
      [T.I64, length],
    ]);
  return out;
}

/** Copies `bytes` to the native address `address`. */
export function writeMemory(a: Api, address: number, bytes: Buffer): void {
  const T = a.ffi.DataType;
  a.call(KERNEL32, 'RtlMoveMemory', T.Void, [
    [T.I64, address],
    [T.U8Array, bytes],
    [T.I64, bytes.length],
  ]);
}

/** The NUL-terminated UTF-16 string at `address`. */
export function readWideString(a: Api, address: number): string {
  const T = a.ffi.DataType;
  const chars = a.call(KERNEL32, 'lstrlenW', T.I32, [[T.I64, address]]).value;
  return readMemory(a, address, chars * 2).toString('utf16le');
}
