// In-memory stand-ins for what native/platform gives the core: FakeLower (the user's folder A,
// a LowerFs) and FakeSpill (a SpillStore). Tests build A with the add*/set* methods, change it
// at any time (also from a hook in the middle of a copy, to play the developer editing A), and
// inspect what the core asked for. Standard library only, so these build on Windows too.
//
// Semantics follow the POSIX implementation: stat does not follow symlinks, open only opens
// regular files, an open handle keeps the object it opened (like an fd) even after A replaces
// or deletes the path, pread reads that object's current bytes. With `ignoreCase` set, names are
// found whatever their case (ASCII letters), as NTFS finds them, and keep the stored spelling.
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../../native/core/lower.h"
#include "../../../native/core/spill.h"

namespace shadowfs {
namespace fake {

struct Object {
  Attr attr;
  std::string data;  // file bytes, or a symlink's target
  std::map<std::string, std::string> xattrs;
};

class FakeLower final : public LowerFs {
 public:
  FakeLower() {
    auto root = std::make_shared<Object>();
    root->attr.type = FileType::Directory;
    root->attr.perm = 0755;
    root->attr.nlink = 2;
    root->attr.size = 4096;  // as ext4 reports directories (a layer directory copies it)
    root->attr.ino = nextIno_++;
    objects_[""] = root;
  }

  // --- Building and changing A (the test's side). Parents must exist. ---
  uint64_t addDir(const std::string& path, uint32_t perm = 0755) {
    uint64_t ino = put(path, FileType::Directory, perm, "");
    std::lock_guard lock(mu_);
    objects_[path]->attr.size = 4096;  // as ext4 reports directories
    return ino;
  }
  uint64_t addFile(const std::string& path, const std::string& data, uint32_t perm = 0644) {
    return put(path, FileType::Regular, perm, data);
  }
  uint64_t addSymlink(const std::string& path, const std::string& target) {
    return put(path, FileType::Symlink, 0777, target);
  }
  // Rewrites a file's bytes in place (same inode), moving its size, mtime and ctime on.
  void modify(const std::string& path, const std::string& data) {
    std::lock_guard lock(mu_);
    auto o = objects_.at(path);
    o->data = data;
    o->attr.size = data.size();
    o->attr.mtime = o->attr.ctime = tick();
  }
  // Windows' metadata of a file of A, as win32_lower reports it (attributes, creation time).
  void setWinMeta(const std::string& path, uint32_t winAttrs, const Timespec* birth) {
    std::lock_guard lock(mu_);
    Attr& a = objects_.at(path)->attr;
    a.winAttrs = winAttrs;
    a.hasBirth = birth != nullptr;
    if (birth) a.birth = *birth;
  }
  void setXattr(const std::string& path, const std::string& name, const std::string& value) {
    std::lock_guard lock(mu_);
    objects_.at(path)->xattrs[name] = value;
  }
  // Removes a path and everything below it.
  void remove(const std::string& path) {
    std::lock_guard lock(mu_);
    for (auto it = objects_.begin(); it != objects_.end();) {
      if (it->first == path || isBelow(it->first, path))
        it = objects_.erase(it);
      else
        ++it;
    }
  }
  bool exists(const std::string& path) {
    std::lock_guard lock(mu_);
    return objects_.count(path) > 0;
  }
  std::string content(const std::string& path) {
    std::lock_guard lock(mu_);
    return objects_.at(path)->data;
  }
  // Every path with its type, size and bytes: two equal snapshots mean A was not changed.
  std::string snapshot() {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [path, o] : objects_) {
      out += path + "|" + std::to_string(static_cast<int>(o->attr.type)) + "|" +
             std::to_string(o->attr.perm) + "|" + o->data + "|";
      for (const auto& [k, v] : o->xattrs) out += k + "=" + v + ";";
      out += "\n";
    }
    return out;
  }

  // Called (outside the fake's lock) before each pread with the path the handle was opened
  // under and the offset: a test can change A in the middle of a copy.
  std::function<void(const std::string& path, uint64_t off)> onPread;
  // readAll reads through open/pread in chunks of this many bytes, so onPread sees a copy that
  // takes several steps whichever call the core uses.
  size_t readChunk = 4;

  // Plays a case-insensitive folder (NTFS): every lookup matches names ignoring the case of
  // ASCII letters, listings and storedName() give the stored spelling. Set before use.
  bool ignoreCase = false;

  // Plays the system around the folder for linkTargetFor (link_targets.cc): `hostRootPath` is
  // the folder's real path ("" = a platform that cannot say, the default), and `hostPlaceFn`
  // says where an absolute path leads (posix_reach_test.cc tests the real walk). Set before use.
  std::string hostRootPath;
  std::function<Place(const std::string&, std::string*)> hostPlaceFn;

  // Calls the core made, for tests that check what was (not) asked of A.
  std::atomic<int> statCalls{0}, readdirCalls{0}, openCalls{0}, preadCalls{0};
  int openHandles() {
    std::lock_guard lock(mu_);
    return static_cast<int>(handles_.size());
  }

