// Overlay semantics: path resolution through the layer tree, copy-up, whiteouts, merged
// directories and rename. See overlay.h for the model.
#include "overlay.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>

#include "path.h"
#include "spill.h"

namespace shadowfs {

struct Inode {
  uint64_t ino = 0;
  FileType type = FileType::Regular;
  // When false, attributes mirror A live (files: `lowerPath`; directories: their merge source)
  // and `snap` is only a fallback for when A's object has gone.
  bool ownMeta = false;
  // Regular files whose content still lives in A.
  std::optional<std::string> lowerPath;
  Attr snap;
  std::string data;  // file content once copied up (unless spilled), or the symlink target
  std::unique_ptr<SpillFile> spill;  // content of a file that outgrew the spill threshold
  uint64_t spillSize = 0;
  bool ownXattrs = false;
  std::map<std::string, std::string> xattrs;
  uint32_t links = 0;  // layer Nodes that point here (hard links)
};

struct Node {
  std::shared_ptr<Inode> inode;  // null: whiteout
  bool opaque = false;           // directories: hide A's directory at this place
  std::optional<std::string> redirect;  // directories: merge with this A directory instead
  std::map<std::string, std::unique_ptr<Node>, std::less<>> children;

  bool whiteout() const { return !inode; }
  bool dir() const { return inode && inode->type == FileType::Directory; }
};

struct Layer : std::enable_shared_from_this<Layer> {
  std::string name;
  bool writable = true;
  std::unique_ptr<Node> root;
  // Inodes copied up from A, by A's inode number: a read-only handle opened on the pure-lower
  // file before the copy-up must see the new content.
  std::unordered_map<uint64_t, std::weak_ptr<Inode>> copied;
  int pins = 0;  // views showing this layer
};

// Result of resolving a path.
struct Overlay::Res {
  Node* node = nullptr;  // the layer node at the path (never a whiteout), or null
  bool lv = false;       // `low` names A's object merged at this position
  std::string low;
  Attr lowerAttr;        // when node is null: A's object
  bool parentResolved = false;  // the parent is a directory (for create after ENOENT)
};

namespace {

Timespec now() {
  auto t = std::chrono::system_clock::now().time_since_epoch();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t).count();
  return Timespec{ns / 1000000000, ns % 1000000000};
}

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

uint64_t contentSize(const Inode* in) { return in->spill ? in->spillSize : in->data.size(); }

void unlinkSubtree(Node* n) {
  if (!n || n->whiteout()) return;
  if (n->inode->links > 0) n->inode->links--;
  for (auto& [name, c] : n->children) unlinkSubtree(c.get());
}

}  // namespace

Overlay::Overlay(std::unique_ptr<LowerFs> lower, std::unique_ptr<SpillStore> spill,
                 uint64_t spillThreshold)
    : lower_(std::move(lower)), spill_(std::move(spill)), spillThreshold_(spillThreshold) {
  rootAttr_.type = FileType::Directory;
  rootAttr_.perm = 0755;
  lower_->stat("", &rootAttr_);
  none_ = std::make_shared<Layer>();
  none_->writable = false;
  none_->root = freshRoot();
}

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

Layer* Overlay::pick(Layer* view) {
  if (view) return view;
  return active_ ? active_.get() : none_.get();
}

Layer* Overlay::byName(const std::string& name) {
  auto it = layers_.find(name);
  return it == layers_.end() ? nullptr : it->second.get();
}

