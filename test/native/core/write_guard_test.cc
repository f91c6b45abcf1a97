// Unit tests of the write guard (write_guard.h): which paths count as git's control files, and
// that every overlay operation that writes refuses them with EPERM (names made, removed,
// renamed or linked; contents opened for writing, truncated; attributes and extended
// attributes; the API's whole-file writes) while reads, and git's data beside them, stay
// allowed. On the in-memory folder (fake_lower.h). Standard library only (builds on Windows).
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "../../../native/core/overlay.h"
#include "../../../native/core/write_guard.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

const Caller kWho{1000, 1000};

bool git(const std::string& path, bool ic = false) { return WriteGuard::gitControl(path, ic); }

// A folder with a repository, a submodule's repository and a hooks directory of its own.
struct GuardWorld {
  std::unique_ptr<Overlay> ov;
  Layer* a = nullptr;

  explicit GuardWorld(bool protect = true) {
    auto lo = std::make_unique<fake::FakeLower>();
    lo->addDir(".git");
    lo->addFile(".git/config", "[core]\n");
    lo->addFile(".git/HEAD", "ref: refs/heads/main\n");
    lo->addDir(".git/hooks");
    lo->addFile(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
    lo->addDir(".git/refs");
    lo->addDir(".git/refs/heads");
    lo->addDir(".git/modules");
    lo->addDir(".git/modules/lib");
    lo->addFile(".git/modules/lib/config", "[core]\n");
    lo->addDir("lib");
    lo->addFile("lib/.git", "gitdir: ../.git/modules/lib\n");
    lo->addDir(".husky");
    lo->addDir(".husky/_");
    lo->addFile(".husky/_/h", "#!/bin/sh\n");
    lo->addFile("README.md", "# readme\n");
    ov = std::make_unique<Overlay>(std::move(lo));
    if (protect)
      ov->setWriteGuard(std::make_shared<const WriteGuard>(true, std::vector<std::string>{"/.husky/_"},
                                                           false));
    if (ov->createLayer("a")) throw unit::Abort{};
    a = ov->pin("a");
    if (!a) throw unit::Abort{};
  }
  ~GuardWorld() { ov->unpin(a); }
  GuardWorld(const GuardWorld&) = delete;
  GuardWorld& operator=(const GuardWorld&) = delete;

  int open(const std::string& path, bool write, bool truncate = false) {
    Handle* h = nullptr;
    Attr at;
    OpenIntent intent;
    intent.write = write;
    intent.truncate = truncate;
    int e = ov->open(a, path, intent, &h, &at);
    if (!e) ov->release(h);
    return e;
  }
  int create(const std::string& path) {
    Handle* h = nullptr;
    Attr at;
    OpenIntent intent;
    intent.write = true;
    int e = ov->create(a, path, 0644, intent, kWho, &h, &at);
    if (!e) ov->release(h);
    return e;
  }
  int mkdir(const std::string& path) {
    Attr at;
    return ov->mkdir(a, path, 0755, kWho, &at);
  }
  int chmod(const std::string& path) {
    Attr v, out;
    v.perm = 0755;
    return ov->setattr(a, path, nullptr, kSetMode, v, &out);
  }
  int truncate(const std::string& path) {
    Attr v, out;
    v.size = 0;
    return ov->setattr(a, path, nullptr, kSetSize, v, &out);
  }
  int link(const std::string& from, const std::string& to) {
    Attr at;
    return ov->link(a, from, to, &at);
  }
  int symlink(const std::string& target, const std::string& path) {
    Attr at;
    return ov->symlink(a, target, path, kWho, &at);
  }
};

}  // namespace

