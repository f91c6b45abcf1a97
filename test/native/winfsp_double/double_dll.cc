// winfsp-x64.dll, the test double: the user-mode half of WinFsp's DLL (the helpers a native file
// system calls, and the request-to-interface dispatch of src/dll/fsop.c). The kernel half (the
// driver's share, delete, rename, directory and reparse rules, and the I/O manager's sequences)
// is in double_driver.cc; the scenario runner in double_run.cc. What the double models and what it
// cannot is written at the top of double_driver.cc.
//
// Written for shadowfs issue 28 from WinFsp's documentation and source (commit e7c7ccc, 2026 Beta2)
// as the reference, in our own code; no WinFsp file is part of the project. File references in
// comments are to that tree.
#include "double.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cwchar>
#include <mutex>

using namespace wfd;

namespace {
thread_local FSP_FILE_SYSTEM_OPERATION_CONTEXT *tlsOperation = nullptr;
HANDLE debugLogHandle = INVALID_HANDLE_VALUE;

GENERIC_MAPPING fileGenericMapping = {FILE_GENERIC_READ, FILE_GENERIC_WRITE, FILE_GENERIC_EXECUTE,
                                      FILE_ALL_ACCESS};

// src/dll/fsop.c FspFileSystemAddXxxInfo: records are packed at 8 bytes; a NULL record is the
// 2-byte, unaligned end marker.
BOOLEAN addRecord(const void *record, PVOID Buffer, ULONG Length, PULONG PBytesTransferred) {
  if (record) {
    UINT16 size = *(const UINT16 *)record;
    ULONG aligned = (size + 7u) & ~7u;
    if (*PBytesTransferred + aligned > Length) return FALSE;
    memcpy((UINT8 *)Buffer + *PBytesTransferred, record, size);
    *PBytesTransferred += aligned;
    return TRUE;
  }
  if (*PBytesTransferred + sizeof(UINT16) > Length) return FALSE;
  memset((UINT8 *)Buffer + *PBytesTransferred, 0, sizeof(UINT16));
  *PBytesTransferred += sizeof(UINT16);
  return TRUE;
}

// The directory buffer of src/dll/dirbuf.c, our way: records appended, an index sorted at
// release by ordinal UTF-16 compare with "." and ".." first, reads resuming after a marker that
// need not exist.
struct DirBuffer {
  SRWLOCK lock = SRWLOCK_INIT;
  std::vector<UINT8> data;
  std::vector<size_t> index;
};

std::wstring recordName(const DirBuffer *b, size_t off) {
  auto *di = (const FSP_FSCTL_DIR_INFO *)(b->data.data() + off);
  return std::wstring(di->FileNameBuf, (di->Size - sizeof(FSP_FSCTL_DIR_INFO)) / sizeof(WCHAR));
}
}  // namespace

namespace wfd {
int dotRank(const std::wstring &n) { return n == L"." ? 0 : n == L".." ? 1 : 2; }
bool dirNameLess(const std::wstring &a, const std::wstring &b) {
  int ra = dotRank(a), rb = dotRank(b);
  if (ra != rb) return ra < rb;
  if (ra < 2) return false;
  return a < b;  // wstring compares UTF-16 code units ordinally
}

void setOperationContext(FSP_FILE_SYSTEM_OPERATION_CONTEXT *c) { tlsOperation = c; }
GENERIC_MAPPING *genericMapping() { return &fileGenericMapping; }
}  // namespace wfd

