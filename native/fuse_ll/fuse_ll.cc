// Linux backend on the libfuse3 low-level API.
//
// The kernel names objects by node id. This file keeps the node table (id -> parent id + name)
// that turns ids into overlay paths, answers each FUSE request with one function that calls
// the overlay and replies with its errno, and pushes cache invalidations to the kernel when
// the layer changes behind its back.
//
// Threads: every fuse_* callback runs on a libfuse loop thread (several at once). The public
// MountBackend methods run on the JS thread. Lock order: table mutex (tmu) is never held while
// calling into the overlay or into the kernel (notify calls), so neither can wait on the other.
#define FUSE_USE_VERSION 312
#include "fuse_ll.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "../core/path.h"
#include "../platform/fuse_attr.h"
#include "../platform/fuse_loop.h"
#include "../platform/posix_mount.h"

namespace shadowfs {
namespace {

// One object the kernel holds a reference to. A file with several hard links has several
// names but one node, so the kernel keeps one inode (and one page cache) for it.
struct FName {
  uint64_t parent;
  std::string name;
};

struct FNode {
  // Empty once every name was unlinked. A node whose name now stands for another object (after
  // a layer switch or an edit in A) keeps its names, so requests still on their way for it can
  // find it, but byName no longer leads to it.
  std::vector<FName> names;
  std::weak_ptr<Layer> seenIn;  // the layer it was last looked up in (shared mount only)
  int wd = -1;                  // inotify watch on A's directory at this path, if any
  uint64_t nlookup = 0;
  FileType type = FileType::Regular;
  uint64_t ino = 0;     // the overlay's inode number
  bool opened = false;  // content seen by an earlier open (for keep_cache)
  Timespec mtime;
  uint64_t size = 0;
  std::vector<Handle*> handles;  // open files, for fstat after the last name is gone
};

struct DirHandle {
  std::vector<DirEntry> entries;
  bool loaded = false;  // entries were taken (at the first readdir, and again at each offset 0)
};

class LLMount final : public LoopedMount {
 public:
  LLMount(std::shared_ptr<Overlay> ov, Layer* view, std::string lowerPath, std::string mountPoint,
          MountOptions opts)
      : ov_(std::move(ov)),
        view_(view),
        lowerPath_(std::move(lowerPath)),
        mountPoint_(std::move(mountPoint)),
        opts_(opts) {
    auto root = std::make_unique<FNode>();
    root->type = FileType::Directory;
    root->nlookup = 1;
    nodes_.emplace(FUSE_ROOT_ID, std::move(root));
  }
  ~LLMount() override {
    stopWatcher();
    joinLoop();
    if (se_) {
      fuse_session_unmount(se_);
      fuse_session_destroy(se_);
    }
    if (view_) ov_->unpin(view_);
  }
  LLMount(const LLMount&) = delete;
  LLMount& operator=(const LLMount&) = delete;

  int start(int* err, std::string* message);

  void invalidateForSwitch(const std::vector<std::string>& paths) override;
  bool usesEpoch() const override { return epochWorks_.load(); }
  bool mounted() const override { return mounted_.load(); }
  void invalidatePaths(const std::vector<std::string>& paths) override;
  void invalidateAll() override;
  int unmount(bool lazy) override;

