// Unit tests of masked paths (issue #32): the glob matcher (PathMask, mask.h) and the overlay's
// lookups, listings, creations, renames and changes of a layer with a mask, on the in-memory
// folder (fake_lower.h). Standard library only (builds on Windows).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "../../../native/core/mask.h"
#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

const Caller kWho{1000, 1000};
using Names = std::vector<std::string>;

bool hides(const std::vector<std::string>& globs, const std::string& path, bool ic = false) {
  return PathMask(globs, ic).hides(path);
}

// One overlay on a fake project with a secret or two; layer "a" masked, layer "b" not.
struct MaskWorld {
  std::unique_ptr<Overlay> ov;
  Layer* a = nullptr;
  Layer* b = nullptr;

  explicit MaskWorld(const std::vector<std::string>& globs, NameMatch names = NameMatch::Exact) {
    auto lo = std::make_unique<fake::FakeLower>();
    lo->addFile(".env", "SECRET=1\n");
    lo->addFile(".env.local", "SECRET=2\n");
    lo->addFile("README.md", "# readme\n");
    lo->addDir("web");
    lo->addFile("web/.env", "SECRET=3\n");
    lo->addFile("web/app.js", "app\n");
    lo->addDir("config");
    lo->addFile("config/secrets.json", "{\"SECRET\":4}\n");
    lo->addFile("config/app.json", "{}\n");
    lo->addDir("keys");
    lo->addFile("keys/id.pem", "PEM\n");
    ov = std::make_unique<Overlay>(std::move(lo), nullptr, UINT64_MAX, names);
    if (ov->createLayer("a") || ov->createLayer("b")) throw unit::Abort{};
    if (ov->setMask("a", globs)) throw unit::Abort{};
    a = ov->pin("a");
    b = ov->pin("b");
    if (!a || !b) throw unit::Abort{};
  }
  ~MaskWorld() {
    ov->unpin(a);
    ov->unpin(b);
  }
  MaskWorld(const MaskWorld&) = delete;
  MaskWorld& operator=(const MaskWorld&) = delete;

  int stat(Layer* l, const std::string& path) {
    Attr at;
    return ov->getattr(l, path, &at);
  }
  Names names(Layer* l, const std::string& dir) {
    std::vector<DirEntry> ls;
    if (int e = ov->readdir(l, dir, &ls)) return {"<" + unit::errnoName(e) + ">"};
    Names out;
    for (auto& d : ls) out.push_back(d.name);
    std::sort(out.begin(), out.end());
    return out;
  }
  int create(Layer* l, const std::string& path) {
    Handle* h = nullptr;
    Attr at;
    OpenIntent intent;
    intent.write = true;
    int e = ov->create(l, path, 0644, intent, kWho, &h, &at);
    if (!e) ov->release(h);
    return e;
  }
  int open(Layer* l, const std::string& path) {
    Handle* h = nullptr;
    Attr at;
    int e = ov->open(l, path, OpenIntent{}, &h, &at);
    if (!e) ov->release(h);
    return e;
  }
  Names changes(const std::string& layer) {
    std::vector<Change> cs;
    if (ov->changes(layer, &cs) != 0) return {"<changes failed>"};
    Names out;
    for (auto& c : cs) out.push_back(c.path);
    std::sort(out.begin(), out.end());
    return out;
  }
};

const std::vector<std::string> kGlobs = {".env", ".env.*", "*.pem", "config/secrets.json"};

}  // namespace

TEST(mask_glob_names) {
  CHECK(PathMask::matchName("*.pem", "id.pem", false));
  CHECK(!PathMask::matchName("*.pem", "id.pem.bak", false));
  CHECK(PathMask::matchName(".env*", ".env", false));
  CHECK(PathMask::matchName(".env*", ".env.local", false));
  CHECK(!PathMask::matchName(".env*", "x.env", false));
  CHECK(PathMask::matchName("id_?sa*", "id_rsa.pub", false));
  CHECK(PathMask::matchName("[abc]x", "bx", false));
  CHECK(!PathMask::matchName("[abc]x", "dx", false));
  CHECK(PathMask::matchName("[!abc]x", "dx", false));
  CHECK(PathMask::matchName("[^abc]x", "dx", false));
  CHECK(PathMask::matchName("[a-c]x", "cx", false));
  CHECK(!PathMask::matchName("[a-c]x", "Cx", false));
  CHECK(PathMask::matchName("[a-c]x", "CX", true));
  CHECK(PathMask::matchName("[]]", "]", false));
  CHECK(PathMask::matchName("\\*", "*", false));
  CHECK(!PathMask::matchName("\\*", "a", false));
  CHECK(PathMask::matchName("[x", "[x", false));  // unclosed: a plain '['
  CHECK(PathMask::matchName("*a*b*c", "xxaybzzc", false));
  CHECK(!PathMask::matchName("*a*b*c", "xxaybzzcd", false));
  CHECK(PathMask::matchName("*", "", false));
  CHECK(!PathMask::matchName("?", "", false));
  CHECK(PathMask::matchName(".ENV", ".env", true));
  CHECK(!PathMask::matchName(".ENV", ".env", false));
}

