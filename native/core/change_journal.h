// A bounded record of the folder changes a backend's watcher reported, for readers that poll
// (the diagnostics service asks "what changed in the folder since I last looked?" before each
// question to a language server). OS-free, thread-safe: the watcher's thread appends, any thread
// reads.
//
// Every reported path gets the next sequence number. A reader keeps the last number it saw and
// asks for what came after it; when the journal has already dropped some of that (it keeps the
// newest `capacity` entries) or the watcher lost events itself, the answer says `overflow`:
// anything may have changed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace shadowfs {

class ChangeJournal {
 public:
  explicit ChangeJournal(size_t capacity = 4096) : capacity_(capacity ? capacity : 1) {}

  // Watcher thread.
  void record(const std::vector<std::string>& paths, bool overflow) {
    std::lock_guard<std::mutex> lock(mu_);
    if (overflow) {
      // Nothing before this point can be trusted to be complete: readers behind it overflow.
      entries_.clear();
      ++seq_;
      floor_ = seq_;
    }
    for (const std::string& p : paths) {
      entries_.emplace_back(++seq_, p);
      if (entries_.size() > capacity_) {
        floor_ = entries_.front().first;
        entries_.pop_front();
      }
    }
  }

  // Any thread. Paths recorded after sequence number `since` (each once, oldest first), the
  // current number in *seq, and whether some changes after `since` are no longer known.
  std::vector<std::string> since(uint64_t since, uint64_t* seq, bool* overflow) const {
    std::lock_guard<std::mutex> lock(mu_);
    *seq = seq_;
    *overflow = since < floor_;
    std::vector<std::string> out;
    if (*overflow) return out;
    // Each path once, at its first report after `since`.
    std::unordered_set<std::string> seen;
    auto first = std::upper_bound(entries_.begin(), entries_.end(), since,
                                  [](uint64_t s, const auto& e) { return s < e.first; });
    for (auto it = first; it != entries_.end(); ++it)
      if (seen.insert(it->second).second) out.push_back(it->second);
    return out;
  }

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  uint64_t seq_ = 0;
  uint64_t floor_ = 0;  // readers whose `since` is below this have missed something
  std::deque<std::pair<uint64_t, std::string>> entries_;
};

}  // namespace shadowfs
