// Copy-up and concurrency in the core:
// - a copy-up is a snapshot: the developer writes a folder file while the core copies it into
//   a layer; the copy is all old bytes or all new bytes, never a mix, and a file that never
//   holds still makes the operation fail (EIO and a log line) instead;
// - every copied file records its base (the folder file's identity and a content hash);
// - a long copy-up stops nobody but the users of that file: other files, other layers and the
//   API go on while it runs;
// - renaming over a file that has another hard link updates that link's ctime.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "../../../native/core/hash.h"
#include "../../../native/core/budget.h"
#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

// Copies "f" into layer "a" by a first write (of nothing) through a write-open while the folder
// rewrites it after the first read of `changesAfter` bytes; returns what the layer holds
// afterwards (or "<errno>").
std::string copyWhileChanging(uint64_t spillThreshold, size_t changesAfter, const std::string& oldData,
                              const std::string& newData, int* openErr) {
  auto lo = std::make_unique<fake::FakeLower>();
  fake::FakeLower* lower = lo.get();
  lower->addFile("f", oldData);
  lower->readChunk = 4;
  Overlay ov(std::move(lo), std::make_unique<fake::FakeSpill>(), spillThreshold);
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  bool changed = false;
  lower->onPread = [&](const std::string& path, uint64_t off) {
    if (!changed && path == "f" && off >= changesAfter) {
      changed = true;
      lower->modify("f", newData);
    }
  };
  Handle* h = nullptr;
  Attr at;
  OpenIntent wr;
  wr.write = true;
  *openErr = ov.open(L, "f", wr, &h, &at);
  std::string out;
  if (*openErr == 0) {
    *openErr = ov.write(h, "", 0, 0);  // the open copied nothing; the first write does
    ov.release(h);
    lower->onPread = nullptr;
    Handle* r = nullptr;
    if (ov.open(L, "f", OpenIntent{}, &r, &at) == 0) {
      char buf[64];
      size_t got = 0;
      for (uint64_t off = 0; ov.read(r, buf, sizeof buf, off, &got) == 0 && got; off += got)
        out.append(buf, got);
      ov.release(r);
    }
  }
  ov.unpin(L);
  return out;
}

}  // namespace

TEST(copy_up_of_a_file_changing_in_memory_is_never_torn) {
  const std::string oldData(40, 'o'), newData(40, 'N');
  int e = 0;
  std::string got = copyWhileChanging(UINT64_MAX, 8, oldData, newData, &e);
  CHECK_OK(e);
  CHECK(got == oldData || got == newData);
}

TEST(copy_up_of_a_file_changing_into_spill_is_never_torn) {
  const std::string oldData(40, 'o'), newData(48, 'N');
  int e = 0;
  std::string got = copyWhileChanging(16, 8, oldData, newData, &e);
  CHECK_OK(e);
  CHECK(got == oldData || got == newData);
}

TEST(renaming_over_a_hard_linked_file_updates_the_other_links_ctime) {
  auto lo = std::make_unique<fake::FakeLower>();
  Overlay ov(std::move(lo));
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  const Caller who{1000, 1000};
  Handle* h = nullptr;
  Attr at;
  OpenIntent wr;
  wr.write = true;
  for (const char* name : {"f", "x"}) {
    REQUIRE_OK(ov.create(L, name, 0644, wr, who, &h, &at));
    ov.release(h);
  }
  REQUIRE_OK(ov.link(L, "f", "g", &at));
  Attr before;
  REQUIRE_OK(ov.getattr(L, "f", &before));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  REQUIRE_OK(ov.rename(L, "x", "g", 0));  // g's inode loses a link: its ctime moves
  Attr after;
  REQUIRE_OK(ov.getattr(L, "f", &after));
  CHECK_EQ(after.nlink, 1u);
  CHECK(after.ctime != before.ctime);
  ov.unpin(L);
}

