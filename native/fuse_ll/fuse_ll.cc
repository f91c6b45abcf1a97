// Linux backend on the libfuse3 low-level API: one handler per request (ids -> path and layer,
// one overlay call, one reply), the session, and its loop. The node table is in node_table.cc,
// cache invalidation in kernel_cache.cc; ll_mount.h has the mount object and its thread rules.
#include "fuse_ll.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../core/path.h"
#include "../platform/fuse_attr.h"
#include "../platform/posix_mount.h"
#include "ll_mount.h"

namespace shadowfs {
namespace ll {

void LLMount::replyXattr(fuse_req_t req, const std::string& value, size_t size) {
  long n = xattrReplySize(value.size(), size);
  if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
  if (size == 0) return (void)fuse_reply_xattr(req, static_cast<size_t>(n));
  fuse_reply_buf(req, value.data(), value.size());
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
  auto* m = static_cast<LLMount*>(userdata);
  if (!m->opts_.openRoundTrips) {
    // No open round trips: OPEN and OPENDIR are answered ENOSYS (see opOpen), which the kernel
    // takes as "open without asking from now on". O_TRUNC then reaches us as a SETATTR, so
    // ATOMIC_O_TRUNC (truncation folded into OPEN) must stay off.
    m->noOpen_ = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
    m->noOpendir_ = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
    if (m->noOpen_) conn->want |= FUSE_CAP_NO_OPEN_SUPPORT;
    if (m->noOpendir_) conn->want |= FUSE_CAP_NO_OPENDIR_SUPPORT;
  }
  // O_TRUNC arrives with open(), so truncation needs no separate setattr round trip.
  if (!m->noOpen_ && (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC))
    conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  else
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
  m->readdirplus_ = (conn->want & FUSE_CAP_READDIRPLUS) != 0;
  // Symlink targets stay in the kernel's page cache (dropped with the inode on invalidation).
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  // The kernel drops cached pages when it sees a file's mtime or size change (edits in A).
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  // Locks stay in the kernel (local to this machine), as DESIGN.md asks.
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
  // Writeback caching would let the kernel hold writes we must see at once for API reads.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  std::lock_guard lock(m->initMu_);
  m->initDone_ = true;
  m->initCv_.notify_all();
}

void LLMount::opLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  m->count(Op::Lookup);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)fuse_reply_err(req, pe);
  Attr a;
  int e = m->ov_->getattr(layer.get(), path, &a);
  if (e == ENOENT && m->opts_.negativeTimeout > 0) {
    struct fuse_entry_param ep;
    std::memset(&ep, 0, sizeof ep);
    ep.entry_timeout = m->opts_.negativeTimeout;
    return (void)fuse_reply_entry(req, &ep);
  }
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opForget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
  LLMount* m = self(req);
  m->count(Op::Forget);
  m->forget(ino, n);
  fuse_reply_none(req);
}

void LLMount::opForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  LLMount* m = self(req);
  m->count(Op::Forget);
  for (size_t i = 0; i < count; ++i) m->forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void LLMount::opGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Getattr);
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
    Handle copy;
    if (!m->anyHandle(ino, &copy)) return (void)fuse_reply_err(req, e);
    int fe = m->ov_->fgetattr(&copy, &a);
    if (copy.lower >= 0) ::close(static_cast<int>(copy.lower));
    if (fe) return (void)fuse_reply_err(req, e);
    if (m->unlinked(ino)) a.nlink = 0;
  }
  struct stat st;
  toStat(a, &st);
  fuse_reply_attr(req, &st, m->opts_.attrTimeout);
}

