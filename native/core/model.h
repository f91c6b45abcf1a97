// The overlay's internal data model: inodes, layer tree nodes, layers, and the locks that guard
// them. Private to native/core (the backends and the addon see only overlay.h).
//
// Locks, in the only order in which one thread may hold several of them (a lower rank is always
// taken first; SFS_LOCK checks this in checked builds and aborts on a violation):
//   1. Overlay::mu_   (registry)  the set of layers, which one is active, pins. Held briefly.
//   2. Layer::mu      (tree)      one layer's Node tree, its `copied` map, Inode::links.
//                                 Shared for lookups, exclusive for changes to the tree. Never
//                                 held while a file's content is read from the folder.
//   3. Inode::cmu     (content)   one file's content (data/spill). Exclusive while it changes
//                                 or is copied up from the folder (which can take seconds for a
//                                 big file: only users of that one file wait), shared to read.
//   4. Inode::mmu     (metadata)  one inode's attributes, xattrs, where its content lives, base.
//                                 A leaf: held for a few field copies, never across I/O.
// So writes of different files never wait for each other, and a long copy-up stops nobody but
// the users of the file being copied.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

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
using ReadLock = RankedLock<std::shared_mutex, std::shared_lock<std::shared_mutex>>;
using WriteLock = RankedLock<std::shared_mutex, std::unique_lock<std::shared_mutex>>;
using MetaLock = RankedLock<std::mutex, std::unique_lock<std::mutex>>;

struct Inode {
  Inode() = default;
  Inode(const Inode&) = delete;
  Inode& operator=(const Inode&) = delete;

  // Set before the inode is published and never changed: no lock.
  uint64_t ino = 0;
  FileType type = FileType::Regular;
  std::string target;  // symlinks: the target

  // --- guarded by mmu (rank 4) ---
  mutable std::mutex mmu;
  // When false, attributes mirror the folder live (files: `lowerPath`; directories: their merge
  // source) and `snap` is only a fallback for when the folder's object has gone.
  bool ownMeta = false;
  // Regular files whose content still lives in the folder. Cleared only with cmu held
  // exclusively as well, so a holder of cmu may read it without mmu.
  std::optional<std::string> lowerPath;
  Attr snap;  // snap.size is the content's size once the content lives in the layer
  bool ownXattrs = false;
  std::map<std::string, std::string> xattrs;
  std::optional<Base> base;  // what the folder's file was when the content was taken from it

  // --- guarded by cmu (rank 3) ---
  mutable std::shared_mutex cmu;
  std::string data;                  // content (unless spilled)
  std::unique_ptr<SpillFile> spill;  // content of a file that outgrew the spill threshold
  uint64_t spillSize = 0;

  // Layer nodes that point here (hard links). Changed under the owning layer's lock
  // exclusively; atomic so that an open handle can read it without that lock.
  std::atomic<uint32_t> links{0};
};

struct Node {
  std::shared_ptr<Inode> inode;  // null: whiteout
  bool opaque = false;           // directories: hide the folder's directory at this place
  std::optional<std::string> redirect;  // directories: merge with this folder directory instead
  std::map<std::string, std::unique_ptr<Node>, std::less<>> children;

  bool whiteout() const { return !inode; }
  bool dir() const { return inode && inode->type == FileType::Directory; }
};

struct Layer : std::enable_shared_from_this<Layer> {
  std::string name;
  bool writable = true;
  // --- guarded by mu (rank 2) ---
  mutable std::shared_mutex mu;
  std::unique_ptr<Node> root;
  // Inodes copied up from the folder, by the folder path they came from: a read-only handle
  // opened on the folder's file before the copy-up must see the new content, also after the
  // copy lost its last name in the layer (so the inode is held here until reset or drop). The
  // inode number must match too: numbers are reused (a deleted file's, another file system's).
  struct CopiedFrom {
    uint64_t ino = 0;
    std::shared_ptr<Inode> inode;
  };
  std::unordered_map<std::string, CopiedFrom> copied;
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
};

// A listing in two steps: what the layer says (under its lock), then A's directory (without it).
struct Overlay::ListPlan {
  bool lowerOnly = false;   // the path is A's alone
  bool readLower = false;   // merge A's directory `low`
  std::string low;
  std::vector<DirEntry> own;       // the layer's own entries
  std::vector<std::string> hidden; // names the layer has (entries or whiteouts): A's are hidden
  uint64_t ino = 0;
};

Timespec nowTime();
inline uint64_t nsOf(const Timespec& t) {
  return static_cast<uint64_t>(t.sec) * 1000000000ull + static_cast<uint64_t>(t.nsec);
}

}  // namespace shadowfs
