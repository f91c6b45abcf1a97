// The layer tree: resolving a path through a layer onto the folder, and the few primitives that
// change the tree (materialise, place, remove, detach/attach for rename). Every function here
// runs with the layer's lock held by its caller (see model.h); none reads a file's content.
#include <algorithm>
#include <cerrno>
#include <chrono>

#include "casefold.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

Timespec nowTime() {
  auto t = std::chrono::system_clock::now().time_since_epoch();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t).count();
  return Timespec{ns / 1000000000, ns % 1000000000};
}

namespace {

std::unique_ptr<Node> makeWhiteout() { return std::make_unique<Node>(); }

// Where A merges below `child` (entered by `name` from a position merging A at *low when *lv):
// nowhere for files and opaque directories, the redirect target for renamed directories, the
// natural path otherwise.
void descend(const Node* child, std::string_view name, bool* lv, std::string* low) {
  if (!child->dir() || child->opaque) {
    *lv = false;
    low->clear();
  } else if (child->redirect) {
    *lv = true;
    *low = *child->redirect;
  } else if (*lv) {
    *low = joinPath(*low, name);
  }
}

}  // namespace

// Exported for changes.cc.
void descendInto(const Node* child, std::string_view name, bool* lv, std::string* low) {
  descend(child, name, lv, low);
}

void Overlay::touch(Inode* in, bool mtime) {
  Timespec t = nowTime();
  MetaLock m(in->mmu, LockRank::Meta);
  in->snap.ctime = t;
  if (mtime) in->snap.mtime = t;
}

std::shared_ptr<Inode> Overlay::newInode(FileType type, uint32_t perm, const Caller& who) {
  auto in = std::make_shared<Inode>();
  in->ino = nextIno_.fetch_add(1);
  in->type = type;
  in->ownMeta = true;
  in->ownXattrs = true;
  Attr& s = in->snap;
  s.ino = in->ino;
  s.type = type;
  s.perm = perm & 07777;
  s.uid = who.uid;
  s.gid = who.gid;
  s.atime = s.mtime = s.ctime = nowTime();
  return in;
}

bool Overlay::lowerPresent(bool lv, const std::string& low, const std::string& name, Attr* a) {
  if (!lv) return false;
  Attr tmp;
  return lower_->stat(joinPath(low, name), a ? a : &tmp) == 0;
}

// Walks the layer tree along `path`; below the last layer node the path is A's alone.
int Overlay::resolve(Layer& L, const std::string& path, Res* r) const {
  Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  auto comps = components(path);
  for (size_t i = 0; i < comps.size(); ++i) {
    const bool last = i + 1 == comps.size();
    auto c = comps[i];
    if (c.size() > kNameMax) return ENAMETOOLONG;
    if (!cur->dir()) return ENOTDIR;
    auto it = cur->children.find(c);
    if (it == cur->children.end()) {
      cur = nullptr;
      if (!lv) {
        r->parentResolved = last;
        return ENOENT;
      }
      for (size_t j = i + 1; j < comps.size(); ++j)
        if (comps[j].size() > kNameMax) return ENAMETOOLONG;
      // Below the last layer node the rest of the path is A's alone: append it in one go.
      low = joinPath(low, std::string_view(path).substr(static_cast<size_t>(c.data() - path.data())));
      break;
    }
    Node* child = it->second.get();
    if (child->whiteout()) {
      r->parentResolved = last;
      return ENOENT;
    }
    descend(child, c, &lv, &low);
    cur = child;
  }
  r->node = cur;
  r->lv = lv;
  r->low = std::move(low);
  if (!cur) {
    int e = lower_->stat(r->low, &r->lowerAttr);
    if (e == ENOENT) r->parentResolved = true;  // caller re-checks the parent when creating
    return e;
  }
  return 0;
}

