// The portable backend's side of kernel caching, on Linux (fuse_hl.cc serves the requests).
//
// Caching (Linux, libfuse): with a folder watcher the kernel keeps names and attributes for a
// day (as fuse_ll does for what its watcher covers), and we tell it what to drop when something
// changes behind its back: edits in the folder (an inotify watch on every directory of A a
// request has seen), API writes and layer switches. The high-level API gives no node ids to
// invalidate, so fuse_invalidate_path drops a path's attributes (and a directory's listing), and
// a name that is gone is dropped through its first component: an entry invalidation in the
// root, whose node id is the one we know, drops every name the kernel has under it. Negative
// names stay uncached (libfuse cannot reach them).
//
// Its timeouts are one setting for the whole mount, so what no watch covers is swept instead,
// every cacheTimeout (the mount's own timeout, which fuse_ll gives such names): a directory
// that does not merge the folder's directory of its own path (only a layer has it, it is
// opaque, or it was renamed and reads its origin), one the system had no watch left for, and a
// file renamed through the mount that still reads the folder's object under its old name. A
// sweep drops such a directory's attributes, listing and names (those gone since the names were
// noted through their first component); a directory renamed through the mount first drops
// every name under it once, since the kernel moved them there unseen. A watched directory that
// is removed or made anew in the folder is dropped with every name under it and watched again
// when next shown.
//
// File pages: an open lets the kernel keep what it cached of the file (keep_cache) only when
// the open finds the same object, size, mtime and ctime as the last open of that path through
// this mount did; any write, truncation, chmod or utimens changes the ctime, which no program
// can set back. The notes are dropped with every invalidation of their path, and all of them at
// a layer switch, so the first open of each file after a switch drops its pages. A note lasts
// the kernel's attribute timeout at most: a folder file changed with nothing to show for it
// (stores into a shared mmap page that was already dirty move neither mtime nor ctime) shows
// its new bytes to the first open after that, as its attributes would (docs/limits.md). The pages of
// a path whose object changed while the kernel held them are dropped by the invalidation
// itself (fuse_invalidate_path: attributes and every page of the file).
//
// Hard links: the high-level API gives each name of a hard link its own kernel inode, and its
// timeouts are one setting for every reply (lib/fuse.c answers with conf.attr_timeout
// everywhere), so a write or chmod through one name would leave the other names' cached
// attributes wrong. We remember every name a lookup showed with a link count above one, by
// object (anything but a directory: link(2) makes second names of symlinks and special files
// too), and before a request that changes such an object answers (write, truncate, chmod,
// link, unlink, rename over it...) we invalidate its other names. The invalidation runs on a
// thread of its own and the request waits for it, but only for a bounded time: the kernel holds
// a file's pages locked across its WRITE, so two writes through two names of one file at once
// would each wait for the other's pages; the bound breaks that cycle (the invalidation still
// lands, a moment later). On Windows, WinFsp's fuse_invalidate_path does nothing, so the kernel
// there is told to cache nothing.

#include "hl_mount.h"

