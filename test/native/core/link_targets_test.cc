// Unit tests of what an agent's symbolic links may say (native/core/link_targets.cc): a link
// made in a layer leads to the same place for the agent's runs (which see the shadow at the
// folder's real path) and the user's programs (which see it at the mount point), or is refused;
// renames and second names that would leave a link climbing above the root are refused (EXDEV).
// On the in-memory folder (fake_lower.h), whose host model plays the system around the folder:
// the folder at /home/u/proj, /home/u/alias a link to it, /proc. Standard library only.
#include <cerrno>
#include <memory>
#include <string>

#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

const Caller kWho{1000, 1000};
using Place = LowerFs::Place;

Place hostModel(const std::string& abs, std::string* rest) {
  const std::string root = "/home/u/proj", alias = "/home/u/alias";
  for (const std::string& r : {root, alias}) {
    if (abs == r) return rest->clear(), Place::Inside;
    if (abs.compare(0, r.size() + 1, r + "/") == 0) return *rest = abs.substr(r.size() + 1), Place::Inside;
  }
  if (abs == "/proc" || abs.compare(0, 6, "/proc/") == 0) return Place::Refused;
  if (abs == "/home/u/m" || abs.compare(0, 10, "/home/u/m/") == 0) return Place::Shadow;  // mounted
  if (abs == "/" || abs == "/home" || abs == "/home/u") return Place::Ancestor;
  return Place::Elsewhere;
}

struct LinkWorld {
  std::unique_ptr<Overlay> ov;
  Layer* a = nullptr;

  explicit LinkWorld(bool host = true) {
    auto lo = std::make_unique<fake::FakeLower>();
    lo->addFile("README.md", "# readme\n");
    lo->addDir("a");
    lo->addDir("a/b");
    lo->addDir("c");
    lo->addDir("c/d");
    lo->addSymlink("a/b/folder-link", "../../README.md");
    lo->addSymlink("a/out", "../../outside");  // the folder's own, climbing out already
    if (host) {
      lo->hostRootPath = "/home/u/proj";
      lo->hostPlaceFn = hostModel;
    }
    ov = std::make_unique<Overlay>(std::move(lo));
    if (ov->createLayer("a")) throw unit::Abort{};
    a = ov->pin("a");
    if (!a) throw unit::Abort{};
  }
  ~LinkWorld() { ov->unpin(a); }
  LinkWorld(const LinkWorld&) = delete;
  LinkWorld& operator=(const LinkWorld&) = delete;

  int symlink(const std::string& target, const std::string& path) {
    Attr at;
    return ov->symlink(a, target, path, kWho, &at);
  }
  std::string readlink(const std::string& path) {
    std::string t;
    if (int e = ov->readlink(a, path, &t)) return "error " + unit::errnoName(e);
    return t;
  }
  uint64_t size(const std::string& path) {
    Attr at;
    return ov->getattr(a, path, &at) ? UINT64_MAX : at.size;
  }
};

}  // namespace

TEST(link_targets_keep_links_that_lead_to_one_place_for_everyone) {
  LinkWorld w;
  CHECK_OK(w.symlink("../README.md", "a/readme"));
  CHECK_EQ(w.readlink("a/readme"), std::string("../README.md"));
  CHECK_OK(w.symlink("../../README.md", "a/b/readme"));
  CHECK_EQ(w.readlink("a/b/readme"), std::string("../../README.md"));
  CHECK_OK(w.symlink("/usr/bin/env", "env"));
  CHECK_EQ(w.readlink("env"), std::string("/usr/bin/env"));
  CHECK_OK(w.symlink("/dev/stdout", "log"));
  CHECK_EQ(w.readlink("log"), std::string("/dev/stdout"));
  CHECK_OK(w.symlink("plain", "p"));
  CHECK_EQ(w.readlink("p"), std::string("plain"));
}

TEST(link_targets_into_the_folder_become_relative_within_the_shadow) {
  LinkWorld w;
  CHECK_OK(w.symlink("/home/u/proj/.git", "x"));
  CHECK_EQ(w.readlink("x"), std::string(".git"));
  CHECK_EQ(w.size("x"), 4u);  // the attributes say the stored target's length
  CHECK_OK(w.symlink("/home/u/proj/.git", "a/b/x"));
  CHECK_EQ(w.readlink("a/b/x"), std::string("../../.git"));
  CHECK_OK(w.symlink("/home/u/proj/a/b/folder-link", "a/y"));
  CHECK_EQ(w.readlink("a/y"), std::string("b/folder-link"));
  CHECK_OK(w.symlink("/home/u/proj", "a/root"));
  CHECK_EQ(w.readlink("a/root"), std::string(".."));
  CHECK_OK(w.symlink("/home/u/proj/", "here"));
  CHECK_EQ(w.readlink("here"), std::string("."));
  // Any spelling the system resolves to the folder (here a link beside it).
  CHECK_OK(w.symlink("/home/u/alias/a", "c/alias"));
  CHECK_EQ(w.readlink("c/alias"), std::string("../a"));
  // Climbing above the root back into it, by the folder's name.
  CHECK_OK(w.symlink("../proj/.git", "climb"));
  CHECK_EQ(w.readlink("climb"), std::string(".git"));
  CHECK_OK(w.symlink("../../../proj/README.md", "a/b/climb"));
  CHECK_EQ(w.readlink("a/b/climb"), std::string("../../README.md"));
}

