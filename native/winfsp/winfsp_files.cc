// The winfsp backend (see winfsp_native.cc): the per-open contexts (tracking, attributes, the
// copy-up at the first write, execute-opens' private copies) and the callbacks on opens and
// their data: volume information, security, Create/Open/Overwrite/Cleanup/Close, Read/Write/
// Flush, file information, sizes, deletes, Rename.
#include "winfsp_mount.h"

namespace shadowfs {
namespace winfsp_mount {

// ---------------------------------------------------------------- contexts

void WinFspMount::track(FileCtx* c) {
  std::lock_guard<std::mutex> lock(ctxMu_);
  ctxs_.insert(c);
}

void WinFspMount::untrack(FileCtx* c) {
  std::lock_guard<std::mutex> lock(ctxMu_);
  ctxs_.erase(c);
}

// After a rename through the volume the driver renames its own open nodes and every one below
// (research note §3.8); the contexts follow, so their later path-based calls reach the entry
// they opened.
void WinFspMount::renameContexts(Layer* L, const std::string& from, const std::string& to) {
  const bool fold = ov_->ignoresCase();
  std::lock_guard<std::mutex> lock(ctxMu_);
  for (FileCtx* c : ctxs_) {
    if (c->layer.get() != L) continue;
    const std::string& p = c->path;
    bool inside = fold ? sameOrInsideFolded(p, from)
                       : (p == from || (p.size() > from.size() && p.compare(0, from.size(), from) == 0 &&
                                        p[from.size()] == '/'));
    if (!inside || from.empty()) continue;
    c->path = to + p.substr(from.size());
  }
}

void WinFspMount::freeContext(FileCtx* c) {
  dropImageCopy(c);
  if (c->h) ov_->release(c->h);
  if (c->watch && watcher_) watcher_->unwatch(c->watch);
  delete c;
}

int WinFspMount::attrOf(FileCtx* c, Attr* a) {
  if (c->type == FileType::Regular) {
    std::shared_lock<SharedMutex> lock(c->mu);
    // A layer file: its inode, whatever its name is now. A file of the folder (opened for
    // reading, or for writing: the core then binds the handle to the layer's copy at its first
    // change and leaves `inode` null, the copy keeping A's inode number): the path first while
    // it names the same object, because a time or attribute change through a handle not yet
    // written lands on the name (Overlay::setattr) where the handle's fgetattr would still
    // show A's file; the handle itself once the name is gone.
    if (c->h && c->h->inode) return ov_->fgetattr(c->h, a);
    if (ov_->getattr(c->layer.get(), pathOf(c), a) == 0 && a->ino == c->ino) return 0;
    if (c->h) return ov_->fgetattr(c->h, a);
  }
  return ov_->getattr(c->layer.get(), pathOf(c), a);
}

NTSTATUS WinFspMount::infoOf(FileCtx* c, FSP_FSCTL_FILE_INFO* out) {
  Attr a;
  if (int e = attrOf(c, &a)) return statusFromErrno(e);
  fileInfoOf(a, c->linkToDirectory, kAllocationUnit, out);
  return st::SUCCESS;
}

// The first write or size change of a file opened for writing takes a writable core handle:
// that is when the core copies the folder's file into the layer (not at the open: finding 11).
// `truncate` (a size of 0) copies nothing. A file whose name went (deleted, or another file
// renamed over it) gets a nameless copy of what this handle has open, as on NTFS.
int WinFspMount::ensureWritable(FileCtx* c, bool truncate) {
  std::unique_lock<SharedMutex> lock(c->mu);
  if (c->upgraded) return 0;
  Layer* L = c->layer.get();
  if (!writable(L)) return EROFS;
  OpenIntent intent;
  intent.write = true;
  intent.truncate = truncate;
  // The open was recorded already (read-only in the core): its writes are the audit trail's
  // "write" of this path, not a second open.
  intent.transient = true;
  Handle* nh = nullptr;
  Attr a;
  int e = ov_->open(L, pathOf(c), intent, &nh, &a);
  if (e == 0 && a.ino != c->ino) {
    ov_->release(nh);
    nh = nullptr;
    e = ENOENT;
  }
  if (e == ENOENT && c->h) {
    e = ov_->writableCopy(c->h, &nh);
    if (e == 0 && truncate) {
      Attr v, out;
      v.size = 0;
      e = ov_->setattr(L, std::string(), nh, kSetSize, v, &out);
      if (e) ov_->release(nh);
    }
  }
  if (e) return e;
  if (c->h) ov_->release(c->h);
  c->h = nh;
  c->upgraded = true;
  return 0;
}

// An execute-open of A's file (see winfsp_native.cc): the copy this open reads, shared with the other
// execute-opens of the same file, made now when there is none. In a writable layer it is a
// nameless copy there (spilled like any layer file when big, never linked to a name); in the
// read-only view it is read into memory.
int WinFspMount::takeImageCopy(FileCtx* c) {
  const auto key = std::make_pair(static_cast<const Layer*>(c->layer.get()), c->ino);
  {
    std::lock_guard<std::mutex> lock(imageMu_);
    auto it = images_.find(key);
    if (it != images_.end()) {
      it->second->opens++;
      c->image = it->second;
      return 0;
    }
  }
  auto copy = std::make_unique<ImageCopy>();
  int e = writable(c->layer.get()) ? ov_->writableCopy(c->h, &copy->h) : EROFS;
  if (e == EROFS) {
    e = 0;
    for (uint64_t off = 0;;) {
      char buf[65536];
      size_t n = 0;
      if ((e = ov_->read(c->h, buf, sizeof buf, off, &n)) || n == 0) break;
      copy->bytes.append(buf, n);
      off += n;
    }
  }
  if (e) {
    if (copy->h) ov_->release(copy->h);
    return e;
  }
  ImageCopy* mine = copy.release();
  ImageCopy* use = mine;
  {
    std::lock_guard<std::mutex> lock(imageMu_);
    auto [it, added] = images_.emplace(key, mine);
    use = it->second;  // another execute-open of the same file made one meanwhile: share it
    use->opens++;
  }
  if (use != mine) {
    if (mine->h) ov_->release(mine->h);
    delete mine;
  }
  c->image = use;
  return 0;
}

// At the Close of an execute-open (the section, if any, is gone by then): the last one drops it.
void WinFspMount::dropImageCopy(FileCtx* c) {
  ImageCopy* img = c->image;
  if (!img) return;
  c->image = nullptr;
  {
    std::lock_guard<std::mutex> lock(imageMu_);
    if (--img->opens > 0) return;
    for (auto it = images_.begin(); it != images_.end(); ++it) {
      if (it->second == img) {
        images_.erase(it);
        break;
      }
    }
  }
  if (img->h) ov_->release(img->h);
  delete img;
}

// ---------------------------------------------------------------- the interface

NTSTATUS WinFspMount::GetVolumeInfo(FSP_FILE_SYSTEM* fs, FSP_FSCTL_VOLUME_INFO* info) {
  WinFspMount* m = self(fs);
  FsStats s;
  if (int e = m->ov_->statfs(&s)) return statusFromErrno(e);
  std::memset(info, 0, sizeof *info);
  info->TotalSize = s.blocks * s.frsize;
  info->FreeSize = s.bavail * s.frsize;
  static const wchar_t kLabel[] = L"shadowfs";
  info->VolumeLabelLength = static_cast<UINT16>((sizeof kLabel) - sizeof(wchar_t));
  std::memcpy(info->VolumeLabel, kLabel, info->VolumeLabelLength);
  return st::SUCCESS;
}

NTSTATUS WinFspMount::GetSecurityByName(FSP_FILE_SYSTEM* fs, PWSTR fileName, PUINT32 pAttributes,
                                        PSECURITY_DESCRIPTOR sd, SIZE_T* sdSize) {
  WinFspMount* m = self(fs);
  std::string path;
  if (!toCorePath(fileName, &path)) return st::OBJECT_NAME_INVALID;
  std::shared_ptr<Layer> L = m->ov_->current(m->view_);
  Attr a;
  if (int e = m->ov_->getattr(L.get(), path, &a)) {
    // A link on the way: WinFsp resolves it (ResolveReparsePoints) from this index on.
    UINT32 index = 0;
    if (m->findLinkOnTheWay(L.get(), fileName, &index) == 0) {
      if (pAttributes) *pAttributes = index;
      return st::REPARSE;
    }
    Attr parent;
    return statusOfLookup(e, e == ENOENT && !path.empty() &&
                                 m->ov_->getattr(L.get(), parentOf(path), &parent) != 0);
  }
  if (pAttributes)
    *pAttributes = attributesOf(a, a.type == FileType::Symlink && m->leadsToDirectory(L.get(), path));
  return copyDescriptor(m->sd_, sd, sdSize);
}

NTSTATUS WinFspMount::Create(FSP_FILE_SYSTEM* fs, PWSTR fileName, UINT32 createOptions, UINT32,
                             UINT32 fileAttributes, PSECURITY_DESCRIPTOR, UINT64, PVOID* pCtx,
                             FSP_FSCTL_FILE_INFO* info) {
  WinFspMount* m = self(fs);
  std::string path;
  if (!toCorePath(fileName, &path)) return st::OBJECT_NAME_INVALID;
  std::shared_ptr<Layer> L = m->ov_->current(m->view_);
  auto c = std::make_unique<FileCtx>();
  c->path = path;
  c->layer = L;
  Attr a;
  int e;
  if (createOptions & kFileDirectoryFile) {
    c->type = FileType::Directory;
    e = m->ov_->mkdir(L.get(), path, 0755, Caller{}, &a);
  } else {
    // New files are not executable (finding 12); READONLY asked at create is honoured.
    uint32_t perm = (fileAttributes & FILE_ATTRIBUTE_READONLY) ? 0444 : 0644;
    OpenIntent intent;
    intent.write = true;
    intent.exclusive = true;
    e = m->ov_->create(L.get(), path, perm, intent, Caller{}, &c->h, &a);
    c->upgraded = true;
  }
  if (e) return statusOfLookup(e, true);
  // HIDDEN, SYSTEM and the other attributes the core keeps, as asked (on the new object: the
  // file's handle, the directory by its path, which this create holds exclusively).
  if (fileAttributes & kWinAttrsKept) {
    Attr v;
    v.winAttrs = fileAttributes & kWinAttrsKept;
    e = m->ov_->setattr(L.get(), c->h ? std::string() : path, c->h, kSetWinAttrs, v, &a);
    if (e) {
      if (c->h) m->ov_->release(c->h);
      return statusFromErrno(e);
    }
  }
  c->ino = a.ino;
  fileInfoOf(a, false, kAllocationUnit, info);
  m->setNormalizedName(fileName, info);
  m->track(c.get());
  *pCtx = c.release();
  return st::SUCCESS;
}

NTSTATUS WinFspMount::Open(FSP_FILE_SYSTEM* fs, PWSTR fileName, UINT32 createOptions,
                           UINT32 grantedAccess, PVOID* pCtx, FSP_FSCTL_FILE_INFO* info) {
  WinFspMount* m = self(fs);
  std::string path;
  if (!toCorePath(fileName, &path)) return st::OBJECT_NAME_INVALID;
  std::shared_ptr<Layer> L = m->ov_->current(m->view_);
  Attr a;
  if (int e = m->ov_->getattr(L.get(), path, &a)) return statusOfLookup(e, false);
  const bool deleteOnClose = (createOptions & kFileDeleteOnClose) != 0;
  // A refusal that must come now: WinFsp ignores what a delete at cleanup answers (finding 9).
  // A write-open of the read-only layer is let through (MAXIMUM_ALLOWED arrives as every
  // right, and most such opens only read): its first write is refused instead.
  if (deleteOnClose && !m->writable(L.get())) return st::WRITE_PROTECTED;
  if (deleteOnClose && a.type == FileType::Directory) {
    std::vector<DirEntry> ls;
    if (m->ov_->readdir(L.get(), path, &ls) == 0 && !ls.empty()) return st::DIRECTORY_NOT_EMPTY;
  }
  auto c = std::make_unique<FileCtx>();
  c->path = path;
  c->layer = L;
  c->type = a.type;
  c->ino = a.ino;
  if (a.type == FileType::Regular) {
    // Read-only in the core even for a write-open: the copy-up waits for the first write.
    Attr ha;
    // Finding 15: a file of A opened to be run or loaded reads from a copy (see winfsp_native.cc).
    const bool execute = (grantedAccess & FILE_EXECUTE) &&
                         !(grantedAccess & (FILE_WRITE_DATA | FILE_APPEND_DATA));
    OpenIntent ri;
    ri.exec = execute;  // the audit trail's "exec" (loading a DLL asks for it too)
    if (int e = m->ov_->open(L.get(), path, ri, &c->h, &ha)) return statusFromErrno(e);
    if (execute && !c->h->inode) {
      if (int e = m->takeImageCopy(c.get())) {
        m->ov_->release(c->h);
        return statusFromErrno(e);
      }
    }
  } else if (a.type == FileType::Symlink) {
    c->linkToDirectory = m->leadsToDirectory(L.get(), path);
  } else if (a.type == FileType::Directory && m->watcher_) {
    // Edits in A below an open directory reach the driver's caches (and watchers) by notify.
    FolderWatcher::Token t = 0;
    if (m->watcher_->watch(path, &t) == 0) c->watch = t;
  }
  fileInfoOf(a, c->linkToDirectory, kAllocationUnit, info);
  m->setNormalizedName(fileName, info);
  m->track(c.get());
  *pCtx = c.release();
  return st::SUCCESS;
}

// FILE_OVERWRITE(_IF) and FILE_SUPERSEDE of an existing file: truncate to 0 (nothing is
// copied from A) and merge (or, superseding, replace) the attributes, as WinFsp's memfs does
// (ReplaceFileAttributes: the caller's replace the file's; else they are added to them), with
// READONLY kept as the write bits. Refusing an overwrite that would drop HIDDEN or SYSTEM is the
// driver's part (CreateFileW's CREATE_ALWAYS rule; WinFsp's create.c checks the attributes the
// Open returned), which is why the Open and GetFileInfo must report them. ARCHIVE is not added
// on its own, as NTFS and memfs do: the core keeps attributes as they are set.
NTSTATUS WinFspMount::Overwrite(FSP_FILE_SYSTEM* fs, PVOID ctx, UINT32 fileAttributes,
                                BOOLEAN replaceAttributes, UINT64, FSP_FSCTL_FILE_INFO* info) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  if (c->type != FileType::Regular) return st::FILE_IS_A_DIRECTORY;
  {
    // The handle this open took is read-only; an overwrite is a write that keeps nothing.
    std::unique_lock<SharedMutex> lock(c->mu);
    c->upgraded = false;
  }
  if (int e = m->ensureWritable(c, true)) return statusFromErrno(e);
  Attr cur;
  if (int e = m->attrOf(c, &cur)) return statusFromErrno(e);
  uint32_t perm = cur.perm;
  if (replaceAttributes || (fileAttributes & FILE_ATTRIBUTE_READONLY))
    perm = permWithAttributes(cur.perm, fileAttributes);
  const uint32_t asked = fileAttributes & kWinAttrsKept;
  const uint32_t winAttrs = replaceAttributes ? asked : (cur.winAttrs | asked);
  Attr v, out;
  uint64_t size = 0;
  uint32_t mask = kSetSize;
  v.size = size;
  if (perm != cur.perm) {
    mask |= kSetMode;
    v.perm = perm;
  }
  if (winAttrs != cur.winAttrs) {
    mask |= kSetWinAttrs;
    v.winAttrs = winAttrs;
  }
  {
    std::shared_lock<SharedMutex> lock(c->mu);
    if (int e = m->ov_->setattr(c->layer.get(), std::string(), c->h, mask, v, &out))
      return statusFromErrno(e);
  }
  return m->infoOf(c, info);
}

VOID WinFspMount::Cleanup(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR, ULONG flags) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  if (!(flags & FspCleanupDelete)) return;  // times and sizes: the core keeps them current
  // The refusals came earlier (SetDelete, Open); what is left can only fail if the entry
  // changed meanwhile, and WinFsp would not pass that on anyway.
  const std::string path = m->pathOf(c);
  if (c->type == FileType::Directory) m->ov_->rmdir(c->layer.get(), path);
  else m->ov_->unlink(c->layer.get(), path);
}