  // --- request handlers (loop threads) ---
  static LLMount* self(fuse_req_t req) {
    auto* m = static_cast<LLMount*>(fuse_req_userdata(req));
    m->requests_.fetch_add(1, std::memory_order_relaxed);
    return m;
  }
  uint64_t requests() const override { return requests_.load(std::memory_order_relaxed); }
  static void opInit(void* userdata, struct fuse_conn_info* conn);
  static void opLookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void opForget(fuse_req_t req, fuse_ino_t ino, uint64_t n);
  static void opForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets);
  static void opGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
  static void opSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int toSet,
                        struct fuse_file_info* fi);
  static void opReadlink(fuse_req_t req, fuse_ino_t ino);
  static void opMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                      dev_t rdev);
  static void opMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
  static void opUnlink(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void opRmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void opSymlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name);
  static void opRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                       const char* newname, unsigned int flags);
  static void opLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
  static void opOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
  static void opRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info* fi);
  static void opWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                      struct fuse_file_info* fi);
  static void opFlush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
  static void opRelease(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
  static void opFsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi);
  static void opOpendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
  static void opFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                          struct fuse_file_info* fi);
  static void opReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                        struct fuse_file_info* fi);
  static void opReleasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
  static void opStatfs(fuse_req_t req, fuse_ino_t ino);
  static void opSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                         size_t size, int flags);
  static void opGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
  static void opListxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
  static void opRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name);
  static void opCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                       struct fuse_file_info* fi);

 private:
  static std::string key(uint64_t parent, const std::string& name) {
    std::string k(reinterpret_cast<const char*>(&parent), sizeof parent);
    k += name;
    return k;
  }
  int pathOf(uint64_t id, std::string* out);
  int pathOfLocked(uint64_t id, std::string* out, int depth);
  int childPath(uint64_t parent, const char* name, std::string* out);
  uint64_t remember(uint64_t parent, const std::string& name, FileType type, uint64_t ino,
                    uint32_t nlink, const std::shared_ptr<Layer>& seenIn);
  uint64_t rememberLocked(uint64_t parent, const std::string& name, FileType type, uint64_t ino,
                          uint32_t nlink, const std::shared_ptr<Layer>& seenIn);
  // The layer to serve node `id` from: the active one while it still holds the object the kernel
  // knows (inode `ino`), else the layer the node was looked up in, if that one still holds it.
  // Requests that looked a node up before a switch and reach us after it are served from the
  // object they saw, never from a mix. Null if neither holds it (the caller answers ESTALE).
  std::shared_ptr<Layer> layerFor(uint64_t id, const std::string& path);
  void dropNameLocked(uint64_t id, uint64_t parent, const std::string& name);
  void trackHandle(uint64_t id, Handle* h, bool add);
  Handle* anyHandle(uint64_t id);
  bool unlinked(uint64_t id);
  void forget(uint64_t id, uint64_t n);
  void unlinkName(uint64_t parent, const std::string& name);
  void moveName(uint64_t parent, const std::string& name, uint64_t newparent,
                const std::string& newname, bool exchange);
  void replyEntry(fuse_req_t req, uint64_t parent, const std::string& name, const Attr& a,
                  const std::shared_ptr<Layer>& seenIn);
  void fillEntry(struct fuse_entry_param* e, uint64_t id, const Attr& a);

  std::shared_ptr<Overlay> ov_;
  Layer* view_;  // pinned layer of a view, or null: the active layer
  std::string lowerPath_;
  std::string mountPoint_;
  MountOptions opts_;
  struct fuse_session* se_ = nullptr;
  std::atomic<bool> mounted_{false};
  std::atomic<bool> epochWorks_{false};  // the kernel took FUSE_NOTIFY_INC_EPOCH (7.44+)
  std::atomic<uint64_t> requests_{0};

  // Live view of A: an inotify watch on A's directory behind every directory node the kernel
  // holds. An event invalidates what the kernel cached for that name, so an edit in A shows in
  // the shadow within milliseconds instead of after the cache timeout.
  void watchDirLocked(FNode* n, const std::string& path);
  void unwatchLocked(FNode* n);
  void startWatcher();
  void stopWatcher();
  void watcherLoop();
  int inotifyFd_ = -1;
  int wakeFd_[2] = {-1, -1};
  std::thread watcher_;
  std::unordered_map<int, std::pair<std::string, int>> watches_;  // wd -> (A path, nodes using it)

  std::mutex tmu_;  // guards nodes_, byName_, nextId_, watches_. Never held across overlay or
                    // notify calls.
  std::unordered_map<uint64_t, std::unique_ptr<FNode>> nodes_;
  std::unordered_map<std::string, uint64_t> byName_;  // (parent id, name) -> node id
  std::unordered_map<uint64_t, uint64_t> byIno_;       // overlay inode number -> node id
  uint64_t nextId_ = FUSE_ROOT_ID + 1;  // never reused, so generation can stay 0
};

// 0, or ENOENT when the object has no name left that leads back to the root.
int LLMount::pathOf(uint64_t id, std::string* out) {
  std::lock_guard lock(tmu_);
  return pathOfLocked(id, out, 0);
}

// A hard-linked file has several names; a name whose parent directory the kernel has forgotten
// (and looked up again under a new node) is dead and is pruned, so any live name will do.
int LLMount::pathOfLocked(uint64_t id, std::string* out, int depth) {
  if (id == FUSE_ROOT_ID) {
    out->clear();
    return 0;
  }
  auto it = nodes_.find(id);
  if (it == nodes_.end() || depth > 4096) return ENOENT;
  auto& names = it->second->names;
  for (auto n = names.begin(); n != names.end();) {
    if (n->parent != FUSE_ROOT_ID && nodes_.find(n->parent) == nodes_.end()) {
      n = names.erase(n);
      continue;
    }
    std::string dir;
    if (pathOfLocked(n->parent, &dir, depth + 1) == 0) {
      *out = joinPath(dir, n->name);
      return 0;
    }
    ++n;
  }
  return ENOENT;
}

int LLMount::childPath(uint64_t parent, const char* name, std::string* out) {
  std::string dir;
  if (int e = pathOf(parent, &dir)) return e;
  *out = joinPath(dir, name);
  return 0;
}

uint64_t LLMount::remember(uint64_t parent, const std::string& name, FileType type,
                           uint64_t ino, uint32_t nlink, const std::shared_ptr<Layer>& seenIn) {
  std::lock_guard lock(tmu_);
  uint64_t id = rememberLocked(parent, name, type, ino, nlink, seenIn);
  FNode* n = nodes_[id].get();
  if (!view_) n->seenIn = seenIn;
  if (type == FileType::Directory && n->wd < 0 && inotifyFd_ >= 0) {
    std::string dir;
    if (pathOfLocked(parent, &dir, 0) == 0) watchDirLocked(n, joinPath(dir, name));
  }
  return id;
}

