// Windows: the FUSE3 API of WinFsp, declared in this project's own words from the ABI WinFsp
// documents (its fuse3 headers: learnt from, not copied). WinFsp's DLL exports every call as
// fsp_fuse3_<name>(env, ...), where `env` describes the caller's C runtime; the calls below are
// inline wrappers that pass one and go through the entry points win32_winfsp.cc resolved at run
// time, so nothing links against WinFsp. Only what native/fuse_hl uses is declared.
//
// Layouts (x64): WinFsp's own fuse_* types (Cygwin-compatible), not the MinGW CRT's struct
// stat; fuse_operations in libfuse 3's order, 40 function pointers; fuse_file_info's flag bits
// (33 of them) take two unsigned ints after `flags`, as MSVC lays them out for WinFsp too.
// Sizes are checked with static_assert below. Error numbers are the Windows C runtime's
// (WinFsp maps them for a 'W' environment); ESTALE, which it lacks, is reported as ENOENT.
#pragma once
#if defined(_WIN32)

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "win32_winfsp.h"

extern "C" {

typedef uint32_t fuse_uid_t;
typedef uint32_t fuse_gid_t;
typedef int32_t fuse_pid_t;
typedef uint32_t fuse_dev_t;
typedef uint64_t fuse_ino_t;
typedef uint32_t fuse_mode_t;
typedef uint16_t fuse_nlink_t;
typedef int64_t fuse_off_t;
typedef uint64_t fuse_fsblkcnt_t;
typedef uint64_t fuse_fsfilcnt_t;
typedef int32_t fuse_blksize_t;
typedef int64_t fuse_blkcnt_t;

struct fuse_timespec {
  int64_t tv_sec;
  int64_t tv_nsec;
};

struct fuse_stat {
  fuse_dev_t st_dev;
  fuse_ino_t st_ino;
  fuse_mode_t st_mode;
  fuse_nlink_t st_nlink;
  fuse_uid_t st_uid;
  fuse_gid_t st_gid;
  fuse_dev_t st_rdev;
  fuse_off_t st_size;
  struct fuse_timespec st_atim;
  struct fuse_timespec st_mtim;
  struct fuse_timespec st_ctim;
  fuse_blksize_t st_blksize;
  fuse_blkcnt_t st_blocks;
  struct fuse_timespec st_birthtim;
};

struct fuse_statvfs {
  uint64_t f_bsize;
  uint64_t f_frsize;
  fuse_fsblkcnt_t f_blocks;
  fuse_fsblkcnt_t f_bfree;
  fuse_fsblkcnt_t f_bavail;
  fuse_fsfilcnt_t f_files;
  fuse_fsfilcnt_t f_ffree;
  fuse_fsfilcnt_t f_favail;
  uint64_t f_fsid;
  uint64_t f_flag;
  uint64_t f_namemax;
};

// What the caller's runtime offers WinFsp: 'W' (a Windows C runtime), its allocator, and
// daemon/signal hooks (no-ops on Windows). Nine slots, 72 bytes on x64, as WinFsp's
// inc/fuse/winfsp_fuse.h (2026 Beta2) declares struct fsp_fuse_env: after the signal hook come
// conv_to_win_path (called for every mount point that is not a drive letter, its result freed
// with memfree) and winpid_to_pid (read on every request), then two reserved slots. A native
// Windows program leaves both null, as WinFsp's own initializer does. This struct had six slots
// until issue #28 (a remove_signal_handlers where conv_to_win_path is): WinFsp would have called it.
struct fsp_fuse_env {
  unsigned environment;
  void* (*memalloc)(size_t);
  void (*memfree)(void*);
  int (*daemonize)(int);
  int (*set_signal_handlers)(void*);
  char* (*conv_to_win_path)(const char*);
  fuse_pid_t (*winpid_to_pid)(uint32_t);
  void (*reserved[2])();
};
#if defined(_WIN64)
static_assert(sizeof(fsp_fuse_env) == 72, "struct fsp_fuse_env is 72 bytes on x64 (winfsp_fuse.h)");
static_assert(offsetof(fsp_fuse_env, conv_to_win_path) == 40, "conv_to_win_path is the sixth slot");
static_assert(offsetof(fsp_fuse_env, winpid_to_pid) == 48, "winpid_to_pid is the seventh slot");
#endif

struct fuse_args {
  int argc;
  char** argv;
  int allocated;
};

struct fuse_file_info {
  int flags;
  unsigned int writepage : 1;
  unsigned int direct_io : 1;
  unsigned int keep_cache : 1;
  unsigned int flush : 1;
  unsigned int nonseekable : 1;
  unsigned int flock_release : 1;
  unsigned int padding : 27;
  uint64_t fh;
  uint64_t lock_owner;
  uint32_t poll_events;
};

struct fuse_conn_info {
  unsigned proto_major;
  unsigned proto_minor;
  unsigned max_write;
  unsigned max_read;
  unsigned max_readahead;
  unsigned capable;
  unsigned want;
  unsigned max_background;
  unsigned congestion_threshold;
  unsigned time_gran;
  unsigned reserved[22];
};

struct fuse_config {
  int set_gid;
  unsigned int gid;
  int set_uid;
  unsigned int uid;
  int set_mode;
  unsigned int umask;
  double entry_timeout;
  double negative_timeout;
  double attr_timeout;
  int intr;
  int intr_signal;
  int remember;
  int hard_remove;
  int use_ino;
  int readdir_ino;
  int direct_io;
  int kernel_cache;
  int auto_cache;
  int ac_attr_timeout_set;
  double ac_attr_timeout;
  int nullpath_ok;
  int show_help;
  char* modules;
  int debug;
};

enum fuse_readdir_flags { FUSE_READDIR_PLUS = 1 << 0 };
enum fuse_fill_dir_flags { FUSE_FILL_DIR_PLUS = 1 << 1 };
typedef int (*fuse_fill_dir_t)(void* buf, const char* name, const struct fuse_stat* st,
                               fuse_off_t off, enum fuse_fill_dir_flags flags);

struct fuse;  // WinFsp's, opaque
struct fuse_flock;
struct fuse_pollhandle;
struct fuse_bufvec;

struct fuse_operations {
  int (*getattr)(const char*, struct fuse_stat*, struct fuse_file_info*);
  int (*readlink)(const char*, char*, size_t);
  int (*mknod)(const char*, fuse_mode_t, fuse_dev_t);
  int (*mkdir)(const char*, fuse_mode_t);
  int (*unlink)(const char*);
  int (*rmdir)(const char*);
  int (*symlink)(const char*, const char*);
  int (*rename)(const char*, const char*, unsigned int);
  int (*link)(const char*, const char*);
  int (*chmod)(const char*, fuse_mode_t, struct fuse_file_info*);
  int (*chown)(const char*, fuse_uid_t, fuse_gid_t, struct fuse_file_info*);
  int (*truncate)(const char*, fuse_off_t, struct fuse_file_info*);
  int (*open)(const char*, struct fuse_file_info*);
  int (*read)(const char*, char*, size_t, fuse_off_t, struct fuse_file_info*);
  int (*write)(const char*, const char*, size_t, fuse_off_t, struct fuse_file_info*);
  int (*statfs)(const char*, struct fuse_statvfs*);
  int (*flush)(const char*, struct fuse_file_info*);
  int (*release)(const char*, struct fuse_file_info*);
  int (*fsync)(const char*, int, struct fuse_file_info*);
  int (*setxattr)(const char*, const char*, const char*, size_t, int);
  int (*getxattr)(const char*, const char*, char*, size_t);
  int (*listxattr)(const char*, char*, size_t);
  int (*removexattr)(const char*, const char*);
  int (*opendir)(const char*, struct fuse_file_info*);
  int (*readdir)(const char*, void*, fuse_fill_dir_t, fuse_off_t, struct fuse_file_info*,
                 enum fuse_readdir_flags);
  int (*releasedir)(const char*, struct fuse_file_info*);
  int (*fsyncdir)(const char*, int, struct fuse_file_info*);
  void* (*init)(struct fuse_conn_info*, struct fuse_config*);
  void (*destroy)(void*);
  int (*access)(const char*, int);
  int (*create)(const char*, fuse_mode_t, struct fuse_file_info*);
  int (*lock)(const char*, struct fuse_file_info*, int, struct fuse_flock*);
  int (*utimens)(const char*, const struct fuse_timespec[2], struct fuse_file_info*);
  int (*bmap)(const char*, size_t, uint64_t*);
  int (*ioctl)(const char*, int, void*, struct fuse_file_info*, unsigned int, void*);
  int (*poll)(const char*, struct fuse_file_info*, struct fuse_pollhandle*, unsigned*);
  int (*write_buf)(const char*, struct fuse_bufvec*, fuse_off_t, struct fuse_file_info*);
  int (*read_buf)(const char*, struct fuse_bufvec**, size_t, fuse_off_t, struct fuse_file_info*);
  int (*flock)(const char*, struct fuse_file_info*, int);
  int (*fallocate)(const char*, int, fuse_off_t, fuse_off_t, struct fuse_file_info*);
};

struct fuse_context {
  struct fuse* fuse;
  fuse_uid_t uid;
  fuse_gid_t gid;
  fuse_pid_t pid;
  void* private_data;
  fuse_mode_t umask;
};

}  // extern "C"

