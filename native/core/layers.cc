// The set of layers (create, drop, clone, activate, pin for views) and the API's changes to
// one layer (whole-file writes, removes, reads, reset).
#include <algorithm>
#include <cerrno>
#include <functional>

#include "model.h"
#include "path.h"

namespace shadowfs {

Overlay::Overlay(std::unique_ptr<LowerFs> lower, std::unique_ptr<SpillStore> spill,
                 uint64_t spillThreshold, NameMatch names)
    : lower_(std::move(lower)),
      spill_(std::move(spill)),
      spillThreshold_(spillThreshold),
      ignoreCase_(names == NameMatch::IgnoreCase) {
  rootAttr_.type = FileType::Directory;
  rootAttr_.perm = 0755;
  lower_->stat("", &rootAttr_);
  none_ = std::make_shared<Layer>();
  none_->writable = false;
  none_->root = freshRoot();
}

Overlay::~Overlay() = default;

NodeRef Overlay::freshRoot() const {
  NodeRef root = Node::make(FileType::Directory, std::string_view());
  root->setSnap(rootAttr_);
  root->ino = rootAttr_.ino;
  root->links = 1;
  return root;
}

Layer* Overlay::byNameLocked(const std::string& name) {
  auto it = layers_.find(name);
  return it == layers_.end() ? nullptr : it->second.get();
}

std::shared_ptr<Layer> Overlay::byName(const std::string& name) {
  ReadLock reg(mu_, LockRank::Registry);
  auto it = layers_.find(name);
  return it == layers_.end() ? nullptr : it->second;
}

int Overlay::createLayer(const std::string& name) {
  if (name.empty()) return EINVAL;
  auto L = std::make_shared<Layer>();
  L->name = name;
  L->root = freshRoot();
  WriteLock reg(mu_, LockRank::Registry);
  layers_.emplace(name, std::move(L));  // an existing layer of that name stays as it is
  return 0;
}

int Overlay::dropLayer(const std::string& name) {
  std::shared_ptr<Layer> gone;
  {
    WriteLock reg(mu_, LockRank::Registry);
    auto it = layers_.find(name);
    if (it == layers_.end()) return ENXIO;
    if (it->second == active_ || it->second->pins > 0) return EBUSY;
    gone = std::move(it->second);
    layers_.erase(it);
  }
  return 0;  // `gone` (maybe a big tree) is freed here, outside the registry lock
}

int Overlay::cloneLayer(const std::string& from, const std::string& to) {
  if (to.empty()) return EINVAL;
  std::shared_ptr<Layer> src = byName(from);
  if (!src) return ENXIO;
  if (byName(to)) return EEXIST;
  auto L = std::make_shared<Layer>();
  L->name = to;
  // Two steps, so that a file being copied up in the source stops neither the source's other
  // users nor, until it is that file's turn, the clone: the tree under the source's lock (one
  // new inode per inode, so hard links stay hard links), then the contents under each file's
  // own content lock, with no layer lock held.
  std::vector<std::pair<Ref<Inode>, Ref<Inode>>> contents;
  {
    ReadLock lock(src->mu, LockRank::Layer);
    // One new inode per inode: the first name met takes it, later names (hard links) link it.
    std::map<const Inode*, Inode*> copies;
    std::function<NodeRef(const Node&)> copy = [&](const Node& n) -> NodeRef {
      if (n.whiteout()) return Node::makeWhiteout(n.name());
      const Inode* in = n.inode();
      NodeRef out = Node::make(in->type, n.name());
      if (n.opaque()) out->set(Inode::kOpaque);
      if (n.redirected()) out->more().redirect = n.mo()->redirect;
      auto it = copies.find(in);
      if (it == copies.end()) {
        out->ino = in->ino;
        if (in->mo() && !in->mo()->target.empty()) out->more().target = in->mo()->target;
        contents.emplace_back(Ref<Inode>(const_cast<Inode*>(in)), Ref<Inode>(out.get()));
        it = copies.emplace(in, out.get()).first;
      } else {
        retain(it->second);
        out->more().link = it->second;
        out->ino = it->second->ino;
      }
      it->second->links++;
      for (const Node* child : n.kids()) out->put(child->name(), copy(*child));
      return out;
    };
    L->root = copy(*src->root);
    for (auto& [path, entry] : src->copied) {
      auto it = copies.find(entry.inode.get());
      if (it != copies.end())
        L->copied[path] = Layer::CopiedFrom{entry.ino, Ref<Inode>(it->second)};
    }
  }
  for (auto& [orig, c] : contents) {
    if (int e = cloneInto(*orig, c.get())) return e;
  }
  contents.clear();
  WriteLock reg(mu_, LockRank::Registry);
  if (layers_.count(to)) return EEXIST;
  layers_.emplace(to, std::move(L));
  return 0;
}

bool Overlay::hasLayer(const std::string& name) { return byName(name) != nullptr; }

std::vector<std::string> Overlay::layerNames() {
  ReadLock reg(mu_, LockRank::Registry);
  std::vector<std::string> out;
  for (auto& [name, l] : layers_) out.push_back(name);
  return out;
}

int Overlay::activate(const std::string& name, std::vector<std::string>* changed) {
  std::shared_ptr<Layer> prev, next;
  {
    WriteLock reg(mu_, LockRank::Registry);
    if (!name.empty()) {
      auto it = layers_.find(name);
      if (it == layers_.end()) return ENXIO;
      next = it->second;
    }
    if (next == active_) return 0;
    prev = active_;
    active_ = next;
  }
  // What may look different now: both layers' paths, listed after the switch (a path either
  // one gains meanwhile is invalidated by whoever adds it).
  for (const auto& L : {prev, next}) {
    if (!L) continue;
    ReadLock lock(L->mu, LockRank::Layer);
    layerPaths(*L, changed);
  }
  return 0;
}

std::shared_ptr<Layer> Overlay::current(Layer* view) {
  if (view) return view->shared_from_this();
  ReadLock reg(mu_, LockRank::Registry);
  return active_ ? active_ : none_;
}

std::string Overlay::activeLayer() {
  ReadLock reg(mu_, LockRank::Registry);
  return active_ ? active_->name : std::string();
}

Layer* Overlay::pin(const std::string& name) {
  WriteLock reg(mu_, LockRank::Registry);
  Layer* L = byNameLocked(name);
  if (L) L->pins++;
  return L;
}

void Overlay::unpin(Layer* layer) {
  WriteLock reg(mu_, LockRank::Registry);
  if (layer && layer->pins > 0) layer->pins--;
}

int Overlay::putFile(const std::string& layer, const std::string& asked, const std::string& data,
                     uint32_t perm, const Caller& who) {
  if (asked.empty()) return EISDIR;
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
  // The new content is prepared before any lock is taken (it may be big, and spill).
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef fresh = newInode(FileType::Regular, perm, who, askedName);
  if (int e = contentAssign(fresh.get(), data)) return e;
  Ref<Inode> in;
  {
    WriteLock lock(L.mu, LockRank::Layer);
    std::string cbuf, respellAs;
    const std::string& path = canon(L, asked, &cbuf, &respellAs);
    std::string parent, name;
    splitLast(path, &parent, &name);
    int e = checkParents(L, parent, &who);
    if (e) return e;
    Node* p;
    e = materializeDir(L, parent, &p, nullptr, nullptr);
    if (e) return e;
    Res r;
    e = resolve(L, path, &r);
    if (e == ENOENT) {
      e = placeNew(L, path, fresh, nullptr);
      if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
      return e;
    }
    if (e) return e;
    FileType t = r.node ? r.node->inode()->type : r.lowerAttr.type;
    if (t == FileType::Directory) return EISDIR;
    if (t == FileType::Symlink) return ELOOP;
    if (t != FileType::Regular) return EINVAL;
    Node* n;
    e = materializeNode(L, path, &n, &r);
    if (e) return e;
    in = n->inodeRef();
    noteCopy(L, in.get());
  }
  // Replace the existing file's content: its inode (number, links, xattrs) stays.
  WriteLock c(in->cmu(), LockRank::Content);
  int e = copyUp(in.get(), false);  // records the base; reads nothing
  if (e) return e;
  // `fresh` takes the old content with it.
  std::swap(in->u.data, fresh->u.data);
  const bool grown = fresh->has(Inode::kGrown);
  if (in->has(Inode::kGrown)) fresh->set(Inode::kGrown); else fresh->clear(Inode::kGrown);
  if (fresh->mo() && fresh->mo()->spill) {
    in->more().spill = std::move(fresh->mo()->spill);
  } else if (in->mo()) {
    in->mo()->spill.reset();
  }
  Timespec t = nowTime();
  MetaLock m(in->mmu(), LockRank::Meta);
  if (grown) in->set(Inode::kGrown); else in->clear(Inode::kGrown);
  fresh->size = in->size;
  in->size = data.size();
  in->setMtime(t);
  in->setCtime(t);
  return 0;
}

int Overlay::remove(const std::string& layer, const std::string& asked) {
  if (asked.empty()) return EBUSY;
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  std::string parent, name;
  splitLast(path, &parent, &name);
  Node* p;
  int e = materializeDir(L, parent, &p, nullptr, nullptr);
  if (e) return e;
  Res r;
  e = resolve(L, path, &r);
  if (e) return e;
  return removeAt(L, path);
}

int Overlay::regularFileAt(const std::string& layer, const std::string& asked, Ref<Inode>* in,
                           std::string* lowerPath) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
  ReadLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  // Same checks as writes: no path through a symlink.
  std::string parent, name;
  splitLast(path, &parent, &name);
  int e = checkParents(L, parent, nullptr);
  if (e) return e;
  Res r;
  e = resolve(L, path, &r);
  if (e) return e;
  FileType t = r.node ? r.node->inode()->type : r.lowerAttr.type;
  if (t == FileType::Directory) return EISDIR;
  if (t == FileType::Symlink) return ELOOP;
  if (t != FileType::Regular) return EINVAL;
  if (r.node) {
    *in = r.node->inodeRef();
  } else {
    *lowerPath = r.low;
  }
  return 0;
}