TEST(write_guard_names_gits_control_files) {
  CHECK(git(".git"));
  CHECK(git("sub/.git"));
  CHECK(git(".git/config"));
  CHECK(git(".git/config.worktree"));
  CHECK(git(".git/commondir"));
  CHECK(git(".git/hooks"));
  CHECK(git(".git/hooks/pre-commit"));
  CHECK(git(".git/modules/lib/config"));
  CHECK(git(".git/modules/lib/hooks/post-checkout"));
  CHECK(git(".git/worktrees/wt/config.worktree"));
  CHECK(git(".git/worktrees/wt/commondir"));
  CHECK(git("vendor/x/.git/config"));
  // git's data: refs, logs and objects are written by every commit, and a branch may be called
  // "config" or "hooks/x".
  CHECK(!git(".git/HEAD"));
  CHECK(!git(".git/index"));
  CHECK(!git(".git/config.lock"));
  CHECK(!git(".git/COMMIT_EDITMSG"));
  CHECK(!git(".git/refs/heads/config"));
  CHECK(!git(".git/refs/heads/hooks/x"));
  CHECK(!git(".git/logs/refs/heads/config"));
  CHECK(!git(".git/objects/ab/cdef"));
  // In the repositories git keeps for submodules and worktrees, whose names may be "refs" or
  // "logs", control files are refused wherever they sit (their branches called "config" too).
  CHECK(git(".git/modules/lib/refs/heads/config"));
  CHECK(git(".git/modules/refs/config"));
  CHECK(git(".git/modules/tools/logs/config"));
  CHECK(git(".git/modules/a/objects/b/hooks/post-checkout"));
  CHECK(git(".git/worktrees/objects/commondir"));
  CHECK(!git(".gitignore"));
  CHECK(!git(".github/hooks/config"));
  CHECK(!git("config"));
  CHECK(git("commondir"));  // anywhere: beside a HEAD it makes a repository of two directories
  CHECK(git("src/commondir"));
  CHECK(!git("hooks/pre-commit"));
  CHECK(!git(""));
  // Case: only where names match ignoring it.
  CHECK(!git(".GIT/CONFIG"));
  CHECK(git(".GIT/CONFIG", true));
  CHECK(git("Sub/.Git", true));
  // Moving directories: anywhere inside a .git outside its data.
  CHECK(WriteGuard::insideRepository(".git/modules", false));
  CHECK(WriteGuard::insideRepository(".git/modules/lib", false));
  CHECK(!WriteGuard::insideRepository(".git/refs/heads/topic", false));
  CHECK(WriteGuard::insideRepository(".git/modules/refs", false));
  CHECK(WriteGuard::insideRepository(".git/modules/x/refs/heads", false));
  CHECK(!WriteGuard::insideRepository("src", false));
  // The extra paths: a path and everything beneath it.
  WriteGuard g(false, {"/.husky/_"}, false);
  CHECK(g.refuses(".husky/_"));
  CHECK(g.refuses(".husky/_/post-index-change"));
  CHECK(!g.refuses(".husky/pre-commit"));
  CHECK(!g.refuses(".git/config"));  // git's rule off
  // Moving a directory above one away (and another in) is refused like writing beneath it.
  CHECK(g.refusesMove(".husky"));
  CHECK(g.refusesMove(".husky/_"));
  CHECK(!g.refusesMove(".hus"));
  CHECK(!g.refusesMove("src"));
  WriteGuard literal(false, {"/we\\*ird/x"}, false);
  CHECK(literal.refusesMove("we*ird"));
}