static_assert(sizeof(struct fuse_stat) == 128, "WinFsp's fuse_stat (x64) is 128 bytes");
static_assert(offsetof(struct fuse_stat, st_size) == 40 && offsetof(struct fuse_stat, st_blocks) == 104,
              "fuse_stat field offsets");
static_assert(sizeof(struct fuse_statvfs) == 88, "WinFsp's fuse_statvfs (x64) is 88 bytes");
static_assert(sizeof(struct fuse_file_info) == 40 && offsetof(struct fuse_file_info, fh) == 16,
              "fuse3_file_info (x64): 40 bytes, fh at 16");
static_assert(sizeof(struct fuse_operations) == 40 * sizeof(void*), "40 operations");
static_assert(offsetof(struct fuse_operations, init) == 27 * sizeof(void*), "init is the 28th");
static_assert(sizeof(struct fuse_conn_info) == 32 * sizeof(unsigned), "fuse3_conn_info");

#if !defined(ESTALE)
#define ESTALE ENOENT
#endif

// The capability bit WinFsp reads from conn->want for case-insensitive names.
#define FUSE_CAP_CASE_INSENSITIVE (1u << 29)

namespace shadowfs {
namespace winfsp {

inline int noDaemonize(int) { return 0; }
inline int noSignals(void*) { return 0; }

// This module's runtime, as WinFsp wants to know it (the allocator it may free args with).
inline struct fsp_fuse_env* env() {
  static struct fsp_fuse_env e = {'W', std::malloc, std::free, noDaemonize, noSignals, nullptr, nullptr, {nullptr, nullptr}};
  return &e;
}

template <typename Fn>
Fn proc(const char* name) {
  return reinterpret_cast<Fn>(winFspProc(name));
}

}  // namespace winfsp
}  // namespace shadowfs

