// Windows FolderWatcher: ONE recursive ReadDirectoryChangesW on the folder's root, filtered to
// the directories currently watched, read with overlapped I/O by a thread that also waits on a
// wake event for stop().
//
// Why one recursive watch rather than one per watched directory: a watch needs an open handle
// on its directory, and Windows refuses to rename or delete a directory while a handle is open
// on it or below it, share modes or not. Per-directory watches on every directory the kernel
// caches would lock the developer out of renaming their own folders; the root's handle only
// pins the root. The cost is that changes anywhere in the folder are delivered and filtered
// here, and a burst of them (an npm install) can overflow the buffer sooner, which is reported
// as `overflow` (everything may have changed), as the contract asks.
//
// Matching is case-insensitive (the file system reports names as stored, while the backend may
// have watched a directory under another spelling of it); each spelling watched is reported.
#if defined(_WIN32)
#include "win32_watcher.h"

#include <windows.h>

#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "../core/path.h"
#include "win32_lower.h"

namespace shadowfs {
namespace {

constexpr DWORD kShareAll = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
// Not LAST_ACCESS (reads, ours included, would report themselves) nor SECURITY or CREATION
// (nothing the shadow shows depends on them).
constexpr DWORD kFilter = FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME |
                          FILE_NOTIFY_CHANGE_ATTRIBUTES | FILE_NOTIFY_CHANGE_SIZE |
                          FILE_NOTIFY_CHANGE_LAST_WRITE;
// 64 KiB: the most ReadDirectoryChangesW accepts for a folder on a network share.
constexpr DWORD kBufferBytes = 64 * 1024;

int lastErrno() { return win32::errnoFromWin32(GetLastError()); }

struct Closer {
  HANDLE h = INVALID_HANDLE_VALUE;
  ~Closer() {
    if (h != INVALID_HANDLE_VALUE && h != nullptr) CloseHandle(h);
  }
};

// The key a watched path is matched by: upper-cased, as the file system compares names.
std::string fold(const std::string& rel) {
  std::wstring w;
  if (!win32::toWide(rel, &w)) return rel;
  if (w.empty()) return rel;
  std::wstring up(w.size() * 2, L'\0');
  int n = LCMapStringEx(LOCALE_NAME_INVARIANT, LCMAP_UPPERCASE, w.data(), static_cast<int>(w.size()),
                        up.data(), static_cast<int>(up.size()), nullptr, nullptr, 0);
  if (n <= 0) return rel;
  up.resize(static_cast<size_t>(n));
  return win32::toUtf8(up);
}

class Win32Watcher final : public FolderWatcher {
 public:
  Win32Watcher(std::wstring root, HANDLE dir, HANDLE wake, HANDLE io, Callback cb)
      : root_(std::move(root)), cb_(std::move(cb)) {
    dir_.h = dir;
    wake_.h = wake;
    io_.h = io;
  }
  ~Win32Watcher() override { stop(); }
  Win32Watcher(const Win32Watcher&) = delete;
  Win32Watcher& operator=(const Win32Watcher&) = delete;

  // Starts the thread and waits until its first ReadDirectoryChangesW is in place, so a change
  // made after openWin32Watcher() returns is never missed. 0 or an errno.
  int start() {
    std::unique_lock lock(mu_);
    thread_ = std::thread([this] { loop(); });
    armed_cv_.wait(lock, [this] { return armState_ != 0; });
    return armState_ > 0 ? 0 : -armState_;
  }

  // Any thread. The directory is checked outside the lock (not following a final link, so a
  // symlink or junction is ENOTDIR); the OS watch on the root already covers it.
  int watch(const std::string& relDir, Token* out) override {
    std::wstring p;
    if (int e = win32::joinRel(root_, relDir, &p)) return e;
    if (int e = win32::checkDirectory(p)) return e;
    std::string key = fold(relDir);
    std::lock_guard lock(mu_);
    if (stopped_) return ESHUTDOWN;
    ++dirs_[key][relDir];
    Token t = nextToken_++;
    tokens_[t] = {std::move(key), relDir};
    *out = t;
    return 0;
  }

