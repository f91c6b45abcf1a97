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

// Linux: sets the read-ahead of the FUSE mount at `mountPoint` (its device's bdi in sysfs) to
// `kb` KiB. The kernel starts a FUSE mount at 128 KiB whatever INIT says (INIT may only lower
// it), so a sequential read of a big file the daemon serves costs one READ per 128 KiB; with the
// request size (1 MiB) it costs one per MiB. 0 or an errno: sysfs is root's to write (another
// user's mount keeps the kernel's default), and the mount is found in /proc/self/mountinfo.
int setFuseReadahead(const std::string& mountPoint, unsigned kb);

}  // namespace shadowfs
