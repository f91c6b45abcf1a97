// Unit tests of the overlay core (native/core/overlay.h) against an in-memory folder
// (fake_lower.h), through the public API only: file-system operations with an explicit layer
// from pin(), and the layer operations of the API. Standard library only (builds on Windows).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

const Caller kWho{1000, 1000};

// One overlay on a fake folder, with layer "a" created and pinned. Pins taken with layer()
// are released at the end.
struct World {
  fake::FakeLower* lower = nullptr;
  fake::FakeSpill* spill = nullptr;
  std::unique_ptr<Overlay> ov;
  Layer* a = nullptr;
  std::vector<Layer*> pins;

  explicit World(const std::function<void(fake::FakeLower&)>& build = {},
                 uint64_t spillThreshold = UINT64_MAX) {
    auto lo = std::make_unique<fake::FakeLower>();
    lower = lo.get();
    if (build) build(*lo);
    auto sp = std::make_unique<fake::FakeSpill>();
    spill = sp.get();
    ov = std::make_unique<Overlay>(std::move(lo), std::move(sp), spillThreshold);
    a = layer("a");
  }
  ~World() {
    for (Layer* p : pins) ov->unpin(p);
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  Layer* layer(const std::string& name) {
    if (ov->createLayer(name) != 0) throw unit::Abort{};
    Layer* p = ov->pin(name);
    if (!p) throw unit::Abort{};
    pins.push_back(p);
    return p;
  }

  // Whole content as `L` shows it; *err gets the first error.
  std::string read(Layer* L, const std::string& path, int* err = nullptr) {
    Handle* h = nullptr;
    Attr at;
    int e = ov->open(L, path, OpenIntent{}, &h, &at);
    std::string out;
    if (e == 0) {
      char buf[7];  // odd size: reads take several calls
      for (uint64_t off = 0;;) {
        size_t got = 0;
        e = ov->read(h, buf, sizeof buf, off, &got);
        if (e || got == 0) break;
        out.append(buf, got);
        off += got;
      }
      ov->release(h);
    }
    if (err) *err = e;
    return e ? "<" + unit::errnoName(e) + ">" : out;
  }

  // Writes `data` at `off` through a write-open (creating the file when `create`).
  int write(Layer* L, const std::string& path, const std::string& data, uint64_t off = 0,
            bool create = false, bool truncate = false) {
    Handle* h = nullptr;
    Attr at;
    OpenIntent intent;
    intent.write = true;
    intent.truncate = truncate;
    int e = create ? ov->create(L, path, 0644, intent, kWho, &h, &at)
                   : ov->open(L, path, intent, &h, &at);
    if (e) return e;
    e = ov->write(h, data.data(), data.size(), off);
    ov->release(h);
    return e;
  }
  int create(Layer* L, const std::string& path, const std::string& data) {
    return write(L, path, data, 0, true, true);
  }

  std::vector<std::string> names(Layer* L, const std::string& dir, int* err = nullptr) {
    std::vector<DirEntry> ls;
    int e = ov->readdir(L, dir, &ls);
    if (err) *err = e;
    std::vector<std::string> out;
    for (auto& d : ls) out.push_back(d.name);
    std::sort(out.begin(), out.end());
    return out;
  }

  Attr stat(Layer* L, const std::string& path, int* err = nullptr) {
    Attr at;
    int e = ov->getattr(L, path, &at);
    if (err) *err = e;
    return at;
  }
  int statErr(Layer* L, const std::string& path) {
    int e = 0;
    stat(L, path, &e);
    return e;
  }

  // "kind path" of every change of a layer, sorted.
  std::vector<std::string> changes(const std::string& name) {
    std::vector<Change> cs;
    if (ov->changes(name, &cs) != 0) return {"<changes failed>"};
    std::vector<std::string> out;
    for (auto& c : cs) {
      const char* k = c.kind == Change::Kind::Added      ? "added"
                      : c.kind == Change::Kind::Modified ? "modified"
                      : c.kind == Change::Kind::Deleted  ? "deleted"
                                                         : "metadata";
      out.push_back(std::string(k) + " " + c.path);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

using Names = std::vector<std::string>;

void project(fake::FakeLower& f) {
  f.addDir("src");
  f.addFile("src/a.js", "a\n");
  f.addFile("src/b.js", "b\n");
  f.addDir("src/lib");
  f.addFile("src/lib/util.js", "util\n");
  f.addFile("README.md", "# readme\n");
  f.addSymlink("link", "src/a.js");
  f.addDir("empty");
}

}  // namespace

// A folder on a dead FUSE mount answers ENOTCONN; the shadow's own statfs must not, for the
// daemon takes ENOTCONN from a statfs of a shadow for the kernel's word that its server is gone.
TEST(statfs_of_a_folder_whose_own_server_is_gone_is_eio_never_enotconn) {
  World w;
  FsStats st{};
  CHECK_EQ(w.ov->statfs(&st), 0);
  CHECK_EQ(st.blocks, static_cast<uint64_t>(1000));
  w.lower->statfsFails = ENOTCONN;
  CHECK_EQ(w.ov->statfs(&st), EIO);
  w.lower->statfsFails = EACCES;
  CHECK_EQ(w.ov->statfs(&st), EACCES);
}

TEST(readdir_merges_the_folder_with_the_layer_and_hides_whiteouts) {
  World w(project);
  const std::string before = w.lower->snapshot();
  REQUIRE_OK(w.create(w.a, "src/c.js", "c\n"));
  REQUIRE_OK(w.ov->unlink(w.a, "src/a.js"));
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "src/new", 0755, kWho, &at));
  CHECK_EQ(w.names(w.a, "src"), (Names{"b.js", "c.js", "lib", "new"}));
  CHECK_EQ(w.names(w.a, ""), (Names{"README.md", "empty", "link", "src"}));
  std::vector<DirEntry> ls;
  REQUIRE_OK(w.ov->readdir(w.a, "src", &ls));
  for (auto& d : ls) {
    if (d.name == "new") CHECK(d.type == FileType::Directory);
    if (d.name == "c.js") CHECK(d.type == FileType::Regular);
  }
  // Another layer still shows the folder as it is; the folder itself was not touched.
  Layer* b = w.layer("b");
  CHECK_EQ(w.names(b, "src"), (Names{"a.js", "b.js", "lib"}));
  CHECK_EQ(w.lower->snapshot(), before);
  // A file that appears in the folder later shows up in the merged listing.
  w.lower->addFile("src/late.js", "late\n");
  CHECK_EQ(w.names(w.a, "src"), (Names{"b.js", "c.js", "late.js", "lib", "new"}));
  int e = 0;
  w.names(w.a, "README.md", &e);
  CHECK_EQ(unit::errnoName(e), "ENOTDIR");
}

TEST(unlink_of_a_folder_file_leaves_a_whiteout) {
  World w(project);
  const std::string before = w.lower->snapshot();
  REQUIRE_OK(w.ov->unlink(w.a, "src/a.js"));
  CHECK_ERR(w.statErr(w.a, "src/a.js"), ENOENT);
  CHECK_ERR(w.ov->unlink(w.a, "src/a.js"), ENOENT);
  int e = 0;
  w.read(w.a, "src/a.js", &e);
  CHECK_ERR(e, ENOENT);
  CHECK_EQ(w.changes("a"), (Names{"deleted src/a.js"}));
  CHECK(w.lower->exists("src/a.js"));
  // The whiteout keeps hiding the folder's file when the developer edits it.
  w.lower->modify("src/a.js", "edited in the folder\n");
  CHECK_ERR(w.statErr(w.a, "src/a.js"), ENOENT);
  // A new file may take the name again.
  REQUIRE_OK(w.create(w.a, "src/a.js", "again\n"));
  CHECK_EQ(w.read(w.a, "src/a.js"), "again\n");
  CHECK_EQ(w.names(w.a, "src"), (Names{"a.js", "b.js", "lib"}));
  // Directories are refused by unlink, files by rmdir.
  CHECK_ERR(w.ov->unlink(w.a, "src/lib"), EISDIR);
  CHECK_ERR(w.ov->rmdir(w.a, "src/b.js"), ENOTDIR);
  w.lower->modify("src/a.js", "a\n");
  CHECK_EQ(w.lower->snapshot(), before);
}

// A layer records no name that is not valid UTF-8 (Overlay::writeRefused): everything above
// the core carries paths as Unicode strings, where such a name is another or none. The folder's
// own such files are read, never changed.
TEST(names_that_are_not_utf8_are_refused_to_a_layer_with_eilseq) {
  World w([](fake::FakeLower& f) {
    project(f);
    f.addFile("caf\xe9.txt", "latin-1 name\n");
  });
  const std::string before = w.lower->snapshot();
  Attr at;
  CHECK_ERR(w.create(w.a, "new\xff", "x"), EILSEQ);
  CHECK_ERR(w.ov->mkdir(w.a, "dir\xc0\xaf", 0755, kWho, &at), EILSEQ);        // an overlong "/"
  CHECK_ERR(w.ov->mkdir(w.a, "sur\xed\xa0\x80", 0755, kWho, &at), EILSEQ);    // a surrogate
  CHECK_ERR(w.ov->rename(w.a, "README.md", "READ\xffME.md", 0), EILSEQ);
  CHECK_ERR(w.ov->symlink(w.a, "target\xff", "link2", kWho, &at), EILSEQ);
  CHECK_ERR(w.ov->link(w.a, "README.md", "hard\xfe", &at), EILSEQ);
  CHECK_ERR(w.ov->unlink(w.a, "caf\xe9.txt"), EILSEQ);
  CHECK_ERR(w.ov->rename(w.a, "caf\xe9.txt", "cafe.txt", 0), EILSEQ);
  CHECK_ERR(w.write(w.a, "caf\xe9.txt", "more"), EILSEQ);
  CHECK_EQ(w.read(w.a, "caf\xe9.txt"), "latin-1 name\n");
  // Valid UTF-8 of every length is a name like any other.
  REQUIRE_OK(w.create(w.a, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80.txt", "ok\n"));
  CHECK_EQ(w.changes("a"), (Names{"added caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80.txt"}));
  CHECK_EQ(w.lower->snapshot(), before);
}

TEST(renaming_a_folder_directory_redirects_to_it_and_stays_live) {
  World w([](fake::FakeLower& f) {
    f.addDir("d");
    f.addFile("d/f1", "one");
    f.addDir("d/sub");
    f.addFile("d/sub/f2", "two");
  });
  const uint64_t dIno = w.stat(w.a, "d").ino;
  const std::string before = w.lower->snapshot();
  // No EXDEV (kernel overlayfs without redirect_dir would answer that): the rename is O(1).
  REQUIRE_OK(w.ov->rename(w.a, "d", "e", 0));
  CHECK_ERR(w.statErr(w.a, "d"), ENOENT);
  CHECK_EQ(w.names(w.a, ""), (Names{"e"}));
  CHECK_EQ(w.names(w.a, "e"), (Names{"f1", "sub"}));
  CHECK_EQ(w.read(w.a, "e/sub/f2"), "two");
  CHECK_EQ(w.stat(w.a, "e").ino, dIno);
  CHECK_EQ(w.lower->snapshot(), before);
  // The renamed directory keeps merging with the folder's directory, live.
  w.lower->addFile("d/late", "late");
  CHECK_EQ(w.names(w.a, "e"), (Names{"f1", "late", "sub"}));
  CHECK_EQ(w.read(w.a, "e/late"), "late");
  // Renamed back, it is the folder's directory again.
  REQUIRE_OK(w.ov->rename(w.a, "e", "d", 0));
  CHECK_EQ(w.names(w.a, "d"), (Names{"f1", "late", "sub"}));
  CHECK_ERR(w.statErr(w.a, "e"), ENOENT);
}

TEST(copy_up_on_write_open_keeps_the_inode_number_and_spares_the_folder) {
  World w(project);
  const uint64_t ino = w.stat(w.a, "README.md").ino;
  // A read-only handle opened before the copy-up.
  Handle* ro = nullptr;
  Attr at;
  REQUIRE_OK(w.ov->open(w.a, "README.md", OpenIntent{}, &ro, &at));
  REQUIRE_OK(w.write(w.a, "README.md", "#!", 0));
  CHECK_EQ(w.read(w.a, "README.md"), "#!readme\n");
  CHECK_EQ(w.stat(w.a, "README.md").ino, ino);
  CHECK_EQ(w.stat(w.a, "README.md").size, uint64_t{9});
  // The early handle sees the layer's copy from now on, as overlay.h promises.
  char buf[16];
  size_t got = 0;
  CHECK_OK(w.ov->read(ro, buf, sizeof buf, 0, &got));
  CHECK_EQ(std::string(buf, got), "#!readme\n");
  w.ov->release(ro);
  CHECK_EQ(w.lower->content("README.md"), "# readme\n");
  CHECK_EQ(w.changes("a"), (Names{"modified README.md"}));
  // Another layer still reads the folder's file.
  CHECK_EQ(w.read(w.layer("b"), "README.md"), "# readme\n");
  // Truncating open: no content needed, inode kept too.
  REQUIRE_OK(w.write(w.a, "src/b.js", "B", 0, false, true));
  CHECK_EQ(w.read(w.a, "src/b.js"), "B");
  CHECK_EQ(w.lower->content("src/b.js"), "b\n");
  CHECK_EQ(w.lower->openHandles(), 0);
}

TEST(a_removed_file_open_for_reading_can_be_written_through_a_writable_copy) {
  World w(project);
  const uint64_t ino = w.stat(w.a, "README.md").ino;
  Handle* ro = nullptr;
  Attr at;
  REQUIRE_OK(w.ov->open(w.a, "README.md", OpenIntent{}, &ro, &at));
  REQUIRE_OK(w.ov->unlink(w.a, "README.md"));
  Handle* rw = nullptr;
  REQUIRE_OK(w.ov->writableCopy(ro, &rw));
  CHECK(rw->writable);
  CHECK_OK(w.ov->write(rw, "#!", 2, 0));
  char buf[16];
  size_t got = 0;
  CHECK_OK(w.ov->read(rw, buf, sizeof buf, 0, &got));
  CHECK_EQ(std::string(buf, got), "#!readme\n");
  Attr a;
  CHECK_OK(w.ov->fgetattr(rw, &a));
  CHECK_EQ(a.ino, ino);
  CHECK_EQ(a.size, uint64_t{9});
  w.ov->release(rw);
  w.ov->release(ro);
  // Nameless: the layer has only the deletion, and the folder is untouched.
  CHECK_EQ(w.changes("a"), (Names{"deleted README.md"}));
  CHECK_EQ(w.lower->content("README.md"), "# readme\n");
  CHECK_EQ(w.lower->openHandles(), 0);
  // A layer file: the same inode, writable.
  REQUIRE_OK(w.create(w.a, "new.txt", "new"));
  REQUIRE_OK(w.ov->open(w.a, "new.txt", OpenIntent{}, &ro, &at));
  REQUIRE_OK(w.ov->unlink(w.a, "new.txt"));
  REQUIRE_OK(w.ov->writableCopy(ro, &rw));
  CHECK_OK(w.ov->write(rw, "N", 1, 0));
  CHECK_OK(w.ov->read(ro, buf, sizeof buf, 0, &got));
  CHECK_EQ(std::string(buf, got), "New");
  w.ov->release(rw);
  w.ov->release(ro);
  // A read-only view refuses.
  Layer* none = nullptr;
  REQUIRE_OK(w.ov->open(none, "src/b.js", OpenIntent{}, &ro, &at));
  CHECK_ERR(w.ov->writableCopy(ro, &rw), EROFS);
  w.ov->release(ro);
}

TEST(dropping_a_clone_leaves_the_source_layer_whole) {
  World w(project);
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "dist", 0755, kWho, &at));
  REQUIRE_OK(w.create(w.a, "dist/out.js", "built\n"));
  REQUIRE_OK(w.ov->unlink(w.a, "README.md"));
  const Names before = w.changes("a");
  CHECK_EQ(before, (Names{"added dist", "added dist/out.js", "deleted README.md"}));
  REQUIRE_OK(w.ov->cloneLayer("a", "s"));
  CHECK_EQ(w.changes("s"), before);
  {
    Layer* s = w.ov->pin("s");
    REQUIRE_OK(w.create(s, "scratch.txt", "tmp\n"));
    CHECK_EQ(w.read(s, "dist/out.js"), "built\n");
    w.ov->unpin(s);
  }
  REQUIRE_OK(w.ov->dropLayer("s"));
  CHECK_EQ(w.changes("a"), before);
  CHECK_EQ(w.read(w.a, "dist/out.js"), "built\n");
}

TEST(dropping_a_clone_of_the_active_layer_leaves_it_whole) {
  World w(project);
  REQUIRE_OK(w.ov->createLayer("b"));
  std::vector<std::string> changed;
  REQUIRE_OK(w.ov->activate("b", &changed));
  Attr at;
  REQUIRE_OK(w.ov->mkdir(nullptr, "dist", 0755, kWho, &at));
  REQUIRE_OK(w.create(nullptr, "dist/out.js", "built\n"));
  // Directories made for an API write (their size is not 0), and a symlink.
  REQUIRE_OK(w.ov->putFile("b", "deep/er/file.txt", "deep\n", 0644, kWho));
  REQUIRE_OK(w.ov->symlink(nullptr, "dist/out.js", "ln", kWho, &at));
  const Names before = w.changes("b");
  CHECK_EQ(before, (Names{"added deep", "added deep/er", "added deep/er/file.txt", "added dist",
                          "added dist/out.js", "added ln"}));
  REQUIRE_OK(w.ov->cloneLayer("b", "s"));
  CHECK_EQ(w.changes("s"), before);
  Layer* s = w.ov->pin("s");
  CHECK_EQ(w.read(s, "deep/er/file.txt"), "deep\n");
  std::string target;
  CHECK_OK(w.ov->readlink(s, "ln", &target));
  CHECK_EQ(target, std::string("dist/out.js"));
  w.ov->unpin(s);
  REQUIRE_OK(w.ov->dropLayer("s"));
  CHECK_EQ(w.changes("b"), before);
  CHECK_EQ(w.read(nullptr, "deep/er/file.txt"), "deep\n");
  REQUIRE_OK(w.ov->activate("", &changed));
}

// What the layer still reads from the folder: a renamed directory, a renamed file, and a file
// moved out of the renamed directory name where they came from (apply's `origin`); a file
// written since, or one never moved, names none.
TEST(changes_name_the_origin_of_what_was_moved) {
  World w(project);
  REQUIRE_OK(w.ov->rename(w.a, "src/lib", "lib2", 0));
  REQUIRE_OK(w.ov->rename(w.a, "src/a.js", "a2.js", 0));
  REQUIRE_OK(w.ov->rename(w.a, "src/b.js", "b2.js", 0));
  REQUIRE_OK(w.write(w.a, "b2.js", "written"));
  REQUIRE_OK(w.write(w.a, "README.md", "changed"));
  std::vector<Change> cs;
  REQUIRE_OK(w.ov->changes("a", &cs));
  std::vector<std::string> got;
  for (const Change& c : cs)
    if (c.kind != Change::Kind::Deleted) got.push_back(c.path + "<-" + c.origin.value_or("-"));
  std::sort(got.begin(), got.end());
  CHECK_EQ(got, (Names{"README.md<--", "a2.js<-src/a.js", "b2.js<--", "lib2<-src/lib"}));
}

// Before apply changes the folder where an agent moved something from, every layer takes its
// own copy of what it reads from there (keepMoved), and only that: the moved entries then show
// the same after the folder's originals are edited, removed or joined by new files, and so do
// other layers'; what nothing reads from a changed path (a file moved from elsewhere, a
// directory of the moved one whose own folder directory is untouched) still reads the folder.
TEST(keep_moved_copies_what_layers_read_from_a_changing_folder_path_and_only_that) {
  World w([](fake::FakeLower& f) {
    project(f);
    f.addDir("src/lib/deep");
    f.addFile("src/lib/deep/d.js", "deep\n");
  });
  Layer* b = w.layer("b");
  REQUIRE_OK(w.ov->rename(w.a, "src", "moved", 0));
  REQUIRE_OK(w.create(w.a, "moved/mine.js", "mine\n"));
  REQUIRE_OK(w.ov->unlink(w.a, "moved/b.js"));
  REQUIRE_OK(w.ov->rename(w.a, "README.md", "READ.md", 0));
  REQUIRE_OK(w.ov->rename(b, "src/lib/util.js", "util2.js", 0));
  // Names that only begin like an origin reach nothing.
  std::vector<std::pair<std::string, std::string>> none;
  REQUIRE_OK(w.ov->keepMoved({"src2", "sr", "README", "README.md.bak", "src.js/x"}, &none));
  CHECK(none.empty());
  // The folder's src/a.js is about to change: "a" keeps moved/ (and what it holds, but not the
  // moved README), "b" keeps util2.js only if src/lib/util.js is reached (it is not).
  std::vector<std::pair<std::string, std::string>> kept;
  REQUIRE_OK(w.ov->keepMoved({"src/a.js"}, &kept));
  std::sort(kept.begin(), kept.end());
  CHECK_EQ(kept.size(), size_t{2});
  CHECK_EQ(kept[0].first + ":" + kept[0].second, std::string("a:moved"));
  CHECK_EQ(kept[1].first + ":" + kept[1].second, std::string("a:moved/a.js"));
  // The folder changes as apply would change it.
  w.lower->modify("src/a.js", "user's\n");
  w.lower->addFile("src/new.js", "new\n");
  w.lower->modify("src/lib/deep/d.js", "deep 2\n");
  CHECK_EQ(w.read(w.a, "moved/a.js"), "a\n");
  CHECK_EQ(w.names(w.a, "moved"), (Names{"a.js", "lib", "mine.js"}));
  CHECK_EQ(w.read(w.a, "moved/lib/deep/d.js"), "deep 2\n");  // nothing changed src/lib: still live
  // Now all of src goes: the rest is copied, in both layers.
  kept.clear();
  REQUIRE_OK(w.ov->keepMoved({"src", "README.md"}, &kept));
  for (const char* p : {"src/a.js", "src/b.js", "src/new.js", "src/lib/util.js", "src/lib/deep/d.js"})
    w.lower->remove(p);
  w.lower->remove("src/lib/deep");
  w.lower->remove("src/lib");
  w.lower->remove("src");
  w.lower->remove("README.md");
  CHECK_EQ(w.names(w.a, "moved"), (Names{"a.js", "lib", "mine.js"}));
  CHECK_EQ(w.read(w.a, "moved/lib/util.js"), "util\n");
  CHECK_EQ(w.read(w.a, "moved/lib/deep/d.js"), "deep 2\n");
  CHECK_EQ(w.read(w.a, "READ.md"), "# readme\n");
  CHECK_EQ(w.read(b, "util2.js"), "util\n");
  // The copies are the layer's own now: no origin, and no base of a path they never had.
  std::vector<Change> cs;
  REQUIRE_OK(w.ov->changes("a", &cs));
  for (const Change& c : cs) {
    CHECK(!c.origin);
    CHECK(!c.base);
  }
  // Nothing reaches a path no layer reads from elsewhere.
  kept.clear();
  REQUIRE_OK(w.ov->keepMoved({"other"}, &kept));
  CHECK(kept.empty());
}

// The user removes by hand what an agent moved: the moved directory shows only what the layer
// holds, and asking for its extended attributes is no error (ls -l asks) but "none".
// An agent moving what an apply is changing while that apply runs (keepMoved's hold): the move
// takes its copy at once, until the hold is released.
TEST(a_move_made_while_keep_moved_holds_copies_at_once) {
  World w(project);
  std::vector<std::pair<std::string, std::string>> kept;
  uint64_t hold = 0;
  REQUIRE_OK(w.ov->keepMoved({"src"}, &kept, &hold));
  REQUIRE_OK(w.ov->rename(w.a, "src/a.js", "x.js", 0));
  REQUIRE_OK(w.ov->rename(w.a, "src/lib", "lib2", 0));
  w.lower->remove("src/a.js");
  w.lower->remove("src/lib/util.js");
  w.lower->remove("src/lib");
  CHECK_EQ(w.read(w.a, "x.js"), "a\n");
  CHECK_EQ(w.read(w.a, "lib2/util.js"), "util\n");
  w.ov->releaseMoved(hold);
  REQUIRE_OK(w.ov->rename(w.a, "src/b.js", "y.js", 0));
  std::vector<Change> cs;
  REQUIRE_OK(w.ov->changes("a", &cs));
  std::vector<std::string> origins;
  for (const Change& c : cs)
    if (c.origin) origins.push_back(c.path + "<-" + *c.origin);
  CHECK_EQ(origins, (Names{"y.js<-src/b.js"}));
}

TEST(a_moved_directory_whose_folder_original_went_away_has_no_attributes_but_stays) {
  World w(project);
  REQUIRE_OK(w.ov->rename(w.a, "src/lib", "lib2", 0));
  REQUIRE_OK(w.create(w.a, "lib2/mine.js", "mine\n"));
  w.lower->remove("src/lib/util.js");
  w.lower->remove("src/lib");
  CHECK_EQ(w.names(w.a, "lib2"), (Names{"mine.js"}));
  std::string v;
  CHECK_ERR(w.ov->getxattr(w.a, "lib2", "user.x", &v), ENODATA);
  std::vector<std::string> names{"stale"};
  CHECK_OK(w.ov->listxattr(w.a, "lib2", &names));
  CHECK(names.empty());
}

// The user keeps their version of a file the agent deleted with its directory (apply --keep):
// the directory merges again, showing that file and nothing else of the folder's; under a
// directory the agent emptied and refilled, the agent's own entries stay and one of its
// directories named like the folder's still shows none of the folder's.
TEST(revert_through_a_deleted_or_emptied_directory_shows_that_one_path_again) {
  World w([](fake::FakeLower& f) {
    project(f);
    f.addDir("src/lib/deep");
    f.addFile("src/lib/deep/d.js", "deep\n");
    f.addFile("src/lib/deep/e.js", "e\n");
  });
  bool wasDir = false;
  REQUIRE_OK(w.ov->remove("a", "src"));
  CHECK_ERR(w.ov->revert("a", "src/lib/deep/d.js", &wasDir), EXDEV);
  REQUIRE_OK(w.ov->revertThrough("a", "src/lib/deep/d.js", &wasDir));
  CHECK_EQ(w.names(w.a, "src"), (Names{"lib"}));
  CHECK_EQ(w.names(w.a, "src/lib"), (Names{"deep"}));
  CHECK_EQ(w.names(w.a, "src/lib/deep"), (Names{"d.js"}));
  CHECK_EQ(w.read(w.a, "src/lib/deep/d.js"), "deep\n");
  // Emptied and refilled: rm -r src; mkdir -p src/lib; echo > src/new.js
  std::vector<std::string> ps;
  REQUIRE_OK(w.ov->reset("a", &ps));
  REQUIRE_OK(w.ov->remove("a", "src"));
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "src", 0755, kWho, &at));
  REQUIRE_OK(w.ov->mkdir(w.a, "src/lib", 0755, kWho, &at));
  REQUIRE_OK(w.create(w.a, "src/new.js", "new\n"));
  REQUIRE_OK(w.ov->revertThrough("a", "src/a.js", &wasDir));
  CHECK_EQ(w.names(w.a, "src"), (Names{"a.js", "lib", "new.js"}));
  CHECK_EQ(w.names(w.a, "src/lib"), Names{});
  CHECK_EQ(w.read(w.a, "src/a.js"), "a\n");
  // Under a moved directory it is refused as before.
  REQUIRE_OK(w.ov->reset("a", &ps));
  REQUIRE_OK(w.ov->rename(w.a, "src", "moved", 0));
  CHECK_ERR(w.ov->revertThrough("a", "moved/a.js", &wasDir), EXDEV);
}