void LLMount::opSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int toSet,
                        struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Setattr);
  IoHandle io(m, fi ? fi->fh : 0);
  std::string path;
  int pe = m->pathOf(ino, &path);
  if (pe && !io.h) io.fromNode(ino, true);  // unlinked: its pinned handle, if any
  Handle* h = io.h;
  if (pe && !(h && h->inode)) return (void)fuse_reply_err(req, pe);
  std::shared_ptr<Layer> layer;
  if (h && h->inode) {
    layer = h->layer.lock();  // ftruncate/fchmod: the layer the file was opened in
    if (!layer) return (void)fuse_reply_err(req, ESTALE);
  } else {
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
  int e = m->ov_->setattr(layer.get(), path, h, mask, v, &out);
  if (e) return (void)fuse_reply_err(req, e);
  struct stat st;
  toStat(out, &st);
  fuse_reply_attr(req, &st, m->opts_.attrTimeout);
}

void LLMount::opReadlink(fuse_req_t req, fuse_ino_t ino) {
  LLMount* m = self(req);
  std::string path, target;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)fuse_reply_err(req, pe);
  int e = m->ov_->readlink(layer.get(), path, &target);
  if (e) return (void)fuse_reply_err(req, e);
  fuse_reply_readlink(req, target.c_str());
}

void LLMount::opMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                      dev_t rdev) {
  LLMount* m = self(req);
  m->count(Op::Mknod);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  Attr a;
  int e = m->ov_->mknod(layer.get(), path, typeOf(mode), mode & 07777, rdev,
                        Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  Attr a;
  int e = m->ov_->mkdir(layer.get(), path, mode & 07777, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)fuse_reply_err(req, pe);
  m->pinBeforeRemove(parent, name);
  int e = m->ov_->unlink(layer.get(), path);
  if (!e) m->unlinkName(parent, name);
  fuse_reply_err(req, e);
}

void LLMount::opRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)fuse_reply_err(req, pe);
  int e = m->ov_->rmdir(layer.get(), path);
  if (!e) m->unlinkName(parent, name);
  fuse_reply_err(req, e);
}

void LLMount::opSymlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  Attr a;
  int e = m->ov_->symlink(layer.get(), target, path, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                       const char* newname, unsigned int flags) {
  LLMount* m = self(req);
  std::string from, to;
  std::shared_ptr<Layer> layer, toLayer, active = m->ov_->current(m->view_);
  if (int pe = m->childAt(parent, name, &from, &layer, active)) return (void)fuse_reply_err(req, pe);
  if (int pe = m->childAt(newparent, newname, &to, &toLayer, active))
    return (void)fuse_reply_err(req, pe);
  // The two directories were looked up in different layers (a switch in between): no object
  // can move between layers, as between two file systems.
  if (layer != toLayer) return (void)fuse_reply_err(req, EXDEV);
  uint32_t f = 0;
  if (flags & RENAME_NOREPLACE) f |= kRenameNoReplace;
  if (flags & RENAME_EXCHANGE) f |= kRenameExchange;
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return (void)fuse_reply_err(req, EINVAL);
  if (!(f & (kRenameNoReplace | kRenameExchange))) m->pinBeforeRemove(newparent, newname);
  int e = m->ov_->rename(layer.get(), from, to, f);
  if (!e && from != to) m->moveName(parent, name, newparent, newname, f & kRenameExchange);
  fuse_reply_err(req, e);
}

void LLMount::opLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  LLMount* m = self(req);
  std::string from, to;
  std::shared_ptr<Layer> layer, toLayer, active = m->ov_->current(m->view_);
  if (int pe = m->nodeAt(ino, &from, &layer, active)) return (void)fuse_reply_err(req, pe);
  if (int pe = m->childAt(newparent, newname, &to, &toLayer, active))
    return (void)fuse_reply_err(req, pe);
  if (layer != toLayer) return (void)fuse_reply_err(req, EXDEV);
  Attr a;
  int e = m->ov_->link(layer.get(), from, to, &a);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyEntry(req, newparent, newname, a, layer);
}

void LLMount::opOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Open);
  // ENOSYS: the kernel now opens every file without asking (fuse_file_open, fs/fuse/file.c),
  // keeping cached pages across opens; reads and writes come by node (see nodeHandle).
  if (m->noOpen()) return (void)fuse_reply_err(req, ENOSYS);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)fuse_reply_err(req, pe);
  Handle* h = nullptr;
  Attr a;
  int e = m->ov_->open(layer.get(), path, intentOf(fi->flags), &h, &a);
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

