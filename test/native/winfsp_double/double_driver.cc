// winfsp-x64.dll, the test double of WinFsp (shadowfs issue 28): the driver and I/O manager model.
//
// WHAT IT IS. A DLL with WinFsp's own export names and signatures that a file system written
// against FSP_FILE_SYSTEM_INTERFACE links against instead of WinFsp. It has no kernel: where
// WinFsp's DLL would hand requests to the driver (FspFsctlTransact), the double's own model of
// the driver produces them, from I/O sequences a scenario names (double_run.cc). Written from
// WinFsp's documentation and source (commit e7c7ccc, 2026 Beta2) in our own code; it includes no
// shadowfs header and no WinFsp file.
//
// WHAT IT MODELS (file references are to WinFsp's tree):
// - The DLL (double_dll.cc, double_ops.cc): FspFileSystemCreate/Delete/SetMountPoint(Ex)/
//   RemoveMountPoint/Start/StopDispatcher (src/dll/fs.c), dispatcher threads taking the operation
//   guard (EnterOperation/LeaveOperation read from the struct at each request, fsop.c:47-127) with
//   one zeroed Response per request and FspFileSystemGetOperationContext valid inside callbacks
//   only; the create-disposition dispatch (Open then a separate Overwrite; a failed Overwrite
//   closed by the DLL; *_IF falling back to Create on not-found; fsop.c:402-944); the open-time
//   access check against the descriptor GetSecurityByName returns, with a real impersonation token
//   (security.c:55-402); CreatePrivateObjectSecurity for new files; Disposition (read-only check,
//   SetDelete over CanDelete), Rename (RenameCheck of the target when replacing), ReadDirectory /
//   GetDirInfoByName, reparse FSCTLs, GetSecurity; the helpers (AddDirInfo, the directory buffer,
//   FindReparsePoint, ResolveReparsePoints, CanReplaceReparsePoint, security descriptors).
// - Mandatory integrity control in the open-time access check (double_dll.cc, runAccessCheck): a
//   Low-integrity opener is refused write rights on an object labelled above Low or unlabelled
//   (Medium) with NO_WRITE_UP; Low and Medium levels only.
// - New objects' security descriptors: CreatePrivateObjectSecurity's documented rules, in the
//   double's own code (double_dll.cc), because wine 8.0's is a semi-stub (O:WD G:WD, no DACL).
// - The driver (this file): name checks (src/sys/name.c), root rules and attribute masking
//   (create.c:265-742); the node table keyed by name with the volume's case rule, share access
//   checked after the file system opened, with Close and no Cleanup on failure, delete-pending,
//   and image sections (create.c:1074-1130, file.c:607-790): a section is made from a file object
//   opened with FILE_EXECUTE and holds it, so its Close waits for the unmapping while page-ins
//   keep reading through it after the program's CloseHandle (double_run.cc, "Image sections"); the normalized-name check;
//   the Overwrite request with the HIDDEN/SYSTEM rule (create.c:1190-1233); Cleanup flags and
//   PostCleanupWhenModifiedOnly (cleanup.c, file.c:793-830), the name dropped from the table after
//   a delete cleanup; Disposition (classic and Ex, status caching per handle,
//   PostDispositionWhenNecessaryOnly, root, image; fileinfo.c:1455-1723); Rename (old-name and
//   new-name open-handle checks, same-name shortcut, descendants renamed; file.c:1319-1571,
//   fileinfo.c:1725-1955); directory queries (pattern upper-cased on case-insensitive volumes,
//   marker = last entry consumed, re-query when a batch matched nothing, NO_SUCH_FILE vs
//   NO_MORE_FILES, the directory cache for pattern-less, marker-less queries; dirctl.c); reparse
//   results (IO_REPARSE, device-relative and absolute symlinks, junctions handed to the I/O
//   manager; create.c:855-1024), which the I/O manager stand-in re-opens on this volume when the
//   target maps back to it and otherwise reports without following; FspFileSystemNotify records
//   (parsed at 8-byte alignment, relative names, processed asynchronously, invalidating the
//   caches of open names always and the parent's listing only with a non-zero Filter;
//   volume.c:1487-1599, file.c:2372-2471), NotifyBegin refused with STATUS_CANT_WAIT during a
//   rename; the open node's FileInfo cache, kept for FileInfoTimeout from every answer that
//   carries a FileInfo and dropped by a notify of the name (file.c:1703-1840); the mount
//   directory, created (it must not exist, its parent must) and removed with the mount handle
//   as mount.c:474-577 does, but a plain directory: not a junction to the volume.
// - The I/O manager, just enough: CreateFileW/NtCreateFile arguments, DeleteFileW's
//   "Ex+POSIX, then classic on any failure", MoveFileExW's target-directory open, and the rights a
//   handle needs for each call.
//
// WHAT IT CANNOT SHOW. No kernel runs: no cache manager or memory mapping (data caching with
// FileInfoTimeout=INFINITE, paging I/O, flush-before-cleanup, MmFlushImageSection; a
// section is a count on the node and a reference on the file object that a scenario makes, and
// every page-in is a Read: no page is kept), no oplocks, no real I/O manager races or cancellation, no Mount Manager
// or MUP (so GetFinalPathNameByHandleW, drive letters in other logon sessions and directory
// junction mounts are modelled as contracts, not observed: SetMountPoint checks WinFsp's rules
// and makes the mount directory, but a program that opens it reaches an empty host directory,
// never the volume; a drive letter is recorded only), no traverse checks (the caller is taken to
// hold SeChangeNotifyPrivilege), no named streams, EAs, SACLs or WSL information, no security
// or volume-information cache, and requests are issued one at a time by the scenario thread
// (dispatcher threads run them, but no two scenario steps race: no concurrency is modelled).
// Wine 8.0 cannot make reparse points on its own disks, so links exist only inside the volume.
//
// WHERE IT RAN. Built with MinGW and run under wine only: against WinFsp's own memfs sample
// (run-memfs-check.sh, every scenario passes) and against shadowfs's "winfsp" backend
// (test/windows/winfsp-double-win32.test.ts). Nothing ran on Windows; no WinFsp driver and no
// WinFsp mount were involved.
#include "double_driver.h"