VOID WinFspMount::Close(FSP_FILE_SYSTEM* fs, PVOID ctx) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  m->untrack(c);
  m->freeContext(c);
}

NTSTATUS WinFspMount::Read(FSP_FILE_SYSTEM* fs, PVOID ctx, PVOID buf, UINT64 off, ULONG len,
                           PULONG got) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  *got = 0;
  if (c->type != FileType::Regular) return st::INVALID_DEVICE_REQUEST;
  std::shared_lock<SharedMutex> lock(c->mu);
  size_t n = 0;
  if (ImageCopy* img = c->image; img && !img->h) {
    // The read-only view's copy, in memory (never changed once made).
    if (off < img->bytes.size()) {
      n = std::min<size_t>(len, img->bytes.size() - off);
      std::memcpy(buf, img->bytes.data() + off, n);
    }
  } else if (int e = m->ov_->read(img ? img->h : c->h, static_cast<char*>(buf), len, off, &n)) {
    return statusFromErrno(e);
  }
  if (n == 0 && len > 0) return st::END_OF_FILE;
  *got = static_cast<ULONG>(n);
  return st::SUCCESS;
}

NTSTATUS WinFspMount::Write(FSP_FILE_SYSTEM* fs, PVOID ctx, PVOID buf, UINT64 off, ULONG len,
                            BOOLEAN toEnd, BOOLEAN constrained, PULONG written,
                            FSP_FSCTL_FILE_INFO* info) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  *written = 0;
  if (c->type != FileType::Regular) return st::INVALID_DEVICE_REQUEST;
  if (int e = m->ensureWritable(c, false)) return statusFromErrno(e);
  {
    std::shared_lock<SharedMutex> lock(c->mu);
    if (toEnd || constrained) {
      Attr a;
      if (int e = m->ov_->fgetattr(c->h, &a)) return statusFromErrno(e);
      if (toEnd) off = a.size;
      if (constrained) {
        // Paging I/O never extends the file.
        len = off >= a.size ? 0 : static_cast<ULONG>(std::min<UINT64>(len, a.size - off));
      }
    }
    if (len > 0) {
      if (int e = m->ov_->write(c->h, static_cast<const char*>(buf), len, off))
        return statusFromErrno(e);
    }
  }
  *written = len;
  return m->infoOf(c, info);
}

