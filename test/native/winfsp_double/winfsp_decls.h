// The WinFsp declarations the test double needs, written for the double from WinFsp's public
// headers as documentation (inc/winfsp/winfsp.h and inc/winfsp/fsctl.h, WinFsp 2026 Beta2 = v2.2B2,
// commit e7c7ccc). WinFsp's type, field and function names are kept so that a file system built
// against WinFsp's own header links against the double unchanged; the text and the layout checks
// are ours. Nothing here comes from shadowfs: this header must never include a project header,
// so that the double can disagree with the project's own declarations.
//
// Every size and offset below is pinned by static_assert to the value measured on x64 (see the
// research note for issue 28): a mistake here would make the double agree with a wrong caller.
#pragma once

#define WIN32_NO_STATUS
#include <windows.h>
#undef WIN32_NO_STATUS
#include <ntstatus.h>
#include <winternl.h>
#include <stddef.h>

#ifndef NT_SUCCESS
#define NT_SUCCESS(s) (((NTSTATUS)(s)) >= 0)
#endif

extern "C" {

// fsctl.h: sizes of the transact buffers.
enum : unsigned {
  FSP_FSCTL_TRANSACT_PATH_SIZEMAX = 1024 * sizeof(WCHAR),
  FSP_FSCTL_TRANSACT_REQ_SIZEMAX = 16 * 1024 - 64,
  FSP_FSCTL_TRANSACT_RSP_SIZEMAX = 16 * 1024,
  FSP_FSCTL_VOLUME_NAME_SIZEMAX = (64 + 192) * sizeof(WCHAR),
};

// fsctl.h FspFsctlTransact*Kind.
enum {
  FspFsctlTransactReservedKind = 0,
  FspFsctlTransactCreateKind,
  FspFsctlTransactOverwriteKind,
  FspFsctlTransactCleanupKind,
  FspFsctlTransactCloseKind,
  FspFsctlTransactReadKind,
  FspFsctlTransactWriteKind,
  FspFsctlTransactQueryInformationKind,
  FspFsctlTransactSetInformationKind,
  FspFsctlTransactQueryEaKind,
  FspFsctlTransactSetEaKind,
  FspFsctlTransactFlushBuffersKind,
  FspFsctlTransactQueryVolumeInformationKind,
  FspFsctlTransactSetVolumeInformationKind,
  FspFsctlTransactQueryDirectoryKind,
  FspFsctlTransactFileSystemControlKind,
  FspFsctlTransactDeviceControlKind,
  FspFsctlTransactShutdownKind,
  FspFsctlTransactLockControlKind,
  FspFsctlTransactQuerySecurityKind,
  FspFsctlTransactSetSecurityKind,
  FspFsctlTransactQueryStreamInformationKind,
  FspFsctlTransactKindCount,
};

// winfsp.h cleanup flags.
enum {
  FspCleanupDelete = 0x01,
  FspCleanupSetAllocationSize = 0x02,
  FspCleanupSetArchiveBit = 0x10,
  FspCleanupSetLastAccessTime = 0x20,
  FspCleanupSetLastWriteTime = 0x40,
  FspCleanupSetChangeTime = 0x80,
};

typedef enum {
  FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY_FINE = 0,
  FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY_COARSE,
} FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY;

// fsctl.h FSP_FSCTL_VOLUME_PARAMS (V1, 504 bytes; V0 ends at 456).
typedef struct {
  UINT16 Version;
  UINT16 SectorSize;
  UINT16 SectorsPerAllocationUnit;
  UINT16 MaxComponentLength;
  UINT64 VolumeCreationTime;
  UINT32 VolumeSerialNumber;
  UINT32 TransactTimeout;
  UINT32 IrpTimeout;
  UINT32 IrpCapacity;
  UINT32 FileInfoTimeout;
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
  WCHAR Prefix[192];
  WCHAR FileSystemName[16];
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
} FSP_FSCTL_VOLUME_PARAMS;

typedef struct {
  UINT64 TotalSize;
  UINT64 FreeSize;
  UINT16 VolumeLabelLength;
  WCHAR VolumeLabel[32];
} FSP_FSCTL_VOLUME_INFO;

typedef struct {
  UINT32 FileAttributes;
  UINT32 ReparseTag;
  UINT64 AllocationSize;
  UINT64 FileSize;
  UINT64 CreationTime;
  UINT64 LastAccessTime;
  UINT64 LastWriteTime;
  UINT64 ChangeTime;
  UINT64 IndexNumber;
  UINT32 HardLinks;
  UINT32 EaSize;
} FSP_FSCTL_FILE_INFO;

typedef struct {
  FSP_FSCTL_FILE_INFO FileInfo;
  PWSTR NormalizedName;
  UINT16 NormalizedNameSize;
} FSP_FSCTL_OPEN_FILE_INFO;

typedef struct {
  UINT16 Size;
  FSP_FSCTL_FILE_INFO FileInfo;
  union {
    UINT64 NextOffset;
    UINT8 Padding[24];
  };
  WCHAR FileNameBuf[];
} FSP_FSCTL_DIR_INFO;

typedef struct {
  UINT16 Size;
  UINT64 StreamSize;
  UINT64 StreamAllocationSize;
  WCHAR StreamNameBuf[];
} FSP_FSCTL_STREAM_INFO;

typedef struct {
  UINT16 Size;
  UINT32 Filter;
  UINT32 Action;
  WCHAR FileNameBuf[];
} FSP_FSCTL_NOTIFY_INFO;

typedef struct {
  UINT64 UserContext;
  UINT64 UserContext2;
} FSP_FSCTL_TRANSACT_FULL_CONTEXT;

typedef struct {
  UINT16 Offset;
  UINT16 Size;
} FSP_FSCTL_TRANSACT_BUF;

// The request the driver hands the DLL. Only the union members the double fills are spelt out;
// the union is 64 bytes (16..79) as in fsctl.h.
typedef struct {
  UINT16 Version;
  UINT16 Size;
  UINT32 Kind;
  UINT64 Hint;
  union {
    struct {
      UINT32 CreateOptions;
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
      UINT32 ReservedFlags : 24;  // 9 + 24 bits: spills into a second word, as in fsctl.h
      UINT16 NamedStream;
    } Create;
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
      UINT32 FileAttributes;
      UINT64 AllocationSize;
      UINT32 Supersede : 1;
      FSP_FSCTL_TRANSACT_BUF Ea;
    } Overwrite;
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
      UINT32 Delete : 1;
      UINT32 SetAllocationSize : 1;
      UINT32 SetArchiveBit : 1;
      UINT32 SetLastAccessTime : 1;
      UINT32 SetLastWriteTime : 1;
      UINT32 SetChangeTime : 1;
    } Cleanup;
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
    } Close;
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
      UINT64 Address;
      UINT64 Offset;
      UINT32 Length;
      UINT32 Key;
      UINT32 ConstrainedIo : 1;
    } Write;  // Read has the same first fields
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
      UINT32 FileInformationClass;
      union {
        struct { UINT64 AllocationSize; } Allocation;
        struct {
          UINT32 FileAttributes;
          UINT64 CreationTime, LastAccessTime, LastWriteTime, ChangeTime;
        } Basic;
        struct { UINT32 Delete : 1; } Disposition;
        struct { UINT32 Flags; } DispositionEx;
        struct { UINT64 FileSize; } EndOfFile;
        struct { FSP_FSCTL_TRANSACT_BUF NewFileName; UINT64 AccessToken; } Rename;
        struct { FSP_FSCTL_TRANSACT_BUF NewFileName; UINT64 AccessToken; UINT32 Flags; } RenameEx;
      } Info;
    } SetInformation;
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
      UINT64 Address;
      UINT32 Length;
      FSP_FSCTL_TRANSACT_BUF Pattern;
      FSP_FSCTL_TRANSACT_BUF Marker;
      UINT32 CaseSensitive : 1;
      UINT32 PatternIsFileName : 1;
    } QueryDirectory;
    struct {
      UINT64 UserContext;
      UINT64 UserContext2;
      UINT32 FsControlCode;
      FSP_FSCTL_TRANSACT_BUF Buffer;
      UINT16 TargetOnFileSystem;
    } FileSystemControl;
    UINT8 Raw[64];
  } Req;
  FSP_FSCTL_TRANSACT_BUF FileName;
  // MSVC honours WinFsp's __declspec(align(8)) here and puts Buffer at 88; MinGW GCC ignores
  // that spelling and would put it at 84 (pitfall P1 of the research note). The attribute GCC
  // understands restores WinFsp's real layout; the assert below keeps it so.
  __attribute__((aligned(8))) UINT8 Buffer[];
} FSP_FSCTL_TRANSACT_REQ;

