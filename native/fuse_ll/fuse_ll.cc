// Linux backend: one handler per FUSE request (ids -> path and layer, one overlay call, one
// reply), and the session. The requests are read and decoded in dev_loop.cc and answered
// through wire.h (this backend speaks the kernel protocol itself; libfuse only mounts and
// unmounts). The node table is in node_table.cc, cache invalidation in kernel_cache.cc;
// ll_mount.h has the mount object and its thread rules.
#include "fuse_ll.h"

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/ioctl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "../core/path.h"
#include "../fuse_common/fuse_attr.h"
#include "../platform/posix_mount.h"
#include "ll_mount.h"

namespace shadowfs {
namespace ll {

namespace {
// Whether this process has CAP_SYS_ADMIN in its effective set (bit 21 of CapEff), which the
// kernel asks of whoever registers a backing file.
bool haveSysAdmin() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return false;
  char line[256];
  unsigned long long caps = 0;
  bool found = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "CapEff: %llx", &caps) == 1) {
      found = true;
      break;
    }
  }
  std::fclose(f);
  return found && (caps & (1ull << 21)) != 0;
}
}  // namespace

void LLMount::replyXattr(Req* req, const std::string& value, size_t size) {
  long n = xattrReplySize(value.size(), size);
  if (n < 0) return (void)wire::replyErr(req, static_cast<int>(-n));
  if (size == 0) return (void)wire::replyXattrSize(req, static_cast<uint32_t>(n));
  wire::replyBuf(req, value.data(), value.size());
}

void LLMount::fillEntry(abi::EntryOut* e, uint64_t id, const Attr& a) {
  wire::fillEntry(e, id, a, opts_.entryTimeout, opts_.attrTimeout);
}

void LLMount::replyEntry(Req* req, uint64_t parent, const std::string& name, const Attr& a,
                         const std::shared_ptr<Layer>& seenIn) {
  abi::EntryOut e;
  fillEntry(&e, remember(parent, name, a.type, a.ino, a.layerObject && a.nlink > 1, seenIn), a);
  if (wire::replyEntry(req, e) == -ENOENT) {
    // The request was interrupted: the kernel did not take the reference.
    forget(e.nodeid, 1);
  }
}

// ------------------------------------------------------------------------------------------
// Request handlers. Each one: ids -> path, one overlay call, one reply.

uint64_t LLMount::negotiate(uint64_t offered) {
  // What every fuse_ll mount asks for when offered: reads in parallel, READDIRPLUS (the kernel
  // picks it per listing: READDIRPLUS_AUTO), lookups in one directory in parallel, writes of up
  // to max_write at once, cached symlink targets, and the kernel dropping a file's cached pages
  // when it sees its mtime or size change (edits in A). Not HANDLE_KILLPRIV(_V2): the kernel
  // clears set-user-ID and set-group-ID bits on write, truncate and chown itself, with a
  // SETATTR of the mode, as the conformance suite checks.
  uint64_t want = offered & (abi::kAsyncRead | abi::kBigWrites | abi::kHasIoctlDir |
                             abi::kAutoInvalData | abi::kDoReaddirplus | abi::kReaddirplusAuto |
                             abi::kAsyncDio | abi::kParallelDirops | abi::kMaxPages |
                             abi::kCacheSymlinks);
  if (!opts_.openRoundTrips) {
    // No open round trips: OPEN and OPENDIR are answered ENOSYS (see opOpen), which the kernel
    // takes as "open without asking from now on". O_TRUNC then reaches us as a SETATTR, so
    // ATOMIC_O_TRUNC (truncation folded into OPEN) must stay off.
    noOpen_ = (offered & abi::kNoOpenSupport) != 0;
    noOpendir_ = (offered & abi::kNoOpendirSupport) != 0;
    want |= offered & (abi::kNoOpenSupport | abi::kNoOpendirSupport);
  } else if (opts_.passthrough) {
    // Passthrough is decided per OPEN, so files keep their round trips; directories need none.
    noOpendir_ = (offered & abi::kNoOpendirSupport) != 0;
    want |= offered & abi::kNoOpendirSupport;
  }
  // Passthrough: only if the kernel offers it and this process may register backing files
  // (CAP_SYS_ADMIN); otherwise opens are served as in the "open" mode.
  if (opts_.passthrough && (offered & abi::kPassthrough) && haveSysAdmin()) {
    want |= abi::kPassthrough;
    passthrough_ = true;
  }
  // O_TRUNC arrives with open(), so truncation needs no separate setattr round trip.
  if (!noOpen_ && (offered & abi::kAtomicOTrunc)) want |= abi::kAtomicOTrunc;
  readdirplus_ = (want & abi::kDoReaddirplus) != 0;
  // FUSE over io_uring: asked for only once the rings exist (prepareUring), because the kernel
  // holds every new request after this reply until the rings register (startUring) or one fails.
  if (prepareUring(offered)) want |= abi::kOverIoUring;
  // Not asked for: locks (they stay in the kernel, local to this machine, as DESIGN.md asks);
  // writeback caching (the kernel would hold writes that API reads must see at once, and trust
  // its own mtime and size over edits in A).
  return want;
}

