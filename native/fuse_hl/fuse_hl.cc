// Portable backend on the FUSE3 high-level API: the code WinFsp runs on Windows through its
// FUSE3 layer, built here against libfuse3 and run by the same tests as fuse_ll, so what
// Windows runs is covered on Linux.
//
// The high-level API names objects by path and keeps its own node table, so this file only
// turns a path into the overlay's form and makes one overlay call per request.
//
// Caching (Linux, libfuse): the kernel keeps names for the mount's entry timeout
// (cacheTimeout), and we tell it what to drop when something changes behind its back: edits in
// the folder (an inotify watch on every directory of A a request has seen), API writes and layer
// switches. The high-level API gives no node ids to invalidate, so fuse_invalidate_path drops a
// path's attributes (and a directory's listing), and a name that is gone is dropped through its
// first component: an entry invalidation in the root, whose node id is the one we know, drops
// every name the kernel has under it. Negative names stay uncached (libfuse cannot reach them),
// and file pages are dropped at every open as before.
//
// Hard links: the high-level API gives each name of a hard link its own kernel inode, and its
// timeouts are one setting for every reply (lib/fuse.c answers with conf.attr_timeout
// everywhere), so a write or chmod through one name would leave the other names' cached
// attributes wrong. We remember every name a lookup showed with a link count above one, by
// object, and before a request that changes such an object answers (write, truncate, chmod,
// link, unlink, rename over it...) we invalidate its other names. The invalidation runs on a
// thread of its own and the request waits for it, but only for a bounded time: the kernel holds
// a file's pages locked across its WRITE, so two writes through two names of one file at once
// would each wait for the other's pages; the bound breaks that cycle (the invalidation still
// lands, a moment later). On Windows, WinFsp's fuse_invalidate_path does nothing, so the kernel
// there is told to cache nothing.
//
// Known differences from fuse_ll, each a property of the high-level API:
// - the kernel's inode is per path, so two names of a hard link are two kernel inodes (their
//   data is coherent across opens, since every open drops cached pages);
// - a file kept open across a layer switch shares its kernel inode (size, cached pages) with
//   whatever the new layer has at that path, so a program reading it while other programs open
//   that path in the new layer can see a mix; fuse_ll's node table prevents this;
// - fstat of an open file with no name left fails with ESTALE: the kernel sends it without the
//   file handle, and libfuse's high-level layer has no path to call us with.
//
// Threads: callbacks run on libfuse's loop threads and never call into JavaScript. The public
// MountBackend methods run on the JS thread.
#define FUSE_USE_VERSION 31
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
namespace {

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
std::string rel(const char* path) {
  while (*path == '/') ++path;
  return path;
}

Handle* handleOf(const struct fuse_file_info* fi) {
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
  // Watches directory `rel` of A from the first request that shows it (once; a directory only
  // a layer has, or one the OS has no watch left for, relies on the timeout).
  void watchDir(const std::string& rel);
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
  std::mutex watchMu_;
  std::unordered_map<std::string, FolderWatcher::Token> watched_;  // 0: tried, not watched
#endif

  std::shared_ptr<Overlay> ov_;
  Layer* view_;  // pinned layer of a view, or null: the active layer
  std::string lower_;
  std::string mountPoint_;
  MountOptions opts_;
  struct fuse* f_ = nullptr;
  std::atomic<bool> mounted_{false};
  std::atomic<uint64_t> requests_{0};
};

void* HLMount::opInit(struct fuse_conn_info* conn, struct fuse_config* cfg) {
  // Inode numbers are the overlay's (A's numbers, kept across copy-up).
  cfg->use_ino = 1;
  cfg->readdir_ino = 0;
  // unlink and rename really remove a name even while the file is open (no .fuse_hidden files
  // in the layer); the open handle keeps the object.
  cfg->hard_remove = 1;
  // Paths for every request, so an open file whose names are all gone can be told apart (it
  // arrives with a null path).
  cfg->nullpath_ok = 0;
#if defined(_WIN32)
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
#else
  auto* self = static_cast<HLMount*>(fuse_get_context()->private_data);
  cfg->entry_timeout = self->opts_.entryTimeout;
  cfg->attr_timeout = self->opts_.attrTimeout;
#endif
  cfg->negative_timeout = 0;
  cfg->kernel_cache = 0;
  cfg->auto_cache = 0;
  cfg->direct_io = 0;
#if !defined(_WIN32)
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // Locks stay in the kernel (local to this machine), as with fuse_ll.
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
#else
  // Case-insensitive names (MountOptions::caseInsensitive): WinFsp learns it here as well as
  // from CaseInsensitiveSearch in the mount arguments.
  auto* m = static_cast<HLMount*>(fuse_get_context()->private_data);
  if (m->opts_.caseInsensitive) conn->want |= FUSE_CAP_CASE_INSENSITIVE;
#endif
  return fuse_get_context()->private_data;
}

int HLMount::opGetattr(const char* path, StatT* st, struct fuse_file_info* fi) {
  HLMount* m = self();
  Attr a;
  // fstat: the object that was opened, whatever the path shows now.
  if (Handle* h = handleOf(fi); h && m->ov_->fgetattr(h, &a) == 0) {
    if (!path) a.nlink = 0;  // open, but every name is gone
#if !defined(_WIN32)
    else m->noteLinked(rel(path), a);
#endif
    toStat(a, st);
    return 0;
  }
  if (!path) return -ENOENT;
  // Lookups arrive here too; the core answers ENAMETOOLONG for an over-long name.
  if (int e = m->ov_->getattr(m->view_, rel(path), &a)) return -e;
#if !defined(_WIN32)
  if (a.type == FileType::Directory) m->watchDir(rel(path));
  m->noteLinked(rel(path), a);
#endif
  toStat(a, st);
  return 0;
}

#if !defined(_WIN32)
void HLMount::watchDir(const std::string& dir) {
  if (!watcher_) return;
  std::lock_guard lock(watchMu_);
  auto [it, added] = watched_.emplace(dir, 0);
  if (added && watcher_->watch(dir, &it->second) != 0) it->second = 0;
}

void HLMount::forgetPaths(const std::vector<std::string>& paths, bool allNames) {
  if (!mounted_.load() || !f_) return;
  struct fuse_session* se = fuse_get_session(f_);
  std::set<std::string> dirs, tops;
  for (const std::string& p : paths) {
    auto comps = components(p);
    if (comps.empty()) {
      dirs.insert(std::string());
      continue;
    }
    std::string parent, name;
    splitLast(p, &parent, &name);
    dirs.insert(p);
    dirs.insert(parent);
    Attr a;
    const bool gone = ov_->getattr(view_, p, &a) != 0;
    if (allNames || gone) tops.insert(std::string(comps.front()));
    // A folder file's other hard-link names changed with it (inotify reports only this one).
    if (!gone)
      for (std::string& other : linkedNames(a, p)) dirs.insert(std::move(other));
  }
  // Attributes and listings first, names last (as fuse_ll does): whoever looks a name up
  // again then also finds it in its parent's listing. ENOENT: the kernel holds nothing there.
  for (const std::string& d : dirs) fuse_invalidate_path(f_, ("/" + d).c_str());
  for (const std::string& t : tops)
    fuse_lowlevel_notify_inval_entry(se, FUSE_ROOT_ID, t.c_str(), t.size());
}

void HLMount::noteLinked(const std::string& path, const Attr& a) {
  if (a.type != FileType::Regular || a.nlink < 2) return;
  std::lock_guard lock(linksMu_);
  linked_[a.ino].insert(path);
  anyLinked_.store(true, std::memory_order_relaxed);
}

std::vector<std::string> HLMount::linkedNames(const Attr& a, const std::string& except) {
  std::vector<std::string> out;
  if (a.type != FileType::Regular || !anyLinked_.load(std::memory_order_relaxed)) return out;
  std::lock_guard lock(linksMu_);
  auto it = linked_.find(a.ino);
  if (it == linked_.end()) return out;
  for (const std::string& p : it->second)
    if (p != except) out.push_back(p);
  return out;
}

void HLMount::changedLinked(const char* path, Handle* h) {
  if (!anyLinked_.load(std::memory_order_relaxed)) return;
  Attr a;
  if (!(h && ov_->fgetattr(h, &a) == 0) && !(path && ov_->getattr(view_, rel(path), &a) == 0))
    return;
  // Never the request's own name: its pages may be locked for this very request, and the kernel
  // updates that inode's attributes itself.
  invalidateSoon(linkedNames(a, path ? rel(path) : std::string()));
}

void HLMount::invalidateSoon(std::vector<std::string> paths) {
  if (paths.empty()) return;
  std::unique_lock lock(invalMu_);
  if (invalStop_) return;
  for (std::string& p : paths) invalQueue_.push_back(std::move(p));
  const uint64_t ticket = ++invalAsked_;
  invalCv_.notify_one();
  // Bounded (see the top of the file): 1 s only when two writes through two names cross.
  invalDoneCv_.wait_for(lock, std::chrono::seconds(1),
                        [&] { return invalDone_ >= ticket || invalStop_; });
}

// On the invalidator thread: batches of paths, each dropped with fuse_invalidate_path (ENOENT:
// the kernel holds nothing there).
void HLMount::invalidatorLoop() {
  std::unique_lock lock(invalMu_);
  for (;;) {
    invalCv_.wait(lock, [&] { return invalStop_ || !invalQueue_.empty(); });
    if (invalStop_) return;
    std::vector<std::string> batch;
    batch.swap(invalQueue_);
    const uint64_t upTo = invalAsked_;
    lock.unlock();
    std::set<std::string> unique(batch.begin(), batch.end());
    for (const std::string& p : unique) fuse_invalidate_path(f_, ("/" + p).c_str());
    lock.lock();
    invalDone_ = upTo;
    invalDoneCv_.notify_all();
  }
}

void HLMount::stopInvalidator() {
  {
    std::lock_guard lock(invalMu_);
    invalStop_ = true;
  }
  invalCv_.notify_all();
  invalDoneCv_.notify_all();
  if (invalidator_.joinable()) invalidator_.join();
}

void HLMount::invalidatePaths(const std::vector<std::string>& paths) { forgetPaths(paths, false); }

void HLMount::invalidateForSwitch(const std::vector<std::string>& paths) {
  forgetPaths(paths, true);
}

void HLMount::invalidateAll() {
  // Every name in the root now, and the root itself; a first component that is gone from
  // both keeps its names until the timeout.
  DirStream d;
  std::vector<std::string> paths{std::string()};
  if (ov_->list(view_, std::string(), &d) == 0) {
    for (size_t i = 2; i < d.count(); ++i) {
      const char* name;
      uint64_t ino;
      FileType type;
      d.at(i, &name, &ino, &type);
      paths.emplace_back(name);
    }
  }
  forgetPaths(paths, true);
}
#endif

int HLMount::opReadlink(const char* path, char* buf, size_t size) {
  HLMount* m = self();
  std::string target;
  if (int e = m->ov_->readlink(m->view_, rel(path), &target)) return -e;
  if (size == 0) return -EINVAL;
  // The API wants a NUL-terminated string, cut to the buffer.
  size_t n = target.size() < size - 1 ? target.size() : size - 1;
  std::memcpy(buf, target.data(), n);
  buf[n] = '\0';
  return 0;
}

int HLMount::opMknod(const char* path, ModeT mode, DevT rdev) {
  HLMount* m = self();
  Attr a;
  return -m->ov_->mknod(m->view_, rel(path), typeOf(mode), mode & 07777,
                        static_cast<uint64_t>(rdev), caller(), &a);
}

int HLMount::opMkdir(const char* path, ModeT mode) {
  HLMount* m = self();
  Attr a;
  return -m->ov_->mkdir(m->view_, rel(path), mode & 07777, caller(), &a);
}

int HLMount::opUnlink(const char* path) {
  HLMount* m = self();
#if !defined(_WIN32)
  // The other names' link count drops.
  Attr a;
  const bool linked = m->anyLinked_.load() && m->ov_->getattr(m->view_, rel(path), &a) == 0;
  if (int e = m->ov_->unlink(m->view_, rel(path))) return -e;
  if (linked) {
    m->invalidateSoon(m->linkedNames(a, rel(path)));
    std::lock_guard lock(m->linksMu_);
    if (auto it = m->linked_.find(a.ino); it != m->linked_.end()) it->second.erase(rel(path));
  }
  return 0;
#else
  return -m->ov_->unlink(m->view_, rel(path));
#endif
}

int HLMount::opRmdir(const char* path) {
  HLMount* m = self();
  return -m->ov_->rmdir(m->view_, rel(path));
}

int HLMount::opSymlink(const char* target, const char* path) {
  HLMount* m = self();
  Attr a;
  return -m->ov_->symlink(m->view_, target, rel(path), caller(), &a);
}

int HLMount::opRename(const char* from, const char* to, unsigned int flags) {
  HLMount* m = self();
  // The API passes Linux's rename flags, which RenameFlags mirrors.
  if (flags & ~(kRenameNoReplace | kRenameExchange)) return -EINVAL;
#if !defined(_WIN32)
  const bool track = m->anyLinked_.load();
  Attr victim;  // replaced (or exchanged): its other names' link count and ctime change
  const bool hadVictim = track && m->ov_->getattr(m->view_, rel(to), &victim) == 0;
  if (int e = m->ov_->rename(m->view_, rel(from), rel(to), flags)) return -e;
  if (!track) return 0;
  if (hadVictim) m->invalidateSoon(m->linkedNames(victim, rel(to)));
  // Names noted under `from` now live under `to` (and the other way round for an exchange).
  const std::string f = rel(from), t = rel(to);
  auto moved = [&](const std::string& p, const std::string& a, const std::string& b,
                   std::string* out) {
    if (p == a) return *out = b, true;
    if (p.size() > a.size() && p.compare(0, a.size(), a) == 0 && p[a.size()] == '/')
      return *out = b + p.substr(a.size()), true;
    return false;
  };
  std::lock_guard lock(m->linksMu_);
  for (auto& [ino, names] : m->linked_) {
    std::set<std::string> next;
    for (const std::string& p : names) {
      std::string q;
      if (moved(p, f, t, &q)) next.insert(q);
      else if (moved(p, t, f, &q)) {
        if (flags & kRenameExchange) next.insert(q);  // else: replaced, that name is gone
      } else {
        next.insert(p);
      }
    }
    names.swap(next);
  }
  return 0;
#else
  return -m->ov_->rename(m->view_, rel(from), rel(to), flags);
#endif
}

int HLMount::opLink(const char* from, const char* to) {
  HLMount* m = self();
  Attr a;
  if (int e = m->ov_->link(m->view_, rel(from), rel(to), &a)) return -e;
#if !defined(_WIN32)
  // Every name's link count grows; the kernel updates `from`'s inode and looks `to` up.
  m->noteLinked(rel(from), a);
  m->invalidateSoon(m->linkedNames(a, rel(to)));
#endif
  return 0;
}

int HLMount::setattr(const char* path, struct fuse_file_info* fi, uint32_t mask, const Attr& v) {
  Handle* h = handleOf(fi);
  // A file open for writing acts on its own object, also while its content is still A's (the
  // core copies it at the first write or truncate) and once its name is gone.
  const bool viaHandle = h && (h->inode || h->writable);
  if (!path && !viaHandle) return -ENOENT;
  Attr out;
  // Through an open file (ftruncate, fchmod): the layer the file was opened in.
  std::shared_ptr<Layer> layer = viaHandle ? h->layer.lock() : ov_->current(view_);
  if (!layer) return -ESTALE;
  if (int e = ov_->setattr(layer.get(), path ? rel(path) : std::string(), h, mask, v, &out))
    return -e;
#if !defined(_WIN32)
  changedLinked(path, h);
#endif
  return 0;
}

int HLMount::opChmod(const char* path, ModeT mode, struct fuse_file_info* fi) {
  Attr v;
  v.perm = mode & 07777;
  return self()->setattr(path, fi, kSetMode, v);
}

int HLMount::opChown(const char* path, UidT uid, GidT gid, struct fuse_file_info* fi) {
  Attr v;
  uint32_t mask = 0;
  if (uid != static_cast<UidT>(-1)) mask |= kSetUid, v.uid = static_cast<uint32_t>(uid);
  if (gid != static_cast<GidT>(-1)) mask |= kSetGid, v.gid = static_cast<uint32_t>(gid);
  return self()->setattr(path, fi, mask, v);
}

int HLMount::opTruncate(const char* path, OffT size, struct fuse_file_info* fi) {
  if (size < 0) return -EINVAL;
  Attr v;
  v.size = static_cast<uint64_t>(size);
  return self()->setattr(path, fi, kSetSize, v);
}

int HLMount::opUtimens(const char* path, const TimespecT tv[2], struct fuse_file_info* fi) {
  Attr v;
  uint32_t mask = 0;
  Timespec* dst[2] = {&v.atime, &v.mtime};
  const uint32_t set[2] = {kSetAtime, kSetMtime}, now[2] = {kSetAtimeNow, kSetMtimeNow};
  for (int i = 0; i < 2; ++i) {
#if defined(UTIME_NOW) && defined(UTIME_OMIT)
    if (tv[i].tv_nsec == UTIME_OMIT) continue;
    if (tv[i].tv_nsec == UTIME_NOW) {
      mask |= now[i];
      continue;
    }
#else
    (void)now;
#endif
    mask |= set[i];
    *dst[i] = Timespec{static_cast<int64_t>(tv[i].tv_sec), static_cast<int64_t>(tv[i].tv_nsec)};
  }
  return self()->setattr(path, fi, mask, v);
}

// Every open drops the kernel's cached pages (keep_cache 0): the object behind a path may have
// changed since the last open (a switch, an API write, an edit in the folder).
int HLMount::opOpen(const char* path, struct fuse_file_info* fi) {
  HLMount* m = self();
  Handle* h = nullptr;
  Attr a;
  if (int e = m->ov_->open(m->view_, rel(path), intentOf(fi->flags), &h, &a)) return -e;
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->keep_cache = 0;
#if !defined(_WIN32)
  if (fi->flags & O_TRUNC) m->changedLinked(path, h);
#endif
#if !defined(_WIN32)
  // flush does nothing here, and a close() waiting for a FLUSH answer deadlocks a process that
  // exits while holding files open on its own mount: tell the kernel not to send it.
  fi->noflush = 1;
#endif
  return 0;
}

int HLMount::opCreate(const char* path, ModeT mode, struct fuse_file_info* fi) {
  HLMount* m = self();
  Handle* h = nullptr;
  Attr a;
  if (int e = m->ov_->create(m->view_, rel(path), mode & 07777, intentOf(fi->flags), caller(), &h,
                             &a))
    return -e;
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->keep_cache = 0;
#if !defined(_WIN32)
  fi->noflush = 1;
#endif
  return 0;
}

int HLMount::opRead(const char*, char* buf, size_t size, OffT off, struct fuse_file_info* fi) {
  size_t got = 0;
  if (int e = self()->ov_->read(handleOf(fi), buf, size, static_cast<uint64_t>(off), &got))
    return -e;
  return static_cast<int>(got);
}

int HLMount::opWrite(const char* path, const char* buf, size_t size, OffT off,
                     struct fuse_file_info* fi) {
  HLMount* m = self();
  if (int e = m->ov_->write(handleOf(fi), buf, size, static_cast<uint64_t>(off))) return -e;
#if !defined(_WIN32)
  m->changedLinked(path, handleOf(fi));
#else
  (void)path;
#endif
  return static_cast<int>(size);
}

int HLMount::opFlush(const char*, struct fuse_file_info*) { return 0; }

int HLMount::opRelease(const char*, struct fuse_file_info* fi) {
  self()->ov_->release(handleOf(fi));
  return 0;
}

// The layer lives in memory: there is nothing slower to flush to.
int HLMount::opFsync(const char*, int, struct fuse_file_info*) { return 0; }

int HLMount::opStatfs(const char*, StatvfsT* out) {
  FsStats s;
  if (int e = self()->ov_->statfs(&s)) return -e;
  toStatvfs(s, out);
  return 0;
}

int HLMount::opOpendir(const char* path, struct fuse_file_info* fi) {
  HLMount* m = self();
  auto d = std::make_unique<DirHandle>();
  d->path = rel(path);
  // The listing itself is taken at the first read (see DirStream).
  Attr a;
  if (int e = m->ov_->getattr(m->view_, d->path, &a)) return -e;
  if (a.type != FileType::Directory) return -ENOTDIR;
  fi->fh = reinterpret_cast<uint64_t>(d.release());
  return 0;
}

int HLMount::opReaddir(const char* path, void* buf, fuse_fill_dir_t filler, OffT off,
                       struct fuse_file_info* fi, enum fuse_readdir_flags) {
  HLMount* m = self();
  auto* d = reinterpret_cast<DirHandle*>(fi->fh);
  DirStream& s = d->stream;
  if (s.needsFill(static_cast<uint64_t>(off))) {
    if (path) d->path = rel(path);
    int e = m->ov_->list(m->view_, d->path, &s);
    if (e && !s.loaded) return -e;  // else: keep the listing it had
  }
  for (size_t i = static_cast<size_t>(off); i < s.count(); ++i) {
    const char* name;
    uint64_t ino;
    FileType type;
    s.at(i, &name, &ino, &type);
    StatT st;
    std::memset(&st, 0, sizeof st);
    st.st_ino = ino;
    st.st_mode = modeOf(type);
    if (filler(buf, name, &st, static_cast<OffT>(i + 1), static_cast<fuse_fill_dir_flags>(0)))
      break;
  }
  return 0;
}

int HLMount::opReleasedir(const char*, struct fuse_file_info* fi) {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  return 0;
}

int HLMount::opSetxattr(const char* path, const char* name, const char* value, size_t size,
                        int flags) {
  HLMount* m = self();
  return -m->ov_->setxattr(m->view_, rel(path), name, std::string(value, size), flags);
}

// size 0 asks for the length; a buffer too small is ERANGE.
int HLMount::opGetxattr(const char* path, const char* name, char* value, size_t size) {
  HLMount* m = self();
  std::string v;
  if (int e = m->ov_->getxattr(m->view_, rel(path), name, &v)) return -e;
  long n = xattrReplySize(v.size(), size);
  if (n > 0 && size) std::memcpy(value, v.data(), v.size());
  return static_cast<int>(n);
}

int HLMount::opListxattr(const char* path, char* list, size_t size) {
  HLMount* m = self();
  std::vector<std::string> names;
  if (int e = m->ov_->listxattr(m->view_, rel(path), &names)) return -e;
  std::string all = xattrList(names);
  long n = xattrReplySize(all.size(), size);
  if (n > 0 && size) std::memcpy(list, all.data(), all.size());
  return static_cast<int>(n);
}

int HLMount::opRemovexattr(const char* path, const char* name) {
  HLMount* m = self();
  return -m->ov_->removexattr(m->view_, rel(path), name);
}

#if !defined(_WIN32)
// As in fuse_ll: Overlay::fallocate has the semantics; the other modes are refused.
int HLMount::opFallocate(const char* path, int mode, OffT off, OffT len,
                         struct fuse_file_info* fi) {
  HLMount* m = self();
  if (mode & ~FALLOC_FL_KEEP_SIZE) return -EOPNOTSUPP;
  Handle* h = handleOf(fi);
  if (!h) return -EBADF;
  std::shared_ptr<Layer> layer = h->layer.lock();
  if (!layer) return -ESTALE;
  if (int e = m->ov_->fallocate(layer.get(), h, (mode & FALLOC_FL_KEEP_SIZE) != 0,
                                static_cast<uint64_t>(off), static_cast<uint64_t>(len)))
    return -e;
#if !defined(_WIN32)
  m->changedLinked(path, h);
#else
  (void)path;
#endif
  return 0;
}
#endif

const struct fuse_operations kOps = [] {
  struct fuse_operations o;
  std::memset(&o, 0, sizeof o);
  o.init = HLMount::opInit;
  o.getattr = HLMount::opGetattr;
  o.readlink = HLMount::opReadlink;
  o.mknod = HLMount::opMknod;
  o.mkdir = HLMount::opMkdir;
  o.unlink = HLMount::opUnlink;
  o.rmdir = HLMount::opRmdir;
  o.symlink = HLMount::opSymlink;
  o.rename = HLMount::opRename;
  o.link = HLMount::opLink;
  o.chmod = HLMount::opChmod;
  o.chown = HLMount::opChown;
  o.truncate = HLMount::opTruncate;
  o.utimens = HLMount::opUtimens;
  o.open = HLMount::opOpen;
  o.create = HLMount::opCreate;
  o.read = HLMount::opRead;
  o.write = HLMount::opWrite;
  o.flush = HLMount::opFlush;
  o.release = HLMount::opRelease;
  o.fsync = HLMount::opFsync;
  o.statfs = HLMount::opStatfs;
  o.opendir = HLMount::opOpendir;
  o.readdir = HLMount::opReaddir;
  o.releasedir = HLMount::opReleasedir;
  o.setxattr = HLMount::opSetxattr;
  o.getxattr = HLMount::opGetxattr;
  o.listxattr = HLMount::opListxattr;
  o.removexattr = HLMount::opRemovexattr;
#if !defined(_WIN32)
  o.fallocate = HLMount::opFallocate;
#endif
  // Not set on purpose: lock/flock (the kernel keeps locks locally), access (the kernel checks
  // permissions from our attributes: default_permissions), bmap/ioctl/poll.
  return o;
}();

}  // namespace

