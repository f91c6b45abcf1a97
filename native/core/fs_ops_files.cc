// The file-system operations on open files (see fs_ops.h): open and create, the handles (the
// deferred copy-up of a write-open, bindPending), read, write, fallocate, release.
#include <cerrno>

#include "fs_ops.h"
#include "path.h"

namespace shadowfs {

// The part of open/create after the tree work, with no lock held: truncates (O_TRUNC, which
// reads nothing from A) and makes the handle. A write-open without O_TRUNC copies nothing: the
// first write or truncate through the handle does (write(), setattr()); until then a file whose
// content is still A's is read through A's file, as by a read-only handle.
int Overlay::openOnNode(Layer& L, const Ref<Inode>& in, const OpenIntent& intent,
                        Handle** out, Attr* attr) {
  auto h = std::make_unique<Handle>();
  h->inode = sharedOf(in.get());
  h->layer = L.weak_from_this();
  h->writable = intent.write;
  if (intent.truncate) {
    WriteLock c(in->cmu(), LockRank::Content);
    int e = copyUp(in.get(), false);  // records the base; reads nothing
    if (e) return e;
    bool nonEmpty;
    {
      MetaLock m(in->mmu(), LockRank::Meta);
      nonEmpty = in->size != 0;
    }
    if (nonEmpty) {
      e = contentTruncate(in.get(), 0);
      if (e) return e;
      Timespec t = nowTime();
      MetaLock m(in->mmu(), LockRank::Meta);
      in->setMtime(t);
      in->setCtime(t);
    }
  } else {
    std::string lowerPath;
    bool inLower;
    {
      MetaLock m(in->mmu(), LockRank::Meta);
      inLower = in->lowerPath(&lowerPath);
    }
    if (inLower) {
      int e = lower_->open(lowerPath, &h->lower);
      if (e) return e;
    }
  }
  inodeAttr(in.get(), attr);
  *out = h.release();
  return 0;
}

int Overlay::writableCopy(Handle* ro, Handle** out) {
  std::shared_ptr<Layer> layer = ro->layer.lock();
  if (!layer) return ENOENT;  // the layer was dropped (ESTALE is not portable: MinGW lacks it)
  if (!layer->writable) return EROFS;
  Ref<Inode> in;
  if (ro->inode) {
    in = Ref<Inode>(ro->inode.get());
  } else if (Inode* b = ro->bound.load(std::memory_order_acquire)) {
    in = Ref<Inode>(b);
  } else {
    if (ro->lower < 0) return EBADF;
    std::string dir, name;
    splitLast(ro->lowerRel, &dir, &name);
    if (int e = copyOfOpenFile(ro->lower, name, true, &in)) return e;
  }
  OpenIntent w;
  w.write = true;
  Attr attr;
  return openOnNode(*layer, in, w, out, &attr);
}

int Overlay::openLower(Layer& L, const std::string& path, const Res& r, bool write,
                       Handle** out, Attr* attr) {
  auto h = std::make_unique<Handle>();
  if (int e = lower_->open(r.low, &h->lower)) return e;
  h->lowerIno = r.lowerAttr.ino;
  h->lowerRel = r.low;
  h->layer = L.weak_from_this();
  if (write) {
    h->writable = true;
    h->pendingPath = path;
  }
  {
    // A later copy-up of this file in the layer is recorded for this handle (noteCopy).
    MetaLock rm(L.rmu, LockRank::Meta);
    L.readers[r.low]++;
  }
  *attr = r.lowerAttr;
  *out = h.release();
  return 0;
}

// The public operations resolve their layer, do the work (the *In functions below), and record
// what succeeded in the layer's audit trail (audit.h).
int Overlay::open(Layer* view, const std::string& asked, const OpenIntent& intent, Handle** out,
                  Attr* attr) {
  SFS_AT(view);
  const int e = openIn(L, asked, intent, out, attr);
  if (e == 0) auditOpen(L, *out, asked, intent, false);
  return e;
}

int Overlay::create(Layer* view, const std::string& asked, uint32_t perm, const OpenIntent& intent,
                    const Caller& who, Handle** out, Attr* attr) {
  SFS_AT(view);
  const int e = createIn(L, asked, perm, intent, who, out, attr);
  if (e == 0) auditOpen(L, *out, asked, intent, true);
  return e;
}

int Overlay::openIn(Layer& L, const std::string& asked, const OpenIntent& intent, Handle** out,
                  Attr* attr) {
  if ((intent.write || intent.truncate) && !L.writable) return EROFS;
  if (intent.write || intent.truncate) {
    if (int e = writeRefused(asked)) return e;
    if (guardedBeside(L, asked)) return EPERM;  // write_guard.h; a bare repository's hooks or config
  }
  Ref<Inode> in;
  std::string cbuf;
  if (!intent.truncate) {
    ReadLock lock(L.mu, LockRank::Layer);
    const std::string& path = canon(L, asked, &cbuf);
    Res r;
    int e = resolve(L, path, &r);
    if (e) return e;
    if (r.node) {
      if (r.node->dir()) return EISDIR;
      if (!intent.write) in = r.node->inodeRef();
    } else {
      if (r.lowerAttr.type == FileType::Directory) return EISDIR;
      // A file of the folder, for reading, or for writing later if ever (a deferred
      // write-open, see Handle): the layer is not touched now. Not for a name that could be a
      // repository's hooks, config or alternates: a write refused at its first write (a
      // repository came back meanwhile, bindPending) could still have changed the kernel's
      // pages through a shared mapping, which the mount would then show; taken now, the
      // layer holds it, and a revert that would make a repository beside it is refused.
      const bool control = intent.write && guard_ && guard_->git() &&
                           WriteGuard::mayWriteRepository(path, ignoreCase_);
      if (!intent.write || (r.lowerAttr.type == FileType::Regular && !control))
        return openLower(L, path, r, intent.write, out, attr);
    }
  }
  if (!in) {
    WriteLock lock(L.mu, LockRank::Layer);
    const std::string& path = canon(L, asked, &cbuf);
    Res r;
    Node* n;
    int e = materializeNode(L, path, &n, &r);
    if (e) return e;
    if (n->dir()) return EISDIR;
    in = n->inodeRef();
    noteCopy(L, in.get());
  }
  return openOnNode(L, in, intent, out, attr);
}

int Overlay::createIn(Layer& L, const std::string& asked, uint32_t perm, const OpenIntent& intent,
                    const Caller& who, Handle** out, Attr* attr) {
  if (!L.writable) return EROFS;
  // Also for an existing file opened read-only with O_CREAT: refused like making it would be.
  if (int e = writeRefused(asked)) return e;
  if (guardedBeside(L, asked)) return EPERM;
  Ref<Inode> in;
  {
    WriteLock lock(L.mu, LockRank::Layer);
    std::string cbuf, respellAs;
    const std::string& path = canon(L, asked, &cbuf, &respellAs);
    Res r;
    int e = resolve(L, path, &r);
    if (e == 0) {
      if (intent.exclusive) return EEXIST;
      // An existing file of the folder opened as open() would (O_CREAT without O_EXCL).
      if (!r.node && !intent.truncate && r.lowerAttr.type == FileType::Regular)
        return openLower(L, path, r, intent.write, out, attr);
      Node* n;
      e = materializeNode(L, path, &n, &r);
      if (e) return e;
      if (n->dir()) return EISDIR;
      in = n->inodeRef();
      if (intent.write || intent.truncate) noteCopy(L, in.get());
    } else if (e == ENOENT) {
      Node* n;
      std::string pdir, pname;
      splitLast(path, &pdir, &pname);
      e = placeNew(L, path, newInode(FileType::Regular, perm, who, pname), &n, r.lowerMissing);
      if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
      if (e) return e;
      in = n->inodeRef();
    } else {
      return e;
    }
  }
  return openOnNode(L, in, intent, out, attr);
}

// Only a file some read-only handle has open in the folder needs recording (copiedOf); the
// caller holds L's lock exclusively, so no such handle opens meanwhile.
void Overlay::noteCopy(Layer& L, Inode* in) {
  if (in->type != FileType::Regular || in->ino >= kFirstLayerIno) return;
  std::string lowerPath;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (!in->lowerPath(&lowerPath)) return;
  }
  recordCopy(L, lowerPath, in->ino, in);
}

