// Linux backend: the libfuse3 low-level API, served by libfuse's multi-threaded loop on native
// threads that never call into JavaScript.
#pragma once

#include <memory>
#include <string>

#include "../core/backend.h"

namespace shadowfs {

// Mounts `lower` at `mountPoint`. On failure returns null with an errno in *err and a sentence
// in *message.
std::unique_ptr<MountBackend> mountFuseLL(const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message);

}  // namespace shadowfs
