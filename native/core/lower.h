// The read-only view of the user's folder A that the overlay is built on.
// The core never touches the OS itself: a platform module implements this interface
// (native/platform/posix_lower.cc on Linux). Every method returns 0 or a positive errno.
// Paths are normalised and relative to A's root ("" is the root itself).
// Implementations must be safe to call from many threads at once and must never write.
#pragma once

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
  // Opens a regular file for reading only.
  virtual int open(const std::string& rel, LowerHandle* out) = 0;
  virtual int fstat(LowerHandle h, Attr* out) = 0;
  virtual int pread(LowerHandle h, char* buf, size_t size, uint64_t off, size_t* got) = 0;
  virtual void close(LowerHandle h) = 0;
  virtual int readAll(const std::string& rel, std::string* out) = 0;
  virtual int listxattr(const std::string& rel, std::vector<std::string>* names) = 0;
  virtual int getxattr(const std::string& rel, const std::string& name, std::string* value) = 0;
  virtual int statfs(FsStats* out) = 0;
};

}  // namespace shadowfs
