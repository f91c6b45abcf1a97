// Picks a mount backend by name ("default" = the best one this build has).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../core/backend.h"

namespace shadowfs {

std::vector<const char*> backendNames();
std::unique_ptr<MountBackend> createBackend(const std::string& name, const std::string& lower,
                                            const std::string& mountPoint,
                                            const MountOptions& opts, int* err,
                                            std::string* message);

}  // namespace shadowfs
