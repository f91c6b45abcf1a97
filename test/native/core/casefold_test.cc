// Unit tests of case-insensitive names (Overlay built with NameMatch::IgnoreCase, overlay.h) on
// the in-memory folder (fake_lower.h): case-sensitive like a Linux folder, or, with
// FakeLower::ignoreCase, case-insensitive like NTFS. And the default (exact names) unchanged.
// Standard library only (builds on Windows).
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

const Caller kWho{1000, 1000};
using Names = std::vector<std::string>;

// One overlay on a fake folder with layer "a" created and pinned.
struct CaseWorld {
  fake::FakeLower* lower = nullptr;
  std::unique_ptr<Overlay> ov;
  Layer* a = nullptr;

  CaseWorld(const std::function<void(fake::FakeLower&)>& build, NameMatch names,
            bool folderIgnoresCase = false) {
    auto lo = std::make_unique<fake::FakeLower>();
    lower = lo.get();
    lo->ignoreCase = folderIgnoresCase;
    if (build) build(*lo);
    ov = std::make_unique<Overlay>(std::move(lo), nullptr, UINT64_MAX, names);
    if (ov->createLayer("a") != 0) throw unit::Abort{};
    a = ov->pin("a");
    if (!a) throw unit::Abort{};
  }
  ~CaseWorld() { ov->unpin(a); }
  CaseWorld(const CaseWorld&) = delete;
  CaseWorld& operator=(const CaseWorld&) = delete;

  std::string read(const std::string& path) {
    Handle* h = nullptr;
    Attr at;
    int e = ov->open(a, path, OpenIntent{}, &h, &at);
    if (e) return "<" + unit::errnoName(e) + ">";
    std::string out;
    char buf[5];
    for (uint64_t off = 0;;) {
      size_t got = 0;
      e = ov->read(h, buf, sizeof buf, off, &got);
      if (e || got == 0) break;
      out.append(buf, got);
      off += got;
    }
    ov->release(h);
    return e ? "<" + unit::errnoName(e) + ">" : out;
  }

  // Opens `path` for writing (creating it when `create`), truncates, writes `data`.
  int write(const std::string& path, const std::string& data, bool create = false,
            bool exclusive = false) {
    Handle* h = nullptr;
    Attr at;
    OpenIntent intent;
    intent.write = true;
    intent.truncate = true;
    intent.exclusive = exclusive;
    int e = create ? ov->create(a, path, 0644, intent, kWho, &h, &at)
                   : ov->open(a, path, intent, &h, &at);
    if (e) return e;
    e = ov->write(h, data.data(), data.size(), 0);
    ov->release(h);
    return e;
  }

  Names names(const std::string& dir) {
    std::vector<DirEntry> ls;
    if (int e = ov->readdir(a, dir, &ls)) return {"<" + unit::errnoName(e) + ">"};
    Names out;
    for (auto& d : ls) out.push_back(d.name);
    std::sort(out.begin(), out.end());
    return out;
  }

  int statErr(const std::string& path, Attr* out = nullptr) {
    Attr at;
    return ov->getattr(a, path, out ? out : &at);
  }
  uint64_t ino(const std::string& path) {
    Attr at;
    return ov->getattr(a, path, &at) == 0 ? at.ino : 0;
  }

  Names changes() {
    std::vector<Change> cs;
    if (ov->changes("a", &cs) != 0) return {"<changes failed>"};
    Names out;
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

void project(fake::FakeLower& f) {
  f.addDir("src");
  f.addFile("src/a.txt", "a\n");
  f.addFile("src/b.js", "b\n");
  f.addDir("src/lib");
  f.addFile("src/lib/util.js", "util\n");
  f.addFile("foo.txt", "foo\n");
  f.addFile("README.md", "# readme\n");
  f.addSymlink("link", "src/a.txt");
  f.addDir("dir");
}

}  // namespace

TEST(casefold_lookups_in_any_case_find_folder_and_layer_entries) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  CHECK(w.ov->ignoresCase());
  const std::string before = w.lower->snapshot();
  CHECK_EQ(w.ino("SRC/A.TXT"), w.ino("src/a.txt"));
  CHECK(w.ino("src/a.txt") != 0);
  CHECK_EQ(w.ino("readme.MD"), w.ino("README.md"));
  CHECK_EQ(w.read("Src/Lib/UTIL.JS"), "util\n");
  CHECK_EQ(w.names("SRC"), (Names{"a.txt", "b.js", "lib"}));
  std::string target;
  REQUIRE_OK(w.ov->readlink(w.a, "LINK", &target));
  CHECK_EQ(target, "src/a.txt");
  CHECK_ERR(w.statErr("nope.txt"), ENOENT);
  CHECK_ERR(w.statErr("SRC/A.TXT/x"), ENOTDIR);
  // Entries of the layer, below a directory the layer holds too.
  REQUIRE_OK(w.write("src/lib/New.js", "new\n", true));
  CHECK_EQ(w.read("SRC/LIB/NEW.JS"), "new\n");
  CHECK_EQ(w.read("src/LIB/util.JS"), "util\n");
  std::string out;
  REQUIRE_OK(w.ov->readFile("a", "sRc/lIb/nEw.Js", &out));
  CHECK_EQ(out, "new\n");
  CHECK_EQ(w.names("src/lib"), (Names{"New.js", "util.js"}));
  CHECK_EQ(w.lower->snapshot(), before);
}

