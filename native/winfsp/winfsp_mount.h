// What the parts of the winfsp backend share (winfsp_native.cc: the design, the interface
// table and the mount's lifecycle; winfsp_files.cc: the per-open contexts and the callbacks on
// opens, data and information; winfsp_names.cc: links, listings and reparse points): the
// WinFspMount class, its per-open FileCtx, the WinFsp exports it calls. Private to
// native/winfsp; the addon sees winfsp_native.h.
#pragma once

#include "winfsp_native.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <type_traits>
#include <unordered_set>

#include "../core/casefold.h"
#include "../core/shared_mutex.h"
#include "../platform/win32_lower.h"
#include "../platform/win32_watcher.h"
#include "../platform/win32_winfsp.h"
#include "winfsp_api.h"
#include "winfsp_support.h"

namespace shadowfs {
namespace winfsp_mount {

using namespace winfsp;

constexpr uint32_t kAllocationUnit = 4096;

// The exports the backend calls, resolved once per mount.
struct Api {
  fn::FspFileSystemCreate* create = nullptr;
  fn::FspFileSystemDelete* destroy = nullptr;
  fn::FspFileSystemSetMountPointEx* setMountPoint = nullptr;
  fn::FspFileSystemRemoveMountPoint* removeMountPoint = nullptr;
  fn::FspFileSystemStartDispatcher* start = nullptr;
  fn::FspFileSystemStopDispatcher* stop = nullptr;
  fn::FspFileSystemNotifyBegin* notifyBegin = nullptr;
  fn::FspFileSystemNotify* notify = nullptr;
  fn::FspFileSystemNotifyEnd* notifyEnd = nullptr;
  fn::FspFileSystemGetOperationContext* operationContext = nullptr;
  fn::FspFileSystemResolveReparsePoints* resolveReparsePoints = nullptr;
  fn::FspWin32FromNtStatus* win32FromStatus = nullptr;

  bool load() {
    auto get = [](auto** slot, const char* name) {
      *slot = reinterpret_cast<std::remove_pointer_t<std::remove_reference_t<decltype(slot)>>>(
          winFspProc(name));
      return *slot != nullptr;
    };
    return get(&create, "FspFileSystemCreate") && get(&destroy, "FspFileSystemDelete") &&
           get(&setMountPoint, "FspFileSystemSetMountPointEx") &&
           get(&removeMountPoint, "FspFileSystemRemoveMountPoint") &&
           get(&start, "FspFileSystemStartDispatcher") &&
           get(&stop, "FspFileSystemStopDispatcher") &&
           get(&notifyBegin, "FspFileSystemNotifyBegin") && get(&notify, "FspFileSystemNotify") &&
           get(&notifyEnd, "FspFileSystemNotifyEnd") &&
           get(&operationContext, "FspFileSystemGetOperationContext") &&
           get(&resolveReparsePoints, "FspFileSystemResolveReparsePoints") &&
           get(&win32FromStatus, "FspWin32FromNtStatus");
  }
};

// The private copy of a file of A that execute-opens read (see winfsp_native.cc). One per file (its
// layer and inode number) while any execute-open of it lives, as Windows keeps one image section
// per file: a second execute-open made while the first is alive reads the same copy.
struct ImageCopy {
  ImageCopy() = default;
  ImageCopy(const ImageCopy&) = delete;
  ImageCopy& operator=(const ImageCopy&) = delete;
  Handle* h = nullptr;  // a nameless copy in a writable layer (Overlay::writableCopy), or
  std::string bytes;    // the content itself, in the read-only view (no layer to hold a copy)
  int opens = 0;        // execute-opens using it; guarded by WinFspMount::imageMu_
};

// One open of a file, directory or link (WinFsp's UserContext2).
struct FileCtx {
  FileCtx() = default;
  FileCtx(const FileCtx&) = delete;
  FileCtx& operator=(const FileCtx&) = delete;

  std::string path;              // the core's path; changed by renames under WinFspMount::ctxMu_
  std::shared_ptr<Layer> layer;  // the layer the open resolved (null: whatever is active)
  FileType type = FileType::Regular;
  bool linkToDirectory = false;
  uint64_t ino = 0;              // the object opened, to tell it from a later one at `path`
  // Regular files. `h` is swapped (copy-up, overwrite) under `mu` held exclusively.
  SharedMutex mu;
  Handle* h = nullptr;
  bool upgraded = false;         // h is writable
  struct ImageCopy* image = nullptr;  // an execute-open of A's file: reads come from here
  // Directories: the listing this handle's enumeration walks (taken again when an enumeration
  // starts without a marker).
  std::mutex dirMu;
  std::vector<DirRecord> listing;
  FolderWatcher::Token watch = 0;
};

class WinFspMount final : public MountBackend, public OpenHandleCount {
 public:
  WinFspMount(std::shared_ptr<Overlay> ov, Layer* view, std::string lower, std::string mountPoint,
              MountOptions opts)
      : ov_(std::move(ov)), view_(view), lower_(std::move(lower)),
        mountPoint_(std::move(mountPoint)), opts_(opts) {}
  ~WinFspMount() override {
    shutdown();
    if (view_) ov_->unpin(view_);
  }
  WinFspMount(const WinFspMount&) = delete;
  WinFspMount& operator=(const WinFspMount&) = delete;

