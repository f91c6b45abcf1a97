// The portable backend's mount object (fuse_hl.cc, hl_cache.cc): the FUSE3 high-level API's
// own types, and HLMount, whose request handlers run on libfuse's (or WinFsp's) loop threads.
// Internal to native/fuse_hl/; the rest of the module reaches it through fuse_hl.h.
#pragma once

#include <array>

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 31
#endif
#include "fuse_hl.h"

#include <fcntl.h>
#if defined(_WIN32)
#include "../platform/winfsp_fuse3.h"
#else
#include <fuse.h>
#endif

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <set>
#include <unordered_map>

#include "../fuse_common/fuse_attr.h"
#include "../fuse_common/fuse_loop.h"
#if !defined(_WIN32)
#include <fuse_lowlevel.h>

#include "../core/path.h"
#include "../core/watcher.h"
#include "../platform/posix_mount.h"
#include "../platform/posix_watcher.h"
#endif

namespace shadowfs {
namespace fuse_hl_detail {


// The high-level API's own types: POSIX ones with libfuse, fuse_* ones with WinFsp.
#if defined(_WIN32)
using StatT = struct fuse_stat;
using StatvfsT = struct fuse_statvfs;
using TimespecT = struct fuse_timespec;
using OffT = fuse_off_t;
using ModeT = fuse_mode_t;
using DevT = fuse_dev_t;
using UidT = fuse_uid_t;
using GidT = fuse_gid_t;
#else
using StatT = struct stat;
using StatvfsT = struct statvfs;
using TimespecT = struct timespec;
using OffT = off_t;
using ModeT = mode_t;
using DevT = dev_t;
using UidT = uid_t;
using GidT = gid_t;
#endif

struct DirHandle {
  std::string path;
  DirStream stream;
};

// "/a/b" (what the API passes) to "a/b" (what the overlay takes); "/" is "".
inline std::string rel(const char* path) {
  while (*path == '/') ++path;
  return path;
}

inline Handle* handleOf(const struct fuse_file_info* fi) {
  return fi && fi->fh ? reinterpret_cast<Handle*>(fi->fh) : nullptr;
}

class HLMount final : public LoopedMount {
 public:
  HLMount(std::shared_ptr<Overlay> ov, Layer* view, std::string lower, std::string mountPoint,
          MountOptions opts)
      : ov_(std::move(ov)),
        view_(view),
        lower_(std::move(lower)),
        mountPoint_(std::move(mountPoint)),
        opts_(opts) {}
  ~HLMount() override {
#if !defined(_WIN32)
    if (watcher_) watcher_->stop();
    stopInvalidator();
#endif
    joinLoop();
    if (f_) {
      fuse_unmount(f_);
      fuse_destroy(f_);
    }
    if (view_) ov_->unpin(view_);
  }
  HLMount(const HLMount&) = delete;
  HLMount& operator=(const HLMount&) = delete;

  int start(int* err, std::string* message);

#if defined(_WIN32)
  // Nothing is cached (see the top of the file): there is nothing to invalidate.
  void invalidatePaths(const std::vector<std::string>&) override {}
  void invalidateAll() override {}
  void invalidateForSwitch(const std::vector<std::string>&) override {}
#else
  // Called on the addon's worker thread or the watcher's, never on a loop thread and never
  // under an overlay lock (the kernel may wait for requests in progress).
  void invalidatePaths(const std::vector<std::string>& paths) override;
  void invalidateAll() override;
  void invalidateForSwitch(const std::vector<std::string>& paths) override;
#endif
  bool usesEpoch() const override { return false; }
  bool mounted() const override { return mounted_.load(); }
  uint64_t requests() const override { return requests_.load(std::memory_order_relaxed); }
  int unmount(bool lazy) override;
  void endedOnItsOwn() override;

  // Requests by kind, as this API names them (requestCounts()). The high-level API has no
  // LOOKUP: the kernel's LOOKUPs and GETATTRs both arrive as getattr.
  enum class Op {
    Getattr, Readlink, Mknod, Mkdir, Unlink, Rmdir, Symlink, Rename, Link, Chmod,
    Chown, Truncate, Utimens, Open, Create, Read, Write, Flush, Release, Fsync,
    Statfs, Opendir, Readdir, Releasedir, Setxattr, Getxattr, Listxattr, Removexattr, Fallocate,
    Count
  };
  static void countOp(Op op) {
    auto* m = static_cast<HLMount*>(fuse_get_context()->private_data);
    m->opCounts_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  }
  std::vector<std::pair<std::string, uint64_t>> requestCounts() const override;

