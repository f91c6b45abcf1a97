// Helpers for the normalised relative paths the core works with ("a/b/c", "" = root).
// The backends build such paths from the kernel's names; the API validates in TypeScript and
// again here (normalize) so a bad path never reaches the overlay.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shadowfs {

inline std::string joinPath(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string out;
  out.reserve(dir.size() + 1 + name.size());
  out.append(dir).push_back('/');
  out.append(name);
  return out;
}

// Splits "a/b/c" into its parent "a/b" and name "c".
inline void splitLast(const std::string& path, std::string* parent, std::string* name) {
  auto pos = path.rfind('/');
  if (pos == std::string::npos) {
    parent->clear();
    *name = path;
  } else {
    *parent = path.substr(0, pos);
    *name = path.substr(pos + 1);
  }
}

inline std::vector<std::string_view> components(const std::string& path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.emplace_back(path.data() + start, end - start);
    start = end + 1;
  }
  return out;
}

// Normalises an API path: strips "." and empty components. Returns false for absolute paths,
// "..", NUL bytes and over-long names, which the API must refuse rather than interpret.
inline bool normalizeApiPath(const std::string& in, std::string* out) {
  if (in.find('\0') != std::string::npos) return false;
  if (!in.empty() && (in[0] == '/' || in[0] == '\\')) return false;
  out->clear();
  for (auto c : components(in)) {
    if (c == ".") continue;
    if (c == "..") return false;
    if (c.size() > 255) return false;
    if (!out->empty()) out->push_back('/');
    out->append(c);
  }
  return true;
}

inline bool isInside(const std::string& path, const std::string& dir) {
  if (dir.empty()) return !path.empty();
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

// Whether `s` is valid UTF-8 (as a fatal TextDecoder sees it: no overlong forms, no surrogates,
// nothing past U+10FFFF): what decodes to a Unicode string and encodes back to the same bytes.
// Names a layer records must be (Overlay::writeRefused); so must text the file tools edit.
inline bool validUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return false;
    }
    if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    i += len;
  }
  return true;
}

}  // namespace shadowfs
