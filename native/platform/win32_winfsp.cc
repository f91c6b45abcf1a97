// See win32_winfsp.h.
#if defined(_WIN32)
#include "win32_winfsp.h"

#include <windows.h>

#include <mutex>

namespace shadowfs {
namespace {

// The native-API entry points the "winfsp" backend calls (native/winfsp/winfsp_api.h declares
// their types). Functions WinFsp's header defines inline (FspFileSystemMountPoint and the other
// accessors of FSP_FILE_SYSTEM) are no exports; where the backend needs one it calls the
// exported "F" twin or reads the field itself.
const char* const kNativeEntryPoints[] = {
    "FspFileSystemCreate",          "FspFileSystemDelete",
    "FspFileSystemSetMountPointEx", "FspFileSystemRemoveMountPoint",
    "FspFileSystemStartDispatcher", "FspFileSystemStopDispatcher",
    "FspFileSystemNotifyBegin",     "FspFileSystemNotify",
    "FspFileSystemNotifyEnd",       "FspFileSystemGetOperationContext",
    "FspFileSystemSetOperationGuardStrategyF", "FspFileSystemResolveReparsePoints",
    "FspWin32FromNtStatus",
};

// The FUSE3 entry points fuse_hl will call (WinFsp exports them with an fsp_ prefix and an
// environment argument first).
const char* const kFuse3EntryPoints[] = {
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

// Where the DLL comes from, in this order:
// 1. The registry's InstallDir (what WinFsp's installer writes), loaded by full path. WinFsp's
//    own FspLoad (winfsp.h:2186-2234) tries the bare name "winfsp-x64.dll" *first*, through the
//    normal search order: the application's directory, the system directories, the current
//    directory and PATH. A program started in an agent's working folder would then load a DLL
//    that folder holds. We ask the registry first instead.
// 2. Without a registry value: a copy already loaded in this process (the host loaded it; no
//    search happens), else the bare name searched only in the application's directory (where
//    node.exe lives) and System32 (LOAD_LIBRARY_SEARCH_*): never the current directory and
//    never PATH. That keeps FspLoad's "bare name" route for a WinFsp shipped beside the program
//    without its DLL-planting risk.
HMODULE openDll(WinFspLoad* r) {
  std::wstring dir;
  if (readInstallDir(L"SOFTWARE\\WOW6432Node\\WinFsp", KEY_WOW64_64KEY, &dir) ||
      readInstallDir(L"SOFTWARE\\WinFsp", KEY_WOW64_32KEY, &dir)) {
    if (dir.back() != L'\\' && dir.back() != L'/') dir += L'\\';
    r->installDir = narrow(dir);
    std::wstring dll = dir + L"bin\\winfsp-x64.dll";
    r->dll = narrow(dll);
    // A full path, and the DLL's own directory for its dependencies: never the search path.
    HMODULE m = LoadLibraryExW(dll.c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!m) {
      r->error = "cannot load " + r->dll + " (" + lastError() + "); reinstall WinFsp from https://winfsp.dev/rel/";
      return nullptr;
    }
    r->version = fileVersion(dll);
    return m;
  }
  HMODULE m = GetModuleHandleW(L"winfsp-x64.dll");
  if (m) {
    r->dll = "winfsp-x64.dll (already loaded in this process)";
  } else {
    m = LoadLibraryExW(L"winfsp-x64.dll", nullptr,
                       LOAD_LIBRARY_SEARCH_APPLICATION_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32);
    if (m) r->dll = "winfsp-x64.dll (beside the program or in System32)";
  }
  if (!m) {
    r->error = "WinFsp is not installed (no InstallDir under HKLM\\SOFTWARE\\WOW6432Node\\WinFsp); "
               "install it from https://winfsp.dev/rel/ and try again";
    return nullptr;
  }
  wchar_t path[MAX_PATH * 2];
  DWORD n = GetModuleFileNameW(m, path, static_cast<DWORD>(sizeof path / sizeof path[0]));
  if (n > 0 && n < sizeof path / sizeof path[0]) r->version = fileVersion(std::wstring(path, n));
  return m;
}

WinFspLoad load() {
  WinFspLoad r;
  HMODULE m = openDll(&r);
  if (!m) return r;
  r.module = m;
  auto resolve = [&](const char* const* names, size_t count) {
    bool all = true;
    for (size_t i = 0; i < count; ++i) {
      if (GetProcAddress(m, names[i])) {
        r.resolved.push_back(names[i]);
      } else {
        r.missing.push_back(names[i]);
        all = false;
      }
    }
    return all;
  };
  r.native = resolve(kNativeEntryPoints, sizeof kNativeEntryPoints / sizeof kNativeEntryPoints[0]);
  r.fuse3 = resolve(kFuse3EntryPoints, sizeof kFuse3EntryPoints / sizeof kFuse3EntryPoints[0]);
  r.available = r.native || r.fuse3;
  if (!r.available) {
    r.error = r.dll + " lacks the entry points shadowfs needs (" + r.missing.front() +
              (r.missing.size() > 1 ? " and others" : "") + "); install a current WinFsp from https://winfsp.dev/rel/";
  } else if (!r.native) {
    r.error = r.dll + " lacks WinFsp's native API (" + r.missing.front() +
              "): only the fuse_hl backend can mount; install a current WinFsp from https://winfsp.dev/rel/";
  } else if (!r.fuse3) {
    r.error = r.dll + " lacks WinFsp's FUSE3 API: only the winfsp backend can mount";
  }
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
