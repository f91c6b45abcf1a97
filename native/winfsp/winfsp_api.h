// WinFsp's native API, declared by this project: exactly the types, constants and entry points
// the "winfsp" backend (winfsp_native.cc) uses, under WinFsp's own names so that a reader can
// hold each block against WinFsp's headers. None of WinFsp's files is part of this project.
//
// Read from github.com/winfsp/winfsp at commit e7c7ccc5 ("build: version 2026 Beta2", v2.2B2):
// inc/winfsp/fsctl.h and inc/winfsp/winfsp.h; the line numbers below are that version's. Every
// struct's size and the offsets the backend relies on are pinned by static_assert with the
// values measured on x64 (WinFsp's own asserts, plus a MinGW build of WinFsp's header run under
// wine; see the #28 research note). The entry points are resolved at run time
// (native/platform/win32_winfsp.cc): nothing here links against WinFsp.
//
// Calling convention: WinFsp's FSP_API has none of its own (winfsp.h:38-42), so every export
// and every interface callback is the platform default: on x64 the one Microsoft convention,
// which MinGW-w64 uses too.
#pragma once

#if !defined(_WIN32)
#error "winfsp_api.h is for Windows builds only"
#endif

#include <windows.h>
#include <winternl.h>  // IO_STATUS_BLOCK, NTSTATUS

#include <cstddef>
#include <cstdint>

