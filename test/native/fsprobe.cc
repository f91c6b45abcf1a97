// A small program the tests run inside a shadow for the calls Node.js cannot make:
// renameat2 flags, mmap, xattrs, flock, fcntl locks. Prints the result, or "errno NAME".
//   fsprobe rename2 FROM TO noreplace|exchange
//   fsprobe mmap-read FILE            (prints the file through a shared read mapping)
//   fsprobe mmap-write FILE OFF TEXT  (writes TEXT at OFF through a shared mapping, msync)
//   fsprobe create-map FILE TEXT      (creates FILE read-write, sizes it, stores TEXT through a
//                                      shared mapping of it, msync: how linkers write output)
//   fsprobe mmap-hold FILE            (maps FILE shared, prints "ready", then per stdin line
//                                      "store OFF TEXT" stores TEXT at OFF, no msync: a store
//                                      into a page already dirty moves neither mtime nor ctime)
//   fsprobe setxattr FILE NAME VALUE | getxattr FILE NAME | listxattr FILE | removexattr FILE NAME
//   fsprobe flock FILE                (takes and drops an exclusive flock and a POSIX lock)
//   fsprobe hold path|dir|read PATH   (opens PATH, prints "ready", then runs one command per
//                                      stdin line against that descriptor; see hold() below)
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

static int fail() {
  printf("errno %s\n", strerrorname_np(errno));
  return 1;
}

// Holds a descriptor looked up before the test switches layers, then makes the calls the test
// asks for through it: the kernel sends them for the node it looked up then, which is how a
// switch between a lookup and an operation is made deterministic. One reply line per command.
static int hold(const char* how, const char* path) {
  int flags = std::string(how) == "path" ? O_PATH | O_NOFOLLOW
              : std::string(how) == "dir" ? O_RDONLY | O_DIRECTORY
                                          : O_RDONLY;
  int fd = open(path, flags);
  if (fd < 0) return fail();
  puts("ready");
  fflush(stdout);
  char line[8192];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    char* argv[4] = {nullptr, nullptr, nullptr, nullptr};
    int n = 0;
    for (char* t = strtok(line, " "); t && n < 4; t = strtok(nullptr, " ")) argv[n++] = t;
    if (n == 0) continue;
    std::string c = argv[0];
    int r = -1;
    char buf[4096];
    ssize_t len = -1;
    if (c == "quit") break;
    if (c == "readlink") {
      len = readlinkat(fd, "", buf, sizeof buf);
    } else if (c == "getxattr" && n == 2) {
      len = fgetxattr(fd, argv[1], buf, sizeof buf);
    } else if (c == "listxattr") {
      len = flistxattr(fd, buf, sizeof buf);
      for (ssize_t i = 0; i + 1 < len; ++i)
        if (buf[i] == 0) buf[i] = ',';
      if (len > 0) len--;  // no trailing NUL
    } else if (c == "setxattr" && n == 3) {
      r = fsetxattr(fd, argv[1], argv[2], strlen(argv[2]), 0);
    } else if (c == "removexattr" && n == 2) {
      r = fremovexattr(fd, argv[1]);
    } else if (c == "mkdir" && n == 2) {
      r = mkdirat(fd, argv[1], 0755);
    } else if (c == "mkfifo" && n == 2) {
      r = mknodat(fd, argv[1], S_IFIFO | 0644, 0);
    } else if (c == "symlink" && n == 3) {
      r = symlinkat(argv[1], fd, argv[2]);
    } else if (c == "create" && n == 2) {
      int f = openat(fd, argv[1], O_CREAT | O_EXCL | O_WRONLY, 0644);
      r = f < 0 ? -1 : (write(f, "made\n", 5) == 5 ? 0 : -1);
      if (f >= 0) close(f);
    } else if (c == "unlink" && n == 2) {
      r = unlinkat(fd, argv[1], 0);
    } else if (c == "rmdir" && n == 2) {
      r = unlinkat(fd, argv[1], AT_REMOVEDIR);
    } else if (c == "link-to" && n == 2) {  // a new name, in the cwd's tree, for the held object
      r = linkat(fd, "", AT_FDCWD, argv[1], AT_EMPTY_PATH);
    } else if (c == "rename-to" && n == 3) {  // NAME in the held directory -> path from the cwd
      r = renameat(fd, argv[1], AT_FDCWD, argv[2]);
    } else if (c == "stat" && n == 2) {
      struct stat st;
      r = fstatat(fd, argv[1], &st, AT_SYMLINK_NOFOLLOW);
      if (r == 0) {
        len = snprintf(buf, sizeof buf, "%s", S_ISDIR(st.st_mode) ? "dir" : S_ISLNK(st.st_mode) ? "symlink" : S_ISFIFO(st.st_mode) ? "fifo" : "file");
      }
    } else {
      puts("bad command");
      fflush(stdout);
      continue;
    }
    if (len >= 0) {
      printf("ok %.*s\n", static_cast<int>(len), buf);
    } else if (r == 0) {
      puts("ok");
    } else {
      printf("errno %s\n", strerrorname_np(errno));
    }
    fflush(stdout);
  }
  close(fd);
  return 0;
}