#include <cstring>
#include <cwctype>

using namespace wfd;

namespace {
std::mutex volumesLock;
std::map<FSP_FILE_SYSTEM *, Volume *> volumes;

std::wstring upper(std::wstring s) {
  CharUpperBuffW(&s[0], (DWORD)s.size());
  return s;
}
}  // namespace

namespace wfd {
Volume *volumeOf(FSP_FILE_SYSTEM *fs) {
  std::lock_guard<std::mutex> g(volumesLock);
  auto it = volumes.find(fs);
  return it == volumes.end() ? nullptr : it->second;
}
std::wstring Volume::key(const std::wstring &name) const { return params.CaseSensitiveSearch ? name : upper(name); }
DWORD Volume::dirInfoTimeout() const {
  if (params.Version == sizeof(FSP_FSCTL_VOLUME_PARAMS) && params.DirInfoTimeoutValid) return params.DirInfoTimeout;
  return params.FileInfoTimeout;
}
}  // namespace wfd

// --- the dispatcher (src/dll/fs.c) -------------------------------------------------------------

namespace {
NTSTATUS opEnter(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *) {
  // fsop.c:47-127: exclusive for namespace changes, shared for opens and listings, none else.
  int mode = 0;  // 0 none, 1 shared, 2 exclusive
  if (fs->OpGuardStrategy == FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY_COARSE)
    mode = 2;
  else
    switch (req->Kind) {
    case FspFsctlTransactCreateKind: mode = (req->Req.Create.CreateOptions >> 24) == 1 ? 1 : 2; break;
    case FspFsctlTransactOverwriteKind: mode = 2; break;
    case FspFsctlTransactCleanupKind: mode = req->Req.Cleanup.Delete ? 2 : 0; break;
    case FspFsctlTransactSetInformationKind: {
      UINT32 c = req->Req.SetInformation.FileInformationClass;
      mode = c == 10 || c == 65 ? 2 : c == 13 || c == 64 ? 1 : 0;
      break;
    }
    case FspFsctlTransactQueryDirectoryKind:
    case FspFsctlTransactQueryVolumeInformationKind: mode = 1; break;
    default: break;
    }
  if (mode == 2) AcquireSRWLockExclusive(&fs->OpGuardLock);
  if (mode == 1) AcquireSRWLockShared(&fs->OpGuardLock);
  req->Req.Raw[63] = (UINT8)mode;  // remembered for Leave in an unused byte of the union
  return STATUS_SUCCESS;
}
NTSTATUS opLeave(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *) {
  if (req->Req.Raw[63] == 2) ReleaseSRWLockExclusive(&fs->OpGuardLock);
  if (req->Req.Raw[63] == 1) ReleaseSRWLockShared(&fs->OpGuardLock);
  return STATUS_SUCCESS;
}

}  // namespace

