// Reading the folder ahead of a walk. A program that lists a directory with attributes (find,
// git status, ls -lR, a watcher's first scan) usually goes on into its subdirectories. Each of
// its requests reaches the daemon one at a time, and with cold caches each stat the daemon makes
// waits for the disk while the other core sits idle. DirReadAhead takes the subdirectories of a
// listing as a hint and, on a thread of its own, lists each one and stats its entries, so the
// system's dentry and inode caches hold them by the time the walk asks: the daemon's own calls
// then hit memory. It only reads (through the folder's root fd, never following a symlink out of
// it) and keeps nothing: what it warms is the kernel's to keep or drop.
//
// Only while it finds the disk: directories that open and list quicker than kWarmList (measured
// on this machine: over 99% of directories take longer with cold caches, 90% take less with
// warm ones; a directory's first read is the telling one, as the disk's read-ahead often brings
// in its files' inodes together) mean the walk gains nothing from it. After kWarmRun such
// directories in a row it drops what waits and ignores hints for kPause, so a warm walk costs
// a few directories' reads per pause.
//
// Bounded: kThreads threads, gone after a few idle seconds; at most kMaxQueued directories wait (the oldest hints are dropped first), at most
// kMaxEntries entries of one directory are statted, and the newest hint is read first, which is
// the order of a depth-first walk (the first subdirectory of the directory just listed).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace shadowfs {

class DirReadAhead {
 public:
  static constexpr size_t kMaxQueued = 1024;
  static constexpr size_t kMaxEntries = 4096;
  // One: more overlapped the disk further but took the CPU a walk over warm caches needs.
  static constexpr size_t kThreads = 1;
  static constexpr std::chrono::microseconds kWarmList{30};
  static constexpr int kWarmRun = 2;
  static constexpr std::chrono::milliseconds kPause{500};

  // rootFd stays the caller's; it must outlive this object. `warmList`: the time to open and
  // list a directory under which it counts as in memory (tests: zero never pauses, a second
  // always does).
  explicit DirReadAhead(int rootFd, std::chrono::nanoseconds warmList = kWarmList);
  ~DirReadAhead();                    // stops the thread (it finishes the directory it reads)
  DirReadAhead(const DirReadAhead&) = delete;
  DirReadAhead& operator=(const DirReadAhead&) = delete;

  // Directories (relative to the root) a walk is likely to list next, in the order it will:
  // the first is read first. Never blocks on I/O.
  void want(const std::vector<std::string>& dirs);

  // What it did so far (tests): hints taken off the stack, directories read, entries statted.
  struct Counts {
    size_t taken = 0;
    size_t dirs = 0;
    size_t entries = 0;
    size_t pauses = 0;  // times it found the folder in memory and ignored hints a while
  };
  Counts counts() const;

 private:
  void run();
  // Lists `rel` and stats its entries; false when it could not be opened as a directory below
  // the root without following a symlink.
  // *listTime: how long reaching, opening and reading the first entries took.
  bool readOne(const std::string& rel, size_t* entries, std::chrono::nanoseconds* listTime);

  const int rootFd_;
  const std::chrono::nanoseconds warmList_;
  int warmRun_ = 0;  // directories in a row found in memory
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> stack_;  // back: the next to read
  std::unordered_set<std::string> queued_;
  Counts counts_;
  std::chrono::steady_clock::time_point pausedUntil_{};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;  // started by a hint when none runs
  size_t running_ = 0;                 // threads not yet gone: each leaves after kIdle idle
};

}  // namespace shadowfs