extern "C" {

WFD_API FSP_FILE_SYSTEM_OPERATION_CONTEXT *FspFileSystemGetOperationContext(VOID) { return tlsOperation; }

WFD_API BOOLEAN FspFileSystemAddDirInfo(FSP_FSCTL_DIR_INFO *DirInfo, PVOID Buffer, ULONG Length,
                                        PULONG PBytesTransferred) {
  return addRecord(DirInfo, Buffer, Length, PBytesTransferred);
}
WFD_API BOOLEAN FspFileSystemAddStreamInfo(FSP_FSCTL_STREAM_INFO *StreamInfo, PVOID Buffer, ULONG Length,
                                           PULONG PBytesTransferred) {
  return addRecord(StreamInfo, Buffer, Length, PBytesTransferred);
}
WFD_API BOOLEAN FspFileSystemAddNotifyInfo(FSP_FSCTL_NOTIFY_INFO *NotifyInfo, PVOID Buffer, ULONG Length,
                                           PULONG PBytesTransferred) {
  return addRecord(NotifyInfo, Buffer, Length, PBytesTransferred);
}

// Extended attributes are not modelled (no scenario sets ExtendedAttributes); these exist so that
// samples that reference them link. EnumerateEa walks FILE_FULL_EA_INFORMATION records.
WFD_API NTSTATUS FspFileSystemEnumerateEa(FSP_FILE_SYSTEM *FileSystem,
                                          NTSTATUS (*EnumerateEa)(FSP_FILE_SYSTEM *, PVOID, PVOID),
                                          PVOID Context, PVOID Ea, ULONG EaLength) {
  struct FullEa { ULONG NextEntryOffset; UCHAR Flags, EaNameLength; USHORT EaValueLength; CHAR EaName[1]; };
  UINT8 *p = (UINT8 *)Ea, *end = p + EaLength;
  while (p + sizeof(FullEa) <= end) {
    NTSTATUS r = EnumerateEa(FileSystem, Context, p);
    if (!NT_SUCCESS(r)) return r;
    ULONG next = ((FullEa *)p)->NextEntryOffset;
    if (!next) break;
    p += next;
  }
  return STATUS_SUCCESS;
}
WFD_API BOOLEAN FspFileSystemAddEa(PVOID SingleEa, PVOID Ea, ULONG EaLength, PULONG PBytesTransferred) {
  if (!SingleEa) return TRUE;
  struct FullEa { ULONG NextEntryOffset; UCHAR Flags, EaNameLength; USHORT EaValueLength; CHAR EaName[1]; };
  auto *e = (FullEa *)SingleEa;
  ULONG size = (ULONG)(offsetof(FullEa, EaName) + e->EaNameLength + 1 + e->EaValueLength);
  ULONG aligned = (size + 3) & ~3u;
  if (*PBytesTransferred + aligned > EaLength) return FALSE;
  memcpy((UINT8 *)Ea + *PBytesTransferred, SingleEa, size);
  ((FullEa *)((UINT8 *)Ea + *PBytesTransferred))->NextEntryOffset = aligned;
  *PBytesTransferred += aligned;
  return TRUE;
}

WFD_API BOOLEAN FspFileSystemAcquireDirectoryBufferEx(PVOID *PDirBuffer, BOOLEAN Reset, ULONG CapacityHint,
                                                      PNTSTATUS PResult) {
  (void)CapacityHint;
  bool fresh = false;
  if (!*PDirBuffer) {
    // Two threads may race to create it; the real DLL uses an interlocked swap, so do we.
    auto *b = new DirBuffer();
    if (InterlockedCompareExchangePointer(PDirBuffer, b, nullptr) != nullptr)
      delete b;
    else
      fresh = true;
  }
  auto *b = (DirBuffer *)*PDirBuffer;
  if (PResult) *PResult = STATUS_SUCCESS;
  if (fresh || Reset) {
    AcquireSRWLockExclusive(&b->lock);
    b->data.clear();
    b->index.clear();
    return TRUE;
  }
  return FALSE;
}
WFD_API BOOLEAN FspFileSystemAcquireDirectoryBuffer(PVOID *PDirBuffer, BOOLEAN Reset, PNTSTATUS PResult) {
  return FspFileSystemAcquireDirectoryBufferEx(PDirBuffer, Reset, 0, PResult);
}
WFD_API BOOLEAN FspFileSystemFillDirectoryBuffer(PVOID *PDirBuffer, FSP_FSCTL_DIR_INFO *DirInfo,
                                                 PNTSTATUS PResult) {
  if (!DirInfo || !*PDirBuffer) {
    if (PResult) *PResult = STATUS_INVALID_PARAMETER;
    return FALSE;
  }
  auto *b = (DirBuffer *)*PDirBuffer;
  size_t off = b->data.size();
  b->data.resize(off + ((DirInfo->Size + 7u) & ~7u));
  memcpy(b->data.data() + off, DirInfo, DirInfo->Size);
  b->index.push_back(off);
  if (PResult) *PResult = STATUS_SUCCESS;
  return TRUE;
}
WFD_API VOID FspFileSystemReleaseDirectoryBuffer(PVOID *PDirBuffer) {
  auto *b = (DirBuffer *)*PDirBuffer;
  if (!b) return;
  std::sort(b->index.begin(), b->index.end(),
            [b](size_t x, size_t y) { return dirNameLess(recordName(b, x), recordName(b, y)); });
  ReleaseSRWLockExclusive(&b->lock);
}
WFD_API VOID FspFileSystemReadDirectoryBuffer(PVOID *PDirBuffer, PWSTR Marker, PVOID Buffer, ULONG Length,
                                              PULONG PBytesTransferred) {
  auto *b = (DirBuffer *)*PDirBuffer;
  if (!b) {
    // Nothing was ever filled: an empty listing.
    FspFileSystemAddDirInfo(nullptr, Buffer, Length, PBytesTransferred);
    return;
  }
  AcquireSRWLockShared(&b->lock);
  size_t i = 0;
  if (Marker) {
    std::wstring m(Marker);
    i = std::upper_bound(b->index.begin(), b->index.end(), m,
                         [b](const std::wstring &k, size_t off) { return dirNameLess(k, recordName(b, off)); }) -
        b->index.begin();
  }
  bool all = true;
  for (; i < b->index.size(); i++)
    if (!FspFileSystemAddDirInfo((FSP_FSCTL_DIR_INFO *)(b->data.data() + b->index[i]), Buffer, Length,
                                 PBytesTransferred)) {
      all = false;
      break;
    }
  if (all) FspFileSystemAddDirInfo(nullptr, Buffer, Length, PBytesTransferred);
  ReleaseSRWLockShared(&b->lock);
}
WFD_API VOID FspFileSystemDeleteDirectoryBuffer(PVOID *PDirBuffer) {
  delete (DirBuffer *)*PDirBuffer;
  *PDirBuffer = nullptr;
}

// Paths (winfsp.h FspPathPrefix/Suffix/Combine): split in place at the first (Prefix) or the
// last (Suffix) run of backslashes by writing a NUL, which Combine turns back into a backslash. A
// split at the very start yields Root (when given) as the left part.
WFD_API VOID FspPathPrefix(PWSTR Path, PWSTR *PPrefix, PWSTR *PRemain, PWSTR Root) {
  PWSTR left = Path, p = Path;
  while (*p && *p != L'\\') p++;
  if (*p == L'\\') {
    if (Root && p == Path) left = Root;
    *p++ = 0;
    while (*p == L'\\') p++;
  }
  *PPrefix = left;
  *PRemain = p;
}
WFD_API VOID FspPathSuffix(PWSTR Path, PWSTR *PRemain, PWSTR *PSuffix, PWSTR Root) {
  PWSTR runStart = nullptr, suffix = nullptr, p = Path;
  while (*p) {
    if (*p != L'\\') {
      p++;
      continue;
    }
    runStart = p;
    while (*p == L'\\') p++;
    suffix = p;
  }
  *PRemain = Path;
  if (!suffix) {
    *PSuffix = p;  // no separator: an empty suffix at the end
    return;
  }
  if (Root && runStart == Path) *PRemain = Root;
  *runStart = 0;
  *PSuffix = suffix;
}
WFD_API VOID FspPathCombine(PWSTR Prefix, PWSTR Suffix) {
  for (; Prefix < Suffix; Prefix++)
    if (*Prefix == 0) *Prefix = L'\\';
}

WFD_API PGENERIC_MAPPING FspGetFileGenericMapping(VOID) { return &fileGenericMapping; }

WFD_API NTSTATUS FspNtStatusFromWin32(DWORD Error) {
  switch (Error) {
  case ERROR_SUCCESS: return STATUS_SUCCESS;
  case ERROR_FILE_NOT_FOUND: return STATUS_OBJECT_NAME_NOT_FOUND;
  case ERROR_PATH_NOT_FOUND: return STATUS_OBJECT_PATH_NOT_FOUND;
  case ERROR_ACCESS_DENIED: return STATUS_ACCESS_DENIED;
  case ERROR_INVALID_HANDLE: return STATUS_INVALID_HANDLE;
  case ERROR_NOT_ENOUGH_MEMORY: case ERROR_OUTOFMEMORY: return STATUS_INSUFFICIENT_RESOURCES;
  case ERROR_INVALID_PARAMETER: return STATUS_INVALID_PARAMETER;
  case ERROR_INSUFFICIENT_BUFFER: return STATUS_BUFFER_TOO_SMALL;
  case ERROR_MORE_DATA: return STATUS_BUFFER_OVERFLOW;
  case ERROR_ALREADY_EXISTS: case ERROR_FILE_EXISTS: return STATUS_OBJECT_NAME_COLLISION;
  case ERROR_DIR_NOT_EMPTY: return STATUS_DIRECTORY_NOT_EMPTY;
  case ERROR_SHARING_VIOLATION: return STATUS_SHARING_VIOLATION;
  case ERROR_INVALID_NAME: return STATUS_OBJECT_NAME_INVALID;
  case ERROR_DISK_FULL: return STATUS_DISK_FULL;
  case ERROR_NOT_SUPPORTED: return STATUS_NOT_SUPPORTED;
  case ERROR_INVALID_SECURITY_DESCR: return STATUS_INVALID_SECURITY_DESCR;
  case ERROR_NO_SECURITY_ON_OBJECT: return STATUS_NO_SECURITY_ON_OBJECT;
  case ERROR_NOT_A_REPARSE_POINT: return STATUS_NOT_A_REPARSE_POINT;
  case ERROR_DIRECTORY: return STATUS_NOT_A_DIRECTORY;
  case ERROR_HANDLE_EOF: return STATUS_END_OF_FILE;
  default: return (NTSTATUS)(0xC0070000u | (Error & 0xffff));  // FACILITY_WIN32 as NTSTATUS
  }
}
WFD_API DWORD FspWin32FromNtStatus(NTSTATUS Status) { return RtlNtStatusToDosError(Status); }

WFD_API NTSTATUS FspVersion(PUINT32 PVersion) {
  *PVersion = (2u << 16) | 2u;  // v2.2 (2026 Beta2), the version the double was written from
  return STATUS_SUCCESS;
}

WFD_API VOID FspDebugLogSetHandle(HANDLE Handle) { debugLogHandle = Handle; }
WFD_API VOID FspDebugLog(const char *Format, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, Format);
  vsnprintf(buf, sizeof buf, Format, ap);
  va_end(ap);
  if (debugLogHandle != INVALID_HANDLE_VALUE) {
    DWORD n;
    WriteFile(debugLogHandle, buf, (DWORD)strlen(buf), &n, nullptr);
  } else {
    OutputDebugStringA(buf);
  }
}

}  // extern "C"

