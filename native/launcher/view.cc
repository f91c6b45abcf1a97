// shadowfs-launch, P1: the run's mount view (see linux_launch.cc). Everything read-only, a
// fresh /proc, private temporary directories, the hidden directories covered, the shadow and
// the writable list put in place, then pivoted into; and the network namespace's loopback.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include <algorithm>
#include <string>
#include <vector>

#include "launch.h"

namespace launch {
namespace {

bool isDir(const std::string& p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool under(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

void mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string part = path.substr(0, i);
      if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) fail("CONFINEMENT_FAILED", "cannot make " + part + " in the run's view", errno);
    }
  }
}

// ---- the mount view (P1) ---------------------------------------------------------------

struct Placed {
  int fd;
  std::string target;
  unsigned long long attrs;  // MOUNT_ATTR_* set on the copy before it is placed
  bool file;
};

// The system the run reads: these top-level directories of the host, read-only (symbolic links
// among them, as merged-/usr systems have, are made again as links). Nothing else of the host
// is there unless the daemon names it: not /home, /root, /var, /mnt, /media, /srv, whose
// sockets (container engines, agents, buses) a run could otherwise connect to.
const char* const kSystem[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/sys"};
constexpr const char* kRoot = "/tmp";  // the new root is a tmpfs mounted over /tmp, then pivoted into

int cloneTree(const std::string& source, bool recursive = true) {
  int fd = static_cast<int>(open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0)));
  if (fd < 0) fail("CONFINEMENT_FAILED", "cannot take a copy of the mount at " + source, errno);
  return fd;
}

// The object at `path`, opened without following any symbolic link in any component (openat2
// RESOLVE_NO_SYMLINKS), as an O_PATH descriptor: what is copied into the view is the object the
// check saw. A path string checked with realpath() and then opened again could be swapped for a
// link in between by a run writing one of its parents (a writable directory of another run or
// session holding this one): that race once let a session bind the user's folder itself. -1 with
// errno (ELOOP: a link on the way); a kernel without openat2 (before 5.6) falls back to the check
// and the open by name, said in the code rather than refused.
int openNoLinks(const std::string& path) {
  struct open_how how = {};
  how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how));
  if (fd >= 0 || errno != ENOSYS) return fd;
  char real[PATH_MAX];
  if (!realpath(path.c_str(), real)) return -1;
  if (path != real) {
    errno = ELOOP;
    return -1;
  }
  return open(path.c_str(), O_PATH | O_CLOEXEC | O_NOFOLLOW);
}

// A copy of the mount holding the object `fd` refers to (open_tree on the descriptor, not on a name).
int cloneTreeAt(int fd, const std::string& what, bool recursive) {
  int t = static_cast<int>(open_tree(fd, "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0)));
  if (t < 0) fail("CONFINEMENT_FAILED", "cannot take a copy of the mount at " + what, errno);
  return t;
}

void tmpfsAt(const std::string& dir, const char* opts, unsigned long flags) {
  if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | flags, opts) != 0)
    fail("CONFINEMENT_FAILED", "cannot mount a private tmpfs at " + dir, errno);
}

void setAttrs(int fd, const std::string& what, unsigned long long attrs, bool recursive) {
  struct mount_attr a = {};
  a.attr_set = attrs;
  if (mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a, sizeof a) != 0)
    fail("CONFINEMENT_FAILED", "cannot set the mount flags of " + what, errno);
}

// A path with no symbolic link in it: the place a mount is taken from, or put at in the view,
// is never decided by a link someone planted (a run writes links into the shadow and into the
// writable directories, and the next run's view is built through them).
void mustBeCanonical(const std::string& path, const std::string& what) {
  char real[PATH_MAX];
  if (!realpath(path.c_str(), real)) fail("CONFINEMENT_FAILED", "cannot resolve " + what, errno);
  if (path != real) fail("CONFINEMENT_FAILED", what + " goes through a symbolic link (to " + real + "); name the real path");
}

