// Unit tests of posix::reach (native/platform/posix_reach.cc) on a real temporary directory:
// where an absolute path leads when every link on the way is followed, as the kernel would.
// FUSE file systems (refused unless on the way to the folder) need a FUSE mount: the unit
// tests of link targets stop short of that, the C++ side only. Bind mounts are made in a mount
// namespace of a child process (root, or user namespaces). Linux only.
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <string>
#include <vector>

#include "../../../native/platform/posix_reach.h"
#include "../unit/unit.h"

using namespace shadowfs;
using posix::Reach;

namespace {

struct Host {
  std::string top;   // the temporary directory (its real path)
  std::string root;  // top/proj, the folder
  std::vector<std::string> made;

  Host() {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/shadowfs-reach-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (!mkdtemp(buf.data())) throw unit::Abort{};
    char* real = realpath(buf.data(), nullptr);
    if (!real) throw unit::Abort{};
    top = real;
    free(real);
    root = top + "/proj";
    dir("proj");
    dir("proj/src");
    dir("other");
    link("alias", "proj");             // beside the folder: another spelling of it
    link("hop", top + "/alias/src");   // absolute, through the alias
    link("dotty", "other/../proj");    // ".." inside a link's target
    link("procl", "/proc/self");
    link("loop1", "loop2");
    link("loop2", "loop1");
    link("up", "..");
  }
  ~Host() {
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      const std::string p = top + "/" + *it;
      if (unlink(p.c_str()) != 0) rmdir(p.c_str());
    }
    rmdir(top.c_str());
  }
  void dir(const std::string& rel) {
    if (mkdir((top + "/" + rel).c_str(), 0755) == 0) made.push_back(rel);
  }
  void link(const std::string& rel, const std::string& target) {
    if (symlink(target.c_str(), (top + "/" + rel).c_str()) == 0) made.push_back(rel);
  }
  Reach at(const std::string& abs, std::string* rest) {
    rest->assign("(unset)");
    return posix::reach(root, abs, rest);
  }
};

}  // namespace

