// LowerFs and SpillStore for Windows: the user's folder read through Win32 handles opened with
// every share mode (the developer is never locked out of a file the shadow reads), reparse
// points reported rather than followed, and paths of any length (the \\?\ form).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "../core/lower.h"
#include "../core/spill.h"

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
// readdir() entries carry ino 0 (FindFirstFileExW has no file IDs); stat() has the real one.
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

// UTF-8 <-> UTF-16, losslessly for names Windows allows but UTF-16 does not (an unpaired
// surrogate travels as its 3-byte WTF-8 form). toWide() is false for bytes that are not
// (W)UTF-8: no such name can exist on Windows.
bool toWide(const std::string& utf8, std::wstring* out);
std::string toUtf8(const wchar_t* s, size_t n);
inline std::string toUtf8(const std::wstring& s) { return toUtf8(s.data(), s.size()); }

// The target readlink() reports (see openWin32Lower) for a reparse point's data as
// FSCTL_GET_REPARSE_POINT returns it (a REPARSE_DATA_BUFFER). False for a tag that is no link
// or malformed data.
bool linkTarget(const void* reparseData, size_t size, std::string* out);

// The \\?\ form of an absolute or relative Windows path (GetFullPathNameW, then "\\?\" or
// "\\?\UNC\"), with no trailing separator except after a drive ("\\?\C:\"). Empty on failure.
std::wstring longPath(const std::wstring& path);

// The folder's root as the Win32 modules address it: the \\?\ form of its final path (a link
// the user named as the root is followed once, here). 0, or an errno (ENOTDIR: no directory).
int resolveRoot(const std::string& rootUtf8, std::wstring* out);

// root + '\' + rel ('/'-separated, normalised, "" = the root itself) with '\' separators. A
// component no Windows name can be ('\', ':', wildcards, control characters; ':' would name
// an alternate data stream) is ENOENT: the folder cannot hold it. "", "." and ".." components
// never come from the core: EINVAL.
int joinRel(const std::wstring& root, const std::string& rel, std::wstring* out);

// 0 when `path` (\\?\ form) is a directory that is no symlink or junction (never followed);
// ENOTDIR when it is anything else, or the errno of opening it.
int checkDirectory(const std::wstring& path);

}  // namespace win32
}  // namespace shadowfs
