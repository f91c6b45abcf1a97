// Whole-file read-modify-write of one layer's file as a single step (Overlay::updateFile): what
// the agent file tools need to write with a mode, edit, and write only if the file is still
// what the caller saw, without another change of that file landing in between.
#include <cerrno>
#include <optional>

#include "hash.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

namespace {
// Rounds in which the path may appear or go between the layer lock's two holds before the
// update gives up (another writer creating and removing it in a loop).
constexpr int kUpdateRounds = 8;
}  // namespace

int Overlay::updateFile(const std::string& layer, const std::string& asked, const FileUpdate& u,
                        const Caller& who, FileUpdateResult* res) {
  *res = FileUpdateResult{};
  if (asked.empty()) return EISDIR;
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  if (!lp->writable) return EROFS;
  if (int e = writeRefused(asked)) return e;  // write_guard.h, and names
  Layer& L = *lp;
  if (guardedBeside(L, asked)) return EPERM;  // a bare repository's hooks or config
  std::string askedDir, askedName;
  splitLast(asked, &askedDir, &askedName);
  NodeRef fresh;  // a new file prepared without the layer's lock, for a path found absent
  // A file of the folder the layer does not hold yet, looked at without any lock: what the
  // change made of it, to be written if the layer still does not hold it at the write.
  std::optional<FileChange> ofFolder;
  // The folder's version that change read (identity, and the hash of the bytes read, when the
  // file did not change while it was read): recorded as the layer's base with its hash, as a
  // copy-up that reads records it, so apply and the radar can tell "changed and put back" from
  // "changed" for files the file tools edited.
  std::optional<Base> readBase;
  for (int round = 0; round < kUpdateRounds; ++round) {
    Ref<Inode> in;
    std::string folderPath;  // the path is the folder's alone (no layer node): its file there
    {
      WriteLock lock(L.mu, LockRank::Layer);
      std::string cbuf, respellAs;
      const std::string& path = canon(L, asked, &cbuf, &respellAs);
      std::string parent, name;
      splitLast(path, &parent, &name);
      // Missing parents are made only by an update that may create the file (as putFile).
      int e = checkParents(L, parent, u.mayCreate ? &who : nullptr);
      if (e) return e;
      Res r;
      e = resolve(L, path, &r);
      if (e == ENOENT && !u.mayCreate) return ENOENT;
      if (e == ENOENT && fresh) {
        Node* p;
        e = materializeDir(L, parent, &p, nullptr, nullptr);
        if (!e) e = placeNew(L, path, fresh, nullptr);
        if (!e && !respellAs.empty()) e = respell(L, path, respellAs);
        if (e) return e;
        MetaLock m(fresh->mmu(), LockRank::Meta);
        res->attr = fresh->snap();
        res->written = res->created = true;
        return 0;
      }
      if (e && e != ENOENT) return e;
      fresh = NodeRef();
      if (!e) {
        FileType t = r.node ? r.node->inode()->type : r.lowerAttr.type;
        if (t == FileType::Directory) return EISDIR;
        if (t == FileType::Symlink) return ELOOP;
        if (t != FileType::Regular) return EINVAL;
        if (!r.node && !ofFolder) {
          folderPath = r.low;  // looked at below without the lock; the layer keeps nothing yet
        } else {
          Node* n;
          e = materializeNode(L, path, &n, &r);
          if (e) return e;
          in = n->inodeRef();
          noteCopy(L, in.get());
        }
      }
    }
    if (!in && folderPath.empty()) {
      // Absent: decide what to create without any lock (it may be big, and spill), then look
      // again under the layer's lock; whatever is there by then is what the update sees.
      FileNow now;
      FileChange ch;
      u.change(now, &ch);
      if (!ch.write) return 0;
      fresh = newInode(FileType::Regular, ch.perm ? *ch.perm : u.newPerm, who, askedName);
      if (guard_ && guard_->git() && refusedGitfile(std::string_view(ch.content).substr(0, kGitfileScan)))
        return EPERM;  // a repository outside the shadow (link_targets.cc)
      if (int e = contentAssign(fresh.get(), ch.content)) return e;
      continue;
    }
    if (!in) {
      // The folder's file: a change that writes nothing leaves the layer as it was.
      FileNow now;
      now.exists = true;
      if (int e = lower_->stat(folderPath, &now.attr)) return e;
      std::string content;
      if (u.readContent) {
        if (now.attr.size > u.maxRead) {
          res->attr = now.attr;
          return EFBIG;
        }
        const Attr before = now.attr;
        if (int e = lower_->readAll(folderPath, &content)) return e;
        Attr after;
        readBase.reset();
        if (lower_->stat(folderPath, &after) == 0 && after.ino == before.ino && after.size == before.size &&
            after.mtime == before.mtime && after.ctime == before.ctime && content.size() == before.size) {
          ContentHash h;
          h.update(content.data(), content.size());
          readBase = Base{before.ino, before.size, before.mtime, before.ctime, true, h.digest()};
        }
        now.attr.size = content.size();
        now.content = &content;
      }
      FileChange ch;
      u.change(now, &ch);
      res->attr = now.attr;
      if (!ch.write) return 0;
      ofFolder = std::move(ch);
      continue;  // the layer takes the file now, and writes it if nothing else did meanwhile
    }
    // The file's content lock: every change of its content (writes through the mounts, API
    // writes, truncates, other updates) waits for this one, and this one for them.
    WriteLock c(in->cmu(), LockRank::Content);
    FileChange ch;
    if (ofFolder && in->inLower()) {
      // Still the folder's content: no change of the layer reached it since the look.
      ch = std::move(*ofFolder);
    } else {
      ofFolder.reset();  // the layer changed it meanwhile: look again, at the layer's copy
      FileNow now;
      now.exists = true;
      std::string lowerPath;
      bool inLower;
      {
        MetaLock m(in->mmu(), LockRank::Meta);
        inLower = in->lowerPath(&lowerPath);
        now.attr = in->snap();
      }
      if (inLower) {
        // The folder's file as it is now (its attributes live, not as last seen).
        Attr a;
        if (int e = lower_->stat(lowerPath, &a)) return e;
        a.ino = now.attr.ino;
        if (!in->ownMeta()) now.attr = a;
        now.attr.size = a.size;
      }
      std::string content;
      if (u.readContent) {
        if (now.attr.size > u.maxRead) {
          res->attr = now.attr;
          return EFBIG;
        }
        if (inLower) {
          if (int e = lower_->readAll(lowerPath, &content)) return e;
        } else {
          content.resize(static_cast<size_t>(in->size));
          size_t got = 0;
          if (int e = contentRead(in.get(), content.data(), content.size(), 0, &got)) return e;
          content.resize(got);
        }
        now.attr.size = content.size();
        now.content = &content;
      }
      u.change(now, &ch);
      res->attr = now.attr;
      if (!ch.write) return 0;
    }
    // The content becomes the layer's (the folder's base recorded, nothing read again).
    const bool tookFolders = in->inLower();
    if (guard_ && guard_->git() && refusedGitfile(std::string_view(ch.content).substr(0, kGitfileScan)))
      return EPERM;  // a repository outside the shadow (link_targets.cc)
    if (int e = copyUp(in.get(), false)) return e;
    if (int e = contentAssign(in.get(), ch.content)) return e;
    Timespec t = nowTime();
    MetaLock m(in->mmu(), LockRank::Meta);
    if (tookFolders && readBase) {
      // The base copyUp recorded is the version the change read: it gets that version's hash.
      std::optional<Base> b = in->base();
      if (b && !b->hashed && b->ino == readBase->ino && b->size == readBase->size && b->mtime == readBase->mtime &&
          b->ctime == readBase->ctime)
        in->setBase(*readBase);
    }
    if (ch.perm) in->perm = static_cast<uint16_t>(*ch.perm & 07777);
    in->setMtime(t);
    in->setCtime(t);
    res->attr = in->snap();
    res->written = true;
    return 0;
  }
  return EBUSY;
}

}  // namespace shadowfs
