// One function per file-system operation. Each takes the layer its request resolved (see
// overlay.h), holds that layer's lock only for the tree work, does content work under the
// file's own content lock, and returns 0 or an errno from one place.
//
// Paths: an operation names its path parameter `asked` and, once it holds the layer's lock,
// works on `path = canon(L, asked, ...)`, which is `asked` itself unless names are matched
// ignoring case (overlay.h, NameMatch). Creating operations pass `respellAs` too, and give a new
// entry the caller's spelling when it took the place of a deletion spelt otherwise.
#include <cerrno>

#include "model.h"
#include "path.h"

namespace shadowfs {

// The layer a call acts on: the one given, or the active one (kept alive for the call).
#define SFS_AT(view)                              \
  std::shared_ptr<Layer> hold_;                   \
  if (!(view)) hold_ = current(nullptr);          \
  Layer& L = (view) ? *(view) : *hold_;

int Overlay::getattr(Layer* view, const std::string& asked, Attr* out) {
  SFS_AT(view);
  ReadLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (r.node) {
    nodeAttr(r.node, r.lv, r.low, out);
  } else {
    *out = r.lowerAttr;
  }
  return 0;
}

int Overlay::readdir(Layer* view, const std::string& asked, std::vector<DirEntry>* out) {
  SFS_AT(view);
  ListPlan plan;
  {
    ReadLock lock(L.mu, LockRank::Layer);
    std::string cbuf;
    int e = planList(L, canon(L, asked, &cbuf), &plan);
    if (e) return e;
  }
  return runList(plan, out);
}

int Overlay::list(Layer* view, const std::string& asked, DirStream* d) {
  SFS_AT(view);
  ListPlan plan;
  {
    ReadLock lock(L.mu, LockRank::Layer);
    std::string cbuf;
    int e = planList(L, canon(L, asked, &cbuf), &plan);
    if (e) return e;
  }
  std::vector<DirEntry> fresh;
  int e = runList(plan, &fresh);
  if (e) return e;
  d->ino = plan.ino;
  d->entries.swap(fresh);
  d->loaded = true;
  return 0;
}

int Overlay::readlink(Layer* view, const std::string& asked, std::string* out) {
  SFS_AT(view);
  ReadLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (r.node) {
    if (r.node->inode()->type != FileType::Symlink) return EINVAL;
    *out = r.node->inode()->target();
    return 0;
  }
  if (r.lowerAttr.type != FileType::Symlink) return EINVAL;
  return lower_->readlink(r.low, out);
}

int Overlay::mknod(Layer* view, const std::string& asked, FileType type, uint32_t perm,
                   uint64_t rdev, const Caller& who, Attr* out) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef in = newInode(type, perm, who, askedName);
  if (rdev) in->more().rdev = rdev;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf, respellAs;
  const std::string& path = canon(L, asked, &cbuf, &respellAs);
  Node* n;
  int e = placeNew(L, path, std::move(in), &n);
  if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::mkdir(Layer* view, const std::string& asked, uint32_t perm, const Caller& who,
                   Attr* out) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef in = newInode(FileType::Directory, perm, who, askedName);
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf, respellAs;
  const std::string& path = canon(L, asked, &cbuf, &respellAs);
  Node* n;
  int e = placeNew(L, path, std::move(in), &n);
  if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::symlink(Layer* view, const std::string& target, const std::string& asked,
                     const Caller& who, Attr* out) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef in = newInode(FileType::Symlink, 0777, who, askedName);
  in->more().target = target;
  in->size = target.size();
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf, respellAs;
  const std::string& path = canon(L, asked, &cbuf, &respellAs);
  Node* n;
  int e = placeNew(L, path, std::move(in), &n);
  if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::link(Layer* view, const std::string& fromAsked, const std::string& toAsked,
                  Attr* out) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string fbuf, tbuf, respellAs;
  const std::string& from = canon(L, fromAsked, &fbuf);
  const std::string& to = canon(L, toAsked, &tbuf, &respellAs);
  Res r;
  Node* src;
  int e = materializeNode(L, from, &src, &r);
  if (e) return e;
  if (src->dir()) return EPERM;
  Ref<Inode> in = src->inodeRef();
  noteCopy(L, in.get());  // handles of the folder's file from before follow it (bindPending)
  // The new name is a node of its own that stands for `in` (Extra::link).
  std::string toDir, toName;
  splitLast(to, &toDir, &toName);
  NodeRef ln = Node::make(in->type, toName);
  ln->ino = in->ino;
  ln->more().link = Ref<Inode>(in).release();
  Node* n;
  e = placeNew(L, to, std::move(ln), &n);
  if (!e && !respellAs.empty()) e = respell(L, to, respellAs);
  if (e) return e;
  ensureOwnMeta(in.get(), false, std::string());
  touch(in.get(), false);
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::unlink(Layer* view, const std::string& asked) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  FileType t = r.node ? r.node->inode()->type : r.lowerAttr.type;
  if (t == FileType::Directory) return EISDIR;
  return removeAt(L, path);
}

