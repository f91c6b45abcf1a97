// The DLL's dispatch of driver requests to FSP_FILE_SYSTEM_INTERFACE (src/dll/fsop.c), in our
// words: one function per request kind, each run on a dispatcher thread with the operation
// context set, exactly the Request/Response pair the driver model built.
#include "double.h"

#include <cstring>

using namespace wfd;

namespace {
// winfsp.h create dispositions (CreateOptions >> 24) and Information values.
enum { kSupersede = 0, kOpen = 1, kCreate = 2, kOpenIf = 3, kOverwrite = 4, kOverwriteIf = 5 };
enum { kSuperseded = 0, kOpened = 1, kCreated = 2, kOverwritten = 3, kExists = 4, kDoesNotExist = 5 };

PVOID *addrOfContext(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_FULL_CONTEXT &c) {
  if (fs->UmFileContextIsFullContext) return (PVOID *)&c;
  if (fs->UmFileContextIsUserContext2) return (PVOID *)&c.UserContext2;
  return (PVOID *)&c.UserContext;
}
// Every request kind after Create starts its union with {UserContext, UserContext2}.
PVOID contextOf(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req) {
  auto *c = (FSP_FSCTL_TRANSACT_FULL_CONTEXT *)req->Req.Raw;
  if (fs->UmFileContextIsFullContext) return c;
  if (fs->UmFileContextIsUserContext2) return (PVOID)(UINT_PTR)c->UserContext2;
  return (PVOID)(UINT_PTR)c->UserContext;
}
void setOpened(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_RSP *rsp, const FSP_FSCTL_TRANSACT_FULL_CONTEXT &c) {
  if (fs->UmFileContextIsFullContext) {
    rsp->Rsp.Create.Opened.UserContext = c.UserContext;
    rsp->Rsp.Create.Opened.UserContext2 = c.UserContext2;
  } else if (fs->UmFileContextIsUserContext2) {
    rsp->Rsp.Create.Opened.UserContext2 = c.UserContext2;
  } else {
    rsp->Rsp.Create.Opened.UserContext = c.UserContext;
  }
}

NTSTATUS callResolve(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp, UINT32 index) {
  if (!fs->Interface->ResolveReparsePoints) return STATUS_INVALID_DEVICE_REQUEST;
  IO_STATUS_BLOCK ios = {};
  SIZE_T size = FSP_FSCTL_TRANSACT_RSP_SIZEMAX - sizeof(FSP_FSCTL_TRANSACT_RSP);
  NTSTATUS r = fs->Interface->ResolveReparsePoints(fs, (PWSTR)req->Buffer, index,
                                                   !(req->Req.Create.CreateOptions & FILE_OPEN_REPARSE_POINT), &ios,
                                                   rsp->Buffer, &size);
  noteCall("ResolveReparsePoints", (PWSTR)req->Buffer, r);
  if (r == STATUS_REPARSE) {
    rsp->IoStatus.Information = (UINT32)ios.Information;
    rsp->Rsp.Create.Reparse.Buffer.Offset = 0;
    rsp->Rsp.Create.Reparse.Buffer.Size = (UINT16)size;
  }
  return r;
}

// The three checks of fsop.c:160-345, in one place: what is asked of which descriptor.
NTSTATUS check(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp, int kind,
               UINT32 *granted, std::vector<UINT8> *parentSd) {
  auto &c = req->Req.Create;
  UINT32 disp = c.CreateOptions >> 24, g = 0, idx = 0;
  NTSTATUS r;
  if (kind == kCreate) {
    if (c.HasTrailingBackslash && !(c.CreateOptions & FILE_DIRECTORY_FILE)) return STATUS_OBJECT_NAME_INVALID;
    if ((c.FileAttributes & FILE_ATTRIBUTE_READONLY) && (c.CreateOptions & FILE_DELETE_ON_CLOSE))
      return STATUS_CANNOT_DELETE;
    UINT32 want = (c.CreateOptions & FILE_DIRECTORY_FILE) ? FILE_ADD_SUBDIRECTORY : FILE_ADD_FILE;
    r = accessCheck(fs, req, true, want, &g, &idx, parentSd);
    if (r == STATUS_REPARSE) return callResolve(fs, req, rsp, idx);
    if (!NT_SUCCESS(r)) return r;
    *granted = ((c.DesiredAccess & MAXIMUM_ALLOWED) ? FILE_ALL_ACCESS : c.DesiredAccess) | c.GrantedAccess;
    return r;
  }
  UINT32 want = c.DesiredAccess | ((c.CreateOptions & FILE_DELETE_ON_CLOSE) ? DELETE : 0);
  UINT32 keep = DELETE;
  if (kind == kOverwrite) {
    want |= disp == kSupersede ? DELETE : FILE_WRITE_DATA;
    keep = DELETE | FILE_WRITE_DATA;
  }
  r = accessCheck(fs, req, false, want, &g, &idx, nullptr);
  if (r == STATUS_REPARSE) return callResolve(fs, req, rsp, idx);
  if (!NT_SUCCESS(r)) return r;
  if (!(c.DesiredAccess & MAXIMUM_ALLOWED)) g &= ~keep | (c.DesiredAccess & keep);
  *granted = g | c.GrantedAccess;
  return r;
}

NTSTATUS doCreate(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp, UINT32 information) {
  UINT32 granted = 0;
  std::vector<UINT8> parentSd;
  NTSTATUS r = check(fs, req, rsp, kCreate, &granted, &parentSd);
  if (!NT_SUCCESS(r) || r == STATUS_REPARSE) return r;
  PSECURITY_DESCRIPTOR sd = nullptr;
  r = FspCreateSecurityDescriptor(fs, req, parentSd.empty() ? nullptr : parentSd.data(), &sd);
  if (!NT_SUCCESS(r)) return r;
  FSP_FSCTL_TRANSACT_FULL_CONTEXT fc = {};
  FSP_FSCTL_OPEN_FILE_INFO ofi = {};
  ofi.NormalizedName = (PWSTR)rsp->Buffer;
  ofi.NormalizedNameSize = FSP_FSCTL_TRANSACT_RSP_SIZEMAX - sizeof(FSP_FSCTL_TRANSACT_RSP);
  auto &c = req->Req.Create;
  if (fs->Interface->CreateEx)
    r = fs->Interface->CreateEx(fs, (PWSTR)req->Buffer, c.CreateOptions, granted, c.FileAttributes, sd,
                                c.AllocationSize, c.Ea.Size ? req->Buffer + c.Ea.Offset : nullptr, c.Ea.Size,
                                c.EaIsReparsePoint, addrOfContext(fs, fc), &ofi.FileInfo);
  else
    r = fs->Interface->Create(fs, (PWSTR)req->Buffer, c.CreateOptions, granted, c.FileAttributes, sd,
                              c.AllocationSize, addrOfContext(fs, fc), &ofi.FileInfo);
  noteCall(fs->Interface->CreateEx ? "CreateEx" : "Create", (PWSTR)req->Buffer, r);
  FspDeleteSecurityDescriptor(sd, (NTSTATUS(*)())FspCreateSecurityDescriptor);
  if (!NT_SUCCESS(r)) return r;
  if (ofi.NormalizedNameSize <= FSP_FSCTL_TRANSACT_PATH_SIZEMAX) rsp->Rsp.Create.Opened.FileName.Size = ofi.NormalizedNameSize;
  rsp->IoStatus.Information = information;
  setOpened(fs, rsp, fc);
  rsp->Rsp.Create.Opened.GrantedAccess = granted;
  rsp->Rsp.Create.Opened.FileInfo = ofi.FileInfo;
  return STATUS_SUCCESS;
}

// Open for FILE_OPEN, OPEN_IF, OVERWRITE*, SUPERSEDE: returns STATUS_OBJECT_NAME_NOT_FOUND
// unchanged so that the *_IF forms can fall back to Create (fsop.c:536-635, 700-760).
NTSTATUS doOpen(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp, int kind,
                UINT32 information) {
  UINT32 granted = 0;
  NTSTATUS r = check(fs, req, rsp, kind, &granted, nullptr);
  if (!NT_SUCCESS(r) || r == STATUS_REPARSE) return r;
  FSP_FSCTL_TRANSACT_FULL_CONTEXT fc = {};
  FSP_FSCTL_OPEN_FILE_INFO ofi = {};
  ofi.NormalizedName = (PWSTR)rsp->Buffer;
  ofi.NormalizedNameSize = FSP_FSCTL_TRANSACT_RSP_SIZEMAX - sizeof(FSP_FSCTL_TRANSACT_RSP);
  r = fs->Interface->Open(fs, (PWSTR)req->Buffer, req->Req.Create.CreateOptions, granted, addrOfContext(fs, fc),
                          &ofi.FileInfo);
  noteCall("Open", (PWSTR)req->Buffer, r);
  if (!NT_SUCCESS(r)) return r;
  if (ofi.NormalizedNameSize <= FSP_FSCTL_TRANSACT_PATH_SIZEMAX) rsp->Rsp.Create.Opened.FileName.Size = ofi.NormalizedNameSize;
  rsp->IoStatus.Information = information;
  setOpened(fs, rsp, fc);
  rsp->Rsp.Create.Opened.GrantedAccess = granted;
  rsp->Rsp.Create.Opened.FileInfo = ofi.FileInfo;
  return STATUS_SUCCESS;
}

NTSTATUS doOpenTargetDirectory(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp) {
  UINT32 granted = 0, idx = 0;
  NTSTATUS r = accessCheck(fs, req, true, req->Req.Create.DesiredAccess, &granted, &idx, nullptr);
  if (r == STATUS_REPARSE) return callResolve(fs, req, rsp, idx);
  if (!NT_SUCCESS(r)) return r;
  granted |= req->Req.Create.GrantedAccess;
  std::wstring full = (PWSTR)req->Buffer;
  size_t cut = full.find_last_of(L'\\');
  std::wstring parent = cut == 0 ? L"\\" : full.substr(0, cut);
  FSP_FSCTL_TRANSACT_FULL_CONTEXT fc = {};
  FSP_FSCTL_OPEN_FILE_INFO ofi = {};
  ofi.NormalizedName = (PWSTR)rsp->Buffer;
  ofi.NormalizedNameSize = FSP_FSCTL_TRANSACT_RSP_SIZEMAX - sizeof(FSP_FSCTL_TRANSACT_RSP);
  r = fs->Interface->Open(fs, &parent[0], req->Req.Create.CreateOptions | FILE_DIRECTORY_FILE, granted,
                          addrOfContext(fs, fc), &ofi.FileInfo);
  noteCall("Open", parent.c_str(), r);
  if (!NT_SUCCESS(r)) return r;
  if (ofi.NormalizedNameSize <= FSP_FSCTL_TRANSACT_PATH_SIZEMAX) rsp->Rsp.Create.Opened.FileName.Size = ofi.NormalizedNameSize;
  NTSTATUS e = fs->Interface->GetSecurityByName(fs, (PWSTR)req->Buffer, nullptr, nullptr, nullptr);
  noteCall("GetSecurityByName", (PWSTR)req->Buffer, e);
  rsp->IoStatus.Information = NT_SUCCESS(e) ? kExists : kDoesNotExist;
  setOpened(fs, rsp, fc);
  rsp->Rsp.Create.Opened.GrantedAccess = granted;
  rsp->Rsp.Create.Opened.FileInfo = ofi.FileInfo;
  return STATUS_SUCCESS;
}
}  // namespace

