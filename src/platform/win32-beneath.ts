// File operations confined beneath an open directory on Windows: the Windows half of
// src/work/beneath.ts, with the same operations and the same errors. Every step opens one
// component with NtCreateFile relative to its parent's handle (OBJECT_ATTRIBUTES.RootDirectory),
// so no path is ever looked up again from the top, and no component may be a link:
//
// - each component is opened with FILE_OPEN_REPARSE_POINT (the reparse point itself is opened,
//   never what it names) and OBJ_DONT_REPARSE, then its FileAttributeTagInformation is read: a
//   reparse point whose tag is a name surrogate (symbolic link, junction, WSL link: anything that
//   names another object) is refused with PATH_THROUGH_SYMLINK. Reparse points that name nothing
//   else (cloud-file placeholders, dedup) are the file or directory they stand for and pass.
// - the name the file system gives the opened object (FileNormalizedNameInformation, else
//   FileNameInformation) must be the parent's name plus the component asked for. That catches
//   what the tag cannot: an 8.3 short name that aliases another entry (refused, INVALID_PATH),
//   and, under wine, a Unix symbolic link, which wine follows silently and reports as the
//   object it points to (refused, PATH_THROUGH_SYMLINK).
// - the last step acts on the handle: rename with FileRenameInformation(Ex) whose RootDirectory
//   is the parent's handle, delete with FileDispositionInformation(Ex) (POSIX semantics where the
//   system has them), data and attributes through a Node descriptor made from the handle by
//   libuv's own uv_open_osfhandle (exported by node.exe), so reads and writes go through libuv
//   off the main thread as they do on Linux.
// - names are checked before any call: no '..', no ':' (alternate data streams), no characters
//   Win32 cannot name, no reserved device names (CON, NUL, COM1, ...), no trailing dot or space
//   (which Win32 strips, so the name would alias another): INVALID_PATH. Paths may be of any
//   length: NT names relative to a handle have no MAX_PATH.
//
// Calls go through ffi-rs as in src/platform/win32-identity.ts: handles and pointers cross as numbers,
// structures as Buffers. Structures that hold pointers (OBJECT_ATTRIBUTES -> UNICODE_STRING ->
// the name) are laid out in one LocalAlloc block so their addresses stay put. ffi-rs is required
// only when a folder is opened: importing this module never fails, on any platform.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { allZero, writeAt } from '../work/content';

type Ffi = typeof import('ffi-rs');
type FieldType = import('ffi-rs').FieldType;

const NTDLL = 'shadowfs-beneath-ntdll';
const KERNEL32 = 'shadowfs-beneath-kernel32';
const NODE = 'shadowfs-beneath-node';

// Access rights (winnt.h; FILE_* in wdm.h).
const FILE_READ_DATA = 0x0001; // FILE_LIST_DIRECTORY for a directory
const FILE_LIST_DIRECTORY = 0x0001;
const FILE_WRITE_DATA = 0x0002;
const FILE_READ_EA = 0x0008;
const FILE_TRAVERSE = 0x0020;
const FILE_READ_ATTRIBUTES = 0x0080;
const FILE_WRITE_ATTRIBUTES = 0x0100;
const DELETE = 0x00010000;
const READ_CONTROL = 0x00020000;
const SYNCHRONIZE = 0x00100000;

// ShareAccess (wdm.h): never keep the user from reading, writing, renaming or deleting.
const FILE_SHARE_ALL = 0x1 | 0x2 | 0x4; // FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE

// CreateDisposition (wdm.h).
const FILE_OPEN = 1;
const FILE_CREATE = 2;
const FILE_OPEN_IF = 3;

// CreateOptions (wdm.h).
const FILE_DIRECTORY_FILE = 0x00000001;
const FILE_SYNCHRONOUS_IO_NONALERT = 0x00000020;
const FILE_NON_DIRECTORY_FILE = 0x00000040;
const FILE_OPEN_FOR_BACKUP_INTENT = 0x00004000;
const FILE_OPEN_REPARSE_POINT = 0x00200000;

// OBJECT_ATTRIBUTES.Attributes (ntdef.h / wdm.h). OBJ_DONT_REPARSE: any reparse met while the
// name is parsed fails the open with STATUS_REPARSE_POINT_ENCOUNTERED (Windows 10 1803 and later;
// older systems ignore the bit, and FILE_OPEN_REPARSE_POINT plus the tag check still hold).
const OBJ_CASE_INSENSITIVE = 0x00000040;
const OBJ_DONT_REPARSE = 0x00001000;

// File attributes (winnt.h).
const FILE_ATTRIBUTE_READONLY = 0x00000001;
const FILE_ATTRIBUTE_DIRECTORY = 0x00000010;
const FILE_ATTRIBUTE_NORMAL = 0x00000080;
const FILE_ATTRIBUTE_REPARSE_POINT = 0x00000400;