Overlay::~Overlay() = default;

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
  s.atime = s.mtime = s.ctime = now();
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
    if (!cur->dir()) return ENOTDIR;
    auto it = cur->children.find(c);
    if (it == cur->children.end()) {
      cur = nullptr;
      if (!lv) {
        r->parentResolved = last;
        return ENOENT;
      }
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
    e = lower_->readlink(r->low, &in->data);
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

void Overlay::nodeAttr(const Node* n, bool lv, const std::string& low, Attr* out) {
  const Inode* in = n->inode.get();
  Attr a;
  if (in->type == FileType::Directory) {
    bool merged = lv && lower_->stat(low, &a) == 0 && a.type == FileType::Directory;
    uint32_t lowerLinks = a.nlink;
    if (!in->ownMeta && merged) {
      *out = a;
    } else {
      *out = in->snap;
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
    return;
  }
  if (in->lowerPath) {
    bool ok = lower_->stat(*in->lowerPath, &a) == 0;
    if (!in->ownMeta && ok) {
      *out = a;
    } else {
      *out = in->snap;
      if (ok) {
        out->size = a.size;
        out->blocks = a.blocks;
      }
    }
  } else {
    *out = in->snap;
    if (in->type == FileType::Regular || in->type == FileType::Symlink) {
      out->size = contentSize(in);
      out->blocks = (out->size + 511) / 512;
    }
  }
  out->ino = in->ino;
  out->type = in->type;
  out->nlink = in->links ? in->links : 1;
}

void Overlay::ensureOwnMeta(Inode* in, bool lv, const std::string& low) {
  if (in->ownMeta) return;
  Attr a;
  const std::string* src = in->lowerPath ? &*in->lowerPath : (lv ? &low : nullptr);
  if (src && lower_->stat(*src, &a) == 0) {
    uint64_t ino = in->ino;
    in->snap = a;
    in->snap.ino = ino;
  }
  in->ownMeta = true;
}

int Overlay::copyUpContent(Inode* in, bool keepContent) {
  if (!in->lowerPath) return 0;
  ensureOwnMeta(in, false, std::string());
  const std::string src = *in->lowerPath;
  in->lowerPath.reset();
  in->data.clear();
  in->spill.reset();
  in->spillSize = 0;
  if (keepContent) {
    Attr a;
    int e = lower_->stat(src, &a);
    if (e == 0 && spill_ && a.size > spillThreshold_) {
      // Too big for memory: copy A's file straight into a spill file, a chunk at a time.
      LowerHandle h = -1;
      e = lower_->open(src, &h);
      std::vector<char> buf(1 << 20);
      for (uint64_t off = 0; e == 0;) {
        size_t got = 0;
        e = lower_->pread(h, buf.data(), buf.size(), off, &got);
        if (e || got == 0) break;
        e = contentWrite(in, buf.data(), got, off);
        off += got;
      }
      if (h >= 0) lower_->close(h);
    } else if (e == 0) {
      e = lower_->readAll(src, &in->data);
    }
    if (e) {
      in->lowerPath = src;  // keep serving A's file rather than an empty one
      return e == ENOENT ? EIO : e;
    }
  }
  in->snap.size = contentSize(in);
  return 0;
}

int Overlay::spillOut(Inode* in) {
  if (in->spill || !spill_) return 0;
  std::unique_ptr<SpillFile> f;
  int e = spill_->create(&f);
  if (e) return e;
  if (!in->data.empty()) {
    e = f->pwrite(in->data.data(), in->data.size(), 0);
    if (e) return e;
  }
  in->spillSize = in->data.size();
  in->spill = std::move(f);
  std::string().swap(in->data);
  return 0;
}

int Overlay::contentWrite(Inode* in, const char* buf, size_t size, uint64_t off) {
  const uint64_t end = off + size;
  if (!in->spill && end > spillThreshold_) {
    int e = spillOut(in);
    if (e) return e;
  }
  if (in->spill) {
    int e = in->spill->pwrite(buf, size, off);
    if (e) return e;
    in->spillSize = std::max(in->spillSize, end);
    return 0;
  }
  if (end > in->data.size()) in->data.resize(end);
  if (size) std::memcpy(&in->data[off], buf, size);
  return 0;
}

int Overlay::contentTruncate(Inode* in, uint64_t size) {
  if (!in->spill && size > spillThreshold_) {
    int e = spillOut(in);
    if (e) return e;
  }
  if (in->spill) {
    int e = in->spill->truncate(size);
    if (e) return e;
    in->spillSize = size;
    return 0;
  }
  in->data.resize(size);
  return 0;
}

int Overlay::contentRead(const Inode* in, char* buf, size_t size, uint64_t off, size_t* got) {
  *got = 0;
  const uint64_t total = contentSize(in);
  if (off >= total) return 0;
  size = static_cast<size_t>(std::min<uint64_t>(size, total - off));
  if (in->spill) return in->spill->pread(buf, size, off, got);
  std::memcpy(buf, in->data.data() + off, size);
  *got = size;
  return 0;
}

int Overlay::contentAssign(Inode* in, const std::string& data) {
  in->spill.reset();
  in->spillSize = 0;
  in->data.clear();
  if (data.size() > spillThreshold_ && spill_) return contentWrite(in, data.data(), data.size(), 0);
  in->data = data;
  return 0;
}

int Overlay::placeNew(Layer& L, const std::string& path, std::shared_ptr<Inode> inode, Node** out) {
  std::string parent, name;
  splitLast(path, &parent, &name);
  if (name.empty()) return EEXIST;
  if (name.size() > kNameMax) return ENAMETOOLONG;
  Node* p;
  bool plv;
  std::string plow;
  int e = materializeDir(L, parent, &p, &plv, &plow);
  if (e) return e == ELOOP ? ENOTDIR : e;
  auto it = p->children.find(name);
  const bool present = lowerPresent(plv, plow, name);
  if (it != p->children.end() ? !it->second->whiteout() : present) return EEXIST;
  auto node = std::make_unique<Node>();
  // A directory created where A has something (hidden by a whiteout) must not show A's
  // children.
  node->opaque = inode->type == FileType::Directory && present;
  inode->links++;
  node->inode = std::move(inode);
  Node* raw = node.get();
  p->children[name] = std::move(node);
  p->inode->snap.mtime = p->inode->snap.ctime = now();
  if (out) *out = raw;
  return 0;
}

// Removes whatever is at `path` (already known to exist): a whiteout where A has something.
int Overlay::removeAt(Layer& L, const std::string& path) {
  std::string parent, name;
  splitLast(path, &parent, &name);
  Node* p;
  bool plv;
  std::string plow;
  int e = materializeDir(L, parent, &p, &plv, &plow);
  if (e) return e;
  auto it = p->children.find(name);
  if (it != p->children.end()) {
    unlinkSubtree(it->second.get());
    if (it->second->inode) it->second->inode->snap.ctime = now();
  }
  if (lowerPresent(plv, plow, name)) {
    p->children[name] = makeWhiteout();
  } else if (it != p->children.end()) {
    p->children.erase(it);
  }
  if (p->inode->ownMeta) p->inode->snap.mtime = p->inode->snap.ctime = now();
  return 0;
}

int Overlay::mergedList(const Res& r, std::vector<DirEntry>* out) {
  out->clear();
  if (!r.node) {
    if (r.lowerAttr.type != FileType::Directory) return ENOTDIR;
    return lower_->readdir(r.low, out);
  }
  if (!r.node->dir()) return ENOTDIR;
  const auto& kids = r.node->children;
  if (r.lv) {
    std::vector<DirEntry> ls;
    if (lower_->readdir(r.low, &ls) == 0) {
      out->reserve(ls.size() + kids.size());
      for (auto& d : ls) {
        if (kids.find(d.name) == kids.end()) out->push_back(std::move(d));
      }
    }
  }
  for (auto& [name, c] : kids) {
    if (c->whiteout()) continue;
    out->push_back(DirEntry{name, c->inode->ino, c->inode->type});
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// File-system operations

int Overlay::getattr(Layer* view, const std::string& path, Attr* out,
                     std::shared_ptr<Layer>* used) {
  std::shared_lock lock(mu_);
  Layer& L = *pick(view);
  if (used) *used = L.shared_from_this();
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

int Overlay::readdir(Layer* view, const std::string& path, std::vector<DirEntry>* out) {
  std::shared_lock lock(mu_);
  Layer& L = *pick(view);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  return mergedList(r, out);
}

int Overlay::readlink(Layer* view, const std::string& path, std::string* out) {
  std::shared_lock lock(mu_);
  Layer& L = *pick(view);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (r.node) {
    if (r.node->inode->type != FileType::Symlink) return EINVAL;
    *out = r.node->inode->data;
    return 0;
  }
  if (r.lowerAttr.type != FileType::Symlink) return EINVAL;
  return lower_->readlink(r.low, out);
}

int Overlay::mknod(Layer* view, const std::string& path, FileType type, uint32_t perm, uint64_t rdev,
                   const Caller& who, Attr* out) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  auto in = newInode(type, perm, who);
  in->snap.rdev = rdev;
  Node* n;
  int e = placeNew(L, path, in, &n);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::mkdir(Layer* view, const std::string& path, uint32_t perm, const Caller& who, Attr* out) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  Node* n;
  int e = placeNew(L, path, newInode(FileType::Directory, perm, who), &n);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::symlink(Layer* view, const std::string& target, const std::string& path, const Caller& who,
                     Attr* out) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  auto in = newInode(FileType::Symlink, 0777, who);
  in->data = target;
  Node* n;
  int e = placeNew(L, path, in, &n);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::link(Layer* view, const std::string& from, const std::string& to, Attr* out) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  Res r;
  Node* src;
  int e = materializeNode(L, from, &src, &r);
  if (e) return e;
  if (src->dir()) return EPERM;
  std::shared_ptr<Inode> in = src->inode;
  Node* n;
  e = placeNew(L, to, in, &n);
  if (e) return e;
  ensureOwnMeta(in.get(), false, std::string());
  in->snap.ctime = now();
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::unlink(Layer* view, const std::string& path) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  FileType t = r.node ? r.node->inode->type : r.lowerAttr.type;
  if (t == FileType::Directory) return EISDIR;
  return removeAt(L, path);
}

int Overlay::rmdir(Layer* view, const std::string& path) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  if (path.empty()) return EBUSY;
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  std::vector<DirEntry> ls;
  e = mergedList(r, &ls);
  if (e) return e;
  if (!ls.empty()) return ENOTEMPTY;
  return removeAt(L, path);
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
      if (!n->inode->ownMeta) ensureOwnMeta(n->inode.get(), true, r.low);
    } else {
      n->opaque = true;
    }
  }
  std::string parent, name;
  splitLast(path, &parent, &name);
  Node* p;
  bool plv;
  std::string plow;
  if (materializeDir(L, parent, &p, &plv, &plow)) return nullptr;
  auto it = p->children.find(name);
  std::unique_ptr<Node> out = std::move(it->second);
  if (lowerPresent(plv, plow, name)) {
    it->second = makeWhiteout();
  } else {
    p->children.erase(it);
  }
  Timespec t = now();
  p->inode->snap.mtime = p->inode->snap.ctime = t;
  out->inode->snap.ctime = t;
  return out;
}

int Overlay::attach(Layer& L, const std::string& path, std::unique_ptr<Node> n) {
  std::string parent, name;
  splitLast(path, &parent, &name);
  Node* p;
  bool plv;
  std::string plow;
  int e = materializeDir(L, parent, &p, &plv, &plow);
  if (e) return e;
  auto it = p->children.find(name);
  if (it != p->children.end()) unlinkSubtree(it->second.get());
  if (n->dir() && !n->redirect && lowerPresent(plv, plow, name)) n->opaque = true;
  p->children[name] = std::move(n);
  p->inode->snap.mtime = p->inode->snap.ctime = now();
  return 0;
}

int Overlay::rename(Layer* view, const std::string& from, const std::string& to, uint32_t flags) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  if ((flags & kRenameNoReplace) && (flags & kRenameExchange)) return EINVAL;
  if (from.empty() || to.empty()) return EBUSY;
  Res rf;
  int e = resolve(L, from, &rf);
  if (e) return e;
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
    FileType pt = rp.node ? rp.node->inode->type : rp.lowerAttr.type;
    if (pt != FileType::Directory) return ENOTDIR;
  }
  const bool toExists = et == 0;
  if (from == to) return 0;
  const FileType ft = rf.node ? rf.node->inode->type : rf.lowerAttr.type;
  if ((flags & kRenameNoReplace) && toExists) return EEXIST;
  // Two names of one file (hard links): POSIX says succeed and do nothing. Linux's VFS stops
  // this before a path-based backend sees it only when both names are one kernel inode.
  if (toExists && ft != FileType::Directory) {
    const bool sameInLayer = rf.node && rt.node && rf.node->inode == rt.node->inode;
    const bool sameInLower = !rf.node && !rt.node && rf.lowerAttr.nlink > 1 &&
                             rf.lowerAttr.ino == rt.lowerAttr.ino;
    if (sameInLayer || sameInLower) return 0;
  }
  if (flags & kRenameExchange) {
    if (!toExists) return ENOENT;
    if (isInside(from, to)) return EINVAL;
    Res a, b;
    auto na = detach(L, from, a);
    if (!na) return EIO;
    auto nb = detach(L, to, b);
    if (!nb) return EIO;
    e = attach(L, to, std::move(na));
    if (e) return e;
    return attach(L, from, std::move(nb));
  }
  if (toExists) {
    const FileType tt = rt.node ? rt.node->inode->type : rt.lowerAttr.type;
    const bool fromDir = ft == FileType::Directory, toDir = tt == FileType::Directory;
    if (fromDir && !toDir) return ENOTDIR;
    if (!fromDir && toDir) return EISDIR;
    if (toDir) {
      if (isInside(from, to)) return ENOTEMPTY;
      std::vector<DirEntry> ls;
      e = mergedList(rt, &ls);
      if (e) return e;
      if (!ls.empty()) return ENOTEMPTY;
    }
    // Two names of one inode: rename(2) does nothing.
    if (rf.node && rt.node && rf.node->inode == rt.node->inode) return 0;
  }
  Res a;
  auto na = detach(L, from, a);
  if (!na) return EIO;
  return attach(L, to, std::move(na));
}

