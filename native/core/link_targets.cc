// Symbolic links that would lead the user's programs out of the shadow (overlay.h,
// linkTargetFor and climbsOut).
//
// An agent's runs see the shadow at the folder's real path; the user sees it at the mount
// point. A link is a string the kernel resolves for whoever follows it, so "/home/u/proj/.git"
// (or "../../../home/u/proj/.git", tuned to the mount point's depth) is the shadow's .git to
// the agent and the folder's own .git to the user: `git push fixtures/remote.git` run in the
// mount then writes the folder. Every link an agent makes is therefore stored in a form that
// leads to the same place for every viewer, whatever their mount point, or refused:
//   - relative, not climbing above the shadow's root, no ".." after a name: kept as it is;
//   - reaching the folder (by its real path, any spelling the system resolves, or climbing):
//     rewritten relative to the link's own directory, so it stays in the shadow;
//   - climbing above the root to somewhere else: rewritten to that absolute place, as the
//     agent's runs reach it (the shadow's own mount point included, which is the shadow for
//     everyone: a link made there by its path is kept as written);
//   - ".." after a name ("d/../x"): refused, since a link made at `d` later would change where
//     it leads, and where it leads is only known now;
//   - leading to a directory above the folder, or "/": refused, since from there a plain name
//     reaches the folder;
//   - through /proc, or into another FUSE file system (another shadow's links are its own):
//     refused, "/dev/stdin", "/dev/stdout" and "/dev/stderr" aside (the follower's own streams).
// Only the platform knows where an absolute path leads (LowerFs::hostPlace); without one
// (Windows, for now) absolute targets and climbing ones are kept as they are.
#include <cerrno>
#include <algorithm>
#include <functional>
#include <mutex>
#include <string_view>
#include <string>
#include <vector>

#include "fs_ops.h"
#include "path.h"

namespace shadowfs {
namespace {

// The components of a link target ("." and empty ones dropped).
std::vector<std::string> parts(const std::string& target) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= target.size()) {
    size_t slash = target.find('/', at);
    if (slash == std::string::npos) slash = target.size();
    if (slash > at) {
      std::string c(target, at, slash - at);
      if (c != ".") out.push_back(std::move(c));
    }
    at = slash + 1;
  }
  return out;
}

// How many ".." a relative target starts with (0 for an absolute one); *midDots: whether a
// ".." comes after a name.
size_t leadingDots(const std::string& target, bool* midDots = nullptr) {
  const std::vector<std::string> p = parts(target);
  size_t lead = 0;
  bool named = target.empty() ? false : target[0] == '/';
  bool mid = false;
  for (const std::string& c : p) {
    if (c != "..") named = true;
    else if (named) mid = true;
    else ++lead;
  }
  if (midDots) *midDots = mid;
  return lead;
}

std::string joined(const std::vector<std::string>& p, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += (out.empty() ? "" : "/") + p[i];
  return out;
}

// The target, relative to the directory `dir` (shadow-relative), that reaches the
// shadow-relative `place` ("" for the root).
std::string relativeFrom(const std::string& dir, const std::string& place) {
  const std::vector<std::string> d = parts(dir), p = parts(place);
  size_t common = 0;
  while (common < d.size() && common < p.size() && d[common] == p[common]) ++common;
  std::string out;
  for (size_t i = common; i < d.size(); ++i) out += out.empty() ? ".." : "/..";
  const std::string down = joined(p, common, p.size());
  if (!down.empty()) out += (out.empty() ? "" : "/") + down;
  return out.empty() ? "." : out;
}

}  // namespace

int Overlay::linkTargetFor(const std::string& path, std::string* target) {
  if (target->empty()) return ENOENT;
  bool midDots = false;
  const size_t lead = leadingDots(*target, &midDots);
  if (midDots) return EPERM;
  std::string dir, name;
  splitLast(path, &dir, &name);
  const bool absolute = (*target)[0] == '/';
  const size_t depth = parts(dir).size();
  if (!absolute && lead <= depth) return 0;  // stays in the shadow: the common case
  const std::string root = lower_->hostRoot();
  if (root.empty()) return 0;  // the platform cannot say where it leads
  // The follower's own standard streams (a log file sent to the terminal): through /proc, but
  // to whatever that program was already given to read or write.
  if (*target == "/dev/stdin" || *target == "/dev/stdout" || *target == "/dev/stderr") return 0;
  std::string abs = *target;
  if (!absolute) {
    // Where the agent's runs reach: the folder's real path, its directories, up `lead` levels.
    std::vector<std::string> base = parts(root);
    const std::vector<std::string> d = parts(dir);
    base.insert(base.end(), d.begin(), d.end());
    const std::vector<std::string> t = parts(*target);
    base.resize(base.size() >= lead ? base.size() - lead : 0);
    abs = "/" + joined(base, 0, base.size());
    const std::string down = joined(t, lead, t.size());
    if (!down.empty()) abs += (abs == "/" ? "" : "/") + down;
  }
  std::string rest;
  std::vector<std::string> mounts;
  {
    std::lock_guard<std::mutex> lock(mountPointsMu_);
    mounts = mountPoints_;
  }
  switch (lower_->hostPlace(abs, mounts, &rest)) {
    case LowerFs::Place::Inside: {
      bool restDots = false;
      leadingDots(rest, &restDots);
      if (restDots || leadingDots(rest) > 0) return EPERM;  // a link on the way said ".."
      *target = relativeFrom(dir, rest);
      return 0;
    }
    case LowerFs::Place::Ancestor:
    case LowerFs::Place::Refused: return EPERM;
    case LowerFs::Place::Shadow:  // the shadow's own mount point: the shadow for everyone
    case LowerFs::Place::Elsewhere: break;
  }
  if (!absolute) *target = abs;
  return 0;
}