TEST(casefold_writing_another_case_of_a_folder_file_changes_that_file) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  const std::string before = w.lower->snapshot();
  const uint64_t ino = w.ino("foo.txt");
  REQUIRE_OK(w.write("FOO.TXT", "written\n"));
  CHECK_EQ(w.read("foo.txt"), "written\n");
  CHECK_EQ(w.ino("Foo.Txt"), ino);
  CHECK_EQ(w.names(""), (Names{"README.md", "dir", "foo.txt", "link", "src"}));
  CHECK_EQ(w.changes(), (Names{"modified foo.txt"}));
  // The same through create() without O_EXCL, and through the API.
  REQUIRE_OK(w.write("Src/A.TXT", "via create\n", true));
  REQUIRE_OK(w.ov->putFile("a", "readme.md", "via api\n", 0644, kWho));
  CHECK_EQ(w.read("src/a.txt"), "via create\n");
  CHECK_EQ(w.read("README.md"), "via api\n");
  CHECK_EQ(w.names("src"), (Names{"a.txt", "b.js", "lib"}));
  CHECK_EQ(w.changes(), (Names{"modified README.md", "modified foo.txt", "modified src/a.txt"}));
  CHECK_ERR(w.write("FOO.txt", "x", true, true), EEXIST);
  CHECK_EQ(w.lower->snapshot(), before);
}

TEST(casefold_a_new_entry_keeps_its_case_and_is_found_in_any_case) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  REQUIRE_OK(w.write("New.txt", "one\n", true));
  const uint64_t ino = w.ino("New.txt");
  // Opening another case is the same file: no second entry.
  REQUIRE_OK(w.write("NEW.TXT", "two\n", true));
  CHECK_EQ(w.ino("new.txt"), ino);
  CHECK_EQ(w.read("New.txt"), "two\n");
  CHECK_ERR(w.write("new.TXT", "x", true, true), EEXIST);
  CHECK_EQ(w.names(""), (Names{"New.txt", "README.md", "dir", "foo.txt", "link", "src"}));
  // The other creating calls, and a directory the layer creates.
  Attr at;
  CHECK_ERR(w.ov->mkdir(w.a, "NEW.txt", 0755, kWho, &at), EEXIST);
  CHECK_ERR(w.ov->symlink(w.a, "x", "new.TXT", kWho, &at), EEXIST);
  CHECK_ERR(w.ov->link(w.a, "new.txt", "NEW.TXT", &at), EEXIST);
  REQUIRE_OK(w.ov->mkdir(w.a, "Made", 0755, kWho, &at));
  REQUIRE_OK(w.write("MADE/Inner.txt", "in\n", true));
  CHECK_EQ(w.names("made"), (Names{"Inner.txt"}));
  REQUIRE_OK(w.ov->link(w.a, "NEW.txt", "made/Second.txt", &at));
  CHECK_EQ(w.ino("MADE/SECOND.TXT"), ino);
  CHECK_EQ(w.changes(), (Names{"added Made", "added Made/Inner.txt", "added Made/Second.txt",
                               "added New.txt"}));
}

TEST(casefold_deleting_in_another_case_hides_the_folder_entry) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  const std::string before = w.lower->snapshot();
  REQUIRE_OK(w.ov->unlink(w.a, "SRC/A.TXT"));
  CHECK_ERR(w.statErr("src/a.txt"), ENOENT);
  CHECK_ERR(w.statErr("Src/A.txt"), ENOENT);
  CHECK_EQ(w.names("src"), (Names{"b.js", "lib"}));
  CHECK_EQ(w.changes(), (Names{"deleted src/a.txt"}));
  CHECK_ERR(w.ov->unlink(w.a, "src/A.TXT"), ENOENT);
  CHECK_ERR(w.ov->rmdir(w.a, "DIR/"), 0);
  CHECK_ERR(w.statErr("dir"), ENOENT);
  REQUIRE_OK(w.ov->remove("a", "SRC/LIB"));
  CHECK_EQ(w.names("src"), (Names{"b.js"}));
  CHECK_EQ(w.changes(), (Names{"deleted dir", "deleted src/a.txt", "deleted src/lib"}));
  CHECK_EQ(w.lower->snapshot(), before);
}