  // --- request handlers (loop threads) ---
  static HLMount* self() {
    const struct fuse_context* c = fuse_get_context();
    auto* m = static_cast<HLMount*>(c->private_data);
    m->requests_.fetch_add(1, std::memory_order_relaxed);
    auditRequest(static_cast<uint32_t>(c->pid));  // who asks, for the audit trail (core/audit.h)
    return m;
  }
  static Caller caller() {
    const struct fuse_context* c = fuse_get_context();
    return Caller{static_cast<uint32_t>(c->uid), static_cast<uint32_t>(c->gid)};
  }
  static void* opInit(struct fuse_conn_info* conn, struct fuse_config* cfg);
  static int opGetattr(const char* path, StatT* st, struct fuse_file_info* fi);
  static int opReadlink(const char* path, char* buf, size_t size);
  static int opMknod(const char* path, ModeT mode, DevT rdev);
  static int opMkdir(const char* path, ModeT mode);
  static int opUnlink(const char* path);
  static int opRmdir(const char* path);
  static int opSymlink(const char* target, const char* path);
  static int opRename(const char* from, const char* to, unsigned int flags);
  static int opLink(const char* from, const char* to);
  static int opChmod(const char* path, ModeT mode, struct fuse_file_info* fi);
  static int opChown(const char* path, UidT uid, GidT gid, struct fuse_file_info* fi);
  static int opTruncate(const char* path, OffT size, struct fuse_file_info* fi);
  static int opUtimens(const char* path, const TimespecT tv[2], struct fuse_file_info* fi);
  static int opOpen(const char* path, struct fuse_file_info* fi);
  static int opCreate(const char* path, ModeT mode, struct fuse_file_info* fi);
  static int opRead(const char* path, char* buf, size_t size, OffT off,
                    struct fuse_file_info* fi);
  static int opWrite(const char* path, const char* buf, size_t size, OffT off,
                     struct fuse_file_info* fi);
  static int opFlush(const char* path, struct fuse_file_info* fi);
  static int opRelease(const char* path, struct fuse_file_info* fi);
  static int opFsync(const char* path, int datasync, struct fuse_file_info* fi);
  static int opStatfs(const char* path, StatvfsT* out);
  static int opOpendir(const char* path, struct fuse_file_info* fi);
  static int opReaddir(const char* path, void* buf, fuse_fill_dir_t filler, OffT off,
                       struct fuse_file_info* fi, enum fuse_readdir_flags flags);
  static int opReleasedir(const char* path, struct fuse_file_info* fi);
  static int opSetxattr(const char* path, const char* name, const char* value, size_t size,
                        int flags);
  static int opGetxattr(const char* path, const char* name, char* value, size_t size);
  static int opListxattr(const char* path, char* list, size_t size);
  static int opRemovexattr(const char* path, const char* name);
#if !defined(_WIN32)
  static int opFallocate(const char* path, int mode, OffT off, OffT len,
                         struct fuse_file_info* fi);
#endif

