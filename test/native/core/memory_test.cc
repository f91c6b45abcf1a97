// What a layer costs per path in the core's own bookkeeping (issue #18: at most 128 bytes per
// layer path), measured with glibc's allocator statistics, and what Overlay::stats() says.
//
// "Bookkeeping per path" = (bytes the allocator hands out while the layer is built, as
// mallinfo2().uordblks + hblkhd grow) minus the bytes that are not bookkeeping, divided by the
// number of paths the layer holds (stats().paths: files, directories, deletions). Not
// bookkeeping, so subtracted:
//   - content bytes: the file's size in bytes (200 for every file here). Anything the content
//     costs beyond its size (a string's terminator, capacity slack, malloc's header and
//     rounding of that block) stays in the bookkeeping;
//   - name bytes: the length of each path's own last component ("f00042" = 6), once per path.
//     Whatever it costs to hold that name beyond its bytes (a std::string's 32 bytes, a map
//     node, length fields) stays in the bookkeeping.
// Everything else counts: the tree's nodes, children containers, inode objects, reference
// counts, locks, malloc headers and rounding, the folder path a copied-up file remembers, the
// layer's copy-up records. The test's own inputs (the path strings, the file data it passes)
// are made before the first measurement and freed after the last, so they are not counted.
//
// The measurements are glibc only (mallinfo2); the Windows cross build skips them. The first
// test (big directories, whose children the core keeps in runs) runs everywhere.
#include <algorithm>
#include <cstdio>
#include <cstdlib>  // defines __GLIBC__ where it applies
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

// A shuffled 0..n-1 (a fixed LCG: the same order on every platform).
std::vector<size_t> shuffled(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  uint64_t x = 12345;
  for (size_t i = n; i > 1; --i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(v[i - 1], v[static_cast<size_t>((x >> 33) % i)]);
  }
  return v;
}

std::string bigName(size_t i) {
  char b[16];
  std::snprintf(b, sizeof b, "e%05zu", i);
  return b;
}

// The layer's entries of "big", as readdir shows them (in the order it shows them).
std::vector<std::string> listBig(Overlay& ov, Layer* L) {
  std::vector<DirEntry> ls;
  if (ov.readdir(L, "big", &ls) != 0) return {};
  std::vector<std::string> names;
  for (auto& d : ls) names.push_back(d.name);
  return names;
}

}  // namespace

// Past Node::kFlatMax children a directory keeps them in runs: inserts in any order, removals
// down to nothing, renames in and out, and listings stay complete and in name order.
TEST(a_big_directory_keeps_every_name_through_inserts_removals_and_renames) {
  Overlay ov(std::make_unique<fake::FakeLower>());
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  const size_t n = 5000;
  std::set<std::string> want;
  for (size_t i : shuffled(n)) {
    REQUIRE_OK(ov.putFile("a", "big/" + bigName(i), "x", 0644, Caller{}));
    want.insert(bigName(i));
  }
  // Appending in order (names past the last) as well.
  for (size_t i = n; i < n + 700; ++i) {
    REQUIRE_OK(ov.putFile("a", "big/" + bigName(i), "x", 0644, Caller{}));
    want.insert(bigName(i));
  }
  CHECK(listBig(ov, L) == std::vector<std::string>(want.begin(), want.end()));
  // Every third goes; some move to another directory and back under a new name.
  for (size_t i : shuffled(n + 700)) {
    if (i % 3 == 0) {
      REQUIRE_OK(ov.unlink(L, "big/" + bigName(i)));
      want.erase(bigName(i));
    } else if (i % 7 == 0) {
      REQUIRE_OK(ov.rename(L, "big/" + bigName(i), "moved", 0));
      REQUIRE_OK(ov.rename(L, "moved", "big/" + bigName(i) + "r", 0));
      want.erase(bigName(i));
      want.insert(bigName(i) + "r");
    }
  }
  CHECK(listBig(ov, L) == std::vector<std::string>(want.begin(), want.end()));
  Attr a;
  CHECK_OK(ov.getattr(L, "big/" + bigName(1), &a));
  CHECK_ERR(ov.getattr(L, "big/" + bigName(3), &a), ENOENT);
  CHECK_OK(ov.getattr(L, "big/" + bigName(7) + "r", &a));
  // Down to nothing, then up again.
  for (const auto& name : std::vector<std::string>(want.begin(), want.end()))
    REQUIRE_OK(ov.unlink(L, "big/" + name));
  CHECK(listBig(ov, L).empty());
  REQUIRE_OK(ov.putFile("a", "big/again", "x", 0644, Caller{}));
  CHECK(listBig(ov, L) == std::vector<std::string>{"again"});
  // A clone copies the runs.
  for (size_t i : shuffled(3000)) REQUIRE_OK(ov.putFile("a", "big/" + bigName(i), "x", 0644, Caller{}));
  REQUIRE_OK(ov.cloneLayer("a", "b"));
  Layer* B = ov.pin("b");
  CHECK(listBig(ov, B) == listBig(ov, L));
  CHECK_EQ(listBig(ov, B).size(), size_t{3001});
  ov.unpin(B);
  ov.unpin(L);
}

