// FUSE over io_uring (see uring_loop.h), on the raw io_uring_setup/io_uring_enter syscalls and
// mmap of the rings: no liburing. What the kernel side does is in docs/fuse-transport-plan.md
// section 3 (fs/fuse/dev_uring.c, include/uapi/linux/fuse.h).
#include "uring_loop.h"

#include <linux/io_uring.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace shadowfs {
namespace ll {
namespace uring {

static_assert(sizeof(struct io_uring_sqe) == 64, "the SQE128 slot is two of these");
constexpr size_t kSqeSize = 128;  // IORING_SETUP_SQE128
constexpr size_t kCmdOffset = 48;  // io_uring_sqe::cmd: the command area, 80 bytes with SQE128
static_assert(kCmdOffset + sizeof(abi::UringCmdReq) <= kSqeSize);

// user_data of the two kinds of completion an entry's ring sees.
constexpr uint64_t kUserCmd = 1;   // the entry's REGISTER or COMMIT_AND_FETCH
constexpr uint64_t kUserWake = 2;  // a NOP stop() sends to wake the entry's thread

bool kernelEnabled() {
  std::ifstream f("/sys/module/fuse/parameters/enable_uring");
  char c = 0;
  return f.get(c) && (c == 'Y' || c == 'y' || c == '1');
}

size_t possibleCpus() {
  // "0-1", "0-3,8-11", "0": the same count as the kernel's num_possible_cpus().
  std::ifstream f("/sys/devices/system/cpu/possible");
  std::string s;
  size_t n = 0;
  if (f && std::getline(f, s)) {
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ',')) {
      unsigned a = 0, b = 0;
      if (std::sscanf(part.c_str(), "%u-%u", &a, &b) == 2 && b >= a)
        n += b - a + 1;
      else if (std::sscanf(part.c_str(), "%u", &a) == 1)
        n += 1;
    }
  }
  if (n == 0) {
    long c = sysconf(_SC_NPROCESSORS_CONF);
    n = c > 0 ? static_cast<size_t>(c) : 1;
  }
  return n;
}

namespace {

// The reply to one ring request, written where the kernel reads it at COMMIT_AND_FETCH: the out
// header in the header area, the payload in the payload buffer, payloadSz its length. The commit
// itself comes after the handler returned (the next request overwrites these buffers, and a
// handler may still read its request after replying), so reply() cannot report the kernel's
// answer: it returns 0. The -ENOENT that /dev/fuse gives a reply to an interrupted request has no
// counterpart here: a request the kernel gave to the ring stays until answered or the
// connection ends.
class EntrySink final : public ReplySink {
 public:
  EntrySink(abi::UringReqHeader* hdr, char* payload, size_t size)
      : hdr_(hdr), payload_(payload), size_(size) {}
  int reply(const abi::OutHeader& h, const struct iovec* payload, int count) override {
    size_t total = 0;
    for (int i = 0; i < count; ++i) total += payload[i].iov_len;
    abi::OutHeader out = h;
    if (total > size_) {
      // Never for a reply to a request the kernel sized (READ, READDIR, GETXATTR ask for at most
      // what the buffer holds), but not written past the buffer either.
      std::fprintf(stderr,
                   "shadowfs: io_uring: a reply of %zu bytes does not fit the %zu-byte buffer\n",
                   total, size_);
      out.error = -EIO;
      total = 0;
      count = 0;
    }
    char* dst = payload_;
    for (int i = 0; i < count; ++i) {
      // memmove: a payload may come from the request's own bytes in this buffer.
      if (payload[i].iov_len) std::memmove(dst, payload[i].iov_base, payload[i].iov_len);
      dst += payload[i].iov_len;
    }
    out.len = static_cast<uint32_t>(sizeof out + total);
    std::memcpy(hdr_->inOut, &out, sizeof out);
    const uint32_t sz = static_cast<uint32_t>(total);
    std::memcpy(reinterpret_cast<char*>(hdr_) + offsetof(abi::UringReqHeader, ringEntInOut) +
                    offsetof(abi::UringEntInOut, payloadSz),
                &sz, sizeof sz);
    replied_ = true;
    return 0;
  }
  bool replied() const { return replied_; }

