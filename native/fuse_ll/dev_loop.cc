// fuse_ll's request loop: threads reading requests from /dev/fuse, each decoded here and handed
// to its handler in fuse_ll.cc, which replies through wire.h. libfuse only mounts and unmounts
// (fuse_ll.cc, start); speaking the protocol here is what lets the mount negotiate what
// libfuse 3.14 cannot express (docs/fuse-transport-plan.md, route C).
//
// Every length the kernel sends is checked before it is used: a request too short for its
// arguments is answered EINVAL, an unknown one ENOSYS (which also tells the kernel not to send
// that kind again, for the kinds where it remembers).
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <vector>

#include "ll_mount.h"

namespace shadowfs {
namespace ll {

namespace {

// The read buffer: a request header, WRITE's arguments and max_write bytes of data, with room to
// spare as the kernel asks.
constexpr uint32_t kMaxWrite = LLMount::kMaxWrite;
constexpr size_t kBufferSize = kMaxWrite + 4096;

// The arguments of one request, read front to back.
class Args {
 public:
  Args(const char* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  bool take(T* out) {
    if (n_ < sizeof(T)) return false;
    std::memcpy(out, p_, sizeof(T));
    p_ += sizeof(T);
    n_ -= sizeof(T);
    return true;
  }
  // A NUL-terminated name; null if the request has none.
  const char* name() {
    const void* end = std::memchr(p_, '\0', n_);
    if (!end) return nullptr;
    const char* s = p_;
    size_t len = static_cast<const char*>(end) - p_ + 1;
    p_ += len;
    n_ -= len;
    return s;
  }
  const char* rest(size_t* n) const {
    *n = n_;
    return p_;
  }

 private:
  const char* p_;
  size_t n_;
};

}  // namespace

void LLMount::serve() {
  worker();
  std::vector<std::thread> others;
  {
    std::lock_guard lock(workersMu_);
    stopping_ = true;
    others.swap(workers_);
  }
  // Each of them ends at its next read, which fails as this one's did (the connection is gone).
  for (auto& t : others) t.join();
  // The connection is gone, so the kernel has ended (or is ending) the ring entries' commands.
  if (uring_) uring_->stop();
}

bool LLMount::prepareUring(uint64_t offered) {
  if (!(offered & abi::kOverIoUring) || !opts_.ioUring || !uring::kernelEnabled()) return false;
  // The kernel wants every entry's payload buffer to hold the largest request or reply it may
  // send: max(8 KiB, max_write, max_pages pages) (fuse_uring_create, fs/fuse/dev_uring.c).
  const long page = sysconf(_SC_PAGESIZE);
  const size_t pageSize = page > 0 ? static_cast<size_t>(page) : 4096;
  const size_t maxPages = kMaxWrite / 4096;  // what the INIT reply says (maxPages)
  const size_t payload = std::max({size_t{8192}, size_t{kMaxWrite}, maxPages * pageSize});
  std::string why;
  uring_ = uring::Transport::prepare(fd_, payload, &why);
  if (!uring_ && opts_.debug)
    std::fprintf(stderr, "shadowfs: io_uring not used: %s\n", why.c_str());
  return uring_ != nullptr;
}

void LLMount::startUring() {
  std::string why;
  auto decode = [this](const char* buf, size_t size, ReplySink* sink) {
    dispatch(buf, size, sink);
  };
  bool ok = uring_->start(decode, &why);
  // Kept when it failed (stopped, its buffers freed): uring_ never changes after INIT, so that
  // requestCounts() may read it from any thread once uringActive_ says it served.
  uringActive_.store(ok, std::memory_order_release);
  if (!ok) {
    if (opts_.debug) std::fprintf(stderr, "shadowfs: io_uring not used: %s\n", why.c_str());
  } else if (opts_.debug) {
    std::fprintf(stderr, "shadowfs: io_uring: %zu queues of %zu entries\n", uring_->queues(),
                 uring_->depth());
  }
}

void LLMount::startWorkerIfAllBusy() {
  if (idle_.load() > 0) return;
  std::lock_guard lock(workersMu_);
  if (stopping_ || workers_.size() + 1 >= static_cast<size_t>(kMaxWorkers)) return;
  workers_.emplace_back([this] { worker(); });
}

void LLMount::worker() {
  std::vector<char> buf(kBufferSize);
  for (;;) {
    idle_.fetch_add(1);
    ssize_t n = ::read(fd_, buf.data(), buf.size());
    const int err = errno;
    idle_.fetch_sub(1);
    if (n < 0) {
      // EINTR: a signal; ENOENT: the request was interrupted before we read it.
      if (err == EINTR || err == EAGAIN || err == ENOENT) continue;
      // ENODEV: unmounted (or the connection aborted): the loop ends.
      if (err != ENODEV) std::fprintf(stderr, "shadowfs: reading /dev/fuse failed: %s\n", std::strerror(err));
      return;
    }
    startWorkerIfAllBusy();
    dispatch(buf.data(), static_cast<size_t>(n), nullptr);
  }
}

void LLMount::dispatch(const char* buf, size_t size, ReplySink* sink) {
  abi::InHeader h;
  if (size < sizeof h) return;
  std::memcpy(&h, buf, sizeof h);
  if (h.len != size) return;  // the kernel hands over whole requests; anything else is not one
  size_t argLen = size - sizeof h;
  const size_t ext = static_cast<size_t>(h.totalExtlen) * 8;  // extensions, never asked for
  if (ext > argLen) return;
  argLen -= ext;
  Req r{this, fd_, h.unique, h.uid, h.gid, h.pid, sink};
  auditRequest(h.pid);  // who asks, for the audit trail (native/core/audit.h)
  Req* req = &r;
  Args a(buf + sizeof h, argLen);
  const uint64_t ino = h.nodeid;
  if (opts_.debug)
    std::fprintf(stderr, "shadowfs: request %llu: opcode %u, node %llu, %zu bytes\n",
                 static_cast<unsigned long long>(h.unique), h.opcode,
                 static_cast<unsigned long long>(ino), argLen);
  auto bad = [&] { wire::replyErr(req, EINVAL); };

  switch (h.opcode) {
    case abi::INIT: {
      abi::InitIn in;
      std::memset(&in, 0, sizeof in);
      size_t n;
      const char* p = a.rest(&n);
      if (n < 16) return bad();
      std::memcpy(&in, p, n < sizeof in ? n : sizeof in);
      abi::InitOut out;
      std::memset(&out, 0, sizeof out);
      out.major = abi::kMajor;
      out.minor = abi::kMinor;
      if (in.major > abi::kMajor) {
        // A newer major: answer with ours, and the kernel sends INIT again in our terms.
        struct iovec v{&out, 8};
        wire::send(req, 0, &v, 1);
        return;
      }
      if (in.major < abi::kMajor || in.minor < 31) {
        // Older than Linux 5.4's protocol: no opens without round trips, no READDIRPLUS_AUTO
        // as used here.
        std::fprintf(stderr, "shadowfs: the kernel's FUSE protocol %u.%u is too old (7.31 needed)\n",
                     in.major, in.minor);
        wire::replyErr(req, EPROTO);
        return;
      }
      uint64_t offered = in.flags;
      if (in.flags & abi::kInitExt) offered |= static_cast<uint64_t>(in.flags2) << 32;
      uint64_t want = negotiate(offered);
      if (want >> 32) want |= abi::kInitExt;
      out.flags = static_cast<uint32_t>(want);
      out.flags2 = static_cast<uint32_t>(want >> 32);
      // Backing files for passthrough may live on a file system that is itself stacked once
      // (A on overlayfs); the kernel refuses deeper ones at BACKING_OPEN.
      if (want & abi::kPassthrough) out.maxStackDepth = 2;
      out.maxReadahead = in.maxReadahead;
      out.maxWrite = kMaxWrite;
      out.maxPages = static_cast<uint16_t>(kMaxWrite / 4096);
      out.timeGran = 1;
      struct iovec v{&out, sizeof out};
      wire::send(req, 0, &v, 1);
      // The kernel has the reply (it was processed within the write): the ring entries can
      // register now, and must, since the kernel holds new requests until they do.
      if (want & abi::kOverIoUring) startUring();
      {
        std::lock_guard lock(initMu_);
        initDone_ = true;
      }
      initCv_.notify_all();
      return;
    }
    case abi::DESTROY:
      wire::replyErr(req, 0);
      return;
    case abi::INTERRUPT:
      // Handlers do not stop early; ENOSYS tells the kernel to send no more interrupts.
      wire::replyErr(req, ENOSYS);
      return;
    case abi::LOOKUP: {
      const char* name = a.name();
      if (!name) return bad();
      return opLookup(req, ino, name);
    }
    case abi::FORGET: {
      abi::ForgetIn in;
      if (!a.take(&in)) return;  // FORGET has no reply, not even an error
      return opForget(req, ino, in.nlookup);
    }
    case abi::BATCH_FORGET: {
      abi::BatchForgetIn in;
      if (!a.take(&in)) return;
      size_t n;
      const char* p = a.rest(&n);
      if (n / sizeof(abi::ForgetOne) < in.count) return;
      return opForgetMulti(req, in.count, reinterpret_cast<const abi::ForgetOne*>(p));
    }
    case abi::GETATTR: {
      abi::GetattrIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      return opGetattr(req, ino, (in.getattrFlags & abi::kGetattrFh) ? &fi : nullptr);
    }
    case abi::SETATTR: {
      abi::SetattrIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      return opSetattr(req, ino, in, (in.valid & abi::kSetFh) ? &fi : nullptr);
    }
    case abi::READLINK:
      return opReadlink(req, ino);
    case abi::SYMLINK: {
      const char* name = a.name();
      const char* target = name ? a.name() : nullptr;
      if (!target) return bad();
      return opSymlink(req, target, ino, name);
    }
    case abi::MKNOD: {
      abi::MknodIn in;
      const char* name = a.take(&in) ? a.name() : nullptr;
      if (!name) return bad();
      return opMknod(req, ino, name, in.mode, in.rdev);
    }
    case abi::MKDIR: {
      abi::MkdirIn in;
      const char* name = a.take(&in) ? a.name() : nullptr;
      if (!name) return bad();
      return opMkdir(req, ino, name, in.mode);
    }
    case abi::UNLINK:
    case abi::RMDIR: {
      const char* name = a.name();
      if (!name) return bad();
      return h.opcode == abi::UNLINK ? opUnlink(req, ino, name) : opRmdir(req, ino, name);
    }
    case abi::RENAME:
    case abi::RENAME2: {
      abi::Rename2In in{};
      bool ok;
      if (h.opcode == abi::RENAME) {
        abi::RenameIn old;
        ok = a.take(&old);
        in.newdir = old.newdir;
      } else {
        ok = a.take(&in);
      }
      const char* from = ok ? a.name() : nullptr;
      const char* to = from ? a.name() : nullptr;
      if (!to) return bad();
      return opRename(req, ino, from, in.newdir, to, in.flags);
    }
    case abi::LINK: {
      abi::LinkIn in;
      const char* name = a.take(&in) ? a.name() : nullptr;
      if (!name) return bad();
      return opLink(req, in.oldnodeid, ino, name);
    }
    case abi::OPEN:
    case abi::OPENDIR: {
      abi::OpenIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.flags = static_cast<int>(in.flags);
      fi.killSuidgid = (in.openFlags & abi::kOpenKillSuidgid) != 0;
      return h.opcode == abi::OPEN ? opOpen(req, ino, &fi) : opOpendir(req, ino, &fi);
    }
    case abi::CREATE: {
      abi::CreateIn in;
      const char* name = a.take(&in) ? a.name() : nullptr;
      if (!name) return bad();
      FileInfo fi;
      fi.flags = static_cast<int>(in.flags);
      fi.killSuidgid = (in.openFlags & abi::kOpenKillSuidgid) != 0;
      return opCreate(req, ino, name, in.mode, &fi);
    }
    case abi::READ:
    case abi::READDIR:
    case abi::READDIRPLUS: {
      abi::ReadIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      fi.flags = static_cast<int>(in.flags);
      const off_t off = static_cast<off_t>(in.offset);
      if (h.opcode == abi::READ) return opRead(req, ino, in.size, off, &fi);
      if (h.opcode == abi::READDIR) return opReaddir(req, ino, in.size, off, &fi);
      return opReaddirplus(req, ino, in.size, off, &fi);
    }
    case abi::WRITE: {
      abi::WriteIn in;
      if (!a.take(&in)) return bad();
      size_t n;
      const char* data = a.rest(&n);
      if (n < in.size) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      fi.flags = static_cast<int>(in.flags);
      fi.killSuidgid = (in.writeFlags & abi::kWriteKillSuidgid) != 0;
      return opWrite(req, ino, data, in.size, static_cast<off_t>(in.offset), &fi);
    }
    case abi::FLUSH: {
      abi::FlushIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      return opFlush(req, ino, &fi);
    }
    case abi::RELEASE:
    case abi::RELEASEDIR: {
      abi::ReleaseIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      fi.flags = static_cast<int>(in.flags);
      return h.opcode == abi::RELEASE ? opRelease(req, ino, &fi) : opReleasedir(req, ino, &fi);
    }
    case abi::FSYNC: {
      abi::FsyncIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      return opFsync(req, ino, in.fsyncFlags & 1, &fi);
    }
    case abi::STATFS:
      return opStatfs(req, ino);
    case abi::SETXATTR: {
      abi::SetxattrIn in;
      const char* name = a.take(&in) ? a.name() : nullptr;
      if (!name) return bad();
      size_t n;
      const char* value = a.rest(&n);
      if (n < in.size) return bad();
      return opSetxattr(req, ino, name, value, in.size, static_cast<int>(in.flags));
    }
    case abi::GETXATTR: {
      abi::GetxattrIn in;
      const char* name = a.take(&in) ? a.name() : nullptr;
      if (!name) return bad();
      return opGetxattr(req, ino, name, in.size);
    }
    case abi::LISTXATTR: {
      abi::GetxattrIn in;
      if (!a.take(&in)) return bad();
      return opListxattr(req, ino, in.size);
    }
    case abi::REMOVEXATTR: {
      const char* name = a.name();
      if (!name) return bad();
      return opRemovexattr(req, ino, name);
    }
    case abi::FALLOCATE: {
      abi::FallocateIn in;
      if (!a.take(&in)) return bad();
      FileInfo fi;
      fi.fh = in.fh;
      return opFallocate(req, ino, static_cast<int>(in.mode), static_cast<off_t>(in.offset),
                         static_cast<off_t>(in.length), &fi);
    }
    default:
      // FSYNCDIR, ACCESS (default_permissions: the kernel checks), locks (kept in the
      // kernel), ioctl, poll, bmap, lseek, copy_file_range, statx, ...: not served.
      wire::replyErr(req, ENOSYS);
      return;
  }
}

}  // namespace ll
}  // namespace shadowfs
