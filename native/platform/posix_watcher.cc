// Linux FolderWatcher: one inotify instance, one thread that reads it, a pipe to wake that
// thread for stop(). inotify hands out one watch descriptor per directory inode, so watching a
// directory again returns the same wd: watches are counted per (wd, path), and the kernel's
// watch is removed when the last token on that wd goes. A wd may carry several paths (A's
// directory was renamed and is now also known under its new path): events go to each.
#include "posix_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "../core/path.h"
#include "posix_path.h"

namespace shadowfs {
namespace {

constexpr uint32_t kEvents = IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM |
                             IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF |
                             IN_ONLYDIR | IN_EXCL_UNLINK;

class PosixWatcher final : public FolderWatcher {
 public:
  PosixWatcher(posix::Fd root, std::string rootPath, posix::Fd inotify, posix::Fd wakeRead,
               posix::Fd wakeWrite, Callback cb)
      : root_(std::move(root)),
        rootPath_(std::move(rootPath)),
        inotify_(std::move(inotify)),
        wakeRead_(std::move(wakeRead)),
        wakeWrite_(std::move(wakeWrite)),
        cb_(std::move(cb)),
        procOk_(posix::procFdUsable(root_.get())) {
    thread_ = std::thread([this] { loop(); });
  }
  ~PosixWatcher() override { stop(); }
  PosixWatcher(const PosixWatcher&) = delete;
  PosixWatcher& operator=(const PosixWatcher&) = delete;

  // Any thread. The walk to the directory happens outside the lock; adding the kernel watch
  // happens under it, so a concurrent unwatch of the same wd cannot remove the kernel's watch
  // between inotify_add_watch() and our count going up.
  int watch(const std::string& relDir, Token* out) override {
    posix::Fd dir;
    if (int e = posix::openDirPath(root_.get(), relDir, &dir)) return e;
    std::string target;
    uint32_t mask = kEvents;
    if (procOk_) {
      // The magic link must be followed to reach the directory itself: no IN_DONT_FOLLOW (the
      // open above already refused a symlink).
      target = posix::procFdPath(dir.get());
    } else {
      target = relDir.empty() ? rootPath_ : rootPath_ + "/" + relDir;
      if (target.size() > posix::directLimit()) return ENAMETOOLONG;
      mask |= IN_DONT_FOLLOW;
    }
    std::lock_guard lock(mu_);
    if (stopped_) return ESHUTDOWN;
    int wd = ::inotify_add_watch(inotify_.get(), target.c_str(), mask);
    if (wd < 0) return errno;
    ++byWd_[wd][relDir];
    Token t = nextToken_++;
    tokens_[t] = {wd, relDir};
    *out = t;
    return 0;
  }

  void unwatch(Token token) override {
    std::lock_guard lock(mu_);
    auto t = tokens_.find(token);
    if (t == tokens_.end()) return;
    auto [wd, path] = t->second;
    tokens_.erase(t);
    auto w = byWd_.find(wd);
    if (w == byWd_.end()) return;  // the kernel dropped it already (directory deleted)
    auto p = w->second.find(path);
    if (p != w->second.end() && --p->second == 0) w->second.erase(p);
    if (w->second.empty()) {
      byWd_.erase(w);
      if (!stopped_) ::inotify_rm_watch(inotify_.get(), wd);
    }
  }

  // Any thread. The OS's watch ends with IN_IGNORED, read (and byWd_ updated) before the
  // callback for the batch that holds it runs.
  bool alive(Token token) override {
    std::lock_guard lock(mu_);
    auto t = tokens_.find(token);
    return t != tokens_.end() && byWd_.count(t->second.first) != 0;
  }

  void stop() override {
    std::lock_guard stopping(stopMu_);
    {
      std::lock_guard lock(mu_);
      if (stopped_ && !thread_.joinable()) return;
      stopped_ = true;
    }
    if (thread_.joinable()) {
      if (thread_.get_id() == std::this_thread::get_id()) {
        std::fprintf(stderr, "shadowfs: FolderWatcher::stop() called from its own callback\n");
        std::abort();
      }
      char c = 0;
      while (::write(wakeWrite_.get(), &c, 1) < 0 && errno == EINTR) {
      }
      thread_.join();
    }
    std::lock_guard lock(mu_);
    tokens_.clear();
    byWd_.clear();
    inotify_.reset();  // closing the instance removes every kernel watch
  }

 private:
  void loop() {
    alignas(struct inotify_event) char buf[64 * 1024];
    for (;;) {
      struct pollfd pf[2] = {{inotify_.get(), POLLIN, 0}, {wakeRead_.get(), POLLIN, 0}};
      if (::poll(pf, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (pf[1].revents) return;
      ssize_t len = ::read(inotify_.get(), buf, sizeof buf);
      if (len <= 0) continue;
      std::vector<std::string> paths;
      bool overflow = false;
      {
        std::lock_guard lock(mu_);
        std::unordered_set<std::string> seen;
        auto add = [&](std::string p) {
          if (seen.insert(p).second) paths.push_back(std::move(p));
        };
        for (char* p = buf; p < buf + len;) {
          auto* ev = reinterpret_cast<struct inotify_event*>(p);
          p += sizeof(struct inotify_event) + ev->len;
          if (ev->mask & IN_Q_OVERFLOW) overflow = true;
          auto w = byWd_.find(ev->wd);
          if (w == byWd_.end()) continue;
          for (const auto& [dir, count] : w->second) {
            (void)count;
            // ev->name is NUL-padded to ev->len.
            add(ev->len && ev->name[0] ? joinPath(dir, ev->name) : dir);
          }
          // The kernel removed the watch (directory deleted, or its file system unmounted):
          // its tokens stay valid for unwatch(), which then has nothing left to do.
          if (ev->mask & IN_IGNORED) byWd_.erase(w);
        }
      }
      if (overflow || !paths.empty()) cb_(paths, overflow);
    }
  }

  posix::Fd root_;
  const std::string rootPath_;  // only used when /proc is missing
  posix::Fd inotify_;
  posix::Fd wakeRead_, wakeWrite_;
  const Callback cb_;
  const bool procOk_;
  std::thread thread_;

  std::mutex stopMu_;  // serialises stop() calls (the destructor's included); taken before mu_

  // Guards everything below. Never held while the callback runs or while walking to a directory.
  std::mutex mu_;
  bool stopped_ = false;
  Token nextToken_ = 1;
  std::unordered_map<Token, std::pair<int, std::string>> tokens_;  // token -> (wd, path)
  std::unordered_map<int, std::map<std::string, int>> byWd_;       // wd -> path -> tokens
};

}  // namespace

std::unique_ptr<FolderWatcher> openPosixWatcher(const std::string& root,
                                                FolderWatcher::Callback onChange, int* err) {
  posix::Fd rootFd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (rootFd.get() < 0) {
    *err = errno;
    return nullptr;
  }
  posix::Fd in(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (in.get() < 0) {
    *err = errno;
    return nullptr;
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    *err = errno;
    return nullptr;
  }
  return std::make_unique<PosixWatcher>(std::move(rootFd), root, std::move(in), posix::Fd(p[0]),
                                        posix::Fd(p[1]), std::move(onChange));
}

}  // namespace shadowfs
