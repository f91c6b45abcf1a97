// Where file contents too large to keep in memory go: unlinked temporary files, so a build that
// writes gigabytes inside a shadow does not exhaust memory. The core only sees this interface;
// native/platform implements it per OS. Methods return 0 or a positive errno.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "types.h"

namespace shadowfs {

class SpillFile {
 public:
  virtual ~SpillFile() = default;
  virtual int pread(char* buf, size_t size, uint64_t off, size_t* got) = 0;
  virtual int pwrite(const char* buf, size_t size, uint64_t off) = 0;
  virtual int truncate(uint64_t size) = 0;
  // Appends where the first `size` bytes hold data (holes read as zeros), at most `max` extents
  // (the rest as one last extent). ENOSYS where the system cannot tell: callers then treat the
  // whole file as data.
  virtual int dataExtents(uint64_t size, size_t max, std::vector<Extent>* out) {
    (void)size;
    (void)max;
    (void)out;
    return ENOSYS;
  }
  // A new descriptor of this file (the caller closes it), for a backend that hands the file
  // to the kernel to serve (FUSE passthrough); -1 where the system has none to give.
  virtual int duplicateDescriptor() { return -1; }
  // The descriptor pread() reads, for a transport that moves the bytes into its reply without
  // copying them (DescriptorReader, overlay.h); -1 (the default) where there is none, as for a
  // slot of a shared pack file. The file's own: the caller neither closes nor keeps it past the
  // content lock it read under.
  virtual int readDescriptor() { return -1; }
  // True for a file held in memory that the kernel can still serve (a memfd): the memory budget
  // counts its bytes as memory and may move it to a disk spill file like an in-memory content.
  virtual bool inMemory() const { return false; }
  // The file's size and times as the system has them now: a file the kernel writes itself
  // (FUSE passthrough of a write-open) changes without telling us. ENOSYS where unknown.
  virtual int stat(uint64_t* size, Timespec* mtime, Timespec* ctime) {
    (void)size;
    (void)mtime;
    (void)ctime;
    return ENOSYS;
  }
};

class SpillStore {
 public:
  virtual ~SpillStore() = default;
  virtual int create(std::unique_ptr<SpillFile>* out) = 0;
  // An empty file in memory that has a descriptor to hand to the kernel (FUSE passthrough of a
  // small layer content). ENOSYS where the system has none; EMFILE past the store's bound on
  // how many such files (each one descriptor of the process) may be open at once.
  virtual int createInMemory(std::unique_ptr<SpillFile>* out) {
    (void)out;
    return ENOSYS;
  }
};

}  // namespace shadowfs
