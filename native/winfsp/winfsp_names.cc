// The winfsp backend (see winfsp_native.cc): names. Links (which lead to a directory, the
// reparse data shown for them, a link on the way to a name, the normalized name) and the
// callbacks on listings and links: ReadDirectory, GetDirInfoByName, ResolveReparsePoints and
// the reparse point calls.
#include "winfsp_mount.h"

namespace shadowfs {
namespace winfsp_mount {

// ---------------------------------------------------------------- links

// Whether the link at `path` leads to a directory (Windows marks such links DIRECTORY, as a
// junction or a directory symlink is). Followed at most 8 links deep.
bool WinFspMount::leadsToDirectory(Layer* L, const std::string& path, int depth) {
  if (depth > 8) return false;
  std::string target;
  if (ov_->readlink(L, path, &target)) return false;
  LinkPlace p = placeOfLink(target, lowerRoot_);
  std::string at;
  if (p.kind == LinkPlace::Outside) {
    DWORD attrs = GetFileAttributesW(p.outside.c_str());
    return attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY);
  }
  if (p.kind == LinkPlace::InsideFolder) {
    at = p.inside;
  } else {
    // Relative to the link's directory, '.' and '..' taken lexically.
    std::vector<std::string> parts;
    std::string dir = parentOf(path);
    size_t i = 0;
    while (i <= dir.size() && !dir.empty()) {
      size_t j = dir.find('/', i);
      if (j == std::string::npos) j = dir.size();
      parts.push_back(dir.substr(i, j - i));
      i = j + 1;
    }
    std::string rel = win32::toUtf8(p.relative);
    i = 0;
    while (i <= rel.size()) {
      size_t j = rel.find('\\', i);
      if (j == std::string::npos) j = rel.size();
      std::string part = rel.substr(i, j - i);
      if (part == "..") {
        if (parts.empty()) return false;  // above the root: not inside the shadow
        parts.pop_back();
      } else if (!part.empty() && part != ".") {
        parts.push_back(part);
      }
      i = j + 1;
    }
    for (const auto& s : parts) at = joinPath(at, s);
  }
  Attr a;
  if (ov_->getattr(L, at, &a)) return false;
  if (a.type == FileType::Symlink) return leadsToDirectory(L, at, depth + 1);
  return a.type == FileType::Directory;
}

// The REPARSE_DATA_BUFFER for the link at `path`. For the driver's resolution (`forFsctl`
// false): relative links stay relative; a target inside the folder becomes device-relative
// (leading '\' + SYMLINK_FLAG_RELATIVE: the driver prefixes this volume, so it lands in the
// shadow, never in A); a target outside is an absolute NT path. For FSCTL_GET_REPARSE_POINT
// (`forFsctl`), a target inside the folder is spelled as the same place under the mount point.
NTSTATUS WinFspMount::linkData(Layer* L, const std::string& path, bool forFsctl, std::string* out) {
  std::string target;
  if (int e = ov_->readlink(L, path, &target)) return e == EINVAL ? st::NOT_A_REPARSE_POINT : statusFromErrno(e);
  LinkPlace p = placeOfLink(target, lowerRoot_);
  switch (p.kind) {
    case LinkPlace::Relative:
      *out = symlinkReparseData(p.relative, p.relative, SYMLINK_FLAG_RELATIVE);
      break;
    case LinkPlace::InsideFolder: {
      std::wstring inVolume = toWinPath(p.inside);
      const wchar_t* mp = fs_ ? fs_->MountPoint : nullptr;
      if (forFsctl && mp && *mp) {
        std::wstring base = mp;
        std::wstring full = base + (p.inside.empty() ? L"\\" : inVolume);
        *out = symlinkReparseData(L"\\??\\" + full, full, 0);
      } else {
        *out = symlinkReparseData(inVolume, inVolume, SYMLINK_FLAG_RELATIVE);
      }
      break;
    }
    case LinkPlace::Outside:
      *out = symlinkReparseData(ntLinkName(p.outside), p.outside, 0);
      break;
  }
  return st::SUCCESS;
}

// The character index in `fileName` of the first component, short of the last, that is a link
// (GetSecurityByName's STATUS_REPARSE protocol, winfsp.h:235-250). 0 and *index, or an errno.
int WinFspMount::findLinkOnTheWay(Layer* L, const wchar_t* fileName, UINT32* index) {
  std::wstring name = fileName;
  size_t start = 1;
  while (start < name.size()) {
    size_t end = name.find(L'\\', start);
    if (end == std::wstring::npos) return ENOENT;  // the last component: not on the way
    std::string prefix;
    if (!toCorePath(name.substr(0, end).c_str(), &prefix)) return ENOENT;
    Attr a;
    if (int e = ov_->getattr(L, prefix, &a)) return e;
    if (a.type == FileType::Symlink) {
      *index = static_cast<UINT32>(start);
      return 0;
    }
    if (a.type != FileType::Directory) return ENOTDIR;
    start = end + 1;
  }
  return ENOENT;
}

// Tells the driver the name as the caller spelled it: without a name it keeps the upper-cased
// one, which name queries (GetFinalPathNameByHandle, realpath) would then return. The core
// does not hand out its own spelling of a path yet, so a caller's other case stays as asked.
void WinFspMount::setNormalizedName(PWSTR fileName, FSP_FSCTL_FILE_INFO* info) {
  auto* open = reinterpret_cast<FSP_FSCTL_OPEN_FILE_INFO*>(info);
  size_t bytes = std::wcslen(fileName) * sizeof(wchar_t);
  if (!open->NormalizedName || bytes > open->NormalizedNameSize || bytes > FSP_FSCTL_TRANSACT_PATH_SIZEMAX)
    return;
  std::memcpy(open->NormalizedName, fileName, bytes);
  open->NormalizedNameSize = static_cast<UINT16>(bytes);
}

// One pass: every entry with its attributes, sizes and times (no per-entry round trip). The
// listing is taken when an enumeration starts (no marker) and walked by marker after that;
// the pattern is left to the driver, which always matches it itself (winfsp.h:683-686).
NTSTATUS WinFspMount::ReadDirectory(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR, PWSTR marker, PVOID buf,
                                    ULONG length, PULONG used) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  *used = 0;
  if (c->type != FileType::Directory) return st::NOT_A_DIRECTORY;
  std::lock_guard<std::mutex> lock(c->dirMu);
  if (!marker || c->listing.empty()) {
    const std::string path = m->pathOf(c);
    Layer* L = c->layer.get();
    std::vector<DirEntry> ls;
    if (int e = m->ov_->readdir(L, path, &ls)) return statusFromErrno(e);
    std::vector<DirRecord> v;
    v.reserve(ls.size() + 2);
    Attr a;
    if (!path.empty()) {
      // "." and ".." for every directory but the root, as NTFS lists them.
      if (m->ov_->getattr(L, path, &a) == 0) {
        DirRecord dot;
        dot.name = L".";
        fileInfoOf(a, false, kAllocationUnit, &dot.info);
        v.push_back(dot);
      }
      if (m->ov_->getattr(L, parentOf(path), &a) == 0) {
        DirRecord up;
        up.name = L"..";
        fileInfoOf(a, false, kAllocationUnit, &up.info);
        v.push_back(up);
      }
    }
    for (const DirEntry& d : ls) {
      DirRecord r;
      win32::toWide(d.name, &r.name);
      const std::string child = joinPath(path, d.name);
      if (m->ov_->getattr(L, child, &a) != 0) continue;  // gone since the listing
      fileInfoOf(a, a.type == FileType::Symlink && m->leadsToDirectory(L, child), kAllocationUnit,
                 &r.info);
      v.push_back(std::move(r));
    }
    sortListing(&v);
    c->listing = std::move(v);
  }
  fillDirectory(c->listing, marker, buf, length, used);
  return st::SUCCESS;
}

