// The Windows backend on WinFsp's native API (FSP_FILE_SYSTEM_INTERFACE, as WinFsp's own
// passthrough and memfs samples use it): backend "winfsp", the default on Windows (#28).
#pragma once

#include <memory>
#include <string>

#include "../core/backend.h"

namespace shadowfs {

// What the winfsp backend tells beyond MountBackend (the addon asks with dynamic_cast): the
// opens WinFsp has not closed yet, opens (and creates) minus closes, on files, directories and
// links, including a program's handle already closed whose file object a mapped image still
// holds (its Close comes at the unmapping). WinFsp reports no busy volume (#28 finding 7), so
// this is how an idle unmount or suspend can tell a shadow in use (#29); unmount(lazy=false)
// answers EBUSY while it is not 0. Any thread; an atomic read.
class OpenHandleCount {
 public:
  virtual uint64_t openHandles() const = 0;

 protected:
  ~OpenHandleCount() = default;
};

// Mounts `overlay` (the layer `view`, or the active one when null) at `mountPoint`: a drive
// ("X:") or a directory that does not exist yet (WinFsp creates it; an existing empty one is
// removed first). With opts.volumePrefix the volume is a network one (\\shadowfs\<name>, drive
// letters only: WinFsp refuses a directory); else a disk volume. Returns once the volume answers
// a request, or null with *err (an errno) and *message saying why.
std::unique_ptr<MountBackend> mountWinFsp(std::shared_ptr<Overlay> overlay, Layer* view,
                                          const std::string& lower, const std::string& mountPoint,
                                          const MountOptions& opts, int* err,
                                          std::string* message);

}  // namespace shadowfs