TEST(reset_drops_every_change_of_the_layer) {
  World w(project);
  Attr at;
  REQUIRE_OK(w.write(w.a, "README.md", "changed"));
  REQUIRE_OK(w.create(w.a, "new.txt", "new"));
  REQUIRE_OK(w.ov->unlink(w.a, "src/a.js"));
  REQUIRE_OK(w.ov->mkdir(w.a, "dir", 0700, kWho, &at));
  REQUIRE_OK(w.ov->rename(w.a, "src/lib", "lib2", 0));
  std::vector<std::string> paths;
  REQUIRE_OK(w.ov->reset("a", &paths));
  for (const char* p : {"README.md", "new.txt", "src/a.js", "dir", "lib2"})
    CHECK(std::find(paths.begin(), paths.end(), p) != paths.end());
  CHECK_EQ(w.read(w.a, "README.md"), "# readme\n");
  CHECK_ERR(w.statErr(w.a, "new.txt"), ENOENT);
  CHECK_ERR(w.statErr(w.a, "dir"), ENOENT);
  CHECK_ERR(w.statErr(w.a, "lib2"), ENOENT);
  CHECK_EQ(w.names(w.a, "src"), (Names{"a.js", "b.js", "lib"}));
  CHECK_EQ(w.changes("a"), Names{});
  CHECK_ERR(w.ov->reset("nope", &paths), ENXIO);
}