// An exact name in a directory (PassQueryDirectoryFileName): one lookup, no listing.
NTSTATUS WinFspMount::GetDirInfoByName(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR name,
                                       FSP_FSCTL_DIR_INFO* out) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  std::string parent = m->pathOf(c), child;
  std::wstring leaf = name;
  if (!toCorePath((L"\\" + leaf).c_str(), &child)) return st::OBJECT_NAME_NOT_FOUND;
  child = joinPath(parent, child);
  Attr a;
  if (int e = m->ov_->getattr(c->layer.get(), child, &a)) return statusFromErrno(e);
  // The entry as the directory spells it, not as asked: the driver hands this name to the
  // program (FindFirstFile("beta.txt") must say "Beta.txt"), and on a case-insensitive volume
  // the pattern arrives upper-cased. The core has no public way to spell a path yet, so the
  // parent's listing is searched for it (one listing per exact-name lookup).
  if (m->ov_->ignoresCase()) {
    std::vector<DirEntry> ls;
    const std::string want = child.substr(parent.empty() ? 0 : parent.size() + 1);
    if (m->ov_->readdir(c->layer.get(), parent, &ls) == 0) {
      for (const DirEntry& d : ls) {
        if (sameName(d.name, want)) {
          win32::toWide(d.name, &leaf);
          break;
        }
      }
    }
  }
  const size_t bytes = leaf.size() * sizeof(wchar_t);
  std::memset(out, 0, sizeof *out);
  out->Size = static_cast<UINT16>(sizeof(FSP_FSCTL_DIR_INFO) + bytes);
  fileInfoOf(a, a.type == FileType::Symlink && m->leadsToDirectory(c->layer.get(), child),
             kAllocationUnit, &out->FileInfo);
  std::memcpy(reinterpret_cast<uint8_t*>(out) + sizeof(FSP_FSCTL_DIR_INFO), leaf.data(), bytes);
  return st::SUCCESS;
}