TEST(link_targets_climbing_elsewhere_become_the_absolute_place_the_agent_reaches) {
  LinkWorld w;
  // The shadow's own mount point: the shadow for everyone, kept by its absolute path.
  CHECK_OK(w.symlink("/home/u/m/README.md", "in-mount"));
  CHECK_EQ(w.readlink("in-mount"), std::string("/home/u/m/README.md"));
  CHECK_OK(w.symlink("../m/README.md", "climb-to-mount"));
  CHECK_EQ(w.readlink("climb-to-mount"), std::string("/home/u/m/README.md"));
  CHECK_OK(w.symlink("../shared/lib", "shared"));
  CHECK_EQ(w.readlink("shared"), std::string("/home/u/shared/lib"));
  CHECK_EQ(w.size("shared"), 18u);
  CHECK_OK(w.symlink("../../../other", "a/b/other"));
  CHECK_EQ(w.readlink("a/b/other"), std::string("/home/u/other"));
}

TEST(link_targets_refuse_what_could_lead_out_later_or_from_above) {
  LinkWorld w;
  CHECK_ERR(w.symlink("..", "up"), EPERM);            // /home/u: a name from there is the folder
  CHECK_ERR(w.symlink("../../..", "a/up"), EPERM);    // /home
  CHECK_ERR(w.symlink("/", "slash"), EPERM);
  CHECK_ERR(w.symlink("/home/u", "home"), EPERM);
  CHECK_ERR(w.symlink("a/../README.md", "mid"), EPERM);  // a link made at `a` later would move it
  CHECK_ERR(w.symlink("../a/../../x", "a/mid"), EPERM);
  CHECK_ERR(w.symlink("/home/u/proj/../proj/.git", "absdots"), EPERM);
  CHECK_ERR(w.symlink("/proc/self/cwd", "proc"), EPERM);
  CHECK_ERR(w.symlink("", "empty"), ENOENT);
  CHECK_EQ(w.readlink("up"), std::string("error ENOENT"));  // nothing was made
}

TEST(link_targets_without_a_host_model_keep_the_text) {
  LinkWorld w(false);
  CHECK_OK(w.symlink("/home/u/proj/.git", "x"));
  CHECK_EQ(w.readlink("x"), std::string("/home/u/proj/.git"));
  CHECK_OK(w.symlink("../x", "y"));
  CHECK_EQ(w.readlink("y"), std::string("../x"));
  CHECK_ERR(w.symlink("a/../x", "z"), EPERM);  // decided by the text alone
}

TEST(link_targets_moving_a_link_up_so_it_climbs_out_is_exdev) {
  LinkWorld w;
  CHECK_OK(w.symlink("../../README.md", "a/b/l"));
  CHECK_ERR(w.ov->rename(w.a, "a/b/l", "l", 0), EXDEV);
  CHECK_ERR(w.ov->rename(w.a, "a/b/l", "a/l", 0), EXDEV);
  CHECK_OK(w.ov->rename(w.a, "a/b/l", "c/d/l", 0));  // as deep: leads to the same place
  CHECK_OK(w.ov->rename(w.a, "c/d/l", "c/d/e-deeper", 0));
  // The folder's own link too, and a second name.
  CHECK_ERR(w.ov->rename(w.a, "a/b/folder-link", "folder-link", 0), EXDEV);
  Attr at;
  CHECK_ERR(w.ov->link(w.a, "c/d/e-deeper", "hard", &at), EXDEV);
  CHECK_OK(w.ov->link(w.a, "c/d/e-deeper", "a/b/hard", &at));
  // A link that climbed out already (the folder's own) may move: nothing new is reached.
  CHECK_OK(w.ov->rename(w.a, "a/out", "out", 0));
  // A directory holding the layer's link, moved up; moved across at the same depth.
  CHECK_ERR(w.ov->rename(w.a, "c/d", "d", 0), EXDEV);
  CHECK_OK(w.ov->rename(w.a, "c/d", "a/d", 0));
  // An exchange moves both ways.
  CHECK_OK(w.symlink("x", "top"));
  CHECK_ERR(w.ov->rename(w.a, "top", "a/d/e-deeper", kRenameExchange), EXDEV);
  CHECK_EQ(w.readlink("a/d/e-deeper"), std::string("../../README.md"));
}
