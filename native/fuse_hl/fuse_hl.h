// Portable backend: the FUSE3 high-level (path-based) API, which libfuse3 offers on Linux and
// WinFsp offers on Windows. Built and tested on Linux so the code Windows runs is covered.
#pragma once

#include <memory>
#include <string>

#include "../core/backend.h"

namespace shadowfs {

// Same contract as mountFuseLL (native/fuse_ll/fuse_ll.h). The kernel caches nothing for this
// backend (see fuse_hl.cc), so the cache timeouts in `opts` are not used.
std::unique_ptr<MountBackend> mountFuseHL(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message);

}  // namespace shadowfs
