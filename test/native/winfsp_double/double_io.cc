// The driver's half of each I/O (src/sys/*.c), in our words: what WinFsp's FSD checks before and
// after it asks the file system, and what it sends. See double_driver.cc for the scope.
#include "double_driver.h"

#include <sddl.h>

#include <cstring>

using namespace wfd;

NTSTATUS transactForIo(Volume *v, FSP_FSCTL_TRANSACT_REQ *req, FSP_FSCTL_TRANSACT_RSP *rsp);  // double_driver.cc

namespace {
struct Buffers {
  std::vector<UINT8> reqBuf = std::vector<UINT8>(FSP_FSCTL_TRANSACT_REQ_SIZEMAX, 0);
  std::vector<UINT8> rspBuf = std::vector<UINT8>(FSP_FSCTL_TRANSACT_RSP_SIZEMAX, 0);
  FSP_FSCTL_TRANSACT_REQ *req() { return (FSP_FSCTL_TRANSACT_REQ *)reqBuf.data(); }
  FSP_FSCTL_TRANSACT_RSP *rsp() { return (FSP_FSCTL_TRANSACT_RSP *)rspBuf.data(); }
};
UINT16 putName(FSP_FSCTL_TRANSACT_REQ *req, UINT16 offset, const std::wstring &s) {
  memcpy(req->Buffer + offset, s.c_str(), (s.size() + 1) * sizeof(WCHAR));
  return (UINT16)(((s.size() + 1) * sizeof(WCHAR) + 7) & ~7u);
}
void setContext(FSP_FSCTL_TRANSACT_REQ *req, Handle *h) {
  auto *c = (FSP_FSCTL_TRANSACT_FULL_CONTEXT *)req->Req.Raw;
  c->UserContext = h->userContext;
  c->UserContext2 = h->userContext2;
}
std::wstring parentOf(const std::wstring &n) {
  size_t cut = n.find_last_of(L'\\');
  return cut == 0 ? L"\\" : n.substr(0, cut);
}
bool under(const std::wstring &k, const std::wstring &dirKey) {
  if (dirKey == L"\\") return k.size() > 1;
  return k.size() > dirKey.size() && k.compare(0, dirKey.size(), dirKey) == 0 && k[dirKey.size()] == L'\\';
}
void invalidateParentListing(Volume *v, const std::wstring &name) {
  auto p = v->nodes.find(v->key(parentOf(name)));
  if (p != v->nodes.end()) p->second->dirCacheValid = false;
}
std::wstring upper(std::wstring s) {
  CharUpperBuffW(&s[0], (DWORD)s.size());
  return s;
}
// The driver keeps the FileInfo of every answer that carries one (FspFileNodeSetFileInfo,
// file.c:1795-1840), valid for FileInfoTimeout.
void setInfo(Node *n, const FSP_FSCTL_FILE_INFO &fi) {
  n->info = fi;
  n->infoValid = true;
  n->infoTick = GetTickCount();
}

// src/sys/name.c FspFileNameIsValid, as it applies to a path that starts with '\'.
NTSTATUS checkName(Volume *v, const std::wstring &p) {
  if (p.empty() || p[0] != L'\\') return STATUS_OBJECT_NAME_INVALID;
  size_t start = 1;
  for (size_t i = 1; i <= p.size(); i++) {
    if (i == p.size() || p[i] == L'\\') {
      size_t len = i - start;
      if (len == 0 && p.size() > 1) return STATUS_OBJECT_NAME_INVALID;  // "\\" inside
      if (len > v->params.MaxComponentLength) return STATUS_OBJECT_NAME_INVALID;
      start = i + 1;
      continue;
    }
    wchar_t c = p[i];
    if (c < 32 || wcschr(L"<>\"/|?*", c)) return STATUS_OBJECT_NAME_INVALID;
    if (c == L':' && !v->params.NamedStreams) return STATUS_OBJECT_NAME_INVALID;
  }
  return STATUS_SUCCESS;
}

// IoCheckShareAccess: the new opener's access must be allowed by everyone's share, and its share
// must allow everyone's access.
bool shareConflicts(const Node *n, UINT32 access, UINT32 share) {
  bool r = access & (FILE_READ_DATA | FILE_EXECUTE), w = access & (FILE_WRITE_DATA | FILE_APPEND_DATA),
       d = access & DELETE;
  if (!r && !w && !d) return false;
  if ((r && n->sharedRead < n->openCount) || (w && n->sharedWrite < n->openCount) ||
      (d && n->sharedDelete < n->openCount))
    return true;
  if ((n->readers && !(share & FILE_SHARE_READ)) || (n->writers && !(share & FILE_SHARE_WRITE)) ||
      (n->deleters && !(share & FILE_SHARE_DELETE)))
    return true;
  return false;
}
void addShare(Node *n, UINT32 access, UINT32 share) {
  bool r = access & (FILE_READ_DATA | FILE_EXECUTE), w = access & (FILE_WRITE_DATA | FILE_APPEND_DATA),
       d = access & DELETE;
  if (!r && !w && !d) return;
  n->openCount++;
  n->readers += r;
  n->writers += w;
  n->deleters += d;
  n->sharedRead += !!(share & FILE_SHARE_READ);
  n->sharedWrite += !!(share & FILE_SHARE_WRITE);
  n->sharedDelete += !!(share & FILE_SHARE_DELETE);
}
void removeShare(Node *n, UINT32 access, UINT32 share) {
  bool r = access & (FILE_READ_DATA | FILE_EXECUTE), w = access & (FILE_WRITE_DATA | FILE_APPEND_DATA),
       d = access & DELETE;
  if (!r && !w && !d) return;
  n->openCount--;
  n->readers -= r;
  n->writers -= w;
  n->deleters -= d;
  n->sharedRead -= !!(share & FILE_SHARE_READ);
  n->sharedWrite -= !!(share & FILE_SHARE_WRITE);
  n->sharedDelete -= !!(share & FILE_SHARE_DELETE);
}

// create.c:1439-1467: the open is undone with a Close only; the file system never sees a Cleanup.
void postClose(Volume *v, UINT64 uc, UINT64 uc2) {
  Buffers b;
  b.req()->Kind = FspFsctlTransactCloseKind;
  b.req()->Req.Close.UserContext = uc;
  b.req()->Req.Close.UserContext2 = uc2;
  transactForIo(v, b.req(), b.rsp());
}

void dropRef(Volume *v, Node *n) {
  if (--n->refs > 0) return;
  if (n->inTable) v->nodes.erase(v->key(n->name));
  delete n;
}

// Maps a reparse target back onto this volume when it names it: the volume's device name, the
// mount point in the \??\ namespace, or a device-relative symlink. Empty when it leads elsewhere.
std::wstring mapBack(Volume *v, const std::wstring &target) {
  std::wstring vol = v->fs->VolumeName;
  auto tail = [](const std::wstring &t, size_t n) { return t.size() == n ? std::wstring(L"\\") : t.substr(n); };
  if (upper(target).rfind(upper(vol), 0) == 0 && (target.size() == vol.size() || target[vol.size()] == L'\\'))
    return tail(target, vol.size());
  if (v->fs->MountPoint) {
    std::wstring mp = L"\\??\\" + std::wstring(v->fs->MountPoint);
    if (upper(target).rfind(upper(mp), 0) == 0 && (target.size() == mp.size() || target[mp.size()] == L'\\'))
      return tail(target, mp.size());
  }
  return L"";
}
}  // namespace

