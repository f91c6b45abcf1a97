// What the parts of shadowfs-launch share (linux_launch.cc: the processes P0, P1 and P2 and
// their options; view.cc: P1's mount view; confine.cc: P2's Landlock, seccomp and the exec).
// One program: nothing here is a library interface.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace launch {

struct Options {
  std::vector<std::string> cgroups;  // the run's cgroup, and those that hold its resource limits
  std::vector<std::pair<std::string, std::string>> binds;    // source, target
  std::vector<std::pair<std::string, std::string>> roBinds;  // source, target, read-only
  std::vector<std::string> hides;
  std::vector<std::string> writable;
  std::vector<std::string> tmpfs;  // private, writable, empty: the home directory
  bool net = false;
  std::string cwd;
  std::vector<std::string> env;
  int statusFd = -1;
  bool namespaces = true;
  bool probe = false;
  std::vector<std::string> argv;
};

extern Options g_opts;
extern std::vector<std::string> g_held;  // what holds, for the "protections" line

// Writes one status line (see linux_launch.cc) to the daemon.
void status(const std::string& line);
// Reports a failure to confine (code and text on the status descriptor, text on stderr) and
// exits 126.
[[noreturn]] void fail(const char* code, const std::string& what, int err = 0);
bool writeFile(const std::string& path, const std::string& text);

// The devices a build uses; nothing else of the host's /dev.
inline const char* const kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};

// ---- the mount view (P1, view.cc)
void buildView();
void loopbackUp();

// ---- confinement and the command (P2, or P0 without namespaces; confine.cc)
[[noreturn]] void confineAndExec(const std::vector<std::string>& writable);
std::vector<std::string> writableTargets();
void closeOthers();

}  // namespace launch