#define FUSE_ARGS_INIT(argc, argv) {argc, argv, 0}

// fuse_opt's argument list, kept here (WinFsp never takes ownership of it).
inline int fuse_opt_add_arg(struct fuse_args* args, const char* arg) {
  char** argv = static_cast<char**>(std::realloc(args->argv, sizeof(char*) * (args->argc + 2)));
  if (!argv) return -1;
  args->argv = argv;
  size_t n = std::strlen(arg) + 1;
  char* copy = static_cast<char*>(std::malloc(n));
  if (!copy) return -1;
  std::memcpy(copy, arg, n);
  args->argv[args->argc++] = copy;
  args->argv[args->argc] = nullptr;
  args->allocated = 1;
  return 0;
}

inline void fuse_opt_free_args(struct fuse_args* args) {
  if (args->allocated) {
    for (int i = 0; i < args->argc; ++i) std::free(args->argv[i]);
    std::free(args->argv);
  }
  args->argc = 0;
  args->argv = nullptr;
  args->allocated = 0;
}

// The calls fuse_hl makes; each fails like libfuse would when WinFsp is not loaded.
inline struct fuse* fuse_new(struct fuse_args* args, const struct fuse_operations* ops, size_t size,
                             void* data) {
  using Fn = struct fuse* (*)(struct fsp_fuse_env*, struct fuse_args*, const struct fuse_operations*, size_t, void*);
  auto f = shadowfs::winfsp::proc<Fn>("fsp_fuse3_new");
  return f ? f(shadowfs::winfsp::env(), args, ops, size, data) : nullptr;
}
inline int fuse_mount(struct fuse* fs, const char* mountpoint) {
  using Fn = int (*)(struct fsp_fuse_env*, struct fuse*, const char*);
  auto f = shadowfs::winfsp::proc<Fn>("fsp_fuse3_mount");
  return f ? f(shadowfs::winfsp::env(), fs, mountpoint) : -1;
}
inline void fuse_unmount(struct fuse* fs) {
  using Fn = void (*)(struct fsp_fuse_env*, struct fuse*);
  if (auto f = shadowfs::winfsp::proc<Fn>("fsp_fuse3_unmount")) f(shadowfs::winfsp::env(), fs);
}
inline void fuse_destroy(struct fuse* fs) {
  using Fn = void (*)(struct fsp_fuse_env*, struct fuse*);
  if (auto f = shadowfs::winfsp::proc<Fn>("fsp_fuse3_destroy")) f(shadowfs::winfsp::env(), fs);
}
inline int fuse_loop_mt(struct fuse* fs, int cloneFd) {
  using Fn = int (*)(struct fsp_fuse_env*, struct fuse*, int);
  auto f = shadowfs::winfsp::proc<Fn>("fsp_fuse3_loop_mt_31");
  return f ? f(shadowfs::winfsp::env(), fs, cloneFd) : -1;
}
inline void fuse_exit(struct fuse* fs) {
  using Fn = void (*)(struct fsp_fuse_env*, struct fuse*);
  if (auto f = shadowfs::winfsp::proc<Fn>("fsp_fuse3_exit")) f(shadowfs::winfsp::env(), fs);
}
inline struct fuse_context* fuse_get_context() {
  using Fn = struct fuse_context* (*)(struct fsp_fuse_env*);
  auto f = shadowfs::winfsp::proc<Fn>("fsp_fuse3_get_context");
  return f ? f(shadowfs::winfsp::env()) : nullptr;
}

#endif  // _WIN32
