// What both FUSE backends share around their request loop: the mount arguments they pass to
// libfuse (or WinFsp), and the life of the loop thread. A lazily unmounted file system is
// served until its last user lets go, so dispose() may have to hand the backend object to its
// own loop thread, which deletes it when the loop ends.
#pragma once

#include <fcntl.h>
#if defined(_WIN32)
#include "../platform/winfsp_fuse3.h"  // WinFsp's FUSE3 API, declared by this project
#else
#include <fuse_opt.h>
#endif

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "../core/backend.h"
#include "../core/dir_stream.h"
#include "fuse_attr.h"

namespace shadowfs {

// argv for fuse_session_new / fuse_new: the folder in the mount table, permission checks left
// to the kernel, other users let in when asked, and -d when asked. Free with fuse_opt_free_args.
// WinFsp takes its own options instead (src/dll/fuse/fuse.c, fsp_fuse_core_opts): files owned
// by the user who mounts (uid/gid -1), how long Windows may cache file information
// (FileInfoTimeout, ms: 0, as fuse_hl caches nothing) and the volume label Explorer shows.
// Case-insensitive names are not an option there: init asks for them (FUSE_CAP_CASE_INSENSITIVE
// in conn->want, fuse_hl.cc); WinFsp keeps an option it does not know and ignores it.
// `maxRead` (Linux, 0: the kernel's default): the largest READ the kernel sends.
inline struct fuse_args mountArgs(const std::string& lower, bool debug, bool allowOther = false,
                                  unsigned maxRead = 0) {
#if defined(_WIN32)
  (void)lower;
  (void)allowOther;
  (void)maxRead;
  std::string opts = "uid=-1,gid=-1,umask=022,FileInfoTimeout=0,volname=shadowfs";
#else
  std::string opts = "default_permissions,fsname=shadowfs:" + escapeOpt(lower) + ",subtype=shadowfs";
  if (allowOther) opts += ",allow_other";
  if (maxRead) opts += ",max_read=" + std::to_string(maxRead);
#endif
  struct fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  fuse_opt_add_arg(&args, "shadowfs");
  fuse_opt_add_arg(&args, "-o");
  fuse_opt_add_arg(&args, opts.c_str());
  if (debug) fuse_opt_add_arg(&args, "-d");
  return args;
}

// open(2) flags as both FUSE APIs pass them, reduced to what the overlay needs.
inline OpenIntent intentOf(int flags) {
  OpenIntent i = intentFromFlags(flags, O_ACCMODE, O_RDONLY, O_TRUNC, O_APPEND, O_EXCL);
#if defined(__linux__)
  // execve opens the file with __FMODE_EXEC (0x20) among its flags, which the kernel keeps in
  // f_flags and FUSE passes on in OPEN's flags (fs/exec.c, fs/fuse/file.c): the audit trail's
  // "exec". WinFsp's FUSE layer has no such bit.
  i.exec = (flags & 0x20) != 0;
#endif
  return i;
}

class LoopedMount : public MountBackend {
 public:
  // Deletes the object now, or, while its loop still serves a detached mount, once it ends.
  void dispose() final {
    std::unique_lock lock(loopMu_);
    if (loopDone_ || !loop_.joinable()) {
      lock.unlock();
      delete this;
      return;
    }
    orphaned_ = true;
  }

 protected:
  // Runs `serve` (the request loop) on its own thread. When the loop ends and no unmount was
  // asked for (askUnmount), the mount ended on its own: someone unmounted it from outside, or
  // its kernel connection was aborted; endedOnItsOwn() then tells the addon (reportGone).
  void startLoop(std::function<void()> serve) {
    loop_ = std::thread([this, serve = std::move(serve)] {
      serve();
      if (!unmountAsked_.exchange(true)) endedOnItsOwn();
      std::unique_lock lock(loopMu_);
      loopDone_ = true;
      loopCv_.notify_all();
      if (orphaned_) {
        lock.unlock();
        loop_.detach();
        delete this;
      }
    });
  }
  // Waits for the loop to end (after a plain unmount it ends at its next read). Derived
  // destructors call it first, before their members go.
  void joinLoop() {
    if (loop_.joinable()) loop_.join();
  }
  // After a plain unmount: joins the loop if it ends within a moment, which it does at its next
  // read unless another mount namespace holds a copy of the mount (one made after ours, by
  // unshare or a container runtime), which keeps the connection alive until the copy goes. Then
  // it returns false without waiting: the unmount is done for this daemon, and dispose() leaves
  // the loop to serve the copy and delete the object when it ends. No request waits on that.
  bool joinLoopSoon() {
    {
      std::unique_lock lock(loopMu_);
      if (!loopCv_.wait_for(lock, kLoopEndWait, [this] { return loopDone_; })) return false;
    }
    joinLoop();
    return true;
  }
  static constexpr std::chrono::milliseconds kLoopEndWait{1000};

  // unmount() says so before it asks the kernel (so the loop's end that follows is expected),
  // and takes it back when the kernel refused (busy): the mount is still there.
  void askUnmount(bool asked) { unmountAsked_.store(asked); }
  // The loop ended and nobody asked: turn mounted() false and report why (loop thread; the
  // object is still alive, whatever dispose() has been told).
  virtual void endedOnItsOwn() = 0;

 private:
  std::thread loop_;
  std::mutex loopMu_;
  std::condition_variable loopCv_;
  bool loopDone_ = false;  // guarded by loopMu_
  bool orphaned_ = false;  // guarded by loopMu_
  std::atomic<bool> unmountAsked_{false};
};

}  // namespace shadowfs