// --- the descriptor of a new object --------------------------------------------------------------
//
// CreatePrivateObjectSecurity without auto-inherit flags, by the rules Microsoft documents:
// - owner: the creator's, else the token's default owner; group: the creator's, else the token's
//   primary group ("Ownership of a New Object"; MS-DTYP 2.5.3.4.1 CreateSecurityDescriptor);
// - DACL ("DACL for a New Object"; CreatePrivateObjectSecurityEx, SEF_DACL_AUTO_INHERIT: without
//   it an explicit DACL does not inherit): the creator's DACL when it has one that is not
//   defaulted; else the ACEs the parent's DACL passes on to this kind of object; else a defaulted
//   DACL of the creator; else the token's default DACL; else none;
// - inheritance (MS-DTYP 2.5.3.4.4 ComputeInheritedACLfromParent, "ACE Inheritance Rules"): a
//   file takes OBJECT_INHERIT ACEs, a directory CONTAINER_INHERIT ones (keeping the inherit flags
//   unless NO_PROPAGATE_INHERIT) and OBJECT_INHERIT-only ones as inherit-only; CREATOR OWNER and
//   CREATOR GROUP become the new owner and group in the ACEs that apply; every inherited ACE is
//   marked INHERITED_ACE and its generic rights are mapped with the file mapping.
// SACLs are not modelled (no scenario asks for one, and the opener would need SE_SECURITY_NAME).
namespace {
std::vector<UINT8> tokenInfo(HANDLE token, TOKEN_INFORMATION_CLASS cls) {
  DWORD n = 0;
  GetTokenInformation(token, cls, nullptr, 0, &n);
  std::vector<UINT8> b(n ? n : 1);
  if (!n || !GetTokenInformation(token, cls, b.data(), n, &n)) b.clear();
  return b;
}
bool isSid(PSID sid, const char *which) {
  static const SID_IDENTIFIER_AUTHORITY creator = SECURITY_CREATOR_SID_AUTHORITY;
  if (!IsValidSid(sid) || *GetSidSubAuthorityCount(sid) != 1) return false;
  if (memcmp(GetSidIdentifierAuthority(sid), &creator, sizeof creator) != 0) return false;
  DWORD rid = *GetSidSubAuthority(sid, 0);
  return which[0] == 'o' ? rid == SECURITY_CREATOR_OWNER_RID : rid == SECURITY_CREATOR_GROUP_RID;
}
// One ACCESS_ALLOWED/DENIED ACE with a new header, mask and (optionally) SID.
void addAce(std::vector<UINT8> &aces, int *count, const ACE_HEADER *src, BYTE flags, bool mapGeneric, PSID sid) {
  auto *a = (const ACCESS_ALLOWED_ACE *)src;  // same layout for ACCESS_DENIED_ACE
  PSID oldSid = (PSID)&a->SidStart;
  PSID useSid = sid ? sid : oldSid;
  DWORD sidLen = GetLengthSid(useSid);
  size_t size = offsetof(ACCESS_ALLOWED_ACE, SidStart) + sidLen;
  size_t at = aces.size();
  aces.resize(at + ((size + 3) & ~(size_t)3));
  auto *b = (ACCESS_ALLOWED_ACE *)(aces.data() + at);
  b->Header.AceType = src->AceType;
  b->Header.AceFlags = flags;
  b->Header.AceSize = (WORD)((size + 3) & ~(size_t)3);
  b->Mask = a->Mask;
  if (mapGeneric) MapGenericMask(&b->Mask, &fileGenericMapping);
  CopySid(sidLen, (PSID)&b->SidStart, useSid);
  (*count)++;
}
void copyAcl(PACL acl, std::vector<UINT8> &aces, int *count, bool mapGeneric) {
  for (DWORD i = 0; acl && i < acl->AceCount; i++) {
    ACE_HEADER *h = nullptr;
    if (!GetAce(acl, i, (LPVOID *)&h)) continue;
    if (h->AceType == ACCESS_ALLOWED_ACE_TYPE || h->AceType == ACCESS_DENIED_ACE_TYPE) {
      addAce(aces, count, h, h->AceFlags, mapGeneric, nullptr);
    } else {
      size_t at = aces.size();  // other ACE types are kept as they are
      aces.resize(at + h->AceSize);
      memcpy(aces.data() + at, h, h->AceSize);
      (*count)++;
    }
  }
}
void inheritFrom(PACL parent, bool container, PSID owner, PSID group, std::vector<UINT8> &aces, int *count) {
  for (DWORD i = 0; parent && i < parent->AceCount; i++) {
    ACE_HEADER *h = nullptr;
    if (!GetAce(parent, i, (LPVOID *)&h)) continue;
    if (h->AceType != ACCESS_ALLOWED_ACE_TYPE && h->AceType != ACCESS_DENIED_ACE_TYPE) continue;
    BYTE f = h->AceFlags;
    bool noPropagate = f & NO_PROPAGATE_INHERIT_ACE;
    PSID sid = (PSID)&((ACCESS_ALLOWED_ACE *)h)->SidStart;
    PSID subst = isSid(sid, "owner") ? owner : isSid(sid, "group") ? group : nullptr;
    if (!container) {
      if (f & OBJECT_INHERIT_ACE) addAce(aces, count, h, INHERITED_ACE, true, subst);
      continue;
    }
    if (f & CONTAINER_INHERIT_ACE) {
      BYTE keep = noPropagate ? 0 : (BYTE)(f & (CONTAINER_INHERIT_ACE | OBJECT_INHERIT_ACE));
      if (subst) {
        addAce(aces, count, h, INHERITED_ACE, true, subst);
        if (!noPropagate) addAce(aces, count, h, INHERITED_ACE | INHERIT_ONLY_ACE | keep, false, nullptr);
      } else {
        addAce(aces, count, h, INHERITED_ACE | keep, true, nullptr);
      }
    } else if ((f & OBJECT_INHERIT_ACE) && !noPropagate) {
      addAce(aces, count, h, INHERITED_ACE | INHERIT_ONLY_ACE | OBJECT_INHERIT_ACE, false, nullptr);
    }
  }
}
}  // namespace