int Overlay::rmdir(Layer* view, const std::string& asked) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  if (asked.empty()) return EBUSY;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  ListPlan plan;
  int e = planList(L, path, &plan);
  if (e) return e;
  std::vector<DirEntry> ls;
  e = runList(plan, &ls);
  if (e) return e;
  if (!ls.empty()) return ENOTEMPTY;
  return removeAt(L, path);
}

int Overlay::rename(Layer* view, const std::string& fromAsked, const std::string& toAsked,
                    uint32_t flags) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  if ((flags & kRenameNoReplace) && (flags & kRenameExchange)) return EINVAL;
  if (fromAsked.empty() || toAsked.empty()) return EBUSY;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string fbuf, tbuf, respellAs;
  const std::string& from = canon(L, fromAsked, &fbuf);
  const std::string& to = canon(L, toAsked, &tbuf, &respellAs);
  Res rf;
  int e = resolve(L, from, &rf);
  if (e) return e;
  if (ignoreCase_ && from == to) {
    // Both names are one entry: a rename to another case of its own name (`foo` -> `Foo`)
    // changes its spelling to the one given for the target, as on Windows. The caller giving
    // the same last name twice changes nothing (rename(2) of a name onto itself), whatever the
    // entry's spelling. Exchanging an entry with itself does nothing either; NoReplace has
    // nothing it could replace.
    std::string dir, fromName, toName;
    splitLast(fromAsked, &dir, &fromName);
    splitLast(toAsked, &dir, &toName);
    if ((flags & kRenameExchange) || fromName == toName) return 0;
    return respell(L, from, toName);
  }
  if (isInside(to, from)) return EINVAL;
  std::string tparent, tname;
  splitLast(to, &tparent, &tname);
  if (tname.size() > kNameMax) return ENAMETOOLONG;
  Res rt;
  int et = resolve(L, to, &rt);
  if (et && et != ENOENT) return et;
  if (et == ENOENT) {
    Res rp;
    int ep = resolve(L, tparent, &rp);
    if (ep) return ep;
    FileType pt = rp.node ? rp.node->inode()->type : rp.lowerAttr.type;
    if (pt != FileType::Directory) return ENOTDIR;
  }
  const bool toExists = et == 0;
  if (from == to) return 0;
  const FileType ft = rf.node ? rf.node->inode()->type : rf.lowerAttr.type;
  if ((flags & kRenameNoReplace) && toExists) return EEXIST;
  // Two names of one file (hard links): POSIX says succeed and do nothing. Linux's VFS stops
  // this before a path-based backend sees it only when both names are one kernel inode.
  if (toExists && ft != FileType::Directory) {
    const bool sameInLayer = rf.node && rt.node && rf.node->inode() == rt.node->inode();
    const bool sameInLower = !rf.node && !rt.node && rf.lowerAttr.nlink > 1 &&
                             rf.lowerAttr.ino == rt.lowerAttr.ino;
    if (sameInLayer || sameInLower) return 0;
  }
  // Everything that can fail happens before the first detach: a rename that fails must change
  // nothing (the folder's directories are stat-ed again while the layer mirrors them). Called
  // once every check has passed, so a refused rename leaves no trace in the layer either.
  // The files of the folder that move (or are replaced) are recorded for their handles opened
  // before, so a deferred write-open's first write follows the file it opened (bindPending).
  auto prepare = [&]() -> int {
    Node* n;
    Res pre;
    if (int pe = materializeNode(L, from, &n, &pre)) return pe;
    noteCopy(L, n->inode());
    Node* tp;
    if (int pe = materializeDir(L, tparent, &tp, nullptr, nullptr)) return pe;
    Res preTo;
    if (!toExists) return 0;
    if (int pe = materializeNode(L, to, &n, &preTo)) return pe;
    noteCopy(L, n->inode());
    return 0;
  };
  if (flags & kRenameExchange) {
    if (!toExists) return ENOENT;
    if (isInside(from, to)) return EINVAL;
    if ((e = prepare())) return e;
    Res a, b;
    NodeRef na = detach(L, from, a);
    if (!na) return EIO;
    NodeRef nb = detach(L, to, b);
    if (!nb) return EIO;
    e = attach(L, to, std::move(na));
    if (e) return e;
    return attach(L, from, std::move(nb));
  }
  if (toExists) {
    const FileType tt = rt.node ? rt.node->inode()->type : rt.lowerAttr.type;
    const bool fromDir = ft == FileType::Directory, toDir = tt == FileType::Directory;
    if (fromDir && !toDir) return ENOTDIR;
    if (!fromDir && toDir) return EISDIR;
    if (toDir) {
      if (isInside(from, to)) return ENOTEMPTY;
      ListPlan plan;
      e = planList(L, to, &plan);
      std::vector<DirEntry> ls;
      if (!e) e = runList(plan, &ls);
      if (e) return e;
      if (!ls.empty()) return ENOTEMPTY;
    }
  }
  if ((e = prepare())) return e;
  Res a;
  NodeRef na = detach(L, from, a);
  if (!na) return EIO;
  e = attach(L, to, std::move(na));
  // To a name the layer deleted in another case: the entry takes the caller's spelling.
  if (!e && !respellAs.empty()) e = respell(L, to, respellAs);
  return e;
}