uint64_t LLMount::rememberLocked(uint64_t parent, const std::string& name, FileType type,
                                 uint64_t ino, uint32_t nlink,
                                 const std::shared_ptr<Layer>& seenIn) {
  std::string k = key(parent, name);
  auto it = byName_.find(k);
  if (it != byName_.end()) {
    const uint64_t id = it->second;
    FNode* n = nodes_[id].get();
    if (n->type == type && n->ino == ino) {
      n->nlookup++;
      if (!view_ && n->seenIn.lock() != seenIn) {
        // Found again in another layer: the other names were hard links in the old layer and
        // may name other objects here. Only this name is known to be right.
        for (auto& nm : n->names) {
          if (nm.parent == parent && nm.name == name) continue;
          auto b = byName_.find(key(nm.parent, nm.name));
          if (b != byName_.end() && b->second == id) byName_.erase(b);
        }
        n->names.assign(1, FName{parent, name});
      }
      return id;
    }
    // The name now stands for another object: new lookups get a new node so the kernel does
    // not mix the two; the old node keeps its names for requests already on their way.
    byName_.erase(it);
  }
  // Another name of an object the kernel already knows (a hard link): same node. Only for
  // objects that do have several links, in the same layer, so two files that merely share an
  // inode number (A spanning two file systems, or copies in two layers) are never merged.
  if (type != FileType::Directory && nlink > 1) {
    auto bi = byIno_.find(ino);
    if (bi != byIno_.end()) {
      FNode* n = nodes_[bi->second].get();
      // Same inode number in another layer is another object (a copy-up keeps A's number).
      const bool sameLayer = view_ || n->seenIn.lock() == seenIn;
      if (n->type == type && !n->names.empty() && sameLayer) {
        bool known = false;
        for (auto& nm : n->names) known = known || (nm.parent == parent && nm.name == name);
        if (!known) n->names.push_back(FName{parent, name});
        n->nlookup++;
        byName_.emplace(std::move(k), bi->second);
        return bi->second;
      }
    }
  }
  uint64_t id = nextId_++;
  auto n = std::make_unique<FNode>();
  n->names.push_back(FName{parent, name});
  n->nlookup = 1;
  n->type = type;
  n->ino = ino;
  nodes_.emplace(id, std::move(n));
  byName_.emplace(std::move(k), id);
  if (type != FileType::Directory) byIno_[ino] = id;
  return id;
}

void LLMount::dropNameLocked(uint64_t id, uint64_t parent, const std::string& name) {
  byName_.erase(key(parent, name));
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  auto& names = it->second->names;
  for (auto n = names.begin(); n != names.end(); ++n) {
    if (n->parent == parent && n->name == name) {
      names.erase(n);
      break;
    }
  }
}

void LLMount::forget(uint64_t id, uint64_t count) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || id == FUSE_ROOT_ID) return;
  FNode* n = it->second.get();
  n->nlookup = count >= n->nlookup ? 0 : n->nlookup - count;
  if (n->nlookup) return;
  for (auto& nm : n->names) {
    auto b = byName_.find(key(nm.parent, nm.name));
    if (b != byName_.end() && b->second == id) byName_.erase(b);
  }
  auto bi = byIno_.find(n->ino);
  if (bi != byIno_.end() && bi->second == id) byIno_.erase(bi);
  unwatchLocked(n);
  nodes_.erase(it);
}

void LLMount::unlinkName(uint64_t parent, const std::string& name) {
  std::lock_guard lock(tmu_);
  auto it = byName_.find(key(parent, name));
  if (it == byName_.end()) return;
  dropNameLocked(it->second, parent, name);
}

void LLMount::moveName(uint64_t parent, const std::string& name, uint64_t newparent,
                       const std::string& newname, bool exchange) {
  std::lock_guard lock(tmu_);
  std::string from = key(parent, name), to = key(newparent, newname);
  auto a = byName_.find(from);
  auto b = byName_.find(to);
  uint64_t ida = a != byName_.end() ? a->second : 0;
  uint64_t idb = b != byName_.end() ? b->second : 0;
  if (ida) dropNameLocked(ida, parent, name);
  if (idb) dropNameLocked(idb, newparent, newname);
  if (ida) {
    nodes_[ida]->names.push_back(FName{newparent, newname});
    byName_[to] = ida;
  }
  if (idb && exchange) {
    nodes_[idb]->names.push_back(FName{parent, name});
    byName_[from] = idb;
  }
}

std::shared_ptr<Layer> LLMount::layerFor(uint64_t id, const std::string& path) {
  std::shared_ptr<Layer> active = ov_->current(view_);
  if (id == FUSE_ROOT_ID || view_) return active;
  uint64_t ino;
  std::shared_ptr<Layer> seen;
  {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return active;
    ino = it->second->ino;
    seen = it->second->seenIn.lock();
  }
  // Looked up in the layer that is still active: the usual case, no extra work.
  if (seen == active) return active;
  Attr a;
  if (ov_->getattr(active.get(), path, &a) == 0 && a.ino == ino) return active;
  if (seen && seen != active && ov_->getattr(seen.get(), path, &a) == 0 && a.ino == ino)
    return seen;
  return nullptr;
}

// True when the node's every name was unlinked (an open file is all that keeps it).
bool LLMount::unlinked(uint64_t id) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  return id != FUSE_ROOT_ID && it != nodes_.end() && it->second->names.empty();
}

Handle* LLMount::anyHandle(uint64_t id) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second->handles.empty()) return nullptr;
  return it->second->handles.front();
}

void LLMount::trackHandle(uint64_t id, Handle* h, bool add) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  auto& hs = it->second->handles;
  if (add) {
    hs.push_back(h);
  } else {
    for (auto i = hs.begin(); i != hs.end(); ++i) {
      if (*i == h) {
        hs.erase(i);
        break;
      }
    }
  }
}

void LLMount::fillEntry(struct fuse_entry_param* e, uint64_t id, const Attr& a) {
  std::memset(e, 0, sizeof *e);
  e->ino = id;
  e->generation = 0;
  toStat(a, &e->attr);
  e->attr_timeout = opts_.attrTimeout;
  e->entry_timeout = opts_.entryTimeout;
}