// Case-insensitive names: the one place that decides how a path the caller spelt is spelt in
// the layer and the folder. Every later step (resolve, materialise, place, remove...) then
// works byte for byte on the result, exactly as with exact names, so the rest of the core has
// no second notion of "same name". Walks like resolve():
// - at a layer node, a child of the same name in any case: a live entry first (the exact
//   spelling before another), else a deletion (whiteout), which ends the walk since nothing
//   lives below it. Scanning the children costs O(entries the layer holds in that directory)
//   when the exact spelling misses; the layer holds only what it changed, so that stays small;
// - below the layer's nodes, where the folder merges, the folder's own spelling
//   (lowerSpelling()); a case-sensitive folder that has the rest of the path exactly as asked
//   needs no more than one stat for all of it;
// - a name found nowhere ends the walk: it and what follows keep the caller's spelling.
const std::string& Overlay::canon(const Layer& L, const std::string& path, std::string* buf,
                                  std::string* respellAs) const {
  if (respellAs) respellAs->clear();
  if (!ignoreCase_ || path.empty()) return path;
  auto comps = components(path);
  buf->clear();
  auto append = [buf](std::string_view c) {
    if (!buf->empty()) buf->push_back('/');
    buf->append(c);
  };
  const Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  size_t i = 0;
  for (; i < comps.size(); ++i) {
    const std::string_view c = comps[i];
    if (c.size() > kNameMax) break;  // resolve() refuses it
    if (cur) {
      if (!cur->dir()) break;  // resolve() answers ENOTDIR
      const Node* live = nullptr;
      const Node* dead = nullptr;
      std::string_view liveName, deadName;
      auto it = cur->children.find(c);
      if (it != cur->children.end() && !it->second->whiteout()) {
        live = it->second.get();
        liveName = it->first;
      } else {
        if (it != cur->children.end()) {
          dead = it->second.get();
          deadName = it->first;
        }
        for (const auto& [name, child] : cur->children) {
          if (!sameName(name, c)) continue;
          if (!child->whiteout()) {
            live = child.get();
            liveName = name;
            break;
          }
          if (!dead) {
            dead = child.get();
            deadName = name;
          }
        }
      }
      if (live) {
        append(liveName);
        descend(live, liveName, &lv, &low);
        cur = live;
        continue;
      }
      if (dead) {
        append(deadName);
        if (i + 1 == comps.size() && respellAs && deadName != c) *respellAs = std::string(c);
        ++i;
        break;
      }
      cur = nullptr;
      if (!lv) break;  // a directory of the layer's own: nothing of the folder below
      if (!lower_->caseInsensitive()) {
        Attr a;
        const size_t at = static_cast<size_t>(c.data() - path.data());
        if (lower_->stat(joinPath(low, std::string_view(path).substr(at)), &a) == 0)
          break;  // the rest is spelt as the folder spells it
      }
    }
    std::string real;
    if (!lowerSpelling(low, c, &real)) break;
    append(real);
    low = joinPath(low, real);
  }
  for (; i < comps.size(); ++i) append(comps[i]);
  return *buf;
}

// The folder's spelling of `name` in its directory `dir`: as asked when the folder has that
// exactly, else the entry that matches ignoring case (of several in a case-sensitive folder,
// the first in byte order). A case-insensitive folder tells it in one call (storedName); a
// case-sensitive one is listed, which only happens when the exact spelling is missing. False
// when the folder has no such entry.
bool Overlay::lowerSpelling(const std::string& dir, std::string_view name,
                            std::string* real) const {
  const std::string at = joinPath(dir, name);
  if (lower_->caseInsensitive()) return lower_->storedName(at, real) == 0;
  Attr a;
  if (lower_->stat(at, &a) == 0) {
    *real = std::string(name);
    return true;
  }
  std::vector<DirEntry> ls;
  if (lower_->readdir(dir, &ls) != 0) return false;
  bool found = false;
  for (auto& d : ls) {
    if (sameName(d.name, name) && (!found || d.name < *real)) {
      *real = d.name;
      found = true;
    }
  }
  return found;
}

