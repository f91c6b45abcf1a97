// The agent file tools' decisions (file_tools.h).
#include "file_tools.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "../core/hash.h"

namespace shadowfs {

std::string hashHex(const std::string& data) {
  ContentHash h;
  h.update(data.data(), data.size());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.digest()));
  return hex;
}

double mtimeMsOf(const Attr& a) {
  return static_cast<double>(a.mtime.sec) * 1e3 + static_cast<double>(a.mtime.nsec) / 1e6;
}

namespace {
std::string num(double d) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", d);
  return b;
}
}  // namespace

bool meets(const Expect& want, const FileNow& now, std::string* why) {
  if (want.exists && *want.exists != now.exists) {
    *why = now.exists ? "the file exists now (it was expected absent)" : "the file is gone";
    return false;
  }
  if (!now.exists) {
    if (want.size || want.mtimeMs || want.hash) {
      *why = "the file is gone";
      return false;
    }
    return true;
  }
  if (want.size && *want.size != static_cast<double>(now.attr.size)) {
    *why = "its size is " + std::to_string(now.attr.size) + " bytes, not " + num(*want.size);
    return false;
  }
  if (want.mtimeMs && *want.mtimeMs != mtimeMsOf(now.attr)) {
    *why = "its mtimeMs is " + num(mtimeMsOf(now.attr)) + ", not " + num(*want.mtimeMs);
    return false;
  }
  if (want.hash && now.content) {
    std::string h = hashHex(*now.content);
    if (h != *want.hash) {
      *why = "its content hash is " + h + ", not " + *want.hash;
      return false;
    }
  }
  return true;
}

EditResult applyEdits(const std::string& text, const std::vector<TextEdit>& edits, std::string* out) {
  EditResult r;
  // Like git: a NUL byte in the first 8000 bytes makes a file binary.
  if (std::memchr(text.data(), 0, std::min<size_t>(text.size(), 8000)) != nullptr) {
    r.status = EditResult::Binary;
    return r;
  }
  if (!validUtf8(text)) {
    r.status = EditResult::NotUtf8;
    return r;
  }
  std::string cur = text;
  for (size_t k = 0; k < edits.size(); ++k) {
    const TextEdit& e = edits[k];
    std::vector<size_t> found;
    for (size_t i = cur.find(e.oldText); i != std::string::npos; i = cur.find(e.oldText, i + e.oldText.size()))
      found.push_back(i);
    if (found.empty()) {
      r.status = EditResult::NoMatch;
      r.edit = k;
      return r;
    }
    if (found.size() > 1 && !e.replaceAll) {
      r.status = EditResult::Ambiguous;
      r.edit = k;
      r.count = found.size();
      uint32_t line = 1;
      size_t from = 0;
      for (size_t j = 0; j < found.size() && j < 21; ++j) {
        for (size_t nl = cur.find('\n', from); nl != std::string::npos && nl < found[j]; nl = cur.find('\n', nl + 1)) {
          ++line;
          from = nl + 1;
        }
        r.lines.push_back(line);
      }
      return r;
    }
    std::string next;
    next.reserve(cur.size() + found.size() * e.newText.size());
    size_t from = 0;
    for (size_t i : found) {
      next.append(cur, from, i - from);
      next += e.newText;
      from = i + e.oldText.size();
    }
    next.append(cur, from, std::string::npos);
    cur.swap(next);
    r.replacements.push_back(static_cast<uint32_t>(found.size()));
  }
  *out = std::move(cur);
  return r;
}

}  // namespace shadowfs