  // --- LowerFs (the core's side). ---
  int stat(const std::string& rel, Attr* out) override {
    ++statCalls;
    std::lock_guard lock(mu_);
    auto o = find(rel);
    if (!o) return errnoOf(rel);
    *out = o->attr;
    return 0;
  }

  // Records each hint (what Overlay::list hands on with readAhead).
  void readAhead(const std::vector<std::string>& dirs) override {
    std::lock_guard lock(mu_);
    readAheads.push_back(dirs);
  }
  std::vector<std::vector<std::string>> hints() {
    std::lock_guard lock(mu_);
    return readAheads;
  }

  int readdir(const std::string& rel, std::vector<DirEntry>* out) override {
    ++readdirCalls;
    std::lock_guard lock(mu_);
    auto o = find(rel);
    if (!o) return errnoOf(rel);
    if (o->attr.type != FileType::Directory) return ENOTDIR;
    const std::string dir = stored(rel);
    for (const auto& [path, child] : objects_) {
      if (!isBelow(path, dir) ||
          path.find('/', dir.empty() ? 0 : dir.size() + 1) != std::string::npos)
        continue;
      out->push_back(DirEntry{path.substr(dir.empty() ? 0 : dir.size() + 1), child->attr.ino,
                              child->attr.type});
    }
    return 0;
  }

  int readlink(const std::string& rel, std::string* out) override {
    std::lock_guard lock(mu_);
    auto o = find(rel);
    if (!o) return errnoOf(rel);
    if (o->attr.type != FileType::Symlink) return EINVAL;
    *out = o->data;
    return 0;
  }

  int open(const std::string& rel, LowerHandle* out) override {
    ++openCalls;
    std::lock_guard lock(mu_);
    auto o = find(rel);
    if (!o) return errnoOf(rel);
    if (o->attr.type == FileType::Symlink) return ELOOP;  // O_NOFOLLOW
    if (o->attr.type == FileType::Directory) return EISDIR;
    LowerHandle h = nextHandle_++;
    handles_[h] = {rel, o};
    *out = h;
    return 0;
  }

  int fstat(LowerHandle h, Attr* out) override {
    std::lock_guard lock(mu_);
    auto it = handles_.find(h);
    if (it == handles_.end()) return EBADF;
    *out = it->second.second->attr;
    return 0;
  }

  int pread(LowerHandle h, char* buf, size_t size, uint64_t off, size_t* got) override {
    ++preadCalls;
    std::string path;
    {
      std::lock_guard lock(mu_);
      auto it = handles_.find(h);
      if (it == handles_.end()) return EBADF;
      path = it->second.first;
    }
    if (onPread) onPread(path, off);
    std::lock_guard lock(mu_);
    auto it = handles_.find(h);
    if (it == handles_.end()) return EBADF;
    const std::string& d = it->second.second->data;
    *got = off >= d.size() ? 0 : std::min<size_t>(size, d.size() - static_cast<size_t>(off));
    if (*got) std::memcpy(buf, d.data() + off, *got);
    return 0;
  }

  void close(LowerHandle h) override {
    std::lock_guard lock(mu_);
    handles_.erase(h);
  }

  int readAll(const std::string& rel, std::string* out) override {
    LowerHandle h = -1;
    if (int e = open(rel, &h)) return e;
    std::vector<char> buf(readChunk ? readChunk : 1);
    int e = 0;
    for (uint64_t off = 0;;) {
      size_t got = 0;
      e = pread(h, buf.data(), buf.size(), off, &got);
      if (e || got == 0) break;
      out->append(buf.data(), got);
      off += got;
    }
    close(h);
    return e;
  }

  int listxattr(const std::string& rel, std::vector<std::string>* names) override {
    std::lock_guard lock(mu_);
    auto o = find(rel);
    if (!o) return errnoOf(rel);
    for (const auto& [k, v] : o->xattrs) names->push_back(k);
    return 0;
  }

  int getxattr(const std::string& rel, const std::string& name, std::string* value) override {
    std::lock_guard lock(mu_);
    auto o = find(rel);
    if (!o) return errnoOf(rel);
    auto it = o->xattrs.find(name);
    if (it == o->xattrs.end()) return ENODATA;
    *value = it->second;
    return 0;
  }

  bool caseInsensitive() const override { return ignoreCase; }

  std::string hostRoot() const override { return hostRootPath; }
  Place hostPlace(const std::string& abs, const std::vector<std::string>& ownMounts,
                  std::string* rest) override {
    (void)ownMounts;
    return hostPlaceFn ? hostPlaceFn(abs, rest) : Place::Elsewhere;
  }

  int storedName(const std::string& rel, std::string* name) override {
    std::lock_guard lock(mu_);
    if (!find(rel)) return errnoOf(rel);
    const std::string key = stored(rel);
    auto slash = key.rfind('/');
    *name = slash == std::string::npos ? key : key.substr(slash + 1);
    return 0;
  }

  int statfsFails = 0;  // an errno statfs() returns (the folder's own file system failing)
  int statfs(FsStats* out) override {
    if (statfsFails) return statfsFails;
    out->blocks = 1000;
    out->bfree = out->bavail = 500;
    out->files = 100;
    out->ffree = 50;
    return 0;
  }