 private:
  abi::UringReqHeader* hdr_;
  char* payload_;
  size_t size_;
  bool replied_ = false;
};

}  // namespace

uint64_t serveEntry(abi::UringReqHeader* hdr, char* payload, size_t payloadSize,
                    const Dispatch& dispatch) {
  abi::InHeader h;
  std::memcpy(&h, hdr->inOut, sizeof h);
  abi::UringEntInOut io;
  std::memcpy(&io, &hdr->ringEntInOut, sizeof io);
  EntrySink sink(hdr, payload, payloadSize);
  // The kernel copied the request's first argument to opIn and the others to the payload
  // (fuse_uring_args_to_ring); h.len is still the length of the whole request as /dev/fuse would
  // deliver it (header plus every argument), so what opIn holds is the difference. That works
  // whichever argument an opcode has first, including a zero-size one (fuse_set_zero_arg0).
  const size_t head = sizeof h;
  if (h.len >= head && io.payloadSz <= payloadSize && h.len - head >= io.payloadSz &&
      h.len - head - io.payloadSz <= abi::kUringOpInSize) {
    const size_t opIn = h.len - head - io.payloadSz;
    char* start = payload - opIn - head;
    std::memcpy(start + head, hdr->opIn, opIn);
    std::memcpy(start, &h, head);
    dispatch(start, h.len, &sink);
  } else {
    std::fprintf(stderr,
                 "shadowfs: io_uring: a request of %u bytes (opcode %u) with %u payload bytes does "
                 "not fit the entry's layout; answered EIO\n",
                 h.len, h.opcode, io.payloadSz);
  }
  // Every request the kernel hands to an entry needs an answer, or the entry is never fetched
  // again: a request the decoder dropped (malformed) gets EIO.
  if (!sink.replied()) {
    abi::OutHeader out{static_cast<uint32_t>(sizeof(abi::OutHeader)), -EIO, h.unique};
    sink.reply(out, nullptr, 0);
  }
  return io.commitId;
}

// One io_uring: its fd and the mapped submission and completion rings.
struct Transport::Ring {
  int fd = -1;
  void* sqMap = MAP_FAILED;
  size_t sqMapLen = 0;
  void* cqMap = MAP_FAILED;  // sqMap itself with IORING_FEAT_SINGLE_MMAP
  size_t cqMapLen = 0;
  char* sqes = static_cast<char*>(MAP_FAILED);
  size_t sqesLen = 0;
  unsigned* sqHead = nullptr;
  unsigned* sqTail = nullptr;
  unsigned sqMask = 0;
  unsigned sqEntries = 0;
  unsigned* sqArray = nullptr;
  unsigned* cqHead = nullptr;
  unsigned* cqTail = nullptr;
  unsigned cqMask = 0;
  struct io_uring_cqe* cqes = nullptr;

  ~Ring() { close(); }

