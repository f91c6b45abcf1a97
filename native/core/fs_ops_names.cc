// The file-system operations on names (see fs_ops.h): listings, and making, linking, removing
// and renaming entries.
#include <cerrno>

#include "fs_ops.h"
#include "path.h"

namespace shadowfs {

int Overlay::readdir(Layer* view, const std::string& asked, std::vector<DirEntry>* out) {
  SFS_AT(view);
  ListPlan plan;
  {
    ReadLock lock(L.mu, LockRank::Layer);
    std::string cbuf;
    int e = planList(L, canon(L, asked, &cbuf), &plan);
    if (e) return e;
  }
  return runList(plan, out);
}

int Overlay::list(Layer* view, const std::string& asked, DirStream* d, bool readAhead) {
  SFS_AT(view);
  ListPlan plan;
  {
    ReadLock lock(L.mu, LockRank::Layer);
    std::string cbuf;
    int e = planList(L, canon(L, asked, &cbuf), &plan);
    if (e) return e;
  }
  std::vector<DirEntry> fresh;
  int e = runList(plan, &fresh);
  if (e) return e;
  if (readAhead && plan.readLower) {
    // The folder's entries come first in a listing (runList), the layer's own after them.
    const size_t fromFolder = fresh.size() - (plan.lowerOnly ? 0 : plan.own.size());
    std::vector<std::string> dirs;
    for (size_t i = 0; i < fromFolder; ++i)
      if (fresh[i].type == FileType::Directory) dirs.push_back(joinPath(plan.low, fresh[i].name));
    if (!dirs.empty()) lower_->readAhead(dirs);
  }
  d->ino = plan.ino;
  d->entries.swap(fresh);
  d->loaded = true;
  return 0;
}

// The public operations resolve their layer, do the work (the *In functions below), and record
// what succeeded in the layer's audit trail (audit.h).
int Overlay::mknod(Layer* view, const std::string& asked, FileType type, uint32_t perm,
                   uint64_t rdev, const Caller& who, Attr* out) {
  SFS_AT(view);
  const int e = mknodIn(L, asked, type, perm, rdev, who, out);
  // A regular file made by MKNOD is a creation (how the kernel makes files when CREATE is refused).
  if (e == 0) auditNote(L, type == FileType::Regular ? AuditOp::Create : AuditOp::Mknod, asked);
  return e;
}

int Overlay::mkdir(Layer* view, const std::string& asked, uint32_t perm, const Caller& who,
                   Attr* out) {
  SFS_AT(view);
  const int e = mkdirIn(L, asked, perm, who, out);
  if (e == 0) auditNote(L, AuditOp::Mkdir, asked);
  return e;
}

int Overlay::symlink(Layer* view, const std::string& target, const std::string& asked,
                     const Caller& who, Attr* out) {
  SFS_AT(view);
  const int e = symlinkIn(L, target, asked, who, out);
  if (e == 0) auditNote(L, AuditOp::Symlink, asked, target);
  return e;
}

int Overlay::link(Layer* view, const std::string& fromAsked, const std::string& toAsked,
                  Attr* out) {
  SFS_AT(view);
  const int e = linkIn(L, fromAsked, toAsked, out);
  if (e == 0) auditNote(L, AuditOp::Link, toAsked, fromAsked);
  return e;
}

int Overlay::unlink(Layer* view, const std::string& asked) {
  SFS_AT(view);
  const int e = unlinkIn(L, asked);
  if (e == 0) auditNote(L, AuditOp::Unlink, asked);
  return e;
}

int Overlay::rmdir(Layer* view, const std::string& asked) {
  SFS_AT(view);
  const int e = rmdirIn(L, asked);
  if (e == 0) auditNote(L, AuditOp::Rmdir, asked);
  return e;
}

int Overlay::rename(Layer* view, const std::string& fromAsked, const std::string& toAsked,
                    uint32_t flags) {
  SFS_AT(view);
  const int e = renameIn(L, fromAsked, toAsked, flags);
  if (e == 0) auditNote(L, AuditOp::Rename, fromAsked, toAsked);
  return e;
}

int Overlay::mknodIn(Layer& L, const std::string& asked, FileType type, uint32_t perm,
                   uint64_t rdev, const Caller& who, Attr* out) {
  if (!L.writable) return EROFS;
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef in = newInode(type, perm, who, askedName);
  if (rdev) in->more().rdev = rdev;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf, respellAs;
  const std::string& path = canon(L, asked, &cbuf, &respellAs);
  Node* n;
  int e = placeNew(L, path, std::move(in), &n);
  if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::mkdirIn(Layer& L, const std::string& asked, uint32_t perm, const Caller& who,
                   Attr* out) {
  if (!L.writable) return EROFS;
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef in = newInode(FileType::Directory, perm, who, askedName);
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf, respellAs;
  const std::string& path = canon(L, asked, &cbuf, &respellAs);
  Node* n;
  int e = placeNew(L, path, std::move(in), &n);
  if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::symlinkIn(Layer& L, const std::string& askedTarget, const std::string& asked,
                     const Caller& who, Attr* out) {
  if (!L.writable) return EROFS;
  if (!validUtf8(askedTarget)) return EILSEQ;  // as a name (Overlay::writeRefused)
  // Where it leads, for every viewer alike (link_targets.cc); looked up before the lock.
  std::string target = askedTarget;
  if (int e = linkTargetFor(asked, &target)) return e;
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef in = newInode(FileType::Symlink, 0777, who, askedName);
  in->more().target = target;
  in->size = target.size();
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf, respellAs;
  const std::string& path = canon(L, asked, &cbuf, &respellAs);
  Node* n;
  int e = placeNew(L, path, std::move(in), &n);
  if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
  if (e) return e;
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::linkIn(Layer& L, const std::string& fromAsked, const std::string& toAsked,
                  Attr* out) {
  if (!L.writable) return EROFS;
  WriteLock lock(L.mu, LockRank::Layer);
  int e = linkHeld(L, fromAsked, toAsked, out);
  // A second name reads the folder's file from its first: an apply under way may remove that.
  if (e == 0) e = keepHeld(L);
  return e;
}

int Overlay::linkHeld(Layer& L, const std::string& fromAsked, const std::string& toAsked,
                      Attr* out) {
  std::string fbuf, tbuf, respellAs;
  const std::string& from = canon(L, fromAsked, &fbuf);
  const std::string& to = canon(L, toAsked, &tbuf, &respellAs);
  if (masked(L, to)) return EACCES;  // before the source is materialised (placeNew says why)
  // A second name of a guarded file would write it (placeNew refuses a guarded new name).
  if (int e = writeRefused(from)) return e;
  if (int e = writeRefused(to)) return e;
  if (besideRepository(L, from)) return EPERM;
  Res r;
  Node* src;
  int e = materializeNode(L, from, &src, &r);
  if (e) return e;
  if (src->dir()) return EPERM;
  // A second name shallower than the first may leave a relative link climbing above the root.
  if (climbsOut(L, src, from, to)) return EXDEV;
  Ref<Inode> in = src->inodeRef();
  noteCopy(L, in.get());  // handles of the folder's file from before follow it (bindPending)
  // The new name is a node of its own that stands for `in` (Extra::link).
  std::string toDir, toName;
  splitLast(to, &toDir, &toName);
  NodeRef ln = Node::make(in->type, toName);
  ln->ino = in->ino;
  ln->more().link = Ref<Inode>(in).release();
  Node* n;
  e = placeNew(L, to, std::move(ln), &n);
  if (!e && !respellAs.empty()) e = respell(L, to, respellAs);
  if (e) return e;
  ensureOwnMeta(in.get(), false, std::string());
  touch(in.get(), false);
  nodeAttr(n, false, std::string(), out);
  return 0;
}

int Overlay::unlinkIn(Layer& L, const std::string& asked) {
  if (!L.writable) return EROFS;
  if (int e = writeRefused(asked)) return e;  // write_guard.h, and names
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  FileType t = r.node ? r.node->inode()->type : r.lowerAttr.type;
  if (t == FileType::Directory) return EISDIR;
  return removeAt(L, path);
}

int Overlay::rmdirIn(Layer& L, const std::string& asked) {
  if (!L.writable) return EROFS;
  if (asked.empty()) return EBUSY;
  if (int e = writeRefused(asked)) return e;  // write_guard.h, before "not empty"
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  ListPlan plan;
  int e = planList(L, path, &plan, /*masked=*/false);
  if (e) return e;
  std::vector<DirEntry> ls;
  e = runList(plan, &ls);
  if (e) return e;
  if (!ls.empty()) return ENOTEMPTY;
  return removeAt(L, path);
}

int Overlay::renameIn(Layer& L, const std::string& fromAsked, const std::string& toAsked,
                    uint32_t flags) {
  if (!L.writable) return EROFS;
  if ((flags & kRenameNoReplace) && (flags & kRenameExchange)) return EINVAL;
  if (fromAsked.empty() || toAsked.empty()) return EBUSY;
  WriteLock lock(L.mu, LockRank::Layer);
  int e = renameHeld(L, fromAsked, toAsked, flags);
  // What was renamed reads the folder from its old place: an apply under way may change that.
  if (e == 0) e = keepHeld(L);
  return e;
}

int Overlay::renameHeld(Layer& L, const std::string& fromAsked, const std::string& toAsked,
                        uint32_t flags) {
  std::string fbuf, tbuf, respellAs;
  const std::string& from = canon(L, fromAsked, &fbuf);
  const std::string& to = canon(L, toAsked, &tbuf, &respellAs);
  Res rf;
  int e = resolve(L, from, &rf);
  if (e) return e;
  if (ignoreCase_ && from == to) {
    // Both names are one entry: a rename to another case of its own name (`foo` -> `Foo`)
    // changes its spelling to the one given for the target, as on Windows. The caller giving
    // the same last name twice changes nothing (rename(2) of a name onto itself), whatever the
    // entry's spelling. Exchanging an entry with itself does nothing either; NoReplace has
    // nothing it could replace.
    std::string dir, fromName, toName;
    splitLast(fromAsked, &dir, &fromName);
    splitLast(toAsked, &dir, &toName);
    if ((flags & kRenameExchange) || fromName == toName) return 0;
    return respell(L, from, toName);
  }
  if (isInside(to, from)) return EINVAL;
  if (int e = writeRefused(from)) return e;  // write_guard.h, and names
  if (int e = writeRefused(to)) return e;
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
    FileType pt = rp.node ? rp.node->inode()->type : rp.lowerAttr.type;
    if (pt != FileType::Directory) return ENOTDIR;
  }
  const bool toExists = et == 0;
  if (from == to) return 0;
  // A new name there, as placeNew checks it: the moved object may complete a bare repository.
  // (Onto an existing name, or exchanged, no directory gains a name, whatever the types.)
  if (!toExists && completesRepository(L, to)) return EPERM;
  // The hooks or config of a bare repository, and in an exchange what arrives at `from` too.
  if (besideRepository(L, to) || ((flags & kRenameExchange) && besideRepository(L, from)))
    return EPERM;
  // Onto a masked name: refused as creating it is (placeNew), before anything changes.
  if (masked(L, to)) return EACCES;
  const FileType ft = rf.node ? rf.node->inode()->type : rf.lowerAttr.type;
  // A directory moved into or out of a `.git` carries control files with it (a planted
  // `modules/<name>` with its own config): refused like writing them (write_guard.h).
  const bool movesDir = ft == FileType::Directory ||
                        (toExists && (rt.node ? rt.node->inode()->type : rt.lowerAttr.type) ==
                                         FileType::Directory);
  if (movesDir && (guardedMove(from) || guardedMove(to))) return EPERM;
  // A directory holding what the agent may not see stays where it is, as remove and rmdir
  // refuse it: its masked entries are the folder's, and applying the move (or the replacement
  // of such a directory) would delete them with the old name.
  if (L.mask && movesDir) {
    const bool toDir = toExists && (rt.node ? rt.node->inode()->type : rt.lowerAttr.type) ==
                                       FileType::Directory;
    if ((ft == FileType::Directory && holdsMasked(L, from)) || (toDir && holdsMasked(L, to)))
      return EACCES;
  }
  // Nor a repository's objects or objects/info, where an info/alternates could come in with it.
  if (movesDir && (objectsOfRepository(L, from) || objectsOfRepository(L, to))) return EPERM;
  // A link (or a directory that may hold one) arriving beneath a `.git`; in an exchange, what
  // arrives at `from` too (write_guard.h, refusesSpecial).
  if (guardedArrival(L, ft, from, to)) return EPERM;
  if (toExists && (flags & kRenameExchange) &&
      guardedArrival(L, rt.node ? rt.node->inode()->type : rt.lowerAttr.type, to, from))
    return EPERM;
  if ((flags & kRenameNoReplace) && toExists) return EEXIST;
  // Moved up, a relative link (or one of the layer's beneath a directory) may now climb above
  // the root, out of the shadow for the user's programs: EXDEV, so `mv` copies it instead and
  // the copy's link is made as a new one is (link_targets.cc).
  if (climbsOut(L, rf.node, from, to)) return EXDEV;
  if (toExists && (flags & kRenameExchange) && climbsOut(L, rt.node, to, from)) return EXDEV;
  // Two names of one file (hard links): POSIX says succeed and do nothing. Linux's VFS stops
  // this before a path-based backend sees it only when both names are one kernel inode.
  if (toExists && ft != FileType::Directory) {
    const bool sameInLayer = rf.node && rt.node && rf.node->inode() == rt.node->inode();
    const bool sameInLower = !rf.node && !rt.node && rf.lowerAttr.nlink > 1 &&
                             rf.lowerAttr.ino == rt.lowerAttr.ino;
    if (sameInLayer || sameInLower) return 0;
  }
  // Everything that can fail happens before the first detach: a rename that fails must change
  // nothing (the folder's directories are stat-ed again while the layer mirrors them). Called
  // once every check has passed, so a refused rename leaves no trace in the layer either.
  // The files of the folder that move (or are replaced) are recorded for their handles opened
  // before, so a deferred write-open's first write follows the file it opened (bindPending).
  auto prepare = [&]() -> int {
    Node* n;
    Res pre;
    if (int pe = materializeNode(L, from, &n, &pre)) return pe;
    noteCopy(L, n->inode());
    Node* tp;
    if (int pe = materializeDir(L, tparent, &tp, nullptr, nullptr)) return pe;
    Res preTo;
    if (!toExists) return 0;
    if (int pe = materializeNode(L, to, &n, &preTo)) return pe;
    noteCopy(L, n->inode());
    return 0;
  };
  if (flags & kRenameExchange) {
    if (!toExists) return ENOENT;
    if (isInside(from, to)) return EINVAL;
    if ((e = prepare())) return e;
    Res a, b;
    NodeRef na = detach(L, from, a);
    if (!na) return EIO;
    NodeRef nb = detach(L, to, b);
    if (!nb) return EIO;
    e = attach(L, to, std::move(na));
    if (e) return e;
    return attach(L, from, std::move(nb));
  }
  if (toExists) {
    const FileType tt = rt.node ? rt.node->inode()->type : rt.lowerAttr.type;
    const bool fromDir = ft == FileType::Directory, toDir = tt == FileType::Directory;
    if (fromDir && !toDir) return ENOTDIR;
    if (!fromDir && toDir) return EISDIR;
    if (toDir) {
      if (isInside(from, to)) return ENOTEMPTY;
      ListPlan plan;
      e = planList(L, to, &plan, /*masked=*/false);
      std::vector<DirEntry> ls;
      if (!e) e = runList(plan, &ls);
      if (e) return e;
      if (!ls.empty()) return ENOTEMPTY;
    }
  }
  if ((e = prepare())) return e;
  Res a;
  NodeRef na = detach(L, from, a);
  if (!na) return EIO;
  e = attach(L, to, std::move(na));
  // To a name the layer deleted in another case: the entry takes the caller's spelling.
  if (!e && !respellAs.empty()) e = respell(L, to, respellAs);
  return e;
}

}  // namespace shadowfs