namespace shadowfs {
namespace winfsp {

// ---- NTSTATUS values the backend returns or tests for (the values of Windows' ntstatus.h;
// kept here with their NT names minus STATUS_, as MinGW's ntstatus.h cannot be included beside
// <windows.h> without redefinitions). ----
namespace st {
constexpr NTSTATUS SUCCESS = 0;
constexpr NTSTATUS PENDING = 0x00000103;
constexpr NTSTATUS REPARSE = 0x00000104;
constexpr NTSTATUS BUFFER_OVERFLOW = static_cast<NTSTATUS>(0x80000005);
constexpr NTSTATUS NO_MORE_FILES = static_cast<NTSTATUS>(0x80000006);
constexpr NTSTATUS INVALID_PARAMETER = static_cast<NTSTATUS>(0xC000000D);
constexpr NTSTATUS INVALID_DEVICE_REQUEST = static_cast<NTSTATUS>(0xC0000010);
constexpr NTSTATUS END_OF_FILE = static_cast<NTSTATUS>(0xC0000011);
constexpr NTSTATUS ACCESS_DENIED = static_cast<NTSTATUS>(0xC0000022);
constexpr NTSTATUS BUFFER_TOO_SMALL = static_cast<NTSTATUS>(0xC0000023);
constexpr NTSTATUS OBJECT_NAME_INVALID = static_cast<NTSTATUS>(0xC0000033);
constexpr NTSTATUS OBJECT_NAME_NOT_FOUND = static_cast<NTSTATUS>(0xC0000034);
constexpr NTSTATUS OBJECT_NAME_COLLISION = static_cast<NTSTATUS>(0xC0000035);
constexpr NTSTATUS OBJECT_PATH_NOT_FOUND = static_cast<NTSTATUS>(0xC000003A);
constexpr NTSTATUS SHARING_VIOLATION = static_cast<NTSTATUS>(0xC0000043);
constexpr NTSTATUS DISK_FULL = static_cast<NTSTATUS>(0xC000007F);
constexpr NTSTATUS INSUFFICIENT_RESOURCES = static_cast<NTSTATUS>(0xC000009A);
// STATUS_MEDIA_WRITE_PROTECTED (winioctl.h has a macro MEDIA_WRITE_PROTECTED of its own).
constexpr NTSTATUS WRITE_PROTECTED = static_cast<NTSTATUS>(0xC00000A2);
constexpr NTSTATUS FILE_IS_A_DIRECTORY = static_cast<NTSTATUS>(0xC00000BA);
constexpr NTSTATUS NOT_SUPPORTED = static_cast<NTSTATUS>(0xC00000BB);
constexpr NTSTATUS NETWORK_ACCESS_DENIED = static_cast<NTSTATUS>(0xC00000CA);
constexpr NTSTATUS NOT_SAME_DEVICE = static_cast<NTSTATUS>(0xC00000D4);
constexpr NTSTATUS CANT_WAIT = static_cast<NTSTATUS>(0xC00000D8);
constexpr NTSTATUS UNEXPECTED_IO_ERROR = static_cast<NTSTATUS>(0xC00000E9);
constexpr NTSTATUS DIRECTORY_NOT_EMPTY = static_cast<NTSTATUS>(0xC0000101);
constexpr NTSTATUS NOT_A_DIRECTORY = static_cast<NTSTATUS>(0xC0000103);
constexpr NTSTATUS NAME_TOO_LONG = static_cast<NTSTATUS>(0xC0000106);
constexpr NTSTATUS CANNOT_DELETE = static_cast<NTSTATUS>(0xC0000121);
constexpr NTSTATUS FILE_DELETED = static_cast<NTSTATUS>(0xC0000123);
constexpr NTSTATUS IO_DEVICE_ERROR = static_cast<NTSTATUS>(0xC0000185);
constexpr NTSTATUS NOT_A_REPARSE_POINT = static_cast<NTSTATUS>(0xC0000275);
constexpr NTSTATUS IO_REPARSE_TAG_MISMATCH = static_cast<NTSTATUS>(0xC0000277);
constexpr NTSTATUS IO_REPARSE_DATA_INVALID = static_cast<NTSTATUS>(0xC0000278);
constexpr NTSTATUS REPARSE_POINT_NOT_RESOLVED = static_cast<NTSTATUS>(0xC0000280);
}  // namespace st

// NtCreateFile's CreateOptions bits WinFsp passes through (the low 24 bits; the disposition is
// in the high 8: fsctl.h:348). Values of Windows' winternl.h / wdm.h.
constexpr UINT32 kFileDirectoryFile = 0x00000001;
constexpr UINT32 kFileNonDirectoryFile = 0x00000040;
constexpr UINT32 kFileDeleteOnClose = 0x00001000;
constexpr UINT32 kFileOpenReparsePoint = 0x00200000;

// ---- fsctl.h:46-53, 86-89, 136, 174-183: names and sizes. ----
#define FSP_FSCTL_DISK_DEVICE_NAME_W L"WinFsp.Disk"  // fsctl.h:52 (FSP_FSCTL_DISK_DEVICE_NAME)
#define FSP_FSCTL_NET_DEVICE_NAME_W L"WinFsp.Net"    // fsctl.h:53 (FSP_FSCTL_NET_DEVICE_NAME)
constexpr size_t FSP_FSCTL_DEFAULT_ALIGNMENT = 8;                // fsctl.h:87
constexpr size_t FSP_FSCTL_TRANSACT_PATH_SIZEMAX = 1024 * 2;     // fsctl.h:136, bytes
constexpr size_t FSP_FSCTL_VOLUME_NAME_SIZEMAX = (64 + 192) * 2; // fsctl.h (VOLUME_NAME_SIZE + PREFIX_SIZE)
constexpr size_t FSP_FSCTL_TRANSACT_RSP_BUFFER_SIZEMAX = 16384 - 128;
constexpr unsigned FspFsctlTransactKindCount = 22;  // fsctl.h:155-180, the count entry

// ---- fsctl.h:194-269: FSP_FSCTL_VOLUME_PARAMS (V0 fields, then V1 fields). Bit fields are
// declared in WinFsp's order, least significant bit first; the unit test checks the bits the
// backend sets land where the research note measured them. ----
struct FSP_FSCTL_VOLUME_PARAMS {
  UINT16 Version;  // 0 (V0) or sizeof(FSP_FSCTL_VOLUME_PARAMS)
  UINT16 SectorSize;
  UINT16 SectorsPerAllocationUnit;
  UINT16 MaxComponentLength;  // the driver counts WCHARs (research note §2.1)
  UINT64 VolumeCreationTime;
  UINT32 VolumeSerialNumber;
  UINT32 TransactTimeout;
  UINT32 IrpTimeout;
  UINT32 IrpCapacity;
  UINT32 FileInfoTimeout;  // ms
  UINT32 CaseSensitiveSearch : 1;
  UINT32 CasePreservedNames : 1;
  UINT32 UnicodeOnDisk : 1;
  UINT32 PersistentAcls : 1;
  UINT32 ReparsePoints : 1;
  UINT32 ReparsePointsAccessCheck : 1;
  UINT32 NamedStreams : 1;
  UINT32 HardLinks : 1;
  UINT32 ExtendedAttributes : 1;
  UINT32 ReadOnlyVolume : 1;
  UINT32 PostCleanupWhenModifiedOnly : 1;
  UINT32 PassQueryDirectoryPattern : 1;
  UINT32 AlwaysUseDoubleBuffering : 1;
  UINT32 PassQueryDirectoryFileName : 1;
  UINT32 FlushAndPurgeOnCleanup : 1;
  UINT32 DeviceControl : 1;
  UINT32 UmFileContextIsUserContext2 : 1;
  UINT32 UmFileContextIsFullContext : 1;
  UINT32 UmNoReparsePointsDirCheck : 1;
  UINT32 UmReservedFlags : 5;
  UINT32 AllowOpenInKernelMode : 1;
  UINT32 CasePreservedExtendedAttributes : 1;
  UINT32 WslFeatures : 1;
  UINT32 DirectoryMarkerAsNextOffset : 1;
  UINT32 RejectIrpPriorToTransact0 : 1;
  UINT32 SupportsPosixUnlinkRename : 1;
  UINT32 PostDispositionWhenNecessaryOnly : 1;
  UINT32 KmReservedFlags : 1;
  WCHAR Prefix[192];         // \server\share, network volumes only
  WCHAR FileSystemName[16];
  // V1 (valid only with Version == sizeof):
  UINT32 VolumeInfoTimeoutValid : 1;
  UINT32 DirInfoTimeoutValid : 1;
  UINT32 SecurityTimeoutValid : 1;
  UINT32 StreamInfoTimeoutValid : 1;
  UINT32 EaTimeoutValid : 1;
  UINT32 KmAdditionalReservedFlags : 27;
  UINT32 VolumeInfoTimeout;
  UINT32 DirInfoTimeout;
  UINT32 SecurityTimeout;
  UINT32 StreamInfoTimeout;
  UINT32 EaTimeout;
  UINT32 FsextControlCode;
  UINT32 Reserved32[1];
  UINT64 Reserved64[2];
};
static_assert(sizeof(FSP_FSCTL_VOLUME_PARAMS) == 504, "fsctl.h:268");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, VolumeCreationTime) == 8, "research note §2.1");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, FileInfoTimeout) == 32, "research note §2.1");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, Prefix) == 40, "research note §2.1");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, FileSystemName) == 424, "research note §2.1");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, VolumeInfoTimeout) == 460, "research note §2.1");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, DirInfoTimeout) == 464, "research note §2.1");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, Reserved64) == 488, "research note §2.1");
// The other fields, in the order fsctl.h:194-269 declares them (2026 Beta2, e7c7ccc5), with x64
// alignment; the bit fields (no offsetof) are checked by the unit test named above.
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, Version) == 0, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, SectorSize) == 2, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, SectorsPerAllocationUnit) == 4, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, MaxComponentLength) == 6, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, VolumeSerialNumber) == 16, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, TransactTimeout) == 20, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, IrpTimeout) == 24, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, IrpCapacity) == 28, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, SecurityTimeout) == 468, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, StreamInfoTimeout) == 472, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, EaTimeout) == 476, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, FsextControlCode) == 480, "fsctl.h:194-269, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, Reserved32) == 484, "fsctl.h:194-269, field order");

