// FolderWatcher for Windows: ReadDirectoryChangesW on a thread of its own (see
// native/core/watcher.h for the contract).
#pragma once

#include <cerrno>
#include <memory>
#include <string>

#include "../core/watcher.h"

// watch() answers ESHUTDOWN after stop(); the Windows C runtimes do not define it. A value no
// MinGW or MSVC errno uses.
#ifndef ESHUTDOWN
#define ESHUTDOWN 158
#endif

namespace shadowfs {

// Watches directories of the folder `rootUtf8` and reports changes to `onChange` on the
// watcher's thread. Null and *err (an errno) when the folder cannot be opened or watched.
std::unique_ptr<FolderWatcher> openWin32Watcher(const std::string& rootUtf8,
                                                FolderWatcher::Callback onChange, int* err);

}  // namespace shadowfs
