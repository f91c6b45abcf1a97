// The layer tree: resolving a path through a layer onto the folder, and the few primitives that
// change the tree (materialise, place, remove, detach/attach for rename). Every function here
// runs with the layer's lock held by its caller (see model.h); none reads a file's content.
// The records themselves (Inode, Node, children arrays) are in model.cc.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <new>

#include "casefold.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

namespace {

// Where A merges below `child` (entered by `name` from a position merging A at *low when *lv):
// nowhere for files and opaque directories, the redirect target for renamed directories, the
// natural path otherwise.
void descend(const Node* child, std::string_view name, bool* lv, std::string* low) {
  if (!child->dir() || child->opaque()) {
    *lv = false;
    low->clear();
  } else if (child->redirected()) {
    *lv = true;
    *low = *child->mo()->redirect;
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
  MetaLock m(in->mmu(), LockRank::Meta);
  in->setCtime(t);
  if (mtime) in->setMtime(t);
}

NodeRef Overlay::newInode(FileType type, uint32_t perm, const Caller& who, std::string_view name) {
  NodeRef in = Node::make(type, name);
  in->ino = nextIno_.fetch_add(1);
  in->set(Inode::kOwnMeta | Inode::kOwnXattrs);
  in->perm = static_cast<uint16_t>(perm & 07777);
  in->uid = who.uid;
  in->gid = who.gid;
  const Timespec t = nowTime();
  in->setAtime(t);
  in->setMtime(t);
  in->setCtime(t);
  return in;
}

bool Overlay::lowerPresent(bool lv, const std::string& low, const std::string& name, Attr* a) {
  if (!lv) return false;
  Attr tmp;
  return lower_->stat(joinPath(low, name), a ? a : &tmp) == 0;
}

bool Overlay::masked(const Layer& L, std::string_view path) {
  return L.mask && L.mask->hides(path);
}

// Walks the layer tree along `path`; below the last layer node the path is A's alone. A path
// the layer's mask hides is absent, as is one whose folder object lies where the mask hides
// (reached through a directory the layer renamed).
int Overlay::resolve(Layer& L, const std::string& path, Res* r) const {
  if (masked(L, path)) {
    r->parentResolved = true;
    return ENOENT;
  }
  Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  auto comps = components(path);
  for (size_t i = 0; i < comps.size(); ++i) {
    const bool last = i + 1 == comps.size();
    auto c = comps[i];
    if (c.size() > kNameMax) return ENAMETOOLONG;
    if (!cur->dir()) return ENOTDIR;
    Node* child = cur->find(c);
    if (!child) {
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
    if (r->low != path && masked(L, r->low)) {
      r->parentResolved = true;
      return ENOENT;
    }
    int e = lower_->stat(r->low, &r->lowerAttr);
    if (e == ENOENT) r->parentResolved = r->lowerMissing = true;  // caller re-checks the parent
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
      Node* exact = cur->find(c);
      if (exact && !exact->whiteout()) {
        live = exact;
        liveName = exact->name();
      } else {
        if (exact) {
          dead = exact;
          deadName = exact->name();
        }
        for (Node* child : cur->kids()) {
          const std::string_view name = child->name();
          if (!sameName(name, c)) continue;
          if (!child->whiteout()) {
            live = child;
            liveName = name;
            break;
          }
          if (!dead) {
            dead = child;
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
  NodeRef n = detach(L, path, r);
  if (!n) return EIO;
  return attach(L, joinPath(parent, name), std::move(n));
}

// Makes sure every directory along `path` has a layer node (copying up directories of A as
// mirrors) and returns the last one with its merge source.
int Overlay::materializeDir(Layer& L, const std::string& path, Node** out, bool* lvOut,
                            std::string* lowOut) {
  if (masked(L, path)) return ENOENT;
  Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  for (auto c : components(path)) {
    if (Node* child = cur->find(c)) {
      if (child->whiteout()) return ENOENT;
      if (child->inode()->type == FileType::Symlink) return ELOOP;
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
    NodeRef node = Node::make(FileType::Directory, c);
    node->ino = a.ino;
    node->setSnap(a);
    node->links = 1;
    Node* raw = node.get();
    cur->put(c, std::move(node));
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
  NodeRef in = Node::make(a.type, name);
  in->ino = a.ino;
  in->setSnap(a);
  in->links = 1;
  if (a.type == FileType::Symlink) {
    e = lower_->readlink(r->low, &in->more().target);
    if (e) return e;
    in->set(Inode::kOwnMeta | Inode::kOwnXattrs);
  } else if (a.type == FileType::Regular) {
    // Files of one folder directory share that directory's path (LowerDir) and add their name.
    std::string ldir, base;
    splitLast(r->low, &ldir, &base);
    More& px = p->more();
    if (!px.lowerDir || px.lowerDir->path != ldir) {
      auto* d = new LowerDir();
      d->path = ldir;
      d->refs = 1;
      dropLowerDir(px.lowerDir);
      px.lowerDir = d;
    }
    in->setLower(r->low, px.lowerDir);
  } else if (a.type != FileType::Directory) {
    in->set(Inode::kOwnMeta | Inode::kOwnXattrs);  // fifos, sockets, devices: nothing in A
  }
  Node* raw = in.get();
  p->put(name, std::move(in));
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
  std::string lowerPath;
  bool inLower, ownMeta;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    *out = in->snap();
    inLower = in->lowerPath(&lowerPath);
    ownMeta = in->ownMeta();
  }
  if (inLower) {
    // Content (and, unless the layer took them over, attributes) still live in A.
    Attr a;
    if (lower_->stat(lowerPath, &a) == 0) {
      if (!ownMeta) {
        *out = a;
      } else {
        out->size = a.size;
        out->blocks = a.blocks;
      }
    }
  } else if (in->type == FileType::Regular || in->type == FileType::Symlink) {
    if (in->type == FileType::Symlink) out->size = in->target().size();
    out->blocks = (out->size + 511) / 512;
  }
  out->ino = in->ino;
  out->type = in->type;
  uint32_t links = in->links.load();
  out->nlink = links ? links : 1;
  out->layerObject = true;
}

void Overlay::nodeAttr(const Node* n, bool lv, const std::string& low, Attr* out) {
  const Inode* in = n->inode();
  if (in->type != FileType::Directory) return inodeAttr(in, out);
  Attr a;
  bool merged = lv && lower_->stat(low, &a) == 0 && a.type == FileType::Directory;
  uint32_t lowerLinks = a.nlink;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    *out = !in->ownMeta() && merged ? a : in->snap();
  }
  // The link count is 2 + subdirectories, which tools use to know when they have seen every
  // subdirectory. Exact when only one side has children: A's count while the layer has not
  // touched this directory's entries, the layer's own count for a directory A does not have
  // (or hides). When both contribute, counting would mean merging the listing on every
  // getattr; 1 instead is Linux's "not counted" (btrfs always, ext4 past 65,000), never wrong.
  if (merged && n->empty()) {
    out->nlink = lowerLinks;
  } else if (merged) {
    out->nlink = 1;
  } else {
#if defined(SHADOWFS_CHECKS)
    size_t counted = 0;
    for (const Node* c : n->kids()) counted += c->dir() ? 1 : 0;
    SFS_ASSERT(counted == n->subdirs());
#endif
    out->nlink = 2 + static_cast<uint32_t>(n->subdirs());
  }
  out->ino = in->ino;
  out->type = FileType::Directory;
  out->layerObject = true;
}

void Overlay::ensureOwnMeta(Inode* in, bool lv, const std::string& low) {
  std::string src;
  bool any;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (in->ownMeta()) return;
    any = in->lowerPath(&src);
    if (!any && lv) {
      src = low;
      any = true;
    }
  }
  Attr a;
  const bool ok = any && lower_->stat(src, &a) == 0;
  MetaLock m(in->mmu(), LockRank::Meta);
  if (in->ownMeta()) return;
  if (ok) in->setSnap(a);
  in->set(Inode::kOwnMeta);
}

// The place of `path`'s last name: its parent directory as a layer node (materialised) with
// the folder directory it merges with, and the name itself.
int Overlay::slotOf(Layer& L, const std::string& path, Slot* s) {
  std::string parent;
  splitLast(path, &parent, &s->name);
  return materializeDir(L, parent, &s->dir, &s->lv, &s->low);
}

bool Overlay::Slot::inLower(Overlay* ov) const { return ov->lowerPresent(lv, low, name); }

int Overlay::placeNew(Layer& L, const std::string& path, NodeRef inode, Node** out,
                      bool lowerAbsent) {
  Slot slot;
  std::string parent, name;
  splitLast(path, &parent, &name);
  if (name.empty()) return EEXIST;
  if (name.size() > kNameMax) return ENAMETOOLONG;
  // A masked name cannot be made: the agent's own object there would stand in for the
  // folder's secret, and a later apply or a view without the mask would mix the two.
  if (masked(L, path)) return EACCES;
  if (int e = writeRefused(path)) return e;  // git's control files (write_guard.h), and names
  if (guardedArrival(L, inode->type, std::string(), path)) return EPERM;  // a link in a repository
  if (completesRepository(L, path)) return EPERM;
  if (besideRepository(L, path)) return EPERM;  // hooks or config of a bare repository
  int e = slotOf(L, path, &slot);
  if (e) return e == ELOOP ? ENOTDIR : e;
  Node* p = slot.dir;
  Node* there = p->find(name);
  // The caller's resolve() found nothing there under this same lock: no second stat of A.
  const bool present = !(lowerAbsent && !there) && slot.inLower(this);
  if (there ? !there->whiteout() : present) return EEXIST;
  // A directory created where A has something (hidden by a whiteout) must not show A's
  // children.
  if (inode->type == FileType::Directory && present) inode->set(Inode::kOpaque);
  inode->inode()->links++;
  Node* raw = inode.get();
  p->put(name, std::move(inode));
  touch(p->inode(), true);
  if (out) *out = raw;
  return 0;
}

// A name of an inode went away: one link fewer, and (as on a real file system) the inode's
// ctime moves, which the object's other hard links show.
void dropNames(Overlay* ov, Node* n, void (Overlay::*touchFn)(Inode*, bool)) {
  if (!n || n->whiteout()) return;
  Inode* in = n->inode();
  if (in->links > 0) in->links--;
  if (in->type != FileType::Directory) (ov->*touchFn)(in, false);
  for (Node* c : n->kids()) dropNames(ov, c, touchFn);
}

bool Overlay::completesRepository(Layer& L, const std::string& path) {
  if (!guard_ || !guard_->git()) return false;
  // Every create passes here: the last name is looked at before anything is allocated.
  const size_t slash = path.rfind('/');
  const std::string_view last =
      slash == std::string::npos ? std::string_view(path) : std::string_view(path).substr(slash + 1);
  int which = -1;
  for (int i = 0; i < 3; ++i)
    if (nameMatches(last, kRepositoryNames[i])) which = i;
  if (which < 0) return false;
  std::string dir, name;
  splitLast(path, &dir, &name);
  if (WriteGuard::insideRepository(dir, ignoreCase_)) return false;
  for (int i = 0; i < 3; ++i)
    if (i != which && !present(L, joinPath(dir, kRepositoryNames[i]))) return false;
  return true;
}

bool Overlay::present(Layer& L, const std::string& path) {
  std::string buf;
  Res r;
  return resolve(L, canon(L, path, &buf), &r) == 0;  // any spelling, under IgnoreCase
}

bool Overlay::holdsRepository(Layer& L, const std::string& dir) {
  for (const char* n : kRepositoryNames)
    if (!present(L, joinPath(dir, n))) return false;
  return true;
}

namespace {
// The prefix of `path` made of its first `n` components ("" for none).
std::string firstComponents(const std::string& path, size_t n) {
  size_t end = 0;
  for (size_t i = 0; i < n; ++i) end = path.find('/', end + (i ? 1 : 0));
  return n == 0 ? std::string() : path.substr(0, end);
}
}  // namespace

bool Overlay::besideRepository(Layer& L, const std::string& path) {
  // Every create passes here: the names are scanned before anything is allocated.
  if (!guard_ || !guard_->git() || path.empty() ||
      !WriteGuard::mayWriteRepository(path, ignoreCase_))
    return false;
  // The directories whose repository `path` would write: the one above each `hooks` component,
  // the parent of a last name `config` or `config.worktree`, and the directory above
  // `objects/info/alternates` (or `http-alternates`).
  const auto c = components(path);
  const size_t n = c.size();
  for (size_t i = 0; i < n; ++i) {
    const bool last = i + 1 == n;
    if (nameMatches(c[i], "hooks") ||
        (last && (nameMatches(c[i], "config") || nameMatches(c[i], "config.worktree")))) {
      if (holdsRepository(L, firstComponents(path, i))) return true;
    }
  }
  if (n >= 3 && (nameMatches(c[n - 1], "alternates") || nameMatches(c[n - 1], "http-alternates")) &&
      nameMatches(c[n - 2], "info") && nameMatches(c[n - 3], "objects"))
    return holdsRepository(L, firstComponents(path, n - 3));
  return false;
}

bool Overlay::objectsOfRepository(Layer& L, const std::string& path) {
  if (!guard_ || !guard_->git()) return false;
  const auto c = components(path);
  const size_t n = c.size();
  if (n >= 1 && nameMatches(c[n - 1], "objects")) return holdsRepository(L, firstComponents(path, n - 1));
  if (n >= 2 && nameMatches(c[n - 1], "info") && nameMatches(c[n - 2], "objects"))
    return holdsRepository(L, firstComponents(path, n - 2));
  return false;
}

namespace {
// Whether the layer's node `n` shows anything of its own: an object other than a directory, or a
// directory that hides the folder's (opaque, moved) or holds such a thing. A directory the layer
// only mirrors (after its own changes were reverted) shows the folder's.
bool carries(const Node* n) {
  if (n->whiteout()) return false;
  if (!n->dir() || n->opaque() || n->redirected()) return true;
  for (const Node* k : n->kids())
    if (carries(k)) return true;
  return false;
}
}  // namespace

bool Overlay::holdsControl(const Node* dir) const {
  for (const Node* k : dir->kids()) {
    if (k->whiteout()) continue;
    const std::string_view name = k->name();
    if (nameMatches(name, "hooks") || nameMatches(name, "config") ||
        nameMatches(name, "config.worktree")) {
      if (carries(k)) return true;
      continue;
    }
    if (!nameMatches(name, "objects") || !k->dir()) continue;
    for (const Node* info : k->kids()) {
      if (info->whiteout() || !info->dir() || !nameMatches(info->name(), "info")) continue;
      for (const Node* a : info->kids())
        if (!a->whiteout() &&
            (nameMatches(a->name(), "alternates") || nameMatches(a->name(), "http-alternates")))
          return true;
    }
  }
  return false;
}

bool Overlay::revivesRepository(Layer& L, const std::string& path, const Node* dir) {
  if (!guard_ || !guard_->git()) return false;
  std::string parent, name;
  splitLast(path, &parent, &name);
  // Only a deletion of the layer's brings a name back (anything else there shows already).
  bool deleted = false;
  for (const Node* k : dir->kids())
    if (nameMatches(k->name(), name) && k->whiteout()) deleted = true;
  if (!deleted || WriteGuard::insideRepository(parent, ignoreCase_)) return false;
  // Nothing comes back where the folder has nothing (after an apply wrote the deletion). Under
  // IgnoreCase the folder may spell it otherwise: taken as there.
  if (!ignoreCase_ && !lowerPresent(true, parent, name)) return false;
  int others = 0, which = -1;
  for (int i = 0; i < 3; ++i) {
    if (nameMatches(name, kRepositoryNames[i])) which = i;
    else if (present(L, joinPath(parent, kRepositoryNames[i]))) ++others;
  }
  if (which < 0 || others != 2) return false;
  if (holdsControl(dir)) return true;
  for (const Node* k : dir->kids())
    if (holdsSpecial(k)) return true;
  return false;
}

bool Overlay::beneathRepository(Layer& L, const std::string& path) {
  const size_t n = components(path).size();
  for (size_t i = 0; i < n; ++i)
    if (holdsRepository(L, firstComponents(path, i))) return true;
  return false;
}

bool Overlay::holdsSpecial(const Node* n) {
  if (n->whiteout()) return false;
  const FileType t = n->inode()->type;
  if (t != FileType::Regular && t != FileType::Directory) return true;
  if (t != FileType::Directory) return false;
  if (n->redirected()) return true;
  for (const Node* k : n->kids())
    if (holdsSpecial(k)) return true;
  return false;
}

bool Overlay::guardedBeside(Layer& L, const std::string& asked) {
  if (!guard_ || !guard_->git() || !WriteGuard::mayWriteRepository(asked, ignoreCase_))
    return false;
  ReadLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  return besideRepository(L, canon(L, asked, &cbuf));
}

// Removes whatever is at `path` (already known to exist): a whiteout where A has something.
int Overlay::removeAt(Layer& L, const std::string& path) {
  if (int e = writeRefused(path)) return e;
  Slot slot;
  if (int e = slotOf(L, path, &slot)) return e;
  Node* p = slot.dir;
  Node* there = p->find(slot.name);
  if (there) dropNames(this, there, &Overlay::touch);
  if (slot.inLower(this)) {
    p->put(slot.name, Node::makeWhiteout(slot.name));
  } else if (there) {
    p->take(slot.name);
  }
  if (p->ownMeta()) touch(p, true);
  return 0;
}


// Takes the object at `path` out of the tree (leaving a whiteout where A has something) and
// returns it as a free-standing node. A directory that merged with A keeps doing so through
// an explicit redirect; one that has nothing in A becomes opaque.
NodeRef Overlay::detach(Layer& L, const std::string& path, Res& r) {
  Node* n;
  if (materializeNode(L, path, &n, &r)) return NodeRef();
  if (n->dir() && !n->opaque() && !n->redirected()) {
    Attr a;
    if (r.lv && lower_->stat(r.low, &a) == 0 && a.type == FileType::Directory) {
      n->more().redirect = r.low;
      ensureOwnMeta(n, true, r.low);
    } else {
      n->set(Inode::kOpaque);
    }
  }
  Slot slot;
  if (slotOf(L, path, &slot)) return NodeRef();
  Node* p = slot.dir;
  NodeRef out = p->take(slot.name);
  if (!out) return out;
  if (slot.inLower(this)) p->put(slot.name, Node::makeWhiteout(slot.name));
  touch(p, true);
  touch(out->inode(), false);
  return out;
}

int Overlay::attach(Layer& L, const std::string& path, NodeRef n) {
  Slot slot;
  if (int e = slotOf(L, path, &slot)) return e;
  Node* p = slot.dir;
  // Renaming over a file: its other hard links (if any) see its ctime move.
  if (Node* there = p->find(slot.name)) dropNames(this, there, &Overlay::touch);
  if (n->dir() && !n->redirected() && slot.inLower(this)) n->set(Inode::kOpaque);
  p->put(slot.name, std::move(n));
  touch(p, true);
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
      std::string pp, pn;
      splitLast(prefix, &pp, &pn);
      e = placeNew(L, prefix, newInode(FileType::Directory, 0755, *create, pn), nullptr);
      if (e) return e;
      continue;
    }
    if (e) return e;
    FileType t = pr.node ? pr.node->inode()->type : pr.lowerAttr.type;
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
  const Inode* in = r.node->inode();
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (in->lowerPath(src)) return 0;
  }
  if (in->type == FileType::Directory && r.lv) {
    *src = r.low;
    return 0;
  }
  return ENODATA;
}

int Overlay::planList(Layer& L, const std::string& path, ListPlan* plan, bool masked) {
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (masked && L.mask) {
    plan->mask = L.mask;
    plan->dir = path;
  }
  if (!r.node) {
    if (r.lowerAttr.type != FileType::Directory) return ENOTDIR;
    plan->lowerOnly = plan->readLower = true;
    plan->low = r.low;
    plan->ino = r.lowerAttr.ino;
    return 0;
  }
  if (!r.node->dir()) return ENOTDIR;
  plan->ino = r.node->inode()->ino;
  plan->readLower = r.lv;
  plan->low = r.low;
  for (const Node* c : r.node->kids()) {
    const std::string_view name = c->name();
    if (r.lv) plan->hidden.push_back(ignoreCase_ ? foldName(name) : std::string(name));
    if (!c->whiteout() && !(plan->mask && plan->mask->hides(joinPath(path, name))))
      plan->own.push_back(DirEntry{std::string(name), c->inode()->ino, c->inode()->type});
  }
  // Case-insensitive names: the layer's names hide the folder's in any case (folded, sorted).
  if (ignoreCase_) std::sort(plan->hidden.begin(), plan->hidden.end());
  return 0;
}

int Overlay::runList(const ListPlan& plan, std::vector<DirEntry>* out) {
  out->clear();
  if (plan.mask) {
    // The folder's names the mask hides, at the listed path or where the folder's directory
    // is (a directory the layer renamed).
    const PathMask& m = *plan.mask;
    auto masks = [&](const DirEntry& d) {
      return m.hides(joinPath(plan.dir, d.name)) ||
             (plan.low != plan.dir && m.hides(joinPath(plan.low, d.name)));
    };
    if (plan.lowerOnly) {
      int e = lower_->readdir(plan.low, out);
      if (e) return e;
      out->erase(std::remove_if(out->begin(), out->end(), masks), out->end());
      return 0;
    }
    if (plan.readLower) {
      std::vector<DirEntry> ls;
      if (lower_->readdir(plan.low, &ls) == 0) {
        for (auto& d : ls) {
          if (masks(d)) continue;
          const std::string key = ignoreCase_ ? foldName(d.name) : d.name;
          if (!std::binary_search(plan.hidden.begin(), plan.hidden.end(), key))
            out->push_back(std::move(d));
        }
      }
    }
    out->insert(out->end(), plan.own.begin(), plan.own.end());
    return 0;
  }
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