namespace wfd {
NTSTATUS newSecurityDescriptor(PSECURITY_DESCRIPTOR parent, PSECURITY_DESCRIPTOR creator, bool container,
                               HANDLE token, PSECURITY_DESCRIPTOR *out) {
  *out = nullptr;
  PSID owner = nullptr, group = nullptr;
  BOOL defaulted = FALSE, present = FALSE;
  PACL creatorDacl = nullptr, parentDacl = nullptr;
  SECURITY_DESCRIPTOR_CONTROL creatorControl = 0;
  DWORD rev = 0;
  bool creatorHasDacl = false;
  if (creator) {
    GetSecurityDescriptorOwner(creator, &owner, &defaulted);
    GetSecurityDescriptorGroup(creator, &group, &defaulted);
    GetSecurityDescriptorControl(creator, &creatorControl, &rev);
    if (GetSecurityDescriptorDacl(creator, &present, &creatorDacl, &defaulted) && present) creatorHasDacl = true;
  }
  std::vector<UINT8> tOwner, tGroup, tDacl;
  if (!owner) {
    tOwner = tokenInfo(token, TokenOwner);
    if (tOwner.empty()) return FspNtStatusFromWin32(GetLastError() ? GetLastError() : ERROR_NO_TOKEN);
    owner = ((TOKEN_OWNER *)tOwner.data())->Owner;
  }
  if (!group) {
    tGroup = tokenInfo(token, TokenPrimaryGroup);
    if (!tGroup.empty()) group = ((TOKEN_PRIMARY_GROUP *)tGroup.data())->PrimaryGroup;
  }
  if (parent) {
    BOOL pp = FALSE, pd = FALSE;
    if (!GetSecurityDescriptorDacl(parent, &pp, &parentDacl, &pd) || !pp) parentDacl = nullptr;
  }
  std::vector<UINT8> aces;
  int count = 0;
  bool daclPresent = true;
  SECURITY_DESCRIPTOR_CONTROL control = 0;
  if (creatorHasDacl && !(creatorControl & SE_DACL_DEFAULTED)) {
    if (!creatorDacl) daclPresent = false, count = -1;  // an explicit NULL DACL stays NULL
    else copyAcl(creatorDacl, aces, &count, true);
    control |= creatorControl & SE_DACL_PROTECTED;
  } else {
    inheritFrom(parentDacl, container, owner, group, aces, &count);
    if (count == 0 && creatorHasDacl) {
      if (creatorDacl) copyAcl(creatorDacl, aces, &count, true);
      control |= SE_DACL_DEFAULTED;
    } else if (count == 0) {
      tDacl = tokenInfo(token, TokenDefaultDacl);
      PACL d = tDacl.empty() ? nullptr : ((TOKEN_DEFAULT_DACL *)tDacl.data())->DefaultDacl;
      if (d) {
        copyAcl(d, aces, &count, true);
        control |= SE_DACL_DEFAULTED;
      } else {
        daclPresent = false;
      }
    }
  }
  std::vector<UINT8> acl;
  if (daclPresent && count >= 0) {
    acl.resize(sizeof(ACL) + aces.size());
    if (!InitializeAcl((PACL)acl.data(), (DWORD)acl.size(), ACL_REVISION)) return STATUS_INVALID_SECURITY_DESCR;
    if (!aces.empty() && !AddAce((PACL)acl.data(), ACL_REVISION, 0, aces.data(), (DWORD)aces.size()))
      return STATUS_INVALID_SECURITY_DESCR;
  }
  SECURITY_DESCRIPTOR abs;
  InitializeSecurityDescriptor(&abs, SECURITY_DESCRIPTOR_REVISION);
  SetSecurityDescriptorOwner(&abs, owner, FALSE);
  if (group) SetSecurityDescriptorGroup(&abs, group, FALSE);
  if (daclPresent) SetSecurityDescriptorDacl(&abs, TRUE, acl.empty() ? nullptr : (PACL)acl.data(), FALSE);
  if (control) SetSecurityDescriptorControl(&abs, control & (SE_DACL_PROTECTED | SE_DACL_DEFAULTED), control & (SE_DACL_PROTECTED | SE_DACL_DEFAULTED));
  DWORD len = 0;
  MakeSelfRelativeSD(&abs, nullptr, &len);
  PSECURITY_DESCRIPTOR rel = HeapAlloc(GetProcessHeap(), 0, len);
  if (!rel) return STATUS_INSUFFICIENT_RESOURCES;
  if (!MakeSelfRelativeSD(&abs, rel, &len)) {
    HeapFree(GetProcessHeap(), 0, rel);
    return STATUS_INVALID_SECURITY_DESCR;
  }
  *out = rel;
  return STATUS_SUCCESS;
}
}  // namespace wfd

