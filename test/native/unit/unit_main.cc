// Runs every registered C++ unit test (or those whose name contains argv[1]) and prints one line
// per case, the failures, and a closing "N passed, N failed, N skipped" line. Exit status 1 when
// a case failed. When $SHADOWFS_TEST_STATS names a file (npm test, see scripts/mocha-all.sh),
// the counts are added to the totals kept there, so the suite's last line includes them.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include "unit.h"

namespace {

// The stats file holds {"passes":N,"failures":N,"pending":N} (test/helpers/reporter.ts).
uint64_t field(const std::string& json, const char* key) {
  auto at = json.find(std::string("\"") + key + "\"");
  if (at == std::string::npos) return 0;
  at = json.find(':', at);
  return at == std::string::npos ? 0 : std::strtoull(json.c_str() + at + 1, nullptr, 10);
}

void addToStats(const char* file, uint64_t passed, uint64_t failed) {
  std::string json;
  {
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    json = s.str();
  }
  std::ofstream out(file, std::ios::trunc);
  out << "{\"passes\":" << field(json, "passes") + passed
      << ",\"failures\":" << field(json, "failures") + failed
      << ",\"pending\":" << field(json, "pending") << "}";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string filter = argc > 1 ? argv[1] : "";
  uint64_t passed = 0, failed = 0;
  std::vector<std::string> report;
  std::printf("\n  C++ unit tests (%s)\n", argc > 0 ? argv[0] : "");
  for (const auto& c : unit::registry()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    unit::failures().clear();
    try {
      c.fn();
    } catch (const unit::Abort&) {
      // REQUIRE failed: already recorded.
    } catch (const std::exception& e) {
      unit::failures().push_back(std::string("exception: ") + e.what());
    } catch (...) {
      unit::failures().push_back("unknown exception");
    }
    if (unit::failures().empty()) {
      ++passed;
      std::printf("    ok    %s\n", c.name.c_str());
    } else {
      ++failed;
      std::printf("    FAIL  %s\n", c.name.c_str());
      for (const auto& f : unit::failures()) report.push_back(c.name + ": " + f);
    }
    std::fflush(stdout);
  }
  if (!report.empty()) {
    std::printf("\n  failures:\n");
    for (const auto& r : report) std::printf("    %s\n", r.c_str());
  }
  if (passed + failed == 0) {
    std::printf("\n  no test matched \"%s\"\n", filter.c_str());
    return 1;
  }
  std::printf("\nC++ unit tests: %llu passed, %llu failed, 0 skipped\n",
              static_cast<unsigned long long>(passed), static_cast<unsigned long long>(failed));
  if (const char* stats = std::getenv("SHADOWFS_TEST_STATS"); stats && *stats)
    addToStats(stats, passed, failed);
  // The suite repeats every failure at its end (scripts/mocha-all.sh), from this file.
  if (const char* recap = std::getenv("SHADOWFS_TEST_FAILURES"); recap && *recap && !report.empty()) {
    std::ofstream out(recap, std::ios::app);
    const char* pass = std::getenv("SHADOWFS_TEST_PASS");
    for (const auto& r : report) out << "[" << (pass && *pass ? pass : "C++") << "] " << r << "\n";
  }
  return failed ? 1 : 0;
}
