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
//
// This file: the options, the status line, and the three processes (P0, P1 the run's init, P2
// up to its confinement). P1's mount view is built in view.cc; P2's Landlock, seccomp and exec
// are in confine.cc; launch.h is what they share.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "launch.h"

namespace launch {

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

[[noreturn]] void fail(const char* code, const std::string& what, int err) {
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

}  // namespace launch

using namespace launch;

namespace {

// ---- P1: the run's init --------------------------------------------------------------------

pid_t g_command = -1;
// Set in P0 when it is the foreground of a terminal on its standard input (a shell session):
// the command then takes the terminal's foreground as a process group of its own, one it can
// see inside its PID namespace. Left in P0's group, the command's shell would see no foreground
// group (P0's is outside the namespace: getpgrp and tcgetpgrp both say 0), and a shell that
// gives the terminal back to that group when it exits, as dash does, fails there (exit 2).
bool g_foreground = false;

// P2: its own process group, the terminal's foreground (SIGTTOU blocked: it asks from the background).
void takeForeground() {
  if (!g_foreground || setpgid(0, 0) != 0) return;
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, &old);
  int err = tcsetpgrp(STDIN_FILENO, getpid()) == 0 ? 0 : errno;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  // P0 was the foreground of this terminal: refused, the command would be stopped at its first read.
  if (err != 0) fail("INTERNAL", "cannot give the terminal to the command", err);
}

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
    takeForeground();
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
  // A run lives no longer than the process that started it (the daemon, or a program using the
  // library): killed with it, the launcher is killed, its init with it, and the namespace's
  // processes with the init. (A run outlived a test runner killed with SIGKILL by hours.) Its
  // parent already gone before this line: nobody to report to.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1) _exit(126);
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
  g_foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
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