 private:
  // chmod, chown, truncate and utimens: one overlay setattr. `path` is null for a file whose
  // every name is gone; its open handle then names it.
  int setattr(const char* path, struct fuse_file_info* fi, uint32_t mask, const Attr& v);

#if !defined(_WIN32)
  // Drops what the kernel holds for `paths`: their attributes and their parents' (and
  // listings); for a path that no longer names anything here, or every path when `allNames`,
  // the names under its first component (see the top of the file).
  void forgetPaths(const std::vector<std::string>& paths, bool allNames);
  // Watches directory `rel` of A from the first request that shows it (`ino`: the object it
  // showed). Once per directory: one that is replaced (removed, or made anew) is watched again
  // from the next request after its invalidation. A directory no watch covers (only a layer has
  // it, a layer redirects it, or the OS has no watch left) is swept instead (sweepUncovered).
  void watchDir(const std::string& rel, uint64_t ino);
  // On a loop thread, for every name a request showed: the first names under the root (an
  // overflow of the watcher drops them all, those gone from both the layer and the folder
  // included) and the names in uncovered directories (a sweep drops those gone since).
  void noteShown(const std::string& rel);
  // On the invalidator thread, every opts_.entryTimeout while the kernel's timeouts are a day:
  // the uncovered directories' attributes, listings and names (those gone since the last sweep
  // through their first component), as the mount's own timeout would have expired them.
  void sweepUncovered();
  void namesIn(const std::string& dir, std::vector<std::string>* out);  // appends; none if unlisted
  // On a loop thread, after a rename through the mount put something at `to`: a directory
  // moved there reads its origin, and the kernel keeps the names it had under the old name, so
  // it is uncovered with its names unknown (the first sweep drops them); a file that reads the
  // folder's object is swept until it is the layer's own.
  void renamedHere(const std::string& to);
  // Hard links (see the top of the file). noteLinked: on a loop thread, for every lookup's and
  // getattr's answer. linkedNames: every name noted for the object `a` but `except`.
  // changedLinked: on a loop thread, after a request changed the object at `path` (or open as
  // `h`): its other names are invalidated before the request answers (bounded wait).
  void noteLinked(const std::string& path, const Attr& a);
  std::vector<std::string> linkedNames(const Attr& a, const std::string& except);
  void changedLinked(const char* path, Handle* h);
  void invalidateSoon(std::vector<std::string> paths);  // and waits, bounded
  void invalidatorLoop();
  void stopInvalidator();
  std::unique_ptr<FolderWatcher> watcher_;
  // Lock order: linksMu_ and invalMu_ are never held together, nor across an overlay call.
  std::mutex linksMu_;
  std::unordered_map<uint64_t, std::set<std::string>> linked_;  // by Attr::ino
  std::atomic<bool> anyLinked_{false};
  std::mutex invalMu_;
  std::condition_variable invalCv_, invalDoneCv_;
  std::vector<std::string> invalQueue_;
  uint64_t invalAsked_ = 0, invalDone_ = 0;
  bool invalStop_ = false;
  std::thread invalidator_;
  // Guards watched_, uncovered_ and tops_; taken before the watcher's own lock, never with
  // another of ours.
  std::mutex watchMu_;
  struct Watched {
    FolderWatcher::Token token = 0;  // 0: tried, not watched
    uint64_t ino = 0;                // the directory's object when it was watched
  };
  std::unordered_map<std::string, Watched> watched_;
  // dir -> the names under it the kernel may hold (every name a request showed since the
  // directory was first shown, less those a sweep found gone)
  struct Uncovered {
    std::set<std::string> names;
    bool unknown = false;  // renamed here: the kernel may hold names under it nobody noted
  };
  std::unordered_map<std::string, Uncovered> uncovered_;
  std::atomic<bool> anyUncovered_{false};
  // Files renamed here that still read the folder's object at their old name, which nothing
  // watches under the new one: their attributes and pages go at every sweep until they are
  // the layer's own.
  std::set<std::string> renamedFiles_;
  std::set<std::string> tops_;
  static constexpr size_t kMaxUncovered = size_t{1} << 16;  // past it a sweep drops every name
  static constexpr size_t kMaxTops = size_t{1} << 16;
  bool uncoveredOverflowed_ = false;
  // Pages kept across opens (see the top of hl_cache.cc). keepPages: on a loop thread, for
  // every open and create: whether the kernel may keep the file's cached pages, and it notes
  // what this open saw. The notes go with invalidations: a path's own, all of them at a switch;
  // and each lasts the mount's attribute timeout at most, then the next open drops the pages.
  bool keepPages(const std::string& path, const Attr& a);
  void forgetOpened(const std::vector<std::string>& paths, bool all);
  struct Opened {
    uint64_t ino = 0, size = 0;
    Timespec mtime, ctime;
    std::chrono::steady_clock::time_point since;  // the first open that saw this object so
  };
  // Past it the notes start over. A note is about 100 bytes, kept by the path's hash: two paths
  // that share one can only keep pages when the objects behind them are the same, and a
  // path's own pages go with every invalidation of it. (1 << 16 was fewer files than the
  // benchmark's tree reads, so no page was kept there.)
  static constexpr size_t kMaxOpened = size_t{1} << 18;
  std::mutex openedMu_;  // a leaf: nothing else is taken while it is held
  std::unordered_map<uint64_t, Opened> opened_;  // by std::hash of the path
#endif

  // The kernel's timeouts (opInit), set by start() before the loop and the invalidator run.
  static constexpr double kCoveredTimeout = 24 * 3600.0;
  double kernelEntryTimeout_ = 0, kernelAttrTimeout_ = 0;

  std::shared_ptr<Overlay> ov_;
  Layer* view_;  // pinned layer of a view, or null: the active layer
  std::string lower_;
  std::string mountPoint_;
  MountOptions opts_;
  struct fuse* f_ = nullptr;
  std::atomic<bool> mounted_{false};
  std::atomic<uint64_t> requests_{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Op::Count)> opCounts_{};
};

}  // namespace fuse_hl_detail
}  // namespace shadowfs
