// The NT API calls on files that the Windows file modules make (win32-beneath.ts,
// win32-nt-readdir.ts), through ffi-rs: ntdll and node.exe opened on top of the shared loader
// (win32-ffi.ts), NtCreateFile relative to a directory handle, information queried and set on a
// handle (attributes and reparse tag, the file system's name, deletion, rename), reparse data
// read and written, a handle handed to libuv as a descriptor, and an NTSTATUS turned into the
// error Node (or shadowfs) would give. Handles and pointers cross as numbers, structures as
// Buffers; structures that hold pointers (OBJECT_ATTRIBUTES -> UNICODE_STRING -> the name) are
// laid out in one LocalAlloc block so their addresses stay put. ffi-rs is required only on the
// first call: importing this module never fails, on any platform.
import { ShadowError } from '../common/errors';
import { type Api, KERNEL32, win32Api } from './win32-ffi';
import {
  ERRNO_OF,
  FILE_ATTRIBUTE_NORMAL,
  FILE_ATTRIBUTE_READONLY,
  FILE_ATTRIBUTE_REPARSE_POINT,
  FILE_DISPOSITION_DELETE,
  FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE,
  FILE_DISPOSITION_POSIX_SEMANTICS,
  FILE_OPEN_FOR_BACKUP_INTENT,
  FILE_RENAME_IGNORE_READONLY_ATTRIBUTE,
  FILE_RENAME_POSIX_SEMANTICS,
  FILE_RENAME_REPLACE_IF_EXISTS,
  FILE_SHARE_ALL,
  FILE_SYNCHRONOUS_IO_NONALERT,
  FileAttributeTagInformation,
  FileBasicInformation,
  FileDispositionInformation,
  FileDispositionInformationEx,
  FileNameInformation,
  FileNormalizedNameInformation,
  FileRenameInformation,
  FileRenameInformationEx,
  IO_REPARSE_TAG_MOUNT_POINT,
  IO_REPARSE_TAG_SYMLINK,
  IO_STATUS_BLOCK_SIZE,
  MAXIMUM_REPARSE_DATA_BUFFER_SIZE,
  NAME_SURROGATE_BIT,
  OBJ_CASE_INSENSITIVE,
  OBJ_DONT_REPARSE,
  OBJECT_ATTRIBUTES_SIZE,
  RENAME_NAME_OFFSET,
  STATUS_BUFFER_OVERFLOW,
  STATUS_CANNOT_DELETE,
  STATUS_INFO_LENGTH_MISMATCH,
  STATUS_INVALID_DEVICE_REQUEST,
  STATUS_INVALID_INFO_CLASS,
  STATUS_INVALID_PARAMETER,
  STATUS_NAME_TOO_LONG,
  STATUS_NOT_A_REPARSE_POINT,
  STATUS_NOT_IMPLEMENTED,
  STATUS_NOT_SUPPORTED,
  STATUS_OBJECT_NAME_INVALID,
  STATUS_REPARSE_POINT_ENCOUNTERED,
  STATUS_STOPPED_ON_SYMLINK,
  SYMLINK_FLAG_RELATIVE,
  UNICODE_STRING_SIZE,
} from './win32-nt-defs';

type Ffi = typeof import('ffi-rs');

export const NTDLL = 'shadowfs-ntdll';
const NODE = 'shadowfs-node';

let librariesOpen = false;

/** The calls, with ntdll and node.exe open beside the shared loader's libraries. */
export function ntApi(): { T: Ffi['DataType']; call: Api['call'] } {
  const a = win32Api('open the folder beneath a handle');
  if (!librariesOpen) {
    a.ffi.open({ library: NTDLL, path: 'ntdll.dll' });
    // node.exe exports libuv (addons link against it): uv_open_osfhandle makes a descriptor of the
    // very table fs.* uses, owning the handle from then on.
    a.ffi.open({ library: NODE, path: process.execPath });
    librariesOpen = true;
  }
  return { T: a.ffi.DataType, call: a.call };
}

export const hex = (status: number): string => `0x${status.toString(16).padStart(8, '0')}`;
export const failed = (status: number): boolean => status >= 0x80000000;

/** A Node-style error (code, errno, syscall) for an NTSTATUS, or the ShadowError it means. */
export function ntError(status: number, call: string, rel: string): Error {
  if (status === STATUS_REPARSE_POINT_ENCOUNTERED || status === STATUS_STOPPED_ON_SYMLINK) return throughLink(rel);
  if (status === STATUS_OBJECT_NAME_INVALID)
    return new ShadowError('INVALID_PATH', `${JSON.stringify(rel)} is not a name Windows can hold in the folder (${call}: ${hex(status)})`);
  const code = ERRNO_OF[status] ?? 'EIO';
  const err = new Error(`${code}: ${call} failed for ${rel} in the folder (NTSTATUS ${hex(status)})`) as NodeJS.ErrnoException;
  err.code = code;
  err.errno = status;
  err.syscall = call;
  err.path = rel;
  return err;
}