void LLMount::opLookup(Req* req, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  m->count(Op::Lookup);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  Attr a;
  int e = m->ov_->getattr(layer.get(), path, &a);
  if (e == ENOENT && m->opts_.negativeTimeout > 0) {
    abi::EntryOut ep;
    wire::fillEntry(&ep, 0, a, m->opts_.negativeTimeout, 0);
    return (void)wire::replyEntry(req, ep);
  }
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opForget(Req* req, uint64_t ino, uint64_t n) {
  LLMount* m = self(req);
  m->count(Op::Forget);
  m->forget(ino, n);
}

void LLMount::opForgetMulti(Req* req, size_t count, const abi::ForgetOne* forgets) {
  LLMount* m = self(req);
  m->count(Op::Forget);
  for (size_t i = 0; i < count; ++i) {
    abi::ForgetOne f;
    std::memcpy(&f, forgets + i, sizeof f);  // the request buffer need not be aligned for it
    m->forget(f.nodeid, f.nlookup);
  }
}

void LLMount::opGetattr(Req* req, uint64_t ino, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Getattr);
  Attr a;
  Handle* h = fi && fi->fh ? reinterpret_cast<Handle*>(fi->fh) : nullptr;
  if (h && m->ov_->fgetattr(h, &a) == 0) {
    if (m->unlinked(ino)) a.nlink = 0;  // fstat of an open file whose last name is gone
    return (void)wire::replyAttr(req, a, m->opts_.attrTimeout);
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
    if (!m->anyHandle(ino, &copy)) return (void)wire::replyErr(req, e);
    int fe = m->ov_->fgetattr(&copy, &a);
    if (copy.lower >= 0) ::close(static_cast<int>(copy.lower));
    if (fe) return (void)wire::replyErr(req, e);
    if (m->unlinked(ino)) a.nlink = 0;
  }
  wire::replyAttr(req, a, m->opts_.attrTimeout);
}