// ---- fsctl.h:270-278 ----
struct FSP_FSCTL_VOLUME_INFO {
  UINT64 TotalSize;
  UINT64 FreeSize;
  UINT16 VolumeLabelLength;  // bytes
  WCHAR VolumeLabel[32];
};
static_assert(sizeof(FSP_FSCTL_VOLUME_INFO) == 88, "fsctl.h:277");
static_assert(offsetof(FSP_FSCTL_VOLUME_INFO, VolumeLabel) == 18, "research note §2.5");
static_assert(offsetof(FSP_FSCTL_VOLUME_INFO, TotalSize) == 0, "fsctl.h:270-278, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_INFO, FreeSize) == 8, "fsctl.h:270-278, field order");
static_assert(offsetof(FSP_FSCTL_VOLUME_INFO, VolumeLabelLength) == 16, "fsctl.h:270-278, field order");

// ---- fsctl.h:279-294. Times are FILETIME values (100 ns since 1601). ----
struct FSP_FSCTL_FILE_INFO {
  UINT32 FileAttributes;
  UINT32 ReparseTag;
  UINT64 AllocationSize;
  UINT64 FileSize;
  UINT64 CreationTime;
  UINT64 LastAccessTime;
  UINT64 LastWriteTime;
  UINT64 ChangeTime;
  UINT64 IndexNumber;  // the file ID the driver reports
  UINT32 HardLinks;    // unimplemented by WinFsp: 0
  UINT32 EaSize;
};
static_assert(sizeof(FSP_FSCTL_FILE_INFO) == 72, "fsctl.h:293");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, CreationTime) == 24, "research note §2.2");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, IndexNumber) == 56, "research note §2.2");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, EaSize) == 68, "research note §2.2");
// The other fields, in the order fsctl.h:279-294 declares them (2026 Beta2, e7c7ccc5), x64.
static_assert(offsetof(FSP_FSCTL_FILE_INFO, FileAttributes) == 0, "fsctl.h:279-294, field order");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, ReparseTag) == 4, "fsctl.h:279-294, field order");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, AllocationSize) == 8, "fsctl.h:279-294, field order");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, FileSize) == 16, "fsctl.h:279-294, field order");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, LastAccessTime) == 32, "fsctl.h:279-294, field order");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, LastWriteTime) == 40, "fsctl.h:279-294, field order");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, ChangeTime) == 48, "fsctl.h:279-294, field order");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, HardLinks) == 64, "fsctl.h:279-294, field order");