namespace {
// The attribute part of setattr (everything but the size), at time `t` (mmu held).
void applyAttrs(Inode* s, uint32_t mask, const Attr& v, Timespec t) {
  if (mask & kSetMode) s->perm = static_cast<uint16_t>(v.perm & 07777);
  if (mask & kSetUid) s->uid = v.uid;
  if (mask & kSetGid) s->gid = v.gid;
  if (mask & kSetAtimeNow) s->setAtime(t);
  else if (mask & kSetAtime) s->setAtime(v.atime);
  if (mask & kSetMtimeNow) s->setMtime(t);
  else if (mask & kSetMtime) s->setMtime(v.mtime);
  s->setCtime((mask & kSetCtime) ? v.ctime : t);
  if (mask & kSetWinAttrs) s->setWinAttrs(v.winAttrs);
  if (mask & kSetBirth) s->setBirth(&v.birth);
}
}  // namespace

int Overlay::setattr(Layer* view, const std::string& asked, Handle* h, uint32_t mask,
                     const Attr& v, Attr* out) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  Ref<Inode> in;
  if (h) {
    // Through an open file: its own object. A deferred write-open is bound (copied up) by a
    // size change, or by any change once its name is gone; a mode or time change through it
    // while the name stays changes the metadata by name, as it would copy nothing either.
    const bool unbound = !h->inode && !h->bound.load(std::memory_order_acquire);
    if (!unbound || (mask & kSetSize) || asked.empty()) {
      if (int e = changeTarget(h, !(mask & kSetSize) || v.size != 0, &in)) return e;
    }
  }
  if (!in) {
    WriteLock lock(L.mu, LockRank::Layer);
    std::string cbuf;
    const std::string& path = canon(L, asked, &cbuf);
    Node* n;
    Res r;
    int e = materializeNode(L, path, &n, &r);
    if (e) return e;
    in = n->inodeRef();
    ensureOwnMeta(in.get(), r.lv, r.low);
    if (in->type == FileType::Directory) {
      // Directories have no content: everything happens under the tree lock.
      if (mask & kSetSize) return EISDIR;
    }
    if (mask & kSetSize) noteCopy(L, in.get());
    if (in->type == FileType::Directory) {
      {
        MetaLock m(in->mmu(), LockRank::Meta);
        applyAttrs(in.get(), mask, v, nowTime());
      }
      nodeAttr(n, r.lv, r.low, out);
      return 0;
    }
  }
  ensureOwnMeta(in.get(), false, std::string());
  Timespec t = nowTime();
  if (mask & kSetSize) {
    if (in->type != FileType::Regular) return EINVAL;
    // A file's content changes under its own lock; a copy-up of a big file stops nobody else.
    WriteLock c(in->cmu(), LockRank::Content);
    int e = copyUp(in.get(), v.size != 0);
    if (e) return e;
    e = contentTruncate(in.get(), v.size);
    if (e) return e;
    MetaLock m(in->mmu(), LockRank::Meta);
    in->setMtime(t);
  }
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    applyAttrs(in.get(), mask, v, t);
  }
  inodeAttr(in.get(), out);
  return 0;
}

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