extern "C" {

// --- security (src/dll/security.c) -------------------------------------------------------------

// FspCreateSecurityDescriptor is CreatePrivateObjectSecurity(parent SD, the SD the opener asked
// for, IsDirectory, the opener's token, the file mapping) (security.c:404-431). The double does
// not call the system's: wine 8.0's RtlNewSecurityObjectEx is a "semi-stub" that returns
// O:WD G:WD with no DACL whatever it is given (measured), so every created file would lose the
// DACL its creator asked for. Instead it builds the descriptor by Windows' documented rules
// (newSecurityDescriptor below).
WFD_API NTSTATUS FspCreateSecurityDescriptor(FSP_FILE_SYSTEM *FileSystem, FSP_FSCTL_TRANSACT_REQ *Request,
                                             PSECURITY_DESCRIPTOR ParentDescriptor,
                                             PSECURITY_DESCRIPTOR *PSecurityDescriptor) {
  (void)FileSystem;
  *PSecurityDescriptor = nullptr;
  if (Request->Kind != FspFsctlTransactCreateKind) return STATUS_INVALID_PARAMETER;
  if (Request->Req.Create.NamedStream) return STATUS_SUCCESS;  // security.c:414-416
  PSECURITY_DESCRIPTOR requested =
      Request->Req.Create.SecurityDescriptor.Offset ? Request->Buffer + Request->Req.Create.SecurityDescriptor.Offset
                                                    : nullptr;
  HANDLE token = (HANDLE)(UINT_PTR)(Request->Req.Create.AccessToken & 0xffffffff);
  return newSecurityDescriptor(ParentDescriptor, requested, !!(Request->Req.Create.CreateOptions & FILE_DIRECTORY_FILE),
                               token, PSecurityDescriptor);
}

WFD_API NTSTATUS FspSetSecurityDescriptor(PSECURITY_DESCRIPTOR InputDescriptor,
                                          SECURITY_INFORMATION SecurityInformation,
                                          PSECURITY_DESCRIPTOR ModificationDescriptor,
                                          PSECURITY_DESCRIPTOR *PSecurityDescriptor) {
  *PSecurityDescriptor = nullptr;
  if (!InputDescriptor) return STATUS_NO_SECURITY_ON_OBJECT;
  // SetPrivateObjectSecurity reallocates its object descriptor; it must start on the process heap.
  DWORD len = GetSecurityDescriptorLength(InputDescriptor);
  PSECURITY_DESCRIPTOR copy = HeapAlloc(GetProcessHeap(), 0, len);
  if (!copy) return STATUS_INSUFFICIENT_RESOURCES;
  memcpy(copy, InputDescriptor, len);
  if (!SetPrivateObjectSecurity(SecurityInformation, ModificationDescriptor, &copy, &fileGenericMapping, nullptr)) {
    NTSTATUS r = FspNtStatusFromWin32(GetLastError());
    HeapFree(GetProcessHeap(), 0, copy);
    return r;
  }
  *PSecurityDescriptor = copy;
  return STATUS_SUCCESS;
}

WFD_API NTSTATUS FspAccessCheckEx(FSP_FILE_SYSTEM *FileSystem, FSP_FSCTL_TRANSACT_REQ *Request,
                                  BOOLEAN CheckParentOrMain, BOOLEAN AllowTraverseCheck, UINT32 DesiredAccess,
                                  PUINT32 PGrantedAccess, PSECURITY_DESCRIPTOR *PSecurityDescriptor);

// security.c:493-508: how to free depends on which function made the descriptor.
WFD_API VOID FspDeleteSecurityDescriptor(PSECURITY_DESCRIPTOR SecurityDescriptor, NTSTATUS (*CreateFunc)()) {
  if (!SecurityDescriptor) return;
  if (CreateFunc == (NTSTATUS(*)())FspAccessCheckEx)
    free(SecurityDescriptor);
  else if (CreateFunc == (NTSTATUS(*)())FspCreateSecurityDescriptor)
    HeapFree(GetProcessHeap(), 0, SecurityDescriptor);  // newSecurityDescriptor's allocation
  else if (CreateFunc == (NTSTATUS(*)())FspSetSecurityDescriptor)
    DestroyPrivateObjectSecurity(&SecurityDescriptor);
}

}  // extern "C"