TEST(casefold_a_deletion_hides_the_folder_entry_in_any_case_in_listings) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  REQUIRE_OK(w.ov->unlink(w.a, "foo.txt"));
  // The developer renames the folder's file to another case: the layer's deletion still
  // covers it, in listings and lookups.
  w.lower->remove("foo.txt");
  w.lower->addFile("FOO.TXT", "renamed in the folder\n");
  CHECK_EQ(w.names(""), (Names{"README.md", "dir", "link", "src"}));
  CHECK_ERR(w.statErr("FOO.TXT"), ENOENT);
  CHECK_ERR(w.statErr("foo.txt"), ENOENT);
  // A layer entry hides the folder's entry of another case too: one entry per name.
  REQUIRE_OK(w.ov->putFile("a", "src/B.JS", "layer\n", 0644, kWho));
  w.lower->addFile("src/B.js", "another case in the folder\n");
  CHECK_EQ(w.names("src"), (Names{"a.txt", "b.js", "lib"}));
}

TEST(casefold_mkdir_of_another_case_of_a_folder_directory_is_eexist) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  Attr at;
  CHECK_ERR(w.ov->mkdir(w.a, "Dir", 0755, kWho, &at), EEXIST);
  CHECK_ERR(w.ov->mkdir(w.a, "SRC", 0755, kWho, &at), EEXIST);
  CHECK_ERR(w.ov->mknod(w.a, "readme.md", FileType::Fifo, 0644, 0, kWho, &at), EEXIST);
  REQUIRE_OK(w.ov->mkdir(w.a, "DIR/Sub", 0755, kWho, &at));
  CHECK_EQ(w.names(""), (Names{"README.md", "dir", "foo.txt", "link", "src"}));
  CHECK_EQ(w.names("Dir"), (Names{"Sub"}));
  CHECK_EQ(w.changes(), (Names{"added dir/Sub"}));
  // Renaming onto another case of an existing entry replaces that entry.
  REQUIRE_OK(w.ov->rename(w.a, "src/b.js", "FOO.TXT", 0));
  CHECK_EQ(w.read("foo.txt"), "b\n");
  CHECK_EQ(w.names(""), (Names{"README.md", "dir", "foo.txt", "link", "src"}));
  CHECK_ERR(w.ov->rename(w.a, "readme.md", "Foo.txt", kRenameNoReplace), EEXIST);
}

TEST(casefold_a_case_only_rename_changes_the_spelling) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  const std::string before = w.lower->snapshot();
  // A file of the folder.
  const uint64_t ino = w.ino("foo.txt");
  REQUIRE_OK(w.ov->rename(w.a, "foo.txt", "Foo.txt", 0));
  CHECK_EQ(w.names(""), (Names{"Foo.txt", "README.md", "dir", "link", "src"}));
  CHECK_EQ(w.ino("FOO.TXT"), ino);
  CHECK_EQ(w.read("foo.txt"), "foo\n");
  // Again (the layer's entry now), and back to the folder's spelling.
  REQUIRE_OK(w.ov->rename(w.a, "FOO.txt", "FOO.TXT", kRenameNoReplace));
  CHECK_EQ(w.names(""), (Names{"FOO.TXT", "README.md", "dir", "link", "src"}));
  // The same name given twice changes nothing, whatever the entry's spelling.
  REQUIRE_OK(w.ov->rename(w.a, "foo.txt", "foo.txt", 0));
  CHECK_EQ(w.names(""), (Names{"FOO.TXT", "README.md", "dir", "link", "src"}));
  REQUIRE_OK(w.ov->rename(w.a, "Foo.Txt", "foo.txt", 0));
  CHECK_EQ(w.names(""), (Names{"README.md", "dir", "foo.txt", "link", "src"}));
  CHECK_EQ(w.read("FOO.TXT"), "foo\n");
  // A directory of the folder keeps showing the folder's directory under its new spelling.
  REQUIRE_OK(w.ov->rename(w.a, "src", "Src", 0));
  CHECK_EQ(w.names(""), (Names{"README.md", "Src", "dir", "foo.txt", "link"}));
  CHECK_EQ(w.names("SRC"), (Names{"a.txt", "b.js", "lib"}));
  CHECK_EQ(w.read("src/LIB/util.js"), "util\n");
  w.lower->addFile("src/late.js", "late\n");
  CHECK_EQ(w.names("src"), (Names{"a.txt", "b.js", "late.js", "lib"}));
  // A file of the layer; exchanging an entry with itself does nothing.
  REQUIRE_OK(w.write("new.txt", "n\n", true));
  REQUIRE_OK(w.ov->rename(w.a, "new.txt", "NEW.txt", 0));
  CHECK_OK(w.ov->rename(w.a, "new.txt", "New.txt", kRenameExchange));
  CHECK_EQ(w.names(""), (Names{"NEW.txt", "README.md", "Src", "dir", "foo.txt", "link"}));
  CHECK_EQ(w.changes(), (Names{"added NEW.txt", "added Src", "deleted src", "metadata foo.txt"}));
  // Reverting the renamed directory brings the folder's back, under its own spelling.
  bool wasDir = false;
  REQUIRE_OK(w.ov->revert("a", "SRC", &wasDir));
  CHECK(wasDir);
  CHECK_EQ(w.names(""), (Names{"NEW.txt", "README.md", "dir", "foo.txt", "link", "src"}));
  w.lower->remove("src/late.js");
  CHECK_EQ(w.lower->snapshot(), before);
}