int Overlay::setattr(Layer* view, const std::string& path, Handle* h, uint32_t mask, const Attr& v, Attr* out) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  Inode* in = nullptr;
  Node* n = nullptr;
  Res r;
  if (h && h->inode) {
    in = h->inode.get();
  } else {
    int e = materializeNode(L, path, &n, &r);
    if (e) return e;
    in = n->inode.get();
  }
  ensureOwnMeta(in, r.lv, r.low);
  Timespec t = now();
  if (mask & kSetSize) {
    if (in->type == FileType::Directory) return EISDIR;
    if (in->type != FileType::Regular) return EINVAL;
    int e = copyUpContent(in, v.size != 0);
    if (e) return e;
    e = contentTruncate(in, v.size);
    if (e) return e;
    in->snap.mtime = t;
  }
  if (mask & kSetMode) in->snap.perm = v.perm & 07777;
  if (mask & kSetUid) in->snap.uid = v.uid;
  if (mask & kSetGid) in->snap.gid = v.gid;
  if (mask & kSetAtimeNow) in->snap.atime = t;
  else if (mask & kSetAtime) in->snap.atime = v.atime;
  if (mask & kSetMtimeNow) in->snap.mtime = t;
  else if (mask & kSetMtime) in->snap.mtime = v.mtime;
  in->snap.ctime = (mask & kSetCtime) ? v.ctime : t;
  if (n) {
    nodeAttr(n, r.lv, r.low, out);
  } else {
    Node tmp;
    tmp.inode = h->inode;
    nodeAttr(&tmp, false, std::string(), out);
  }
  return 0;
}

