// Linux backend: the kernel's FUSE protocol spoken directly on /dev/fuse (libfuse3 mounts and
// unmounts), served by native threads that never call into JavaScript.
#pragma once

#include <memory>
#include <string>

#include "../core/backend.h"

namespace shadowfs {

// Mounts `overlay` at `mountPoint`, showing `view` (a pinned layer, released when the mount
// ends) or, when null, whatever layer is active. `lower` names the folder in the mount table.
// On failure returns null with an errno in *err and a sentence in *message.
std::unique_ptr<MountBackend> mountFuseLL(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message);

}  // namespace shadowfs