// ---- fsctl.h:295-300. What the FileInfo argument of Create/Open really points at. ----
struct FSP_FSCTL_OPEN_FILE_INFO {
  FSP_FSCTL_FILE_INFO FileInfo;
  PWSTR NormalizedName;       // the response buffer; the FS may write the case-correct name
  UINT16 NormalizedNameSize;  // in: capacity in bytes; out: bytes written (no terminator)
};
static_assert(sizeof(FSP_FSCTL_OPEN_FILE_INFO) == 88, "research note §2.3");
static_assert(offsetof(FSP_FSCTL_OPEN_FILE_INFO, NormalizedName) == 72, "research note §2.3");
static_assert(offsetof(FSP_FSCTL_OPEN_FILE_INFO, NormalizedNameSize) == 80, "research note §2.3");
static_assert(offsetof(FSP_FSCTL_OPEN_FILE_INFO, FileInfo) == 0, "fsctl.h:295-300, field order");

// ---- fsctl.h:301-314. A directory entry: the fixed part, then the name without terminator;
// entries are packed at FSP_FSCTL_DEFAULT_ALIGNMENT. ----
struct FSP_FSCTL_DIR_INFO {
  UINT16 Size;  // sizeof(FSP_FSCTL_DIR_INFO) + name bytes
  FSP_FSCTL_FILE_INFO FileInfo;
  union {
    UINT64 NextOffset;
    UINT8 Padding[24];  // makes the struct as big as FILE_ID_BOTH_DIR_INFORMATION
  };
  // WCHAR FileNameBuf[] follows at offset 104.
};
static_assert(sizeof(FSP_FSCTL_DIR_INFO) == 104, "fsctl.h:313");
static_assert(offsetof(FSP_FSCTL_DIR_INFO, FileInfo) == 8, "research note §2.4");
static_assert(offsetof(FSP_FSCTL_DIR_INFO, NextOffset) == 80, "research note §2.4");
static_assert(offsetof(FSP_FSCTL_DIR_INFO, Size) == 0, "fsctl.h:301-314, field order");
static_assert(offsetof(FSP_FSCTL_DIR_INFO, Padding) == 80, "fsctl.h:301-314, field order");

// ---- fsctl.h:322-332. One change record for FspFileSystemNotify; the name (no terminator)
// follows at offset 12; records are packed at FSP_FSCTL_DEFAULT_ALIGNMENT. ----
struct FSP_FSCTL_NOTIFY_INFO {
  UINT16 Size;  // 12 + name bytes
  UINT32 Filter;  // FILE_NOTIFY_CHANGE_*
  UINT32 Action;  // FILE_ACTION_*
};
static_assert(sizeof(FSP_FSCTL_NOTIFY_INFO) == 12, "fsctl.h:331");
static_assert(offsetof(FSP_FSCTL_NOTIFY_INFO, Filter) == 4, "research note §2.6");
static_assert(offsetof(FSP_FSCTL_NOTIFY_INFO, Action) == 8, "research note §2.6");
static_assert(offsetof(FSP_FSCTL_NOTIFY_INFO, Size) == 0, "fsctl.h:322-332, field order");

