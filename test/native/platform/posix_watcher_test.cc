// Unit tests of the Linux FolderWatcher (native/platform/posix_watcher.cc) on a real temporary
// folder: reported paths, counted watches, directories deeper than PATH_MAX, errors, stop().
// Linux only (built into the unit-test runner where inotify exists).
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../../native/platform/posix_watcher.h"
#include "../unit/unit.h"

using namespace shadowfs;

namespace {

// Removes everything below directory fd `dir` (by descriptors: works at any depth).
void clearDir(int dir) {
  int copy = dup(dir);
  DIR* d = fdopendir(copy);
  if (!d) return;
  std::vector<std::pair<std::string, bool>> names;
  while (struct dirent* de = readdir(d))
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) names.push_back({de->d_name, de->d_type == DT_DIR});
  closedir(d);
  for (auto& [name, isDir] : names) {
    if (isDir) {
      int sub = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        clearDir(sub);
        close(sub);
      }
    }
    unlinkat(dir, name.c_str(), isDir ? AT_REMOVEDIR : 0);
  }
}

// A temporary folder, a watcher on it, and what the watcher reported.
struct Fixture {
  std::string root;
  int rootFd = -1;
  std::unique_ptr<FolderWatcher> watcher;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> seen;
  int overflows = 0;
  std::function<void()> inCallback;

  Fixture() {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/shadowfs-unit-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (!mkdtemp(buf.data())) throw unit::Abort{};
    root = buf.data();
    rootFd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int err = 0;
    watcher = openPosixWatcher(
        root,
        [this](const std::vector<std::string>& paths, bool overflow) {
          {
            std::lock_guard lock(mu);
            seen.insert(seen.end(), paths.begin(), paths.end());
            if (overflow) ++overflows;
          }
          cv.notify_all();
          if (inCallback) inCallback();
        },
        &err);
    if (!watcher) {
      unit::fail(__FILE__, __LINE__, "openPosixWatcher: " + unit::errnoName(err));
      throw unit::Abort{};
    }
  }
  ~Fixture() {
    watcher.reset();
    clearDir(rootFd);
    close(rootFd);
    rmdir(root.c_str());
  }

  // Waits until `path` was reported (true) or `ms` passed (false).
  bool waitFor(const std::string& path, int ms = 3000) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::milliseconds(ms), [&] {
      for (auto& s : seen)
        if (s == path) return true;
      return false;
    });
  }
  void forget() {
    std::lock_guard lock(mu);
    seen.clear();
  }
  bool reported(const std::string& path) {
    std::lock_guard lock(mu);
    for (auto& s : seen)
      if (s == path) return true;
    return false;
  }
  void touch(const std::string& rel) {
    int fd = openat(rootFd, rel.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
  }
};

}  // namespace

TEST(watcher_reports_changed_entries_by_relative_path) {
  Fixture f;
  REQUIRE(mkdirat(f.rootFd, "sub", 0755) == 0);
  FolderWatcher::Token root = 0, sub = 0;
  REQUIRE_OK(f.watcher->watch("", &root));
  REQUIRE_OK(f.watcher->watch("sub", &sub));
  CHECK(root != 0 && sub != 0 && root != sub);
  f.touch("top.txt");
  CHECK(f.waitFor("top.txt"));
  f.touch("sub/inner.txt");
  CHECK(f.waitFor("sub/inner.txt"));
  REQUIRE(renameat(f.rootFd, "sub/inner.txt", f.rootFd, "sub/moved.txt") == 0);
  CHECK(f.waitFor("sub/moved.txt"));
  CHECK(f.reported("sub/inner.txt"));
  CHECK(fchmodat(f.rootFd, "sub", 0700, 0) == 0);
  CHECK(f.waitFor("sub"));
}