// A rename within one directory, by the same steps as rename(): the entry keeps its inode,
// content and (for a directory of the folder, through a redirect) its merge with the folder;
// the old name becomes a whiteout where the folder has something under it.
int Overlay::respell(Layer& L, const std::string& path, const std::string& name) {
  std::string parent, old;
  splitLast(path, &parent, &old);
  if (old == name) return 0;
  Res r;
  auto n = detach(L, path, r);
  if (!n) return EIO;
  return attach(L, joinPath(parent, name), std::move(n));
}

// Makes sure every directory along `path` has a layer node (copying up directories of A as
// mirrors) and returns the last one with its merge source.
int Overlay::materializeDir(Layer& L, const std::string& path, Node** out, bool* lvOut,
                            std::string* lowOut) {
  Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  for (auto c : components(path)) {
    auto it = cur->children.find(c);
    if (it != cur->children.end()) {
      Node* child = it->second.get();
      if (child->whiteout()) return ENOENT;
      if (child->inode->type == FileType::Symlink) return ELOOP;
      if (!child->dir()) return ENOTDIR;
      descend(child, c, &lv, &low);
      cur = child;
      continue;
    }
    if (!lv) return ENOENT;
    std::string next = joinPath(low, c);
    Attr a;
    int e = lower_->stat(next, &a);
    if (e) return e;
    if (a.type == FileType::Symlink) return ELOOP;
    if (a.type != FileType::Directory) return ENOTDIR;
    auto node = std::make_unique<Node>();
    node->inode = std::make_shared<Inode>();
    node->inode->ino = a.ino;
    node->inode->type = FileType::Directory;
    node->inode->snap = a;
    node->inode->links = 1;
    Node* raw = node.get();
    cur->children.emplace(std::string(c), std::move(node));
    cur = raw;
    low = std::move(next);
  }
  *out = cur;
  if (lvOut) *lvOut = lv;
  if (lowOut) *lowOut = low;
  return 0;
}

// Gives the object at `path` a layer node without copying content: a directory becomes a
// mirror, a regular file an inode whose content stays in A, a symlink a copy of its target.
int Overlay::materializeNode(Layer& L, const std::string& path, Node** out, Res* r) {
  int e = resolve(L, path, r);
  if (e) return e;
  if (r->node) {
    *out = r->node;
    return 0;
  }
  std::string parent, name;
  splitLast(path, &parent, &name);
  Node* p;
  bool plv;
  std::string plow;
  e = materializeDir(L, parent, &p, &plv, &plow);
  if (e) return e;
  const Attr& a = r->lowerAttr;
  auto in = std::make_shared<Inode>();
  in->ino = a.ino;
  in->type = a.type;
  in->snap = a;
  in->links = 1;
  if (a.type == FileType::Symlink) {
    e = lower_->readlink(r->low, &in->target);
    if (e) return e;
    in->ownMeta = true;
    in->ownXattrs = true;
  } else if (a.type == FileType::Regular) {
    in->lowerPath = r->low;
  } else if (a.type != FileType::Directory) {
    in->ownMeta = true;  // fifos, sockets, devices: nothing to read from A
    in->ownXattrs = true;
  }
  auto node = std::make_unique<Node>();
  node->inode = std::move(in);
  Node* raw = node.get();
  p->children[name] = std::move(node);
  r->node = raw;
  // A materialised directory keeps merging with the same A directory; r->lv/low stay valid.
  if (a.type != FileType::Directory) {
    r->lv = false;
    r->low.clear();
  }
  *out = raw;
  return 0;
}

void Overlay::inodeAttr(const Inode* in, Attr* out) {
  std::optional<std::string> lowerPath;
  bool ownMeta;
  {
    MetaLock m(in->mmu, LockRank::Meta);
    *out = in->snap;
    lowerPath = in->lowerPath;
    ownMeta = in->ownMeta;
  }
  if (lowerPath) {
    // Content (and, unless the layer took them over, attributes) still live in A.
    Attr a;
    if (lower_->stat(*lowerPath, &a) == 0) {
      if (!ownMeta) {
        *out = a;
      } else {
        out->size = a.size;
        out->blocks = a.blocks;
      }
    }
  } else if (in->type == FileType::Regular || in->type == FileType::Symlink) {
    if (in->type == FileType::Symlink) out->size = in->target.size();
    out->blocks = (out->size + 511) / 512;
  }
  out->ino = in->ino;
  out->type = in->type;
  uint32_t links = in->links.load();
  out->nlink = links ? links : 1;
}