int Overlay::readFile(const std::string& layer, const std::string& asked, std::string* out) {
  out->clear();
  Ref<Inode> in;
  std::string lowerPath;
  if (int e = regularFileAt(layer, asked, &in, &lowerPath)) return e;
  if (in) {
    ReadLock c(in->cmu(), LockRank::Content);
    bool inLower;
    {
      MetaLock m(in->mmu(), LockRank::Meta);
      inLower = in->lowerPath(&lowerPath);
    }
    if (!inLower) {
      out->resize(in->size);
      size_t got = 0;
      int ce = contentRead(in.get(), out->data(), out->size(), 0, &got);
      out->resize(got);
      return ce;
    }
  }
  return lower_->readAll(lowerPath, out);
}

int Overlay::readRange(const std::string& layer, const std::string& asked, uint64_t off,
                       size_t size, std::string* out, uint64_t* total) {
  out->clear();
  *total = 0;
  Ref<Inode> in;
  std::string lowerPath;
  if (int e = regularFileAt(layer, asked, &in, &lowerPath)) return e;
  if (in) {
    ReadLock c(in->cmu(), LockRank::Content);
    bool inLower;
    {
      MetaLock m(in->mmu(), LockRank::Meta);
      inLower = in->lowerPath(&lowerPath);
    }
    if (!inLower) {
      *total = in->size;
      if (off >= in->size) return 0;
      out->resize(static_cast<size_t>(std::min<uint64_t>(size, in->size - off)));
      size_t got = 0;
      int ce = contentRead(in.get(), out->data(), out->size(), off, &got);
      out->resize(got);
      return ce;
    }
  }
  LowerHandle h = -1;
  if (int e = lower_->open(lowerPath, &h)) return e;
  Attr a;
  int e = lower_->fstat(h, &a);
  if (!e) {
    *total = a.size;
    if (off < a.size) {
      out->resize(static_cast<size_t>(std::min<uint64_t>(size, a.size - off)));
      size_t got = 0;
      e = lower_->pread(h, out->data(), out->size(), off, &got);
      out->resize(e ? 0 : got);
    }
  }
  lower_->close(h);
  return e;
}

