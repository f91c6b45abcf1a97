// Unit tests of the WinFsp backend's driver-free parts (native/winfsp/winfsp_support.cc) and of
// the bit layout of our WinFsp declarations (native/winfsp/winfsp_api.h; sizes and offsets are
// static_asserts there, bit-field positions are checked here against the research note's
// measurements of WinFsp's own header). Windows only: run under wine. No WinFsp DLL or driver
// is involved; the WinFsp test double (test/native/winfsp_double) drives the backend itself.
#include <windows.h>
#include <sddl.h>

#include <cstring>
#include <string>
#include <vector>

#include "../../../native/platform/win32_lower.h"
#include "../../../native/winfsp/winfsp_api.h"
#include "../../../native/winfsp/winfsp_support.h"
#include "../unit/unit.h"

using namespace shadowfs;
using namespace shadowfs::winfsp;

namespace {

UINT32 wordAt(const void* p, size_t off) {
  UINT32 w;
  std::memcpy(&w, static_cast<const uint8_t*>(p) + off, sizeof w);
  return w;
}

std::string utf8(const std::wstring& w) { return win32::toUtf8(w); }

DirRecord rec(const wchar_t* name, uint64_t ino) {
  DirRecord r;
  r.name = name;
  r.info.IndexNumber = ino;
  return r;
}

// The names in a buffer filled by fillDirectory, and whether it ended with the end mark.
std::vector<std::wstring> namesIn(const void* buf, ULONG used, bool* ended) {
  std::vector<std::wstring> out;
  *ended = false;
  ULONG at = 0;
  const auto* p = static_cast<const uint8_t*>(buf);
  while (at + sizeof(UINT16) <= used) {
    UINT16 size;
    std::memcpy(&size, p + at, sizeof size);
    if (size < sizeof(FSP_FSCTL_DIR_INFO)) {
      *ended = size == 0 && at + 2 == used;
      break;
    }
    out.emplace_back(reinterpret_cast<const wchar_t*>(p + at + sizeof(FSP_FSCTL_DIR_INFO)),
                     (size - sizeof(FSP_FSCTL_DIR_INFO)) / sizeof(wchar_t));
    at += (size + 7) & ~7u;
  }
  return out;
}

}  // namespace

TEST(winfsp_volume_params_bits_land_where_winfsp_reads_them) {
  // Bit positions in the flags word at offset 36 (research note §2.1, measured).
  struct Bit {
    void (*set)(FSP_FSCTL_VOLUME_PARAMS*);
    int bit;
  };
  const Bit bits[] = {
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->CaseSensitiveSearch = 1; }, 0},
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->ReparsePoints = 1; }, 4},
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->PostCleanupWhenModifiedOnly = 1; }, 10},
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->PassQueryDirectoryFileName = 1; }, 13},
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->UmFileContextIsUserContext2 = 1; }, 16},
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->AllowOpenInKernelMode = 1; }, 24},
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->SupportsPosixUnlinkRename = 1; }, 29},
      {[](FSP_FSCTL_VOLUME_PARAMS* p) { p->PostDispositionWhenNecessaryOnly = 1; }, 30},
  };
  for (const Bit& b : bits) {
    FSP_FSCTL_VOLUME_PARAMS p;
    std::memset(&p, 0, sizeof p);
    b.set(&p);
    CHECK_EQ(wordAt(&p, 36), 1u << b.bit);
  }
  FSP_FSCTL_VOLUME_PARAMS p;
  std::memset(&p, 0, sizeof p);
  p.DirInfoTimeoutValid = 1;
  CHECK_EQ(wordAt(&p, 456), 2u);
}

TEST(winfsp_transact_req_create_flags_and_buffer) {
  alignas(8) uint8_t raw[256] = {};
  auto* r = reinterpret_cast<FSP_FSCTL_TRANSACT_REQ*>(raw);
  r->Req.Create.OpenTargetDirectory = 1;  // bit 4 of the word at 64
  CHECK_EQ(wordAt(raw, 64), 1u << 4);
  r->Req.Create.NamedStream = 0x1234;
  UINT16 ns;
  std::memcpy(&ns, raw + 72, 2);
  CHECK_EQ(ns, 0x1234);
  // The name WinFsp passes starts at 88 (MSVC's layout), not at 84 (pitfall P1).
  CHECK_EQ(static_cast<size_t>(r->Buffer - raw), static_cast<size_t>(88));
}

