// Windows paths, the counterpart of posix_path.h: names between the core's UTF-8 and Win32's
// UTF-16 (lossless for every name Windows allows), the \\?\ long form that lifts MAX_PATH and
// Win32's rewriting of "." / ".." / trailing dots, and the core's '/'-separated relative paths
// joined onto the folder's root. Used by win32_lower, win32_watcher and the winfsp backend.
#pragma once

#include <cstddef>
#include <string>

namespace shadowfs {
namespace win32 {

// UTF-8 <-> UTF-16, losslessly for names Windows allows but UTF-16 does not (an unpaired
// surrogate travels as its 3-byte WTF-8 form). toWide() is false for bytes that are not
// (W)UTF-8: no such name can exist on Windows.
bool toWide(const std::string& utf8, std::wstring* out);
std::string toUtf8(const wchar_t* s, size_t n);
inline std::string toUtf8(const std::wstring& s) { return toUtf8(s.data(), s.size()); }

// The \\?\ form of an absolute or relative Windows path (GetFullPathNameW, then "\\?\" or
// "\\?\UNC\"), with no trailing separator except after a drive ("\\?\C:\"). Empty on failure.
std::wstring longPath(const std::wstring& path);

// root + '\' + rel ('/'-separated, normalised, "" = the root itself) with '\' separators. A
// component no Windows name can be ('\', ':', wildcards, control characters; ':' would name
// an alternate data stream) is ENOENT: the folder cannot hold it. "", "." and ".." components
// never come from the core: EINVAL.
int joinRel(const std::wstring& root, const std::string& rel, std::wstring* out);

// A path without its long-form prefix, as users and Node spell it: "\\?\C:\x" and the NT form
// "\??\C:\x" -> "C:\x", "\\?\UNC\s\x" -> "\\s\x"; anything else unchanged.
std::wstring plainPath(const std::wstring& p);

// A mount point as WinFsp takes it: '\' separators, no trailing one, and a drive's root
// ("X:\" or "X:/", as the TypeScript side gives it) as the bare letter "X:". False for bytes
// that are not (W)UTF-8.
bool mountPointOf(const std::string& utf8, std::wstring* out);

}  // namespace win32
}  // namespace shadowfs
