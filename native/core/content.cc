// File contents in a layer: in memory, or in a spill file past the threshold; and copy-up, which
// takes a file's content from the folder as a consistent snapshot and records where it came
// from (the Base). Everything here runs with the inode's content lock (cmu) held by the caller,
// except takeContent, which takes it itself; no layer lock is ever held while the folder's file
// is read.
#include <cerrno>
#include <cstring>
#include <exception>
#include <new>
#include <vector>

#include "hash.h"
#include "model.h"

namespace shadowfs {

namespace {

uint64_t contentSize(const Inode* in) { return in->spill ? in->spillSize : in->data.size(); }

bool sameVersion(const Attr& a, const Attr& b) {
  return a.ino == b.ino && a.size == b.size && a.mtime == b.mtime && a.ctime == b.ctime;
}

}  // namespace

void Overlay::log(const std::string& line) const {
  if (log_) log_(line);
}

int Overlay::spillOut(Inode* in) {
  if (in->spill || !spill_) return 0;
  std::unique_ptr<SpillFile> f;
  int e = spill_->create(&f);
  if (e) return e;
  if (!in->data.empty()) {
    e = f->pwrite(in->data.data(), in->data.size(), 0);
    if (e) return e;
  }
  in->spillSize = in->data.size();
  in->spill = std::move(f);
  std::string().swap(in->data);
  return 0;
}

int Overlay::contentWrite(Inode* in, const char* buf, size_t size, uint64_t off) {
  const uint64_t end = off + size;
  if (!in->spill && end > spillThreshold_) {
    int e = spillOut(in);
    if (e) return e;
  }
  if (in->spill) {
    int e = in->spill->pwrite(buf, size, off);
    if (e) return e;
    in->spillSize = std::max(in->spillSize, end);
    return 0;
  }
  try {
    if (end > in->data.size()) in->data.resize(end);
  } catch (const std::exception&) {  // bad_alloc, length_error: out of memory, as tmpfs says
    return ENOSPC;
  }
  if (size) std::memcpy(&in->data[off], buf, size);
  return 0;
}

int Overlay::contentTruncate(Inode* in, uint64_t size) {
  if (!in->spill && size > spillThreshold_) {
    int e = spillOut(in);
    if (e) return e;
  }
  if (in->spill) {
    int e = in->spill->truncate(size);
    if (e) return e;
    in->spillSize = size;
    return 0;
  }
  try {
    in->data.resize(size);
  } catch (const std::exception&) {
    return ENOSPC;
  }
  return 0;
}

int Overlay::contentRead(const Inode* in, char* buf, size_t size, uint64_t off, size_t* got) {
  *got = 0;
  const uint64_t total = contentSize(in);
  if (off >= total) return 0;
  size = static_cast<size_t>(std::min<uint64_t>(size, total - off));
  if (in->spill) return in->spill->pread(buf, size, off, got);
  std::memcpy(buf, in->data.data() + off, size);
  *got = size;
  return 0;
}

int Overlay::contentAssign(Inode* in, const std::string& data) {
  in->spill.reset();
  in->spillSize = 0;
  in->data.clear();
  if (data.size() > spillThreshold_ && spill_) return contentWrite(in, data.data(), data.size(), 0);
  try {
    in->data = data;
  } catch (const std::exception&) {
    return ENOSPC;
  }
  return 0;
}

// Copies A's file into the inode. The copy is a snapshot: A's file is checked before and after
// (inode, size, mtime, ctime, and that the name still leads to it); if anything moved, the copy
// is thrown away and taken again, up to kCopyUpTries times, then the operation fails with EIO
// and a log line rather than leave a file that is half old, half new. With keepContent false
// (O_TRUNC, a whole-file write) nothing is read, but the base is recorded all the same.
int Overlay::copyUp(Inode* in, bool keepContent) {
  SFS_ASSERT(!in->cmu.try_lock());  // the caller holds cmu exclusively
  if (!in->lowerPath) return 0;
  const std::string src = *in->lowerPath;
  bool hadOwnMeta;
  {
    MetaLock m(in->mmu, LockRank::Meta);
    hadOwnMeta = in->ownMeta;
  }
  ensureOwnMeta(in, false, std::string());

  Base base;
  std::string data;
  std::unique_ptr<SpillFile> spill;
  uint64_t size = 0;
  int e = 0;
  if (!keepContent) {
    Attr a;
    if (lower_->stat(src, &a) == 0) {
      base.ino = a.ino;
      base.size = a.size;
      base.mtime = a.mtime;
      base.ctime = a.ctime;
    }
  } else {
    int tries = 0;
    for (;; ++tries) {
      if (tries == kCopyUpTries) {
        log("copy-up of " + src + " gave up after " + std::to_string(kCopyUpTries) +
            " tries: the file kept changing in the folder while it was read");
        return EIO;
      }
      LowerHandle h = -1;
      e = lower_->open(src, &h);
      if (e) return e == ENOENT ? EIO : e;
      Attr before, after, byName;
      e = lower_->fstat(h, &before);
      ContentHash hash;
      data.clear();
      spill.reset();
      size = 0;
      const bool big = spill_ && before.size > spillThreshold_;
      if (!e && big) e = spill_->create(&spill);
      if (!e && !big) {
        try {
          data.reserve(before.size);
        } catch (const std::exception&) {
          e = ENOSPC;
        }
      }
      std::vector<char> buf(1 << 20);
      while (!e) {
        size_t got = 0;
        e = lower_->pread(h, buf.data(), buf.size(), size, &got);
        if (e || got == 0) break;
        hash.update(buf.data(), got);
        if (big) {
          e = spill->pwrite(buf.data(), got, size);
        } else {
          try {
            data.append(buf.data(), got);
          } catch (const std::exception&) {
            e = ENOSPC;
          }
        }
        size += got;
      }
      if (!e) e = lower_->fstat(h, &after);
      lower_->close(h);
      if (e) return e;
      const bool stillThere = lower_->stat(src, &byName) == 0 && byName.ino == before.ino;
      if (sameVersion(before, after) && size == after.size && stillThere) {
        base.ino = after.ino;
        base.size = after.size;
        base.mtime = after.mtime;
        base.ctime = after.ctime;
        base.hashed = true;
        base.hash = hash.digest();
        break;
      }
    }
  }
  // Install: content first (we hold cmu), then the metadata that says where it lives.
  in->data.swap(data);
  in->spill = std::move(spill);
  in->spillSize = in->spill ? size : 0;
  MetaLock m(in->mmu, LockRank::Meta);
  in->lowerPath.reset();
  if (!hadOwnMeta && base.hashed) {
    // The attributes the file showed until now were A's live ones: keep those of the version
    // that was copied, not of the one seen before a retry.
    in->snap.mtime = base.mtime;
    in->snap.ctime = base.ctime;
  }
  in->snap.size = size;
  in->base = base;
  return 0;
}

int Overlay::takeContent(Inode* in, bool keepContent) {
  WriteLock c(in->cmu, LockRank::Content);
  return copyUp(in, keepContent);
}

int Overlay::cloneInto(const Inode& in, Inode* c) {
  ReadLock content(in.cmu, LockRank::Content);
  {
    MetaLock m(in.mmu, LockRank::Meta);
    c->ownMeta = in.ownMeta;
    c->lowerPath = in.lowerPath;
    c->snap = in.snap;
    c->ownXattrs = in.ownXattrs;
    c->xattrs = in.xattrs;
    c->base = in.base;
  }
  try {
    c->data = in.data;
  } catch (const std::bad_alloc&) {
    return ENOSPC;
  }
  if (in.spill) {
    std::vector<char> buf(1 << 20);
    for (uint64_t off = 0; off < in.spillSize;) {
      size_t got = 0;
      int e = in.spill->pread(buf.data(), buf.size(), off, &got);
      if (e) return e;
      if (got == 0) break;
      e = contentWrite(c, buf.data(), got, off);
      if (e) return e;
      off += got;
    }
  }
  return 0;
}

}  // namespace shadowfs
