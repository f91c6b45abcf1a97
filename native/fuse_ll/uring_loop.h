// FUSE over io_uring for fuse_ll (Linux 6.14+, docs/fuse-transport-plan.md section 3): the
// kernel hands requests to buffers the server registered with io_uring commands on /dev/fuse,
// instead of the server reading them from /dev/fuse, and takes each reply with the command that
// also fetches the next request (one syscall per request instead of a read and a write).
//
// Layout here: one io_uring per ring entry, each entry with its own thread, header area and
// payload buffer; the kernel's queues (one per possible CPU) each get `depth` entries. An entry's
// thread is the only one that submits its commands and waits for its completions, so:
//   - a long request (a copy-up of a big file) holds up only its own entry, never the others of
//     its queue (a queue's further requests go to its other entries);
//   - the kernel's task work that copies the next request into the entry's buffers runs on the
//     thread that waits for it (io_uring runs a command's task work in the task that submitted
//     it), and that thread never exits while the kernel may still use its commands (a thread's
//     exit cancels the commands it submitted).
//
// Requests are rebuilt in place into the contiguous layout /dev/fuse delivers (header, the
// opcode's fixed arguments, the rest) and decoded by LLMount::dispatch like any other; the reply
// goes back through a ReplySink into the entry's buffers.
//
// What stays on /dev/fuse: INIT (before any ring exists), FORGET and BATCH_FORGET, INTERRUPT, and
// every notification the server sends; the /dev/fuse threads keep running beside the rings.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernel_abi.h"
#include "wire.h"

namespace shadowfs {
namespace ll {
namespace uring {

// One request, as /dev/fuse would deliver it: decode it and reply through `sink`.
using Dispatch = std::function<void(const char* buf, size_t size, ReplySink* sink)>;

// Bytes writable in front of each payload buffer: room to rebuild the in header and the
// opcode's fixed arguments (at most kUringOpInSize) right before the payload, so that the
// request is contiguous without copying the payload.
constexpr size_t kHeadroom = 4096;

// Whether /sys/module/fuse/parameters/enable_uring reads Y (root's switch for the whole system).
bool kernelEnabled();
// How many queues the kernel makes: one per possible CPU (/sys/devices/system/cpu/possible).
size_t possibleCpus();

// Serves the request the kernel left in an entry: `hdr` is its header area, `payload` its payload
// buffer of `payloadSize` bytes with kHeadroom writable bytes before it. Rebuilds the contiguous
// request, calls `dispatch`, and leaves the reply in hdr/payload (an EIO reply if the request was
// malformed or the handler sent none). Returns the commit id to answer the kernel with.
uint64_t serveEntry(abi::UringReqHeader* hdr, char* payload, size_t payloadSize,
                    const Dispatch& dispatch);

// The rings of one mount.
class Transport {
 public:
  // Sets up the rings and buffers for every queue (nothing is registered yet): done before the
  // INIT reply asks for FUSE_OVER_IO_URING, because once the kernel has that reply it holds every
  // new request until the ring is ready or a registration fails. Null (and *why) if io_uring
  // cannot be set up here.
  static std::unique_ptr<Transport> prepare(int fuseFd, size_t payloadSize, std::string* why);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // After the INIT reply: every entry registers from its own thread, all queues but the first
  // before the first (so that a registration that fails does so before the kernel's ring is
  // complete, and the kernel goes back to /dev/fuse). True when the kernel now serves requests
  // through the rings; false (and *why) otherwise, with the rings already stopped and the kernel
  // told to stay on /dev/fuse.
  bool start(Dispatch dispatch, std::string* why);
  // Once the connection is gone (or after start() failed): wakes, joins and frees everything.
  void stop();

  uint64_t served() const { return served_.load(std::memory_order_relaxed); }
  size_t queues() const { return queues_; }
  size_t depth() const { return depth_; }

 private:
  struct Ring;
  struct Entry;
  Transport(int fuseFd, size_t payloadSize, size_t queues, size_t depth);
  void run(Entry* e);
  int registerEntry(Entry* e);
  void report(Entry* e, int err);
  void wake(Entry* e);
  // A REGISTER the kernel must refuse (queue id out of range): it then turns the connection's
  // io_uring off and lets the requests it held go to /dev/fuse.
  void refuseRing();

  const int fd_;
  const size_t payloadSize_;
  const size_t queues_;
  const size_t depth_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Dispatch dispatch_;
  std::atomic<uint64_t> served_{0};
  std::atomic<bool> stopping_{false};

  std::mutex mu_;  // guards the registration state below
  std::condition_variable cv_;
  int phase_ = 0;        // entries whose phase is <= this may register
  bool abort_ = false;   // entries that have not registered yet must not
  size_t reported_ = 0;  // entries that reported how their registration went
  bool stopped_ = false;
};

}  // namespace uring
}  // namespace ll
}  // namespace shadowfs
