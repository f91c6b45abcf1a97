// What the addon needs from a mounted backend, whatever the OS. One implementation per
// backend folder (fuse_ll on Linux; fuse_hl for the portable FUSE3 / WinFsp path), chosen by
// name in native/addon/backends.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "overlay.h"

namespace shadowfs {

struct MountOptions {
  double entryTimeout = 1.0;     // seconds the kernel may cache a name
  double attrTimeout = 1.0;      // seconds the kernel may cache attributes
  double negativeTimeout = 1.0;  // seconds the kernel may cache "no such name"
  bool debug = false;
};

class MountBackend {
 public:
  virtual ~MountBackend() = default;
  virtual Overlay& overlay() = 0;
  // Tells the kernel to forget what it cached about these paths (and their parents' listings)
  // after the layer changed behind its back (API writes). Called on the JS thread, never under
  // the overlay lock.
  virtual void invalidatePaths(const std::vector<std::string>& paths) = 0;
  // Same for everything the kernel knows about (reset).
  virtual void invalidateAll() = 0;
  // 0, EBUSY when programs still use the mount and `lazy` is false, or another errno.
  virtual int unmount(bool lazy) = 0;
  virtual bool mounted() const = 0;
  // Ends the object's life: deletes it now, or, after a lazy unmount whose mount is still in
  // use, lets its loop delete it once the last user has gone. Use instead of delete.
  virtual void dispose() = 0;
};

}  // namespace shadowfs
