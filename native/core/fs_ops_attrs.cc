// The file-system operations on an object's attributes (see fs_ops.h): getattr, setattr,
// readlink, the xattrs, statfs.
#include <cerrno>

#include "fs_ops.h"
#include "path.h"

namespace shadowfs {

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

bool Overlay::mergesFolderDirAt(Layer* view, const std::string& asked) {
  SFS_AT(view);
  ReadLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  if (resolve(L, path, &r)) return false;
  if (!r.node) return r.lowerAttr.type == FileType::Directory && r.low == path;
  return r.node->dir() && !r.node->opaque() && r.lv && r.low == path;
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
  const int e = setattrIn(L, asked, h, mask, v, out);
  // A size set by name (truncate(2)); through an open file it is that open's business.
  if (e == 0 && (mask & kSetSize) && !h && !asked.empty()) auditNote(L, AuditOp::Truncate, asked);
  return e;
}

int Overlay::setattrIn(Layer& L, const std::string& asked, Handle* h, uint32_t mask,
                     const Attr& v, Attr* out) {
  if (!L.writable) return EROFS;
  if (int e = writeRefused(asked)) return e;  // write_guard.h; a guarded file has no nameless handle
  if (guardedBeside(L, asked)) return EPERM;  // a bare repository's hooks or config
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
    if ((e = gitfileGuard(in.get(), nullptr, 0, 0, &v.size))) return e;  // link_targets.cc
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
  e = lower_->getxattr(src, name, value);
  // The layer's own object, whose folder source went away (what an agent moved, removed from
  // the folder since): it has no attributes there, and is no less there itself.
  if (r.node && (e == ENOENT || e == ENOTDIR)) return ENODATA;
  return e;
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
  e = lower_->listxattr(src, names);
  if (r.node && (e == ENOENT || e == ENOTDIR)) {
    names->clear();
    return 0;  // as getxattr: the source went away, the object did not
  }
  return e;
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
  if (int e = writeRefused(asked)) return e;
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
  // POSIX ACLs are not supported: kept as plain attributes they would not change the mode (the
  // kernel passes them to a server that did not ask for FUSE_POSIX_ACL as they come), so `cp -a`
  // and `cp -p`, whose ACL carries the permissions, made 0700 directories and 0600 files.
  // EOPNOTSUPP is what they expect from a file system without ACLs: they set the mode instead.
  if (name == "system.posix_acl_access" || name == "system.posix_acl_default") return EOPNOTSUPP;
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
  if (int e = writeRefused(path)) return e;  // write_guard.h, before "no such attribute"
  std::string old;
  if (int e = getxattr(&L, path, name, &old)) return e;  // nothing to remove: change nothing
  return editXattrs(L, path, [&](std::map<std::string, std::string>& xattrs) {
    return xattrs.erase(name) ? 0 : ENODATA;
  });
}

int Overlay::statfs(FsStats* out) {
  int e = lower_->statfs(out);
  // A folder on a FUSE mount whose server died answers ENOTCONN; passed on, this live mount would
  // look dead itself to a daemon checking for stale mounts (src/daemon/state.ts, which takes
  // ENOTCONN from a statfs for the kernel's word that the server is gone). Said as EIO instead.
  return e == ENOTCONN ? EIO : e;
}

}  // namespace shadowfs
