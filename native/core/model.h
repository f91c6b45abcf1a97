// The overlay's internal data model: inodes, layer tree nodes, layers, and the locks that guard
// them. Private to native/core (the backends and the addon see only overlay.h).
//
// Locks, in the only order in which one thread may hold several of them (a lower rank is always
// taken first; SFS_LOCK checks this in checked builds and aborts on a violation):
//   0. ContentBudget::regMu_ (budget.h) the overlays the memory budget's evictor walks; held
//                                 by the evictor around its walk of an overlay's layers.
//   1. Overlay::mu_   (registry)  the set of layers, which one is active, pins. Held briefly.
//   2. Layer::mu      (tree)      one layer's Node tree (names, children, whiteouts, opaque,
//                                 redirects, hard links), its `copied` map, Inode::links.
//                                 Shared for lookups, exclusive for changes to the tree. Never
//                                 held while a file's content is read from the folder.
//   3. Inode::cmu()   (content)   one file's content (data/spill). Exclusive while it changes
//                                 or is copied up from the folder (which can take seconds for a
//                                 big file: only users of that one file wait), shared to read.
//   4. Inode::mmu()   (metadata)  one inode's attributes, xattrs, where its content lives, base.
//                                 A leaf: held for a few field copies, never across I/O.
// So writes of different files never wait for each other, and a long copy-up stops nobody but
// the users of the file being copied (or of a file whose stripe it shares: cmu() and mmu() are
// stripes of two tables hashed by address, see `stripes` below).
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "mask.h"
#include "shared_mutex.h"
#include "overlay.h"

// Checked builds (debug, and the C++ unit tests) abort loudly on a broken invariant.
#if !defined(NDEBUG) && !defined(SHADOWFS_CHECKS)
#define SHADOWFS_CHECKS 1
#endif

#if defined(SHADOWFS_CHECKS)
#define SFS_ASSERT(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "shadowfs: invariant broken at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                                 \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
#else
#define SFS_ASSERT(cond) ((void)0)
#endif

namespace shadowfs {

enum class LockRank : int { Registry = 1, Layer = 2, Content = 3, Meta = 4 };

// Lock-order bookkeeping for checked builds: which ranks this thread holds.
namespace lockorder {
#if defined(SHADOWFS_CHECKS)
inline thread_local int held[5] = {0, 0, 0, 0, 0};
inline void acquire(LockRank r) {
  for (int i = static_cast<int>(r); i <= 4; ++i) SFS_ASSERT(held[i] == 0);
  held[static_cast<int>(r)]++;
}
inline void release(LockRank r) { held[static_cast<int>(r)]--; }
#else
inline void acquire(LockRank) {}
inline void release(LockRank) {}
#endif
}  // namespace lockorder

// RAII holders that record the rank (checked builds) around the standard locks.
template <typename Mutex, typename Lock>
class RankedLock {
 public:
  RankedLock(Mutex& m, LockRank r) : rank_(r) {
    lockorder::acquire(r);
    lock_ = Lock(m);
  }
  ~RankedLock() {
    if (lock_.owns_lock()) {
      lock_.unlock();
      lockorder::release(rank_);
    }
  }
  void unlock() {
    lock_.unlock();
    lockorder::release(rank_);
  }
  RankedLock(const RankedLock&) = delete;
  RankedLock& operator=(const RankedLock&) = delete;