TEST(write_guard_refuses_every_write_to_control_files) {
  GuardWorld w;
  // Moving a directory above an extra path away, or another in its place.
  CHECK_EQ(w.ov->rename(w.a, ".husky", ".husky.old", 0), EPERM);
  CHECK_EQ(w.mkdir("h2"), 0);
  CHECK_EQ(w.ov->rename(w.a, "h2", ".husky", kRenameExchange), EPERM);
  // Names.
  CHECK_EQ(w.create(".git/hooks/post-index-change"), EPERM);
  CHECK_EQ(w.create(".git/config"), EPERM);  // existing, O_CREAT
  CHECK_EQ(w.mkdir("sub/.git"), EPERM);  // refused before its parent is looked for
  CHECK_EQ(w.mkdir("lib2"), 0);
  CHECK_EQ(w.mkdir("lib2/.git"), EPERM);
  CHECK_EQ(w.symlink("../elsewhere", "lib2/.git"), EPERM);
  CHECK_EQ(w.ov->unlink(w.a, ".git/config"), EPERM);
  CHECK_EQ(w.ov->unlink(w.a, "lib/.git"), EPERM);
  CHECK_EQ(w.ov->rmdir(w.a, ".git/hooks"), EPERM);
  CHECK_EQ(w.ov->rename(w.a, ".git", ".git2", 0), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "README.md", ".git/config", 0), EPERM);
  CHECK_EQ(w.ov->rename(w.a, ".git/hooks/pre-commit.sample", ".git/hooks/pre-commit", 0), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "lib2", ".git/modules/lib2", 0), EPERM);      // a directory in
  CHECK_EQ(w.ov->rename(w.a, ".git/modules/lib", "lib3", 0), EPERM);       // and out
  CHECK_EQ(w.ov->rename(w.a, "README.md", "lib2/README.md", 0), 0);        // elsewhere: fine
  CHECK_EQ(w.link(".git/config", "cfg"), EPERM);  // a second name would write it
  CHECK_EQ(w.link("lib2/README.md", ".git/hooks/pre-commit"), EPERM);
  // Contents and attributes.
  CHECK_EQ(w.open(".git/config", true), EPERM);
  CHECK_EQ(w.open(".git/config", false, true), EPERM);
  CHECK_EQ(w.open(".git/config", false), 0);  // reading stays allowed
  CHECK_EQ(w.truncate(".git/config"), EPERM);
  CHECK_EQ(w.chmod(".git/hooks/pre-commit.sample"), EPERM);
  CHECK_EQ(w.ov->setxattr(w.a, ".git/config", "user.x", "1", 0), EPERM);
  CHECK_EQ(w.ov->removexattr(w.a, ".git/config", "user.x"), EPERM);
  // The API's writes.
  CHECK_EQ(w.ov->putFile("a", ".git/hooks/pre-push", "#!/bin/sh\n", 0755, kWho), EPERM);
  CHECK_EQ(w.ov->putFile("a", "x/.git/HEAD", "ref\n", 0644, kWho), EPERM);  // would make x/.git
  CHECK_EQ(w.ov->remove("a", ".git/config"), EPERM);
  // The extra path.
  CHECK_EQ(w.create(".husky/_/post-index-change"), EPERM);
  CHECK_EQ(w.create(".husky/pre-commit"), 0);
  // git's own work beside them.
  CHECK_EQ(w.create(".git/index.lock"), 0);
  CHECK_EQ(w.ov->rename(w.a, ".git/index.lock", ".git/index", 0), 0);
  CHECK_EQ(w.open(".git/HEAD", true), 0);
  CHECK_EQ(w.ov->putFile("a", ".git/refs/heads/config", "0123\n", 0644, kWho), 0);
  CHECK_EQ(w.ov->putFile("a", ".git/config.lock", "[core]\n", 0644, kWho), 0);
  CHECK_EQ(w.ov->unlink(w.a, ".git/config.lock"), 0);
  // Nothing refused reached the layer.
  std::vector<Change> cs;
  CHECK_EQ(w.ov->changes("a", &cs), 0);
  for (auto& c : cs) CHECK(!git(c.path) && c.path.rfind(".husky/_", 0) != 0);
}

