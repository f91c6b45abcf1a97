// Portable backend on the FUSE3 high-level API: the code WinFsp runs on Windows through its
// FUSE3 layer, built here against libfuse3 and run by the same tests as fuse_ll, so what
// Windows runs is covered on Linux.
//
// The high-level API names objects by path and keeps its own node table, so this file only
// turns a path into the overlay's form and makes one overlay call per request.
//
// What the kernel may cache and how it is told to drop it (Linux), and the other names of hard
// links, are in hl_cache.cc; the mount object both files share is declared in hl_mount.h.
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
#include "hl_mount.h"

namespace shadowfs {
namespace fuse_hl_detail {

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
  // A day where the folder watcher covers the folder, the mount's own otherwise (start(),
  // hl_cache.cc says what keeps that right).
  auto* self = static_cast<HLMount*>(fuse_get_context()->private_data);
  cfg->entry_timeout = self->kernelEntryTimeout_;
  cfg->attr_timeout = self->kernelAttrTimeout_;
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
  // Case-insensitive names (MountOptions::caseInsensitive): WinFsp learns it only here
  // (fsp_fuse_loop_start reads conn->want). It reads nothing back from cfg: the settings above
  // are libfuse's; WinFsp numbers files by st_ino and removes names at once on its own, and its
  // cache time is the FileInfoTimeout mount option (mountArgs).
  auto* m = static_cast<HLMount*>(fuse_get_context()->private_data);
  if (m->opts_.caseInsensitive) conn->want |= FUSE_CAP_CASE_INSENSITIVE;
#endif
  return fuse_get_context()->private_data;
}

std::vector<std::pair<std::string, uint64_t>> HLMount::requestCounts() const {
  static const char* const names[] = {
      "getattr",  "readlink", "mknod",      "mkdir",      "unlink",      "rmdir",
      "symlink",  "rename",   "link",       "chmod",      "chown",       "truncate",
      "utimens",  "open",     "create",     "read",       "write",       "flush",
      "release",  "fsync",    "statfs",     "opendir",    "readdir",     "releasedir",
      "setxattr", "getxattr", "listxattr",  "removexattr", "fallocate"};
  static_assert(sizeof names / sizeof names[0] == static_cast<size_t>(Op::Count));
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < opCounts_.size(); ++i)
    out.emplace_back(names[i], opCounts_[i].load(std::memory_order_relaxed));
  return out;
}

int HLMount::opGetattr(const char* path, StatT* st, struct fuse_file_info* fi) {
  countOp(Op::Getattr);
  HLMount* m = self();
  Attr a;
  // fstat: the object that was opened, whatever the path shows now.
  if (Handle* h = handleOf(fi); h && m->ov_->fgetattr(h, &a) == 0) {
    if (!path) a.nlink = 0;  // open, but every name is gone
#if !defined(_WIN32)
    else {
      // The kernel keeps what this answers for the path (it has one inode per path), and
      // libfuse answers every SETATTR with it too. A file opened in another layer than the one
      // the mount shows now (a switch while it stayed open) must not lend the path its size:
      // after an ftruncate through it, the shown layer's readers read short. So the path is
      // answered as the mount shows it, when that is the same type of file (another type would
      // make the kernel mark the inode bad); the program holding the file sees that size
      // (docs/how-it-works.md).
      Attr shown;
      if (h->layer.lock() != m->ov_->current(m->view_) && m->ov_->getattr(m->view_, rel(path), &shown) == 0 &&
          shown.type == a.type)
        a = shown;
      m->noteLinked(rel(path), a);
    }
#endif
    toStat(a, st);
    return 0;
  }
  if (!path) return -ENOENT;
  // Lookups arrive here too; the core answers ENAMETOOLONG for an over-long name.
  if (int e = m->ov_->getattr(m->view_, rel(path), &a)) return -e;
#if !defined(_WIN32)
  if (a.type == FileType::Directory) m->watchDir(rel(path), a.ino);
  m->noteLinked(rel(path), a);
  m->noteShown(rel(path));
#endif
  toStat(a, st);
  return 0;
}


int HLMount::opReadlink(const char* path, char* buf, size_t size) {
  countOp(Op::Readlink);
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
  countOp(Op::Mknod);
  HLMount* m = self();
  Attr a;
  return -m->ov_->mknod(m->view_, rel(path), typeOf(mode), mode & 07777,
                        static_cast<uint64_t>(rdev), caller(), &a);
}

