// fuse_ll's handlers for requests on names and attributes: LOOKUP and FORGET, making,
// linking, removing and renaming entries, GETATTR/SETATTR, READLINK, the xattrs, STATFS. Each
// one: ids -> path and layer, one overlay call, one reply (through wire.h). Opens, I/O and
// listings are in handlers_files.cc, the session in fuse_ll.cc; ll_mount.h has the mount object
// and its thread rules.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../core/path.h"
#include "../fuse_common/fuse_attr.h"
#include "ll_mount.h"

namespace shadowfs {
namespace ll {

void LLMount::replyXattr(Req* req, const std::string& value, size_t size) {
  long n = xattrReplySize(value.size(), size);
  if (n < 0) return (void)wire::replyErr(req, static_cast<int>(-n));
  if (size == 0) return (void)wire::replyXattrSize(req, static_cast<uint32_t>(n));
  wire::replyBuf(req, value.data(), value.size());
}

namespace {
// Whether process `pid` has group `gid` among its supplementary groups (/proc/<pid>/status).
bool inSupplementaryGroup(uint32_t pid, uint32_t gid) {
  char file[64];
  std::snprintf(file, sizeof file, "/proc/%u/status", pid);
  FILE* f = std::fopen(file, "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "Groups:", 7) != 0) continue;
    for (char* p = line + 7; *p;) {
      char* end;
      unsigned long g = std::strtoul(p, &end, 10);
      if (end == p) break;
      found = found || g == gid;
      p = end;
    }
    break;
  }
  std::fclose(f);
  return found;
}
}  // namespace

uint32_t LLMount::killedPerm(const Attr& a, const Req* req) {
  if (a.type == FileType::Directory) return a.perm;
  uint32_t perm = a.perm & ~static_cast<uint32_t>(S_ISUID);
  if ((perm & S_ISGID) &&
      ((perm & S_IXGRP) || (req->uid != 0 && req->gid != a.gid && !inSupplementaryGroup(req->pid, a.gid))))
    perm &= ~static_cast<uint32_t>(S_ISGID);
  return perm;
}

int LLMount::killSuidgid(const Req* req, Layer* layer, const std::string& path, Handle* h) {
  Attr a;
  if (int e = h ? ov_->fgetattr(h, &a) : ov_->getattr(layer, path, &a)) return e;
  if (killedPerm(a, req) == a.perm) return 0;
  Attr v, out;
  v.perm = killedPerm(a, req);
  return ov_->setattr(layer, path, h, kSetMode, v, &out);
}

void LLMount::fillEntry(abi::EntryOut* e, uint64_t parent, uint64_t id, const Attr& a) {
  const bool covered = watchedDir(parent);
  const double attr = passthrough_.load() && kernelWritten(id) ? 0 : coveredOr(opts_.attrTimeout, covered);
  wire::fillEntry(e, id, a, coveredOr(opts_.entryTimeout, covered), attr);
}

bool LLMount::kernelWritten(uint64_t id) {
  if (!passthrough_.load()) return false;
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  return it != nodes_.end() && it->second->ptWriters > 0;
}

bool LLMount::watchedDir(uint64_t dir) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(dir);
  return it != nodes_.end() && it->second->type == FileType::Directory && it->second->watch != 0;
}

bool LLMount::coveredNode(uint64_t id) {
  std::lock_guard lock(tmu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  const FNode* n = it->second.get();
  // A directory's own watch reports changes to it; any other object's, its parent's.
  if (n->type == FileType::Directory && n->watch) return true;
  if (n->names.empty()) return false;
  auto p = nodes_.find(n->names.front().parent);
  return p != nodes_.end() && p->second->watch != 0;
}

void LLMount::replyEntry(Req* req, uint64_t parent, const std::string& name, const Attr& a,
                         const std::shared_ptr<Layer>& seenIn) {
  abi::EntryOut e;
  fillEntry(&e, parent, remember(parent, name, a.type, a.ino, a.layerObject && a.nlink > 1, seenIn), a);
  if (wire::replyEntry(req, e) == -ENOENT) {
    // The request was interrupted: the kernel did not take the reference.
    forget(e.nodeid, 1);
  }
}

void LLMount::opLookup(Req* req, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  m->count(Op::Lookup);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  Attr a;
  int e = m->ov_->getattr(layer.get(), path, &a);
  if (e == ENOENT && m->opts_.negativeTimeout > 0) {
    // A name created in A is pushed too (kernel_cache.cc invalidates negative entries alike).
    abi::EntryOut ep;
    wire::fillEntry(&ep, 0, a, coveredOr(m->opts_.negativeTimeout, m->watchedDir(parent)), 0);
    return (void)wire::replyEntry(req, ep);
  }
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opForget(Req* req, uint64_t ino, uint64_t n) {
  LLMount* m = self(req);
  m->count(Op::Forget);
  m->forget(ino, n);
}

void LLMount::opForgetMulti(Req* req, size_t count, const abi::ForgetOne* forgets) {
  LLMount* m = self(req);
  m->count(Op::Forget);
  for (size_t i = 0; i < count; ++i) {
    abi::ForgetOne f;
    std::memcpy(&f, forgets + i, sizeof f);  // the request buffer need not be aligned for it
    m->forget(f.nodeid, f.nlookup);
  }
}

void LLMount::opGetattr(Req* req, uint64_t ino, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Getattr);
  Attr a;
  Handle* h = fi && fi->fh ? reinterpret_cast<Handle*>(fi->fh) : nullptr;
  if (h && m->ov_->fgetattr(h, &a) == 0) {
    if (m->unlinked(ino)) a.nlink = 0;  // fstat of an open file whose last name is gone
    return (void)wire::replyAttr(req, a, m->attrTimeoutOf(ino));
  }
  std::string path;
  int e = m->pathOf(ino, &path);
  std::shared_ptr<Layer> layer;
  if (!e) {
    layer = m->layerFor(ino, path);
    e = layer ? m->ov_->getattr(layer.get(), path, &a) : ESTALE;
  }
  if (e) {
    // Unlinked but still open (fstat on the fd): answer from one of its open handles.
    Handle copy;
    if (!m->anyHandle(ino, &copy)) return (void)wire::replyErr(req, e);
    int fe = m->ov_->fgetattr(&copy, &a);
    if (copy.lower >= 0) ::close(static_cast<int>(copy.lower));
    if (fe) return (void)wire::replyErr(req, e);
    if (m->unlinked(ino)) a.nlink = 0;
  }
  wire::replyAttr(req, a, m->attrTimeoutOf(ino));
}

void LLMount::opSetattr(Req* req, uint64_t ino, const abi::SetattrIn& in, FileInfo* fi) {
  LLMount* m = self(req);
  m->count(Op::Setattr);
  IoHandle io(m, fi ? fi->fh : 0);
  std::string path;
  int pe = m->pathOf(ino, &path);
  if (pe && !io.h) io.fromNode(ino, true);  // unlinked: its pinned handle, if any
  Handle* h = io.h;
  // A file open for writing acts on its own object, also one whose content is still A's (the
  // core copies it at this first change when it is a truncate) and also once its name is gone.
  const bool viaHandle = h && (h->inode || h->writable);
  if (pe && !viaHandle) return (void)wire::replyErr(req, pe);
  std::shared_ptr<Layer> layer;
  if (viaHandle) {
    layer = h->layer.lock();  // ftruncate/fchmod: the layer the file was opened in
    if (!layer) return (void)wire::replyErr(req, ESTALE);
  } else {
    layer = m->layerFor(ino, path, nullptr, true);
    if (!layer) return (void)wire::replyErr(req, ESTALE);
  }
  uint32_t mask = 0;
  Attr v;
  const uint32_t set = in.valid;
  if (set & abi::kSetMode) mask |= kSetMode, v.perm = in.mode & 07777;
  if (set & abi::kSetUid) mask |= kSetUid, v.uid = in.uid;
  if (set & abi::kSetGid) mask |= kSetGid, v.gid = in.gid;
  if (set & abi::kSetSize) mask |= kSetSize, v.size = in.size;
  if (set & abi::kSetAtimeNow) mask |= kSetAtimeNow;
  else if (set & abi::kSetAtime)
    mask |= kSetAtime, v.atime = {static_cast<int64_t>(in.atime), in.atimensec};
  if (set & abi::kSetMtimeNow) mask |= kSetMtimeNow;
  else if (set & abi::kSetMtime)
    mask |= kSetMtime, v.mtime = {static_cast<int64_t>(in.mtime), in.mtimensec};
  if (set & abi::kSetCtime)
    mask |= kSetCtime, v.ctime = {static_cast<int64_t>(in.ctime), in.ctimensec};
  if ((set & abi::kSetKillSuidgid) && !(set & abi::kSetMode)) {
    // A truncate or chown that clears the set-id bits (HANDLE_KILLPRIV_V2): the new mode goes
    // with the same change.
    Attr now;
    int ge = viaHandle ? m->ov_->fgetattr(h, &now) : m->ov_->getattr(layer.get(), path, &now);
    if (ge) return (void)wire::replyErr(req, ge);
    if (killedPerm(now, req) != now.perm) mask |= kSetMode, v.perm = killedPerm(now, req);
  }
  Attr out;
  int e = m->ov_->setattr(layer.get(), path, h, mask, v, &out);
  if (e) return (void)wire::replyErr(req, e);
  wire::replyAttr(req, out, m->attrTimeoutOf(ino));
}

void LLMount::opReadlink(Req* req, uint64_t ino) {
  LLMount* m = self(req);
  std::string path, target;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  int e = m->ov_->readlink(layer.get(), path, &target);
  if (e) return (void)wire::replyErr(req, e);
  wire::replyBuf(req, target.data(), target.size());
}

void LLMount::opMknod(Req* req, uint64_t parent, const char* name, mode_t mode,
                      dev_t rdev) {
  LLMount* m = self(req);
  m->count(Op::Mknod);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Attr a;
  int e = m->ov_->mknod(layer.get(), path, typeOf(mode), mode & 07777, rdev,
                        Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opMkdir(Req* req, uint64_t parent, const char* name, mode_t mode) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Attr a;
  int e = m->ov_->mkdir(layer.get(), path, mode & 07777, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opUnlink(Req* req, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  m->pinBeforeRemove(parent, name);
  int e = m->ov_->unlink(layer.get(), path);
  if (!e) m->unlinkName(parent, name);
  wire::replyErr(req, e);
}

void LLMount::opRmdir(Req* req, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  int e = m->ov_->rmdir(layer.get(), path);
  if (!e) m->unlinkName(parent, name);
  wire::replyErr(req, e);
}

void LLMount::opSymlink(Req* req, const char* target, uint64_t parent, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->childAt(parent, name, &path, &layer)) return (void)wire::replyErr(req, pe);
  const Req* ctx = req;
  Attr a;
  int e = m->ov_->symlink(layer.get(), target, path, Caller{ctx->uid, ctx->gid}, &a);
  if (e) return (void)wire::replyErr(req, e);
  m->replyEntry(req, parent, name, a, layer);
}

void LLMount::opRename(Req* req, uint64_t parent, const char* name, uint64_t newparent,
                       const char* newname, unsigned int flags) {
  LLMount* m = self(req);
  std::string from, to;
  std::shared_ptr<Layer> layer, toLayer, active = m->ov_->current(m->view_);
  if (int pe = m->childAt(parent, name, &from, &layer, active)) return (void)wire::replyErr(req, pe);
  if (int pe = m->childAt(newparent, newname, &to, &toLayer, active))
    return (void)wire::replyErr(req, pe);
  // The two directories were looked up in different layers (a switch in between): no object
  // can move between layers, as between two file systems.
  if (layer != toLayer) return (void)wire::replyErr(req, EXDEV);
  uint32_t f = 0;
  if (flags & RENAME_NOREPLACE) f |= kRenameNoReplace;
  if (flags & RENAME_EXCHANGE) f |= kRenameExchange;
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return (void)wire::replyErr(req, EINVAL);
  if (!(f & (kRenameNoReplace | kRenameExchange))) m->pinBeforeRemove(newparent, newname);
  int e = m->ov_->rename(layer.get(), from, to, f);
  if (!e && from != to) m->moveName(parent, name, newparent, newname, f & kRenameExchange);
  wire::replyErr(req, e);
}

void LLMount::opLink(Req* req, uint64_t ino, uint64_t newparent, const char* newname) {
  LLMount* m = self(req);
  std::string from, to;
  std::shared_ptr<Layer> layer, toLayer, active = m->ov_->current(m->view_);
  if (int pe = m->nodeAt(ino, &from, &layer, active)) return (void)wire::replyErr(req, pe);
  if (int pe = m->childAt(newparent, newname, &to, &toLayer, active))
    return (void)wire::replyErr(req, pe);
  if (layer != toLayer) return (void)wire::replyErr(req, EXDEV);
  Attr a;
  int e = m->ov_->link(layer.get(), from, to, &a);
  if (e) return (void)wire::replyErr(req, e);
  // The new name joins the source's node (the kernel expects the inode it linked).
  if (a.layerObject && a.type != FileType::Directory) m->linkedInLayer(ino, a.ino);
  m->replyEntry(req, newparent, newname, a, layer);
}

void LLMount::opStatfs(Req* req, uint64_t) {
  FsStats s;
  int e = self(req)->ov_->statfs(&s);
  if (e) return (void)wire::replyErr(req, e);
  wire::replyStatfs(req, s);
}

void LLMount::opSetxattr(Req* req, uint64_t ino, const char* name, const char* value,
                         size_t size, int flags) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  wire::replyErr(req, m->ov_->setxattr(layer.get(), path, name, std::string(value, size), flags));
}

void LLMount::opGetxattr(Req* req, uint64_t ino, const char* name, size_t size) {
  LLMount* m = self(req);
  m->count(Op::Getxattr);
  std::string path, value;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  int e = m->ov_->getxattr(layer.get(), path, name, &value);
  if (e) return (void)wire::replyErr(req, e);
  m->replyXattr(req, value, size);
}

void LLMount::opListxattr(Req* req, uint64_t ino, size_t size) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  std::vector<std::string> names;
  int e = m->ov_->listxattr(layer.get(), path, &names);
  if (e) return (void)wire::replyErr(req, e);
  m->replyXattr(req, xattrList(names), size);
}

void LLMount::opRemovexattr(Req* req, uint64_t ino, const char* name) {
  LLMount* m = self(req);
  std::string path;
  std::shared_ptr<Layer> layer;
  if (int pe = m->nodeAt(ino, &path, &layer)) return (void)wire::replyErr(req, pe);
  wire::replyErr(req, m->ov_->removexattr(layer.get(), path, name));
}

}  // namespace ll
}  // namespace shadowfs