TEST(a_cloned_layer_is_independent_of_its_source) {
  World w(project);
  REQUIRE_OK(w.write(w.a, "README.md", "A1"));
  REQUIRE_OK(w.create(w.a, "n.txt", "N"));
  REQUIRE_OK(w.ov->cloneLayer("a", "b"));
  Layer* b = w.ov->pin("b");
  REQUIRE(b != nullptr);
  w.pins.push_back(b);
  CHECK_EQ(w.read(b, "README.md"), "A1readme\n");
  REQUIRE_OK(w.write(b, "README.md", "B1"));
  REQUIRE_OK(w.ov->unlink(b, "n.txt"));
  REQUIRE_OK(w.write(w.a, "README.md", "A2"));
  CHECK_EQ(w.read(w.a, "README.md"), "A2readme\n");
  CHECK_EQ(w.read(b, "README.md"), "B1readme\n");
  CHECK_EQ(w.read(w.a, "n.txt"), "N");
  CHECK_ERR(w.statErr(b, "n.txt"), ENOENT);
  CHECK_ERR(w.ov->cloneLayer("a", "b"), EEXIST);
  // ENXIO is the core's "no such layer" (the API maps it to UNKNOWN_AGENT).
  CHECK_ERR(w.ov->cloneLayer("missing", "c"), ENXIO);
  CHECK(!w.ov->hasLayer("c"));
}

