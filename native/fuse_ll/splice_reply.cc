// READ replies spliced on /dev/fuse (see splice_reply.h).
#include "splice_reply.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <vector>

#include "../platform/posix_io.h"
#include "ll_mount.h"

namespace shadowfs {
namespace ll {

namespace {

size_t pageSize() {
  static const size_t n = [] {
    long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return n;
}

size_t pagesFor(uint64_t off, size_t size) {
  const size_t page = pageSize();
  return (static_cast<size_t>(off % page) + size + page - 1) / page;
}

// Reads exactly `n` bytes that are already in the (non-blocking) pipe `fd`.
int readExactly(int fd, char* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = ::read(fd, dst + done, n - done);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    return k < 0 ? errno : EIO;
  }
  return 0;
}

// Empties the non-blocking pipe `fd`; false if it could not (a buffer the kernel refuses to
// hand out, such as a file page that stopped being valid).
bool drain(int fd) {
  char scratch[16384];
  for (;;) {
    ssize_t k = ::read(fd, scratch, sizeof scratch);
    if (k > 0) continue;
    if (k < 0 && errno == EINTR) continue;
    return k < 0 && errno == EAGAIN;
  }
}

size_t bytesIn(int fd) {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? static_cast<size_t>(n) : 0;
}

}  // namespace

struct SpliceReply::Pipes {
  int data[2] = {-1, -1};  // the bytes read from the file
  int msg[2] = {-1, -1};   // the header, then those bytes: the reply
  size_t slots = 0;        // buffers (pages) the smaller of the two holds
  bool ok = false;

  Pipes() {
    if (::pipe2(data, O_NONBLOCK | O_CLOEXEC) != 0 || ::pipe2(msg, O_NONBLOCK | O_CLOEXEC) != 0)
      return;
    // Room for the largest READ (whole pages: the kernel reads through its page cache) and the
    // header's buffer: 1 MiB, the default /proc/sys/fs/pipe-max-size, past which the kernel
    // refuses (EPERM) a process without CAP_SYS_RESOURCE. Pipes too small for the smallest
    // read worth splicing are not kept.
    const size_t want = LLMount::kMaxRead + pageSize();
    size_t smallest = SIZE_MAX;
    for (int fd : {data[1], msg[1]}) {
      int got = ::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(want));
      if (got < 0) got = ::fcntl(fd, F_GETPIPE_SZ);
      if (got <= 0) return;
      smallest = std::min(smallest, static_cast<size_t>(got));
    }
    slots = smallest / pageSize();
    ok = slots >= pagesFor(0, kMinSplice) + 2;
  }
  ~Pipes() {
    for (int fd : {data[0], data[1], msg[0], msg[1]})
      if (fd >= 0) ::close(fd);
  }
  Pipes(const Pipes&) = delete;
  Pipes& operator=(const Pipes&) = delete;
};

namespace {

// At most kMaxPipes pairs for the whole process, made when first needed. A pair that could
// not be made (the user's pipe allowance is spent, say) is not tried again for ten seconds.
class PipePool {
 public:
  SpliceReply::Pipes* take() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        SpliceReply::Pipes* p = free_.back();
        free_.pop_back();
        return p;
      }
      if (live_ >= SpliceReply::kMaxPipes || std::chrono::steady_clock::now() < retryAfter_)
        return nullptr;
      ++live_;
    }
    auto* p = new SpliceReply::Pipes();
    if (p->ok) return p;
    delete p;
    std::lock_guard lock(mu_);
    --live_;
    retryAfter_ = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    return nullptr;
  }
  void give(SpliceReply::Pipes* p, bool reusable) {
    if (!reusable) delete p;
    std::lock_guard lock(mu_);
    if (reusable) {
      free_.push_back(p);
    } else {
      --live_;
    }
  }

 private:
  std::mutex mu_;
  std::vector<SpliceReply::Pipes*> free_;
  int live_ = 0;
  std::chrono::steady_clock::time_point retryAfter_{};
};

// Never destroyed: a worker thread may still give pipes back while the process exits.
PipePool& pool() {
  static PipePool* p = new PipePool();
  return *p;
}

}  // namespace

SpliceReply::SpliceReply(const Req* r, char* buf, size_t size, uint64_t off) : r_(r), buf_(buf) {
  if (r->sink || size < kMinSplice || size > LLMount::kMaxRead) return;
  Pipes* p = pool().take();
  if (!p) return;
  // One pipe buffer per page the range touches (splice from a file or a memory file fills one
  // per page), and one more in the reply pipe for the header.
  if (pagesFor(off, size) + 1 > p->slots) {
    pool().give(p, true);
    return;
  }
  pipes_ = p;
}