void LLMount::opRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Read);
  IoHandle io(m, fi->fh);
  if (!io.h) {
    if (int e = io.fromNode(ino, false)) return (void)fuse_reply_err(req, e);
  }
  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  size_t got = 0;
  int e = m->ov_->read(io.h, buf.data(), size, static_cast<uint64_t>(off), &got);
  if (e) return (void)fuse_reply_err(req, e);
  fuse_reply_buf(req, buf.data(), got);
}

void LLMount::opWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                      struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Write);
  IoHandle io(m, fi->fh);
  if (!io.h) {
    if (int e = io.fromNode(ino, true)) return (void)fuse_reply_err(req, e);
  }
  int e = m->ov_->write(io.h, buf, size, static_cast<uint64_t>(off));
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

// FLUSH comes only without open round trips (opens set noflush): ENOSYS makes the kernel stop
// sending it (fc->no_flush), as there is nothing to flush.
void LLMount::opFlush(fuse_req_t req, fuse_ino_t, struct fuse_file_info*) {
  LLMount* m = self(req);
  m->count(Op::Flush);
  fuse_reply_err(req, m->noOpen() ? ENOSYS : 0);
}

void LLMount::opRelease(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Release);
  Handle* h = reinterpret_cast<Handle*>(fi->fh);
  // The one file opened by the OPEN that was answered ENOSYS is released with no handle.
  if (!h) return (void)fuse_reply_err(req, 0);
  m->trackHandle(ino, h, false);
  m->ov_->release(h);
  fuse_reply_err(req, 0);
}

void LLMount::opFsync(fuse_req_t req, fuse_ino_t, int, struct fuse_file_info*) {
  // The layer lives in memory: there is nothing slower to flush to.
  fuse_reply_err(req, 0);
}

// Overlay::fallocate has the semantics; punching holes and the other modes are refused as file
// systems without them refuse them.
void LLMount::opFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                          struct fuse_file_info* fi) {
  LLMount* m = self(req);
  if (mode & ~FALLOC_FL_KEEP_SIZE) return (void)fuse_reply_err(req, EOPNOTSUPP);
  IoHandle io(m, fi->fh);
  if (!io.h) {
    if (int e = io.fromNode(ino, true)) return (void)fuse_reply_err(req, e);
  }
  std::shared_ptr<Layer> layer = io.h->layer.lock();
  int e = layer ? m->ov_->fallocate(layer.get(), io.h, (mode & FALLOC_FL_KEEP_SIZE) != 0,
                                    static_cast<uint64_t>(offset), static_cast<uint64_t>(length))
                : ESTALE;
  fuse_reply_err(req, e);
}

void LLMount::opOpendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Opendir);
  // ENOSYS: the kernel opens directories without asking from now on, and keeps their
  // listings (FOPEN_CACHE_DIR) until an invalidation of the directory drops them.
  if (m->noOpendir()) return (void)fuse_reply_err(req, ENOSYS);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)fuse_reply_err(req, pe);
  auto d = std::make_unique<DirHandle>();
  // The listing itself is taken at the first read (see DirStream).
  Attr a;
  if (int e = m->ov_->getattr(layer.get(), path, &a)) return (void)fuse_reply_err(req, e);
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
  LLMount* m = self(req);
  m->count(Op::Readdir);
  std::shared_ptr<DirStream> held;  // no-opendir: the node's listing
  if (!fi->fh) {
    if (int e = m->nodeListing(ino, static_cast<uint64_t>(off), &held))
      return (void)fuse_reply_err(req, e);
  }
  DirStream& d = held ? *held : reinterpret_cast<DirHandle*>(fi->fh)->stream;
  if (!held && d.needsFill(static_cast<uint64_t>(off))) {
    std::string path;
    std::shared_ptr<Layer> layer;
    int e = m->nodeAt(ino, &path, &layer);
    if (e == 0) e = m->ov_->list(layer.get(), path, &d);
    if (e && !d.loaded) return (void)fuse_reply_err(req, e);  // else: keep the listing it had
  }
  std::vector<char> buf(size);
  size_t pos = 0;
  for (size_t i = static_cast<size_t>(off); i < d.count(); ++i) {
    const char* name;
    uint64_t entIno;
    FileType type;
    d.at(i, &name, &entIno, &type);
    struct stat st;
    std::memset(&st, 0, sizeof st);
    st.st_ino = i < 2 ? ino : entIno;
    st.st_mode = modeOf(type);
    size_t len = fuse_add_direntry(req, buf.data() + pos, size - pos, name, &st,
                                   static_cast<off_t>(i + 1));
    if (len > size - pos) {
      held = nullptr;  // more to come: keep the node's listing for the next request
      break;
    }
    pos += len;
  }
  if (held) m->doneListing(ino, held);
  fuse_reply_buf(req, buf.data(), pos);
}