void Overlay::recordCopy(Layer& L, const std::string& lowerPath, uint64_t ino, Inode* in) {
  {
    MetaLock rm(L.rmu, LockRank::Meta);
    if (!L.readers.count(lowerPath)) return;
  }
  L.copied[lowerPath] = Layer::CopiedFrom{ino, Ref<Inode>(in)};
}

bool Overlay::writable(Layer* view) {
  SFS_AT(view);
  return L.writable;
}

int Overlay::changeTarget(Handle* h, bool keepContent, Ref<Inode>* out) {
  *out = Ref<Inode>();
  if (h->inode) {
    *out = Ref<Inode>(h->inode.get());
    return 0;
  }
  if (Inode* b = h->bound.load(std::memory_order_acquire)) {
    *out = Ref<Inode>(b);
    return 0;
  }
  if (!h->writable || h->pendingPath.empty()) return 0;
  return bindPending(h, keepContent, out);
}

// The first change through a deferred write-open (see Handle). The handle opened the folder's
// file F (lowerRel, lowerIno) at pendingPath; its change must land on F's object in the layer,
// which is, in this order:
//   1. the object some other change already made of F in this layer (recorded in L.copied by
//      noteCopy while this handle was open: another handle's first write, a truncate by name, a
//      rename or link that carried F elsewhere, even out of every name);
//   2. a layer node at pendingPath that still stands for F with its content in A (its
//      metadata was changed by name): its content is copied by the caller (copyUp);
//   3. when pendingPath still shows F itself: a copy of F taken now, by name, with the
//      snapshot checks and the Base of every copy-up, placed at pendingPath;
//   4. otherwise F lost that name since the open (deleted in the layer, or replaced in A by
//      another file): a nameless copy of what this handle has open, as a program writing a
//      file after it was deleted or renamed over writes to that file and no name shows it.
// The copy (3, 4) is taken with no layer lock, into an object nobody sees yet, so a failed copy
// leaves the layer as it was, and a long one blocks nothing but this handle's own first write.
// After the copy the layer's lock is taken again; if someone else made F's object meanwhile,
// that one wins and this copy is dropped.
int Overlay::bindPending(Handle* h, bool keepContent, Ref<Inode>* out) {
  std::lock_guard<std::mutex> once(h->bindMu);
  if (Inode* b = h->bound.load(std::memory_order_acquire)) {
    *out = Ref<Inode>(b);
    return 0;
  }
  std::shared_ptr<Layer> layer = h->layer.lock();
  if (!layer) return ENOENT;  // the layer was dropped (ESTALE is not portable: MinGW lacks it)
  if (!layer->writable) return EROFS;
  Layer& L = *layer;
  std::string cbuf;
  // 1 or 2 into *found; true when pendingPath shows F itself (3).
  auto locate = [&](Ref<Inode>* found, Attr* a) -> bool {
    auto it = L.copied.find(h->lowerRel);
    if (it != L.copied.end() && it->second.ino == h->lowerIno) {
      *found = it->second.inode;
      return false;
    }
    const std::string& path = canon(L, h->pendingPath, &cbuf);
    Res r;
    if (resolve(L, path, &r) != 0) return false;
    if (r.node) {
      Inode* n = r.node->inode();
      if (!n || n->type != FileType::Regular || n->ino != h->lowerIno) return false;
      std::string lp;
      bool ours;
      {
        MetaLock m(n->mmu(), LockRank::Meta);
        ours = n->lowerPath(&lp) && lp == h->lowerRel;
      }
      if (ours) *found = Ref<Inode>(n);
      return false;
    }
    if (r.lowerAttr.type != FileType::Regular || r.lowerAttr.ino != h->lowerIno ||
        r.low != h->lowerRel)
      return false;
    *a = r.lowerAttr;
    return true;
  };
  Ref<Inode> in;
  Attr lowerAttr;
  bool byName;
  {
    ReadLock lock(L.mu, LockRank::Layer);
    byName = locate(&in, &lowerAttr);
  }
  if (!in) {
    std::string dir, name;
    splitLast(h->pendingPath, &dir, &name);
    NodeRef copy;
    if (byName) {
      NodeRef n = Node::make(FileType::Regular, name);
      n->ino = lowerAttr.ino;
      n->setSnap(lowerAttr);
      n->size = 0;  // no content yet: copyIn installs it
      n->set(Inode::kOwnMeta);
      int e;
      {
        WriteLock c(n->cmu(), LockRank::Content);
        e = copyIn(n.get(), h->lowerRel, keepContent, false);
      }
      if (e) return e;
      std::optional<Base> b;
      {
        MetaLock m(n->mmu(), LockRank::Meta);
        b = n->base();
      }
      // The name may have come to show another file while it was read: that copy is not F.
      if (b && b->ino == h->lowerIno) copy = std::move(n);
    }
    if (!copy) {
      byName = false;
      if (h->lower < 0) return EBADF;
      Ref<Inode> nameless;
      if (int e = copyOfOpenFile(h->lower, name, keepContent, &nameless)) return e;
      copy = NodeRef(static_cast<Node*>(nameless.get()));
    }
    WriteLock lock(L.mu, LockRank::Layer);
    Attr now;
    const bool still = locate(&in, &now);
    if (!in) {
      if (byName && still) {
        const std::string& path = canon(L, h->pendingPath, &cbuf);
        // The open was allowed; the place may have become a repository's hooks or config
        // since (HEAD brought back by a revert): the first write is refused there as an open
        // would be now.
        if (besideRepository(L, path)) return EPERM;
        std::string parent, last;
        splitLast(path, &parent, &last);
        Node* p;
        if (materializeDir(L, parent, &p, nullptr, nullptr) == 0) {
          copy->links = 1;
          p->put(last, copy);
        }
      }
      in = Ref<Inode>(copy.get());
      recordCopy(L, h->lowerRel, h->lowerIno, in.get());
    }
  }
  h->bound.store(Ref<Inode>(in).release(), std::memory_order_release);
  *out = std::move(in);
  return 0;
}

