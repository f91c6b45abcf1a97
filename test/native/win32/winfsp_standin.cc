// A test double of WinFsp's FUSE3 layer: the fsp_fuse3_* entry points of winfsp-x64.dll, for
// the tests under wine (test/windows/native-win32.test.ts, backend-standin-win32.test.ts).
//
// Written from WinFsp itself, never from shadowfs: github.com/winfsp/winfsp at e7c7ccc, read
// for this file (nothing copied; every declaration below is our own text with WinFsp's names,
// so a reader can check each against the file named beside it). It includes no shadowfs
// header: a mistake in native/platform/winfsp_fuse3.h (a field out of place, a wrong size, a
// capability bit) shows here as a wrong value or a failed step, not as agreement.
//
// What it models, and from where:
// - fsp_fuse3_new (src/dll/fuse3/fuse2to3.c, fsp_fuse3_new_common): the arguments are parsed
//   against WinFsp's option table (src/dll/fuse/fuse.c, fsp_fuse_core_opts); an option not in
//   it is kept and never acted on, as fuse_opt_parse does with a key its handler passes through,
//   so the log lists such options as "ignored"; -h/--help/-V/--version make it return NULL. The
//   operations table is copied (memcpy, opsize capped at sizeof(fuse3_operations)), so the
//   caller's table is not read again; the fuse3 object comes from env->memalloc.
// - fsp_fuse3_mount: records the mount point (WinFsp mounts nothing until the loop starts).
// - fsp_fuse3_loop_mt_31 (src/dll/fuse/fuse_loop.c, fsp_fuse_loop_start, and fuse2to3_init):
//   on the calling thread, a context with uid, gid and pid -1 and the fuse2 object (not the
//   fuse3 one) in `fuse`; init with a fuse3_conn_info built as fuse2to3_conn3from2 builds it
//   (protocol 7.26, max_write UINT_MAX, WinFsp's capable bits with READDIRPLUS in FUSE3's bit)
//   and a zeroed fuse3_config but for uid/gid/umask from the options. WinFsp reads back only
//   conn->want, max_write and max_readahead; what init writes into the config is dropped, and
//   the log says so. Then, in WinFsp's order: statfs("/") and getattr("/", NULL fi, a
//   fuse_stat_ex-sized buffer), either failing fails the start; readlink("/") (anything but
//   -ENOSYS means symlinks, then getattr("/.") decides "slashdot"); the extended-attribute probe
//   (getxattr of a name that does not exist, when all four xattr calls are given). Then the
//   mount point: a drive letter, or a directory that must not exist and whose parent must
//   (src/dll/mount.c and util.c create it with FILE_CREATE as a junction and delete it when the
//   file system goes); here a plain directory stands for the junction, made at start and
//   removed at stop.
// - requests (src/dll/fuse/fuse_intf.c through fuse2to3.c): on another thread, as WinFsp's
//   dispatcher threads, with that thread's own context; every call gets a fresh
//   fuse3_file_info carrying only flags, the flag bits, fh and lock_owner from the previous
//   call on the same handle (fuse2to3_fi3from2); readdir gets FUSE_READDIR_PLUS only when init
//   asked for READDIRPLUS. Errors are negative errno values of the Windows C runtime ('W').
// - fsp_fuse3_exit: sets the loop's event, or marks it exited if the loop has not started.
//   The loop then stops: the mount point goes, then destroy(private data from init).
// - fsp_fuse3_get_context: the calling thread's context (WinFsp keeps it in thread-local
//   storage).
//
// What it cannot model: the driver and everything Windows sends it (no program can open a file
// in this "mount"; the calls it makes are the few listed in SHADOWFS_STANDIN_* below); the
// translation of Windows I/O into FUSE calls (fuse_intf.c); the caller's uid/gid from its token
// (the dispatcher context gets fixed stand-in ids); timeouts and caching.
//
// Environment: SHADOWFS_STANDIN_LOG names the log (one JSON object per line);
// SHADOWFS_STANDIN_READ names a path to open, stat, read and release as a request. Built with
// SHADOWFS_STANDIN_PARTIAL it leaves fsp_fuse3_get_context out, to see the module report what a
// DLL lacks.
#include <windows.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace wf {