// A directory's link count is 2 + its subdirectories, kept as children come and go (no walk of
// the children per getattr), past the one-array size too.
TEST(a_directory_link_count_follows_its_subdirectories) {
  Overlay ov(std::make_unique<fake::FakeLower>());
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  Attr a;
  REQUIRE_OK(ov.mkdir(L, "d", 0755, Caller{}, &a));
  CHECK_EQ(a.nlink, uint32_t{2});
  uint32_t dirs = 0;
  for (size_t i : shuffled(1500)) {
    if (i % 3 == 0) {
      REQUIRE_OK(ov.mkdir(L, "d/" + bigName(i), 0755, Caller{}, &a));
      ++dirs;
    } else {
      REQUIRE_OK(ov.putFile("a", "d/" + bigName(i), "x", 0644, Caller{}));
    }
  }
  CHECK_OK(ov.getattr(L, "d", &a));
  CHECK_EQ(a.nlink, 2 + dirs);
  // Half the subdirectories go; files go too (no change); one moves out and back in.
  for (size_t i = 0; i < 1500; i += 6) {
    REQUIRE_OK(ov.rmdir(L, "d/" + bigName(i)));
    --dirs;
  }
  for (size_t i = 1; i < 1500; i += 6) REQUIRE_OK(ov.unlink(L, "d/" + bigName(i)));
  CHECK_OK(ov.getattr(L, "d", &a));
  CHECK_EQ(a.nlink, 2 + dirs);
  REQUIRE_OK(ov.rename(L, "d/" + bigName(3), "out", 0));
  CHECK_OK(ov.getattr(L, "d", &a));
  CHECK_EQ(a.nlink, 1 + dirs);
  // A directory renamed over an empty one replaces it: the count stays.
  REQUIRE_OK(ov.rename(L, "out", "d/" + bigName(9), 0));
  CHECK_OK(ov.getattr(L, "d", &a));
  CHECK_EQ(a.nlink, 1 + dirs);
  // A clone counts the same.
  REQUIRE_OK(ov.cloneLayer("a", "b"));
  Layer* B = ov.pin("b");
  CHECK_OK(ov.getattr(B, "d", &a));
  CHECK_EQ(a.nlink, 1 + dirs);
  ov.unpin(B);
  ov.unpin(L);
}

// Times are kept in 64-bit nanoseconds (years 1678 to 2262); others move aside, exactly.
TEST(times_far_from_now_are_kept_exactly) {
  Overlay ov(std::make_unique<fake::FakeLower>());
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  REQUIRE_OK(ov.putFile("a", "f", "x", 0644, Caller{}));
  const Timespec times[] = {{0, 0},           {-1, 999999999},         {1700000000, 123456789},
                            {-9000000000, 5}, {9000000000, 999999999}, {-40000000000, 7},
                            {40000000000, 1}, {1, 2}};
  for (const Timespec& t : times) {
    Attr v, out;
    v.mtime = t;
    v.atime = Timespec{t.sec + 1, t.nsec};
    REQUIRE_OK(ov.setattr(L, "f", nullptr, kSetMtime | kSetAtime, v, &out));
    Attr a;
    REQUIRE_OK(ov.getattr(L, "f", &a));
    CHECK_EQ(a.mtime.sec, t.sec);
    CHECK_EQ(a.mtime.nsec, t.nsec);
    CHECK_EQ(a.atime.sec, t.sec + 1);
    CHECK_EQ(a.atime.nsec, t.nsec);
  }
  ov.unpin(L);
}