void place(const Placed& p) {
  std::string at = std::string(kRoot) + p.target;
  struct stat st;
  if (lstat(at.c_str(), &st) != 0) {
    if (p.file) {
      mkdirs(at.substr(0, at.rfind('/')));
      int fd = open(at.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) fail("CONFINEMENT_FAILED", "cannot make " + p.target + " in the run's view", errno);
      close(fd);
    } else {
      mkdirs(at);
    }
  }
  mustBeCanonical(at, p.target + " in the run's view");
  setAttrs(p.fd, p.target, p.attrs, !p.file);
  if (move_mount(p.fd, "", AT_FDCWD, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    fail("CONFINEMENT_FAILED", "cannot put " + p.target + " in the run's view", errno);
  close(p.fd);
}

}  // namespace

void buildView() {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("CONFINEMENT_FAILED", "cannot make the mounts private", errno);
  const unsigned long long roAttrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  const unsigned long long rwAttrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  // Everything the view is made of is taken first, before anything is covered.
  std::vector<Placed> system, placed, devices;
  std::vector<std::pair<std::string, std::string>> links;
  for (const char* dir : kSystem) {
    struct stat st;
    if (lstat(dir, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(dir, target, sizeof target - 1);
      if (n > 0) links.emplace_back(dir, std::string(target, static_cast<size_t>(n)));
    } else if (S_ISDIR(st.st_mode)) {
      system.push_back({cloneTree(dir), dir, roAttrs, false});
    }
  }
  auto add = [&](const std::string& source, const std::string& target, unsigned long long attrs) {
    int fd = openNoLinks(source);
    if (fd < 0) {
      if (errno == ENOENT && (attrs & MOUNT_ATTR_RDONLY)) return;  // an optional read-only extra that is not there
      if (errno == ELOOP) fail("CONFINEMENT_FAILED", source + " goes through a symbolic link; name the real path");
      fail("CONFINEMENT_FAILED", "cannot find " + source, errno);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) fail("CONFINEMENT_FAILED", "cannot read " + source, errno);
    bool file = !S_ISDIR(st.st_mode);
    placed.push_back({cloneTreeAt(fd, source, !file), target, attrs, file});
    close(fd);
  };
  for (auto& b : g_opts.binds) add(b.first, b.second, rwAttrs);
  for (auto& b : g_opts.roBinds) add(b.first, b.second, roAttrs);
  for (auto& w : g_opts.writable)
    if (isDir(w)) add(w, w, rwAttrs);
  // Name resolution may live under /run (systemd-resolved's stub file): that one directory comes back.
  char resolved[PATH_MAX];
  if (realpath("/etc/resolv.conf", resolved) && under(resolved, "/run")) {
    std::string dir(resolved);
    dir = dir.substr(0, dir.rfind('/'));
    add(dir, dir, roAttrs);
  }
  for (const char* dev : kDevices) {
    struct stat st;
    if (stat(dev, &st) == 0 && S_ISCHR(st.st_mode)) devices.push_back({cloneTree(dev, false), dev, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, true});
  }
  // The new root: a tmpfs, read-only once built.
  tmpfsAt(kRoot, "mode=0755", 0);
  for (auto& l : links) {
    if (symlink(l.second.c_str(), (std::string(kRoot) + l.first).c_str()) != 0)
      fail("CONFINEMENT_FAILED", "cannot make the link " + l.first, errno);
  }
  for (auto& p : system) place(p);
  std::string root(kRoot);
  // The namespace's own processes only; /proc/sys and the sysrq trigger read-only.
  mkdirs(root + "/proc");
  if (mount("proc", (root + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    fail("CONFINEMENT_FAILED", "cannot mount the run's own /proc", errno);
  for (const char* sub : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}) {
    struct stat st;
    std::string at = root + sub;
    if (lstat(at.c_str(), &st) != 0) continue;
    int fd = cloneTree(at, S_ISDIR(st.st_mode));
    setAttrs(fd, sub, roAttrs, S_ISDIR(st.st_mode));
    if (move_mount(fd, "", AT_FDCWD, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) fail("CONFINEMENT_FAILED", std::string("cannot protect ") + sub, errno);
    close(fd);
  }
  // A /dev of its own: the usual devices, a private pty instance, shared memory.
  mkdirs(root + "/dev");
  tmpfsAt(root + "/dev", "mode=0755", MS_NOEXEC);
  for (auto& d : devices) place(d);
  mkdirs(root + "/dev/pts");
  if (mount("devpts", (root + "/dev/pts").c_str(), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") != 0)
    fail("CONFINEMENT_FAILED", "cannot mount the run's own /dev/pts", errno);
  mkdirs(root + "/dev/shm");
  tmpfsAt(root + "/dev/shm", "mode=1777", 0);
  for (auto& l : std::vector<std::pair<const char*, const char*>>{
           {"pts/ptmx", "/dev/ptmx"}, {"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"},
           {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}}) {
    if (symlink(l.first, (root + l.second).c_str()) != 0) fail("CONFINEMENT_FAILED", std::string("cannot make ") + l.second, errno);
  }
  // Private scratch space; an empty /run.
  for (const char* t : {"/tmp", "/var/tmp"}) {
    mkdirs(root + t);
    tmpfsAt(root + t, "mode=1777", 0);
  }
  mkdirs(root + "/run");
  tmpfsAt(root + "/run", "mode=0755", 0);
  for (auto& t : g_opts.tmpfs) {
    mkdirs(root + t);
    tmpfsAt(root + t, "mode=0700", 0);
  }
  // The shadow, the daemon's read-only extras and the user's writable list, parents first.
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) { return a.target.size() < b.target.size(); });
  for (auto& p : placed) place(p);
  // Hidden even where an extra would show them: shadowfs's runtime, state and configuration
  // directories, other shadows and views.
  for (auto& h : g_opts.hides) {
    // A directory made only to hold a placed mount (the runtime directory around a view's
    // mount point) shows nothing else: covering it would cover the mount.
    bool holds = false;
    for (auto& p : placed) holds = holds || under(p.target, h);
    if (holds) continue;
    std::string at = root + h;
    // A shadow or view that came along with a cloned tree is a copy of its mount: detached
    // here, so this namespace never keeps it alive (a daemon that is not root made this
    // namespace inside a user namespace, which locks the copies: then they are covered only).
    umount2(at.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    // What is there, from the kernel's cached attributes only: a hidden path may be a mount
    // whose server hangs, and a stat that asked it would hang this run before it starts.
    struct statx sx;
    if (statx(AT_FDCWD, at.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &sx) != 0 ||
        !S_ISDIR(sx.stx_mode))
      continue;
    tmpfsAt(at, "mode=0555,size=4k", MS_RDONLY | MS_NOEXEC);
  }
  // Into the new root; the old one is detached.
  mkdirs(root + "/.old");
  if (syscall(SYS_pivot_root, kRoot, (root + "/.old").c_str()) != 0) fail("CONFINEMENT_FAILED", "cannot enter the run's view", errno);
  if (chdir("/") != 0 || umount2("/.old", MNT_DETACH) != 0) fail("CONFINEMENT_FAILED", "cannot leave the host's view", errno);
  rmdir("/.old");
  for (const char* dir : {"/", "/dev"}) {
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("CONFINEMENT_FAILED", std::string("cannot open ") + dir, errno);
    setAttrs(fd, dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, false);
    close(fd);
  }
  g_held.push_back("mount");
}

void loopbackUp() {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail("CONFINEMENT_FAILED", "cannot bring up the loopback interface", errno);
  struct ifreq ifr = {};
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) fail("CONFINEMENT_FAILED", "cannot bring up the loopback interface", errno);
  }
  close(s);
}

}  // namespace launch