TEST(contents_past_the_threshold_spill_and_read_back) {
  World w(
      [](fake::FakeLower& f) { f.addFile("big.bin", std::string(64, 'L')); }, 16);
  REQUIRE_OK(w.create(w.a, "small", "0123456789"));
  CHECK_EQ(w.spill->created.load(), 0);
  const std::string big(100, 'x');
  REQUIRE_OK(w.create(w.a, "big", big));
  CHECK_EQ(w.spill->created.load(), 1);
  CHECK_EQ(w.read(w.a, "big"), big);
  // Growing a small file past the threshold moves it out too.
  REQUIRE_OK(w.write(w.a, "small", "ABCDEFGHIJ", 10));
  CHECK_EQ(w.spill->created.load(), 2);
  CHECK_EQ(w.read(w.a, "small"), "0123456789ABCDEFGHIJ");
  CHECK_EQ(w.stat(w.a, "small").size, uint64_t{20});
  // A folder file above the threshold is copied straight into a spill file.
  REQUIRE_OK(w.write(w.a, "big.bin", "!", 64));
  CHECK_EQ(w.spill->created.load(), 3);
  CHECK_EQ(w.read(w.a, "big.bin"), std::string(64, 'L') + "!");
  LayerStats st;
  REQUIRE_OK(w.ov->stats("a", &st));
  CHECK(st.spilledBytes >= 100 + 20 + 65);
  // A clone copies spilled contents: writing one does not change the other.
  REQUIRE_OK(w.ov->cloneLayer("a", "c"));
  Layer* c = w.ov->pin("c");
  REQUIRE(c != nullptr);
  w.pins.push_back(c);
  REQUIRE_OK(w.write(c, "big", "yy", 0));
  CHECK_EQ(w.read(c, "big"), "yy" + std::string(98, 'x'));
  CHECK_EQ(w.read(w.a, "big"), big);
  // A full spill disk is reported, not hidden.
  w.spill->failWith = ENOSPC;
  CHECK_ERR(w.create(w.a, "big2", big), ENOSPC);
}