TEST(a_copy_up_of_a_file_that_never_holds_still_fails_with_EIO_and_a_log_line) {
  auto lo = std::make_unique<fake::FakeLower>();
  fake::FakeLower* lower = lo.get();
  lower->addFile("f", std::string(40, 'o'));
  lower->readChunk = 4;
  Overlay ov(std::move(lo));
  std::vector<std::string> logged;
  ov.setLogger([&](const std::string& line) { logged.push_back(line); });
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  int n = 0;
  lower->onPread = [&](const std::string& path, uint64_t off) {
    if (path == "f" && off > 0) lower->modify("f", std::string(40, static_cast<char>('a' + (n++ % 26))));
  };
  Handle* h = nullptr;
  Attr at;
  OpenIntent wr;
  wr.write = true;
  REQUIRE_OK(ov.open(L, "f", wr, &h, &at));  // a write-open copies nothing
  CHECK_ERR(ov.write(h, "x", 1, 0), EIO);     // its first write copies, and fails
  ov.release(h);
  CHECK_EQ(n, Overlay::kCopyUpTries);
  std::vector<Change> ch;
  REQUIRE_OK(ov.changes("a", &ch));
  CHECK(ch.empty());
  REQUIRE_EQ(logged.size(), size_t{1});
  CHECK(logged[0].find("gave up") != std::string::npos);
  // Nothing half-copied stayed behind: the layer still reads the folder's file, live.
  lower->onPread = nullptr;
  std::string now;
  REQUIRE_OK(ov.readFile("a", "f", &now));
  CHECK_EQ(now, lower->content("f"));
  ov.unpin(L);
}

TEST(a_copied_file_records_its_base_and_changes_reports_it) {
  auto lo = std::make_unique<fake::FakeLower>();
  fake::FakeLower* lower = lo.get();
  const uint64_t fIno = lower->addFile("f", "hello, base\n");
  const uint64_t gIno = lower->addFile("g", "replaced\n");
  Attr fAttr;
  REQUIRE_OK(lower->stat("f", &fAttr));
  Overlay ov(std::move(lo));
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  Handle* h = nullptr;
  Attr at;
  OpenIntent wr;
  wr.write = true;
  REQUIRE_OK(ov.open(L, "f", wr, &h, &at));
  REQUIRE_OK(ov.write(h, "HELLO", 5, 0));
  ov.release(h);
  REQUIRE_OK(ov.putFile("a", "g", "new\n", 0644, Caller{}));
  REQUIRE_OK(ov.putFile("a", "fresh", "made here\n", 0644, Caller{}));
  std::vector<Change> ch;
  REQUIRE_OK(ov.changes("a", &ch));
  REQUIRE_EQ(ch.size(), size_t{3});
  // In path order: f, fresh, g.
  CHECK_EQ(ch[0].path, std::string("f"));
  REQUIRE(ch[0].base.has_value());
  ContentHash expect;
  expect.update("hello, base\n", 12);
  CHECK_EQ(ch[0].base->ino, fIno);
  CHECK_EQ(ch[0].base->size, uint64_t{12});
  CHECK(ch[0].base->mtime == fAttr.mtime);
  CHECK(ch[0].base->ctime == fAttr.ctime);
  CHECK(ch[0].base->hashed);
  CHECK_EQ(ch[0].base->hash, expect.digest());
  CHECK_EQ(ch[1].path, std::string("fresh"));
  CHECK(!ch[1].base.has_value());  // made in the layer: nothing to conflict with
  CHECK_EQ(ch[2].path, std::string("g"));
  REQUIRE(ch[2].base.has_value());  // replaced whole without being read: identity, no hash
  CHECK_EQ(ch[2].base->ino, gIno);
  CHECK(!ch[2].base->hashed);
  ov.unpin(L);
}

TEST(the_content_hash_does_not_depend_on_how_the_bytes_are_split) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>((i * 131) & 0xff);
  ContentHash whole;
  whole.update(data.data(), data.size());
  for (size_t step : {1u, 3u, 7u, 8u, 9u, 64u, 999u}) {
    ContentHash parts;
    for (size_t off = 0; off < data.size(); off += step)
      parts.update(data.data() + off, std::min(step, data.size() - off));
    CHECK_EQ(parts.digest(), whole.digest());
  }
  ContentHash other;
  std::string changed = data;
  changed[500] ^= 1;
  other.update(changed.data(), changed.size());
  CHECK(other.digest() != whole.digest());
  ContentHash empty, zero;
  zero.update("\0", 1);
  CHECK(empty.digest() != zero.digest());
}

