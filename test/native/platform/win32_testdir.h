// A real temporary folder for the Windows platform tests (win32_*_test.cc): made under
// GetTempPathW with a unique name, filled and changed with plain Win32 calls (as a developer's
// tools would), removed with everything in it at the end. Paths given to it are relative and
// '/'-separated, like the core's; they may be longer than MAX_PATH.
#pragma once

#include <windows.h>

#include <atomic>
#include <string>
#include <vector>

#include "../../../native/platform/win32_lower.h"
#include "../unit/unit.h"

namespace wintest {

inline std::wstring wide(const std::string& utf8) {
  std::wstring w;
  shadowfs::win32::toWide(utf8, &w);
  return w;
}

// Removes `dir` (a \\?\ path) and all it holds, never following a link or junction inside.
inline void removeTree(const std::wstring& dir) {
  WIN32_FIND_DATAW d;
  HANDLE f = FindFirstFileW((dir + L"\\*").c_str(), &d);
  if (f != INVALID_HANDLE_VALUE) {
    do {
      std::wstring name = d.cFileName;
      if (name == L"." || name == L"..") continue;
      std::wstring p = dir + L"\\" + name;
      SetFileAttributesW(p.c_str(), FILE_ATTRIBUTE_NORMAL);
      if (d.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
        if (!(d.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) removeTree(p);
        else RemoveDirectoryW(p.c_str());
      } else {
        DeleteFileW(p.c_str());
      }
    } while (FindNextFileW(f, &d));
    FindClose(f);
  }
  RemoveDirectoryW(dir.c_str());
}

struct TempDir {
  std::string root;      // as a user would name it: "C:\...\Temp\shadowfs-unit-..."
  std::wstring longRoot; // its \\?\ form, for the test's own Win32 calls

  TempDir() {
    static std::atomic<unsigned> counter{0};
    wchar_t tmp[MAX_PATH + 1];
    DWORD n = GetTempPathW(MAX_PATH + 1, tmp);
    if (n == 0 || n > MAX_PATH) {
      unit::fail(__FILE__, __LINE__, "GetTempPathW failed");
      throw unit::Abort{};
    }
    std::wstring base(tmp, n);
    if (base.back() != L'\\') base.push_back(L'\\');
    for (int attempt = 0;; ++attempt) {
      std::wstring name = base + L"shadowfs-unit-" + std::to_wstring(GetCurrentProcessId()) + L"-" +
                          std::to_wstring(counter++) + L"-" + std::to_wstring(GetTickCount64());
      if (CreateDirectoryW(name.c_str(), nullptr)) {
        root = shadowfs::win32::toUtf8(name);
        longRoot = shadowfs::win32::longPath(name);
        break;
      }
      if (attempt > 100) {
        unit::fail(__FILE__, __LINE__, "cannot create a temporary folder");
        throw unit::Abort{};
      }
    }
  }
  ~TempDir() { removeTree(longRoot); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::wstring at(const std::string& rel) const {
    std::wstring p = longRoot;
    if (rel.empty()) return p;
    p.push_back(L'\\');
    for (wchar_t c : wide(rel)) p.push_back(c == L'/' ? L'\\' : c);
    return p;
  }

  bool mkdir(const std::string& rel) const { return CreateDirectoryW(at(rel).c_str(), nullptr) != 0; }

  // Creates or replaces a file with `data`.
  bool write(const std::string& rel, const std::string& data) const {
    HANDLE h = CreateFileW(at(rel).c_str(), GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           nullptr, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) return false;
    DWORD n = 0;
    bool ok = data.empty() || (WriteFile(h, data.data(), static_cast<DWORD>(data.size()), &n, nullptr) &&
                               n == data.size());
    CloseHandle(h);
    return ok;
  }

  // The file's bytes, or "<missing>".
  std::string read(const std::string& rel) const {
    HANDLE h = CreateFileW(at(rel).c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           nullptr, OPEN_EXISTING, 0, nullptr);
    if (h == INVALID_HANDLE_VALUE) return "<missing>";
    std::string out;
    char buf[4096];
    DWORD n = 0;
    while (ReadFile(h, buf, sizeof buf, &n, nullptr) && n > 0) out.append(buf, n);
    CloseHandle(h);
    return out;
  }

  bool exists(const std::string& rel) const {
    return GetFileAttributesW(at(rel).c_str()) != INVALID_FILE_ATTRIBUTES;
  }

  // Names in a directory of the folder (not "." or "..").
  std::vector<std::string> names(const std::string& rel) const {
    std::vector<std::string> out;
    WIN32_FIND_DATAW d;
    HANDLE f = FindFirstFileW((at(rel) + L"\\*").c_str(), &d);
    if (f == INVALID_HANDLE_VALUE) return out;
    do {
      std::wstring n = d.cFileName;
      if (n != L"." && n != L"..") out.push_back(shadowfs::win32::toUtf8(n));
    } while (FindNextFileW(f, &d));
    FindClose(f);
    return out;
  }
};

}  // namespace wintest
