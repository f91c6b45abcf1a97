#include "posix_mount.h"

#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace shadowfs