// ---- fsctl.h:338-342 ----
struct FSP_FSCTL_TRANSACT_BUF {
  UINT16 Offset;
  UINT16 Size;
};
static_assert(sizeof(FSP_FSCTL_TRANSACT_BUF) == 4, "fsctl.h:338-342");
static_assert(offsetof(FSP_FSCTL_TRANSACT_BUF, Offset) == 0, "fsctl.h:338-342, field order");
static_assert(offsetof(FSP_FSCTL_TRANSACT_BUF, Size) == 2, "fsctl.h:338-342, field order");

// ---- fsctl.h:343-542: the request the DLL hands to callbacks (through
// FspFileSystemGetOperationContext). Only the two variants of the Req union the backend reads
// are spelled out; the rest of the 64-byte union is padding. ----
struct FSP_FSCTL_TRANSACT_REQ {
  UINT16 Version;
  UINT16 Size;
  UINT32 Kind;
  UINT64 Hint;
  union {
    struct {
      UINT32 CreateOptions;  // disposition in the high 8 bits
      UINT32 FileAttributes;
      FSP_FSCTL_TRANSACT_BUF SecurityDescriptor;
      UINT64 AllocationSize;
      UINT64 AccessToken;
      UINT32 DesiredAccess;
      UINT32 GrantedAccess;
      UINT32 ShareAccess;
      FSP_FSCTL_TRANSACT_BUF Ea;
      UINT32 UserMode : 1;
      UINT32 HasTraversePrivilege : 1;
      UINT32 HasBackupPrivilege : 1;
      UINT32 HasRestorePrivilege : 1;
      UINT32 OpenTargetDirectory : 1;
      UINT32 CaseSensitive : 1;
      UINT32 HasTrailingBackslash : 1;
      UINT32 AcceptsSecurityDescriptor : 1;
      UINT32 EaIsReparsePoint : 1;
      UINT32 ReservedFlags : 24;  // 33 bits in all: this one spills into a second word
      UINT16 NamedStream;
    } Create;
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
      UINT32 FileInformationClass;
      union {
        struct {
          UINT32 Flags;  // FILE_DISPOSITION_* (class 64)
        } DispositionEx;
        struct {
          FSP_FSCTL_TRANSACT_BUF NewFileName;
          UINT64 AccessToken;
          UINT32 Flags;  // FILE_RENAME_* (class 65; the driver stores it for class 10 too)
        } RenameEx;
        UINT8 Space[24];
      } Info;
    } SetInformation;
    UINT8 Space[64];
  } Req;
  FSP_FSCTL_TRANSACT_BUF FileName;
  // WinFsp declares Buffer with __declspec(align(8)), which GCC ignores: compiled by MinGW from
  // WinFsp's header it lands at 84, while the real (MSVC-built) DLL puts it at 88 (research
  // note §2.9, pitfall P1). GCC's own attribute gives the DLL's layout.
  __attribute__((aligned(8))) UINT8 Buffer[];
};
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req) == 16, "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.Create.AccessToken) == 40, "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.Create.DesiredAccess) == 48, "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.Create.NamedStream) == 72, "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.SetInformation.FileInformationClass) == 32,
              "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.SetInformation.Info) == 40, "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.SetInformation.Info.RenameEx.Flags) == 56,
              "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, FileName) == 80, "research note §2.9");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Buffer) == 88, "research note §2.9, pitfall P1");
static_assert(sizeof(FSP_FSCTL_TRANSACT_REQ) == 88, "fsctl.h:542");
constexpr UINT32 FspFsctlTransactCreateKind = 1;          // fsctl.h:157
constexpr UINT32 FspFsctlTransactSetInformationKind = 8;  // fsctl.h:164

// The response is only ever passed on by the backend, never read.
struct FSP_FSCTL_TRANSACT_RSP;

// ---- winfsp.h:114-160: the file system object, operation types, cleanup flags. ----
struct FSP_FILE_SYSTEM;
struct FSP_FILE_SYSTEM_INTERFACE;
typedef NTSTATUS FSP_FILE_SYSTEM_OPERATION_GUARD(FSP_FILE_SYSTEM*, FSP_FSCTL_TRANSACT_REQ*,
                                                 FSP_FSCTL_TRANSACT_RSP*);
typedef NTSTATUS FSP_FILE_SYSTEM_OPERATION(FSP_FILE_SYSTEM*, FSP_FSCTL_TRANSACT_REQ*,
                                           FSP_FSCTL_TRANSACT_RSP*);