namespace wfd {

OpenResult ioOpen(Volume *v, const OpenArgs &a0) {
  OpenResult out;
  OpenArgs a = a0;
  for (int reparses = 0; reparses < 63; reparses++) {
    // I/O manager and driver argument checks (create.c:265-580).
    if ((a.options & FILE_DIRECTORY_FILE) && (a.options & FILE_NON_DIRECTORY_FILE))
      return out.status = STATUS_INVALID_PARAMETER, out;
    if (a.options & FILE_OPEN_BY_FILE_ID) return out.status = STATUS_NOT_IMPLEMENTED, out;
    std::wstring name = a.path;
    while (name.size() > 1 && name[0] == L'\\' && name[1] == L'\\') name.erase(0, 1);
    bool trailing = false;
    if (name.size() > 1 && name.back() == L'\\') {
      name.pop_back();
      trailing = true;
    }
    NTSTATUS r = checkName(v, name);
    if (!NT_SUCCESS(r)) return out.status = r, out;
    UINT32 disp = a.disposition;
    bool root = name == L"\\";
    if (root && (disp == 2 || disp == 0 || disp == 4 || disp == 5 || a.openTarget))
      return out.status = STATUS_ACCESS_DENIED, out;
    if (root && (a.options & FILE_DELETE_ON_CLOSE)) return out.status = STATUS_CANNOT_DELETE, out;
    UINT32 attrs = a.attributes & ~(FILE_ATTRIBUTE_NORMAL | FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT);
    if (a.options & FILE_DIRECTORY_FILE) attrs |= FILE_ATTRIBUTE_DIRECTORY;

    Buffers b;
    auto *req = b.req();
    req->Kind = FspFsctlTransactCreateKind;
    auto &c = req->Req.Create;
    c.CreateOptions = (disp << 24) | (a.options & 0xffffff);
    c.FileAttributes = attrs;
    HANDLE token = v->token;
    if (a.lowIntegrity) {
      std::lock_guard<std::mutex> g(v->lock);
      if (!v->lowToken) v->lowToken = lowIntegrityToken(v->token);
      token = v->lowToken;
    }
    c.AccessToken = ((UINT64)GetCurrentProcessId() << 32) | (UINT64)(UINT_PTR)token;
    c.DesiredAccess = a.access;
    c.ShareAccess = a.share;
    c.UserMode = 1;
    c.HasTraversePrivilege = 1;
    c.OpenTargetDirectory = a.openTarget;
    c.CaseSensitive = v->params.CaseSensitiveSearch;
    c.HasTrailingBackslash = trailing;
    UINT16 off = putName(req, 0, name);
    req->FileName.Offset = 0;
    req->FileName.Size = (UINT16)((name.size() + 1) * sizeof(WCHAR));
    if (!a.sddl.empty()) {
      PSECURITY_DESCRIPTOR sd = nullptr;
      ULONG sdLen = 0;
      if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(a.sddl.c_str(), 1, &sd, &sdLen))
        return out.status = STATUS_INVALID_SECURITY_DESCR, out;
      memcpy(req->Buffer + off, sd, sdLen);
      c.SecurityDescriptor.Offset = off;
      c.SecurityDescriptor.Size = (UINT16)sdLen;
      off += (UINT16)((sdLen + 7) & ~7u);
      LocalFree(sd);
    }
    if (sizeof(FSP_FSCTL_TRANSACT_REQ) + off > FSP_FSCTL_TRANSACT_REQ_SIZEMAX)
      return out.status = STATUS_INVALID_PARAMETER, out;  // iop.c:80-83
    req->Size = (UINT16)(sizeof(FSP_FSCTL_TRANSACT_REQ) + off);
    auto *rsp = b.rsp();
    r = transactForIo(v, req, rsp);
    out.information = rsp->IoStatus.Information;
    if (r == STATUS_REPARSE) {
      // create.c:905-1024: what the driver makes of the file system's reparse answer.
      std::wstring next;
      UINT32 tag = rsp->IoStatus.Information;
      UINT8 *buf = rsp->Buffer + rsp->Rsp.Create.Reparse.Buffer.Offset;
      UINT16 size = rsp->Rsp.Create.Reparse.Buffer.Size;
      if (tag == 0) {
        next.assign((WCHAR *)buf, size / sizeof(WCHAR));
        if (next.empty() || next[0] != L'\\') return out.status = STATUS_REPARSE_POINT_NOT_RESOLVED, out;
        std::wstring mapped = mapBack(v, next);
        if (mapped.empty()) return out.reparsedTo = next, out.status = STATUS_REPARSE, out;
        next = mapped;
      } else {
        auto *rd = (ReparseData *)buf;
        if (size < 8 || rd->ReparseTag != tag) return out.status = STATUS_IO_REPARSE_DATA_INVALID, out;
        if (tag == IO_REPARSE_TAG_SYMLINK_) {
          auto &sl = rd->SymbolicLink;
          std::wstring t(sl.PathBuffer + sl.SubstituteNameOffset / sizeof(WCHAR), sl.SubstituteNameLength / sizeof(WCHAR));
          if (t.empty() || t[0] != L'\\') return out.status = STATUS_REPARSE_POINT_NOT_RESOLVED, out;
          if (sl.Flags & SYMLINK_FLAG_RELATIVE_) {
            next = t;  // device-relative: the driver prefixes this volume (create.c:928-958)
          } else {
            next = mapBack(v, t);
            if (next.empty()) return out.reparsedTo = t, out.status = STATUS_REPARSE, out;
          }
        } else if (tag == IO_REPARSE_TAG_MOUNT_POINT_) {
          auto &mp = rd->MountPoint;
          std::wstring t(mp.PathBuffer + mp.SubstituteNameOffset / sizeof(WCHAR), mp.SubstituteNameLength / sizeof(WCHAR));
          std::wstring rest = name.substr(name.size() - rd->Reserved / sizeof(WCHAR));
          while (!t.empty() && t.back() == L'\\') t.pop_back();
          std::wstring full = t + rest;
          next = mapBack(v, full);
          if (next.empty()) return out.reparsedTo = full, out.status = STATUS_REPARSE, out;
        } else {
          return out.reparsedTo = L"(tag)", out.status = STATUS_REPARSE, out;
        }
      }
      a.path = next;
      continue;
    }
    if (!NT_SUCCESS(r)) return out.status = r, out;

    auto &op = rsp->Rsp.Create.Opened;
    UINT64 uc = op.UserContext, uc2 = op.UserContext2;
    std::wstring stored = upper(name);
    if (op.FileName.Size) {
      std::wstring norm((WCHAR *)(rsp->Buffer + op.FileName.Offset), op.FileName.Size / sizeof(WCHAR));
      std::wstring opened = a.openTarget ? parentOf(name) : name;  // open-target opens the parent
      if (upper(norm) != upper(opened)) {
        problem(L"the normalized name " + norm + L" is not the opened name " + opened + L" (create.c:1035-1070)");
        postClose(v, uc, uc2);
        return out.status = STATUS_OBJECT_NAME_INVALID, out;
      }
      stored = norm;
    }
    if (a.openTarget && !op.FileName.Size) stored = upper(parentOf(name));
    bool isDir = !!(op.FileInfo.FileAttributes & FILE_ATTRIBUTE_DIRECTORY);
    if (!a.openTarget && (a.options & FILE_DIRECTORY_FILE) && !isDir)
      problem(L"FILE_DIRECTORY_FILE was asked and the file system opened a non-directory");
    if (!a.openTarget && (a.options & FILE_NON_DIRECTORY_FILE) && isDir)
      problem(L"FILE_NON_DIRECTORY_FILE was asked and the file system opened a directory");
    if (out.information == 2 /*FILE_CREATED*/ && disp == 1) problem(L"FILE_OPEN reported FILE_CREATED");

    // FspFileNodeOpen (file.c:607-790): delete-pending and share access, after the FS opened.
    UINT32 granted = op.GrantedAccess;
    std::lock_guard<std::mutex> g(v->lock);
    std::wstring key = v->key(a.openTarget ? parentOf(name) : name);
    Node *n;
    auto it = v->nodes.find(key);
    bool existed = it != v->nodes.end();
    if (existed) {
      n = it->second;
      if (n->deletePending) {
        v->lock.unlock();
        postClose(v, uc, uc2);
        v->lock.lock();
        return out.status = STATUS_DELETE_PENDING, out;
      }
    } else {
      n = new Node();
      n->name = stored;
      n->isDir = isDir;
      n->userContext = uc;
      n->userContext2 = uc2;
      setInfo(n, op.FileInfo);
      v->nodes[key] = n;
    }
    UINT32 shareAccess = granted;
    bool overwrite = disp == 0 || disp == 4 || disp == 5;
    if (overwrite && out.information != 2) shareAccess |= disp == 0 ? DELETE : FILE_WRITE_DATA;
    bool conflict = shareConflicts(n, shareAccess, a.share);
    bool image = n->mappedImage && (granted & FILE_WRITE_DATA || (a.options & FILE_DELETE_ON_CLOSE));
    if (conflict || image) {
      if (!existed) {
        v->nodes.erase(key);
        delete n;
      }
      v->lock.unlock();
      postClose(v, uc, uc2);
      v->lock.lock();
      return out.status = conflict ? STATUS_SHARING_VIOLATION
                                   : (granted & FILE_WRITE_DATA ? STATUS_SHARING_VIOLATION : STATUS_CANNOT_DELETE),
             out;
    }
    addShare(n, shareAccess, a.share);
    n->handles++;
    n->refs++;
    auto *h = new Handle();
    h->node = n;
    h->granted = granted;
    h->share = a.share;
    h->deleteOnClose = !!(a.options & FILE_DELETE_ON_CLOSE);
    // In the default context mode the first open's context is kept (create.c:1026, 1126-1130).
    h->userContext = v->fs->UmFileContextIsUserContext2 || v->fs->UmFileContextIsFullContext ? uc : n->userContext;
    h->userContext2 = uc2;
    if (out.information == 2) invalidateParentListing(v, name);

    if (overwrite && out.information != 2 && !a.openTarget) {
      // create.c:1190-1233: HIDDEN and SYSTEM must be kept, then an Overwrite request.
      UINT32 keep = n->info.FileAttributes & (FILE_ATTRIBUTE_HIDDEN | FILE_ATTRIBUTE_SYSTEM);
      NTSTATUS ow;
      if ((attrs & keep) != keep) {
        ow = STATUS_ACCESS_DENIED;
        v->lock.unlock();
        postClose(v, uc, uc2);
        v->lock.lock();
      } else {
        Buffers ob;
        ob.req()->Kind = FspFsctlTransactOverwriteKind;
        ob.req()->Req.Overwrite.UserContext = h->userContext;
        ob.req()->Req.Overwrite.UserContext2 = h->userContext2;
        ob.req()->Req.Overwrite.FileAttributes = attrs & ~(FILE_ATTRIBUTE_NORMAL | FILE_ATTRIBUTE_DIRECTORY);
        ob.req()->Req.Overwrite.AllocationSize = 0;
        ob.req()->Req.Overwrite.Supersede = disp == 0;
        v->lock.unlock();
        ow = transactForIo(v, ob.req(), ob.rsp());  // on failure the DLL closed it
        v->lock.lock();
        if (NT_SUCCESS(ow)) {
          setInfo(n, ob.rsp()->Rsp.Overwrite.FileInfo);
          if (n->info.FileSize != 0) problem(L"Overwrite left a non-zero FileSize; overwrite truncates to 0");
          invalidateParentListing(v, name);
        }
      }
      if (!NT_SUCCESS(ow)) {
        removeShare(n, shareAccess, a.share);
        n->handles--;
        if (--n->refs == 0) {
          v->nodes.erase(key);
          delete n;
        }
        delete h;
        return out.status = ow, out;
      }
    }
    out.status = STATUS_SUCCESS;
    out.handle = h;
    return out;
  }
  out.status = STATUS_REPARSE_POINT_NOT_RESOLVED;
  return out;
}

