// Unmounting a FUSE file system on POSIX systems, shared by every backend that mounts through
// libfuse3 (fuse_ll, and fuse_hl when it runs on Linux).
#pragma once

#include <cstdint>
#include <string>

namespace shadowfs {

// 0, EBUSY when programs still use the mount and `lazy` is false, or another errno. As root it
// calls umount2 itself (an already-gone mount counts as done); otherwise fusermount3 -u / -uz.
int unmountFuse(const std::string& mountPoint, bool lazy);

// The command name of process `pid` (Linux: /proc/<pid>/comm, at most 15 bytes), or "" when it
// is gone or unknown. For the audit trail's process names (core/audit.h).
std::string processName(uint32_t pid);

}  // namespace shadowfs