int Overlay::open(Layer* view, const std::string& asked, const OpenIntent& intent, Handle** out,
                  Attr* attr) {
  SFS_AT(view);
  if ((intent.write || intent.truncate) && !L.writable) return EROFS;
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
      // write-open, see Handle): the layer is not touched now.
      if (!intent.write || r.lowerAttr.type == FileType::Regular)
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

int Overlay::create(Layer* view, const std::string& asked, uint32_t perm, const OpenIntent& intent,
                    const Caller& who, Handle** out, Attr* attr) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
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
      e = placeNew(L, path, newInode(FileType::Regular, perm, who, pname), &n);
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
  *got = 0;
  Ref<Inode> in = copiedOf(h);
  if (in) {
    ReadLock c(in->cmu(), LockRank::Content);
    if (!in->inLower()) {
      if (in->type != FileType::Regular) return EINVAL;
      return contentRead(in.get(), buf, size, off, got);
    }
  }
  if (h->lower < 0) return EIO;
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
  e = contentWrite(in, buf, size, off);
  if (e) return e;
  Timespec t = nowTime();
  MetaLock m(in->mmu(), LockRank::Meta);
  in->setMtime(t);
  in->setCtime(t);
  return 0;
}

int Overlay::fgetattr(Handle* h, Attr* out) {
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

int Overlay::getxattr(Layer* view, const std::string& asked, const std::string& name,
                      std::string* value) {
  SFS_AT(view);
  ReadLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (r.node) {
    const Inode* in = r.node->inode();
    MetaLock m(in->mmu(), LockRank::Meta);
    if (in->has(Inode::kOwnXattrs)) {
      if (!in->mo()) return ENODATA;
      auto it = in->mo()->xattrs.find(name);
      if (it == in->mo()->xattrs.end()) return ENODATA;
      *value = it->second;
      return 0;
    }
  }
  std::string src;
  if (xattrSource(r, &src)) return ENODATA;
  return lower_->getxattr(src, name, value);
}

int Overlay::listxattr(Layer* view, const std::string& asked, std::vector<std::string>* names) {
  SFS_AT(view);
  ReadLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  names->clear();
  if (r.node) {
    const Inode* in = r.node->inode();
    MetaLock m(in->mmu(), LockRank::Meta);
    if (in->has(Inode::kOwnXattrs)) {
      if (in->mo())
        for (auto& [k, v] : in->mo()->xattrs) names->push_back(k);
      return 0;
    }
  }
  std::string src;
  if (xattrSource(r, &src)) return 0;
  return lower_->listxattr(src, names);
}

namespace {
// The layer takes over an object's xattr list (copying A's) before its first change.
void ownXattrs(LowerFs* lower, Inode* in, const std::string* src) {
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (in->has(Inode::kOwnXattrs)) return;
  }
  std::map<std::string, std::string> copy;
  if (src) {
    std::vector<std::string> names;
    lower->listxattr(*src, &names);
    for (auto& k : names) {
      std::string v;
      if (lower->getxattr(*src, k, &v) == 0) copy[k] = v;
    }
  }
  MetaLock m(in->mmu(), LockRank::Meta);
  if (in->has(Inode::kOwnXattrs)) return;
  in->more().xattrs = std::move(copy);
  in->set(Inode::kOwnXattrs);
}
}  // namespace

// setxattr and removexattr: the layer takes over the object and its xattr list, then `change`
// edits the list under the inode's metadata lock and returns 0 or an errno.
template <typename Change>
int Overlay::editXattrs(Layer& L, const std::string& asked, Change change) {
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  Node* n;
  int e = materializeNode(L, path, &n, &r);
  if (e) return e;
  Inode* in = n->inode();
  std::string src;
  const bool hasSrc = xattrSource(r, &src) == 0;
  ownXattrs(lower_.get(), in, hasSrc ? &src : nullptr);
  ensureOwnMeta(in, r.lv, r.low);
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if ((e = change(in->more().xattrs))) return e;
  }
  touch(in, false);
  return 0;
}

int Overlay::setxattr(Layer* view, const std::string& path, const std::string& name,
                      const std::string& value, int flags) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  return editXattrs(L, path, [&](std::map<std::string, std::string>& xattrs) {
    const bool exists = xattrs.count(name) != 0;
    if ((flags & 1) && exists) return EEXIST;
    if ((flags & 2) && !exists) return ENODATA;
    xattrs[name] = value;
    return 0;
  });
}

int Overlay::removexattr(Layer* view, const std::string& path, const std::string& name) {
  SFS_AT(view);
  if (!L.writable) return EROFS;
  std::string old;
  if (int e = getxattr(&L, path, name, &old)) return e;  // nothing to remove: change nothing
  return editXattrs(L, path, [&](std::map<std::string, std::string>& xattrs) {
    return xattrs.erase(name) ? 0 : ENODATA;
  });
}

int Overlay::statfs(FsStats* out) { return lower_->statfs(out); }

}  // namespace shadowfs
