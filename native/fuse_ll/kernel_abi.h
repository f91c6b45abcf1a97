// The FUSE kernel protocol as fuse_ll speaks it over /dev/fuse: the message layouts and numbers
// of protocol 7.45 that this backend uses, declared here from the kernel's documentation of the
// protocol (Debian's <linux/fuse.h> is 7.38 and lacks passthrough, io_uring and the epoch
// notification; libfuse 3.14's copy is older still). Every layout is pinned by static_assert,
// and test/native/fuse_ll/wire_test.cc checks what the system header also has against it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shadowfs {
namespace ll {
namespace abi {

constexpr uint32_t kMajor = 7;
constexpr uint32_t kMinor = 45;
constexpr uint64_t kRootId = 1;

enum Opcode : uint32_t {
  LOOKUP = 1,
  FORGET = 2,  // no reply
  GETATTR = 3,
  SETATTR = 4,
  READLINK = 5,
  SYMLINK = 6,
  MKNOD = 8,
  MKDIR = 9,
  UNLINK = 10,
  RMDIR = 11,
  RENAME = 12,
  LINK = 13,
  OPEN = 14,
  READ = 15,
  WRITE = 16,
  STATFS = 17,
  RELEASE = 18,
  FSYNC = 20,
  SETXATTR = 21,
  GETXATTR = 22,
  LISTXATTR = 23,
  REMOVEXATTR = 24,
  FLUSH = 25,
  INIT = 26,
  OPENDIR = 27,
  READDIR = 28,
  RELEASEDIR = 29,
  FSYNCDIR = 30,
  ACCESS = 34,
  CREATE = 35,
  INTERRUPT = 36,
  DESTROY = 38,
  BATCH_FORGET = 42,  // no reply
  FALLOCATE = 43,
  READDIRPLUS = 44,
  RENAME2 = 45,
};

// INIT flags (flags | flags2 << 32).
constexpr uint64_t kAsyncRead = 1ull << 0;
constexpr uint64_t kAtomicOTrunc = 1ull << 3;
constexpr uint64_t kBigWrites = 1ull << 5;
constexpr uint64_t kHasIoctlDir = 1ull << 11;
constexpr uint64_t kAutoInvalData = 1ull << 12;
constexpr uint64_t kDoReaddirplus = 1ull << 13;
constexpr uint64_t kReaddirplusAuto = 1ull << 14;
constexpr uint64_t kAsyncDio = 1ull << 15;
constexpr uint64_t kWritebackCache = 1ull << 16;
constexpr uint64_t kNoOpenSupport = 1ull << 17;
constexpr uint64_t kParallelDirops = 1ull << 18;
constexpr uint64_t kMaxPages = 1ull << 22;
// We clear set-user-ID and set-group-ID bits ourselves, when a request says to (the flags
// below); the kernel then stops asking for security.capability before writes (it marks the
// superblock SB_NOSEC) and stops sending its own SETATTR of the mode.
constexpr uint64_t kHandleKillprivV2 = 1ull << 28;
constexpr uint64_t kCacheSymlinks = 1ull << 23;
constexpr uint64_t kNoOpendirSupport = 1ull << 24;
constexpr uint64_t kInitExt = 1ull << 30;
// Shared mmap of FOPEN_DIRECT_IO files (through the page cache), and a direct write drops
// the cached pages of the range it writes, so cached readers of the same file see it.
constexpr uint64_t kDirectIoAllowMmap = 1ull << 36;
constexpr uint64_t kPassthrough = 1ull << 37;
constexpr uint64_t kOverIoUring = 1ull << 41;

// fuse_open_out.open_flags
constexpr uint32_t kOpenDirectIo = 1u << 0;
constexpr uint32_t kOpenKeepCache = 1u << 1;
constexpr uint32_t kOpenCacheDir = 1u << 3;
constexpr uint32_t kOpenNoflush = 1u << 5;
constexpr uint32_t kOpenPassthrough = 1u << 7;

// fuse_setattr_in.valid
constexpr uint32_t kSetMode = 1u << 0;
constexpr uint32_t kSetUid = 1u << 1;
constexpr uint32_t kSetGid = 1u << 2;
constexpr uint32_t kSetSize = 1u << 3;
constexpr uint32_t kSetAtime = 1u << 4;
constexpr uint32_t kSetMtime = 1u << 5;
constexpr uint32_t kSetFh = 1u << 6;
constexpr uint32_t kSetAtimeNow = 1u << 7;
constexpr uint32_t kSetMtimeNow = 1u << 8;
constexpr uint32_t kSetCtime = 1u << 10;
// With kHandleKillprivV2: a truncate by a caller without CAP_FSETID, or any chown of a
// non-directory; clear the set-id bits as that change does.
constexpr uint32_t kSetKillSuidgid = 1u << 11;

// fuse_write_in.write_flags: the writer lacks CAP_FSETID, so the write clears the set-id bits.
constexpr uint32_t kWriteKillSuidgid = 1u << 2;
// fuse_open_in / fuse_create_in open_flags: an O_TRUNC open by a caller without CAP_FSETID.
constexpr uint32_t kOpenKillSuidgid = 1u << 0;

constexpr uint32_t kGetattrFh = 1u << 0;  // fuse_getattr_in.getattr_flags

// Notification codes (fuse_out_header.error of a message with unique 0).
constexpr int32_t kNotifyInvalInode = 2;
constexpr int32_t kNotifyInvalEntry = 3;
constexpr int32_t kNotifyIncEpoch = 8;

struct InHeader {
  uint32_t len;
  uint32_t opcode;
  uint64_t unique;
  uint64_t nodeid;
  uint32_t uid;
  uint32_t gid;
  uint32_t pid;
  uint16_t totalExtlen;  // in 8-byte units, after the op's arguments
  uint16_t padding;
};
static_assert(sizeof(InHeader) == 40);

struct OutHeader {
  uint32_t len;
  int32_t error;  // 0 or a negative errno; a notification code when unique is 0
  uint64_t unique;
};
static_assert(sizeof(OutHeader) == 16);

struct Attr {
  uint64_t ino;
  uint64_t size;
  uint64_t blocks;
  uint64_t atime;
  uint64_t mtime;
  uint64_t ctime;
  uint32_t atimensec;
  uint32_t mtimensec;
  uint32_t ctimensec;
  uint32_t mode;
  uint32_t nlink;
  uint32_t uid;
  uint32_t gid;
  uint32_t rdev;
  uint32_t blksize;
  uint32_t flags;
};
static_assert(sizeof(Attr) == 88);

struct EntryOut {
  uint64_t nodeid;
  uint64_t generation;
  uint64_t entryValid;
  uint64_t attrValid;
  uint32_t entryValidNsec;
  uint32_t attrValidNsec;
  Attr attr;
};
static_assert(sizeof(EntryOut) == 128);

struct AttrOut {
  uint64_t attrValid;
  uint32_t attrValidNsec;
  uint32_t dummy;
  Attr attr;
};
static_assert(sizeof(AttrOut) == 104);

struct GetattrIn {
  uint32_t getattrFlags;
  uint32_t dummy;
  uint64_t fh;
};
static_assert(sizeof(GetattrIn) == 16);

struct SetattrIn {
  uint32_t valid;
  uint32_t padding;
  uint64_t fh;
  uint64_t size;
  uint64_t lockOwner;
  uint64_t atime;
  uint64_t mtime;
  uint64_t ctime;
  uint32_t atimensec;
  uint32_t mtimensec;
  uint32_t ctimensec;
  uint32_t mode;
  uint32_t unused4;
  uint32_t uid;
  uint32_t gid;
  uint32_t unused5;
};
static_assert(sizeof(SetattrIn) == 88);

struct MknodIn {
  uint32_t mode;
  uint32_t rdev;
  uint32_t umask;
  uint32_t padding;
};
static_assert(sizeof(MknodIn) == 16);

struct MkdirIn {
  uint32_t mode;
  uint32_t umask;
};
static_assert(sizeof(MkdirIn) == 8);

struct RenameIn {
  uint64_t newdir;
};
struct Rename2In {
  uint64_t newdir;
  uint32_t flags;
  uint32_t padding;
};
static_assert(sizeof(Rename2In) == 16);

struct LinkIn {
  uint64_t oldnodeid;
};

struct OpenIn {
  uint32_t flags;
  uint32_t openFlags;
};
static_assert(sizeof(OpenIn) == 8);

struct CreateIn {
  uint32_t flags;
  uint32_t mode;
  uint32_t umask;
  uint32_t openFlags;
};
static_assert(sizeof(CreateIn) == 16);

struct OpenOut {
  uint64_t fh;
  uint32_t openFlags;
  int32_t backingId;  // FOPEN_PASSTHROUGH only
};
static_assert(sizeof(OpenOut) == 16);

struct ReleaseIn {
  uint64_t fh;
  uint32_t flags;
  uint32_t releaseFlags;
  uint64_t lockOwner;
};
static_assert(sizeof(ReleaseIn) == 24);

struct FlushIn {
  uint64_t fh;
  uint32_t unused;
  uint32_t padding;
  uint64_t lockOwner;
};
static_assert(sizeof(FlushIn) == 24);

struct ReadIn {
  uint64_t fh;
  uint64_t offset;
  uint32_t size;
  uint32_t readFlags;
  uint64_t lockOwner;
  uint32_t flags;
  uint32_t padding;
};
static_assert(sizeof(ReadIn) == 40);

struct WriteIn {
  uint64_t fh;
  uint64_t offset;
  uint32_t size;
  uint32_t writeFlags;
  uint64_t lockOwner;
  uint32_t flags;
  uint32_t padding;
};
static_assert(sizeof(WriteIn) == 40);

struct WriteOut {
  uint32_t size;
  uint32_t padding;
};
static_assert(sizeof(WriteOut) == 8);

struct FsyncIn {
  uint64_t fh;
  uint32_t fsyncFlags;
  uint32_t padding;
};
static_assert(sizeof(FsyncIn) == 16);

// Without FUSE_SETXATTR_EXT (never asked for), the 8-byte form.
struct SetxattrIn {
  uint32_t size;
  uint32_t flags;
};
static_assert(sizeof(SetxattrIn) == 8);

struct GetxattrIn {
  uint32_t size;
  uint32_t padding;
};
struct GetxattrOut {
  uint32_t size;
  uint32_t padding;
};
static_assert(sizeof(GetxattrIn) == 8 && sizeof(GetxattrOut) == 8);

struct Kstatfs {
  uint64_t blocks;
  uint64_t bfree;
  uint64_t bavail;
  uint64_t files;
  uint64_t ffree;
  uint32_t bsize;
  uint32_t namelen;
  uint32_t frsize;
  uint32_t padding;
  uint32_t spare[6];
};
static_assert(sizeof(Kstatfs) == 80);

struct ForgetIn {
  uint64_t nlookup;
};
struct BatchForgetIn {
  uint32_t count;
  uint32_t dummy;
};
struct ForgetOne {
  uint64_t nodeid;
  uint64_t nlookup;
};
static_assert(sizeof(BatchForgetIn) == 8 && sizeof(ForgetOne) == 16);

struct FallocateIn {
  uint64_t fh;
  uint64_t offset;
  uint64_t length;
  uint32_t mode;
  uint32_t padding;
};
static_assert(sizeof(FallocateIn) == 32);

// INIT as the kernel sends it from 7.36 on (older kernels send the first 16 bytes).
struct InitIn {
  uint32_t major;
  uint32_t minor;
  uint32_t maxReadahead;
  uint32_t flags;
  uint32_t flags2;
  uint32_t unused[11];
};
static_assert(sizeof(InitIn) == 64);

struct InitOut {
  uint32_t major;
  uint32_t minor;
  uint32_t maxReadahead;
  uint32_t flags;
  uint16_t maxBackground;
  uint16_t congestionThreshold;
  uint32_t maxWrite;
  uint32_t timeGran;
  uint16_t maxPages;
  uint16_t mapAlignment;
  uint32_t flags2;
  uint32_t maxStackDepth;
  uint16_t requestTimeout;
  uint16_t unused[11];
};
static_assert(sizeof(InitOut) == 64);
static_assert(offsetof(InitOut, maxWrite) == 20 && offsetof(InitOut, flags2) == 32);

struct InterruptIn {
  uint64_t unique;
};

struct Dirent {
  uint64_t ino;
  uint64_t off;
  uint32_t namelen;
  uint32_t type;  // DT_* value
  // name follows, the record padded to 8 bytes
};
static_assert(sizeof(Dirent) == 24);

struct DirentPlus {
  EntryOut entry;
  Dirent dirent;
};
static_assert(sizeof(DirentPlus) == 152);

constexpr size_t direntSize(size_t namelen) { return (sizeof(Dirent) + namelen + 7) & ~size_t{7}; }
constexpr size_t direntPlusSize(size_t namelen) {
  return (sizeof(DirentPlus) + namelen + 7) & ~size_t{7};
}

// Passthrough: ioctls on /dev/fuse registering a file of ours as the backing file of opens
// (FUSE_DEV_IOC_BACKING_OPEN returns its id) and releasing that id (BACKING_CLOSE).
struct BackingMap {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
static_assert(sizeof(BackingMap) == 16);
constexpr unsigned long iocWrite(unsigned nr, unsigned long size) {
  return (1ul << 30) | (size << 16) | (229ul << 8) | nr;  // _IOW(FUSE_DEV_IOC_MAGIC, nr, type)
}
constexpr unsigned long kIocBackingOpen = iocWrite(1, sizeof(BackingMap));
constexpr unsigned long kIocBackingClose = iocWrite(2, sizeof(uint32_t));

struct NotifyInvalInode {
  uint64_t ino;
  int64_t off;
  int64_t len;
};
static_assert(sizeof(NotifyInvalInode) == 24);

struct NotifyInvalEntry {
  uint64_t parent;
  uint32_t namelen;
  uint32_t flags;
  // name follows, with its terminating NUL
};
static_assert(sizeof(NotifyInvalEntry) == 16);

// FUSE over io_uring (protocol 7.42+, include/uapi/linux/fuse.h; served by fs/fuse/dev_uring.c).
// Each ring entry is two buffers the server registers: a header area (UringReqHeader) and a
// payload buffer. A request arrives with its fuse_in_header in inOut, the first of its
// arguments (the opcode's fixed struct, or nothing for opcodes the kernel gives a zero-size
// first argument) in opIn, every other argument in the payload buffer, and payloadSz saying how
// much of that buffer they fill. The reply goes back as a fuse_out_header in inOut and all of
// its arguments in the payload buffer, payloadSz again their length.
constexpr uint32_t kUringCmdRegister = 1;        // FUSE_IO_URING_CMD_REGISTER
constexpr uint32_t kUringCmdCommitAndFetch = 2;  // FUSE_IO_URING_CMD_COMMIT_AND_FETCH
constexpr size_t kUringInOutSize = 128;          // FUSE_URING_IN_OUT_HEADER_SZ
constexpr size_t kUringOpInSize = 128;           // FUSE_URING_OP_IN_OUT_SZ

struct UringEntInOut {
  uint64_t flags;
  uint64_t commitId;  // the request's unique, echoed in UringCmdReq::commitId
  uint32_t payloadSz;
  uint32_t padding;
  uint64_t reserved;
};
static_assert(sizeof(UringEntInOut) == 32);

struct UringReqHeader {
  char inOut[kUringInOutSize];  // fuse_in_header on fetch, fuse_out_header on commit
  char opIn[kUringOpInSize];
  UringEntInOut ringEntInOut;
};
static_assert(sizeof(UringReqHeader) == 288);
static_assert(offsetof(UringReqHeader, ringEntInOut) == 256);

// The command in the SQE's 80-byte command area (so the ring needs IORING_SETUP_SQE128).
struct UringCmdReq {
  uint64_t flags;
  uint64_t commitId;  // COMMIT_AND_FETCH: the unique of the request answered; 0 for REGISTER
  uint16_t qid;       // the queue: one per possible CPU, 0 .. nr-1
  uint8_t padding[6];
};
static_assert(sizeof(UringCmdReq) == 24);

}  // namespace abi
}  // namespace ll
}  // namespace shadowfs