 private:
  LockRank rank_;
  Lock lock_;
};
using ReadLock = RankedLock<SharedMutex, std::shared_lock<SharedMutex>>;
using WriteLock = RankedLock<SharedMutex, std::unique_lock<SharedMutex>>;
using MetaLock = RankedLock<std::mutex, std::unique_lock<std::mutex>>;

// --- Per-inode locks: two striped tables, hashed by the inode's address ---
// An inode carries no mutex of its own (a std::mutex and a std::shared_mutex would be ~100 of
// the 128 bytes a layer path may cost, #18). Its content lock (rank 3) and metadata lock
// (rank 4) are the stripes its address hashes to. Two inodes may share a stripe: harmless,
// since no thread ever holds two locks of one rank (lockorder aborts on that in checked
// builds), so a thread holds at most one content stripe and one metadata stripe, taken in rank
// order, and stripes cannot deadlock among themselves.
namespace stripes {
constexpr size_t kCount = 1024;
SharedMutex& content(const void* p);
std::mutex& meta(const void* p);
}  // namespace stripes

struct Inode;
struct Node;
void retain(const Inode* in);
void dropRef(const Inode* in);  // frees the object (and, for a directory, its children) at 0

// An intrusive counted reference (the tree's children, Layer::root, Layer::copied). Handles
// hold a std::shared_ptr<Inode> whose deleter drops one of these counts (sharedOf).
template <typename T>
class Ref {
 public:
  Ref() = default;
  explicit Ref(T* p) : p_(p) {  // takes a new count
    if (p_) retain(p_);
  }
  Ref(const Ref& o) : Ref(o.p_) {}
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  template <typename U>
  Ref(Ref<U>&& o) noexcept : p_(o.release()) {}
  ~Ref() {
    if (p_) dropRef(p_);
  }
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  T* release() {  // hands the count to the caller
    T* p = p_;
    p_ = nullptr;
    return p;
  }
  static Ref adopt(T* p) {  // takes over a count the caller holds
    Ref r;
    r.p_ = p;
    return r;
  }

 private:
  T* p_ = nullptr;
};

std::shared_ptr<Inode> sharedOf(Inode* in);

// What the allocator hands out for a request of `n` bytes (its header and rounding included).
size_t mallocChunk(size_t n);

// A folder directory that regular files of a layer were materialised from: files whose content
// still lives in the folder at <path>/<their own name> point here instead of each holding its
// folder path (the common case: one folder path per directory, not per file).
struct LowerDir {
  std::atomic<uint32_t> refs{0};
  std::string path;
};
void dropLowerDir(LowerDir* d);

// The rare parts of a path, allocated when first needed (More, behind Extra).
struct More {
  More() = default;
  More(const More&) = delete;
  More& operator=(const More&) = delete;
  ~More();
  // --- the inode's (symlink target: set before publication; the rest under mmu) ---
  std::string target;                      // symlinks: the target
  std::optional<std::string> lowerPath;    // the folder's file, when not <ldir>/<name>
  std::map<std::string, std::string> xattrs;
  uint64_t rdev = 0;
  Timespec times[3];  // with kWideTimes: atime, mtime, ctime
  // --- content (under cmu) ---
  std::unique_ptr<SpillFile> spill;  // content past the spill threshold, or moved out by the budget
  // --- the tree's (under the layer's lock) ---
  std::optional<std::string> redirect;  // directories: merge with this folder directory instead
  Inode* link = nullptr;  // a hard link: the inode this name stands for (a counted reference)
  std::string name;       // the name, when it outgrew the inline bytes (a rename)
  LowerDir* lowerDir = nullptr;  // directories: the LowerDir their files point to
};

// What a path needs beyond the fixed part, in two steps: the Base of a file whose content was
// taken from the folder (every such file has one, so it is kept small: 80 bytes with malloc's
// header) and Windows' own metadata, then everything rarer (More).
struct Extra {
  Extra() = default;
  Extra(const Extra&) = delete;
  Extra& operator=(const Extra&) = delete;
  ~Extra() { delete more.load(); }
  // Base (under mmu; present when the inode's kHasBase flag is set, hashed with kBaseHashed).
  uint64_t baseIno = 0, baseSize = 0, baseHash = 0;
  int64_t baseMtimeSec = 0, baseCtimeSec = 0;
  uint32_t baseMtimeNs = 0, baseCtimeNs = 0;
  std::atomic<More*> more{nullptr};
  // Windows' metadata (under mmu): attributes of kWinAttrsKept (0 without an Extra), and the
  // creation time when the inode's kBirth flag is set. They take Extra from 56 to 72 bytes
  // (malloc's block from 64 to 80): paid by every path that has an Extra, on Linux too, rather
  // than by every path in the fixed part.
  uint32_t winAttrs = 0;
  uint32_t birthNs = 0;
  int64_t birthSec = 0;
};

// One path of a layer (a Node) and, unless it is a whiteout or a second name of a hard-linked
// file, the object at that path (its Inode: attributes, content). One allocation per path: the
// fixed part below (79 bytes on 64-bit), then the name's bytes. Issue #18 allows 128 bytes of
// bookkeeping per path beyond the content's and the name's bytes (memory_test measures it):
// with malloc's header and rounding the node is 96 bytes for names up to 9 bytes, 112 up to 25,
// then the parent's pointer to it (8, plus an eighth of slack) and malloc's header on the
// content (8).
// So before adding a field here, find the bytes to pay for it.
struct Inode {
  enum Flag : uint16_t {
    kOwnMeta = 1,       // attributes are the layer's (else they mirror the folder live)
    kOwnXattrs = 2,     // the xattr list is the layer's (More::xattrs)
    kWhiteout = 4,      // a deletion: hides the folder's object at this name
    kOpaque = 8,        // directories: hide the folder's directory at this place
    kLowerAtName = 16,  // content in the folder at <u.ldir->path>/<name>
    kLowerPath = 32,    // content in the folder at More::lowerPath
    kGrown = 64,        // u.data has room to grow (capacity: next power of two of size)
    kNameOut = 128,     // the name lives in More::name
    kHasBase = 256,     // Extra holds a Base
    kBaseHashed = 512,  // and it is hashed
    kBigKids = 1024,    // directories: u.kids is a list of runs (Node::kFlatMax)
    kWideTimes = 2048,  // the times live in More::times (one was out of `times`' range)
    kBirth = 4096,      // Extra holds a creation time of the layer's own (Windows)
    // The kernel writes the content's file itself (a FUSE passthrough write-open, see
    // Overlay::kernelWriteDescriptor): its size and times are taken from that file
    // (Overlay::syncKernelWrites).
    kKernelWrites = 8192,
    // The kernel holds the content's file for open files (FUSE passthrough, read or write):
    // that file stays the content's, in place, until the last of them is released.
    kKernelHeld = 16384,
  };
  Inode(const Inode&) = delete;
  Inode& operator=(const Inode&) = delete;

