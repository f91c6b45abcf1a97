// The process's memory budget for layer contents, and the pack file that small evicted contents
// share (budget.h says why and how).
#include "budget.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <queue>
#include <thread>

#include "model.h"

namespace shadowfs {

namespace {

// Slots of the pack file: 2^kMinShift to 2^kMaxShift bytes.
constexpr unsigned kMinShift = 8;
constexpr unsigned kMaxShift = 20;
constexpr uint64_t kMaxPacked = 1ull << kMaxShift;

unsigned slotShift(uint64_t n) {
  unsigned s = kMinShift;
  while ((1ull << s) < n) ++s;
  return s;
}

}  // namespace

// One pack file and its free slots. The file is created on the first slot; it never shrinks
// (a freed slot is reused by the next content of its size): the pack is as big as the most
// small contents that were on disk at once, rounded up to their slots.
class Pack {
 public:
  explicit Pack(std::shared_ptr<SpillStore> store) : store_(std::move(store)) {}
  int alloc(unsigned shift, uint64_t* off) {
    std::lock_guard<std::mutex> g(mu_);
    if (!file_) {
      if (int e = store_->create(&file_)) return e;
    }
    auto& free = free_[shift - kMinShift];
    if (!free.empty()) {
      *off = free.back();
      free.pop_back();
      return 0;
    }
    *off = end_;
    end_ += 1ull << shift;
    return 0;
  }
  void release(unsigned shift, uint64_t off) {
    std::lock_guard<std::mutex> g(mu_);
    free_[shift - kMinShift].push_back(off);
  }
  // Set by the first alloc, before any slot exists, and never changed: no lock. pread and pwrite
  // of disjoint slots may run on many threads at once (positioned I/O).
  SpillFile& file() { return *file_; }
  uint64_t bytes() const {
    std::lock_guard<std::mutex> g(mu_);
    return end_;
  }
  std::shared_ptr<SpillStore> store() const { return store_; }

 private:
  mutable std::mutex mu_;  // a leaf
  std::shared_ptr<SpillStore> store_;
  std::unique_ptr<SpillFile> file_;
  uint64_t end_ = 0;
  std::vector<uint64_t> free_[kMaxShift - kMinShift + 1];
};

namespace {

// A content in a slot of the pack (or, once it outgrew the largest slot, in a file of its own).
// Its users hold the inode's content lock: exclusively to write, shared to read (reads change
// nothing here).
class PackedFile final : public SpillFile {
 public:
  PackedFile(std::shared_ptr<Pack> pack, unsigned shift, uint64_t off)
      : pack_(std::move(pack)), shift_(shift), off_(off) {}
  ~PackedFile() override {
    if (shift_) pack_->release(shift_, off_);
  }
  PackedFile(const PackedFile&) = delete;
  PackedFile& operator=(const PackedFile&) = delete;

  int pread(char* buf, size_t size, uint64_t off, size_t* got) override {
    if (own_) return own_->pread(buf, size, off, got);
    *got = 0;
    if (off >= size_) return 0;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, size_ - off));
    return pack_->file().pread(buf, n, off_ + off, got);
  }
  // A slot's bytes sit at an offset of the shared file: only a content grown into a file of its
  // own is read by descriptor.
  int readDescriptor() override { return own_ ? own_->readDescriptor() : -1; }
  int pwrite(const char* buf, size_t size, uint64_t off) override {
    if (own_) return own_->pwrite(buf, size, off);
    const uint64_t end = off + size;
    if (end > cap()) {
      if (int e = grow(end)) return e;
      if (own_) return own_->pwrite(buf, size, off);
    }
    if (off > size_) {
      if (int e = zero(size_, off)) return e;
    }
    if (int e = pack_->file().pwrite(buf, size, off_ + off)) return e;
    size_ = std::max(size_, end);
    return 0;
  }
  int truncate(uint64_t size) override {
    if (own_) return own_->truncate(size);
    if (size > cap()) {
      if (int e = grow(size)) return e;
      if (own_) return own_->truncate(size);
    }
    // A slot reused holds an older content's bytes: what a file grows into reads as zeros.
    if (size > size_) {
      if (int e = zero(size_, size)) return e;
    }
    size_ = size;
    return 0;
  }
  int dataExtents(uint64_t size, size_t max, std::vector<Extent>* out) override {
    if (own_) return own_->dataExtents(size, max, out);
    return ENOSYS;  // a slot is small: the whole content counts as data
  }

