// The set of layers: create, drop, clone, activate, pin for views. What the API changes in
// one layer (writes, removes, revert, reads, reset) is in layer_ops.cc.
#include <algorithm>
#include <cerrno>
#include <functional>

#include "budget.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

Overlay::Overlay(std::unique_ptr<LowerFs> lower, std::unique_ptr<SpillStore> spill,
                 uint64_t spillThreshold, NameMatch names)
    : lower_(std::move(lower)),
      spill_(spill ? std::make_shared<Spiller>(std::move(spill)) : nullptr),
      spillThreshold_(spillThreshold),
      ignoreCase_(names == NameMatch::IgnoreCase) {
  rootAttr_.type = FileType::Directory;
  rootAttr_.perm = 0755;
  lower_->stat("", &rootAttr_);
  none_ = std::make_shared<Layer>();
  none_->writable = false;
  none_->root = freshRoot();
  if (spill_) ContentBudget::process().enlist(this);
}

Overlay::~Overlay() {
  if (spill_) ContentBudget::process().unlist(this);
}

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
  syncKernelWrites();  // every operation on a named layer starts here
  ReadLock reg(mu_, LockRank::Registry);
  auto it = layers_.find(name);
  return it == layers_.end() ? nullptr : it->second;
}

int Overlay::createLayer(const std::string& name) {
  if (name.empty()) return EINVAL;
  auto L = std::make_shared<Layer>();
  L->name = name;
  L->root = freshRoot();
  L->audit = std::make_shared<AuditLog>();
  WriteLock reg(mu_, LockRank::Registry);
  L->audit->setLimits(auditLimits_);
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
  // A copy starts with its source's audit trail, as it starts with its changes.
  L->audit = std::make_shared<AuditLog>();
  if (src->audit) L->audit->load(src->audit->snapshot());
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
    L->mask = src->mask;  // a copy hides what its source hides (a run's scratch layer)
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
  L->audit->setLimits(auditLimits_);
  layers_.emplace(to, std::move(L));
  return 0;
}

int Overlay::auditSnapshot(const std::string& layer, AuditSnapshot* out) {
  std::shared_ptr<Layer> L = byName(layer);
  if (!L || !L->audit) return ENXIO;
  *out = L->audit->snapshot();
  return 0;
}

int Overlay::auditLoad(const std::string& layer, const AuditSnapshot& s) {
  std::shared_ptr<Layer> L = byName(layer);
  if (!L || !L->audit) return ENXIO;
  L->audit->load(s);
  return 0;
}

void Overlay::setAuditLimits(const AuditLimits& l) {
  WriteLock reg(mu_, LockRank::Registry);
  auditLimits_ = l;
  for (auto& [name, L] : layers_)
    if (L->audit) L->audit->setLimits(l);
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

}  // namespace shadowfs
