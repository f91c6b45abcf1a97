// WriteGuard (write_guard.h): which paths a layer may not write.
#include "write_guard.h"

#include <algorithm>

#include "casefold.h"
#include "path.h"

namespace shadowfs {

namespace {

bool nameIs(std::string_view a, std::string_view b, bool ignoreCase) {
  return ignoreCase ? sameName(a, b) : a == b;
}

// An anchored glob's components with its escapes undone (the paths given are literal names).
std::vector<std::string> literalComponents(const std::string& glob) {
  std::string plain;
  for (size_t i = 0; i < glob.size(); ++i) {
    if (glob[i] == '\\' && i + 1 < glob.size()) ++i;
    plain += glob[i];
  }
  std::vector<std::string> out;
  for (std::string_view c : components(plain)) out.emplace_back(c);
  return out;
}

}  // namespace

WriteGuard::WriteGuard(bool git, const std::vector<std::string>& paths, bool ignoreCase,
                       const std::vector<std::string>& gitDirs)
    : git_(git), paths_(paths, ignoreCase), ignoreCase_(ignoreCase) {
  for (const std::string& g : paths) {
    auto c = literalComponents(g);
    if (!c.empty()) anchors_.push_back(std::move(c));
  }
  for (const std::string& d : gitDirs) {
    std::vector<std::string> c;
    for (std::string_view x : components(d)) c.emplace_back(x);
    if (!c.empty()) gitDirs_.push_back(std::move(c));
  }
}

bool WriteGuard::refusesSpecial(std::string_view path) const {
  if (!git_) return false;
  if (beneathGit(path, ignoreCase_)) return true;
  if (gitDirs_.empty()) return false;
  const std::string whole(path);
  const auto p = components(whole);
  for (const auto& d : gitDirs_) {
    if (p.size() <= d.size()) continue;
    bool prefix = true;
    for (size_t i = 0; i < d.size() && prefix; ++i) prefix = nameIs(p[i], d[i], ignoreCase_);
    if (prefix) return true;
  }
  return false;
}

bool WriteGuard::holdsGuarded(std::string_view path) const {
  const std::string whole(path);
  const auto p = components(whole);
  for (const auto& a : anchors_) {
    if (p.size() >= a.size()) continue;
    bool prefix = true;
    for (size_t i = 0; i < p.size() && prefix; ++i) prefix = nameIs(p[i], a[i], ignoreCase_);
    if (prefix) return true;
  }
  return false;
}

bool WriteGuard::refuses(std::string_view path) const {
  if (path.empty()) return false;
  if (git_ && gitControl(path, ignoreCase_)) return true;
  return !paths_.empty() && paths_.hides(path);
}

bool WriteGuard::refusesMove(std::string_view path) const {
  return refuses(path) ||
         (git_ && (insideRepository(path, ignoreCase_) || objectsPlace(path, ignoreCase_))) ||
         holdsGuarded(path);
}

bool WriteGuard::objectsPlace(std::string_view path, bool ignoreCase) {
  const std::string whole(path);
  const auto c = components(whole);
  const size_t n = c.size();
  if (n >= 2 && nameIs(c[n - 1], "objects", ignoreCase) && nameIs(c[n - 2], ".git", ignoreCase))
    return true;
  return n >= 3 && nameIs(c[n - 1], "info", ignoreCase) && nameIs(c[n - 2], "objects", ignoreCase) &&
         nameIs(c[n - 3], ".git", ignoreCase);
}

bool WriteGuard::gitControl(std::string_view path, bool ignoreCase) {
  return scan(path, ignoreCase, nullptr);
}

bool WriteGuard::insideRepository(std::string_view path, bool ignoreCase) {
  bool inside = false;
  return scan(path, ignoreCase, &inside) || inside;
}

bool WriteGuard::beneathGit(std::string_view path, bool ignoreCase) {
  size_t start = 0;
  for (size_t end; (end = path.find('/', start)) != std::string_view::npos; start = end + 1)
    if (nameIs(path.substr(start, end - start), ".git", ignoreCase)) return true;
  return false;
}

bool WriteGuard::mayWriteRepository(std::string_view path, bool ignoreCase) {
  size_t start = 0;
  while (true) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view c = path.substr(start, end - start);
    if (nameIs(c, "hooks", ignoreCase)) return true;
    if (end == path.size())
      return nameIs(c, "config", ignoreCase) || nameIs(c, "config.worktree", ignoreCase) ||
             nameIs(c, "alternates", ignoreCase) || nameIs(c, "http-alternates", ignoreCase);
    start = end + 1;
  }
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
  bool beneath = false;   // a `.git` came before
  std::string_view before[2];  // the two components before this one
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view c = path.substr(start, end - start);
    const bool last = end == path.size();
    if (last && beneath && nameIs(before[0], "objects", ignoreCase) &&
        nameIs(before[1], "info", ignoreCase) &&
        (nameIs(c, "alternates", ignoreCase) || nameIs(c, "http-alternates", ignoreCase))) {
      // Names other object directories git reads, and freshens (utime) objects in: the
      // folder's own, whose times would change (objects is data, this file is not).
      return true;
    }
    before[0] = before[1];
    before[1] = c;
    if (last && nameIs(c, "commondir", ignoreCase)) {
      // Anywhere: beside a HEAD it makes that directory a repository whose objects, refs and
      // config are where it says (a bare repository split across two directories).
      return true;
    }
    if (nameIs(c, ".git", ignoreCase)) {
      // The entry itself (made, removed, renamed, replaced), or a path beneath it.
      if (last) return true;
      inRepo = true;
      underGit = true;
      beneath = true;
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