export function throughLink(anc: string, cause?: unknown): ShadowError {
  return new ShadowError(
    'PATH_THROUGH_SYMLINK',
    `${anc} is a symbolic link or junction in the folder; shadowfs does not write through links`,
    {
      cause,
    },
  );
}

export function errCode(err: unknown): string | undefined {
  return (err as { code?: string }).code;
}

/** An open directory: its handle and the name the file system gives it (from the volume's root). */
export interface Dir {
  handle: number;
  name: string;
  owned: boolean;
}

export interface Opened {
  handle: number;
  attributes: number;
  tag: number;
}

export function isNameSurrogate(o: { attributes: number; tag: number }): boolean {
  return (o.attributes & FILE_ATTRIBUTE_REPARSE_POINT) !== 0 && ((o.tag >>> 0) & NAME_SURROGATE_BIT) !== 0;
}

// Whether the *Ex information classes work here (Windows 10 1709/1809 and later on NTFS; not on
// FAT, older systems or wine 8): learned on first use, then the plain classes are used.
let renameEx = true;
let dispositionEx = true;
let normalizedName = true;

export const fallBack = (status: number): boolean =>
  status === STATUS_INVALID_INFO_CLASS ||
  status === STATUS_NOT_IMPLEMENTED ||
  status === STATUS_NOT_SUPPORTED ||
  status === STATUS_INVALID_PARAMETER ||
  status === STATUS_INFO_LENGTH_MISMATCH ||
  status === STATUS_INVALID_DEVICE_REQUEST;

/** NtCreateFile of `name` relative to `root` (0: `name` is a full NT name); the raw status and handle. */
export function ntCreate(
  root: number,
  name: string,
  access: number,
  options: number,
  disposition: number,
  objAttributes = OBJ_CASE_INSENSITIVE | OBJ_DONT_REPARSE,
): { status: number; handle: number } {
  const { T, call } = ntApi();
  const nameBytes = Buffer.from(name, 'utf16le');
  if (nameBytes.length > 0xfffe) return { status: STATUS_NAME_TOO_LONG, handle: 0 };
  const size = OBJECT_ATTRIBUTES_SIZE + UNICODE_STRING_SIZE + nameBytes.length + 2;
  const block = call(KERNEL32, 'LocalAlloc', T.I64, [
    [T.U32, 0x0040], // LPTR: fixed, zeroed
    [T.I64, size],
  ]).value;
  if (!block) throw new Error(`LocalAlloc of ${size} bytes failed`);
  try {
    const mem = Buffer.alloc(size);
    mem.writeUInt32LE(OBJECT_ATTRIBUTES_SIZE, 0);
    mem.writeBigUInt64LE(BigInt(root), 8);
    mem.writeBigUInt64LE(BigInt(block + OBJECT_ATTRIBUTES_SIZE), 16);
    mem.writeUInt32LE(objAttributes, 24);
    mem.writeUInt16LE(nameBytes.length, OBJECT_ATTRIBUTES_SIZE);
    mem.writeUInt16LE(nameBytes.length, OBJECT_ATTRIBUTES_SIZE + 2);
    mem.writeBigUInt64LE(BigInt(block + OBJECT_ATTRIBUTES_SIZE + UNICODE_STRING_SIZE), OBJECT_ATTRIBUTES_SIZE + 8);
    nameBytes.copy(mem, OBJECT_ATTRIBUTES_SIZE + UNICODE_STRING_SIZE);
    call(KERNEL32, 'RtlMoveMemory', T.Void, [
      [T.I64, block],
      [T.U8Array, mem],
      [T.I64, size],
    ]);
    const handleOut = Buffer.alloc(8);
    const iosb = Buffer.alloc(IO_STATUS_BLOCK_SIZE);
    const r = call(NTDLL, 'NtCreateFile', T.I32, [
      [T.U8Array, handleOut],
      [T.U32, access],
      [T.I64, block],
      [T.U8Array, iosb],
      [T.I64, 0], // AllocationSize
      [T.U32, FILE_ATTRIBUTE_NORMAL],
      [T.U32, FILE_SHARE_ALL],
      [T.U32, disposition],
      [T.U32, options | FILE_SYNCHRONOUS_IO_NONALERT | FILE_OPEN_FOR_BACKUP_INTENT],
      [T.I64, 0], // EaBuffer
      [T.U32, 0],
    ]);
    const status = r.value >>> 0;
    return { status, handle: failed(status) ? 0 : Number(handleOut.readBigUInt64LE(0)) };
  } finally {
    call(KERNEL32, 'LocalFree', T.I64, [[T.I64, block]]);
  }
}