// inc/fuse/winfsp_fuse.h, the _WIN64 branch.
using fuse_uid_t = uint32_t;
using fuse_gid_t = uint32_t;
using fuse_pid_t = int32_t;
using fuse_dev_t = uint32_t;
using fuse_ino_t = uint64_t;
using fuse_mode_t = uint32_t;
using fuse_nlink_t = uint16_t;
using fuse_off_t = int64_t;
using fuse_fsblkcnt_t = uint64_t;
using fuse_fsfilcnt_t = uint64_t;
using fuse_blksize_t = int32_t;
using fuse_blkcnt_t = int64_t;

struct fuse_timespec {
  int64_t tv_sec;
  int64_t tv_nsec;
};

// FSP_FUSE_STAT_FIELD_DEFN, then FSP_FUSE_STAT_EX_FIELD_DEFN's additions.
struct fuse_stat {
  fuse_dev_t st_dev;
  fuse_ino_t st_ino;
  fuse_mode_t st_mode;
  fuse_nlink_t st_nlink;
  fuse_uid_t st_uid;
  fuse_gid_t st_gid;
  fuse_dev_t st_rdev;
  fuse_off_t st_size;
  fuse_timespec st_atim;
  fuse_timespec st_mtim;
  fuse_timespec st_ctim;
  fuse_blksize_t st_blksize;
  fuse_blkcnt_t st_blocks;
  fuse_timespec st_birthtim;
};
struct fuse_stat_ex {
  fuse_stat base;
  uint32_t st_flags;
  uint32_t st_reserved32[3];
  uint64_t st_reserved64[2];
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

// inc/fuse/fuse_opt.h
struct fuse_args {
  int argc;
  char** argv;
  int allocated;
};

// inc/fuse3/fuse_common.h
struct fuse3_file_info {
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

struct fuse3_conn_info {
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

// FUSE3's capability bits (inc/fuse3/fuse_common.h) and WinFsp's FUSE2 ones (inc/fuse/fuse_common.h).
constexpr unsigned FUSE_CAP_ASYNC_READ = 1u << 0;
constexpr unsigned FUSE_CAP_BIG_WRITES = 1u << 5;  // FUSE2 only; passed through to FUSE3 as is
constexpr unsigned FUSE_CAP_DONT_MASK = 1u << 6;
constexpr unsigned FUSE_CAP_READDIRPLUS = 1u << 13;
constexpr unsigned FSP_FUSE_CAP_READ_ONLY = 1u << 22;
constexpr unsigned FSP_FUSE_CAP_STAT_EX = 1u << 23;
constexpr unsigned FSP_FUSE_CAP_DELETE_ACCESS = 1u << 24;
constexpr unsigned FUSE_CAP_CASE_INSENSITIVE = 1u << 29;

// inc/fuse3/fuse.h
enum fuse3_readdir_flags { FUSE_READDIR_PLUS = 1 << 0 };
enum fuse3_fill_dir_flags { FUSE_FILL_DIR_PLUS = 1 << 1 };
using fuse3_fill_dir_t = int (*)(void* buf, const char* name, const fuse_stat* stbuf, fuse_off_t off,
                                 fuse3_fill_dir_flags flags);

struct fuse3_config {
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

struct fuse3;  // the object fsp_fuse3_new returns
struct fuse;   // WinFsp's FUSE2 object, which its contexts point to

// The slots the double calls are typed; the others stay opaque pointers (only their presence
// matters here), in the order of struct fuse3_operations.
struct fuse3_operations {
  int (*getattr)(const char* path, fuse_stat* stbuf, fuse3_file_info* fi);
  int (*readlink)(const char* path, char* buf, size_t size);
  void* mknod;
  void* mkdir;
  void* unlink;
  void* rmdir;
  void* symlink;
  void* rename;
  void* link;
  void* chmod;
  void* chown;
  void* truncate;
  int (*open)(const char* path, fuse3_file_info* fi);
  int (*read)(const char* path, char* buf, size_t size, fuse_off_t off, fuse3_file_info* fi);
  void* write;
  int (*statfs)(const char* path, fuse_statvfs* stbuf);
  void* flush;
  int (*release)(const char* path, fuse3_file_info* fi);
  void* fsync;
  void* setxattr;
  int (*getxattr)(const char* path, const char* name, char* value, size_t size);
  void* listxattr;
  void* removexattr;
  int (*opendir)(const char* path, fuse3_file_info* fi);
  int (*readdir)(const char* path, void* buf, fuse3_fill_dir_t filler, fuse_off_t off, fuse3_file_info* fi,
                 fuse3_readdir_flags flags);
  int (*releasedir)(const char* path, fuse3_file_info* fi);
  void* fsyncdir;
  void* (*init)(fuse3_conn_info* conn, fuse3_config* conf);
  void (*destroy)(void* data);
  void* access;
  void* create;
  void* lock;
  void* utimens;
  void* bmap;
  void* ioctl;
  void* poll;
  void* write_buf;
  void* read_buf;
  void* flock;
  void* fallocate;
};

struct fuse3_context {
  fuse* fuse;
  fuse_uid_t uid;
  fuse_gid_t gid;
  fuse_pid_t pid;
  void* private_data;
  fuse_mode_t umask;
};

// The Windows C runtime's errno values WinFsp expects from a 'W' environment (src/dll/fuse/errno.i
// maps them; ENOSYS_ in src/dll/fuse/library.h is 40 for 'W').
constexpr int kENOSYS = 40;
constexpr int kEINVAL = 22;

}  // namespace wf

namespace {

using namespace wf;

// src/dll/fuse/fuse.c, fsp_fuse_core_opts: options taken whole ("debug") and options taken
// with a value ("uid=" covers "uid=%d"). Anything else is not WinFsp's.
const char* const kWholeOptions[] = {"-h", "--help", "-V", "--version", "-d", "debug", "hard_remove", "use_ino",
                                     "readdir_ino", "direct_io", "kernel_cache", "auto_cache", "noauto_cache",
                                     "entry_timeout", "ac_attr_timeout", "negative_timeout", "noforget", "intr",
                                     "rellinks", "norellinks", "dothidden", "nodothidden", "AddWriteEaAccess"};
const char* const kValueOptions[] = {
    "DebugLog=", "umask=", "create_umask=", "create_file_umask=", "create_dir_umask=", "uid=", "gid=",
    "attr_timeout=", "intr_signal=", "modules=", "fstypename=", "volname=", "uidmap=", "SectorSize=",
    "SectorsPerAllocationUnit=", "MaxComponentLength=", "VolumeCreationTime=", "VolumeSerialNumber=",
    "FileInfoTimeout=", "DirInfoTimeout=", "EaTimeout=", "VolumeInfoTimeout=", "KeepFileCache=",
    "FlushOnCleanup=", "LegacyUnlinkRename=", "ThreadCount=", "UNC=", "--UNC=", "VolumePrefix=",
    "--VolumePrefix=", "FileSystemName=", "--FileSystemName=", "ExactFileSystemName=",
    "--ExactFileSystemName=", "FileSecurity=", "--FileSecurity=", "UserName=", "--UserName=", "GroupName=",
    "--GroupName="};

// The fuse3 object: what fsp_fuse3_new allocates (with env->memalloc) and the others take.
struct Fuse3 {
  uint32_t magic;  // kAlive until fsp_fuse3_destroy
  fsp_fuse_env* env;
  fuse3_operations ops;
  void* data;
};
constexpr uint32_t kAlive = 0x33657375;  // "use3"

struct State {
  Fuse3* f3 = nullptr;
  std::string mountPoint;
  bool help = false;
  bool hasUid = false, hasGid = false, hasUmask = false;
  long uid = 0, gid = 0;
  unsigned long umask = 0;
  void* privateData = nullptr;  // init's result
  unsigned want = 0;
  void* volatile loopEvent = nullptr;
  volatile LONG exited = 0;
  std::wstring madeMountDir;
} g;

int fuse2Object;  // what contexts' `fuse` points to: WinFsp's FUSE2 object, never the fuse3 one
thread_local fuse3_context tlsContext{};

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string jsonList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + jsonString(items[i]);
  return out + "]";
}

void log(const std::string& line) {
  const char* path = std::getenv("SHADOWFS_STANDIN_LOG");
  if (!path) return;
  if (FILE* f = std::fopen(path, "ab")) {
    std::fputs((line + "\n").c_str(), f);
    std::fclose(f);
  }
}

bool alive(fuse3* f, const char* call) {
  auto* f3 = reinterpret_cast<Fuse3*>(f);
  if (f3 && f3 == g.f3 && f3->magic == kAlive) return true;
  log(std::string("{\"call\":\"misuse\",\"what\":") + jsonString(std::string(call) + " of an object fsp_fuse3_new did not return, or one already destroyed") + "}");
  return false;
}

std::wstring wide(const std::string& utf8) {
  int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8.c_str(), -1, nullptr, 0);
  if (n <= 0) return std::wstring();
  std::wstring w(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8.c_str(), -1, w.data(), n);
  w.resize(static_cast<size_t>(n - 1));
  return w;
}

// One option of a -o list, as fsp_fuse_core_opts would take it; unknown ones are collected.
void takeOption(const std::string& o, std::vector<std::string>* known, std::vector<std::string>* ignored) {
  for (const char* w : kWholeOptions)
    if (o == w) {
      if (o == "-h" || o == "--help" || o == "-V" || o == "--version") g.help = true;
      known->push_back(o);
      return;
    }
  for (const char* v : kValueOptions) {
    const size_t n = std::strlen(v);
    if (o.compare(0, n, v) != 0) continue;
    const std::string value = o.substr(n);
    const std::string name(v, n - 1);
    if (name == "uid") g.hasUid = true, g.uid = std::strtol(value.c_str(), nullptr, 10);
    if (name == "gid") g.hasGid = true, g.gid = std::strtol(value.c_str(), nullptr, 10);
    if (name == "umask") g.hasUmask = true, g.umask = std::strtoul(value.c_str(), nullptr, 8);
    known->push_back(o);
    return;
  }
  ignored->push_back(o);
}

// fuse_opt's -o list: commas separate, a backslash escapes the next character.
void takeOptionList(const std::string& list, std::vector<std::string>* known, std::vector<std::string>* ignored) {
  std::string cur;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '\\' && i + 1 < list.size()) {
      cur += list[++i];
    } else if (list[i] == ',') {
      takeOption(cur, known, ignored);
      cur.clear();
    } else {
      cur += list[i];
    }
  }
  takeOption(cur, known, ignored);
}