TEST(write_guard_refuses_completing_a_bare_repository_outside_git) {
  GuardWorld w;
  Attr at;
  // HEAD, objects and refs in one directory, then its config: the fourth name is refused,
  // whichever comes last and however it comes (made, renamed, linked).
  CHECK_EQ(w.mkdir("src"), 0);
  CHECK_EQ(w.create("src/HEAD"), 0);
  CHECK_EQ(w.mkdir("src/objects"), 0);
  CHECK_EQ(w.mkdir("src/refs"), 0);
  CHECK_EQ(w.create("src/config"), EPERM);
  CHECK_EQ(w.symlink("../README.md", "src/config"), EPERM);
  CHECK_EQ(w.create("src/config.tmp"), 0);
  CHECK_EQ(w.ov->rename(w.a, "src/config.tmp", "src/config", 0), EPERM);
  CHECK_EQ(w.link("src/config.tmp", "src/config"), EPERM);
  CHECK_EQ(w.mkdir("src/config"), 0);  // a project's config/ folder is no git config
  // The other order, at the root (where a spoiled .git/HEAD makes git look next).
  CHECK_EQ(w.create("config"), 0);
  CHECK_EQ(w.mkdir("objects"), 0);
  CHECK_EQ(w.mkdir("refs"), 0);
  CHECK_EQ(w.create("HEAD"), EPERM);
  CHECK_EQ(w.ov->mknod(w.a, "HEAD", FileType::Regular, 0644, 0, kWho, &at), EPERM);
  // Swapped or moved onto an existing name: a config/ folder exchanged for a file, a file
  // renamed over it.
  CHECK_EQ(w.mkdir("lib2"), 0);
  CHECK_EQ(w.create("lib2/HEAD"), 0);
  CHECK_EQ(w.mkdir("lib2/objects"), 0);
  CHECK_EQ(w.mkdir("lib2/refs"), 0);
  CHECK_EQ(w.mkdir("lib2/config"), 0);
  CHECK_EQ(w.create("cfg.txt"), 0);
  CHECK_EQ(w.ov->rename(w.a, "cfg.txt", "lib2/config", kRenameExchange), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "lib2/config", "cfg.txt", kRenameExchange), EPERM);
  CHECK_EQ(w.ov->rmdir(w.a, "lib2/config"), 0);
  CHECK_EQ(w.create("lib2/config"), EPERM);
  // A HEAD beside a commondir naming another directory is a repository too: commondir is refused.
  CHECK_EQ(w.create("src/commondir"), EPERM);
  // Inside .git the names are git's own.
  CHECK_EQ(w.mkdir(".git/objects"), 0);
  CHECK_EQ(w.ov->putFile("a", ".git/FETCH_HEAD", "x\n", 0644, kWho), 0);
}

