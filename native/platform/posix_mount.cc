#include "posix_mount.h"

#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

extern char** environ;

namespace shadowfs {
namespace {

int runFusermount(const std::string& mountPoint, bool lazy) {
  std::vector<std::string> args = {"fusermount3", lazy ? "-uz" : "-u", "--", mountPoint};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, "fusermount3", nullptr, nullptr, argv.data(), environ) != 0) return ENOENT;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EBUSY;
}

}  // namespace

int unmountFuse(const std::string& mountPoint, bool lazy) {
  if (geteuid() != 0) return runFusermount(mountPoint, lazy);
  if (::umount2(mountPoint.c_str(), lazy ? MNT_DETACH : 0) == 0) return 0;
  int e = errno;
  return e == EINVAL ? 0 : e;  // EINVAL: already gone (someone unmounted it by hand)
}

std::string processName(uint32_t pid) {
  const std::string file = "/proc/" + std::to_string(pid) + "/comm";
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string();
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return std::string();
  std::string name(buf, static_cast<size_t>(n));
  while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
  return name;
}

int setFuseReadahead(const std::string& mountPoint, unsigned kb) {
  // mountinfo: "id parent major:minor root mount-point ...", the mount point with space, tab,
  // newline and backslash as octal escapes (\040...). The last line for the point is the
  // mount on top.
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (!f) return errno;
  auto unescape = [](const std::string& in) {
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] == '\\' && i + 3 < in.size()) {
        const std::string oct = in.substr(i + 1, 3);
        if (oct.find_first_not_of("01234567") == std::string::npos) {
          out.push_back(static_cast<char>(std::stoi(oct, nullptr, 8)));
          i += 3;
          continue;
        }
      }
      out.push_back(in[i]);
    }
    return out;
  };
  std::string dev;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    char devBuf[64], root[4096], point[4096];
    if (std::sscanf(line, "%*s %*s %63s %4095s %4095s", devBuf, root, point) != 3) continue;
    if (unescape(point) == mountPoint) dev = devBuf;
  }
  std::fclose(f);
  if (dev.empty()) return ENOENT;
  const std::string path = "/sys/class/bdi/" + dev + "/read_ahead_kb";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const std::string v = std::to_string(kb);
  const int e = ::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size()) ? 0 : errno;
  ::close(fd);
  return e;
}

}  // namespace shadowfs