typedef struct {
  UINT16 Version;
  UINT16 Size;
  UINT32 Kind;
  UINT64 Hint;
  struct {
    UINT32 Information;
    UINT32 Status;
  } IoStatus;
  union {
    union {
      struct {
        UINT64 UserContext;
        UINT64 UserContext2;
        UINT32 GrantedAccess;
        FSP_FSCTL_TRANSACT_BUF SecurityDescriptor;
        FSP_FSCTL_FILE_INFO FileInfo;
        FSP_FSCTL_TRANSACT_BUF FileName;
        UINT32 DisableCache : 1;
        UINT32 HasSecurityDescriptor : 1;
      } Opened;
      struct {
        FSP_FSCTL_TRANSACT_BUF Buffer;
      } Reparse;
    } Create;
    struct { FSP_FSCTL_FILE_INFO FileInfo; } Overwrite;
    UINT8 Raw[104];
  } Rsp;
  __attribute__((aligned(8))) UINT8 Buffer[];
} FSP_FSCTL_TRANSACT_RSP;

struct _FSP_FILE_SYSTEM;
typedef NTSTATUS FSP_FILE_SYSTEM_OPERATION_GUARD(struct _FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *,
                                                 FSP_FSCTL_TRANSACT_RSP *);
typedef NTSTATUS FSP_FILE_SYSTEM_OPERATION(struct _FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *,
                                           FSP_FSCTL_TRANSACT_RSP *);

