// The overlay model: the user's folder A (read through a LowerFs, never written) plus one
// in-memory layer of changes. Everything a backend needs to serve a shadow mount lives here,
// so a backend (FUSE low-level on Linux, FUSE3 high-level / WinFsp) only translates calls.
//
// Layer shape: a tree of Nodes that mirrors the paths the layer touches. A Node is a whiteout
// (hides what A has at that path) or points at an Inode. A directory Node merges with A's
// directory at the same place unless it is opaque, or merges with another A directory when it
// was renamed (`redirect`, so renaming a big directory of A is O(1)). A regular-file Inode keeps
// its content in A (`lowerPath`) until the first write-open copies it into memory; its inode
// number is A's, so it stays stable across copy-up and rename.
//
// Threads: every public method may be called from any thread. One shared_mutex guards the
// layer; reads of A's file contents happen outside it. All methods return 0 or a positive errno.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lower.h"
#include "types.h"

namespace shadowfs {

struct Inode;
struct Node;

// An open file. Owned by the backend between open/create and release.
struct Handle {
  std::shared_ptr<Inode> inode;  // set when the file has (or gets) a layer inode
  LowerHandle lower = -1;        // open file in A, for content still in A
  uint64_t lowerIno = 0;         // A's inode number of a pure-lower file, to see a later copy-up
  bool writable = false;
};

// Inode numbers of objects created in the layer start here, far above what A's file system
// hands out, so they never collide with A's numbers (which copied-up objects keep).
constexpr uint64_t kFirstLayerIno = (1ull << 60) + 1;

class Overlay {
 public:
  explicit Overlay(std::unique_ptr<LowerFs> lower);
  ~Overlay();
  Overlay(const Overlay&) = delete;
  Overlay& operator=(const Overlay&) = delete;

  // --- File-system operations (backend threads). Paths are normalised, "" is the root. ---
  int getattr(const std::string& path, Attr* out);
  int readdir(const std::string& path, std::vector<DirEntry>* out);
  int readlink(const std::string& path, std::string* out);
  int mknod(const std::string& path, FileType type, uint32_t perm, uint64_t rdev,
            const Caller& who, Attr* out);
  int mkdir(const std::string& path, uint32_t perm, const Caller& who, Attr* out);
  int symlink(const std::string& target, const std::string& path, const Caller& who, Attr* out);
  int link(const std::string& from, const std::string& to, Attr* out);
  int unlink(const std::string& path);
  int rmdir(const std::string& path);
  int rename(const std::string& from, const std::string& to, uint32_t flags);
  // `h` may be null; when set (ftruncate, fchmod on an unlinked file) it wins over `path`.
  int setattr(const std::string& path, Handle* h, uint32_t mask, const Attr& values, Attr* out);
  int open(const std::string& path, const OpenIntent& intent, Handle** out, Attr* attr);
  int create(const std::string& path, uint32_t perm, const OpenIntent& intent, const Caller& who,
             Handle** out, Attr* attr);
  int read(Handle* h, char* buf, size_t size, uint64_t off, size_t* got);
  int write(Handle* h, const char* buf, size_t size, uint64_t off);
  int fgetattr(Handle* h, Attr* out);  // ENOENT when the handle has no layer inode
  void release(Handle* h);
  int getxattr(const std::string& path, const std::string& name, std::string* value);
  int listxattr(const std::string& path, std::vector<std::string>* names);
  int setxattr(const std::string& path, const std::string& name, const std::string& value,
               int flags);  // flags: 1 = create only, 2 = replace only
  int removexattr(const std::string& path, const std::string& name);
  int statfs(FsStats* out);

  // --- Control operations (the API). Intermediate symlinks are refused with ELOOP. ---
  // Writes a whole regular file into the layer, creating missing parent directories.
  int putFile(const std::string& path, const std::string& data, uint32_t perm, const Caller& who);
  // Removes a file or a whole directory tree from the shadow.
  int remove(const std::string& path);
  // Drops every change. Returns the paths the layer held, for cache invalidation.
  std::vector<std::string> reset();
  std::vector<Change> changes();
  size_t layerBytes();

 private:
  struct Res;
  int resolve(const std::string& path, Res* r) const;
  int materializeDir(const std::string& path, Node** out, bool* lv, std::string* low);
  int materializeNode(const std::string& path, Node** out, Res* r);
  int placeNew(const std::string& path, std::shared_ptr<Inode> inode, Node** out);
  int removeAt(const std::string& path);
  bool lowerPresent(bool lv, const std::string& low, const std::string& name, Attr* a = nullptr);
  int mergedList(const Res& r, std::vector<DirEntry>* out);
  void nodeAttr(const Node* n, bool lv, const std::string& low, Attr* out);
  void ensureOwnMeta(Inode* in, bool lv, const std::string& low);
  int copyUpContent(Inode* in, bool keepContent);
  int xattrSource(const Res& r, std::string* src) const;
  std::shared_ptr<Inode> newInode(FileType type, uint32_t perm, const Caller& who);
  int openLocked(Node* n, const OpenIntent& intent, Handle** out, Attr* attr);
  std::unique_ptr<Node> detach(const std::string& path, Res& r);
  int attach(const std::string& path, std::unique_ptr<Node> n);

  std::unique_ptr<LowerFs> lower_;
  mutable std::shared_mutex mu_;  // guards root_, every Node and Inode, copied_
  std::unique_ptr<Node> root_;
  // Inodes copied up from A, by A's inode number: a read-only handle opened on the pure-lower
  // file before the copy-up must see the new content.
  std::unordered_map<uint64_t, std::weak_ptr<Inode>> copied_;
  std::atomic<uint64_t> nextIno_{kFirstLayerIno};
};

}  // namespace shadowfs