void ioCleanup(Volume *v, Handle *h) {
  if (h->cleaned) return;
  h->cleaned = true;
  Node *n = h->node;
  Buffers b;
  auto *req = b.req();
  req->Kind = FspFsctlTransactCleanupKind;
  setContext(req, h);
  std::wstring deletedName;
  bool send;
  {
    std::lock_guard<std::mutex> g(v->lock);
    if (h->deleteOnClose) n->deletePending = true;
    bool last = n->handles == 1;
    bool del = (n->deletePending && last) || (h->posixDelete && !n->posixDeleted);
    auto &c = req->Req.Cleanup;
    c.Delete = del;
    c.SetAllocationSize = last && !n->deletePending && n->truncateOnClose;
    c.SetArchiveBit = h->modified && !h->setAttrs && !n->isDir;
    c.SetLastAccessTime = 1;
    c.SetLastWriteTime = h->modified;
    c.SetChangeTime = h->modified || h->setAttrs;
    if (del) {
      req->FileName.Size = (UINT16)((n->name.size() + 1) * sizeof(WCHAR));
      putName(req, 0, n->name);
      deletedName = n->name;
      if (h->posixDelete) n->posixDeleted = true;
    }
    removeShare(n, h->granted | (h->node->openCount ? 0 : 0), h->share);
    n->handles--;
    if (last) n->truncateOnClose = false;
    // cleanup.c:132-157: only SetLastAccessTime to say: not sent at all.
    send = !(v->params.PostCleanupWhenModifiedOnly && !c.Delete && !c.SetAllocationSize && !c.SetArchiveBit &&
             !c.SetLastWriteTime && !c.SetChangeTime);
    if (del) {
      // The name leaves the table whether or not the FS deleted anything (cleanup.c:171-176).
      v->nodes.erase(v->key(n->name));
      n->inTable = false;
      invalidateParentListing(v, n->name);
    }
  }
  if (send) transactForIo(v, req, b.rsp());
  if (!deletedName.empty()) {
    // What the real driver cannot check and a test must: did the file system delete it?
    OpenArgs probe;
    probe.path = deletedName;
    OpenResult r = ioOpen(v, probe);
    if (r.handle) {
      problem(L"after the delete cleanup of " + deletedName + L" the name still opens: the file system ignored "
              L"FspCleanupDelete (WinFsp's driver reports the delete to the program regardless)");
      ioCleanup(v, r.handle);
      ioClose(v, r.handle);
    }
  }
}