void LLMount::replyEntry(fuse_req_t req, uint64_t parent, const std::string& name, const Attr& a,
                         const std::shared_ptr<Layer>& seenIn) {
  struct fuse_entry_param e;
  fillEntry(&e, remember(parent, name, a.type, a.ino, a.nlink, seenIn), a);
  if (fuse_reply_entry(req, &e) == -ENOENT) {
    // The request was interrupted: the kernel did not take the reference.
    forget(e.ino, 1);
  }
}

// ------------------------------------------------------------------------------------------
// Request handlers. Each one: ids -> path, one overlay call, one reply.

void LLMount::opInit(void* userdata, struct fuse_conn_info* conn) {
  (void)userdata;
  // O_TRUNC arrives with open(), so truncation needs no separate setattr round trip.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // The kernel drops cached pages when it sees a file's mtime or size change (edits in A).
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  // Locks stay in the kernel (local to this machine), as DESIGN.md asks.
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
  // Writeback caching would let the kernel hold writes we must see at once for API reads.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

void LLMount::opLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  if (std::strlen(name) > kNameMax) return (void)fuse_reply_err(req, ENAMETOOLONG);
  std::string path;
  if (int pe = m->childPath(parent, name, &path)) return (void)fuse_reply_err(req, pe);
  Attr a;
  std::shared_ptr<Layer> used;
  int e = m->ov_->getattr(m->view_, path, &a, &used);
  if (e == ENOENT && m->opts_.negativeTimeout > 0) {
    struct fuse_entry_param ep;
    std::memset(&ep, 0, sizeof ep);
    ep.entry_timeout = m->opts_.negativeTimeout;
    return (void)fuse_reply_entry(req, &ep);
  }
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, used);
}

void LLMount::opForget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
  self(req)->forget(ino, n);
  fuse_reply_none(req);
}

void LLMount::opForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  LLMount* m = self(req);
  for (size_t i = 0; i < count; ++i) m->forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void LLMount::opGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  Attr a;
  Handle* h = fi && fi->fh ? reinterpret_cast<Handle*>(fi->fh) : nullptr;
  if (h && m->ov_->fgetattr(h, &a) == 0) {
    if (m->unlinked(ino)) a.nlink = 0;  // fstat of an open file whose last name is gone
    struct stat st;
    toStat(a, &st);
    return (void)fuse_reply_attr(req, &st, m->opts_.attrTimeout);
  }
  std::string path;
  int e = m->pathOf(ino, &path);
  std::shared_ptr<Layer> layer;
  if (!e) {
    layer = m->layerFor(ino, path);
    e = layer ? m->ov_->getattr(layer.get(), path, &a) : ESTALE;
  }
  if (e) {
    // Unlinked but still open (fstat on the fd): answer from one of its open handles.
    h = m->anyHandle(ino);
    if (!h || m->ov_->fgetattr(h, &a) != 0) return (void)fuse_reply_err(req, e);
    if (m->unlinked(ino)) a.nlink = 0;
  }
  struct stat st;
  toStat(a, &st);
  fuse_reply_attr(req, &st, m->opts_.attrTimeout);
}

void LLMount::opSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int toSet,
                        struct fuse_file_info* fi) {
  LLMount* m = self(req);
  Handle* h = fi && fi->fh ? reinterpret_cast<Handle*>(fi->fh) : nullptr;
  std::string path;
  int pe = m->pathOf(ino, &path);
  if (pe && !(h && h->inode)) return (void)fuse_reply_err(req, pe);
  std::shared_ptr<Layer> layer;
  if (!pe && !(h && h->inode)) {
    layer = m->layerFor(ino, path);
    if (!layer) return (void)fuse_reply_err(req, ESTALE);
  }
  uint32_t mask = 0;
  Attr v;
  if (toSet & FUSE_SET_ATTR_MODE) mask |= kSetMode, v.perm = attr->st_mode & 07777;
  if (toSet & FUSE_SET_ATTR_UID) mask |= kSetUid, v.uid = attr->st_uid;
  if (toSet & FUSE_SET_ATTR_GID) mask |= kSetGid, v.gid = attr->st_gid;
  if (toSet & FUSE_SET_ATTR_SIZE) mask |= kSetSize, v.size = static_cast<uint64_t>(attr->st_size);
  if (toSet & FUSE_SET_ATTR_ATIME_NOW) mask |= kSetAtimeNow;
  else if (toSet & FUSE_SET_ATTR_ATIME)
    mask |= kSetAtime, v.atime = {attr->st_atim.tv_sec, attr->st_atim.tv_nsec};
  if (toSet & FUSE_SET_ATTR_MTIME_NOW) mask |= kSetMtimeNow;
  else if (toSet & FUSE_SET_ATTR_MTIME)
    mask |= kSetMtime, v.mtime = {attr->st_mtim.tv_sec, attr->st_mtim.tv_nsec};
  if (toSet & FUSE_SET_ATTR_CTIME) mask |= kSetCtime, v.ctime = {attr->st_ctim.tv_sec, attr->st_ctim.tv_nsec};
  Attr out;
  int e = m->ov_->setattr(layer ? layer.get() : m->view_, path, h, mask, v, &out);
  if (e) return (void)fuse_reply_err(req, e);
  struct stat st;
  toStat(out, &st);
  fuse_reply_attr(req, &st, m->opts_.attrTimeout);
}

void LLMount::opReadlink(fuse_req_t req, fuse_ino_t ino) {
  LLMount* m = self(req);
  std::string path, target;
  if (int pe = m->pathOf(ino, &path)) return (void)fuse_reply_err(req, pe);
  int e = m->ov_->readlink(m->view_, path, &target);
  if (e) return (void)fuse_reply_err(req, e);
  fuse_reply_readlink(req, target.c_str());
}

