// shadowfs-launch: the one program through which the daemon starts anything an agent runs
// (runs, sessions, language servers) on Linux. It confines the command in depth, then execs it:
//
//   P0  this program, started by the daemon. Joins the run's cgroup; as a user other than root
//       it first makes a user namespace in which it is root (needed to mount); then new mount,
//       PID (and, asked, network) namespaces. It stays outside the PID namespace, waits for P1
//       and exits as P1 reports the command did (code, or the same signal).
//   P1  PID 1 of the new PID namespace: the run's init. Builds the mount view — everything
//       read-only, a fresh /proc of the namespace, private /tmp, /var/tmp, /dev/shm and /run,
//       the directories the daemon names hidden under empty read-only tmpfs, the shadow put back
//       at the path asked (A's own path by default), the user's writable list bound back
//       writable — then forks P2, reaps every orphan, forwards signals to P2, and when P2 ends
//       reports how many processes were left and exits, which kills everything left in the
//       namespace. A parent-death signal ties it to P0.
//   P2  makes a second user namespace (and mount namespace) whose ids P1 maps: every mount of
//       the view is then locked (a less privileged namespace cannot unmount or remount what it
//       was given, so A's path cannot be uncovered and nothing read-only made writable). It
//       takes the final ids, sets no_new_privs, a Landlock ruleset (writes only beneath the
//       shadow, the private temporary directories, devices and the writable list; no abstract
//       Unix sockets or signals outside the run), a seccomp filter (no mount, namespace,
//       file-handle, keyring, BPF, module or terminal-injection calls), closes every other
//       descriptor, and execs the command with exactly the environment it was given.
//
// Nothing here takes its program from PATH but the command itself, which is looked up with the
// command's own PATH after confinement. The daemon learns what held from the status
// descriptor (--status-fd): one line "protections a,b,c" before the exec, "error CODE text" on
// a failure to confine, and "leftover N" when the command ended.
//
// Usage:
//   shadowfs-launch [--cgroup DIR]... [--bind SRC DST]... [--ro-bind SRC DST]... [--tmpfs DIR]...
//                   [--hide DIR]... [--writable DIR]...
//                   [--net] [--cwd DIR] [--env NAME=VALUE]... [--status-fd N]
//                   [--no-namespaces] [--probe] -- COMMAND [ARG]...
// --tmpfs gives an empty private directory (the home: what tools keep there is dropped after).
// --ro-bind puts a read-only copy (language servers see the shadow and the folder that way).
// --no-namespaces: only the cgroup, Landlock, seccomp and the environment (for systems where no
// namespace can be made, when the caller accepted an unprotected run). --probe: confine, report
// the protections, and exit 0 instead of running a command.
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <grp.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace {

// ---- Landlock: declared from the kernel's documentation of its stable ABI
// (Documentation/userspace-api/landlock.rst), since the distribution's header may be older than
// the kernel. Bits only ever get added; each is used only when the kernel's ABI version has it.
constexpr uint64_t kLlWriteFile = 1ull << 1;
constexpr uint64_t kLlRemoveDir = 1ull << 4;
constexpr uint64_t kLlRemoveFile = 1ull << 5;
constexpr uint64_t kLlMakeChar = 1ull << 6;
constexpr uint64_t kLlMakeDir = 1ull << 7;
constexpr uint64_t kLlMakeReg = 1ull << 8;
constexpr uint64_t kLlMakeSock = 1ull << 9;
constexpr uint64_t kLlMakeFifo = 1ull << 10;
constexpr uint64_t kLlMakeBlock = 1ull << 11;
constexpr uint64_t kLlMakeSym = 1ull << 12;
constexpr uint64_t kLlRefer = 1ull << 13;     // ABI 2
constexpr uint64_t kLlTruncate = 1ull << 14;  // ABI 3
constexpr uint64_t kLlScopeAbstractUnix = 1ull << 0;  // ABI 6
constexpr uint64_t kLlScopeSignal = 1ull << 1;        // ABI 6
constexpr uint32_t kLlCreateRulesetVersion = 1u << 0;
constexpr int kLlRulePathBeneath = 1;
struct LlRulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct __attribute__((packed)) LlPathBeneath {
  uint64_t allowed_access;
  int32_t parent_fd;
};
constexpr long kSysLandlockCreateRuleset = 444;
constexpr long kSysLandlockAddRule = 445;
constexpr long kSysLandlockRestrictSelf = 446;

struct Options {
  std::vector<std::string> cgroups;  // the run's cgroup, and those that hold its resource limits
  std::vector<std::pair<std::string, std::string>> binds;    // source, target
  std::vector<std::pair<std::string, std::string>> roBinds;  // source, target, read-only
  std::vector<std::string> hides;
  std::vector<std::string> writable;
  std::vector<std::string> tmpfs;  // private, writable, empty: the home directory
  bool net = false;
  std::string cwd;
  std::vector<std::string> env;
  int statusFd = -1;
  bool namespaces = true;
  bool probe = false;
  std::vector<std::string> argv;
};

Options g_opts;
std::vector<std::string> g_held;  // what holds, for the "protections" line

void status(const std::string& line) {
  if (g_opts.statusFd < 0) return;
  // One line each: a control character in a path or a program name cannot make up a line.
  std::string l = line;
  for (char& c : l)
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  l += "\n";
  ssize_t ignored = write(g_opts.statusFd, l.data(), l.size());
  (void)ignored;
}

[[noreturn]] void fail(const char* code, const std::string& what, int err = 0) {
  std::string msg = what;
  if (err) msg += std::string(": ") + strerror(err);
  status(std::string("error ") + code + " " + msg);
  fprintf(stderr, "shadowfs-launch: %s\n", msg.c_str());
  _exit(126);
}

bool writeFile(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

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
// The devices a build uses; nothing else of the host's /dev.
const char* const kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
constexpr const char* kRoot = "/tmp";  // the new root is a tmpfs mounted over /tmp, then pivoted into

int cloneTree(const std::string& source, bool recursive = true) {
  int fd = static_cast<int>(open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0)));
  if (fd < 0) fail("CONFINEMENT_FAILED", "cannot take a copy of the mount at " + source, errno);
  return fd;
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
    struct stat st;
    if (stat(source.c_str(), &st) != 0) {
      if (attrs & MOUNT_ATTR_RDONLY) return;  // an optional read-only extra that is not there
      fail("CONFINEMENT_FAILED", "cannot find " + source, errno);
    }
    bool file = !S_ISDIR(st.st_mode);
    mustBeCanonical(source, source);
    placed.push_back({cloneTree(source, !file), target, attrs, file});
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

// ---- Landlock and seccomp (P2) -------------------------------------------------------------

void addBeneath(int ruleset, const std::string& path, uint64_t access) {
  int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return;  // nothing there to allow
  LlPathBeneath rule = {access, fd};
  if (syscall(kSysLandlockAddRule, ruleset, kLlRulePathBeneath, &rule, 0) != 0 && errno != ENOENT)
    fail("CONFINEMENT_FAILED", "cannot add the Landlock rule for " + path, errno);
  close(fd);
}

void applyLandlock(const std::vector<std::string>& writable) {
  long abi = syscall(kSysLandlockCreateRuleset, nullptr, 0, kLlCreateRulesetVersion);
  if (abi < 1) return;  // not in this kernel (or disabled): the caller sees it missing from "protections"
  uint64_t write = kLlWriteFile | kLlRemoveDir | kLlRemoveFile | kLlMakeChar | kLlMakeDir | kLlMakeReg | kLlMakeSock |
                   kLlMakeFifo | kLlMakeBlock | kLlMakeSym;
  if (abi >= 2) write |= kLlRefer;
  if (abi >= 3) write |= kLlTruncate;
  LlRulesetAttr attr = {};
  attr.handled_access_fs = write;
  size_t size = offsetof(LlRulesetAttr, handled_access_net);
  if (abi >= 6) {
    attr.scoped = kLlScopeAbstractUnix | kLlScopeSignal;
    size = sizeof attr;
  }
  int ruleset = static_cast<int>(syscall(kSysLandlockCreateRuleset, &attr, size, 0));
  if (ruleset < 0) fail("CONFINEMENT_FAILED", "cannot create the Landlock ruleset", errno);
  for (auto& w : writable) addBeneath(ruleset, w, write);
  // Devices: writing the few the view has and the run's own terminals; making nothing.
  for (const char* dev : kDevices) addBeneath(ruleset, dev, kLlWriteFile | (abi >= 3 ? kLlTruncate : 0));
  addBeneath(ruleset, "/dev/pts", kLlWriteFile | (abi >= 3 ? kLlTruncate : 0));
  if (syscall(kSysLandlockRestrictSelf, ruleset, 0) != 0) fail("CONFINEMENT_FAILED", "cannot apply the Landlock ruleset", errno);
  close(ruleset);
  g_held.push_back(abi >= 6 ? "landlock" : "landlock-writes");
}

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
constexpr uint32_t kHighestKnown = 469;  // file_setattr, Linux 6.17
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
constexpr uint32_t kHighestKnown = 469;
#else
#error "shadowfs-launch: add this architecture's AUDIT_ARCH value"
#endif

void applySeccomp() {
  // Refused with EPERM: what namespaces and capabilities already stop, once more, and what they
  // do not cover (keyrings, BPF, perf, userfaultfd, terminal injection).
  static const long denied[] = {
      SYS_mount, SYS_umount2, SYS_pivot_root, SYS_move_mount, SYS_open_tree, SYS_fsopen, SYS_fsconfig, SYS_fsmount,
      SYS_fspick, SYS_mount_setattr, SYS_setns, SYS_unshare, SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_bpf,
      SYS_perf_event_open, SYS_kexec_load, SYS_kexec_file_load, SYS_init_module, SYS_finit_module, SYS_delete_module,
      SYS_add_key, SYS_request_key, SYS_keyctl, SYS_userfaultfd, SYS_swapon, SYS_swapoff, SYS_reboot, SYS_syslog, SYS_acct,
      SYS_quotactl, SYS_chroot,
      457 /* statmount */, 458 /* listmount */, 467 /* open_tree_attr: a copy of a mount, as open_tree */,
#ifdef SYS_iopl
      SYS_iopl, SYS_ioperm,
#endif
  };
  const uint32_t nsFlags = CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP;
  std::vector<sock_filter> f;
  auto stmt = [&](uint16_t code, uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto jump = [&](uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { f.push_back(BPF_JUMP(code, k, jt, jf)); };
  const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);  // the x32 ABI: another way in to the same calls
  stmt(BPF_RET | BPF_K, eperm);
#endif
  for (long nr : denied) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    stmt(BPF_RET | BPF_K, eperm);
  }
  // Calls newer than this filter knows: not there, as on an older kernel.
  jump(BPF_JMP | BPF_JGT | BPF_K, kHighestKnown, 0, 1);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  // openat2 passes its mode in memory: ENOSYS, and libc's open uses openat.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  // No set-user-ID or set-group-ID bit from a run: a root run could leave such programs in a
  // writable directory of the host. (The mode argument of chmod, fchmod, fchmodat(2), creat,
  // open and openat.)
  for (auto [nr, arg] : std::vector<std::pair<long, int>>{
           {SYS_chmod, 1}, {SYS_fchmod, 1}, {SYS_fchmodat, 2}, {452 /* fchmodat2 */, 2}, {SYS_creat, 1}, {SYS_open, 2}, {SYS_openat, 3}}) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4);
    stmt(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * arg));
    jump(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, 0, 1);
    stmt(BPF_RET | BPF_K, eperm);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  // clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  // clone with a namespace flag.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
  jump(BPF_JMP | BPF_JSET | BPF_K, nsFlags, 0, 1);
  stmt(BPF_RET | BPF_K, eperm);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  // ioctl TIOCSTI / TIOCLINUX: typing into a terminal another program reads.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 5);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1]));
  jump(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 2, 0);
  jump(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 1, 0);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  stmt(BPF_RET | BPF_K, eperm);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  sock_fprog prog = {static_cast<unsigned short>(f.size()), f.data()};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) fail("CONFINEMENT_FAILED", "cannot install the seccomp filter", errno);
  g_held.push_back("seccomp");
}