static int mmapHold(const char* path) {
  int fd = open(path, O_RDWR);
  if (fd < 0) return fail();
  struct stat st;
  fstat(fd, &st);
  char* p = static_cast<char*>(mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (p == MAP_FAILED) return fail();
  puts("ready");
  fflush(stdout);
  char line[8192];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    char* cmd = strtok(line, " ");
    char* off = strtok(nullptr, " ");
    char* text = strtok(nullptr, "");
    if (!cmd || std::string(cmd) == "quit") break;
    const size_t at = off ? strtoul(off, nullptr, 10) : 0, len = text ? strlen(text) : 0;
    if (std::string(cmd) != "store" || !text || at + len > static_cast<size_t>(st.st_size)) {
      puts("bad command");
    } else {
      memcpy(p + at, text, len);
      puts("ok");
    }
    fflush(stdout);
  }
  munmap(p, st.st_size);
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string cmd = argv[1];
  if (cmd == "hold" && argc == 4) return hold(argv[2], argv[3]);
  if (cmd == "mmap-hold" && argc == 3) return mmapHold(argv[2]);
  if (cmd == "rename2" && argc == 5) {
    unsigned flags = std::string(argv[4]) == "exchange" ? RENAME_EXCHANGE : RENAME_NOREPLACE;
    if (renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3], flags) != 0) return fail();
    puts("ok");
    return 0;
  }
  if (cmd == "exchange-loop" && argc == 5) {
    // Swaps two names over and over (RENAME_EXCHANGE) for argv[4] milliseconds: a link and a
    // directory trading places, as a run racing the launcher's checks would.
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long ms = atol(argv[4]), swaps = 0;
    for (;;) {
      renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3], RENAME_EXCHANGE);
      ++swaps;
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms) break;
    }
    printf("%ld\n", swaps);
    return 0;
  }
  if (cmd == "mmap-read") {
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) return fail();
    struct stat st;
    fstat(fd, &st);
    if (st.st_size == 0) return 0;
    void* p = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail();
    fwrite(p, 1, st.st_size, stdout);
    return 0;
  }
  if (cmd == "mmap-write" && argc == 5) {
    int fd = open(argv[2], O_RDWR);
    if (fd < 0) return fail();
    struct stat st;
    fstat(fd, &st);
    size_t off = strtoul(argv[3], nullptr, 10), len = strlen(argv[4]);
    if (off + len > static_cast<size_t>(st.st_size)) return 3;
    char* p = static_cast<char*>(mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (p == MAP_FAILED) return fail();
    memcpy(p + off, argv[4], len);
    if (msync(p, st.st_size, MS_SYNC) != 0) return fail();
    munmap(p, st.st_size);
    close(fd);
    puts("ok");
    return 0;
  }
  if (cmd == "create-map" && argc == 4) {
    int fd = open(argv[2], O_RDWR | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return fail();
    size_t len = strlen(argv[3]);
    if (len == 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) return fail();
    char* p = static_cast<char*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (p == MAP_FAILED) return fail();
    memcpy(p, argv[3], len);
    if (msync(p, len, MS_SYNC) != 0) return fail();
    munmap(p, len);
    close(fd);
    puts("ok");
    return 0;
  }
  if (cmd == "setxattr" && argc == 5) {
    if (lsetxattr(argv[2], argv[3], argv[4], strlen(argv[4]), 0) != 0) return fail();
    puts("ok");
    return 0;
  }
  if (cmd == "getxattr" && argc == 4) {
    char buf[4096];
    ssize_t n = lgetxattr(argv[2], argv[3], buf, sizeof buf);
    if (n < 0) return fail();
    fwrite(buf, 1, n, stdout);
    putchar('\n');
    return 0;
  }
  if (cmd == "removexattr" && argc == 4) {
    if (lremovexattr(argv[2], argv[3]) != 0) return fail();
    puts("ok");
    return 0;
  }
  if (cmd == "listxattr") {
    char buf[4096];
    ssize_t n = llistxattr(argv[2], buf, sizeof buf);
    if (n < 0) return fail();
    for (ssize_t i = 0; i < n; i += strlen(buf + i) + 1) printf("%s\n", buf + i);
    return 0;
  }
  if (cmd == "flock") {
    int fd = open(argv[2], O_RDWR);
    if (fd < 0) return fail();
    if (flock(fd, LOCK_EX) != 0) return fail();
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETLK, &fl) != 0) return fail();
    fl.l_type = F_UNLCK;
    fcntl(fd, F_SETLK, &fl);
    flock(fd, LOCK_UN);
    puts("ok");
    return 0;
  }
  return 2;
}
