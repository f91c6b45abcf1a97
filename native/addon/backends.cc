// The one place that knows which backends and which LowerFs a build contains.
#include "backends.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#if defined(SHADOWFS_HAVE_FUSE_LL)
#include "../fuse_ll/fuse_ll.h"
#include "../platform/posix_lower.h"
#endif
#if defined(SHADOWFS_HAVE_FUSE_HL)
#include "../fuse_hl/fuse_hl.h"
#endif
#if defined(_WIN32)
#include "../platform/win32_lower.h"
#endif
#if defined(SHADOWFS_HAVE_WINFSP_NATIVE)
#include "../winfsp/winfsp_native.h"
#endif

namespace shadowfs {

std::vector<const char*> backendNames() {
  std::vector<const char*> names;
  // The first name is the default.
#if defined(SHADOWFS_HAVE_WINFSP_NATIVE)
  names.push_back("winfsp");
#endif
#if defined(SHADOWFS_HAVE_FUSE_LL)
  names.push_back("fuse_ll");
#endif
#if defined(SHADOWFS_HAVE_FUSE_HL)
  names.push_back("fuse_hl");
#endif
  return names;
}

std::shared_ptr<Overlay> createOverlay(const std::string& lower, const std::string& spillDir,
                                       uint64_t spillThreshold, bool caseInsensitive, int* err,
                                       std::string* message) {
  const NameMatch names = caseInsensitive ? NameMatch::IgnoreCase : NameMatch::Exact;
#if defined(SHADOWFS_HAVE_FUSE_LL) || defined(_WIN32)
  // The folder and the spill files through this OS's platform module; the rest is the same.
#if defined(_WIN32)
  auto fs = openWin32Lower(lower, err);
#else
  auto fs = openPosixLower(lower, err);
#endif
  if (!fs) {
    *message = "cannot open the folder " + lower + ": " + std::strerror(*err);
    return nullptr;
  }
  std::unique_ptr<SpillStore> spill;
  if (!spillDir.empty()) {
#if defined(_WIN32)
    spill = openWin32Spill(spillDir, err);
#else
    spill = openPosixSpill(spillDir, err);
#endif
    if (!spill) {
      *message = "cannot create temporary files in the spill directory " + spillDir + ": " +
                 std::strerror(*err);
      return nullptr;
    }
  }
  auto ov = std::make_shared<Overlay>(std::move(fs), std::move(spill), spillThreshold, names);
  // What the core cannot say through an errno (a copy-up that gave up on a file that kept
  // changing) goes to stderr: for a daemon started by a client, daemon.log.start beside its log.
  ov->setLogger([](const std::string& line) { std::fprintf(stderr, "shadowfs: %s\n", line.c_str()); });
  return ov;
#else
  (void)lower;
  (void)spillDir;
  (void)spillThreshold;
  (void)names;
  *err = ENOSYS;
  *message = "this build cannot read folders on this platform yet";
  return nullptr;
#endif
}

std::unique_ptr<MountBackend> createBackend(const std::string& name, std::shared_ptr<Overlay> ov,
                                            Layer* view, const std::string& lower,
                                            const std::string& mountPoint,
                                            const MountOptions& opts, int* err,
                                            std::string* message) {
#if defined(SHADOWFS_HAVE_FUSE_LL)
  if (name == "default" || name == "fuse_ll") {
    // The Linux kernel caches names by their exact spelling (its dentry cache): `foo` and `FOO`
    // would be cached apart, and what fuse_ll tells it to forget reaches one spelling only.
    if (opts.caseInsensitive) {
      *err = EINVAL;
      *message = "case-insensitive names need the fuse_hl backend (fuse_ll: the kernel caches "
                 "names by their exact spelling)";
      return nullptr;
    }
    return mountFuseLL(std::move(ov), view, lower, mountPoint, opts, err, message);
  }
#endif
#if defined(SHADOWFS_HAVE_WINFSP_NATIVE)
  // Windows: WinFsp's native API is the default (#28); fuse_hl (WinFsp's FUSE3 layer) stays
  // available by name.
  if (name == "default" || name == "winfsp")
    return mountWinFsp(std::move(ov), view, lower, mountPoint, opts, err, message);
#endif
#if defined(SHADOWFS_HAVE_FUSE_HL)
  if (name == "default" || name == "fuse_hl")
    return mountFuseHL(std::move(ov), view, lower, mountPoint, opts, err, message);
#endif
  (void)ov;
  (void)view;
  (void)lower;
  (void)mountPoint;
  (void)opts;
  *err = ENOSYS;
  *message = "backend '" + name + "' is not part of this build";
  return nullptr;
}

}  // namespace shadowfs
