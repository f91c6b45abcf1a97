// What the agent file tools decide inside one Overlay::updateFile (see writeFile and editFile
// in shadow_file_tools.cc): whether a file is still what the caller saw (size, mtime, content
// hash), and the text edits (exact strings replaced, as src/work/files.ts describes them). Plain
// C++, no N-API and no locks: it runs inside the update's change, on the file's content as shown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../core/overlay.h"

namespace shadowfs {

// What the caller saw of a file; fields left empty are not checked.
struct Expect {
  std::optional<bool> exists;
  std::optional<double> size;
  std::optional<double> mtimeMs;   // as stat() reports it: sec * 1e3 + nsec / 1e6
  std::optional<std::string> hash; // contentHash(): 16 hex digits
  bool needsContent() const { return hash.has_value(); }
  bool any() const { return exists || size || mtimeMs || hash; }
};

// The content hash as 16 hex digits (the one layers record as a file's base).
std::string hashHex(const std::string& data);
double mtimeMsOf(const Attr& a);

// Whether the file as `now` shows it is what `want` says; otherwise *why says what differs.
bool meets(const Expect& want, const FileNow& now, std::string* why);

struct TextEdit {
  std::string oldText;  // non-empty
  std::string newText;
  bool replaceAll = false;
};

struct EditResult {
  enum Status { Ok, NoMatch, Ambiguous, Binary, NotUtf8 } status = Ok;
  size_t edit = 0;                    // NoMatch, Ambiguous: which edit (0-based)
  size_t count = 0;                   // Ambiguous: how often its text occurs
  std::vector<uint32_t> lines;        // Ambiguous: 1-based lines of the first 21 occurrences
  std::vector<uint32_t> replacements; // Ok: per edit
};

// Applies `edits` one after the other to `text` (UTF-8 without NUL in its first 8000 bytes):
// each edit's text must occur once, or replaceAll. Occurrences do not overlap (searched left
// to right). *out gets the new text when Ok.
EditResult applyEdits(const std::string& text, const std::vector<TextEdit>& edits, std::string* out);


}  // namespace shadowfs