TEST(mask_glob_paths) {
  // Names match at any depth; a matching ancestor hides all below.
  CHECK(hides({".env"}, ".env"));
  CHECK(hides({".env"}, "a/b/.env"));
  CHECK(hides({".aws"}, ".aws/credentials"));
  CHECK(!hides({".env"}, "env"));
  CHECK(!hides({".env"}, ""));
  // Anchored globs (a "/" inside or in front) match from the root.
  CHECK(hides({"config/secrets.json"}, "config/secrets.json"));
  CHECK(!hides({"config/secrets.json"}, "x/config/secrets.json"));
  CHECK(hides({"/.npmrc"}, ".npmrc"));
  CHECK(!hides({"/.npmrc"}, "sub/.npmrc"));
  // ** spans any number of components; "a/**" hides what is inside a, not a.
  CHECK(hides({".aws/**"}, ".aws/credentials"));
  CHECK(!hides({".aws/**"}, ".aws"));
  CHECK(hides({"a/**/b"}, "a/b"));
  CHECK(hides({"a/**/b"}, "a/x/y/b"));
  CHECK(hides({"a/**/b"}, "a/x/y/b/c"));
  CHECK(!hides({"a/**/b"}, "a/x/y/c"));
  CHECK(hides({"**/secret"}, "secret"));
  CHECK(hides({"**/secret"}, "p/q/secret"));
  CHECK(hides({"src/*.key"}, "src/a.key"));
  CHECK(!hides({"src/*.key"}, "src/x/a.key"));  // '*' stays within one name
  CHECK(hides({"dir/"}, "dir/file"));           // a trailing '/' is ignored
  CHECK(!hides({"", "/"}, "anything"));          // empty globs mask nothing
  CHECK(hides({"KEYS/*.PEM"}, "keys/id.pem", true));
  CHECK(!hides({"KEYS/*.PEM"}, "keys/id.pem", false));
}

TEST(mask_lookup_listing_and_open) {
  MaskWorld w(kGlobs);
  CHECK_ERR(w.stat(w.a, ".env"), ENOENT);
  CHECK_ERR(w.stat(w.a, ".env.local"), ENOENT);
  CHECK_ERR(w.stat(w.a, "web/.env"), ENOENT);
  CHECK_ERR(w.stat(w.a, "keys/id.pem"), ENOENT);
  CHECK_ERR(w.stat(w.a, "config/secrets.json"), ENOENT);
  CHECK_ERR(w.open(w.a, ".env"), ENOENT);
  CHECK_OK(w.stat(w.a, "README.md"));
  CHECK_EQ(w.names(w.a, ""), (Names{"README.md", "config", "keys", "web"}));
  CHECK_EQ(w.names(w.a, "web"), (Names{"app.js"}));
  CHECK_EQ(w.names(w.a, "config"), (Names{"app.json"}));
  CHECK_EQ(w.names(w.a, "keys"), (Names{}));
  std::string data;
  CHECK_ERR(w.ov->readFile("a", ".env", &data), ENOENT);
  CHECK_ERR(w.ov->readFile("a", "config/secrets.json", &data), ENOENT);
  // Layer b has no mask: it sees everything.
  CHECK_OK(w.stat(w.b, ".env"));
  CHECK_EQ(w.names(w.b, "web"), (Names{".env", "app.js"}));
  REQUIRE_OK(w.ov->readFile("b", ".env", &data));
  CHECK_EQ(data, std::string("SECRET=1\n"));
  std::vector<std::string> globs;
  REQUIRE_OK(w.ov->mask("a", &globs));
  CHECK_EQ(globs, kGlobs);
  // Unmasked again, the folder's file shows through.
  REQUIRE_OK(w.ov->setMask("a", {}));
  CHECK_OK(w.stat(w.a, ".env"));
  CHECK_ERR(w.ov->setMask("nobody", {".env"}), ENXIO);
}

