// The set of layers (create, drop, clone, activate, pin for views) and the API's changes to
// one layer (whole-file writes, removes, reads, reset).
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

std::unique_ptr<Node> Overlay::freshRoot() const {
  auto root = std::make_unique<Node>();
  auto in = std::make_shared<Inode>();
  in->type = FileType::Directory;
  in->snap = rootAttr_;
  in->ino = rootAttr_.ino;
  in->links = 1;
  root->inode = in;
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
  L->root = std::make_unique<Node>();
  // Two steps, so that a file being copied up in the source stops neither the source's other
  // users nor, until it is that file's turn, the clone: the tree under the source's lock (one
  // new inode per inode, so hard links stay hard links), then the contents under each file's
  // own content lock, with no layer lock held.
  std::vector<std::pair<std::shared_ptr<Inode>, std::shared_ptr<Inode>>> contents;
  {
    ReadLock lock(src->mu, LockRank::Layer);
    std::map<const Inode*, std::shared_ptr<Inode>> copies;
    std::function<void(const Node&, Node*)> copy = [&](const Node& n, Node* out) {
      out->opaque = n.opaque;
      out->redirect = n.redirect;
      if (n.inode) {
        auto it = copies.find(n.inode.get());
        if (it == copies.end()) {
          auto c = std::make_shared<Inode>();
          c->ino = n.inode->ino;
          c->type = n.inode->type;
          c->target = n.inode->target;
          contents.emplace_back(n.inode, c);
          it = copies.emplace(n.inode.get(), std::move(c)).first;
        }
        out->inode = it->second;
        out->inode->links++;
      }
      for (auto& [name, child] : n.children) {
        auto c = std::make_unique<Node>();
        copy(*child, c.get());
        out->children.emplace(name, std::move(c));
      }
    };
    copy(*src->root, L->root.get());
    for (auto& [path, entry] : src->copied) {
      auto it = copies.find(entry.inode.get());
      if (it != copies.end()) L->copied[path] = Layer::CopiedFrom{entry.ino, it->second};
    }
  }
  for (auto& [orig, c] : contents) {
    if (int e = cloneInto(*orig, c.get())) return e;
  }
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
  auto fresh = newInode(FileType::Regular, perm, who);
  if (int e = contentAssign(fresh.get(), data)) return e;
  fresh->snap.size = data.size();
  std::shared_ptr<Inode> in;
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
    FileType t = r.node ? r.node->inode->type : r.lowerAttr.type;
    if (t == FileType::Directory) return EISDIR;
    if (t == FileType::Symlink) return ELOOP;
    if (t != FileType::Regular) return EINVAL;
    Node* n;
    e = materializeNode(L, path, &n, &r);
    if (e) return e;
    in = n->inode;
    noteCopy(L, in);
  }
  // Replace the existing file's content: its inode (number, links, xattrs) stays.
  WriteLock c(in->cmu, LockRank::Content);
  int e = copyUp(in.get(), false);  // records the base; reads nothing
  if (e) return e;
  in->data.swap(fresh->data);
  in->spill = std::move(fresh->spill);
  in->spillSize = fresh->spillSize;
  Timespec t = nowTime();
  MetaLock m(in->mmu, LockRank::Meta);
  in->snap.size = data.size();
  in->snap.mtime = in->snap.ctime = t;
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

int Overlay::readFile(const std::string& layer, const std::string& asked, std::string* out) {
  out->clear();
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
  std::shared_ptr<Inode> in;
  std::string lowerPath;
  {
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
    FileType t = r.node ? r.node->inode->type : r.lowerAttr.type;
    if (t == FileType::Directory) return EISDIR;
    if (t == FileType::Symlink) return ELOOP;
    if (t != FileType::Regular) return EINVAL;
    if (r.node) {
      in = r.node->inode;
    } else {
      lowerPath = r.low;
    }
  }
  if (in) {
    ReadLock c(in->cmu, LockRank::Content);
    if (!in->lowerPath) {
      out->resize(in->spill ? in->spillSize : in->data.size());
      size_t got = 0;
      int ce = contentRead(in.get(), out->data(), out->size(), 0, &got);
      out->resize(got);
      return ce;
    }
    lowerPath = *in->lowerPath;
  }
  return lower_->readAll(lowerPath, out);
}

int Overlay::reset(const std::string& layer, std::vector<std::string>* paths) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  std::unique_ptr<Node> old;
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