  int setup(unsigned entries, std::string* why) {
    struct io_uring_params p;
    std::memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128;  // fuse_uring_cmd refuses commands without the 80-byte area
    long r = syscall(SYS_io_uring_setup, entries, &p);
    if (r < 0) {
      *why = std::string("io_uring_setup: ") + std::strerror(errno);
      return -errno;
    }
    fd = static_cast<int>(r);
    sqMapLen = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cqMapLen = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    const bool single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single && cqMapLen > sqMapLen) sqMapLen = cqMapLen;
    sqMap = mmap(nullptr, sqMapLen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                 IORING_OFF_SQ_RING);
    if (sqMap == MAP_FAILED) return fail("mmap of the submission ring", why);
    if (single) {
      cqMap = sqMap;
    } else {
      cqMap = mmap(nullptr, cqMapLen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                   IORING_OFF_CQ_RING);
      if (cqMap == MAP_FAILED) return fail("mmap of the completion ring", why);
    }
    sqesLen = p.sq_entries * kSqeSize;
    void* s = mmap(nullptr, sqesLen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                   IORING_OFF_SQES);
    if (s == MAP_FAILED) return fail("mmap of the submission entries", why);
    sqes = static_cast<char*>(s);
    char* sq = static_cast<char*>(sqMap);
    char* cq = static_cast<char*>(cqMap);
    sqHead = reinterpret_cast<unsigned*>(sq + p.sq_off.head);
    sqTail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
    sqMask = *reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
    sqEntries = p.sq_entries;
    sqArray = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
    cqHead = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
    cqTail = reinterpret_cast<unsigned*>(cq + p.cq_off.tail);
    cqMask = *reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
    cqes = reinterpret_cast<struct io_uring_cqe*>(cq + p.cq_off.cqes);
    return 0;
  }

  int fail(const char* what, std::string* why) {
    int e = errno;
    *why = std::string(what) + ": " + std::strerror(e);
    close();
    return -e;
  }

  void close() {
    if (sqes != MAP_FAILED) munmap(sqes, sqesLen);
    if (cqMap != MAP_FAILED && cqMap != sqMap) munmap(cqMap, cqMapLen);
    if (sqMap != MAP_FAILED) munmap(sqMap, sqMapLen);
    sqes = static_cast<char*>(MAP_FAILED);
    cqMap = sqMap = MAP_FAILED;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  // Queues one 128-byte SQE (callers serialize: the entry's sqMu). False when the ring is full.
  bool push(const char (&sqe)[kSqeSize]) {
    const unsigned tail = *sqTail;
    const unsigned head = __atomic_load_n(sqHead, __ATOMIC_ACQUIRE);
    if (tail - head >= sqEntries) return false;
    const unsigned idx = tail & sqMask;
    std::memcpy(sqes + idx * kSqeSize, sqe, kSqeSize);
    sqArray[idx] = idx;
    __atomic_store_n(sqTail, tail + 1, __ATOMIC_RELEASE);
    return true;
  }
  // SQEs queued that the kernel has not consumed yet.
  unsigned unsubmitted() const {
    return __atomic_load_n(sqTail, __ATOMIC_ACQUIRE) - __atomic_load_n(sqHead, __ATOMIC_ACQUIRE);
  }
  // io_uring_enter: the number submitted, or -errno.
  int enter(unsigned toSubmit, unsigned minComplete, unsigned flags) {
    long r = syscall(SYS_io_uring_enter, fd, toSubmit, minComplete, flags, nullptr, 0);
    return r < 0 ? -errno : static_cast<int>(r);
  }
  // The oldest completion (only the entry's thread consumes them).
  bool peek(struct io_uring_cqe* out) const {
    const unsigned head = *cqHead;
    if (head == __atomic_load_n(cqTail, __ATOMIC_ACQUIRE)) return false;
    *out = cqes[head & cqMask];
    return true;
  }
  void pop() { __atomic_store_n(cqHead, *cqHead + 1, __ATOMIC_RELEASE); }
};

// One ring entry: its ring, buffers and thread.
struct Transport::Entry {
  uint16_t qid = 0;
  int phase = 0;  // when it registers (see start())
  Ring ring;
  std::mutex sqMu;  // the SQ is shared with stop()'s wake-up NOP
  abi::UringReqHeader* hdr = nullptr;
  size_t hdrLen = 0;
  char* region = nullptr;  // kHeadroom bytes, then the payload buffer
  size_t regionLen = 0;
  char* payload = nullptr;
  struct iovec iov[2];
  std::thread thread;
  bool registered = false;  // under Transport::mu_
  bool reported = false;    // under Transport::mu_
  int err = 0;              // under Transport::mu_: why its registration failed

  ~Entry() { freeBuffers(); }
  void freeBuffers() {
    if (hdr) munmap(hdr, hdrLen);
    if (region) munmap(region, regionLen);
    hdr = nullptr;
    region = payload = nullptr;
  }
};