void LLMount::opSetattr(Req* req, uint64_t ino, const abi::SetattrIn& in, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Setattr);
  IoHandle io(m, fi ? fi->fh : 0);
  std::string path;
  int pe = m->pathOf(ino, &path);
  if (pe && !io.h) io.fromNode(ino, true);  // unlinked: its pinned handle, if any
  Handle* h = io.h;
  // A file open for writing acts on its own object, also one whose content is still A's (the
  // core copies it at this first change when it is a truncate) and also once its name is gone.
  const bool viaHandle = h && (h->inode || h->writable);
  if (pe && !viaHandle) return (void)wire::replyErr(req, pe);
  std::shared_ptr<Layer> layer;
  if (viaHandle) {
    layer = h->layer.lock();  // ftruncate/fchmod: the layer the file was opened in
    if (!layer) return (void)wire::replyErr(req, ESTALE);
  } else {
    layer = m->layerFor(ino, path);
    if (!layer) return (void)wire::replyErr(req, ESTALE);
  }
  uint32_t mask = 0;
  Attr v;
  const uint32_t set = in.valid;
  if (set & abi::kSetMode) mask |= kSetMode, v.perm = in.mode & 07777;
  if (set & abi::kSetUid) mask |= kSetUid, v.uid = in.uid;
  if (set & abi::kSetGid) mask |= kSetGid, v.gid = in.gid;
  if (set & abi::kSetSize) mask |= kSetSize, v.size = in.size;
  if (set & abi::kSetAtimeNow) mask |= kSetAtimeNow;
  else if (set & abi::kSetAtime)
    mask |= kSetAtime, v.atime = {static_cast<int64_t>(in.atime), in.atimensec};
  if (set & abi::kSetMtimeNow) mask |= kSetMtimeNow;
  else if (set & abi::kSetMtime)
    mask |= kSetMtime, v.mtime = {static_cast<int64_t>(in.mtime), in.mtimensec};
  if (set & abi::kSetCtime)
    mask |= kSetCtime, v.ctime = {static_cast<int64_t>(in.ctime), in.ctimensec};
  Attr out;
  int e = m->ov_->setattr(layer.get(), path, h, mask, v, &out);
  if (e) return (void)wire::replyErr(req, e);
  wire::replyAttr(req, out, m->opts_.attrTimeout);
}

void LLMount::opReadlink(Req* req, uint64_t ino) {
  LLMount* m = self(req);
  std::string path, target;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  int e = m->ov_->readlink(layer.get(), path, &target);
  if (e) return (void)wire::replyErr(req, e);
  wire::replyBuf(req, target.data(), target.size());
}