void LLMount::opMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                      dev_t rdev) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->childPath(parent, name, &path)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  Attr a;
  int e = m->ov_->mknod(m->view_, path, typeOf(mode), mode & 07777, rdev, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, m->ov_->current(m->view_));
}

void LLMount::opMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->childPath(parent, name, &path)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  Attr a;
  int e = m->ov_->mkdir(m->view_, path, mode & 07777, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, m->ov_->current(m->view_));
}

void LLMount::opUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->childPath(parent, name, &path)) return (void)fuse_reply_err(req, pe);
  int e = m->ov_->unlink(m->view_, path);
  if (!e) m->unlinkName(parent, name);
  fuse_reply_err(req, e);
}

void LLMount::opRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->childPath(parent, name, &path)) return (void)fuse_reply_err(req, pe);
  int e = m->ov_->rmdir(m->view_, path);
  if (!e) m->unlinkName(parent, name);
  fuse_reply_err(req, e);
}

void LLMount::opSymlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->childPath(parent, name, &path)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  Attr a;
  int e = m->ov_->symlink(m->view_, target, path, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, m->ov_->current(m->view_));
}

void LLMount::opRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                       const char* newname, unsigned int flags) {
  LLMount* m = self(req);
  std::string from, to;
  if (int pe = m->childPath(parent, name, &from)) return (void)fuse_reply_err(req, pe);
  if (int pe = m->childPath(newparent, newname, &to)) return (void)fuse_reply_err(req, pe);
  uint32_t f = 0;
  if (flags & RENAME_NOREPLACE) f |= kRenameNoReplace;
  if (flags & RENAME_EXCHANGE) f |= kRenameExchange;
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return (void)fuse_reply_err(req, EINVAL);
  int e = m->ov_->rename(m->view_, from, to, f);
  if (!e && from != to) m->moveName(parent, name, newparent, newname, f & kRenameExchange);
  fuse_reply_err(req, e);
}

void LLMount::opLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  LLMount* m = self(req);
  std::string from, to;
  if (int pe = m->pathOf(ino, &from)) return (void)fuse_reply_err(req, pe);
  if (int pe = m->childPath(newparent, newname, &to)) return (void)fuse_reply_err(req, pe);
  Attr a;
  int e = m->ov_->link(m->view_, from, to, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, newparent, newname, a, m->ov_->current(m->view_));
}

void LLMount::opOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->pathOf(ino, &path)) return (void)fuse_reply_err(req, pe);
  OpenIntent intent;
  intent.write = (fi->flags & O_ACCMODE) != O_RDONLY;
  intent.truncate = (fi->flags & O_TRUNC) != 0;
  intent.append = (fi->flags & O_APPEND) != 0;
  Handle* h = nullptr;
  Attr a;
  std::shared_ptr<Layer> layer = m->layerFor(ino, path);
  if (!layer) return (void)fuse_reply_err(req, ESTALE);
  int e = m->ov_->open(layer.get(), path, intent, &h, &a);
  if (e) return (void)fuse_reply_err(req, e);
  fi->fh = reinterpret_cast<uint64_t>(h);
  // flush does nothing here, and a close() that waits for a FLUSH answer deadlocks a process
  // that exits while holding files open on its own mount: tell the kernel not to send it.
  fi->noflush = 1;
  {
    // Keep the kernel's cached pages only when the content is what the last open saw.
    std::lock_guard lock(m->tmu_);
    auto it = m->nodes_.find(ino);
    if (it != m->nodes_.end()) {
      FNode* n = it->second.get();
      fi->keep_cache = n->opened && n->mtime == a.mtime && n->size == a.size;
      n->opened = true;
      n->mtime = a.mtime;
      n->size = a.size;
      n->handles.push_back(h);
    }
  }
  if (fuse_reply_open(req, fi) == -ENOENT) {
    m->trackHandle(ino, h, false);
    m->ov_->release(h);
  }
}

void LLMount::opRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off,
                     struct fuse_file_info* fi) {
  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  size_t got = 0;
  int e = self(req)->ov_->read(reinterpret_cast<Handle*>(fi->fh), buf.data(), size,
                              static_cast<uint64_t>(off), &got);
  if (e) return (void)fuse_reply_err(req, e);
  fuse_reply_buf(req, buf.data(), got);
}

void LLMount::opWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                      struct fuse_file_info* fi) {
  LLMount* m = self(req);
  int e = m->ov_->write(reinterpret_cast<Handle*>(fi->fh), buf, size, static_cast<uint64_t>(off));
  if (e) return (void)fuse_reply_err(req, e);
  {
    // Our own write changed mtime; the next open must not take that for a change in A, but
    // we do not know the new mtime here, so the next open simply re-reads.
    std::lock_guard lock(m->tmu_);
    auto it = m->nodes_.find(ino);
    if (it != m->nodes_.end()) it->second->opened = false;
  }
  fuse_reply_write(req, size);
}

void LLMount::opFlush(fuse_req_t req, fuse_ino_t, struct fuse_file_info*) {
  fuse_reply_err(req, 0);
}

void LLMount::opRelease(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  Handle* h = reinterpret_cast<Handle*>(fi->fh);
  m->trackHandle(ino, h, false);
  m->ov_->release(h);
  fuse_reply_err(req, 0);
}

void LLMount::opFsync(fuse_req_t req, fuse_ino_t, int, struct fuse_file_info*) {
  // The layer lives in memory: there is nothing slower to flush to.
  fuse_reply_err(req, 0);
}