// A copy-up that cannot finish (the folder's file is stuck in pread) must leave every other
// file, the other layers and the API free to go on.
TEST(a_long_copy_up_blocks_no_other_file_no_switch_and_no_api_call) {
  auto lo = std::make_unique<fake::FakeLower>();
  fake::FakeLower* lower = lo.get();
  lower->addFile("big", std::string(64, 'b'));
  lower->addFile("other", "other\n");
  lower->addDir("dir");
  Overlay ov(std::move(lo));
  ov.createLayer("a");
  ov.createLayer("b");
  std::vector<std::string> ignored;
  REQUIRE_OK(ov.activate("a", &ignored));
  Layer* L = ov.pin("a");
  std::mutex m;
  std::condition_variable cv;
  bool inCopy = false, release = false;
  lower->onPread = [&](const std::string& path, uint64_t) {
    if (path != "big") return;
    std::unique_lock lock(m);
    inCopy = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  std::thread copier([&] {
    Handle* h = nullptr;
    Attr at;
    OpenIntent wr;
    wr.write = true;
    if (ov.open(L, "big", wr, &h, &at) == 0) {
      ov.write(h, "", 0, 0);  // the first write copies
      ov.release(h);
    }
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return inCopy; });
  }
  // A clone of the same layer has to wait for that one file's content, but must not hold the
  // layer while it waits.
  std::thread cloner([&] { ov.cloneLayer("a", "a2"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto others = std::async(std::launch::async, [&] {
    int bad = 0;
    Attr at;
    bad += ov.getattr(L, "big", &at) != 0;  // the file being copied answers stat too
    bad += ov.getattr(L, "other", &at) != 0;
    std::vector<DirEntry> ls;
    bad += ov.readdir(L, "", &ls) != 0;
    Handle* h = nullptr;
    OpenIntent wr;
    wr.write = true;
    bad += ov.open(L, "other", wr, &h, &at) != 0;
    if (h) {
      bad += ov.write(h, "OTHER", 5, 0) != 0;
      ov.release(h);
    }
    bad += ov.create(L, "dir/new", 0644, wr, Caller{}, &h, &at) != 0;
    if (h) ov.release(h);
    bad += ov.mkdir(L, "made", 0755, Caller{}, &at) != 0;
    bad += ov.rename(L, "made", "moved", 0) != 0;
    std::vector<std::string> paths;
    bad += ov.activate("b", &paths) != 0;
    bad += ov.activate("a", &paths) != 0;
    bad += ov.putFile("a", "api.txt", "api\n", 0644, Caller{}) != 0;
    std::string content;
    bad += ov.readFile("a", "other", &content) != 0;
    std::vector<Change> ch;
    bad += ov.changes("a", &ch) != 0;
    LayerStats st;
    bad += ov.stats("a", &st) != 0;
    bad += ov.cloneLayer("b", "c") != 0;
    return bad;
  });
  const bool finished = others.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  {
    std::lock_guard lock(m);
    release = true;
  }
  cv.notify_all();
  copier.join();
  cloner.join();
  REQUIRE(finished);  // otherwise something waited for the copy-up
  CHECK_EQ(others.get(), 0);
  std::string big;
  REQUIRE_OK(ov.readFile("a", "big", &big));
  CHECK_EQ(big, std::string(64, 'b'));
  REQUIRE_OK(ov.readFile("a2", "big", &big));
  CHECK_EQ(big, std::string(64, 'b'));
  ov.unpin(L);
}

// A read-only handle opened on a folder file before the layer took the file over reads what the
// layer has from then on: after a truncate by path, and after the copy lost its last name.
TEST(a_read_only_handle_from_before_sees_the_layers_copy_after_truncate_and_unlink) {
  auto lo = std::make_unique<fake::FakeLower>();
  lo->addFile("t", "0123456789");
  lo->addFile("u", "OLD");
  Overlay ov(std::move(lo));
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  Attr at;
  auto readAll = [&](Handle* h) {
    std::string out;
    char buf[64];
    size_t got = 0;
    for (uint64_t off = 0; ov.read(h, buf, sizeof buf, off, &got) == 0 && got; off += got) out.append(buf, got);
    return out;
  };
  Handle* rt = nullptr;
  REQUIRE_OK(ov.open(L, "t", OpenIntent{}, &rt, &at));
  Attr v, out;
  v.size = 3;
  REQUIRE_OK(ov.setattr(L, "t", nullptr, kSetSize, v, &out));
  CHECK_EQ(readAll(rt), std::string("012"));
  ov.release(rt);

  Handle* ru = nullptr;
  REQUIRE_OK(ov.open(L, "u", OpenIntent{}, &ru, &at));
  Handle* w = nullptr;
  OpenIntent wr;
  wr.write = true;
  wr.truncate = true;
  REQUIRE_OK(ov.open(L, "u", wr, &w, &at));
  REQUIRE_OK(ov.write(w, "NEW", 3, 0));
  ov.release(w);
  CHECK_EQ(readAll(ru), std::string("NEW"));
  REQUIRE_OK(ov.unlink(L, "u"));
  CHECK_EQ(readAll(ru), std::string("NEW"));  // not A's "OLD" again
  ov.release(ru);
  ov.unpin(L);
}

// Issue #28, finding 11: a write-open copies nothing; the first change through it does.
namespace {
struct Deferred {
  fake::FakeLower* lower;
  std::unique_ptr<Overlay> ov;
  Layer* L;
  Deferred() {
    auto lo = std::make_unique<fake::FakeLower>();
    lower = lo.get();
    lower->addFile("f", "0123456789");
    lower->addFile("g", "gee");
    ov = std::make_unique<Overlay>(std::move(lo));
    ov->createLayer("a");
    L = ov->pin("a");
  }
  ~Deferred() { ov->unpin(L); }
  Handle* open(const std::string& path, bool write, bool truncate = false) {
    Handle* h = nullptr;
    Attr at;
    OpenIntent i;
    i.write = write;
    i.truncate = truncate;
    return ov->open(L, path, i, &h, &at) == 0 ? h : nullptr;
  }
  std::string readAll(Handle* h) {
    std::string out;
    char buf[64];
    size_t got = 0;
    for (uint64_t off = 0; ov->read(h, buf, sizeof buf, off, &got) == 0 && got; off += got)
      out.append(buf, got);
    return out;
  }
  std::string file(const std::string& path) {
    std::string out;
    int e = ov->readFile("a", path, &out);
    return e ? "<" + unit::errnoName(e) + ">" : out;
  }
  size_t changes() {
    std::vector<Change> ch;
    ov->changes("a", &ch);
    return ch.size();
  }
};
}  // namespace

TEST(a_write_open_closed_unwritten_leaves_the_layer_empty_and_reads_the_folder_live) {
  Deferred d;
  Handle* w = d.open("f", true);
  REQUIRE(w != nullptr);
  CHECK_EQ(d.readAll(w), std::string("0123456789"));
  d.lower->modify("f", "live");  // an edit in A before the first write shows through it
  CHECK_EQ(d.readAll(w), std::string("live"));
  Attr a;
  REQUIRE_OK(d.ov->fgetattr(w, &a));
  CHECK_EQ(a.size, uint64_t{4});
  d.ov->release(w);
  CHECK_EQ(d.changes(), size_t{0});
  LayerStats st;
  REQUIRE_OK(d.ov->stats("a", &st));
  CHECK_EQ(st.paths, uint64_t{0});
  CHECK_EQ(d.lower->openHandles(), 0);
}

TEST(the_first_write_copies_up_and_every_handle_opened_before_sees_the_copy) {
  Deferred d;
  Handle* ro = d.open("f", false);
  Handle* w1 = d.open("f", true);
  Handle* w2 = d.open("f", true);
  REQUIRE(ro && w1 && w2);
  REQUIRE_OK(d.ov->write(w1, "AB", 2, 0));
  CHECK_EQ(d.file("f"), std::string("AB23456789"));
  CHECK_EQ(d.lower->content("f"), std::string("0123456789"));
  CHECK_EQ(d.readAll(ro), std::string("AB23456789"));
  CHECK_EQ(d.readAll(w2), std::string("AB23456789"));
  REQUIRE_OK(d.ov->write(w2, "Z", 1, 9));  // the same copy, not a second one
  CHECK_EQ(d.readAll(w1), std::string("AB2345678Z"));
  CHECK_EQ(d.file("f"), std::string("AB2345678Z"));
  Attr a, la;
  REQUIRE_OK(d.ov->getattr(d.L, "f", &a));
  REQUIRE_OK(d.lower->stat("f", &la));
  CHECK_EQ(a.ino, la.ino);  // the folder's inode number, kept
  for (Handle* h : {ro, w1, w2}) d.ov->release(h);
  CHECK_EQ(d.changes(), size_t{1});
  CHECK_EQ(d.lower->openHandles(), 0);
}

TEST(truncate_through_a_write_open_and_o_trunc_are_changes) {
  Deferred d;
  Handle* w = d.open("f", true);
  REQUIRE(w != nullptr);
  Attr v, out;
  v.size = 4;
  REQUIRE_OK(d.ov->setattr(d.L, "f", w, kSetSize, v, &out));
  CHECK_EQ(d.file("f"), std::string("0123"));
  REQUIRE_OK(d.ov->fallocate(d.L, w, false, 0, 6));  // grows to 6 (zeros)
  CHECK_EQ(d.file("f"), std::string("0123\0\0", 6));
  d.ov->release(w);
  Handle* t = d.open("g", true, true);
  REQUIRE(t != nullptr);
  CHECK_EQ(d.file("g"), std::string());
  d.ov->release(t);
  CHECK_EQ(d.lower->content("g"), std::string("gee"));
  CHECK_EQ(d.changes(), size_t{2});
}

TEST(the_first_write_follows_a_rename_and_survives_an_unlink_in_the_layer) {
  Deferred d;
  Handle* w = d.open("f", true);
  Handle* x = d.open("g", true);
  REQUIRE(w && x);
  REQUIRE_OK(d.ov->rename(d.L, "f", "moved", 0));
  REQUIRE_OK(d.ov->write(w, "M", 1, 0));
  CHECK_EQ(d.file("moved"), std::string("M123456789"));
  CHECK_EQ(d.file("f"), std::string("<ENOENT>"));
  REQUIRE_OK(d.ov->unlink(d.L, "g"));
  REQUIRE_OK(d.ov->write(x, "G", 1, 0));  // the file it opened, with no name any more
  CHECK_EQ(d.readAll(x), std::string("Gee"));
  CHECK_EQ(d.file("g"), std::string("<ENOENT>"));
  d.ov->release(w);
  d.ov->release(x);
  CHECK_EQ(d.lower->content("f"), std::string("0123456789"));
  CHECK_EQ(d.lower->content("g"), std::string("gee"));
}

TEST(a_file_replaced_in_the_folder_before_the_first_write_is_not_written_over) {
  Deferred d;
  Handle* w = d.open("f", true);
  REQUIRE(w != nullptr);
  d.lower->remove("f");
  d.lower->addFile("f", "new file");  // another inode at the name
  REQUIRE_OK(d.ov->write(w, "W", 1, 0));
  CHECK_EQ(d.readAll(w), std::string("W123456789"));  // the file it opened
  CHECK_EQ(d.file("f"), std::string("new file"));    // the name shows the folder's new file
  d.ov->release(w);
  CHECK_EQ(d.changes(), size_t{0});
}

TEST(a_write_open_in_a_read_only_view_is_refused_and_writable_says_so) {
  Deferred d;
  CHECK(d.ov->writable(d.L));
  CHECK(!d.ov->writable(nullptr));  // no layer active: the folder as it is, read-only
  Handle* h = nullptr;
  Attr at;
  OpenIntent wr;
  wr.write = true;
  CHECK_ERR(d.ov->open(nullptr, "f", wr, &h, &at), EROFS);
}

// FUSE passthrough of a write-open (fuse_ll, io: passthrough): the kernel writes the content's
// file itself, so the core must keep that file as the content's and read size and times from it.
TEST(a_content_the_kernel_writes_keeps_its_file_and_takes_size_and_times_from_it) {
  auto lo = std::make_unique<fake::FakeLower>();
  lo->addFile("f", "folder");
  auto sp = std::make_unique<fake::FakeSpill>();
  fake::FakeSpill* spill = sp.get();
  Overlay ov(std::move(lo), std::move(sp), UINT64_MAX);
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  OpenIntent wr;
  wr.write = true;
  Handle* h = nullptr;
  Attr at;
  REQUIRE_OK(ov.create(L, "new.txt", 0644, wr, Caller{0, 0}, &h, &at));
  REQUIRE_OK(ov.write(h, "hello", 5, 0));
  REQUIRE(ov.kernelWriteDescriptor(h, false) >= 0);
  fake::FakeSpillFile* k = spill->lastInMemory;
  REQUIRE(k != nullptr);
  CHECK_EQ(k->data(), std::string("hello"));  // moved out of memory into the memory file
  auto file = [&](const char* layer, const char* p) {
    std::string s;
    return ov.readFile(layer, p, &s) == 0 ? s : std::string("<err>");
  };
  // The kernel writes behind our back: every operation sees it, the budget too.
  const uint64_t budgetBefore = ContentBudget::process().stats().inMemoryBytes;
  std::string big(5000, 'k');
  REQUIRE_OK(k->pwrite(big.data(), big.size(), 5));
  Attr a;
  REQUIRE_OK(ov.getattr(L, "new.txt", &a));
  CHECK_EQ(a.size, uint64_t{5005});
  CHECK(ContentBudget::process().stats().inMemoryBytes >= budgetBefore + 4096);
  uint64_t size;
  Timespec mt, ct;
  REQUIRE_OK(k->stat(&size, &mt, &ct));
  CHECK(a.mtime == mt);
  REQUIRE_OK(k->truncate(11));
  REQUIRE_OK(k->pwrite(" world", 6, 5));
  REQUIRE_OK(ov.fgetattr(h, &a));
  CHECK_EQ(a.size, uint64_t{11});
  CHECK_EQ(file("a", "new.txt"), std::string("hello world"));
  // A copy of the layer (a checkpoint) takes what the file holds now.
  REQUIRE_OK(ov.cloneLayer("a", "copy"));
  CHECK_EQ(file("copy", "new.txt"), std::string("hello world"));
  // A whole replacement through the API lands in the same file (the kernel's open sees it), and
  // so does a write through the daemon (another open).
  REQUIRE_OK(ov.putFile("a", "new.txt", "API", 0644, Caller{0, 0}));
  CHECK_EQ(k->data(), std::string("API"));
  REQUIRE_OK(k->pwrite("!", 1, 3));
  CHECK_EQ(file("a", "new.txt"), std::string("API!"));
  Handle* other = nullptr;
  REQUIRE_OK(ov.open(L, "new.txt", wr, &other, &at));
  REQUIRE_OK(ov.write(other, "?", 1, 4));
  CHECK_EQ(k->data(), std::string("API!?"));
  ov.release(other);
  // Times set after a write stay (the file has not changed since).
  Attr v, out;
  v.mtime = Timespec{42, 0};
  REQUIRE_OK(ov.setattr(L, "new.txt", nullptr, kSetMtime, v, &out));
  REQUIRE_OK(ov.getattr(L, "new.txt", &a));
  CHECK(a.mtime == (Timespec{42, 0}));
  CHECK_EQ(a.size, uint64_t{5});
  // A read-only open shares the file.
  Handle* r = nullptr;
  REQUIRE_OK(ov.open(L, "new.txt", OpenIntent{}, &r, &at));
  CHECK(ov.spilledContentDescriptor(r) >= 0);
  ov.release(r);
  // After the release, the file is no longer looked at (the kernel no longer writes it).
  ov.release(h);
  REQUIRE_OK(k->pwrite("late", 4, 0));
  REQUIRE_OK(ov.getattr(L, "new.txt", &a));
  CHECK_EQ(a.size, uint64_t{5});
  // Set-ID bits: a write by a non-root opener clears them (set-group-ID only with group
  // execute), as the kernel's own write would; a root opener's keeps them.
  for (bool killPriv : {true, false}) {
    REQUIRE_OK(ov.create(L, killPriv ? "s1" : "s2", 06755, wr, Caller{0, 0}, &h, &at));
    REQUIRE(ov.kernelWriteDescriptor(h, killPriv) >= 0);
    REQUIRE_OK(spill->lastInMemory->pwrite("x", 1, 0));
    REQUIRE_OK(ov.fgetattr(h, &a));
    CHECK_EQ(a.perm, killPriv ? uint32_t{0755} : uint32_t{06755});
    ov.release(h);
  }
  // A read-only open the kernel serves holds the file in place too: an API replacement lands in
  // it (the reader sees it, as through the daemon); once released, the next one does not.
  REQUIRE_OK(ov.putFile("a", "r.txt", "first", 0644, Caller{0, 0}));
  REQUIRE_OK(ov.open(L, "r.txt", OpenIntent{}, &r, &at));
  REQUIRE(ov.spilledContentDescriptor(r) >= 0);
  fake::FakeSpillFile* m = spill->lastInMemory;
  CHECK_EQ(m->data(), std::string("first"));
  REQUIRE_OK(ov.putFile("a", "r.txt", "second", 0644, Caller{0, 0}));
  CHECK_EQ(m->data(), std::string("second"));
  ov.release(r);
  REQUIRE_OK(ov.putFile("a", "r.txt", "third", 0644, Caller{0, 0}));  // a new content (m is gone)
  CHECK(spill->lastInMemory == m);
  CHECK_EQ(file("a", "r.txt"), std::string("third"));
  // Never: the folder's content (its first write copies it up), a read-only handle.
  REQUIRE_OK(ov.open(L, "f", wr, &h, &at));
  CHECK_EQ(ov.kernelWriteDescriptor(h, false), -1);
  ov.release(h);
  REQUIRE_OK(ov.open(L, "new.txt", OpenIntent{}, &h, &at));
  CHECK_EQ(ov.kernelWriteDescriptor(h, false), -1);
  ov.release(h);
  ov.unpin(L);
}