TEST(mask_refuses_creation_and_removal) {
  MaskWorld w(kGlobs);
  // Creating a masked name is refused, whatever the way.
  CHECK_ERR(w.create(w.a, ".env"), EACCES);
  CHECK_ERR(w.create(w.a, "web/.env"), EACCES);
  CHECK_ERR(w.create(w.a, "new.pem"), EACCES);
  Attr at;
  CHECK_ERR(w.ov->mkdir(w.a, ".env.d", 0755, kWho, &at), EACCES);
  CHECK_ERR(w.ov->symlink(w.a, "README.md", ".env", kWho, &at), EACCES);
  CHECK_ERR(w.ov->link(w.a, "README.md", ".env", &at), EACCES);
  CHECK_ERR(w.ov->rename(w.a, "README.md", ".env", 0), EACCES);
  CHECK_ERR(w.ov->putFile("a", ".env", "mine", 0644, kWho), EACCES);
  // What the mask hides cannot be removed or moved (it is not there)...
  CHECK_ERR(w.ov->unlink(w.a, ".env"), ENOENT);
  CHECK_ERR(w.ov->rename(w.a, ".env", "leak.txt", 0), ENOENT);
  CHECK_ERR(w.ov->link(w.a, "web/.env", "leak.txt", &at), ENOENT);
  // ...nor deleted with its directory: a directory holding only masked names is not empty.
  CHECK_ERR(w.ov->rmdir(w.a, "keys"), ENOTEMPTY);
  // Nor through the API's removal of a whole tree.
  CHECK_ERR(w.ov->remove("a", "keys"), EACCES);
  CHECK_ERR(w.ov->remove("a", "web"), EACCES);
  // None of this changed the layer.
  CHECK_EQ(w.changes("a"), (Names{}));
  // Nor moved away, or replaced by another directory: applied, either would delete the secret
  // with the old name.
  CHECK_ERR(w.ov->rename(w.a, "config", "settings", 0), EACCES);
  REQUIRE_OK(w.ov->mkdir(w.a, "other", 0755, kWho, &at));
  CHECK_ERR(w.ov->rename(w.a, "other", "config", 0), EACCES);
  CHECK_ERR(w.ov->rename(w.a, "other", "config", kRenameExchange), EACCES);
  CHECK_ERR(w.stat(w.a, "settings"), ENOENT);
  CHECK_OK(w.stat(w.a, "config/app.json"));
  // A directory with nothing masked under it moves as ever.
  REQUIRE_OK(w.ov->rename(w.a, "other", "other2", 0));
  // Layer b may write there.
  CHECK_OK(w.create(w.b, ".env"));
}

TEST(mask_hides_the_layers_own_entries_and_changes) {
  MaskWorld w({});
  // Written before the mask: hidden once it is set, in lookups, listings and changes.
  REQUIRE_OK(w.ov->putFile("a", "notes.key", "mine", 0644, kWho));
  REQUIRE_OK(w.ov->putFile("a", "ok.txt", "fine", 0644, kWho));
  CHECK_EQ(w.changes("a"), (Names{"notes.key", "ok.txt"}));
  REQUIRE_OK(w.ov->setMask("a", {"*.key"}));
  CHECK_ERR(w.stat(w.a, "notes.key"), ENOENT);
  CHECK_EQ(w.changes("a"), (Names{"ok.txt"}));
  Names root = w.names(w.a, "");
  CHECK(std::find(root.begin(), root.end(), "notes.key") == root.end());
  CHECK(std::find(root.begin(), root.end(), "ok.txt") != root.end());
}

TEST(mask_ignoring_case) {
  MaskWorld w({".ENV", "Keys/*.PEM"}, NameMatch::IgnoreCase);
  CHECK_ERR(w.stat(w.a, ".env"), ENOENT);
  CHECK_ERR(w.stat(w.a, ".Env"), ENOENT);
  CHECK_ERR(w.stat(w.a, "KEYS/ID.pem"), ENOENT);
  CHECK_EQ(w.names(w.a, "keys"), (Names{}));
  CHECK_ERR(w.create(w.a, ".eNv"), EACCES);
}

TEST(mask_goes_with_a_clone) {
  MaskWorld w(kGlobs);
  REQUIRE_OK(w.ov->cloneLayer("a", "a2"));
  std::string data;
  CHECK_ERR(w.ov->readFile("a2", ".env", &data), ENOENT);
  std::vector<std::string> globs;
  REQUIRE_OK(w.ov->mask("a2", &globs));
  CHECK_EQ(globs, kGlobs);
}
