// A POSIX conformance suite for shadowfs, in the manner of pjdfstest but small and our own: each
// check makes system calls the way real tools do and prints what came back, one line per check.
// The suite carries no expected values of its own: test/conformance.test.ts runs it in a plain
// directory of the host's file system (the reference) and through shadows, and every line must
// match. Each check has a directory of its own, so a check's setup can run in the user's folder
// (then every change it makes in the shadow goes through copy-up) or inside the shadow itself.
//
//   posix list               the names of the checks
//   posix setup DIR          creates DIR/<check>/ and the fixtures of every check in it
//   posix setup DIR --owner UID:GID
//                            then gives every fixture to UID:GID, as if that user had made them,
//                            except those named root-* (they stay root's); run as root. For the
//                            run as an unprivileged user: the perm-* checks then test what the
//                            kernel lets that user do with its own files and with root's
//   posix check DIR          runs every check in DIR/<check>/, prints "<check>: <results>"
//   posix check DIR NAME...  only those checks
//
// Results are joined with " | ": "ok" for success, an errno name (ENOENT, ...) for a failure,
// or a value (a mode, a size, file contents). Nothing here depends on time or on inode numbers
// themselves, only on relations between them, so two runs on two file systems can be compared.
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <string>
#include <vector>

namespace {

std::string ename(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : "errno" + std::to_string(e);
}

// The result of a call that returns -1 and sets errno on failure.
std::string rc(long r) { return r < 0 ? ename(errno) : "ok"; }

// Collects one check's results.
struct Out {
  std::string s;
  Out& operator<<(const std::string& x) {
    if (!s.empty()) s += " | ";
    s += x;
    return *this;
  }
};

void put(const char* p, const std::string& data, mode_t mode = 0644) {
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd < 0 || write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    perror(p);
    exit(3);
  }
  fchmod(fd, mode);
  close(fd);
}

void must(long r, const char* what) {
  if (r < 0) {
    perror(what);
    exit(3);
  }
}

std::string cat(const char* p) {
  int fd = open(p, O_RDONLY);
  if (fd < 0) return ename(errno);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  close(fd);
  for (char& c : out)
    if (c == '\0') c = '0';  // holes read as zeros: show them
  return "\"" + out + "\"";
}

const char* typeName(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "link";
  if (S_ISFIFO(m)) return "fifo";
  if (S_ISSOCK(m)) return "sock";
  if (S_ISCHR(m)) return "chr";
  if (S_ISBLK(m)) return "blk";
  return "?";
}

// Type and permission bits; size and link count for what is not a directory (directory sizes
// differ between file systems and mean nothing).
std::string lst(const char* p) {
  struct stat s;
  if (lstat(p, &s) < 0) return ename(errno);
  char b[160];
  if (S_ISDIR(s.st_mode))
    snprintf(b, sizeof b, "dir %o", s.st_mode & 07777);
  else
    snprintf(b, sizeof b, "%s %o size=%lld nlink=%lu", typeName(s.st_mode), s.st_mode & 07777,
             static_cast<long long>(s.st_size), static_cast<unsigned long>(s.st_nlink));
  return b;
}

std::string owner(const char* p) {
  struct stat s;
  if (lstat(p, &s) < 0) return ename(errno);
  return "uid=" + std::to_string(s.st_uid) + " gid=" + std::to_string(s.st_gid);
}

struct stat statOf(const char* p) {
  struct stat s;
  memset(&s, 0, sizeof s);
  lstat(p, &s);
  return s;
}

std::string names(const char* dir, bool withTypes = false) {
  DIR* d = opendir(dir);
  if (!d) return ename(errno);
  std::vector<std::string> v;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (withTypes) n += e->d_type == DT_DIR ? "/" : e->d_type == DT_LNK ? "@" : e->d_type == DT_REG ? "" : "?";
    v.push_back(n);
  }
  closedir(d);
  std::sort(v.begin(), v.end());
  std::string out;
  for (auto& n : v) out += (out.empty() ? "" : ",") + n;
  return "[" + out + "]";
}

// Sets a path's times far in the past, so that a later change of them is visible whatever the
// clock's resolution.
void age(const char* p) {
  struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
  must(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), p);
}

std::string advanced(const char* p, bool mtime) {
  struct stat s = statOf(p);
  return (mtime ? s.st_mtim.tv_sec : s.st_ctim.tv_sec) > 1000000000 ? "changed" : "same";
}

std::string longName(size_t n) { return std::string(n, 'n'); }

// Tools use a directory's link count, 2 + its subdirectories, to know when they have seen every
// subdirectory; 1 means "not counted" (btrfs always, ext4 past 65,000) and makes them look at
// each entry. Either is usable; any other number misleads them.
std::string linkCount(const char* dir) {
  nlink_t n = statOf(dir).st_nlink;
  DIR* d = opendir(dir);
  if (!d) return ename(errno);
  unsigned subdirs = 0;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != ".." && S_ISDIR(statOf((std::string(dir) + "/" + name).c_str()).st_mode)) subdirs++;
  }
  closedir(d);
  if (n == 1 || n == 2 + subdirs) return "usable";
  return "nlink=" + std::to_string(n) + " with " + std::to_string(subdirs) + " subdirectories";
}

