// Windows paths (win32_path.h): UTF-8 and UTF-16 names, the \\?\ long form, and the folder's
// relative paths joined onto its root.
#if defined(_WIN32)
#include "win32_path.h"

#include <windows.h>

#include <cerrno>
#include <cstring>
#include <cwchar>

namespace shadowfs {
namespace win32 {

bool toWide(const std::string& utf8, std::wstring* out) {
  out->clear();
  out->reserve(utf8.size());
  const auto* s = reinterpret_cast<const unsigned char*>(utf8.data());
  const size_t n = utf8.size();
  bool lastWasLoneLead = false;  // a lead surrogate that came as its own 3-byte sequence
  for (size_t i = 0; i < n;) {
    unsigned char b = s[i];
    uint32_t cp;
    size_t len;
    if (b == 0) return false;
    if (b < 0x80) {
      cp = b;
      len = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      cp = b & 0x1F;
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      cp = b & 0x0F;
      len = 3;
    } else if (b >= 0xF0 && b <= 0xF4) {
      cp = b & 0x07;
      len = 4;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms and code points past U+10FFFF.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      // WTF-8: a lone surrogate. A lead followed by a trail is a pair spelt the CESU-8 way,
      // which would alias the 4-byte spelling of the same name: refused.
      if (cp >= 0xDC00 && lastWasLoneLead) return false;
      out->push_back(static_cast<wchar_t>(cp));
      lastWasLoneLead = cp < 0xDC00;
    } else if (cp >= 0x10000) {
      cp -= 0x10000;
      out->push_back(static_cast<wchar_t>(0xD800 + (cp >> 10)));
      out->push_back(static_cast<wchar_t>(0xDC00 + (cp & 0x3FF)));
      lastWasLoneLead = false;
    } else {
      out->push_back(static_cast<wchar_t>(cp));
      lastWasLoneLead = false;
    }
    i += len;
  }
  return true;
}

std::string toUtf8(const wchar_t* s, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp = static_cast<uint16_t>(s[i]);
    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < n && s[i + 1] >= 0xDC00 && s[i + 1] <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint16_t>(s[i + 1]) - 0xDC00);
      ++i;
    }
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {  // lone surrogates too (WTF-8)
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

namespace {

bool startsWith(const std::wstring& s, const wchar_t* prefix) {
  size_t n = std::wcslen(prefix);
  return s.size() >= n && s.compare(0, n, prefix) == 0;
}

// "\\?\C:\" (a drive's root) keeps its separator; anything else loses a trailing one.
void trimTrailingSeparator(std::wstring* p) {
  auto driveRoot = [p] {
    size_t n = p->size();
    return n >= 3 && (*p)[n - 2] == L':' && (n == 3 || (n == 7 && startsWith(*p, L"\\\\?\\")));
  };
  while (p->size() > 1 && p->back() == L'\\' && !driveRoot()) p->pop_back();
}

}  // namespace

std::wstring longPath(const std::wstring& path) {
  if (path.empty()) {
    SetLastError(ERROR_INVALID_NAME);
    return {};
  }
  std::wstring out;
  if (startsWith(path, L"\\\\?\\") || startsWith(path, L"\\??\\")) {
    out = path;
    out[1] = L'\\';  // "\??\" (NT form) reads as "\\?\" to Win32
  } else {
    DWORD need = GetFullPathNameW(path.c_str(), 0, nullptr, nullptr);
    if (need == 0) return {};
    std::wstring full(need, L'\0');
    DWORD got = GetFullPathNameW(path.c_str(), need, full.data(), nullptr);
    if (got == 0 || got >= need) return {};
    full.resize(got);
    if (startsWith(full, L"\\\\.\\")) {
      out = full;  // a device path: already past Win32 path rules
    } else if (startsWith(full, L"\\\\")) {
      out = L"\\\\?\\UNC\\" + full.substr(2);
    } else {
      out = L"\\\\?\\" + full;
    }
  }
  trimTrailingSeparator(&out);
  return out;
}

int joinRel(const std::wstring& root, const std::string& rel, std::wstring* out) {
  std::wstring w;
  if (!win32::toWide(rel, &w)) return ENOENT;
  out->reserve(root.size() + 1 + w.size());
  *out = root;
  if (w.empty()) return 0;
  if (out->back() != L'\\') out->push_back(L'\\');
  size_t start = 0;
  for (size_t i = 0; i <= w.size(); ++i) {
    wchar_t c = i < w.size() ? w[i] : L'/';
    if (c == L'/') {
      size_t len = i - start;
      if (len == 0) return EINVAL;
      if (w[start] == L'.' && (len == 1 || (len == 2 && w[start + 1] == L'.'))) return EINVAL;
      if (i < w.size()) out->push_back(L'\\');
      start = i + 1;
      continue;
    }
    if (c < 0x20 || c == L'\\' || c == L':' || c == L'*' || c == L'?' || c == L'"' ||
        c == L'<' || c == L'>' || c == L'|')
      return ENOENT;
    out->push_back(c);
  }
  return 0;
}

std::wstring plainPath(const std::wstring& p) {
  if (p.rfind(L"\\\\?\\UNC\\", 0) == 0) return L"\\\\" + p.substr(8);
  if (p.rfind(L"\\\\?\\", 0) == 0 || p.rfind(L"\\??\\", 0) == 0) return p.substr(4);
  return p;
}

bool mountPointOf(const std::string& utf8, std::wstring* out) {
  if (!toWide(utf8, out)) return false;
  for (wchar_t& c : *out)
    if (c == L'/') c = L'\\';
  while (out->size() > 3 && out->back() == L'\\') out->pop_back();
  if (out->size() == 3 && (*out)[1] == L':' && (*out)[2] == L'\\') out->pop_back();
  return true;
}

}  // namespace win32
}  // namespace shadowfs
#endif  // _WIN32
