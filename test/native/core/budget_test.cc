// The memory budget (native/core/budget.h): the pack file's contents keep every byte through
// writes, holes, truncation, moves to bigger slots and to a file of their own, and slots reused;
// overlays under a tiny budget keep their contents in memory within it, every content reading
// back byte for byte, and the evictor spills the least recently changed first.
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <algorithm>
#include <vector>

#include "../../../native/core/budget.h"
#include "../../../native/core/model.h"
#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

std::string readAll(SpillFile& f, size_t size) {
  std::string out(size, '\0');
  size_t got = 0;
  if (f.pread(out.data(), size, 0, &got) != 0) return "<error>";
  out.resize(got);
  return out;
}

std::string pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i % 23);
  return s;
}

// Sets the process's budget for one test and puts "none" back after it.
struct BudgetFor {
  explicit BudgetFor(uint64_t bytes) { ContentBudget::process().setLimit(bytes); }
  ~BudgetFor() { ContentBudget::process().setLimit(UINT64_MAX); }
};

}  // namespace

TEST(budget_packed_contents_keep_every_byte_through_writes_holes_truncation_and_moves) {
  auto store = std::make_unique<fake::FakeSpill>();
  fake::FakeSpill* fs = store.get();
  Spiller sp(std::move(store));
  std::unique_ptr<SpillFile> f;
  REQUIRE_OK(sp.createFor(100, &f));
  CHECK_EQ(fs->created.load(), 1);  // the pack, and only it
  const std::string a = pattern(100, 'a');
  CHECK_OK(f->pwrite(a.data(), a.size(), 0));
  CHECK_EQ(readAll(*f, 1000), a);
  // A hole then data, past the slot: the content moves to a bigger slot, the hole reads zeros.
  CHECK_OK(f->pwrite("xyz", 3, 5000));
  std::string want = a + std::string(4900, '\0') + "xyz";
  CHECK_EQ(readAll(*f, 10000), want);
  // Truncate down, then up: zeros, not the old bytes.
  CHECK_OK(f->truncate(10));
  CHECK_OK(f->truncate(40));
  CHECK_EQ(readAll(*f, 100), a.substr(0, 10) + std::string(30, '\0'));
  // Past the largest slot: a file of its own, same bytes.
  const std::string big = pattern(1500 * 1024, 'k');
  CHECK_OK(f->pwrite(big.data(), big.size(), 40));
  CHECK_EQ(fs->created.load(), 2);
  CHECK_EQ(readAll(*f, 2 * 1024 * 1024), a.substr(0, 10) + std::string(30, '\0') + big);
  // A slot freed is reused, and what a new content grows into reads as zeros there too.
  std::unique_ptr<SpillFile> g, h;
  REQUIRE_OK(sp.createFor(200, &g));
  const std::string b = pattern(200, 'B');
  CHECK_OK(g->pwrite(b.data(), b.size(), 0));
  const uint64_t packBefore = sp.packBytes();
  g.reset();
  REQUIRE_OK(sp.createFor(150, &h));
  CHECK_EQ(sp.packBytes(), packBefore);  // the freed slot, not a new one
  CHECK_OK(h->truncate(180));
  CHECK_EQ(readAll(*h, 1000), std::string(180, '\0'));
}

