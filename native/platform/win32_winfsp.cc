// See win32_winfsp.h.
#if defined(_WIN32)
#include "win32_winfsp.h"

#include <windows.h>

#include <mutex>

namespace shadowfs {
namespace {

// The FUSE3 entry points fuse_hl will call (WinFsp exports them with an fsp_ prefix and an
// environment argument first).
const char* const kEntryPoints[] = {
    "fsp_fuse3_new", "fsp_fuse3_mount", "fsp_fuse3_unmount", "fsp_fuse3_destroy",
    "fsp_fuse3_loop_mt_31", "fsp_fuse3_exit", "fsp_fuse3_get_context",
};

std::string narrow(const std::wstring& w) {
  if (w.empty()) return std::string();
  int n = WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), nullptr, 0, nullptr, nullptr);
  std::string out(static_cast<size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), out.data(), n, nullptr, nullptr);
  return out;
}

bool readInstallDir(const wchar_t* subkey, REGSAM view, std::wstring* out) {
  HKEY key;
  if (RegOpenKeyExW(HKEY_LOCAL_MACHINE, subkey, 0, KEY_READ | view, &key) != ERROR_SUCCESS) return false;
  wchar_t buf[MAX_PATH * 2];
  DWORD type = 0, size = sizeof buf - sizeof(wchar_t);
  LONG rc = RegQueryValueExW(key, L"InstallDir", nullptr, &type, reinterpret_cast<BYTE*>(buf), &size);
  RegCloseKey(key);
  if (rc != ERROR_SUCCESS || (type != REG_SZ && type != REG_EXPAND_SZ)) return false;
  buf[size / sizeof(wchar_t)] = L'\0';
  *out = buf;
  return !out->empty();
}

std::string lastError() {
  DWORD e = GetLastError();
  wchar_t* msg = nullptr;
  FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                 nullptr, e, 0, reinterpret_cast<wchar_t*>(&msg), 0, nullptr);
  std::string text = msg ? narrow(msg) : std::string();
  if (msg) LocalFree(msg);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return "Windows error " + std::to_string(e) + (text.empty() ? "" : ": " + text);
}

// The file version from the DLL's version resource, "" when it has none.
std::string fileVersion(const std::wstring& file) {
  DWORD ignored = 0;
  DWORD size = GetFileVersionInfoSizeW(file.c_str(), &ignored);
  if (size == 0) return std::string();
  std::string buf(size, '\0');
  if (!GetFileVersionInfoW(file.c_str(), 0, size, buf.data())) return std::string();
  VS_FIXEDFILEINFO* info = nullptr;
  UINT len = 0;
  if (!VerQueryValueW(buf.data(), L"\\", reinterpret_cast<void**>(&info), &len) || !info || len < sizeof *info)
    return std::string();
  return std::to_string(HIWORD(info->dwFileVersionMS)) + "." + std::to_string(LOWORD(info->dwFileVersionMS)) + "." +
         std::to_string(HIWORD(info->dwFileVersionLS)) + "." + std::to_string(LOWORD(info->dwFileVersionLS));
}

WinFspLoad load() {
  WinFspLoad r;
  std::wstring dir;
  if (!readInstallDir(L"SOFTWARE\\WOW6432Node\\WinFsp", KEY_WOW64_64KEY, &dir) &&
      !readInstallDir(L"SOFTWARE\\WinFsp", KEY_WOW64_32KEY, &dir)) {
    r.error = "WinFsp is not installed (no InstallDir under HKLM\\SOFTWARE\\WOW6432Node\\WinFsp); "
              "install it from https://winfsp.dev/rel/ and try again";
    return r;
  }
  if (dir.back() != L'\\' && dir.back() != L'/') dir += L'\\';
  r.installDir = narrow(dir);
  std::wstring dll = dir + L"bin\\winfsp-x64.dll";
  r.dll = narrow(dll);
  // A full path, and the DLL's own directory for its dependencies: never the search path.
  HMODULE m = LoadLibraryExW(dll.c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
  if (!m) {
    r.error = "cannot load " + r.dll + " (" + lastError() + "); reinstall WinFsp from https://winfsp.dev/rel/";
    return r;
  }
  r.module = m;
  r.version = fileVersion(dll);
  for (const char* name : kEntryPoints) {
    if (GetProcAddress(m, name)) r.resolved.push_back(name);
    else r.missing.push_back(name);
  }
  if (!r.missing.empty()) {
    r.error = r.dll + " lacks the FUSE3 entry points shadowfs needs (" + r.missing.front() +
              (r.missing.size() > 1 ? " and others" : "") + "); install a current WinFsp from https://winfsp.dev/rel/";
    return r;
  }
  r.available = true;
  return r;
}

}  // namespace

const WinFspLoad& loadWinFsp() {
  static std::once_flag once;
  static WinFspLoad result;
  std::call_once(once, [] { result = load(); });
  return result;
}

void* winFspProc(const char* name) {
  const WinFspLoad& l = loadWinFsp();
  if (!l.module) return nullptr;
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(l.module), name));
}

}  // namespace shadowfs
#endif
