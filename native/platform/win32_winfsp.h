// Windows: finding WinFsp at run time. shadowfs never links against WinFsp and never loads a
// DLL by bare name (which would pick up one planted in the current directory): the DLL is the
// one under the InstallDir that WinFsp's installer records in the registry, and each FUSE3 entry
// point is resolved with GetProcAddress. A machine without WinFsp therefore still loads the
// module, and can be told exactly what is missing.
#pragma once

#include <string>
#include <vector>

namespace shadowfs {

struct WinFspLoad {
  bool available = false;
  std::string installDir;  // from the registry ("" when the key or value is absent)
  std::string dll;         // the DLL path tried
  std::string error;       // why it is not available
  std::string version;     // the DLL's file version ("2.0.23075.0"), "" when it has none
  std::vector<std::string> resolved;  // entry points found
  std::vector<std::string> missing;   // entry points the DLL lacks
  void* module = nullptr;             // HMODULE, kept loaded for the process's life
};

// Loads WinFsp once (later calls return the first result). Registry key, in this order:
// HKLM\SOFTWARE\WOW6432Node\WinFsp and HKLM\SOFTWARE\WinFsp (32-bit view), value InstallDir;
// the DLL is bin\winfsp-x64.dll beneath it.
const WinFspLoad& loadWinFsp();

// The address of a resolved entry point, or null.
void* winFspProc(const char* name);

}  // namespace shadowfs