// A write past the end of an in-memory content leaves a hole of zeros before it, also where
// the content's block still holds bytes from before a shrink; the written bytes are the
// writer's, never zeros over them.
TEST(a_write_past_the_end_leaves_zeros_before_it_even_after_a_shrink) {
  World w([](fake::FakeLower&) {});
  REQUIRE_OK(w.create(w.a, "f", "ABCDEFGHIJ"));
  Attr v, out;
  v.size = 2;
  REQUIRE_OK(w.ov->setattr(w.a, "f", nullptr, kSetSize, v, &out));
  REQUIRE_OK(w.write(w.a, "f", "xy", 6));
  CHECK_EQ(w.read(w.a, "f"), std::string("AB\0\0\0\0xy", 8));
  // Growing past the block's room (it moves) keeps the same rule.
  REQUIRE_OK(w.write(w.a, "f", std::string(300, 'z'), 100));
  CHECK_EQ(w.read(w.a, "f"),
           std::string("AB\0\0\0\0xy", 8) + std::string(92, '\0') + std::string(300, 'z'));
}

TEST(hard_links_within_a_layer_share_one_inode) {
  World w(project);
  Attr at;
  REQUIRE_OK(w.create(w.a, "f", "x"));
  REQUIRE_OK(w.ov->link(w.a, "f", "g", &at));
  CHECK_EQ(at.nlink, 2u);
  CHECK_EQ(w.stat(w.a, "f").ino, w.stat(w.a, "g").ino);
  REQUIRE_OK(w.write(w.a, "g", "yy"));
  CHECK_EQ(w.read(w.a, "f"), "yy");
  REQUIRE_OK(w.ov->unlink(w.a, "f"));
  CHECK_EQ(w.read(w.a, "g"), "yy");
  CHECK_EQ(w.stat(w.a, "g").nlink, 1u);
  // A link to a folder file: the new name lives only in the layer.
  REQUIRE_OK(w.ov->link(w.a, "src/a.js", "a-link.js", &at));
  CHECK_EQ(w.read(w.a, "a-link.js"), "a\n");
  CHECK_EQ(w.stat(w.a, "a-link.js").ino, w.stat(w.a, "src/a.js").ino);
  CHECK(!w.lower->exists("a-link.js"));
  CHECK_ERR(w.ov->link(w.a, "src", "src-link", &at), EPERM);
  CHECK_ERR(w.ov->link(w.a, "g", "src/b.js", &at), EEXIST);
}

