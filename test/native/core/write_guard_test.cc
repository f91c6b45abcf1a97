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

  explicit GuardWorld(bool protect = true, bool ignoreCase = false) {
    auto lo = std::make_unique<fake::FakeLower>();
    lo->ignoreCase = ignoreCase;
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
    // Bare repositories the folder holds (test fixtures), with and without config and hooks.
    lo->addDir("bare");
    lo->addFile("bare/HEAD", "ref: refs/heads/main\n");
    lo->addDir("bare/objects");
    lo->addDir("bare/refs");
    lo->addFile("bare/config", "[core]\n\tbare = true\n");
    lo->addDir("bare/hooks");
    lo->addFile("bare/hooks/post-update.sample", "#!/bin/sh\n");
    lo->addDir("fix.git");
    lo->addFile("fix.git/HEAD", "ref: refs/heads/main\n");
    lo->addFile("fix.git/description", "fixture\n");
    lo->addDir("fix.git/objects");
    lo->addDir("fix.git/refs");
    lo->addDir("fix.git/refs/heads");
    ov = std::make_unique<Overlay>(std::move(lo), nullptr, UINT64_MAX,
                                   ignoreCase ? NameMatch::IgnoreCase : NameMatch::Exact);
    if (protect)
      ov->setWriteGuard(std::make_shared<const WriteGuard>(true, std::vector<std::string>{"/.husky/_"},
                                                           ignoreCase));
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
  // git 2.39 takes a directory holding HEAD, objects and refs for a bare repository, config or
  // not, and runs its hooks/ on the user's gc, fetch or tag there: the last of the three is
  // refused, whichever it is, of whatever type, however it comes (made, renamed, linked).
  CHECK_EQ(w.mkdir("src"), 0);
  CHECK_EQ(w.mkdir("src/hooks"), 0);  // no repository here yet: an ordinary name
  CHECK_EQ(w.create("src/hooks/reference-transaction"), 0);
  CHECK_EQ(w.create("src/HEAD"), 0);
  CHECK_EQ(w.mkdir("src/objects"), 0);
  CHECK_EQ(w.mkdir("src/refs"), EPERM);
  CHECK_EQ(w.create("src/refs"), EPERM);  // an executable file passes git's access(X_OK)
  CHECK_EQ(w.symlink("../README.md", "src/refs"), EPERM);
  CHECK_EQ(w.mkdir("refs.tmp"), 0);
  CHECK_EQ(w.ov->rename(w.a, "refs.tmp", "src/refs", 0), EPERM);
  CHECK_EQ(w.create("refs.f"), 0);
  CHECK_EQ(w.link("refs.f", "src/refs"), EPERM);
  CHECK_EQ(w.ov->mknod(w.a, "src/refs", FileType::Fifo, 0644, 0, kWho, &at), EPERM);
  CHECK_EQ(w.ov->putFile("a", "src/refs", "x\n", 0755, kWho), EPERM);
  // Onto an existing name or exchanged, no directory gains a name: allowed.
  CHECK_EQ(w.create("head.tmp"), 0);
  CHECK_EQ(w.ov->rename(w.a, "head.tmp", "src/HEAD", 0), 0);
  CHECK_EQ(w.ov->rename(w.a, "refs.f", "src/HEAD", kRenameExchange), 0);
  // The other orders, at the root (where a spoiled .git/HEAD makes git look next).
  CHECK_EQ(w.mkdir("objects"), 0);
  CHECK_EQ(w.mkdir("refs"), 0);
  CHECK_EQ(w.create("HEAD"), EPERM);
  CHECK_EQ(w.symlink("refs/heads/main", "HEAD"), EPERM);
  CHECK_EQ(w.ov->mknod(w.a, "HEAD", FileType::Regular, 0644, 0, kWho, &at), EPERM);
  CHECK_EQ(w.mkdir("lib2"), 0);
  CHECK_EQ(w.create("lib2/HEAD"), 0);
  CHECK_EQ(w.create("lib2/refs"), 0);
  CHECK_EQ(w.create("lib2/objects"), EPERM);
  // Case-insensitive names are the same names.
  GuardWorld ci(true, true);
  CHECK_EQ(ci.create("head"), 0);
  CHECK_EQ(ci.mkdir("Objects"), 0);
  CHECK_EQ(ci.mkdir("REFS"), EPERM);
  // A HEAD beside a commondir naming another directory is a repository too: commondir is refused.
  CHECK_EQ(w.create("src/commondir"), EPERM);
  // Inside .git the names are git's own.
  CHECK_EQ(w.mkdir(".git/objects"), 0);
  CHECK_EQ(w.ov->putFile("a", ".git/FETCH_HEAD", "x\n", 0644, kWho), 0);
  CHECK_EQ(w.mkdir(".git/modules/lib/objects"), 0);
  CHECK_EQ(w.mkdir(".git/modules/lib/refs"), 0);
  CHECK_EQ(w.create(".git/modules/lib/HEAD"), 0);
}