enum FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY : int {
  FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY_FINE = 0,
  FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY_COARSE = 1,
};
static_assert(sizeof(FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY) == 4, "winfsp.h:144-148");
enum : ULONG {
  FspCleanupDelete = 0x01,
  FspCleanupSetAllocationSize = 0x02,
  FspCleanupSetArchiveBit = 0x10,
  FspCleanupSetLastAccessTime = 0x20,
  FspCleanupSetLastWriteTime = 0x40,
  FspCleanupSetChangeTime = 0x80,
};

// ---- winfsp.h:193-1095: the interface table, 64 pointer slots (512 bytes on x64). Slot
// order is the ABI: every slot is listed, the unused ones with their WinFsp names. The EA
// slots take PFILE_FULL_EA_INFORMATION in WinFsp (a kernel type): PVOID here, the same size.
// <windows.h> maps SetVolumeLabel to SetVolumeLabelW as a macro; the field is spelled
// SetVolumeLabel_ here so no macro rewrites it. ----
using FileContextT = PVOID;
struct FSP_FILE_SYSTEM_INTERFACE {
  NTSTATUS (*GetVolumeInfo)(FSP_FILE_SYSTEM*, FSP_FSCTL_VOLUME_INFO*);
  NTSTATUS (*SetVolumeLabel_)(FSP_FILE_SYSTEM*, PWSTR, FSP_FSCTL_VOLUME_INFO*);
  NTSTATUS (*GetSecurityByName)(FSP_FILE_SYSTEM*, PWSTR FileName, PUINT32 PFileAttributes,
                                PSECURITY_DESCRIPTOR, SIZE_T* PSecurityDescriptorSize);
  NTSTATUS (*Create)(FSP_FILE_SYSTEM*, PWSTR FileName, UINT32 CreateOptions, UINT32 GrantedAccess,
                     UINT32 FileAttributes, PSECURITY_DESCRIPTOR, UINT64 AllocationSize,
                     PVOID* PFileContext, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*Open)(FSP_FILE_SYSTEM*, PWSTR FileName, UINT32 CreateOptions, UINT32 GrantedAccess,
                   PVOID* PFileContext, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*Overwrite)(FSP_FILE_SYSTEM*, PVOID FileContext, UINT32 FileAttributes,
                        BOOLEAN ReplaceFileAttributes, UINT64 AllocationSize, FSP_FSCTL_FILE_INFO*);
  VOID (*Cleanup)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR FileName, ULONG Flags);
  VOID (*Close)(FSP_FILE_SYSTEM*, PVOID FileContext);
  NTSTATUS (*Read)(FSP_FILE_SYSTEM*, PVOID FileContext, PVOID Buffer, UINT64 Offset, ULONG Length,
                   PULONG PBytesTransferred);
  NTSTATUS (*Write)(FSP_FILE_SYSTEM*, PVOID FileContext, PVOID Buffer, UINT64 Offset, ULONG Length,
                    BOOLEAN WriteToEndOfFile, BOOLEAN ConstrainedIo, PULONG PBytesTransferred,
                    FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*Flush)(FSP_FILE_SYSTEM*, PVOID FileContext, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*GetFileInfo)(FSP_FILE_SYSTEM*, PVOID FileContext, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*SetBasicInfo)(FSP_FILE_SYSTEM*, PVOID FileContext, UINT32 FileAttributes,
                           UINT64 CreationTime, UINT64 LastAccessTime, UINT64 LastWriteTime,
                           UINT64 ChangeTime, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*SetFileSize)(FSP_FILE_SYSTEM*, PVOID FileContext, UINT64 NewSize,
                          BOOLEAN SetAllocationSize, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*CanDelete)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR FileName);
  NTSTATUS (*Rename)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR FileName, PWSTR NewFileName,
                     BOOLEAN ReplaceIfExists);
  NTSTATUS (*GetSecurity)(FSP_FILE_SYSTEM*, PVOID FileContext, PSECURITY_DESCRIPTOR,
                          SIZE_T* PSecurityDescriptorSize);
  NTSTATUS (*SetSecurity)(FSP_FILE_SYSTEM*, PVOID FileContext, SECURITY_INFORMATION,
                          PSECURITY_DESCRIPTOR ModificationDescriptor);
  NTSTATUS (*ReadDirectory)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR Pattern, PWSTR Marker,
                            PVOID Buffer, ULONG Length, PULONG PBytesTransferred);
  NTSTATUS (*ResolveReparsePoints)(FSP_FILE_SYSTEM*, PWSTR FileName, UINT32 ReparsePointIndex,
                                   BOOLEAN ResolveLastPathComponent, PIO_STATUS_BLOCK PIoStatus,
                                   PVOID Buffer, PSIZE_T PSize);
  NTSTATUS (*GetReparsePoint)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR FileName, PVOID Buffer,
                              PSIZE_T PSize);
  NTSTATUS (*SetReparsePoint)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR FileName, PVOID Buffer,
                              SIZE_T Size);
  NTSTATUS (*DeleteReparsePoint)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR FileName, PVOID Buffer,
                                 SIZE_T Size);
  NTSTATUS (*GetStreamInfo)(FSP_FILE_SYSTEM*, PVOID FileContext, PVOID Buffer, ULONG Length,
                            PULONG PBytesTransferred);
  NTSTATUS (*GetDirInfoByName)(FSP_FILE_SYSTEM*, PVOID ParentDirFileContext, PWSTR FileName,
                               FSP_FSCTL_DIR_INFO*);
  NTSTATUS (*Control)(FSP_FILE_SYSTEM*, PVOID FileContext, UINT32 ControlCode, PVOID InputBuffer,
                      ULONG InputBufferLength, PVOID OutputBuffer, ULONG OutputBufferLength,
                      PULONG PBytesTransferred);
  NTSTATUS (*SetDelete)(FSP_FILE_SYSTEM*, PVOID FileContext, PWSTR FileName, BOOLEAN DeleteFile);
  NTSTATUS (*CreateEx)(FSP_FILE_SYSTEM*, PWSTR FileName, UINT32 CreateOptions, UINT32 GrantedAccess,
                       UINT32 FileAttributes, PSECURITY_DESCRIPTOR, UINT64 AllocationSize,
                       PVOID ExtraBuffer, ULONG ExtraLength, BOOLEAN ExtraBufferIsReparsePoint,
                       PVOID* PFileContext, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*OverwriteEx)(FSP_FILE_SYSTEM*, PVOID FileContext, UINT32 FileAttributes,
                          BOOLEAN ReplaceFileAttributes, UINT64 AllocationSize, PVOID Ea,
                          ULONG EaLength, FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*GetEa)(FSP_FILE_SYSTEM*, PVOID FileContext, PVOID Ea, ULONG EaLength,
                    PULONG PBytesTransferred);
  NTSTATUS (*SetEa)(FSP_FILE_SYSTEM*, PVOID FileContext, PVOID Ea, ULONG EaLength,
                    FSP_FSCTL_FILE_INFO*);
  NTSTATUS (*Obsolete0)(VOID);
  VOID (*DispatcherStopped)(FSP_FILE_SYSTEM*, BOOLEAN Normally);
  NTSTATUS (*Reserved[31])();
};
static_assert(sizeof(FSP_FILE_SYSTEM_INTERFACE) == 64 * sizeof(void*), "winfsp.h:193-1095");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, Cleanup) == 48, "research note §2.8");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, CanDelete) == 112, "research note §2.8");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, ReadDirectory) == 144, "research note §2.8");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, GetDirInfoByName) == 192, "research note §2.8");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, SetDelete) == 208, "research note §2.8");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, CreateEx) == 216, "research note §2.8");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, DispatcherStopped) == 256, "research note §2.8");