TEST(winfsp_names_between_winfsp_and_core) {
  std::string p;
  REQUIRE(toCorePath(L"\\", &p));
  CHECK_EQ(p, std::string());
  REQUIRE(toCorePath(L"\\a\\b c\\d.txt", &p));
  CHECK_EQ(p, std::string("a/b c/d.txt"));
  REQUIRE(toCorePath(L"\\\u00e9t\u00e9\\\u6587", &p));
  CHECK_EQ(p, std::string("\xc3\xa9t\xc3\xa9/\xe6\x96\x87"));
  CHECK(!toCorePath(L"a\\b", &p));       // not rooted
  CHECK(!toCorePath(L"\\a\\\\b", &p));   // empty component
  CHECK(!toCorePath(L"\\a\\..\\b", &p)); // never from the driver: refused, not resolved
  CHECK(!toCorePath(L"\\a/b", &p));      // '/' would be a separator to the core
  CHECK(toWinPath("") == L"\\");
  CHECK(toWinPath("a/b") == L"\\a\\b");
  CHECK(lastComponent(L"\\a\\b") == L"b");
  CHECK(lastComponent(L"\\") == L"");
}

TEST(winfsp_errno_to_ntstatus) {
  CHECK_EQ(statusFromErrno(0), st::SUCCESS);
  CHECK_EQ(statusFromErrno(ENOENT), st::OBJECT_NAME_NOT_FOUND);
  CHECK_EQ(statusFromErrno(EEXIST), st::OBJECT_NAME_COLLISION);
  CHECK_EQ(statusFromErrno(EROFS), st::WRITE_PROTECTED);
  CHECK_EQ(statusFromErrno(ENOTEMPTY), st::DIRECTORY_NOT_EMPTY);
  CHECK_EQ(statusFromErrno(EISDIR), st::FILE_IS_A_DIRECTORY);
  CHECK_EQ(statusFromErrno(ENOTDIR), st::OBJECT_PATH_NOT_FOUND);
  CHECK_EQ(statusFromErrno(12345), st::IO_DEVICE_ERROR);
}

TEST(winfsp_times_and_attributes) {
  CHECK_EQ(fileTimeOf(Timespec{0, 0}), 116444736000000000ull);
  Timespec t{1700000000, 123456700};
  CHECK(timespecOf(fileTimeOf(t)) == t);
  CHECK_EQ(fileTimeOf(Timespec{-20000000000LL, 0}), 0ull);  // before 1601: unset

  Attr f;
  f.type = FileType::Regular;
  f.perm = 0644;
  f.size = 5000;
  f.ino = 77;
  f.atime = {1700000300, 0};
  f.mtime = {1700000100, 0};
  f.ctime = {1700000200, 0};
  FSP_FSCTL_FILE_INFO i;
  fileInfoOf(f, false, 4096, &i);
  CHECK_EQ(i.FileAttributes, 0u);  // shown as NORMAL by the driver
  CHECK_EQ(i.FileSize, 5000ull);
  CHECK_EQ(i.AllocationSize, 8192ull);
  CHECK_EQ(i.IndexNumber, 77ull);
  CHECK_EQ(i.HardLinks, 0u);
  // No creation time of its own: the earliest time known, never 1970 (finding 12).
  CHECK_EQ(i.CreationTime, fileTimeOf(f.mtime));
  // Its own (A's, copied up, or set): shown as it is; HIDDEN and SYSTEM shown with the rest.
  Attr own = f;
  own.hasBirth = true;
  own.birth = {1000000000, 500};
  own.winAttrs = FILE_ATTRIBUTE_HIDDEN | FILE_ATTRIBUTE_SYSTEM;
  own.perm = 0444;
  fileInfoOf(own, false, 4096, &i);
  CHECK_EQ(i.CreationTime, fileTimeOf(own.birth));
  CHECK_EQ(i.FileAttributes,
           static_cast<UINT32>(FILE_ATTRIBUTE_HIDDEN | FILE_ATTRIBUTE_SYSTEM | FILE_ATTRIBUTE_READONLY));
  CHECK_EQ(creationTimeOf(own), fileTimeOf(own.birth));

  f.perm = 0444;
  CHECK_EQ(attributesOf(f, false), static_cast<UINT32>(FILE_ATTRIBUTE_READONLY));
  Attr d;
  d.type = FileType::Directory;
  d.perm = 0755;
  fileInfoOf(d, false, 4096, &i);
  CHECK_EQ(i.FileAttributes, static_cast<UINT32>(FILE_ATTRIBUTE_DIRECTORY));
  CHECK_EQ(i.FileSize, 0ull);
  Attr l;
  l.type = FileType::Symlink;
  l.perm = 0777;
  fileInfoOf(l, true, 4096, &i);
  CHECK_EQ(i.FileAttributes,
           static_cast<UINT32>(FILE_ATTRIBUTE_REPARSE_POINT | FILE_ATTRIBUTE_DIRECTORY));
  CHECK_EQ(i.ReparseTag, static_cast<UINT32>(IO_REPARSE_TAG_SYMLINK));

  CHECK_EQ(permWithAttributes(0644, FILE_ATTRIBUTE_READONLY), 0444u);
  CHECK_EQ(permWithAttributes(0755, FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_HIDDEN), 0555u);
  CHECK_EQ(permWithAttributes(0444, FILE_ATTRIBUTE_ARCHIVE), 0644u);
  CHECK_EQ(permWithAttributes(0644, 0), 0644u);
}