void LLMount::opMknod(Req* req, uint64_t parent, const char* name, mode_t mode,
                      dev_t rdev) {
  LLMount* m = self(req);
  m->count(Op::Mknod);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Attr a;
  int e = m->ov_->mknod(layer.get(), path, typeOf(mode), mode & 07777, rdev,
                        Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opMkdir(Req* req, uint64_t parent, const char* name, mode_t mode) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Attr a;
  int e = m->ov_->mkdir(layer.get(), path, mode & 07777, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opUnlink(Req* req, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  m->pinBeforeRemove(parent, name);
  int e = m->ov_->unlink(layer.get(), path);
  if (!e) m->unlinkName(parent, name);
  wire::replyErr(req, e);
}

void LLMount::opRmdir(Req* req, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  int e = m->ov_->rmdir(layer.get(), path);
  if (!e) m->unlinkName(parent, name);
  wire::replyErr(req, e);
}

void LLMount::opSymlink(Req* req, const char* target, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Attr a;
  int e = m->ov_->symlink(layer.get(), target, path, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opRename(Req* req, uint64_t parent, const char* name, uint64_t newparent,
                       const char* newname, unsigned int flags) {
  LLMount* m = self(req);
  std::string from, to;
  std::shared_ptr<Layer> layer, toLayer, active = m->ov_->current(m->view_);
  if (int pe = m->childAt(parent, name, &from, &layer, active)) return (void)wire::replyErr(req, pe);
  if (int pe = m->childAt(newparent, newname, &to, &toLayer, active))
    return (void)wire::replyErr(req, pe);
  // The two directories were looked up in different layers (a switch in between): no object
  // can move between layers, as between two file systems.
  if (layer != toLayer) return (void)wire::replyErr(req, EXDEV);
  uint32_t f = 0;
  if (flags & RENAME_NOREPLACE) f |= kRenameNoReplace;
  if (flags & RENAME_EXCHANGE) f |= kRenameExchange;
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return (void)wire::replyErr(req, EINVAL);
  if (!(f & (kRenameNoReplace | kRenameExchange))) m->pinBeforeRemove(newparent, newname);
  int e = m->ov_->rename(layer.get(), from, to, f);
  if (!e && from != to) m->moveName(parent, name, newparent, newname, f & kRenameExchange);
  wire::replyErr(req, e);
}

void LLMount::opLink(Req* req, uint64_t ino, uint64_t newparent, const char* newname) {
  LLMount* m = self(req);
  std::string from, to;
  std::shared_ptr<Layer> layer, toLayer, active = m->ov_->current(m->view_);
  if (int pe = m->nodeAt(ino, &from, &layer, active)) return (void)wire::replyErr(req, pe);
  if (int pe = m->childAt(newparent, newname, &to, &toLayer, active))
    return (void)wire::replyErr(req, pe);
  if (layer != toLayer) return (void)wire::replyErr(req, EXDEV);
  Attr a;
  int e = m->ov_->link(layer.get(), from, to, &a);
  if (e) return (void)wire::replyErr(req, e);
  // The new name joins the source's node (the kernel expects the inode it linked).
  if (a.layerObject && a.type != FileType::Directory) m->linkedInLayer(ino, a.ino);
  m->replyEntry(req, newparent, newname, a, layer);
}

void LLMount::opOpen(Req* req, uint64_t ino, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Open);
  // ENOSYS: the kernel now opens every file without asking (fuse_file_open, fs/fuse/file.c),
  // keeping cached pages across opens; reads and writes come by node (see nodeHandle).
  if (m->noOpen()) return (void)wire::replyErr(req, ENOSYS);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  Handle* h = nullptr;
  Attr a;
  int e = m->ov_->open(layer.get(), path, intentOf(fi->flags), &h, &a);
  if (e) return (void)wire::replyErr(req, e);
  fi->fh = reinterpret_cast<uint64_t>(h);
  // flush does nothing here, and a close() that waits for a FLUSH answer deadlocks a process
  // that exits while holding files open on its own mount: tell the kernel not to send it.
  fi->noflush = 1;
  // Passthrough: decided and recorded under ptMu_, together with the handle's tracking below,
  // so that two opens of one node cannot pick different modes.
  std::unique_lock<std::mutex> pt;
  uint32_t backingId = 0;
  if (m->passthrough_.load()) {
    pt = std::unique_lock<std::mutex>(m->ptMu_);
    if (int pe = m->passthroughOpen(ino, h, &backingId)) {
      pt.unlock();
      m->ov_->release(h);
      return (void)wire::replyErr(req, pe);
    }
  }
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
  if (pt.owns_lock()) pt.unlock();
  // The kernel refuses (EIO) a passthrough open that also asks to keep cached pages: the pages
  // are the backing file's.
  if (backingId) fi->keep_cache = false;
  const uint32_t flags = fi->openFlags() | (backingId ? abi::kOpenPassthrough : 0);
  if (wire::replyOpen(req, fi->fh, flags, backingId) == -ENOENT) {
    if (backingId) m->passthroughRelease(h);
    m->trackHandle(ino, h, false);
    m->ov_->release(h);
  }
}

int LLMount::passthroughOpen(uint64_t ino, Handle* h, uint32_t* backingId) {
  *backingId = 0;
  // Only content that is the folder's own file, opened read-only: the backing file is then
  // the descriptor of A's file the handle holds, and nothing the layer must see goes past us.
  // A write-open is never passthrough, also now that it copies nothing until its first write
  // (Overlay::open): the kernel would send that write to the backing file, A's own, or fail it
  // on a read-only descriptor, and either way we would never see it to copy the file up. So a
  // write-open is served through us like in "open" mode, and gets the same deferral.
  const bool eligible = !h->inode && h->lower >= 0 && !h->writable;
  uint32_t existing = 0;
  bool othersOpen = false;
  {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end()) return 0;
    FNode* n = it->second.get();
    existing = n->backingId;
    othersOpen = !n->handles.empty();
    if (existing && (!eligible || h->lowerIno != n->backingIno)) {
      // Open for writing (its first write copies up), the layer has its own content now, or the
      // folder's name leads to another file than the backing one (replaced in A): a new
      // object, which the kernel must not see through this inode (it would refuse the open:
      // one backing file per inode, no mixed modes). Its names go to a new node at the next
      // lookup; the readers keep this one and the file they opened. That includes the other
      // names of a hard-linked file, which lookups would otherwise join to this node by its
      // inode number (and the kernel's retry would get ESTALE again).
      for (auto& nm : n->names) {
        auto b = byName_.find(key(nm.parent, nm.name));
        if (b != byName_.end() && b->second == ino) byName_.erase(b);
      }
      auto bi = byIno_.find(n->ino);
      if (bi != byIno_.end() && bi->second == ino) byIno_.erase(bi);
      return ESTALE;
    }
  }
  if (existing) {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end() || it->second->backingId != existing) return 0;
    it->second->ptOpens++;
    ptHandles_[h] = ino;
    *backingId = existing;
    return 0;
  }
  // A node already open without passthrough stays so until those files close.
  if (!eligible || othersOpen) return 0;
  abi::BackingMap map{static_cast<int32_t>(h->lower), 0, 0};
  int id = ::ioctl(fd_, abi::kIocBackingOpen, &map);
  if (id <= 0) {
    const int e = errno;
    if (e == EPERM || e == EINVAL || e == ENOTTY || e == EOPNOTSUPP) {
      // Not allowed or not supported after all: the mount goes on as "open" does.
      if (passthrough_.exchange(false))
        std::fprintf(stderr, "shadowfs: FUSE passthrough refused (%s); serving reads through the daemon\n",
                     std::strerror(e));
    }
    return 0;  // any other failure (a backing file stacked too deep): this open only
  }
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) {
    uint32_t idv = static_cast<uint32_t>(id);
    ::ioctl(fd_, abi::kIocBackingClose, &idv);
    return 0;
  }
  it->second->backingId = static_cast<uint32_t>(id);
  it->second->backingIno = h->lowerIno;
  it->second->ptOpens = 1;
  ptHandles_[h] = ino;
  *backingId = static_cast<uint32_t>(id);
  return 0;
}

void LLMount::passthroughRelease(Handle* h) {
  std::lock_guard pl(ptMu_);
  auto p = ptHandles_.find(h);
  if (p == ptHandles_.end()) return;
  const uint64_t ino = p->second;
  ptHandles_.erase(p);
  uint32_t closeId = 0;
  {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end()) return;
    FNode* n = it->second.get();
    if (n->ptOpens > 0 && --n->ptOpens == 0) {
      closeId = n->backingId;
      n->backingId = 0;
    }
  }
  // The kernel holds its own reference to the backing file while files use it; the id is
  // ours to drop once the last of them is released.
  if (closeId) ::ioctl(fd_, abi::kIocBackingClose, &closeId);
}