void ioClose(Volume *v, Handle *h) {
  if (h->closed) return;
  if (!h->cleaned) ioCleanup(v, h);
  if (h->sections > 0) return;  // the section holds the file object: Close once it is unmapped
  h->closed = true;
  Buffers b;
  b.req()->Kind = FspFsctlTransactCloseKind;
  setContext(b.req(), h);
  transactForIo(v, b.req(), b.rsp());
  std::lock_guard<std::mutex> g(v->lock);
  dropRef(v, h->node);
}

NTSTATUS ioWrite(Volume *v, Handle *h, UINT64 offset, const std::string &data) {
  if (!(h->granted & (FILE_WRITE_DATA | FILE_APPEND_DATA))) return STATUS_ACCESS_DENIED;
  if (h->node->isDir) return STATUS_INVALID_DEVICE_REQUEST;
  Buffers b;
  std::string copy = data;
  b.req()->Kind = FspFsctlTransactWriteKind;
  setContext(b.req(), h);
  b.req()->Req.Write.Address = (UINT64)(UINT_PTR)copy.data();
  b.req()->Req.Write.Offset = offset;
  b.req()->Req.Write.Length = (UINT32)copy.size();
  NTSTATUS r = transactForIo(v, b.req(), b.rsp());
  if (NT_SUCCESS(r)) {
    if (b.rsp()->IoStatus.Information != copy.size()) problem(L"Write transferred fewer bytes than asked");
    std::lock_guard<std::mutex> g(v->lock);
    h->modified = true;
    h->node->truncateOnClose = true;
    setInfo(h->node, b.rsp()->Rsp.Overwrite.FileInfo);
    if (h->node->info.FileSize < offset + copy.size()) problem(L"Write returned a FileSize smaller than what it wrote");
  }
  return r;
}

