// The API's changes to one layer and its reads of one: whole-file writes, removes, revert (the
// folder shows through again), whole and ranged reads, extents, reset. Each takes the layer by
// name, so it works whether the layer is active, shown in a view, or neither.
#include <algorithm>
#include <cerrno>
#include <iterator>

#include "casefold.h"
#include "budget.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

int Overlay::putFile(const std::string& layer, const std::string& asked, const std::string& data,
                     uint32_t perm, const Caller& who) {
  if (asked.empty()) return EISDIR;
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  if (int e = writeRefused(asked)) return e;  // write_guard.h, and names
  Layer& L = *lp;
  if (guardedBeside(L, asked)) return EPERM;  // a bare repository's hooks or config
  if (guard_ && guard_->git() && refusedGitfile(std::string_view(data).substr(0, kGitfileScan)))
    return EPERM;  // a repository outside the shadow (link_targets.cc)
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
  if (in->has(Inode::kKernelHeld)) {
    // An open file's content the kernel serves itself: the new content goes into that file.
    if ((e = contentAssign(in.get(), data))) return e;
    Timespec t = nowTime();
    MetaLock m(in->mmu(), LockRank::Meta);
    in->setMtime(t);
    in->setCtime(t);
    return 0;
  }
  // `fresh` takes the old content with it.
  std::swap(in->u.data, fresh->u.data);
  const bool grown = fresh->has(Inode::kGrown);
  if (in->has(Inode::kGrown)) fresh->set(Inode::kGrown); else fresh->clear(Inode::kGrown);
  // The spill files change places too (a memory file is counted as memory, by its size).
  std::unique_ptr<SpillFile> was = in->mo() ? std::move(in->mo()->spill) : nullptr;
  if (fresh->mo() && fresh->mo()->spill) in->more().spill = std::move(fresh->mo()->spill);
  if (was) fresh->more().spill = std::move(was);
  Timespec t = nowTime();
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (grown) in->set(Inode::kGrown); else in->clear(Inode::kGrown);
    fresh->size = in->size;
    in->size = data.size();
    in->setMtime(t);
    in->setCtime(t);
  }
  // The exchange left the budget's total as it was; the old content goes now (`fresh`'s only
  // reference), and then the new one may be over the budget.
  fresh = NodeRef();
  accounted(in.get(), memoryOf(in.get()));
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
  // A tree that holds what the agent may not see is not the agent's to delete (an apply would
  // delete the folder's secrets with it); rmdir answers ENOTEMPTY for the same reason.
  const FileType t = r.node ? r.node->inode()->type : r.lowerAttr.type;
  if (L.mask && t == FileType::Directory && holdsMasked(L, path)) return EACCES;
  return removeAt(L, path);
}

bool Overlay::holdsMasked(Layer& L, const std::string& dir) {
  ListPlan plan;
  if (planList(L, dir, &plan, /*masked=*/false)) return false;
  std::vector<DirEntry> ls;
  if (runList(plan, &ls)) return false;
  for (const DirEntry& d : ls) {
    const std::string p = joinPath(dir, d.name);
    if (masked(L, p) || (plan.readLower && masked(L, joinPath(plan.low, d.name)))) return true;
    if (d.type == FileType::Directory && holdsMasked(L, p)) return true;
  }
  return false;
}

std::string Overlay::stampOf(const Attr& a) {
  return std::to_string(a.ino) + ":" + std::to_string(a.size) + ":" + std::to_string(a.ctime.sec) +
         "." + std::to_string(a.ctime.nsec);
}