namespace {

void prepCmd(char (&sqe)[kSqeSize], int fd, uint32_t cmdOp, const abi::UringCmdReq& req,
             const struct iovec* iov) {
  std::memset(sqe, 0, sizeof sqe);
  struct io_uring_sqe s;
  std::memset(&s, 0, sizeof s);
  s.opcode = IORING_OP_URING_CMD;
  s.fd = fd;
  s.cmd_op = cmdOp;
  s.user_data = kUserCmd;
  if (iov) {
    // REGISTER: two iovecs, the header area and the payload buffer (FUSE_URING_IOV_SEGS).
    s.addr = reinterpret_cast<uintptr_t>(iov);
    s.len = 2;
  }
  std::memcpy(sqe, &s, sizeof s);
  std::memcpy(sqe + kCmdOffset, &req, sizeof req);
}

void prepNop(char (&sqe)[kSqeSize]) {
  std::memset(sqe, 0, sizeof sqe);
  struct io_uring_sqe s;
  std::memset(&s, 0, sizeof s);
  s.opcode = IORING_OP_NOP;
  s.fd = -1;
  s.user_data = kUserWake;
  std::memcpy(sqe, &s, sizeof s);
}

void* mapAnon(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

Transport::Transport(int fuseFd, size_t payloadSize, size_t queues, size_t depth)
    : fd_(fuseFd), payloadSize_(payloadSize), queues_(queues), depth_(depth) {}

Transport::~Transport() { stop(); }

std::unique_ptr<Transport> Transport::prepare(int fuseFd, size_t payloadSize, std::string* why) {
  const size_t queues = possibleCpus();
  if (queues > 0xffff) {
    *why = "more possible CPUs than queue ids";
    return nullptr;
  }
  // Entries per queue: enough that a few long requests from one CPU leave room for its short
  // ones (about 16 in all on a small machine, as the /dev/fuse loop has up to 16 threads), at
  // least 2 each. Each entry is a thread, a ring and about payloadSize of buffers (touched only
  // as far as requests fill them).
  size_t depth = 16 / queues;
  if (depth < 2) depth = 2;
  if (depth > 8) depth = 8;
  std::unique_ptr<Transport> t(new Transport(fuseFd, payloadSize, queues, depth));
  const long page = sysconf(_SC_PAGESIZE);
  const size_t pageSize = page > 0 ? static_cast<size_t>(page) : 4096;
  const char* fault = std::getenv("SHADOWFS_URING_FAULT");
  const int refuse = !fault ? 0 : std::strcmp(fault, "refuse-queue0") == 0 ? 1
                                : std::strcmp(fault, "refuse-all") == 0  ? 2
                                                                         : 0;
  for (size_t q = 0; q < queues; ++q) {
    for (size_t i = 0; i < depth; ++i) {
      auto e = std::make_unique<Entry>();
      e->qid = static_cast<uint16_t>(q);
      // Two SQEs: the entry's command and a wake-up; the completion ring is twice that.
      if (e->ring.setup(2, why) != 0) return nullptr;
      e->hdrLen = (sizeof(abi::UringReqHeader) + pageSize - 1) / pageSize * pageSize;
      e->hdr = static_cast<abi::UringReqHeader*>(mapAnon(e->hdrLen));
      e->regionLen = kHeadroom + payloadSize;
      e->region = static_cast<char*>(mapAnon(e->regionLen));
      if (!e->hdr || !e->region) {
        *why = std::string("mapping the ring buffers: ") + std::strerror(errno);
        return nullptr;
      }
      e->payload = e->region + kHeadroom;
      e->iov[0] = {e->hdr, e->hdrLen};
      e->iov[1] = {e->payload, payloadSize};
      // Test hook (test/uring.test.ts): register payload buffers smaller than the kernel accepts,
      // for every queue or for queue 0 only, so that the kernel really refuses them (-EINVAL) and
      // the fallback to /dev/fuse runs as it would after any refusal.
      if (refuse == 2 || (refuse == 1 && q == 0)) e->iov[1].iov_len = payloadSize / 2;
      t->entries_.push_back(std::move(e));
    }
  }
  return t;
}

int Transport::registerEntry(Entry* e) {
  char sqe[kSqeSize];
  abi::UringCmdReq req{};
  req.qid = e->qid;
  prepCmd(sqe, fd_, abi::kUringCmdRegister, req, e->iov);
  {
    std::lock_guard lock(e->sqMu);
    if (!e->ring.push(sqe)) return -EBUSY;
  }
  int r;
  do r = e->ring.enter(e->ring.unsubmitted(), 0, 0);
  while (r == -EINTR);
  if (r < 0) return r;
  if (r == 0) return -EIO;  // not submitted (io_uring reports errors, so not expected)
  // The kernel refuses a registration at once (fuse_uring_cmd returns the error, and io_uring
  // completes the command before io_uring_enter returns); one it accepts completes only when a
  // request comes. A completion with 0 here is such a request, left for the loop.
  struct io_uring_cqe c;
  if (e->ring.peek(&c) && c.user_data == kUserCmd && c.res < 0) {
    e->ring.pop();
    return c.res;
  }
  return 0;
}

void Transport::report(Entry* e, int err) {
  {
    std::lock_guard lock(mu_);
    e->registered = err == 0;
    e->err = err;
    e->reported = true;
    ++reported_;
  }
  cv_.notify_all();
}

void Transport::run(Entry* e) {
  char name[16];
  std::snprintf(name, sizeof name, "sfs-ring-%u", static_cast<unsigned>(e->qid));
  pthread_setname_np(pthread_self(), name);
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return abort_ || phase_ >= e->phase; });
    if (abort_) {
      lock.unlock();
      report(e, -ECANCELED);
      return;
    }
  }
  int err = registerEntry(e);
  report(e, err);
  if (err) return;

  char sqe[kSqeSize];
  bool warned = false;
  for (;;) {
    struct io_uring_cqe c;
    if (!e->ring.peek(&c)) {
      // Submits the commit of the last request (if any) and waits for the next one.
      int r = e->ring.enter(e->ring.unsubmitted(), 1, IORING_ENTER_GETEVENTS);
      if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
        std::fprintf(stderr, "shadowfs: io_uring: waiting on queue %u failed: %s\n",
                     static_cast<unsigned>(e->qid), std::strerror(-r));
        return;
      }
      continue;
    }
    e->ring.pop();
    if (c.user_data == kUserWake) {
      if (stopping_.load()) return;
      continue;
    }
    if (c.res < 0) {
      // The connection ended (unmount, abort: -ENOTCONN; the entry's task gone: -ECANCELED).
      if (c.res == -ENOTCONN || c.res == -ECANCELED || c.res == -ECONNABORTED ||
          c.res == -ENODEV || stopping_.load())
        return;
      // Anything else (a commit for a request the kernel no longer has, -ENOENT) loses the
      // kernel's entry: register the same buffers again as a new one.
      if (!warned)
        std::fprintf(stderr, "shadowfs: io_uring: queue %u: %s; registering the entry again\n",
                     static_cast<unsigned>(e->qid), std::strerror(-c.res));
      warned = true;
      if (registerEntry(e) != 0) return;
      continue;
    }
    served_.fetch_add(1, std::memory_order_relaxed);
    abi::UringCmdReq req{};
    req.commitId = serveEntry(e->hdr, e->payload, payloadSize_, dispatch_);
    req.qid = e->qid;
    prepCmd(sqe, fd_, abi::kUringCmdCommitAndFetch, req, nullptr);
    std::lock_guard lock(e->sqMu);
    if (!e->ring.push(sqe)) {
      // Two slots, one command in flight at a time and at most one wake-up: cannot happen.
      std::fprintf(stderr, "shadowfs: io_uring: queue %u: no room to commit\n",
                   static_cast<unsigned>(e->qid));
      return;
    }
  }
}