NTSTATUS ioRead(Volume *v, Handle *h, UINT64 offset, ULONG length, std::string *data, bool paging) {
  if (paging && (h->sections == 0 || h->closed)) return STATUS_INVALID_PARAMETER;
  if (!paging && !(h->granted & FILE_READ_DATA)) return STATUS_ACCESS_DENIED;
  if (h->node->isDir) return STATUS_INVALID_DEVICE_REQUEST;
  Buffers b;
  std::string buf(length, '\0');
  b.req()->Kind = FspFsctlTransactReadKind;
  setContext(b.req(), h);
  b.req()->Req.Write.Address = (UINT64)(UINT_PTR)&buf[0];
  b.req()->Req.Write.Offset = offset;
  b.req()->Req.Write.Length = length;
  NTSTATUS r = transactForIo(v, b.req(), b.rsp());
  if (NT_SUCCESS(r)) data->assign(buf.data(), b.rsp()->IoStatus.Information);
  return r;
}

NTSTATUS ioGetInfo(Volume *v, Handle *h, FSP_FSCTL_FILE_INFO *info, bool *fromCache) {
  if (fromCache) *fromCache = false;
  {
    // fileinfo.c:1027 answers a query from the node's FileInfo while it has not expired
    // (file.c:1703-1721); a notify of the name drops it (file.c:2372-2471).
    std::lock_guard<std::mutex> g(v->lock);
    DWORD t = v->params.FileInfoTimeout;
    if (t != 0 && h->node->infoValid && (t == INFINITE || GetTickCount() - h->node->infoTick < t)) {
      *info = h->node->info;
      if (fromCache) *fromCache = true;
      return STATUS_SUCCESS;
    }
  }
  Buffers b;
  b.req()->Kind = FspFsctlTransactQueryInformationKind;
  setContext(b.req(), h);
  NTSTATUS r = transactForIo(v, b.req(), b.rsp());
  if (NT_SUCCESS(r)) {
    *info = b.rsp()->Rsp.Overwrite.FileInfo;
    std::lock_guard<std::mutex> g(v->lock);
    setInfo(h->node, *info);
  }
  return r;
}

NTSTATUS ioSetAttributes(Volume *v, Handle *h, UINT32 attrs, UINT64 creationTime) {
  if (!(h->granted & FILE_WRITE_ATTRIBUTES)) return STATUS_ACCESS_DENIED;
  Buffers b;
  b.req()->Kind = FspFsctlTransactSetInformationKind;
  setContext(b.req(), h);
  auto &s = b.req()->Req.SetInformation;
  s.FileInformationClass = 4;
  // fileinfo.c:1256-1316: 0 means "no change"; NORMAL is dropped, DIRECTORY kept for directories.
  UINT32 a = attrs == 0 ? INVALID_FILE_ATTRIBUTES : (attrs & ~FILE_ATTRIBUTE_NORMAL);
  if (a != INVALID_FILE_ATTRIBUTES) a = h->node->isDir ? (a | FILE_ATTRIBUTE_DIRECTORY) : (a & ~FILE_ATTRIBUTE_DIRECTORY);
  s.Info.Basic.FileAttributes = a;
  s.Info.Basic.CreationTime = creationTime;
  NTSTATUS r = transactForIo(v, b.req(), b.rsp());
  if (NT_SUCCESS(r)) {
    std::lock_guard<std::mutex> g(v->lock);
    h->setAttrs = true;
    setInfo(h->node, b.rsp()->Rsp.Overwrite.FileInfo);
    invalidateParentListing(v, h->node->name);
  }
  return r;
}

NTSTATUS ioSetSize(Volume *v, Handle *h, UINT64 size) {
  if (!(h->granted & FILE_WRITE_DATA)) return STATUS_ACCESS_DENIED;
  Buffers b;
  b.req()->Kind = FspFsctlTransactSetInformationKind;
  setContext(b.req(), h);
  b.req()->Req.SetInformation.FileInformationClass = 20;
  b.req()->Req.SetInformation.Info.EndOfFile.FileSize = size;
  NTSTATUS r = transactForIo(v, b.req(), b.rsp());
  if (NT_SUCCESS(r)) {
    std::lock_guard<std::mutex> g(v->lock);
    h->modified = true;
    h->node->truncateOnClose = true;
    setInfo(h->node, b.rsp()->Rsp.Overwrite.FileInfo);
    if (h->node->info.FileSize != size) problem(L"SetFileSize returned a FileSize other than the one set");
  }
  return r;
}

namespace {
// fileinfo.c:1455-1723, one attempt with one information class.
NTSTATUS dispositionOnce(Volume *v, Handle *h, UINT32 flags, bool ex) {
  Node *n = h->node;
  if (ex && !v->params.SupportsPosixUnlinkRename) return STATUS_INVALID_PARAMETER;
  if (flags & 0x08) return STATUS_NOT_SUPPORTED;  // FILE_DISPOSITION_ON_CLOSE
  if (!(h->granted & DELETE)) return STATUS_ACCESS_DENIED;  // the I/O manager's check
  if (n->name == L"\\") return STATUS_CANNOT_DELETE;
  if (n->posixDeleted) return STATUS_FILE_DELETED;
  if ((flags & 1) && n->mappedImage) return STATUS_CANNOT_DELETE;
  flags &= 0x1 | 0x2 | 0x10;
  if ((flags & 1) && h->cachedDisposition) return h->cachedDisposition;
  NTSTATUS r;
  if (v->params.PostDispositionWhenNecessaryOnly && !n->isDir) {
    r = (flags & 1) && !(flags & 0x10) && (n->info.FileAttributes & FILE_ATTRIBUTE_READONLY) ? STATUS_CANNOT_DELETE
                                                                                               : STATUS_SUCCESS;
  } else {
    Buffers b;
    b.req()->Kind = FspFsctlTransactSetInformationKind;
    setContext(b.req(), h);
    auto &s = b.req()->Req.SetInformation;
    s.FileInformationClass = ex ? 64 : 13;
    if (ex)
      s.Info.DispositionEx.Flags = flags;
    else
      s.Info.Disposition.Delete = flags & 1;
    putName(b.req(), 0, n->name);
    b.req()->FileName.Size = (UINT16)((n->name.size() + 1) * sizeof(WCHAR));
    r = transactForIo(v, b.req(), b.rsp());
  }
  if (r == STATUS_ACCESS_DENIED || r == STATUS_DIRECTORY_NOT_EMPTY || r == STATUS_CANNOT_DELETE)
    h->cachedDisposition = r;
  if (NT_SUCCESS(r)) {
    std::lock_guard<std::mutex> g(v->lock);
    n->deletePending = flags & 1;
    h->posixDelete = (flags & 1) && (flags & 2);
  }
  return r;
}
}  // namespace

