// Linux backend: the session. Mounting (libfuse mounts and unmounts; this backend speaks the
// kernel protocol itself), INIT's negotiation, the request counts, unmounting and a mount that
// ended on its own. One handler per FUSE request (ids -> path and layer, one overlay call, one
// reply) is in handlers_names.cc (names, attributes, xattrs) and handlers_files.cc (opens, I/O,
// listings); the requests are read and decoded in dev_loop.cc and answered through wire.h. The
// node table is in node_table.cc, cache invalidation in kernel_cache.cc; ll_mount.h has the
// mount object and its thread rules.
#include "fuse_ll.h"

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <cerrno>
#include <cstdio>

#include "../platform/posix_mount.h"
#include "ll_mount.h"

namespace shadowfs {
namespace ll {

namespace {
// Whether this process has CAP_SYS_ADMIN in its effective set (bit 21 of CapEff), which the
// kernel asks of whoever registers a backing file.
bool haveSysAdmin() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return false;
  char line[256];
  unsigned long long caps = 0;
  bool found = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "CapEff: %llx", &caps) == 1) {
      found = true;
      break;
    }
  }
  std::fclose(f);
  return found && (caps & (1ull << 21)) != 0;
}
}  // namespace

uint64_t LLMount::negotiate(uint64_t offered) {
  // What every fuse_ll mount asks for when offered: reads in parallel, READDIRPLUS (the kernel
  // picks it per listing: READDIRPLUS_AUTO), lookups in one directory in parallel, writes of up
  // to max_write at once, cached symlink targets, and the kernel dropping a file's cached pages
  // when it sees its mtime or size change (edits in A). HANDLE_KILLPRIV_V2: we clear
  // set-user-ID and set-group-ID bits where a WRITE, SETATTR, OPEN or CREATE says to
  // (LLMount::killSuidgid), so the kernel neither asks for security.capability before every
  // write (only before an inode's first, then it marks the inode as having none) nor sends a
  // GETATTR and a SETATTR of the mode around a chown or truncate; the conformance suite checks
  // the bits still go as on a real file system. DIRECT_IO_ALLOW_MMAP: files created write-only
  // are written past the page cache (opCreate); with it every kernel that has it drops the
  // cached pages a direct write covers (6.18 does so without it too, checked by a test).
  uint64_t want = offered & (abi::kAsyncRead | abi::kBigWrites | abi::kHasIoctlDir |
                             abi::kAutoInvalData | abi::kDoReaddirplus | abi::kReaddirplusAuto |
                             abi::kAsyncDio | abi::kParallelDirops | abi::kMaxPages |
                             abi::kCacheSymlinks | abi::kHandleKillprivV2 |
                             abi::kDirectIoAllowMmap);
  if (!opts_.openRoundTrips) {
    // No open round trips: OPEN and OPENDIR are answered ENOSYS (see opOpen), which the kernel
    // takes as "open without asking from now on". O_TRUNC then reaches us as a SETATTR, so
    // ATOMIC_O_TRUNC (truncation folded into OPEN) must stay off.
    noOpen_ = (offered & abi::kNoOpenSupport) != 0;
    noOpendir_ = (offered & abi::kNoOpendirSupport) != 0;
    want |= offered & (abi::kNoOpenSupport | abi::kNoOpendirSupport);
  } else if (opts_.passthrough) {
    // Passthrough is decided per OPEN, so files keep their round trips; directories need none.
    noOpendir_ = (offered & abi::kNoOpendirSupport) != 0;
    want |= offered & abi::kNoOpendirSupport;
  }
  // Passthrough: only if the kernel offers it and this process may register backing files
  // (CAP_SYS_ADMIN); otherwise opens are served as in the "open" mode.
  if (opts_.passthrough && (offered & abi::kPassthrough) && haveSysAdmin()) {
    want |= abi::kPassthrough;
    passthrough_ = true;
  }
  // O_TRUNC arrives with open(), so truncation needs no separate setattr round trip.
  if (!noOpen_ && (offered & abi::kAtomicOTrunc)) want |= abi::kAtomicOTrunc;
  readdirplus_ = (want & abi::kDoReaddirplus) != 0;
  // FUSE over io_uring: asked for only once the rings exist (prepareUring), because the kernel
  // holds every new request after this reply until the rings register (startUring) or one fails.
  if (prepareUring(offered)) want |= abi::kOverIoUring;
  // Not asked for: locks (they stay in the kernel, local to this machine, as DESIGN.md asks);
  // writeback caching (the kernel would hold writes that API reads must see at once, and trust
  // its own mtime and size over edits in A).
  return want;
}

