// The NT API's numbers and structures as the Windows file modules use them (win32-nt.ts makes the
// calls): access rights, dispositions, options, information classes, reparse tags, the NTSTATUS
// values it meets and the errno Node gives each, and the x64 layouts of the structures crossed
// as Buffers. Values from the Windows SDK headers named beside each group; nothing here calls
// anything.

// Access rights (winnt.h; FILE_* in wdm.h).
export const FILE_READ_DATA = 0x0001; // FILE_LIST_DIRECTORY for a directory
export const FILE_LIST_DIRECTORY = 0x0001;
export const FILE_WRITE_DATA = 0x0002;
export const FILE_READ_EA = 0x0008;
export const FILE_TRAVERSE = 0x0020;
export const FILE_READ_ATTRIBUTES = 0x0080;
export const FILE_WRITE_ATTRIBUTES = 0x0100;
export const DELETE = 0x00010000;
export const READ_CONTROL = 0x00020000;
export const SYNCHRONIZE = 0x00100000;

// ShareAccess (wdm.h): never keep the user from reading, writing, renaming or deleting.
export const FILE_SHARE_ALL = 0x1 | 0x2 | 0x4; // FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE

// CreateDisposition (wdm.h).
export const FILE_OPEN = 1;
export const FILE_CREATE = 2;
export const FILE_OPEN_IF = 3;

// CreateOptions (wdm.h).
export const FILE_DIRECTORY_FILE = 0x00000001;
export const FILE_SYNCHRONOUS_IO_NONALERT = 0x00000020;
export const FILE_NON_DIRECTORY_FILE = 0x00000040;
export const FILE_OPEN_FOR_BACKUP_INTENT = 0x00004000;
export const FILE_OPEN_REPARSE_POINT = 0x00200000;

// OBJECT_ATTRIBUTES.Attributes (ntdef.h / wdm.h). OBJ_DONT_REPARSE: any reparse met while the
// name is parsed fails the open with STATUS_REPARSE_POINT_ENCOUNTERED (Windows 10 1803 and later;
// older systems ignore the bit, and FILE_OPEN_REPARSE_POINT plus the tag check still hold).
export const OBJ_CASE_INSENSITIVE = 0x00000040;
export const OBJ_DONT_REPARSE = 0x00001000;

// File attributes (winnt.h).
export const FILE_ATTRIBUTE_READONLY = 0x00000001;
export const FILE_ATTRIBUTE_DIRECTORY = 0x00000010;
export const FILE_ATTRIBUTE_NORMAL = 0x00000080;
export const FILE_ATTRIBUTE_REPARSE_POINT = 0x00000400;

// Reparse tags (winnt.h / ntifs.h). IsReparseTagNameSurrogate: bit 29.
export const NAME_SURROGATE_BIT = 0x20000000;
export const IO_REPARSE_TAG_MOUNT_POINT = 0xa0000003;
export const IO_REPARSE_TAG_SYMLINK = 0xa000000c;
export const SYMLINK_FLAG_RELATIVE = 0x00000001;
export const MAXIMUM_REPARSE_DATA_BUFFER_SIZE = 16 * 1024;
// CTL_CODE(FILE_DEVICE_FILE_SYSTEM, 41 / 42, METHOD_BUFFERED, FILE_ANY_ACCESS) (winioctl.h).
export const FSCTL_SET_REPARSE_POINT = 0x000900a4;
export const FSCTL_GET_REPARSE_POINT = 0x000900a8;

// FILE_INFORMATION_CLASS (wdm.h).
export const FileFullDirectoryInformation = 2;
export const FileBasicInformation = 4;
export const FileNameInformation = 9;
export const FileRenameInformation = 10;
export const FileDispositionInformation = 13;
export const FileAttributeTagInformation = 35;
export const FileNormalizedNameInformation = 48;
export const FileDispositionInformationEx = 64;
export const FileRenameInformationEx = 65;

// FILE_DISPOSITION_INFORMATION_EX.Flags (ntddk.h).
export const FILE_DISPOSITION_DELETE = 0x00000001;
export const FILE_DISPOSITION_POSIX_SEMANTICS = 0x00000002;
export const FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE = 0x00000010;
// FILE_RENAME_INFORMATION.Flags for FileRenameInformationEx (ntifs.h).
export const FILE_RENAME_REPLACE_IF_EXISTS = 0x00000001;
export const FILE_RENAME_POSIX_SEMANTICS = 0x00000002;
export const FILE_RENAME_IGNORE_READONLY_ATTRIBUTE = 0x00000040;

// NTSTATUS values (ntstatus.h). Negative as an i32 means error or warning; they are compared unsigned.
export const STATUS_BUFFER_OVERFLOW = 0x80000005;
export const STATUS_NO_MORE_FILES = 0x80000006;
export const STATUS_STOPPED_ON_SYMLINK = 0x8000002d;
export const STATUS_NOT_IMPLEMENTED = 0xc0000002;
export const STATUS_INVALID_INFO_CLASS = 0xc0000003;
export const STATUS_INFO_LENGTH_MISMATCH = 0xc0000004;
export const STATUS_INVALID_PARAMETER = 0xc000000d;
export const STATUS_INVALID_DEVICE_REQUEST = 0xc0000010;
export const STATUS_ACCESS_DENIED = 0xc0000022;
export const STATUS_OBJECT_NAME_INVALID = 0xc0000033;
export const STATUS_OBJECT_NAME_NOT_FOUND = 0xc0000034;
export const STATUS_OBJECT_NAME_COLLISION = 0xc0000035;
export const STATUS_OBJECT_PATH_NOT_FOUND = 0xc000003a;
export const STATUS_SHARING_VIOLATION = 0xc0000043;
export const STATUS_DELETE_PENDING = 0xc0000056;
export const STATUS_DISK_FULL = 0xc000007f;
export const STATUS_FILE_IS_A_DIRECTORY = 0xc00000ba;
export const STATUS_NOT_SUPPORTED = 0xc00000bb;
export const STATUS_NOT_SAME_DEVICE = 0xc00000d4;
export const STATUS_DIRECTORY_NOT_EMPTY = 0xc0000101;
export const STATUS_NOT_A_DIRECTORY = 0xc0000103;
export const STATUS_NAME_TOO_LONG = 0xc0000106;
export const STATUS_CANNOT_DELETE = 0xc0000121;
export const STATUS_PRIVILEGE_NOT_HELD = 0xc0000061;
export const STATUS_NOT_A_REPARSE_POINT = 0xc0000275;
export const STATUS_REPARSE_POINT_ENCOUNTERED = 0xc000050b;

/** What Node (libuv) would call each status, so callers written for beneath.ts see the same codes. */
export const ERRNO_OF: Record<number, string> = {
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
export const OBJECT_ATTRIBUTES_SIZE = 48;
export const UNICODE_STRING_SIZE = 16;
export const IO_STATUS_BLOCK_SIZE = 16;
export const RENAME_NAME_OFFSET = 20;
export const DIR_ENTRY_NAME_OFFSET = 68;
