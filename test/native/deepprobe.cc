// Test helper for paths longer than Node.js can reach (test/longpaths.test.ts). Node's fs only
// takes whole path strings, so it cannot touch an object whose absolute path exceeds PATH_MAX;
// this program gets there the way real tools do: it changes directory step by step (each
// chdir relative to the previous one), then makes one call with a relative path.
//   deepprobe [--cd DIR]... OP ARGS
// OPs (PATH relative to the final directory; prints the answer, or "errno NAME" and exits 1):
//   mkdirs PATH             mkdir -p, one component at a time (any length)
//   mkdir PATH | write PATH TEXT | append PATH TEXT | symlink TARGET PATH | rename FROM TO
//   unlink PATH | rmdir PATH | setxattr PATH NAME VALUE
//   stat PATH               "type perm size nlink ino" (lstat)
//   read PATH | readdir PATH (sorted names) | readlink PATH
//   getxattr PATH NAME | listxattr PATH (sorted user.* names, one per line)
//   fingerprint PATH        every object below PATH (walked by fds, never by long strings):
//                           relative path, type, mode, size, mtime and ctime in ns, content
//                           hash, link target, user xattrs; ctime moves on any write, so two
//                           equal fingerprints prove nothing was written.
// Exit status 2 means a usage error.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

static int fail() {
  printf("errno %s\n", strerrorname_np(errno));
  return 1;
}

static const char* typeName(mode_t m) {
  switch (m & S_IFMT) {
    case S_IFDIR: return "dir";
    case S_IFLNK: return "symlink";
    case S_IFREG: return "file";
    default: return "other";
  }
}

// Reads a whole file through an fd; false on error (errno set).
static bool readFd(int fd, std::string* out) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
}

static uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// user.* xattr names of `path` (a /proc/self/fd path or a relative one), sorted.
static bool userXattrs(const std::string& path, std::vector<std::string>* out) {
  char buf[65536];
  ssize_t n = llistxattr(path.c_str(), buf, sizeof buf);
  if (n < 0) return errno == ENOTSUP;
  for (ssize_t i = 0; i < n; i += static_cast<ssize_t>(strlen(buf + i)) + 1)
    if (strncmp(buf + i, "user.", 5) == 0) out->push_back(buf + i);
  std::sort(out->begin(), out->end());
  return true;
}

static std::string procPath(int dirFd, const char* name) {
  return "/proc/self/fd/" + std::to_string(dirFd) + "/" + name;
}

// Appends one line per object under directory fd `dir` (named `rel`) to `out`.
static bool fingerprint(int dir, const std::string& rel, std::vector<std::string>* out) {
  int copy = dup(dir);
  if (copy < 0) return false;
  DIR* d = fdopendir(copy);
  if (!d) {
    close(copy);
    return false;
  }
  std::vector<std::string> names;
  while (struct dirent* de = readdir(d))
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) names.push_back(de->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    struct stat st;
    if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    std::string path = rel.empty() ? name : rel + "/" + name;
    char line[512];
    snprintf(line, sizeof line, " %s %o %lld m%lld.%09ld c%lld.%09ld", typeName(st.st_mode),
             st.st_mode & 07777, static_cast<long long>(st.st_size),
             static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
             static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
    std::string entry = path + line;
    if (S_ISREG(st.st_mode)) {
      int fd = openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      std::string data;
      if (fd < 0 || !readFd(fd, &data)) return false;
      close(fd);
      entry += " h" + std::to_string(fnv1a(data));
    } else if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlinkat(dir, name.c_str(), target, sizeof target);
      if (n < 0) return false;
      entry += " -> " + std::string(target, static_cast<size_t>(n));
    }
    std::vector<std::string> xs;
    if (!S_ISLNK(st.st_mode) && !userXattrs(procPath(dir, name.c_str()), &xs)) return false;
    for (const auto& x : xs) entry += " x:" + x;
    out->push_back(entry);
    if (S_ISDIR(st.st_mode)) {
      int sub = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) return false;
      bool ok = fingerprint(sub, path, out);
      close(sub);
      if (!ok) return false;
    }
  }
  return true;
}