#if !defined(_WIN32)
namespace shadowfs {
namespace fuse_hl_detail {

void HLMount::watchDir(const std::string& dir, uint64_t ino) {
  if (!watcher_) return;
  {
    std::lock_guard lock(watchMu_);
    if (watched_.count(dir)) return;
  }
  // A watch on the folder's directory of the same path reports what this one shows only when
  // the layer merges exactly that directory here (not a renamed, opaque or layer-only one).
  const bool merges = ov_->mergesFolderDirAt(view_, dir);
  std::lock_guard lock(watchMu_);
  auto [it, added] = watched_.emplace(dir, Watched{});
  if (!added) return;
  it->second.ino = ino;
  if (merges && watcher_->watch(dir, &it->second.token) == 0) return;
  it->second.token = 0;
  // Shown just now, before any name under it: the names the kernel learns from here on are
  // noted (noteShown).
  if (uncovered_.size() < kMaxUncovered) uncovered_.emplace(dir, Uncovered{});
  else uncoveredOverflowed_ = true;
  anyUncovered_.store(true, std::memory_order_relaxed);
}

void HLMount::renamedHere(const std::string& to) {
  if (!watcher_) return;
  Attr a;
  if (ov_->getattr(view_, to, &a) != 0) return;
  if (a.type == FileType::Directory) {
    std::lock_guard lock(watchMu_);
    auto w = watched_.find(to);
    if (w != watched_.end() && w->second.token) watcher_->unwatch(w->second.token);
    watched_[to] = Watched{0, a.ino};
    if (uncovered_.size() < kMaxUncovered) uncovered_[to].unknown = true;
    else uncoveredOverflowed_ = true;
    anyUncovered_.store(true, std::memory_order_relaxed);
  } else if (!a.layerObject) {
    std::lock_guard lock(watchMu_);
    if (renamedFiles_.size() < kMaxUncovered) renamedFiles_.insert(to);
    else uncoveredOverflowed_ = true;
    anyUncovered_.store(true, std::memory_order_relaxed);
  }
}

void HLMount::namesIn(const std::string& dir, std::vector<std::string>* out) {
  DirStream s;
  if (ov_->list(view_, dir, &s) != 0) return;
  for (size_t i = 2; i < s.count(); ++i) {  // past "." and ".."
    const char* name;
    uint64_t ino;
    FileType type;
    s.at(i, &name, &ino, &type);
    out->emplace_back(name);
  }
}

void HLMount::noteShown(const std::string& path) {
  if (path.empty()) return;
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    std::lock_guard lock(watchMu_);
    if (tops_.size() < kMaxTops) tops_.insert(path);  // past it, an overflow misses the rest
  }
  if (!anyUncovered_.load(std::memory_order_relaxed)) return;
  const std::string parent = slash == std::string::npos ? std::string() : path.substr(0, slash);
  std::lock_guard lock(watchMu_);
  auto u = uncovered_.find(parent);
  if (u != uncovered_.end()) u->second.names.insert(path.substr(slash == std::string::npos ? 0 : slash + 1));
}

void HLMount::sweepUncovered() {
  std::vector<std::pair<std::string, Uncovered>> dirs;
  std::vector<std::string> files;
  bool everything = false;
  {
    std::lock_guard lock(watchMu_);
    everything = uncoveredOverflowed_;
    for (const auto& [d, u] : uncovered_) dirs.emplace_back(d, u);
    files.assign(renamedFiles_.begin(), renamedFiles_.end());
  }
  // More uncovered directories than are kept: every name goes, as the mount's timeout would.
  if (everything) return invalidateAll();
  std::vector<std::string> paths, subtrees;
  for (const std::string& f : files) {
    Attr a;
    if (ov_->getattr(view_, f, &a) == 0 && !a.layerObject && a.type != FileType::Directory) {
      paths.push_back(f);
      continue;
    }
    paths.push_back(f);  // once more: gone, or the layer's own now
    std::lock_guard lock(watchMu_);
    renamedFiles_.erase(f);
  }
  for (auto& [d, u] : dirs) {
    const std::set<std::string>& before = u.names;
    if (u.unknown) subtrees.push_back(d);
    bool watchedNow = false;
    // The folder may have it now, or the OS watches to spare.
    if (!u.unknown && ov_->mergesFolderDirAt(view_, d)) {
      std::lock_guard lock(watchMu_);
      auto w = watched_.find(d);
      if (w != watched_.end() && w->second.token == 0 && watcher_->watch(d, &w->second.token) == 0) {
        uncovered_.erase(d);
        watchedNow = true;
      }
    }
    std::vector<std::string> names;
    namesIn(d, &names);
    paths.push_back(d);
    std::set<std::string> now(names.begin(), names.end());
    for (const std::string& n : names) paths.push_back(joinPath(d, n));
    std::vector<std::string> gone;
    for (const std::string& n : before)
      if (!now.count(n)) gone.push_back(n);
    for (const std::string& n : gone) paths.push_back(joinPath(d, n));  // dropped by name
    if (!watchedNow) {
      std::lock_guard lock(watchMu_);
      auto it = uncovered_.find(d);
      if (it != uncovered_.end()) {
        for (const std::string& n : gone) it->second.names.erase(n);
        if (u.unknown) it->second.unknown = false;  // dropped below: from now on, noted
      }
    }
  }
  if (!paths.empty()) forgetPaths(paths, false);
  if (!subtrees.empty()) forgetPaths(subtrees, true);
}

bool HLMount::keepPages(const std::string& path, const Attr& a) {
  std::lock_guard lock(openedMu_);
  if (opened_.size() >= kMaxOpened) opened_.clear();
  Opened& o = opened_[std::hash<std::string>{}(path)];
  const auto now = std::chrono::steady_clock::now();
  const bool same = o.ino == a.ino && o.ino != 0 && o.size == a.size && o.mtime == a.mtime &&
                    o.ctime == a.ctime &&
                    now - o.since < std::chrono::duration<double>(kernelAttrTimeout_);
  if (!same) o.since = now;
  o.ino = a.ino;
  o.size = a.size;
  o.mtime = a.mtime;
  o.ctime = a.ctime;
  return same;
}

void HLMount::forgetOpened(const std::vector<std::string>& paths, bool all) {
  std::lock_guard lock(openedMu_);
  if (all) return opened_.clear();
  for (const std::string& p : paths) opened_.erase(std::hash<std::string>{}(p));
}

void HLMount::forgetPaths(const std::vector<std::string>& paths, bool allNames) {
  forgetOpened(paths, allNames);
  if (!mounted_.load() || !f_) return;
  struct fuse_session* se = fuse_get_session(f_);
  std::set<std::string> dirs, tops;
  for (const std::string& p : paths) {
    auto comps = components(p);
    if (comps.empty()) {
      dirs.insert(std::string());
      continue;
    }
    std::string parent, name;
    splitLast(p, &parent, &name);
    dirs.insert(p);
    dirs.insert(parent);
    Attr a;
    const bool gone = ov_->getattr(view_, p, &a) != 0;
    // A watched directory that is gone or another object now (removed and made again in the
    // folder): the names the kernel has under it go, and it is watched again when next shown.
    // Another object: another inode number, or the same number with the OS's watch on the old
    // directory ended (ext4 and tmpfs give a directory made again at once its old number; the
    // new one then stayed unwatched, and a file removed in it stayed in the kernel for a day).
    bool replaced = false;
    if (watcher_) {
      std::lock_guard lock(watchMu_);
      auto w = watched_.find(p);
      if (w != watched_.end() &&
          (gone || w->second.ino != a.ino || (w->second.token != 0 && !watcher_->alive(w->second.token)))) {
        if (w->second.token) watcher_->unwatch(w->second.token);
        uncovered_.erase(p);
        watched_.erase(w);
        replaced = true;
      }
    }
    if (allNames || gone || replaced) tops.insert(std::string(comps.front()));
    // A folder file's other hard-link names changed with it (inotify reports only this one).
    if (!gone)
      for (std::string& other : linkedNames(a, p)) dirs.insert(std::move(other));
  }
  // Attributes and listings first, names last (as fuse_ll does): whoever looks a name up
  // again then also finds it in its parent's listing. ENOENT: the kernel holds nothing there.
  for (const std::string& d : dirs) fuse_invalidate_path(f_, ("/" + d).c_str());
  for (const std::string& t : tops)
    fuse_lowlevel_notify_inval_entry(se, FUSE_ROOT_ID, t.c_str(), t.size());
}

void HLMount::noteLinked(const std::string& path, const Attr& a) {
  if (a.type == FileType::Directory || a.nlink < 2) return;
  std::lock_guard lock(linksMu_);
  linked_[a.ino].insert(path);
  anyLinked_.store(true, std::memory_order_relaxed);
}

std::vector<std::string> HLMount::linkedNames(const Attr& a, const std::string& except) {
  std::vector<std::string> out;
  if (a.type == FileType::Directory || !anyLinked_.load(std::memory_order_relaxed)) return out;
  std::lock_guard lock(linksMu_);
  auto it = linked_.find(a.ino);
  if (it == linked_.end()) return out;
  for (const std::string& p : it->second)
    if (p != except) out.push_back(p);
  return out;
}

void HLMount::changedLinked(const char* path, Handle* h) {
  if (!anyLinked_.load(std::memory_order_relaxed)) return;
  Attr a;
  if (!(h && ov_->fgetattr(h, &a) == 0) && !(path && ov_->getattr(view_, rel(path), &a) == 0))
    return;
  // Never the request's own name: its pages may be locked for this very request, and the kernel
  // updates that inode's attributes itself.
  invalidateSoon(linkedNames(a, path ? rel(path) : std::string()));
}

void HLMount::invalidateSoon(std::vector<std::string> paths) {
  if (paths.empty()) return;
  std::unique_lock lock(invalMu_);
  if (invalStop_) return;
  for (std::string& p : paths) invalQueue_.push_back(std::move(p));
  const uint64_t ticket = ++invalAsked_;
  invalCv_.notify_one();
  // Bounded (see the top of the file): 1 s only when two writes through two names cross.
  invalDoneCv_.wait_for(lock, std::chrono::seconds(1),
                        [&] { return invalDone_ >= ticket || invalStop_; });
}

// On the invalidator thread: batches of paths, each dropped with fuse_invalidate_path (ENOENT:
// the kernel holds nothing there).
void HLMount::invalidatorLoop() {
  // Sweeps only while the kernel keeps what the watcher covers for a day.
  const bool sweeping = kernelEntryTimeout_ > opts_.entryTimeout;
  const auto every = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(opts_.entryTimeout, 0.05)));
  auto next = std::chrono::steady_clock::now() + every;
  std::unique_lock lock(invalMu_);
  for (;;) {
    auto ready = [&] { return invalStop_ || !invalQueue_.empty(); };
    if (sweeping) invalCv_.wait_until(lock, next, ready);
    else invalCv_.wait(lock, ready);
    if (invalStop_) return;
    if (invalQueue_.empty()) {
      if (std::chrono::steady_clock::now() < next) continue;  // woken early, nothing asked
      lock.unlock();
      sweepUncovered();
      lock.lock();
      next = std::chrono::steady_clock::now() + every;
      continue;
    }
    std::vector<std::string> batch;
    batch.swap(invalQueue_);
    const uint64_t upTo = invalAsked_;
    lock.unlock();
    std::set<std::string> unique(batch.begin(), batch.end());
    for (const std::string& p : unique) fuse_invalidate_path(f_, ("/" + p).c_str());
    lock.lock();
    invalDone_ = upTo;
    invalDoneCv_.notify_all();
  }
}

void HLMount::stopInvalidator() {
  {
    std::lock_guard lock(invalMu_);
    invalStop_ = true;
  }
  invalCv_.notify_all();
  invalDoneCv_.notify_all();
  if (invalidator_.joinable()) invalidator_.join();
}

void HLMount::invalidatePaths(const std::vector<std::string>& paths) { forgetPaths(paths, false); }

void HLMount::invalidateForSwitch(const std::vector<std::string>& paths) {
  forgetPaths(paths, true);
}

void HLMount::invalidateAll() {
  // Every name in the root now, every first name a request showed, and the root itself.
  std::vector<std::string> paths{std::string()};
  {
    std::lock_guard lock(watchMu_);
    paths.insert(paths.end(), tops_.begin(), tops_.end());
  }
  namesIn(std::string(), &paths);
  forgetPaths(paths, true);
}

}  // namespace fuse_hl_detail
}  // namespace shadowfs
#endif