std::vector<std::pair<std::string, uint64_t>> LLMount::requestCounts() const {
  static const char* const names[] = {"lookup",  "getattr",    "setattr", "open",    "create",
                                      "mknod",   "release",    "flush",   "read",    "write",
                                      "opendir", "readdir",    "readdirplus", "releasedir",
                                      "getxattr", "forget"};
  static_assert(sizeof names / sizeof names[0] == static_cast<size_t>(Op::Count));
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < opCounts_.size(); ++i) out.emplace_back(names[i], opCounts_[i].load(std::memory_order_relaxed));
  // Not a kind: how many of all requests (of any kind) came through io_uring ring entries.
  out.emplace_back("ring", uringActive_.load(std::memory_order_acquire) ? uring_->served() : 0);
  // Not a kind either: how many READ replies went out spliced from a file (splice_reply.h).
  out.emplace_back("read_spliced", splicedReads_.load(std::memory_order_relaxed));
  return out;
}

}  // namespace ll

int ll::LLMount::start(int* err, std::string* message) {
  struct fuse_args args = mountArgs(lowerPath_, opts_.debug, opts_.allowOther, kMaxRead);
  // libfuse mounts (through fusermount3 when not root) and unmounts; its request loop never
  // runs, so its handler table stays empty: the requests are read in dev_loop.cc.
  static const struct fuse_lowlevel_ops kNoOps = {};
  se_ = fuse_session_new(&args, &kNoOps, sizeof kNoOps, this);
  fuse_opt_free_args(&args);
  if (!se_) {
    *err = EINVAL;
    *message = "libfuse refused the session options";
    return -1;
  }
  if (fuse_session_mount(se_, mountPoint_.c_str()) != 0) {
    *err = EIO;
    *message = "the kernel refused the FUSE mount at " + mountPoint_ +
               " (is /dev/fuse usable and the mount point an empty directory?)";
    fuse_session_destroy(se_);
    se_ = nullptr;
    return -1;
  }
  fd_ = fuse_session_fd(se_);
  mounted_ = true;
  startWatcher();
  startLoop([this] { serve(); });
  // The kernel sends INIT as soon as the mount exists; what it agreed to (transport()) is known
  // once the loop has answered it. Not waiting forever: a kernel that never sends it leaves a
  // mount that fails on first use, which is reported there.
  std::unique_lock lock(initMu_);
  initCv_.wait_for(lock, std::chrono::seconds(10), [this] { return initDone_; });
  // Sequential reads the daemon serves in requests as big as a READ may be (best effort: root
  // only; posix_mount.h says why). A window of exactly max_read keeps them whole pages of it.
  if (initDone_) setFuseReadahead(mountPoint_, kMaxRead / 1024);
  return 0;
}

void ll::LLMount::closeSession() {
  if (!se_) return;
  fuse_session_unmount(se_);
  fuse_session_destroy(se_);
  se_ = nullptr;
  fd_ = -1;
}

int ll::LLMount::unmount(bool lazy) {
  if (!mounted_.load()) return 0;
  askUnmount(true);
  if (int e = unmountFuse(mountPoint_, lazy)) {
    askUnmount(false);
    return e;
  }
  mounted_ = false;
  // After a plain unmount the loop's next read fails with ENODEV and it ends (unless a copy of
  // the mount lives on in another mount namespace: see joinLoopSoon). After a lazy one it ends
  // when the last program using the detached mount lets go (see dispose()).
  if (!lazy && joinLoopSoon()) stopWatcher();
  return 0;
}

void ll::LLMount::endedOnItsOwn() {
  mounted_ = false;
  const std::string reason = "the FUSE mount at " + mountPoint_ +
                             " ended without shadowfs unmounting it (it was unmounted from "
                             "outside, or its kernel connection was aborted)";
  if (!reportGone(reason)) std::fprintf(stderr, "shadowfs: %s\n", reason.c_str());
}

std::unique_ptr<MountBackend> mountFuseLL(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message) {
  auto m = std::make_unique<ll::LLMount>(std::move(overlay), view, lower, mountPoint, opts);
  if (m->start(err, message) != 0) return nullptr;
  return m;
}

}  // namespace shadowfs
