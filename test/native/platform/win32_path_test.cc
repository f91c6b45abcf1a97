// Unit tests of the Win32 path module (native/platform/win32_path.h), run under wine: UTF-8
// and UTF-16 names, the \\?\ long form, and relative paths joined onto a root.
#include <cerrno>
#include <string>

#include "../../../native/platform/win32_path.h"
#include "../unit/unit.h"

using namespace shadowfs;

TEST(win32_utf8_conversion_round_trips_every_windows_name) {
  std::wstring w;
  const std::wstring lone = {L'a', static_cast<wchar_t>(0xD800), L'b'};  // an unpaired surrogate
  std::string u = win32::toUtf8(lone);
  CHECK_EQ(u, "a\xED\xA0\x80""b");
  CHECK(win32::toWide(u, &w) && w == lone);
  const std::wstring pair = {static_cast<wchar_t>(0xD83D), static_cast<wchar_t>(0xDE00)};
  CHECK_EQ(win32::toUtf8(pair), "\xF0\x9F\x98\x80");
  CHECK(win32::toWide("\xF0\x9F\x98\x80", &w) && w == pair);
  CHECK(!win32::toWide("\xED\xA0\xBD\xED\xB8\x80", &w));  // the same pair spelt CESU-8
  CHECK(!win32::toWide("\xC0\xAF", &w));                  // overlong '/'
  CHECK(!win32::toWide("ab\xE2\x82", &w));                // truncated
  CHECK(!win32::toWide(std::string("a\0b", 3), &w));
}

TEST(win32_joinRel_builds_backslash_paths_and_refuses_what_no_windows_name_can_be) {
  std::wstring out;
  CHECK_OK(win32::joinRel(L"\\\\?\\C:\\work", "src/a.txt", &out));
  CHECK(out == L"\\\\?\\C:\\work\\src\\a.txt");
  CHECK_OK(win32::joinRel(L"\\\\?\\C:\\", "a", &out));  // a drive's root keeps one separator
  CHECK(out == L"\\\\?\\C:\\a");
  CHECK_OK(win32::joinRel(L"\\\\?\\C:\\work", "", &out));  // the root itself
  CHECK(out == L"\\\\?\\C:\\work");
  CHECK_OK(win32::joinRel(L"R", "caf\xC3\xA9", &out));
  CHECK(out == L"R\\caf\u00e9");
  CHECK_ERR(win32::joinRel(L"R", "a:stream", &out), ENOENT);  // an alternate data stream
  CHECK_ERR(win32::joinRel(L"R", "a\\b", &out), ENOENT);
  CHECK_ERR(win32::joinRel(L"R", "wild*", &out), ENOENT);
  CHECK_ERR(win32::joinRel(L"R", "ctl\x01", &out), ENOENT);
  CHECK_ERR(win32::joinRel(L"R", "bad\xC0\xAF", &out), ENOENT);  // not (W)UTF-8
  CHECK_ERR(win32::joinRel(L"R", "a//b", &out), EINVAL);
  CHECK_ERR(win32::joinRel(L"R", "a/../b", &out), EINVAL);
  CHECK_ERR(win32::joinRel(L"R", "./b", &out), EINVAL);
}

TEST(win32_longPath_gives_the_long_form_without_trailing_separators) {
  CHECK(win32::longPath(L"C:\\work\\") == L"\\\\?\\C:\\work");
  CHECK(win32::longPath(L"C:\\") == L"\\\\?\\C:\\");
  CHECK(win32::longPath(L"C:/work/a/../b") == L"\\\\?\\C:\\work\\b");
  CHECK(win32::longPath(L"\\\\server\\share\\dir") == L"\\\\?\\UNC\\server\\share\\dir");
  CHECK(win32::longPath(L"\\??\\C:\\x\\") == L"\\\\?\\C:\\x");  // the NT form, as Win32 reads it
  CHECK(win32::longPath(L"\\\\?\\C:\\x") == L"\\\\?\\C:\\x");
  CHECK(win32::longPath(L"").empty());
}

TEST(win32_plainPath_and_mountPointOf_spell_paths_as_users_and_winfsp_do) {
  CHECK(win32::plainPath(L"\\\\?\\C:\\x") == L"C:\\x");
  CHECK(win32::plainPath(L"\\??\\C:\\x") == L"C:\\x");
  CHECK(win32::plainPath(L"\\\\?\\UNC\\s\\x") == L"\\\\s\\x");
  CHECK(win32::plainPath(L"C:\\x") == L"C:\\x");
  std::wstring m;
  CHECK(win32::mountPointOf("X:\\", &m) && m == L"X:");
  CHECK(win32::mountPointOf("X:/", &m) && m == L"X:");
  CHECK(win32::mountPointOf("C:/shadows/a//", &m) && m == L"C:\\shadows\\a");
  CHECK(win32::mountPointOf("C:\\shadows\\caf\xC3\xA9", &m) && m == L"C:\\shadows\\caf\u00e9");
  CHECK(!win32::mountPointOf("bad\xC0\xAF", &m));
}