  mutable std::atomic<uint32_t> refs{0};
  // Layer nodes that point here (hard links). Changed under the owning layer's lock
  // exclusively; atomic so that an open handle can read it without that lock.
  std::atomic<uint32_t> links{0};
  // Set before the inode is published and never changed: no lock.
  uint64_t ino = 0;
  // --- attributes, guarded by mmu (rank 4); `size` also by cmu (see below) ---
  // size: the content's size once the content lives in the layer (then changed with both cmu
  // and mmu held, so either lock reads it), else the folder's size as last seen.
  uint64_t size = 0;
  // atime, mtime, ctime in nanoseconds since the epoch (years 1678 to 2262; others, in More)
  int64_t times[3] = {0, 0, 0};
  union {
    char* data;      // regular files whose content is in memory (under cmu), or null
    struct Kids* kids;  // directories: the children (under the layer's lock), or null
    LowerDir* ldir;  // regular files with kLowerAtName
  } u{};
  // Rare parts, created on first need (by whichever lock the need comes under: the pointer is
  // set once, atomically) and freed with the inode.
  std::atomic<Extra*> x_{nullptr};
  uint32_t uid = 0, gid = 0;
  uint16_t perm = 0;
  std::atomic<uint16_t> flags{0};
  FileType type = FileType::Regular;
  uint8_t nameLen = 0, nameCap = 0;
  char nameBytes[1];  // the name's first byte; the allocation extends past the struct