namespace wfd {
// GetSecurityByName with the DLL's buffer protocol (security.c:37-53): start at 1024 bytes and
// grow on STATUS_BUFFER_OVERFLOW. A file system that answers STATUS_BUFFER_TOO_SMALL instead
// breaks the open; the double reports it.
NTSTATUS getSecurityByName(FSP_FILE_SYSTEM *fs, PWSTR name, UINT32 *attrs, std::vector<UINT8> &sd) {
  sd.resize(1024);
  for (int tries = 0; tries < 4; tries++) {
    SIZE_T size = sd.size();
    NTSTATUS r = fs->Interface->GetSecurityByName(fs, name, attrs, (PSECURITY_DESCRIPTOR)sd.data(), &size);
    noteCall("GetSecurityByName", name, r);
    if (r == STATUS_BUFFER_OVERFLOW && size > sd.size()) {
      sd.resize(size);
      continue;
    }
    if (r == STATUS_BUFFER_TOO_SMALL) problem(L"GetSecurityByName answered STATUS_BUFFER_TOO_SMALL; WinFsp's DLL "
                                              L"only grows its buffer on STATUS_BUFFER_OVERFLOW (security.c:37-53)");
    if (NT_SUCCESS(r)) sd.resize(size);
    return r;
  }
  return STATUS_BUFFER_OVERFLOW;
}

static UINT32 suffixIndex(const wchar_t *path) {
  const wchar_t *end = path + wcslen(path);
  const wchar_t *p = end;
  while (p > path && p[-1] != L'\\') p--;
  return (UINT32)(p - path);
}

// --- Mandatory integrity control --------------------------------------------------------------
// What AccessCheck does on Windows before the DACL (Microsoft's "Mandatory Integrity Control" and
// SYSTEM_MANDATORY_LABEL_ACE documentation), modelled here because wine 8.0's AccessCheck ignores
// integrity: the object's level and policy come from the mandatory label ACE in its descriptor's
// SACL; an object without one counts as Medium with NO_WRITE_UP. A token below the object's level
// is refused the write rights when the policy has NO_WRITE_UP (NO_READ_UP and NO_EXECUTE_UP are
// not modelled), whatever its DACL grants: FILE_WRITE_DATA/ADD_FILE, FILE_APPEND_DATA/
// ADD_SUBDIRECTORY, FILE_WRITE_EA, FILE_WRITE_ATTRIBUTES, FILE_DELETE_CHILD, DELETE, WRITE_DAC and
// WRITE_OWNER (MAXIMUM_ALLOWED is granted without them). The token's level: the double makes the
// Low tokens itself (lowIntegrityToken) and knows them by handle; every other token is Medium, a
// user's unelevated token. Not modelled: levels other than Low and Medium, the token's
// mandatory policy (TOKEN_MANDATORY_POLICY_NO_WRITE_UP is taken as set, as it is by default),
// and labels on anything but the object being opened (a create checks its parent's).
namespace {
std::mutex lowTokensLock;
std::vector<HANDLE> lowTokens;
const UINT32 kMicWriteRights = FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES |
                               FILE_DELETE_CHILD | DELETE | WRITE_DAC | WRITE_OWNER;
bool tokenIsLow(HANDLE token) {
  std::lock_guard<std::mutex> g(lowTokensLock);
  return std::find(lowTokens.begin(), lowTokens.end(), token) != lowTokens.end();
}
// The object's integrity RID (SECURITY_MANDATORY_*_RID) and label policy, from its SACL.
void objectLabel(const std::vector<UINT8> &sd, DWORD *rid, DWORD *policy) {
  *rid = SECURITY_MANDATORY_MEDIUM_RID;
  *policy = SYSTEM_MANDATORY_LABEL_NO_WRITE_UP;
  BOOL present = FALSE, defaulted = FALSE;
  PACL sacl = nullptr;
  if (!GetSecurityDescriptorSacl((PSECURITY_DESCRIPTOR)sd.data(), &present, &sacl, &defaulted) || !present || !sacl)
    return;
  for (DWORD i = 0; i < sacl->AceCount; i++) {
    void *ace = nullptr;
    if (!GetAce(sacl, i, &ace)) continue;
    auto *l = (SYSTEM_MANDATORY_LABEL_ACE *)ace;
    if (l->Header.AceType != SYSTEM_MANDATORY_LABEL_ACE_TYPE || (l->Header.AceFlags & INHERIT_ONLY_ACE)) continue;
    PSID sid = (PSID)&l->SidStart;
    if (*GetSidSubAuthorityCount(sid) < 1) continue;
    *rid = *GetSidSubAuthority(sid, *GetSidSubAuthorityCount(sid) - 1);
    *policy = l->Mask;
    return;
  }
}
}  // namespace

HANDLE lowIntegrityToken(HANDLE from) {
  // A token of its own (so its handle tells it apart), made as the volume's token was.
  HANDLE primary = nullptr, t = nullptr;
  if (!OpenProcessToken(GetCurrentProcess(), TOKEN_DUPLICATE | TOKEN_QUERY, &primary)) return from;
  BOOL ok = DuplicateToken(primary, SecurityIdentification, &t);
  CloseHandle(primary);
  if (!ok) return from;
  std::lock_guard<std::mutex> g(lowTokensLock);
  lowTokens.push_back(t);
  return t;
}
void closeLowIntegrityToken(HANDLE token) {
  {
    std::lock_guard<std::mutex> g(lowTokensLock);
    lowTokens.erase(std::remove(lowTokens.begin(), lowTokens.end(), token), lowTokens.end());
  }
  CloseHandle(token);
}

static NTSTATUS runAccessCheck(const std::vector<UINT8> &sd, HANDLE token, UINT32 desired, UINT32 *granted) {
  UINT8 privBuf[sizeof(PRIVILEGE_SET) + 15 * sizeof(LUID_AND_ATTRIBUTES)];
  DWORD privLen = sizeof privBuf;
  BOOL ok = FALSE;
  DWORD g = 0;
  UINT32 mapped = desired;
  MapGenericMask((PDWORD)&mapped, &fileGenericMapping);
  UINT32 micDenied = 0;
  if (tokenIsLow(token)) {
    DWORD rid = 0, policy = 0;
    objectLabel(sd, &rid, &policy);
    if (rid > SECURITY_MANDATORY_LOW_RID && (policy & SYSTEM_MANDATORY_LABEL_NO_WRITE_UP)) micDenied = kMicWriteRights;
  }
  if (mapped & micDenied & ~MAXIMUM_ALLOWED) return STATUS_ACCESS_DENIED;
  if (!AccessCheck((PSECURITY_DESCRIPTOR)sd.data(), token, desired, &fileGenericMapping, (PPRIVILEGE_SET)privBuf,
                   &privLen, &g, &ok))
    return FspNtStatusFromWin32(GetLastError());
  g &= ~micDenied;
  if (granted) *granted = g;
  return ok ? STATUS_SUCCESS : STATUS_ACCESS_DENIED;
}

// The DLL's open-time access check (security.c:55-402) in our words: which descriptor is checked
// (the parent's for a create), the parent rescue for DELETE and FILE_READ_ATTRIBUTES, the
// option checks, the read-only rules, and STATUS_REPARSE with the index of the reparse component.
NTSTATUS accessCheck(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, bool checkParent, UINT32 desired,
                     UINT32 *granted, UINT32 *reparseIndex, std::vector<UINT8> *sdOut) {
  auto &c = req->Req.Create;
  PWSTR full = (PWSTR)req->Buffer;
  if (checkParent && full[0] == L'\\' && full[1] == 0) return STATUS_INVALID_PARAMETER;
  if (!fs->Interface->GetSecurityByName) {
    *granted = (desired & MAXIMUM_ALLOWED) ? FILE_ALL_ACCESS : desired;
    return STATUS_SUCCESS;
  }
  std::wstring name = full;
  if (checkParent) {
    size_t cut = name.find_last_of(L'\\');
    name = cut == 0 ? L"\\" : name.substr(0, cut);
  }
  std::vector<UINT8> sd;
  UINT32 attrs = 0;
  NTSTATUS r = getSecurityByName(fs, &name[0], &attrs, sd);
  if (r == STATUS_REPARSE) {
    *reparseIndex = attrs;
    return STATUS_REPARSE;
  }
  if (!NT_SUCCESS(r)) return checkParent && r == STATUS_OBJECT_NAME_NOT_FOUND ? STATUS_OBJECT_PATH_NOT_FOUND : r;
  if (!checkParent && c.HasTrailingBackslash && !(attrs & FILE_ATTRIBUTE_DIRECTORY))
    return STATUS_OBJECT_NAME_INVALID;
  HANDLE token = (HANDLE)(UINT_PTR)(c.AccessToken & 0xffffffff);
  UINT32 g = 0;
  if (c.UserMode && !sd.empty()) {
    r = desired ? runAccessCheck(sd, token, desired, &g) : STATUS_SUCCESS;
    if (r == STATUS_ACCESS_DENIED && (desired & (MAXIMUM_ALLOWED | DELETE | FILE_READ_ATTRIBUTES)) && !checkParent) {
      // DELETE is granted by FILE_DELETE_CHILD on the parent, FILE_READ_ATTRIBUTES by
      // FILE_LIST_DIRECTORY on it (security.c:224-277).
      UINT32 parentWant = (desired & MAXIMUM_ALLOWED) ? (FILE_DELETE_CHILD | FILE_LIST_DIRECTORY)
                                                      : (((desired & DELETE) ? FILE_DELETE_CHILD : 0) |
                                                         ((desired & FILE_READ_ATTRIBUTES) ? FILE_LIST_DIRECTORY : 0));
      UINT32 parentGranted = 0, idx = 0;
      if (!NT_SUCCESS(accessCheck(fs, req, true, parentWant, &parentGranted, &idx, nullptr))) return STATUS_ACCESS_DENIED;
      UINT32 rest = desired & ~(((parentGranted & FILE_DELETE_CHILD) ? DELETE : 0) |
                                ((parentGranted & FILE_LIST_DIRECTORY) ? FILE_READ_ATTRIBUTES : 0));
      g = 0;
      if (rest && !NT_SUCCESS(runAccessCheck(sd, token, rest, &g))) return STATUS_ACCESS_DENIED;
      if (parentGranted & FILE_DELETE_CHILD) g |= DELETE;
      if (parentGranted & FILE_LIST_DIRECTORY) g |= FILE_READ_ATTRIBUTES;
      r = STATUS_SUCCESS;
    }
    if (!NT_SUCCESS(r)) return r;
  }
  if (checkParent) {
    if (attrs & FILE_ATTRIBUTE_REPARSE_POINT) {
      *reparseIndex = suffixIndex(name.c_str());
      return STATUS_REPARSE;
    }
    if (!(attrs & FILE_ATTRIBUTE_DIRECTORY)) return STATUS_NOT_A_DIRECTORY;
  } else {
    if ((attrs & FILE_ATTRIBUTE_REPARSE_POINT) && !(c.CreateOptions & FILE_OPEN_REPARSE_POINT)) {
      *reparseIndex = suffixIndex(name.c_str());
      return STATUS_REPARSE;
    }
    if (!((attrs & FILE_ATTRIBUTE_REPARSE_POINT) && fs->UmNoReparsePointsDirCheck)) {
      if ((c.CreateOptions & FILE_DIRECTORY_FILE) && !(attrs & FILE_ATTRIBUTE_DIRECTORY)) return STATUS_NOT_A_DIRECTORY;
      if ((c.CreateOptions & FILE_NON_DIRECTORY_FILE) && (attrs & FILE_ATTRIBUTE_DIRECTORY))
        return STATUS_FILE_IS_A_DIRECTORY;
    }
  }
  if (c.UserMode) {
    if ((attrs & (FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_DIRECTORY)) == FILE_ATTRIBUTE_READONLY &&
        (desired & (FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_ADD_SUBDIRECTORY | FILE_DELETE_CHILD)))
      return STATUS_ACCESS_DENIED;
    if ((attrs & FILE_ATTRIBUTE_READONLY) && (c.CreateOptions & FILE_DELETE_ON_CLOSE)) return STATUS_CANNOT_DELETE;
    if (sd.empty()) g = (desired & MAXIMUM_ALLOWED) ? FILE_ALL_ACCESS : desired;
  } else {
    g = (desired & MAXIMUM_ALLOWED) ? FILE_ALL_ACCESS : desired;
  }
  *granted = g;
  if (sdOut) *sdOut = std::move(sd);
  return STATUS_SUCCESS;
}
}  // namespace wfd