// ---- winfsp.h:1096-1121: the file system object the DLL allocates. The backend reads
// UserContext (its own pointer) and MountPoint (FspFileSystemMountPoint is inline, winfsp.h:1879). ----
struct FSP_FILE_SYSTEM {
  UINT16 Version;
  PVOID UserContext;
  WCHAR VolumeName[FSP_FSCTL_VOLUME_NAME_SIZEMAX / sizeof(WCHAR)];
  HANDLE VolumeHandle;
  FSP_FILE_SYSTEM_OPERATION_GUARD* EnterOperation;
  FSP_FILE_SYSTEM_OPERATION_GUARD* LeaveOperation;
  FSP_FILE_SYSTEM_OPERATION* Operations[FspFsctlTransactKindCount];
  const FSP_FILE_SYSTEM_INTERFACE* Interface;
  HANDLE DispatcherThread;
  ULONG DispatcherThreadCount;
  NTSTATUS DispatcherResult;
  PWSTR MountPoint;
  HANDLE MountHandle;
  UINT32 DebugLog;
  FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY OpGuardStrategy;
  SRWLOCK OpGuardLock;
  BOOLEAN UmFileContextIsUserContext2;
  BOOLEAN UmFileContextIsFullContext;
  UINT16 UmNoReparsePointsDirCheck : 1;
  UINT16 UmReservedFlags : 14;
  UINT16 DispatcherStopping : 1;
};
static_assert(sizeof(FSP_FILE_SYSTEM) == 792, "winfsp.h:1118-1121");
static_assert(offsetof(FSP_FILE_SYSTEM, UserContext) == 8, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM, VolumeHandle) == 528, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM, Operations) == 552, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM, Interface) == 728, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM, DispatcherResult) == 748, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM, MountPoint) == 752, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM, OpGuardStrategy) == 772, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM, UmFileContextIsUserContext2) == 784, "research note §2.7");

