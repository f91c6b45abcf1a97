// WriteGuard (write_guard.h): which paths a layer may not write.
#include "write_guard.h"

#include "casefold.h"

namespace shadowfs {

namespace {

bool nameIs(std::string_view a, std::string_view b, bool ignoreCase) {
  return ignoreCase ? sameName(a, b) : a == b;
}

}  // namespace

WriteGuard::WriteGuard(bool git, const std::vector<std::string>& paths, bool ignoreCase)
    : git_(git), paths_(paths, ignoreCase), ignoreCase_(ignoreCase) {}

bool WriteGuard::refuses(std::string_view path) const {
  if (path.empty()) return false;
  if (git_ && gitControl(path, ignoreCase_)) return true;
  return !paths_.empty() && paths_.hides(path);
}

bool WriteGuard::refusesMove(std::string_view path) const {
  return refuses(path) || (git_ && insideRepository(path, ignoreCase_));
}

bool WriteGuard::gitControl(std::string_view path, bool ignoreCase) {
  return scan(path, ignoreCase, nullptr);
}

bool WriteGuard::insideRepository(std::string_view path, bool ignoreCase) {
  bool inside = false;
  return scan(path, ignoreCase, &inside) || inside;
}

bool WriteGuard::scan(std::string_view path, bool ignoreCase, bool* insideAtEnd) {
  // Walk the components. Inside a `.git`, `inRepo` is set until one of the repository's own
  // data directories (refs, logs, objects) is entered right beneath that `.git`, where names are
  // git's data (a branch may be called "config") and nothing is refused. Deeper down, in the
  // repositories git keeps for submodules and worktrees (`modules/<name>`, `worktrees/<name>`,
  // whose names may themselves be "refs" or "logs"), no name is data: their control files are
  // refused wherever they sit (a submodule branch called "config" is the price).
  bool inRepo = false;
  bool underGit = false;  // the previous component was the `.git`
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view c = path.substr(start, end - start);
    const bool last = end == path.size();
    if (nameIs(c, ".git", ignoreCase)) {
      // The entry itself (made, removed, renamed, replaced), or a path beneath it.
      if (last) return true;
      inRepo = true;
      underGit = true;
    } else if (inRepo) {
      if (underGit && (nameIs(c, "refs", ignoreCase) || nameIs(c, "logs", ignoreCase) ||
                       nameIs(c, "objects", ignoreCase))) {
        inRepo = false;
      } else if (nameIs(c, "hooks", ignoreCase) || nameIs(c, "config", ignoreCase) ||
                 nameIs(c, "config.worktree", ignoreCase) || nameIs(c, "commondir", ignoreCase)) {
        return true;
      }
      underGit = false;
    }
    if (last) break;
    start = end + 1;
  }
  if (insideAtEnd) *insideAtEnd = inRepo;
  return false;
}

}  // namespace shadowfs
