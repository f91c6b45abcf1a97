// Replies and notifications on /dev/fuse (see wire.h).
#include "wire.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "../fuse_common/fuse_attr.h"

namespace shadowfs {
namespace ll {
namespace wire {

void splitTimeout(double timeout, uint64_t* sec, uint32_t* nsec) {
  if (!(timeout > 0)) {
    *sec = 0;
    *nsec = 0;
    return;
  }
  if (timeout >= 1.8e19) {
    *sec = std::numeric_limits<uint64_t>::max();
    *nsec = 0;
    return;
  }
  double whole = std::floor(timeout);
  *sec = static_cast<uint64_t>(whole);
  double frac = (timeout - whole) * 1e9;
  *nsec = frac >= 999999999.0 ? 999999999u : static_cast<uint32_t>(frac);
}

void toAbiAttr(const Attr& a, abi::Attr* out) {
  std::memset(out, 0, sizeof *out);
  out->ino = a.ino;
  out->size = a.size;
  out->blocks = a.blocks;
  out->atime = static_cast<uint64_t>(a.atime.sec);
  out->mtime = static_cast<uint64_t>(a.mtime.sec);
  out->ctime = static_cast<uint64_t>(a.ctime.sec);
  out->atimensec = static_cast<uint32_t>(a.atime.nsec);
  out->mtimensec = static_cast<uint32_t>(a.mtime.nsec);
  out->ctimensec = static_cast<uint32_t>(a.ctime.nsec);
  out->mode = modeOf(a.type) | a.perm;
  out->nlink = a.nlink;
  out->uid = a.uid;
  out->gid = a.gid;
  // dev_t in glibc's encoding; the kernel decodes the low 32 bits the same way for the numbers
  // device nodes use (major < 4096, minor < 2^20).
  out->rdev = static_cast<uint32_t>(a.rdev);
  out->blksize = advertisedIoSize(a.blksize);
}

void fillEntry(abi::EntryOut* e, uint64_t id, const Attr& a, double entryTimeout,
               double attrTimeout) {
  std::memset(e, 0, sizeof *e);
  e->nodeid = id;
  splitTimeout(entryTimeout, &e->entryValid, &e->entryValidNsec);
  if (id == 0) return;
  splitTimeout(attrTimeout, &e->attrValid, &e->attrValidNsec);
  toAbiAttr(a, &e->attr);
}

int send(const Req* r, int error, const struct iovec* payload, int count) {
  if (count > 3) count = 3;
  struct iovec iov[4];
  abi::OutHeader h;
  h.len = sizeof h;
  h.error = error ? -error : 0;
  h.unique = r->unique;
  iov[0] = {&h, sizeof h};
  for (int i = 0; i < count; ++i) {
    iov[i + 1] = payload[i];
    h.len += static_cast<uint32_t>(payload[i].iov_len);
  }
  if (r->sink) return r->sink->reply(h, payload, count);
  ssize_t n = ::writev(r->fd, iov, 1 + count);
  if (n < 0) return -errno;
  return 0;
}

int replyBuf(const Req* r, const void* data, size_t size) {
  struct iovec v{const_cast<void*>(data), size};
  return send(r, 0, &v, size ? 1 : 0);
}

int replyEntry(const Req* r, const abi::EntryOut& e) {
  struct iovec v{const_cast<abi::EntryOut*>(&e), sizeof e};
  return send(r, 0, &v, 1);
}

int replyAttr(const Req* r, const Attr& a, double timeout) {
  abi::AttrOut o;
  std::memset(&o, 0, sizeof o);
  splitTimeout(timeout, &o.attrValid, &o.attrValidNsec);
  toAbiAttr(a, &o.attr);
  struct iovec v{&o, sizeof o};
  return send(r, 0, &v, 1);
}

int replyOpen(const Req* r, uint64_t fh, uint32_t openFlags, uint32_t backingId) {
  abi::OpenOut o{fh, openFlags, static_cast<int32_t>(backingId)};
  struct iovec v{&o, sizeof o};
  return send(r, 0, &v, 1);
}

int replyCreate(const Req* r, const abi::EntryOut& e, uint64_t fh, uint32_t openFlags,
                uint32_t backingId) {
  abi::OpenOut o{fh, openFlags, static_cast<int32_t>(backingId)};
  struct iovec v[2] = {{const_cast<abi::EntryOut*>(&e), sizeof e}, {&o, sizeof o}};
  return send(r, 0, v, 2);
}

int replyWrite(const Req* r, uint32_t size) {
  abi::WriteOut o{size, 0};
  struct iovec v{&o, sizeof o};
  return send(r, 0, &v, 1);
}

int replyStatfs(const Req* r, const FsStats& s) {
  abi::Kstatfs o;
  std::memset(&o, 0, sizeof o);
  o.blocks = s.blocks;
  o.bfree = s.bfree;
  o.bavail = s.bavail;
  o.files = s.files;
  o.ffree = s.ffree;
  o.bsize = static_cast<uint32_t>(s.bsize);
  o.namelen = static_cast<uint32_t>(s.namemax);
  o.frsize = static_cast<uint32_t>(s.frsize);
  struct iovec v{&o, sizeof o};
  return send(r, 0, &v, 1);
}

int replyXattrSize(const Req* r, uint32_t size) {
  abi::GetxattrOut o{size, 0};
  struct iovec v{&o, sizeof o};
  return send(r, 0, &v, 1);
}

size_t addDirent(char* buf, size_t room, const char* name, uint64_t ino, uint32_t mode,
                 uint64_t nextOff) {
  const size_t namelen = std::strlen(name);
  const size_t need = abi::direntSize(namelen);
  if (need > room) return need;
  abi::Dirent d{ino, nextOff, static_cast<uint32_t>(namelen), (mode & fusemode::kFmt) >> 12};
  std::memcpy(buf, &d, sizeof d);
  std::memcpy(buf + sizeof d, name, namelen);
  std::memset(buf + sizeof d + namelen, 0, need - sizeof d - namelen);
  return need;
}

size_t addDirentPlus(char* buf, size_t room, const char* name, const abi::EntryOut& e,
                     uint64_t nextOff) {
  const size_t namelen = std::strlen(name);
  const size_t need = abi::direntPlusSize(namelen);
  if (need > room) return need;
  abi::DirentPlus d;
  d.entry = e;
  d.dirent = abi::Dirent{e.attr.ino, nextOff, static_cast<uint32_t>(namelen),
                         (e.attr.mode & fusemode::kFmt) >> 12};
  std::memcpy(buf, &d, sizeof d);
  std::memcpy(buf + sizeof d, name, namelen);
  std::memset(buf + sizeof d + namelen, 0, need - sizeof d - namelen);
  return need;
}

namespace {
int notify(int fd, int32_t code, const struct iovec* payload, int count) {
  struct iovec iov[3];
  abi::OutHeader h{sizeof h, code, 0};
  iov[0] = {&h, sizeof h};
  for (int i = 0; i < count; ++i) {
    iov[i + 1] = payload[i];
    h.len += static_cast<uint32_t>(payload[i].iov_len);
  }
  ssize_t n = ::writev(fd, iov, 1 + count);
  return n < 0 ? -errno : 0;
}
}  // namespace

int notifyInvalInode(int fd, uint64_t ino, int64_t off, int64_t len) {
  abi::NotifyInvalInode o{ino, off, len};
  struct iovec v{&o, sizeof o};
  return notify(fd, abi::kNotifyInvalInode, &v, 1);
}

int notifyInvalEntry(int fd, uint64_t parent, const std::string& name) {
  abi::NotifyInvalEntry o{parent, static_cast<uint32_t>(name.size()), 0};
  struct iovec v[2] = {{&o, sizeof o}, {const_cast<char*>(name.c_str()), name.size() + 1}};
  return notify(fd, abi::kNotifyInvalEntry, v, 2);
}

int notifyIncEpoch(int fd) { return notify(fd, abi::kNotifyIncEpoch, nullptr, 0); }

}  // namespace wire
}  // namespace ll
}  // namespace shadowfs
