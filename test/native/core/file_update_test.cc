// Unit tests of Overlay::updateFile, the read-modify-write behind the agent file tools: what it
// shows the change, what it writes, and that concurrent updates and writes of one file never
// interleave (each sees the result of the one before).
#include <atomic>
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

std::unique_ptr<Overlay> world(fake::FakeLower** lowerOut = nullptr) {
  auto lo = std::make_unique<fake::FakeLower>();
  lo->addFile("a.txt", "from the folder\n", 0640);
  if (lowerOut) *lowerOut = lo.get();
  auto ov = std::make_unique<Overlay>(std::move(lo), std::make_unique<fake::FakeSpill>(), 64);
  if (ov->createLayer("x")) throw unit::Abort{};
  return ov;
}

// Appends `line` (an edit of the whole content).
FileUpdate appendLine(const std::string& line) {
  FileUpdate u;
  u.readContent = true;
  u.change = [line](const FileNow& now, FileChange* ch) {
    if (!now.exists) return;
    ch->write = true;
    ch->content = *now.content + line + "\n";
  };
  return u;
}

}  // namespace

TEST(update_reads_the_folders_file_and_writes_the_layers_copy) {
  fake::FakeLower* lower = nullptr;
  auto ov = world(&lower);
  FileUpdateResult r;
  CHECK_OK(ov->updateFile("x", "a.txt", appendLine("more"), kWho, &r));
  CHECK(r.written);
  CHECK(!r.created);
  CHECK_EQ(r.attr.size, uint64_t(21));
  CHECK_EQ(r.attr.perm & 07777, 0640u);  // the mode stays unless the change sets one
  std::string got;
  CHECK_OK(ov->readFile("x", "a.txt", &got));
  CHECK_EQ(got, std::string("from the folder\nmore\n"));
  std::string folder;
  CHECK_OK(lower->readAll("a.txt", &folder));
  CHECK_EQ(folder, std::string("from the folder\n"));
}

TEST(update_that_writes_nothing_changes_nothing) {
  auto ov = world();
  FileUpdate u;
  u.readContent = true;
  std::string seen;
  u.change = [&seen](const FileNow& now, FileChange*) { seen = *now.content; };
  FileUpdateResult r;
  CHECK_OK(ov->updateFile("x", "a.txt", u, kWho, &r));
  CHECK(!r.written);
  CHECK_EQ(seen, std::string("from the folder\n"));
  std::vector<Change> changes;
  CHECK_OK(ov->changes("x", &changes));
  CHECK_EQ(changes.size(), size_t(0));
}

TEST(update_creates_with_its_mode_and_parents_only_when_allowed) {
  auto ov = world();
  FileUpdate u;
  u.change = [](const FileNow& now, FileChange* ch) {
    ch->write = !now.exists;
    ch->content = "new\n";
    ch->perm = 0600;
  };
  FileUpdateResult r;
  CHECK_ERR(ov->updateFile("x", "d/e/new.txt", u, kWho, &r), ENOENT);
  u.mayCreate = true;
  CHECK_OK(ov->updateFile("x", "d/e/new.txt", u, kWho, &r));
  CHECK(r.created);
  CHECK_EQ(r.attr.perm & 07777, 0600u);
  std::string got;
  CHECK_OK(ov->readFile("x", "d/e/new.txt", &got));
  CHECK_EQ(got, std::string("new\n"));
  // A mode for an existing file is set with the write.
  u.change = [](const FileNow&, FileChange* ch) {
    ch->write = true;
    ch->content = "again\n";
    ch->perm = 0755;
  };
  CHECK_OK(ov->updateFile("x", "a.txt", u, kWho, &r));
  CHECK_EQ(r.attr.perm & 07777, 0755u);
}

TEST(update_refuses_what_is_not_a_regular_file_and_big_reads) {
  auto ov = world();
  Layer* L = ov->pin("x");
  Attr a;
  CHECK_OK(ov->mkdir(L, "dir", 0755, kWho, &a));
  CHECK_OK(ov->symlink(L, "a.txt", "link", kWho, &a));
  ov->unpin(L);
  FileUpdateResult r;
  CHECK_ERR(ov->updateFile("x", "dir", appendLine("x"), kWho, &r), EISDIR);
  CHECK_ERR(ov->updateFile("x", "link", appendLine("x"), kWho, &r), ELOOP);
  CHECK_ERR(ov->updateFile("x", "nope", appendLine("x"), kWho, &r), ENOENT);
  CHECK_ERR(ov->updateFile("nolayer", "a.txt", appendLine("x"), kWho, &r), ENXIO);
  FileUpdate big = appendLine("x");
  big.maxRead = 4;
  CHECK_ERR(ov->updateFile("x", "a.txt", big, kWho, &r), EFBIG);
}

// Many threads append a line each to one file, some through updateFile and some through
// write(2)-like appends of open handles at the end the handle's fgetattr reports: every line
// is there exactly once. Without the content lock around the look and the write, two updates
// that read the same content lose one line.
TEST(concurrent_updates_of_one_file_never_interleave) {
  auto ov = world();
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        FileUpdateResult r;
        std::string line = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (ov->updateFile("x", "a.txt", appendLine(line), kWho, &r) || !r.written) errors++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ(errors.load(), 0);
  std::string got;
  CHECK_OK(ov->readFile("x", "a.txt", &got));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kEach; ++i) {
      std::string line = "\nt" + std::to_string(t) + "-" + std::to_string(i) + "\n";
      size_t at = got.find(line);
      CHECK(at != std::string::npos);
      if (at != std::string::npos) CHECK(got.find(line, at + 1) == std::string::npos);
    }
  CHECK_EQ(got.size(), std::string("from the folder\n").size() +
                           size_t(kThreads) * kEach * std::string("t0-00\n").size() -
                           size_t(kThreads) * 10 /* i < 10 has one digit */);
}