TEST(posix_reach_finds_the_folder_by_any_spelling) {
  Host h;
  std::string rest;
  CHECK(h.at(h.root + "/.git", &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string(".git"));
  CHECK(h.at(h.root, &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string(""));
  CHECK(h.at(h.top + "/alias/src/x", &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string("src/x"));
  CHECK(h.at(h.top + "/hop/y", &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string("src/y"));
  CHECK(h.at(h.top + "/dotty/.git/hooks", &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string(".git/hooks"));
  CHECK(h.at(h.top + "//./proj/a", &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string("a"));
  // What is left once the folder is reached is not walked: the shadow's names may differ.
  CHECK(h.at(h.top + "/proj/no/such/../x", &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string("no/such/../x"));
}

TEST(posix_reach_tells_ancestors_proc_and_elsewhere) {
  Host h;
  std::string rest;
  CHECK(h.at(h.top, &rest) == Reach::Ancestor);
  CHECK(h.at("/", &rest) == Reach::Ancestor);
  CHECK(h.at(h.top + "/proj/src/../../up", &rest) == Reach::Inside);  // stops at the folder
  CHECK(h.at(h.top + "/other/../up", &rest) == Reach::Ancestor);       // top/.. is above too
  CHECK(h.at("/proc/self/cwd", &rest) == Reach::Refused);
  CHECK(h.at(h.top + "/procl/cwd", &rest) == Reach::Refused);
  CHECK(h.at("/dev/fd/0", &rest) == Reach::Refused);
  CHECK(h.at(h.top + "/other", &rest) == Reach::Elsewhere);
  CHECK(h.at(h.top + "/missing/proj", &rest) == Reach::Elsewhere);
  CHECK(h.at(h.top + "/loop1/x", &rest) == Reach::Elsewhere);  // ELOOP for everyone
  CHECK(h.at("/usr", &rest) == Reach::Elsewhere);
}

// The folder's repository outside it (a linked worktree's `.git` file, and the commondir that
// names the main one): refused, as the folder's own .git would be rewritten into the shadow.
TEST(posix_reach_refuses_the_folders_repository_outside_it) {
  Host h;
  h.dir("main.git");
  h.dir("main.git/worktrees");
  h.dir("main.git/worktrees/proj");
  FILE* f = std::fopen((h.root + "/.git").c_str(), "w");
  REQUIRE(f != nullptr);
  std::fprintf(f, "gitdir: %s/main.git/worktrees/proj\n", h.top.c_str());
  std::fclose(f);
  h.made.push_back("proj/.git");
  f = std::fopen((h.top + "/main.git/worktrees/proj/commondir").c_str(), "w");
  REQUIRE(f != nullptr);
  std::fprintf(f, "../..\n");
  std::fclose(f);
  h.made.push_back("main.git/worktrees/proj/commondir");
  std::string rest;
  CHECK(h.at(h.top + "/main.git/refs/heads", &rest) == Reach::Refused);
  CHECK(h.at(h.top + "/main.git", &rest) == Reach::Refused);
  CHECK(h.at(h.top + "/main.git/worktrees/proj/HEAD", &rest) == Reach::Refused);
  CHECK(h.at(h.top + "/other", &rest) == Reach::Elsewhere);
}

// A file outside the folder that has other hard links on the folder's file system may be one
// of the folder's files by another name (pnpm's store): refused, also through a link to it. A
// file with one name, and a directory, are not.
TEST(posix_reach_refuses_files_that_may_be_the_folders_by_another_name) {
  Host h;
  h.dir("store");
  auto write = [&](const std::string& rel) {
    FILE* f = std::fopen((h.top + "/" + rel).c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("module.exports = 1;\n", f);
    std::fclose(f);
    h.made.push_back(rel);
  };
  write("store/shared.js");
  write("store/alone.js");
  REQUIRE(::link((h.top + "/store/shared.js").c_str(), (h.root + "/index.js").c_str()) == 0);
  h.made.push_back("proj/index.js");
  h.link("to-shared", h.top + "/store/shared.js");
  std::string rest;
  CHECK(h.at(h.top + "/store/shared.js", &rest) == Reach::Refused);
  CHECK(h.at(h.top + "/to-shared", &rest) == Reach::Refused);
  CHECK(h.at(h.top + "/store/alone.js", &rest) == Reach::Elsewhere);
  CHECK(h.at(h.top + "/store", &rest) == Reach::Elsewhere);
  // The folder's own name for it is the folder, as ever.
  CHECK(h.at(h.root + "/index.js", &rest) == Reach::Inside);
  CHECK_EQ(rest, std::string("index.js"));
}

// Another mount of the folder (a bind mount of it, of a directory above it, of one beneath
// it) is the folder: a link there is rewritten into the shadow like one by the real path.
TEST(posix_reach_knows_the_folder_by_its_bind_mounts) {
  Host h;
  h.dir("proj/sub");
  h.dir("bind-folder");
  h.dir("bind-top");
  h.dir("bind-sub");
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // 10: no namespace; 11: no mount; 12..: a check failed.
    if (unshare(CLONE_NEWNS) != 0) _exit(10);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(10);
    if (mount(h.root.c_str(), (h.top + "/bind-folder").c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(h.top.c_str(), (h.top + "/bind-top").c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount((h.root + "/sub").c_str(), (h.top + "/bind-sub").c_str(), nullptr, MS_BIND, nullptr) != 0)
      _exit(11);
    std::string rest;
    if (posix::reach(h.root, h.top + "/bind-folder/.git", &rest) != Reach::Inside || rest != ".git") _exit(12);
    if (posix::reach(h.root, h.top + "/bind-top/proj/a", &rest) != Reach::Inside || rest != "a") _exit(13);
    if (posix::reach(h.root, h.top + "/bind-sub/x", &rest) != Reach::Inside || rest != "sub/x") _exit(14);
    if (posix::reach(h.root, h.top + "/bind-top/other", &rest) != Reach::Elsewhere) _exit(15);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 10) std::fprintf(stderr, "needs root or a mount namespace (unshare(CLONE_NEWNS))\n");
  CHECK_EQ(WEXITSTATUS(status), 0);
}