void LLMount::opRead(Req* req, uint64_t ino, size_t size, off_t off,
                     FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Read);
  IoHandle io(m, fi->fh);
  if (!io.h) {
    if (int e = io.fromNode(ino, false)) return (void)wire::replyErr(req, e);
  }
  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  size_t got = 0;
  int e = m->ov_->read(io.h, buf.data(), size, static_cast<uint64_t>(off), &got);
  if (e) return (void)wire::replyErr(req, e);
  wire::replyBuf(req, buf.data(), got);
}

void LLMount::opWrite(Req* req, uint64_t ino, const char* buf, size_t size, off_t off,
                      FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Write);
  IoHandle io(m, fi->fh);
  if (!io.h) {
    if (int e = io.fromNode(ino, true)) return (void)wire::replyErr(req, e);
  }
  int e = m->ov_->write(io.h, buf, size, static_cast<uint64_t>(off));
  if (e) return (void)wire::replyErr(req, e);
  {
    // Our own write changed mtime; the next open must not take that for a change in A, but
    // we do not know the new mtime here, so the next open simply re-reads.
    std::lock_guard lock(m->tmu_);
    auto it = m->nodes_.find(ino);
    if (it != m->nodes_.end()) it->second->opened = false;
  }
  wire::replyWrite(req, static_cast<uint32_t>(size));
}