TEST(errors_match_a_real_file_system) {
  World w(project);
  Attr at;
  Handle* h = nullptr;
  const std::string n255(255, 'n'), n256(256, 'n');
  // Names longer than NAME_MAX.
  CHECK_ERR(w.create(w.a, n256, "x"), ENAMETOOLONG);
  CHECK_ERR(w.ov->mkdir(w.a, "src/" + n256, 0755, kWho, &at), ENAMETOOLONG);
  CHECK_ERR(w.ov->rename(w.a, "README.md", n256, 0), ENAMETOOLONG);
  CHECK_ERR(w.ov->symlink(w.a, "t", n256, kWho, &at), ENAMETOOLONG);
  CHECK_OK(w.create(w.a, n255, "x"));
  // Directories that are not empty (in the folder, or in the layer only).
  CHECK_ERR(w.ov->rmdir(w.a, "src"), ENOTEMPTY);
  REQUIRE_OK(w.ov->mkdir(w.a, "full", 0755, kWho, &at));
  REQUIRE_OK(w.create(w.a, "full/x", "x"));
  CHECK_ERR(w.ov->rmdir(w.a, "full"), ENOTEMPTY);
  CHECK_ERR(w.ov->rename(w.a, "empty", "src", 0), ENOTEMPTY);
  // ... and one emptied by whiteouts is empty.
  REQUIRE_OK(w.ov->unlink(w.a, "src/lib/util.js"));
  CHECK_OK(w.ov->rmdir(w.a, "src/lib"));
  // Names that exist.
  CHECK_ERR(w.ov->mkdir(w.a, "src", 0755, kWho, &at), EEXIST);
  CHECK_ERR(w.ov->symlink(w.a, "t", "README.md", kWho, &at), EEXIST);
  OpenIntent excl;
  excl.write = true;
  excl.exclusive = true;
  CHECK_ERR(w.ov->create(w.a, "README.md", 0644, excl, kWho, &h, &at), EEXIST);
  CHECK_ERR(w.ov->rename(w.a, "src/a.js", "src/b.js", kRenameNoReplace), EEXIST);
  CHECK_ERR(w.ov->rename(w.a, "src/a.js", "src/none", kRenameExchange), ENOENT);
  CHECK_ERR(w.ov->rename(w.a, "src/a.js", "src/b.js", kRenameNoReplace | kRenameExchange), EINVAL);
  // Type mismatches.
  CHECK_ERR(w.ov->rename(w.a, "README.md", "empty", 0), EISDIR);
  CHECK_ERR(w.ov->rename(w.a, "empty", "README.md", 0), ENOTDIR);
  CHECK_ERR(w.ov->rename(w.a, "src", "src/inside", 0), EINVAL);
  CHECK_ERR(w.create(w.a, "README.md/x", "x"), ENOTDIR);
  OpenIntent wr;
  wr.write = true;
  CHECK_ERR(w.ov->open(w.a, "src", wr, &h, &at), EISDIR);
  std::string s;
  CHECK_ERR(w.ov->readlink(w.a, "README.md", &s), EINVAL);
  CHECK_ERR(w.ov->getxattr(w.a, "README.md", "user.none", &s), ENODATA);
  CHECK_ERR(w.statErr(w.a, "nothing/here"), ENOENT);
  // The root cannot go away.
  CHECK_ERR(w.ov->rmdir(w.a, ""), EBUSY);
  CHECK_ERR(w.ov->rename(w.a, "", "x", 0), EBUSY);
  // With no layer active, the shared view is read-only.
  CHECK_ERR(w.ov->mkdir(nullptr, "x", 0755, kWho, &at), EROFS);
  CHECK_ERR(w.ov->unlink(nullptr, "README.md"), EROFS);
  CHECK_ERR(w.ov->open(nullptr, "README.md", wr, &h, &at), EROFS);
  // The folder never saw any of it.
  CHECK(!w.lower->exists(n255));
}

TEST(activation_picks_what_the_shared_view_shows) {
  World w(project);
  Layer* b = w.layer("b");
  Attr at;
  std::vector<std::string> changed;
  REQUIRE_OK(w.ov->activate("a", &changed));
  CHECK_EQ(w.ov->activeLayer(), "a");
  REQUIRE_OK(w.ov->mkdir(nullptr, "made-in-a", 0755, kWho, &at));
  CHECK_OK(w.statErr(w.a, "made-in-a"));
  CHECK_ERR(w.statErr(b, "made-in-a"), ENOENT);
  changed.clear();
  REQUIRE_OK(w.ov->activate("b", &changed));
  CHECK(std::find(changed.begin(), changed.end(), "made-in-a") != changed.end());
  CHECK_ERR(w.statErr(nullptr, "made-in-a"), ENOENT);
  REQUIRE_OK(w.ov->activate("", &changed));
  CHECK_EQ(w.ov->activeLayer(), "");
  CHECK_ERR(w.ov->activate("missing", &changed), ENXIO);
  // Pinned layers cannot be dropped; unpinned, inactive ones can.
  CHECK_ERR(w.ov->dropLayer("a"), EBUSY);
  REQUIRE_OK(w.ov->createLayer("c"));
  CHECK_OK(w.ov->dropLayer("c"));
  CHECK_ERR(w.ov->dropLayer("c"), ENXIO);
  CHECK_ERR(w.ov->createLayer(""), EINVAL);
}

TEST(reads_of_unchanged_paths_follow_the_folder_live) {
  World w(project);
  REQUIRE_OK(w.create(w.a, "elsewhere", "x"));
  w.lower->modify("README.md", "version two\n");
  CHECK_EQ(w.stat(w.a, "README.md").size, uint64_t{12});
  CHECK_EQ(w.read(w.a, "README.md"), "version two\n");
  w.lower->remove("src/lib");
  CHECK_EQ(w.names(w.a, "src"), (Names{"a.js", "b.js"}));
  CHECK_ERR(w.statErr(w.a, "src/lib/util.js"), ENOENT);
  std::string target;
  REQUIRE_OK(w.ov->readlink(w.a, "link", &target));
  CHECK_EQ(target, "src/a.js");
}

TEST(api_put_read_remove_and_changes) {
  World w(project);
  REQUIRE_OK(w.ov->putFile("a", "new/dir/file.txt", "data", 0600, kWho));
  std::string out;
  REQUIRE_OK(w.ov->readFile("a", "new/dir/file.txt", &out));
  CHECK_EQ(out, "data");
  CHECK_EQ(w.stat(w.a, "new/dir/file.txt").perm, 0600u);
  // readFile appends to `out` (it does not clear it): use a fresh string.
  std::string folderFile;
  REQUIRE_OK(w.ov->readFile("a", "src/a.js", &folderFile));
  CHECK_EQ(folderFile, "a\n");
  REQUIRE_OK(w.ov->putFile("a", "README.md", "replaced", 0644, kWho));
  REQUIRE_OK(w.ov->remove("a", "src"));
  CHECK_ERR(w.statErr(w.a, "src/a.js"), ENOENT);
  CHECK_EQ(w.changes("a"),
           (Names{"added new", "added new/dir", "added new/dir/file.txt", "deleted src",
                  "modified README.md"}));
  CHECK_ERR(w.ov->readFile("a", "src/a.js", &out), ENOENT);
  CHECK_ERR(w.ov->putFile("missing", "x", "y", 0644, kWho), ENXIO);
  CHECK_ERR(w.ov->putFile("a", "link/x", "y", 0644, kWho), ELOOP);
  CHECK(!w.lower->exists("new"));
}

TEST(xattrs_copy_up_into_the_layer) {
  World w([](fake::FakeLower& f) {
    f.addFile("f", "x");
    f.setXattr("f", "user.origin", "folder");
  });
  std::string v;
  REQUIRE_OK(w.ov->getxattr(w.a, "f", "user.origin", &v));
  CHECK_EQ(v, "folder");
  REQUIRE_OK(w.ov->setxattr(w.a, "f", "user.agent", "a", 0));
  std::vector<std::string> names;
  REQUIRE_OK(w.ov->listxattr(w.a, "f", &names));
  std::sort(names.begin(), names.end());
  CHECK_EQ(names, (Names{"user.agent", "user.origin"}));
  CHECK_ERR(w.ov->setxattr(w.a, "f", "user.agent", "b", 1), EEXIST);
  // No POSIX ACLs: refused as a file system without them does (cp -a then sets the mode).
  CHECK_ERR(w.ov->setxattr(w.a, "f", "system.posix_acl_access", "x", 0), EOPNOTSUPP);
  CHECK_ERR(w.ov->setxattr(w.a, "f", "system.posix_acl_default", "x", 0), EOPNOTSUPP);
  CHECK_ERR(w.ov->setxattr(w.a, "f", "user.none", "b", 2), ENODATA);
  CHECK_ERR(w.ov->removexattr(w.a, "f", "user.none"), ENODATA);
  REQUIRE_OK(w.ov->removexattr(w.a, "f", "user.origin"));
  CHECK_ERR(w.ov->getxattr(w.a, "f", "user.origin", &v), ENODATA);
  // The folder keeps its own, and another layer sees only those.
  std::vector<std::string> other;
  REQUIRE_OK(w.ov->listxattr(w.layer("b"), "f", &other));
  CHECK_EQ(other, (Names{"user.origin"}));
}

