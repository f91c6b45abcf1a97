// Unit tests of the agent file tools' decisions (native/addon/file_tools.h): the text edits as
// src/work/files.ts describes them, UTF-8 as a fatal TextDecoder judges it, and preconditions.
#include <string>
#include <vector>

#include "../../../native/addon/file_tools.h"
#include "../unit/unit.h"

using namespace shadowfs;

TEST(edits_replace_one_match_or_all_and_say_why_not) {
  std::string out;
  EditResult r = applyEdits("a\nx = 1\nb\n", {{"x = 1", "x = $&2", false}}, &out);
  CHECK(r.status == EditResult::Ok);
  CHECK_EQ(out, std::string("a\nx = $&2\nb\n"));  // no replacement patterns
  CHECK_EQ(r.replacements.size(), size_t(1));
  r = applyEdits("x\ny\nx\nx\n", {{"x", "z", false}}, &out);
  CHECK(r.status == EditResult::Ambiguous);
  CHECK_EQ(r.count, size_t(3));
  CHECK(r.lines == std::vector<uint32_t>({1, 3, 4}));
  r = applyEdits("x\ny\nx\nx\n", {{"x", "z", true}}, &out);
  CHECK(r.status == EditResult::Ok);
  CHECK_EQ(out, std::string("z\ny\nz\nz\n"));
  CHECK_EQ(r.replacements[0], 3u);
  r = applyEdits("aaaa", {{"aa", "b", true}}, &out);  // left to right, no overlaps
  CHECK_EQ(out, std::string("bb"));
  r = applyEdits("abc", {{"a", "x", false}, {"nope", "y", false}}, &out);
  CHECK(r.status == EditResult::NoMatch);
  CHECK_EQ(r.edit, size_t(1));
  r = applyEdits("abc", {{"a", "b", false}, {"bb", "c", false}}, &out);  // in order, on the result
  CHECK(r.status == EditResult::Ok);
  CHECK_EQ(out, std::string("cc"));
}

TEST(edits_refuse_binary_and_invalid_utf8) {
  std::string out;
  CHECK(applyEdits(std::string("ab\0c", 4), {{"a", "b", false}}, &out).status == EditResult::Binary);
  CHECK(applyEdits("caf\xC3", {{"a", "b", false}}, &out).status == EditResult::NotUtf8);
  CHECK(validUtf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  CHECK(!validUtf8("\xC0\xAF"));          // overlong
  CHECK(!validUtf8("\xED\xA0\x80"));      // a surrogate
  CHECK(!validUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  CHECK(!validUtf8("\xE2\x82"));          // cut short
}

TEST(preconditions_compare_what_the_caller_saw) {
  FileNow now;
  now.exists = true;
  now.attr.size = 5;
  now.attr.mtime = Timespec{1700000000, 123456789};
  std::string content = "hello";
  now.content = &content;
  std::string why;
  Expect e;
  CHECK(meets(e, now, &why));
  e.size = 5;
  e.mtimeMs = mtimeMsOf(now.attr);
  e.hash = hashHex("hello");
  CHECK(meets(e, now, &why));
  e.hash = hashHex("hellO");
  CHECK(!meets(e, now, &why));
  CHECK(why.find("content hash") != std::string::npos);
  Expect absent;
  absent.exists = false;
  CHECK(!meets(absent, now, &why));
  FileNow none;
  CHECK(meets(absent, none, &why));
  Expect sized;
  sized.size = 5;
  CHECK(!meets(sized, none, &why));
  CHECK_EQ(why, std::string("the file is gone"));
}
