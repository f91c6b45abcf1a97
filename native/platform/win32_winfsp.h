// Windows: finding WinFsp at run time. shadowfs never links against WinFsp and never loads a
// DLL through a search that includes the current directory or PATH (which would pick up one
// planted there): the DLL is the one under the InstallDir that WinFsp's installer records in the
// registry (see openDll in win32_winfsp.cc for the fallback), and each entry point (the native
// API for the "winfsp" backend, the FUSE3 API for "fuse_hl") is resolved with GetProcAddress. A
// machine without WinFsp therefore still loads the module, and can be told exactly what is
// missing.
#pragma once

#include <string>
#include <vector>

namespace shadowfs {

struct WinFspLoad {
  bool available = false;  // the DLL is loaded and one of the two APIs below is complete
  bool native = false;     // every native-API entry point the winfsp backend uses
  bool fuse3 = false;      // every FUSE3 entry point fuse_hl uses
  std::string installDir;  // from the registry ("" when the key or value is absent)
  std::string dll;         // the DLL path tried
  std::string error;       // why it is not available (or what part of it is missing)
  std::string version;     // the DLL's file version ("2.0.23075.0"), "" when it has none
  std::vector<std::string> resolved;  // entry points found
  std::vector<std::string> missing;   // entry points the DLL lacks
  void* module = nullptr;             // HMODULE, kept loaded for the process's life
};

// Loads WinFsp once (later calls return the first result). Registry key, in this order:
// HKLM\SOFTWARE\WOW6432Node\WinFsp and HKLM\SOFTWARE\WinFsp (32-bit view), value InstallDir;
// the DLL is bin\winfsp-x64.dll beneath it. Without the key: a winfsp-x64.dll already loaded
// in the process, else one beside the program or in System32.
const WinFspLoad& loadWinFsp();

// The address of a resolved entry point, or null.
void* winFspProc(const char* name);

}  // namespace shadowfs