fuse3* newCommon(fsp_fuse_env* env, fuse_args* args, const fuse3_operations* ops, size_t opsize, void* data) {
  std::vector<std::string> argv, known, ignored;
  g.help = false;
  for (int i = 0; args && i < args->argc; ++i) {
    const std::string a = args->argv[i] ? args->argv[i] : "";
    argv.push_back(a);
    if (i == 0) continue;  // the program's name
    if (a == "-o" && i + 1 < args->argc) {
      argv.push_back(args->argv[++i]);
      takeOptionList(args->argv[i], &known, &ignored);
    } else if (a.compare(0, 2, "-o") == 0 && a.size() > 2) {
      takeOptionList(a.substr(2), &known, &ignored);
    } else if (!a.empty() && a[0] == '-') {
      takeOption(a, &known, &ignored);
    } else {
      ignored.push_back(a);  // a non-option argument: kept by fuse_opt_parse, unused by fsp_fuse3_new
    }
  }
  std::string head = "{\"call\":\"new\",\"env\":" + jsonString(std::string(1, static_cast<char>(env->environment))) +
                     ",\"argv\":" + jsonList(argv) + ",\"known\":" + jsonList(known) +
                     ",\"ignored\":" + jsonList(ignored) + ",\"opsize\":" + std::to_string(opsize);
  if (g.help) {
    log(head + ",\"result\":\"help: NULL\"}");
    return nullptr;
  }
  if (!env->memalloc || !env->memfree) {
    log(head + ",\"result\":\"no allocator in the environment\"}");
    return nullptr;
  }
  auto* f3 = static_cast<Fuse3*>(env->memalloc(sizeof(Fuse3)));
  if (!f3) return nullptr;
  std::memset(f3, 0, sizeof *f3);
  f3->magic = kAlive;
  f3->env = env;
  std::memcpy(&f3->ops, ops, opsize < sizeof(fuse3_operations) ? opsize : sizeof(fuse3_operations));
  f3->data = data;
  static const char* const names[] = {"getattr", "readlink", "mknod", "mkdir", "unlink", "rmdir", "symlink", "rename",
                                      "link", "chmod", "chown", "truncate", "open", "read", "write", "statfs",
                                      "flush", "release", "fsync", "setxattr", "getxattr", "listxattr",
                                      "removexattr", "opendir", "readdir", "releasedir", "fsyncdir", "init",
                                      "destroy", "access", "create", "lock", "utimens", "bmap", "ioctl", "poll",
                                      "write_buf", "read_buf", "flock", "fallocate"};
  static_assert(sizeof names / sizeof *names * sizeof(void*) == sizeof(fuse3_operations), "one name per slot");
  std::vector<std::string> set;
  auto slots = reinterpret_cast<void* const*>(&f3->ops);
  for (size_t i = 0; i < sizeof names / sizeof *names; ++i)
    if (slots[i]) set.push_back(names[i]);
  log(head + ",\"ops\":" + jsonList(set) + "}");
  g.f3 = f3;
  return reinterpret_cast<fuse3*>(f3);
}

