// READ replies spliced on /dev/fuse. Where a read's bytes come from a descriptor (the folder's
// file, a spill or memory file: Overlay::readVia), they go into a pipe by reference (splice from
// the file: no copy) and from the pipe into the kernel, which copies them once, into the
// reader's pages. The copy path copies them twice: into our buffer (pread), then out of it
// (writev). The kernel takes a reply from a pipe whole, header first (fuse_dev_splice_write),
// and the header holds the length, known only once the file has been read (it may end early),
// so the bytes go into one pipe and the header into a second, then the bytes follow it there
// (pipe to pipe moves buffers, no copy) and that pipe goes to /dev/fuse.
//
// The reply is sent from inside read(), which Overlay::readVia calls under the content lock a
// read holds: the pipe holds the file's pages, not copies, so the kernel must take them before
// a write or a truncation through the daemon can change them, or one reply could mix two
// versions of the file.
//
// Pipes come from a small pool shared by the process (kMaxPipes pairs of 1 MiB, the most a
// process without CAP_SYS_RESOURCE may ask for: pipe-max-size): pipe buffers count against a
// per-user allowance that every process of the user shares, so the daemon keeps few. A read
// that finds none free, that would not fit (the largest READ, ll_mount.h's kMaxRead, fits whole
// pages plus the header's buffer), that is under kMinSplice bytes (the extra system calls cost
// more than the copy saves), or that goes through an io_uring ring entry (uring_loop.h) uses
// the copy path. So does anything that cannot be spliced: what is already in a pipe is read back
// into the buffer and sent from there.
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
  static constexpr int kMaxPipes = 4;

  // For a READ of `size` bytes at `off` answered on `r`, with `buf` (room for `size`) for the
  // copy path. usable(): pipes were free and the read qualifies; else use Overlay::read.
  SpliceReply(const Req* r, char* buf, size_t size, uint64_t off);
  ~SpliceReply();  // the pipes go back to the pool, empty (or are closed if they cannot be)
  SpliceReply(const SpliceReply&) = delete;
  SpliceReply& operator=(const SpliceReply&) = delete;
  bool usable() const { return pipes_ != nullptr; }

  // Reads the bytes and, when it can, answers the request with them (answered()); otherwise
  // they are in buf for the caller to send, as from pread.
  int read(int fd, uint64_t off, size_t size, size_t* got) override;

  // The request has its reply (or the kernel took the reply and ended the request itself):
  // send nothing more for it.
  bool answered() const { return answered_; }
  // The kernel took a spliced reply.
  bool spliced() const { return spliced_; }

  struct Pipes;

 private:
  int copyBack(int fd, uint64_t off, size_t size, size_t done, size_t* got);
  void sendSpliced(size_t got);
  bool discard();  // empties both pipes; false if one could not be emptied

  const Req* r_;
  char* buf_;
  Pipes* pipes_ = nullptr;
  bool broken_ = false;  // a pipe could not be emptied: close it rather than reuse it
  bool answered_ = false;
  bool spliced_ = false;
};

}  // namespace ll
}  // namespace shadowfs