// FLUSH comes only without open round trips (opens set noflush): ENOSYS makes the kernel stop
// sending it (fc->no_flush), as there is nothing to flush.
void LLMount::opFlush(Req* req, uint64_t, FileInfo*) {
  LLMount* m = self(req);
  m->count(Op::Flush);
  wire::replyErr(req, m->noOpen() ? ENOSYS : 0);
}

void LLMount::opRelease(Req* req, uint64_t ino, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Release);
  Handle* h = reinterpret_cast<Handle*>(fi->fh);
  // The one file opened by the OPEN that was answered ENOSYS is released with no handle.
  if (!h) return (void)wire::replyErr(req, 0);
  // Only a passthrough mount has backing files to let go of; the others skip its lock.
  if (m->opts_.passthrough) m->passthroughRelease(h);
  m->trackHandle(ino, h, false);
  m->ov_->release(h);
  wire::replyErr(req, 0);
}

void LLMount::opFsync(Req* req, uint64_t, int, FileInfo*) {
  // The layer lives in memory: there is nothing slower to flush to.
  wire::replyErr(req, 0);
}

// Overlay::fallocate has the semantics; punching holes and the other modes are refused as file
// systems without them refuse them.
void LLMount::opFallocate(Req* req, uint64_t ino, int mode, off_t offset, off_t length,
                          FileInfo* fi) {
  LLMount* m = self(req);
  if (mode & ~FALLOC_FL_KEEP_SIZE) return (void)wire::replyErr(req, EOPNOTSUPP);
  IoHandle io(m, fi->fh);
  if (!io.h) {
    if (int e = io.fromNode(ino, true)) return (void)wire::replyErr(req, e);
  }
  std::shared_ptr<Layer> layer = io.h->layer.lock();
  int e = layer ? m->ov_->fallocate(layer.get(), io.h, (mode & FALLOC_FL_KEEP_SIZE) != 0,
                                    static_cast<uint64_t>(offset), static_cast<uint64_t>(length))
                : ESTALE;
  wire::replyErr(req, e);
}

void LLMount::opOpendir(Req* req, uint64_t ino, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Opendir);
  // ENOSYS: the kernel opens directories without asking from now on, and keeps their
  // listings (FOPEN_CACHE_DIR) until an invalidation of the directory drops them.
  if (m->noOpendir()) return (void)wire::replyErr(req, ENOSYS);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  auto d = std::make_unique<DirHandle>();
  // The listing itself is taken at the first read (see DirStream).
  Attr a;
  if (int e = m->ov_->getattr(layer.get(), path, &a)) return (void)wire::replyErr(req, e);
  if (a.type != FileType::Directory) return (void)wire::replyErr(req, ENOTDIR);
  fi->fh = reinterpret_cast<uint64_t>(d.get());
  // Let the kernel keep listings: every change it does not make itself (API writes, layer
  // switches, edits in A) invalidates the directory's inode, which drops the cached listing.
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  if (wire::replyOpen(req, fi->fh, fi->openFlags()) == 0) d.release();
}

void LLMount::opReaddir(Req* req, uint64_t ino, size_t size, off_t off,
                        FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Readdir);
  std::shared_ptr<DirStream> held;  // no-opendir: the node's listing
  if (!fi->fh) {
    if (int e = m->nodeListing(ino, static_cast<uint64_t>(off), &held))
      return (void)wire::replyErr(req, e);
  }
  DirStream& d = held ? *held : reinterpret_cast<DirHandle*>(fi->fh)->stream;
  if (!held && d.needsFill(static_cast<uint64_t>(off))) {
    std::string path;
    std::shared_ptr<Layer> layer;
    int e = m->nodeAt(ino, &path, &layer);
    if (e == 0) e = m->ov_->list(layer.get(), path, &d);
    if (e && !d.loaded) return (void)wire::replyErr(req, e);  // else: keep the listing it had
  }
  std::vector<char> buf(size);
  size_t pos = 0;
  for (size_t i = static_cast<size_t>(off); i < d.count(); ++i) {
    const char* name;
    uint64_t entIno;
    FileType type;
    d.at(i, &name, &entIno, &type);
    size_t len = wire::addDirent(buf.data() + pos, size - pos, name, i < 2 ? ino : entIno,
                                 modeOf(type), i + 1);
    if (len > size - pos) {
      held = nullptr;  // more to come: keep the node's listing for the next request
      break;
    }
    pos += len;
  }
  if (held) m->doneListing(ino, held);
  wire::replyBuf(req, buf.data(), pos);
}