  SharedMutex& cmu() const { return stripes::content(this); }
  std::mutex& mmu() const { return stripes::meta(this); }
  bool has(uint16_t f) const { return (flags.load(std::memory_order_acquire) & f) != 0; }
  void set(uint16_t f) { flags.fetch_or(f, std::memory_order_acq_rel); }
  void clear(uint16_t f) { flags.fetch_and(static_cast<uint16_t>(~f), std::memory_order_acq_rel); }
  bool ownMeta() const { return has(kOwnMeta); }
  bool inLower() const { return has(kLowerAtName | kLowerPath); }  // content in the folder
  Extra* ex() const { return x_.load(std::memory_order_acquire); }
  Extra& extra() {
    Extra* e = ex();
    if (e) return *e;
    auto* fresh = new Extra();
    if (x_.compare_exchange_strong(e, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;
    return *e;
  }
  More* mo() const {
    Extra* e = ex();
    return e ? e->more.load(std::memory_order_acquire) : nullptr;
  }
  More& more() {
    Extra& e = extra();
    More* m = e.more.load(std::memory_order_acquire);
    if (m) return *m;
    auto* fresh = new More();
    if (e.more.compare_exchange_strong(m, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;
    return *m;
  }
  // The Base (mmu held).
  std::optional<Base> base() const;
  void setBase(const Base& b);
  const std::string& target() const;
  std::string_view name() const;
  // Times (mmu held, or unpublished).
  Timespec atime() const { return timeAt(0); }
  Timespec mtime() const { return timeAt(1); }
  Timespec ctime() const { return timeAt(2); }
  void setAtime(Timespec t) { setTime(0, t); }
  void setMtime(Timespec t) { setTime(1, t); }
  void setCtime(Timespec t) { setTime(2, t); }
  Timespec timeAt(int i) const;
  void setTime(int i, Timespec t);
  // Windows' metadata (mmu held, or unpublished): attributes (kWinAttrsKept bits) and birth
  // time. Setting 0 attributes or no birth time allocates nothing.
  uint32_t winAttrs() const {
    const Extra* e = ex();
    return e ? e->winAttrs : 0;
  }
  void setWinAttrs(uint32_t a);
  bool birth(Timespec* out) const;
  void setBirth(const Timespec* t);  // null: none of its own
  // The attributes as an Attr (mmu held); nlink 1, blocks from size.
  Attr snap() const;
  // Stores an Attr's attributes (mmu held or unpublished); the inode number stays.
  void setSnap(const Attr& a);
  // Where the content lives in the folder (mmu held): false when it lives in the layer.
  bool lowerPath(std::string* out) const;
  // The content is the layer's from now on (cmu and mmu held).
  void dropLower();
  // Content in the folder at `path` (unpublished, or cmu and mmu held). `hint`: a LowerDir
  // that may be `path`'s directory.
  void setLower(const std::string& path, LowerDir* hint);
  uint64_t dataCap() const;  // bytes u.data holds room for
  // The bytes the allocator gives this path (its node, children array, content, Extra), for
  // Overlay::stats(); adds a spilled content's size to *spilled. Takes mmu.
  uint64_t footprint(uint64_t* spilled) const;

 protected:
  Inode() = default;
  ~Inode();
  friend void dropRef(const Inode* in);
};

// A layer path. Directories hold their children in a sorted array of counted references
// (u.kids: [0] holds the count and capacity, see Kids). A hard link's second name has an inode
// of its own that is never used: inode() is the linked one (Extra::link).
struct Node : Inode {
  static Ref<Node> make(FileType type, std::string_view name);
  static Ref<Node> makeWhiteout(std::string_view name);

  bool whiteout() const { return has(kWhiteout); }
  bool opaque() const { return has(kOpaque); }
  const std::optional<std::string>* redirect() const { return mo() ? &mo()->redirect : nullptr; }
  bool redirected() const { return mo() && mo()->redirect; }
  bool dir() const { return !whiteout() && type == FileType::Directory; }
  Inode* inode() const {
    if (whiteout()) return nullptr;
    if (mo() && mo()->link) return mo()->link;
    return const_cast<Node*>(this);
  }
  Ref<Inode> inodeRef() const { return Ref<Inode>(inode()); }
  // Renames (the layer's lock held exclusively): a file whose content lives in the folder at
  // <dir>/<old name> first remembers that path.
  void rename(std::string_view name);

  // Children (directories; the layer's lock held: shared to read, exclusive to change), sorted
  // by name (byte order). One sorted array of pointers; past kFlatMax children, a list of
  // sorted arrays of at most kRunMax each (kBigKids), so an insert in a huge directory moves
  // at most kRunMax pointers plus one per kRunMax/2 children, not half the directory.
  static constexpr uint32_t kFlatMax = 1024;
  static constexpr uint32_t kRunMax = 512;
  class Iter {
   public:
    Iter() = default;
    Iter(Node* const* p, Node* const* e, struct Kids* const* c, struct Kids* const* ce)
        : p_(p), e_(e), c_(c), ce_(ce) {}
    Node* operator*() const { return *p_; }
    Iter& operator++() {
      if (++p_ == e_) next();
      return *this;
    }
    bool operator!=(const Iter& o) const { return p_ != o.p_; }
    bool operator==(const Iter& o) const { return p_ == o.p_; }

   private:
    void next();
    Node* const* p_ = nullptr;
    Node* const* e_ = nullptr;
    struct Kids* const* c_ = nullptr;   // big directories: the run being walked
    struct Kids* const* ce_ = nullptr;  // and the end of the run list
  };
  struct Range {
    Iter b, e;
    Iter begin() const { return b; }
    Iter end() const { return e; }
  };
  Range kids() const;
  size_t count() const;
  size_t subdirs() const;  // children that are directories (kept as children come and go)
  Node* find(std::string_view name) const;
  bool empty() const { return count() == 0; }
  // Puts `n` under `name` (renaming it to that), replacing what was there.
  void put(std::string_view name, Ref<Node> n);
  Ref<Node> take(std::string_view name);  // removes and returns the child, or null

 private:
  void addSubdirs(int d);
  Node() = default;
};
using NodeRef = Ref<Node>;

// Where A merges below `child`: declared here for changes.cc.
void descendInto(const Node* child, std::string_view name, bool* lv, std::string* low);
// The names under `n` went away (tree.cc; layer_ops.cc's revert): one link fewer each, and
// each file's ctime moves through `touchFn` (Overlay::touch).
void dropNames(Overlay* ov, Node* n, void (Overlay::*touchFn)(Inode*, bool));

struct Layer : std::enable_shared_from_this<Layer> {
  std::string name;
  bool writable = true;
  // --- guarded by mu (rank 2) ---
  mutable SharedMutex mu;
  NodeRef root;
  // Inodes copied up from the folder, by the folder path they came from: a read-only handle
  // opened on the folder's file before the copy-up must see the new content, also after the
  // copy lost its last name in the layer (so the inode is held here until reset or drop). The
  // inode number must match too: numbers are reused (a deleted file's, another file system's).
  // Recorded only while a handle of the folder's file at that path is open (see `readers`), so
  // an ordinary copy-up costs nothing here. Also how a deferred write-open (Handle) finds the
  // object another change made of its file since the open (Overlay::bindPending).
  // A file of the folder that a rename or link carries is recorded too, so its handles follow.
  struct CopiedFrom {
    uint64_t ino = 0;
    Ref<Inode> inode;
  };
  std::unordered_map<std::string, CopiedFrom> copied;
  // Masked paths (mask.h): what this layer's agent must not see of the folder. Null: none.
  // Replaced whole (Overlay::setMask, mu exclusively); read under mu shared or exclusively.
  std::shared_ptr<const PathMask> mask;
  // Handles open on the folder's files (read-only ones, and write-opens not yet written
  // through), by folder path (noteCopy looks here). Changed
  // under `rmu` (rank 4, a leaf) with mu held shared or exclusively; read under mu exclusively.
  mutable std::mutex rmu;
  std::unordered_map<std::string, uint32_t> readers;
  // The audit trail (audit.h): what requests through mounts showing this layer did. Set when
  // the layer is made (null in the read-only layer shown while none is active), then never
  // replaced; the log has its own lock.
  std::shared_ptr<AuditLog> audit;
  // --- guarded by Overlay::mu_ (rank 1) ---
  int pins = 0;  // views showing this layer
};

// Result of resolving a path in one layer (valid while the layer's lock is held).
struct Overlay::Res {
  Node* node = nullptr;  // the layer node at the path (never a whiteout), or null
  bool lv = false;       // `low` names the folder's object merged at this position
  std::string low;
  Attr lowerAttr;               // when node is null: the folder's object
  bool parentResolved = false;  // the parent is a directory (for create after ENOENT)
  bool lowerMissing = false;    // ENOENT because the folder has nothing at `low` (it was asked)
};

// A listing in two steps: what the layer says (under its lock), then A's directory (without it).
struct Overlay::ListPlan {
  bool lowerOnly = false;   // the path is A's alone
  bool readLower = false;   // merge A's directory `low`
  std::string low;
  std::vector<DirEntry> own;       // the layer's own entries
  std::vector<std::string> hidden; // names the layer has (entries or whiteouts): A's are hidden
  uint64_t ino = 0;
  // The layer's mask, when the listing leaves masked names out; `dir` the listed path.
  std::shared_ptr<const PathMask> mask;
  std::string dir;
};

Timespec nowTime();
inline uint64_t nsOf(const Timespec& t) {
  return static_cast<uint64_t>(t.sec) * 1000000000ull + static_cast<uint64_t>(t.nsec);
}

}  // namespace shadowfs
