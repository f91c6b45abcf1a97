// A FUSE server that hangs: it mounts, answers the kernel's INIT, and then reads every request
// and never answers one. A process that touches the mount waits for an answer in uninterruptible
// sleep (SIGKILL does not end it) until this server dies, when the kernel fails the request with
// ENOTCONN. Tests use it to prove that shadowfs never waits on such a mount without a deadline.
//
// usage: hung_fuse FSNAME FSTYPE_SUBTYPE MOUNTPOINT   (as root; prints "up" once INIT is answered)
// Written against the kernel's FUSE protocol (<linux/fuse.h>); nothing of shadowfs is used.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s FSNAME SUBTYPE MOUNTPOINT\n", argv[0]);
    return 2;
  }
  int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    perror("/dev/fuse");
    return 1;
  }
  char opts[256];
  snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=%u,group_id=%u", fd, getuid(), getgid());
  char type[128];
  snprintf(type, sizeof type, "fuse.%s", argv[2]);
  if (mount(argv[1], argv[3], type, MS_NOSUID | MS_NODEV, opts) != 0) {
    perror("mount");
    return 1;
  }
  static char buf[1 << 17];  // at least FUSE_MIN_READ_BUFFER
  int answered = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENODEV) return 0;  // unmounted
      perror("read");
      return 1;
    }
    const struct fuse_in_header* in = (const struct fuse_in_header*)buf;
    if (in->opcode != FUSE_INIT || answered) continue;  // never answered
    const struct fuse_init_in* init = (const struct fuse_init_in*)(buf + sizeof *in);
    struct {
      struct fuse_out_header h;
      struct fuse_init_out o;
    } out;
    memset(&out, 0, sizeof out);
    out.h.len = sizeof out;
    out.h.unique = in->unique;
    out.o.major = FUSE_KERNEL_VERSION;
    out.o.minor = init->minor < FUSE_KERNEL_MINOR_VERSION ? init->minor : FUSE_KERNEL_MINOR_VERSION;
    out.o.max_readahead = init->max_readahead;
    out.o.max_write = 4096;
    out.o.max_background = 16;
    out.o.congestion_threshold = 12;
    if (write(fd, &out, sizeof out) != (ssize_t)sizeof out) {
      perror("write INIT");
      return 1;
    }
    answered = 1;
    printf("up\n");
    fflush(stdout);
  }
}