// Reparse tags (winnt.h / ntifs.h). IsReparseTagNameSurrogate: bit 29.
const NAME_SURROGATE_BIT = 0x20000000;
const IO_REPARSE_TAG_MOUNT_POINT = 0xa0000003;
const IO_REPARSE_TAG_SYMLINK = 0xa000000c;
const SYMLINK_FLAG_RELATIVE = 0x00000001;
const MAXIMUM_REPARSE_DATA_BUFFER_SIZE = 16 * 1024;
// CTL_CODE(FILE_DEVICE_FILE_SYSTEM, 41 / 42, METHOD_BUFFERED, FILE_ANY_ACCESS) (winioctl.h).
const FSCTL_SET_REPARSE_POINT = 0x000900a4;
const FSCTL_GET_REPARSE_POINT = 0x000900a8;

// FILE_INFORMATION_CLASS (wdm.h).
const FileFullDirectoryInformation = 2;
const FileBasicInformation = 4;
const FileNameInformation = 9;
const FileRenameInformation = 10;
const FileDispositionInformation = 13;
const FileAttributeTagInformation = 35;
const FileNormalizedNameInformation = 48;
const FileDispositionInformationEx = 64;
const FileRenameInformationEx = 65;

// FILE_DISPOSITION_INFORMATION_EX.Flags (ntddk.h).
const FILE_DISPOSITION_DELETE = 0x00000001;
const FILE_DISPOSITION_POSIX_SEMANTICS = 0x00000002;
const FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE = 0x00000010;
// FILE_RENAME_INFORMATION.Flags for FileRenameInformationEx (ntifs.h).
const FILE_RENAME_REPLACE_IF_EXISTS = 0x00000001;
const FILE_RENAME_POSIX_SEMANTICS = 0x00000002;
const FILE_RENAME_IGNORE_READONLY_ATTRIBUTE = 0x00000040;

// NTSTATUS values (ntstatus.h). Negative as an i32 means error or warning; they are compared unsigned.
const STATUS_BUFFER_OVERFLOW = 0x80000005;
const STATUS_NO_MORE_FILES = 0x80000006;
const STATUS_STOPPED_ON_SYMLINK = 0x8000002d;
const STATUS_NOT_IMPLEMENTED = 0xc0000002;
const STATUS_INVALID_INFO_CLASS = 0xc0000003;
const STATUS_INFO_LENGTH_MISMATCH = 0xc0000004;
const STATUS_INVALID_PARAMETER = 0xc000000d;
const STATUS_INVALID_DEVICE_REQUEST = 0xc0000010;
const STATUS_ACCESS_DENIED = 0xc0000022;
const STATUS_OBJECT_NAME_INVALID = 0xc0000033;
const STATUS_OBJECT_NAME_NOT_FOUND = 0xc0000034;
const STATUS_OBJECT_NAME_COLLISION = 0xc0000035;
const STATUS_OBJECT_PATH_NOT_FOUND = 0xc000003a;
const STATUS_SHARING_VIOLATION = 0xc0000043;
const STATUS_DELETE_PENDING = 0xc0000056;
const STATUS_DISK_FULL = 0xc000007f;
const STATUS_FILE_IS_A_DIRECTORY = 0xc00000ba;
const STATUS_NOT_SUPPORTED = 0xc00000bb;
const STATUS_NOT_SAME_DEVICE = 0xc00000d4;
const STATUS_DIRECTORY_NOT_EMPTY = 0xc0000101;
const STATUS_NOT_A_DIRECTORY = 0xc0000103;
const STATUS_NAME_TOO_LONG = 0xc0000106;
const STATUS_CANNOT_DELETE = 0xc0000121;
const STATUS_PRIVILEGE_NOT_HELD = 0xc0000061;
const STATUS_NOT_A_REPARSE_POINT = 0xc0000275;
const STATUS_REPARSE_POINT_ENCOUNTERED = 0xc000050b;

/** What Node (libuv) would call each status, so callers written for beneath.ts see the same codes. */
const ERRNO_OF: Record<number, string> = {
  [STATUS_OBJECT_NAME_NOT_FOUND]: 'ENOENT',
  [STATUS_OBJECT_PATH_NOT_FOUND]: 'ENOENT',
  [STATUS_DELETE_PENDING]: 'ENOENT',
  [STATUS_OBJECT_NAME_COLLISION]: 'EEXIST',
  [STATUS_NOT_A_DIRECTORY]: 'ENOTDIR',
  [STATUS_FILE_IS_A_DIRECTORY]: 'EISDIR',
  [STATUS_DIRECTORY_NOT_EMPTY]: 'ENOTEMPTY',
  [STATUS_ACCESS_DENIED]: 'EPERM',
  [STATUS_CANNOT_DELETE]: 'EPERM',
  [STATUS_PRIVILEGE_NOT_HELD]: 'EPERM',
  [STATUS_SHARING_VIOLATION]: 'EBUSY',
  [STATUS_NOT_SAME_DEVICE]: 'EXDEV',
  [STATUS_DISK_FULL]: 'ENOSPC',
  [STATUS_NAME_TOO_LONG]: 'ENAMETOOLONG',
  [STATUS_NOT_A_REPARSE_POINT]: 'EINVAL',
  [STATUS_NOT_SUPPORTED]: 'ENOTSUP',
  [STATUS_NOT_IMPLEMENTED]: 'ENOSYS',
  [STATUS_INVALID_DEVICE_REQUEST]: 'ENOTSUP',
};