 private:
  static bool isBelow(const std::string& path, const std::string& dir) {
    if (dir.empty()) return !path.empty();
    return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
  }
  Timespec tick() { return Timespec{1700000000 + static_cast<int64_t>(++clock_), 0}; }

  uint64_t put(const std::string& path, FileType type, uint32_t perm, const std::string& data) {
    std::lock_guard lock(mu_);
    auto slash = path.rfind('/');
    std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
    auto p = find(parent);
    if (!p || p->attr.type != FileType::Directory) std::abort();  // a broken test
    auto o = std::make_shared<Object>();
    o->attr.type = type;
    o->attr.perm = perm;
    o->attr.nlink = type == FileType::Directory ? 2 : 1;
    o->attr.ino = nextIno_++;
    o->attr.uid = 1000;
    o->attr.gid = 1000;
    o->attr.size = data.size();
    o->attr.mtime = o->attr.ctime = o->attr.atime = tick();
    o->data = data;
    objects_[path] = o;
    return o->attr.ino;
  }

  // The object at `rel`, or null. Only directories may be passed through on the way (like the
  // POSIX implementation, which never follows a symlink of A).
  std::shared_ptr<Object> find(const std::string& rel) {
    auto it = objects_.find(stored(rel));
    if (it == objects_.end()) return nullptr;
    return it->second;
  }
  // The key `rel` is stored under: itself, or with `ignoreCase` the one that matches it
  // ignoring case (the exact one first).
  std::string stored(const std::string& rel) const {
    if (!ignoreCase || objects_.count(rel)) return rel;
    auto lower = [](std::string s) {
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    };
    const std::string want = lower(rel);
    for (const auto& [key, o] : objects_)
      if (key.size() == rel.size() && lower(key) == want) return key;
    return rel;
  }
  int errnoOf(const std::string& rel) {
    // ENOTDIR when a proper prefix is a non-directory, else ENOENT.
    for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
      auto it = objects_.find(stored(rel.substr(0, slash)));
      if (it == objects_.end()) return ENOENT;
      if (it->second->attr.type != FileType::Directory) return ENOTDIR;
    }
    return ENOENT;
  }

  std::mutex mu_;
  std::vector<std::vector<std::string>> readAheads;
  std::map<std::string, std::shared_ptr<Object>> objects_;
  std::map<LowerHandle, std::pair<std::string, std::shared_ptr<Object>>> handles_;
  LowerHandle nextHandle_ = 3;
  uint64_t nextIno_ = 100;
  uint64_t clock_ = 0;
};

class FakeSpillFile final : public SpillFile {
 public:
  explicit FakeSpillFile(bool memory = false) : memory_(memory) {}
  bool inMemory() const override { return memory_; }
  int pread(char* buf, size_t size, uint64_t off, size_t* got) override {
    std::lock_guard lock(mu_);
    *got = off >= data_.size() ? 0 : std::min<size_t>(size, data_.size() - static_cast<size_t>(off));
    if (*got) std::memcpy(buf, data_.data() + off, *got);
    return 0;
  }
  int pwrite(const char* buf, size_t size, uint64_t off) override {
    std::lock_guard lock(mu_);
    if (off + size > data_.size()) data_.resize(static_cast<size_t>(off + size));
    if (size) std::memcpy(&data_[static_cast<size_t>(off)], buf, size);
    ++tick_;
    return 0;
  }
  int truncate(uint64_t size) override {
    std::lock_guard lock(mu_);
    data_.resize(static_cast<size_t>(size));
    ++tick_;
    return 0;
  }
  // A made-up descriptor number: the core only hands it on (to a backend, for the kernel).
  int duplicateDescriptor() override { return 1000; }
  // Every change moves the file's times one second on, as writes by anyone (the kernel too) do.
  int stat(uint64_t* size, Timespec* mtime, Timespec* ctime) override {
    std::lock_guard lock(mu_);
    *size = data_.size();
    *mtime = *ctime = Timespec{1000000 + tick_, 0};
    return 0;
  }
  std::string data() {
    std::lock_guard lock(mu_);
    return data_;
  }

 private:
  std::mutex mu_;
  std::string data_;
  int64_t tick_ = 0;
  bool memory_;
};

class FakeSpill final : public SpillStore {
 public:
  int create(std::unique_ptr<SpillFile>* out) override {
    ++created;
    if (failWith) return failWith;
    *out = std::make_unique<FakeSpillFile>();
    return 0;
  }
  // A memory file (memfd on Linux): what a content moves into when the kernel is to read or
  // write it (FUSE passthrough); tests write it as the kernel would, behind the core's back.
  int createInMemory(std::unique_ptr<SpillFile>* out) override {
    auto f = std::make_unique<FakeSpillFile>(true);
    lastInMemory = f.get();
    *out = std::move(f);
    return 0;
  }
  std::atomic<int> created{0};
  FakeSpillFile* lastInMemory = nullptr;
  int failWith = 0;  // an errno create() returns, to test a full disk
};

}  // namespace fake
}  // namespace shadowfs