// ---- winfsp.h:1122-1126 ----
struct FSP_FILE_SYSTEM_OPERATION_CONTEXT {
  FSP_FSCTL_TRANSACT_REQ* Request;
  FSP_FSCTL_TRANSACT_RSP* Response;
};
static_assert(sizeof(FSP_FILE_SYSTEM_OPERATION_CONTEXT) == 16, "research note §2.7");
static_assert(offsetof(FSP_FILE_SYSTEM_OPERATION_CONTEXT, Request) == 0, "winfsp.h:1122-1126, field order");
static_assert(offsetof(FSP_FILE_SYSTEM_OPERATION_CONTEXT, Response) == 8, "winfsp.h:1122-1126, field order");

// ---- Exported functions the backend resolves by name (winfsp.h lines given per entry). Each
// alias is the function's type; win32_winfsp.cc lists the names it resolves. ----
typedef NTSTATUS GetReparsePointByNameFn(FSP_FILE_SYSTEM*, PVOID Context, PWSTR FileName,
                                         BOOLEAN IsDirectory, PVOID Buffer, PSIZE_T PSize);
namespace fn {
// winfsp.h:1157
using FspFileSystemCreate = NTSTATUS(PWSTR DevicePath, const FSP_FSCTL_VOLUME_PARAMS*,
                                     const FSP_FILE_SYSTEM_INTERFACE*, FSP_FILE_SYSTEM**);
// winfsp.h:1167
using FspFileSystemDelete = VOID(FSP_FILE_SYSTEM*);
// winfsp.h:1188
using FspFileSystemSetMountPointEx = NTSTATUS(FSP_FILE_SYSTEM*, PWSTR MountPoint,
                                              PSECURITY_DESCRIPTOR);
// winfsp.h:1196
using FspFileSystemRemoveMountPoint = VOID(FSP_FILE_SYSTEM*);
// winfsp.h:1212
using FspFileSystemStartDispatcher = NTSTATUS(FSP_FILE_SYSTEM*, ULONG ThreadCount);
// winfsp.h:1219
using FspFileSystemStopDispatcher = VOID(FSP_FILE_SYSTEM*);
// winfsp.h:1262
using FspFileSystemNotifyBegin = NTSTATUS(FSP_FILE_SYSTEM*, ULONG Timeout);
// winfsp.h:1277
using FspFileSystemNotifyEnd = NTSTATUS(FSP_FILE_SYSTEM*);
// winfsp.h:1306
using FspFileSystemNotify = NTSTATUS(FSP_FILE_SYSTEM*, FSP_FSCTL_NOTIFY_INFO*, SIZE_T Size);
// winfsp.h:1318
using FspFileSystemGetOperationContext = FSP_FILE_SYSTEM_OPERATION_CONTEXT*(VOID);
// winfsp.h:1374 (the exported twin of the inline FspFileSystemSetOperationGuardStrategy)
using FspFileSystemSetOperationGuardStrategyF = VOID(FSP_FILE_SYSTEM*,
                                                     FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY);
// winfsp.h:1648
using FspFileSystemResolveReparsePoints = NTSTATUS(FSP_FILE_SYSTEM*, GetReparsePointByNameFn*,
                                                   PVOID Context, PWSTR FileName,
                                                   UINT32 ReparsePointIndex,
                                                   BOOLEAN ResolveLastPathComponent,
                                                   PIO_STATUS_BLOCK PIoStatus, PVOID Buffer,
                                                   PSIZE_T PSize);
// winfsp.h:2162
using FspWin32FromNtStatus = DWORD(NTSTATUS);
}  // namespace fn

}  // namespace winfsp
}  // namespace shadowfs
