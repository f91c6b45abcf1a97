// fuse_ll's side of /dev/fuse: one request as the loop decoded it (Req), the replies a handler
// sends for it, the directory records of READDIR(PLUS), and the notifications that tell the
// kernel to forget what it cached. Each reply is one writev of an out header and its payload.
//
// Reply functions return 0, or -errno from the write: -ENOENT means the kernel no longer waits
// for that request (it was interrupted), so a reply that handed the kernel a reference (a node
// id, an open file) must take it back.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/types.h"
#include "kernel_abi.h"

namespace shadowfs {
namespace ll {

class LLMount;

// Where a reply goes when it does not go to /dev/fuse: a transport that carries requests by
// other means (an io_uring queue entry) takes the out header and payload of the one reply to
// its request. Returns 0 or -errno, as a write to /dev/fuse would.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual int reply(const abi::OutHeader& h, const struct iovec* payload, int count) = 0;
};

struct Req {
  LLMount* m;
  int fd;
  uint64_t unique;
  uint32_t uid;
  uint32_t gid;
  uint32_t pid;
  ReplySink* sink = nullptr;  // null: the reply is written to fd
};

namespace wire {

// `timeout` seconds as the kernel's (seconds, nanoseconds) pair; negative counts as 0.
void splitTimeout(double timeout, uint64_t* sec, uint32_t* nsec);
void toAbiAttr(const Attr& a, abi::Attr* out);
// An entry for node `id` with attributes `a` (id 0 with timeouts: a negative entry).
void fillEntry(abi::EntryOut* e, uint64_t id, const Attr& a, double entryTimeout, double attrTimeout);

int send(const Req* r, int error, const struct iovec* payload, int count);
inline int replyErr(const Req* r, int err) { return send(r, err, nullptr, 0); }
int replyBuf(const Req* r, const void* data, size_t size);
int replyEntry(const Req* r, const abi::EntryOut& e);
int replyAttr(const Req* r, const Attr& a, double timeout);
int replyOpen(const Req* r, uint64_t fh, uint32_t openFlags, uint32_t backingId = 0);
int replyCreate(const Req* r, const abi::EntryOut& e, uint64_t fh, uint32_t openFlags,
                uint32_t backingId = 0);
int replyWrite(const Req* r, uint32_t size);
int replyStatfs(const Req* r, const FsStats& s);
int replyXattrSize(const Req* r, uint32_t size);

// One READDIR record for `name` at `buf` if it fits in `room`; returns the size it needs
// either way (so a caller stops when the result exceeds what is left).
size_t addDirent(char* buf, size_t room, const char* name, uint64_t ino, uint32_t mode,
                 uint64_t nextOff);
// The same for READDIRPLUS, with the entry (node id 0: the kernel takes name and type only).
size_t addDirentPlus(char* buf, size_t room, const char* name, const abi::EntryOut& e,
                     uint64_t nextOff);

// Notifications (unique 0). Return 0 or -errno; -ENOENT: the kernel does not have it cached.
int notifyInvalInode(int fd, uint64_t ino, int64_t off, int64_t len);
int notifyInvalEntry(int fd, uint64_t parent, const std::string& name);
int notifyIncEpoch(int fd);

}  // namespace wire
}  // namespace ll
}  // namespace shadowfs