// git run by the user, outside any sandbox, follows links it finds beneath a `.git` when it
// writes there (a reflog line appended through logs/HEAD, COMMIT_EDITMSG rewritten,
// worktrees/<id> pruned): no link, FIFO, socket or device may be placed beneath a `.git`, at
// any depth, data directories included, however it would arrive; nor a directory moved in from
// outside, which could carry one. Regular files and new directories stay git's to make there.
TEST(write_guard_refuses_links_and_special_files_beneath_git) {
  GuardWorld w;
  Attr at;
  CHECK(WriteGuard::beneathGit(".git/logs/HEAD", false));
  CHECK(WriteGuard::beneathGit("lib/.git/x", false));
  CHECK(!WriteGuard::beneathGit(".git", false));
  CHECK(!WriteGuard::beneathGit("a.git/x", false));
  CHECK(WriteGuard::beneathGit(".GIT/x", true));
  CHECK(!WriteGuard::beneathGit(".GIT/x", false));
  CHECK_EQ(w.mkdir(".git/logs"), 0);
  CHECK_EQ(w.mkdir(".git/logs/refs"), 0);
  CHECK_EQ(w.symlink("/home/me/project/build.sh", ".git/logs/HEAD"), EPERM);
  CHECK_EQ(w.symlink("/home/me/project/build.sh", ".git/COMMIT_EDITMSG"), EPERM);
  CHECK_EQ(w.symlink("/home/me/project", ".git/refs/heads/x"), EPERM);
  CHECK_EQ(w.mkdir(".git/worktrees"), 0);
  CHECK_EQ(w.symlink("/home/me/project", ".git/worktrees/x"), EPERM);
  CHECK_EQ(w.ov->mknod(w.a, ".git/MERGE_MSG", FileType::Fifo, 0644, 0, kWho, &at), EPERM);
  CHECK_EQ(w.ov->mknod(w.a, ".git/objects.sock", FileType::Socket, 0644, 0, kWho, &at), EPERM);
  // Made elsewhere, then moved, exchanged or linked in.
  CHECK_EQ(w.symlink("/home/me/project/build.sh", "l"), 0);  // outside a .git: fine
  CHECK_EQ(w.ov->rename(w.a, "l", ".git/logs/HEAD", 0), EPERM);
  CHECK_EQ(w.create(".git/ORIG_HEAD"), 0);
  CHECK_EQ(w.ov->rename(w.a, "l", ".git/ORIG_HEAD", 0), EPERM);
  CHECK_EQ(w.ov->rename(w.a, ".git/ORIG_HEAD", "l", kRenameExchange), EPERM);
  CHECK_EQ(w.link("l", ".git/logs/ORIG_HEAD"), EPERM);
  CHECK_EQ(w.mkdir("d"), 0);
  CHECK_EQ(w.symlink("/home/me/project/build.sh", "d/main"), 0);
  CHECK_EQ(w.ov->rename(w.a, "d", ".git/logs/refs/heads", 0), EPERM);
  CHECK_EQ(w.mkdir(".git/logs/refs/tags"), 0);
  CHECK_EQ(w.ov->rename(w.a, "d", ".git/logs/refs/tags", 0), EPERM);  // over an empty one
  CHECK_EQ(w.ov->rename(w.a, ".git/logs/refs/tags", "d", kRenameExchange), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "d", "lib/.git2", 0), 0);  // not a .git: fine
  // What git itself does there still works: files, directories, renames among them.
  CHECK_EQ(w.create(".git/logs/HEAD"), 0);
  CHECK_EQ(w.mkdir(".git/logs/refs/heads"), 0);
  CHECK_EQ(w.create(".git/logs/refs/heads/main"), 0);
  CHECK_EQ(w.ov->rename(w.a, ".git/logs/refs/heads/main", ".git/logs/refs/heads/trunk", 0), 0);
  CHECK_EQ(w.ov->rename(w.a, ".git/logs/refs/tags", ".git/logs/refs/old-tags", 0), 0);
  CHECK_EQ(w.ov->putFile("a", ".git/COMMIT_EDITMSG", "msg\n", 0644, kWho), 0);
  CHECK_EQ(w.link(".git/COMMIT_EDITMSG", ".git/COMMIT_EDITMSG.bak"), 0);
  std::vector<Change> cs;
  CHECK_EQ(w.ov->changes("a", &cs), 0);
  for (auto& c : cs) CHECK(!(WriteGuard::beneathGit(c.path, false) && c.type == FileType::Symlink));
  // A git directory not called .git, named by the mount (`gitdir: .repo`): the same beneath it.
  const WriteGuard g(true, {}, false, {".repo", "x/.gitdir"});
  CHECK(g.refusesSpecial(".repo/logs/HEAD"));
  CHECK(g.refusesSpecial("x/.gitdir/COMMIT_EDITMSG"));
  CHECK(!g.refusesSpecial(".repo"));
  CHECK(!g.refusesSpecial(".repository/x"));
  CHECK(!g.refusesSpecial("x/y"));
  CHECK(!WriteGuard(false, {}, false, {".repo"}).refusesSpecial(".repo/logs/HEAD"));
}

TEST(write_guard_off_lets_a_layer_write_them) {
  GuardWorld w(false);
  CHECK_EQ(w.symlink("/home/me/project/build.sh", ".git/COMMIT_EDITMSG"), 0);
  CHECK_EQ(w.create(".git/hooks/post-index-change"), 0);
  CHECK_EQ(w.open(".git/config", true), 0);
  CHECK_EQ(w.mkdir("lib2"), 0);
  CHECK_EQ(w.mkdir("lib2/.git"), 0);
  CHECK_EQ(w.ov->rename(w.a, ".git/modules/lib", "lib3", 0), 0);
}