int Overlay::openLocked(Layer& L, Node* n, const OpenIntent& intent, Handle** out, Attr* attr) {
  Inode* in = n->inode.get();
  if (in->type == FileType::Directory) return EISDIR;
  auto h = std::make_unique<Handle>();
  h->inode = n->inode;
  h->layer = L.weak_from_this();
  h->writable = intent.write;
  if (intent.write || intent.truncate) {
    int e = copyUpContent(in, !intent.truncate);
    if (e) return e;
    if (intent.truncate && contentSize(in) != 0) {
      e = contentTruncate(in, 0);
      if (e) return e;
      in->snap.mtime = in->snap.ctime = now();
    }
    if (in->ino < kFirstLayerIno) L.copied[in->ino] = n->inode;
  } else if (in->lowerPath) {
    int e = lower_->open(*in->lowerPath, &h->lower);
    if (e) return e;
  }
  nodeAttr(n, false, std::string(), attr);
  *out = h.release();
  return 0;
}

int Overlay::open(Layer* view, const std::string& path, const OpenIntent& intent, Handle** out, Attr* attr) {
  if (!intent.write && !intent.truncate) {
    std::shared_lock lock(mu_);
    Layer& L = *pick(view);
    Res r;
    int e = resolve(L, path, &r);
    if (e) return e;
    if (r.node) {
      if (r.node->dir()) return EISDIR;
      return openLocked(L, r.node, intent, out, attr);
    }
    if (r.lowerAttr.type == FileType::Directory) return EISDIR;
    auto h = std::make_unique<Handle>();
    e = lower_->open(r.low, &h->lower);
    if (e) return e;
    h->lowerIno = r.lowerAttr.ino;
    h->layer = L.weak_from_this();
    *attr = r.lowerAttr;
    *out = h.release();
    return 0;
  }
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  Res r;
  Node* n;
  int e = materializeNode(L, path, &n, &r);
  if (e) return e;
  return openLocked(L, n, intent, out, attr);
}