  void unwatch(Token token) override {
    std::lock_guard lock(mu_);
    auto t = tokens_.find(token);
    if (t == tokens_.end()) return;
    auto d = dirs_.find(t->second.first);
    if (d != dirs_.end()) {
      auto s = d->second.find(t->second.second);
      if (s != d->second.end() && --s->second == 0) d->second.erase(s);
      if (d->second.empty()) dirs_.erase(d);
    }
    tokens_.erase(t);
  }

  // deliverForTests(): one buffer handled as the thread handles what it reads.
  void deliver(const char* data, DWORD size) {
    std::vector<std::string> paths;
    collect(data, size, &paths);
    if (!paths.empty()) cb_(paths, false);
  }

  void stop() override {
    std::lock_guard stopping(stopMu_);
    {
      std::lock_guard lock(mu_);
      if (stopped_ && !thread_.joinable()) return;
      stopped_ = true;
    }
    if (thread_.joinable()) {
      if (thread_.get_id() == std::this_thread::get_id()) {
        std::fprintf(stderr, "shadowfs: FolderWatcher::stop() called from its own callback\n");
        std::abort();
      }
      SetEvent(wake_.h);
      thread_.join();
    }
    std::lock_guard lock(mu_);
    tokens_.clear();
    dirs_.clear();
  }

 private:
  void setArmState(int state) {
    std::lock_guard lock(mu_);
    if (armState_ == 0) {
      armState_ = state;
      armed_cv_.notify_all();
    }
  }

  // The I/O is issued from this thread (pending I/O is cancelled when its thread ends).
  void loop() {
    std::vector<DWORD> buf(kBufferBytes / sizeof(DWORD));  // FILE_NOTIFY_INFORMATION is DWORD-aligned
    OVERLAPPED ov{};
    ov.hEvent = io_.h;
    auto arm = [&] {
      ResetEvent(io_.h);
      return ReadDirectoryChangesW(dir_.h, buf.data(), kBufferBytes, TRUE, kFilter, nullptr, &ov,
                                   nullptr) != 0;
    };
    bool pending = arm();
    int e = pending ? 0 : lastErrno();
    setArmState(pending ? 1 : -(e ? e : EIO));
    if (!pending) return;
    for (;;) {
      HANDLE waits[2] = {wake_.h, io_.h};
      DWORD w = WaitForMultipleObjects(pending ? 2 : 1, waits, FALSE, INFINITE);
      if (w != WAIT_OBJECT_0 + 1) {  // stop() (or a failed wait: end rather than spin)
        if (pending) {
          DWORD n;
          CancelIoEx(dir_.h, &ov);
          GetOverlappedResult(dir_.h, &ov, &n, TRUE);  // the kernel is done with `buf`
        }
        return;
      }
      DWORD n = 0;
      bool overflow = false;
      std::vector<std::string> paths;
      if (!GetOverlappedResult(dir_.h, &ov, &n, FALSE)) {
        // ERROR_NOTIFY_ENUM_DIR: too many changes for the buffer. Anything else (the folder
        // was deleted, its volume went away): the watch is over; report that once and only
        // wait for stop() from now on.
        overflow = true;
        if (GetLastError() != ERROR_NOTIFY_ENUM_DIR) pending = false;
      } else if (n == 0) {
        overflow = true;  // the system's own buffer overflowed: events were dropped
      } else {
        collect(reinterpret_cast<const char*>(buf.data()), n, &paths);
      }
      // Re-arm before calling back (`buf` has been read): changes made meanwhile are kept by
      // the system for the next read.
      if (pending && !arm()) {
        pending = false;
        overflow = true;
      }
      if (overflow || !paths.empty()) cb_(paths, overflow);
    }
  }