// ---- the command (P2, or P0 without namespaces) ------------------------------------------

std::string joinHeld() {
  std::string s;
  for (auto& h : g_held) s += (s.empty() ? "" : ",") + h;
  return s;
}

[[noreturn]] void confineAndExec(const std::vector<std::string>& writable) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("CONFINEMENT_FAILED", "cannot set no_new_privs", errno);
  applyLandlock(writable);
  if (!g_opts.cwd.empty() && chdir(g_opts.cwd.c_str()) != 0) fail("CONFINEMENT_FAILED", "cannot enter " + g_opts.cwd, errno);
  applySeccomp();
  status("protections " + joinHeld());
  if (g_opts.probe) _exit(0);
  std::vector<char*> env;
  for (auto& e : g_opts.env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : g_opts.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  environ = env.data();  // execvp looks the program up in this PATH: the command's own
  execvp(argv[0], argv.data());
  int err = errno;
  status(std::string("error NOT_FOUND cannot start ") + argv[0] + ": " + strerror(err));
  fprintf(stderr, "shadowfs-launch: cannot start %s: %s\n", argv[0], strerror(err));
  _exit(err == ENOENT ? 127 : 126);
}

std::vector<std::string> writableTargets() {
  std::vector<std::string> w;
  for (auto& b : g_opts.binds) w.push_back(b.second);
  for (auto& x : g_opts.writable) w.push_back(x);
  for (auto& x : g_opts.tmpfs) w.push_back(x);
  // The view's private temporary directories; without namespaces those would be the host's,
  // and the caller names a private directory of the run's instead (--writable).
  if (g_opts.namespaces)
    for (const char* t : {"/tmp", "/var/tmp", "/dev/shm"}) w.push_back(t);
  return w;
}