NTSTATUS ioDisposition(Volume *v, Handle *h, UINT32 flags, int mode) {
  if (mode == 1) return dispositionOnce(v, h, flags & 1, false);
  if (mode == 2) return dispositionOnce(v, h, flags, true);
  // DeleteFileW / RemoveDirectoryW: Ex with POSIX semantics first, then the classic class on any
  // failure (fileinfo.c:1590-1601 describes it).
  NTSTATUS r = dispositionOnce(v, h, flags | 0x2, true);
  if (!NT_SUCCESS(r)) r = dispositionOnce(v, h, flags & 1, false);
  return r;
}

NTSTATUS ioRename(Volume *v, Handle *h, const std::wstring &newPath, bool replace, bool posix) {
  if (!(h->granted & DELETE)) return STATUS_ACCESS_DENIED;
  Node *n = h->node;
  if (n->name == L"\\") return STATUS_INVALID_PARAMETER;
  if (posix && !v->params.SupportsPosixUnlinkRename) return STATUS_INVALID_PARAMETER;
  // MoveFileExW: the target's directory is opened with SL_OPEN_TARGET_DIRECTORY first.
  OpenArgs t;
  t.path = newPath;
  t.openTarget = true;
  t.access = (n->isDir ? FILE_ADD_SUBDIRECTORY : FILE_WRITE_DATA) | SYNCHRONIZE;
  t.share = FILE_SHARE_READ | FILE_SHARE_WRITE;
  t.options = FILE_DIRECTORY_FILE;
  OpenResult tr = ioOpen(v, t);
  if (!tr.handle) return tr.status;
  NTSTATUS r = STATUS_SUCCESS;
  // Whether the target exists is the file system's to decide, not the I/O manager's: a name that
  // differs only in case from the file's own is the same file ([MS-FSA] 2.1.5.15.11,
  // TargetExistsSameFile), which WinFsp passes on to Rename with ReplaceIfExists as asked
  // (fileinfo.c:1880-1909, fsop.c:1186-1190) and its own test expects to succeed
  // (tst/winfsp-tests/info-test.c:1462-1481, MoveFileExW(file1, FILE1, 0)). The collision of a
  // rename onto another file without replace is the file system's answer (memfs.cpp:1721-1727).
  // FILE_EXISTS from the target-directory open is kept only to check that answer below.
  const bool targetExisted = tr.information == 4 /*FILE_EXISTS*/;
  std::wstring newName = newPath;
  while (newName.size() > 1 && newName.back() == L'\\') newName.pop_back();
  if (NT_SUCCESS(r) && newName == n->name) {
    ioClose(v, tr.handle);
    return STATUS_SUCCESS;  // same name, same case: the FS is not asked (fileinfo.c:1897-1909)
  }
  if (NT_SUCCESS(r)) {
    std::lock_guard<std::mutex> g(v->lock);
    std::wstring oldKey = v->key(n->name), newKey = v->key(newName);
    for (auto &kv : v->nodes) {
      Node *d = kv.second;
      if (d == n || d == tr.handle->node) continue;
      // Old name: an open descendant; POSIX rename tolerates openers that share delete.
      if (under(kv.first, oldKey) && d->handles > 0 && !(posix && d->openCount == d->sharedDelete)) {
        r = posix ? STATUS_SHARING_VIOLATION : STATUS_ACCESS_DENIED;
        break;
      }
      // New name: open itself, or anything at all under it, or mapped as an image.
      if ((kv.first == newKey && (d->handles > 0 || d->mappedImage)) || under(kv.first, newKey)) {
        r = (posix && kv.first == newKey && d->openCount == d->sharedDelete) ? STATUS_SUCCESS : STATUS_ACCESS_DENIED;
        if (!NT_SUCCESS(r)) break;
      }
    }
    if (NT_SUCCESS(r)) v->renameInFlight = true;
  }
  if (NT_SUCCESS(r)) {
    Buffers b;
    auto *req = b.req();
    req->Kind = FspFsctlTransactSetInformationKind;
    setContext(req, h);
    auto &s = req->Req.SetInformation;
    s.FileInformationClass = posix ? 65 : 10;
    UINT16 off = putName(req, 0, n->name);
    req->FileName.Size = (UINT16)((n->name.size() + 1) * sizeof(WCHAR));
    putName(req, off, newName);
    s.Info.Rename.NewFileName.Offset = off;
    s.Info.Rename.NewFileName.Size = (UINT16)((newName.size() + 1) * sizeof(WCHAR));
    if (replace) s.Info.Rename.AccessToken = ((UINT64)GetCurrentProcessId() << 32) | (UINT64)(UINT_PTR)v->token;
    s.Info.RenameEx.Flags = (replace ? 1 : 0) | (posix ? 2 : 0);
    r = transactForIo(v, req, b.rsp());
    if (NT_SUCCESS(r) && targetExisted && !replace && v->key(newName) != v->key(n->name))
      problem(L"Rename onto the existing " + newName + L" succeeded without ReplaceIfExists; the file system must "
              L"answer STATUS_OBJECT_NAME_COLLISION ([MS-FSCC] 2.4.42, FileRenameInformation)");
    std::lock_guard<std::mutex> g(v->lock);
    v->renameInFlight = false;
    if (NT_SUCCESS(r)) {
      // The driver renames its node and every descendant (fileinfo.c:1941-1975).
      std::wstring oldName = n->name, oldKey = v->key(oldName);
      std::vector<Node *> moved;
      for (auto it = v->nodes.begin(); it != v->nodes.end();) {
        if (it->first == oldKey || under(it->first, oldKey)) {
          moved.push_back(it->second);
          it = v->nodes.erase(it);
        } else {
          ++it;
        }
      }
      auto victim = v->nodes.find(v->key(newName));
      if (victim != v->nodes.end()) {
        victim->second->inTable = false;
        v->nodes.erase(victim);
      }
      for (Node *m : moved) {
        m->name = newName + m->name.substr(oldName.size());
        v->nodes[v->key(m->name)] = m;
      }
      invalidateParentListing(v, oldName);
      invalidateParentListing(v, newName);
    }
  }
  ioClose(v, tr.handle);
  return r;
}