  // One record of a buffer, its names made long (outside the lock: that asks the disk).
  struct Record {
    std::string rel;     // the path changed, or (not `whole`) the directory something changed in
    bool whole = true;   // `rel` is the entry itself
    bool gone = false;   // removed or renamed away
  };

  // Turns one buffer of FILE_NOTIFY_INFORMATION records into the paths to report.
  void collect(const char* data, DWORD size, std::vector<std::string>* paths) {
    std::vector<Record> records;
    constexpr size_t kHeader = offsetof(FILE_NOTIFY_INFORMATION, FileName);
    for (size_t at = 0; at + kHeader <= size;) {
      auto* fi = reinterpret_cast<const FILE_NOTIFY_INFORMATION*>(data + at);
      if (at + kHeader + fi->FileNameLength > size) break;
      Record r;
      r.whole = win32::longNotifiedPath(
          root_, std::wstring(fi->FileName, fi->FileNameLength / sizeof(WCHAR)), &r.rel);
      r.gone = fi->Action == FILE_ACTION_REMOVED || fi->Action == FILE_ACTION_RENAMED_OLD_NAME;
      if (!r.rel.empty() || !r.whole) records.push_back(std::move(r));
      if (fi->NextEntryOffset == 0) break;
      at += fi->NextEntryOffset;
    }

    std::unordered_set<std::string> seen;
    auto add = [&](std::string p) {
      if (seen.insert(p).second) paths->push_back(std::move(p));
    };
    std::lock_guard lock(mu_);
    if (dirs_.empty()) return;
    // Every watched directory below `key` (all of them for the root, "").
    auto below = [&](const std::string& key) {
      std::string prefix = key.empty() ? key : key + "/";
      for (auto d = dirs_.lower_bound(prefix);
           d != dirs_.end() && d->first.compare(0, prefix.size(), prefix) == 0; ++d)
        if (d->first != key)
          for (const auto& [spelling, count] : d->second) add(spelling);
    };
    for (const Record& r : records) {
      const std::string key = fold(r.rel);
      if (!r.rel.empty()) {
        size_t slash = r.rel.rfind('/');
        std::string parentKey = slash == std::string::npos ? std::string() : key.substr(0, key.rfind('/'));
        std::string name = slash == std::string::npos ? r.rel : r.rel.substr(slash + 1);
        // An entry of a watched directory.
        if (auto d = dirs_.find(parentKey); d != dirs_.end())
          for (const auto& [spelling, count] : d->second) add(joinPath(spelling, name));
      }
      // A watched directory itself (its attributes, its removal or renaming; or, for a name
      // that did not resolve, something in it).
      if (auto d = dirs_.find(key); d != dirs_.end())
        for (const auto& [spelling, count] : d->second) add(spelling);
      // Gone with it: every watched directory below one removed or renamed away (below the
      // directory it was in when its name did not resolve: which one went is not known).
      if (r.gone) below(key);
    }
  }

  const std::wstring root_;  // \\?\ form
  Closer dir_;               // the root, opened for overlapped ReadDirectoryChangesW
  Closer wake_;              // set by stop()
  Closer io_;                // signalled when a read completes
  const Callback cb_;
  std::thread thread_;

  std::mutex stopMu_;  // serialises stop() calls (the destructor's included); taken before mu_

