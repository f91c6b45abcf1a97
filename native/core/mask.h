// Masked paths (issue #32): a layer's list of globs under which the folder's objects do not
// exist for the agent that layer belongs to (secrets such as `.env` or private keys). The
// overlay consults a layer's PathMask at lookup, listing and creation time (tree.cc), so every
// way in — the shared mount while that layer is shown, its views, runs through them, and the
// API's reads of the layer — sees masked names as absent. OS-free, no locks: a PathMask is
// immutable once built and shared by pointer.
//
// Globs, as in .gitignore (the subset agents and developers expect):
// - a glob without "/" matches one name at any depth: `.env` hides `.env` and `web/.env`;
// - a glob with "/" (a leading "/" only anchors it) matches a path from the folder's root:
//   `config/secrets.json`, `/.aws`, `.aws/**`;
// - `*` any run of characters within a name, `?` one character, `[abc]`, `[a-z]`, `[!x]` (or
//   `[^x]`) one character of (or not of) a class, `\x` the character x itself;
// - `**` as a whole component: any number of components (none included), so `a/**/b` matches
//   `a/b` and `a/x/y/b`, and `a/**` everything inside `a` (but not `a` itself);
// - a path is masked when it or any of its ancestors matches: hiding a directory hides all it
//   holds. A trailing "/" is ignored (directories and files alike).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shadowfs {

class PathMask {
 public:
  // `globs` as described above; empty ones are ignored. With `ignoreCase`, ASCII letters match
  // either case (the overlay's NameMatch::IgnoreCase).
  PathMask(const std::vector<std::string>& globs, bool ignoreCase);

  // Whether the normalised relative path ("a/b", "" = the root, never masked) is masked.
  bool hides(std::string_view path) const;
  bool empty() const { return names_.empty() && paths_.empty(); }
  const std::vector<std::string>& globs() const { return globs_; }

  // One name against one component glob (`*`, `?`, classes, escapes; no "/").
  static bool matchName(std::string_view glob, std::string_view name, bool ignoreCase);

 private:
  // An anchored glob, split into its components ("**" kept as a component of its own).
  using Parts = std::vector<std::string>;
  bool matchParts(const Parts& p, size_t pi, const std::vector<std::string_view>& comps,
                  size_t ci, size_t end) const;

  std::vector<std::string> globs_;  // as given (for reading back)
  std::vector<std::string> names_;  // globs without "/": matched against each component
  std::vector<Parts> paths_;        // anchored globs
  bool ignoreCase_;
};

}  // namespace shadowfs
