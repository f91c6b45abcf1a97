// Windows implementation of SpillStore (see win32_lower.h, openWin32Spill): each spilled file a
// FILE_FLAG_DELETE_ON_CLOSE temporary file in the spill directory.
#if defined(_WIN32)
#include <windows.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <string>

#include "win32_io.h"
#include "win32_lower.h"
#include "win32_path.h"

namespace shadowfs {

namespace {

using win32::errnoFromWin32;
using win32::kShareAll;
using win32::lastErrno;
using win32::readAt;
using win32::Win32Handle;
using win32::writeAt;

class Win32SpillFile final : public SpillFile {
 public:
  explicit Win32SpillFile(Win32Handle h) : h_(std::move(h)) {}

  int pread(char* buf, size_t size, uint64_t off, size_t* got) override {
    return readAt(h_.get(), buf, size, off, got);
  }
  int pwrite(const char* buf, size_t size, uint64_t off) override {
    return writeAt(h_.get(), buf, size, off);
  }
  int truncate(uint64_t size) override {
    FILE_END_OF_FILE_INFO eof;
    eof.EndOfFile.QuadPart = static_cast<LONGLONG>(size);
    return SetFileInformationByHandle(h_.get(), FileEndOfFileInfo, &eof, sizeof eof) ? 0 : lastErrno();
  }

 private:
  Win32Handle h_;  // closing it deletes the file (FILE_FLAG_DELETE_ON_CLOSE)
};

class Win32Spill final : public SpillStore {
 public:
  explicit Win32Spill(std::wstring dir) : dir_(std::move(dir)) {}

  int create(std::unique_ptr<SpillFile>* out) override {
    Win32Handle h;
    if (int e = createFile(&h)) return e;
    *out = std::make_unique<Win32SpillFile>(std::move(h));
    return 0;
  }

  // A new, empty file in the directory that goes when its last handle closes (a crash
  // included). Its name exists meanwhile; it is unique to this process and store.
  int createFile(Win32Handle* out) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::wstring name = dir_;
      if (name.back() != L'\\') name.push_back(L'\\');
      name += L"shadowfs-spill-" + std::to_wstring(GetCurrentProcessId()) + L"-" +
              std::to_wstring(reinterpret_cast<uintptr_t>(this)) + L"-" +
              std::to_wstring(counter_++) + L".tmp";
      out->reset(CreateFileW(name.c_str(), GENERIC_READ | GENERIC_WRITE | DELETE, kShareAll,
                             nullptr, CREATE_NEW,
                             FILE_ATTRIBUTE_TEMPORARY | FILE_FLAG_DELETE_ON_CLOSE, nullptr));
      if (out->valid()) return 0;
      DWORD e = GetLastError();
      if (e != ERROR_FILE_EXISTS && e != ERROR_ALREADY_EXISTS) return errnoFromWin32(e);
    }
    return EEXIST;
  }

 private:
  const std::wstring dir_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace

std::unique_ptr<SpillStore> openWin32Spill(const std::string& dirUtf8, int* err) {
  std::wstring w;
  if (!win32::toWide(dirUtf8, &w) || w.empty()) {
    *err = dirUtf8.empty() ? ENOENT : EINVAL;
    return nullptr;
  }
  std::wstring dir = win32::longPath(w);
  if (dir.empty()) {
    *err = lastErrno();
    return nullptr;
  }
  // Probe once so a bad directory is reported at mount time, not at the first big write.
  auto store = std::make_unique<Win32Spill>(dir);
  Win32Handle probe;
  if (int e = store->createFile(&probe)) {
    *err = e;
    return nullptr;
  }
  return store;
}

}  // namespace shadowfs
#endif  // _WIN32