int HLMount::opMkdir(const char* path, ModeT mode) {
  countOp(Op::Mkdir);
  HLMount* m = self();
  Attr a;
  return -m->ov_->mkdir(m->view_, rel(path), mode & 07777, caller(), &a);
}

int HLMount::opUnlink(const char* path) {
  countOp(Op::Unlink);
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
  countOp(Op::Rmdir);
  HLMount* m = self();
  return -m->ov_->rmdir(m->view_, rel(path));
}

int HLMount::opSymlink(const char* target, const char* path) {
  countOp(Op::Symlink);
  HLMount* m = self();
  Attr a;
  return -m->ov_->symlink(m->view_, target, rel(path), caller(), &a);
}

int HLMount::opRename(const char* from, const char* to, unsigned int flags) {
  countOp(Op::Rename);
  HLMount* m = self();
  // The API passes Linux's rename flags, which RenameFlags mirrors.
  if (flags & ~(kRenameNoReplace | kRenameExchange)) return -EINVAL;
#if !defined(_WIN32)
  const bool track = m->anyLinked_.load();
  Attr victim;  // replaced (or exchanged): its other names' link count and ctime change
  const bool hadVictim = track && m->ov_->getattr(m->view_, rel(to), &victim) == 0;
  if (int e = m->ov_->rename(m->view_, rel(from), rel(to), flags)) return -e;
  m->renamedHere(rel(to));
  if (flags & kRenameExchange) m->renamedHere(rel(from));
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
  countOp(Op::Link);
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
  countOp(Op::Chmod);
  Attr v;
  v.perm = mode & 07777;
  return self()->setattr(path, fi, kSetMode, v);
}

int HLMount::opChown(const char* path, UidT uid, GidT gid, struct fuse_file_info* fi) {
  countOp(Op::Chown);
  Attr v;
  uint32_t mask = 0;
  if (uid != static_cast<UidT>(-1)) mask |= kSetUid, v.uid = static_cast<uint32_t>(uid);
  if (gid != static_cast<GidT>(-1)) mask |= kSetGid, v.gid = static_cast<uint32_t>(gid);
  return self()->setattr(path, fi, mask, v);
}

int HLMount::opTruncate(const char* path, OffT size, struct fuse_file_info* fi) {
  countOp(Op::Truncate);
  if (size < 0) return -EINVAL;
  Attr v;
  v.size = static_cast<uint64_t>(size);
  return self()->setattr(path, fi, kSetSize, v);
}