// READDIRPLUS: the listing with each entry's attributes, so that one round trip fills the
// kernel's dentry and attribute caches (ls -l, git status and stat-heavy tools then send no
// LOOKUP per name). Each entry given with a node id counts as a lookup the kernel will FORGET,
// exactly as a LOOKUP reply does; "." and "..", and an entry that vanished since the listing
// was taken, go without one (node id 0: the kernel uses only the name and type).
void LLMount::opReaddirplus(Req* req, uint64_t ino, size_t size, off_t off,
                            FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Readdirplus);
  std::shared_ptr<DirStream> held;  // no-opendir: the node's listing
  if (!fi->fh) {
    if (int e = m->nodeListing(ino, static_cast<uint64_t>(off), &held))
      return (void)wire::replyErr(req, e);
  }
  DirStream& d = held ? *held : reinterpret_cast<DirHandle*>(fi->fh)->stream;
  std::string path;
  std::shared_ptr<Layer> layer;
  int ne = m->nodeAt(ino, &path, &layer);
  if (!held && d.needsFill(static_cast<uint64_t>(off))) {
    int e = ne ? ne : m->ov_->list(layer.get(), path, &d);
    if (e && !d.loaded) return (void)wire::replyErr(req, e);  // else: keep the listing it had
  }
  std::vector<char> buf(size);
  std::vector<uint64_t> taken;  // node ids handed to the kernel, one lookup each
  size_t pos = 0;
  for (size_t i = static_cast<size_t>(off); i < d.count(); ++i) {
    const char* name;
    uint64_t entIno;
    FileType type;
    d.at(i, &name, &entIno, &type);
    if (abi::direntPlusSize(std::strlen(name)) > size - pos) {
      held = nullptr;  // more to come: keep the node's listing for the next request
      break;
    }
    abi::EntryOut e;
    std::memset(&e, 0, sizeof e);
    Attr a;
    if (i >= 2 && ne == 0 && m->ov_->getattr(layer.get(), joinPath(path, name), &a) == 0) {
      m->fillEntry(&e, m->remember(ino, name, a.type, a.ino, a.layerObject && a.nlink > 1, layer), a);
      taken.push_back(e.nodeid);
    } else {
      e.attr.ino = i < 2 ? ino : entIno;
      e.attr.mode = modeOf(type);
    }
    pos += wire::addDirentPlus(buf.data() + pos, size - pos, name, e, i + 1);
  }
  if (held) m->doneListing(ino, held);
  if (wire::replyBuf(req, buf.data(), pos) == -ENOENT) {
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
  // Not a kind: how many of all requests (of any kind) came through io_uring ring entries.
  out.emplace_back("ring", uringActive_.load(std::memory_order_acquire) ? uring_->served() : 0);
  return out;
}

void LLMount::opReleasedir(Req* req, uint64_t, FileInfo* fi) {
  self(req)->count(Op::Releasedir);
  delete reinterpret_cast<DirHandle*>(fi->fh);
  wire::replyErr(req, 0);
}

void LLMount::opStatfs(Req* req, uint64_t) {
  FsStats s;
  int e = self(req)->ov_->statfs(&s);
  if (e) return (void)wire::replyErr(req, e);
  wire::replyStatfs(req, s);
}

void LLMount::opSetxattr(Req* req, uint64_t ino, const char* name, const char* value,
                         size_t size, int flags) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  wire::replyErr(req, m->ov_->setxattr(layer.get(), path, name, std::string(value, size), flags));
}

