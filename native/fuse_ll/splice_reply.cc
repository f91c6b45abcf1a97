// READ replies spliced on /dev/fuse (see splice_reply.h).
#include "splice_reply.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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

// Empties the non-blocking pipe `fd`.
void drain(int fd) {
  char scratch[16384];
  for (;;) {
    ssize_t k = ::read(fd, scratch, sizeof scratch);
    if (k > 0) continue;
    if (k < 0 && errno == EINTR) continue;
    return;
  }
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
    // refuses (EPERM) a process without CAP_SYS_RESOURCE; where even that is refused, the
    // pipe keeps the size it has and only the reads that fit it are spliced.
    const size_t want = LLMount::kMaxRead + pageSize();
    size_t smallest = SIZE_MAX;
    for (int fd : {data[1], msg[1]}) {
      int got = ::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(want));
      if (got < 0) got = ::fcntl(fd, F_GETPIPE_SZ);
      if (got <= 0) return;
      smallest = std::min(smallest, static_cast<size_t>(got));
    }
    slots = smallest / pageSize();
    ok = slots > 2;
  }
  ~Pipes() {
    for (int fd : {data[0], data[1], msg[0], msg[1]})
      if (fd >= 0) ::close(fd);
  }
  Pipes(const Pipes&) = delete;
  Pipes& operator=(const Pipes&) = delete;
};

SpliceReply::Pipes* SpliceReply::forThisThread() {
  thread_local Pipes pipes;
  return pipes.ok ? &pipes : nullptr;
}

SpliceReply::SpliceReply(const Req* r, char* buf, size_t size, uint64_t off) : r_(r), buf_(buf) {
  if (r->sink || size < kMinSplice) return;
  Pipes* p = forThisThread();
  if (!p) return;
  // One pipe buffer per page the range touches (splice from a file or a memory file fills one
  // per page), and one more in the reply pipe for the header.
  const size_t page = pageSize();
  const size_t pages = (static_cast<size_t>(off % page) + size + page - 1) / page;
  if (pages + 1 > p->slots) return;
  pipes_ = p;
}

int SpliceReply::read(int fd, uint64_t off, size_t size, size_t* got) {
  *got = 0;
  if (!pipes_) return copyBack(fd, off, size, got);
  loff_t at = static_cast<loff_t>(off);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::splice(fd, &at, pipes_->data[1], nullptr, size - done, SPLICE_F_NONBLOCK);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) break;  // the file's end
    if (errno == EINTR) continue;
    // Not spliceable (a full pipe, a file system that cannot): the copy path from here on.
    inPipe_ = done;
    return copyBack(fd, off, size, got);
  }
  inPipe_ = done;
  *got = done;
  return 0;
}

// The bytes already spliced into the data pipe go back into buf, and the rest is read from the
// file into buf after them: the reply is then sent from buf.
int SpliceReply::copyBack(int fd, uint64_t off, size_t size, size_t* got) {
  size_t done = inPipe_;
  inPipe_ = 0;
  if (done) {
    if (int e = readExactly(pipes_->data[0], buf_, done)) {
      discard();
      return e;
    }
  }
  while (done < size) {
    ssize_t n = ::pread(fd, buf_ + done, size - done, static_cast<off_t>(off + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  *got = done;
  return 0;
}

int SpliceReply::send(size_t got) {
  if (!inPipe_ || got != inPipe_) {
    if (inPipe_) discard();  // not expected: readVia reports what read() took
    return wire::replyBuf(r_, buf_, got);
  }
  inPipe_ = 0;
  abi::OutHeader h{static_cast<uint32_t>(sizeof h + got), 0, r_->unique};
  const int msgIn = pipes_->msg[1], msgOut = pipes_->msg[0], dataOut = pipes_->data[0];
  size_t moved = 0;
  bool headerIn = false;
  ssize_t n = ::write(msgIn, &h, sizeof h);
  if (n == static_cast<ssize_t>(sizeof h)) {
    headerIn = true;
    while (moved < got) {
      n = ::splice(dataOut, nullptr, msgIn, nullptr, got - moved, SPLICE_F_NONBLOCK);
      if (n > 0) {
        moved += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break;
      }
    }
  }
  if (moved == got) {
    // The kernel takes exactly this many bytes from the pipe, or none if it holds fewer, and
    // copies them into the waiting request (no SPLICE_F_MOVE: the pages are the file's page
    // cache, the folder's included, and stay there).
    for (;;) {
      n = ::splice(msgOut, nullptr, r_->fd, nullptr, sizeof h + got, 0);
      if (n == static_cast<ssize_t>(sizeof h + got)) return 0;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    const int e = n < 0 ? errno : EIO;
    discard();  // the kernel consumed the reply even if it refused it (ENOENT: interrupted)
    return -e;
  }
  // The bytes could not follow the header into the reply pipe: take them back and send a copy.
  int e = 0;
  if (headerIn) {
    char skip[sizeof h];
    e = readExactly(msgOut, skip, sizeof h);
  }
  if (!e) e = readExactly(msgOut, buf_, moved);
  if (!e) e = readExactly(dataOut, buf_ + moved, got - moved);
  if (e) {
    discard();
    return wire::replyErr(r_, EIO);
  }
  return wire::replyBuf(r_, buf_, got);
}

void SpliceReply::discard() {
  inPipe_ = 0;
  if (!pipes_) return;
  drain(pipes_->data[0]);
  drain(pipes_->msg[0]);
}

}  // namespace ll
}  // namespace shadowfs
