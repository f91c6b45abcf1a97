// Win32 I/O the platform modules share (see win32_io.h), and the Win32 error and lock helpers
// win32_lower.h declares: errnoFromWin32, SrwLock.
#if defined(_WIN32)
#include "win32_io.h"

#include <algorithm>
#include <cerrno>

namespace shadowfs {
namespace win32 {

static_assert(sizeof(SRWLOCK) == sizeof(void*), "SrwLock keeps an SRWLOCK in one pointer");
void SrwLock::lock() { AcquireSRWLockExclusive(reinterpret_cast<PSRWLOCK>(&state_)); }
void SrwLock::unlock() { ReleaseSRWLockExclusive(reinterpret_cast<PSRWLOCK>(&state_)); }
void SrwLock::lock_shared() { AcquireSRWLockShared(reinterpret_cast<PSRWLOCK>(&state_)); }
void SrwLock::unlock_shared() { ReleaseSRWLockShared(reinterpret_cast<PSRWLOCK>(&state_)); }

int errnoFromWin32(uint32_t error) {
  switch (error) {
    case ERROR_SUCCESS: return 0;
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_DRIVE:
    case ERROR_BAD_NETPATH:
    case ERROR_BAD_NET_NAME:
    case ERROR_BAD_PATHNAME:
    case ERROR_DELETE_PENDING:  // being deleted: already gone as POSIX sees it
      return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_CANT_ACCESS_FILE:
    case ERROR_NETWORK_ACCESS_DENIED:
      return EACCES;
    case ERROR_PRIVILEGE_NOT_HELD: return EPERM;
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION:
    case ERROR_BUSY:
      return EBUSY;
    case ERROR_DIRECTORY: return ENOTDIR;
    case ERROR_INVALID_NAME:
    case ERROR_INVALID_PARAMETER:
    case ERROR_NOT_A_REPARSE_POINT:
    case ERROR_INVALID_REPARSE_DATA:
    case ERROR_INVALID_FUNCTION:  // e.g. a reparse-point request on a file system without them
    case ERROR_NEGATIVE_SEEK:
      return EINVAL;
    case ERROR_FILENAME_EXCED_RANGE: return ENAMETOOLONG;
    case ERROR_INVALID_HANDLE: return EBADF;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
    case ERROR_NOT_ENOUGH_QUOTA:
      return ENOMEM;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
      return ENOSPC;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
      return EEXIST;
    case ERROR_DIR_NOT_EMPTY: return ENOTEMPTY;
    case ERROR_NOT_SAME_DEVICE: return EXDEV;
    case ERROR_TOO_MANY_OPEN_FILES: return EMFILE;
    case ERROR_WRITE_PROTECT: return EROFS;
    case ERROR_NOT_SUPPORTED: return ENOTSUP;
    case ERROR_CALL_NOT_IMPLEMENTED: return ENOSYS;
    case ERROR_CANT_RESOLVE_FILENAME:  // too many reparse points on the way
    case 681:  // ERROR_STOPPED_ON_SYMLINK (not in every SDK's headers)
      return ELOOP;
    case ERROR_INSUFFICIENT_BUFFER: return ERANGE;
    case ERROR_NOACCESS: return EFAULT;
    default: return EIO;
  }
}

namespace {
// An OVERLAPPED that names only a file offset (for ReadFile/WriteFile on a synchronous handle).
OVERLAPPED overlappedAt(uint64_t at) {
  OVERLAPPED ov{};
  ov.Offset = static_cast<DWORD>(at);
  ov.OffsetHigh = static_cast<DWORD>(at >> 32);
  return ov;
}
}  // namespace

int readAt(HANDLE h, char* buf, size_t size, uint64_t off, size_t* got) {
  size_t done = 0;
  while (done < size) {
    DWORD want = static_cast<DWORD>(std::min<size_t>(size - done, 1u << 30));
    OVERLAPPED ov = overlappedAt(off + done);
    DWORD n = 0;
    if (!ReadFile(h, buf + done, want, &n, &ov)) {
      DWORD e = GetLastError();
      if (e == ERROR_HANDLE_EOF) break;
      *got = done;
      return errnoFromWin32(e);
    }
    if (n == 0) break;
    done += n;
  }
  *got = done;
  return 0;
}

int writeAt(HANDLE h, const char* buf, size_t size, uint64_t off) {
  size_t done = 0;
  while (done < size) {
    DWORD want = static_cast<DWORD>(std::min<size_t>(size - done, 1u << 30));
    OVERLAPPED ov = overlappedAt(off + done);
    DWORD n = 0;
    if (!WriteFile(h, buf + done, want, &n, &ov)) return lastErrno();
    if (n == 0) return EIO;
    done += n;
  }
  return 0;
}

}  // namespace win32
}  // namespace shadowfs
#endif  // _WIN32