void closeOthers() {
  // Everything but the standard streams and the status descriptor.
  int keep = g_opts.statusFd;
  if (keep > 3) {
    if (dup2(keep, 3) < 0) fail("INTERNAL", "cannot move the status descriptor", errno);
    g_opts.statusFd = keep = 3;
  }
  if (keep == 3) {
    syscall(SYS_close_range, 4u, ~0u, 0u);
    fcntl(3, F_SETFD, FD_CLOEXEC);
  } else {
    syscall(SYS_close_range, 3u, ~0u, 0u);
  }
}

// ---- P1: the run's init --------------------------------------------------------------------

pid_t g_command = -1;

void forward(int sig) {
  if (g_command > 0) kill(g_command, sig);
}

int syncRead(int fd) {
  char c;
  ssize_t n;
  do n = read(fd, &c, 1);
  while (n < 0 && errno == EINTR);
  return n == 1 ? c : -1;
}

[[noreturn]] void runInit(int reportFd, uid_t outerUid, gid_t outerGid, bool rootDaemon) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(126);
  // Nothing of the run may read this process's memory or descriptors, whatever its ids.
  prctl(PR_SET_DUMPABLE, 0);
  buildView();
  if (g_opts.net) {
    loopbackUp();
    g_held.push_back("network");
  }
  g_held.push_back("pid");
  int toChild[2], toParent[2];
  if (pipe2(toChild, O_CLOEXEC) != 0 || pipe2(toParent, O_CLOEXEC) != 0) fail("INTERNAL", "cannot make a pipe", errno);
  pid_t child = fork();
  if (child < 0) fail("INTERNAL", "cannot fork", errno);
  if (child == 0) {
    prctl(PR_SET_DUMPABLE, 1);  // P1 maps this process's ids through its /proc files
    close(toChild[1]);
    close(toParent[0]);
    close(reportFd);
    // The second user namespace: what P1 built is locked from here on.
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) fail("NAMESPACE_UNAVAILABLE", "cannot make the run's own user namespace", errno);
    if (write(toParent[1], "u", 1) != 1 || syncRead(toChild[0]) != 'm') _exit(126);
    // Root's runs stay uid 0, with every id mapped (chown in the shadow works), holding
    // capabilities only over their own namespaces; anyone else's run is that user, with none.
    uid_t uid = rootDaemon ? 0 : outerUid;
    gid_t gid = rootDaemon ? 0 : outerGid;
    if (rootDaemon && setgroups(0, nullptr) != 0) fail("CONFINEMENT_FAILED", "cannot drop supplementary groups", errno);
    if (setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) fail("CONFINEMENT_FAILED", "cannot take the run's ids", errno);
    // Root's run keeps what a build needs of its capabilities (over its own namespaces only), not
    // these: administration, file capabilities and set-ID keeping, devices, modules, raw I/O,
    // clock, audit, BPF, perf, checkpoint/restore.
    if (rootDaemon) {
      for (int cap : {21 /* SYS_ADMIN */, 31 /* SETFCAP */, 4 /* FSETID */, 27 /* MKNOD */, 16 /* SYS_MODULE */,
                      17 /* SYS_RAWIO */, 22 /* SYS_BOOT */, 25 /* SYS_TIME */, 29 /* AUDIT_WRITE */, 30 /* AUDIT_CONTROL */,
                      37 /* AUDIT_READ */, 32 /* MAC_OVERRIDE */, 33 /* MAC_ADMIN */, 34 /* SYSLOG */, 38 /* PERFMON */,
                      39 /* BPF */, 40 /* CHECKPOINT_RESTORE */, 9 /* LINUX_IMMUTABLE */}) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
          fail("CONFINEMENT_FAILED", "cannot drop capability " + std::to_string(cap), errno);
      }
    }
    g_held.push_back("user");
    confineAndExec(writableTargets());
  }
  close(toChild[0]);
  close(toParent[1]);
  if (syncRead(toParent[0]) != 'u') {
    int st;
    waitpid(child, &st, 0);
    _exit(126);
  }
  std::string proc = "/proc/" + std::to_string(child) + "/";
  // P1's /proc is the new namespace's: the child's pid there is the same number fork returned.
  bool mapped;
  if (rootDaemon) {
    mapped = writeFile(proc + "uid_map", "0 0 4294967295\n") && writeFile(proc + "gid_map", "0 0 4294967295\n");
  } else {
    writeFile(proc + "setgroups", "deny\n");
    mapped = writeFile(proc + "uid_map", std::to_string(outerUid) + " 0 1\n") &&
             writeFile(proc + "gid_map", std::to_string(outerGid) + " 0 1\n");
  }
  if (!mapped) {
    kill(child, SIGKILL);
    fail("NAMESPACE_UNAVAILABLE", "cannot map ids into the run's user namespace", errno);
  }
  g_command = child;
  struct sigaction sa = {};
  sa.sa_handler = forward;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT}) sigaction(sig, &sa, nullptr);
  if (write(toChild[1], "m", 1) != 1) _exit(126);
  close(toChild[1]);
  int commandStatus = 0;
  for (;;) {
    int st;
    pid_t p = waitpid(-1, &st, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p == child) {
      commandStatus = st;
      break;
    }
  }
  // Whatever the command left: counted, then killed with the namespace when this init exits.
  int left = 0;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end;
      long pid = strtol(e->d_name, &end, 10);
      if (*end == 0 && pid > 1) ++left;
    }
    closedir(d);
  }
  status("leftover " + std::to_string(left));
  int32_t report[2] = {WIFSIGNALED(commandStatus) ? 1 : 0,
                       WIFSIGNALED(commandStatus) ? WTERMSIG(commandStatus) : WEXITSTATUS(commandStatus)};
  ssize_t ignored = write(reportFd, report, sizeof report);
  (void)ignored;
  _exit(0);
}