void LLMount::opGetxattr(Req* req, uint64_t ino, const char* name, size_t size) {
  LLMount* m = self(req);
  m->count(Op::Getxattr);
  std::string path, value;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  int e = m->ov_->getxattr(layer.get(), path, name, &value);
  if (e) return (void)wire::replyErr(req, e);
  m->replyXattr(req, value, size);
}

void LLMount::opListxattr(Req* req, uint64_t ino, size_t size) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  std::vector<std::string> names;
  int e = m->ov_->listxattr(layer.get(), path, &names);
  if (e) return (void)wire::replyErr(req, e);
  m->replyXattr(req, xattrList(names), size);
}

void LLMount::opRemovexattr(Req* req, uint64_t ino, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  wire::replyErr(req, m->ov_->removexattr(layer.get(), path, name));
}

void LLMount::opCreate(Req* req, uint64_t parent, const char* name, mode_t mode,
                       FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Create);
  // ENOSYS: the kernel makes the file with MKNOD and opens it without asking (it stops sending
  // CREATE), which spares the RELEASE a created file's handle would cost.
  if (m->noOpen()) return (void)wire::replyErr(req, ENOSYS);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Handle* h = nullptr;
  Attr a;
  int e = m->ov_->create(layer.get(), path, mode & 07777, intentOf(fi->flags),
                         Caller{ctx->uid, ctx->gid}, &h, &a);
  if (e) return (void)wire::replyErr(req, e);
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->noflush = 1;
  abi::EntryOut ep;
  m->fillEntry(&ep, m->remember(parent, name, a.type, a.ino, a.layerObject && a.nlink > 1, layer), a);
  m->trackHandle(ep.nodeid, h, true);
  if (wire::replyCreate(req, ep, fi->fh, fi->openFlags()) == -ENOENT) {
    m->trackHandle(ep.nodeid, h, false);
    m->forget(ep.nodeid, 1);
    m->ov_->release(h);
  }
}




}  // namespace ll

int ll::LLMount::start(int* err, std::string* message) {
  struct fuse_args args = mountArgs(lowerPath_, opts_.debug, opts_.allowOther);
  // libfuse mounts (through fusermount3 when not root) and unmounts; its request loop never
  // runs, so its handler table stays empty: the requests are read in dev_loop.cc.
  static const struct fuse_lowlevel_ops kNoOps = {};
  se_ = fuse_session_new(&args, &kNoOps, sizeof kNoOps, this);
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
  fd_ = fuse_session_fd(se_);
  mounted_ = true;
  startWatcher();
  startLoop([this] { serve(); });
  // The kernel sends INIT as soon as the mount exists; what it agreed to (transport()) is known
  // once the loop has answered it. Not waiting forever: a kernel that never sends it leaves a
  // mount that fails on first use, which is reported there.
  std::unique_lock lock(initMu_);
  initCv_.wait_for(lock, std::chrono::seconds(10), [this] { return initDone_; });
  return 0;
}

void ll::LLMount::closeSession() {
  if (!se_) return;
  fuse_session_unmount(se_);
  fuse_session_destroy(se_);
  se_ = nullptr;
  fd_ = -1;
}

int ll::LLMount::unmount(bool lazy) {
  if (!mounted_.load()) return 0;
  askUnmount(true);
  if (int e = unmountFuse(mountPoint_, lazy)) {
    askUnmount(false);
    return e;
  }
  mounted_ = false;
  // After a plain unmount the loop's next read fails with ENODEV and it ends (unless a copy of
  // the mount lives on in another mount namespace: see joinLoopSoon). After a lazy one it ends
  // when the last program using the detached mount lets go (see dispose()).
  if (!lazy && joinLoopSoon()) stopWatcher();
  return 0;
}

void ll::LLMount::endedOnItsOwn() {
  mounted_ = false;
  const std::string reason = "the FUSE mount at " + mountPoint_ +
                             " ended without shadowfs unmounting it (it was unmounted from "
                             "outside, or its kernel connection was aborted)";
  if (!reportGone(reason)) std::fprintf(stderr, "shadowfs: %s\n", reason.c_str());
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