// A fresh fuse3_file_info for one call on a handle, from what the last call left (fuse2to3_fi3from2).
struct Handle {
  int flags = 0;
  bool directIo = false, keepCache = false, nonseekable = false;
  uint64_t fh = 0;
  fuse3_file_info fresh() const {
    fuse3_file_info fi;
    std::memset(&fi, 0, sizeof fi);
    fi.flags = flags;
    fi.direct_io = directIo;
    fi.keep_cache = keepCache;
    fi.nonseekable = nonseekable;
    fi.fh = fh;
    return fi;
  }
  void keep(const fuse3_file_info& fi) {
    flags = fi.flags;
    directIo = fi.direct_io;
    keepCache = fi.keep_cache;
    nonseekable = fi.nonseekable;
    fh = fi.fh;
  }
};

struct Listing {
  std::vector<std::string> names;
  bool plusSeen = false;
  bool plusWithoutStat = false;
};

int collect(void* buf, const char* name, const fuse_stat* st, fuse_off_t, fuse3_fill_dir_flags flags) {
  auto* l = static_cast<Listing*>(buf);
  l->names.push_back(name ? name : "");
  if (flags & FUSE_FILL_DIR_PLUS) {
    l->plusSeen = true;
    if (!st) l->plusWithoutStat = true;
  }
  return 0;
}

