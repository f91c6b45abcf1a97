// Watching the user's folder A for changes made outside the shadow, so a backend can tell the
// kernel to drop what it cached (DESIGN.md "Reads are live"). The core only declares the
// interface; native/platform implements it per OS (posix_watcher.h: inotify on Linux; a
// Windows one would use ReadDirectoryChangesW). OS-free: no OS headers here.
//
// Model: the backend watches the directories of A that the kernel currently holds, by path
// relative to A's root ("" = the root). Watching the same directory twice is cheap and counted:
// it stays watched until every token for it was released. A change to an entry of a watched
// directory is reported as that entry's relative path ("dir/name"); a change to the watched
// directory itself (its attributes; it was deleted or moved away) as the directory's path.
// When the OS dropped events (queue overflow), `overflow` is set: anything may have changed.
//
// Threads:
// - watch() and unwatch() may be called from any thread, also from inside the callback.
// - The callback runs on the watcher's own thread, one call at a time, never while the
//   watcher holds its internal lock. It must not destroy the watcher (stop() joins that thread).
// - stop() and the destructor wait for a callback in progress to return; after stop() no
//   callback runs any more. Neither may be called from inside the callback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shadowfs {

class FolderWatcher {
 public:
  // 0 never names a watch, so a backend can keep 0 for "not watched".
  using Token = uint64_t;
  // `paths`: changed relative paths, each once per call, in the order seen. `overflow`: some
  // events were lost, so the receiver should treat everything as changed (paths may be empty).
  using Callback = std::function<void(const std::vector<std::string>& paths, bool overflow)>;

  virtual ~FolderWatcher() = default;

  // Starts watching directory `relDir` of A (a normalised relative path, "" = A's root).
  // Returns 0 and a token, or an errno: ENOENT (no such directory in A, e.g. one that only a
  // layer has), ENOTDIR (not a directory, or a symlink: never followed), ENOSPC (the OS is out
  // of watches; that directory then relies on the cache timeout), ESHUTDOWN after stop().
  virtual int watch(const std::string& relDir, Token* out) = 0;
  // Releases one token (unknown or already released tokens are ignored). The OS watch goes
  // when the last token on that directory is released.
  virtual void unwatch(Token token) = 0;
  // Whether the directory `token` watches is still watched by the OS: false once the OS dropped
  // the watch (the directory was deleted; its inode number may already be another directory's,
  // which a file system that reuses numbers gives a directory made again at once). Backends
  // without that knowledge say true.
  virtual bool alive(Token token) { return token != 0; }
  // Ends the watcher's thread and releases every watch. Idempotent.
  virtual void stop() = 0;
};

}  // namespace shadowfs