// Windows' metadata with no POSIX meaning (attributes such as HIDDEN and SYSTEM, a creation
// time) is kept per layer object: set by setattr, shown by getattr, carried by renames, hard
// links and clones, copied up from the folder's file with the rest of its attributes, and
// never mixed into what POSIX sees (perm stays the mode; READONLY is not one of these bits).
TEST(windows_attributes_and_creation_time_are_kept_per_layer_object) {
  World w(project);
  Attr at;
  Handle* h = nullptr;
  REQUIRE_OK(w.ov->create(w.a, "new.txt", 0644, OpenIntent{true}, kWho, &h, &at));
  w.ov->release(h);
  CHECK_EQ(at.winAttrs, uint32_t{0});
  CHECK(!at.hasBirth);
  Attr v, out;
  v.winAttrs = kWinAttrHidden | kWinAttrSystem | 0x1 /* READONLY */ | 0x10 /* DIRECTORY */;
  v.birth = Timespec{1000000000, 123456700};
  REQUIRE_OK(w.ov->setattr(w.a, "new.txt", nullptr, kSetWinAttrs | kSetBirth, v, &out));
  CHECK_EQ(out.winAttrs, kWinAttrHidden | kWinAttrSystem);
  Attr st = w.stat(w.a, "new.txt");
  CHECK_EQ(st.winAttrs, kWinAttrHidden | kWinAttrSystem);
  CHECK(st.hasBirth);
  CHECK_EQ(st.birth.sec, int64_t{1000000000});
  CHECK_EQ(st.birth.nsec, int64_t{123456700});
  CHECK_EQ(st.perm, uint32_t{0644});
  // Other changes leave them as they are.
  Attr t;
  t.mtime = Timespec{5, 0};
  t.perm = 0600;
  REQUIRE_OK(w.ov->setattr(w.a, "new.txt", nullptr, kSetMtime | kSetMode, t, &out));
  CHECK_EQ(out.winAttrs, kWinAttrHidden | kWinAttrSystem);
  CHECK_EQ(out.birth.sec, int64_t{1000000000});
  // A rename, a hard link and a clone carry them.
  REQUIRE_OK(w.ov->rename(w.a, "new.txt", "src/moved.txt", 0));
  CHECK_EQ(w.stat(w.a, "src/moved.txt").winAttrs, kWinAttrHidden | kWinAttrSystem);
  CHECK_EQ(w.stat(w.a, "src/moved.txt").birth.sec, int64_t{1000000000});
  REQUIRE_OK(w.ov->link(w.a, "src/moved.txt", "linked.txt", &at));
  CHECK_EQ(w.stat(w.a, "linked.txt").winAttrs, kWinAttrHidden | kWinAttrSystem);
  REQUIRE_OK(w.ov->cloneLayer("a", "c"));
  Attr cl = w.stat(w.layer("c"), "src/moved.txt");
  CHECK_EQ(cl.winAttrs, kWinAttrHidden | kWinAttrSystem);
  CHECK(cl.hasBirth);
  CHECK_EQ(cl.birth.nsec, int64_t{123456700});
  // Cleared again; a directory keeps them too.
  v.winAttrs = 0;
  REQUIRE_OK(w.ov->setattr(w.a, "src/moved.txt", nullptr, kSetWinAttrs, v, &out));
  CHECK_EQ(w.stat(w.a, "linked.txt").winAttrs, uint32_t{0});
  CHECK_EQ(w.stat(w.layer("c"), "src/moved.txt").winAttrs, kWinAttrHidden | kWinAttrSystem);
  REQUIRE_OK(w.ov->mkdir(w.a, "d", 0755, kWho, &at));
  v.winAttrs = kWinAttrHidden;
  REQUIRE_OK(w.ov->setattr(w.a, "d", nullptr, kSetWinAttrs, v, &out));
  REQUIRE_OK(w.ov->rename(w.a, "d", "d2", 0));
  CHECK_EQ(w.stat(w.a, "d2").winAttrs, kWinAttrHidden);
}

TEST(a_folder_files_windows_attributes_and_creation_time_are_copied_up) {
  const Timespec born{1200000000, 500};
  World w([&](fake::FakeLower& f) {
    f.addFile("hid.txt", "hidden in A");
    f.setWinMeta("hid.txt", kWinAttrHidden | kWinAttrArchive, &born);
    f.addFile("other.txt", "plain");
    f.addDir("sys");
    f.setWinMeta("sys", kWinAttrSystem, &born);
    f.addFile("sys/x.txt", "x");
  });
  // Seen through before any change...
  Attr st = w.stat(w.a, "hid.txt");
  CHECK_EQ(st.winAttrs, kWinAttrHidden | kWinAttrArchive);
  CHECK(st.hasBirth);
  // ...and kept by the copy-up of a write, after which A's own changes no longer show.
  OpenIntent wr;
  wr.write = true;
  Handle* h = nullptr;
  Attr at;
  REQUIRE_OK(w.ov->open(w.a, "hid.txt", wr, &h, &at));
  REQUIRE_OK(w.ov->write(h, "HID", 3, 0));
  w.ov->release(h);
  w.lower->setWinMeta("hid.txt", 0, nullptr);
  st = w.stat(w.a, "hid.txt");
  CHECK_EQ(st.winAttrs, kWinAttrHidden | kWinAttrArchive);
  CHECK(st.hasBirth);
  CHECK_EQ(st.birth.sec, born.sec);
  CHECK_EQ(st.birth.nsec, born.nsec);
  // A mode change takes the attributes over too (no content copied), and so does a directory
  // of A renamed (its redirect keeps merging A's directory).
  w.lower->setWinMeta("other.txt", kWinAttrSystem, &born);
  Attr v, out;
  v.perm = 0600;
  REQUIRE_OK(w.ov->setattr(w.a, "other.txt", nullptr, kSetMode, v, &out));
  w.lower->setWinMeta("other.txt", 0, nullptr);
  CHECK_EQ(w.stat(w.a, "other.txt").winAttrs, kWinAttrSystem);
  CHECK(w.stat(w.a, "other.txt").hasBirth);
  REQUIRE_OK(w.ov->rename(w.a, "sys", "sys2", 0));
  CHECK_EQ(w.stat(w.a, "sys2").winAttrs, kWinAttrSystem);
  CHECK_EQ(w.stat(w.a, "sys2").birth.sec, born.sec);
  // Another layer still sees A's file as A has it now.
  CHECK_EQ(w.stat(w.layer("b"), "hid.txt").winAttrs, uint32_t{0});
}

TEST(symlinks_in_the_layer_and_the_folder) {
  World w(project);
  Attr at;
  REQUIRE_OK(w.ov->symlink(w.a, "../README.md", "src/up", kWho, &at));
  CHECK(at.type == FileType::Symlink);
  std::string t;
  REQUIRE_OK(w.ov->readlink(w.a, "src/up", &t));
  CHECK_EQ(t, "../README.md");
  CHECK_EQ(w.stat(w.a, "src/up").size, uint64_t{12});
  // A folder symlink renamed in the layer keeps its target.
  REQUIRE_OK(w.ov->rename(w.a, "link", "link2", 0));
  REQUIRE_OK(w.ov->readlink(w.a, "link2", &t));
  CHECK_EQ(t, "src/a.js");
}

