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
//
// Windows reports a change under the name the changing program used, which may be an 8.3 short
// name ("PROGRA~1"): such names are turned into the long ones the shadow shows
// (win32::longNotifiedPath). A short name that no longer resolves (the entry was removed or
// renamed away, or its directory was) is reported as a change of the deepest directory that
// still resolves, and when it was a removal or rename, of every watched directory below that
// one too. Events lost by the system (ERROR_NOTIFY_ENUM_DIR, or a read that returns no bytes)
// are reported as `overflow` with no paths: the receiver treats the whole folder as changed.
std::unique_ptr<FolderWatcher> openWin32Watcher(const std::string& rootUtf8,
                                                FolderWatcher::Callback onChange, int* err);

namespace win32 {

// The long form of `reported`, a path relative to `root` (\\?\ form) as ReadDirectoryChangesW
// spells it ('\'-separated; any component may be an 8.3 short name). True and *rel = the path
// with long names, '/'-separated, when every component is long (not of the 8.3 form with a '~')
// or resolves now (FindFirstFileExW); false and *rel = the longest leading directory that
// resolves ("" = the root) when a component does not: then only "something in *rel changed" is
// known.
bool longNotifiedPath(const std::wstring& root, const std::wstring& reported, std::string* rel);

// For tests of what wine's ReadDirectoryChangesW never returns (8.3 names): hands `watcher` (one
// from openWin32Watcher) a buffer of FILE_NOTIFY_INFORMATION records as if the system had, and
// runs its callback on the calling thread. Only while nothing changes in the folder (the
// callback's one-at-a-time promise is the caller's to keep).
void deliverForTests(FolderWatcher* watcher, const void* records, size_t size);

}  // namespace win32

}  // namespace shadowfs