// The layer lives in memory (or in spill files that need no flush to be read back).
NTSTATUS WinFspMount::Flush(FSP_FILE_SYSTEM* fs, PVOID ctx, FSP_FSCTL_FILE_INFO* info) {
  WinFspMount* m = self(fs);
  if (!ctx) return st::SUCCESS;  // the whole volume
  return m->infoOf(ctxOf(ctx), info);
}

NTSTATUS WinFspMount::GetFileInfo(FSP_FILE_SYSTEM* fs, PVOID ctx, FSP_FSCTL_FILE_INFO* info) {
  return self(fs)->infoOf(ctxOf(ctx), info);
}

// Attributes: READONLY maps to the write bits; HIDDEN, SYSTEM, ARCHIVE and the others of
// kWinAttrsKept are kept as they are (what else WinFsp passes, DIRECTORY or NORMAL, follows from
// the object). Times of 0 mean "leave as is". CreationTime is the object's own from then on; an
// object without one of its own (a new file of the layer, whose creation time is the earliest of
// its times) keeps the creation time it showed when another of its times is set, so setting
// LastWriteTime into the past does not move its creation time with it.
NTSTATUS WinFspMount::SetBasicInfo(FSP_FILE_SYSTEM* fs, PVOID ctx, UINT32 attributes,
                                   UINT64 creationTime, UINT64 accessTime, UINT64 writeTime,
                                   UINT64 changeTime, FSP_FSCTL_FILE_INFO* info) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  Attr cur;
  if (int e = m->attrOf(c, &cur)) return statusFromErrno(e);
  Attr v;
  uint32_t mask = 0;
  if (attributes != INVALID_FILE_ATTRIBUTES && c->type != FileType::Symlink) {
    uint32_t perm = permWithAttributes(cur.perm, attributes);
    if (perm != cur.perm) {
      mask |= kSetMode;
      v.perm = perm;
    }
    if ((attributes & kWinAttrsKept) != cur.winAttrs) {
      mask |= kSetWinAttrs;
      v.winAttrs = attributes & kWinAttrsKept;
    }
  }
  if (creationTime) {
    mask |= kSetBirth;
    v.birth = timespecOf(creationTime);
  } else if (!cur.hasBirth && (accessTime || writeTime || changeTime)) {
    mask |= kSetBirth;
    v.birth = timespecOf(creationTimeOf(cur));
  }
  if (accessTime) mask |= kSetAtime, v.atime = timespecOf(accessTime);
  if (writeTime) mask |= kSetMtime, v.mtime = timespecOf(writeTime);
  if (changeTime) mask |= kSetCtime, v.ctime = timespecOf(changeTime);
  if (mask) {
    std::shared_lock<SharedMutex> lock(c->mu);
    // A layer file, or a file opened for writing (whose `inode` stays null also after its first
    // write: the core binds such a handle to the layer's copy without setting it), changes
    // through its handle: the core acts on the handle's own object, by name while the name
    // still shows it and the handle is unwritten. Once the name shows another object (or
    // none), the path is left out so the change lands on this handle's file, never on the
    // object now at its old name. A read-only handle of the folder's file changes by name.
    Handle* h = c->h && (c->h->inode || c->h->writable) ? c->h : nullptr;
    std::string path = m->pathOf(c);
    if (h && !h->inode) {
      Attr now;
      if (m->ov_->getattr(c->layer.get(), path, &now) != 0 || now.ino != c->ino) path.clear();
    }
    Attr out;
    if (int e = m->ov_->setattr(c->layer.get(), path, h, mask, v, &out))
      return statusFromErrno(e);
  }
  return m->infoOf(c, info);
}

