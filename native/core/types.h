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
  // Windows' metadata with no POSIX meaning, kept per layer object and copied up from the
  // folder (win32_lower reports it; POSIX folders and the Linux backends neither set nor show
  // it). `winAttrs`: the attributes of kWinAttrsKept, in Windows' own bit values. `birth`: the
  // creation time, when `hasBirth` (else the object has none of its own: backends derive one).
  uint32_t winAttrs = 0;
  bool hasBirth = false;
  Timespec birth;
};

// The Windows file attributes the core keeps as they are (FILE_ATTRIBUTE_HIDDEN, _SYSTEM,
// _ARCHIVE, _TEMPORARY, _OFFLINE, _NOT_CONTENT_INDEXED: what SetFileAttributesW may set that no
// POSIX attribute says). READONLY is not among them: it is the write bits of `perm`.
// DIRECTORY and REPARSE_POINT follow from the type.
constexpr uint32_t kWinAttrHidden = 0x2, kWinAttrSystem = 0x4, kWinAttrArchive = 0x20;
constexpr uint32_t kWinAttrsKept = kWinAttrHidden | kWinAttrSystem | kWinAttrArchive | 0x100 |
                                   0x1000 | 0x2000;

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
  kSetWinAttrs = 1u << 9,  // Attr::winAttrs (only the bits of kWinAttrsKept are kept)
  kSetBirth = 1u << 10,    // Attr::birth
};

// rename(2) flags, with the values Linux uses so the Linux backend passes them unchanged.
enum RenameFlags : uint32_t { kRenameNoReplace = 1u << 0, kRenameExchange = 1u << 1 };

// open(2) intent, reduced to what the overlay needs to know.
struct OpenIntent {
  bool write = false;     // O_WRONLY or O_RDWR
  bool truncate = false;  // O_TRUNC
  bool append = false;    // O_APPEND
  bool exclusive = false; // O_EXCL (create only)
  bool exec = false;      // opened to be executed (Linux's FMODE_EXEC), for the audit trail
  // The handle of one READ or WRITE request, not a program's open (fuse_ll without open round
  // trips): the audit trail records no open for it.
  bool transient = false;
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
  // Where in the folder the layer still reads this entry from, when not from its own path: a
  // file or directory the agent moved or renamed (a directory: everything under it too).
  std::optional<std::string> origin;
};

constexpr uint32_t kNameMax = 255;

}  // namespace shadowfs
