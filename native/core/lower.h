// The read-only view of the user's folder A that the overlay is built on.
// The core never touches the OS itself: a platform module implements this interface
// (native/platform/posix_lower.cc on Linux, win32_lower.cc on Windows). Every method returns 0
// or a positive errno.
// Paths are normalised and relative to A's root ("" is the root itself).
// Implementations must be safe to call from many threads at once and must never write.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "types.h"

namespace shadowfs {

using LowerHandle = int64_t;

class LowerFs {
 public:
  virtual ~LowerFs() = default;
  // lstat(2) semantics: a symlink is reported as a symlink.
  virtual int stat(const std::string& rel, Attr* out) = 0;
  virtual int readdir(const std::string& rel, std::vector<DirEntry>* out) = 0;
  virtual int readlink(const std::string& rel, std::string* out) = 0;
  // Opens a regular file for reading only: anything else (a FIFO, a device, a socket, a link)
  // is refused (EINVAL) without waiting on it.
  virtual int open(const std::string& rel, LowerHandle* out) = 0;
  virtual int fstat(LowerHandle h, Attr* out) = 0;
  virtual int pread(LowerHandle h, char* buf, size_t size, uint64_t off, size_t* got) = 0;
  virtual void close(LowerHandle h) = 0;
  // The system descriptor pread() reads, for a transport that moves the bytes into its reply
  // without copying them through this process (DescriptorReader, overlay.h); -1 (the default)
  // where there is none. It stays the handle's: the caller neither closes nor keeps it.
  virtual int readDescriptor(LowerHandle h) {
    (void)h;
    return -1;
  }
  // Where the first `size` bytes of the open file hold data, as SpillFile::dataExtents says;
  // ENOSYS (the default) when the system cannot tell.
  virtual int dataExtents(LowerHandle h, uint64_t size, size_t max, std::vector<Extent>* out) {
    (void)h;
    (void)size;
    (void)max;
    (void)out;
    return ENOSYS;
  }
  // A hint: a walk is likely to list these directories, with their entries' attributes, next
  // and in this order (the subdirectories of one it just listed). An implementation may read
  // them ahead in the background to warm the system's caches; it must never block the caller
  // on I/O and never write. The default ignores the hint.
  virtual void readAhead(const std::vector<std::string>& dirs) { (void)dirs; }
  virtual int readAll(const std::string& rel, std::string* out) = 0;
  virtual int listxattr(const std::string& rel, std::vector<std::string>* names) = 0;
  virtual int getxattr(const std::string& rel, const std::string& name, std::string* value) = 0;
  virtual int statfs(FsStats* out) = 0;

  // --- Where a symbolic link an agent makes would lead (link_targets.cc) ---
  // The folder's own real path on this system ("/home/u/proj"), or "" where the system has
  // no such paths to compare (the default; then only a link's own text is checked).
  virtual std::string hostRoot() const { return std::string(); }
  // Where the absolute path `abs` (no ".." components) leads on this system now, resolving
  // every link on the way the way the kernel would: Inside the folder (with `*rest`, the part
  // of `abs` left once the folder was reached, '/'-joined, possibly holding ".." of a link
  // met on the way), an Ancestor of the folder (or "/"), Refused (it passed through /proc,
  // whose links mean something else to every process), or Elsewhere (also: a name on the way
  // does not exist). The default knows nothing: Elsewhere.
  // Shadow: into one of `ownMounts` (where this shadow and its views are mounted), which is
  // the shadow for whoever follows it.
  enum class Place { Elsewhere, Inside, Ancestor, Refused, Shadow };
  virtual Place hostPlace(const std::string& abs, const std::vector<std::string>& ownMounts,
                          std::string* rest) {
    (void)abs;
    (void)ownMounts;
    (void)rest;
    return Place::Elsewhere;
  }

  // --- Names (asked only by an overlay that matches names ignoring case, see overlay.h) ---
  // Whether this folder finds an entry whatever the case of the name asked (NTFS: stat("FOO")
  // finds "foo"). Then an exact-case hit says nothing about how the entry is spelled, so the
  // overlay asks storedName() for the spelling instead of listing directories. POSIX folders
  // answer false (Linux's per-directory casefold and macOS's default case-insensitive APFS are
  // not detected: their entries are then found by listing, which still works).
  virtual bool caseInsensitive() const { return false; }
  // The name of the folder's entry at `rel` as its directory stores it (the last component of
  // `rel`, spelled as the folder spells it); 0, ENOENT when there is none, or another errno.
  // This default fits a case-sensitive folder, where a hit is spelled as asked.
  virtual int storedName(const std::string& rel, std::string* name) {
    Attr a;
    if (int e = stat(rel, &a)) return e;
    auto slash = rel.rfind('/');
    *name = slash == std::string::npos ? rel : rel.substr(slash + 1);
    return 0;
  }
};

}  // namespace shadowfs