int Overlay::create(Layer* view, const std::string& path, uint32_t perm, const OpenIntent& intent,
                    const Caller& who, Handle** out, Attr* attr) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  Res r;
  int e = resolve(L, path, &r);
  if (e == 0) {
    if (intent.exclusive) return EEXIST;
    Node* n;
    e = materializeNode(L, path, &n, &r);
    if (e) return e;
    return openLocked(L, n, intent, out, attr);
  }
  if (e != ENOENT) return e;
  Node* n;
  e = placeNew(L, path, newInode(FileType::Regular, perm, who), &n);
  if (e) return e;
  return openLocked(L, n, intent, out, attr);
}

int Overlay::read(Handle* h, char* buf, size_t size, uint64_t off, size_t* got) {
  *got = 0;
  std::shared_ptr<Inode> in = h->inode;
  std::shared_lock lock(mu_);
  if (!in) {
    if (auto layer = h->layer.lock(); layer && !layer->copied.empty()) {
      auto it = layer->copied.find(h->lowerIno);
      if (it != layer->copied.end()) in = it->second.lock();
    }
  }
  if (in && !in->lowerPath) {
    if (in->type != FileType::Regular) return EINVAL;
    return contentRead(in.get(), buf, size, off, got);
  }
  lock.unlock();
  if (h->lower < 0) return EIO;
  return lower_->pread(h->lower, buf, size, off, got);
}

int Overlay::write(Handle* h, const char* buf, size_t size, uint64_t off) {
  std::unique_lock lock(mu_);
  Inode* in = h->inode.get();
  if (!in || !h->writable) return EBADF;
  if (in->lowerPath) {
    int e = copyUpContent(in, true);
    if (e) return e;
  }
  int e = contentWrite(in, buf, size, off);
  if (e) return e;
  in->snap.mtime = in->snap.ctime = now();
  return 0;
}