NTSTATUS WinFspMount::SetFileSize(FSP_FILE_SYSTEM* fs, PVOID ctx, UINT64 size, BOOLEAN allocation,
                                  FSP_FSCTL_FILE_INFO* info) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  if (c->type != FileType::Regular) return st::INVALID_DEVICE_REQUEST;
  Attr cur;
  if (int e = m->attrOf(c, &cur)) return statusFromErrno(e);
  // Allocation is nothing to an in-memory layer, except that an allocation below the size cuts
  // the file there. Setting the size it already has changes nothing (and copies nothing).
  if ((allocation && size >= cur.size) || (!allocation && size == cur.size)) return m->infoOf(c, info);
  if (int e = m->ensureWritable(c, size == 0)) return statusFromErrno(e);
  {
    std::shared_lock<SharedMutex> lock(c->mu);
    Attr v, out;
    v.size = size;
    if (int e = m->ov_->setattr(c->layer.get(), std::string(), c->h, kSetSize, v, &out))
      return statusFromErrno(e);
  }
  return m->infoOf(c, info);
}

// Asked at the disposition (DeleteFileW, RemoveDirectoryW, FILE_DISPOSITION_DELETE), before
// the delete at cleanup: the one moment a refusal reaches the program.
NTSTATUS WinFspMount::SetDelete(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR, BOOLEAN deleteFile) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  if (!deleteFile) return st::SUCCESS;  // undelete
  const std::string path = m->pathOf(c);
  if (path.empty()) return st::CANNOT_DELETE;
  if (!m->writable(c->layer.get())) return st::WRITE_PROTECTED;
  if (c->type == FileType::Directory) {
    std::vector<DirEntry> ls;
    if (int e = m->ov_->readdir(c->layer.get(), path, &ls)) return statusFromErrno(e);
    if (!ls.empty()) return st::DIRECTORY_NOT_EMPTY;
  }
  return st::SUCCESS;
}