int Overlay::revert(const std::string& layer, const std::string& asked, bool* wasDir,
                    const std::string* stamp) {
  *wasDir = false;
  if (asked.empty()) return EBUSY;
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Node* dir = L.root.get();
  auto comps = components(path);
  for (size_t i = 0; i + 1 < comps.size(); ++i) {
    Node* c = dir->find(comps[i]);
    if (!c) return 0;  // the layer holds nothing there
    // Under a deleted, opaque or moved directory the folder's entry would stay hidden (or be
    // looked for elsewhere): only the whole directory can go back to the folder's.
    if (c->whiteout() || !c->dir() || c->opaque() || c->redirected()) return EXDEV;
    dir = c;
  }
  if (revivesRepository(L, path, dir)) return EPERM;
  if (stamp) {
    // As stat saw it (Stat: getattr); gone or deleted since is a change too. "-": nothing was
    // there (a deletion), and something is now.
    Res r;
    const int found = resolve(L, path, &r);
    if (*stamp == "-") {
      if (found == 0) return EAGAIN;
    } else {
      if (found || !r.node) return EAGAIN;
      Attr now;
      nodeAttr(r.node, r.lv, r.low, &now);
      if (stampOf(now) != *stamp) return EAGAIN;
    }
  }
  if (ignoreCase_) {
    // Every spelling the layer has for the name goes: after a case-only rename the layer holds
    // the new name and a whiteout of the old, and the folder's entry is back only once both are.
    std::vector<std::string> names;
    for (Node* c : dir->kids()) {
      if (!sameName(c->name(), comps.back())) continue;
      names.emplace_back(c->name());
      *wasDir = *wasDir || c->dir();
      dropNames(this, c, &Overlay::touch);
    }
    const bool any = !names.empty();
    for (const auto& name : names) dir->take(name);
    if (!any) return 0;
    for (auto c = L.copied.begin(); c != L.copied.end();)
      c = sameOrInsideFolded(c->first, path) ? L.copied.erase(c) : std::next(c);
    return 0;
  }
  Node* there = dir->find(comps.back());
  if (!there) return 0;
  *wasDir = there->dir();
  dropNames(this, there, &Overlay::touch);
  dir->take(comps.back());
  // Copies made from the folder's file there (or below) are no longer this layer's.
  for (auto c = L.copied.begin(); c != L.copied.end();) {
    const std::string& k = c->first;
    bool under = k == path || (k.size() > path.size() && k.compare(0, path.size(), path) == 0 &&
                               k[path.size()] == '/');
    c = under ? L.copied.erase(c) : std::next(c);
  }
  return 0;
}

int Overlay::revertThrough(const std::string& layer, const std::string& asked, bool* wasDir) {
  *wasDir = false;
  if (asked.empty()) return EBUSY;
  {
    std::shared_ptr<Layer> lp = byName(layer);
    if (!lp) return ENXIO;
    Layer& L = *lp;
    WriteLock lock(L.mu, LockRank::Layer);
    std::string cbuf;
    const std::string path = canon(L, asked, &cbuf);
    auto comps = components(path);
    Node* dir = L.root.get();
    std::string at;        // the folder's path of the directory looked at
    bool hiding = false;   // below a directory that merges again: the rest of the folder stays hidden
    for (size_t i = 0; i + 1 < comps.size(); ++i) {
      const std::string name(comps[i]);
      at = joinPath(at, name);
      Node* c = dir->find(name);
      if (!c && !hiding) break;  // the folder shows through from here: revert() does the rest
      if (c && (c->redirected() || (!c->whiteout() && !c->dir()))) return EXDEV;
      if (c && !c->whiteout() && !c->opaque() && !hiding) {
        dir = c;
        continue;
      }
      Attr a;
      if (lower_->stat(at, &a) != 0 || a.type != FileType::Directory) return EXDEV;
      std::vector<DirEntry> ents;
      if (int e = lower_->readdir(at, &ents)) return e;
      if (!c || c->whiteout()) {
        NodeRef node = Node::make(FileType::Directory, name);
        node->ino = a.ino;
        node->setSnap(a);
        node->links = 1;
        Node* raw = node.get();
        if (c) dir->take(name);
        dir->put(name, std::move(node));
        c = raw;
      } else {
        c->clear(Inode::kOpaque);
      }
      // Everything else of the folder's stays hidden, as the deletion or the emptying had it:
      // its entries are deleted, and a directory of the layer's own there keeps showing none of
      // the folder's.
      const std::string_view next = comps[i + 1];
      for (const DirEntry& d : ents) {
        if (d.name == "." || d.name == ".." || nameMatches(d.name, next)) continue;
        Node* k = c->find(d.name);
        if (!k)
          c->put(d.name, Node::makeWhiteout(d.name));
        else if (k->dir() && !k->opaque() && !k->redirected())
          k->set(Inode::kOpaque);
      }
      hiding = true;
      dir = c;
    }
  }
  return revert(layer, asked, wasDir);
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

int Overlay::moveLayer(const std::string& from, const std::string& to,
                       std::vector<std::string>* paths) {
  if (from == to) return EINVAL;
  std::shared_ptr<Layer> src = byName(from), dst = byName(to);
  if (!src || !dst) return ENXIO;
  // One layer's lock at a time (the lock order has one rank for layers): the source is emptied
  // first, then the destination changes in one hold of its lock.
  NodeRef tree;
  {
    WriteLock lock(src->mu, LockRank::Layer);
    tree = std::move(src->root);
    src->root = freshRoot();
    src->copied.clear();  // its handles' records: the source keeps its handles
  }
  NodeRef old;
  {
    WriteLock lock(dst->mu, LockRank::Layer);
    layerPaths(*dst, paths);
    old = std::move(dst->root);
    dst->root = std::move(tree);
    dst->copied.clear();  // as reset: the old tree's copies go with it
    layerPaths(*dst, paths);
  }
  return 0;  // the old tree is freed here, outside the lock
}

}  // namespace shadowfs
