// Reading a descriptor until a size or its end, for posix_lower.cc and fuse_ll's spliced
// replies (native/fuse_ll/splice_reply.cc), which falls back to it.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace shadowfs {

// pread until `size` bytes or end of file, retrying interrupted calls. 0 or an errno.
inline int preadFull(int fd, char* buf, size_t size, uint64_t off, size_t* got) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, buf + done, size - done, static_cast<off_t>(off + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  *got = done;
  return 0;
}

}  // namespace shadowfs
