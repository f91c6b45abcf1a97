// File contents in a layer: in memory, or in a spill file past the threshold or the memory budget
// (budget.h, which every change of a content here tells); and copy-up, which
// takes a file's content from the folder as a consistent snapshot and records where it came
// from (the Base). Everything here runs with the inode's content lock (cmu) held by the caller,
// except takeContent, which takes it itself; no layer lock is ever held while the folder's file
// is read.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>
#include <vector>

#include "budget.h"
#include "hash.h"
#include "model.h"

namespace shadowfs {

namespace {

bool sameVersion(const Attr& a, const Attr& b) {
  return a.ino == b.ino && a.size == b.size && a.mtime == b.mtime && a.ctime == b.ctime;
}

// Test hook (test/responsive.test.ts, test/uring.test.ts): with SHADOWFS_TEST_HOLD_COPYUP=<file>
// in the environment, a copy-up that reads the folder's file first creates <file>.held, then
// waits while <file> exists, holding what a long copy-up holds. Tests use it to keep a copy-up
// going for as long as they like, instead of timing a big one. Read at each copy-up (tests set
// it after the process started); without it, one getenv.
void holdCopyUpForTests() {
  const char* hold = std::getenv("SHADOWFS_TEST_HOLD_COPYUP");
  if (!hold || !*hold) return;
  const std::filesystem::path file(hold);
  std::error_code ec;
  std::ofstream(std::filesystem::path(file).concat(".held")).put('\n');
  while (std::filesystem::exists(file, ec)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

uint64_t pow2at(uint64_t v) {
  uint64_t p = 16;
  while (p < v && p < (1ull << 62)) p <<= 1;
  return p < v ? v : p;
}

SpillFile* spillOf(const Inode* in) { return in->mo() ? in->mo()->spill.get() : nullptr; }

// In a spill file on disk (not a memory file the budget still counts as memory).
bool onDisk(const Inode* in) {
  SpillFile* sp = spillOf(in);
  return sp && !sp->inMemory();
}

// The content's size changes: cmu is held exclusively by the caller; mmu for the readers of
// the attributes.
void setContentSize(Inode* in, uint64_t size) {
  MetaLock m(in->mmu(), LockRank::Meta);
  in->size = size;
}

// Makes room for `size` bytes in memory; `exact`: no room to grow. What is new is zero-filled
// up to `zeroTo` (a writer's offset: the bytes past it are the writer's to copy in).
int reserveData(Inode* in, uint64_t size, bool exact, uint64_t zeroTo = UINT64_MAX) {
  const uint64_t old = in->size;
  if (size > in->dataCap()) {
    const uint64_t cap = exact ? size : pow2at(size);
    if (cap > SIZE_MAX) return ENOSPC;
    void* p = std::realloc(in->u.data, static_cast<size_t>(cap));
    if (!p) return ENOSPC;  // out of memory, as tmpfs says
    in->u.data = static_cast<char*>(p);
    if (exact) {
      in->clear(Inode::kGrown);
    } else {
      in->set(Inode::kGrown);
    }
  }
  const uint64_t zeroEnd = std::min(size, zeroTo);
  if (zeroEnd > old) std::memset(in->u.data + old, 0, static_cast<size_t>(zeroEnd - old));
  return 0;
}

}  // namespace

void Overlay::log(const std::string& line) const {
  if (log_) log_(line);
}

int Overlay::spillOut(Inode* in, bool packed) {
  // A file the kernel holds for an open stays where it is until the last one is released.
  if (onDisk(in) || !spill_ || in->has(Inode::kKernelHeld)) return 0;
  const uint64_t was = memoryOf(in);
  int e = spillContent(*spill_, in, packed);
  ContentBudget::process().charge(was, memoryOf(in));
  return e;
}

void Overlay::accounted(Inode* in, uint64_t was) {
  ContentBudget& budget = ContentBudget::process();
  const uint64_t now = memoryOf(in);
  budget.charge(was, now);
  if (!budget.nearlyFull()) return;
  budget.kick();
  if (!budget.over()) return;
  // The evictor spills the least recently changed contents; until it has, the one that went over
  // leaves memory itself (its lock is ours), so the budget holds after every change.
  if (now && spill_ && !in->has(Inode::kKernelHeld)) {
    if (int e = spillOut(in, true)) {
      log("memory budget: cannot spill a content of " + std::to_string(in->size) +
          " bytes: " + std::strerror(e));
    } else {
      budget.noteSpilled(in->size);
    }
  }
}

void Overlay::forEachContentInMemory(
    const std::function<void(Inode*, int64_t, uint64_t)>& fn) {
  std::vector<std::shared_ptr<Layer>> layers;
  {
    ReadLock reg(mu_, LockRank::Registry);
    for (auto& [name, L] : layers_) layers.push_back(L);
  }
  struct Walk {
    const std::function<void(Inode*, int64_t, uint64_t)>& fn;
    void run(const Node* n) {
      for (Node* c : n->kids()) {
        if (c->dir()) {
          run(c);
          continue;
        }
        Inode* in = c->inode();
        if (!in || in != c || in->type != FileType::Regular) continue;  // a second name: once
        if (in->has(Inode::kKernelHeld)) continue;  // the kernel holds its file: it stays
        SharedMutex& m = in->cmu();
        if (!m.try_lock_shared()) continue;
        const uint64_t bytes = memoryOf(in);
        int64_t ctime = 0;
        if (bytes) {
          MetaLock meta(in->mmu(), LockRank::Meta);
          ctime = static_cast<int64_t>(nsOf(in->ctime()));
        }
        m.unlock_shared();
        if (bytes) fn(in, ctime, bytes);
      }
    }
  };
  for (auto& L : layers) {
    ReadLock lock(L->mu, LockRank::Layer);
    Walk{fn}.run(L->root.get());
  }
}

int Overlay::contentWrite(Inode* in, const char* buf, size_t size, uint64_t off) {
  const uint64_t was = memoryOf(in);
  const uint64_t end = off + size;
  if (!onDisk(in) && end > spillThreshold_) {
    int e = spillOut(in);
    if (e) return e;
  }
  if (SpillFile* sp = spillOf(in)) {
    int e = sp->pwrite(buf, size, off);
    if (e) return e;
    if (in->has(Inode::kKernelWrites)) return absorbKernelWrites(in), 0;  // the file's size,
                                                                           // and the budget
    if (end > in->size) setContentSize(in, end);
    if (sp->inMemory()) accounted(in, was);
    return 0;
  }
  if (end > in->size) {
    int e = reserveData(in, end, false, off);
    if (e) {
      accounted(in, was);  // realloc may have moved nothing, or grown the block
      return e;
    }
  }
  if (size) std::memcpy(in->u.data + off, buf, size);
  if (end > in->size) setContentSize(in, end);
  accounted(in, was);
  return 0;
}

int Overlay::contentTruncate(Inode* in, uint64_t size) {
  const uint64_t was = memoryOf(in);
  if (!onDisk(in) && size > spillThreshold_) {
    int e = spillOut(in);
    if (e) return e;
  }
  if (SpillFile* sp = spillOf(in)) {
    int e = sp->truncate(size);
    if (e) return e;
    setContentSize(in, size);
    if (in->has(Inode::kKernelWrites)) absorbKernelWrites(in);
    if (sp->inMemory()) accounted(in, was);
    return 0;
  }
  if (size == 0) {
    std::free(in->u.data);
    in->u.data = nullptr;
    in->clear(Inode::kGrown);
  } else if (size > in->size) {
    if (int e = reserveData(in, size, true)) {
      accounted(in, was);
      return e;
    }
  }
  setContentSize(in, size);
  accounted(in, was);
  return 0;
}

int Overlay::contentRead(const Inode* in, char* buf, size_t size, uint64_t off, size_t* got,
                         DescriptorReader* via) {
  *got = 0;
  const uint64_t total = in->size;
  if (off >= total) return 0;
  size = static_cast<size_t>(std::min<uint64_t>(size, total - off));
  if (SpillFile* sp = spillOf(in)) {
    const int fd = via ? sp->readDescriptor() : -1;
    return fd >= 0 ? via->read(fd, off, size, got) : sp->pread(buf, size, off, got);
  }
  std::memcpy(buf, in->u.data + off, size);
  *got = size;
  return 0;
}

// Read-only and write opens the kernel serves from the content's own file (FUSE passthrough,
// fuse_ll) both come here. The content moves into a memory file first if it is in memory
// (cheap to make: a disk file costs a journalled inode, hundreds of microseconds on ext4; still
// counted as memory by the budget). Then the handle holds the file (kernelDescriptor): it stays
// the content's, in place, until the last such handle is released.
int Overlay::spilledContentDescriptor(Handle* h) {
  if (!h || h->writable || h->lower >= 0) return -1;
  return kernelDescriptor(h, false);
}

int Overlay::kernelWriteDescriptor(Handle* h, bool killPriv) {
  if (!h || !h->writable || h->lower >= 0) return -1;
  return kernelDescriptor(h, killPriv);
}

int Overlay::kernelDescriptor(Handle* h, bool killPriv) {
  if (h->kernelHeld || !spill_) return -1;
  Inode* in = h->inode.get();
  if (!in || in->type != FileType::Regular) return -1;
  int fd = -1;
  {
    WriteLock c(in->cmu(), LockRank::Content);
    if (in->inLower()) return -1;
    SpillFile* sp = spillOf(in);
    if (!sp) {
      // The store bounds how many memory files exist (EMFILE past its limit: this open is then
      // served through us, as before).
      uint64_t was = 0;
      if (intoMemoryFile(in, &was)) return -1;
      accounted(in, was);  // over the budget: it may go on to disk at once (then that file)
      sp = spillOf(in);
      if (!sp) return -1;
    }
    uint64_t size = 0;
    Timespec mtime, ctime;
    if (sp->stat(&size, &mtime, &ctime) && h->writable) return -1;
    fd = sp->duplicateDescriptor();  // -1 for a packed slot
    if (fd < 0) return -1;
    in->set(Inode::kKernelHeld);
    std::lock_guard k(kwMu_);
    KernelHeld& w = kw_[in];
    if (!w.in) w.in = h->inode;
    w.handles++;
    if (h->writable) {
      if (w.writers++ == 0) {
        // From here on what the file holds is what the kernel may have written.
        w.size = size;
        w.mtime = mtime;
        in->set(Inode::kKernelWrites);
        kwWriters_.fetch_add(1, std::memory_order_acq_rel);
      }
      w.killPriv = w.killPriv || killPriv;
    }
  }
  h->kernelHeld = true;
  return fd;
}

int Overlay::intoMemoryFile(Inode* in, uint64_t* was) {
  std::unique_ptr<SpillFile> f;
  if (int e = spill_->createInMemory(&f)) return e;
  if (in->size && in->u.data) {
    if (int e = f->pwrite(in->u.data, static_cast<size_t>(in->size), 0)) return e;
  }
  if (int e = f->truncate(in->size)) return e;
  *was = memoryOf(in);
  in->more().spill = std::move(f);
  std::free(in->u.data);
  in->u.data = nullptr;
  in->clear(Inode::kGrown);
  return 0;
}

void Overlay::syncKernelWrites() {
  if (kwWriters_.load(std::memory_order_acquire) == 0) return;
  std::vector<std::shared_ptr<Inode>> ins;
  {
    std::lock_guard k(kwMu_);
    for (auto& [p, w] : kw_)
      if (w.writers) ins.push_back(w.in);
  }
  for (auto& in : ins) syncKernelWrite(in.get());
}

// The file of a content the kernel holds never changes while it does (spillOut, the evictor,
// contentAssign and putFile leave it in place), so it can be looked at without the content
// lock; the lock is taken only when the file changed, to take its size and times.
bool Overlay::kernelWroteSince(Inode* in) {
  if (!in->has(Inode::kKernelWrites)) return false;
  SpillFile* sp = spillOf(in);
  uint64_t size = 0;
  Timespec mtime, ctime;
  if (!sp || sp->stat(&size, &mtime, &ctime)) return false;
  std::lock_guard k(kwMu_);
  auto it = kw_.find(in);
  return it != kw_.end() && it->second.writers && (it->second.size != size || it->second.mtime != mtime);
}

void Overlay::syncKernelWrite(Inode* in) {
  if (!kernelWroteSince(in)) return;
  WriteLock c(in->cmu(), LockRank::Content);
  absorbKernelWrites(in);
}

// The caller holds in's content lock exclusively.
void Overlay::absorbKernelWrites(Inode* in) {
  if (!in->has(Inode::kKernelWrites)) return;
  SpillFile* sp = spillOf(in);
  uint64_t size = 0;
  Timespec mtime, ctime;
  if (!sp || sp->stat(&size, &mtime, &ctime)) return;
  bool killPriv;
  {
    std::lock_guard k(kwMu_);
    auto it = kw_.find(in);
    if (it == kw_.end() || !it->second.writers ||
        (it->second.size == size && it->second.mtime == mtime))
      return;
    it->second.size = size;
    it->second.mtime = mtime;
    killPriv = it->second.killPriv;
  }
  const uint64_t was = memoryOf(in);
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    in->size = size;
    in->setMtime(mtime);
    in->setCtime(ctime);
    // What the kernel does on a write by a caller without CAP_FSETID, which it cannot do here
    // (it clears the bits of its own file, not ours): set-user-ID goes, and set-group-ID when
    // the group may execute. Approximated by the openers' uids (one not root).
    if (killPriv && (in->perm & 06000)) {
      uint16_t p = static_cast<uint16_t>(in->perm & ~04000);
      if (p & 00010) p = static_cast<uint16_t>(p & ~02000);
      in->perm = p;
    }
  }
  if (sp->inMemory()) accounted(in, was);
}

void Overlay::endKernelHold(Handle* h) {
  Inode* in = h->inode.get();
  if (!h->kernelHeld || !in) return;
  h->kernelHeld = false;
  std::shared_ptr<Inode> last;  // dropped after the locks below
  WriteLock c(in->cmu(), LockRank::Content);
  if (h->writable) absorbKernelWrites(in);
  {
    std::lock_guard k(kwMu_);
    auto it = kw_.find(in);
    if (it == kw_.end()) return;
    KernelHeld& w = it->second;
    if (h->writable && w.writers > 0 && --w.writers == 0) {
      in->clear(Inode::kKernelWrites);
      w.killPriv = false;
      kwWriters_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (--w.handles > 0) return;
    last = std::move(w.in);
    kw_.erase(it);
    in->clear(Inode::kKernelHeld);
  }
  // The kernel holds the file no more: a content past the spill threshold goes to disk now,
  // as one the daemon wrote would have at its write; else the budget may move it now that it
  // can (over budget, this very content first).
  if (SpillFile* sp = spillOf(in); sp && sp->inMemory() && in->size > spillThreshold_) {
    if (int e = spillOut(in, false))
      log("passthrough: cannot move a content of " + std::to_string(in->size) +
          " bytes to disk: " + std::strerror(e));
  } else if (sp && sp->inMemory()) {
    accounted(in, memoryOf(in));
  }
}

int Overlay::contentAssign(Inode* in, const std::string& data) {
  if (in->has(Inode::kKernelHeld)) {
    // The kernel holds this file for an open file: the new content goes into it.
    if (int e = contentTruncate(in, 0)) return e;
    return contentWrite(in, data.data(), data.size(), 0);
  }
  ContentBudget::process().charge(memoryOf(in), 0);
  if (in->mo()) in->mo()->spill.reset();
  std::free(in->u.data);
  in->u.data = nullptr;
  in->clear(Inode::kGrown);
  setContentSize(in, 0);
  if (spill_ && data.size() > spillThreshold_) return contentWrite(in, data.data(), data.size(), 0);
  if (spill_ && data.size() > ContentBudget::process().limit()) {
    // Bigger than the whole budget: to disk without passing through memory.
    if (int e = spillOut(in, true)) return e;
    return contentWrite(in, data.data(), data.size(), 0);
  }
  if (!data.empty()) {
    int e = reserveData(in, data.size(), true);
    if (!e) {
      std::memcpy(in->u.data, data.data(), data.size());
      setContentSize(in, data.size());
    }
    accounted(in, 0);
    if (e) return e;
  }
  return 0;
}

// Copies A's file into the inode. The copy is a snapshot: A's file is checked before and after
// (inode, size, mtime, ctime, and that the name still leads to it); if anything moved, the copy
// is thrown away and taken again, up to kCopyUpTries times, then the operation fails with EIO
// and a log line rather than leave a file that is half old, half new. With keepContent false
// (O_TRUNC, a whole-file write) nothing is read, but the base is recorded all the same.
int Overlay::copyUp(Inode* in, bool keepContent) {
  SFS_ASSERT(!in->cmu().try_lock());  // the caller holds cmu exclusively
  if (!in->inLower()) return 0;
  std::string src;
  bool hadOwnMeta;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (!in->lowerPath(&src)) return 0;
    hadOwnMeta = in->ownMeta();
  }
  ensureOwnMeta(in, false, std::string());
  return copyIn(in, src, keepContent, hadOwnMeta);
}

// An inode not yet published may also come here with no folder path of its own (bindPending):
// its attributes are set by the caller, and dropLower() below has nothing to drop.
int Overlay::copyIn(Inode* in, const std::string& src, bool keepContent, bool hadOwnMeta) {
  Base base;
  std::string data;
  std::unique_ptr<SpillFile> spill;
  uint64_t size = 0;
  int e = 0;
  if (!keepContent) {
    Attr a;
    if (lower_->stat(src, &a) == 0) {
      base.ino = a.ino;
      base.size = a.size;
      base.mtime = a.mtime;
      base.ctime = a.ctime;
    }
  } else {
    holdCopyUpForTests();
    int tries = 0;
    for (;; ++tries) {
      if (tries == kCopyUpTries) {
        log("copy-up of " + src + " gave up after " + std::to_string(kCopyUpTries) +
            " tries: the file kept changing in the folder while it was read");
        return EIO;
      }
      LowerHandle h = -1;
      e = lower_->open(src, &h);
      if (e) return e == ENOENT ? EIO : e;
      Attr before, after, byName;
      e = lower_->fstat(h, &before);
      ContentHash hash;
      data.clear();
      spill.reset();
      size = 0;
      // Past the threshold, or bigger than the whole memory budget: straight to a spill file.
      const bool big = spill_ && (before.size > spillThreshold_ ||
                                  before.size > ContentBudget::process().limit());
      if (!e && big) e = spill_->createFile(&spill);
      if (!e && !big) {
        try {
          data.reserve(before.size);
        } catch (const std::exception&) {
          e = ENOSPC;
        }
      }
      std::vector<char> buf(1 << 20);
      while (!e) {
        size_t got = 0;
        e = lower_->pread(h, buf.data(), buf.size(), size, &got);
        if (e || got == 0) break;
        hash.update(buf.data(), got);
        if (big) {
          e = spill->pwrite(buf.data(), got, size);
        } else {
          try {
            data.append(buf.data(), got);
          } catch (const std::exception&) {
            e = ENOSPC;
          }
        }
        size += got;
      }
      if (!e) e = lower_->fstat(h, &after);
      lower_->close(h);
      if (e) return e;
      const bool stillThere = lower_->stat(src, &byName) == 0 && byName.ino == before.ino;
      if (sameVersion(before, after) && size == after.size && stillThere) {
        base.ino = after.ino;
        base.size = after.size;
        base.mtime = after.mtime;
        base.ctime = after.ctime;
        base.hashed = true;
        base.hash = hash.digest();
        break;
      }
    }
  }
  // Install (we hold cmu): the content, and the metadata that says where it lives.
  char* bytes = nullptr;
  if (!spill && !data.empty()) {
    bytes = static_cast<char*>(std::malloc(data.size()));
    if (!bytes) return ENOSPC;
    std::memcpy(bytes, data.data(), data.size());
  }
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    in->dropLower();
    in->u.data = bytes;
    in->clear(Inode::kGrown);
    if (spill) in->more().spill = std::move(spill);
    if (!hadOwnMeta && base.hashed) {
      // The attributes the file showed until now were A's live ones: keep those of the version
      // that was copied, not of the one seen before a retry.
      in->setMtime(base.mtime);
      in->setCtime(base.ctime);
    }
    in->size = size;
    in->setBase(base);
  }
  accounted(in, 0);  // the content was the folder's: nothing of it was in memory
  return 0;
}

int Overlay::copyOfOpenFile(LowerHandle fd, const std::string& name, bool keepContent,
                            Ref<Inode>* out) {
  Attr a;
  if (int e = lower_->fstat(fd, &a)) return e;
  NodeRef n = Node::make(FileType::Regular, name);
  n->ino = a.ino;  // unpublished: fstat through either handle shows the same file
  n->setSnap(a);
  n->size = 0;   // the content, written below, sets it
  n->links = 0;  // no name in any layer
  n->set(Inode::kOwnMeta | Inode::kOwnXattrs);
  WriteLock c(n->cmu(), LockRank::Content);  // unpublished: only for the content functions
  if (keepContent) {
    std::vector<char> buf(1 << 20);
    for (uint64_t off = 0;;) {
      size_t got = 0;
      if (int e = lower_->pread(fd, buf.data(), buf.size(), off, &got)) return e;
      if (got == 0) break;  // the end, or the folder's file shrank meanwhile: take what it has
      if (int e = contentWrite(n.get(), buf.data(), got, off)) return e;
      off += got;
    }
  }
  {
    // contentWrite sized it; the times stay the file's own until the caller's change.
    MetaLock m(n->mmu(), LockRank::Meta);
    n->setMtime(a.mtime);
    n->setCtime(a.ctime);
  }
  *out = Ref<Inode>(n.get());
  return 0;
}

int Overlay::takeContent(Inode* in, bool keepContent) {
  WriteLock c(in->cmu(), LockRank::Content);
  return copyUp(in, keepContent);
}

// `c` is new and not yet published: no lock of its own is needed, but the content functions
// take its metadata stripe to set its size (harmless).
int Overlay::cloneInto(const Inode& in, Inode* c) {
  ReadLock content(in.cmu(), LockRank::Content);
  bool inLower;
  uint64_t size;
  {
    MetaLock m(in.mmu(), LockRank::Meta);
    const uint16_t keep = Inode::kOwnMeta | Inode::kOwnXattrs;
    if (auto b = in.base()) c->setBase(*b);
    c->set(in.flags.load() & keep);
    std::string lp;
    inLower = in.lowerPath(&lp);
    if (inLower) c->setLower(lp, in.has(Inode::kLowerAtName) ? in.u.ldir : nullptr);
    c->setSnap(in.snap());
    if (in.mo()) {
      if (!in.mo()->xattrs.empty()) c->more().xattrs = in.mo()->xattrs;
      
    }
    size = in.size;
  }
  // Only a regular file has content: a directory's `u` holds its children (the clone has its
  // own already) and its size is only what stat shows; a symlink's target is in More.
  if (inLower || in.type != FileType::Regular) {
    if (in.type != FileType::Regular) c->size = size;
    return 0;
  }
  SpillFile* sp = spillOf(&in);
  if (!sp) {
    c->size = 0;
    if (size == 0) return 0;
    if (int e = reserveData(c, size, true)) return e;
    std::memcpy(c->u.data, in.u.data, static_cast<size_t>(size));
    c->size = size;
    accounted(c, 0);
    return 0;
  }
  c->size = 0;
  {
    std::vector<char> buf(1 << 20);
    for (uint64_t off = 0; off < size;) {
      size_t got = 0;
      int e = sp->pread(buf.data(), buf.size(), off, &got);
      if (e) return e;
      if (got == 0) break;
      e = contentWrite(c, buf.data(), got, off);
      if (e) return e;
      off += got;
    }
  }
  return 0;
}

}  // namespace shadowfs
