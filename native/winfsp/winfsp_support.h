// The parts of the WinFsp backend that need no driver and no WinFsp DLL, kept apart so the unit
// tests (test/native/winfsp/winfsp_support_test.cc) run them under wine: names between WinFsp's
// form ("\a\b", UTF-16) and the core's ("a/b", UTF-8), errno to NTSTATUS, attributes and times,
// the security descriptor every file reports, directory entries with their marker, batches of
// change records for FspFileSystemNotify, and reparse data for links.
//
// Threads: everything here is a pure function or a value type; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../core/types.h"
#include "winfsp_api.h"

namespace shadowfs {
namespace winfsp {

// --- Names ---
// A path as WinFsp passes it ("\", "\a\b": rooted, '\'-separated, no trailing '\') to the
// core's form ("", "a/b"). False for a name the core cannot hold: not rooted, an empty, "." or
// ".." component, or a '/' inside a component (Windows forbids it in names; the core would take
// it as a separator). The driver already refused NTFS-illegal characters and ':'.
bool toCorePath(const wchar_t* name, std::string* out);
// The core's path to WinFsp's form ("" -> "\").
std::wstring toWinPath(const std::string& core);
// The last component of a WinFsp path ("\a\b" -> "b"; "\" -> "").
std::wstring lastComponent(const std::wstring& winPath);

// --- Errors ---
// The NTSTATUS a real file system answers where the core returns this errno.
NTSTATUS statusFromErrno(int e);

// --- Attributes and times ---
// FILETIME (100 ns since 1601-01-01) from the core's time (since 1970) and back. Times before
// 1601 become 0, which WinFsp and Windows read as "unset".
UINT64 fileTimeOf(const Timespec& t);
Timespec timespecOf(UINT64 fileTime);
// The Windows attributes of an object: DIRECTORY for directories, REPARSE_POINT for links
// (plus DIRECTORY when `linkToDirectory`, as for a junction or a directory symlink), READONLY
// when no write bit is set (what win32_lower reports for the folder's read-only files, and what
// SetBasicInfo's READONLY sets), and the ones the core keeps as they are (Attr::winAttrs:
// HIDDEN, SYSTEM, ARCHIVE...). 0 for a plain file: the driver shows it as NORMAL.
UINT32 attributesOf(const Attr& a, bool linkToDirectory);
// The creation time: the object's own (Attr::birth: A's file's, copied up with it, or one set
// by SetBasicInfo), else the earliest of its times (never 1970 for a file that has times).
UINT64 creationTimeOf(const Attr& a);
// WinFsp's file information (CreationTime as creationTimeOf says). IndexNumber is the core's
// inode number.
void fileInfoOf(const Attr& a, bool linkToDirectory, uint32_t allocationUnit,
                FSP_FSCTL_FILE_INFO* out);
// The permission bits after SetBasicInfo/Overwrite set `attributes` (READONLY clears every
// write bit; no READONLY gives the owner's write bit back).
uint32_t permWithAttributes(uint32_t perm, UINT32 attributes);

// --- Security ---
// A self-relative security descriptor: owner and group the user this process runs as, a
// protected DACL giving full control to that user and to SYSTEM only, inherited by everything
// created below (so new files get the same). Other local users get nothing (finding 8).
// With `lowLabel`, also a SACL with one mandatory label: Low integrity, NO_WRITE_UP, inherited
// (SDDL S:(ML;OICI;NW;;;LW)), so a program of the same user running at Low integrity (a
// sandboxed run, #29) may write in the shadow, while A keeps its own labels (unlabelled objects
// count as Medium, which refuses Low writers). Without it, the label-free form (the mount point's).
// False and *error when the process token cannot be read.
bool ownerAndSystemDescriptor(std::string* out, std::string* error, bool lowLabel = true);
// GetSecurityByName/GetSecurity's protocol: copy `sd` into (buf, *size) when it fits, else
// BUFFER_OVERFLOW; *size always gets the size needed. A null `size` asks for nothing.
NTSTATUS copyDescriptor(const std::string& sd, PSECURITY_DESCRIPTOR buf, SIZE_T* size);

// --- Directory listings ---
struct DirRecord {
  std::wstring name;
  FSP_FSCTL_FILE_INFO info{};
};
// Orders a listing the way markers are found in it: "." then "..", then by UTF-16 code units.
// Stable across calls on one handle, which the driver's markers need.
void sortListing(std::vector<DirRecord>* v);
// The index of the first record strictly after `marker` (null: 0). The marker need not exist
// any more (an entry deleted between two queries).
size_t firstAfter(const std::vector<DirRecord>& v, const wchar_t* marker);
// FspFileSystemAddDirInfo's format: appends one record at *used (8-byte aligned), false when
// it does not fit (nothing written).
bool addDirInfo(const DirRecord& r, void* buf, ULONG length, ULONG* used);
// Fills `buf` with the records after `marker`, then the end-of-listing mark (a 2-byte zero)
// only when every remaining record fitted: the driver asks again with the last name as marker.
void fillDirectory(const std::vector<DirRecord>& v, const wchar_t* marker, void* buf, ULONG length,
                   ULONG* used);

// --- Change records (FspFileSystemNotify) ---
// Collects changed paths and lays them out as FSP_FSCTL_NOTIFY_INFO records, each with an
// absolute name, 8-byte aligned, in buffers of at most `maxBytes` (a record is never split: one
// bigger than that has a buffer of its own).
// Each path once. Names too long for WinFsp's notify path limit are replaced by their parent
// (whose listing then is invalidated instead).
class NotifyBatch {
 public:
  void add(const std::string& corePath, UINT32 filter, UINT32 action);
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  std::vector<std::string> buffers(size_t maxBytes) const;

 private:
  struct Item {
    std::wstring name;
    UINT32 filter;
    UINT32 action;
  };
  std::vector<Item> items_;
  std::vector<std::wstring> seen_;  // names added, folded (small batches: a linear scan)
};
// What every record shadowfs sends says changed: a name (file or directory), its attributes,
// size, times. A record with filter 0 would do nothing for a name nobody has open.
constexpr UINT32 kNotifyAll = FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME |
                              FILE_NOTIFY_CHANGE_ATTRIBUTES | FILE_NOTIFY_CHANGE_SIZE |
                              FILE_NOTIFY_CHANGE_LAST_WRITE;

// --- Links ---
// Where a link's target (as the core's readlink gives it: relative with '/', or an absolute
// Windows path "C:\x") leads, seen from the shadow of the folder `lowerRoot` (a Windows path,
// the \\?\ form allowed).
struct LinkPlace {
  enum Kind { Relative, InsideFolder, Outside } kind = Relative;
  std::wstring relative;  // Relative: the target with '\' separators
  std::string inside;     // InsideFolder: the core path of the target in the folder ("" = root)
  std::wstring outside;   // Outside: the absolute Windows path
};
LinkPlace placeOfLink(const std::string& target, const std::wstring& lowerRoot);
// The NT name a symbolic link's substitute name gives the absolute Windows path `outside`
// (LinkPlace::outside): \??\C:\x for a drive path, \??\UNC\server\share\x for a UNC one
// (\??\ followed by \\server would name nothing).
std::wstring ntLinkName(const std::wstring& outside);
// REPARSE_DATA_BUFFER for IO_REPARSE_TAG_SYMLINK with these names and flags (SYMLINK_FLAG_*).
std::string symlinkReparseData(const std::wstring& substitute, const std::wstring& print,
                               ULONG flags);

}  // namespace winfsp
}  // namespace shadowfs