// READDIRPLUS: the listing with each entry's attributes, so that one round trip fills the
// kernel's dentry and attribute caches (ls -l, git status and stat-heavy tools then send no
// LOOKUP per name). Each entry given with a node id counts as a lookup the kernel will FORGET,
// exactly as a LOOKUP reply does; "." and "..", and an entry that vanished since the listing
// was taken, go without one (node id 0: the kernel uses only the name and type).
void LLMount::opReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                            struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Readdirplus);
  std::shared_ptr<DirStream> held;  // no-opendir: the node's listing
  if (!fi->fh) {
    if (int e = m->nodeListing(ino, static_cast<uint64_t>(off), &held))
      return (void)fuse_reply_err(req, e);
  }
  DirStream& d = held ? *held : reinterpret_cast<DirHandle*>(fi->fh)->stream;
  std::string path;
  std::shared_ptr<Layer> layer;
  int ne = m->nodeAt(ino, &path, &layer);
  if (!held && d.needsFill(static_cast<uint64_t>(off))) {
    int e = ne ? ne : m->ov_->list(layer.get(), path, &d);
    if (e && !d.loaded) return (void)fuse_reply_err(req, e);  // else: keep the listing it had
  }
  std::vector<char> buf(size);
  std::vector<uint64_t> taken;  // node ids handed to the kernel, one lookup each
  size_t pos = 0;
  for (size_t i = static_cast<size_t>(off); i < d.count(); ++i) {
    const char* name;
    uint64_t entIno;
    FileType type;
    d.at(i, &name, &entIno, &type);
    if (fuse_add_direntry_plus(req, nullptr, 0, name, nullptr, 0) > size - pos) {
      held = nullptr;  // more to come: keep the node's listing for the next request
      break;
    }
    struct fuse_entry_param e;
    std::memset(&e, 0, sizeof e);
    Attr a;
    if (i >= 2 && ne == 0 && m->ov_->getattr(layer.get(), joinPath(path, name), &a) == 0) {
      m->fillEntry(&e, m->remember(ino, name, a.type, a.ino, a.nlink, layer), a);
      taken.push_back(e.ino);
    } else {
      e.attr.st_ino = i < 2 ? ino : entIno;
      e.attr.st_mode = modeOf(type);
    }
    pos += fuse_add_direntry_plus(req, buf.data() + pos, size - pos, name, &e,
                                  static_cast<off_t>(i + 1));
  }
  if (held) m->doneListing(ino, held);
  if (fuse_reply_buf(req, buf.data(), pos) == -ENOENT) {
    // Interrupted: the kernel took none of the references.
    for (uint64_t id : taken) m->forget(id, 1);
  }
}

std::vector<std::pair<std::string, uint64_t>> LLMount::requestCounts() const {
  static const char* const names[] = {"lookup",  "getattr",    "setattr", "open",    "create",
                                      "mknod",   "release",    "flush",   "read",    "write",
                                      "opendir", "readdir",    "readdirplus", "releasedir",
                                      "getxattr", "forget"};
  static_assert(sizeof names / sizeof names[0] == static_cast<size_t>(Op::Count));
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < opCounts_.size(); ++i) out.emplace_back(names[i], opCounts_[i].load(std::memory_order_relaxed));
  return out;
}

