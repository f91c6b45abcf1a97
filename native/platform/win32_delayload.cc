// Windows: the module imports Node-API from "node.exe", but it may be loaded by a host with
// another name (VS Code's Code.exe, any Electron app, a renamed node.exe). The import library
// is a delay-load one (CMakeLists.txt), so the first Node-API call resolves its DLL through this
// hook: for "node.exe" it answers with the module of the running process, whatever its name,
// which is where Node-API lives.
#if defined(_WIN32)
#include <windows.h>
#include <delayimp.h>

#include <cstring>

namespace {

FARPROC WINAPI hostForNode(unsigned event, PDelayLoadInfo info) {
  if (event != dliNotePreLoadLibrary || info == nullptr || info->szDll == nullptr) return nullptr;
  if (_stricmp(info->szDll, "node.exe") != 0) return nullptr;
  return reinterpret_cast<FARPROC>(GetModuleHandleW(nullptr));
}

}  // namespace

// Declared extern "C" by <delayimp.h>; the delay-load helper calls it before loading a DLL.
PfnDliHook __pfnDliNotifyHook2 = hostForNode;
#endif
