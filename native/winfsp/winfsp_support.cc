// See winfsp_support.h.
#include "winfsp_support.h"

#include <sddl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cwctype>

#include "../platform/win32_lower.h"

namespace shadowfs {
namespace winfsp {

// ---------------------------------------------------------------- names

bool toCorePath(const wchar_t* name, std::string* out) {
  out->clear();
  if (!name || name[0] != L'\\') return false;
  const wchar_t* p = name + 1;
  if (*p == L'\0') return true;  // the root
  std::wstring comp;
  auto flush = [&]() -> bool {
    if (comp.empty() || comp == L"." || comp == L"..") return false;
    if (!out->empty()) out->push_back('/');
    out->append(win32::toUtf8(comp));
    comp.clear();
    return true;
  };
  for (; *p; ++p) {
    if (*p == L'\\') {
      if (!flush()) return false;
    } else if (*p == L'/') {
      return false;
    } else {
      comp.push_back(*p);
    }
  }
  return flush();
}

std::wstring toWinPath(const std::string& core) {
  std::wstring w;
  win32::toWide(core, &w);
  std::replace(w.begin(), w.end(), L'/', L'\\');
  return L"\\" + w;
}

std::wstring lastComponent(const std::wstring& winPath) {
  size_t slash = winPath.find_last_of(L'\\');
  return slash == std::wstring::npos ? winPath : winPath.substr(slash + 1);
}

// ---------------------------------------------------------------- errors

NTSTATUS statusFromErrno(int e) {
  switch (e) {
    case 0: return st::SUCCESS;
    case ENOENT: return st::OBJECT_NAME_NOT_FOUND;
    case ENOTDIR: return st::OBJECT_PATH_NOT_FOUND;  // a component on the way is no directory
    case EEXIST: return st::OBJECT_NAME_COLLISION;
    case EACCES:
    case EPERM: return st::ACCESS_DENIED;
    case EROFS: return st::WRITE_PROTECTED;  // the read-only layer (no agent active)
    case ENOTEMPTY: return st::DIRECTORY_NOT_EMPTY;
    case EISDIR: return st::FILE_IS_A_DIRECTORY;
    case ENAMETOOLONG: return st::OBJECT_NAME_INVALID;
    case EINVAL: return st::INVALID_PARAMETER;
    case ENOSPC:
    case EFBIG: return st::DISK_FULL;
    case ENOMEM: return st::INSUFFICIENT_RESOURCES;
    case ELOOP: return st::REPARSE_POINT_NOT_RESOLVED;
    case EXDEV: return st::NOT_SAME_DEVICE;
    case EBUSY: return st::SHARING_VIOLATION;
    case ENOSYS:
    case ENOTSUP: return st::NOT_SUPPORTED;
    case EBADF: return st::INVALID_DEVICE_REQUEST;
    default: return st::IO_DEVICE_ERROR;
  }
}

// ---------------------------------------------------------------- attributes and times

namespace {
constexpr int64_t kUnixEpochInFileTime = 116444736000000000LL;  // 1970-01-01 in FILETIME units
}

UINT64 fileTimeOf(const Timespec& t) {
  // Seconds before 1601 (or so far ahead that the product overflows) are "unset".
  if (t.sec < -11644473600LL || t.sec > 900000000000LL) return 0;
  return static_cast<UINT64>(kUnixEpochInFileTime + t.sec * 10000000LL + t.nsec / 100);
}

Timespec timespecOf(UINT64 fileTime) {
  int64_t d = static_cast<int64_t>(fileTime) - kUnixEpochInFileTime;
  int64_t sec = d / 10000000, rem = d % 10000000;
  if (rem < 0) {
    rem += 10000000;
    --sec;
  }
  return {sec, rem * 100};
}

UINT32 attributesOf(const Attr& a, bool linkToDirectory) {
  UINT32 attrs = 0;
  if (a.type == FileType::Directory) attrs |= FILE_ATTRIBUTE_DIRECTORY;
  if (a.type == FileType::Symlink) {
    attrs |= FILE_ATTRIBUTE_REPARSE_POINT;
    if (linkToDirectory) attrs |= FILE_ATTRIBUTE_DIRECTORY;
  } else if ((a.perm & 0222) == 0) {
    attrs |= FILE_ATTRIBUTE_READONLY;  // links have no mode of their own on Windows
  }
  return attrs | (a.winAttrs & kWinAttrsKept);
}

UINT64 creationTimeOf(const Attr& a) {
  if (a.hasBirth) return fileTimeOf(a.birth);
  // No creation time of its own (a new file of the layer): the earliest time it has, which is
  // when it was made until a time is set (SetBasicInfo then keeps this one, see there).
  const UINT64 atime = fileTimeOf(a.atime), ctime = fileTimeOf(a.ctime);
  UINT64 created = fileTimeOf(a.mtime);
  if (ctime && (!created || ctime < created)) created = ctime;
  if (atime && (!created || atime < created)) created = atime;
  return created;
}

void fileInfoOf(const Attr& a, bool linkToDirectory, uint32_t allocationUnit,
                FSP_FSCTL_FILE_INFO* out) {
  std::memset(out, 0, sizeof *out);
  out->FileAttributes = attributesOf(a, linkToDirectory);
  out->ReparseTag = a.type == FileType::Symlink ? IO_REPARSE_TAG_SYMLINK : 0;
  const bool hasSize = a.type == FileType::Regular || a.type == FileType::Symlink;
  out->FileSize = hasSize ? a.size : 0;
  const uint64_t unit = allocationUnit ? allocationUnit : 4096;
  out->AllocationSize = (out->FileSize + unit - 1) / unit * unit;
  out->LastAccessTime = fileTimeOf(a.atime);
  out->LastWriteTime = fileTimeOf(a.mtime);
  out->ChangeTime = fileTimeOf(a.ctime);
  out->CreationTime = creationTimeOf(a);
  out->IndexNumber = a.ino;
  out->HardLinks = 0;
  out->EaSize = 0;
}

uint32_t permWithAttributes(uint32_t perm, UINT32 attributes) {
  if (attributes & FILE_ATTRIBUTE_READONLY) return perm & ~0222u;
  return (perm & 0222u) ? perm : (perm | 0200u);
}

// ---------------------------------------------------------------- security

bool ownerAndSystemDescriptor(std::string* out, std::string* error, bool lowLabel) {
  HANDLE token = nullptr;
  if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) {
    *error = "cannot read this process's token (Windows error " + std::to_string(GetLastError()) + ")";
    return false;
  }
  std::string user(256, '\0');
  DWORD len = 0;
  BOOL ok = GetTokenInformation(token, TokenUser, user.data(), static_cast<DWORD>(user.size()), &len);
  if (!ok && GetLastError() == ERROR_INSUFFICIENT_BUFFER) {
    user.resize(len);
    ok = GetTokenInformation(token, TokenUser, user.data(), static_cast<DWORD>(user.size()), &len);
  }
  CloseHandle(token);
  if (!ok) {
    *error = "cannot read this process's user (Windows error " + std::to_string(GetLastError()) + ")";
    return false;
  }
  wchar_t* sid = nullptr;
  if (!ConvertSidToStringSidW(reinterpret_cast<TOKEN_USER*>(user.data())->User.Sid, &sid)) {
    *error = "cannot spell this process's user SID (Windows error " + std::to_string(GetLastError()) + ")";
    return false;
  }
  // Owner and group: the user. DACL protected ("P": nothing inherited from above the mount),
  // two ACEs inherited by files and directories below (OICI): full access (FA) for the user and
  // for SYSTEM (SY).
  std::wstring sddl = std::wstring(L"O:") + sid + L"G:" + sid + L"D:P(A;OICI;FA;;;" + sid +
                      L")(A;OICI;FA;;;SY)";
  // Mandatory integrity control: the label is what a Low-integrity token is checked against
  // (its DACL rights above still apply), inherited by what is created below.
  if (lowLabel) sddl += L"S:(ML;OICI;NW;;;LW)";
  LocalFree(sid);
  PSECURITY_DESCRIPTOR sd = nullptr;
  ULONG size = 0;
  if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.c_str(), SDDL_REVISION_1, &sd, &size)) {
    *error = "cannot build the shadow's security descriptor (Windows error " +
             std::to_string(GetLastError()) + ")";
    return false;
  }
  out->assign(static_cast<const char*>(sd), size);
  LocalFree(sd);
  return true;
}