export function ntClose(handle: number): void {
  const { T, call } = ntApi();
  call(NTDLL, 'NtClose', T.I32, [[T.I64, handle]]);
}

/** NtQueryInformationFile into `buf`; the status. */
export function ntQuery(handle: number, buf: Buffer, cls: number): number {
  const { T, call } = ntApi();
  return (
    call(NTDLL, 'NtQueryInformationFile', T.I32, [
      [T.I64, handle],
      [T.U8Array, Buffer.alloc(IO_STATUS_BLOCK_SIZE)],
      [T.U8Array, buf],
      [T.U32, buf.length],
      [T.I32, cls],
    ]).value >>> 0
  );
}

/** NtSetInformationFile from `buf`; the status. */
export function ntSet(handle: number, buf: Buffer, cls: number): number {
  const { T, call } = ntApi();
  return (
    call(NTDLL, 'NtSetInformationFile', T.I32, [
      [T.I64, handle],
      [T.U8Array, Buffer.alloc(IO_STATUS_BLOCK_SIZE)],
      [T.U8Array, buf],
      [T.U32, buf.length],
      [T.I32, cls],
    ]).value >>> 0
  );
}

/** NtFsControlFile; the status and how many bytes came back in `out`. */
export function ntFsControl(handle: number, code: number, input: Buffer | null, out: Buffer | null): { status: number; bytes: number } {
  const { T, call } = ntApi();
  const iosb = Buffer.alloc(IO_STATUS_BLOCK_SIZE);
  const r = call(NTDLL, 'NtFsControlFile', T.I32, [
    [T.I64, handle],
    [T.I64, 0], // Event
    [T.I64, 0], // ApcRoutine
    [T.I64, 0], // ApcContext
    [T.U8Array, iosb],
    [T.U32, code],
    input ? [T.U8Array, input] : [T.I64, 0],
    [T.U32, input ? input.length : 0],
    out ? [T.U8Array, out] : [T.I64, 0],
    [T.U32, out ? out.length : 0],
  ]);
  return { status: r.value >>> 0, bytes: Number(iosb.readBigUInt64LE(8)) };
}

export function attributeTag(handle: number, rel: string): { attributes: number; tag: number } {
  const buf = Buffer.alloc(8);
  const status = ntQuery(handle, buf, FileAttributeTagInformation);
  if (failed(status)) throw ntError(status, 'NtQueryInformationFile(FileAttributeTagInformation)', rel);
  return { attributes: buf.readUInt32LE(0), tag: buf.readUInt32LE(4) };
}

/** The file system's name of the open object, from the root of its volume (normalized: long names). */
export function nameOf(handle: number, rel: string): string {
  let size = 1024;
  for (;;) {
    const buf = Buffer.alloc(size);
    let status = normalizedName ? ntQuery(handle, buf, FileNormalizedNameInformation) : STATUS_INVALID_INFO_CLASS;
    if (normalizedName && fallBack(status)) normalizedName = false;
    if (!normalizedName) status = ntQuery(handle, buf, FileNameInformation);
    const length = buf.readUInt32LE(0);
    if (status === STATUS_BUFFER_OVERFLOW && length + 4 > size) {
      size = length + 4;
      continue;
    }
    if (failed(status)) throw ntError(status, 'NtQueryInformationFile(FileNameInformation)', rel);
    return buf.subarray(4, 4 + length).toString('utf16le');
  }
}

/** Makes a Node descriptor own `handle` (fs.closeSync closes it). */
export function toFd(handle: number, rel: string): number {
  const { T, call } = ntApi();
  const fd = call(NODE, 'uv_open_osfhandle', T.I32, [[T.I64, handle]]).value;
  if (fd < 0) {
    ntClose(handle);
    throw new Error(`uv_open_osfhandle failed for ${rel} in the folder`);
  }
  return fd;
}

