// Unit tests of posix::reach (native/platform/posix_reach.cc) on a real temporary directory:
// where an absolute path leads when every link on the way is followed, as the kernel would.
// FUSE file systems (refused unless on the way to the folder) need a mount: the integration
// test in test/links.test.ts makes a link into a shadow's own mount point. Linux only.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