NTSTATUS copyDescriptor(const std::string& sd, PSECURITY_DESCRIPTOR buf, SIZE_T* size) {
  if (!size) return st::SUCCESS;
  if (!buf || *size < sd.size()) {
    *size = sd.size();
    return st::BUFFER_OVERFLOW;
  }
  std::memcpy(buf, sd.data(), sd.size());
  *size = sd.size();
  return st::SUCCESS;
}

// ---------------------------------------------------------------- directory listings

namespace {
int rankOf(const std::wstring& n) { return n == L"." ? 0 : n == L".." ? 1 : 2; }
bool before(const std::wstring& a, const std::wstring& b) {
  int ra = rankOf(a), rb = rankOf(b);
  if (ra != rb) return ra < rb;
  return a < b;  // UTF-16 code units, ordinal
}
constexpr ULONG alignUp(ULONG n) {
  return static_cast<ULONG>((n + FSP_FSCTL_DEFAULT_ALIGNMENT - 1) & ~(FSP_FSCTL_DEFAULT_ALIGNMENT - 1));
}
}  // namespace

void sortListing(std::vector<DirRecord>* v) {
  std::stable_sort(v->begin(), v->end(), [](const DirRecord& a, const DirRecord& b) {
    return before(a.name, b.name);
  });
}

