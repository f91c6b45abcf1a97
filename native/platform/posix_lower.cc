// POSIX implementation of LowerFs. Every call is relative to one O_PATH directory fd for A's
// root, so A can be addressed without building absolute paths, and nothing is held open per
// file: only the files the shadow currently has open hold an fd.
#include "posix_lower.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

// pread until `size` bytes or end of file, retrying interrupted calls.
int preadFull(int fd, char* buf, size_t size, uint64_t off, size_t* got) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, buf + done, size - done, static_cast<off_t>(off + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  *got = done;
  return 0;
}

class PosixLower final : public LowerFs {
 public:
  PosixLower(int rootFd, std::string root) : rootFd_(rootFd), root_(std::move(root)) {}
  ~PosixLower() override { ::close(rootFd_); }
  PosixLower(const PosixLower&) = delete;
  PosixLower& operator=(const PosixLower&) = delete;

  int stat(const std::string& rel, Attr* out) override {
    struct stat st;
    if (::fstatat(rootFd_, p(rel), &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0) return errno;
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
    int fd = ::openat(rootFd_, rel.empty() ? "." : rel.c_str(),
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

  int readlink(const std::string& rel, std::string* out) override {
    char buf[4096];
    ssize_t n = ::readlinkat(rootFd_, p(rel), buf, sizeof buf);
    if (n < 0) return errno;
    out->assign(buf, static_cast<size_t>(n));
    return 0;
  }

  int open(const std::string& rel, LowerHandle* out) override {
    // O_NOATIME is refused for files we do not own; retry without it.
    int fd = ::openat(rootFd_, p(rel), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = ::openat(rootFd_, p(rel), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    *out = fd;
    return 0;
  }

  int pread(LowerHandle h, char* buf, size_t size, uint64_t off, size_t* got) override {
    return preadFull(static_cast<int>(h), buf, size, off, got);
  }

  void close(LowerHandle h) override { ::close(static_cast<int>(h)); }

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
    std::string path = full(rel);
    ssize_t n = ::llistxattr(path.c_str(), nullptr, 0);
    if (n < 0) return errno == ENOTSUP ? 0 : errno;
    std::string buf(static_cast<size_t>(n), '\0');
    n = ::llistxattr(path.c_str(), buf.data(), buf.size());
    if (n < 0) return errno;
    for (size_t i = 0; i < static_cast<size_t>(n);) {
      size_t len = std::strlen(buf.data() + i);
      if (len) names->emplace_back(buf.data() + i, len);
      i += len + 1;
    }
    return 0;
  }

  int getxattr(const std::string& rel, const std::string& name, std::string* value) override {
    std::string path = full(rel);
    ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (n < 0) return errno == ENOTSUP ? ENODATA : errno;
    value->resize(static_cast<size_t>(n));
    n = ::lgetxattr(path.c_str(), name.c_str(), value->data(), value->size());
    if (n < 0) return errno;
    value->resize(static_cast<size_t>(n));
    return 0;
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
  // "" means the root itself (used with AT_EMPTY_PATH).
  const char* p(const std::string& rel) const { return rel.c_str(); }
  std::string full(const std::string& rel) const {
    return rel.empty() ? root_ : root_ + "/" + rel;
  }

  int rootFd_;
  std::string root_;
};

class PosixSpillFile final : public SpillFile {
 public:
  explicit PosixSpillFile(int fd) : fd_(fd) {}
  ~PosixSpillFile() override { ::close(fd_); }
  PosixSpillFile(const PosixSpillFile&) = delete;
  PosixSpillFile& operator=(const PosixSpillFile&) = delete;

  int pread(char* buf, size_t size, uint64_t off, size_t* got) override {
    return preadFull(fd_, buf, size, off, got);
  }

  int pwrite(const char* buf, size_t size, uint64_t off) override {
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

 private:
  int fd_;
};

class PosixSpill final : public SpillStore {
 public:
  explicit PosixSpill(std::string dir) : dir_(std::move(dir)) {}
  int create(std::unique_ptr<SpillFile>* out) override {
    int fd = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    *out = std::make_unique<PosixSpillFile>(fd);
    return 0;
  }

 private:
  std::string dir_;
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