// A bare repository the folder holds (a test fixture): its hooks and config are refused as a
// .git's are, though nothing names them, since git run in that directory runs and obeys them.
TEST(write_guard_refuses_the_hooks_and_config_of_a_bare_repository) {
  GuardWorld w;
  CHECK_EQ(w.mkdir("fix.git/hooks"), EPERM);
  CHECK_EQ(w.create("fix.git/hooks/post-update"), EPERM);
  CHECK_EQ(w.create("fix.git/config"), EPERM);
  CHECK_EQ(w.create("fix.git/config.worktree"), EPERM);
  CHECK_EQ(w.ov->putFile("a", "fix.git/config", "[core]\n", 0644, kWho), EPERM);
  CHECK_EQ(w.open("fix.git/description", true), 0);  // the rest is data
  CHECK_EQ(w.create("fix.git/refs/heads/config"), 0);  // a branch called config
  CHECK_EQ(w.create("cfg"), 0);
  CHECK_EQ(w.ov->rename(w.a, "cfg", "fix.git/config", 0), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "cfg", "fix.git/hooks", 0), EPERM);
  CHECK_EQ(w.link("cfg", "fix.git/config"), EPERM);
  CHECK_EQ(w.symlink("/home/me/x", "fix.git/config"), EPERM);
  // The repository's existing config and hooks: not written, truncated, chmod-ed or linked.
  CHECK_EQ(w.open("bare/config", true), EPERM);
  CHECK_EQ(w.open("bare/config", false, true), EPERM);
  CHECK_EQ(w.open("bare/config", false), 0);
  CHECK_EQ(w.truncate("bare/config"), EPERM);
  CHECK_EQ(w.chmod("bare/hooks/post-update.sample"), EPERM);
  CHECK_EQ(w.open("bare/hooks/post-update.sample", true), EPERM);
  CHECK_EQ(w.link("bare/hooks/post-update.sample", "h2"), EPERM);  // a second name would write it
  CHECK_EQ(w.create("bare/hooks/post-update"), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "cfg", "bare/config", kRenameExchange), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "bare/config", "cfg", kRenameExchange), EPERM);
  // Taken apart and rebuilt: moving refs away makes hooks writable, but not bringing it back.
  CHECK_EQ(w.ov->rename(w.a, "bare/objects", "o", 0), EPERM);  // objects: alternates could come
  CHECK_EQ(w.ov->rename(w.a, "bare/refs", "r", 0), 0);
  CHECK_EQ(w.create("bare/hooks/post-update"), 0);
  CHECK_EQ(w.create("bare/config.new"), 0);
  CHECK_EQ(w.ov->rename(w.a, "bare/config.new", "bare/config", 0), 0);
  CHECK_EQ(w.ov->rename(w.a, "r", "bare/refs", 0), EPERM);
  CHECK_EQ(w.mkdir("bare/refs"), EPERM);
  // Nor by reverting the deletion (what the agent's revert tool and a rejected hunk call):
  // refused until the hooks (or config, or alternates) the layer wrote there go back first.
  bool wasDir = false;
  CHECK_EQ(w.ov->revert("a", "bare/refs", &wasDir), EPERM);
  CHECK_EQ(w.ov->revert("a", "bare/hooks/post-update", &wasDir), 0);
  CHECK_EQ(w.ov->revert("a", "bare/refs", &wasDir), EPERM);  // the layer's config is there still
  CHECK_EQ(w.ov->revert("a", "bare/config", &wasDir), 0);
  CHECK_EQ(w.ov->revert("a", "bare/refs", &wasDir), 0);
  CHECK_EQ(w.create("bare/hooks/post-update"), EPERM);  // a repository again
  // Links beneath a bare repository: the user's git follows them there as in a .git (a reflog
  // line appended to a folder file, a pack or refs directory that is the folder's own).
  Attr at;
  CHECK_EQ(w.mkdir("bare/logs"), 0);
  CHECK_EQ(w.mkdir("bare/logs/refs"), 0);
  CHECK_EQ(w.symlink("/home/me/project/README.md", "bare/logs/refs/x"), EPERM);
  CHECK_EQ(w.symlink("/home/me/project/.git/objects/info", "bare/objects/info"), EPERM);
  CHECK_EQ(w.symlink("/home/me/project/.git/refs/heads", "bare/refs/tags"), EPERM);
  CHECK_EQ(w.ov->mknod(w.a, "bare/FETCH_HEAD", FileType::Fifo, 0644, 0, kWho, &at), EPERM);
  CHECK_EQ(w.symlink("/home/me/project/README.md", "outside-link"), 0);
  CHECK_EQ(w.ov->rename(w.a, "outside-link", "bare/refs/x", 0), EPERM);
  CHECK_EQ(w.link("outside-link", "bare/refs/y"), EPERM);
  CHECK_EQ(w.mkdir("dir-from-outside"), 0);
  CHECK_EQ(w.ov->rename(w.a, "dir-from-outside", "bare/refs/tags", 0), EPERM);
  CHECK_EQ(w.mkdir("bare/refs/a"), 0);  // git's own work there: directories, moves within
  CHECK_EQ(w.ov->rename(w.a, "bare/refs/a", "bare/logs/a", 0), 0);
  CHECK_EQ(w.create("bare/refs/a-file"), 0);
  // Planted while HEAD was gone, then HEAD reverted: refused until the link goes back.
  CHECK_EQ(w.ov->unlink(w.a, "bare/HEAD"), 0);
  CHECK_EQ(w.symlink("/home/me/project/.git/objects/pack", "bare/objects/pack"), 0);
  CHECK_EQ(w.ov->revert("a", "bare/HEAD", &wasDir), EPERM);
  CHECK_EQ(w.ov->revert("a", "bare/objects/pack", &wasDir), 0);
  // A write-open of the folder's config made while no repository was there, whose first write
  // comes after HEAD is back: refused then (the open copied nothing: a deferred copy-up).
  Handle* h = nullptr;
  OpenIntent wr;
  wr.write = true;
  // Such a name is taken into the layer at the open (no deferred copy): a write refused only at
  // the first write could have changed the kernel's pages through a shared mapping already.
  CHECK_EQ(w.ov->open(w.a, "bare/config", wr, &h, &at), 0);
  CHECK_EQ(w.ov->revert("a", "bare/HEAD", &wasDir), EPERM);  // the layer holds config now
  CHECK_EQ(w.ov->write(h, "[core]\n", 7, 0), 0);  // no repository there: the agent's to write
  w.ov->release(h);
  CHECK_EQ(w.ov->revert("a", "bare/config", &wasDir), 0);
  CHECK_EQ(w.ov->revert("a", "bare/HEAD", &wasDir), 0);
  CHECK_EQ(w.open("bare/config", true), EPERM);
  // Moved whole, it is still one.
  CHECK_EQ(w.ov->rename(w.a, "fix.git", "moved.git", 0), 0);
  CHECK_EQ(w.create("moved.git/hooks/pre-receive"), EPERM);
  // Elsewhere the names are ordinary.
  CHECK_EQ(w.mkdir("src2"), 0);
  CHECK_EQ(w.create("src2/config"), 0);
  CHECK_EQ(w.mkdir("src2/hooks"), 0);
  CHECK_EQ(w.create("src2/hooks/useHooks.ts"), 0);
  // With git's rule off, nothing of this.
  GuardWorld off(false);
  CHECK_EQ(off.create("bare/hooks/post-update"), 0);
  CHECK_EQ(off.mkdir("src"), 0);
  CHECK_EQ(off.create("src/HEAD"), 0);
  CHECK_EQ(off.mkdir("src/objects"), 0);
  CHECK_EQ(off.mkdir("src/refs"), 0);
}

