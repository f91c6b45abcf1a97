// What both FUSE backends (fuse_ll, fuse_hl) share: file types as FUSE mode bits, Attr to the
// stat structure FUSE expects, and escaping for the comma-separated mount options. The mode
// bits are the POSIX values every FUSE implementation uses on the wire (WinFsp's included), so
// this header needs no OS header and compiles on Windows too.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "../core/types.h"

namespace shadowfs {
namespace fusemode {
constexpr uint32_t kFmt = 0170000, kSock = 0140000, kLnk = 0120000, kReg = 0100000,
                   kBlk = 0060000, kDir = 0040000, kChr = 0020000, kFifo = 0010000;
}  // namespace fusemode

inline uint32_t modeOf(FileType t) {
  using namespace fusemode;
  switch (t) {
    case FileType::Directory: return kDir;
    case FileType::Symlink: return kLnk;
    case FileType::Fifo: return kFifo;
    case FileType::Socket: return kSock;
    case FileType::CharDevice: return kChr;
    case FileType::BlockDevice: return kBlk;
    default: return kReg;
  }
}

inline FileType typeOf(uint32_t mode) {
  using namespace fusemode;
  switch (mode & kFmt) {
    case kDir: return FileType::Directory;
    case kLnk: return FileType::Symlink;
    case kFifo: return FileType::Fifo;
    case kSock: return FileType::Socket;
    case kChr: return FileType::CharDevice;
    case kBlk: return FileType::BlockDevice;
    default: return FileType::Regular;
  }
}

// The I/O size a mount advertises (st_blksize) at the least. Without the kernel's writeback
// cache (not asked for: API reads and edits in the folder must show at once) every write(2) to a
// mount is one round trip to this process, so a writer that sizes its buffer by st_blksize
// (Python's open(), Perl, coreutils' cat and cp; glibc's stdio, up to its 8 KiB BUFSIZ) should
// write in pieces far larger than a disk block. 128 KiB is coreutils' own choice of a size past
// which bigger buffers no longer pay; NFS mounts advertise their transfer size the same way. A
// folder file whose own size is larger keeps it.
constexpr uint32_t kMinIoSize = 128 * 1024;
inline uint32_t advertisedIoSize(uint32_t blksize) { return blksize < kMinIoSize ? kMinIoSize : blksize; }

// StatT: struct stat (libfuse) or struct fuse_stat (WinFsp); both name their fields alike.
template <typename StatT>
void toStat(const Attr& a, StatT* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = a.ino;
  st->st_mode = modeOf(a.type) | a.perm;
  st->st_nlink = a.nlink;
  st->st_uid = a.uid;
  st->st_gid = a.gid;
  st->st_rdev = a.rdev;
  st->st_size = static_cast<decltype(st->st_size)>(a.size);
  st->st_blocks = static_cast<decltype(st->st_blocks)>(a.blocks);
  st->st_blksize = advertisedIoSize(a.blksize);
  st->st_atim.tv_sec = a.atime.sec;
  st->st_atim.tv_nsec = a.atime.nsec;
  st->st_mtim.tv_sec = a.mtime.sec;
  st->st_mtim.tv_nsec = a.mtime.nsec;
  st->st_ctim.tv_sec = a.ctime.sec;
  st->st_ctim.tv_nsec = a.ctime.nsec;
}

// StatvfsT: struct statvfs (libfuse) or struct fuse_statvfs (WinFsp); same field names.
template <typename StatvfsT>
void toStatvfs(const FsStats& s, StatvfsT* v) {
  std::memset(v, 0, sizeof *v);
  v->f_bsize = s.bsize;
  v->f_frsize = s.frsize;
  v->f_blocks = s.blocks;
  v->f_bfree = s.bfree;
  v->f_bavail = s.bavail;
  v->f_files = s.files;
  v->f_ffree = s.ffree;
  v->f_namemax = s.namemax;
}

// Mount options are comma-separated: escape commas and backslashes in a folder's path.
inline std::string escapeOpt(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ',' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace shadowfs