int HLMount::start(int* err, std::string* message) {
  struct fuse_args args = mountArgs(lower_, opts_.debug, opts_.allowOther, opts_.caseInsensitive);
  f_ = fuse_new(&args, &kOps, sizeof kOps, this);
  fuse_opt_free_args(&args);
  if (!f_) {
    *err = EINVAL;
    *message = "libfuse refused the file system options";
    return -1;
  }
  if (fuse_mount(f_, mountPoint_.c_str()) != 0) {
    *err = EIO;
    *message = "the FUSE mount at " + mountPoint_ +
               " was refused (is the FUSE driver usable and the mount point an empty directory?)";
    fuse_destroy(f_);
    f_ = nullptr;
    return -1;
  }
  mounted_ = true;
#if !defined(_WIN32)
  int werr = 0;
  watcher_ = openPosixWatcher(
      lower_,
      [this](const std::vector<std::string>& paths, bool overflow) {
        if (overflow) invalidateAll();
        if (!paths.empty()) invalidatePaths(paths);
      },
      &werr);
  watchDir(std::string());
  invalidator_ = std::thread([this] { invalidatorLoop(); });
#endif
  startLoop([this] { fuse_loop_mt(f_, 0); });
  return 0;
}

int HLMount::unmount(bool lazy) {
  if (!mounted_.load()) return 0;
#if defined(_WIN32)
  // Never compiled or run: no Windows machine here. WinFsp ends the loop on fuse_exit; there is
  // no busy check, so `lazy` makes no difference.
  (void)lazy;
  askUnmount(true);
  fuse_exit(f_);
#else
  askUnmount(true);
  if (int e = unmountFuse(mountPoint_, lazy)) {
    askUnmount(false);
    return e;
  }
#endif
  mounted_ = false;
#if !defined(_WIN32)
  if (watcher_) watcher_->stop();
  stopInvalidator();
#endif
  // After a plain unmount the loop's next read fails and it ends (unless a copy of the mount
  // lives on in another mount namespace: see joinLoopSoon). After a lazy one it ends when the
  // last program using the detached mount lets go (see dispose()).
  if (!lazy) joinLoopSoon();
  return 0;
}
void HLMount::endedOnItsOwn() {
  mounted_ = false;
  const std::string reason = "the FUSE mount at " + mountPoint_ +
                             " ended without shadowfs unmounting it (it was unmounted from "
                             "outside, or its connection was aborted)";
  if (!reportGone(reason)) std::fprintf(stderr, "shadowfs: %s\n", reason.c_str());
}

std::unique_ptr<MountBackend> mountFuseHL(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message) {
  auto m = std::make_unique<HLMount>(std::move(overlay), view, lower, mountPoint, opts);
  if (m->start(err, message) != 0) return nullptr;
  return m;
}

}  // namespace shadowfs
