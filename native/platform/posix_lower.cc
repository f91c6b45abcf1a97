// POSIX implementation of LowerFs. Every call is relative to one directory fd for A's root, so
// A is addressed without building absolute paths, and nothing is held open per file: only the
// files the shadow currently has open hold an fd. A path too long for one *at() call reaches
// its parent directory through a component walk (posix_path.h); xattr calls, which have no
// *at() form, go through /proc/self/fd/N so they never depend on the absolute path's length.
#include "posix_lower.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "posix_io.h"
#include "posix_path.h"
#include "posix_reach.h"
#include "posix_readahead.h"

namespace shadowfs {
namespace {

FileType typeFromMode(mode_t m) {
  switch (m & S_IFMT) {
    case S_IFDIR: return FileType::Directory;
    case S_IFLNK: return FileType::Symlink;
    case S_IFIFO: return FileType::Fifo;
    case S_IFSOCK: return FileType::Socket;
    case S_IFCHR: return FileType::CharDevice;
    case S_IFBLK: return FileType::BlockDevice;
    default: return FileType::Regular;
  }
}

FileType typeFromDirent(unsigned char t) {
  switch (t) {
    case DT_DIR: return FileType::Directory;
    case DT_LNK: return FileType::Symlink;
    case DT_FIFO: return FileType::Fifo;
    case DT_SOCK: return FileType::Socket;
    case DT_CHR: return FileType::CharDevice;
    case DT_BLK: return FileType::BlockDevice;
    default: return FileType::Regular;
  }
}

// Where the first `size` bytes of `fd` hold data, by SEEK_DATA/SEEK_HOLE (see
// SpillFile::dataExtents). ENOSYS when the file system cannot say (then everything is data).
int fdExtents(int fd, uint64_t size, size_t max, std::vector<Extent>* out) {
  uint64_t at = 0;
  while (at < size) {
    off_t data = ::lseek(fd, static_cast<off_t>(at), SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) return 0;  // only a hole from here to the end
      return errno == EINVAL || errno == EOPNOTSUPP ? ENOSYS : errno;
    }
    if (static_cast<uint64_t>(data) >= size) return 0;
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) return errno == ENXIO ? 0 : errno;
    uint64_t end = std::min<uint64_t>(static_cast<uint64_t>(hole), size);
    if (out->size() + 1 >= max) end = size;  // too fragmented: the rest counts as data
    out->push_back(Extent{static_cast<uint64_t>(data), end - static_cast<uint64_t>(data)});
    at = end;
  }
  return 0;
}

class PosixLower final : public LowerFs {
 public:
  PosixLower(int rootFd, std::string root)
      : rootFd_(rootFd), root_(std::move(root)), real_(realPath(root_)),
        procOk_(posix::procFdUsable(rootFd)), ahead_(std::make_unique<DirReadAhead>(rootFd)) {}
  ~PosixLower() override {
    ahead_.reset();  // its thread reads through rootFd_
    ::close(rootFd_);
  }
  PosixLower(const PosixLower&) = delete;
  PosixLower& operator=(const PosixLower&) = delete;