// A directory removed (and made again, which on ext4 and tmpfs may get its old inode number):
// the token of the old one's watch is no longer alive once its removal is reported, and a watch
// of the new one is, so a backend can tell it must watch the directory again.
TEST(watcher_says_a_watch_of_a_removed_directory_is_no_longer_alive) {
  Fixture f;
  REQUIRE(mkdirat(f.rootFd, "d", 0755) == 0);
  FolderWatcher::Token root = 0, d = 0;
  REQUIRE_OK(f.watcher->watch("", &root));
  REQUIRE_OK(f.watcher->watch("d", &d));
  CHECK(f.watcher->alive(d) && f.watcher->alive(root));
  REQUIRE(unlinkat(f.rootFd, "d", AT_REMOVEDIR) == 0);
  REQUIRE(mkdirat(f.rootFd, "d", 0755) == 0);
  // The old watch's own events (IN_DELETE_SELF, IN_IGNORED) report "d"; the root's too. Wait
  // until the watch is dropped: reported with the batch that holds IN_IGNORED, at the latest.
  bool gone = false;
  for (int i = 0; i < 300 && !gone; i++) {
    gone = !f.watcher->alive(d);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
  CHECK(f.watcher->alive(root));
  FolderWatcher::Token again = 0;
  REQUIRE_OK(f.watcher->watch("d", &again));
  CHECK(f.watcher->alive(again));
  f.touch("d/new");
  CHECK(f.waitFor("d/new"));
  f.watcher->unwatch(d);  // the dead token: ignored
  CHECK(f.watcher->alive(again));
  CHECK(!f.watcher->alive(0));
}

TEST(watcher_counts_watches_of_one_directory) {
  Fixture f;
  REQUIRE(mkdirat(f.rootFd, "d", 0755) == 0);
  FolderWatcher::Token t1 = 0, t2 = 0;
  REQUIRE_OK(f.watcher->watch("d", &t1));
  REQUIRE_OK(f.watcher->watch("d", &t2));
  f.watcher->unwatch(t1);
  f.watcher->unwatch(t1);  // twice: ignored
  f.touch("d/one");
  CHECK(f.waitFor("d/one"));
  f.watcher->unwatch(t2);
  f.forget();
  f.touch("d/two");
  CHECK(!f.waitFor("d/two", 300));
  f.watcher->unwatch(12345);  // unknown: ignored
}

TEST(watcher_reaches_directories_deeper_than_PATH_MAX) {
  Fixture f;
  // 50 levels of 100-byte names: 5,049 bytes relative, more than PATH_MAX absolute.
  std::string rel;
  int dir = dup(f.rootFd);
  for (int i = 0; i < 50; ++i) {
    std::string name = "level" + std::to_string(i) + std::string(100 - 5 - std::to_string(i).size(), 'x');
    REQUIRE(mkdirat(dir, name.c_str(), 0755) == 0);
    int next = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(next >= 0);
    close(dir);
    dir = next;
    rel += (rel.empty() ? "" : "/") + name;
  }
  CHECK(rel.size() > 4096);
  FolderWatcher::Token t = 0;
  CHECK_OK(f.watcher->watch(rel, &t));
  int fd = openat(dir, "deep.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  close(dir);
  CHECK(f.waitFor(rel + "/deep.txt"));
}

TEST(watcher_refuses_what_is_not_a_folder_directory) {
  Fixture f;
  FolderWatcher::Token t = 0;
  f.touch("file");
  REQUIRE(mkdirat(f.rootFd, "dir", 0755) == 0);
  REQUIRE(symlinkat("dir", f.rootFd, "link") == 0);
  CHECK_ERR(f.watcher->watch("missing", &t), ENOENT);
  CHECK_ERR(f.watcher->watch("file", &t), ENOTDIR);
  CHECK_ERR(f.watcher->watch("link", &t), ENOTDIR);  // never follows a symlink of the folder
  f.watcher->stop();
  f.watcher->stop();  // idempotent
  CHECK_ERR(f.watcher->watch("dir", &t), ESHUTDOWN);
}

TEST(watcher_callback_may_watch_and_unwatch) {
  Fixture f;
  REQUIRE(mkdirat(f.rootFd, "a", 0755) == 0);
  FolderWatcher::Token root = 0;
  REQUIRE_OK(f.watcher->watch("", &root));
  FolderWatcher::Token fromCallback = 0;
  std::atomic<int> err{-1};
  f.inCallback = [&] {
    if (err == -1) {
      err = f.watcher->watch("a", &fromCallback);
      f.watcher->unwatch(root);
    }
  };
  f.touch("go");
  CHECK(f.waitFor("go"));
  for (int i = 0; i < 100 && err == -1; ++i) usleep(10000);
  CHECK_ERR(err.load(), 0);
  f.touch("a/after");
  CHECK(f.waitFor("a/after"));
}