void LLMount::opReleasedir(fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
  self(req)->count(Op::Releasedir);
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void LLMount::opStatfs(fuse_req_t req, fuse_ino_t) {
  FsStats s;
  int e = self(req)->ov_->statfs(&s);
  if (e) return (void)fuse_reply_err(req, e);
  struct statvfs v;
  toStatvfs(s, &v);
  fuse_reply_statfs(req, &v);
}

void LLMount::opSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                         size_t size, int flags) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)fuse_reply_err(req, pe);
  fuse_reply_err(req, m->ov_->setxattr(layer.get(), path, name, std::string(value, size), flags));
}

void LLMount::opGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  LLMount* m = self(req);
  m->count(Op::Getxattr);
  std::string path, value;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)fuse_reply_err(req, pe);
  int e = m->ov_->getxattr(layer.get(), path, name, &value);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyXattr(req, value, size);
}

void LLMount::opListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)fuse_reply_err(req, pe);
  std::vector<std::string> names;
  int e = m->ov_->listxattr(layer.get(), path, &names);
  if (e) return (void)fuse_reply_err(req, e);
  m->replyXattr(req, xattrList(names), size);
}

void LLMount::opRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)fuse_reply_err(req, pe);
  fuse_reply_err(req, m->ov_->removexattr(layer.get(), path, name));
}

void LLMount::opCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                       struct fuse_file_info* fi) {
  LLMount* m = self(req);
  m->count(Op::Create);
  // ENOSYS: the kernel makes the file with MKNOD and opens it without asking (it stops sending
  // CREATE), which spares the RELEASE a created file's handle would cost.
  if (m->noOpen()) return (void)fuse_reply_err(req, ENOSYS);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)fuse_reply_err(req, pe);
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  Handle* h = nullptr;
  Attr a;
  int e = m->ov_->create(layer.get(), path, mode & 07777, intentOf(fi->flags),
                         Caller{ctx->uid, ctx->gid}, &h, &a);
  if (e) return (void)fuse_reply_err(req, e);
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->noflush = 1;
  struct fuse_entry_param ep;
  m->fillEntry(&ep, m->remember(parent, name, a.type, a.ino, a.nlink, layer), a);
  m->trackHandle(ep.ino, h, true);
  if (fuse_reply_create(req, &ep, fi) == -ENOENT) {
    m->trackHandle(ep.ino, h, false);
    m->forget(ep.ino, 1);
    m->ov_->release(h);
  }
}

// One table wires every request to its handler.
static const struct fuse_lowlevel_ops kOps = [] {
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
  o.readdirplus = LLMount::opReaddirplus;
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


}  // namespace ll

int ll::LLMount::start(int* err, std::string* message) {
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
  // The kernel sends INIT as soon as the mount exists; what it agreed to (transport()) is known
  // once the loop has answered it. Not waiting forever: a kernel that never sends it leaves a
  // mount that fails on first use, which is reported there.
  std::unique_lock lock(initMu_);
  initCv_.wait_for(lock, std::chrono::seconds(10), [this] { return initDone_; });
  return 0;
}

int ll::LLMount::unmount(bool lazy) {
  if (!mounted_.load()) return 0;
  if (int e = unmountFuse(mountPoint_, lazy)) return e;
  mounted_ = false;
  // After a plain unmount the loop's next read fails with ENODEV and it ends. After a lazy one
  // it ends when the last program using the detached mount lets go (see dispose()).
  if (!lazy) joinLoop();
  if (!lazy) stopWatcher();
  return 0;
}


std::unique_ptr<MountBackend> mountFuseLL(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message) {
  auto m = std::make_unique<ll::LLMount>(std::move(overlay), view, lower, mountPoint, opts);
  if (m->start(err, message) != 0) return nullptr;
  return m;
}

}  // namespace shadowfs
