// Windows implementation of LowerFs (see win32_lower.h; the SpillStore is in win32_spill.cc). Every object of the
// folder is reached by an absolute \\?\ path built from the root's final path, so paths longer
// than MAX_PATH work and no Win32 path rewriting ("." / ".." / trailing dots) happens behind our
// back. Handles are opened with all three share modes and closed before the call returns, so
// the developer can still write, rename and delete a file the shadow is reading, and rename
// its directories; metadata handles carry no data access at all.
#if defined(_WIN32)
#include "win32_lower.h"

#include <windows.h>
#include <winioctl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>  // std::shared_lock (with SrwLock)
#include <unordered_map>
#include <vector>

#include "../core/overlay.h"  // kFirstLayerIno
#include "win32_io.h"

namespace shadowfs {

namespace win32 {

static_assert(InodeNumbers::kTableLimit <= kFirstLayerIno,
              "the folder's inode numbers must stay below the layer's range");
static_assert(InodeNumbers::kDirectLimit <= InodeNumbers::kTableFirst,
              "numbered directly and from the table: two ranges that never meet");

bool InodeNumbers::Key::operator==(const Key& o) const {
  return volume == o.volume && std::memcmp(id, o.id, sizeof id) == 0;
}

size_t InodeNumbers::Hash::operator()(const Key& k) const {
  uint64_t lo, hi;
  std::memcpy(&lo, k.id, 8);
  std::memcpy(&hi, k.id + 8, 8);
  // A multiply-xorshift mix: NTFS IDs differ mostly in their low bits, ReFS ones in either half.
  uint64_t h = lo * 0x9E3779B97F4A7C15ull ^ (hi + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full ^
               k.volume * 0x165667B19E3779F9ull;
  h ^= h >> 29;
  return static_cast<size_t>(h);
}

uint64_t InodeNumbers::number(const Key& key) {
  uint64_t lo, hi;
  std::memcpy(&lo, key.id, 8);
  std::memcpy(&hi, key.id + 8, 8);
  if (key.volume == home_ && hi == 0 && lo != 0 && lo < kDirectLimit) return lo;
  {
    std::shared_lock lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  auto it = map_.find(key);  // another thread may have numbered it meanwhile
  if (it != map_.end()) return it->second;
  if (next_ >= kTableLimit) return 0;
  uint64_t n = next_++;
  map_.emplace(key, n);
  return n;
}

size_t InodeNumbers::tableSize() const {
  std::shared_lock lock(mu_);
  return map_.size();
}

}  // namespace win32

namespace {

using win32::errnoFromWin32;
using win32::kShareAll;
using win32::lastErrno;
using win32::readAt;
using win32::Win32Handle;

// 100 ns intervals between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
constexpr int64_t kUnixEpochInFileTime = 116444736000000000LL;

Timespec fromFileTime(int64_t t) {
  int64_t d = t - kUnixEpochInFileTime;
  int64_t sec = d / 10000000, rem = d % 10000000;
  if (rem < 0) {  // before 1970: floor, so nsec stays in [0, 1e9)
    rem += 10000000;
    --sec;
  }
  return {sec, rem * 100};
}

Timespec fromFileTime(const FILETIME& ft) {
  return fromFileTime(static_cast<int64_t>((static_cast<uint64_t>(ft.dwHighDateTime) << 32) |
                                           ft.dwLowDateTime));
}

// Files Windows runs by name: shown executable, so a program run from the shadow may start.
bool looksExecutable(const std::string& rel) {
  static const char* const kExts[] = {".exe", ".com", ".cmd", ".bat", ".dll", ".node"};
  for (const char* ext : kExts) {
    size_t n = std::strlen(ext);
    if (rel.size() <= n) continue;
    bool same = true;
    for (size_t i = 0; i < n && same; ++i) {
      char c = rel[rel.size() - n + i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      same = c == ext[i];
    }
    if (same) return true;
  }
  return false;
}

// --- Reparse points. REPARSE_DATA_BUFFER is a kernel-mode (ntifs.h) type: read by offset. ---

bool isLinkTag(DWORD tag) { return tag == IO_REPARSE_TAG_SYMLINK || tag == IO_REPARSE_TAG_MOUNT_POINT; }

constexpr DWORD kSymlinkFlagRelative = 1;  // SYMLINK_FLAG_RELATIVE

}  // namespace

namespace win32 {

namespace {
uint16_t word(const char* b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b + at, sizeof v);
  return v;
}
}  // namespace

bool linkTarget(const void* data, size_t size, std::string* out) {
  const char* b = static_cast<const char*>(data);
  if (size < 8) return false;
  DWORD tag;
  std::memcpy(&tag, b, sizeof tag);
  size_t pathAt;
  bool relative = false;
  if (tag == IO_REPARSE_TAG_SYMLINK) {
    if (size < 20) return false;
    DWORD flags;
    std::memcpy(&flags, b + 16, sizeof flags);
    relative = (flags & kSymlinkFlagRelative) != 0;
    pathAt = 20;
  } else if (tag == IO_REPARSE_TAG_MOUNT_POINT) {
    if (size < 16) return false;
    pathAt = 16;
  } else {
    return false;
  }
  auto name = [&](size_t field, std::wstring* s) {
    size_t off = word(b, field), len = word(b, field + 2);
    if (pathAt + off + len > size || len % 2) return false;
    s->resize(len / 2);
    if (len) std::memcpy(&(*s)[0], b + pathAt + off, len);  // memcpy: no alignment assumed
    return true;
  };
  std::wstring sub, print;
  if (!name(8, &sub) || !name(12, &print)) return false;
  std::wstring t = sub.empty() ? print : sub;
  if (relative) {
    std::replace(t.begin(), t.end(), L'\\', L'/');
  } else if (t.compare(0, 4, L"\\??\\") == 0) {
    std::wstring rest = t.substr(4);
    if (rest.size() >= 4 && rest.compare(0, 4, L"UNC\\") == 0)
      t = L"\\\\" + rest.substr(4);
    else if (rest.size() >= 2 && rest[1] == L':')
      t = rest;
    else
      t = L"\\\\?\\" + rest;  // \\?\Volume{...}\ and other device forms
  }
  *out = toUtf8(t);
  return true;
}

}  // namespace win32

namespace {

// FSCTL_GET_REPARSE_POINT on `h` into *buf; returns the bytes it filled, 0 on failure.
DWORD readReparse(HANDLE h, std::vector<char>* buf) {
  buf->resize(MAXIMUM_REPARSE_DATA_BUFFER_SIZE);
  DWORD got = 0;
  if (!DeviceIoControl(h, FSCTL_GET_REPARSE_POINT, nullptr, 0, buf->data(),
                       static_cast<DWORD>(buf->size()), &got, nullptr))
    return 0;
  return got;
}

DWORD reparseTag(const std::vector<char>& b, DWORD size) {
  DWORD tag = 0;
  if (size >= 4) std::memcpy(&tag, b.data(), sizeof tag);
  return tag;
}

// A handle for attributes only (no data access), on the object itself even when it is a
// reparse point, directories included.
int openMeta(const std::wstring& p, Win32Handle* out) {
  out->reset(CreateFileW(p.c_str(), FILE_READ_ATTRIBUTES, kShareAll, nullptr, OPEN_EXISTING,
                         FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, nullptr));
  return out->valid() ? 0 : lastErrno();
}

// Directory, Regular, or Symlink (symlinks and junctions) for a handle from openMeta().
int typeOf(HANDLE h, FileType* out) {
  BY_HANDLE_FILE_INFORMATION bi;
  if (!GetFileInformationByHandle(h, &bi)) return lastErrno();
  *out = (bi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ? FileType::Directory : FileType::Regular;
  if (bi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
    std::vector<char> buf;
    DWORD n = readReparse(h, &buf);
    if (n && isLinkTag(reparseTag(buf, n))) *out = FileType::Symlink;
  }
  return 0;
}

// An open file of the folder: where it was opened and which file it was, never a HANDLE (see
// win32_lower.h: a handle held open would stop the developer renaming its directories).
// Shared by the table and the calls in progress, so a close() racing a pread is harmless.
struct OpenFile {
  std::wstring path;             // \\?\ path it was opened by
  win32::InodeNumbers::Key key;  // the file it named then
  DWORD flags = FILE_FLAG_OPEN_REPARSE_POINT;  // 0 for a non-link reparse point (see open())
  bool exe = false;
};

class Win32Lower final : public LowerFs {
 public:
  Win32Lower(std::wstring root, bool useFileIdInfo, uint64_t homeVolume)
      : root_(std::move(root)), useFileIdInfo_(useFileIdInfo), inos_(homeVolume) {}

  int stat(const std::string& rel, Attr* out) override {
    std::wstring p;
    if (int e = win32::joinRel(root_, rel, &p)) return e;
    Win32Handle h;
    if (int e = openMeta(p, &h)) return e;
    return fill(h.get(), looksExecutable(rel), out);
  }

  int fstat(LowerHandle h, Attr* out) override {
    auto f = find(h);
    if (!f) return EBADF;
    Win32Handle fh;
    if (int e = reopen(*f, &fh)) return e;
    return fill(fh.get(), f->exe, out);
  }

  // FindFirstFileExW lists through a link; the directory itself is checked first (without
  // following it) so a symlink or junction is ENOTDIR, as O_NOFOLLOW | O_DIRECTORY gives.
  int readdir(const std::string& rel, std::vector<DirEntry>* out) override {
    std::wstring p;
    if (int e = win32::joinRel(root_, rel, &p)) return e;
    if (int e = win32::checkDirectory(p)) return e;
    if (p.back() != L'\\') p.push_back(L'\\');
    p.push_back(L'*');
    WIN32_FIND_DATAW d;
    HANDLE f = FindFirstFileExW(p.c_str(), FindExInfoBasic, &d, FindExSearchNameMatch, nullptr,
                                FIND_FIRST_EX_LARGE_FETCH);
    if (f == INVALID_HANDLE_VALUE) {
      DWORD e = GetLastError();
      return e == ERROR_FILE_NOT_FOUND || e == ERROR_NO_MORE_FILES ? 0 : errnoFromWin32(e);
    }
    DWORD e = ERROR_NO_MORE_FILES;
    do {
      const wchar_t* n = d.cFileName;
      if (n[0] == L'.' && (n[1] == 0 || (n[1] == L'.' && n[2] == 0))) continue;
      FileType t = FileType::Regular;
      if ((d.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) && isLinkTag(d.dwReserved0))
        t = FileType::Symlink;
      else if (d.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
        t = FileType::Directory;
      out->push_back(DirEntry{win32::toUtf8(n, std::wcslen(n)), 0, t});
    } while (FindNextFileW(f, &d) || (e = GetLastError()) != ERROR_NO_MORE_FILES);
    FindClose(f);
    return e == ERROR_NO_MORE_FILES ? 0 : errnoFromWin32(e);
  }

  // Windows finds a name in any case (NTFS folds with the volume's upcase table).
  bool caseInsensitive() const override { return true; }

  // FindFirstFileExW on the path itself (no wildcard: joinRel refuses '*', '?', '<', '>' and
  // '"', which it would take as patterns) answers with the entry's name as its directory stores
  // it, in one call, whichever case `rel` used. The long name also when `rel` gave the short
  // (8.3) one.
  int storedName(const std::string& rel, std::string* name) override {
    if (rel.empty()) return EINVAL;
    std::wstring p;
    if (int e = win32::joinRel(root_, rel, &p)) return e;
    WIN32_FIND_DATAW d;
    HANDLE f = FindFirstFileExW(p.c_str(), FindExInfoBasic, &d, FindExSearchNameMatch, nullptr, 0);
    if (f == INVALID_HANDLE_VALUE) {
      DWORD e = GetLastError();
      return e == ERROR_NO_MORE_FILES ? ENOENT : errnoFromWin32(e);
    }
    FindClose(f);
    *name = win32::toUtf8(d.cFileName, std::wcslen(d.cFileName));
    return 0;
  }

  int readlink(const std::string& rel, std::string* out) override {
    std::wstring p;
    if (int e = win32::joinRel(root_, rel, &p)) return e;
    Win32Handle h;
    if (int e = openMeta(p, &h)) return e;
    BY_HANDLE_FILE_INFORMATION bi;
    if (!GetFileInformationByHandle(h.get(), &bi)) return lastErrno();
    if (!(bi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) return EINVAL;
    std::vector<char> buf;
    DWORD n = readReparse(h.get(), &buf);
    if (n == 0) return lastErrno();
    return win32::linkTarget(buf.data(), n, out) ? 0 : EINVAL;
  }

  // Checks the file as open(2) with O_RDONLY | O_NOFOLLOW would and records which file it is;
  // the handle used for that is closed before returning.
  int open(const std::string& rel, LowerHandle* out) override {
    auto f = std::make_shared<OpenFile>();
    Win32Handle h;
    if (int e = openFile(rel, &h, f.get())) return e;
    h.reset();
    std::lock_guard lock(mu_);
    LowerHandle id = nextHandle_++;
    files_.emplace(id, std::move(f));
    *out = id;
    return 0;
  }

  int pread(LowerHandle h, char* buf, size_t size, uint64_t off, size_t* got) override {
    *got = 0;
    auto f = find(h);
    if (!f) return EBADF;
    Win32Handle fh;
    if (int e = reopen(*f, &fh)) return e;
    return readAt(fh.get(), buf, size, off, got);
  }

  void close(LowerHandle h) override {
    std::shared_ptr<OpenFile> f;  // freed here, outside the lock
    std::lock_guard lock(mu_);
    auto it = files_.find(h);
    if (it == files_.end()) return;
    f = std::move(it->second);
    files_.erase(it);
  }

  // One call, so one handle for all of it (closed before returning).
  int readAll(const std::string& rel, std::string* out) override {
    OpenFile f;
    Win32Handle h;
    if (int e = openFile(rel, &h, &f)) return e;
    LARGE_INTEGER size;
    if (GetFileSizeEx(h.get(), &size) && size.QuadPart > 0)
      out->reserve(static_cast<size_t>(size.QuadPart));
    std::vector<char> buf(1 << 16);
    for (uint64_t off = 0;;) {
      size_t got = 0;
      if (int e = readAt(h.get(), buf.data(), buf.size(), off, &got)) return e;
      if (got == 0) return 0;
      out->append(buf.data(), got);
      off += got;
    }
  }

  // Windows has no user extended attributes of the POSIX kind (its EAs and alternate data
  // streams are not offered as such): an empty list, and no attribute of any name. The core
  // resolves the path before it asks, so these need not look at the file.
  int listxattr(const std::string&, std::vector<std::string>*) override { return 0; }
  int getxattr(const std::string&, const std::string&, std::string*) override { return ENODATA; }

  int statfs(FsStats* out) override {
    std::wstring dir = root_;
    if (dir.back() != L'\\') dir.push_back(L'\\');
    ULARGE_INTEGER avail, total, free;
    if (!GetDiskFreeSpaceExW(dir.c_str(), &avail, &total, &free)) return lastErrno();
    out->bsize = out->frsize = 4096;
    out->blocks = total.QuadPart / 4096;
    out->bfree = free.QuadPart / 4096;
    out->bavail = avail.QuadPart / 4096;
    out->files = out->ffree = 0;  // NTFS has no fixed inode table
    out->namemax = 255;
    return 0;
  }

 private:
  // Opens the regular file `rel` for reading (all share modes, not following a link) into *h
  // and fills *f with what names it again: 0, or the errno open(2) would give.
  int openFile(const std::string& rel, Win32Handle* h, OpenFile* f) {
    std::wstring p;
    if (int e = win32::joinRel(root_, rel, &p)) return e;
    // No FILE_FLAG_BACKUP_SEMANTICS: it is for directories, and it would let a process holding
    // the backup privilege read files its user may not.
    h->reset(CreateFileW(p.c_str(), GENERIC_READ, kShareAll, nullptr, OPEN_EXISTING,
                         FILE_FLAG_OPEN_REPARSE_POINT, nullptr));
    if (!h->valid()) {
      DWORD e = GetLastError();
      if (e == ERROR_ACCESS_DENIED) {  // also what a directory gives without backup semantics
        Win32Handle m;
        FileType t = FileType::Regular;
        if (openMeta(p, &m) == 0 && typeOf(m.get(), &t) == 0 && t == FileType::Directory)
          return EISDIR;
      }
      return errnoFromWin32(e);
    }
    BY_HANDLE_FILE_INFORMATION bi;
    if (!GetFileInformationByHandle(h->get(), &bi)) return lastErrno();
    if (bi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) return EISDIR;
    f->flags = FILE_FLAG_OPEN_REPARSE_POINT;
    if (bi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
      std::vector<char> buf;
      DWORD n = readReparse(h->get(), &buf);
      if (n && isLinkTag(reparseTag(buf, n))) return ELOOP;  // O_NOFOLLOW's answer
      // Another kind of reparse point (a cloud placeholder, a deduplicated file...): its data
      // comes through the file system's filter, so open it the ordinary way, and make sure the
      // path still names the same file.
      Win32Handle data(CreateFileW(p.c_str(), GENERIC_READ, kShareAll, nullptr, OPEN_EXISTING, 0,
                                   nullptr));
      if (!data.valid()) return lastErrno();
      BY_HANDLE_FILE_INFORMATION di;
      if (!GetFileInformationByHandle(data.get(), &di)) return lastErrno();
      if (di.nFileIndexHigh != bi.nFileIndexHigh || di.nFileIndexLow != bi.nFileIndexLow ||
          di.dwVolumeSerialNumber != bi.dwVolumeSerialNumber)
        return ELOOP;  // replaced by something else (a link?) in between
      *h = std::move(data);
      f->flags = 0;
    }
    if (int e = keyOf(h->get(), &f->key)) return e;
    f->path = std::move(p);
    f->exe = looksExecutable(rel);
    return 0;
  }

  // A fresh handle (closed by the caller before its call returns) on the file `f` names: by
  // its path while that still names it, else by its ID (it was renamed or moved, or one of its
  // directories was). ENOENT when the file is gone.
  int reopen(const OpenFile& f, Win32Handle* out) const {
    win32::InodeNumbers::Key k;
    out->reset(CreateFileW(f.path.c_str(), GENERIC_READ, kShareAll, nullptr, OPEN_EXISTING,
                           f.flags, nullptr));
    DWORD byPath = ERROR_SUCCESS;
    if (out->valid()) {
      if (keyOf(out->get(), &k) == 0 && k == f.key) return 0;
      out->reset();
    } else {
      byPath = GetLastError();
    }
    // Any handle on the folder's volume tells OpenFileById where to look: the root's, for this
    // call only.
    Win32Handle hint(CreateFileW(root_.c_str(), FILE_READ_ATTRIBUTES, kShareAll, nullptr,
                                 OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr));
    if (!hint.valid()) return lastErrno();
    FILE_ID_DESCRIPTOR d{};
    d.dwSize = sizeof d;
    uint64_t lo, hi;
    std::memcpy(&lo, f.key.id, 8);
    std::memcpy(&hi, f.key.id + 8, 8);
    if (hi == 0) {
      d.Type = FileIdType;  // NTFS's 64-bit IDs (and what wine answers)
      d.FileId.QuadPart = static_cast<LONGLONG>(lo);
    } else {
      d.Type = ExtendedFileIdType;  // ReFS's 128-bit IDs
      static_assert(sizeof d.ObjectId == sizeof f.key.id, "FILE_ID_128 is 16 bytes");
      std::memcpy(&d.ObjectId, f.key.id, sizeof f.key.id);
    }
    out->reset(OpenFileById(hint.get(), &d, GENERIC_READ, kShareAll, nullptr, f.flags));
    if (!out->valid()) {
      DWORD e = GetLastError();
      // The sharing violation the path gave says more than the ID's "not found".
      if (byPath == ERROR_SHARING_VIOLATION || e == ERROR_SHARING_VIOLATION) return EBUSY;
      if (e == ERROR_ACCESS_DENIED) return EACCES;
      return ENOENT;  // no file has that ID any more (NTFS: ERROR_INVALID_PARAMETER)
    }
    if (keyOf(out->get(), &k) != 0 || !(k == f.key)) {
      out->reset();
      return ENOENT;
    }
    return 0;
  }

  // Which file `h` is: FileIdInfo when the folder's file system answers it (decided once, at
  // mount), else the volume serial and 64-bit index of GetFileInformationByHandle.
  int keyOf(HANDLE h, win32::InodeNumbers::Key* out) const {
    *out = win32::InodeNumbers::Key{};
    if (useFileIdInfo_) {
      FILE_ID_INFO id;
      if (!GetFileInformationByHandleEx(h, FileIdInfo, &id, sizeof id)) return lastErrno();
      out->volume = id.VolumeSerialNumber;
      static_assert(sizeof id.FileId.Identifier == sizeof out->id, "FILE_ID_128 is 16 bytes");
      std::memcpy(out->id, id.FileId.Identifier, sizeof out->id);
      return 0;
    }
    BY_HANDLE_FILE_INFORMATION bi;
    if (!GetFileInformationByHandle(h, &bi)) return lastErrno();
    out->volume = bi.dwVolumeSerialNumber;
    uint64_t index = (static_cast<uint64_t>(bi.nFileIndexHigh) << 32) | bi.nFileIndexLow;
    std::memcpy(out->id, &index, sizeof index);
    return 0;
  }

  int fill(HANDLE h, bool exe, Attr* out) {
    BY_HANDLE_FILE_INFORMATION bi;
    if (!GetFileInformationByHandle(h, &bi)) return lastErrno();
    const DWORD attrs = bi.dwFileAttributes;
    *out = Attr{};
    out->type = (attrs & FILE_ATTRIBUTE_DIRECTORY) ? FileType::Directory : FileType::Regular;
    out->size = (static_cast<uint64_t>(bi.nFileSizeHigh) << 32) | bi.nFileSizeLow;
    if (attrs & FILE_ATTRIBUTE_REPARSE_POINT) {
      std::vector<char> buf;
      DWORD n = readReparse(h, &buf);
      std::string target;
      if (n && win32::linkTarget(buf.data(), n, &target)) {
        out->type = FileType::Symlink;
        out->size = target.size();  // what lstat(2) says of a symlink
      }
    }
    if (out->type == FileType::Directory)
      out->perm = 0755;
    else if (out->type == FileType::Symlink)
      out->perm = 0777;
    else
      out->perm = (attrs & FILE_ATTRIBUTE_READONLY) ? (exe ? 0555 : 0444) : (exe ? 0755 : 0644);
    out->nlink = bi.nNumberOfLinks ? bi.nNumberOfLinks : 1;
    win32::InodeNumbers::Key key;
    if (useFileIdInfo_) {
      if (int e = keyOf(h, &key)) return e;
    } else {
      key.volume = bi.dwVolumeSerialNumber;
      uint64_t index = (static_cast<uint64_t>(bi.nFileIndexHigh) << 32) | bi.nFileIndexLow;
      std::memcpy(key.id, &index, sizeof index);
    }
    out->ino = inos_.number(key);
    if (out->ino == 0) return EOVERFLOW;
    out->blocks = (out->size + 511) / 512;
    out->atime = fromFileTime(bi.ftLastAccessTime);
    out->mtime = fromFileTime(bi.ftLastWriteTime);
    // ctime is the change time (metadata or content), which FILE_BASIC_INFO has; the creation
    // time would never move.
    FILE_BASIC_INFO basic;
    if (GetFileInformationByHandleEx(h, FileBasicInfo, &basic, sizeof basic))
      out->ctime = fromFileTime(basic.ChangeTime.QuadPart);
    else
      out->ctime = out->mtime;
    // What Windows keeps and POSIX has no word for: the attributes the core keeps as they are
    // (HIDDEN, SYSTEM, ARCHIVE...) and the creation time, so a copy-up keeps them.
    out->winAttrs = attrs & kWinAttrsKept;
    out->hasBirth = true;
    out->birth = fromFileTime(bi.ftCreationTime);
    return 0;
  }

  std::shared_ptr<OpenFile> find(LowerHandle h) {
    std::shared_lock lock(mu_);
    auto it = files_.find(h);
    return it == files_.end() ? nullptr : it->second;
  }

  const std::wstring root_;  // \\?\ form, no trailing separator (except a drive's root)
  const bool useFileIdInfo_;
  win32::InodeNumbers inos_;

  win32::SrwLock mu_;  // guards the open-file table (never held during I/O)
  LowerHandle nextHandle_ = 1;
  std::unordered_map<LowerHandle, std::shared_ptr<OpenFile>> files_;
};

}  // namespace

namespace win32 {

int resolveRoot(const std::string& rootUtf8, std::wstring* out) {
  std::wstring w;
  if (rootUtf8.empty()) return ENOENT;
  if (!toWide(rootUtf8, &w)) return EINVAL;
  std::wstring root = longPath(w);
  if (root.empty()) return lastErrno();
  // Followed here (as open(2) follows a link named as the root), then never again.
  Win32Handle h(CreateFileW(root.c_str(), FILE_READ_ATTRIBUTES, kShareAll, nullptr, OPEN_EXISTING,
                            FILE_FLAG_BACKUP_SEMANTICS, nullptr));
  if (!h.valid()) return lastErrno();
  BY_HANDLE_FILE_INFORMATION bi;
  if (!GetFileInformationByHandle(h.get(), &bi)) return lastErrno();
  if (!(bi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) return ENOTDIR;
  std::wstring final(32768, L'\0');
  DWORD n = GetFinalPathNameByHandleW(h.get(), final.data(), static_cast<DWORD>(final.size()),
                                      FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
  if (n > 0 && n < final.size()) {
    final.resize(n);
    std::wstring canon = longPath(final);
    if (!canon.empty()) root = canon;
  }
  *out = std::move(root);
  return 0;
}

int checkDirectory(const std::wstring& path) {
  Win32Handle h;
  if (int e = openMeta(path, &h)) return e;
  FileType t = FileType::Regular;
  if (int e = typeOf(h.get(), &t)) return e;
  return t == FileType::Directory ? 0 : ENOTDIR;
}

}  // namespace win32

std::unique_ptr<LowerFs> openWin32Lower(const std::string& rootUtf8, int* err) {
  std::wstring root;
  if (int e = win32::resolveRoot(rootUtf8, &root)) {
    *err = e;
    return nullptr;
  }
  Win32Handle h(CreateFileW(root.c_str(), FILE_READ_ATTRIBUTES, kShareAll, nullptr, OPEN_EXISTING,
                            FILE_FLAG_BACKUP_SEMANTICS, nullptr));
  if (!h.valid()) {
    *err = lastErrno();
    return nullptr;
  }
  // FileIdInfo (Windows 8+; 128-bit IDs on ReFS) when the folder's file system answers it,
  // decided once so inode numbers never change form during a mount.
  FILE_ID_INFO id;
  bool useIdInfo = GetFileInformationByHandleEx(h.get(), FileIdInfo, &id, sizeof id) != 0;
  uint64_t volume = useIdInfo ? id.VolumeSerialNumber : 0;
  if (!useIdInfo) {
    BY_HANDLE_FILE_INFORMATION bi;
    if (!GetFileInformationByHandle(h.get(), &bi)) {
      *err = lastErrno();
      return nullptr;
    }
    volume = bi.dwVolumeSerialNumber;
  }
  return std::make_unique<Win32Lower>(std::move(root), useIdInfo, volume);
}

}  // namespace shadowfs
#endif  // _WIN32
