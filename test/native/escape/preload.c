// escape-preload: the library an agent names in LD_PRELOAD (test/escape.test.ts). Loaded by the
// final command inside the run, it only marks the run's private /tmp; loaded by anything outside
// the run (the daemon, the launcher before it confines), it writes the canary and the host's
// /tmp directory of the test, which the test finds. CANARY and HOSTTMP are given at build time.
#include <fcntl.h>
#include <unistd.h>

static void mark(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (write(fd, "escaped\n", 8) != 8) {
    }
    close(fd);
  }
}

__attribute__((constructor)) static void preloaded(void) {
  mark("/tmp/escape-preload-ran");
  mark(CANARY "/preload");
  mark(HOSTTMP "/preload");
}
