// What "the same name" means when the overlay matches names ignoring case (Overlay's
// NameMatch::IgnoreCase, the Windows behaviour: `Foo.txt` and `foo.txt` are one entry).
//
// Folded here: the 26 ASCII letters only (A-Z matches a-z). Every other byte compares exactly,
// UTF-8 sequences included, so "É.txt" and "é.txt" stay two names for the layer's entries and
// for the listing merge. Windows folds far more (the volume's upcase table: Latin-1, Greek,
// Cyrillic, ...); that is a known limit. Where the folder itself is case-insensitive (the Win32
// LowerFs), names the folder holds are matched by the folder's own rules (NTFS's table), so
// only names that live in the layer alone are limited to ASCII.
#pragma once

#include <string>
#include <string_view>

namespace shadowfs {

inline char foldChar(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline bool sameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (foldChar(a[i]) != foldChar(b[i])) return false;
  return true;
}

inline std::string foldName(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = foldChar(c);
  return out;
}

// `path` is `dir` or inside it, ignoring case (both normalised; "" is the root).
inline bool sameOrInsideFolded(std::string_view path, std::string_view dir) {
  if (dir.empty()) return true;
  if (path.size() < dir.size() || !sameName(path.substr(0, dir.size()), dir)) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

}  // namespace shadowfs