extern "C" {
WFD_API NTSTATUS FspFileSystemOpCreate(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp) {
  auto *i = fs->Interface;
  if ((!i->Create && !i->CreateEx) || !i->Open || (!i->Overwrite && !i->OverwriteEx))
    return STATUS_INVALID_DEVICE_REQUEST;
  if (req->Req.Create.OpenTargetDirectory) return doOpenTargetDirectory(fs, req, rsp);
  UINT32 disp = req->Req.Create.CreateOptions >> 24;
  NTSTATUS r;
  switch (disp) {
  case kCreate: r = doCreate(fs, req, rsp, kCreated); break;
  case kOpen: r = doOpen(fs, req, rsp, kOpen, kOpened); break;
  case kOpenIf:
    r = doOpen(fs, req, rsp, kOpen, kOpened);
    if (r == STATUS_OBJECT_NAME_NOT_FOUND) r = doCreate(fs, req, rsp, kCreated);
    break;
  case kOverwrite: r = doOpen(fs, req, rsp, kOverwrite, kOverwritten); break;
  case kOverwriteIf:
  case kSupersede:
    r = doOpen(fs, req, rsp, kOverwrite, disp == kSupersede ? kSuperseded : kOverwritten);
    if (r == STATUS_OBJECT_NAME_NOT_FOUND) r = doCreate(fs, req, rsp, kCreated);
    break;
  default: return STATUS_INVALID_PARAMETER;
  }
  if (r == STATUS_OBJECT_NAME_COLLISION && (req->Req.Create.CreateOptions & FILE_NON_DIRECTORY_FILE) &&
      i->GetSecurityByName) {
    // fsop.c:855-900: a collision with a directory, for a caller that wanted a file.
    UINT32 attrs = 0;
    if (NT_SUCCESS(i->GetSecurityByName(fs, (PWSTR)req->Buffer, &attrs, nullptr, nullptr)) &&
        (attrs & FILE_ATTRIBUTE_DIRECTORY))
      r = STATUS_FILE_IS_A_DIRECTORY;
  }
  return r;
}

WFD_API NTSTATUS FspFileSystemOpOverwrite(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req,
                                          FSP_FSCTL_TRANSACT_RSP *rsp) {
  auto *i = fs->Interface;
  if (!i->Overwrite && !i->OverwriteEx) return STATUS_INVALID_DEVICE_REQUEST;
  FSP_FSCTL_FILE_INFO info = {};
  auto &o = req->Req.Overwrite;
  NTSTATUS r = i->OverwriteEx ? i->OverwriteEx(fs, contextOf(fs, req), o.FileAttributes, o.Supersede, o.AllocationSize,
                                               o.Ea.Size ? req->Buffer + o.Ea.Offset : nullptr, o.Ea.Size, &info)
                              : i->Overwrite(fs, contextOf(fs, req), o.FileAttributes, o.Supersede, o.AllocationSize,
                                             &info);
  noteCall(i->OverwriteEx ? "OverwriteEx" : "Overwrite", nullptr, r);
  if (!NT_SUCCESS(r)) {
    // fsop.c:973-979: a failed overwrite is closed by the DLL itself; the driver sends nothing more.
    if (i->Close) {
      i->Close(fs, contextOf(fs, req));
      noteCall("Close", nullptr, STATUS_SUCCESS);
    }
    return r;
  }
  rsp->Rsp.Overwrite.FileInfo = info;
  return STATUS_SUCCESS;
}

WFD_API NTSTATUS FspFileSystemOpCleanup(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *) {
  auto &c = req->Req.Cleanup;
  ULONG flags = (c.Delete ? FspCleanupDelete : 0) | (c.SetAllocationSize ? FspCleanupSetAllocationSize : 0) |
                (c.SetArchiveBit ? FspCleanupSetArchiveBit : 0) |
                (c.SetLastAccessTime ? FspCleanupSetLastAccessTime : 0) |
                (c.SetLastWriteTime ? FspCleanupSetLastWriteTime : 0) | (c.SetChangeTime ? FspCleanupSetChangeTime : 0);
  if (fs->Interface->Cleanup) {
    fs->Interface->Cleanup(fs, contextOf(fs, req), req->FileName.Size ? (PWSTR)req->Buffer : nullptr, flags);
    noteCall("Cleanup", req->FileName.Size ? (PWSTR)req->Buffer : nullptr, STATUS_SUCCESS);
  }
  return STATUS_SUCCESS;  // the result of a cleanup goes nowhere (fsop.c:985-1000)
}

WFD_API NTSTATUS FspFileSystemOpClose(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *) {
  if (fs->Interface->Close) {
    fs->Interface->Close(fs, contextOf(fs, req));
    noteCall("Close", nullptr, STATUS_SUCCESS);
  }
  return STATUS_SUCCESS;
}

WFD_API NTSTATUS FspFileSystemOpRead(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp) {
  if (!fs->Interface->Read) return STATUS_INVALID_DEVICE_REQUEST;
  auto &w = req->Req.Write;
  ULONG n = 0;
  NTSTATUS r = fs->Interface->Read(fs, contextOf(fs, req), (PVOID)(UINT_PTR)w.Address, w.Offset, w.Length, &n);
  noteCall("Read", nullptr, r);
  if (NT_SUCCESS(r) && r != STATUS_PENDING) rsp->IoStatus.Information = n;
  return r;
}

WFD_API NTSTATUS FspFileSystemOpWrite(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp) {
  if (!fs->Interface->Write) return STATUS_INVALID_DEVICE_REQUEST;
  auto &w = req->Req.Write;
  ULONG n = 0;
  FSP_FSCTL_FILE_INFO info = {};
  NTSTATUS r = fs->Interface->Write(fs, contextOf(fs, req), (PVOID)(UINT_PTR)w.Address, w.Offset, w.Length,
                                    w.Offset == (UINT64)-1, w.ConstrainedIo, &n, &info);
  noteCall("Write", nullptr, r);
  if (NT_SUCCESS(r) && r != STATUS_PENDING) {
    rsp->IoStatus.Information = n;
    rsp->Rsp.Overwrite.FileInfo = info;  // Rsp.Write.FileInfo sits at the same place
  }
  return r;
}

WFD_API NTSTATUS FspFileSystemOpQueryInformation(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req,
                                                 FSP_FSCTL_TRANSACT_RSP *rsp) {
  if (!fs->Interface->GetFileInfo) return STATUS_INVALID_DEVICE_REQUEST;
  FSP_FSCTL_FILE_INFO info = {};
  NTSTATUS r = fs->Interface->GetFileInfo(fs, contextOf(fs, req), &info);
  noteCall("GetFileInfo", nullptr, r);
  if (NT_SUCCESS(r)) rsp->Rsp.Overwrite.FileInfo = info;
  return r;
}

WFD_API NTSTATUS FspFileSystemOpSetInformation(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req,
                                               FSP_FSCTL_TRANSACT_RSP *rsp) {
  auto *i = fs->Interface;
  auto &s = req->Req.SetInformation;
  PVOID ctx = contextOf(fs, req);
  FSP_FSCTL_FILE_INFO info = {};
  NTSTATUS r = STATUS_INVALID_PARAMETER;
  switch (s.FileInformationClass) {
  case 4:  // FileBasicInformation
    if (!i->SetBasicInfo) return STATUS_INVALID_DEVICE_REQUEST;
    r = i->SetBasicInfo(fs, ctx, s.Info.Basic.FileAttributes, s.Info.Basic.CreationTime, s.Info.Basic.LastAccessTime,
                        s.Info.Basic.LastWriteTime, s.Info.Basic.ChangeTime, &info);
    noteCall("SetBasicInfo", nullptr, r);
    break;
  case 19:  // FileAllocationInformation
  case 20:  // FileEndOfFileInformation
    if (!i->SetFileSize) return STATUS_INVALID_DEVICE_REQUEST;
    r = i->SetFileSize(fs, ctx, s.FileInformationClass == 19 ? s.Info.Allocation.AllocationSize : s.Info.EndOfFile.FileSize,
                       s.FileInformationClass == 19, &info);
    noteCall("SetFileSize", nullptr, r);
    break;
  case 13:  // FileDispositionInformation
  case 64: {  // FileDispositionInformationEx (fsop.c:1143-1173)
    UINT32 flags = s.FileInformationClass == 13 ? (s.Info.Disposition.Delete ? 1u : 0u) : s.Info.DispositionEx.Flags;
    if ((flags & 1) && !(flags & 0x10) && i->GetFileInfo) {
      r = i->GetFileInfo(fs, ctx, &info);
      noteCall("GetFileInfo", nullptr, r);
      if (!NT_SUCCESS(r)) return r;
      if (info.FileAttributes & FILE_ATTRIBUTE_READONLY) return STATUS_CANNOT_DELETE;
    }
    if (i->SetDelete) {
      r = i->SetDelete(fs, ctx, (PWSTR)req->Buffer, !!(flags & 1));
      noteCall("SetDelete", (PWSTR)req->Buffer, r);
    } else if (flags & 1) {
      if (!i->CanDelete) return STATUS_INVALID_DEVICE_REQUEST;
      r = i->CanDelete(fs, ctx, (PWSTR)req->Buffer);
      noteCall("CanDelete", (PWSTR)req->Buffer, r);
    } else {
      r = STATUS_SUCCESS;
    }
    return r;
  }
  case 10:  // FileRenameInformation
  case 65: {  // FileRenameInformationEx
    if (!i->Rename) return STATUS_INVALID_DEVICE_REQUEST;
    PWSTR newName = (PWSTR)(req->Buffer + s.Info.Rename.NewFileName.Offset);
    if (s.Info.Rename.AccessToken) {
      // fsop.c:346-401, RenameCheck: may the caller delete what the new name is now?
      std::vector<UINT8> buf(FSP_FSCTL_TRANSACT_REQ_SIZEMAX);
      auto *cr = (FSP_FSCTL_TRANSACT_REQ *)buf.data();
      cr->Kind = FspFsctlTransactCreateKind;
      cr->Req.Create.CreateOptions = FILE_OPEN_REPARSE_POINT | ((s.Info.RenameEx.Flags & 0x40) ? 0 : FILE_DELETE_ON_CLOSE);
      cr->Req.Create.AccessToken = s.Info.Rename.AccessToken;
      cr->Req.Create.DesiredAccess = DELETE;
      cr->Req.Create.UserMode = 1;
      cr->Req.Create.HasTraversePrivilege = 1;
      wcscpy((PWSTR)cr->Buffer, newName);
      UINT32 granted = 0, idx = 0;
      r = accessCheck(fs, cr, false, DELETE, &granted, &idx, nullptr);
      if (!NT_SUCCESS(r) && r != STATUS_OBJECT_NAME_NOT_FOUND && r != STATUS_OBJECT_PATH_NOT_FOUND)
        return r == STATUS_CANNOT_DELETE ? r : STATUS_ACCESS_DENIED;
    }
    r = i->Rename(fs, ctx, (PWSTR)req->Buffer, newName, s.Info.Rename.AccessToken != 0);
    noteCall("Rename", newName, r);
    return r;
  }
  default: return STATUS_INVALID_PARAMETER;
  }
  if (NT_SUCCESS(r)) rsp->Rsp.Overwrite.FileInfo = info;
  return r;
}

WFD_API NTSTATUS FspFileSystemOpQueryDirectory(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req,
                                               FSP_FSCTL_TRANSACT_RSP *rsp) {
  auto *i = fs->Interface;
  auto &q = req->Req.QueryDirectory;
  PWSTR pattern = q.Pattern.Size ? (PWSTR)(req->Buffer + q.Pattern.Offset) : nullptr;
  PWSTR marker = q.Marker.Size ? (PWSTR)(req->Buffer + q.Marker.Offset) : nullptr;
  ULONG n = 0;
  NTSTATUS r;
  if (i->GetDirInfoByName && q.PatternIsFileName && pattern) {
    union { FSP_FSCTL_DIR_INFO d; UINT8 b[sizeof(FSP_FSCTL_DIR_INFO) + 255 * sizeof(WCHAR)]; } di;
    memset(&di, 0, sizeof di);
    r = i->GetDirInfoByName(fs, contextOf(fs, req), pattern, &di.d);
    noteCall("GetDirInfoByName", pattern, r);
    if (NT_SUCCESS(r)) {
      FspFileSystemAddDirInfo(&di.d, (PVOID)(UINT_PTR)q.Address, q.Length, &n);
      FspFileSystemAddDirInfo(nullptr, (PVOID)(UINT_PTR)q.Address, q.Length, &n);
    } else if (r == STATUS_OBJECT_NAME_NOT_FOUND) {
      FspFileSystemAddDirInfo(nullptr, (PVOID)(UINT_PTR)q.Address, q.Length, &n);
      r = STATUS_SUCCESS;
    }
  } else {
    if (!i->ReadDirectory) return STATUS_INVALID_DEVICE_REQUEST;
    r = i->ReadDirectory(fs, contextOf(fs, req), pattern, marker, (PVOID)(UINT_PTR)q.Address, q.Length, &n);
    noteCall("ReadDirectory", marker, r);
  }
  if (NT_SUCCESS(r) && r != STATUS_PENDING) rsp->IoStatus.Information = n;
  return r;
}

WFD_API NTSTATUS FspFileSystemOpFileSystemControl(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req,
                                                  FSP_FSCTL_TRANSACT_RSP *rsp) {
  auto *i = fs->Interface;
  auto &f = req->Req.FileSystemControl;
  PVOID buf = req->Buffer + f.Buffer.Offset;
  NTSTATUS r;
  switch (f.FsControlCode) {
  case FSCTL_SET_REPARSE_POINT:
    if (!i->SetReparsePoint) return STATUS_INVALID_DEVICE_REQUEST;
    r = i->SetReparsePoint(fs, contextOf(fs, req), (PWSTR)req->Buffer, buf, f.Buffer.Size);
    noteCall("SetReparsePoint", (PWSTR)req->Buffer, r);
    return r;
  case FSCTL_DELETE_REPARSE_POINT:
    if (!i->DeleteReparsePoint) return STATUS_INVALID_DEVICE_REQUEST;
    r = i->DeleteReparsePoint(fs, contextOf(fs, req), (PWSTR)req->Buffer, buf, f.Buffer.Size);
    noteCall("DeleteReparsePoint", (PWSTR)req->Buffer, r);
    return r;
  case FSCTL_GET_REPARSE_POINT: {
    if (!i->GetReparsePoint) return STATUS_INVALID_DEVICE_REQUEST;
    SIZE_T size = FSP_FSCTL_TRANSACT_RSP_SIZEMAX - sizeof(FSP_FSCTL_TRANSACT_RSP);
    r = i->GetReparsePoint(fs, contextOf(fs, req), (PWSTR)req->Buffer, rsp->Buffer, &size);
    noteCall("GetReparsePoint", (PWSTR)req->Buffer, r);
    if (NT_SUCCESS(r)) rsp->IoStatus.Information = (UINT32)size;
    return r;
  }
  default: return STATUS_INVALID_DEVICE_REQUEST;
  }
}

WFD_API NTSTATUS FspFileSystemOpQuerySecurity(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req,
                                              FSP_FSCTL_TRANSACT_RSP *rsp) {
  if (!fs->Interface->GetSecurity) return STATUS_INVALID_DEVICE_REQUEST;
  SIZE_T size = FSP_FSCTL_TRANSACT_RSP_SIZEMAX - sizeof(FSP_FSCTL_TRANSACT_RSP);
  NTSTATUS r = fs->Interface->GetSecurity(fs, contextOf(fs, req), rsp->Buffer, &size);
  noteCall("GetSecurity", nullptr, r);
  if (r == STATUS_BUFFER_OVERFLOW) return STATUS_INVALID_SECURITY_DESCR;  // fsop.c:1438-1458
  if (NT_SUCCESS(r)) rsp->IoStatus.Information = (UINT32)size;
  return r;
}

WFD_API NTSTATUS FspFileSystemOpQueryVolumeInformation(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *,
                                                       FSP_FSCTL_TRANSACT_RSP *rsp) {
  if (!fs->Interface->GetVolumeInfo) return STATUS_INVALID_DEVICE_REQUEST;
  FSP_FSCTL_VOLUME_INFO vi = {};
  NTSTATUS r = fs->Interface->GetVolumeInfo(fs, &vi);
  noteCall("GetVolumeInfo", nullptr, r);
  if (NT_SUCCESS(r)) memcpy(rsp->Rsp.Raw, &vi, sizeof vi);
  return r;
}
}  // extern "C"