namespace {
// FsRtlIsNameInExpression for '*' and '?' (the DOS wildcards are not modelled).
bool matches(const wchar_t *p, const wchar_t *s) {
  if (!*p) return !*s;
  if (*p == L'*') {
    for (;; s++) {
      if (matches(p + 1, s)) return true;
      if (!*s) return false;
    }
  }
  if (!*s) return false;
  return (*p == L'?' || *p == *s) && matches(p + 1, s + 1);
}
}  // namespace

NTSTATUS ioList(Volume *v, Handle *h, const std::wstring &pattern0, ULONG length, std::vector<std::wstring> *names,
                bool *fromCache, std::vector<UINT32> *attrs) {
  Node *n = h->node;
  *fromCache = false;
  if (!n->isDir) return STATUS_INVALID_PARAMETER;
  if (!(h->granted & FILE_LIST_DIRECTORY)) return STATUS_ACCESS_DENIED;
  if (!h->patternSet) {
    h->patternSet = true;
    h->pattern = pattern0.empty() ? L"*" : pattern0;
    if (!v->params.CaseSensitiveSearch) h->pattern = upper(h->pattern);  // file.c:2552-2573
  }
  bool wild = h->pattern.find_first_of(L"*?<>\"") != std::wstring::npos;
  if (h->listedAll) return STATUS_NO_MORE_FILES;  // this handle's enumeration already reached its end
  if (!wild && h->listedAny) return STATUS_NO_MORE_FILES;  // dirctl.c:524-530
  bool passPattern = (v->params.PassQueryDirectoryPattern && h->pattern != L"*") ||
                     (!wild && v->params.PassQueryDirectoryFileName);
  std::wstring marker;
  bool haveMarker = false, eof = false, any = false;
  std::vector<std::wstring> seen;
  for (int batch = 0; batch < 10000 && !eof; batch++) {
    std::vector<UINT8> data(length);
    ULONG got = 0;
    bool cacheable = !passPattern && !haveMarker && v->dirInfoTimeout() != 0;
    {
      std::lock_guard<std::mutex> g(v->lock);
      DWORD t = v->dirInfoTimeout();
      if (cacheable && n->dirCacheValid && (t == INFINITE || GetTickCount() - n->dirCacheTick < t)) {
        data = n->dirCache;
        got = (ULONG)data.size();
        *fromCache = true;
      }
    }
    if (!*fromCache || batch > 0) {
      Buffers b;
      auto *req = b.req();
      req->Kind = FspFsctlTransactQueryDirectoryKind;
      setContext(req, h);
      auto &q = req->Req.QueryDirectory;
      q.Address = (UINT64)(UINT_PTR)data.data();
      q.Length = length;
      q.CaseSensitive = v->params.CaseSensitiveSearch;
      UINT16 off = 0;
      if (passPattern) {
        q.Pattern.Offset = off;
        q.Pattern.Size = (UINT16)((h->pattern.size() + 1) * sizeof(WCHAR));
        off += putName(req, off, h->pattern);
        q.PatternIsFileName = !wild;
      }
      if (haveMarker) {
        q.Marker.Offset = off;
        q.Marker.Size = (UINT16)((marker.size() + 1) * sizeof(WCHAR));
        off += putName(req, off, marker);
      }
      NTSTATUS r = transactForIo(v, req, b.rsp());
      if (!NT_SUCCESS(r)) return r;
      got = b.rsp()->IoStatus.Information;
      if (got > length) return STATUS_INTERNAL_ERROR;  // dirctl.c:902-903
      data.resize(got);
      if (cacheable) {
        std::lock_guard<std::mutex> g(v->lock);
        n->dirCache = data;
        n->dirCacheValid = true;
        n->dirCacheTick = GetTickCount();
      }
    }
    if (got == 0) break;
    size_t consumedThisBatch = 0;
    for (size_t off = 0; off + sizeof(UINT16) <= got;) {
      auto *di = (FSP_FSCTL_DIR_INFO *)(data.data() + off);
      if (di->Size < sizeof(FSP_FSCTL_DIR_INFO)) {
        eof = true;
        break;
      }
      if (off + di->Size > got) {
        problem(L"a directory record runs past the bytes transferred");
        return STATUS_INTERNAL_ERROR;
      }
      std::wstring name(di->FileNameBuf, (di->Size - sizeof(FSP_FSCTL_DIR_INFO)) / sizeof(WCHAR));
      if (name.empty() || name.find(L'\\') != std::wstring::npos || name.size() > v->params.MaxComponentLength)
        problem(L"directory entry with an invalid name: " + name);
      for (auto &s : seen)
        if (s == name) problem(L"ReadDirectory returned " + name + L" twice on one handle (marker not honoured?)");
      seen.push_back(name);
      marker = name;  // the last entry consumed, matched or not (dirctl.c:283-316)
      haveMarker = true;
      consumedThisBatch++;
      std::wstring cmp = v->params.CaseSensitiveSearch ? name : upper(name);
      if (matches(h->pattern.c_str(), cmp.c_str())) {
        names->push_back(name);
        if (attrs) attrs->push_back(di->FileInfo.FileAttributes);
        any = true;
        if (!wild) break;
      }
      off += (di->Size + 7u) & ~7u;
    }
    if (!wild && any) break;
    if (consumedThisBatch == 0 && !eof) {
      problem(L"ReadDirectory returned bytes but no entry and no end marker");
      break;
    }
  }
  if (!any) return h->listedAny ? STATUS_NO_MORE_FILES : STATUS_NO_SUCH_FILE;
  h->listedAny = true;
  h->listedAll = wild;
  if (n->name != L"\\") {
    bool dot = false, dotdot = false;
    for (auto &s : seen) dot |= s == L".", dotdot |= s == L"..";
    if (h->pattern == L"*" && (!dot || !dotdot))
      problem(L"a non-root directory listing without . and .. (Windows programs expect them; memfs returns them)");
  }
  return STATUS_SUCCESS;
}

