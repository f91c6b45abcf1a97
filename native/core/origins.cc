// What the layers read from somewhere else: a file or directory an agent moved or renamed is read
// from where it was in the folder (its origin) until the agent writes it, so a rename of a big
// directory costs nothing. Before the folder is changed there on purpose (an apply, of any
// agent's layer), every layer takes its own copy of what it reads from there (keepMoved).
#include <algorithm>
#include <cerrno>

#include "casefold.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

// `changing` is sorted (folded when names are): a path reaches `low` when it is `low` or one of
// its parents (looked up one by one), or lies under it (the first path past `low/`).
bool Overlay::changesReach(const std::vector<std::string>& changing, const std::string& low) const {
  const std::string key = ignoreCase_ ? foldName(low) : low;
  for (std::string up = key;;) {
    if (std::binary_search(changing.begin(), changing.end(), up)) return true;
    const size_t slash = up.rfind('/');
    if (slash == std::string::npos) break;
    up.resize(slash);
  }
  const std::string below = key + '/';
  auto it = std::lower_bound(changing.begin(), changing.end(), below);
  return it != changing.end() && it->compare(0, below.size(), below) == 0;
}

// The directory `n` at `path`, which merges the folder's directory `low` (when lv): if it reads
// from elsewhere than its own path and `changing` reaches there, the folder's entries become the
// layer's own (files to be copied into `copy`, directories reading their folder directory by an
// explicit redirect) and `n` stops merging (opaque). Then the same for what it holds. With no
// `copy` it only looks (L's lock held shared): -1 at the first entry it would keep.
int Overlay::keepMovedIn(Layer& L, Node* n, const std::string& path, bool lv,
                         const std::string& low, const std::vector<std::string>& changing,
                         std::vector<Ref<Inode>>* copy, std::vector<std::string>* kept) {
  // Spellings compare exactly, also where names fold: an entry renamed only in case reads the
  // folder's old name, and what the folder holds there may change as any other origin may.
  if (lv && low != path && changesReach(changing, low)) {
    if (!copy) return -1;
    std::vector<DirEntry> ents;
    int e = lower_->readdir(low, &ents);
    if (e == ENOENT || e == ENOTDIR) {
      ents.clear();  // gone already: it shows nothing now, and keeps showing nothing
    } else if (e) {
      return e;
    }
    for (const DirEntry& d : ents) {
      if (d.name == "." || d.name == ".." || n->find(d.name)) continue;
      const std::string here = joinPath(path, d.name), there = joinPath(low, d.name);
      // What the agent may not see stays the folder's: apply leaves its directory in place.
      if (masked(L, here) || masked(L, there)) continue;
      Attr a;
      e = lower_->stat(there, &a);
      if (e == ENOENT) continue;  // went away since the listing
      if (e) return e;
      NodeRef in = Node::make(a.type, d.name);
      in->ino = a.ino;
      in->setSnap(a);
      in->links = 1;
      if (a.type == FileType::Symlink) {
        e = lower_->readlink(there, &in->more().target);
        if (e) return e;
        in->set(Inode::kOwnMeta | Inode::kOwnXattrs);
      } else if (a.type == FileType::Regular) {
        in->setLower(there, nullptr);
      } else if (a.type != FileType::Directory) {
        in->set(Inode::kOwnMeta | Inode::kOwnXattrs);  // fifos, sockets, devices: nothing in A
      }
      n->put(d.name, std::move(in));
    }
    // Directories below keep reading their folder directory, now named explicitly; deletions
    // below have nothing left to hide.
    std::vector<std::string> whiteouts;
    for (Node* c : n->kids()) {
      if (c->whiteout()) {
        whiteouts.emplace_back(c->name());
      } else if (c->dir() && !c->opaque() && !c->redirected()) {
        c->more().redirect = joinPath(low, c->name());
      }
    }
    for (const std::string& w : whiteouts) n->take(w);
    if (n->redirected()) n->mo()->redirect.reset();
    n->set(Inode::kOpaque);
    lv = false;
    kept->push_back(path);
  }
  for (Node* c : n->kids()) {
    if (c->whiteout()) continue;
    const std::string cpath = joinPath(path, c->name());
    if (c->dir()) {
      bool clv = lv;
      std::string clow = low;
      descendInto(c, c->name(), &clv, &clow);
      if (int e = keepMovedIn(L, c, cpath, clv, clow, changing, copy, kept)) return e;
      continue;
    }
    Inode* in = c->inode();
    if (in->type != FileType::Regular) continue;
    std::string from;
    {
      MetaLock m(in->mmu(), LockRank::Meta);
      if (!in->lowerPath(&from)) continue;
    }
    if (from == cpath || !changesReach(changing, from)) continue;
    if (!copy) return -1;
    copy->push_back(Ref<Inode>(in));
    kept->push_back(cpath);
  }
  return 0;
}

