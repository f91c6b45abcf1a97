// Where an absolute path leads on this system now, for the symbolic links an agent makes in a
// shadow (native/core/link_targets.cc): the agent's runs see the shadow at the folder's real
// path, so a link there "to the folder" looks right to the agent, while the user's programs in
// the mount would follow it into the folder itself.
#pragma once

#include <string>
#include <vector>

namespace shadowfs {
namespace posix {

enum class Reach {
  Elsewhere,  // none of the below (also: a name on the way does not exist now)
  Inside,     // the folder `root` or something beneath it; *rest is what is left of the path
  Ancestor,   // a directory above the folder, or "/"
  Shadow,     // one of `ownMounts`: the shadow's own mount points, the same shadow for everyone
  Refused,    // through /proc (its links mean something else to every process that follows
              // them), or into a FUSE file system that is not on the way to the folder (its
              // links are another server's, a shadow's included; looking there from inside a
              // shadow's own request could wait on that shadow), or to a regular file with
              // other hard links on the folder's file system (one may be the folder's)
};

// Walks `abs` (absolute) from "/" the way the kernel would, following every symbolic link on the
// way (at most 40; "..", also in a link's target, goes to the parent of where the walk is) and
// stops as soon as it reaches `root` (the folder's real path, no trailing '/') or beneath it:
// then *rest is the folder-relative place reached plus the components not walked yet, joined
// with '/' (it may hold ".." from a link met on the way). Never opens a file and never looks
// inside a FUSE file system that is not an ancestor of `root` (names there are not looked up).
// `ownMounts`: where this shadow and its views are mounted (never looked into).
Reach reach(const std::string& root, const std::string& abs, std::string* rest,
            const std::vector<std::string>& ownMounts = {});

}  // namespace posix
}  // namespace shadowfs