  // Guards everything below. Never held while the callback runs or while opening a directory.
  std::mutex mu_;
  std::condition_variable armed_cv_;
  int armState_ = 0;  // 0 starting, 1 watching, -errno when the first read could not start
  bool stopped_ = false;
  Token nextToken_ = 1;
  std::unordered_map<Token, std::pair<std::string, std::string>> tokens_;  // token -> (key, spelling)
  std::map<std::string, std::map<std::string, int>> dirs_;  // key -> spelling -> tokens
};

}  // namespace

namespace win32 {

namespace {
// The name `path`'s last component (\\?\ form; it must exist) has in its directory: the long
// one also when `path` gives the 8.3 one. FindFirstFileExW with no wildcard, as storedName() in
// win32_lower.cc (GetLongPathNameW would do on Windows, but wine returns \\?\ paths unchanged).
bool longLastName(const std::wstring& path, std::wstring* name) {
  WIN32_FIND_DATAW d;
  HANDLE f = FindFirstFileExW(path.c_str(), FindExInfoBasic, &d, FindExSearchNameMatch, nullptr, 0);
  if (f == INVALID_HANDLE_VALUE) return false;
  FindClose(f);
  *name = d.cFileName;
  return !name->empty();
}

// Whether `name` could be an 8.3 short name with a '~' in it (Windows makes "PROGRA~1" and
// "AB12C~1.TXT"; wine "A_LO~A1M"): at most 8 characters, a '~' neither first nor last, then
// at most one '.' and 3 more, no space. Others ("notes.txt~", "~$report.docx", "file~") are
// long names as they are, not looked up: editors make and delete such files all the time.
bool mayBeShortName(const std::wstring& name) {
  size_t dot = name.find(L'.');
  std::wstring base = name.substr(0, dot);
  if (dot != std::wstring::npos) {
    std::wstring ext = name.substr(dot + 1);
    if (ext.empty() || ext.size() > 3 || ext.find(L'.') != std::wstring::npos ||
        ext.find(L'~') != std::wstring::npos)
      return false;
  }
  size_t tilde = base.find(L'~');
  return base.size() <= 8 && tilde != std::wstring::npos && tilde > 0 && tilde + 1 < base.size() &&
         name.find(L' ') == std::wstring::npos;
}
}  // namespace

bool longNotifiedPath(const std::wstring& root, const std::wstring& reported, std::string* rel) {
  std::wstring dir = root;  // \\?\ path of what is resolved so far
  std::wstring out;         // the same, relative, '/'-separated
  size_t start = 0;
  while (start <= reported.size()) {
    size_t end = reported.find(L'\\', start);
    if (end == std::wstring::npos) end = reported.size();
    std::wstring part = reported.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    if (mayBeShortName(part)) {
      // Perhaps an 8.3 name (a long name of that form comes back as it is).
      std::wstring longName;
      if (!longLastName(dir + L"\\" + part, &longName)) {
        *rel = toUtf8(out);
        return false;
      }
      part = std::move(longName);
    }
    dir += L"\\" + part;
    if (!out.empty()) out.push_back(L'/');
    out += part;
  }
  *rel = toUtf8(out);
  return true;
}

void deliverForTests(FolderWatcher* watcher, const void* records, size_t size) {
  if (auto* w = dynamic_cast<Win32Watcher*>(watcher))
    w->deliver(static_cast<const char*>(records), static_cast<DWORD>(size));
}

}  // namespace win32

std::unique_ptr<FolderWatcher> openWin32Watcher(const std::string& rootUtf8,
                                                FolderWatcher::Callback onChange, int* err) {
  std::wstring root;
  if (int e = win32::resolveRoot(rootUtf8, &root)) {
    *err = e;
    return nullptr;
  }
  HANDLE dir = CreateFileW(root.c_str(), FILE_LIST_DIRECTORY, kShareAll, nullptr, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OVERLAPPED, nullptr);
  if (dir == INVALID_HANDLE_VALUE) {
    *err = lastErrno();
    return nullptr;
  }
  HANDLE wake = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  HANDLE io = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  if (!wake || !io) {
    *err = lastErrno();
    CloseHandle(dir);
    if (wake) CloseHandle(wake);
    if (io) CloseHandle(io);
    return nullptr;
  }
  auto w = std::make_unique<Win32Watcher>(std::move(root), dir, wake, io, std::move(onChange));
  if (int e = w->start()) {
    *err = e;
    return nullptr;  // the destructor joins the thread, which has already ended
  }
  return w;
}

}  // namespace shadowfs
#endif  // _WIN32