int Overlay::keepHeld(Layer& L) {
  if (holdCount_.load(std::memory_order_acquire) == 0) return 0;  // no apply under way: the usual case
  std::vector<std::string> held;
  {
    std::lock_guard<std::mutex> g(holdMu_);
    if (holds_.empty()) return 0;
    for (const auto& [id, paths] : holds_) held.insert(held.end(), paths.begin(), paths.end());
  }
  std::sort(held.begin(), held.end());
  std::vector<Ref<Inode>> copy;
  std::vector<std::string> paths;
  if (int e = keepMovedIn(L, L.root.get(), std::string(), true, std::string(), held, &copy, &paths))
    return e;
  // Copied with the layer's lock held (rare: a move of what an apply is changing, while it
  // runs), so no removal of the apply's comes between the move and the copy.
  for (const auto& in : copy) {
    if (int e = takeContent(in.get(), true)) return e;
    MetaLock m(in->mmu(), LockRank::Meta);
    in->clear(Inode::kHasBase | Inode::kBaseHashed);
  }
  return 0;
}

void Overlay::releaseMoved(uint64_t hold) {
  std::lock_guard<std::mutex> g(holdMu_);
  holds_.erase(hold);
  holdCount_.store(holds_.size(), std::memory_order_release);
}

int Overlay::keepMoved(const std::vector<std::string>& changing,
                       std::vector<std::pair<std::string, std::string>>* kept, uint64_t* hold) {
  syncKernelWrites();
  std::vector<std::string> sorted;
  for (const std::string& p : changing) sorted.push_back(ignoreCase_ ? foldName(p) : p);
  std::sort(sorted.begin(), sorted.end());
  if (hold) {
    // Held before the layers are looked at: a move made after a layer's walk is kept by keepHeld.
    std::lock_guard<std::mutex> g(holdMu_);
    *hold = nextHold_++;
    holds_[*hold] = sorted;
    holdCount_.store(holds_.size(), std::memory_order_release);
  }
  std::vector<std::shared_ptr<Layer>> all;
  {
    ReadLock reg(mu_, LockRank::Registry);
    for (const auto& [name, L] : layers_) all.push_back(L);
  }
  for (const auto& L : all) {
    std::vector<Ref<Inode>> copy;
    std::vector<std::string> paths;
    {
      // Most layers read nothing from elsewhere: a look under the shared lock leaves their
      // agents' requests running.
      ReadLock look(L->mu, LockRank::Layer);
      if (keepMovedIn(*L, L->root.get(), std::string(), true, std::string(), sorted, nullptr,
                      nullptr) != -1)
        continue;
    }
    {
      WriteLock lock(L->mu, LockRank::Layer);
      if (int e = keepMovedIn(*L, L->root.get(), std::string(), true, std::string(), sorted,
                              &copy, &paths))
        return e;
    }
    // The contents are read without the layer's lock, as any copy-up is; the folder is not
    // changed until this returns (the caller waits), and a write meanwhile copies the same.
    // A copy has no base: the base says what the folder had at the copy's own path when the
    // agent took it, and the folder never had this content there (apply would take any file
    // at the new path for the user's change since). Its origin's own change (a deletion) is
    // checked against the folder as usual.
    for (const auto& in : copy) {
      if (int e = takeContent(in.get(), true)) return e;
      MetaLock m(in->mmu(), LockRank::Meta);
      in->clear(Inode::kHasBase | Inode::kBaseHashed);
    }
    for (std::string& p : paths) kept->emplace_back(L->name, std::move(p));
  }
  return 0;
}

}  // namespace shadowfs