// A case-only rename reads the folder's old spelling, which an apply may change as it may any
// other origin (on a case-sensitive folder the old name goes and the new one comes; on NTFS the
// entry is rewritten): the renamed entry takes its copy first, as a rename to another name does.
// An entry only reached through another case reads its own folder file and is not copied.
TEST(casefold_a_case_only_rename_keeps_its_own_copy_before_the_folder_changes) {
  for (bool folderIgnoresCase : {false, true}) {
    CaseWorld w(project, NameMatch::IgnoreCase, folderIgnoresCase);
    REQUIRE_OK(w.ov->rename(w.a, "foo.txt", "Foo.txt", 0));
    REQUIRE_OK(w.ov->rename(w.a, "src", "Src", 0));
    REQUIRE_OK(w.write("README.MD", "mine\n"));
    std::vector<std::pair<std::string, std::string>> kept;
    REQUIRE_OK(w.ov->keepMoved({"foo.txt", "src", "README.md"}, &kept));
    Names got;
    for (auto& k : kept) got.push_back(k.first + ":" + k.second);
    std::sort(got.begin(), got.end());
    CHECK_EQ(got, (Names{"a:Foo.txt", "a:Src", "a:Src/a.txt", "a:Src/b.js", "a:Src/lib",
                         "a:Src/lib/util.js"}));
    // The folder's old names go, as an apply of the renames (or another agent's) removes them.
    for (const char* p : {"src/a.txt", "src/b.js", "src/lib/util.js", "src/lib", "src", "foo.txt"})
      w.lower->remove(p);
    CHECK_EQ(w.read("Foo.txt"), "foo\n");
    CHECK_EQ(w.names("Src"), (Names{"a.txt", "b.js", "lib"}));
    CHECK_EQ(w.read("Src/lib/util.js"), "util\n");
    CHECK_EQ(w.read("readme.md"), "mine\n");
  }
}

TEST(casefold_an_entry_created_over_a_deletion_of_another_case_takes_the_new_case) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  REQUIRE_OK(w.ov->unlink(w.a, "foo.txt"));
  REQUIRE_OK(w.write("FOO.TXT", "new\n", true));
  CHECK_EQ(w.names(""), (Names{"FOO.TXT", "README.md", "dir", "link", "src"}));
  CHECK_EQ(w.read("foo.txt"), "new\n");
  // A directory there hides the deleted directory's content.
  REQUIRE_OK(w.ov->rmdir(w.a, "dir"));
  w.lower->addFile("dir/old.txt", "old\n");
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "DIR", 0755, kWho, &at));
  CHECK_EQ(w.names("Dir"), Names{});
  CHECK_EQ(w.names(""), (Names{"DIR", "FOO.TXT", "README.md", "link", "src"}));
  // Renaming onto a deleted name gives the caller's case as well.
  REQUIRE_OK(w.ov->unlink(w.a, "readme.md"));
  REQUIRE_OK(w.ov->rename(w.a, "src/b.js", "ReadMe.MD", 0));
  CHECK_EQ(w.names(""), (Names{"DIR", "FOO.TXT", "ReadMe.MD", "link", "src"}));
  CHECK_EQ(w.read("README.md"), "b\n");
  // Deleting the new entry leaves the name deleted.
  REQUIRE_OK(w.ov->unlink(w.a, "foo.TXT"));
  CHECK_ERR(w.statErr("foo.txt"), ENOENT);
  CHECK_EQ(w.names(""), (Names{"DIR", "ReadMe.MD", "link", "src"}));
}