// As a dispatcher thread enters an operation: this thread's context, set for the request.
void enterRequest() {
  tlsContext.fuse = reinterpret_cast<fuse*>(&fuse2Object);
  tlsContext.private_data = g.privateData;
  tlsContext.uid = 1000;  // stand-in ids: WinFsp maps the caller's token here
  tlsContext.gid = 1000;
  tlsContext.pid = static_cast<fuse_pid_t>(GetCurrentProcessId());
  tlsContext.umask = 0;
}

DWORD WINAPI dispatcher(void* arg) {
  const Fuse3* f3 = static_cast<const Fuse3*>(arg);
  const fuse3_operations& ops = f3->ops;
  enterRequest();
  {
    Handle dir;
    Listing l;
    int rc = 0;
    if (ops.opendir) {
      fuse3_file_info fi = dir.fresh();
      rc = ops.opendir("/", &fi);
      dir.keep(fi);
    }
    if (rc == 0 && ops.readdir) {
      fuse3_file_info fi = dir.fresh();
      rc = ops.readdir("/", &l, collect, 0, &fi,
                       static_cast<fuse3_readdir_flags>((g.want & FUSE_CAP_READDIRPLUS) ? FUSE_READDIR_PLUS : 0));
      dir.keep(fi);
    }
    if (ops.releasedir) {
      fuse3_file_info fi = dir.fresh();
      ops.releasedir("/", &fi);
    }
    log("{\"call\":\"readdir\",\"path\":\"/\",\"rc\":" + std::to_string(rc) + ",\"names\":" + jsonList(l.names) +
        ",\"plus\":" + (l.plusSeen ? "true" : "false") + ",\"plusWithoutStat\":" + (l.plusWithoutStat ? "true" : "false") +
        "}");
  }
  if (const char* file = std::getenv("SHADOWFS_STANDIN_READ")) {
    fuse_stat st;
    std::memset(&st, 0, sizeof st);
    int src = ops.getattr(file, &st, nullptr);
    Handle h;
    h.flags = 0;  // O_RDONLY
    fuse3_file_info fi = h.fresh();
    int rc = ops.open(file, &fi);
    h.keep(fi);
    std::string text;
    int fstatRc = 0;
    fuse_stat fst;
    std::memset(&fst, 0, sizeof fst);
    if (rc == 0) {
      fi = h.fresh();
      fstatRc = ops.getattr(file, &fst, &fi);  // fgetattr: getattr with the handle
      h.keep(fi);
      char buf[4096];
      fi = h.fresh();
      int n = ops.read(file, buf, sizeof buf, 0, &fi);
      h.keep(fi);
      if (n >= 0) text.assign(buf, static_cast<size_t>(n));
      else rc = n;
      fi = h.fresh();
      ops.release(file, &fi);
    }
    log("{\"call\":\"read\",\"path\":" + jsonString(file) + ",\"rc\":" + std::to_string(rc) + ",\"text\":" +
        jsonString(text) + ",\"stat\":{\"rc\":" + std::to_string(src) + ",\"mode\":" + std::to_string(st.st_mode) +
        ",\"size\":" + std::to_string(st.st_size) + ",\"nlink\":" + std::to_string(st.st_nlink) +
        ",\"ino\":" + std::to_string(st.st_ino) + ",\"mtime\":" + std::to_string(st.st_mtim.tv_sec) +
        ",\"atime\":" + std::to_string(st.st_atim.tv_sec) + ",\"mtimeNs\":" + std::to_string(st.st_mtim.tv_nsec) +
        ",\"blocks\":" + std::to_string(st.st_blocks) + "},\"fstat\":{\"rc\":" + std::to_string(fstatRc) +
        ",\"size\":" + std::to_string(fst.st_size) + "}}");
  }
  return 0;
}

