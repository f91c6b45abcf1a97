// Kernel cache control for fuse_ll: what the kernel must forget after a layer switch (one epoch
// notification where the kernel takes it, per-entry invalidation otherwise), after an API
// write, and after an edit in the folder reported by the watcher.
#include "ll_mount.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "../core/path.h"
#include "../platform/posix_watcher.h"

namespace shadowfs {
namespace ll {

void LLMount::startWatcher() {
  int err = 0;
  watcher_ = openPosixWatcher(
      lowerPath_,
      [this](const std::vector<std::string>& paths, bool overflow) {
        // Recorded first: whoever sees the new content through the mount also finds the change.
        journal_.record(paths, overflow);
        if (overflow) invalidateAll();
        if (!paths.empty()) invalidatePaths(paths);
      },
      &err);
  if (!watcher_) return;  // no live view: edits in A show after the cache timeout
  std::lock_guard lock(tmu_);
  watcher_->watch(std::string(), &nodes_[abi::kRootId]->watch);
}

void LLMount::stopWatcher() {
  if (watcher_) watcher_->stop();
}

void LLMount::invalidatePaths(const std::vector<std::string>& paths) {
  invalidateNames(paths, true);
}

// A file's cached pages go only when its content changed under the same node (API writes, edits
// in A). After a layer switch they can stay: a node stands for one object (a new lookup in the
// other layer gets a new node unless both layers show the folder's own file, see remember()),
// and dropping them would wait for the page locks a WRITE in progress holds, so a switch would
// wait for a copy-up that WRITE is doing (measured: 2.7 s for 1 GiB). Directories always lose
// their cached listing.
void LLMount::invalidateNames(const std::vector<std::string>& paths, bool filePages) {
  if (!mounted_.load() || fd_ < 0) return;
  std::vector<std::pair<uint64_t, std::string>> entries;
  std::vector<uint64_t> inodes;
  std::vector<uint64_t> fileInodes;  // attributes only, unless filePages
  {
    std::lock_guard lock(tmu_);
    for (const std::string& p : paths) {
      uint64_t id = abi::kRootId;
      auto comps = components(p);
      for (size_t i = 0; i < comps.size(); ++i) {
        std::string name(comps[i]);
        if (i + 1 == comps.size()) {
          entries.emplace_back(id, name);
          inodes.push_back(id);  // the parent's listing and mtime changed too
        }
        auto it = byName_.find(key(id, name));
        if (it == byName_.end()) break;
        id = it->second;
        if (i + 1 == comps.size()) {
          if (filePages || nodes_[id]->type == FileType::Directory) inodes.push_back(id);
          else fileInodes.push_back(id);
        }
      }
    }
  }
  // Listings and attributes first, names last: whoever finds the new name through a lookup then
  // also finds it in the parent's listing.
  for (uint64_t id : inodes) wire::notifyInvalInode(fd_, id, 0, 0);
  for (uint64_t id : fileInodes) wire::notifyInvalInode(fd_, id, -1, 0);
  for (auto& [parent, name] : entries)
    wire::notifyInvalEntry(fd_, parent, name);
}

void LLMount::invalidateForSwitch(const std::vector<std::string>& paths) {
  if (!mounted_.load() || fd_ < 0) return;
  if (opts_.useEpoch) {
    // FUSE_NOTIFY_INC_EPOCH (7.44): every name the kernel has cached, negative entries too,
    // becomes invalid at its next use. An older kernel refuses it.
    epochWorks_ = wire::notifyIncEpoch(fd_) == 0;
  }
  if (!epochWorks_.load()) {
    invalidateNames(paths, false);
    return;
  }
  // Names are handled by the epoch; attributes of the objects the kernel holds at the paths
  // that differ, and the listings of directories, still have to go (file pages stay: see
  // invalidateNames).
  std::vector<uint64_t> inodes;
  std::vector<uint64_t> fileInodes;
  {
    std::lock_guard lock(tmu_);
    for (const std::string& p : paths) {
      uint64_t id = abi::kRootId;
      for (auto c : components(p)) {
        inodes.push_back(id);
        auto it = byName_.find(key(id, std::string(c)));
        if (it == byName_.end()) {
          id = 0;
          break;
        }
        id = it->second;
      }
      if (id) (nodes_[id]->type == FileType::Directory ? inodes : fileInodes).push_back(id);
    }
  }
  std::sort(inodes.begin(), inodes.end());
  inodes.erase(std::unique(inodes.begin(), inodes.end()), inodes.end());
  for (uint64_t id : inodes) wire::notifyInvalInode(fd_, id, 0, 0);
  for (uint64_t id : fileInodes) wire::notifyInvalInode(fd_, id, -1, 0);
}

void LLMount::invalidateAll() {
  if (!mounted_.load() || fd_ < 0) return;
  std::vector<std::pair<uint64_t, std::string>> entries;
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(tmu_);
    for (auto& [id, n] : nodes_) {
      inodes.push_back(id);
      for (auto& nm : n->names) entries.emplace_back(nm.parent, nm.name);
    }
  }
  for (auto& [parent, name] : entries)
    wire::notifyInvalEntry(fd_, parent, name);
  for (uint64_t id : inodes) wire::notifyInvalInode(fd_, id, 0, 0);
}


}  // namespace ll
}  // namespace shadowfs