 private:
  uint64_t cap() const { return shift_ ? 1ull << shift_ : 0; }
  int zero(uint64_t from, uint64_t to) {
    static const char zeros[4096] = {};
    while (from < to) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof zeros, to - from));
      if (int e = pack_->file().pwrite(zeros, n, off_ + from)) return e;
      from += n;
    }
    return 0;
  }
  // Room for `n` bytes: a bigger slot, or past the largest one a file of its own. The content
  // moves; the old slot is freed only once the move succeeded.
  int grow(uint64_t n) {
    std::vector<char> old(static_cast<size_t>(size_));
    size_t got = 0;
    if (size_) {
      if (int e = pack_->file().pread(old.data(), old.size(), off_, &got)) return e;
      if (got != old.size()) return EIO;
    }
    if (n > kMaxPacked) {
      std::unique_ptr<SpillFile> f;
      if (int e = pack_->store()->create(&f)) return e;
      if (size_) {
        if (int e = f->pwrite(old.data(), old.size(), 0)) return e;
      }
      if (int e = f->truncate(size_)) return e;
      pack_->release(shift_, off_);
      shift_ = 0;
      own_ = std::move(f);
      return 0;
    }
    const unsigned shift = slotShift(n);
    uint64_t off = 0;
    if (int e = pack_->alloc(shift, &off)) return e;
    if (size_) {
      if (int e = pack_->file().pwrite(old.data(), old.size(), off)) {
        pack_->release(shift, off);
        return e;
      }
    }
    pack_->release(shift_, off_);
    shift_ = shift;
    off_ = off;
    return 0;
  }

  std::shared_ptr<Pack> pack_;
  unsigned shift_;  // 0 once the content lives in own_
  uint64_t off_;
  uint64_t size_ = 0;
  std::unique_ptr<SpillFile> own_;
};

}  // namespace

Spiller::Spiller(std::unique_ptr<SpillStore> store)
    : store_(std::move(store)), pack_(std::make_shared<Pack>(store_)) {}
Spiller::~Spiller() = default;

int Spiller::createFile(std::unique_ptr<SpillFile>* out) { return store_->create(out); }

int Spiller::createFor(uint64_t size, std::unique_ptr<SpillFile>* out) {
  if (size > kMaxPacked) return store_->create(out);
  const unsigned shift = slotShift(std::max<uint64_t>(size, 1));
  uint64_t off = 0;
  if (int e = pack_->alloc(shift, &off)) return e;
  *out = std::make_unique<PackedFile>(pack_, shift, off);
  return 0;
}

uint64_t Spiller::packBytes() const { return pack_->bytes(); }

uint64_t memoryOf(const Inode* in) {
  if (in->type != FileType::Regular || in->inLower()) return 0;
  if (in->mo() && in->mo()->spill) {
    // A memory file (memfd) holds whole pages.
    return in->mo()->spill->inMemory() ? (in->size + 4095) & ~uint64_t{4095} : 0;
  }
  if (!in->u.data) return 0;
  return in->dataCap();
}

int spillContent(Spiller& to, Inode* in, bool packed) {
  std::unique_ptr<SpillFile> f;
  int e = packed ? to.createFor(in->size, &f) : to.createFile(&f);
  if (e) return e;
  SpillFile* mem = in->mo() ? in->mo()->spill.get() : nullptr;
  if (mem && !mem->inMemory()) return 0;  // already on disk
  if (mem) {
    // Out of a memory file (no open the kernel serves holds it: Inode::kKernelHeld). Only its
    // data moves: a sparse file the kernel wrote stays sparse on disk.
    std::vector<Extent> extents;
    if (mem->dataExtents(in->size, 4096, &extents) != 0) extents.assign(1, Extent{0, in->size});
    std::vector<char> buf(1 << 20);
    for (const Extent& x : extents) {
      const uint64_t end = std::min<uint64_t>(x.off + x.len, in->size);
      for (uint64_t off = x.off; off < end;) {
        size_t got = 0;
        const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), end - off));
        if ((e = mem->pread(buf.data(), want, off, &got))) return e;
        if (!got) break;  // shorter than its size: the rest reads as zeros
        if ((e = f->pwrite(buf.data(), got, off))) return e;
        off += got;
      }
    }
    if ((e = f->truncate(in->size))) return e;
  } else if (in->size) {
    e = f->pwrite(in->u.data, static_cast<size_t>(in->size), 0);
    if (e) return e;
  }
  in->more().spill = std::move(f);
  std::free(in->u.data);
  in->u.data = nullptr;
  in->clear(Inode::kGrown);
  return 0;
}