// fsp_fuse_loop_start's steps before the dispatcher runs; false (with the step logged) where
// WinFsp would fail the start.
bool start(Fuse3* f3) {
  fuse3_operations& ops = f3->ops;
  tlsContext.fuse = reinterpret_cast<fuse*>(&fuse2Object);
  tlsContext.private_data = f3->data;
  tlsContext.uid = static_cast<fuse_uid_t>(-1);
  tlsContext.gid = static_cast<fuse_gid_t>(-1);
  tlsContext.pid = -1;
  g.privateData = f3->data;

  fuse3_conn_info conn;
  std::memset(&conn, 0, sizeof conn);
  conn.proto_major = 7;
  conn.proto_minor = 26;
  conn.max_write = UINT_MAX;
  conn.max_read = UINT_MAX;
  conn.capable = FUSE_CAP_ASYNC_READ | FUSE_CAP_BIG_WRITES | FUSE_CAP_DONT_MASK | FUSE_CAP_READDIRPLUS |
                 FSP_FUSE_CAP_READ_ONLY | FSP_FUSE_CAP_STAT_EX | FSP_FUSE_CAP_DELETE_ACCESS | FUSE_CAP_CASE_INSENSITIVE;
  fuse3_config conf;
  std::memset(&conf, 0, sizeof conf);
  conf.set_uid = g.hasUid;
  conf.uid = static_cast<unsigned>(g.uid == -1 ? 1000 : g.uid);  // -1: the mounting user (stand-in id)
  conf.set_gid = g.hasGid;
  conf.gid = static_cast<unsigned>(g.gid == -1 ? 1000 : g.gid);
  conf.set_mode = g.hasUmask;
  conf.umask = static_cast<unsigned>(g.umask);
  if (ops.init) {
    g.privateData = tlsContext.private_data = ops.init(&conn, &conf);
    g.want = conn.want;
  }
  char timeout[64];
  std::snprintf(timeout, sizeof timeout, "%g", conf.attr_timeout);
  log("{\"call\":\"init\",\"want\":" + std::to_string(conn.want) + ",\"caseInsensitive\":" +
      ((conn.want & FUSE_CAP_CASE_INSENSITIVE) ? "true" : "false") + ",\"readdirPlus\":" +
      ((conn.want & FUSE_CAP_READDIRPLUS) ? "true" : "false") + ",\"readOnly\":" +
      ((conn.want & FSP_FUSE_CAP_READ_ONLY) ? "true" : "false") + ",\"maxWrite\":" + std::to_string(conn.max_write) +
      ",\"privateDataIsData\":" + (g.privateData == f3->data ? "true" : "false") +
      ",\"configDropped\":{\"use_ino\":" + std::to_string(conf.use_ino) + ",\"hard_remove\":" +
      std::to_string(conf.hard_remove) + ",\"attr_timeout\":" + timeout + "}}");

  if (ops.statfs) {
    fuse_statvfs sv;
    std::memset(&sv, 0, sizeof sv);
    int rc = ops.statfs("/", &sv);
    log("{\"call\":\"statfs\",\"path\":\"/\",\"rc\":" + std::to_string(rc) + ",\"frsize\":" + std::to_string(sv.f_frsize) +
        ",\"namemax\":" + std::to_string(sv.f_namemax) + "}");
    if (rc != 0) return false;
  }
  if (ops.getattr) {
    fuse_stat_ex st;  // WinFsp hands a fuse_stat_ex here, whatever STAT_EX says
    std::memset(&st, 0, sizeof st);
    int rc = ops.getattr("/", &st.base, nullptr);
    log("{\"call\":\"getattr\",\"path\":\"/\",\"rc\":" + std::to_string(rc) + ",\"mode\":" +
        std::to_string(st.base.st_mode) + ",\"ctime\":" + std::to_string(st.base.st_ctim.tv_sec) + "}");
    if (rc != 0) return false;
  }
  if (ops.readlink) {
    char buf[1024];
    int rc = ops.readlink("/", buf, sizeof buf);
    bool symlinks = rc != -kENOSYS;
    std::string line = "{\"call\":\"readlink\",\"path\":\"/\",\"rc\":" + std::to_string(rc) +
                       ",\"symlinks\":" + (symlinks ? "true" : "false");
    if (symlinks && ops.getattr) {
      fuse_stat_ex st;
      std::memset(&st, 0, sizeof st);
      int drc = ops.getattr("/.", &st.base, nullptr);
      line += std::string(",\"slashdot\":") + (drc == 0 && (st.base.st_mode & 0170000) == 0040000 ? "true" : "false");
    }
    log(line + "}");
  }
  if (ops.listxattr && ops.getxattr && ops.setxattr && ops.removexattr) {
    char buf[1024];
    int rc = ops.getxattr("/", "non-existant-a11ec902d22f4ec49003af15282d3b00", buf, sizeof buf);
    log("{\"call\":\"xattr-probe\",\"rc\":" + std::to_string(rc) + ",\"extendedAttributes\":" +
        (rc != -kENOSYS ? "true" : "false") + "}");
  }

  // The mount point: a drive letter, or a directory WinFsp creates (FILE_CREATE) in an existing parent.
  const std::wstring mp = wide(g.mountPoint);
  if (mp.size() == 2 && mp[1] == L':') {
    log("{\"call\":\"mountpoint\",\"kind\":\"drive\"}");
    return true;
  }
  if (mp.empty()) {
    log("{\"call\":\"mountpoint\",\"kind\":\"none\",\"error\":\"not UTF-8, or empty\"}");
    return false;
  }
  if (!CreateDirectoryW(mp.c_str(), nullptr)) {
    const DWORD e = GetLastError();
    log("{\"call\":\"mountpoint\",\"kind\":\"directory\",\"error\":" +
        jsonString(e == ERROR_ALREADY_EXISTS ? "exists (WinFsp creates the directory itself)"
                   : e == ERROR_PATH_NOT_FOUND ? "its parent does not exist"
                                               : "cannot be created: " + std::to_string(e)) +
        "}");
    return false;
  }
  g.madeMountDir = mp;
  log("{\"call\":\"mountpoint\",\"kind\":\"directory\"}");
  return true;
}