// Contents live in memory (or a spill file that grows on demand), so there is no space to
// reserve: FALLOC_FL_KEEP_SIZE has nothing to do, and mode 0 is a truncate up. Punching holes
// and the other modes are refused as file systems without them refuse them.
void LLMount::opFallocate(fuse_req_t req, fuse_ino_t, int mode, off_t offset, off_t length,
                          struct fuse_file_info* fi) {
  LLMount* m = self(req);
  if (mode & ~FALLOC_FL_KEEP_SIZE) return (void)fuse_reply_err(req, EOPNOTSUPP);
  auto* h = reinterpret_cast<Handle*>(fi->fh);
  Attr a;
  if (int e = m->ov_->fgetattr(h, &a)) return (void)fuse_reply_err(req, e);
  uint64_t end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(length);
  if ((mode & FALLOC_FL_KEEP_SIZE) || end <= a.size) return (void)fuse_reply_err(req, 0);
  Attr v, out;
  v.size = end;
  fuse_reply_err(req, m->ov_->setattr(m->view_, std::string(), h, kSetSize, v, &out));
}

void LLMount::opOpendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->pathOf(ino, &path)) return (void)fuse_reply_err(req, pe);
  auto d = std::make_unique<DirHandle>();
  Attr a;
  if (int e = m->ov_->getattr(m->view_, path, &a)) return (void)fuse_reply_err(req, e);
  if (a.type != FileType::Directory) return (void)fuse_reply_err(req, ENOTDIR);
  fi->fh = reinterpret_cast<uint64_t>(d.get());
  // Let the kernel keep listings: every change it does not make itself (API writes, layer
  // switches, edits in A) invalidates the directory's inode, which drops the cached listing.
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  if (fuse_reply_open(req, fi) == 0) d.release();
}

void LLMount::opReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                        struct fuse_file_info* fi) {
  auto* d = reinterpret_cast<DirHandle*>(fi->fh);
  if (off == 0 || !d->loaded) {
    // The listing is taken at the first read and again at offset 0 (rewinddir: POSIX wants the
    // directory as it is now). Not at opendir: when the kernel served a first pass from its
    // listing cache, the first read we see may come after changes (a rewind after a create).
    LLMount* m = self(req);
    std::string path;
    std::vector<DirEntry> fresh;
    int e = m->pathOf(ino, &path);
    if (e == 0) e = m->ov_->readdir(m->view_, path, &fresh);
    if (e == 0) d->entries.swap(fresh), d->loaded = true;
    else if (!d->loaded) return (void)fuse_reply_err(req, e);  // else: keep the listing it had
  }
  std::vector<char> buf(size);
  size_t pos = 0;
  // Offsets: 0 ".", 1 "..", then entries[i] at i + 2. An entry's offset names the next one.
  for (size_t i = static_cast<size_t>(off); i < d->entries.size() + 2; ++i) {
    struct stat st;
    std::memset(&st, 0, sizeof st);
    const char* name;
    if (i < 2) {
      name = i == 0 ? "." : "..";
      st.st_ino = ino;
      st.st_mode = S_IFDIR;
    } else {
      const DirEntry& de = d->entries[i - 2];
      name = de.name.c_str();
      st.st_ino = de.ino;
      st.st_mode = modeOf(de.type);
    }
    size_t len = fuse_add_direntry(req, buf.data() + pos, size - pos, name, &st,
                                   static_cast<off_t>(i + 1));
    if (len > size - pos) break;
    pos += len;
  }
  fuse_reply_buf(req, buf.data(), pos);
}

void LLMount::opReleasedir(fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void LLMount::opStatfs(fuse_req_t req, fuse_ino_t) {
  FsStats s;
  int e = self(req)->ov_->statfs(&s);
  if (e) return (void)fuse_reply_err(req, e);
  struct statvfs v;
  std::memset(&v, 0, sizeof v);
  v.f_bsize = s.bsize;
  v.f_frsize = s.frsize;
  v.f_blocks = s.blocks;
  v.f_bfree = s.bfree;
  v.f_bavail = s.bavail;
  v.f_files = s.files;
  v.f_ffree = s.ffree;
  v.f_namemax = s.namemax;
  fuse_reply_statfs(req, &v);
}

void LLMount::opSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                         size_t size, int flags) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->pathOf(ino, &path)) return (void)fuse_reply_err(req, pe);
  fuse_reply_err(req, m->ov_->setxattr(m->view_, path, name, std::string(value, size), flags));
}

void LLMount::opGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  LLMount* m = self(req);
  std::string path, value;
  if (int pe = m->pathOf(ino, &path)) return (void)fuse_reply_err(req, pe);
  int e = m->ov_->getxattr(m->view_, path, name, &value);
  if (e) return (void)fuse_reply_err(req, e);
  if (size == 0) return (void)fuse_reply_xattr(req, value.size());
  if (value.size() > size) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value.data(), value.size());
}

void LLMount::opListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->pathOf(ino, &path)) return (void)fuse_reply_err(req, pe);
  std::vector<std::string> names;
  int e = m->ov_->listxattr(m->view_, path, &names);
  if (e) return (void)fuse_reply_err(req, e);
  std::string all;
  for (auto& n : names) all.append(n).push_back('\0');
  if (size == 0) return (void)fuse_reply_xattr(req, all.size());
  if (all.size() > size) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, all.data(), all.size());
}