void Overlay::nodeAttr(const Node* n, bool lv, const std::string& low, Attr* out) {
  const Inode* in = n->inode.get();
  if (in->type != FileType::Directory) return inodeAttr(in, out);
  Attr a;
  bool merged = lv && lower_->stat(low, &a) == 0 && a.type == FileType::Directory;
  uint32_t lowerLinks = a.nlink;
  {
    MetaLock m(in->mmu, LockRank::Meta);
    *out = !in->ownMeta && merged ? a : in->snap;
  }
  // The link count is 2 + subdirectories, which tools use to know when they have seen every
  // subdirectory. Exact when only one side has children: A's count while the layer has not
  // touched this directory's entries, the layer's own count for a directory A does not have
  // (or hides). When both contribute, counting would mean merging the listing on every
  // getattr; 1 instead is Linux's "not counted" (btrfs always, ext4 past 65,000), never wrong.
  if (merged && n->children.empty()) {
    out->nlink = lowerLinks;
  } else if (merged) {
    out->nlink = 1;
  } else {
    uint32_t dirs = 0;
    for (const auto& [name, c] : n->children) dirs += c->dir() ? 1 : 0;
    out->nlink = 2 + dirs;
  }
  out->ino = in->ino;
  out->type = FileType::Directory;
}

void Overlay::ensureOwnMeta(Inode* in, bool lv, const std::string& low) {
  std::optional<std::string> src;
  {
    MetaLock m(in->mmu, LockRank::Meta);
    if (in->ownMeta) return;
    src = in->lowerPath ? in->lowerPath : (lv ? std::optional<std::string>(low) : std::nullopt);
  }
  Attr a;
  const bool ok = src && lower_->stat(*src, &a) == 0;
  MetaLock m(in->mmu, LockRank::Meta);
  if (in->ownMeta) return;
  if (ok) {
    uint64_t ino = in->ino;
    in->snap = a;
    in->snap.ino = ino;
  }
  in->ownMeta = true;
}

// The place of `path`'s last name: its parent directory as a layer node (materialised) with
// the folder directory it merges with, and the name itself.
int Overlay::slotOf(Layer& L, const std::string& path, Slot* s) {
  std::string parent;
  splitLast(path, &parent, &s->name);
  return materializeDir(L, parent, &s->dir, &s->lv, &s->low);
}

bool Overlay::Slot::inLower(Overlay* ov) const { return ov->lowerPresent(lv, low, name); }

int Overlay::placeNew(Layer& L, const std::string& path, std::shared_ptr<Inode> inode, Node** out) {
  Slot slot;
  std::string parent, name;
  splitLast(path, &parent, &name);
  if (name.empty()) return EEXIST;
  if (name.size() > kNameMax) return ENAMETOOLONG;
  int e = slotOf(L, path, &slot);
  if (e) return e == ELOOP ? ENOTDIR : e;
  Node* p = slot.dir;
  auto it = p->children.find(name);
  const bool present = slot.inLower(this);
  if (it != p->children.end() ? !it->second->whiteout() : present) return EEXIST;
  auto node = std::make_unique<Node>();
  // A directory created where A has something (hidden by a whiteout) must not show A's
  // children.
  node->opaque = inode->type == FileType::Directory && present;
  inode->links++;
  node->inode = std::move(inode);
  Node* raw = node.get();
  p->children[name] = std::move(node);
  touch(p->inode.get(), true);
  if (out) *out = raw;
  return 0;
}