void stop(Fuse3* f3) {
  if (!g.madeMountDir.empty()) {
    RemoveDirectoryW(g.madeMountDir.c_str());
    g.madeMountDir.clear();
  }
  if (f3->ops.destroy) f3->ops.destroy(g.privateData);
  log("{\"call\":\"loop-ended\"}");
}

}  // namespace

extern "C" {

__declspec(dllexport) fuse3* fsp_fuse3_new(fsp_fuse_env* env, fuse_args* args, const fuse3_operations* ops,
                                           size_t opsize, void* data) {
  return newCommon(env, args, ops, opsize, data);
}

__declspec(dllexport) fuse3* fsp_fuse3_new_30(fsp_fuse_env* env, fuse_args* args, const fuse3_operations* ops,
                                              size_t opsize, void* data) {
  return newCommon(env, args, ops, opsize, data);
}

__declspec(dllexport) int fsp_fuse3_mount(fsp_fuse_env*, fuse3* f, const char* mountpoint) {
  if (!alive(f, "fsp_fuse3_mount")) return -1;
  g.mountPoint = mountpoint ? mountpoint : "";
  log("{\"call\":\"mount\",\"mountpoint\":" + jsonString(g.mountPoint) + "}");
  return 0;
}

__declspec(dllexport) void fsp_fuse3_unmount(fsp_fuse_env*, fuse3* f) {
  if (alive(f, "fsp_fuse3_unmount")) log("{\"call\":\"unmount\"}");
}

__declspec(dllexport) void fsp_fuse3_destroy(fsp_fuse_env* env, fuse3* f) {
  if (!alive(f, "fsp_fuse3_destroy")) return;
  auto* f3 = reinterpret_cast<Fuse3*>(f);
  f3->magic = 0;
  env->memfree(f3);
  log("{\"call\":\"destroy\"}");
}

__declspec(dllexport) int fsp_fuse3_loop_mt_31(fsp_fuse_env*, fuse3* f, int) {
  if (!alive(f, "fsp_fuse3_loop_mt_31")) return -kEINVAL;
  auto* f3 = reinterpret_cast<Fuse3*>(f);
  // The event is published before `exited` is read, and fsp_fuse3_exit sets `exited` before it
  // reads the event (both interlocked): an exit at any moment is seen by one side or the other.
  InterlockedExchangePointer(&g.loopEvent, CreateEventW(nullptr, TRUE, FALSE, nullptr));
  if (!start(f3)) {
    stop(f3);
    return -kEINVAL;  // fsp_fuse3_loop_mt_31's answer to any failed start
  }
  HANDLE t = CreateThread(nullptr, 0, dispatcher, f3, 0, nullptr);
  if (t) {
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
  }
  if (InterlockedCompareExchange(&g.exited, 0, 0) == 0) WaitForSingleObject(g.loopEvent, INFINITE);
  stop(f3);
  CloseHandle(InterlockedExchangePointer(&g.loopEvent, nullptr));
  return 0;
}

__declspec(dllexport) void fsp_fuse3_exit(fsp_fuse_env*, fuse3* f) {
  if (!alive(f, "fsp_fuse3_exit")) return;
  log("{\"call\":\"exit\"}");
  InterlockedExchange(&g.exited, 1);
  if (HANDLE e = InterlockedCompareExchangePointer(&g.loopEvent, nullptr, nullptr)) SetEvent(e);
}

#if !defined(SHADOWFS_STANDIN_PARTIAL)
__declspec(dllexport) fuse3_context* fsp_fuse3_get_context(fsp_fuse_env*) { return &tlsContext; }
#endif
}