SpliceReply::~SpliceReply() {
  if (!pipes_) return;
  // Empty after a reply the kernel took (no check on that path: every large READ takes it);
  // otherwise emptied, and a pipe that cannot be emptied is closed.
  if (!spliced_ && (bytesIn(pipes_->data[0]) || bytesIn(pipes_->msg[0]))) {
    if (!discard()) broken_ = true;
  }
  pool().give(pipes_, !broken_);
}

int SpliceReply::read(int fd, uint64_t off, size_t size, size_t* got) {
  *got = 0;
  if (!pipes_) return copyBack(fd, off, size, 0, got);
  loff_t at = static_cast<loff_t>(off);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::splice(fd, &at, pipes_->data[1], nullptr, size - done, SPLICE_F_NONBLOCK);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      // The end of the file, or (a file system may say 0 at a hole) not: pread decides.
      char probe;
      ssize_t k;
      do {
        k = ::pread(fd, &probe, 1, static_cast<off_t>(at));
      } while (k < 0 && errno == EINTR);
      if (k == 0) break;
    }
    // Not spliceable (a full pipe, a file system that cannot): the copy path for the rest.
    return copyBack(fd, off, size, done, got);
  }
  *got = done;
  if (done) sendSpliced(done);
  return 0;
}

// The `done` bytes already spliced into the data pipe go back into buf, and the rest is read
// from the file into buf after them: the caller sends the reply from buf.
int SpliceReply::copyBack(int fd, uint64_t off, size_t size, size_t done, size_t* got) {
  if (done) {
    if (int e = readExactly(pipes_->data[0], buf_, done)) {
      if (!discard()) broken_ = true;
      return e;
    }
  }
  size_t more = 0;
  if (int e = preadFull(fd, buf_ + done, size - done, off + done, &more)) return e;
  *got = done + more;
  return 0;
}

// The header into the reply pipe, the bytes after it, and the pipe into /dev/fuse. Where a
// step fails with the reply still in our pipes, it is read back into buf for the caller to
// send as a copy.
void SpliceReply::sendSpliced(size_t got) {
  abi::OutHeader h{static_cast<uint32_t>(sizeof h + got), 0, r_->unique};
  const int msgIn = pipes_->msg[1], msgOut = pipes_->msg[0], dataOut = pipes_->data[0];
  size_t moved = 0;
  bool headerIn = ::write(msgIn, &h, sizeof h) == static_cast<ssize_t>(sizeof h);
  while (headerIn && moved < got) {
    ssize_t n = ::splice(dataOut, nullptr, msgIn, nullptr, got - moved, SPLICE_F_NONBLOCK);
    if (n > 0) {
      moved += static_cast<size_t>(n);
    } else if (!(n < 0 && errno == EINTR)) {
      break;
    }
  }
  if (headerIn && moved == got) {
    // The kernel takes exactly this many bytes from the pipe and copies them into the waiting
    // request (no SPLICE_F_MOVE: the pages are the file's page cache, the folder's included,
    // and stay there), or, failing before it took them (ENOMEM, EBADF), none.
    ssize_t n;
    do {
      n = ::splice(msgOut, nullptr, r_->fd, nullptr, sizeof h + got, 0);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof h + got)) {
      answered_ = spliced_ = true;
      return;
    }
    if (bytesIn(msgOut) < sizeof h + got) {
      // Taken and refused (ENOENT: the request was interrupted and is gone): it has ended.
      answered_ = true;
      if (!discard()) broken_ = true;
      return;
    }
  }
  // Still ours: back into buf, header skipped.
  int e = 0;
  if (headerIn) {
    char skip[sizeof h];
    e = readExactly(msgOut, skip, sizeof h);
  }
  if (!e) e = readExactly(msgOut, buf_, moved);
  if (!e) e = readExactly(dataOut, buf_ + moved, got - moved);
  if (e) {
    if (!discard()) broken_ = true;
    answered_ = true;
    wire::replyErr(r_, EIO);
  }
}

bool SpliceReply::discard() {
  if (!pipes_) return true;
  const bool data = drain(pipes_->data[0]);
  const bool msg = drain(pipes_->msg[0]);
  return data && msg;
}

}  // namespace ll
}  // namespace shadowfs