namespace {
// A name of an inode went away: one link fewer, and (as on a real file system) the inode's
// ctime moves, which the object's other hard links show.
void dropNames(Overlay* ov, Node* n, void (Overlay::*touchFn)(Inode*, bool)) {
  if (!n || n->whiteout()) return;
  if (n->inode->links > 0) n->inode->links--;
  if (n->inode->type != FileType::Directory) (ov->*touchFn)(n->inode.get(), false);
  for (auto& [name, c] : n->children) dropNames(ov, c.get(), touchFn);
}
}  // namespace

// Removes whatever is at `path` (already known to exist): a whiteout where A has something.
int Overlay::removeAt(Layer& L, const std::string& path) {
  Slot slot;
  if (int e = slotOf(L, path, &slot)) return e;
  Node* p = slot.dir;
  auto it = p->children.find(slot.name);
  if (it != p->children.end()) dropNames(this, it->second.get(), &Overlay::touch);
  if (slot.inLower(this)) {
    p->children[slot.name] = makeWhiteout();
  } else if (it != p->children.end()) {
    p->children.erase(it);
  }
  bool own;
  {
    MetaLock m(p->inode->mmu, LockRank::Meta);
    own = p->inode->ownMeta;
  }
  if (own) touch(p->inode.get(), true);
  return 0;
}

int Overlay::revert(const std::string& layer, const std::string& asked, bool* wasDir) {
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
    auto it = dir->children.find(comps[i]);
    if (it == dir->children.end()) return 0;  // the layer holds nothing there
    Node* c = it->second.get();
    // Under a deleted, opaque or moved directory the folder's entry would stay hidden (or be
    // looked for elsewhere): only the whole directory can go back to the folder's.
    if (c->whiteout() || !c->dir() || c->opaque || c->redirect) return EXDEV;
    dir = c;
  }
  if (ignoreCase_) {
    // Every spelling the layer has for the name goes: after a case-only rename the layer holds
    // the new name and a whiteout of the old, and the folder's entry is back only once both are.
    bool any = false;
    for (auto it = dir->children.begin(); it != dir->children.end();) {
      if (!sameName(it->first, comps.back())) {
        ++it;
        continue;
      }
      any = true;
      *wasDir = *wasDir || it->second->dir();
      dropNames(this, it->second.get(), &Overlay::touch);
      it = dir->children.erase(it);
    }
    if (!any) return 0;
    for (auto c = L.copied.begin(); c != L.copied.end();)
      c = sameOrInsideFolded(c->first, path) ? L.copied.erase(c) : std::next(c);
    return 0;
  }
  auto it = dir->children.find(comps.back());
  if (it == dir->children.end()) return 0;
  *wasDir = it->second->dir();
  dropNames(this, it->second.get(), &Overlay::touch);
  dir->children.erase(it);
  // Copies made from the folder's file there (or below) are no longer this layer's.
  for (auto c = L.copied.begin(); c != L.copied.end();) {
    const std::string& k = c->first;
    bool under = k == path || (k.size() > path.size() && k.compare(0, path.size(), path) == 0 &&
                               k[path.size()] == '/');
    c = under ? L.copied.erase(c) : std::next(c);
  }
  return 0;
}

// Takes the object at `path` out of the tree (leaving a whiteout where A has something) and
// returns it as a free-standing node. A directory that merged with A keeps doing so through
// an explicit redirect; one that has nothing in A becomes opaque.
std::unique_ptr<Node> Overlay::detach(Layer& L, const std::string& path, Res& r) {
  Node* n;
  if (materializeNode(L, path, &n, &r)) return nullptr;
  if (n->dir() && !n->opaque && !n->redirect) {
    Attr a;
    if (r.lv && lower_->stat(r.low, &a) == 0 && a.type == FileType::Directory) {
      n->redirect = r.low;
      ensureOwnMeta(n->inode.get(), true, r.low);
    } else {
      n->opaque = true;
    }
  }
  Slot slot;
  if (slotOf(L, path, &slot)) return nullptr;
  Node* p = slot.dir;
  auto it = p->children.find(slot.name);
  std::unique_ptr<Node> out = std::move(it->second);
  if (slot.inLower(this)) {
    it->second = makeWhiteout();
  } else {
    p->children.erase(it);
  }
  touch(p->inode.get(), true);
  touch(out->inode.get(), false);
  return out;
}