NTSTATUS ioGetSecurity(Volume *v, Handle *h, std::wstring *sddl) {
  if (!(h->granted & READ_CONTROL)) return STATUS_ACCESS_DENIED;
  Buffers b;
  b.req()->Kind = FspFsctlTransactQuerySecurityKind;
  setContext(b.req(), h);
  NTSTATUS r = transactForIo(v, b.req(), b.rsp());
  if (!NT_SUCCESS(r)) return r;
  PSECURITY_DESCRIPTOR sd = b.rsp()->Buffer;
  ULONG size = b.rsp()->IoStatus.Information;
  if (!IsValidSecurityDescriptor(sd) || GetSecurityDescriptorLength(sd) > size) {
    problem(L"GetSecurity returned an invalid security descriptor or a size too small for it");
    return STATUS_INVALID_SECURITY_DESCR;
  }
  LPWSTR s = nullptr;
  if (ConvertSecurityDescriptorToStringSecurityDescriptorW(
          sd, 1,
          OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION |
              LABEL_SECURITY_INFORMATION,
          &s, nullptr)) {
    *sddl = s;
    LocalFree(s);
  }
  // Wine 8.0 leaves the mandatory label out of the SDDL it spells; the double adds it the way
  // Windows writes it (S:(ML;flags;policy;;;level)).
  BOOL present = FALSE, defaulted = FALSE;
  PACL sacl = nullptr;
  if (sddl->find(L"S:") == std::wstring::npos && GetSecurityDescriptorSacl(sd, &present, &sacl, &defaulted) &&
      present && sacl) {
    std::wstring label;
    for (DWORD i = 0; i < sacl->AceCount; i++) {
      void *ace = nullptr;
      if (!GetAce(sacl, i, &ace) || ((ACE_HEADER *)ace)->AceType != SYSTEM_MANDATORY_LABEL_ACE_TYPE) continue;
      auto *l = (SYSTEM_MANDATORY_LABEL_ACE *)ace;
      PSID sid = (PSID)&l->SidStart;
      DWORD rid = *GetSidSubAuthority(sid, *GetSidSubAuthorityCount(sid) - 1);
      const BYTE f = l->Header.AceFlags;
      label += L"(ML;" + std::wstring(f & OBJECT_INHERIT_ACE ? L"OI" : L"") + (f & CONTAINER_INHERIT_ACE ? L"CI" : L"") +
               (f & INHERIT_ONLY_ACE ? L"IO" : L"") + L";" + (l->Mask & 1 ? L"NW" : L"") + (l->Mask & 2 ? L"NR" : L"") +
               (l->Mask & 4 ? L"NX" : L"") + L";;;" +
               (rid == 0x1000 ? L"LW" : rid == 0x2000 ? L"ME" : rid == 0x3000 ? L"HI" : rid == 0x4000 ? L"SI"
                                                                                       : L"S-1-16-" + std::to_wstring(rid)) +
               L")";
    }
    if (!label.empty()) *sddl += L"S:" + label;
  }
  return r;
}

NTSTATUS ioSetReparse(Volume *v, Handle *h, const std::vector<UINT8> &data) {
  if (!v->params.ReparsePoints) return STATUS_INVALID_DEVICE_REQUEST;  // fsctl.c:162
  if (!(h->granted & (FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_ATTRIBUTES))) return STATUS_ACCESS_DENIED;
  Buffers b;
  auto *req = b.req();
  req->Kind = FspFsctlTransactFileSystemControlKind;
  setContext(req, h);
  UINT16 off = putName(req, 0, h->node->name);
  req->FileName.Size = (UINT16)((h->node->name.size() + 1) * sizeof(WCHAR));
  req->Req.FileSystemControl.FsControlCode = FSCTL_SET_REPARSE_POINT;
  req->Req.FileSystemControl.Buffer.Offset = off;
  req->Req.FileSystemControl.Buffer.Size = (UINT16)data.size();
  memcpy(req->Buffer + off, data.data(), data.size());
  NTSTATUS r = transactForIo(v, req, b.rsp());
  if (NT_SUCCESS(r)) {
    std::lock_guard<std::mutex> g(v->lock);
    h->node->info.FileAttributes |= FILE_ATTRIBUTE_REPARSE_POINT;
    invalidateParentListing(v, h->node->name);
  }
  return r;
}

NTSTATUS ioGetReparse(Volume *v, Handle *h, std::vector<UINT8> *data) {
  Buffers b;
  auto *req = b.req();
  req->Kind = FspFsctlTransactFileSystemControlKind;
  setContext(req, h);
  putName(req, 0, h->node->name);
  req->FileName.Size = (UINT16)((h->node->name.size() + 1) * sizeof(WCHAR));
  req->Req.FileSystemControl.FsControlCode = FSCTL_GET_REPARSE_POINT;
  NTSTATUS r = transactForIo(v, req, b.rsp());
  if (NT_SUCCESS(r)) data->assign(b.rsp()->Buffer, b.rsp()->Buffer + b.rsp()->IoStatus.Information);
  return r;
}

NTSTATUS ioVolumeInfo(Volume *v, FSP_FSCTL_VOLUME_INFO *vi) {
  Buffers b;
  b.req()->Kind = FspFsctlTransactQueryVolumeInformationKind;
  NTSTATUS r = transactForIo(v, b.req(), b.rsp());
  if (NT_SUCCESS(r)) memcpy(vi, b.rsp()->Rsp.Raw, sizeof *vi);
  return r;
}

}  // namespace wfd
