// See posix_readahead.h.
#include "posix_readahead.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix_path.h"

namespace shadowfs {

DirReadAhead::DirReadAhead(int rootFd, std::chrono::nanoseconds warmList)
    : rootFd_(rootFd), warmList_(warmList) {}

DirReadAhead::~DirReadAhead() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void DirReadAhead::want(const std::vector<std::string>& dirs) {
  if (dirs.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (stop_ || std::chrono::steady_clock::now() < pausedUntil_) return;
    // Pushed last to first, so that the first lands on top of the stack.
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
      if (!queued_.insert(*it).second) continue;  // already waiting
      stack_.push_back(*it);
      if (stack_.size() > kMaxQueued) {
        queued_.erase(stack_.front());
        stack_.pop_front();
      }
    }
    if (running_ == 0) {
      for (auto& t : threads_) t.join();  // all have left run() (or are leaving it)
      threads_.clear();
      for (size_t i = 0; i < kThreads; ++i) threads_.emplace_back([this] { run(); });
      running_ = kThreads;
    }
  }
  cv_.notify_one();
}

DirReadAhead::Counts DirReadAhead::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void DirReadAhead::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (!cv_.wait_for(lock, std::chrono::seconds(5), [this] { return stop_ || !stack_.empty(); })) {
      --running_;  // idle: a later hint starts threads again
      return;
    }
    if (stop_) return;
    std::string rel = std::move(stack_.back());
    stack_.pop_back();
    queued_.erase(rel);
    lock.unlock();
    size_t entries = 0;
    std::chrono::nanoseconds listTime{0};
    const bool read = readOne(rel, &entries, &listTime);
    lock.lock();
    ++counts_.taken;
    if (read) ++counts_.dirs;
    counts_.entries += entries;
    if (!read) continue;
    warmRun_ = listTime < warmList_ ? warmRun_ + 1 : 0;
    if (warmRun_ >= kWarmRun) {
      // In memory already: the walk needs no help (see the header).
      warmRun_ = 0;
      ++counts_.pauses;
      pausedUntil_ = std::chrono::steady_clock::now() + kPause;
      stack_.clear();
      queued_.clear();
    }
  }
}

bool DirReadAhead::readOne(const std::string& rel, size_t* entries,
                           std::chrono::nanoseconds* listTime) {
  const auto start = std::chrono::steady_clock::now();
  // Component by component (the walk refuses a symlink on the way), so that a directory the
  // developer swapped for a link since the listing never takes the reads out of the folder.
  posix::At at;
  if (rel.empty() || posix::resolveAt(rootFd_, rel, &at, true)) return false;
  const int fd = ::openat(at.dirFd, at.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return false;
  }
  size_t n = 0;
  struct stat st;
  bool first = true;
  while (struct dirent* de = ::readdir(d)) {
    if (first) {
      *listTime = std::chrono::steady_clock::now() - start;
      first = false;
    }
    if (de->d_name[0] == '.' &&
        (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0)))
      continue;
    if (n == kMaxEntries || stop_.load(std::memory_order_relaxed)) break;
    (void)::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW);
    ++n;
  }
  if (first) *listTime = std::chrono::steady_clock::now() - start;  // an empty directory
  ::closedir(d);
  *entries = n;
  return true;
}

}  // namespace shadowfs
