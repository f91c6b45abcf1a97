// Unit tests of the audit trail (issue #32, core/audit.h): what the core's file-system operations
// record on a thread that serves a request (and not on one that does not: the API's), bytes
// counted per open and coalesced per path for by-node writes, failed requests left out, the bound
// and its count of dropped entries, and a restored record's numbering. On the in-memory folder
// (fake_lower.h). Standard library only (builds on Windows).
#include <memory>
#include <string>
#include <vector>

#include "../../../native/core/audit.h"
#include "../../../native/core/overlay.h"
#include "../unit/unit.h"
#include "fake_lower.h"

using namespace shadowfs;

namespace {

const Caller kWho{1000, 1000};

// Marks this thread as serving requests of process `pid` for its lifetime.
struct Serving {
  explicit Serving(uint32_t pid) { auditRequest(pid); }
  ~Serving() { auditRequestEnd(); }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
};

std::unique_ptr<Overlay> world() {
  auto lo = std::make_unique<fake::FakeLower>();
  lo->addFile("a.txt", "hello\n");
  lo->addDir("src");
  auto ov = std::make_unique<Overlay>(std::move(lo));
  if (ov->createLayer("a") || ov->createLayer("b") || ov->activate("a", nullptr)) throw unit::Abort{};
  return ov;
}

std::vector<std::string> brief(Overlay& ov, const std::string& layer) {
  AuditSnapshot s;
  if (ov.auditSnapshot(layer, &s)) return {"<no layer>"};
  std::vector<std::string> out;
  for (auto& e : s.entries) {
    std::string line = std::string(auditOpName(e.op)) + " " + e.path;
    if (!e.to.empty()) line += " " + e.to;
    if (e.bytes) line += " " + std::to_string(e.bytes);
    line += " pid" + std::to_string(e.pid);
    out.push_back(line);
  }
  return out;
}

int writeOnce(Overlay& ov, const std::string& path, const std::string& data, bool create, bool transient) {
  Handle* h = nullptr;
  Attr a;
  OpenIntent w;
  w.write = true;
  w.transient = transient;
  int e = create ? ov.create(nullptr, path, 0644, w, kWho, &h, &a) : ov.open(nullptr, path, w, &h, &a);
  if (e) return e;
  e = ov.write(h, data.data(), data.size(), 0);
  ov.release(h);
  return e;
}

}  // namespace

TEST(audit_records_served_requests_only) {
  auto ov = world();
  Attr a;
  // The API's thread serves no request: nothing is recorded.
  CHECK_EQ(ov->mkdir(nullptr, "api-dir", 0755, kWho, &a), 0);
  CHECK_EQ(brief(*ov, "a").size(), 0u);
  {
    Serving s(42);
    CHECK_EQ(writeOnce(*ov, "new.txt", "abc", true, false), 0);
    CHECK_EQ(writeOnce(*ov, "a.txt", "HELLO", false, false), 0);
    CHECK_EQ(ov->rename(nullptr, "new.txt", "moved.txt", 0), 0);
    CHECK_EQ(ov->unlink(nullptr, "a.txt"), 0);
    CHECK_EQ(ov->unlink(nullptr, "a.txt"), ENOENT);  // failed: not recorded
    CHECK_EQ(ov->mkdir(nullptr, "src/d", 0755, kWho, &a), 0);
    CHECK_EQ(ov->symlink(nullptr, "../moved.txt", "src/l", kWho, &a), 0);
    OpenIntent x;
    x.exec = true;
    Handle* h = nullptr;
    CHECK_EQ(ov->open(nullptr, "moved.txt", x, &h, &a), 0);
    ov->release(h);
  }
  const std::vector<std::string> want = {"create new.txt 3 pid42",        "open a.txt 5 pid42",
                                         "rename new.txt moved.txt pid42", "unlink a.txt pid42",
                                         "mkdir src/d pid42",              "symlink src/l ../moved.txt pid42",
                                         "exec moved.txt pid42"};
  CHECK_EQ(brief(*ov, "a"), want);
  CHECK_EQ(brief(*ov, "b").size(), 0u);
}

TEST(audit_coalesces_by_node_writes) {
  auto ov = world();
  Serving s(7);
  // fuse_ll without opens: a handle per WRITE request, no open recorded; the bytes join one entry
  // per path and process, the file's own create included.
  Attr a;
  CHECK_EQ(ov->mknod(nullptr, "made.txt", FileType::Regular, 0644, 0, kWho, &a), 0);
  for (int i = 0; i < 10; ++i) CHECK_EQ(writeOnce(*ov, "made.txt", "xy", false, true), 0);
  for (int i = 0; i < 3; ++i) CHECK_EQ(writeOnce(*ov, "a.txt", "z", false, true), 0);
  auditRequest(8);  // another process: its own entry
  CHECK_EQ(writeOnce(*ov, "a.txt", "zz", false, true), 0);
  const std::vector<std::string> want = {"create made.txt 20 pid7", "write a.txt 3 pid7", "write a.txt 2 pid8"};
  CHECK_EQ(brief(*ov, "a"), want);
}

TEST(audit_is_bounded_and_numbers_go_on_after_a_restore) {
  auto ov = world();
  AuditLimits l;
  l.maxEntries = 3;
  ov->setAuditLimits(l);
  Serving s(1);
  Attr a;
  for (int i = 0; i < 5; ++i) CHECK_EQ(ov->mkdir(nullptr, "d" + std::to_string(i), 0755, kWho, &a), 0);
  AuditSnapshot snap;
  REQUIRE_EQ(ov->auditSnapshot("a", &snap), 0);
  REQUIRE_EQ(snap.entries.size(), 3u);
  CHECK_EQ(snap.entries[0].path, std::string("d2"));
  CHECK_EQ(snap.entries[0].seq, 3u);
  CHECK_EQ(snap.dropped, 2u);
  // A copy of the layer starts with the record; a restore of an older record numbers on after
  // the highest seq ever given.
  CHECK_EQ(ov->cloneLayer("a", "c"), 0);
  CHECK_EQ(brief(*ov, "c").size(), 3u);
  AuditSnapshot older = snap;
  older.entries.resize(1);
  older.nextSeq = 4;
  CHECK_EQ(ov->auditLoad("a", older), 0);
  CHECK_EQ(ov->mkdir(nullptr, "after", 0755, kWho, &a), 0);
  AuditSnapshot now;
  REQUIRE_EQ(ov->auditSnapshot("a", &now), 0);
  REQUIRE_EQ(now.entries.size(), 2u);
  CHECK_EQ(now.entries[1].seq, 6u);
  CHECK_EQ(now.dropped, 2u);
  CHECK_EQ(ov->auditSnapshot("nope", &now), ENXIO);
}