size_t firstAfter(const std::vector<DirRecord>& v, const wchar_t* marker) {
  if (!marker) return 0;
  const std::wstring m = marker;
  auto it = std::upper_bound(v.begin(), v.end(), m, [](const std::wstring& key, const DirRecord& r) {
    return before(key, r.name);
  });
  return static_cast<size_t>(it - v.begin());
}

bool addDirInfo(const DirRecord& r, void* buf, ULONG length, ULONG* used) {
  const size_t nameBytes = r.name.size() * sizeof(wchar_t);
  const size_t size = sizeof(FSP_FSCTL_DIR_INFO) + nameBytes;
  if (size > 0xffff) return false;
  const ULONG start = *used;
  if (start > length || alignUp(static_cast<ULONG>(size)) > length - start) return false;
  auto* at = static_cast<uint8_t*>(buf) + start;
  FSP_FSCTL_DIR_INFO head;
  std::memset(&head, 0, sizeof head);
  head.Size = static_cast<UINT16>(size);
  head.FileInfo = r.info;
  std::memcpy(at, &head, sizeof head);
  std::memcpy(at + sizeof head, r.name.data(), nameBytes);
  *used = start + alignUp(static_cast<ULONG>(size));
  return true;
}

void fillDirectory(const std::vector<DirRecord>& v, const wchar_t* marker, void* buf, ULONG length,
                   ULONG* used) {
  for (size_t i = firstAfter(v, marker); i < v.size(); ++i)
    if (!addDirInfo(v[i], buf, length, used)) return;  // full: no end mark, the driver asks again
  if (*used <= length && length - *used >= sizeof(UINT16)) {
    std::memset(static_cast<uint8_t*>(buf) + *used, 0, sizeof(UINT16));
    *used += sizeof(UINT16);
  }
}

// ---------------------------------------------------------------- change records

void NotifyBatch::add(const std::string& corePath, UINT32 filter, UINT32 action) {
  std::wstring name = toWinPath(corePath);
  // WinFsp drops (and cannot expand) names past its path limit; the parent's record still
  // makes the driver forget the listing that holds it.
  while (name.size() * sizeof(wchar_t) > FSP_FSCTL_TRANSACT_PATH_SIZEMAX && name.size() > 1) {
    size_t slash = name.find_last_of(L'\\');
    name = slash == 0 ? L"\\" : name.substr(0, slash);
  }
  std::wstring folded = name;
  for (wchar_t& c : folded) c = static_cast<wchar_t>(std::towupper(c));
  if (std::find(seen_.begin(), seen_.end(), folded) != seen_.end()) return;
  seen_.push_back(folded);
  items_.push_back(Item{std::move(name), filter, action});
}

