// Unit tests of DirReadAhead (native/platform/posix_readahead.cc) on a real temporary folder:
// what a hint makes it read, that it pauses when the caches hold the folder, that it never leaves the folder through a symlink, its bound on one
// directory's entries, that it reads without changing anything, and that it stops with work
// still waiting. Linux only (built into the unit-test runner with the other POSIX modules).
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../../native/platform/posix_readahead.h"
#include "../unit/unit.h"

using namespace shadowfs;

namespace {

struct Tree {
  std::string root;
  int rootFd = -1;
  std::vector<std::string> made;  // everything created, in order (removed in reverse)

  Tree() {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/shadowfs-readahead-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (!mkdtemp(buf.data())) throw unit::Abort{};
    root = buf.data();
    rootFd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  ~Tree() {
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      const std::string p = root + "/" + *it;
      if (unlink(p.c_str()) != 0) rmdir(p.c_str());
    }
    close(rootFd);
    rmdir(root.c_str());
  }
  void dir(const std::string& rel) {
    mkdir((root + "/" + rel).c_str(), 0755);
    made.push_back(rel);
  }
  void file(const std::string& rel) {
    int fd = open((root + "/" + rel).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
    made.push_back(rel);
  }
  void link(const std::string& rel, const std::string& target) {
    if (symlink(target.c_str(), (root + "/" + rel).c_str()) == 0) made.push_back(rel);
  }
  // Every object's name, mode, size, mtime and ctime: what "unchanged" means here.
  std::string snapshot() {
    std::string s;
    for (auto& rel : made) {
      struct stat st;
      if (lstat((root + "/" + rel).c_str(), &st) != 0) continue;
      s += rel + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " +
           std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec) + "\n";
    }
    return s;
  }
};

// Reads every hint: the folders here were just written, so their stats always hit memory.
constexpr std::chrono::nanoseconds kNeverWarm{0};

// Waits until the read-ahead has taken `n` hints (it runs on threads of its own).
DirReadAhead::Counts waitTaken(DirReadAhead& ra, size_t n) {
  for (int i = 0; i < 2000 && ra.counts().taken < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return ra.counts();
}

}  // namespace

TEST(read_ahead_lists_each_hinted_directory_and_stats_its_entries_without_changing_them) {
  Tree t;
  t.dir("d1");
  t.file("d1/a");
  t.file("d1/b");
  t.file("d1/c");
  t.dir("d2");
  t.file("d2/x");
  t.dir("d2/sub");
  const std::string before = t.snapshot();
  DirReadAhead ra(t.rootFd, kNeverWarm);
  ra.want({"d1", "d2/sub", "d2"});
  auto c = waitTaken(ra, 3);
  CHECK_EQ(c.taken, size_t{3});
  CHECK_EQ(c.dirs, size_t{3});
  CHECK_EQ(c.entries, size_t{5});  // a, b, c; x, sub; the empty sub has none
  CHECK_EQ(t.snapshot(), before);
}

TEST(read_ahead_never_follows_a_symlink_out_of_the_folder) {
  Tree outside;
  outside.dir("sub");
  outside.file("sub/secret");
  outside.file("top");
  Tree t;
  t.link("out", outside.root);  // a directory swapped for a link after it was listed
  t.link("via", outside.root);
  DirReadAhead ra(t.rootFd, kNeverWarm);
  ra.want({"out", "via/sub", "missing"});
  auto c = waitTaken(ra, 3);
  CHECK_EQ(c.taken, size_t{3});
  CHECK_EQ(c.dirs, size_t{0});
  CHECK_EQ(c.entries, size_t{0});
}

TEST(read_ahead_stats_at_most_its_bound_of_one_directory) {
  Tree t;
  t.dir("big");
  for (size_t i = 0; i < DirReadAhead::kMaxEntries + 3; ++i) t.file("big/f" + std::to_string(i));
  DirReadAhead ra(t.rootFd, kNeverWarm);
  ra.want({"big"});
  auto c = waitTaken(ra, 1);
  CHECK_EQ(c.dirs, size_t{1});
  CHECK_EQ(c.entries, DirReadAhead::kMaxEntries);
}

TEST(read_ahead_stops_with_hints_still_waiting) {
  Tree t;
  std::vector<std::string> dirs;
  for (int i = 0; i < 300; ++i) {
    t.dir("d" + std::to_string(i));
    for (int j = 0; j < 20; ++j) t.file("d" + std::to_string(i) + "/f" + std::to_string(j));
    dirs.push_back("d" + std::to_string(i));
  }
  auto ra = std::make_unique<DirReadAhead>(t.rootFd, kNeverWarm);
  ra->want(dirs);
  // Joins its threads, each finishing the directory it reads: a hang here fails the run (the
  // suite's time limit), and a thread left reading would use the closed root below.
  ra.reset();
}

TEST(read_ahead_pauses_when_the_caches_hold_the_folder_already) {
  Tree t;
  t.dir("d1");
  t.dir("d2");
  for (int i = 0; i < 50; ++i) {
    t.file("d1/f" + std::to_string(i));
    t.file("d2/f" + std::to_string(i));
  }
  t.dir("d3");
  // Any listing counts as one from memory: what a loaded machine's timing does is not the point.
  DirReadAhead ra(t.rootFd, std::chrono::seconds(1));
  ra.want({"d1", "d2", "d3"});
  auto c = waitTaken(ra, 2);
  // d1 and d2 "came from memory": d3 was dropped, and a hint now is ignored while paused.
  ra.want({"d3"});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c = ra.counts();
  CHECK_EQ(c.taken, size_t{2});
  CHECK_EQ(c.pauses, size_t{1});
}
