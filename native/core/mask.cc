// PathMask (mask.h): the glob matcher behind masked paths.
#include "mask.h"

#include "casefold.h"

namespace shadowfs {

namespace {

std::vector<std::string> splitGlob(std::string_view g) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= g.size()) {
    size_t end = g.find('/', start);
    if (end == std::string_view::npos) end = g.size();
    if (end > start) out.emplace_back(g.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A character class at glob[i] == '[': whether `c` is in it; *next gets the index after its
// ']'. False with *next == npos when the class is not closed (then '[' is a plain character).
bool inClass(std::string_view glob, size_t i, char c, bool ignoreCase, size_t* next) {
  size_t j = i + 1;
  bool negate = false;
  if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) {
    negate = true;
    ++j;
  }
  const char fc = ignoreCase ? foldChar(c) : c;
  bool hit = false;
  bool first = true;
  for (; j < glob.size(); ++j) {
    char a = glob[j];
    if (a == ']' && !first) {
      *next = j + 1;
      return hit != negate;
    }
    first = false;
    if (a == '\\' && j + 1 < glob.size()) a = glob[++j];
    char b = a;
    if (j + 2 < glob.size() && glob[j + 1] == '-' && glob[j + 2] != ']') {
      b = glob[j + 2];
      if (b == '\\' && j + 3 < glob.size()) {
        b = glob[j + 3];
        ++j;
      }
      j += 2;
    }
    if (ignoreCase) {
      // A range of letters matches both cases: compare the folded character with the folded
      // ends, and the original with the original ends.
      if ((fc >= foldChar(a) && fc <= foldChar(b)) || (c >= a && c <= b)) hit = true;
    } else if (c >= a && c <= b) {
      hit = true;
    }
  }
  *next = std::string_view::npos;
  return false;
}

}  // namespace

bool PathMask::matchName(std::string_view glob, std::string_view name, bool ignoreCase) {
  size_t g = 0, n = 0;
  // The last '*' seen and where in `name` it started matching, to widen it on a mismatch.
  size_t starG = std::string_view::npos, starN = 0;
  while (n < name.size()) {
    if (g < glob.size()) {
      const char gc = glob[g];
      if (gc == '*') {
        starG = g++;
        starN = n;
        continue;
      }
      if (gc == '?') {
        ++g;
        ++n;
        continue;
      }
      if (gc == '[') {
        size_t next;
        const bool hit = inClass(glob, g, name[n], ignoreCase, &next);
        if (next != std::string_view::npos) {
          if (hit) {
            g = next;
            ++n;
            continue;
          }
        } else if (name[n] == '[') {  // an unclosed '[' is itself
          ++g;
          ++n;
          continue;
        }
      } else {
        char lit = gc;
        size_t step = 1;
        if (gc == '\\' && g + 1 < glob.size()) {
          lit = glob[g + 1];
          step = 2;
        }
        if (ignoreCase ? foldChar(lit) == foldChar(name[n]) : lit == name[n]) {
          g += step;
          ++n;
          continue;
        }
      }
    }
    if (starG == std::string_view::npos) return false;
    g = starG + 1;
    n = ++starN;
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

PathMask::PathMask(const std::vector<std::string>& globs, bool ignoreCase)
    : ignoreCase_(ignoreCase) {
  for (const std::string& g : globs) {
    if (g.empty()) continue;
    globs_.push_back(g);
    const bool anchored = g[0] == '/';
    Parts parts = splitGlob(g);
    if (parts.empty()) continue;  // "/" alone would mask the root: nothing
    if (!anchored && parts.size() == 1 && parts[0] != "**") {
      names_.push_back(parts[0]);
    } else {
      paths_.push_back(std::move(parts));
    }
  }
}

// Whether the components [ci, end) of the path match the glob's parts from pi on.
bool PathMask::matchParts(const Parts& p, size_t pi, const std::vector<std::string_view>& comps,
                          size_t ci, size_t end) const {
  for (; pi < p.size(); ++pi, ++ci) {
    if (p[pi] == "**") {
      if (pi + 1 == p.size()) return ci < end;  // `a/**`: something inside, not `a` itself
      for (size_t k = ci; k <= end; ++k)
        if (matchParts(p, pi + 1, comps, k, end)) return true;
      return false;
    }
    if (ci >= end || !matchName(p[pi], comps[ci], ignoreCase_)) return false;
  }
  return ci == end;
}

bool PathMask::hides(std::string_view path) const {
  if (path.empty() || empty()) return false;
  std::vector<std::string_view> comps;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) comps.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  for (size_t k = 0; k < comps.size(); ++k) {
    for (const std::string& g : names_)
      if (matchName(g, comps[k], ignoreCase_)) return true;
    for (const Parts& p : paths_)
      if (matchParts(p, 0, comps, 0, k + 1)) return true;
  }
  return false;
}

}  // namespace shadowfs