// Layouts for x64, from the structure definitions in Microsoft's documentation (pointers, HANDLE,
// LARGE_INTEGER and ULONG_PTR: 8 bytes aligned to 8; ULONG: 4; USHORT: 2; WCHAR: 2).
//
// UNICODE_STRING (ntdef.h / winternl.h), 16 bytes:
//    0 USHORT Length (bytes, no NUL)   2 USHORT MaximumLength   8 PWSTR Buffer
// OBJECT_ATTRIBUTES (ntdef.h / winternl.h), 48 bytes:
//    0 ULONG Length   8 HANDLE RootDirectory   16 PUNICODE_STRING ObjectName   24 ULONG Attributes
//   32 PVOID SecurityDescriptor   40 PVOID SecurityQualityOfService
// IO_STATUS_BLOCK (wdm.h / winternl.h), 16 bytes: 0 NTSTATUS Status (union with PVOID)   8 ULONG_PTR Information
// FILE_ATTRIBUTE_TAG_INFORMATION (ntddk.h), 8 bytes: 0 ULONG FileAttributes   4 ULONG ReparseTag
// FILE_NAME_INFORMATION (ntddk.h): 0 ULONG FileNameLength (bytes)   4 WCHAR FileName[]
// FILE_BASIC_INFORMATION (wdm.h), 40 bytes: 0/8/16/24 LARGE_INTEGER CreationTime, LastAccessTime,
//   LastWriteTime, ChangeTime (0 = leave as is)   32 ULONG FileAttributes
// FILE_DISPOSITION_INFORMATION (ntddk.h): 0 BOOLEAN DeleteFile
// FILE_DISPOSITION_INFORMATION_EX (ntddk.h): 0 ULONG Flags
// FILE_RENAME_INFORMATION (ntifs.h): 0 union { BOOLEAN ReplaceIfExists; ULONG Flags }
//    8 HANDLE RootDirectory   16 ULONG FileNameLength (bytes)   20 WCHAR FileName[]
// FILE_FULL_DIR_INFORMATION (ntifs.h): 0 ULONG NextEntryOffset   4 ULONG FileIndex
//    8..55 six LARGE_INTEGERs (times, EndOfFile, AllocationSize)   56 ULONG FileAttributes
//   60 ULONG FileNameLength   64 ULONG EaSize (the reparse tag when FILE_ATTRIBUTE_REPARSE_POINT
//   is set, [MS-FSCC] 2.4.14)   68 WCHAR FileName[]
// REPARSE_DATA_BUFFER (ntifs.h): 0 ULONG ReparseTag   4 USHORT ReparseDataLength   6 USHORT Reserved
//    then for IO_REPARSE_TAG_SYMLINK: 8 USHORT SubstituteNameOffset   10 SubstituteNameLength
//   12 PrintNameOffset   14 PrintNameLength   16 ULONG Flags   20 WCHAR PathBuffer[]
//    and for IO_REPARSE_TAG_MOUNT_POINT the same without Flags: PathBuffer at 16.
const OBJECT_ATTRIBUTES_SIZE = 48;
const UNICODE_STRING_SIZE = 16;
const IO_STATUS_BLOCK_SIZE = 16;
const RENAME_NAME_OFFSET = 20;
const DIR_ENTRY_NAME_OFFSET = 68;
const LIST_BUFFER_BYTES = 64 * 1024;

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

interface CallResult {
  value: number;
  errnoCode: number;
  errnoMessage: string;
}

interface Api {
  T: Ffi['DataType'];
  call(library: string, fn: string, ret: FieldType, params: [FieldType, unknown][]): CallResult;
}

let api: Api | undefined;