// WinFsp's resolver walks the path and asks GetReparsePointByName for each link; what it
// returns is checked here: a result that leaves the shadow (an absolute NT path) is allowed
// for an open that only reads. Anything that could write, create or delete through a link out
// of the folder is refused, so no write ever lands outside the shadow through one.
NTSTATUS WinFspMount::ResolveReparsePoints(FSP_FILE_SYSTEM* fs, PWSTR fileName, UINT32 index,
                                           BOOLEAN resolveLast, PIO_STATUS_BLOCK ios, PVOID buf,
                                           PSIZE_T size) {
  WinFspMount* m = self(fs);
  NTSTATUS s = m->api_.resolveReparsePoints(fs, &WinFspMount::GetReparsePointByName, m, fileName,
                                            index, resolveLast, ios, buf, size);
  if (s != st::REPARSE || ios->Information != IO_REPARSE_TAG_SYMLINK || *size < 20) return s;
  ULONG flags;
  std::memcpy(&flags, static_cast<const uint8_t*>(buf) + 16, sizeof flags);
  if (flags & SYMLINK_FLAG_RELATIVE) return s;  // device-relative: stays in this volume
  FSP_FILE_SYSTEM_OPERATION_CONTEXT* op = m->api_.operationContext();
  if (!op || !op->Request || op->Request->Kind != FspFsctlTransactCreateKind) return st::ACCESS_DENIED;
  const auto& create = op->Request->Req.Create;
  const UINT32 disposition = create.CreateOptions >> 24;
  const UINT32 changing = FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_ATTRIBUTES | FILE_WRITE_EA |
                          DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_WRITE | GENERIC_ALL |
                          MAXIMUM_ALLOWED | FILE_ADD_FILE | FILE_ADD_SUBDIRECTORY | FILE_DELETE_CHILD;
  if ((create.DesiredAccess & changing) || disposition != 1 /* FILE_OPEN */ ||
      (create.CreateOptions & kFileDeleteOnClose))
    return st::ACCESS_DENIED;
  return s;
}

NTSTATUS WinFspMount::GetReparsePointByName(FSP_FILE_SYSTEM*, PVOID context, PWSTR fileName,
                                            BOOLEAN, PVOID buf, PSIZE_T size) {
  auto* m = static_cast<WinFspMount*>(context);
  std::string path;
  if (!toCorePath(fileName, &path)) return st::OBJECT_NAME_INVALID;
  std::shared_ptr<Layer> L = m->ov_->current(m->view_);
  Attr a;
  if (int e = m->ov_->getattr(L.get(), path, &a)) return statusFromErrno(e);
  if (a.type != FileType::Symlink) return st::NOT_A_REPARSE_POINT;
  if (!buf) return st::SUCCESS;  // FspFileSystemFindReparsePoint asks only whether
  std::string data;
  if (NTSTATUS s = m->linkData(L.get(), path, false, &data)) return s;
  if (!size || *size < data.size()) return st::BUFFER_TOO_SMALL;
  std::memcpy(buf, data.data(), data.size());
  *size = data.size();
  return st::SUCCESS;
}

NTSTATUS WinFspMount::GetReparsePoint(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR, PVOID buf, PSIZE_T size) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  if (c->type != FileType::Symlink) return st::NOT_A_REPARSE_POINT;
  std::string data;
  if (NTSTATUS s = m->linkData(c->layer.get(), m->pathOf(c), true, &data)) return s;
  if (*size < data.size()) return st::BUFFER_TOO_SMALL;
  std::memcpy(buf, data.data(), data.size());
  *size = data.size();
  return st::SUCCESS;
}

// mklink, junction creation (npm/pnpm), Node's fs.symlink: the file or directory just created
// becomes a link in the layer. A target under the mount point is stored as the same place in
// the folder, so the layer's link means the same thing once applied to A.
NTSTATUS WinFspMount::SetReparsePoint(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR, PVOID buf, SIZE_T size) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  std::string target;
  if (!win32::linkTarget(buf, size, &target)) return st::IO_REPARSE_TAG_MISMATCH;
  Layer* L = c->layer.get();
  if (!m->writable(L)) return st::WRITE_PROTECTED;
  if (const wchar_t* mp = m->fs_ ? m->fs_->MountPoint : nullptr; mp && *mp) {
    LinkPlace p = placeOfLink(target, mp);
    if (p.kind == LinkPlace::InsideFolder) {
      std::wstring root = win32::plainPath(m->lowerRoot_);
      std::wstring rest;
      win32::toWide(p.inside, &rest);
      std::replace(rest.begin(), rest.end(), L'/', L'\\');
      target = win32::toUtf8(rest.empty() ? root : root + L"\\" + rest);
    }
  }
  const std::string path = m->pathOf(c);
  std::unique_lock<SharedMutex> lock(c->mu);
  int e = c->type == FileType::Directory ? m->ov_->rmdir(L, path) : m->ov_->unlink(L, path);
  if (e) return statusFromErrno(e);
  Attr a;
  if ((e = m->ov_->symlink(L, target, path, Caller{}, &a))) return statusFromErrno(e);
  if (c->h) {
    m->ov_->release(c->h);
    c->h = nullptr;
  }
  c->type = FileType::Symlink;
  c->ino = a.ino;
  lock.unlock();
  c->linkToDirectory = m->leadsToDirectory(L, path);
  return st::SUCCESS;
}

}  // namespace winfsp_mount
}  // namespace shadowfs
