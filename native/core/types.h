// Plain value types shared by the overlay core, the lower-folder adapters and the backends.
// OS-free on purpose: no <sys/stat.h> here, so the Windows build sees the same definitions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shadowfs {

enum class FileType : uint8_t { Regular, Directory, Symlink, Fifo, Socket, CharDevice, BlockDevice };

struct Timespec {
  int64_t sec = 0;
  int64_t nsec = 0;
  bool operator==(const Timespec& o) const { return sec == o.sec && nsec == o.nsec; }
  bool operator!=(const Timespec& o) const { return !(*this == o); }
};

// Attributes of one object as the shadow reports them. `perm` holds the permission bits
// (07777) only; the type lives in `type`.
struct Attr {
  uint64_t ino = 0;
  FileType type = FileType::Regular;
  uint32_t perm = 0;
  uint32_t nlink = 1;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t rdev = 0;
  uint64_t size = 0;
  uint64_t blocks = 0;  // 512-byte units
  uint32_t blksize = 4096;
  Timespec atime, mtime, ctime;
  // One of the layer's own objects (made or copied up in it), not the folder's file seen
  // through: its nlink counts the layer's names. A folder file's nlink counts the folder's hard
  // links, which the layer treats as separate files (a copy-up takes one name only).
  bool layerObject = false;
};

// A stretch of a file that holds data (see Overlay::dataExtents); outside such stretches a
// sparse file reads as zeros.
struct Extent {
  uint64_t off = 0;
  uint64_t len = 0;
};

struct DirEntry {
  std::string name;
  uint64_t ino = 0;
  FileType type = FileType::Regular;
};

struct FsStats {
  uint64_t bsize = 4096, frsize = 4096, blocks = 0, bfree = 0, bavail = 0, files = 0, ffree = 0,
           namemax = 255;
};

// Who is asking, for ownership of new objects.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

// Which attributes a setattr call changes.
enum SetAttrMask : uint32_t {
  kSetMode = 1u << 0,
  kSetUid = 1u << 1,
  kSetGid = 1u << 2,
  kSetSize = 1u << 3,
  kSetAtime = 1u << 4,
  kSetMtime = 1u << 5,
  kSetAtimeNow = 1u << 6,
  kSetMtimeNow = 1u << 7,
  kSetCtime = 1u << 8,
};

// rename(2) flags, with the values Linux uses so the Linux backend passes them unchanged.
enum RenameFlags : uint32_t { kRenameNoReplace = 1u << 0, kRenameExchange = 1u << 1 };

// open(2) intent, reduced to what the overlay needs to know.
struct OpenIntent {
  bool write = false;     // O_WRONLY or O_RDWR
  bool truncate = false;  // O_TRUNC
  bool append = false;    // O_APPEND
  bool exclusive = false; // O_EXCL (create only)
};

// What a file of the folder was when a layer took its content (a copy-up) or replaced it: the
// identity the changes-out service compares with the folder's file now to find conflicts.
struct Base {
  uint64_t ino = 0;
  uint64_t size = 0;
  Timespec mtime, ctime;
  bool hashed = false;  // false when the content was replaced without being read (O_TRUNC, API)
  uint64_t hash = 0;    // contentHash() of the content read, when `hashed`
};

// One entry of Overlay::changes().
struct Change {
  enum class Kind { Added, Modified, Deleted, Metadata };
  std::string path;
  Kind kind;
  FileType type;
  std::optional<Base> base;  // files whose content the layer took from the folder
};

constexpr uint32_t kNameMax = 255;

}  // namespace shadowfs
