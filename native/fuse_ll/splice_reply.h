// READ replies spliced on /dev/fuse. Where a read's bytes come from a descriptor (the folder's
// file, a spill or memory file: Overlay::readVia), they go into a pipe by reference (splice from
// the file: no copy) and from the pipe into the kernel, which copies them once, into the
// reader's pages. The copy path copies them twice: into our buffer (pread), then out of it
// (writev). The kernel takes a reply from a pipe whole, header first (fuse_dev_splice_write),
// and the header holds the length, known only once the file has been read (it may end early),
// so the bytes go into one pipe and the header into a second, then the bytes follow it there
// (pipe to pipe moves buffers, no copy) and that pipe goes to /dev/fuse.
//
// Each thread that serves requests has its own two pipes, made at its first large read and
// sized to hold the largest READ (ll_mount.h's kMaxRead, a page under 1 MiB) plus the header:
// 1 MiB, the most a process may ask for without CAP_SYS_RESOURCE (pipe-max-size). A read that
// would not fit (unaligned, or where even that size is refused) uses the copy path. So does
// anything that cannot be spliced: the bytes already in the pipe are read back and the rest is
// read with pread. Small reads use the copy path too: under kMinSplice bytes the extra system
// calls cost more than the copy saves. Replies through io_uring ring entries (uring_loop.h)
// are always copied.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../core/overlay.h"
#include "wire.h"

namespace shadowfs {
namespace ll {

class SpliceReply final : public DescriptorReader {
 public:
  static constexpr size_t kMinSplice = 64 * 1024;

  // For a READ of `size` bytes at `off` answered on `r`: a reader whose bytes go into the
  // pipes, falling back to `buf` (room for `size`). `usable()` false: use the copy path.
  SpliceReply(const Req* r, char* buf, size_t size, uint64_t off);
  bool usable() const { return pipes_ != nullptr; }

  int read(int fd, uint64_t off, size_t size, size_t* got) override;

  // After Overlay::readVia returned 0 with `got` bytes: sends them, from the pipe if read()
  // took them there, else from `buf`. Returns 0 or -errno, as wire::send.
  int send(size_t got);
  // After an error: empties the pipes, for the thread's next reply.
  void discard();

  bool spliced() const { return inPipe_ > 0; }

 private:
  struct Pipes;
  static Pipes* forThisThread();
  int copyBack(int fd, uint64_t off, size_t size, size_t* got);

  const Req* r_;
  char* buf_;
  Pipes* pipes_ = nullptr;
  size_t inPipe_ = 0;  // bytes read() left in the data pipe
};

}  // namespace ll
}  // namespace shadowfs