int Overlay::fgetattr(Handle* h, Attr* out) {
  std::shared_lock lock(mu_);
  std::shared_ptr<Inode> in = h->inode;
  if (!in) {
    // A file of A opened for reading: once its layer copied it up, the copy is what it shows.
    if (auto layer = h->layer.lock(); layer && !layer->copied.empty()) {
      auto it = layer->copied.find(h->lowerIno);
      if (it != layer->copied.end()) in = it->second.lock();
    }
  }
  if (!in) return h->lower >= 0 ? lower_->fstat(h->lower, out) : ENOENT;
  Node tmp;
  tmp.inode = in;
  nodeAttr(&tmp, false, std::string(), out);
  return 0;
}

void Overlay::release(Handle* h) {
  if (h->lower >= 0) lower_->close(h->lower);
  delete h;
}

int Overlay::xattrSource(const Res& r, std::string* src) const {
  if (!r.node) {
    *src = r.low;
    return 0;
  }
  const Inode* in = r.node->inode.get();
  if (in->lowerPath) {
    *src = *in->lowerPath;
    return 0;
  }
  if (in->type == FileType::Directory && r.lv) {
    *src = r.low;
    return 0;
  }
  return ENODATA;
}

int Overlay::getxattr(Layer* view, const std::string& path, const std::string& name, std::string* value) {
  std::shared_lock lock(mu_);
  Layer& L = *pick(view);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (r.node && r.node->inode->ownXattrs) {
    auto& m = r.node->inode->xattrs;
    auto it = m.find(name);
    if (it == m.end()) return ENODATA;
    *value = it->second;
    return 0;
  }
  std::string src;
  if (xattrSource(r, &src)) return ENODATA;
  return lower_->getxattr(src, name, value);
}

int Overlay::listxattr(Layer* view, const std::string& path, std::vector<std::string>* names) {
  std::shared_lock lock(mu_);
  Layer& L = *pick(view);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  names->clear();
  if (r.node && r.node->inode->ownXattrs) {
    for (auto& [k, v] : r.node->inode->xattrs) names->push_back(k);
    return 0;
  }
  std::string src;
  if (xattrSource(r, &src)) return 0;
  return lower_->listxattr(src, names);
}

int Overlay::setxattr(Layer* view, const std::string& path, const std::string& name, const std::string& value,
                      int flags) {
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  if (!L.writable) return EROFS;
  Res r;
  Node* n;
  int e = materializeNode(L, path, &n, &r);
  if (e) return e;
  Inode* in = n->inode.get();
  if (!in->ownXattrs) {
    std::string src;
    if (xattrSource(r, &src) == 0) {
      std::vector<std::string> names;
      lower_->listxattr(src, &names);
      for (auto& k : names) {
        std::string v;
        if (lower_->getxattr(src, k, &v) == 0) in->xattrs[k] = v;
      }
    }
    in->ownXattrs = true;
  }
  bool exists = in->xattrs.count(name) != 0;
  if ((flags & 1) && exists) return EEXIST;
  if ((flags & 2) && !exists) return ENODATA;
  in->xattrs[name] = value;
  ensureOwnMeta(in, r.lv, r.low);
  in->snap.ctime = now();
  return 0;
}

int Overlay::removexattr(Layer* view, const std::string& path, const std::string& name) {
  std::string v;
  int e = getxattr(view, path, name, &v);
  if (e) return e;
  e = setxattr(view, path, name, v, 0);  // materialise and take ownership of the list
  if (e) return e;
  std::unique_lock lock(mu_);
  Layer& L = *pick(view);
  Res r;
  e = resolve(L, path, &r);
  if (e) return e;
  if (!r.node) return ENODATA;
  r.node->inode->xattrs.erase(name);
  return 0;
}

int Overlay::statfs(FsStats* out) { return lower_->statfs(out); }

// ---------------------------------------------------------------------------------------------
// Control operations

int Overlay::createLayer(const std::string& name) {
  if (name.empty()) return EINVAL;
  std::unique_lock lock(mu_);
  if (layers_.count(name)) return 0;
  auto L = std::make_shared<Layer>();
  L->name = name;
  L->root = freshRoot();
  layers_.emplace(name, std::move(L));
  return 0;
}

int Overlay::dropLayer(const std::string& name) {
  std::unique_lock lock(mu_);
  auto it = layers_.find(name);
  if (it == layers_.end()) return ENOENT;
  if (it->second == active_ || it->second->pins > 0) return EBUSY;
  layers_.erase(it);
  return 0;
}