namespace {
// A file of A opened for reading: once its layer copied it up, the copy is what it shows.
Ref<Inode> copiedOf(const Handle* h) {
  if (h->inode) return Ref<Inode>(h->inode.get());
  if (Inode* b = h->bound.load(std::memory_order_acquire)) return Ref<Inode>(b);
  auto layer = h->layer.lock();
  if (!layer) return Ref<Inode>();
  ReadLock lock(layer->mu, LockRank::Layer);
  if (layer->copied.empty()) return Ref<Inode>();
  auto it = layer->copied.find(h->lowerRel);
  if (it == layer->copied.end() || it->second.ino != h->lowerIno) return Ref<Inode>();
  return it->second.inode;
}
}  // namespace

int Overlay::read(Handle* h, char* buf, size_t size, uint64_t off, size_t* got) {
  return readVia(h, nullptr, buf, size, off, got);
}

int Overlay::readVia(Handle* h, DescriptorReader* via, char* buf, size_t size, uint64_t off,
                     size_t* got) {
  *got = 0;
  syncKernelWrites();
  Ref<Inode> in = copiedOf(h);
  if (in) {
    ReadLock c(in->cmu(), LockRank::Content);
    if (!in->inLower()) {
      if (in->type != FileType::Regular) return EINVAL;
      return contentRead(in.get(), buf, size, off, got, via);
    }
  }
  if (h->lower < 0) return EIO;
  const int fd = via ? lower_->readDescriptor(h->lower) : -1;
  if (fd >= 0) return via->read(fd, off, size, got);
  return lower_->pread(h->lower, buf, size, off, got);
}