TEST(casefold_on_a_case_insensitive_folder_the_folder_spelling_is_kept) {
  // As on Windows, where the folder itself finds names in any case (NTFS).
  CaseWorld w(project, NameMatch::IgnoreCase, true);
  const std::string before = w.lower->snapshot();
  const int listings = w.lower->readdirCalls;
  CHECK_EQ(w.read("SRC/LIB/UTIL.JS"), "util\n");
  REQUIRE_OK(w.write("Src/A.TXT", "written\n"));
  CHECK_EQ(w.lower->readdirCalls, listings);  // spellings come from storedName(), not listings
  CHECK_EQ(w.names("src"), (Names{"a.txt", "b.js", "lib"}));
  CHECK_EQ(w.changes(), (Names{"modified src/a.txt"}));
  // A deletion keeps hiding the folder's entry, which the folder would find in any case.
  REQUIRE_OK(w.ov->unlink(w.a, "FOO.txt"));
  CHECK_ERR(w.statErr("foo.TXT"), ENOENT);
  CHECK_EQ(w.names(""), (Names{"README.md", "dir", "link", "src"}));
  REQUIRE_OK(w.write("Foo.Txt", "again\n", true));
  CHECK_EQ(w.names(""), (Names{"Foo.Txt", "README.md", "dir", "link", "src"}));
  CHECK_EQ(w.read("FOO.TXT"), "again\n");
  // A directory made over a deleted one does not merge the folder's.
  REQUIRE_OK(w.ov->unlink(w.a, "src/b.js"));
  REQUIRE_OK(w.ov->remove("a", "Src/Lib"));
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "SRC/LIB", 0755, kWho, &at));
  CHECK_EQ(w.names("src/lib"), Names{});
  CHECK_EQ(w.names("src"), (Names{"LIB", "a.txt"}));
  // Case-only rename of a folder file.
  REQUIRE_OK(w.ov->rename(w.a, "readme.md", "ReadMe.md", 0));
  CHECK_EQ(w.names(""), (Names{"Foo.Txt", "ReadMe.md", "dir", "link", "src"}));
  CHECK_EQ(w.read("README.MD"), "# readme\n");
  CHECK_EQ(w.lower->snapshot(), before);
}

TEST(casefold_lookups_spelt_as_the_folder_spells_them_list_nothing) {
  CaseWorld w(project, NameMatch::IgnoreCase);
  const int listings = w.lower->readdirCalls;
  CHECK_EQ(w.read("src/lib/util.js"), "util\n");
  REQUIRE_OK(w.write("src/b.js", "x", false));
  CHECK_EQ(w.read("src/b.js"), "x");
  CHECK_EQ(w.lower->readdirCalls, listings);
}

TEST(casefold_off_keeps_names_exact) {
  CaseWorld w(project, NameMatch::Exact);
  CHECK(!w.ov->ignoresCase());
  const int listings = w.lower->readdirCalls;
  CHECK_ERR(w.statErr("FOO.txt"), ENOENT);
  CHECK_ERR(w.statErr("SRC/a.txt"), ENOENT);
  REQUIRE_OK(w.write("FOO.txt", "upper\n", true));
  CHECK_EQ(w.read("foo.txt"), "foo\n");
  CHECK_EQ(w.read("FOO.txt"), "upper\n");
  CHECK(w.ino("foo.txt") != w.ino("FOO.txt"));
  CHECK_EQ(w.names(""), (Names{"FOO.txt", "README.md", "dir", "foo.txt", "link", "src"}));
  Attr at;
  REQUIRE_OK(w.ov->mkdir(w.a, "Dir", 0755, kWho, &at));
  REQUIRE_OK(w.ov->unlink(w.a, "foo.txt"));
  CHECK_EQ(w.read("FOO.txt"), "upper\n");
  REQUIRE_OK(w.ov->rename(w.a, "FOO.txt", "Foo.txt", 0));
  CHECK_EQ(w.names(""), (Names{"Dir", "Foo.txt", "README.md", "dir", "link", "src"}));
  CHECK_EQ(w.changes(), (Names{"added Dir", "added Foo.txt", "deleted foo.txt"}));
  // Only the listings asked for: lookups and changes never list the folder.
  CHECK_EQ(w.lower->readdirCalls - listings, 2);
}
