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
};

class SpillStore {
 public:
  virtual ~SpillStore() = default;
  virtual int create(std::unique_ptr<SpillFile>* out) = 0;
};

}  // namespace shadowfs
