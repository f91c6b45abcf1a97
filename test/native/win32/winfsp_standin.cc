// A stand-in for WinFsp's DLL, for the loader test under wine (test/windows/native-win32.test.ts):
// it exports the FUSE3 entry points shadowfs resolves, by name, and does nothing else. It is not
// WinFsp, mounts nothing, and no test may claim it does. With SHADOWFS_STANDIN_PARTIAL one entry
// point is left out, to see the module report what a DLL lacks.
#include <windows.h>

extern "C" {
__declspec(dllexport) void* fsp_fuse3_new_30() { return nullptr; }
__declspec(dllexport) int fsp_fuse3_mount() { return -1; }
__declspec(dllexport) void fsp_fuse3_unmount() {}
__declspec(dllexport) void fsp_fuse3_destroy() {}
__declspec(dllexport) int fsp_fuse3_loop_mt_31() { return -1; }
__declspec(dllexport) void fsp_fuse3_exit() {}
#if !defined(SHADOWFS_STANDIN_PARTIAL)
__declspec(dllexport) void* fsp_fuse3_get_context() { return nullptr; }
#endif
}