int Overlay::cloneInode(const Inode& in, std::shared_ptr<Inode>* out) {
  auto c = std::make_shared<Inode>();
  c->ino = in.ino;
  c->type = in.type;
  c->ownMeta = in.ownMeta;
  c->lowerPath = in.lowerPath;
  c->snap = in.snap;
  c->data = in.data;
  c->ownXattrs = in.ownXattrs;
  c->xattrs = in.xattrs;
  if (in.spill) {
    std::vector<char> buf(1 << 20);
    for (uint64_t off = 0; off < in.spillSize;) {
      size_t got = 0;
      int e = in.spill->pread(buf.data(), buf.size(), off, &got);
      if (e) return e;
      if (got == 0) break;
      e = contentWrite(c.get(), buf.data(), got, off);
      if (e) return e;
      off += got;
    }
  }
  *out = std::move(c);
  return 0;
}

int Overlay::cloneLayer(const std::string& from, const std::string& to) {
  if (to.empty()) return EINVAL;
  std::unique_lock lock(mu_);
  Layer* src = byName(from);
  if (!src) return ENXIO;
  if (layers_.count(to)) return EEXIST;
  // Hard links stay hard links: one copy per inode, shared by the cloned nodes.
  std::map<const Inode*, std::shared_ptr<Inode>> copies;
  std::function<int(const Node&, Node*)> copy = [&](const Node& n, Node* out) -> int {
    out->opaque = n.opaque;
    out->redirect = n.redirect;
    if (n.inode) {
      auto it = copies.find(n.inode.get());
      if (it == copies.end()) {
        std::shared_ptr<Inode> c;
        int e = cloneInode(*n.inode, &c);
        if (e) return e;
        it = copies.emplace(n.inode.get(), std::move(c)).first;
      }
      out->inode = it->second;
      out->inode->links++;
    }
    for (auto& [name, child] : n.children) {
      auto c = std::make_unique<Node>();
      int e = copy(*child, c.get());
      if (e) return e;
      out->children.emplace(name, std::move(c));
    }
    return 0;
  };
  auto L = std::make_shared<Layer>();
  L->name = to;
  L->root = std::make_unique<Node>();
  int e = copy(*src->root, L->root.get());
  if (e) return e;
  for (auto& [ino, weak] : src->copied) {
    auto in = weak.lock();
    if (!in) continue;
    auto it = copies.find(in.get());
    if (it != copies.end()) L->copied[ino] = it->second;
  }
  layers_.emplace(to, std::move(L));
  return 0;
}

bool Overlay::hasLayer(const std::string& name) {
  std::shared_lock lock(mu_);
  return layers_.count(name) != 0;
}

std::vector<std::string> Overlay::layerNames() {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (auto& [name, l] : layers_) out.push_back(name);
  return out;
}

void Overlay::layerPaths(const Layer& L, std::vector<std::string>* out) {
  struct Walk {
    static void run(const Node* n, const std::string& base, std::vector<std::string>* out) {
      for (auto& [name, c] : n->children) {
        std::string p = joinPath(base, name);
        out->push_back(p);
        run(c.get(), p, out);
      }
    }
  };
  Walk::run(L.root.get(), std::string(), out);
}

int Overlay::activate(const std::string& name, std::vector<std::string>* changed) {
  // Exclusive: every file-system call that holds the lock finishes before the switch.
  std::unique_lock lock(mu_);
  std::shared_ptr<Layer> next;
  if (!name.empty()) {
    auto it = layers_.find(name);
    if (it == layers_.end()) return ENXIO;
    next = it->second;
  }
  if (next == active_) return 0;
  if (active_) layerPaths(*active_, changed);
  if (next) layerPaths(*next, changed);
  active_ = std::move(next);
  return 0;
}

std::shared_ptr<Layer> Overlay::current(Layer* view) {
  std::shared_lock lock(mu_);
  return pick(view)->shared_from_this();
}

std::string Overlay::activeLayer() {
  std::shared_lock lock(mu_);
  return active_ ? active_->name : std::string();
}

Layer* Overlay::pin(const std::string& name) {
  std::unique_lock lock(mu_);
  Layer* L = byName(name);
  if (L) L->pins++;
  return L;
}

