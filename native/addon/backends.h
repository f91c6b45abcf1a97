// Picks a mount backend by name ("default" = the best one this build has), and opens the
// user's folder with this platform's LowerFs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../core/backend.h"

namespace shadowfs {

std::vector<const char*> backendNames();
// `spillDir` empty: keep every file in memory. `caseInsensitive`: names match ignoring case
// (NameMatch::IgnoreCase).
std::shared_ptr<Overlay> createOverlay(const std::string& lower, const std::string& spillDir,
                                       uint64_t spillThreshold, bool caseInsensitive, int* err,
                                       std::string* message);
std::unique_ptr<MountBackend> createBackend(const std::string& name, std::shared_ptr<Overlay> ov,
                                            Layer* view, const std::string& lower,
                                            const std::string& mountPoint,
                                            const MountOptions& opts, int* err,
                                            std::string* message);

}  // namespace shadowfs
