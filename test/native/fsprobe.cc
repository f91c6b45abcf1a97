// A small program the tests run inside a shadow for the calls Node.js cannot make:
// renameat2 flags, mmap, xattrs, flock, fcntl locks. Prints the result, or "errno NAME".
//   fsprobe rename2 FROM TO noreplace|exchange
//   fsprobe mmap-read FILE            (prints the file through a shared read mapping)
//   fsprobe mmap-write FILE OFF TEXT  (writes TEXT at OFF through a shared mapping, msync)
//   fsprobe setxattr FILE NAME VALUE | getxattr FILE NAME | listxattr FILE | removexattr FILE NAME
//   fsprobe flock FILE                (takes and drops an exclusive flock and a POSIX lock)
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

static int fail() {
  printf("errno %s\n", strerrorname_np(errno));
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string cmd = argv[1];
  if (cmd == "rename2" && argc == 5) {
    unsigned flags = std::string(argv[4]) == "exchange" ? RENAME_EXCHANGE : RENAME_NOREPLACE;
    if (renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3], flags) != 0) return fail();
    puts("ok");
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
