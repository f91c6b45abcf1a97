// shadowfs-launch, P2 (or P0 without namespaces): the command's own confinement, then its exec
// (see linux_launch.cc). no_new_privs, a Landlock ruleset (writes only beneath the writable
// places; no abstract Unix sockets or signals outside the run), a seccomp filter, descriptors
// closed, the exact environment given.
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "launch.h"

extern char** environ;

namespace launch {
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
  // io_uring runs opens, mknod and the rest in the kernel, where this filter never sees their
  // arguments (a set-user-ID mode included): not there, as on a kernel without it (programs fall
  // back to plain system calls).
  for (long nr : {SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register}) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  }
  // Calls newer than this filter knows: not there, as on an older kernel.
  jump(BPF_JMP | BPF_JGT | BPF_K, kHighestKnown, 0, 1);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  // openat2 passes its mode in memory: ENOSYS, and libc's open uses openat.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  // No set-user-ID or set-group-ID bit from a run: a root run could leave such programs in a
  // writable directory of the host. (The mode argument of chmod, fchmod, fchmodat(2), creat,
  // open and openat; and of mknod and mknodat, which make regular files too, with any mode.)
  for (auto [nr, arg] : std::vector<std::pair<long, int>>{{SYS_chmod, 1},
                                                          {SYS_fchmod, 1},
                                                          {SYS_fchmodat, 2},
                                                          {452 /* fchmodat2 */, 2},
                                                          {SYS_creat, 1},
                                                          {SYS_open, 2},
                                                          {SYS_openat, 3},
                                                          {SYS_mknod, 1},
                                                          {SYS_mknodat, 2}}) {
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

}  // namespace

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

}  // namespace launch
