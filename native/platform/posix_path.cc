// See posix_path.h.
#include "posix_path.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace shadowfs {
namespace posix {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

size_t directLimit() { return PATH_MAX - 1; }

namespace {

// Opens directory `name` (one component) under `dirFd` without following a symlink.
int openComponent(int dirFd, const std::string& name, Fd* out) {
  int fd;
  do {
    fd = ::openat(dirFd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno;
  out->reset(fd);
  return 0;
}

// Walks rel[0, end) one component at a time from rootFd. An empty range yields a new fd for
// the root itself, so the result is always owned.
int walk(int rootFd, const std::string& rel, size_t end, Fd* out) {
  Fd cur(::openat(rootFd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (cur.get() < 0) return errno;
  size_t start = 0;
  while (start < end) {
    size_t slash = rel.find('/', start);
    if (slash == std::string::npos || slash > end) slash = end;
    if (slash > start) {
      if (slash - start > NAME_MAX) return ENAMETOOLONG;
      Fd next;
      if (int e = openComponent(cur.get(), rel.substr(start, slash - start), &next)) return e;
      cur = std::move(next);
    }
    start = slash + 1;
  }
  *out = std::move(cur);
  return 0;
}

}  // namespace

int openParent(int rootFd, const std::string& rel, Fd* out, size_t* nameOffset) {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return EINVAL;
  *nameOffset = slash + 1;
  return walk(rootFd, rel, slash, out);
}

int resolveAt(int rootFd, const std::string& rel, At* out, bool forceWalk) {
  size_t slash = rel.rfind('/');
  if ((!forceWalk && rel.size() <= directLimit()) || slash == std::string::npos) {
    // A single component longer than NAME_MAX is refused by the call itself (ENAMETOOLONG).
    out->dirFd = rootFd;
    out->name = rel.c_str();
    return 0;
  }
  size_t off = 0;
  if (int e = openParent(rootFd, rel, &out->parent, &off)) return e;
  out->dirFd = out->parent.get();
  out->name = rel.c_str() + off;
  return 0;
}

int openDirPath(int rootFd, const std::string& rel, Fd* out) {
  if (rel.size() <= directLimit()) {
    int fd = ::openat(rootFd, rel.empty() ? "." : rel.c_str(),
                      O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    out->reset(fd);
    return 0;
  }
  return walk(rootFd, rel, rel.size(), out);
}

std::string procFdPath(int fd, const char* name) {
  std::string p = "/proc/self/fd/" + std::to_string(fd);
  if (name && *name) p.append("/").append(name);
  return p;
}

bool procFdUsable(int probeFd) {
  struct stat viaProc, direct;
  if (::stat(procFdPath(probeFd).c_str(), &viaProc) != 0) return false;
  if (::fstat(probeFd, &direct) != 0) return false;
  return viaProc.st_dev == direct.st_dev && viaProc.st_ino == direct.st_ino;
}

}  // namespace posix
}  // namespace shadowfs