bool Overlay::refusedGitfile(std::string_view head) {
  static constexpr std::string_view kTag = "gitdir: ";
  if (head.substr(0, kTag.size()) != kTag) return false;
  std::string_view p = head.substr(kTag.size());
  while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.remove_suffix(1);
  if (p.empty()) return false;
  // Absolute on any system git runs on: "/x", "\\server", "C:".
  if (p[0] == '/' || p[0] == '\\' || (p.size() > 1 && p[1] == ':')) return true;
  size_t at = 0;
  while (at <= p.size()) {
    size_t end = p.find_first_of("/\\", at);
    if (end == std::string_view::npos) end = p.size();
    if (p.substr(at, end - at) == "..") return true;
    at = end + 1;
  }
  return false;
}

int Overlay::gitfileGuard(const Inode* in, const char* buf, size_t size, uint64_t off,
                          const uint64_t* truncateTo) {
  if (!guard_ || !guard_->git() || in->type != FileType::Regular) return 0;
  if (!truncateTo && off >= kGitfileScan) {
    // Past the part looked at, unless the file already is a gitfile whose path this extends.
    char tag[8];
    size_t got = 0;
    if (contentRead(in, tag, sizeof tag, 0, &got) || got < sizeof tag) return 0;
    if (std::string_view(tag, got) != "gitdir: ") return 0;
  }
  // The first kGitfileScan bytes as they will be.
  std::string head(kGitfileScan, '\0');
  size_t got = 0;
  if (int e = contentRead(in, head.data(), head.size(), 0, &got)) return e;
  head.resize(got);
  if (truncateTo) {
    if (*truncateTo < head.size()) head.resize(static_cast<size_t>(*truncateTo));
  } else if (off < kGitfileScan) {
    const size_t at = static_cast<size_t>(off);
    const size_t n = std::min(size, kGitfileScan - at);
    if (head.size() < at + n) head.resize(at + n, '\0');
    head.replace(at, n, buf, n);
  }
  return refusedGitfile(head) ? EPERM : 0;
}

bool Overlay::climbsOut(Layer& L, const Node* n, const std::string& from, const std::string& to) {
  (void)L;
  const size_t fromDepth = components(from).size(), toDepth = components(to).size();
  if (toDepth >= fromDepth) return false;  // deeper or as deep: no leading ".." reaches further
  const size_t drop = fromDepth - toDepth;
  // A link whose directory is `depth` deep (after the move) climbs out now and did not before.
  auto newly = [&](const std::string& target, size_t depth) {
    const size_t lead = leadingDots(target);
    return lead > depth && lead <= depth + drop;
  };
  if (!n) {
    // A folder object: only a link itself is looked at (a folder directory's own links are the
    // user's; see limits.md).
    Res r;
    if (resolve(L, from, &r) || r.node || r.lowerAttr.type != FileType::Symlink) return false;
    std::string target;
    if (lower_->readlink(r.low, &target)) return false;
    return newly(target, toDepth - 1);
  }
  const Inode* in = n->inode();
  if (!in) return false;
  if (in->type == FileType::Symlink) return newly(in->target(), toDepth - 1);
  if (in->type != FileType::Directory) return false;
  // The layer's own links beneath a moved directory (its folder part is the user's).
  std::function<bool(const Node*, size_t)> any = [&](const Node* dirNode, size_t depth) {
    for (const Node* k : dirNode->kids()) {
      if (k->whiteout()) continue;
      const Inode* ki = k->inode();
      if (ki->type == FileType::Symlink && newly(ki->target(), depth)) return true;
      if (ki->type == FileType::Directory && any(k, depth + 1)) return true;
    }
    return false;
  };
  return any(n, toDepth);
}

}  // namespace shadowfs
