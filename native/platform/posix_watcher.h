// FolderWatcher for Linux: inotify, read on a thread of its own (see native/core/watcher.h for
// the contract). Directories are reached through descriptors relative to A's root, never by
// absolute strings, so directories deeper than PATH_MAX can be watched too.
#pragma once

#include <memory>
#include <string>

#include "../core/watcher.h"

namespace shadowfs {

// Watches directories of the folder `root` and reports changes to `onChange` on the watcher's
// thread. Returns null and sets *err (an errno) when inotify or the folder cannot be opened.
std::unique_ptr<FolderWatcher> openPosixWatcher(const std::string& root,
                                                FolderWatcher::Callback onChange, int* err);

}  // namespace shadowfs