int HLMount::opUtimens(const char* path, const TimespecT tv[2], struct fuse_file_info* fi) {
  countOp(Op::Utimens);
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

// The kernel keeps a file's cached pages across opens only while the object behind the path is
// the one the last open saw (keepPages, hl_cache.cc); on Windows every open drops them.
int HLMount::opOpen(const char* path, struct fuse_file_info* fi) {
  countOp(Op::Open);
  HLMount* m = self();
  Handle* h = nullptr;
  Attr a;
  if (int e = m->ov_->open(m->view_, rel(path), intentOf(fi->flags), &h, &a)) return -e;
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->keep_cache = 0;
#if !defined(_WIN32)
  if (fi->flags & O_TRUNC) m->changedLinked(path, h);
  fi->keep_cache = m->keepPages(rel(path), a) ? 1 : 0;
#endif
#if !defined(_WIN32)
  // flush does nothing here, and a close() waiting for a FLUSH answer deadlocks a process that
  // exits while holding files open on its own mount: tell the kernel not to send it.
  fi->noflush = 1;
#endif
  return 0;
}

int HLMount::opCreate(const char* path, ModeT mode, struct fuse_file_info* fi) {
  countOp(Op::Create);
  HLMount* m = self();
  Handle* h = nullptr;
  Attr a;
  if (int e = m->ov_->create(m->view_, rel(path), mode & 07777, intentOf(fi->flags), caller(), &h,
                             &a))
    return -e;
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->keep_cache = 0;
#if !defined(_WIN32)
  m->keepPages(rel(path), a);  // a new file: nothing cached to keep, but the next open may
  fi->noflush = 1;
#endif
  return 0;
}

int HLMount::opRead(const char*, char* buf, size_t size, OffT off, struct fuse_file_info* fi) {
  countOp(Op::Read);
  size_t got = 0;
  if (int e = self()->ov_->read(handleOf(fi), buf, size, static_cast<uint64_t>(off), &got))
    return -e;
  return static_cast<int>(got);
}

int HLMount::opWrite(const char* path, const char* buf, size_t size, OffT off,
                     struct fuse_file_info* fi) {
  countOp(Op::Write);
  HLMount* m = self();
  if (int e = m->ov_->write(handleOf(fi), buf, size, static_cast<uint64_t>(off))) return -e;
#if !defined(_WIN32)
  m->changedLinked(path, handleOf(fi));
#else
  (void)path;
#endif
  return static_cast<int>(size);
}

int HLMount::opFlush(const char*, struct fuse_file_info*) { countOp(Op::Flush); return 0; }

int HLMount::opRelease(const char*, struct fuse_file_info* fi) {
  countOp(Op::Release);
  self()->ov_->release(handleOf(fi));
  return 0;
}

// The layer lives in memory: there is nothing slower to flush to.
int HLMount::opFsync(const char*, int, struct fuse_file_info*) { countOp(Op::Fsync); return 0; }

int HLMount::opStatfs(const char*, StatvfsT* out) {
  countOp(Op::Statfs);
  FsStats s;
  if (int e = self()->ov_->statfs(&s)) return -e;
  toStatvfs(s, out);
  return 0;
}

int HLMount::opOpendir(const char* path, struct fuse_file_info* fi) {
  countOp(Op::Opendir);
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
  countOp(Op::Readdir);
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
  countOp(Op::Releasedir);
  delete reinterpret_cast<DirHandle*>(fi->fh);
  return 0;
}

int HLMount::opSetxattr(const char* path, const char* name, const char* value, size_t size,
                        int flags) {
  countOp(Op::Setxattr);
  HLMount* m = self();
  return -m->ov_->setxattr(m->view_, rel(path), name, std::string(value, size), flags);
}

// size 0 asks for the length; a buffer too small is ERANGE.
int HLMount::opGetxattr(const char* path, const char* name, char* value, size_t size) {
  countOp(Op::Getxattr);
  HLMount* m = self();
  std::string v;
  if (int e = m->ov_->getxattr(m->view_, rel(path), name, &v)) return -e;
  long n = xattrReplySize(v.size(), size);
  if (n > 0 && size) std::memcpy(value, v.data(), v.size());
  return static_cast<int>(n);
}

int HLMount::opListxattr(const char* path, char* list, size_t size) {
  countOp(Op::Listxattr);
  HLMount* m = self();
  std::vector<std::string> names;
  if (int e = m->ov_->listxattr(m->view_, rel(path), &names)) return -e;
  std::string all = xattrList(names);
  long n = xattrReplySize(all.size(), size);
  if (n > 0 && size) std::memcpy(list, all.data(), all.size());
  return static_cast<int>(n);
}

int HLMount::opRemovexattr(const char* path, const char* name) {
  countOp(Op::Removexattr);
  HLMount* m = self();
  return -m->ov_->removexattr(m->view_, rel(path), name);
}

#if !defined(_WIN32)
// As in fuse_ll: Overlay::fallocate has the semantics; the other modes are refused.
int HLMount::opFallocate(const char* path, int mode, OffT off, OffT len,
                         struct fuse_file_info* fi) {
  countOp(Op::Fallocate);
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



int HLMount::start(int* err, std::string* message) {
  struct fuse_args args = mountArgs(lower_, opts_.debug, opts_.allowOther);
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
  // With a watcher the kernel may keep names and attributes for a day: edits in the folder are
  // pushed, switches and API writes invalidate, and directories no watch covers are swept at
  // the mount's own timeout (sweepUncovered). Without one, the mount's own timeouts.
  const bool watching = watcher_ != nullptr;
  kernelEntryTimeout_ = watching && opts_.entryTimeout > 0 ? kCoveredTimeout : opts_.entryTimeout;
  kernelAttrTimeout_ = watching && opts_.attrTimeout > 0 ? kCoveredTimeout : opts_.attrTimeout;
  Attr root;
  watchDir(std::string(), ov_->getattr(view_, std::string(), &root) == 0 ? root.ino : 0);
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

}  // namespace fuse_hl_detail

using fuse_hl_detail::HLMount;

std::unique_ptr<MountBackend> mountFuseHL(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message) {
  auto m = std::make_unique<HLMount>(std::move(overlay), view, lower, mountPoint, opts);
  if (m->start(err, message) != 0) return nullptr;
  return m;
}

}  // namespace shadowfs