// winfsp.h FSP_FILE_SYSTEM_INTERFACE: 64 pointer slots. The SetVolumeLabel slot is named with a
// trailing underscore because <windows.h> turns SetVolumeLabel into a macro.
typedef struct _FSP_FILE_SYSTEM_INTERFACE {
  NTSTATUS (*GetVolumeInfo)(struct _FSP_FILE_SYSTEM *, FSP_FSCTL_VOLUME_INFO *);
  NTSTATUS (*SetVolumeLabel_)(struct _FSP_FILE_SYSTEM *, PWSTR, FSP_FSCTL_VOLUME_INFO *);
  NTSTATUS (*GetSecurityByName)(struct _FSP_FILE_SYSTEM *, PWSTR FileName, PUINT32 PFileAttributes,
                                PSECURITY_DESCRIPTOR, SIZE_T *PSecurityDescriptorSize);
  NTSTATUS (*Create)(struct _FSP_FILE_SYSTEM *, PWSTR FileName, UINT32 CreateOptions, UINT32 GrantedAccess,
                     UINT32 FileAttributes, PSECURITY_DESCRIPTOR, UINT64 AllocationSize, PVOID *PFileContext,
                     FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*Open)(struct _FSP_FILE_SYSTEM *, PWSTR FileName, UINT32 CreateOptions, UINT32 GrantedAccess,
                   PVOID *PFileContext, FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*Overwrite)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, UINT32 FileAttributes,
                        BOOLEAN ReplaceFileAttributes, UINT64 AllocationSize, FSP_FSCTL_FILE_INFO *);
  VOID (*Cleanup)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR FileName, ULONG Flags);
  VOID (*Close)(struct _FSP_FILE_SYSTEM *, PVOID FileContext);
  NTSTATUS (*Read)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PVOID Buffer, UINT64 Offset, ULONG Length,
                   PULONG PBytesTransferred);
  NTSTATUS (*Write)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PVOID Buffer, UINT64 Offset, ULONG Length,
                    BOOLEAN WriteToEndOfFile, BOOLEAN ConstrainedIo, PULONG PBytesTransferred,
                    FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*Flush)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*GetFileInfo)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*SetBasicInfo)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, UINT32 FileAttributes,
                           UINT64 CreationTime, UINT64 LastAccessTime, UINT64 LastWriteTime, UINT64 ChangeTime,
                           FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*SetFileSize)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, UINT64 NewSize,
                          BOOLEAN SetAllocationSize, FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*CanDelete)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR FileName);
  NTSTATUS (*Rename)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR FileName, PWSTR NewFileName,
                     BOOLEAN ReplaceIfExists);
  NTSTATUS (*GetSecurity)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PSECURITY_DESCRIPTOR,
                          SIZE_T *PSecurityDescriptorSize);
  NTSTATUS (*SetSecurity)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, SECURITY_INFORMATION,
                          PSECURITY_DESCRIPTOR ModificationDescriptor);
  NTSTATUS (*ReadDirectory)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR Pattern, PWSTR Marker,
                            PVOID Buffer, ULONG Length, PULONG PBytesTransferred);
  NTSTATUS (*ResolveReparsePoints)(struct _FSP_FILE_SYSTEM *, PWSTR FileName, UINT32 ReparsePointIndex,
                                   BOOLEAN ResolveLastPathComponent, PIO_STATUS_BLOCK PIoStatus, PVOID Buffer,
                                   PSIZE_T PSize);
  NTSTATUS (*GetReparsePoint)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR FileName, PVOID Buffer,
                              PSIZE_T PSize);
  NTSTATUS (*SetReparsePoint)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR FileName, PVOID Buffer,
                              SIZE_T Size);
  NTSTATUS (*DeleteReparsePoint)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR FileName, PVOID Buffer,
                                 SIZE_T Size);
  NTSTATUS (*GetStreamInfo)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PVOID Buffer, ULONG Length,
                            PULONG PBytesTransferred);
  NTSTATUS (*GetDirInfoByName)(struct _FSP_FILE_SYSTEM *, PVOID ParentDirFileContext, PWSTR FileName,
                               FSP_FSCTL_DIR_INFO *);
  NTSTATUS (*Control)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, UINT32 ControlCode, PVOID InputBuffer,
                      ULONG InputBufferLength, PVOID OutputBuffer, ULONG OutputBufferLength,
                      PULONG PBytesTransferred);
  NTSTATUS (*SetDelete)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PWSTR FileName, BOOLEAN DeleteFile);
  NTSTATUS (*CreateEx)(struct _FSP_FILE_SYSTEM *, PWSTR FileName, UINT32 CreateOptions, UINT32 GrantedAccess,
                       UINT32 FileAttributes, PSECURITY_DESCRIPTOR, UINT64 AllocationSize, PVOID ExtraBuffer,
                       ULONG ExtraLength, BOOLEAN ExtraBufferIsReparsePoint, PVOID *PFileContext,
                       FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*OverwriteEx)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, UINT32 FileAttributes,
                          BOOLEAN ReplaceFileAttributes, UINT64 AllocationSize, PVOID Ea, ULONG EaLength,
                          FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*GetEa)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PVOID Ea, ULONG EaLength,
                    PULONG PBytesTransferred);
  NTSTATUS (*SetEa)(struct _FSP_FILE_SYSTEM *, PVOID FileContext, PVOID Ea, ULONG EaLength,
                    FSP_FSCTL_FILE_INFO *);
  NTSTATUS (*Obsolete0)(VOID);
  VOID (*DispatcherStopped)(struct _FSP_FILE_SYSTEM *, BOOLEAN Normally);
  NTSTATUS (*Reserved[31])();
} FSP_FILE_SYSTEM_INTERFACE;

