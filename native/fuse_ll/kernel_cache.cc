// Kernel cache control for fuse_ll: what the kernel must forget after a layer switch (one epoch
// notification where the kernel takes it, per-entry invalidation otherwise), after an API
// write, and after an edit in the folder reported by the watcher.
#include "ll_mount.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "../core/path.h"

namespace shadowfs {
namespace ll {

void LLMount::watchDirLocked(FNode* n, const std::string& path) {
  std::string abs = path.empty() ? lowerPath_ : lowerPath_ + "/" + path;
  int wd = inotify_add_watch(inotifyFd_, abs.c_str(),
                             IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM |
                                 IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW |
                                 IN_EXCL_UNLINK);
  // ENOENT: a directory that exists only in a layer. ENOSPC: out of watches; that directory
  // then falls back to the cache timeout.
  if (wd < 0) return;
  auto& w = watches_[wd];
  w.first = path;
  w.second++;
  n->wd = wd;
}

void LLMount::unwatchLocked(FNode* n) {
  if (n->wd < 0) return;
  auto it = watches_.find(n->wd);
  if (it != watches_.end() && --it->second.second == 0) {
    inotify_rm_watch(inotifyFd_, n->wd);
    watches_.erase(it);
  }
  n->wd = -1;
}

void LLMount::startWatcher() {
  inotifyFd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotifyFd_ < 0) return;
  if (pipe2(wakeFd_, O_CLOEXEC) != 0) {
    ::close(inotifyFd_);
    inotifyFd_ = -1;
    return;
  }
  {
    std::lock_guard lock(tmu_);
    watchDirLocked(nodes_[FUSE_ROOT_ID].get(), std::string());
  }
  watcher_ = std::thread([this] { watcherLoop(); });
}

void LLMount::stopWatcher() {
  if (watcher_.joinable()) {
    char c = 0;
    (void)!::write(wakeFd_[1], &c, 1);
    watcher_.join();
  }
  for (int& fd : {std::ref(inotifyFd_), std::ref(wakeFd_[0]), std::ref(wakeFd_[1])}) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void LLMount::watcherLoop() {
  alignas(struct inotify_event) char buf[64 * 1024];
  for (;;) {
    struct pollfd pf[2] = {{inotifyFd_, POLLIN, 0}, {wakeFd_[0], POLLIN, 0}};
    if (::poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (pf[1].revents) return;
    ssize_t len = ::read(inotifyFd_, buf, sizeof buf);
    if (len <= 0) continue;
    std::vector<std::string> paths;
    bool overflow = false;
    {
      std::lock_guard lock(tmu_);
      for (char* p = buf; p < buf + len;) {
        auto* ev = reinterpret_cast<struct inotify_event*>(p);
        p += sizeof(struct inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) overflow = true;
        auto it = watches_.find(ev->wd);
        if (it == watches_.end()) continue;
        if (ev->mask & IN_IGNORED) {
          watches_.erase(it);
          continue;
        }
        paths.push_back(ev->len ? joinPath(it->second.first, ev->name) : it->second.first);
      }
    }
    if (overflow) invalidateAll();
    if (!paths.empty()) invalidatePaths(paths);
  }
}


void LLMount::invalidatePaths(const std::vector<std::string>& paths) {
  if (!mounted_.load() || !se_) return;
  std::vector<std::pair<uint64_t, std::string>> entries;
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(tmu_);
    for (const std::string& p : paths) {
      uint64_t id = FUSE_ROOT_ID;
      auto comps = components(p);
      for (size_t i = 0; i < comps.size(); ++i) {
        std::string name(comps[i]);
        if (i + 1 == comps.size()) {
          entries.emplace_back(id, name);
          inodes.push_back(id);  // the parent's listing and mtime changed too
        }
        auto it = byName_.find(key(id, name));
        if (it == byName_.end()) break;
        id = it->second;
        if (i + 1 == comps.size()) inodes.push_back(id);
      }
    }
  }
  for (auto& [parent, name] : entries)
    fuse_lowlevel_notify_inval_entry(se_, parent, name.c_str(), name.size());
  for (uint64_t id : inodes) fuse_lowlevel_notify_inval_inode(se_, id, 0, 0);
}

namespace {
// FUSE_NOTIFY_INC_EPOCH (kernel protocol 7.44): one message that makes every name the kernel
// has cached, including negative entries, invalid at its next use. libfuse 3.14 has no call for
// it, so it is written to /dev/fuse by hand: a bare fuse_out_header with unique 0 and the
// notification code in `error`.
constexpr int32_t kNotifyIncEpoch = 8;
struct NotifyHeader {
  uint32_t len;
  int32_t error;
  uint64_t unique;
};
}  // namespace

void LLMount::invalidateForSwitch(const std::vector<std::string>& paths) {
  if (!mounted_.load() || !se_) return;
  if (opts_.useEpoch) {
    NotifyHeader h{sizeof(NotifyHeader), kNotifyIncEpoch, 0};
    ssize_t n = ::write(fuse_session_fd(se_), &h, sizeof h);
    epochWorks_ = n == static_cast<ssize_t>(sizeof h);
  }
  if (!epochWorks_.load()) {
    invalidatePaths(paths);
    return;
  }
  // Names are handled by the epoch; attributes and cached pages of the objects the kernel
  // holds at the paths that differ still have to go.
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(tmu_);
    for (const std::string& p : paths) {
      uint64_t id = FUSE_ROOT_ID;
      for (auto c : components(p)) {
        inodes.push_back(id);
        auto it = byName_.find(key(id, std::string(c)));
        if (it == byName_.end()) {
          id = 0;
          break;
        }
        id = it->second;
      }
      if (id) inodes.push_back(id);
    }
  }
  std::sort(inodes.begin(), inodes.end());
  inodes.erase(std::unique(inodes.begin(), inodes.end()), inodes.end());
  for (uint64_t id : inodes) fuse_lowlevel_notify_inval_inode(se_, id, 0, 0);
}

void LLMount::invalidateAll() {
  if (!mounted_.load() || !se_) return;
  std::vector<std::pair<uint64_t, std::string>> entries;
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(tmu_);
    for (auto& [id, n] : nodes_) {
      inodes.push_back(id);
      for (auto& nm : n->names) entries.emplace_back(nm.parent, nm.name);
    }
  }
  for (auto& [parent, name] : entries)
    fuse_lowlevel_notify_inval_entry(se_, parent, name.c_str(), name.size());
  for (uint64_t id : inodes) fuse_lowlevel_notify_inval_inode(se_, id, 0, 0);
}


}  // namespace ll
}  // namespace shadowfs