void Overlay::unpin(Layer* layer) {
  std::unique_lock lock(mu_);
  if (layer && layer->pins > 0) layer->pins--;
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

int Overlay::putFile(const std::string& layer, const std::string& path, const std::string& data,
                     uint32_t perm, const Caller& who) {
  if (path.empty()) return EISDIR;
  std::unique_lock lock(mu_);
  Layer* lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
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
    auto in = newInode(FileType::Regular, perm, who);
    e = contentAssign(in.get(), data);
    if (e) return e;
    return placeNew(L, path, in, nullptr);
  }
  if (e) return e;
  FileType t = r.node ? r.node->inode->type : r.lowerAttr.type;
  if (t == FileType::Directory) return EISDIR;
  if (t == FileType::Symlink) return ELOOP;
  if (t != FileType::Regular) return EINVAL;
  Node* n;
  e = materializeNode(L, path, &n, &r);
  if (e) return e;
  Inode* in = n->inode.get();
  e = copyUpContent(in, false);
  if (e) return e;
  e = contentAssign(in, data);
  if (e) return e;
  in->snap.mtime = in->snap.ctime = now();
  if (in->ino < kFirstLayerIno) L.copied[in->ino] = n->inode;
  return 0;
}

int Overlay::remove(const std::string& layer, const std::string& path) {
  if (path.empty()) return EBUSY;
  std::unique_lock lock(mu_);
  Layer* lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
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

int Overlay::readFile(const std::string& layer, const std::string& path, std::string* out) {
  std::string lowerPath;
  {
    std::shared_lock lock(mu_);
    Layer* lp = byName(layer);
    if (!lp) return ENXIO;
    Layer& L = *lp;
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
    if (r.node && !r.node->inode->lowerPath) {
      const Inode* in = r.node->inode.get();
      out->resize(contentSize(in));
      size_t got = 0;
      int ce = contentRead(in, out->data(), out->size(), 0, &got);
      out->resize(got);
      return ce;
    }
    lowerPath = r.node ? *r.node->inode->lowerPath : r.low;
  }
  return lower_->readAll(lowerPath, out);
}

int Overlay::reset(const std::string& layer, std::vector<std::string>* paths) {
  std::unique_lock lock(mu_);
  Layer* lp = byName(layer);
  if (!lp) return ENXIO;
  layerPaths(*lp, paths);
  lp->root = freshRoot();
  lp->copied.clear();
  return 0;
}

int Overlay::changes(const std::string& layer, std::vector<Change>* out) {
  std::shared_lock lock(mu_);
  Layer* lp = byName(layer);
  if (!lp) return ENXIO;
  struct Walk {
    Overlay* self;
    std::vector<Change>* out;
    void run(const Node* n, const std::string& base, bool lv, const std::string& low) {
      for (auto& [name, c] : n->children) {
        std::string path = joinPath(base, name);
        std::string natural = lv ? joinPath(low, name) : std::string();
        Attr la;
        const bool present = lv && self->lower_->stat(natural, &la) == 0;
        if (c->whiteout()) {
          if (present) out->push_back({path, Change::Kind::Deleted, la.type});
          continue;
        }
        const Inode* in = c->inode.get();
        if (in->type == FileType::Directory) {
          bool clv = lv;
          std::string clow = low;
          descend(c.get(), name, &clv, &clow);
          if (!present) {
            out->push_back({path, Change::Kind::Added, in->type});
          } else if (la.type != FileType::Directory || c->opaque || c->redirect) {
            out->push_back({path, Change::Kind::Modified, in->type});
          } else if (in->ownMeta) {
            out->push_back({path, Change::Kind::Metadata, in->type});
          }
          run(c.get(), path, clv, clow);
          continue;
        }
        Change::Kind k;
        if (!present) {
          k = Change::Kind::Added;
        } else if (la.type != in->type) {
          k = Change::Kind::Modified;
        } else if (in->lowerPath && *in->lowerPath == natural) {
          k = Change::Kind::Metadata;
        } else if (in->type == FileType::Symlink) {
          std::string t;
          self->lower_->readlink(natural, &t);
          k = t == in->data && in->ino == la.ino ? Change::Kind::Metadata
                                                 : Change::Kind::Modified;
        } else {
          k = Change::Kind::Modified;
        }
        out->push_back({path, k, in->type});
      }
    }
  };
  Walk w{this, out};
  w.run(lp->root.get(), std::string(), true, std::string());
  return 0;
}

int Overlay::stats(const std::string& layer, LayerStats* out) {
  std::shared_lock lock(mu_);
  Layer* lp = byName(layer);
  if (!lp) return ENXIO;
  std::set<const Inode*> seen;
  struct Walk {
    static void run(const Node* n, std::set<const Inode*>* seen, LayerStats* st) {
      for (auto& [name, c] : n->children) {
        st->paths++;
        st->memoryBytes += name.size() + sizeof(Node);
        if (c->inode && seen->insert(c->inode.get()).second) {
          st->memoryBytes += sizeof(Inode) + c->inode->data.size();
          st->spilledBytes += c->inode->spillSize;
        }
        run(c.get(), seen, st);
      }
    }
  };
  *out = LayerStats{};
  Walk::run(lp->root.get(), &seen, out);
  return 0;
}

}  // namespace shadowfs
