// Reaching an object of the user's folder from the folder's root directory fd, whatever the
// length of its path. Shared by PosixLower (reads) and PosixWatcher (inotify watches).
//
// Why: an absolute string (root + "/" + rel) stops working once it reaches PATH_MAX, and even a
// relative *at() call fails once `rel` alone is PATH_MAX bytes or more, yet a program inside the
// shadow may use any path that works in the folder. Short paths (the common case) still take
// one *at() call on the root fd; longer ones open the parent directory one component at a time
// with O_PATH | O_DIRECTORY | O_NOFOLLOW, so that walk never follows a symlink of the folder.
#pragma once

#include <string>

namespace shadowfs {
namespace posix {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Longest `rel` handed to an *at() call in one piece (the kernel refuses strings of PATH_MAX
// bytes or more, counting the final NUL).
size_t directLimit();

// Where an *at() call reaches `rel`: `dirFd` plus `name` relative to it. For a short `rel`,
// dirFd is the root fd and name is rel itself ("" for the root: use AT_EMPTY_PATH where the
// call allows it). For a long one, dirFd is the opened parent directory (owned by `parent`) and
// name is the last component. `rel` must outlive the result.
struct At {
  int dirFd = -1;
  const char* name = "";
  Fd parent;
};

// Fills `out` for `rel` (normalised, relative, no "." or ".."). Returns 0 or an errno of the
// walk (ENOENT, ENOTDIR when a component is not a directory or is a symlink, EACCES, ...).
// `forceWalk` takes the component walk even for a short path (tests, xattr calls).
int resolveAt(int rootFd, const std::string& rel, At* out, bool forceWalk = false);

// Opens the parent directory of `rel` (which must contain a '/') component by component,
// relative to rootFd, as an O_PATH fd. *name receives the offset of the last component in rel.
int openParent(int rootFd, const std::string& rel, Fd* out, size_t* nameOffset);

// Opens the directory `rel` itself (O_PATH | O_DIRECTORY, never following a final symlink),
// walking when it is long. "" opens a new fd for the root.
int openDirPath(int rootFd, const std::string& rel, Fd* out);

// "/proc/self/fd/<fd>" (+ "/" + name when name is not empty): a path that reaches an object
// through an fd for calls that have no *at() form (l*xattr, inotify_add_watch).
std::string procFdPath(int fd, const char* name = "");

// Whether /proc/self/fd can be used to reach fds by path (checked with `probeFd`).
bool procFdUsable(int probeFd);

}  // namespace posix
}  // namespace shadowfs