// One request through a dispatcher thread, the way fs.c:284-344 serves it; returns the status.
NTSTATUS transactForIo(Volume *v, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp) {
  FSP_FILE_SYSTEM *fs = v->fs;
  bool done = false;
  {
    std::lock_guard<std::mutex> g(v->lock);
    req->Hint = v->nextHint++;
  }
  req->Version = 0;
  auto job = [fs, v, req, rsp, &done]() {
    memset(rsp, 0, sizeof *rsp);
    rsp->Size = sizeof *rsp;
    rsp->Kind = req->Kind;
    rsp->Hint = req->Hint;
    FSP_FILE_SYSTEM_OPERATION_CONTEXT ctx = {req, rsp};
    setOperationContext(&ctx);
    NTSTATUS r = STATUS_INVALID_DEVICE_REQUEST;
    FSP_FILE_SYSTEM_OPERATION_GUARD *enter = fs->EnterOperation, *leave = fs->LeaveOperation;
    if (enter) r = enter(fs, req, rsp);
    if (!enter || NT_SUCCESS(r)) {
      r = req->Kind < FspFsctlTransactKindCount && fs->Operations[req->Kind]
              ? fs->Operations[req->Kind](fs, req, rsp)
              : STATUS_INVALID_DEVICE_REQUEST;
      if (leave) leave(fs, req, rsp);
    }
    setOperationContext(nullptr);
    std::lock_guard<std::mutex> g(v->lock);
    if (r == STATUS_PENDING) {
      v->pending[req->Hint] = {rsp, &done};  // FspFileSystemSendResponse completes it
    } else {
      rsp->IoStatus.Status = (UINT32)r;
      done = true;
    }
    v->cv.notify_all();
  };
  std::unique_lock<std::mutex> g(v->lock);
  if (!v->started) return STATUS_CANCELLED;  // the driver refuses IRPs before Transact0
  v->queue.push_back(job);
  v->cv.notify_all();
  v->cv.wait(g, [&] { return done; });
  return (NTSTATUS)rsp->IoStatus.Status;
}

namespace {
void dispatcherThread(Volume *v) {
  std::unique_lock<std::mutex> g(v->lock);
  for (;;) {
    v->cv.wait(g, [v] { return v->stopping || !v->queue.empty(); });
    if (v->queue.empty()) break;
    auto job = std::move(v->queue.front());
    v->queue.pop_front();
    g.unlock();
    job();
    g.lock();
  }
}

}  // namespace

// --- exports: the file system object, mount point, dispatcher ------------------------------------