// objects/info/alternates names other object directories git reads and freshens objects in
// (utime): the folder's own, if an agent names them. Data beside it stays writable.
TEST(write_guard_refuses_alternates) {
  CHECK(WriteGuard::gitControl(".git/objects/info/alternates", false));
  CHECK(WriteGuard::gitControl(".git/objects/info/http-alternates", false));
  CHECK(WriteGuard::gitControl("lib/.git/modules/x/objects/info/alternates", false));
  CHECK(WriteGuard::gitControl(".GIT/Objects/info/alternates", true));
  CHECK(!WriteGuard::gitControl(".git/objects/info/packs", false));
  CHECK(!WriteGuard::gitControl("objects/info/alternates", false));  // not beneath a .git
  CHECK(!WriteGuard::gitControl(".git/objects/alternates", false));
  GuardWorld w;
  CHECK_EQ(w.mkdir(".git/objects"), 0);
  CHECK_EQ(w.mkdir(".git/objects/info"), 0);
  CHECK_EQ(w.create(".git/objects/info/alternates"), EPERM);
  CHECK_EQ(w.create(".git/objects/info/packs"), 0);
  CHECK_EQ(w.ov->rename(w.a, ".git/objects/info/packs", ".git/objects/info/alternates", 0), EPERM);
  // Nor brought in by moving a directory that holds one to objects/info, or objects.
  CHECK(WriteGuard::objectsPlace(".git/objects", false));
  CHECK(WriteGuard::objectsPlace("lib/.git/objects/info", false));
  CHECK(!WriteGuard::objectsPlace(".git/objects/pack", false));
  CHECK(!WriteGuard::objectsPlace(".git/refs/objects", false));
  CHECK(!WriteGuard::objectsPlace("objects/info", false));
  CHECK_EQ(w.mkdir(".git/refs/tmp"), 0);
  CHECK_EQ(w.mkdir(".git/refs/tmp/info"), 0);
  CHECK_EQ(w.create(".git/refs/tmp/info/alternates"), 0);  // not where git reads it
  CHECK_EQ(w.ov->rename(w.a, ".git/objects/info", ".git/refs/tmp/old", 0), EPERM);
  CHECK_EQ(w.ov->rename(w.a, ".git/refs/tmp/info", ".git/objects/info", kRenameExchange), EPERM);
  CHECK_EQ(w.ov->rename(w.a, ".git/objects", ".git/logs", 0), EPERM);
  CHECK_EQ(w.ov->rename(w.a, ".git/refs/tmp", ".git/objects", kRenameExchange), EPERM);
  // In a bare repository the folder holds, the same, and its alternates by name.
  CHECK_EQ(w.mkdir("fix.git/objects/info"), 0);
  CHECK_EQ(w.create("fix.git/objects/info/alternates"), EPERM);
  CHECK_EQ(w.create("fix.git/objects/info/packs"), 0);
  CHECK_EQ(w.mkdir("d"), 0);
  CHECK_EQ(w.ov->rename(w.a, "d", "fix.git/objects/info", kRenameExchange), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "d", "fix.git/objects", kRenameExchange), EPERM);
  CHECK_EQ(w.ov->rename(w.a, "fix.git/objects", "o", 0), EPERM);
  CHECK_EQ(w.mkdir("d/info"), 0);
  CHECK_EQ(w.create("d/info/alternates"), 0);  // an ordinary directory
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