TEST(winfsp_security_descriptor_owner_and_system_only) {
  std::string sd, error;
  REQUIRE(ownerAndSystemDescriptor(&sd, &error));
  auto* p = const_cast<char*>(sd.data());
  REQUIRE(IsValidSecurityDescriptor(p));
  CHECK_EQ(static_cast<size_t>(GetSecurityDescriptorLength(p)), sd.size());
  SECURITY_DESCRIPTOR_CONTROL control = 0;
  DWORD revision = 0;
  REQUIRE(GetSecurityDescriptorControl(p, &control, &revision));
  CHECK(control & SE_SELF_RELATIVE);
  CHECK(control & SE_DACL_PROTECTED);
  // Spelled back: owner the process's user, two inheritable full-access ACEs (user, SYSTEM).
  wchar_t* text = nullptr;
  REQUIRE(ConvertSecurityDescriptorToStringSecurityDescriptorW(
      p, SDDL_REVISION_1, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION, &text, nullptr));
  std::wstring s = text;
  LocalFree(text);
  HANDLE token;
  REQUIRE(OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token));
  char buf[256];
  DWORD len = 0;
  REQUIRE(GetTokenInformation(token, TokenUser, buf, sizeof buf, &len));
  CloseHandle(token);
  wchar_t* user = nullptr;
  REQUIRE(ConvertSidToStringSidW(reinterpret_cast<TOKEN_USER*>(buf)->User.Sid, &user));
  std::wstring u = user;
  LocalFree(user);
  CHECK(s.find(L"O:" + u) == 0);
  CHECK(s.find(u + L")") != std::wstring::npos);
  CHECK(s.find(L";SY)") != std::wstring::npos);
  CHECK(s.find(L"WD") == std::wstring::npos);  // no Everyone
  CHECK(s.find(L"BU") == std::wstring::npos);  // no Users
  // 2 ACEs, both inherited by files and directories.
  size_t aces = 0;
  for (size_t at = s.find(L"(A;"); at != std::wstring::npos; at = s.find(L"(A;", at + 1)) {
    ++aces;
    CHECK(s.compare(at, 9, L"(A;OICI;F") == 0);
  }
  CHECK_EQ(aces, static_cast<size_t>(2));
  std::printf("          note: %s\n", utf8(s).c_str());

  // #29: one mandatory label in the SACL, Low (S-1-16-4096) with NO_WRITE_UP, inherited by files
  // and directories: S:(ML;OICI;NW;;;LW). Read from the ACE itself, not from SDDL text.
  BOOL present = FALSE, defaulted = FALSE;
  PACL sacl = nullptr;
  REQUIRE(GetSecurityDescriptorSacl(p, &present, &sacl, &defaulted));
  REQUIRE(present && sacl);
  REQUIRE_EQ(static_cast<int>(sacl->AceCount), 1);
  void* ace = nullptr;
  REQUIRE(GetAce(sacl, 0, &ace));
  auto* label = static_cast<SYSTEM_MANDATORY_LABEL_ACE*>(ace);
  CHECK_EQ(static_cast<int>(label->Header.AceType), SYSTEM_MANDATORY_LABEL_ACE_TYPE);
  CHECK_EQ(static_cast<int>(label->Header.AceFlags), OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE);
  CHECK_EQ(static_cast<unsigned>(label->Mask), static_cast<unsigned>(SYSTEM_MANDATORY_LABEL_NO_WRITE_UP));
  wchar_t* labelSid = nullptr;
  REQUIRE(ConvertSidToStringSidW(&label->SidStart, &labelSid));
  CHECK(std::wstring(labelSid) == L"S-1-16-4096");
  LocalFree(labelSid);
  // The mount point's form has no SACL.
  std::string plain;
  REQUIRE(ownerAndSystemDescriptor(&plain, &error, false));
  present = TRUE;
  sacl = nullptr;
  REQUIRE(GetSecurityDescriptorSacl(const_cast<char*>(plain.data()), &present, &sacl, &defaulted));
  CHECK(!present);

  // The size protocol: too small is BUFFER_OVERFLOW with the size needed.
  std::vector<char> out(sd.size());
  SIZE_T size = 8;
  CHECK_EQ(copyDescriptor(sd, out.data(), &size), st::BUFFER_OVERFLOW);
  CHECK_EQ(static_cast<size_t>(size), sd.size());
  CHECK_EQ(copyDescriptor(sd, out.data(), &size), st::SUCCESS);
  CHECK(std::memcmp(out.data(), sd.data(), sd.size()) == 0);
  CHECK_EQ(copyDescriptor(sd, nullptr, nullptr), st::SUCCESS);
}