ContentBudget& ContentBudget::process() {
  static ContentBudget* b = new ContentBudget();  // never destroyed: inodes may outlive statics
  return *b;
}

void ContentBudget::setLimit(uint64_t bytes) {
  limit_.store(bytes, std::memory_order_relaxed);
  if (nearlyFull()) kick();
}

void ContentBudget::charge(uint64_t was, uint64_t now) {
  if (was == now) return;
  inMemory_.fetch_add(now - was, std::memory_order_relaxed);  // modular: a decrease too
  if (!was) contents_.fetch_add(1, std::memory_order_relaxed);
  if (!now) contents_.fetch_sub(1, std::memory_order_relaxed);
}

void ContentBudget::enlist(Overlay* ov) {
  std::lock_guard<std::mutex> g(regMu_);
  overlays_.push_back(ov);
}

void ContentBudget::unlist(Overlay* ov) {
  std::lock_guard<std::mutex> g(regMu_);  // waits for a walk of `ov` to end
  overlays_.erase(std::remove(overlays_.begin(), overlays_.end(), ov), overlays_.end());
}

void ContentBudget::kick() {
  std::lock_guard<std::mutex> g(wakeMu_);
  kicked_ = true;
  if (!started_) {
    started_ = true;
    std::thread([this] { run(); }).detach();  // lives as long as the process
  }
  wake_.notify_one();
}

// The evictor thread: sleeps until a change finds the process nearly at its budget, then spills
// the least recently changed contents until a quarter of the budget is free (so that it does not
// wake again at the very next write).
void ContentBudget::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> g(wakeMu_);
      wake_.wait(g, [this] { return kicked_; });
      kicked_ = false;
    }
    while (nearlyFull()) {
      if (!evictOnce()) {
        // Everything left is busy (being written, copied up): try again shortly.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        break;
      }
    }
  }
}

bool ContentBudget::evictOnce() {
  const uint64_t limit = this->limit();
  const uint64_t target = limit - limit / 4;
  const uint64_t now = inMemory_.load(std::memory_order_relaxed);
  if (now <= target) return false;
  uint64_t excess = now - target;
  // The oldest contents (by ctime) that add up to the excess, at most kBatch per walk: a
  // max-heap of the coldest seen so far, its newest on top to be dropped first.
  constexpr size_t kBatch = 4096;
  struct Cold {
    int64_t ctime;
    uint64_t bytes;
    Ref<Inode> in;
    std::shared_ptr<Spiller> to;
    bool operator<(const Cold& o) const { return ctime < o.ctime; }
  };
  std::priority_queue<Cold> heap;
  uint64_t heapBytes = 0;
  {
    std::lock_guard<std::mutex> g(regMu_);
    for (Overlay* ov : overlays_) {
      std::shared_ptr<Spiller> to = ov->spiller();
      if (!to) continue;
      ov->forEachContentInMemory([&](Inode* in, int64_t ctime, uint64_t bytes) {
        if (!heap.empty() && heapBytes >= excess && ctime >= heap.top().ctime)
          return;
        heap.push(Cold{ctime, bytes, Ref<Inode>(in), to});
        heapBytes += bytes;
        // Drop the newest while the rest still cover the excess.
        while (heap.size() > kBatch || (heap.size() > 1 && heapBytes - heap.top().bytes >= excess)) {
          heapBytes -= heap.top().bytes;
          heap.pop();
        }
      });
    }
  }
  bool spilled = false;
  for (; !heap.empty(); heap.pop()) {
    const Cold& c = heap.top();
    Inode* in = c.in.get();
    SharedMutex& m = in->cmu();
    if (!m.try_lock()) continue;  // busy: its user will charge it (and spill it if over)
    if (in->has(Inode::kKernelHeld)) {  // the kernel holds its file: it stays until closed
      m.unlock();
      continue;
    }
    const uint64_t was = memoryOf(in);
    if (was && spillContent(*c.to, in, true) == 0) {
      charge(was, memoryOf(in));
      noteSpilled(in->size);
      spilled = true;
    }
    m.unlock();
  }
  return spilled;
}

BudgetStats ContentBudget::stats() const {
  BudgetStats s;
  s.limitBytes = limit();
  s.inMemoryBytes = inMemory_.load(std::memory_order_relaxed);
  s.inMemoryContents = contents_.load(std::memory_order_relaxed);
  s.spilledContents = spilledContents_.load(std::memory_order_relaxed);
  s.spilledBytes = spilledBytes_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace shadowfs
