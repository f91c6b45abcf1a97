// The folder change journal: readers get each path once, in report order, from where they left
// off; a reader that fell behind what the journal keeps, or behind events the watcher lost, is
// told so (overflow) instead of getting a partial list.
#include <string>
#include <vector>

#include "../../../native/core/change_journal.h"
#include "../unit/unit.h"

using namespace shadowfs;

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}
}  // namespace

TEST(change_journal_reports_each_path_once_after_the_readers_mark) {
  ChangeJournal j;
  uint64_t seq = 1;
  bool overflow = true;
  CHECK(j.since(0, &seq, &overflow).empty());
  CHECK(seq == 0);
  CHECK(!overflow);
  j.record({"a.ts", "src/b.ts"}, false);
  j.record({"a.ts", "c.ts"}, false);
  uint64_t mark = 0;
  CHECK(join(j.since(0, &mark, &overflow)) == "a.ts,src/b.ts,c.ts");
  CHECK(!overflow);
  CHECK(mark == 4);
  CHECK(j.since(mark, &seq, &overflow).empty());
  j.record({"d.ts"}, false);
  CHECK(join(j.since(mark, &seq, &overflow)) == "d.ts");
  CHECK(seq == 5);
}

TEST(change_journal_tells_a_reader_that_fell_behind) {
  ChangeJournal j(3);
  j.record({"1", "2"}, false);
  uint64_t mark = 0, seq = 0;
  bool overflow = false;
  j.since(0, &mark, &overflow);
  j.record({"3", "4", "5", "6"}, false);  // "3" is dropped: only three are kept
  CHECK(j.since(mark, &seq, &overflow).empty());
  CHECK(overflow);
  CHECK(join(j.since(3, &seq, &overflow)) == "4,5,6");
  CHECK(!overflow);
}

TEST(change_journal_overflow_from_the_watcher_reaches_every_reader_behind_it) {
  ChangeJournal j;
  j.record({"a"}, false);
  uint64_t mark = 0, seq = 0;
  bool overflow = false;
  j.since(0, &mark, &overflow);
  j.record({}, true);
  j.record({"b"}, false);
  CHECK(j.since(mark, &seq, &overflow).empty());
  CHECK(overflow);
  uint64_t after = seq;
  j.record({"c"}, false);
  CHECK(join(j.since(after, &seq, &overflow)) == "c");
  CHECK(!overflow);
}