static int writeFile(const char* path, const char* text, int flags) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) return fail();
  size_t len = strlen(text);
  if (write(fd, text, len) != static_cast<ssize_t>(len)) return fail();
  if (close(fd) != 0) return fail();
  puts("ok");
  return 0;
}

int main(int argc, char** argv) {
  int i = 1;
  while (i + 1 < argc && strcmp(argv[i], "--cd") == 0) {
    if (chdir(argv[i + 1]) != 0) {
      printf("cd ");
      return fail();
    }
    i += 2;
  }
  if (i + 1 >= argc) return 2;
  std::string op = argv[i];
  char** a = argv + i + 1;
  int n = argc - i - 1;
  if (op == "mkdirs") {
    std::string path = a[0], cur;
    int dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    size_t start = 0;
    while (start < path.size()) {
      size_t slash = path.find('/', start);
      if (slash == std::string::npos) slash = path.size();
      std::string comp = path.substr(start, slash - start);
      if (!comp.empty()) {
        if (mkdirat(dir, comp.c_str(), 0755) != 0 && errno != EEXIST) return fail();
        int next = openat(dir, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) return fail();
        close(dir);
        dir = next;
      }
      start = slash + 1;
    }
    close(dir);
    puts("ok");
    return 0;
  }
  if (op == "mkdir" && n == 1) return mkdir(a[0], 0755) == 0 ? (puts("ok"), 0) : fail();
  if (op == "write" && n == 2) return writeFile(a[0], a[1], O_TRUNC);
  if (op == "append" && n == 2) return writeFile(a[0], a[1], O_APPEND);
  if (op == "symlink" && n == 2) return symlink(a[0], a[1]) == 0 ? (puts("ok"), 0) : fail();
  if (op == "rename" && n == 2) return rename(a[0], a[1]) == 0 ? (puts("ok"), 0) : fail();
  if (op == "unlink" && n == 1) return unlink(a[0]) == 0 ? (puts("ok"), 0) : fail();
  if (op == "rmdir" && n == 1) return rmdir(a[0]) == 0 ? (puts("ok"), 0) : fail();
  if (op == "setxattr" && n == 3)
    return lsetxattr(a[0], a[1], a[2], strlen(a[2]), 0) == 0 ? (puts("ok"), 0) : fail();
  if (op == "stat" && n == 1) {
    struct stat st;
    if (lstat(a[0], &st) != 0) return fail();
    printf("%s %o %lld %lu %llu\n", typeName(st.st_mode), st.st_mode & 07777,
           static_cast<long long>(st.st_size), static_cast<unsigned long>(st.st_nlink),
           static_cast<unsigned long long>(st.st_ino));
    return 0;
  }
  if (op == "read" && n == 1) {
    int fd = open(a[0], O_RDONLY | O_CLOEXEC);
    std::string data;
    if (fd < 0 || !readFd(fd, &data)) return fail();
    close(fd);
    fwrite(data.data(), 1, data.size(), stdout);
    return 0;
  }
  if (op == "readdir" && n == 1) {
    DIR* d = opendir(a[0]);
    if (!d) return fail();
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* de = readdir(d))
      if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) names.push_back(de->d_name);
    if (errno) return fail();
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) puts(name.c_str());
    return 0;
  }
  if (op == "readlink" && n == 1) {
    char target[4096];
    ssize_t len = readlink(a[0], target, sizeof target);
    if (len < 0) return fail();
    printf("%.*s\n", static_cast<int>(len), target);
    return 0;
  }
  if (op == "getxattr" && n == 2) {
    char value[65536];
    ssize_t len = lgetxattr(a[0], a[1], value, sizeof value);
    if (len < 0) return fail();
    printf("%.*s\n", static_cast<int>(len), value);
    return 0;
  }
  if (op == "listxattr" && n == 1) {
    std::vector<std::string> xs;
    if (!userXattrs(a[0], &xs)) return fail();
    for (const auto& x : xs) puts(x.c_str());
    return 0;
  }
  if (op == "fingerprint" && n == 1) {
    int dir = open(a[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    std::vector<std::string> lines;
    if (dir < 0 || !fingerprint(dir, "", &lines)) return fail();
    close(dir);
    for (const auto& l : lines) puts(l.c_str());
    return 0;
  }
  return 2;
}