struct Check {
  const char* name;
  std::function<void()> setup;
  std::function<std::string()> run;
};

// A folder of 300 files, a subdirectory and a symlink, used by several checks.
void manyFiles() {
  for (int i = 0; i < 300; i++) put(("m" + std::to_string(i)).c_str(), "x");
  must(mkdir("sub", 0755), "sub");
  put("sub/inner", "i");
  must(symlink("m1", "lnk"), "lnk");
}

std::vector<Check> checks() {
  std::vector<Check> c;
  auto add = [&](const char* n, std::function<void()> s, std::function<std::string()> r) { c.push_back({n, s, r}); };

  // ---- open and create ----
  add("open-creat-excl", [] { put("f", "data"); },
      [] {
        Out o;
        o << rc(open("f", O_CREAT | O_EXCL | O_WRONLY, 0644));
        int fd = open("new", O_CREAT | O_EXCL | O_WRONLY, 0640);
        o << rc(fd) << lst("new") << cat("f");
        close(fd);
        return o.s;
      });
  add("open-trunc", [] { put("f", "hello world"); },
      [] {
        Out o;
        int fd = open("f", O_WRONLY | O_TRUNC);
        o << rc(fd) << lst("f") << rc(write(fd, "new", 3)) << cat("f");
        close(fd);
        return o.s;
      });
  add("open-append", [] { put("f", "abc"); },
      [] {
        Out o;
        int fd = open("f", O_WRONLY | O_APPEND);
        lseek(fd, 0, SEEK_SET);
        o << rc(write(fd, "X", 1)) << rc(pwrite(fd, "Y", 1, 0)) << cat("f");
        close(fd);
        return o.s;
      });
  add("open-directory", [] { must(mkdir("d", 0755), "d"); put("f", "x"); },
      [] {
        Out o;
        o << rc(open("d", O_WRONLY)) << rc(open("d", O_RDWR)) << rc(open("d", O_RDONLY | O_CREAT, 0644));
        o << rc(open("f", O_RDONLY | O_DIRECTORY)) << rc(open("d", O_RDONLY | O_DIRECTORY));
        return o.s;
      });
  add("open-missing", [] { put("f", "x"); },
      [] {
        Out o;
        o << rc(open("missing", O_RDONLY)) << rc(open("missing/x", O_CREAT | O_WRONLY, 0644));
        o << rc(open("f/x", O_CREAT | O_WRONLY, 0644)) << rc(open("f/", O_RDONLY)) << rc(open("", O_RDONLY));
        return o.s;
      });
  add("open-nofollow", [] { put("f", "x"); must(symlink("f", "l"), "l"); },
      [] {
        Out o;
        o << rc(open("l", O_RDONLY | O_NOFOLLOW)) << rc(open("l", O_PATH | O_NOFOLLOW));
        o << rc(open("l", O_WRONLY | O_CREAT | O_EXCL, 0644));
        return o.s;
      });
  add("symlink-loop", [] { must(symlink("l2", "l1"), "l1"); must(symlink("l1", "l2"), "l2"); },
      [] {
        Out o;
        struct stat s;
        o << rc(open("l1", O_RDONLY)) << rc(stat("l1", &s)) << lst("l1") << rc(open("l1/x", O_CREAT | O_WRONLY, 0644));
        return o.s;
      });
  add("open-creat-dangling-symlink", [] { must(symlink("target", "l"), "l"); },
      [] {
        Out o;
        o << rc(open("l", O_CREAT | O_EXCL | O_WRONLY, 0644));
        int fd = open("l", O_CREAT | O_WRONLY, 0644);
        o << rc(fd) << rc(write(fd, "via link", 8)) << lst("target") << cat("target") << lst("l");
        close(fd);
        return o.s;
      });
  add("name-too-long", [] { must(mkdir("d", 0755), "d"); },
      [] {
        Out o;
        std::string n255 = longName(255), n256 = longName(256);
        o << rc(open(n256.c_str(), O_CREAT | O_WRONLY, 0644)) << rc(mkdir(n256.c_str(), 0755));
        o << rc(symlink("x", n256.c_str())) << rc(rename("d", n256.c_str()));
        struct stat s;
        o << rc(stat(n256.c_str(), &s));
        int fd = open(n255.c_str(), O_CREAT | O_WRONLY, 0644);
        o << rc(fd) << lst(n255.c_str());
        close(fd);
        return o.s;
      });
  add("trailing-slash", [] { put("f", "x"); must(mkdir("d", 0755), "d"); must(symlink("d", "ld"), "ld"); },
      [] {
        Out o;
        struct stat s;
        o << rc(stat("f/", &s)) << rc(stat("d/", &s)) << rc(stat("ld/", &s)) << rc(unlink("f/"));
        o << rc(rename("f", "g/")) << rc(mkdir("e/", 0755)) << lst("e");
        return o.s;
      });
  add("umask", [] {},
      [] {
        Out o;
        mode_t old = umask(027);
        int fd = open("f", O_CREAT | O_WRONLY, 0666);
        close(fd);
        o << lst("f") << rc(mkdir("d", 0777)) << lst("d") << rc(mknod("p", S_IFIFO | 0666, 0)) << lst("p");
        umask(old);
        return o.s;
      });

  // ---- read and write ----
  add("pwrite-hole", [] { put("f", "ab"); },
      [] {
        Out o;
        int fd = open("f", O_RDWR);
        o << rc(pwrite(fd, "Z", 1, 10)) << lst("f") << cat("f");
        char buf[8];
        o << std::to_string(pread(fd, buf, sizeof buf, 11)) << std::to_string(pread(fd, buf, sizeof buf, 100));
        close(fd);
        return o.s;
      });
  add("wrong-access-mode", [] { put("f", "content"); },
      [] {
        Out o;
        char buf[4];
        int r = open("f", O_RDONLY), w = open("f", O_WRONLY);
        o << rc(write(r, "x", 1)) << rc(read(w, buf, 1)) << rc(ftruncate(r, 0)) << cat("f");
        close(r);
        close(w);
        return o.s;
      });
  add("truncate", [] { put("f", "0123456789"); must(mkdir("d", 0755), "d"); },
      [] {
        Out o;
        o << rc(truncate("f", 14)) << cat("f") << rc(truncate("f", 3)) << cat("f") << rc(truncate("d", 0));
        o << rc(truncate("missing", 0)) << rc(truncate("f", -1));
        int fd = open("f", O_RDWR);
        o << rc(ftruncate(fd, 1)) << rc(write(fd, "AB", 2)) << cat("f");
        close(fd);
        return o.s;
      });
  add("mmap-shared", [] { put("f", std::string(8192, 'a')); },
      [] {
        Out o;
        int fd = open("f", O_RDWR);
        char* p = static_cast<char*>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        if (p == MAP_FAILED) return std::string("mmap ") + ename(errno);
        memcpy(p + 4095, "XY", 2);
        o << rc(msync(p, 8192, MS_SYNC));
        munmap(p, 8192);
        char buf[3] = {0};
        o << rc(pread(fd, buf, 2, 4095)) << buf;
        close(fd);
        int fd2 = open("f", O_RDONLY);
        char* q = static_cast<char*>(mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd2, 0));
        o << std::string(q == MAP_FAILED ? "fail" : std::string(q + 4094, 4));
        if (q != MAP_FAILED) munmap(q, 8192);
        close(fd2);
        return o.s;
      });
  add("fsync", [] { put("f", "x"); must(mkdir("d", 0755), "d"); },
      [] {
        Out o;
        int fd = open("f", O_RDWR);
        o << rc(write(fd, "y", 1)) << rc(fsync(fd)) << rc(fdatasync(fd));
        close(fd);
        int dfd = open("d", O_RDONLY | O_DIRECTORY);
        o << rc(fsync(dfd));
        close(dfd);
        return o.s;
      });
  add("fallocate", [] { put("f", "abc"); },
      [] {
        Out o;
        int fd = open("f", O_RDWR);
        o << std::to_string(posix_fallocate(fd, 0, 100)) << lst("f");
        o << rc(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 200)) << lst("f") << cat("f").substr(0, 5);
        close(fd);
        return o.s;
      });
  add("copy-file-range", [] { put("src", "0123456789"); put("dst", "abcdefghijklmnop"); },
      [] {
        Out o;
        int s = open("src", O_RDONLY), d = open("dst", O_RDWR);
        loff_t in = 2, out = 4;
        ssize_t n = copy_file_range(s, &in, d, &out, 5, 0);
        o << (n < 0 ? ename(errno) : std::to_string(n)) << cat("dst");
        close(s);
        close(d);
        return o.s;
      });
  add("unlink-open-file", [] { put("f", "before"); },
      [] {
        Out o;
        int fd = open("f", O_RDWR);
        o << rc(unlink("f")) << lst("f") << rc(pwrite(fd, "AFTER", 5, 0));
        struct stat s;
        if (fstat(fd, &s) == 0) o << "nlink=" + std::to_string(s.st_nlink);
        else o << "fstat " + ename(errno);
        char buf[16] = {0};
        o << rc(pread(fd, buf, 15, 0)) << buf;
        close(fd);
        return o.s;
      });
  add("rename-over-open-file", [] { put("f", "old"); put("g", "new"); },
      [] {
        Out o;
        int fd = open("f", O_RDONLY);
        o << rc(rename("g", "f")) << cat("f");
        char buf[8] = {0};
        o << rc(pread(fd, buf, 7, 0)) << buf;
        close(fd);
        return o.s;
      });

  // ---- directories ----
  add("mkdir", [] { put("f", "x"); must(mkdir("d", 0755), "d"); must(symlink("f", "l"), "l"); },
      [] {
        Out o;
        o << rc(mkdir("f", 0755)) << rc(mkdir("d", 0755)) << rc(mkdir("l", 0755)) << rc(mkdir("missing/x", 0755));
        o << rc(mkdir("f/x", 0755)) << rc(mkdir("n", 0750)) << lst("n") << names("n");
        return o.s;
      });
  add("rmdir", [] {
        must(mkdir("full", 0755), "full");
        put("full/child", "c");
        must(mkdir("empty", 0755), "empty");
        put("f", "x");
        must(symlink("empty", "l"), "l");
      },
      [] {
        Out o;
        o << rc(rmdir("full")) << rc(rmdir("f")) << rc(rmdir("l")) << rc(rmdir("empty/.")) << rc(rmdir("missing"));
        o << rc(rmdir("empty")) << lst("empty") << rc(unlink("full/child")) << rc(rmdir("full")) << names(".");
        return o.s;
      });
  add("rmdir-then-mkdir", [] { must(mkdir("d", 0755), "d"); put("d/a", "a"); put("d/b", "b"); },
      [] {
        Out o;
        o << rc(unlink("d/a")) << rc(unlink("d/b")) << rc(rmdir("d")) << rc(mkdir("d", 0700)) << lst("d") << names("d");
        return o.s;
      });
  add("dir-link-count", [] { must(mkdir("d", 0755), "d"); must(mkdir("d/a", 0755), "a"); must(mkdir("d/b", 0755), "b"); put("d/f", "f"); },
      [] {
        Out o;
        o << linkCount("d") << rc(mkdir("d/c", 0755)) << linkCount("d") << rc(rmdir("d/a")) << linkCount("d");
        o << rc(rename("d/b", "b")) << linkCount("d") << linkCount(".") << rc(mkdir("d/b", 0755)) << rc(unlink("d/b/../f"));
        o << linkCount("d");
        return o.s;
      });
  add("readdir-types", [] {
        put("f", "x");
        must(mkdir("d", 0755), "d");
        must(symlink("f", "l"), "l");
        must(mkfifo("p", 0644), "p");
      },
      [] {
        Out o;
        o << names(".", true) << rc(mkdir("d2", 0755)) << rc(unlink("f")) << names(".", true);
        return o.s;
      });
  add("readdir-while-deleting", [] { manyFiles(); },
      [] {
        // What rm -rf does: read a directory and unlink as it goes, then read it again.
        Out o;
        DIR* d = opendir(".");
        int removed = 0, errors = 0;
        while (struct dirent* e = readdir(d)) {
          std::string n = e->d_name;
          if (n == "." || n == ".." || n == "sub") continue;
          if (unlink(n.c_str()) == 0)
            removed++;
          else
            errors++;
        }
        closedir(d);
        o << "removed=" + std::to_string(removed) << "errors=" + std::to_string(errors) << names(".");
        return o.s;
      });
  add("readdir-seek", [] { manyFiles(); },
      [] {
        Out o;
        DIR* d = opendir(".");
        std::string first, again;
        long pos = -1;
        for (int i = 0;; i++) {
          long here = telldir(d);
          struct dirent* e = readdir(d);
          if (!e) break;
          if (i == 100) pos = here;
          if (i >= 100) first += std::string(e->d_name) + ",";
        }
        seekdir(d, pos);
        while (struct dirent* e = readdir(d)) again += std::string(e->d_name) + ",";
        closedir(d);
        o << (first == again ? "same after seekdir" : "differs after seekdir");
        o << "entries after 100: " + std::to_string(std::count(first.begin(), first.end(), ','));
        return o.s;
      });
  add("rewinddir-sees-new-entries", [] { put("a", "a"); },
      [] {
        Out o;
        // A listing made before (ls, a tree walk) that the kernel may keep and serve the next
        // stream from, so that the file system first hears of that stream at the rewind.
        o << names(".");
        DIR* d = opendir(".");
        while (readdir(d)) {
        }
        put("b", "b");
        must(unlink("a"), "a");
        rewinddir(d);
        std::vector<std::string> v;
        while (struct dirent* e = readdir(d)) v.push_back(e->d_name);
        closedir(d);
        std::sort(v.begin(), v.end());
        std::string s;
        for (auto& n : v) s += n + ",";
        o << s;
        return o.s;
      });
  add("dot-dot", [] { must(mkdir("d", 0755), "d"); must(mkdir("d/e", 0755), "e"); },
      [] {
        Out o;
        struct stat a, b, c;
        stat(".", &a);
        stat("d/..", &b);
        stat("d/e/../..", &c);
        o << (a.st_ino == b.st_ino && a.st_ino == c.st_ino ? "same inode" : "different inodes");
        return o.s;
      });
  add("cwd-in-renamed-dir", [] { must(mkdir("d", 0755), "d"); put("d/f", "in d"); },
      [] {
        Out o;
        int here = open(".", O_RDONLY | O_DIRECTORY);
        must(chdir("d"), "chdir d");
        o << rc(renameat(here, "d", here, "e"));
        char buf[4096];
        std::string cwd = getcwd(buf, sizeof buf) ? buf : ename(errno);
        o << cwd.substr(cwd.rfind('/')) << cat("f") << rc(mkdir("new", 0755));
        must(fchdir(here), "back");
        close(here);
        o << names("e");
        return o.s;
      });

  // ---- unlink, rename, link, symlink ----
  add("unlink", [] { put("f", "x"); must(mkdir("d", 0755), "d"); put("t", "target"); must(symlink("t", "l"), "l"); },
      [] {
        Out o;
        o << rc(unlink("d")) << rc(unlink("missing")) << rc(unlink("l")) << cat("t") << lst("l") << rc(unlink("f"));
        o << rc(unlink("f")) << names(".");
        return o.s;
      });
  add("rename-files", [] { put("a", "A"); put("b", "B"); must(mkdir("d", 0755), "d"); },
      [] {
        Out o;
        o << rc(rename("a", "b")) << cat("b") << lst("a") << rc(rename("b", "d")) << rc(rename("b", "b")) << cat("b");
        o << rc(rename("missing", "x")) << rc(rename("b", "missing/x")) << rc(rename("b", "d/b")) << cat("d/b") << names(".");
        return o.s;
      });
  add("rename-dirs", [] {
        must(mkdir("src", 0755), "src");
        put("src/a", "a");
        must(mkdir("src/sub", 0755), "sub");
        put("src/sub/b", "b");
        must(mkdir("empty", 0755), "empty");
        must(mkdir("full", 0755), "full");
        put("full/x", "x");
        put("file", "f");
      },
      [] {
        Out o;
        o << rc(rename("src", "full")) << rc(rename("src", "file")) << rc(rename("file", "empty")) << rc(rename("src", "src/sub/in"));
        o << rc(rename("src", "empty")) << names("empty") << cat("empty/sub/b") << lst("src") << rc(rename("empty/sub", "moved"));
        o << names("moved") << names("empty") << rc(rename("moved", "src")) << cat("src/b");
        return o.s;
      });
  add("rename-hard-links", [] { put("a", "same"); must(link("a", "b"), "b"); },
      [] {
        Out o;
        o << rc(rename("a", "b")) << names(".") << lst("a") << lst("b");
        return o.s;
      });
  add("renameat2", [] { put("f", "F"); put("g", "G"); must(mkdir("d", 0755), "d"); put("d/in", "i"); },
      [] {
        Out o;
        o << rc(renameat2(AT_FDCWD, "f", AT_FDCWD, "g", RENAME_NOREPLACE)) << rc(renameat2(AT_FDCWD, "f", AT_FDCWD, "h", RENAME_NOREPLACE));
        o << rc(renameat2(AT_FDCWD, "h", AT_FDCWD, "d", RENAME_EXCHANGE)) << lst("h") << lst("d") << cat("h/in") << cat("d");
        o << rc(renameat2(AT_FDCWD, "h", AT_FDCWD, "missing", RENAME_EXCHANGE));
        o << rc(renameat2(AT_FDCWD, "g", AT_FDCWD, "x", RENAME_EXCHANGE | RENAME_NOREPLACE));
        return o.s;
      });
  add("link", [] { put("f", "one"); must(mkdir("d", 0755), "d"); must(symlink("f", "l"), "l"); },
      [] {
        Out o;
        o << rc(link("f", "g")) << lst("f") << lst("g");
        int fd = open("g", O_WRONLY | O_APPEND);
        o << rc(write(fd, "+two", 4)) << cat("f");
        close(fd);
        o << rc(link("f", "g")) << rc(link("d", "d2")) << rc(link("missing", "x")) << rc(link("f", "missing/x"));
        o << rc(linkat(AT_FDCWD, "l", AT_FDCWD, "l2", 0)) << lst("l2") << rc(unlink("f")) << lst("g");
        return o.s;
      });
  add("symlink", [] { put("f", "x"); },
      [] {
        Out o;
        char buf[4200];
        o << rc(symlink("target/path", "f")) << rc(symlink("target/path", "l")) << lst("l");
        ssize_t n = readlink("l", buf, sizeof buf);
        o << (n < 0 ? ename(errno) : std::string(buf, n)) << rc(readlink("f", buf, sizeof buf)) << rc(symlink("", "e"));
        std::string longTarget(4000, 'x');
        o << rc(symlink(longTarget.c_str(), "long")) << lst("long");
        n = readlink("l", buf, 3);
        o << std::to_string(n);
        return o.s;
      });

  // ---- attributes ----
  add("chmod", [] { put("f", "x"); must(mkdir("d", 0755), "d"); must(symlink("f", "l"), "l"); },
      [] {
        Out o;
        for (mode_t m : {0600, 04755, 02711, 01777, 0}) o << rc(chmod("f", m)) << lst("f");
        o << rc(chmod("l", 0640)) << lst("f") << lst("l") << rc(chmod("d", 0700)) << lst("d") << rc(chmod("missing", 0644));
        int fd = open("f", O_RDONLY);
        o << rc(fchmod(fd, 0444)) << lst("f");
        close(fd);
        return o.s;
      });
  add("chown", [] { put("f", "x"); must(symlink("f", "l"), "l"); },
      [] {
        Out o;
        o << rc(chown("f", 1234, 5678)) << owner("f") << rc(chown("f", -1, 42)) << owner("f") << rc(lchown("l", 7, 8)) << owner("l")
          << owner("f");
        o << rc(chmod("f", 06755)) << rc(chown("f", 1, 1)) << lst("f");
        return o.s;
      });
  add("utimens", [] { put("f", "x"); must(symlink("f", "l"), "l"); },
      [] {
        Out o;
        struct timespec ts[2] = {{1500000000, 123456789}, {1600000000, 987654321}};
        o << rc(utimensat(AT_FDCWD, "f", ts, 0));
        struct stat s = statOf("f");
        o << std::to_string(s.st_atim.tv_sec) + "." + std::to_string(s.st_atim.tv_nsec);
        o << std::to_string(s.st_mtim.tv_sec) + "." + std::to_string(s.st_mtim.tv_nsec);
        struct timespec omit[2] = {{0, UTIME_OMIT}, {1700000000, 5}};
        o << rc(utimensat(AT_FDCWD, "f", omit, 0));
        s = statOf("f");
        o << std::to_string(s.st_atim.tv_sec) << std::to_string(s.st_mtim.tv_sec) + "." + std::to_string(s.st_mtim.tv_nsec);
        struct timespec lt[2] = {{1100000000, 0}, {1100000000, 0}};
        o << rc(utimensat(AT_FDCWD, "l", lt, AT_SYMLINK_NOFOLLOW));
        o << std::to_string(statOf("l").st_mtim.tv_sec) << std::to_string(statOf("f").st_mtim.tv_sec);
        o << rc(utimensat(AT_FDCWD, "f", nullptr, 0)) << advanced("f", true);
        return o.s;
      });
  add("times-follow-changes", [] {
        must(mkdir("d", 0755), "d");
        put("d/f", "x");
        must(mkdir("e", 0755), "e");
      },
      [] {
        Out o;
        age("d/f");
        int fd = open("d/f", O_WRONLY);
        o << rc(write(fd, "y", 1)) << "mtime " + advanced("d/f", true) << "ctime " + advanced("d/f", false);
        close(fd);
        age("d/f");
        o << rc(chmod("d/f", 0600)) << "mtime " + advanced("d/f", true) << "ctime " + advanced("d/f", false);
        age("d");
        put("d/g", "new");
        o << "dir mtime after create " + advanced("d", true);
        age("d");
        must(unlink("d/g"), "d/g");
        o << "after unlink " + advanced("d", true);
        age("d");
        age("e");
        must(rename("d/f", "e/f"), "rename");
        o << "after rename: from " + advanced("d", true) << "to " + advanced("e", true);
        age("e/f");
        must(truncate("e/f", 0), "truncate");
        o << "after truncate " + advanced("e/f", true);
        return o.s;
      });
  add("access", [] { put("ro", "x", 0444); put("rw", "x", 0644); put("exe", "x", 0755); put("none", "x", 0); },
      [] {
        Out o;
        for (const char* p : {"ro", "rw", "exe", "none", "missing"})
          o << std::string(p) + ":" + rc(access(p, F_OK)) + "," + rc(access(p, R_OK | W_OK)) + "," + rc(access(p, X_OK));
        return o.s;
      });
  add("xattr", [] {
        put("f", "x");
        must(setxattr("f", "user.pre", "from setup", 10, 0), "setxattr");
      },
      [] {
        Out o;
        char buf[64] = {0};
        ssize_t n = getxattr("f", "user.pre", buf, sizeof buf);
        o << (n < 0 ? ename(errno) : std::string(buf, n));
        o << rc(setxattr("f", "user.a", "1", 1, XATTR_CREATE)) << rc(setxattr("f", "user.a", "2", 1, XATTR_CREATE));
        o << rc(setxattr("f", "user.b", "1", 1, XATTR_REPLACE)) << rc(getxattr("f", "user.b", buf, sizeof buf));
        o << rc(getxattr("f", "user.pre", buf, 2)) << std::to_string(getxattr("f", "user.pre", nullptr, 0));
        n = listxattr("f", buf, sizeof buf);
        std::vector<std::string> v;
        for (ssize_t i = 0; i < n; i += strlen(buf + i) + 1) v.push_back(buf + i);
        std::sort(v.begin(), v.end());
        std::string all;
        for (auto& x : v) all += x + ",";
        o << all << rc(removexattr("f", "user.a")) << rc(removexattr("f", "user.a")) << cat("f");
        return o.s;
      });
  add("inode-numbers", [] { put("a", "a"); put("b", "b"); must(link("a", "c"), "c"); },
      [] {
        Out o;
        ino_t a = statOf("a").st_ino, b = statOf("b").st_ino, c = statOf("c").st_ino;
        o << (a != b ? "distinct" : "SAME") << (a == c ? "hard link shares" : "hard link DIFFERS");
        int fd = open("a", O_WRONLY | O_APPEND);
        (void)!write(fd, "+", 1);
        close(fd);
        o << (statOf("a").st_ino == a ? "stable across write" : "CHANGED by write");
        must(rename("b", "b2"), "b2");
        o << (statOf("b2").st_ino == b ? "stable across rename" : "CHANGED by rename");
        return o.s;
      });

  // ---- special files, statfs, locks ----
  add("special-files", [] {},
      [] {
        Out o;
        o << rc(mkfifo("p", 0640)) << lst("p") << rc(mknod("c", S_IFCHR | 0600, makedev(1, 3)));
        struct stat s = statOf("c");
        o << lst("c") << std::to_string(major(s.st_rdev)) + ":" + std::to_string(minor(s.st_rdev));
        int sock = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un addr;
        memset(&addr, 0, sizeof addr);
        addr.sun_family = AF_UNIX;
        strcpy(addr.sun_path, "s");
        o << rc(bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) << lst("s");
        close(sock);
        int fd = open("p", O_RDWR);
        char buf[8] = {0};
        o << rc(write(fd, "fifo", 4)) << rc(read(fd, buf, 4)) << buf;
        close(fd);
        o << rc(mknod("p", S_IFIFO | 0600, 0));
        return o.s;
      });
  add("statfs", [] {},
      [] {
        struct statfs s;
        Out o;
        o << rc(statfs(".", &s)) << "namelen=" + std::to_string(s.f_namelen) << (s.f_bsize > 0 ? "bsize>0" : "bsize=0");
        return o.s;
      });
  add("locks", [] { put("f", "lock me"); },
      [] {
        Out o;
        int fd = open("f", O_RDWR);
        struct flock fl = {};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_len = 0;
        o << rc(fcntl(fd, F_SETLK, &fl)) << rc(flock(fd, LOCK_EX | LOCK_NB));
        int pipefd[2];
        must(pipe(pipefd), "pipe");
        pid_t pid = fork();
        if (pid == 0) {
          int cfd = open("f", O_RDWR);
          struct flock cl = {};
          cl.l_type = F_WRLCK;
          cl.l_whence = SEEK_SET;
          std::string r = rc(fcntl(cfd, F_SETLK, &cl));
          struct flock q = {};
          q.l_type = F_WRLCK;
          q.l_whence = SEEK_SET;
          fcntl(cfd, F_GETLK, &q);
          r += std::string(",getlk:") + (q.l_type == F_WRLCK && q.l_pid == getppid() ? "held by parent" : "not seen");
          r += "," + rc(flock(cfd, LOCK_EX | LOCK_NB));
          (void)!write(pipefd[1], r.data(), r.size());
          _exit(0);
        }
        close(pipefd[1]);
        char buf[128] = {0};
        (void)!read(pipefd[0], buf, sizeof buf - 1);
        waitpid(pid, nullptr, 0);
        close(pipefd[0]);
        o << buf;
        close(fd);
        return o.s;
      });
  // ---- permissions: what a caller other than root may do (as root every call succeeds) ----
  add("perm-modes", [] {
        put("ro", "r", 0444);
        put("wo", "w", 0200);
        put("none", "n", 0);
        must(mkdir("rodir", 0755), "rodir");
        put("rodir/in", "i");
        must(chmod("rodir", 0555), "rodir");
        must(mkdir("noexec", 0755), "noexec");
        put("noexec/f", "f");
        must(chmod("noexec", 0644), "noexec");
        must(mkdir("noread", 0755), "noread");
        put("noread/f", "f");
        must(chmod("noread", 0311), "noread");
      },
      [] {
        Out o;
        o << rc(open("ro", O_WRONLY)) << rc(open("ro", O_RDWR)) << rc(open("ro", O_WRONLY | O_TRUNC)) << rc(truncate("ro", 0));
        o << cat("ro") << rc(open("none", O_RDONLY)) << cat("none") << rc(open("wo", O_RDONLY));
        int fd = open("wo", O_WRONLY | O_APPEND);
        o << rc(fd) << rc(write(fd, "+", 1));
        close(fd);
        o << rc(open("rodir/new", O_CREAT | O_WRONLY, 0644)) << rc(mkdir("rodir/d", 0755)) << rc(unlink("rodir/in"));
        o << rc(rename("rodir/in", "rodir/out")) << rc(rename("rodir/in", "moved")) << rc(symlink("x", "rodir/l"));
        o << rc(link("ro", "rodir/h")) << rc(mknod("rodir/p", S_IFIFO | 0644, 0)) << cat("rodir/in") << names("rodir");
        o << lst("noexec/f") << cat("noexec/f") << names("noexec");
        o << names("noread") << cat("noread/f") << lst("noread/f");
        for (const char* p : {"ro", "wo", "none", "rodir", "noexec", "noread"})
          o << std::string(p) + ":" + rc(access(p, R_OK)) + "," + rc(access(p, W_OK)) + "," + rc(access(p, X_OK));
        o << rc(utimensat(AT_FDCWD, "ro", nullptr, 0)) << rc(chmod("ro", 0644)) << lst("ro");
        return o.s;
      });
  add("perm-other-owner", [] {
        put("root-f", "r", 0644);
        put("root-w", "w", 0666);
        put("root-x", "#!/bin/sh\n", 0700);
        must(mkdir("root-d", 0755), "root-d");
        put("root-d/in", "i");
        put("mine", "m", 0644);
      },
      [] {
        Out o;
        o << owner("root-f") << rc(chmod("root-f", 0666)) << lst("root-f") << rc(chown("root-f", getuid(), -1));
        o << rc(lchown("root-f", -1, getgid())) << owner("root-f");
        struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
        o << rc(utimensat(AT_FDCWD, "root-f", ts, 0)) << rc(utimensat(AT_FDCWD, "root-f", nullptr, 0));
        o << rc(utimensat(AT_FDCWD, "root-w", ts, 0)) << rc(utimensat(AT_FDCWD, "root-w", nullptr, 0));
        o << rc(open("root-f", O_WRONLY)) << rc(truncate("root-f", 0)) << cat("root-f");
        int fd = open("root-w", O_WRONLY | O_APPEND);
        o << rc(fd) << rc(write(fd, "+", 1)) << cat("root-w");
        close(fd);
        o << rc(open("root-x", O_RDONLY)) << rc(access("root-x", X_OK)) << rc(link("root-f", "hard"));
        o << rc(setxattr("root-f", "user.x", "v", 1, 0)) << rc(setxattr("mine", "user.x", "v", 1, 0));
        o << rc(mkdir("root-d/new", 0755)) << rc(unlink("root-d/in")) << rc(rename("root-d/in", "taken")) << cat("root-d/in");
        o << rc(chown("mine", 0, -1)) << rc(chown("mine", -1, 0)) << owner("mine") << rc(chown("mine", -1, -1));
        o << rc(chown("mine", getuid(), getgid())) << rc(chmod("mine", 0600)) << lst("mine");
        return o.s;
      });
  add("perm-sticky", [] {
        must(mkdir("root-sticky", 0755), "root-sticky");
        must(chmod("root-sticky", 01777), "root-sticky");
        put("root-sticky/root-file", "r", 0666);
        must(mkdir("root-sticky/root-dir", 0777), "root-dir");
        must(chmod("root-sticky/root-dir", 0777), "root-dir");
        put("root-sticky/mine", "m", 0644);
      },
      [] {
        Out o;
        o << lst("root-sticky") << rc(unlink("root-sticky/root-file")) << rc(rename("root-sticky/root-file", "root-sticky/moved"));
        o << rc(rename("root-sticky/mine", "root-sticky/root-file")) << rc(rmdir("root-sticky/root-dir"));
        int fd = open("root-sticky/root-file", O_WRONLY | O_APPEND);
        o << rc(fd) << rc(write(fd, "+", 1)) << cat("root-sticky/root-file");
        close(fd);
        o << rc(open("root-sticky/root-file", O_WRONLY | O_CREAT, 0644));
        o << rc(rename("root-sticky/mine", "root-sticky/mine2")) << rc(open("root-sticky/new", O_CREAT | O_WRONLY, 0644));
        o << rc(mkdir("root-sticky/root-dir/sub", 0755)) << rc(unlink("root-sticky/mine2")) << names("root-sticky");
        return o.s;
      });
  add("perm-suid-cleared", [] { put("suid", "s", 04755); put("sgid", "g", 02755); put("both", "b", 06755); },
      [] {
        Out o;
        o << lst("suid") << lst("sgid") << lst("both");
        int fd = open("suid", O_WRONLY | O_APPEND);
        o << rc(write(fd, "+", 1));
        close(fd);
        o << lst("suid") << rc(truncate("sgid", 0)) << lst("sgid") << rc(chown("both", getuid(), getgid())) << lst("both");
        return o.s;
      });
  add("large-file", [] {},
      [] {
        Out o;
        int fd = open("big", O_CREAT | O_RDWR, 0644);
        std::string block(1 << 20, 'b');
        for (int i = 0; i < 5; i++) block[i * 1000] = static_cast<char>('0' + i);
        for (int i = 0; i < 3; i++) o << rc(pwrite(fd, block.data(), block.size(), static_cast<off_t>(i) * (3 << 20)));
        o << lst("big");
        std::string back(block.size(), 0);
        ssize_t n = pread(fd, back.data(), back.size(), 6 << 20);
        o << (n == static_cast<ssize_t>(block.size()) && back == block ? "read back equal" : "read back DIFFERENT");
        char z[4];
        n = pread(fd, z, 4, (1 << 20) + 10);
        o << (n == 4 && z[0] == 0 && z[3] == 0 ? "hole reads zeros" : "hole NOT zeros");
        close(fd);
        return o.s;
      });
  return c;
}