extern "C" WFD_API NTSTATUS FspAccessCheckEx(FSP_FILE_SYSTEM *FileSystem, FSP_FSCTL_TRANSACT_REQ *Request,
                                             BOOLEAN CheckParentOrMain, BOOLEAN AllowTraverseCheck,
                                             UINT32 DesiredAccess, PUINT32 PGrantedAccess,
                                             PSECURITY_DESCRIPTOR *PSecurityDescriptor) {
  (void)AllowTraverseCheck;
  if (Request->Kind != FspFsctlTransactCreateKind) return STATUS_INVALID_PARAMETER;
  UINT32 idx = 0;
  std::vector<UINT8> sd;
  NTSTATUS r = accessCheck(FileSystem, Request, CheckParentOrMain, DesiredAccess, PGrantedAccess, &idx,
                           PSecurityDescriptor ? &sd : nullptr);
  if (r == STATUS_REPARSE) *PGrantedAccess = idx;
  if (PSecurityDescriptor) {
    *PSecurityDescriptor = nullptr;
    if (NT_SUCCESS(r) && r != STATUS_REPARSE && !sd.empty()) {
      *PSecurityDescriptor = malloc(sd.size());
      memcpy(*PSecurityDescriptor, sd.data(), sd.size());
    }
  }
  return r;
}

// --- reparse points (src/dll/fsop.c:1537-1831) --------------------------------------------------