int Overlay::dataExtents(const std::string& layer, const std::string& asked,
                         std::vector<Extent>* out, uint64_t* total) {
  out->clear();
  *total = 0;
  Ref<Inode> in;
  std::string lowerPath;
  if (int e = regularFileAt(layer, asked, &in, &lowerPath)) return e;
  // Where the system cannot tell, the whole file is data.
  auto whole = [out](uint64_t size, int e) {
    if (e != ENOSYS) return e;
    out->clear();
    if (size) out->push_back(Extent{0, size});
    return 0;
  };
  if (in) {
    ReadLock c(in->cmu(), LockRank::Content);
    bool inLower;
    {
      MetaLock m(in->mmu(), LockRank::Meta);
      inLower = in->lowerPath(&lowerPath);
    }
    if (!inLower) {
      *total = in->size;
      SpillFile* sp = in->mo() ? in->mo()->spill.get() : nullptr;
      return whole(in->size, sp ? sp->dataExtents(in->size, kMaxExtents, out) : ENOSYS);
    }
  }
  LowerHandle h = -1;
  if (int e = lower_->open(lowerPath, &h)) return e;
  Attr a;
  int e = lower_->fstat(h, &a);
  if (!e) {
    *total = a.size;
    e = whole(a.size, lower_->dataExtents(h, a.size, kMaxExtents, out));
  }
  lower_->close(h);
  return e;
}

int Overlay::reset(const std::string& layer, std::vector<std::string>* paths) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  NodeRef old;
  {
    WriteLock lock(lp->mu, LockRank::Layer);
    layerPaths(*lp, paths);
    old = std::move(lp->root);
    lp->root = freshRoot();
    lp->copied.clear();
  }
  return 0;  // the old tree is freed here, outside the lock
}

}  // namespace shadowfs