// `setup --owner`: every fixture but root-* goes to that user; chown clears set-id bits, so the
// mode is put back afterwards.
bool giveAway = false;
unsigned ownerUid = 0, ownerGid = 0;

int giveToOwner(const char* p, const struct stat* s, int, struct FTW* f) {
  if (strncmp(p + f->base, "root-", 5) == 0) return 0;
  if (lchown(p, ownerUid, ownerGid) < 0) return -1;
  if (!S_ISLNK(s->st_mode) && chmod(p, s->st_mode & 07777) < 0) return -1;
  return 0;
}

int usage() {
  fprintf(stderr, "usage: posix list | posix setup DIR [--owner UID:GID] | posix check DIR [NAME...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string cmd = argv[1];
  auto all = checks();
  if (cmd == "list") {
    for (auto& c : all) puts(c.name);
    return 0;
  }
  if (argc < 3 || (cmd != "setup" && cmd != "check")) return usage();
  int first = 3;
  if (cmd == "setup" && argc >= 5 && std::string(argv[3]) == "--owner") {
    if (sscanf(argv[4], "%u:%u", &ownerUid, &ownerGid) != 2) return usage();
    giveAway = true;
    first = 5;
  }
  std::vector<std::string> only(argv + first, argv + argc);
  int top = open(argv[2], O_RDONLY | O_DIRECTORY);
  if (top < 0) {
    perror(argv[2]);
    return 2;
  }
  umask(022);
  for (auto& c : all) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    if (cmd == "setup") must(mkdirat(top, c.name, 0755), c.name);
    if (fchdir(top) < 0 || chdir(c.name) < 0) {
      printf("%s: cannot enter its directory: %s\n", c.name, ename(errno).c_str());
      continue;
    }
    if (cmd == "setup") {
      c.setup();
      if (giveAway) must(nftw(".", giveToOwner, 16, FTW_PHYS), "give the fixtures away");
    } else {
      std::string r = c.run();
      printf("%s: %s\n", c.name, r.c_str());
      fflush(stdout);
    }
  }
  return 0;
}
