// LowerFs for POSIX systems: reads the user's folder through a directory fd opened once,
// with *at() calls relative to it. Never opens anything for writing.
#pragma once

#include <memory>
#include <string>

#include "../core/lower.h"
#include "../core/spill.h"

namespace shadowfs {

// Opens `root` (must be a directory). Returns null and sets *err on failure.
std::unique_ptr<LowerFs> openPosixLower(const std::string& root, int* err);

// Spill files: O_TMPFILE files (never visible by name) in `dir`, which must exist and should
// not be inside the folder being shadowed.
std::unique_ptr<SpillStore> openPosixSpill(const std::string& dir, int* err);

}  // namespace shadowfs
