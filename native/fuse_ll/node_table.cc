// fuse_ll's node table: the ids the kernel holds, the names (parent id + name) that lead to
// them, the layer each was looked up in, and from those the overlay path and the one layer a
// request is served from.
#include "ll_mount.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "../core/path.h"

namespace shadowfs {
namespace ll {

int LLMount::pathOf(uint64_t id, std::string* out) {
  std::lock_guard lock(tmu_);
  return pathOfLocked(id, out, 0);
}

// A hard-linked file has several names; a name whose parent directory the kernel has forgotten
// (and looked up again under a new node) is dead and is pruned, so any live name will do.
int LLMount::pathOfLocked(uint64_t id, std::string* out, int depth) {
  if (id == abi::kRootId) {
    out->clear();
    return 0;
  }
  auto it = nodes_.find(id);
  if (it == nodes_.end() || depth > 4096) return ENOENT;
  auto& names = it->second->names;
  for (auto n = names.begin(); n != names.end();) {
    if (n->parent != abi::kRootId && nodes_.find(n->parent) == nodes_.end()) {
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

int LLMount::nodeAt(uint64_t id, std::string* path, std::shared_ptr<Layer>* layer,
                    const std::shared_ptr<Layer>& active, bool forWrite) {
  if (int e = pathOf(id, path)) return e;
  *layer = layerFor(id, *path, active, forWrite);
  return *layer ? 0 : ESTALE;
}

int LLMount::childAt(uint64_t parent, const char* name, std::string* path,
                     std::shared_ptr<Layer>* layer, const std::shared_ptr<Layer>& active) {
  std::string dir;
  if (int e = nodeAt(parent, &dir, layer, active)) return e;
  *path = joinPath(dir, name);
  return 0;
}


uint64_t LLMount::remember(uint64_t parent, const std::string& name, FileType type,
                           uint64_t ino, bool layerLinks, const std::shared_ptr<Layer>& seenIn) {
  // A name the kernel knows from another layer (a switch in between) leads to the same node
  // only if both layers show the same object: the folder's file, taken by neither. Asked
  // before the table lock is taken (it calls into the overlay), and only in that case.
  bool sameObject = true;
  if (!view_ && type != FileType::Directory) {
    std::shared_ptr<Layer> before;
    {
      std::lock_guard lock(tmu_);
      auto it = byName_.find(key(parent, name));
      if (it != byName_.end()) before = nodes_[it->second]->seenIn.lock();
    }
    if (before && before != seenIn) {
      std::string dir;
      if (pathOf(parent, &dir) == 0) {
        const std::string path = joinPath(dir, name);
        sameObject = !layerOwns(seenIn.get(), path) && !layerOwns(before.get(), path);
      }
    }
  }
  std::lock_guard lock(tmu_);
  if (!sameObject) {
    // A new node for the other layer's object; the old one keeps its names for the open files
    // and requests still on their way to it.
    auto it = byName_.find(key(parent, name));
    if (it != byName_.end() && nodes_[it->second]->seenIn.lock() != seenIn) byName_.erase(it);
  }
  uint64_t id = rememberLocked(parent, name, type, ino, layerLinks, seenIn);
  FNode* n = nodes_[id].get();
  if (!view_) n->seenIn = seenIn;
  if (type == FileType::Directory && !n->watch && watcher_) {
    // ENOENT (a directory only a layer has) or ENOSPC (out of watches): that directory relies
    // on the cache timeout.
    std::string dir;
    if (pathOfLocked(parent, &dir, 0) == 0) watcher_->watch(joinPath(dir, name), &n->watch);
  }
  return id;
}

uint64_t LLMount::rememberLocked(uint64_t parent, const std::string& name, FileType type,
                                 uint64_t ino, bool layerLinks,
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
  // Another name of an object the kernel already knows (a hard link made in the layer): same
  // node. Only for the layer's own objects with several links, in the same layer, so two files
  // that merely share an inode number (A spanning two file systems, copies in two layers) are
  // never merged. The folder's own hard links get a node per name: the kernel sends writes by
  // node, and a copy-up takes the written name alone, so a shared node would send a write
  // through one name to another name's file.
  if (type != FileType::Directory && layerLinks) {
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
  if (type != FileType::Directory && layerLinks) byIno_[ino] = id;
  return id;
}

void LLMount::linkedInLayer(uint64_t id, uint64_t ino) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second->type == FileType::Directory) return;
  it->second->ino = ino;
  byIno_[ino] = id;
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
  if (it == nodes_.end() || id == abi::kRootId) return;
  FNode* n = it->second.get();
  n->nlookup = count >= n->nlookup ? 0 : n->nlookup - count;
  if (n->nlookup) return;
  for (auto& nm : n->names) {
    auto b = byName_.find(key(nm.parent, nm.name));
    if (b != byName_.end() && b->second == id) byName_.erase(b);
  }
  auto bi = byIno_.find(n->ino);
  if (bi != byIno_.end() && bi->second == id) byIno_.erase(bi);
  if (n->watch && watcher_) watcher_->unwatch(n->watch);
  n->watch = 0;
  // Closing A's descriptor and dropping a nameless copy take no overlay lock.
  if (n->pinned) ov_->release(n->pinned);
  if (n->retired) ov_->release(n->retired);
  if (n->reader) {
    ov_->release(n->reader);
    readers_.fetch_sub(1, std::memory_order_relaxed);
  }
  nodes_.erase(it);
}

void LLMount::releaseNodeHandles() {
  std::lock_guard lock(tmu_);
  for (auto& [id, n] : nodes_) {
    for (Handle** h : {&n->pinned, &n->retired, &n->reader}) {
      if (*h) ov_->release(*h);
      *h = nullptr;
    }
  }
  readers_ = 0;
}

Handle* LLMount::streamReader(uint64_t id, const std::shared_ptr<Layer>& layer,
                              const std::string& path) {
  Handle* r;
  {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end() || !it->second->reader) return nullptr;
    FNode* n = it->second.get();
    if (n->readerPath != path || n->readerLayer.lock() != layer) return nullptr;
    r = n->reader;  // stays: only forget() releases it, and no request of the node is then left
  }
  // The path still shows that very folder file (a copy the layer took of it since is read
  // through the handle as through any open one: Overlay::copiedOf).
  Attr a;
  if (ov_->getattr(layer.get(), path, &a) != 0 || a.type != FileType::Regular ||
      a.ino != r->lowerIno)
    return nullptr;
  return r;
}

bool LLMount::keepReader(uint64_t id, const std::shared_ptr<Layer>& layer,
                         const std::string& path, Handle* h) {
  if (h->inode || h->lower < 0 || h->writable) return false;  // the layer's content: memory
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second->reader) return false;
  if (readers_.load(std::memory_order_relaxed) >= kMaxReaders) return false;
  FNode* n = it->second.get();
  n->reader = h;
  n->readerLayer = layer;
  n->readerPath = path;
  readers_.fetch_add(1, std::memory_order_relaxed);
  return true;
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

std::shared_ptr<Layer> LLMount::layerFor(uint64_t id, const std::string& path,
                                         std::shared_ptr<Layer> active, bool forWrite) {
  if (!active) active = ov_->current(view_);
  if (id == abi::kRootId || view_) return active;
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
  // A write by node after a switch: to where the file was opened, while that layer still
  // shows the object the kernel knows (fuse_ll's no-open I/O has no handle to tell).
  if (forWrite && seen && ov_->getattr(seen.get(), path, &a) == 0 && a.ino == ino) return seen;
  // After a switch: the active layer serves the node only if it shows the same object, which
  // is the folder's own file, unchanged by either layer. A copy a layer took keeps the folder's
  // inode number, so the number alone would take x's copy for y's.
  if (ov_->getattr(active.get(), path, &a) == 0 && a.ino == ino &&
      (a.type == FileType::Directory || (!layerOwns(active.get(), path) &&
                                         !(seen && layerOwns(seen.get(), path)))))
    return active;
  if (seen && seen != active && ov_->getattr(seen.get(), path, &a) == 0 && a.ino == ino)
    return seen;
  return nullptr;
}

bool LLMount::layerOwns(Layer* layer, const std::string& path) {
  Handle* h = nullptr;
  Attr a;
  OpenIntent look;
  look.transient = true;  // ours, not a program's: no open in the audit trail
  if (ov_->open(layer, path, look, &h, &a) != 0) return false;
  const bool owns = h->inode != nullptr;
  ov_->release(h);
  return owns;
}

// True when the node's every name was unlinked (an open file is all that keeps it).
bool LLMount::unlinked(uint64_t id) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  return id != abi::kRootId && it != nodes_.end() && it->second->names.empty();
}

bool LLMount::anyHandle(uint64_t id, Handle* out) {
  // A copy taken under the table lock: the original may be released by another thread as soon
  // as the lock is gone. Its descriptor of A's file is duplicated for the same reason.
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second->handles.empty()) return false;
  const Handle* h = it->second->handles.front();
  out->inode = h->inode;
  out->layer = h->layer;
  out->lowerIno = h->lowerIno;
  out->lowerRel = h->lowerRel;
  out->writable = false;
  out->lower = h->lower >= 0 ? ::fcntl(static_cast<int>(h->lower), F_DUPFD_CLOEXEC, 0) : -1;
  return true;
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

int LLMount::nodeHandle(uint64_t id, bool write, Handle** h, bool* own, bool stream) {
  std::string path;
  std::shared_ptr<Layer> layer;
  int e = nodeAt(id, &path, &layer, nullptr, write);
  if (e == 0) {
    if (stream && !write) {
      if (Handle* r = streamReader(id, layer, path)) {
        *h = r;
        *own = false;
        return 0;
      }
    }
    OpenIntent intent;
    intent.write = write;
    intent.transient = true;  // one request's handle: no open for the audit trail
    Attr a;
    e = ov_->open(layer.get(), path, intent, h, &a);
    *own = e == 0;
    if (e == 0 && stream && !write && keepReader(id, layer, path, *h)) *own = false;
    if (e != ENOENT && e != ESTALE) return e;
  }
  Handle* p;
  {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end() || !it->second->pinned) return e;
    p = it->second->pinned;
    if (!write || p->writable) {
      *h = p;
      *own = false;
      return 0;
    }
  }
  // The first write after the last name went: the pinned handle becomes a writable one on a
  // copy only it holds (a file of the folder) or on the layer's inode. `p` stays valid: only
  // forget() releases a pinned handle, and the kernel forgets no node it is still writing to.
  Handle* w = nullptr;
  if (int we = ov_->writableCopy(p, &w)) return we;
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  FNode* n = it != nodes_.end() ? it->second.get() : nullptr;
  if (!n || n->pinned != p || n->pinned->writable) {
    ov_->release(w);  // another writer got there first
    if (!n || !n->pinned) return ESTALE;
    *h = n->pinned;
  } else {
    for (auto& x : n->handles)
      if (x == p) x = w;
    n->pinned = w;
    n->retired = p;  // a reader may still be using it: released with the node
    *h = w;
  }
  *own = false;
  return 0;
}

void LLMount::pinBeforeRemove(uint64_t parent, const char* name) {
  if (!noOpen()) return;
  uint64_t id;
  {
    std::lock_guard lock(tmu_);
    auto it = byName_.find(key(parent, name));
    if (it == byName_.end()) return;
    id = it->second;
    FNode* n = nodes_[id].get();
    if (n->type != FileType::Regular || n->pinned) return;
  }
  std::string path;
  std::shared_ptr<Layer> layer;
  if (nodeAt(id, &path, &layer)) return;
  // Read-only first: that never copies anything. A file whose content the layer already holds
  // is pinned writable (opening it so copies nothing either), so a program can go on writing an
  // unlinked temporary file. One whose content is still the folder's (its own or a chmod'ed
  // copy's: the handle reads A) stays read-only; a first write takes a copy (nodeHandle).
  Handle* h = nullptr;
  Attr a;
  OpenIntent r;
  r.transient = true;  // ours, not a program's: no open in the audit trail
  if (ov_->open(layer.get(), path, r, &h, &a)) return;
  if (h->inode && h->lower < 0) {  // EROFS in a read-only layer: stays read-only
    OpenIntent w;
    w.write = true;
    w.transient = true;
    Handle* hw = nullptr;
    if (ov_->open(layer.get(), path, w, &hw, &a) == 0) {
      ov_->release(h);
      h = hw;
    }
  }
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second->pinned) {
    ov_->release(h);
    return;
  }
  it->second->pinned = h;
  it->second->handles.push_back(h);
}

int LLMount::nodeListing(uint64_t id, uint64_t off, std::shared_ptr<DirStream>* out,
                         bool readAhead) {
  if (off != 0) {
    std::lock_guard lock(tmu_);
    auto it = nodes_.find(id);
    if (it != nodes_.end() && it->second->listing) {
      *out = it->second->listing;
      return 0;
    }
  }
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int e = nodeAt(id, &path, &layer)) return e;
  auto d = std::make_shared<DirStream>();
  if (int e = ov_->list(layer.get(), path, d.get(), readAhead)) return e;
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it != nodes_.end()) it->second->listing = d;
  *out = std::move(d);
  return 0;
}

void LLMount::doneListing(uint64_t id, const std::shared_ptr<DirStream>& d) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it != nodes_.end() && it->second->listing == d) it->second->listing.reset();
}

}  // namespace ll
}  // namespace shadowfs