typedef struct _FSP_FILE_SYSTEM {
  UINT16 Version;
  PVOID UserContext;
  WCHAR VolumeName[FSP_FSCTL_VOLUME_NAME_SIZEMAX / sizeof(WCHAR)];
  HANDLE VolumeHandle;
  FSP_FILE_SYSTEM_OPERATION_GUARD *EnterOperation, *LeaveOperation;
  FSP_FILE_SYSTEM_OPERATION *Operations[FspFsctlTransactKindCount];
  const FSP_FILE_SYSTEM_INTERFACE *Interface;
  HANDLE DispatcherThread;
  ULONG DispatcherThreadCount;
  NTSTATUS DispatcherResult;
  PWSTR MountPoint;
  HANDLE MountHandle;
  UINT32 DebugLog;
  FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY OpGuardStrategy;
  SRWLOCK OpGuardLock;
  BOOLEAN UmFileContextIsUserContext2, UmFileContextIsFullContext;
  UINT16 UmNoReparsePointsDirCheck : 1;
  UINT16 UmReservedFlags : 14;
  UINT16 DispatcherStopping : 1;
} FSP_FILE_SYSTEM;

typedef struct {
  FSP_FSCTL_TRANSACT_REQ *Request;
  FSP_FSCTL_TRANSACT_RSP *Response;
} FSP_FILE_SYSTEM_OPERATION_CONTEXT;

}  // extern "C"