extern "C" {
typedef NTSTATUS GetReparsePointByNameFn(FSP_FILE_SYSTEM *, PVOID, PWSTR, BOOLEAN, PVOID, PSIZE_T);

WFD_API BOOLEAN FspFileSystemFindReparsePoint(FSP_FILE_SYSTEM *FileSystem, GetReparsePointByNameFn *GetByName,
                                              PVOID Context, PWSTR FileName, PUINT32 PReparsePointIndex) {
  // Only the intermediate components are asked about, each as a directory; a ':' ends the walk.
  PWSTR p = FileName;
  for (;;) {
    while (*p == L'\\') p++;
    PWSTR component = p;
    while (*p != L'\\') {
      if (*p == 0 || *p == L':') return FALSE;
      p++;
    }
    *p = 0;
    NTSTATUS r = GetByName(FileSystem, Context, FileName, TRUE, nullptr, nullptr);
    *p = L'\\';
    if (r == STATUS_NOT_A_REPARSE_POINT) continue;
    if (!NT_SUCCESS(r)) return FALSE;
    if (PReparsePointIndex) *PReparsePointIndex = (UINT32)(component - FileName);
    return TRUE;
  }
}

WFD_API NTSTATUS FspFileSystemResolveReparsePoints(FSP_FILE_SYSTEM *FileSystem, GetReparsePointByNameFn *GetByName,
                                                   PVOID Context, PWSTR FileName, UINT32 ReparsePointIndex,
                                                   BOOLEAN ResolveLastPathComponent, PIO_STATUS_BLOCK PIoStatus,
                                                   PVOID Buffer, PSIZE_T PSize) {
  // Our own walk over a std::wstring: the path is rewritten link by link. A symlink whose
  // target starts with '\' replaces the whole path, otherwise only its own component; "." and
  // ".." are applied as text; an absolute NT target ends the walk (flags 0); anything but a
  // symlink (a junction too) is handed back as it is, with the unparsed remainder's length in
  // Reserved for a junction; the result is otherwise a device-relative symlink (RELATIVE).
  std::wstring path = FileName;
  size_t pos = ReparsePointIndex;
  bool resolveLast = ResolveLastPathComponent;
  int budget = 32;
  std::vector<UINT8> rp(16256);
  auto *rpHdr = (ReparseData *)rp.data();
  bool absolute = false;
  for (;;) {
    while (pos < path.size() && path[pos] == L'\\') pos++;
    size_t start = pos;
    while (pos < path.size() && path[pos] != L'\\' && path[pos] != L':') pos++;
    bool last = pos >= path.size() || path[pos] == L':';
    if (last) {
      if (!resolveLast || start == pos) break;
      resolveLast = false;
    }
    std::wstring comp = path.substr(start, pos - start);
    if (comp == L"." || comp == L"..") {
      size_t cut = start;
      while (cut > 0 && path[cut - 1] == L'\\') cut--;  // before the separators
      if (comp == L"..")
        while (cut > 0 && path[cut - 1] != L'\\') cut--;
      else
        cut = start;
      std::wstring rest = pos < path.size() ? path.substr(pos) : L"";
      if (comp == L"..") {
        while (cut > 0 && path[cut - 1] == L'\\') cut--;
        path = path.substr(0, cut) + rest;
      } else {
        path = path.substr(0, start) + (rest.size() && rest[0] == L'\\' ? rest.substr(1) : rest);
      }
      if (path.empty()) path = L"\\";
      pos = cut;
      resolveLast = ResolveLastPathComponent;
      continue;
    }
    std::wstring prefix = path.substr(0, pos);
    SIZE_T size = rp.size();
    bool isDir = pos < path.size() && path[pos] == L'\\';
    NTSTATUS r = GetByName(FileSystem, Context, &prefix[0], isDir, rp.data(), &size);
    if (r == STATUS_NOT_A_REPARSE_POINT) continue;
    if (r == STATUS_OBJECT_NAME_NOT_FOUND && !isDir) break;
    if (!NT_SUCCESS(r)) return r == STATUS_OBJECT_NAME_NOT_FOUND ? r : STATUS_OBJECT_PATH_NOT_FOUND;
    if (rpHdr->ReparseTag != IO_REPARSE_TAG_SYMLINK_) {
      if (size > *PSize)
        return rpHdr->ReparseTag != IO_REPARSE_TAG_SYMLINK_ ? STATUS_IO_REPARSE_DATA_INVALID
                                                             : STATUS_REPARSE_POINT_NOT_RESOLVED;
      memcpy(Buffer, rp.data(), size);
      if (rpHdr->ReparseTag == IO_REPARSE_TAG_MOUNT_POINT_)
        ((ReparseData *)Buffer)->Reserved = (USHORT)((path.size() - pos) * sizeof(WCHAR));
      *PSize = size;
      PIoStatus->Status = STATUS_REPARSE;
      PIoStatus->Information = rpHdr->ReparseTag;
      return STATUS_REPARSE;
    }
    if (--budget == 0) return STATUS_REPARSE_POINT_NOT_RESOLVED;
    auto &sl = rpHdr->SymbolicLink;
    std::wstring target(sl.PathBuffer + sl.SubstituteNameOffset / sizeof(WCHAR),
                        sl.SubstituteNameLength / sizeof(WCHAR));
    std::wstring rest = pos < path.size() ? path.substr(pos) : L"";
    bool rooted = !target.empty() && target[0] == L'\\';
    size_t newStart = rooted ? 0 : start;
    path = path.substr(0, newStart) + target + rest;
    if (!(sl.Flags & SYMLINK_FLAG_RELATIVE_) && rooted) {
      absolute = true;
      break;
    }
    pos = newStart;
    resolveLast = ResolveLastPathComponent;
  }
  SIZE_T need = offsetof(ReparseData, SymbolicLink.PathBuffer) + path.size() * sizeof(WCHAR);
  if (need > *PSize) return STATUS_REPARSE_POINT_NOT_RESOLVED;
  auto *out = (ReparseData *)Buffer;
  memset(out, 0, offsetof(ReparseData, SymbolicLink.PathBuffer));
  out->ReparseTag = IO_REPARSE_TAG_SYMLINK_;
  out->SymbolicLink.Flags = absolute ? 0 : SYMLINK_FLAG_RELATIVE_;
  out->SymbolicLink.SubstituteNameLength = out->SymbolicLink.PrintNameLength = (USHORT)(path.size() * sizeof(WCHAR));
  memcpy(out->SymbolicLink.PathBuffer, path.data(), path.size() * sizeof(WCHAR));
  out->ReparseDataLength = (USHORT)(need - offsetof(ReparseData, SymbolicLink));
  *PSize = need;
  PIoStatus->Status = STATUS_REPARSE;
  PIoStatus->Information = IO_REPARSE_TAG_SYMLINK_;
  return STATUS_REPARSE;
}

WFD_API NTSTATUS FspFileSystemCanReplaceReparsePoint(PVOID CurrentReparseData, SIZE_T CurrentReparseDataSize,
                                                     PVOID ReplaceReparseData, SIZE_T ReplaceReparseDataSize) {
  if (CurrentReparseDataSize < sizeof(ULONG) || ReplaceReparseDataSize < sizeof(ULONG))
    return STATUS_IO_REPARSE_DATA_INVALID;
  ULONG a = *(ULONG *)CurrentReparseData, b = *(ULONG *)ReplaceReparseData;
  if (a != b) return STATUS_IO_REPARSE_TAG_MISMATCH;
  if (!(a & 0x80000000u)) {  // not a Microsoft tag: the GUIDs (at offset 8) must match
    const SIZE_T header = 8 + 16;
    if (CurrentReparseDataSize < header || ReplaceReparseDataSize < header ||
        memcmp((UINT8 *)CurrentReparseData + 8, (UINT8 *)ReplaceReparseData + 8, 16) != 0)
      return STATUS_REPARSE_ATTRIBUTE_CONFLICT;
  }
  return STATUS_SUCCESS;
}
}  // extern "C"
