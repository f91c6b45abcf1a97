// Win32 I/O the platform modules share (win32_lower.cc, win32_spill.cc): an owned HANDLE,
// the share mode that lets the developer keep using a file the shadow has open, the errno of
// the last Win32 error, and reads and writes at an offset. errnoFromWin32 and SrwLock, part of
// win32_lower.h's interface, are defined in win32_io.cc too.
#pragma once
#if defined(_WIN32)

#include <windows.h>

#include <cstddef>
#include <cstdint>

#include "win32_lower.h"

namespace shadowfs {
namespace win32 {

constexpr DWORD kShareAll = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

inline int lastErrno() { return errnoFromWin32(GetLastError()); }

// Owns one HANDLE. Move-only.
class Win32Handle {
 public:
  Win32Handle() = default;
  explicit Win32Handle(HANDLE h) : h_(h) {}
  ~Win32Handle() { reset(); }
  Win32Handle(Win32Handle&& o) noexcept : h_(o.release()) {}
  Win32Handle& operator=(Win32Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = o.release();
    }
    return *this;
  }
  Win32Handle(const Win32Handle&) = delete;
  Win32Handle& operator=(const Win32Handle&) = delete;
  HANDLE get() const { return h_; }
  bool valid() const { return h_ != INVALID_HANDLE_VALUE; }
  HANDLE release() {
    HANDLE h = h_;
    h_ = INVALID_HANDLE_VALUE;
    return h;
  }
  void reset(HANDLE h = INVALID_HANDLE_VALUE) {
    if (h_ != INVALID_HANDLE_VALUE) CloseHandle(h_);
    h_ = h;
  }

 private:
  HANDLE h_ = INVALID_HANDLE_VALUE;
};

// ReadFile at an offset (an OVERLAPPED on a synchronous handle: the call still blocks, and
// concurrent calls on one handle each read their own range) until `size` bytes or end of file.
int readAt(HANDLE h, char* buf, size_t size, uint64_t off, size_t* got);
// WriteFile at an offset, until all `size` bytes are written.
int writeAt(HANDLE h, const char* buf, size_t size, uint64_t off);

}  // namespace win32
}  // namespace shadowfs
#endif  // _WIN32