// Layouts, as WinFsp's own asserts and the research note's measurements (x64) give them.
static_assert(sizeof(void *) == 8, "the double models the x64 DLL (winfsp-x64.dll)");
static_assert(sizeof(FSP_FSCTL_VOLUME_PARAMS) == 504, "fsctl.h: V1 volume params are 504 bytes");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, FileInfoTimeout) == 32, "");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, Prefix) == 40, "");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, FileSystemName) == 424, "");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, VolumeInfoTimeout) == 460, "");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, DirInfoTimeout) == 464, "");
static_assert(offsetof(FSP_FSCTL_VOLUME_PARAMS, Reserved64) == 488, "");
static_assert(sizeof(FSP_FSCTL_VOLUME_INFO) == 88, "");
static_assert(offsetof(FSP_FSCTL_VOLUME_INFO, VolumeLabel) == 18, "");
static_assert(sizeof(FSP_FSCTL_FILE_INFO) == 72, "");
static_assert(offsetof(FSP_FSCTL_FILE_INFO, IndexNumber) == 56, "");
static_assert(sizeof(FSP_FSCTL_OPEN_FILE_INFO) == 88, "");
static_assert(offsetof(FSP_FSCTL_OPEN_FILE_INFO, NormalizedName) == 72, "");
static_assert(offsetof(FSP_FSCTL_OPEN_FILE_INFO, NormalizedNameSize) == 80, "");
static_assert(sizeof(FSP_FSCTL_DIR_INFO) == 104, "");
static_assert(offsetof(FSP_FSCTL_DIR_INFO, FileInfo) == 8, "");
static_assert(offsetof(FSP_FSCTL_DIR_INFO, FileNameBuf) == 104, "");
static_assert(sizeof(FSP_FSCTL_STREAM_INFO) == 24, "");
static_assert(sizeof(FSP_FSCTL_NOTIFY_INFO) == 12, "");
static_assert(offsetof(FSP_FSCTL_NOTIFY_INFO, FileNameBuf) == 12, "");
static_assert(sizeof(FSP_FSCTL_TRANSACT_REQ) == 88, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req) == 16, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, FileName) == 80, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Buffer) == 88, "pitfall P1: MSVC puts Buffer at 88");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.Create.AccessToken) == 40, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.Create.DesiredAccess) == 48, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.Create.ShareAccess) == 56, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.Create.NamedStream) == 72, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.SetInformation.FileInformationClass) == 32, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.SetInformation.Info) == 40, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.SetInformation.Info.Rename.AccessToken) == 48, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.SetInformation.Info.RenameEx.Flags) == 56, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.QueryDirectory.Length) == 40, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.QueryDirectory.Pattern) == 44, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_REQ, Req.QueryDirectory.Marker) == 48, "");
static_assert(sizeof(FSP_FSCTL_TRANSACT_RSP) == 128, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_RSP, IoStatus) == 16, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_RSP, Rsp.Create.Opened.UserContext) == 24, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_RSP, Rsp.Create.Opened.GrantedAccess) == 40, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_RSP, Rsp.Create.Opened.FileInfo) == 48, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_RSP, Rsp.Create.Opened.FileName) == 120, "");
static_assert(offsetof(FSP_FSCTL_TRANSACT_RSP, Buffer) == 128, "");
static_assert(sizeof(FSP_FILE_SYSTEM_INTERFACE) == 64 * sizeof(void *), "");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, SetDelete) == 208, "");
static_assert(offsetof(FSP_FILE_SYSTEM_INTERFACE, DispatcherStopped) == 256, "");
static_assert(sizeof(FSP_FILE_SYSTEM) == 792, "winfsp.h: 792 bytes on x64");
static_assert(offsetof(FSP_FILE_SYSTEM, VolumeName) == 16, "");
static_assert(offsetof(FSP_FILE_SYSTEM, VolumeHandle) == 528, "");
static_assert(offsetof(FSP_FILE_SYSTEM, Operations) == 552, "");
static_assert(offsetof(FSP_FILE_SYSTEM, Interface) == 728, "");
static_assert(offsetof(FSP_FILE_SYSTEM, MountPoint) == 752, "");
static_assert(offsetof(FSP_FILE_SYSTEM, DebugLog) == 768, "");
static_assert(offsetof(FSP_FILE_SYSTEM, OpGuardStrategy) == 772, "");
static_assert(offsetof(FSP_FILE_SYSTEM, OpGuardLock) == 776, "");
static_assert(offsetof(FSP_FILE_SYSTEM, UmFileContextIsUserContext2) == 784, "");
static_assert(sizeof(FSP_FILE_SYSTEM_OPERATION_CONTEXT) == 16, "");
