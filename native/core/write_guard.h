// Paths no layer may write: the files whose content makes programs run when git reads them.
//
// Why: an agent's writes stay in its layer, but the developer may run git in the shadow's mount
// point, unconfined (their shell, a prompt that runs `git status` on every `cd`, an editor's git
// view). That git reads the layer's `.git/config` and hooks, so a `core.fsmonitor` an agent
// wrote there would run as the developer, able to write the developer's folder. Refusing the
// writes (EPERM) closes that: the agent's git keeps working (commits, branches, stashes), but
// `git config --local`, a new hook, `git init` of a nested repository and replacing `.git` fail
// with "Operation not permitted". Agent sandboxes refuse the same writes for the same reason.
//
// What it refuses, at any depth, for every way a layer is written (the mount, views, runs, the
// API's file writes): the name `.git` itself (making, removing, renaming, replacing it, as a
// directory or a file), and beneath a `.git` the files that name programs or redirect git to
// another repository: `config`, `config.worktree`, `commondir`, everything under `hooks` and
// `objects/info/alternates` (and a file named `commondir` anywhere, which makes the directory
// holding it a repository),
// also in the `modules/<name>` and `worktrees/<name>` repositories git keeps there. Names under
// `refs`, `logs` and `objects` are git's data (a branch may be called `config`) and stay
// writable. Optionally also a list of anchored paths (the folder's own `core.hooksPath` when it
// lies inside the folder), each with everything beneath it. Writes include changing
// attributes, extended attributes, hard links to such a file and truncation. And beneath any
// `.git`, data directories included, no symbolic link, FIFO, socket or device, nor a directory
// moved in from outside (refusesSpecial): git follows links there when it writes.
//
// OS-free, no locks: a WriteGuard is immutable once built (Overlay::setWriteGuard).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mask.h"

namespace shadowfs {

class WriteGuard {
 public:
  // `git`: refuse git's control files as above. `paths`: anchored globs of PathMask's syntax
  // (each refuses the path and everything beneath it). `ignoreCase`: ASCII letters of names
  // match either case (the overlay's NameMatch::IgnoreCase).
  // `gitDirs`: relative paths of git directories inside the folder that are not called `.git`
  // (a `.git` file's `gitdir: .repo`), beneath which refusesSpecial refuses as beneath a `.git`.
  WriteGuard(bool git, const std::vector<std::string>& paths, bool ignoreCase,
             const std::vector<std::string>& gitDirs = {});

  // Whether a layer may not write the normalised relative path ("" = the root: never refused).
  bool refuses(std::string_view path) const;
  // Whether a directory may not be renamed from or to `path`: a refused path, or (with `git`)
  // any path inside a `.git` outside its data directories, where moving a directory in or out
  // would move control files (a repository's `config` and `hooks` under `.git/modules/<name>`)
  // without writing any of them by name.
  // Also a directory above one of the extra paths: moving it away and another in its place
  // would replace what lies beneath without writing any of it by name. And a repository's
  // `objects` or `objects/info` (objectsPlace).
  bool refusesMove(std::string_view path) const;
  // Whether an object other than a regular file or a directory (a symbolic link, a FIFO, a
  // socket, a device) may not be placed at `path`: beneath a `.git`, at any depth, data
  // directories included. git never makes one there, and git run by the user outside any
  // sandbox follows a link it finds there when it writes: a reflog line appended through
  // `logs/HEAD`, `COMMIT_EDITMSG` rewritten, `worktrees/<id>` pruned recursively, each into
  // wherever the link points (the agent knows the folder's real path: it is its working
  // directory). For the same reason a directory may not move beneath a `.git` from outside one:
  // it could carry such a link in with it.
  bool refusesSpecial(std::string_view path) const;
  bool git() const { return git_; }
  const std::vector<std::string>& paths() const { return paths_.globs(); }

  // The git rule alone (no instance needed; the unit tests call it directly).
  static bool gitControl(std::string_view path, bool ignoreCase);
  // Whether `path` is `.git` or lies inside one, outside refs, logs and objects.
  static bool insideRepository(std::string_view path, bool ignoreCase);
  // Whether `path` lies beneath a `.git` (a component before its last one is `.git`).
  static bool beneathGit(std::string_view path, bool ignoreCase);
  // Whether `path` is a repository's `objects` or `objects/info` directory, right beneath a
  // `.git`: no directory may move there or away (it could bring an `info/alternates` with it,
  // which names other object directories git reads and freshens objects in).
  static bool objectsPlace(std::string_view path, bool ignoreCase);
  // Whether `path` could be a repository's hooks or config wherever the repository is: a
  // component is `hooks`, or the last one is `config`, `config.worktree`, `alternates` or
  // `http-alternates` (the cheap test
  // before Overlay::besideRepository looks for HEAD, objects and refs beside them).
  static bool mayWriteRepository(std::string_view path, bool ignoreCase);

 private:
  // gitControl's walk; `insideAtEnd` (if set) says whether the path ends inside a `.git`
  // outside its data directories.
  static bool scan(std::string_view path, bool ignoreCase, bool* insideAtEnd);
  // Whether `path` is a directory above one of the extra paths (a proper prefix of one).
  bool holdsGuarded(std::string_view path) const;
  bool git_;
  PathMask paths_;
  std::vector<std::vector<std::string>> anchors_;  // the extra paths' components, escapes undone
  std::vector<std::vector<std::string>> gitDirs_;  // components of the git directories given
  bool ignoreCase_;
};

}  // namespace shadowfs
