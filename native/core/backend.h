// What the addon needs from a mounted backend, whatever the OS. One implementation per
// backend folder (fuse_ll on Linux; fuse_hl for the portable FUSE3 / WinFsp path), chosen by
// name in native/addon/backends.cc.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "change_journal.h"
#include "overlay.h"

namespace shadowfs {

struct MountOptions {
  double entryTimeout = 1.0;     // seconds the kernel may cache a name
  double attrTimeout = 1.0;      // seconds the kernel may cache attributes
  double negativeTimeout = 1.0;  // seconds the kernel may cache "no such name"
  bool debug = false;
  // Invalidate names with one FUSE_NOTIFY_INC_EPOCH on a layer switch when the kernel takes
  // it; false forces per-entry invalidation (the path older kernels get).
  bool useEpoch = true;
  // FUSE allow_other: users other than the mounter may use the mount (the kernel checks their
  // permissions, default_permissions being always on). fusermount3 refuses it to a mounter
  // other than root unless /etc/fuse.conf has user_allow_other; TypeScript checks that first.
  bool allowOther = false;
  // Names match ignoring case, keeping it (Windows' behaviour; the overlay is built with
  // NameMatch::IgnoreCase, see overlay.h). fuse_hl on Windows also tells WinFsp the file system
  // is case-insensitive; fuse_ll refuses it (the Linux kernel caches names by exact spelling).
  bool caseInsensitive = false;
  // How fuse_ll serves open files and directories (fuse_hl ignores it: WinFsp and libfuse's
  // high-level loop always open). Cached: OPEN, OPENDIR and CREATE are answered ENOSYS once,
  // after which the kernel opens files and directories without a round trip and keeps their
  // pages and listings until told to drop them; reads and writes then come by node, and are
  // served from the node's path in its layer. Open: every open is a request with a handle (the
  // behaviour before #18, kept for comparison and as a fallback).
  bool openRoundTrips = false;
  // Passthrough (fuse_ll, with openRoundTrips): a read-only open of a file whose content is the
  // folder's is answered with FOPEN_PASSTHROUGH on the folder's own file, so the kernel reads it
  // directly (no READ requests, one page cache). Needs a kernel that offers FUSE_PASSTHROUGH
  // (6.9+) and CAP_SYS_ADMIN; without them the mount serves opens as `openRoundTrips` alone does.
  bool passthrough = false;
  // fuse_ll: take requests through FUSE over io_uring (Linux 6.14+) when the kernel offers it
  // and root turned it on (/sys/module/fuse/parameters/enable_uring); else, and after any
  // failure to set it up, /dev/fuse as always. MountBackend::transport() says which it got.
  bool ioUring = true;
  // winfsp: a network volume reachable as \\server\share, on WinFsp's network device, with this
  // prefix written as WinFsp's FSP_FSCTL_VOLUME_PARAMS::Prefix takes it ("\server\share", one
  // leading backslash); empty: a disk volume. Other backends ignore it (winfsp_native.cc says
  // which form to use when).
  std::string volumePrefix;
};

class MountBackend {
 public:
  virtual ~MountBackend() = default;
  // Tells the kernel to forget what it cached about these paths (and their parents' listings)
  // after the layer changed behind its back (API writes). Called on the addon's worker thread
  // (never the JS thread, since the kernel may make it wait) or the folder watcher's thread,
  // never under an overlay lock.
  virtual void invalidatePaths(const std::vector<std::string>& paths) = 0;
  // Same for everything the kernel knows about.
  virtual void invalidateAll() = 0;
  // After the active layer changed: `paths` are all paths either layer holds.
  virtual void invalidateForSwitch(const std::vector<std::string>& paths) = 0;
  // Whether the last switch could use the kernel's epoch notification.
  virtual bool usesEpoch() const = 0;
  // 0, EBUSY when programs still use the mount and `lazy` is false, or another errno.
  virtual int unmount(bool lazy) = 0;
  virtual bool mounted() const = 0;
  // File-system requests served so far (for idle detection).
  virtual uint64_t requests() const = 0;
  /** Requests served by kind, for the kinds this backend counts (none by default). */
  virtual std::vector<std::pair<std::string, uint64_t>> requestCounts() const { return {}; }
  /** What the kernel agreed to, by feature name (none by default): which round trips this
   *  mount skips and which faster transports it uses. */
  virtual std::vector<std::pair<std::string, bool>> transport() const { return {}; }
  // The folder changes this backend's watcher saw (see change_journal.h), or null when it has
  // no watcher (then edits in the folder show only after the cache timeouts, and nobody can be
  // told of them).
  virtual const ChangeJournal* folderChanges() const { return nullptr; }
  // Ends the object's life: deletes it now, or, after a lazy unmount whose mount is still in
  // use, lets its loop delete it once the last user has gone. Use instead of delete.
  virtual void dispose() = 0;

  // The end of the mount that nobody asked for (its loop or dispatcher stopped: the volume, the
  // driver or the kernel connection went away, or someone unmounted it from outside). `reason`
  // is a whole sentence. Called at most once, on a backend thread (never under an overlay lock);
  // a report made before the callback was set is handed to it when it is set. setOnGone(nullptr)
  // returns only once no call is running, and none follows: the addon clears it before dispose.
  using GoneCallback = std::function<void(const std::string& reason)>;
  void setOnGone(GoneCallback cb) {
    std::lock_guard<std::mutex> lock(goneMu_);
    onGone_ = std::move(cb);
    if (onGone_ && gone_ && !goneTold_) {
      goneTold_ = true;
      onGone_(goneReason_);
    }
  }

 protected:
  // Backends call this when their loop ends on its own (after mounted() has turned false).
  // Returns whether someone was told (else the caller may log the reason itself).
  bool reportGone(const std::string& reason) {
    std::lock_guard<std::mutex> lock(goneMu_);
    if (gone_) return goneTold_;
    gone_ = true;
    goneReason_ = reason;
    if (!onGone_) return false;
    goneTold_ = true;
    onGone_(goneReason_);
    return true;
  }

 private:
  std::mutex goneMu_;  // a leaf: held only around the callback, which must not block
  GoneCallback onGone_;
  bool gone_ = false;
  bool goneTold_ = false;
  std::string goneReason_;
};

}  // namespace shadowfs