void LLMount::opRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->pathOf(ino, &path)) return (void)fuse_reply_err(req, pe);
  fuse_reply_err(req, m->ov_->removexattr(m->view_, path, name));
}

void LLMount::opCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                       struct fuse_file_info* fi) {
  LLMount* m = self(req);
  std::string path;
  if (int pe = m->childPath(parent, name, &path)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  OpenIntent intent;
  intent.write = (fi->flags & O_ACCMODE) != O_RDONLY;
  intent.truncate = (fi->flags & O_TRUNC) != 0;
  intent.exclusive = (fi->flags & O_EXCL) != 0;
  Handle* h = nullptr;
  Attr a;
  int e = m->ov_->create(m->view_, path, mode & 07777, intent, Caller{ctx->uid, ctx->gid}, &h, &a);
  if (e) return (void)fuse_reply_err(req, e);
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->noflush = 1;
  struct fuse_entry_param ep;
  m->fillEntry(&ep, m->remember(parent, name, a.type, a.ino, a.nlink, m->ov_->current(m->view_)), a);
  m->trackHandle(ep.ino, h, true);
  if (fuse_reply_create(req, &ep, fi) == -ENOENT) {
    m->trackHandle(ep.ino, h, false);
    m->forget(ep.ino, 1);
    m->ov_->release(h);
  }
}

const struct fuse_lowlevel_ops kOps = [] {
  struct fuse_lowlevel_ops o;
  std::memset(&o, 0, sizeof o);
  o.init = LLMount::opInit;
  o.lookup = LLMount::opLookup;
  o.forget = LLMount::opForget;
  o.forget_multi = LLMount::opForgetMulti;
  o.getattr = LLMount::opGetattr;
  o.setattr = LLMount::opSetattr;
  o.readlink = LLMount::opReadlink;
  o.mknod = LLMount::opMknod;
  o.mkdir = LLMount::opMkdir;
  o.unlink = LLMount::opUnlink;
  o.rmdir = LLMount::opRmdir;
  o.symlink = LLMount::opSymlink;
  o.rename = LLMount::opRename;
  o.link = LLMount::opLink;
  o.open = LLMount::opOpen;
  o.read = LLMount::opRead;
  o.write = LLMount::opWrite;
  o.flush = LLMount::opFlush;
  o.release = LLMount::opRelease;
  o.fsync = LLMount::opFsync;
  o.opendir = LLMount::opOpendir;
  o.readdir = LLMount::opReaddir;
  o.releasedir = LLMount::opReleasedir;
  o.statfs = LLMount::opStatfs;
  o.setxattr = LLMount::opSetxattr;
  o.getxattr = LLMount::opGetxattr;
  o.listxattr = LLMount::opListxattr;
  o.removexattr = LLMount::opRemovexattr;
  o.create = LLMount::opCreate;
  o.fallocate = LLMount::opFallocate;
  // Not set on purpose: getlk/setlk/flock (the kernel keeps locks locally), access (the kernel
  // checks permissions from our attributes: default_permissions), bmap/ioctl/poll.
  return o;
}();

}  // namespace

void LLMount::watchDirLocked(FNode* n, const std::string& path) {
  std::string abs = path.empty() ? lowerPath_ : lowerPath_ + "/" + path;
  int wd = inotify_add_watch(inotifyFd_, abs.c_str(),
                             IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM |
                                 IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW |
                                 IN_EXCL_UNLINK);
  // ENOENT: a directory that exists only in a layer. ENOSPC: out of watches; that directory
  // then falls back to the cache timeout.
  if (wd < 0) return;
  auto& w = watches_[wd];
  w.first = path;
  w.second++;
  n->wd = wd;
}

void LLMount::unwatchLocked(FNode* n) {
  if (n->wd < 0) return;
  auto it = watches_.find(n->wd);
  if (it != watches_.end() && --it->second.second == 0) {
    inotify_rm_watch(inotifyFd_, n->wd);
    watches_.erase(it);
  }
  n->wd = -1;
}

void LLMount::startWatcher() {
  inotifyFd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotifyFd_ < 0) return;
  if (pipe2(wakeFd_, O_CLOEXEC) != 0) {
    ::close(inotifyFd_);
    inotifyFd_ = -1;
    return;
  }
  {
    std::lock_guard lock(tmu_);
    watchDirLocked(nodes_[FUSE_ROOT_ID].get(), std::string());
  }
  watcher_ = std::thread([this] { watcherLoop(); });
}