void Transport::refuseRing() {
  Ring r;
  std::string why;
  if (r.setup(2, &why) != 0) return;
  char sqe[kSqeSize];
  abi::UringCmdReq req{};
  req.qid = 0xffff;  // >= the kernel's queue count: -EINVAL, and fc->io_uring goes back to 0
  prepCmd(sqe, fd_, abi::kUringCmdRegister, req, entries_.empty() ? nullptr : entries_[0]->iov);
  if (r.push(sqe)) r.enter(1, 0, 0);
}

bool Transport::start(Dispatch dispatch, std::string* why) {
  dispatch_ = std::move(dispatch);
  // Phase 1: every queue but 0; phase 2: queue 0. The kernel's ring is ready (and takes every
  // request) once each queue has an entry, so no entry of queue 0 registers before all the
  // others did: if registrations fail, they fail while the kernel can still go back to /dev/fuse.
  for (auto& e : entries_) e->phase = (e->qid == 0 && queues_ > 1) ? 2 : 1;
  size_t started = 0;
  for (auto& e : entries_) {
    try {
      Entry* p = e.get();
      e->thread = std::thread([this, p] { run(p); });
      ++started;
    } catch (const std::system_error&) {
      break;
    }
  }
  bool ok = started == entries_.size();
  if (!ok) *why = "could not start the ring threads";
  auto waitFor = [&](int phase) {
    size_t want = 0;
    for (auto& e : entries_)
      if (e->phase <= phase) ++want;
    std::unique_lock lock(mu_);
    phase_ = phase;
    cv_.notify_all();
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return reported_ >= want; });
  };
  bool refused = false;  // the kernel refused a registration (it went back to /dev/fuse itself)
  auto check = [&](int phase) {
    std::lock_guard lock(mu_);
    for (auto& e : entries_) {
      if (e->phase > phase || !e->reported) continue;
      if (!e->registered && e->err != -ECANCELED) {
        refused = true;
        if (ok) *why = std::string("the kernel refused a ring entry: ") + std::strerror(-e->err);
        ok = false;
      }
    }
  };
  if (ok) {
    if (!waitFor(1)) {
      ok = false;
      *why = "ring entries did not register within 10 s";
    }
    check(1);
  }
  if (ok && queues_ > 1) {
    if (!waitFor(2)) {
      ok = false;
      *why = "ring entries did not register within 10 s";
    }
    check(2);
  }
  // Ready (the kernel's view): every queue has at least one registered entry.
  bool ready = false;
  if (ok || refused) {
    std::lock_guard lock(mu_);
    std::vector<bool> has(queues_, false);
    for (auto& e : entries_)
      if (e->registered) has[e->qid] = true;
    ready = true;
    for (bool b : has) ready = ready && b;
  }
  if (ready) {
    if (!ok)
      std::fprintf(stderr, "shadowfs: io_uring: serving through the ring with fewer entries: %s\n",
                   why->c_str());
    return true;
  }
  {
    std::lock_guard lock(mu_);
    abort_ = true;
  }
  cv_.notify_all();
  // The kernel holds every new request until the ring is complete or a registration fails: if
  // none failed, make one fail.
  if (!refused) refuseRing();
  stop();
  return false;
}

void Transport::wake(Entry* e) {
  char sqe[kSqeSize];
  prepNop(sqe);
  {
    std::lock_guard lock(e->sqMu);
    if (!e->ring.push(sqe)) return;
  }
  e->ring.enter(e->ring.unsubmitted(), 0, 0);
}

void Transport::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    abort_ = true;
  }
  stopping_ = true;
  cv_.notify_all();
  // Threads still waiting on their ring (the connection is gone, so the kernel has completed or
  // will complete their commands with -ENOTCONN; the NOP covers one that has not yet).
  for (auto& e : entries_)
    if (e->thread.joinable() && e->ring.fd >= 0) wake(e.get());
  for (auto& e : entries_)
    if (e->thread.joinable()) e->thread.join();
  // The kernel no longer uses the buffers: its entries were released with the connection, or
  // (after a failed start) cancelled before they ever held a request.
  for (auto& e : entries_) {
    e->ring.close();
    e->freeBuffers();
  }
}

}  // namespace uring
}  // namespace ll
}  // namespace shadowfs