  int start(int* err, std::string* message);

  // --- MountBackend (addon threads) ---
  void invalidatePaths(const std::vector<std::string>& paths) override { notifyPaths(paths); }
  void invalidateAll() override;
  void invalidateForSwitch(const std::vector<std::string>& paths) override { notifyPaths(paths); }
  bool usesEpoch() const override { return false; }
  int unmount(bool lazy) override;
  bool mounted() const override { return mounted_.load(); }
  uint64_t openHandles() const override {
    std::lock_guard<std::mutex> lock(ctxMu_);
    return ctxs_.size();
  }
  uint64_t requests() const override { return requests_.load(std::memory_order_relaxed); }
  std::vector<std::pair<std::string, bool>> transport() const override {
    return {{"winfsp-native", true},
            {"file-info-cache", fileInfoTimeout_ != 0},
            {"network-volume", network_}};
  }
  const ChangeJournal* folderChanges() const override { return watcher_ ? &journal_ : nullptr; }
  void dispose() override { delete this; }

  // --- the interface (dispatcher threads) ---
  static WinFspMount* self(FSP_FILE_SYSTEM* fs) {
    auto* m = static_cast<WinFspMount*>(fs->UserContext);
    m->requests_.fetch_add(1, std::memory_order_relaxed);
    auditRequest(0);  // recorded in the audit trail (core/audit.h), the process not told here
    return m;
  }
  static NTSTATUS GetVolumeInfo(FSP_FILE_SYSTEM*, FSP_FSCTL_VOLUME_INFO*);
  static NTSTATUS GetSecurityByName(FSP_FILE_SYSTEM*, PWSTR, PUINT32, PSECURITY_DESCRIPTOR, SIZE_T*);
  static NTSTATUS Create(FSP_FILE_SYSTEM*, PWSTR, UINT32, UINT32, UINT32, PSECURITY_DESCRIPTOR,
                         UINT64, PVOID*, FSP_FSCTL_FILE_INFO*);
  static NTSTATUS Open(FSP_FILE_SYSTEM*, PWSTR, UINT32, UINT32, PVOID*, FSP_FSCTL_FILE_INFO*);
  static NTSTATUS Overwrite(FSP_FILE_SYSTEM*, PVOID, UINT32, BOOLEAN, UINT64, FSP_FSCTL_FILE_INFO*);
  static VOID Cleanup(FSP_FILE_SYSTEM*, PVOID, PWSTR, ULONG);
  static VOID Close(FSP_FILE_SYSTEM*, PVOID);
  static NTSTATUS Read(FSP_FILE_SYSTEM*, PVOID, PVOID, UINT64, ULONG, PULONG);
  static NTSTATUS Write(FSP_FILE_SYSTEM*, PVOID, PVOID, UINT64, ULONG, BOOLEAN, BOOLEAN, PULONG,
                        FSP_FSCTL_FILE_INFO*);
  static NTSTATUS Flush(FSP_FILE_SYSTEM*, PVOID, FSP_FSCTL_FILE_INFO*);
  static NTSTATUS GetFileInfo(FSP_FILE_SYSTEM*, PVOID, FSP_FSCTL_FILE_INFO*);
  static NTSTATUS SetBasicInfo(FSP_FILE_SYSTEM*, PVOID, UINT32, UINT64, UINT64, UINT64, UINT64,
                               FSP_FSCTL_FILE_INFO*);
  static NTSTATUS SetFileSize(FSP_FILE_SYSTEM*, PVOID, UINT64, BOOLEAN, FSP_FSCTL_FILE_INFO*);
  static NTSTATUS CanDelete(FSP_FILE_SYSTEM*, PVOID, PWSTR);
  static NTSTATUS SetDelete(FSP_FILE_SYSTEM*, PVOID, PWSTR, BOOLEAN);
  static NTSTATUS Rename(FSP_FILE_SYSTEM*, PVOID, PWSTR, PWSTR, BOOLEAN);
  static NTSTATUS GetSecurity(FSP_FILE_SYSTEM*, PVOID, PSECURITY_DESCRIPTOR, SIZE_T*);
  static NTSTATUS ReadDirectory(FSP_FILE_SYSTEM*, PVOID, PWSTR, PWSTR, PVOID, ULONG, PULONG);
  static NTSTATUS GetDirInfoByName(FSP_FILE_SYSTEM*, PVOID, PWSTR, FSP_FSCTL_DIR_INFO*);
  static NTSTATUS ResolveReparsePoints(FSP_FILE_SYSTEM*, PWSTR, UINT32, BOOLEAN, PIO_STATUS_BLOCK,
                                       PVOID, PSIZE_T);
  static NTSTATUS GetReparsePointByName(FSP_FILE_SYSTEM*, PVOID, PWSTR, BOOLEAN, PVOID, PSIZE_T);
  static NTSTATUS GetReparsePoint(FSP_FILE_SYSTEM*, PVOID, PWSTR, PVOID, PSIZE_T);
  static NTSTATUS SetReparsePoint(FSP_FILE_SYSTEM*, PVOID, PWSTR, PVOID, SIZE_T);
  static VOID DispatcherStopped(FSP_FILE_SYSTEM*, BOOLEAN);