NTSTATUS WinFspMount::CanDelete(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR name) {
  return SetDelete(fs, ctx, name, TRUE);
}

NTSTATUS WinFspMount::Rename(FSP_FILE_SYSTEM* fs, PVOID ctx, PWSTR fileName, PWSTR newFileName,
                             BOOLEAN replace) {
  WinFspMount* m = self(fs);
  FileCtx* c = ctxOf(ctx);
  std::string from, to;
  if (!toCorePath(fileName, &from) || !toCorePath(newFileName, &to)) return st::OBJECT_NAME_INVALID;
  Layer* L = c->layer.get();
  if (!m->writable(L)) return st::WRITE_PROTECTED;
  Attr target;
  const bool sameEntry = m->ov_->ignoresCase() ? sameName(from, to) : from == to;
  if (!sameEntry && m->ov_->getattr(L, to, &target) == 0) {
    if (!replace) return st::OBJECT_NAME_COLLISION;
    // NTFS never replaces a directory by a rename.
    if (target.type == FileType::Directory) return st::ACCESS_DENIED;
  }
  int e = m->ov_->rename(L, from, to, replace ? 0u : static_cast<uint32_t>(kRenameNoReplace));
  if (e) {
    Attr p;
    return statusOfLookup(e, e == ENOENT && m->ov_->getattr(L, parentOf(to), &p) != 0);
  }
  m->renameContexts(L, from, to);
  return st::SUCCESS;
}

NTSTATUS WinFspMount::GetSecurity(FSP_FILE_SYSTEM* fs, PVOID, PSECURITY_DESCRIPTOR sd, SIZE_T* size) {
  return copyDescriptor(self(fs)->sd_, sd, size);
}

}  // namespace winfsp_mount
}  // namespace shadowfs
