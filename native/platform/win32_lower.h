// LowerFs and SpillStore for Windows: the user's folder read through Win32 handles opened with
// every share mode and held only for the length of one call (the developer is never locked out
// of a file the shadow reads, nor out of renaming its directories), inode numbers handed out by
// a table (no collisions, never in the layer's range), reparse points reported rather than
// followed, and paths of any length (the \\?\ form).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "../core/lower.h"
#include "../core/spill.h"
#include "win32_path.h"  // toWide, toUtf8, longPath, joinRel

namespace shadowfs {

// Opens the folder `rootUtf8` (a Windows path, '\' or '/' separated, relative paths resolved
// against the current directory; must be a directory). Null and *err (an errno) on failure.
//
// Reparse points: a symbolic link (IO_REPARSE_TAG_SYMLINK) and a junction or volume mount point
// (IO_REPARSE_TAG_MOUNT_POINT) are both reported as FileType::Symlink, never followed, and
// readlink() returns their target: relative targets with '/' separators, absolute ones in
// Windows form without the NT "\??\" prefix ("C:\dir", "\\server\share\dir"). That is what
// Node's fs.lstat/readlink report for junctions too, and package managers make junctions (pnpm
// node_modules). Other reparse points (cloud placeholders, deduplicated files, app execution
// aliases...) are ordinary files or directories to the shadow; readlink() on them is EINVAL.
//
// Inode numbers (win32::InodeNumbers): each distinct file of the folder (its volume's serial
// number and its file ID, 64-bit on NTFS, 128-bit on ReFS and Dev Drive) has one number for the
// life of this LowerFs, the same from stat(), fstat() and every hard link; no two files share
// one, and none reaches the core's kFirstLayerIno. An NTFS ID below 2^59 is its own number
// (what Node's fs.stat says of the file in A, and the same after a remount); any other ID (a
// 128-bit ReFS one, an NTFS one whose sequence bits reach 2^59) is given one from a table, in a
// range of its own. readdir() entries carry ino 0 (FindFirstFileExW has no file IDs).
//
// Open files hold no handle. open() checks the file and records its path and ID; each pread()
// and fstat() opens it again (by path, or by ID when the path no longer names it), reads and
// closes. So while the shadow has a file of A open, the developer can still rename or delete
// it, and rename or delete its directories (Windows refuses to rename a directory while any
// handle is open below it, whatever the share modes). What a handle then reads:
// - the file renamed or moved (its directories too): the same file, found by its ID;
// - the file deleted (or replaced by another under its name, as an editor's safe save does,
//   and the old one deleted): ENOENT, the core's word for "that object is gone" (MinGW has no
//   ESTALE). A POSIX file system would still read the old bytes; holding a handle to give them
//   is what locks the developer out.
// - the developer holding the file open with no read sharing: EBUSY for that call.
// A file mapped for execution through the shadow is the core's and backend's business: it
// must be copied into the layer (the interface has no notion of it; see the issue #28 note).
//
// Names are found in any case, as Windows finds them (caseInsensitive() is true), and
// storedName() tells how the folder spells an entry: an overlay that matches names ignoring
// case (NameMatch::IgnoreCase) keeps the folder's spelling with it. A directory made
// case-sensitive (fsutil file setCaseSensitiveInfo) is still asked as one that is not: its
// names are then found only as spelt.
std::unique_ptr<LowerFs> openWin32Lower(const std::string& rootUtf8, int* err);

// Spill files: FILE_FLAG_DELETE_ON_CLOSE temporary files in `dirUtf8`, which must exist and
// should not be inside the folder being shadowed. A file's name is gone when it is destroyed.
std::unique_ptr<SpillStore> openWin32Spill(const std::string& dirUtf8, int* err);

namespace win32 {

// The errno for a Win32 error code (GetLastError()); EIO for codes with no better match.
int errnoFromWin32(uint32_t error);

// The target readlink() reports (see openWin32Lower) for a reparse point's data as
// FSCTL_GET_REPARSE_POINT returns it (a REPARSE_DATA_BUFFER). False for a tag that is no link
// or malformed data.
bool linkTarget(const void* reparseData, size_t size, std::string* out);

// The folder's root as the Win32 modules address it: the \\?\ form of its final path (a link
// the user named as the root is followed once, here). 0, or an errno (ENOTDIR: no directory).
int resolveRoot(const std::string& rootUtf8, std::wstring* out);

// 0 when `path` (\\?\ form) is a directory that is no symlink or junction (never followed);
// ENOTDIR when it is anything else, or the errno of opening it.
int checkDirectory(const std::wstring& path);

// A reader/writer lock on Windows' own SRWLOCK, usable with std::shared_lock and
// std::unique_lock. Not std::shared_mutex: in MinGW builds that is winpthreads' pthread_rwlock,
// which under wine let two exclusive holders in at once (a table numbered one file twice; a
// stand-alone repeat of it crashed), while SRWLOCK, std::mutex and libstdc++'s
// condition-variable shared_mutex held in the same test.
class SrwLock {
 public:
  SrwLock() = default;
  SrwLock(const SrwLock&) = delete;
  SrwLock& operator=(const SrwLock&) = delete;
  void lock();
  void unlock();
  void lock_shared();
  void unlock_shared();