void LLMount::stopWatcher() {
  if (watcher_.joinable()) {
    char c = 0;
    (void)!::write(wakeFd_[1], &c, 1);
    watcher_.join();
  }
  for (int& fd : {std::ref(inotifyFd_), std::ref(wakeFd_[0]), std::ref(wakeFd_[1])}) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void LLMount::watcherLoop() {
  alignas(struct inotify_event) char buf[64 * 1024];
  for (;;) {
    struct pollfd pf[2] = {{inotifyFd_, POLLIN, 0}, {wakeFd_[0], POLLIN, 0}};
    if (::poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (pf[1].revents) return;
    ssize_t len = ::read(inotifyFd_, buf, sizeof buf);
    if (len <= 0) continue;
    std::vector<std::string> paths;
    bool overflow = false;
    {
      std::lock_guard lock(tmu_);
      for (char* p = buf; p < buf + len;) {
        auto* ev = reinterpret_cast<struct inotify_event*>(p);
        p += sizeof(struct inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) overflow = true;
        auto it = watches_.find(ev->wd);
        if (it == watches_.end()) continue;
        if (ev->mask & IN_IGNORED) {
          watches_.erase(it);
          continue;
        }
        paths.push_back(ev->len ? joinPath(it->second.first, ev->name) : it->second.first);
      }
    }
    if (overflow) invalidateAll();
    if (!paths.empty()) invalidatePaths(paths);
  }
}

int LLMount::start(int* err, std::string* message) {
  struct fuse_args args = mountArgs(lowerPath_, opts_.debug, opts_.allowOther);
  se_ = fuse_session_new(&args, &kOps, sizeof kOps, this);
  fuse_opt_free_args(&args);
  if (!se_) {
    *err = EINVAL;
    *message = "libfuse refused the session options";
    return -1;
  }
  if (fuse_session_mount(se_, mountPoint_.c_str()) != 0) {
    *err = EIO;
    *message = "the kernel refused the FUSE mount at " + mountPoint_ +
               " (is /dev/fuse usable and the mount point an empty directory?)";
    fuse_session_destroy(se_);
    se_ = nullptr;
    return -1;
  }
  mounted_ = true;
  startWatcher();
  startLoop([this] {
    struct fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(cfg, 0);
    fuse_loop_cfg_set_idle_threads(cfg, 4);
    fuse_loop_cfg_set_max_threads(cfg, 16);
    fuse_session_loop_mt(se_, cfg);
    fuse_loop_cfg_destroy(cfg);
  });
  return 0;
}

int LLMount::unmount(bool lazy) {
  if (!mounted_.load()) return 0;
  if (int e = unmountFuse(mountPoint_, lazy)) return e;
  mounted_ = false;
  // After a plain unmount the loop's next read fails with ENODEV and it ends. After a lazy one
  // it ends when the last program using the detached mount lets go (see dispose()).
  if (!lazy) joinLoop();
  if (!lazy) stopWatcher();
  return 0;
}

void LLMount::invalidatePaths(const std::vector<std::string>& paths) {
  if (!mounted_.load() || !se_) return;
  std::vector<std::pair<uint64_t, std::string>> entries;
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(tmu_);
    for (const std::string& p : paths) {
      uint64_t id = FUSE_ROOT_ID;
      auto comps = components(p);
      for (size_t i = 0; i < comps.size(); ++i) {
        std::string name(comps[i]);
        if (i + 1 == comps.size()) {
          entries.emplace_back(id, name);
          inodes.push_back(id);  // the parent's listing and mtime changed too
        }
        auto it = byName_.find(key(id, name));
        if (it == byName_.end()) break;
        id = it->second;
        if (i + 1 == comps.size()) inodes.push_back(id);
      }
    }
  }
  for (auto& [parent, name] : entries)
    fuse_lowlevel_notify_inval_entry(se_, parent, name.c_str(), name.size());
  for (uint64_t id : inodes) fuse_lowlevel_notify_inval_inode(se_, id, 0, 0);
}

namespace {
// FUSE_NOTIFY_INC_EPOCH (kernel protocol 7.44): one message that makes every name the kernel
// has cached, including negative entries, invalid at its next use. libfuse 3.14 has no call for
// it, so it is written to /dev/fuse by hand: a bare fuse_out_header with unique 0 and the
// notification code in `error`.
constexpr int32_t kNotifyIncEpoch = 8;
struct NotifyHeader {
  uint32_t len;
  int32_t error;
  uint64_t unique;
};
}  // namespace

void LLMount::invalidateForSwitch(const std::vector<std::string>& paths) {
  if (!mounted_.load() || !se_) return;
  if (opts_.useEpoch) {
    NotifyHeader h{sizeof(NotifyHeader), kNotifyIncEpoch, 0};
    ssize_t n = ::write(fuse_session_fd(se_), &h, sizeof h);
    epochWorks_ = n == static_cast<ssize_t>(sizeof h);
  }
  if (!epochWorks_.load()) {
    invalidatePaths(paths);
    return;
  }
  // Names are handled by the epoch; attributes and cached pages of the objects the kernel
  // holds at the paths that differ still have to go.
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(tmu_);
    for (const std::string& p : paths) {
      uint64_t id = FUSE_ROOT_ID;
      for (auto c : components(p)) {
        inodes.push_back(id);
        auto it = byName_.find(key(id, std::string(c)));
        if (it == byName_.end()) {
          id = 0;
          break;
        }
        id = it->second;
      }
      if (id) inodes.push_back(id);
    }
  }
  std::sort(inodes.begin(), inodes.end());
  inodes.erase(std::unique(inodes.begin(), inodes.end()), inodes.end());
  for (uint64_t id : inodes) fuse_lowlevel_notify_inval_inode(se_, id, 0, 0);
}

void LLMount::invalidateAll() {
  if (!mounted_.load() || !se_) return;
  std::vector<std::pair<uint64_t, std::string>> entries;
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(tmu_);
    for (auto& [id, n] : nodes_) {
      inodes.push_back(id);
      for (auto& nm : n->names) entries.emplace_back(nm.parent, nm.name);
    }
  }
  for (auto& [parent, name] : entries)
    fuse_lowlevel_notify_inval_entry(se_, parent, name.c_str(), name.size());
  for (uint64_t id : inodes) fuse_lowlevel_notify_inval_inode(se_, id, 0, 0);
}

std::unique_ptr<MountBackend> mountFuseLL(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message) {
  auto m = std::make_unique<LLMount>(std::move(overlay), view, lower, mountPoint, opts);
  if (m->start(err, message) != 0) return nullptr;
  return m;
}

}  // namespace shadowfs