  int stat(const std::string& rel, Attr* out) override {
    struct stat st;
    // The common case: one call on the root fd.
    if (rel.size() <= posix::directLimit()) {
      if (::fstatat(rootFd_, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0)
        return errno;
    } else {
      posix::At at;
      if (int e = posix::resolveAt(rootFd_, rel, &at)) return e;
      if (::fstatat(at.dirFd, at.name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
    }
    fill(st, out);
    return 0;
  }

  int fstat(LowerHandle h, Attr* out) override {
    struct stat st;
    if (::fstat(static_cast<int>(h), &st) != 0) return errno;
    fill(st, out);
    return 0;
  }

  static void fill(const struct stat& st, Attr* out) {
    out->ino = st.st_ino;
    out->type = typeFromMode(st.st_mode);
    out->perm = st.st_mode & 07777;
    out->nlink = static_cast<uint32_t>(st.st_nlink);
    out->uid = st.st_uid;
    out->gid = st.st_gid;
    out->rdev = st.st_rdev;
    out->size = static_cast<uint64_t>(st.st_size);
    out->blocks = static_cast<uint64_t>(st.st_blocks);
    out->blksize = static_cast<uint32_t>(st.st_blksize);
    out->atime = {st.st_atim.tv_sec, st.st_atim.tv_nsec};
    out->mtime = {st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
    out->ctime = {st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
  }

  int readdir(const std::string& rel, std::vector<DirEntry>* out) override {
    posix::At at;
    if (int e = posix::resolveAt(rootFd_, rel, &at)) return e;
    int fd = ::openat(at.dirFd, *at.name ? at.name : ".",
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    DIR* d = ::fdopendir(fd);
    if (!d) {
      int e = errno;
      ::close(fd);
      return e;
    }
    errno = 0;
    while (struct dirent* de = ::readdir(d)) {
      if (de->d_name[0] == '.' &&
          (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0)))
        continue;
      out->push_back(DirEntry{de->d_name, de->d_ino, typeFromDirent(de->d_type)});
    }
    int e = errno;
    ::closedir(d);
    return e;
  }

  void readAhead(const std::vector<std::string>& dirs) override { ahead_->want(dirs); }

  int readlink(const std::string& rel, std::string* out) override {
    char buf[4096];
    posix::At at;
    if (int e = posix::resolveAt(rootFd_, rel, &at)) return e;
    ssize_t n = ::readlinkat(at.dirFd, at.name, buf, sizeof buf);
    if (n < 0) return errno;
    out->assign(buf, static_cast<size_t>(n));
    return 0;
  }

  int open(const std::string& rel, LowerHandle* out) override {
    // O_NOATIME is refused for files we do not own; retry without it.
    posix::At at;
    if (int e = posix::resolveAt(rootFd_, rel, &at)) return e;
    // O_NONBLOCK: a FIFO (or a device) swapped in after the caller's stat opens at once instead
    // of waiting for a writer; fstat then refuses it. On a regular file the flag changes nothing.
    const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
    int fd = ::openat(at.dirFd, at.name, flags | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = ::openat(at.dirFd, at.name, flags);
    if (fd < 0) return errno;
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return e;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return EINVAL;  // only regular files hold content to read
    }
    *out = fd;
    return 0;
  }

  int dataExtents(LowerHandle h, uint64_t size, size_t max, std::vector<Extent>* out) override {
    return fdExtents(static_cast<int>(h), size, max, out);
  }

  int pread(LowerHandle h, char* buf, size_t size, uint64_t off, size_t* got) override {
    return preadFull(static_cast<int>(h), buf, size, off, got);
  }

  void close(LowerHandle h) override { ::close(static_cast<int>(h)); }

  int readDescriptor(LowerHandle h) override { return static_cast<int>(h); }

  // Through open(): only a regular file is read (a FIFO is refused, never waited on).
  int readAll(const std::string& rel, std::string* out) override {
    LowerHandle h = -1;
    int e = open(rel, &h);
    if (e) return e;
    struct stat st;
    if (::fstat(static_cast<int>(h), &st) == 0 && st.st_size > 0) out->reserve(st.st_size);
    char buf[1 << 16];
    uint64_t off = 0;
    for (;;) {
      size_t got = 0;
      e = pread(h, buf, sizeof buf, off, &got);
      if (e || got == 0) break;
      out->append(buf, got);
      off += got;
    }
    close(h);
    return e;
  }

  int listxattr(const std::string& rel, std::vector<std::string>* names) override {
    posix::Fd hold;
    std::string path;
    if (int e = xattrPath(rel, &hold, &path)) return e;
    auto list = [&](char* buf, size_t size) {
      return rel.empty() ? ::flistxattr(rootFd_, buf, size) : ::llistxattr(path.c_str(), buf, size);
    };
    // The list may grow between the two calls: retry on ERANGE.
    std::string buf;
    ssize_t n;
    for (;;) {
      n = list(nullptr, 0);
      if (n < 0) return errno == ENOTSUP ? 0 : errno;
      buf.assign(static_cast<size_t>(n), '\0');
      n = list(buf.data(), buf.size());
      if (n >= 0) break;
      if (errno != ERANGE) return errno;
    }
    for (size_t i = 0; i < static_cast<size_t>(n);) {
      size_t len = ::strnlen(buf.data() + i, static_cast<size_t>(n) - i);
      if (len) names->emplace_back(buf.data() + i, len);
      i += len + 1;
    }
    return 0;
  }

  int getxattr(const std::string& rel, const std::string& name, std::string* value) override {
    posix::Fd hold;
    std::string path;
    if (int e = xattrPath(rel, &hold, &path)) return e;
    auto get = [&](char* buf, size_t size) {
      return rel.empty() ? ::fgetxattr(rootFd_, name.c_str(), buf, size)
                         : ::lgetxattr(path.c_str(), name.c_str(), buf, size);
    };
    ssize_t n;
    for (;;) {
      n = get(nullptr, 0);
      if (n < 0) return errno == ENOTSUP ? ENODATA : errno;
      value->resize(static_cast<size_t>(n));
      n = get(value->data(), value->size());
      if (n >= 0) break;
      if (errno != ERANGE) return errno;
    }
    value->resize(static_cast<size_t>(n));
    return 0;
  }

  std::string hostRoot() const override { return real_; }

  Place hostPlace(const std::string& abs, const std::vector<std::string>& ownMounts,
                  std::string* rest) override {
    if (real_.empty() || abs.empty() || abs[0] != '/') return Place::Elsewhere;
    switch (posix::reach(real_, abs, rest, ownMounts)) {
      case posix::Reach::Shadow: return Place::Shadow;
      case posix::Reach::Inside: return Place::Inside;
      case posix::Reach::Ancestor: return Place::Ancestor;
      case posix::Reach::Refused: return Place::Refused;
      case posix::Reach::Elsewhere: break;
    }
    return Place::Elsewhere;
  }

  int statfs(FsStats* out) override {
    struct statvfs s;
    if (::fstatvfs(rootFd_, &s) != 0) return errno;
    out->bsize = s.f_bsize;
    out->frsize = s.f_frsize;
    out->blocks = s.f_blocks;
    out->bfree = s.f_bfree;
    out->bavail = s.f_bavail;
    out->files = s.f_files;
    out->ffree = s.f_ffree;
    out->namemax = s.f_namemax;
    return 0;
  }

 private:
  // A path for the l*xattr calls that reaches `rel` (not the root: the callers use f*xattr on
  // the root fd) without following its last component. Through /proc/self/fd: the root fd plus
  // rel when that fits in one call, else the parent directory's fd (opened by a walk and kept
  // in `hold`) plus the last name. Without /proc, the absolute path as far as it reaches.
  int xattrPath(const std::string& rel, posix::Fd* hold, std::string* path) const {
    if (procOk_) {
      *path = posix::procFdPath(rootFd_, rel.c_str());
      if (path->size() <= posix::directLimit()) return 0;
      size_t off = 0;
      if (rel.find('/') == std::string::npos) return ENAMETOOLONG;
      if (int e = posix::openParent(rootFd_, rel, hold, &off)) return e;
      *path = posix::procFdPath(hold->get(), rel.c_str() + off);
      return 0;
    }
    *path = root_ + "/" + rel;
    return path->size() <= posix::directLimit() ? 0 : ENAMETOOLONG;
  }

  static std::string realPath(const std::string& p) {
    char* r = ::realpath(p.c_str(), nullptr);
    if (!r) return std::string();
    std::string out(r);
    std::free(r);
    return out;
  }

  int rootFd_;
  std::string root_;
  std::string real_;  // root_'s real path, for hostPlace ("" if it could not be had)
  bool procOk_;  // /proc/self/fd reaches our fds (false in a chroot without /proc)
  std::unique_ptr<DirReadAhead> ahead_;
};

// Free space the disk spill files leave on their file system, which is often the one the user's
// folder is on (/tmp beside /home): an agent that writes without end gets ENOSPC while the user
// can still save. $SHADOWFS_SPILL_RESERVE in bytes (a K, M or G suffix allowed; 0 turns it off),
// else 5% of the file system, at most 1 GiB. Read once.
uint64_t explicitSpillReserve(bool* set) {
  static const std::pair<bool, uint64_t> r = [] {
    const char* v = std::getenv("SHADOWFS_SPILL_RESERVE");
    if (!v || !*v) return std::pair<bool, uint64_t>{false, 0};
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    switch (end && *end ? (*end | 0x20) : 0) {
      case 'k': n <<= 10; break;
      case 'm': n <<= 20; break;
      case 'g': n <<= 30; break;
      default: break;
    }
    return std::pair<bool, uint64_t>{true, static_cast<uint64_t>(n)};
  }();
  *set = r.first;
  return r.second;
}

// The reserve of one spill directory's file system (see explicitSpillReserve). Writes draw on a
// headroom measured by fstatvfs, so most writes cost no system call: it is measured again once
// the writes since the last measure have used it up, and it is at most 16 MiB or half of what
// was above the reserve (other programs write to the same file system meanwhile).
class SpillReserve {
 public:
  // ENOSPC when writing `size` more bytes to the file system of `fd` would leave less than the
  // reserve free; 0 otherwise, or when the system cannot say.
  int take(int fd, size_t size) {
    const int64_t n = static_cast<int64_t>(size);
    if (headroom_.fetch_sub(n, std::memory_order_relaxed) >= n) return 0;
    struct statvfs vs;
    if (::fstatvfs(fd, &vs) != 0) return 0;
    const uint64_t unit = vs.f_frsize ? vs.f_frsize : vs.f_bsize;
    bool set = false;
    uint64_t reserve = explicitSpillReserve(&set);
    if (!set) reserve = std::min<uint64_t>(uint64_t{1} << 30, static_cast<uint64_t>(vs.f_blocks) * unit / 20);
    const uint64_t avail = static_cast<uint64_t>(vs.f_bavail) * unit;
    if (reserve != 0 && (avail < reserve || avail - reserve < size)) {
      headroom_.store(0, std::memory_order_relaxed);
      return ENOSPC;
    }
    const uint64_t above = reserve == 0 ? UINT64_MAX : avail - reserve - size;
    headroom_.store(static_cast<int64_t>(std::min<uint64_t>(16u << 20, above / 2)), std::memory_order_relaxed);
    return 0;
  }

 private:
  std::atomic<int64_t> headroom_{0};
};

class PosixSpillFile final : public SpillFile {
 public:
  // `reserve`: for a file of the spill directory, the reserve its writes keep free there (null
  // for a memory file, whose writes the memory budget counts instead).
  explicit PosixSpillFile(int fd, std::shared_ptr<SpillReserve> reserve = nullptr) : fd_(fd), reserve_(std::move(reserve)) {}
  ~PosixSpillFile() override { ::close(fd_); }
  PosixSpillFile(const PosixSpillFile&) = delete;
  PosixSpillFile& operator=(const PosixSpillFile&) = delete;

  int pread(char* buf, size_t size, uint64_t off, size_t* got) override {
    return preadFull(fd_, buf, size, off, got);
  }

  int pwrite(const char* buf, size_t size, uint64_t off) override {
    if (reserve_ && size)
      if (int e = reserve_->take(fd_, size)) return e;
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, buf + done, size - done, static_cast<off_t>(off + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      done += static_cast<size_t>(n);
    }
    return 0;
  }

  int truncate(uint64_t size) override {
    return ::ftruncate(fd_, static_cast<off_t>(size)) == 0 ? 0 : errno;
  }

  int dataExtents(uint64_t size, size_t max, std::vector<Extent>* out) override {
    return fdExtents(fd_, size, max, out);
  }

  int duplicateDescriptor() override { return ::fcntl(fd_, F_DUPFD_CLOEXEC, 0); }
  int readDescriptor() override { return fd_; }

  int stat(uint64_t* size, Timespec* mtime, Timespec* ctime) override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return errno;
    *size = static_cast<uint64_t>(st.st_size);
    *mtime = Timespec{static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<uint32_t>(st.st_mtim.tv_nsec)};
    *ctime = Timespec{static_cast<int64_t>(st.st_ctim.tv_sec), static_cast<uint32_t>(st.st_ctim.tv_nsec)};
    return 0;
  }

 private:
  int fd_;
  std::shared_ptr<SpillReserve> reserve_;
};

// A content in memory with a descriptor the kernel can serve (memfd). Each holds one descriptor
// of the process, so at most 4096 exist at once (enough for the files an agent works on at a
// time), and never more than a quarter of the process's descriptor limit (1024 by default on
// many systems, though Node raises it to the hard limit); past it, opens are served through the
// daemon as before.
int maxMemoryFiles() {
  static const int n = [] {
    struct rlimit r {};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 4096;
    return static_cast<int>(std::min<rlim_t>(4096, r.rlim_cur / 4));
  }();
  return n;
}
std::atomic<int> memoryFiles{0};

class PosixMemoryFile final : public SpillFile {
 public:
  explicit PosixMemoryFile(int fd) : file_(fd) {}
  ~PosixMemoryFile() override { memoryFiles.fetch_sub(1, std::memory_order_relaxed); }
  int pread(char* buf, size_t size, uint64_t off, size_t* got) override {
    return file_.pread(buf, size, off, got);
  }
  int pwrite(const char* buf, size_t size, uint64_t off) override {
    return file_.pwrite(buf, size, off);
  }
  int truncate(uint64_t size) override { return file_.truncate(size); }
  int dataExtents(uint64_t size, size_t max, std::vector<Extent>* out) override {
    return file_.dataExtents(size, max, out);
  }
  int duplicateDescriptor() override { return file_.duplicateDescriptor(); }
  int readDescriptor() override { return file_.readDescriptor(); }
  bool inMemory() const override { return true; }
  int stat(uint64_t* size, Timespec* mtime, Timespec* ctime) override {
    return file_.stat(size, mtime, ctime);
  }

 private:
  PosixSpillFile file_;
};

class PosixSpill final : public SpillStore {
 public:
  explicit PosixSpill(std::string dir) : dir_(std::move(dir)), reserve_(std::make_shared<SpillReserve>()) {}
  int create(std::unique_ptr<SpillFile>* out) override {
    int fd = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    *out = std::make_unique<PosixSpillFile>(fd, reserve_);
    return 0;
  }

  int createInMemory(std::unique_ptr<SpillFile>* out) override {
#ifdef MFD_CLOEXEC
    if (memoryFiles.fetch_add(1, std::memory_order_relaxed) >= maxMemoryFiles()) {
      memoryFiles.fetch_sub(1, std::memory_order_relaxed);
      return EMFILE;
    }
    int fd = ::memfd_create("shadowfs-content", MFD_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      memoryFiles.fetch_sub(1, std::memory_order_relaxed);
      return e;
    }
    *out = std::make_unique<PosixMemoryFile>(fd);
    return 0;
#else
    (void)out;
    return ENOSYS;
#endif
  }

 private:
  std::string dir_;
  std::shared_ptr<SpillReserve> reserve_;
};

}  // namespace

std::unique_ptr<SpillStore> openPosixSpill(const std::string& dir, int* err) {
  // Probe once so a bad directory is reported at mount time, not at the first big write.
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = errno;
    return nullptr;
  }
  ::close(fd);
  return std::make_unique<PosixSpill>(dir);
}

std::unique_ptr<LowerFs> openPosixLower(const std::string& root, int* err) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return nullptr;
  }
  return std::make_unique<PosixLower>(fd, root);
}

}  // namespace shadowfs