int Overlay::attach(Layer& L, const std::string& path, std::unique_ptr<Node> n) {
  Slot slot;
  if (int e = slotOf(L, path, &slot)) return e;
  Node* p = slot.dir;
  auto it = p->children.find(slot.name);
  // Renaming over a file: its other hard links (if any) see its ctime move.
  if (it != p->children.end()) dropNames(this, it->second.get(), &Overlay::touch);
  if (n->dir() && !n->redirect && slot.inLower(this)) n->opaque = true;
  p->children[slot.name] = std::move(n);
  touch(p->inode.get(), true);
  return 0;
}

// Every directory along `dir` must be a directory, not a symlink (ELOOP) or a file (ENOTDIR).
// With `create`, missing ones are created in the layer, owned by `create`.
int Overlay::checkParents(Layer& L, const std::string& dir, const Caller* create) {
  std::string prefix;
  for (auto c : components(dir)) {
    prefix = joinPath(prefix, c);
    Res pr;
    int e = resolve(L, prefix, &pr);
    if (e == ENOENT && create) {
      e = placeNew(L, prefix, newInode(FileType::Directory, 0755, *create), nullptr);
      if (e) return e;
      continue;
    }
    if (e) return e;
    FileType t = pr.node ? pr.node->inode->type : pr.lowerAttr.type;
    if (t == FileType::Symlink) return ELOOP;
    if (t != FileType::Directory) return ENOTDIR;
  }
  return 0;
}

int Overlay::xattrSource(const Res& r, std::string* src) const {
  if (!r.node) {
    *src = r.low;
    return 0;
  }
  const Inode* in = r.node->inode.get();
  {
    MetaLock m(in->mmu, LockRank::Meta);
    if (in->lowerPath) {
      *src = *in->lowerPath;
      return 0;
    }
  }
  if (in->type == FileType::Directory && r.lv) {
    *src = r.low;
    return 0;
  }
  return ENODATA;
}

int Overlay::planList(Layer& L, const std::string& path, ListPlan* plan) {
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (!r.node) {
    if (r.lowerAttr.type != FileType::Directory) return ENOTDIR;
    plan->lowerOnly = plan->readLower = true;
    plan->low = r.low;
    plan->ino = r.lowerAttr.ino;
    return 0;
  }
  if (!r.node->dir()) return ENOTDIR;
  plan->ino = r.node->inode->ino;
  plan->readLower = r.lv;
  plan->low = r.low;
  for (auto& [name, c] : r.node->children) {
    if (r.lv) plan->hidden.push_back(ignoreCase_ ? foldName(name) : name);
    if (!c->whiteout()) plan->own.push_back(DirEntry{name, c->inode->ino, c->inode->type});
  }
  // Case-insensitive names: the layer's names hide the folder's in any case (folded, sorted).
  if (ignoreCase_) std::sort(plan->hidden.begin(), plan->hidden.end());
  return 0;
}

int Overlay::runList(const ListPlan& plan, std::vector<DirEntry>* out) {
  out->clear();
  if (plan.lowerOnly) return lower_->readdir(plan.low, out);
  if (plan.readLower) {
    std::vector<DirEntry> ls;
    if (lower_->readdir(plan.low, &ls) == 0) {
      out->reserve(ls.size() + plan.own.size());
      // plan.hidden is sorted (it comes from an ordered map, or was sorted once folded).
      if (!ignoreCase_) {
        for (auto& d : ls) {
          if (!std::binary_search(plan.hidden.begin(), plan.hidden.end(), d.name))
            out->push_back(std::move(d));
        }
      } else {
        for (auto& d : ls) {
          if (!std::binary_search(plan.hidden.begin(), plan.hidden.end(), foldName(d.name)))
            out->push_back(std::move(d));
        }
      }
    }
  }
  out->insert(out->end(), plan.own.begin(), plan.own.end());
  return 0;
}

}  // namespace shadowfs
