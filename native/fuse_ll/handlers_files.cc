// fuse_ll's handlers for open files and directories: OPEN and CREATE (and the passthrough
// backing files registered for them), READ, WRITE, FLUSH, RELEASE, FSYNC, FALLOCATE, OPENDIR,
// READDIR(PLUS), RELEASEDIR. Each one: ids -> path and layer (or the open handle), one overlay
// call, one reply (through wire.h). Requests on names and attributes are in handlers_names.cc,
// the session in fuse_ll.cc; ll_mount.h has the mount object and its thread rules.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/ioctl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "../core/path.h"
#include "../fuse_common/fuse_attr.h"
#include "ll_mount.h"
#include "splice_reply.h"

namespace shadowfs {
namespace ll {

void LLMount::opOpen(Req* req, uint64_t ino, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Open);
  // ENOSYS: the kernel now opens every file without asking (fuse_file_open, fs/fuse/file.c),
  // keeping cached pages across opens; reads and writes come by node (see nodeHandle).
  if (m->noOpen()) return (void)wire::replyErr(req, ENOSYS);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  OpenIntent intent = intentOf(fi->flags);
  // Under passthrough, a write-open's O_TRUNC waits until the open is known to go on: it must
  // not empty the content and then fail (ESTALE, below) when the caller cannot retry (a reopen
  // through /proc/<pid>/fd, which cannot look the name up again).
  bool truncLater = false;
  if (m->passthrough_.load() && (fi->flags & O_ACCMODE) != O_RDONLY) {
    // A write-open of a node read through the folder's file gets ESTALE (see passthroughOpen)
    // before the open does anything.
    std::lock_guard pl(m->ptMu_);
    bool layerBacked = false;
    if (int se = m->staleIfBacked(ino, &layerBacked)) return (void)wire::replyErr(req, se);
    if (layerBacked) {
      truncLater = intent.truncate;
      intent.truncate = false;
    }
  }
  Handle* h = nullptr;
  Attr a;
  int e = m->ov_->open(layer.get(), path, intent, &h, &a);
  if (!e && fi->killSuidgid && !truncLater) {
    // An O_TRUNC open by a caller without CAP_FSETID (HANDLE_KILLPRIV_V2).
    e = m->killSuidgid(req, layer.get(), path, h);
    if (e == 0) e = m->ov_->fgetattr(h, &a);
    if (e) m->ov_->release(h);
  }
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
    if (int pe = m->passthroughOpen(ino, h, &backingId, req->uid != 0)) {
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
  if (truncLater) {
    // The open goes on: now its O_TRUNC (and, for a caller without CAP_FSETID, the set-ID
    // bits it clears), on the object the handle opened.
    Attr v, out;
    v.size = 0;
    e = m->ov_->setattr(layer.get(), path, h, kSetSize, v, &out);
    if (!e && fi->killSuidgid) e = m->killSuidgid(req, layer.get(), path, h);
    if (!e) e = m->ov_->fgetattr(h, &a);
    if (e) {
      if (backingId) m->passthroughRelease(h);
      m->trackHandle(ino, h, false);
      m->ov_->release(h);
      return (void)wire::replyErr(req, e);
    }
  }
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

void LLMount::unnameLocked(FNode* n, uint64_t ino) {
  for (auto& nm : n->names) {
    auto b = byName_.find(key(nm.parent, nm.name));
    if (b != byName_.end() && b->second == ino) byName_.erase(b);
  }
  auto bi = byIno_.find(n->ino);
  if (bi != byIno_.end() && bi->second == ino) byIno_.erase(bi);
}

int LLMount::staleIfBacked(uint64_t ino, bool* layerBacked) {
  *layerBacked = false;
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end() || !it->second->backingId) return 0;
  *layerBacked = it->second->backingLayer;
  // A layer content's file: the kernel may write it too (passthroughOpen), so the write-open
  // goes on and shares it (its O_TRUNC waits until it does: see opOpen).
  if (it->second->backingLayer) return 0;
  unnameLocked(it->second.get(), ino);
  return ESTALE;
}

int LLMount::passthroughOpen(uint64_t ino, Handle* h, uint32_t* backingId, bool killPriv) {
  *backingId = 0;
  // Content that is the folder's own file, opened read-only: the backing file is then the
  // descriptor of A's file the handle holds, and nothing the layer must see goes past us.
  // A write-open of the folder's file is never passthrough, also now that it copies nothing
  // until its first write (Overlay::open): the kernel would send that write to the backing
  // file, A's own, or fail it on a read-only descriptor, and either way we would never see it
  // to copy the file up. So it is served through us like in "open" mode, and gets the same
  // deferral. A write-open of a content the layer holds is passthrough (below).
  // Content the layer holds in a spill file (past the spill threshold, or moved out by the
  // memory budget), or in memory (moved into a memory file for this): the backing file is
  // that file itself, for read-only and write-opens alike, and it stays the content's, in
  // place, until the last such open is released (Overlay::spilledContentDescriptor). Writes
  // through other opens go to that same file (Overlay::contentWrite), so every open sees them
  // as it would through us.
  struct Fd {
    int fd = -1;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } layerFd;
  // The backing file by device and inode number: the kernel holds it while its backing id is
  // registered, so they name it for as long as a node can refer to it. Both: a memory file
  // and a spill file on a tmpfs are numbered by two counters that may meet.
  uint64_t backingIno = 0, backingDev = 0;
  bool layerFile = false;
  struct stat st;
  if (h->lower < 0) {
    // A write-open of a content the layer holds: the kernel writes its file itself, and the
    // core takes the size and times from that file (Overlay::kernelWriteDescriptor).
    layerFd.fd = h->writable ? ov_->kernelWriteDescriptor(h, killPriv)
                             : ov_->spilledContentDescriptor(h);
    if (layerFd.fd >= 0 && ::fstat(layerFd.fd, &st) == 0) {
      backingIno = static_cast<uint64_t>(st.st_ino);
      backingDev = static_cast<uint64_t>(st.st_dev);
      layerFile = true;
    }
  } else if (::fstat(h->lower, &st) == 0) {
    backingIno = static_cast<uint64_t>(st.st_ino);
    backingDev = static_cast<uint64_t>(st.st_dev);
  } else {
    backingIno = h->lowerIno;
  }
  const bool eligible = layerFile || (!h->inode && h->lower >= 0 && !h->writable);
  uint32_t existing = 0;
  bool othersOpen = false;
  {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end()) return 0;
    FNode* n = it->second.get();
    existing = n->backingId;
    othersOpen = !n->handles.empty();
    if (existing && (!eligible || backingIno != n->backingIno || backingDev != n->backingDev ||
                     layerFile != n->backingLayer)) {
      // Open for writing (its first write copies up), the layer has its own content now (or
      // keeps it in another file), or the folder's name leads to another file than the backing
      // one (replaced in A): a new object, which the kernel must not see through this inode (it
      // would refuse the open: one backing file per inode, no mixed modes). Its names go to a new node at the next
      // lookup; the readers keep this one and the file they opened. That includes the other
      // names of a hard-linked file, which lookups would otherwise join to this node by its
      // inode number (and the kernel's retry would get ESTALE again).
      unnameLocked(n, ino);
      return ESTALE;
    }
  }
  if (existing) {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end() || it->second->backingId != existing) return 0;
    it->second->ptOpens++;
    if (h->writable) it->second->ptWriters++;
    ptHandles_[h] = ino;
    *backingId = existing;
    return 0;
  }
  // A node already open without passthrough stays so until those files close.
  if (!eligible || othersOpen) return 0;
  abi::BackingMap map{static_cast<int32_t>(layerFile ? layerFd.fd : h->lower), 0, 0};
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
  it->second->backingIno = backingIno;
  it->second->backingDev = backingDev;
  it->second->backingLayer = layerFile;
  it->second->ptOpens = 1;
  it->second->ptWriters = h->writable ? 1 : 0;
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
    if (h->writable && n->ptWriters > 0) --n->ptWriters;
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
    if (int e = io.fromNode(ino, false, off > 0)) return (void)wire::replyErr(req, e);
  }
  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  size_t got = 0;
  // A large read from a descriptor is spliced into its reply, sent from inside readVia
  // (splice_reply.h); the rest, and replies through io_uring, are copied through buf.
  SpliceReply splice(req, buf.data(), size, static_cast<uint64_t>(off));
  int e = splice.usable()
              ? m->ov_->readVia(io.h, &splice, buf.data(), size, static_cast<uint64_t>(off), &got)
              : m->ov_->read(io.h, buf.data(), size, static_cast<uint64_t>(off), &got);
  if (splice.spliced()) m->splicedReads_.fetch_add(1, std::memory_order_relaxed);
  if (splice.answered()) return;
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
  if (fi->killSuidgid) {
    // The writer lacks CAP_FSETID (HANDLE_KILLPRIV_V2). After the write, which has bound the
    // handle to its own object (a copy-up if it was the folder's file), so the mode change
    // goes to that object whatever its names are now.
    std::shared_ptr<Layer> layer = io.h->layer.lock();
    e = layer ? m->killSuidgid(req, layer.get(), std::string(), io.h) : ESTALE;
    if (e) return (void)wire::replyErr(req, e);
  }
  {
    // Our own write changed mtime; the next open must not take that for a change in A, but
    // we do not know the new mtime here, so the next open simply re-reads.
    std::lock_guard lock(m->tmu_);
    auto it = m->nodes_.find(ino);
    if (it != m->nodes_.end()) it->second->opened = false;
  }
  io.finish();
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
    if (int e = m->nodeListing(ino, static_cast<uint64_t>(off), &held, false))
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
// LOOKUP per name). A fresh listing hands the folder's subdirectories to the read-ahead
// (Overlay::list): a walk asks for them next. Each entry given with a node id counts as a
// lookup the kernel will FORGET, exactly as a LOOKUP reply does; "." and "..", and an entry that vanished since the listing
// was taken, go without one (node id 0: the kernel uses only the name and type).
void LLMount::opReaddirplus(Req* req, uint64_t ino, size_t size, off_t off,
                            FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Readdirplus);
  std::shared_ptr<DirStream> held;  // no-opendir: the node's listing
  if (!fi->fh) {
    if (int e = m->nodeListing(ino, static_cast<uint64_t>(off), &held, true))
      return (void)wire::replyErr(req, e);
  }
  DirStream& d = held ? *held : reinterpret_cast<DirHandle*>(fi->fh)->stream;
  std::string path;
  std::shared_ptr<Layer> layer;
  int ne = m->nodeAt(ino, &path, &layer);
  if (!held && d.needsFill(static_cast<uint64_t>(off))) {
    int e = ne ? ne : m->ov_->list(layer.get(), path, &d, true);
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
      m->fillEntry(&e, ino, m->remember(ino, name, a.type, a.ino, a.layerObject && a.nlink > 1, layer), a);
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

void LLMount::opReleasedir(Req* req, uint64_t, FileInfo* fi) {
  self(req)->count(Op::Releasedir);
  delete reinterpret_cast<DirHandle*>(fi->fh);
  wire::replyErr(req, 0);
}

void LLMount::opCreate(Req* req, uint64_t parent, const char* name, mode_t mode,
                       FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Create);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Handle* h = nullptr;
  Attr a;
  int e = m->ov_->create(layer.get(), path, mode & 07777, intentOf(fi->flags),
                         Caller{ctx->uid, ctx->gid}, &h, &a);
  if (!e && fi->killSuidgid) {
    // O_TRUNC on a file that was there after all, by a caller without CAP_FSETID.
    e = m->killSuidgid(req, layer.get(), path, h);
    if (e == 0) e = m->ov_->fgetattr(h, &a);
    if (e) m->ov_->release(h);
  }
  if (e) return (void)wire::replyErr(req, e);
  abi::EntryOut ep;
  m->fillEntry(&ep, parent, m->remember(parent, name, a.type, a.ino, a.layerObject && a.nlink > 1, layer), a);
  fi->noflush = 1;
  // A file created write-only is written past the page cache (FOPEN_DIRECT_IO): the kernel
  // then asks no GETXATTR of security.capability before its first write (only its buffered
  // writes call file_remove_privs; a direct WRITE carries FUSE_WRITE_KILL_SUIDGID instead, which
  // opWrite honours), one round trip of the five a new file cost. Cached readers of the file
  // still see every write: with DIRECT_IO_ALLOW_MMAP the kernel drops the pages of the range a
  // direct write covers. Its pages are read from us at its first read instead of kept from the
  // write. Not for O_RDWR: a writer that maps its own file (linkers do) needs the page cache.
  fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
  if (m->noOpen()) {
    // No open round trips: one CREATE makes, looks up and opens the file, and the kernel holds
    // no handle of ours (fh 0), so I/O comes by node as for files it opened without asking,
    // and it sends no RELEASE for it once it knows opens need no round trip (before that, a
    // RELEASE with fh 0, answered as such). MKNOD plus an open without asking cost the same
    // one round trip, but CREATE is atomic: O_EXCL is decided where the name is made.
    m->ov_->release(h);
    if (wire::replyCreate(req, ep, 0, fi->openFlags()) == -ENOENT) m->forget(ep.nodeid, 1);
    return;
  }
  fi->fh = reinterpret_cast<uint64_t>(h);
  // Passthrough: a new file (or one the layer holds) is written by the kernel into its disk
  // file. ESTALE (the node is already read through another file) leaves it to us.
  uint32_t backingId = 0;
  if (m->passthrough_.load()) {
    std::unique_lock pl(m->ptMu_);
    if (int pe = m->passthroughOpen(ep.nodeid, h, &backingId, req->uid != 0)) {
      // An existing file whose node is read through another file (a new one has no backing):
      // the kernel would refuse an open without passthrough beside it, so ESTALE, which makes
      // it look the name up again (its names left the node) and retry.
      pl.unlock();
      m->ov_->release(h);
      m->forget(ep.nodeid, 1);
      return (void)wire::replyErr(req, pe);
    }
  }
  if (backingId) fi->keep_cache = false, fi->direct_io = false;
  m->trackHandle(ep.nodeid, h, true);
  const uint32_t flags = fi->openFlags() | (backingId ? abi::kOpenPassthrough : 0);
  if (wire::replyCreate(req, ep, fi->fh, flags, backingId) == -ENOENT) {
    if (backingId) m->passthroughRelease(h);
    m->trackHandle(ep.nodeid, h, false);
    m->forget(ep.nodeid, 1);
    m->ov_->release(h);
  }
}

}  // namespace ll
}  // namespace shadowfs