TEST(winfsp_directory_order_marker_and_end) {
  std::vector<DirRecord> v = {rec(L"b", 2), rec(L"..", 0), rec(L"B", 3), rec(L"a", 1),
                              rec(L".", 9), rec(L"\u00e9", 4), rec(L"Z", 5)};
  sortListing(&v);
  std::vector<std::wstring> order;
  for (auto& r : v) order.push_back(r.name);
  CHECK(order == (std::vector<std::wstring>{L".", L"..", L"B", L"Z", L"a", L"b", L"\u00e9"}));
  CHECK_EQ(firstAfter(v, nullptr), static_cast<size_t>(0));
  CHECK_EQ(firstAfter(v, L"."), static_cast<size_t>(1));
  CHECK_EQ(firstAfter(v, L".."), static_cast<size_t>(2));
  CHECK_EQ(firstAfter(v, L"Z"), static_cast<size_t>(4));
  CHECK_EQ(firstAfter(v, L"Y"), static_cast<size_t>(3));  // a marker deleted since
  CHECK_EQ(firstAfter(v, L"\u00e9"), v.size());

  // Everything fits: every record, 8-byte aligned, then the 2-byte end mark.
  alignas(8) uint8_t big[4096];
  ULONG used = 0;
  fillDirectory(v, nullptr, big, sizeof big, &used);
  bool ended = false;
  auto names = namesIn(big, used, &ended);
  CHECK(names == order);
  CHECK(ended);
  UINT64 ino;
  std::memcpy(&ino, big + offsetof(FSP_FSCTL_DIR_INFO, FileInfo) + offsetof(FSP_FSCTL_FILE_INFO, IndexNumber),
              sizeof ino);
  CHECK_EQ(ino, 9ull);  // "." first

  // A buffer for two records at a time: no end mark until the last batch, and the driver's
  // marker (the last name returned) resumes exactly after it.
  const ULONG two = 2 * ((sizeof(FSP_FSCTL_DIR_INFO) + 4 + 7) & ~7u);
  std::vector<std::wstring> all;
  const wchar_t* marker = nullptr;
  std::wstring last;
  for (int round = 0; round < 10; ++round) {
    alignas(8) uint8_t small[512];
    used = 0;
    fillDirectory(v, marker, small, two, &used);
    CHECK(used <= two);
    auto got = namesIn(small, used, &ended);
    all.insert(all.end(), got.begin(), got.end());
    if (ended) break;
    REQUIRE(!got.empty());
    last = got.back();
    marker = last.c_str();
  }
  CHECK(ended);
  CHECK(all == order);

  // A record bigger than the whole buffer: nothing written, no end mark.
  alignas(8) uint8_t tiny[64];
  used = 0;
  fillDirectory(v, nullptr, tiny, sizeof tiny, &used);
  CHECK_EQ(used, 0u);
}