 private:
  // Whether `L` takes changes (false for the read-only view shown while no layer is active).
  bool writable(Layer* L) const { return ov_->writable(L); }
  std::string pathOf(const FileCtx* c) const {
    std::lock_guard<std::mutex> lock(ctxMu_);
    return c->path;
  }
  void track(FileCtx* c);
  void untrack(FileCtx* c);
  void renameContexts(Layer* L, const std::string& from, const std::string& to);
  void freeContext(FileCtx* c);
  int attrOf(FileCtx* c, Attr* a);
  NTSTATUS infoOf(FileCtx* c, FSP_FSCTL_FILE_INFO* out);
  int ensureWritable(FileCtx* c, bool truncate);
  int takeImageCopy(FileCtx* c);
  void dropImageCopy(FileCtx* c);
  bool leadsToDirectory(Layer* L, const std::string& path, int depth = 0);
  NTSTATUS linkData(Layer* L, const std::string& path, bool forFsctl, std::string* out);
  void setNormalizedName(PWSTR fileName, FSP_FSCTL_FILE_INFO* info);
  int findLinkOnTheWay(Layer* L, const wchar_t* fileName, UINT32* index);
  void notifyPaths(const std::vector<std::string>& paths);
  void onFolderChange(const std::vector<std::string>& paths, bool overflow);
  void shutdown();

  std::shared_ptr<Overlay> ov_;
  Layer* view_;  // pinned layer of a view, or null: the active layer
  std::string lower_;
  std::string mountPoint_;
  MountOptions opts_;
  Api api_;
  std::string sd_;           // the one security descriptor (ownerAndSystemDescriptor)
  std::string mountSd_;      // the mount point's: the same without the Low label
  std::wstring lowerRoot_;   // the folder, \\?\ form
  std::wstring mountW_;      // the mount point as given to WinFsp
  UINT32 fileInfoTimeout_ = 0;
  bool network_ = false;     // a network volume (MountOptions::volumePrefix), set by start()
  FSP_FILE_SYSTEM* fs_ = nullptr;
  std::atomic<bool> mounted_{false};
  std::atomic<bool> stopping_{false};  // unmount asked for: the dispatcher's end is normal
  std::atomic<uint64_t> requests_{0};
  // Every live FileCtx (rank: a leaf; never held while calling the overlay or WinFsp).
  mutable std::mutex ctxMu_;
  std::unordered_set<FileCtx*> ctxs_;
  // Execute-opens' copies by (layer, inode number) (rank: a leaf, like ctxMu_; the copy is
  // made and released outside it).
  std::mutex imageMu_;
  std::map<std::pair<const Layer*, uint64_t>, ImageCopy*> images_;
  // Notification and shutdown: notify holds it shared, shutdown exclusively.
  SharedMutex lifeMu_;
  ChangeJournal journal_;
  std::unique_ptr<FolderWatcher> watcher_;
  FolderWatcher::Token rootWatch_ = 0;
};

inline FileCtx* ctxOf(PVOID p) { return static_cast<FileCtx*>(p); }

// The errno of an overlay call on a path that must exist, as Windows reports it: a missing
// parent is a path not found.
inline NTSTATUS statusOfLookup(int e, bool parentMissing) {
  if (e == ENOENT && parentMissing) return st::OBJECT_PATH_NOT_FOUND;
  return statusFromErrno(e);
}

inline std::string parentOf(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash);
}
inline std::string joinPath(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

}  // namespace winfsp_mount
}  // namespace shadowfs