int Overlay::write(Handle* h, const char* buf, size_t size, uint64_t off) {
  if (!h->writable) return EBADF;
  Ref<Inode> held;
  if (int e = changeTarget(h, true, &held)) return e;
  Inode* in = held.get();
  if (!in) return EBADF;
  WriteLock c(in->cmu(), LockRank::Content);
  int e = copyUp(in, true);
  if (e) return e;
  if ((e = gitfileGuard(in, buf, size, off))) return e;  // link_targets.cc
  e = contentWrite(in, buf, size, off);
  if (e) return e;
  h->auditBytes.fetch_add(size, std::memory_order_relaxed);  // for its audit entry (release)
  Timespec t = nowTime();
  MetaLock m(in->mmu(), LockRank::Meta);
  in->setMtime(t);
  in->setCtime(t);
  return 0;
}

int Overlay::fgetattr(Handle* h, Attr* out) {
  syncKernelWrites();
  Ref<Inode> in = copiedOf(h);
  if (!in) return h->lower >= 0 ? lower_->fstat(h->lower, out) : ENOENT;
  inodeAttr(in.get(), out);
  return 0;
}

int Overlay::fallocate(Layer* view, Handle* h, bool keepSize, uint64_t off, uint64_t len) {
  if (!h) return EBADF;
  Attr a;
  if (int e = fgetattr(h, &a)) return e;
  const uint64_t end = off + len;
  if (keepSize || end <= a.size) return 0;
  Attr v, out;
  v.size = end;
  return setattr(view, std::string(), h, kSetSize, v, &out);
}

void Overlay::release(Handle* h) {
  endKernelHold(h);
  auditRelease(h);
  if (h->lower >= 0) lower_->close(h->lower);
  if (Inode* b = h->bound.exchange(nullptr, std::memory_order_acq_rel)) dropRef(b);
  if (!h->inode && !h->lowerRel.empty()) {
    if (auto layer = h->layer.lock()) {
      // The handle that open() counted in `readers` goes; with the last one for that path, the
      // layer's record of its copy (if any) is no longer needed by anyone.
      WriteLock lock(layer->mu, LockRank::Layer);
      bool last = false;
      {
        MetaLock rm(layer->rmu, LockRank::Meta);
        auto it = layer->readers.find(h->lowerRel);
        if (it != layer->readers.end() && --it->second == 0) {
          layer->readers.erase(it);
          last = true;
        }
      }
      if (last) layer->copied.erase(h->lowerRel);
    }
  }
  delete h;
}

}  // namespace shadowfs