// ---- P0 ---------------------------------------------------------------------------------------

pid_t g_init = -1;
void forwardToInit(int sig) {
  if (g_init > 0) kill(g_init, sig);
}

[[noreturn]] void usage(const char* why) {
  fprintf(stderr, "shadowfs-launch: %s\n", why);
  _exit(125);
}

bool absolute(const std::string& p) { return !p.empty() && p[0] == '/' && p.find('\0') == std::string::npos; }

void parse(int argc, char** argv) {
  int i = 1;
  auto need = [&](int n) {
    if (i + n >= argc) usage((std::string(argv[i]) + " needs an argument").c_str());
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    } else if (a == "--cgroup") {
      need(1);
      g_opts.cgroups.emplace_back(argv[++i]);
    } else if (a == "--bind") {
      need(2);
      g_opts.binds.emplace_back(argv[i + 1], argv[i + 2]);
      i += 2;
    } else if (a == "--ro-bind") {
      need(2);
      g_opts.roBinds.emplace_back(argv[i + 1], argv[i + 2]);
      i += 2;
    } else if (a == "--tmpfs") {
      need(1);
      g_opts.tmpfs.push_back(argv[++i]);
    } else if (a == "--hide") {
      need(1);
      g_opts.hides.push_back(argv[++i]);
    } else if (a == "--writable") {
      need(1);
      g_opts.writable.push_back(argv[++i]);
    } else if (a == "--net") {
      g_opts.net = true;
    } else if (a == "--cwd") {
      need(1);
      g_opts.cwd = argv[++i];
    } else if (a == "--env") {
      need(1);
      g_opts.env.push_back(argv[++i]);
    } else if (a == "--status-fd") {
      need(1);
      g_opts.statusFd = atoi(argv[++i]);
    } else if (a == "--no-namespaces") {
      g_opts.namespaces = false;
    } else if (a == "--probe") {
      g_opts.probe = true;
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  for (; i < argc; ++i) g_opts.argv.push_back(argv[i]);
  if (g_opts.argv.empty() && !g_opts.probe) usage("no command given (after --)");
  for (auto& b : g_opts.binds)
    if (!absolute(b.first) || !absolute(b.second)) usage("--bind takes two absolute paths");
  for (auto& b : g_opts.roBinds)
    if (!absolute(b.first) || !absolute(b.second)) usage("--ro-bind takes two absolute paths");
  for (auto& p : g_opts.hides)
    if (!absolute(p)) usage("--hide takes an absolute path");
  for (auto& p : g_opts.writable)
    if (!absolute(p)) usage("--writable takes an absolute path");
  for (auto& p : g_opts.tmpfs)
    if (!absolute(p) || p == "/") usage("--tmpfs takes an absolute path other than /");
  if (!g_opts.cwd.empty() && !absolute(g_opts.cwd)) usage("--cwd takes an absolute path");
}

}  // namespace