TEST(parallel_writes_to_different_files_all_land) {
  World w(project);
  constexpr int kThreads = 4, kWrites = 200;
  for (int t = 0; t < kThreads; ++t) REQUIRE_OK(w.create(w.a, "f" + std::to_string(t), ""));
  std::vector<std::thread> threads;
  std::vector<int> errors(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Handle* h = nullptr;
      Attr at;
      OpenIntent wr;
      wr.write = true;
      if ((errors[t] = w.ov->open(w.a, "f" + std::to_string(t), wr, &h, &at))) return;
      for (int i = 0; i < kWrites && !errors[t]; ++i) {
        char c = static_cast<char>('a' + t);
        errors[t] = w.ov->write(h, &c, 1, static_cast<uint64_t>(i));
      }
      w.ov->release(h);
    });
  }
  // A reader and a layer switch at the same time.
  std::vector<std::string> changed;
  for (int i = 0; i < 50; ++i) {
    w.ov->activate(i % 2 ? "a" : "", &changed);
    w.names(w.a, "");
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK_ERR(errors[t], 0);
    CHECK_EQ(w.read(w.a, "f" + std::to_string(t)), std::string(kWrites, static_cast<char>('a' + t)));
  }
}

TEST(a_listing_for_a_walk_hints_the_folders_subdirectories_to_read_ahead) {
  World w([](fake::FakeLower& f) {
    project(f);
    f.addDir("src/gone");
    f.addDir("src/lib2");
    f.addDir("pkg");
    f.addDir("pkg/a");
    f.addDir("pkg/b");
    f.addFile("pkg/index.js", "x\n");
  });
  const std::string before = w.lower->snapshot();
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "src/new", 0755, kWho, &at));  // the layer's own: nothing in the folder
  REQUIRE_OK(w.ov->rmdir(w.a, "src/gone"));                   // deleted in the layer
  REQUIRE_OK(w.ov->rename(w.a, "pkg", "renamed", 0));          // the folder's directory, renamed
  DirStream d;
  REQUIRE_OK(w.ov->list(w.a, "src", &d));
  CHECK(w.lower->hints().empty());  // an ordinary listing hints nothing
  REQUIRE_OK(w.ov->list(w.a, "src", &d, true));
  REQUIRE_OK(w.ov->list(w.a, "renamed", &d, true));
  REQUIRE_OK(w.ov->list(w.a, "src/new", &d, true));  // the layer's alone
  REQUIRE_OK(w.ov->list(w.a, "empty", &d, true));    // no subdirectories
  auto hints = w.lower->hints();
  REQUIRE_EQ(hints.size(), size_t{2});
  for (auto& h : hints) std::sort(h.begin(), h.end());
  // The folder's paths: a renamed directory's subdirectories where the folder has them.
  CHECK_EQ(hints[0], (Names{"src/lib", "src/lib2"}));
  CHECK_EQ(hints[1], (Names{"pkg/a", "pkg/b"}));
  CHECK_EQ(w.lower->snapshot(), before);
}

// A create asks the folder once whether the name is free (resolve), not again when it places
// the new file (create+write of many small files pays for every stat of A, issue 33).
TEST(creating_a_file_asks_the_folder_once) {
  World w(project);
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "out", 0755, kWho, &at));
  const int before = w.lower->statCalls.load();
  Handle* h = nullptr;
  OpenIntent intent;
  intent.write = true;
  REQUIRE_OK(w.ov->create(w.a, "out/f1.txt", 0644, intent, kWho, &h, &at));
  w.ov->release(h);
  CHECK_EQ(w.lower->statCalls.load() - before, 1);
  // Where the folder has the name, the create finds it (an existing file, opened).
  REQUIRE_OK(w.ov->create(w.a, "src/a.js", 0644, intent, kWho, &h, &at));
  w.ov->release(h);
  CHECK_EQ(w.read(w.a, "src/a.js"), std::string("a\n"));
  intent.exclusive = true;
  CHECK_ERR(w.ov->create(w.a, "src/b.js", 0644, intent, kWho, &h, &at), EEXIST);
}

// moveLayer: the destination holds the source's changes in place of its own, the source none.
TEST(move_layer_hands_every_change_over_and_empties_the_source) {
  World w(project);
  Layer* b = w.layer("b");
  REQUIRE_OK(w.create(w.a, "new.txt", "from a\n"));
  REQUIRE_OK(w.ov->unlink(w.a, "README.md"));
  REQUIRE_OK(w.create(b, "mine.txt", "from b\n"));
  std::vector<std::string> paths;
  REQUIRE_OK(w.ov->moveLayer("a", "b", &paths));
  std::sort(paths.begin(), paths.end());
  CHECK_EQ(paths, (Names{"README.md", "mine.txt", "new.txt"}));
  CHECK_EQ(w.read(b, "new.txt"), std::string("from a\n"));
  CHECK_EQ(w.statErr(b, "README.md"), ENOENT);
  CHECK_EQ(w.statErr(b, "mine.txt"), ENOENT);
  CHECK_EQ(w.changes("a"), Names{});
  CHECK_EQ(w.read(w.a, "README.md"), std::string("# readme\n"));
  CHECK_ERR(w.ov->moveLayer("a", "a", &paths), EINVAL);
  CHECK_ERR(w.ov->moveLayer("a", "nobody", &paths), ENXIO);
}

TEST(merges_folder_dir_at_says_where_a_watch_on_the_same_path_covers_what_shows) {
  World w(project);
  Attr at;
  CHECK(w.ov->mergesFolderDirAt(w.a, ""));
  CHECK(w.ov->mergesFolderDirAt(w.a, "src/lib"));
  CHECK(!w.ov->mergesFolderDirAt(w.a, "src/a.js"));  // not a directory
  CHECK(!w.ov->mergesFolderDirAt(w.a, "nothing"));
  REQUIRE_OK(w.ov->mkdir(w.a, "dist", 0755, kWho, &at));
  // The layer's, and A has none: it would merge one made there (the watch says whether A has it).
  CHECK(w.ov->mergesFolderDirAt(w.a, "dist"));
  REQUIRE_OK(w.create(w.a, "src/new.js", "new\n"));
  CHECK(w.ov->mergesFolderDirAt(w.a, "src"));  // a layer node that still merges src
  REQUIRE_OK(w.ov->rename(w.a, "src", "moved", 0));
  CHECK(!w.ov->mergesFolderDirAt(w.a, "moved"));      // reads src
  CHECK(!w.ov->mergesFolderDirAt(w.a, "moved/lib"));  // reads src/lib
  CHECK(!w.ov->mergesFolderDirAt(w.a, "src"));        // gone
  REQUIRE_OK(w.ov->rmdir(w.a, "empty"));
  REQUIRE_OK(w.ov->mkdir(w.a, "empty", 0755, kWho, &at));
  CHECK(!w.ov->mergesFolderDirAt(w.a, "empty"));  // opaque
  Layer* b = w.layer("b");
  CHECK(w.ov->mergesFolderDirAt(b, "src"));  // another layer: the folder's
}