std::vector<std::string> NotifyBatch::buffers(size_t maxBytes) const {
  std::vector<std::string> out;
  std::string cur;
  for (const Item& it : items_) {
    const size_t size = sizeof(FSP_FSCTL_NOTIFY_INFO) + it.name.size() * sizeof(wchar_t);
    const size_t aligned = (size + FSP_FSCTL_DEFAULT_ALIGNMENT - 1) & ~(FSP_FSCTL_DEFAULT_ALIGNMENT - 1);
    if (!cur.empty() && cur.size() + aligned > maxBytes) {
      out.push_back(std::move(cur));
      cur.clear();
    }
    FSP_FSCTL_NOTIFY_INFO head;
    std::memset(&head, 0, sizeof head);
    head.Size = static_cast<UINT16>(size);
    head.Filter = it.filter;
    head.Action = it.action;
    const size_t at = cur.size();
    cur.resize(at + aligned, '\0');
    std::memcpy(&cur[at], &head, sizeof head);
    std::memcpy(&cur[at + sizeof head], it.name.data(), it.name.size() * sizeof(wchar_t));
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// ---------------------------------------------------------------- links

namespace {
bool absoluteWindowsPath(const std::wstring& p) {
  return (p.size() >= 2 && p[1] == L':') || p.rfind(L"\\\\", 0) == 0 || p.rfind(L"\\??\\", 0) == 0;
}
bool sameCharIgnoringCase(wchar_t a, wchar_t b) { return std::towupper(a) == std::towupper(b); }
}  // namespace

LinkPlace placeOfLink(const std::string& target, const std::wstring& lowerRoot) {
  LinkPlace p;
  std::wstring t;
  win32::toWide(target, &t);
  if (!absoluteWindowsPath(t)) {
    p.kind = LinkPlace::Relative;
    std::replace(t.begin(), t.end(), L'/', L'\\');
    p.relative = t;
    return p;
  }
  std::wstring abs = win32::plainPath(t), root = win32::plainPath(lowerRoot);
  std::replace(abs.begin(), abs.end(), L'/', L'\\');
  while (root.size() > 3 && root.back() == L'\\') root.pop_back();
  while (abs.size() > 3 && abs.back() == L'\\') abs.pop_back();
  bool inside = abs.size() >= root.size() &&
                std::equal(root.begin(), root.end(), abs.begin(), sameCharIgnoringCase) &&
                (abs.size() == root.size() || abs[root.size()] == L'\\' || root.back() == L'\\');
  if (!inside) {
    p.kind = LinkPlace::Outside;
    p.outside = abs;
    return p;
  }
  p.kind = LinkPlace::InsideFolder;
  std::wstring rest = abs.substr(root.size());
  while (!rest.empty() && rest.front() == L'\\') rest.erase(rest.begin());
  std::replace(rest.begin(), rest.end(), L'\\', L'/');
  p.inside = win32::toUtf8(rest);
  return p;
}

std::wstring ntLinkName(const std::wstring& outside) {
  if (outside.size() > 2 && outside[0] == L'\\' && outside[1] == L'\\')
    return L"\\??\\UNC\\" + outside.substr(2);
  return L"\\??\\" + outside;
}

std::string symlinkReparseData(const std::wstring& substitute, const std::wstring& print,
                               ULONG flags) {
  // REPARSE_DATA_BUFFER (ntifs.h) for a symbolic link, laid out by offset: tag, data length,
  // reserved; then substitute name offset/length, print name offset/length, flags, and the
  // path buffer holding both names (substitute first, no terminators counted).
  const size_t sub = substitute.size() * sizeof(wchar_t), prt = print.size() * sizeof(wchar_t);
  const size_t header = 8, fixed = 12;
  std::string out(header + fixed + sub + prt, '\0');
  auto put16 = [&](size_t at, size_t v) {
    UINT16 x = static_cast<UINT16>(v);
    std::memcpy(&out[at], &x, 2);
  };
  auto put32 = [&](size_t at, ULONG v) { std::memcpy(&out[at], &v, 4); };
  put32(0, IO_REPARSE_TAG_SYMLINK);
  put16(4, fixed + sub + prt);
  put16(8, 0);     // SubstituteNameOffset
  put16(10, sub);  // SubstituteNameLength
  put16(12, sub);  // PrintNameOffset
  put16(14, prt);  // PrintNameLength
  put32(16, flags);
  std::memcpy(&out[20], substitute.data(), sub);
  std::memcpy(&out[20 + sub], print.data(), prt);
  return out;
}

}  // namespace winfsp
}  // namespace shadowfs