int main(int argc, char** argv) {
  parse(argc, argv);
  closeOthers();
  // Every cgroup before anything else runs: the run's (killed whole at its end) and, on a
  // system whose controllers are still on cgroup v1, one per limited controller.
  for (const std::string& cg : g_opts.cgroups)
    if (!writeFile(cg + "/cgroup.procs", "0\n"))
      fail("INTERNAL", "cannot join the run's cgroup " + cg, errno);
  if (!g_opts.namespaces) {
    std::vector<std::string> w = writableTargets();
    confineAndExec(w);
  }
  uid_t uid = geteuid();
  gid_t gid = getegid();
  bool root = uid == 0;
  if (!root) {
    if (unshare(CLONE_NEWUSER) != 0) fail("NAMESPACE_UNAVAILABLE", "cannot make a user namespace", errno);
    if (!writeFile("/proc/self/setgroups", "deny\n") || !writeFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n") ||
        !writeFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n"))
      fail("NAMESPACE_UNAVAILABLE", "cannot map ids into a user namespace", errno);
  }
  if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | (g_opts.net ? CLONE_NEWNET : 0)) != 0)
    fail("NAMESPACE_UNAVAILABLE", g_opts.net ? "cannot make mount, PID and network namespaces" : "cannot make mount and PID namespaces", errno);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) fail("INTERNAL", "cannot make a pipe", errno);
  pid_t init = fork();
  if (init < 0) fail("NAMESPACE_UNAVAILABLE", "cannot start the run's PID namespace", errno);
  if (init == 0) {
    close(report[0]);
    if (getppid() == 1) _exit(126);  // P0 already gone: no one to report to (the death signal came too late)
    runInit(report[1], uid, gid, root);
  }
  close(report[1]);
  g_init = init;
  struct sigaction sa = {};
  sa.sa_handler = forwardToInit;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT}) sigaction(sig, &sa, nullptr);
  int st;
  while (waitpid(init, &st, 0) < 0 && errno == EINTR) {
  }
  int32_t how[2] = {0, 126};
  ssize_t n;
  do n = read(report[0], how, sizeof how);
  while (n < 0 && errno == EINTR);
  if (n != sizeof how) {
    // The init ended without a report: a failure it described on the status descriptor, or it was killed.
    if (WIFEXITED(st)) _exit(WEXITSTATUS(st) ? WEXITSTATUS(st) : 126);
    _exit(128 + WTERMSIG(st));
  }
  if (how[0] == 1) {
    signal(how[1], SIG_DFL);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, nullptr);
    kill(getpid(), how[1]);
    _exit(128 + how[1]);
  }
  _exit(how[1]);
}