TEST(budget_overlays_keep_contents_within_a_tiny_budget_and_read_them_back) {
  BudgetFor budget(16 * 1024);
  auto makeOverlay = [] {
    auto lo = std::make_unique<fake::FakeLower>();
    lo->addFile("folder.txt", pattern(3000, 'f'));
    return std::make_unique<Overlay>(std::move(lo), std::make_unique<fake::FakeSpill>(),
                                     UINT64_MAX);
  };
  auto one = makeOverlay();
  auto two = makeOverlay();
  REQUIRE_OK(one->createLayer("a"));
  REQUIRE_OK(two->createLayer("b"));
  const uint64_t before = ContentBudget::process().stats().inMemoryBytes;
  for (int i = 0; i < 200; ++i) {
    const std::string name = "f" + std::to_string(i);
    REQUIRE_OK(one->putFile("a", name, pattern(700 + i, 'a'), 0644, Caller{}));
    REQUIRE_OK(two->putFile("b", name, pattern(900 + i, 'b'), 0644, Caller{}));
    CHECK(ContentBudget::process().stats().inMemoryBytes <= 16 * 1024);
  }
  // Writes through a handle, growing a spilled content, and a copy-up from the folder.
  Layer* L = one->pin("a");
  Handle* h = nullptr;
  Attr at;
  OpenIntent wr;
  wr.write = true;
  REQUIRE_OK(one->open(L, "f0", wr, &h, &at));
  CHECK_OK(one->write(h, "HELLO", 5, 10000));
  one->release(h);
  REQUIRE_OK(one->open(L, "folder.txt", wr, &h, &at));
  CHECK_OK(one->write(h, "!", 1, 0));
  one->release(h);
  one->unpin(L);
  CHECK(ContentBudget::process().stats().inMemoryBytes <= 16 * 1024);
  std::string got;
  for (int i = 0; i < 200; ++i) {
    const std::string name = "f" + std::to_string(i);
    std::string want = pattern(700 + i, 'a');
    if (i == 0) want += std::string(10000 - want.size(), '\0') + "HELLO";
    REQUIRE_OK(one->readFile("a", name, &got));
    CHECK(got == want);
    REQUIRE_OK(two->readFile("b", name, &got));
    CHECK(got == pattern(900 + i, 'b'));
  }
  REQUIRE_OK(one->readFile("a", "folder.txt", &got));
  CHECK(got == "!" + pattern(3000, 'f').substr(1));
  LayerStats st;
  REQUIRE_OK(one->stats("a", &st));
  CHECK(st.spilledBytes > 100 * 1024);
  // A copy of a layer with spilled contents has the same bytes.
  REQUIRE_OK(one->cloneLayer("a", "c"));
  REQUIRE_OK(one->readFile("c", "f7", &got));
  CHECK(got == pattern(707, 'a'));
  one.reset();
  two.reset();
  CHECK_EQ(ContentBudget::process().stats().inMemoryBytes, before);  // every byte given back
}

TEST(budget_evictor_spills_the_least_recently_changed_contents_first) {
  BudgetFor budget(16 * 1024);
  auto lo = std::make_unique<fake::FakeLower>();
  Overlay ov(std::move(lo), std::make_unique<fake::FakeSpill>(), UINT64_MAX);
  REQUIRE_OK(ov.createLayer("a"));
  const uint64_t base = ContentBudget::process().stats().inMemoryBytes;
  REQUIRE(base == 0);  // no other overlay holds contents now: the figures below are ours
  // 13 files of 1 KiB (13 KiB: under seven eighths of 16), each changed after the one before.
  for (int i = 0; i < 13; ++i) {
    REQUIRE_OK(ov.putFile("a", "f" + std::to_string(i), std::string(1024, 'x'), 0644, Caller{}));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // distinct ctimes
  }
  // f0 changed again: now the most recently changed of the first ones.
  REQUIRE_OK(ov.putFile("a", "f0", std::string(1024, 'y'), 0644, Caller{}));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // 2 KiB more: past seven eighths, not past the budget. The evictor takes it down to 12 KiB.
  REQUIRE_OK(ov.putFile("a", "g", std::string(2048, 'g'), 0644, Caller{}));
  for (int i = 0; i < 500 && ContentBudget::process().stats().inMemoryBytes > 12 * 1024; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<std::string> inMemory;
  ov.forEachContentInMemory([&](Inode* in, int64_t, uint64_t) { inMemory.emplace_back(in->name()); });
  std::sort(inMemory.begin(), inMemory.end());
  // f1, f2, f3 were the least recently changed: they went, and nothing else.
  const std::vector<std::string> want = {"f0", "f10", "f11", "f12", "f4", "f5", "f6", "f7", "f8", "f9", "g"};
  std::string seen;
  for (auto& n : inMemory) seen += n + " ";
  if (inMemory != want) std::printf("      in memory: %s\n", seen.c_str());
  CHECK(inMemory == want);
  std::string got;
  REQUIRE_OK(ov.readFile("a", "f2", &got));
  CHECK(got == std::string(1024, 'x'));
}