function win(): Api {
  if (process.platform !== 'win32')
    throw new Error(`win32-beneath uses the NT API, which exists only on Windows (this is ${process.platform})`);
  if (api) return api;
  let ffi: Ffi;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ffi = require('ffi-rs') as Ffi;
  } catch (err) {
    throw new Error(`cannot open the folder beneath a handle: ffi-rs does not load (${(err as Error).message})`, { cause: err });
  }
  ffi.open({ library: NTDLL, path: 'ntdll.dll' });
  ffi.open({ library: KERNEL32, path: 'kernel32.dll' });
  // node.exe exports libuv (addons link against it): uv_open_osfhandle makes a descriptor of the
  // very table fs.* uses, owning the handle from then on.
  ffi.open({ library: NODE, path: process.execPath });
  api = {
    T: ffi.DataType,
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

const hex = (status: number): string => `0x${status.toString(16).padStart(8, '0')}`;
const failed = (status: number): boolean => status >= 0x80000000;

/** A Node-style error (code, errno, syscall) for an NTSTATUS, or the ShadowError it means. */
function ntError(status: number, call: string, rel: string): Error {
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

function throughLink(anc: string, cause?: unknown): ShadowError {
  return new ShadowError(
    'PATH_THROUGH_SYMLINK',
    `${anc} is a symbolic link or junction in the folder; shadowfs does not write through links`,
    {
      cause,
    },
  );
}

function errCode(err: unknown): string | undefined {
  return (err as { code?: string }).code;
}

// Names Win32 reserves for devices, with or without an extension ("NUL.txt" is NUL too); the
// superscript digits count as digits there.
const DEVICE_NAME = /^(CON|PRN|AUX|NUL|COM[0-9\u00b9\u00b2\u00b3]|LPT[0-9\u00b9\u00b2\u00b3]|CONIN\$|CONOUT\$)$/i;
// Characters no Win32 name may hold: controls, the wildcards and separators, ':' (a stream).
const BAD_CHAR = /[\u0000-\u001f<>:"/\\|?*]/;

/** Why `name` cannot be a file name in a Windows folder, or null when it can. */
export function windowsNameProblem(name: string): string | null {
  if (name === '' || name === '.' || name === '..') return 'an empty, "." or ".." component';
  const bad = BAD_CHAR.exec(name);
  if (bad) return bad[0] === ':' ? 'a ":" (an alternate data stream)' : `the character ${JSON.stringify(bad[0])}`;
  if (/[. ]$/.test(name)) return 'a trailing dot or space (Windows strips it, so the name would alias another)';
  const base = name.replace(/\..*$/s, '').replace(/ +$/, '');
  if (DEVICE_NAME.test(base)) return `the reserved device name ${base.toUpperCase()}`;
  return null;
}

/** The components of a '/'-separated relative path; INVALID_PATH for anything that could leave the folder or alias a name. */
function components(rel: string): string[] {
  const parts = rel.split('/');
  for (const p of parts) {
    const why = windowsNameProblem(p);
    if (why) throw new ShadowError('INVALID_PATH', `${JSON.stringify(rel)} is not a plain Windows path inside the folder: it has ${why}`);
  }
  return parts;
}

/** The NT name (\??\C:\..., \??\UNC\server\share\...) of a Win32 path. */
function ntPathOf(p: string): string {
  const ns = path.win32.toNamespacedPath(path.win32.resolve(p));
  if (!ns.startsWith('\\\\?\\')) throw new Error(`cannot open ${p}: not a local or UNC path`);
  return '\\??\\' + ns.slice(4);
}

const upper = (s: string): string => s.toUpperCase();

/** An open directory: its handle and the name the file system gives it (from the volume's root). */
interface Dir {
  handle: number;
  name: string;
  owned: boolean;
}

interface Opened {
  handle: number;
  attributes: number;
  tag: number;
}

function isNameSurrogate(o: { attributes: number; tag: number }): boolean {
  return (o.attributes & FILE_ATTRIBUTE_REPARSE_POINT) !== 0 && ((o.tag >>> 0) & NAME_SURROGATE_BIT) !== 0;
}

/** One entry of BeneathWin32.readdir, shaped as fs.Dirent. */
class Entry implements fs.Dirent {
  constructor(
    readonly name: string,
    readonly parentPath: string,
    private readonly kind: 'file' | 'dir' | 'link',
  ) {}
  get path(): string {
    return this.parentPath;
  }
  isFile(): boolean {
    return this.kind === 'file';
  }
  isDirectory(): boolean {
    return this.kind === 'dir';
  }
  isSymbolicLink(): boolean {
    return this.kind === 'link';
  }
  isBlockDevice(): boolean {
    return false;
  }
  isCharacterDevice(): boolean {
    return false;
  }
  isFIFO(): boolean {
    return false;
  }
  isSocket(): boolean {
    return false;
  }
}

// Whether the *Ex information classes work here (Windows 10 1709/1809 and later on NTFS; not on
// FAT, older systems or wine 8): learned on first use, then the plain classes are used.
let renameEx = true;
let dispositionEx = true;
let normalizedName = true;

const fallBack = (status: number): boolean =>
  status === STATUS_INVALID_INFO_CLASS ||
  status === STATUS_NOT_IMPLEMENTED ||
  status === STATUS_NOT_SUPPORTED ||
  status === STATUS_INVALID_PARAMETER ||
  status === STATUS_INFO_LENGTH_MISMATCH ||
  status === STATUS_INVALID_DEVICE_REQUEST;

/** NtCreateFile of `name` relative to `root` (0: `name` is a full NT name); the raw status and handle. */
function ntCreate(
  root: number,
  name: string,
  access: number,
  options: number,
  disposition: number,
  objAttributes = OBJ_CASE_INSENSITIVE | OBJ_DONT_REPARSE,
): { status: number; handle: number } {
  const { T, call } = win();
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

function ntClose(handle: number): void {
  const { T, call } = win();
  call(NTDLL, 'NtClose', T.I32, [[T.I64, handle]]);
}

/** NtQueryInformationFile into `buf`; the status. */
function ntQuery(handle: number, buf: Buffer, cls: number): number {
  const { T, call } = win();
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
function ntSet(handle: number, buf: Buffer, cls: number): number {
  const { T, call } = win();
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
function ntFsControl(handle: number, code: number, input: Buffer | null, out: Buffer | null): { status: number; bytes: number } {
  const { T, call } = win();
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

function attributeTag(handle: number, rel: string): { attributes: number; tag: number } {
  const buf = Buffer.alloc(8);
  const status = ntQuery(handle, buf, FileAttributeTagInformation);
  if (failed(status)) throw ntError(status, 'NtQueryInformationFile(FileAttributeTagInformation)', rel);
  return { attributes: buf.readUInt32LE(0), tag: buf.readUInt32LE(4) };
}

/** The file system's name of the open object, from the root of its volume (normalized: long names). */
function nameOf(handle: number, rel: string): string {
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

function joinName(dir: string, name: string): string {
  return dir.endsWith('\\') ? dir + name : `${dir}\\${name}`;
}

/**
 * Checks that `handle`, opened as `name` beneath `dir`, is that very entry: its name is the
 * directory's plus `name` (case aside). Another entry of the same directory is an alias (8.3 short
 * name): INVALID_PATH; anything elsewhere was reached through a link the tag did not show (wine's
 * Unix links): PATH_THROUGH_SYMLINK. Returns the entry's name.
 */
function verifyName(handle: number, dir: Dir, name: string, rel: string, shown: string): string {
  const actual = nameOf(handle, rel);
  if (upper(actual) === upper(joinName(dir.name, name))) return actual;
  const cut = actual.lastIndexOf('\\');
  const actualDir = cut <= 0 ? '\\' : actual.slice(0, cut);
  if (upper(actualDir) === upper(dir.name))
    throw new ShadowError(
      'INVALID_PATH',
      `${shown} is another name of ${JSON.stringify(actual.slice(cut + 1))} in the folder; give its real name`,
    );
  throw throughLink(shown);
}

/** Makes a Node descriptor own `handle` (fs.closeSync closes it). */
function toFd(handle: number, rel: string): number {
  const { T, call } = win();
  const fd = call(NODE, 'uv_open_osfhandle', T.I32, [[T.I64, handle]]).value;
  if (fd < 0) {
    ntClose(handle);
    throw new Error(`uv_open_osfhandle failed for ${rel} in the folder`);
  }
  return fd;
}

/** Marks the open object for deletion (POSIX semantics and read-only ignored where the system has them). */
function dispose(handle: number, rel: string, attributes: number): void {
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
function renameInto(handle: number, dir: Dir, name: string, rel: string): void {
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
function symlinkReparseData(target: string): Buffer {
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
function reparseTarget(buf: Buffer, rel: string): string {
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

/**
 * The user's folder on Windows, held open by a handle; every operation resolves beneath it one
 * component at a time, links refused. The same operations as Beneath (src/work/beneath.ts), with
 * the same results and error codes. Close it when done.
 */
export class BeneathWin32 {
  private constructor(
    readonly root: string,
    private readonly dir: Dir,
  ) {}

  /** Opens the folder `root` (a link or junction naming the folder itself is followed, as on Linux; nothing beneath it is). */
  static open(root: string): BeneathWin32 {
    const r = ntCreate(
      0,
      ntPathOf(root),
      FILE_LIST_DIRECTORY | FILE_TRAVERSE | FILE_READ_ATTRIBUTES | SYNCHRONIZE,
      FILE_DIRECTORY_FILE,
      FILE_OPEN,
      OBJ_CASE_INSENSITIVE,
    );
    if (failed(r.status)) throw ntError(r.status, 'NtCreateFile', root);
    try {
      return new BeneathWin32(root, { handle: r.handle, name: nameOf(r.handle, root), owned: false });
    } catch (err) {
      ntClose(r.handle);
      throw err;
    }
  }

  close(): void {
    if (this.dir.handle) ntClose(this.dir.handle);
    this.dir.handle = 0;
  }

  private release(d: Dir): void {
    if (d.owned) ntClose(d.handle);
  }

  /**
   * Opens `name` beneath `dir` as one step: the handle (the caller closes it) with its attributes
   * and tag, or null when nothing is there. A name-surrogate reparse point is refused unless
   * `links` ('allow': the caller acts on the link itself and is told by the tag); the name is
   * always checked (verifyName).
   */
  private step(
    dir: Dir,
    name: string,
    access: number,
    options: number,
    disposition: number,
    rel: string,
    links: 'refuse' | 'allow',
  ): (Opened & { name: string }) | null {
    const r = ntCreate(dir.handle, name, access | FILE_READ_ATTRIBUTES | SYNCHRONIZE, options | FILE_OPEN_REPARSE_POINT, disposition);
    if (r.status === STATUS_OBJECT_NAME_NOT_FOUND || r.status === STATUS_OBJECT_PATH_NOT_FOUND) return null;
    if (failed(r.status)) throw ntError(r.status, 'NtCreateFile', rel);
    try {
      const at = attributeTag(r.handle, rel);
      if (links === 'refuse' && isNameSurrogate(at)) throw throughLink(rel);
      const full = verifyName(r.handle, dir, name, rel, rel);
      return { handle: r.handle, ...at, name: full };
    } catch (err) {
      ntClose(r.handle);
      throw err;
    }
  }

  /** Opens directory `name` beneath `dir` (made when missing and `create`), refusing links. */
  private openDir(dir: Dir, name: string, shown: string, create: boolean): Dir | null {
    const access = FILE_LIST_DIRECTORY | FILE_TRAVERSE;
    let o: (Opened & { name: string }) | null;
    try {
      o = this.step(dir, name, access, FILE_DIRECTORY_FILE, create ? FILE_OPEN_IF : FILE_OPEN, shown, 'refuse');
    } catch (err) {
      if (errCode(err) !== 'ENOTDIR') throw err;
      // Not a directory: a link to a file, or a file. Say which.
      const probe = this.step(dir, name, 0, 0, FILE_OPEN, shown, 'allow');
      if (probe) ntClose(probe.handle);
      if (probe && isNameSurrogate(probe)) throw throughLink(shown, err);
      throw new ShadowError('NOT_A_DIRECTORY', `${shown} is not a directory in the folder`, { cause: err });
    }
    return o && { handle: o.handle, name: o.name, owned: true };
  }

  /** The open parent directory of `parts` (the caller releases it). */
  private walk(parts: string[], create: boolean): Dir {
    let dir = this.dir;
    if (!dir.handle) throw new Error(`the folder ${this.root} is closed`);
    try {
      for (let i = 0; i < parts.length; i++) {
        const shown = parts.slice(0, i + 1).join('/');
        const next = this.openDir(dir, parts[i], shown, create);
        if (!next) throw ntError(STATUS_OBJECT_PATH_NOT_FOUND, 'NtCreateFile', shown);
        this.release(dir);
        dir = next;
      }
      return dir;
    } catch (err) {
      this.release(dir);
      throw err;
    }
  }

  /** Runs `fn` with `rel`'s parent directory open (missing ancestors made when `create`) and `rel`'s last component. */
  private at<T>(rel: string, create: boolean, fn: (dir: Dir, name: string) => T): T {
    const parts = components(rel);
    const name = parts.pop()!;
    const dir = this.walk(parts, create);
    try {
      return fn(dir, name);
    } finally {
      this.release(dir);
    }
  }

  /** What is at `rel` (never following a link: a link shows as one), or null when nothing is; PATH_THROUGH_SYMLINK when an ancestor is a link. */
  lstat(rel: string): fs.Stats | null {
    try {
      return this.at(rel, false, (dir, name) => {
        const o = this.step(dir, name, 0, 0, FILE_OPEN, rel, 'allow');
        if (!o) return null;
        const fd = toFd(o.handle, rel);
        try {
          const st = fs.fstatSync(fd);
          if (isNameSurrogate(o)) st.mode = (st.mode & ~S_IFMT) | S_IFLNK;
          return st;
        } finally {
          fs.closeSync(fd);
        }
      });
    } catch (err) {
      if (errCode(err) === 'ENOENT' || errCode(err) === 'NOT_A_DIRECTORY') return null;
      throw err;
    }
  }

  /** The target of the symbolic link or junction at `rel` (EINVAL when it is none). */
  readlink(rel: string): string {
    return this.at(rel, false, (dir, name) => {
      const o = this.step(dir, name, 0, 0, FILE_OPEN, rel, 'allow');
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      try {
        const out = Buffer.alloc(MAXIMUM_REPARSE_DATA_BUFFER_SIZE);
        const r = ntFsControl(o.handle, FSCTL_GET_REPARSE_POINT, null, out);
        if (failed(r.status)) throw ntError(r.status, 'NtFsControlFile(FSCTL_GET_REPARSE_POINT)', rel);
        return reparseTarget(out.subarray(0, r.bytes), rel);
      } finally {
        ntClose(o.handle);
      }
    });
  }

  /** The bytes and mode of the regular file at `rel` (a link there: PATH_THROUGH_SYMLINK; a directory: INVALID_ARGUMENT). */
  readFile(rel: string): { data: Buffer; mode: number } {
    const { fd, stat } = this.openFile(rel);
    try {
      return { data: fs.readFileSync(fd), mode: stat.mode };
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Opens the regular file at `rel` for reading; the caller closes the descriptor. */
  openFile(rel: string): { fd: number; stat: fs.Stats } {
    return this.at(rel, false, (dir, name) => {
      let o: Opened | null;
      try {
        o = this.step(dir, name, FILE_READ_DATA | FILE_READ_EA | READ_CONTROL, FILE_NON_DIRECTORY_FILE, FILE_OPEN, rel, 'refuse');
      } catch (err) {
        if (errCode(err) === 'EISDIR')
          throw new ShadowError('INVALID_ARGUMENT', `${rel} is not a regular file in the folder`, { cause: err });
        throw err;
      }
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      const fd = toFd(o.handle, rel);
      try {
        const stat = fs.fstatSync(fd);
        if (!stat.isFile()) throw new ShadowError('INVALID_ARGUMENT', `${rel} is not a regular file in the folder`);
        return { fd, stat };
      } catch (err) {
        fs.closeSync(fd);
        throw err;
      }
    });
  }

  /** The names in directory `rel` ('' for the folder itself), with their types (a reparse point that names another object: a link). */
  readdir(rel: string): fs.Dirent[] {
    if (rel === '') return this.list(this.dir, this.root, rel);
    return this.at(rel, false, (parent, name) => {
      const d = this.openDir(parent, name, rel, false);
      if (!d) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      try {
        return this.list(d, path.win32.join(this.root, ...rel.split('/')), rel);
      } finally {
        this.release(d);
      }
    });
  }

  private list(d: Dir, parentPath: string, rel: string): fs.Dirent[] {
    const { T, call } = win();
    const out: fs.Dirent[] = [];
    const buf = Buffer.alloc(LIST_BUFFER_BYTES);
    for (let first = true; ; first = false) {
      const r = call(NTDLL, 'NtQueryDirectoryFile', T.I32, [
        [T.I64, d.handle],
        [T.I64, 0], // Event
        [T.I64, 0], // ApcRoutine
        [T.I64, 0], // ApcContext
        [T.U8Array, Buffer.alloc(IO_STATUS_BLOCK_SIZE)],
        [T.U8Array, buf],
        [T.U32, buf.length],
        [T.I32, FileFullDirectoryInformation],
        [T.U8, 0], // ReturnSingleEntry
        [T.I64, 0], // FileName: every entry
        [T.U8, first ? 1 : 0], // RestartScan
      ]);
      const status = r.value >>> 0;
      if (status === STATUS_NO_MORE_FILES) return out;
      if (failed(status)) throw ntError(status, 'NtQueryDirectoryFile(FileFullDirectoryInformation)', rel || '.');
      for (let at = 0; ;) {
        const next = buf.readUInt32LE(at);
        const attributes = buf.readUInt32LE(at + 56);
        const nameLength = buf.readUInt32LE(at + 60);
        const tag = buf.readUInt32LE(at + 64);
        const name = buf.subarray(at + DIR_ENTRY_NAME_OFFSET, at + DIR_ENTRY_NAME_OFFSET + nameLength).toString('utf16le');
        if (name !== '.' && name !== '..') {
          const kind = isNameSurrogate({ attributes, tag }) ? 'link' : attributes & FILE_ATTRIBUTE_DIRECTORY ? 'dir' : 'file';
          out.push(new Entry(name, parentPath, kind));
        }
        if (next === 0) break;
        at += next;
      }
    }
  }

  /**
   * Makes directory `rel` (and missing ancestors); a directory already there is fine, anything
   * else EEXIST. (No mode: a Windows directory has none; Beneath's mode argument is not passed on.)
   */
  mkdir(rel: string): void {
    this.at(rel, true, (dir, name) => {
      const made = ntCreate(
        dir.handle,
        name,
        FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE,
        FILE_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT,
        FILE_CREATE,
      );
      if (!failed(made.status)) {
        try {
          verifyName(made.handle, dir, name, rel, rel);
        } finally {
          ntClose(made.handle);
        }
        return;
      }
      if (made.status !== STATUS_OBJECT_NAME_COLLISION) throw ntError(made.status, 'NtCreateFile(FILE_CREATE, directory)', rel);
      let there: Dir | null;
      try {
        there = this.openDir(dir, name, rel, false);
      } catch (err) {
        if (errCode(err) === 'NOT_A_DIRECTORY') throw ntError(STATUS_OBJECT_NAME_COLLISION, 'NtCreateFile(FILE_CREATE, directory)', rel);
        throw err;
      }
      if (there) this.release(there);
      else throw ntError(STATUS_OBJECT_NAME_COLLISION, 'NtCreateFile(FILE_CREATE, directory)', rel);
    });
  }

  /**
   * Makes a new file `.<name>.shadowfs-<random>` beside `name` in `dir` (FILE_CREATE: never an
   * existing one); with `link`, a symbolic link to it. The handle may delete and rename it.
   */
  private newSibling(dir: Dir, name: string, rel: string, link?: string): { handle: number; tmpName: string } {
    const tmpName = `.${name}.shadowfs-${crypto.randomBytes(6).toString('hex')}`;
    const access = FILE_WRITE_DATA | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES | DELETE | SYNCHRONIZE;
    const r = ntCreate(dir.handle, tmpName, access, FILE_NON_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT, FILE_CREATE);
    if (failed(r.status)) throw ntError(r.status, 'NtCreateFile(FILE_CREATE)', rel);
    if (link === undefined) return { handle: r.handle, tmpName };
    try {
      const set = ntFsControl(r.handle, FSCTL_SET_REPARSE_POINT, symlinkReparseData(link), null);
      if (failed(set.status)) {
        const err = ntError(set.status, 'NtFsControlFile(FSCTL_SET_REPARSE_POINT, IO_REPARSE_TAG_SYMLINK)', rel);
        err.message += '; making a symbolic link on Windows needs the "Create symbolic links" privilege';
        throw err;
      }
    } catch (err) {
      this.discard(r.handle, rel);
      throw err;
    }
    return { handle: r.handle, tmpName };
  }

  /** Deletes and closes a file this module made (best effort: the original error matters more). */
  private discard(handle: number, rel: string): void {
    try {
      dispose(handle, rel, 0);
    } catch {
      // left behind under its temporary name; nothing else is touched
    }
    ntClose(handle);
  }

  /**
   * Refuses `name` in `dir` when an entry is there under another name (an 8.3 alias): the rename
   * would replace that entry. A link there is fine: the rename replaces the link itself.
   */
  private checkTarget(dir: Dir, name: string, rel: string): void {
    const o = this.step(dir, name, 0, 0, FILE_OPEN, rel, 'allow');
    if (o) ntClose(o.handle);
  }

  /**
   * Writes a regular file (or, with `link`, a symbolic link to `link`) at `rel` atomically: made
   * beside it under a new name, then renamed over whatever file or link is there (a rename
   * replaces a link, never follows it; a directory there fails).
   */
  write(rel: string, content: { data: Buffer; mode: number } | { link: string }): void {
    this.at(rel, true, (dir, name) => {
      this.checkTarget(dir, name, rel);
      const made = this.newSibling(dir, name, rel, 'link' in content ? content.link : undefined);
      if ('link' in content) {
        try {
          renameInto(made.handle, dir, name, rel);
        } catch (err) {
          this.discard(made.handle, rel);
          throw err;
        }
        ntClose(made.handle);
        return;
      }
      const fd = toFd(made.handle, rel);
      try {
        try {
          fs.writeSync(fd, content.data);
          fs.fsyncSync(fd);
          renameInto(made.handle, dir, name, rel);
        } catch (err) {
          try {
            dispose(made.handle, rel, 0);
          } catch {
            // left behind under its temporary name
          }
          throw err;
        }
        // After the rename, so that a read-only file is never what a rename has to replace or delete.
        fs.fchmodSync(fd, content.mode & 0o777);
      } finally {
        fs.closeSync(fd);
      }
    });
  }

  /**
   * Writes a regular file of any size at `rel` from `spans` (data, or a number: that many zero
   * bytes), the way write() does: made beside it under a new name, filled off the main thread,
   * then renamed over what is there. The parent directory stays open (by handle) throughout.
   */
  async writeFrom(rel: string, spans: AsyncIterable<Buffer | number>, mode: number): Promise<void> {
    const parts = components(rel);
    const name = parts.pop()!;
    const dir = this.walk(parts, true);
    try {
      this.checkTarget(dir, name, rel);
      const made = this.newSibling(dir, name, rel);
      const fd = toFd(made.handle, rel);
      try {
        try {
          let at = 0;
          for await (const s of spans) {
            // Zeros need not be written: the end of file set below reads back as zeros.
            if (typeof s === 'number' || allZero(s)) {
              at += typeof s === 'number' ? s : s.length;
              continue;
            }
            for (let done = 0; done < s.length;) done += await writeAt(fd, s, done, s.length - done, at + done);
            at += s.length;
          }
          fs.ftruncateSync(fd, at);
          fs.fsyncSync(fd);
          renameInto(made.handle, dir, name, rel);
        } catch (err) {
          try {
            dispose(made.handle, rel, 0);
          } catch {
            // left behind under its temporary name
          }
          throw err;
        }
        fs.fchmodSync(fd, mode & 0o777);
      } finally {
        fs.closeSync(fd);
      }
    } finally {
      this.release(dir);
    }
  }

  /** Sets the mode of the regular file at `rel` (on Windows: the read-only attribute, from the owner's write bit); a link there is refused. */
  chmod(rel: string, mode: number): void {
    this.at(rel, false, (dir, name) => {
      const o = this.step(dir, name, FILE_WRITE_ATTRIBUTES, 0, FILE_OPEN, rel, 'refuse');
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      const fd = toFd(o.handle, rel);
      try {
        fs.fchmodSync(fd, mode & 0o777);
      } finally {
        fs.closeSync(fd);
      }
    });
  }

  /** Removes the file or link at `rel` itself (never what a link points to); false when nothing was there. EISDIR for a directory. */
  unlink(rel: string): boolean {
    try {
      return this.at(rel, false, (dir, name) => {
        const o = this.step(dir, name, DELETE | FILE_WRITE_ATTRIBUTES, 0, FILE_OPEN, rel, 'allow');
        if (!o) return false;
        try {
          if (o.attributes & FILE_ATTRIBUTE_DIRECTORY && !isNameSurrogate(o)) throw ntError(STATUS_FILE_IS_A_DIRECTORY, 'unlink', rel);
          dispose(o.handle, rel, o.attributes);
        } finally {
          ntClose(o.handle);
        }
        return true;
      });
    } catch (err) {
      if (errCode(err) === 'ENOENT') return false;
      throw err;
    }
  }

  /** Removes the empty directory at `rel` (never recursively; a link there: ENOTDIR, never followed). */
  rmdir(rel: string): void {
    this.at(rel, false, (dir, name) => {
      const o = this.step(dir, name, DELETE | FILE_WRITE_ATTRIBUTES, FILE_DIRECTORY_FILE, FILE_OPEN, rel, 'allow');
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      try {
        if (isNameSurrogate(o)) throw ntError(STATUS_NOT_A_DIRECTORY, 'rmdir (a link, not followed)', rel);
        dispose(o.handle, rel, o.attributes);
      } finally {
        ntClose(o.handle);
      }
    });
  }
}
