#include "posix_mount.h"

#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
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

}  // namespace shadowfs