extern "C" {
WFD_API NTSTATUS FspFileSystemOpCreate(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpOverwrite(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpCleanup(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpClose(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpRead(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpWrite(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpQueryInformation(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpSetInformation(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpQueryDirectory(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpFileSystemControl(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpQuerySecurity(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *, FSP_FSCTL_TRANSACT_RSP *);
WFD_API NTSTATUS FspFileSystemOpQueryVolumeInformation(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *,
                                                       FSP_FSCTL_TRANSACT_RSP *);
void WinFspDoubleMaybeStartEnvScenario(FSP_FILE_SYSTEM *fs);

WFD_API NTSTATUS FspFileSystemOpEnter(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp) {
  return opEnter(fs, req, rsp);
}
WFD_API NTSTATUS FspFileSystemOpLeave(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp) {
  return opLeave(fs, req, rsp);
}

WFD_API NTSTATUS FspFileSystemPreflight(PWSTR DevicePath, PWSTR MountPoint) {
  (void)DevicePath;
  if (!MountPoint) return STATUS_SUCCESS;
  std::wstring mp = MountPoint;
  if (mp.size() == 2 && mp[1] == L':') {
    WCHAR target[MAX_PATH];
    return QueryDosDeviceW(MountPoint, target, MAX_PATH) ? STATUS_OBJECT_NAME_COLLISION : STATUS_SUCCESS;
  }
  if (mp.rfind(L"\\\\.\\", 0) == 0 || mp.rfind(L"\\\\?\\", 0) == 0) return STATUS_SUCCESS;
  DWORD a = GetFileAttributesW(MountPoint);
  if (a != INVALID_FILE_ATTRIBUTES) return STATUS_OBJECT_NAME_COLLISION;
  return GetLastError() == ERROR_FILE_NOT_FOUND ? STATUS_SUCCESS : STATUS_OBJECT_NAME_INVALID;
}

WFD_API NTSTATUS FspFileSystemCreate(PWSTR DevicePath, const FSP_FSCTL_VOLUME_PARAMS *VolumeParams,
                                     const FSP_FILE_SYSTEM_INTERFACE *Interface, FSP_FILE_SYSTEM **PFileSystem) {
  static const FSP_FILE_SYSTEM_INTERFACE nullInterface = {};
  *PFileSystem = nullptr;
  if (VolumeParams->UmFileContextIsUserContext2 && VolumeParams->UmFileContextIsFullContext)
    return STATUS_INVALID_PARAMETER;
  if (VolumeParams->Version != 0 && VolumeParams->Version != sizeof(FSP_FSCTL_VOLUME_PARAMS))
    return STATUS_INVALID_PARAMETER;  // the driver rejects other sizes (volume.c:214-217)
  std::wstring dev = DevicePath ? DevicePath : L"";
  if (dev != L"WinFsp.Disk" && dev != L"WinFsp.Net") return STATUS_INVALID_PARAMETER;
  auto *fs = (FSP_FILE_SYSTEM *)calloc(1, sizeof(FSP_FILE_SYSTEM));
  auto *v = new Volume();
  v->fs = fs;
  v->devicePath = dev;
  size_t n = VolumeParams->Version == 0 ? 456 : sizeof(FSP_FSCTL_VOLUME_PARAMS);
  memcpy(&v->params, VolumeParams, n);
  // The driver's defaults (volume.c:219-306).
  if (!v->params.SectorSize) v->params.SectorSize = 512;
  if (!v->params.SectorsPerAllocationUnit) v->params.SectorsPerAllocationUnit = 1;
  if (!v->params.MaxComponentLength) v->params.MaxComponentLength = 255;
  fs->Interface = Interface ? Interface : &nullInterface;
  static LONG serial = 0;
  swprintf(fs->VolumeName, 256, L"\\Device\\Volume{d0b1e000-0000-0000-0000-%012ld}", InterlockedIncrement(&serial));
  if (dev == L"WinFsp.Net") wcsncat(fs->VolumeName, VolumeParams->Prefix, 190);
  fs->VolumeHandle = (HANDLE)v;
  fs->OpGuardStrategy = FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY_FINE;
  InitializeSRWLock(&fs->OpGuardLock);
  fs->EnterOperation = FspFileSystemOpEnter;
  fs->LeaveOperation = FspFileSystemOpLeave;
  fs->Operations[FspFsctlTransactCreateKind] = FspFileSystemOpCreate;
  fs->Operations[FspFsctlTransactOverwriteKind] = FspFileSystemOpOverwrite;
  fs->Operations[FspFsctlTransactCleanupKind] = FspFileSystemOpCleanup;
  fs->Operations[FspFsctlTransactCloseKind] = FspFileSystemOpClose;
  fs->Operations[FspFsctlTransactReadKind] = FspFileSystemOpRead;
  fs->Operations[FspFsctlTransactWriteKind] = FspFileSystemOpWrite;
  fs->Operations[FspFsctlTransactQueryInformationKind] = FspFileSystemOpQueryInformation;
  fs->Operations[FspFsctlTransactSetInformationKind] = FspFileSystemOpSetInformation;
  fs->Operations[FspFsctlTransactQueryDirectoryKind] = FspFileSystemOpQueryDirectory;
  fs->Operations[FspFsctlTransactFileSystemControlKind] = FspFileSystemOpFileSystemControl;
  fs->Operations[FspFsctlTransactQuerySecurityKind] = FspFileSystemOpQuerySecurity;
  fs->Operations[FspFsctlTransactQueryVolumeInformationKind] = FspFileSystemOpQueryVolumeInformation;
  fs->UmFileContextIsUserContext2 = VolumeParams->UmFileContextIsUserContext2;
  fs->UmFileContextIsFullContext = VolumeParams->UmFileContextIsFullContext;
  fs->UmNoReparsePointsDirCheck = VolumeParams->UmNoReparsePointsDirCheck;
  // The token the driver would capture from the opener: an impersonation token of this process.
  HANDLE primary = nullptr;
  if (OpenProcessToken(GetCurrentProcess(), TOKEN_DUPLICATE | TOKEN_QUERY, &primary)) {
    DuplicateToken(primary, SecurityIdentification, &v->token);
    CloseHandle(primary);
  }
  {
    std::lock_guard<std::mutex> g(volumesLock);
    volumes[fs] = v;
  }
  *PFileSystem = fs;
  return STATUS_SUCCESS;
}

WFD_API VOID FspFileSystemRemoveMountPoint(FSP_FILE_SYSTEM *FileSystem) {
  // The mount directory goes with its handle (FILE_FLAG_DELETE_ON_CLOSE, mount.c:505-508;
  // FspMountRemove_Directory closes it). Removed by name too in case the host's file system did
  // not honour delete-on-close for a directory.
  if (Volume *v = volumeOf(FileSystem)) {
    if (v->mountDirHandle != INVALID_HANDLE_VALUE) {
      CloseHandle(v->mountDirHandle);
      v->mountDirHandle = INVALID_HANDLE_VALUE;
      RemoveDirectoryW(v->mountDir.c_str());
    }
  }
  free(FileSystem->MountPoint);
  FileSystem->MountPoint = nullptr;
  FileSystem->MountHandle = nullptr;
}

WFD_API VOID FspFileSystemDelete(FSP_FILE_SYSTEM *FileSystem) {
  FspFileSystemRemoveMountPoint(FileSystem);
  Volume *v = volumeOf(FileSystem);
  {
    std::lock_guard<std::mutex> g(volumesLock);
    volumes.erase(FileSystem);
  }
  if (v) {
    waitNotifications(v);
    for (auto &kv : v->nodes) delete kv.second;
    if (v->token) CloseHandle(v->token);
    if (v->lowToken) closeLowIntegrityToken(v->lowToken);
    delete v;
  }
  free(FileSystem);
}

WFD_API NTSTATUS FspFileSystemSetMountPointEx(FSP_FILE_SYSTEM *FileSystem, PWSTR MountPoint,
                                              PSECURITY_DESCRIPTOR SecurityDescriptor) {
  (void)SecurityDescriptor;
  if (FileSystem->MountPoint) return STATUS_INVALID_PARAMETER;
  Volume *v = volumeOf(FileSystem);
  std::wstring mp = MountPoint ? MountPoint : L"*:";
  bool net = v && v->devicePath == L"WinFsp.Net";
  if (mp == L"*:") {
    // The highest free letter from Z: down to D: (mount.c); the double asks the host's DOS devices.
    mp.clear();
    for (WCHAR l = L'Z'; l >= L'D' && mp.empty(); l--) {
      WCHAR dev[3] = {l, L':', 0}, target[MAX_PATH];
      if (!QueryDosDeviceW(dev, target, MAX_PATH)) mp = dev;
    }
    if (mp.empty()) return STATUS_NO_SUCH_DEVICE;
  } else if (mp.size() == 2 && mp[1] == L':') {
    WCHAR target[MAX_PATH];
    if (QueryDosDeviceW(&mp[0], target, MAX_PATH)) return STATUS_OBJECT_NAME_COLLISION;
  } else if (mp.rfind(L"\\\\.\\", 0) == 0 || mp.rfind(L"\\\\?\\", 0) == 0) {
    // Mount Manager forms need Administrator (or MountUseMountmgrFromFSD); modelled as accepted.
    if (net) return STATUS_INVALID_PARAMETER;
  } else {
    // A directory: it must not exist, its parent must, and a network volume cannot be put there
    // (mount.c:474-577, 487-499). WinFsp creates the directory (FILE_CREATE, delete-on-close,
    // mount.c:505-512) and makes it a junction to the volume (mount.c:517-560). The double
    // creates the directory the same way and keeps its handle as the mount handle, so that it
    // exists exactly while mounted; the junction cannot be made (wine has no reparse point to
    // a volume that is not there): a program that opens the directory reaches an empty host
    // directory, not the volume. Scenarios reach the volume through the double, never by path.
    if (net) return STATUS_NETWORK_ACCESS_DENIED;
    if (GetFileAttributesW(mp.c_str()) != INVALID_FILE_ATTRIBUTES) return STATUS_OBJECT_NAME_COLLISION;
    std::wstring parent = mp.substr(0, mp.find_last_of(L"\\/"));
    if (parent.empty() || GetFileAttributesW(parent.c_str()) == INVALID_FILE_ATTRIBUTES)
      return STATUS_OBJECT_PATH_NOT_FOUND;
    if (!CreateDirectoryW(mp.c_str(), (LPSECURITY_ATTRIBUTES) nullptr))
      return GetLastError() == ERROR_ALREADY_EXISTS ? STATUS_OBJECT_NAME_COLLISION : STATUS_OBJECT_NAME_INVALID;
    HANDLE h = CreateFileW(mp.c_str(), FILE_WRITE_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           nullptr, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_DELETE_ON_CLOSE, nullptr);
    if (h == INVALID_HANDLE_VALUE) {
      RemoveDirectoryW(mp.c_str());
      return STATUS_ACCESS_DENIED;
    }
    if (v) {
      v->mountDirHandle = h;
      v->mountDir = mp;
    } else {
      CloseHandle(h);
    }
  }
  FileSystem->MountPoint = _wcsdup(mp.c_str());
  FileSystem->MountHandle = (HANDLE)v;
  WinFspDoubleMaybeStartEnvScenario(FileSystem);
  return STATUS_SUCCESS;
}
WFD_API NTSTATUS FspFileSystemSetMountPoint(FSP_FILE_SYSTEM *FileSystem, PWSTR MountPoint) {
  return FspFileSystemSetMountPointEx(FileSystem, MountPoint, nullptr);
}

WFD_API NTSTATUS FspFileSystemStartDispatcher(FSP_FILE_SYSTEM *FileSystem, ULONG ThreadCount) {
  Volume *v = volumeOf(FileSystem);
  if (!v || v->started) return STATUS_INVALID_PARAMETER;
  if (ThreadCount == 0) {
    DWORD_PTR proc = 0, sys = 0;
    GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys);
    ThreadCount = 0;
    for (; proc; proc &= proc - 1) ThreadCount++;
    ThreadCount = ThreadCount < 4 ? 4 : ThreadCount > 16 ? 16 : ThreadCount;
  }
  if (ThreadCount < 2) ThreadCount = 2;
  v->started = true;
  v->stopping = false;
  for (ULONG i = 0; i < ThreadCount; i++) v->threads.emplace_back(dispatcherThread, v);
  FileSystem->DispatcherThread = (HANDLE)v;
  FileSystem->DispatcherThreadCount = ThreadCount;
  WinFspDoubleMaybeStartEnvScenario(FileSystem);
  return STATUS_SUCCESS;
}

WFD_API VOID FspFileSystemStopDispatcher(FSP_FILE_SYSTEM *FileSystem) {
  Volume *v = volumeOf(FileSystem);
  if (!v || !v->started) return;
  FileSystem->DispatcherStopping = 1;
  {
    std::lock_guard<std::mutex> g(v->lock);
    v->stopping = true;
    v->cv.notify_all();
  }
  for (auto &t : v->threads) t.join();
  v->threads.clear();
  v->started = false;
  // fs.c:346-377: the transact fails once the queue is stopped; the first thread reports it.
  FileSystem->DispatcherResult = STATUS_CANCELLED;
  if (FileSystem->Interface->DispatcherStopped) FileSystem->Interface->DispatcherStopped(FileSystem, TRUE);
  FileSystem->DispatcherStopping = 0;
  FileSystem->DispatcherThread = nullptr;
}

WFD_API VOID FspFileSystemSendResponse(FSP_FILE_SYSTEM *FileSystem, FSP_FSCTL_TRANSACT_RSP *Response) {
  Volume *v = volumeOf(FileSystem);
  if (!v) return;
  std::lock_guard<std::mutex> g(v->lock);
  auto it = v->pending.find(Response->Hint);
  if (it == v->pending.end()) return;
  memcpy(it->second.first, Response, Response->Size < sizeof *Response ? sizeof *Response : Response->Size);
  *it->second.second = true;
  v->pending.erase(it);
  v->cv.notify_all();
}

WFD_API PWSTR FspFileSystemMountPointF(FSP_FILE_SYSTEM *FileSystem) { return FileSystem->MountPoint; }
WFD_API VOID FspFileSystemSetOperationGuardF(FSP_FILE_SYSTEM *FileSystem, FSP_FILE_SYSTEM_OPERATION_GUARD *Enter,
                                             FSP_FILE_SYSTEM_OPERATION_GUARD *Leave) {
  FileSystem->EnterOperation = Enter;
  FileSystem->LeaveOperation = Leave;
}
WFD_API VOID FspFileSystemSetOperationGuardStrategyF(FSP_FILE_SYSTEM *FileSystem,
                                                     FSP_FILE_SYSTEM_OPERATION_GUARD_STRATEGY Strategy) {
  FileSystem->OpGuardStrategy = Strategy;
}
WFD_API VOID FspFileSystemSetOperationF(FSP_FILE_SYSTEM *FileSystem, ULONG Index, FSP_FILE_SYSTEM_OPERATION *Operation) {
  if (Index < FspFsctlTransactKindCount) FileSystem->Operations[Index] = Operation;
}
WFD_API VOID FspFileSystemGetDispatcherResultF(FSP_FILE_SYSTEM *FileSystem, NTSTATUS *PDispatcherResult) {
  *PDispatcherResult = FileSystem->DispatcherResult;
}
WFD_API VOID FspFileSystemSetDispatcherResultF(FSP_FILE_SYSTEM *FileSystem, NTSTATUS DispatcherResult) {
  if (NT_SUCCESS(DispatcherResult)) return;
  InterlockedCompareExchange((LONG *)&FileSystem->DispatcherResult, DispatcherResult, 0);
}
WFD_API VOID FspFileSystemSetDebugLogF(FSP_FILE_SYSTEM *FileSystem, UINT32 DebugLog) { FileSystem->DebugLog = DebugLog; }
WFD_API BOOLEAN FspFileSystemIsOperationCaseSensitiveF(VOID) {
  FSP_FILE_SYSTEM_OPERATION_CONTEXT *c = FspFileSystemGetOperationContext();
  if (!c) return FALSE;
  FSP_FSCTL_TRANSACT_REQ *r = c->Request;
  if (r->Kind == FspFsctlTransactCreateKind) return r->Req.Create.CaseSensitive;
  if (r->Kind == FspFsctlTransactQueryDirectoryKind) return r->Req.QueryDirectory.CaseSensitive;
  return FALSE;
}
WFD_API UINT32 FspFileSystemOperationProcessIdF(VOID) {
  FSP_FILE_SYSTEM_OPERATION_CONTEXT *c = FspFileSystemGetOperationContext();
  if (!c) return 0;
  FSP_FSCTL_TRANSACT_REQ *r = c->Request;
  if (r->Kind == FspFsctlTransactCreateKind) return (UINT32)(r->Req.Create.AccessToken >> 32);
  if (r->Kind == FspFsctlTransactSetInformationKind &&
      (r->Req.SetInformation.FileInformationClass == 10 || r->Req.SetInformation.FileInformationClass == 65))
    return (UINT32)(r->Req.SetInformation.Info.Rename.AccessToken >> 32);
  return 0;
}
WFD_API VOID FspFileSystemStopServiceIfNecessary(FSP_FILE_SYSTEM *FileSystem, BOOLEAN Normally) {
  (void)FileSystem;
  (void)Normally;  // no FspService runs under the double
}
}  // extern "C"

// --- notifications (volume.c:1361-1599, file.c:2372-2471) ---------------------------------------

namespace {
std::mutex notifyLock;
std::condition_variable notifyCv;
int notifyBusy = 0;

void invalidateByName(Volume *v, const std::wstring &name, UINT32 filter, UINT32 action) {
  std::lock_guard<std::mutex> g(v->lock);
  std::wstring k = v->key(name);
  auto it = v->nodes.find(k);
  bool open = it != v->nodes.end();
  std::wstring parent = name.substr(0, name.find_last_of(L'\\'));
  if (parent.empty()) parent = L"\\";
  bool parentInvalidated = false;
  if (open) {
    it->second->dirCacheValid = false;
    it->second->infoValid = false;
    parentInvalidated = true;
  } else if (filter != 0) {
    parentInvalidated = true;
  }
  if (parentInvalidated) {
    auto p = v->nodes.find(v->key(parent));
    if (p != v->nodes.end()) p->second->dirCacheValid = false;
  }
  char buf[128];
  snprintf(buf, sizeof buf, "\"filter\":%u,\"action\":%u,\"open\":%s,\"parentListingInvalidated\":%s", filter, action,
           open ? "true" : "false", parentInvalidated ? "true" : "false");
  std::string escaped;
  for (char ch : utf8(name)) escaped += ch == '\\' || ch == '"' ? std::string("\\") + ch : std::string(1, ch);
  v->notifications.push_back("{\"name\":\"" + escaped + "\"," + buf + "}");
}
}  // namespace

namespace wfd {
void waitNotifications(Volume *) {
  std::unique_lock<std::mutex> g(notifyLock);
  notifyCv.wait(g, [] { return notifyBusy == 0; });
}
}  // namespace wfd

extern "C" {
WFD_API NTSTATUS FspFileSystemNotifyBegin(FSP_FILE_SYSTEM *FileSystem, ULONG Timeout) {
  Volume *v = volumeOf(FileSystem);
  if (!v) return STATUS_INVALID_PARAMETER;
  static const DWORD waits[] = {10, 10, 50, 50, 100, 100, 300};
  DWORD spent = 0;
  for (int i = 0;; i++) {
    {
      std::lock_guard<std::mutex> g(v->lock);
      if (!v->renameInFlight) {
        v->notifyDepth++;
        return STATUS_SUCCESS;
      }
    }
    DWORD w = waits[i < 6 ? i : 6];
    if (Timeout != INFINITE && spent + w > Timeout) return STATUS_CANT_WAIT;
    Sleep(w);
    spent += w;
  }
}
WFD_API NTSTATUS FspFileSystemNotifyEnd(FSP_FILE_SYSTEM *FileSystem) {
  Volume *v = volumeOf(FileSystem);
  if (!v) return STATUS_INVALID_PARAMETER;
  waitNotifications(v);  // the unlock record is processed after the records queued before it
  std::lock_guard<std::mutex> g(v->lock);
  if (v->notifyDepth > 0) v->notifyDepth--;
  return STATUS_SUCCESS;
}
WFD_API NTSTATUS FspFileSystemNotify(FSP_FILE_SYSTEM *FileSystem, FSP_FSCTL_NOTIFY_INFO *NotifyInfo, SIZE_T Size) {
  Volume *v = volumeOf(FileSystem);
  if (!v) return STATUS_INVALID_PARAMETER;
  // Parse now (a bad buffer is the caller's error), apply later on a worker, as the driver's work
  // item does: a test cannot pass because Notify happened to be synchronous.
  std::vector<std::tuple<std::wstring, UINT32, UINT32>> records;
  std::wstring lastAbsolute;
  for (SIZE_T off = 0; off + sizeof(FSP_FSCTL_NOTIFY_INFO) <= Size;) {
    auto *n = (FSP_FSCTL_NOTIFY_INFO *)((UINT8 *)NotifyInfo + off);
    if (n->Size < sizeof(FSP_FSCTL_NOTIFY_INFO)) break;  // end of a NotifyBegin/End session
    if (off + n->Size > Size) return STATUS_INVALID_PARAMETER;
    std::wstring name(n->FileNameBuf, (n->Size - sizeof(FSP_FSCTL_NOTIFY_INFO)) / sizeof(WCHAR));
    while (name.size() > 1 && name.back() == L'\\') name.pop_back();
    if (!name.empty() && name[0] == L'\\')
      lastAbsolute = name;
    else
      name = (lastAbsolute == L"\\" ? L"" : lastAbsolute) + L"\\" + name;
    if (name.size() > FSP_FSCTL_TRANSACT_PATH_SIZEMAX / sizeof(WCHAR)) return STATUS_INVALID_PARAMETER;
    records.emplace_back(name, n->Filter, n->Action);
    off += (n->Size + 7u) & ~7u;
  }
  {
    std::lock_guard<std::mutex> g(notifyLock);
    notifyBusy++;
  }
  std::thread([v, records]() {
    Sleep(5);
    for (auto &r : records) invalidateByName(v, std::get<0>(r), std::get<1>(r), std::get<2>(r));
    std::lock_guard<std::mutex> g(notifyLock);
    notifyBusy--;
    notifyCv.notify_all();
  }).detach();
  return STATUS_SUCCESS;
}
}  // extern "C"