// Threads doing everything at once to a few files: the striped locks, the counted references,
// the lazily made Extra and the copy records must hold (checked builds abort on a broken
// invariant or lock order; a -fsanitize=thread build of this test reported no race).
TEST(concurrent_operations_on_a_few_files_keep_the_model_whole) {
  auto lo = std::make_unique<fake::FakeLower>();
  lo->addDir("d");
  for (int i = 0; i < 40; ++i) lo->addFile("d/a" + std::to_string(i), std::string(100, 'a'));
  Overlay ov(std::move(lo), std::make_unique<fake::FakeSpill>(), 4096);
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&ov, L, t] {
      uint64_t x = 88172645463325252ull * static_cast<uint64_t>(t + 1);
      auto rnd = [&x](int n) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return static_cast<int>(x % static_cast<uint64_t>(n));
      };
      for (int it = 0; it < 1500; ++it) {
        const std::string p = "d/a" + std::to_string(rnd(50));
        const std::string q = "d/a" + std::to_string(rnd(50));
        Attr a, out;
        Handle* h = nullptr;
        switch (rnd(12)) {
          case 0: ov.putFile("a", p, std::string(static_cast<size_t>(rnd(6000)), 'p'), 0644, Caller{}); break;
          case 1: {
            OpenIntent w;
            w.write = true;
            if (ov.open(L, p, w, &h, &a) == 0) {
              ov.write(h, "xyz", 3, static_cast<uint64_t>(rnd(5000)));
              ov.release(h);
            }
            break;
          }
          case 2:
            if (ov.open(L, p, OpenIntent{}, &h, &a) == 0) {
              char b[64];
              size_t got = 0;
              ov.read(h, b, sizeof b, 0, &got);
              ov.fgetattr(h, &a);
              ov.release(h);
            }
            break;
          case 3: ov.rename(L, p, q, 0); break;
          case 4: ov.unlink(L, p); break;
          case 5: ov.getattr(L, p, &a); break;
          case 6: {
            std::vector<DirEntry> ls;
            ov.readdir(L, "d", &ls);
            break;
          }
          case 7: {
            LayerStats st;
            ov.stats("a", &st);
            break;
          }
          case 8: ov.link(L, p, q, &a); break;
          case 9: ov.setxattr(L, p, "user.k", "v", 0); break;
          case 10: {
            Attr v;
            v.perm = 0600;
            v.size = static_cast<uint64_t>(rnd(300));
            ov.setattr(L, p, nullptr, kSetMode | kSetSize, v, &out);
            break;
          }
          default: {
            std::vector<Change> ch;
            ov.changes("a", &ch);
            if (rnd(40) == 0) {
              const std::string c = "c" + std::to_string(t);
              ov.cloneLayer("a", c);
              ov.dropLayer(c);
            }
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  // Whatever happened, every name listed is there and reads back.
  std::vector<DirEntry> ls;
  REQUIRE_OK(ov.readdir(L, "d", &ls));
  for (auto& d : ls) {
    std::string data;
    CHECK_OK(ov.readFile("a", "d/" + d.name, &data));
  }
  ov.unpin(L);
}

#if defined(__GLIBC__)

#include <malloc.h>

namespace {

constexpr double kMaxPerPath = 128.0;
constexpr size_t kContent = 200;
constexpr size_t kPerDir = 100;

size_t allocated() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

std::string dirName(size_t d) {
  char b[16];
  std::snprintf(b, sizeof b, "d%04zu", d);
  return b;
}
std::string fileName(size_t i) {
  char b[16];
  std::snprintf(b, sizeof b, "f%06zu", i);
  return b;
}

struct Measure {
  double perPath = 0;       // measured bookkeeping per path
  double statsPerPath = 0;  // what stats() says, on the same terms
  uint64_t paths = 0;
};

// stats() counts content + bookkeeping incl. name bytes; put both numbers on the same terms.
void report(const char* what, size_t delta, uint64_t contentBytes, uint64_t nameBytes,
            const LayerStats& st, Measure* m) {
  m->paths = st.paths;
  m->perPath = (static_cast<double>(delta) - contentBytes - nameBytes) / st.paths;
  m->statsPerPath = (static_cast<double>(st.memoryBytes) - contentBytes - nameBytes) / st.paths;
  std::printf("      memory %s: %llu paths, %.1f B/path measured, %.1f B/path by stats()\n", what,
              static_cast<unsigned long long>(st.paths), m->perPath, m->statsPerPath);
}

// `files` new files of kContent bytes written with putFile, kPerDir to a directory; names of
// `extra` more bytes than fileName() gives when `longNames` (8 to 28 bytes in all).
Measure newFiles(size_t files, bool longNames = false) {
  auto nameOf = [&](size_t i) {
    return longNames ? fileName(i) + std::string(1 + (i * 7) % 21, 'n') : fileName(i);
  };
  auto lo = std::make_unique<fake::FakeLower>();
  Overlay ov(std::move(lo));
  ov.createLayer("a");
  std::vector<std::string> paths;
  paths.reserve(files);
  uint64_t nameBytes = 0;
  for (size_t i = 0; i < files; ++i) {
    if (i % kPerDir == 0) nameBytes += dirName(i / kPerDir).size();
    paths.push_back(dirName(i / kPerDir) + "/" + nameOf(i));
    nameBytes += nameOf(i).size();
  }
  const std::string data(kContent, 'x');
  const size_t before = allocated();
  for (auto& p : paths) {
    if (ov.putFile("a", p, data, 0644, Caller{}) != 0) {
      CHECK(!"putFile failed");
      return {};
    }
  }
  const size_t after = allocated();
  LayerStats st;
  ov.stats("a", &st);
  CHECK_EQ(st.paths, files + (files + kPerDir - 1) / kPerDir);
  Measure m;
  report(("putFile x" + std::to_string(files) + (longNames ? " (names of 8-28 bytes)" : "")).c_str(),
         after - before, files * kContent,
         nameBytes, st, &m);
  return m;
}

// `files` files of the folder (kPerDir to a directory) taken into the layer by `take`.
template <typename Take>
Measure copiedFiles(size_t files, const char* what, bool contentTaken, Take take) {
  auto lo = std::make_unique<fake::FakeLower>();
  std::vector<std::string> paths;
  uint64_t nameBytes = 0;
  const std::string data(kContent, 'x');
  for (size_t i = 0; i < files; ++i) {
    if (i % kPerDir == 0) {
      lo->addDir(dirName(i / kPerDir));
      nameBytes += dirName(i / kPerDir).size();
    }
    paths.push_back(dirName(i / kPerDir) + "/" + fileName(i));
    lo->addFile(paths.back(), data);
    nameBytes += fileName(i).size();
  }
  Overlay ov(std::move(lo));
  ov.createLayer("a");
  Layer* L = ov.pin("a");
  // Warm up whatever the first call allocates once (thread-locals, the fake's handle table).
  take(ov, L, paths[0]);
  const size_t before = allocated();
  for (size_t i = 1; i < paths.size(); ++i) {
    if (!take(ov, L, paths[i])) {
      CHECK(!"copy-up failed");
      ov.unpin(L);
      return {};
    }
  }
  const size_t after = allocated();
  LayerStats st;
  ov.stats("a", &st);
  ov.unpin(L);
  CHECK_EQ(st.paths, files + (files + kPerDir - 1) / kPerDir);
  // The first file and its directory were taken before the measurement: leave them out.
  const uint64_t n = files - 1;
  const uint64_t contentBytes = contentTaken ? n * kContent : 0;
  Measure m;
  const size_t delta = after - before;
  m.paths = st.paths;
  const uint64_t paths1 = st.paths - 2;  // the warm-up file and its directory
  m.perPath = (static_cast<double>(delta) - contentBytes -
               (nameBytes - fileName(0).size() - dirName(0).size())) /
              paths1;
  m.statsPerPath =
      (static_cast<double>(st.memoryBytes) - (contentTaken ? files * kContent : 0) - nameBytes) /
      st.paths;
  std::printf("      memory %s x%zu: %llu paths, %.1f B/path measured, %.1f B/path by stats()\n",
              what, files, static_cast<unsigned long long>(st.paths), m.perPath, m.statsPerPath);
  return m;
}

bool chmodOne(Overlay& ov, Layer* L, const std::string& p) {
  Attr v, out;
  v.perm = 0600;
  return ov.setattr(L, p, nullptr, kSetMode, v, &out) == 0;
}

bool writeOne(Overlay& ov, Layer* L, const std::string& p) {
  OpenIntent w;
  w.write = true;
  Handle* h = nullptr;
  Attr a;
  if (ov.open(L, p, w, &h, &a) != 0) return false;
  const int e = ov.write(h, "y", 1, 0);
  ov.release(h);
  return e == 0;
}

void checkStats(const Measure& m) {
  // stats() agrees with the measurement within 10 %.
  CHECK(m.statsPerPath >= m.perPath * 0.9 && m.statsPerPath <= m.perPath * 1.1);
}

}  // namespace

TEST(memory_10k_new_files_cost_at_most_128_bytes_per_path) {
  Measure m = newFiles(10000);
  CHECK(m.perPath > 0 && m.perPath <= kMaxPerPath);
  checkStats(m);
}

TEST(memory_100k_new_files_cost_at_most_128_bytes_per_path) {
  Measure m = newFiles(100000);
  CHECK(m.perPath > 0 && m.perPath <= kMaxPerPath);
  checkStats(m);
}

TEST(memory_100k_new_files_with_longer_names_cost_at_most_128_bytes_per_path) {
  Measure m = newFiles(100000, true);
  CHECK(m.perPath > 0 && m.perPath <= kMaxPerPath);
  checkStats(m);
}

TEST(memory_100k_new_files_in_one_directory_in_any_order_cost_at_most_128_bytes_per_path) {
  auto lo = std::make_unique<fake::FakeLower>();
  Overlay ov(std::move(lo));
  ov.createLayer("a");
  const size_t files = 100000;
  std::vector<std::string> paths;
  uint64_t nameBytes = std::string("one").size();
  for (size_t i : shuffled(files)) {
    paths.push_back("one/" + fileName(i));
    nameBytes += fileName(i).size();
  }
  const std::string data(kContent, 'x');
  const size_t before = allocated();
  for (auto& p : paths) REQUIRE_OK(ov.putFile("a", p, data, 0644, Caller{}));
  const size_t after = allocated();
  LayerStats st;
  ov.stats("a", &st);
  CHECK_EQ(st.paths, files + 1);
  Measure m;
  report("putFile x100000 in one directory", after - before, files * kContent, nameBytes, st, &m);
  CHECK(m.perPath > 0 && m.perPath <= kMaxPerPath);
  checkStats(m);
}

TEST(memory_10k_chmodded_folder_files_cost_at_most_128_bytes_per_path) {
  Measure m = copiedFiles(10000, "chmod of folder files", false, chmodOne);
  CHECK(m.perPath > 0 && m.perPath <= kMaxPerPath);
  checkStats(m);
}

// A file whose content was taken from the folder also records the Base it came from (what
// changes() and apply-back compare with the folder's file to find conflicts): its identity,
// size, times and content hash. That record is not path bookkeeping and has no 128-byte
// budget of its own: 128 bytes for the path plus 80 for that record (48 bytes of Base, a
// pointer, and 16 for Windows' attributes and creation time that the file may have, in one
// malloc block).
constexpr double kMaxPerCopiedContent = kMaxPerPath + 80.0;

TEST(memory_10k_written_folder_files_cost_a_bounded_base_record_more) {
  Measure m = copiedFiles(10000, "write to folder files", true, writeOne);
  CHECK(m.perPath > 0 && m.perPath <= kMaxPerCopiedContent);
  checkStats(m);
}

#endif  // __GLIBC__
