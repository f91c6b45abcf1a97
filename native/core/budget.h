// The memory budget of layer contents (issue #32): one per process, shared by every overlay (all
// shadows, all layers), so several agents that each run `npm ci` cannot together exhaust the
// machine. Past the budget, contents move to spill files (spill.h) and stay there until the file
// is dropped: reads and writes of a spilled content go to its spill file, every other semantic is
// unchanged (the rest of the core sees a content with a SpillFile, as for a file past the spill
// threshold).
//
// Which contents go: the least recently changed (by ctime, which every change of the file sets),
// found by an evictor thread that walks the layers of every overlay when the process passes seven
// eighths of its budget and spills the oldest until a quarter of the budget is free again. A
// change that finds the process over the whole budget spills the content it just changed, so the
// budget also holds while the evictor catches up with a fast writer. No per-content record is kept
// for this (a list or map entry would cost 40 to 100 bytes per file, where issue #18 allows 128 of
// bookkeeping per path): the total is one counter, kept by every change of a content.
//
// Small contents do not get a file each (an open descriptor and a file-system object per
// content, thousands for one `npm ci`): they share one pack file per overlay (Spiller), in slots
// of power-of-two sizes from 256 bytes to 1 MiB that freed contents leave for the next ones. A
// content that grows past its slot moves to a bigger one, and past 1 MiB to a file of its own.
//
// Threads and locks: ContentBudget's registry lock comes before every lock of model.h's order
// (the evictor holds it while it walks an overlay's layers, so the overlay stays alive); its other
// locks and Pack's are leaves. The evictor never waits for a content lock: it try-locks and skips
// contents that are busy.
#pragma once

#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "spill.h"

namespace shadowfs {

struct Inode;
class Overlay;
class Pack;

// Where one overlay's contents go when the budget evicts them: a slot of its pack file when small,
// else a file of its own from its SpillStore.
class Spiller {
 public:
  explicit Spiller(std::unique_ptr<SpillStore> store);
  ~Spiller();
  Spiller(const Spiller&) = delete;
  Spiller& operator=(const Spiller&) = delete;
  // A file of its own (big contents, and the spill threshold's).
  int createFile(std::unique_ptr<SpillFile>* out);
  // An empty spill file with room for `size` bytes: packed when that fits a slot.
  int createFor(uint64_t size, std::unique_ptr<SpillFile>* out);
  // A file in memory with a descriptor (SpillStore::createInMemory).
  int createInMemory(std::unique_ptr<SpillFile>* out) { return store_->createInMemory(out); }
  uint64_t packBytes() const;  // the pack file's size (slots in use and free)

 private:
  std::shared_ptr<SpillStore> store_;
  std::shared_ptr<Pack> pack_;
};

// The bytes `in` holds in memory: its content's allocation, 0 when the content is in the folder
// or spilled. The caller holds in's content lock, or `in` is not published.
uint64_t memoryOf(const Inode* in);
// Moves `in`'s content from memory to a file of `to` (a packed one when `packed`). The caller
// holds in's content lock exclusively, or `in` is not published; it tells the budget.
int spillContent(Spiller& to, Inode* in, bool packed);

struct BudgetStats {
  uint64_t limitBytes = UINT64_MAX;  // UINT64_MAX: no budget
  uint64_t inMemoryBytes = 0;        // contents held in memory by every overlay of the process
  uint64_t inMemoryContents = 0;     // how many contents that is
  uint64_t spilledContents = 0;      // contents the budget moved to disk, since the start
  uint64_t spilledBytes = 0;         // their sizes when they moved
};

class ContentBudget {
 public:
  static ContentBudget& process();  // the process's one budget (never destroyed)

  void setLimit(uint64_t bytes);
  uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  bool over() const {
    return inMemory_.load(std::memory_order_relaxed) > limit_.load(std::memory_order_relaxed);
  }
  // Past seven eighths of the budget the evictor starts, so that writers seldom find it full.
  bool nearlyFull() const {
    const uint64_t limit = limit_.load(std::memory_order_relaxed);
    return inMemory_.load(std::memory_order_relaxed) > limit - limit / 8;
  }
  // A content's bytes in memory went from `was` to `now` (memoryOf before and after a change).
  void charge(uint64_t was, uint64_t now);
  // Overlays whose contents the evictor may spill (those with a spill store).
  void enlist(Overlay* ov);
  void unlist(Overlay* ov);
  // Over the budget: wakes the evictor (started on first use).
  void kick();
  void noteSpilled(uint64_t bytes) {
    spilledContents_.fetch_add(1, std::memory_order_relaxed);
    spilledBytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  BudgetStats stats() const;

 private:
  ContentBudget() = default;
  void run();       // the evictor thread
  bool evictOnce();  // one walk and its spills; false when nothing could be spilled
  std::mutex regMu_;  // rank 0 (see above): overlays_
  std::vector<Overlay*> overlays_;
  std::mutex wakeMu_;  // a leaf: started_, kicked_
  std::condition_variable wake_;
  bool started_ = false;
  bool kicked_ = false;
  std::atomic<uint64_t> limit_{UINT64_MAX};
  std::atomic<uint64_t> inMemory_{0};
  std::atomic<uint64_t> contents_{0};
  std::atomic<uint64_t> spilledContents_{0};
  std::atomic<uint64_t> spilledBytes_{0};
};

}  // namespace shadowfs