// A file that starts "gitdir: " is a repository to git when its path is given as one (`git
// push fixtures/remote.git`): its path may not leave the file's directory (link_targets.cc).
TEST(write_guard_refuses_gitfiles_that_lead_out_of_the_shadow) {
  CHECK(Overlay::refusedGitfile("gitdir: /home/u/proj/.git\n"));
  CHECK(Overlay::refusedGitfile("gitdir: ../.git"));
  CHECK(Overlay::refusedGitfile("gitdir: a/../../b"));
  CHECK(Overlay::refusedGitfile("gitdir: C:\\proj\\.git"));
  CHECK(Overlay::refusedGitfile("gitdir: a\\..\\..\\b"));
  CHECK(!Overlay::refusedGitfile("gitdir: sub/repo.git\r\n"));
  CHECK(!Overlay::refusedGitfile("gitdir: ..x/y"));
  CHECK(!Overlay::refusedGitfile("gitdir:/x"));  // git needs the space: not a gitfile
  CHECK(!Overlay::refusedGitfile("# gitdir: /x"));
  CHECK(!Overlay::refusedGitfile("gitdir: \n"));

  GuardWorld w;
  auto writeAt = [&](const std::string& path, const std::string& data, uint64_t off) {
    Handle* h = nullptr;
    Attr at;
    OpenIntent intent;
    intent.write = true;
    int e = w.ov->create(w.a, path, 0644, intent, kWho, &h, &at);
    if (e) return e;
    e = w.ov->write(h, data.data(), data.size(), off);
    w.ov->release(h);
    return e;
  };
  CHECK_ERR(writeAt("remote.git", "gitdir: /home/u/proj/.git\n", 0), EPERM);
  CHECK_OK(writeAt("split", "gitd", 0));
  CHECK_ERR(writeAt("split", "ir: /home/u/proj/.git", 4), EPERM);  // in two writes
  CHECK_OK(writeAt("ok", "gitdir: sub/repo\n", 0));
  CHECK_ERR(writeAt("ok", "../", 8), EPERM);  // its path changed after the tag
  CHECK_OK(writeAt("cut", "gitdir: abc/..x", 0));
  Attr v, out;
  v.size = 14;  // "gitdir: abc/.."
  CHECK_ERR(w.ov->setattr(w.a, "cut", nullptr, kSetSize, v, &out), EPERM);
  CHECK_ERR(w.ov->putFile("a", "api.git", "gitdir: ../../x", 0644, kWho), EPERM);
  CHECK_OK(w.ov->putFile("a", "api.txt", "plain text", 0644, kWho));

  GuardWorld open(false);  // --writable-git: git's files are the agent's to write
  CHECK_OK(open.ov->putFile("a", "api.git", "gitdir: /home/u/proj/.git", 0644, kWho));
}
