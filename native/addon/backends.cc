// The one place that knows which backends a build contains.
#include "backends.h"

#include <cerrno>

#if defined(SHADOWFS_HAVE_FUSE_LL)
#include "../fuse_ll/fuse_ll.h"
#endif

namespace shadowfs {

std::vector<const char*> backendNames() {
  std::vector<const char*> names;
#if defined(SHADOWFS_HAVE_FUSE_LL)
  names.push_back("fuse_ll");
#endif
  return names;
}

std::unique_ptr<MountBackend> createBackend(const std::string& name, const std::string& lower,
                                            const std::string& mountPoint,
                                            const MountOptions& opts, int* err,
                                            std::string* message) {
#if defined(SHADOWFS_HAVE_FUSE_LL)
  if (name == "default" || name == "fuse_ll") return mountFuseLL(lower, mountPoint, opts, err, message);
#endif
  *err = ENOSYS;
  *message = "backend '" + name + "' is not part of this build";
  return nullptr;
}

}  // namespace shadowfs