 private:
  void* state_ = nullptr;  // an SRWLOCK: one pointer, SRWLOCK_INIT is all zeros
};

// The inode numbers of the files of one folder (see openWin32Lower). Thread-safe.
// - A 64-bit ID (the upper half of the 128 bits zero) on the folder's own volume, from 1 to
//   below kDirectLimit, is its own number: on NTFS that is the file index every Windows tool
//   shows (Node's fs.stat ino included), and it stays the same across mounts, which the layer's
//   recorded bases and saved checkpoints rely on.
// - Any other (volume, ID) gets the next number from kTableFirst up, from a table. Growth: one
//   entry (about 72 bytes) per such file met, never dropped while the LowerFs lives (a number
//   must stay its file's while the core or the kernel may hold it). On NTFS that is only files
//   whose ID's sequence number reached 2048 (records reused that often); on ReFS and Dev Drive
//   it is every file the shadow looks at, plus churn (a file deleted and made again is a new
//   ID). Table numbers are not stable across mounts. A remount starts a new table.
// The two ranges do not overlap, and both end below the core's kFirstLayerIno (2^60 + 1).
class InodeNumbers {
 public:
  struct Key {
    uint64_t volume = 0;  // the volume's serial number
    uint8_t id[16] = {};  // the file ID (a 64-bit one in the first 8 bytes, the rest 0)
    bool operator==(const Key& o) const;
  };
  static constexpr uint64_t kDirectLimit = 1ull << 59;
  static constexpr uint64_t kTableFirst = kDirectLimit;
  static constexpr uint64_t kTableLimit = 1ull << 60;  // checked against kFirstLayerIno in the .cc

  // `homeVolume`: the serial number of the folder's volume (its root's).
  explicit InodeNumbers(uint64_t homeVolume) : home_(homeVolume) {}
  InodeNumbers(const InodeNumbers&) = delete;
  InodeNumbers& operator=(const InodeNumbers&) = delete;

  // The number of `key`. 0 only when the table's range is used up (2^59 files: never).
  uint64_t number(const Key& key);
  // How many keys the table holds (those not numbered directly).
  size_t tableSize() const;

 private:
  struct Hash {
    size_t operator()(const Key& k) const;
  };
  const uint64_t home_;
  mutable SrwLock mu_;  // a leaf lock: nothing else is taken while it is held
  std::unordered_map<Key, uint64_t, Hash> map_;
  uint64_t next_ = kTableFirst;
};

}  // namespace win32
}  // namespace shadowfs
