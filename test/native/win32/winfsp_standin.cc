// A stand-in for WinFsp's DLL, for tests under wine (test/windows/native-win32.test.ts). It is
// not WinFsp and mounts nothing: it exports the FUSE3 entry points shadowfs resolves by name,
// records what the module hands it (the options, the operations table, the mount point) and,
// in place of a kernel, calls a few of the operations the way WinFsp's dispatcher would (init,
// then getattr, readdir and open/read/release on the root and on one file), writing what they
// answered to the log named by $SHADOWFS_STANDIN_LOG, one JSON object per line. With
// SHADOWFS_STANDIN_PARTIAL one entry point is left out, to see the module report what a DLL lacks.
//
// It is built from the project's own FUSE3 declarations (native/platform/winfsp_fuse3.h), so it
// agrees with them whatever they say and can find no mistake in them: it tests the loader and
// fuse_hl's calls, not fidelity to WinFsp. The test double of WinFsp itself, written from
// WinFsp's documentation and source and sharing none of our declarations, is
// test/native/winfsp_double/ (issue #28); it drives the default winfsp backend.
#include <windows.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../../native/platform/winfsp_fuse3.h"

namespace {

struct State {
  const fuse_operations* ops = nullptr;
  size_t opsize = 0;
  void* data = nullptr;
  fuse_context ctx{};
  HANDLE exitEvent = nullptr;
} g;

int dummyFuse;  // what fsp_fuse3_new returns: an address, never looked into

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

void log(const std::string& line) {
  const char* path = std::getenv("SHADOWFS_STANDIN_LOG");
  if (!path) return;
  if (FILE* f = std::fopen(path, "ab")) {
    std::fputs((line + "\n").c_str(), f);
    std::fclose(f);
  }
}

int collect(void* buf, const char* name, const struct fuse_stat*, fuse_off_t, enum fuse_fill_dir_flags) {
  auto* names = static_cast<std::string*>(buf);
  *names += (names->empty() ? "" : ",") + jsonString(name);
  return 0;
}

}  // namespace

extern "C" {

__declspec(dllexport) struct fuse* fsp_fuse3_new(fsp_fuse_env* env, fuse_args* args, const fuse_operations* ops,
                                                 size_t opsize, void* data) {
  std::string argv;
  for (int i = 0; args && i < args->argc; ++i) argv += (i ? "," : "") + jsonString(args->argv[i]);
  static const char* const names[] = {"getattr", "readlink", "mknod", "mkdir", "unlink", "rmdir", "symlink", "rename",
                                      "link", "chmod", "chown", "truncate", "open", "read", "write", "statfs",
                                      "flush", "release", "fsync", "setxattr", "getxattr", "listxattr",
                                      "removexattr", "opendir", "readdir", "releasedir", "fsyncdir", "init",
                                      "destroy", "access", "create", "lock", "utimens", "bmap", "ioctl", "poll",
                                      "write_buf", "read_buf", "flock", "fallocate"};
  std::string set;
  auto slots = reinterpret_cast<void* const*>(ops);
  for (size_t i = 0; i < sizeof names / sizeof *names && i * sizeof(void*) < opsize; ++i)
    if (slots[i]) set += (set.empty() ? "" : ",") + jsonString(names[i]);
  log("{\"call\":\"new\",\"env\":" + jsonString(std::string(1, static_cast<char>(env->environment))) +
      ",\"argv\":[" + argv + "],\"opsize\":" + std::to_string(opsize) + ",\"ops\":[" + set + "]}");
  g.ops = ops;
  g.opsize = opsize;
  g.data = data;
  g.exitEvent = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  return reinterpret_cast<struct fuse*>(&dummyFuse);
}

__declspec(dllexport) void* fsp_fuse3_new_30() { return nullptr; }

__declspec(dllexport) int fsp_fuse3_mount(fsp_fuse_env*, struct fuse*, const char* mountpoint) {
  log("{\"call\":\"mount\",\"mountpoint\":" + jsonString(mountpoint ? mountpoint : "") + "}");
  return 0;
}

__declspec(dllexport) void fsp_fuse3_unmount(fsp_fuse_env*, struct fuse*) { log("{\"call\":\"unmount\"}"); }
__declspec(dllexport) void fsp_fuse3_destroy(fsp_fuse_env*, struct fuse*) { log("{\"call\":\"destroy\"}"); }

__declspec(dllexport) int fsp_fuse3_loop_mt_31(fsp_fuse_env*, struct fuse* f, int) {
  // As WinFsp's dispatcher starts: the context first, then init with a zeroed config.
  g.ctx.fuse = f;
  g.ctx.private_data = g.data;
  g.ctx.uid = g.ctx.gid = 0;
  fuse_conn_info conn{};
  fuse_config cfg{};
  if (g.ops->init) g.ctx.private_data = g.ops->init(&conn, &cfg);
  log("{\"call\":\"init\",\"use_ino\":" + std::to_string(cfg.use_ino) + ",\"hard_remove\":" +
      std::to_string(cfg.hard_remove) + ",\"attr_timeout\":" + std::to_string(cfg.attr_timeout) +
      ",\"entry_timeout\":" + std::to_string(cfg.entry_timeout) +
      ",\"want\":" + std::to_string(conn.want) + "}");
  struct fuse_stat st{};
  int rc = g.ops->getattr("/", &st, nullptr);
  log("{\"call\":\"getattr\",\"path\":\"/\",\"rc\":" + std::to_string(rc) + ",\"mode\":" + std::to_string(st.st_mode) + "}");
  std::string names;
  fuse_file_info dfi{};
  rc = g.ops->opendir ? g.ops->opendir("/", &dfi) : 0;
  if (rc == 0) rc = g.ops->readdir("/", &names, collect, 0, &dfi, static_cast<fuse_readdir_flags>(0));
  if (g.ops->releasedir) g.ops->releasedir("/", &dfi);
  log("{\"call\":\"readdir\",\"path\":\"/\",\"rc\":" + std::to_string(rc) + ",\"names\":[" + names + "]}");
  if (const char* file = std::getenv("SHADOWFS_STANDIN_READ")) {
    fuse_file_info fi{};
    fi.flags = 0;  // O_RDONLY
    rc = g.ops->open(file, &fi);
    std::string text;
    if (rc == 0) {
      char buf[4096];
      int n = g.ops->read(file, buf, sizeof buf, 0, &fi);
      if (n >= 0) text.assign(buf, static_cast<size_t>(n));
      else rc = n;
      g.ops->release(file, &fi);
    }
    log("{\"call\":\"read\",\"path\":" + jsonString(file) + ",\"rc\":" + std::to_string(rc) + ",\"text\":" + jsonString(text) + "}");
  }
  WaitForSingleObject(g.exitEvent, INFINITE);
  if (g.ops->destroy) g.ops->destroy(g.ctx.private_data);
  log("{\"call\":\"loop-ended\"}");
  return 0;
}

__declspec(dllexport) void fsp_fuse3_exit(fsp_fuse_env*, struct fuse*) {
  log("{\"call\":\"exit\"}");
  if (g.exitEvent) SetEvent(g.exitEvent);
}

#if !defined(SHADOWFS_STANDIN_PARTIAL)
__declspec(dllexport) struct fuse_context* fsp_fuse3_get_context(fsp_fuse_env*) { return &g.ctx; }
#endif
}