TEST(winfsp_notify_batch_records) {
  NotifyBatch b;
  b.add("a/b.txt", kNotifyAll, FILE_ACTION_MODIFIED);
  b.add("A/B.TXT", kNotifyAll, FILE_ACTION_MODIFIED);  // the same name to a case-insensitive volume
  b.add("", kNotifyAll, FILE_ACTION_MODIFIED);
  CHECK_EQ(b.size(), static_cast<size_t>(2));
  auto bufs = b.buffers(4096);
  REQUIRE_EQ(bufs.size(), static_cast<size_t>(1));
  const std::string& x = bufs[0];
  FSP_FSCTL_NOTIFY_INFO head;
  std::memcpy(&head, x.data(), sizeof head);
  CHECK_EQ(head.Size, static_cast<UINT16>(12 + 2 * 8));  // "\a\b.txt"
  CHECK_EQ(head.Filter, kNotifyAll);
  CHECK_EQ(head.Action, static_cast<UINT32>(FILE_ACTION_MODIFIED));
  CHECK(std::wstring(reinterpret_cast<const wchar_t*>(x.data() + 12), 8) == L"\\a\\b.txt");
  const size_t second = (head.Size + 7) & ~size_t(7);
  std::memcpy(&head, x.data() + second, sizeof head);
  CHECK_EQ(head.Size, static_cast<UINT16>(14));  // "\"
  CHECK_EQ(x.size(), second + 16);  // padded to 8

  // Split between buffers at record boundaries; a name past WinFsp's limit becomes its parent.
  NotifyBatch many;
  for (int i = 0; i < 100; ++i) many.add("dir/file" + std::to_string(i), kNotifyAll, FILE_ACTION_MODIFIED);
  std::string deep = "top";
  while (deep.size() < 1500) deep += "/segment";
  many.add(deep, kNotifyAll, FILE_ACTION_MODIFIED);
  auto parts = many.buffers(512);
  CHECK(parts.size() > 1);
  size_t records = 0;
  for (const auto& part : parts) {
    size_t inPart = 0;
    for (size_t at = 0; at < part.size();) {
      std::memcpy(&head, part.data() + at, sizeof head);
      REQUIRE(head.Size >= 12);
      CHECK(static_cast<size_t>(head.Size - 12) <= FSP_FSCTL_TRANSACT_PATH_SIZEMAX);
      ++inPart;
      at += (head.Size + 7) & ~size_t(7);
    }
    CHECK(part.size() <= 512 || inPart == 1);  // only a record bigger than that stands alone
    records += inPart;
  }
  CHECK_EQ(records, static_cast<size_t>(101));
}

TEST(winfsp_links_seen_from_the_shadow) {
  const std::wstring root = L"\\\\?\\C:\\work\\proj";
  LinkPlace p = placeOfLink("../lib/x", root);
  CHECK(p.kind == LinkPlace::Relative);
  CHECK(p.relative == L"..\\lib\\x");
  p = placeOfLink("C:\\Work\\Proj\\node_modules\\.pnpm\\a", root);  // a junction into the folder
  CHECK(p.kind == LinkPlace::InsideFolder);
  CHECK_EQ(p.inside, std::string("node_modules/.pnpm/a"));
  p = placeOfLink("C:\\work\\proj", root);
  CHECK(p.kind == LinkPlace::InsideFolder);
  CHECK_EQ(p.inside, std::string());
  p = placeOfLink("C:\\work\\project2\\x", root);  // a sibling sharing the prefix: outside
  CHECK(p.kind == LinkPlace::Outside);
  p = placeOfLink("D:\\store\\pkg", root);
  CHECK(p.kind == LinkPlace::Outside);
  CHECK(p.outside == L"D:\\store\\pkg");
  CHECK(ntLinkName(p.outside) == L"\\??\\D:\\store\\pkg");
  // A link to a network share (review: it was given as \??\\\srv\share..., which names nothing).
  p = placeOfLink("\\\\srv\\share\\pkg", root);
  CHECK(p.kind == LinkPlace::Outside);
  CHECK(p.outside == L"\\\\srv\\share\\pkg");
  CHECK(ntLinkName(p.outside) == L"\\??\\UNC\\srv\\share\\pkg");
  p = placeOfLink("\\\\?\\UNC\\srv\\share\\pkg", root);
  CHECK(p.kind == LinkPlace::Outside);
  CHECK(ntLinkName(p.outside) == L"\\??\\UNC\\srv\\share\\pkg");

  // Our reparse data reads back through the folder's own parser (win32_lower).
  std::string data = symlinkReparseData(L"..\\lib\\x", L"..\\lib\\x", SYMLINK_FLAG_RELATIVE);
  std::string target;
  REQUIRE(win32::linkTarget(data.data(), data.size(), &target));
  CHECK_EQ(target, std::string("../lib/x"));
  data = symlinkReparseData(L"\\??\\D:\\store\\pkg", L"D:\\store\\pkg", 0);
  REQUIRE(win32::linkTarget(data.data(), data.size(), &target));
  CHECK_EQ(target, std::string("D:\\store\\pkg"));
  data = symlinkReparseData(ntLinkName(L"\\\\srv\\share\\pkg"), L"\\\\srv\\share\\pkg", 0);
  REQUIRE(win32::linkTarget(data.data(), data.size(), &target));
  CHECK_EQ(target, std::string("\\\\srv\\share\\pkg"));
  ULONG tag;
  std::memcpy(&tag, data.data(), 4);
  CHECK_EQ(tag, static_cast<ULONG>(IO_REPARSE_TAG_SYMLINK));
}
