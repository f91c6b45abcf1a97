// Semantics every backend shares, kept in one place so fuse_ll and fuse_hl (and WinFsp through
// it) cannot drift apart: directory streams with their offsets and rewinddir, the size protocol
// of getxattr/listxattr replies, and open(2) flags reduced to an OpenIntent.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "types.h"

namespace shadowfs {

class Overlay;
struct Layer;

// An open directory. Offsets: 0 is ".", 1 is "..", entries[i] is at i + 2, and the offset a
// backend hands out with an entry names the one after it. The listing is taken at the first
// read and again at every read at offset 0 (rewinddir: POSIX wants the directory as it is now)
// — not at opendir: when the kernel served a first pass from its own listing cache, the first
// read a backend sees may come after changes (a rewind after a create).
struct DirStream {
  std::vector<DirEntry> entries;
  uint64_t ino = 0;     // the directory's own inode number, for "." and ".."
  bool loaded = false;  // entries were taken

  size_t count() const { return entries.size() + 2; }
  // Name, inode and type at position `i` (< count()).
  void at(size_t i, const char** name, uint64_t* entIno, FileType* type) const {
    if (i < 2) {
      *name = i == 0 ? "." : "..";
      *entIno = ino;
      *type = FileType::Directory;
      return;
    }
    const DirEntry& d = entries[i - 2];
    *name = d.name.c_str();
    *entIno = d.ino;
    *type = d.type;
  }
  // True when a read at `off` must list the directory (again) first.
  bool needsFill(uint64_t off) const { return !loaded || off == 0; }
};

// getxattr/listxattr: a size of 0 asks for the length; a buffer too small is ERANGE. Returns
// the byte count to reply with, or a negative errno.
inline long xattrReplySize(size_t have, size_t room) {
  if (room == 0) return static_cast<long>(have);
  if (have > room) return -ERANGE;
  return static_cast<long>(have);
}

// listxattr's wire form: names, each followed by a NUL.
inline std::string xattrList(const std::vector<std::string>& names) {
  std::string all;
  for (const auto& n : names) all.append(n).push_back('\0');
  return all;
}

// open(2)'s access mode and flags, in POSIX numbering (which WinFsp's FUSE3 layer uses too).
inline OpenIntent intentFromFlags(int flags, int accmode, int rdonly, int trunc, int append,
                                  int excl) {
  OpenIntent i;
  i.write = (flags & accmode) != rdonly;
  i.truncate = (flags & trunc) != 0;
  i.append = (flags & append) != 0;
  i.exclusive = (flags & excl) != 0;
  return i;
}

}  // namespace shadowfs