/** Marks the open object for deletion (POSIX semantics and read-only ignored where the system has them). */
export function dispose(handle: number, rel: string, attributes: number): void {
  if (dispositionEx) {
    const ex = Buffer.alloc(4);
    ex.writeUInt32LE(FILE_DISPOSITION_DELETE | FILE_DISPOSITION_POSIX_SEMANTICS | FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE, 0);
    const status = ntSet(handle, ex, FileDispositionInformationEx);
    if (!failed(status)) return;
    if (!fallBack(status)) throw ntError(status, 'NtSetInformationFile(FileDispositionInformationEx)', rel);
    dispositionEx = false;
  }
  const plain = Buffer.from([1]); // DeleteFile = TRUE
  let status = ntSet(handle, plain, FileDispositionInformation);
  if (status === STATUS_CANNOT_DELETE && attributes & FILE_ATTRIBUTE_READONLY) {
    // Without FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE: clear the bit on this handle, as
    // unlink(2) would not care about it.
    const basic = Buffer.alloc(40);
    basic.writeUInt32LE(attributes & ~FILE_ATTRIBUTE_READONLY || FILE_ATTRIBUTE_NORMAL, 32);
    const cleared = ntSet(handle, basic, FileBasicInformation);
    if (failed(cleared)) throw ntError(cleared, 'NtSetInformationFile(FileBasicInformation)', rel);
    status = ntSet(handle, plain, FileDispositionInformation);
  }
  if (failed(status)) throw ntError(status, 'NtSetInformationFile(FileDispositionInformation)', rel);
}

/** Renames the open object to `name` in the directory `dir` (replacing a file or link there, never following it). */
export function renameInto(handle: number, dir: Dir, name: string, rel: string): void {
  const nameBytes = Buffer.from(name, 'utf16le');
  const info = Buffer.alloc(RENAME_NAME_OFFSET + nameBytes.length + 4);
  info.writeBigUInt64LE(BigInt(dir.handle), 8);
  info.writeUInt32LE(nameBytes.length, 16);
  nameBytes.copy(info, RENAME_NAME_OFFSET);
  if (renameEx) {
    info.writeUInt32LE(FILE_RENAME_REPLACE_IF_EXISTS | FILE_RENAME_POSIX_SEMANTICS | FILE_RENAME_IGNORE_READONLY_ATTRIBUTE, 0);
    const status = ntSet(handle, info, FileRenameInformationEx);
    if (!failed(status)) return;
    if (!fallBack(status)) throw ntError(status, 'NtSetInformationFile(FileRenameInformationEx)', rel);
    renameEx = false;
  }
  info.writeUInt32LE(1, 0); // ReplaceIfExists = TRUE (the other three bytes of the union are 0)
  const status = ntSet(handle, info, FileRenameInformation);
  if (failed(status)) throw ntError(status, 'NtSetInformationFile(FileRenameInformation)', rel);
}

/** A symbolic link's REPARSE_DATA_BUFFER pointing at `target` ('/' or '\' separated). */
export function symlinkReparseData(target: string): Buffer {
  const print = target.replace(/\//g, '\\');
  const absolute = /^[A-Za-z]:\\/.test(print) || print.startsWith('\\\\');
  const substitute = absolute ? (print.startsWith('\\\\') ? '\\??\\UNC\\' + print.slice(2) : '\\??\\' + print) : print;
  const sub = Buffer.from(substitute, 'utf16le');
  const prt = Buffer.from(print, 'utf16le');
  const buf = Buffer.alloc(20 + sub.length + prt.length);
  buf.writeUInt32LE(IO_REPARSE_TAG_SYMLINK, 0);
  buf.writeUInt16LE(12 + sub.length + prt.length, 4);
  buf.writeUInt16LE(0, 8);
  buf.writeUInt16LE(sub.length, 10);
  buf.writeUInt16LE(sub.length, 12);
  buf.writeUInt16LE(prt.length, 14);
  buf.writeUInt32LE(absolute ? 0 : SYMLINK_FLAG_RELATIVE, 16);
  sub.copy(buf, 20);
  prt.copy(buf, 20 + sub.length);
  if (buf.length > MAXIMUM_REPARSE_DATA_BUFFER_SIZE)
    throw new ShadowError('INVALID_ARGUMENT', 'the link target is too long for a Windows symbolic link');
  return buf;
}

/** The target a symbolic link or junction's REPARSE_DATA_BUFFER names (as Node's readlink gives it). */
export function reparseTarget(buf: Buffer, rel: string): string {
  const tag = buf.readUInt32LE(0);
  const base = tag === IO_REPARSE_TAG_SYMLINK ? 20 : tag === IO_REPARSE_TAG_MOUNT_POINT ? 16 : -1;
  if (base < 0) throw ntError(STATUS_NOT_A_REPARSE_POINT, `FSCTL_GET_REPARSE_POINT (tag ${hex(tag)})`, rel);
  const off = buf.readUInt16LE(8);
  const len = buf.readUInt16LE(10);
  let target = buf.subarray(base + off, base + off + len).toString('utf16le');
  if (target.startsWith('\\??\\UNC\\')) target = '\\\\' + target.slice(8);
  else if (target.startsWith('\\??\\')) target = target.slice(4);
  return target;
}
