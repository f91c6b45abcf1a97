// See posix_reach.h.
#include "posix_reach.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace shadowfs {
namespace posix {
namespace {

constexpr int kMaxLinks = 40;  // the kernel's own limit (ELOOP)

// `p` is `root` or beneath it (both without a trailing '/', "/" aside).
bool within(const std::string& p, const std::string& root) {
  if (root == "/") return true;
  return p == root || (p.size() > root.size() && p.compare(0, root.size(), root) == 0 &&
                       p[root.size()] == '/');
}

// `p` is "/" or a directory above `root`.
bool above(const std::string& p, const std::string& root) {
  if (p == "/") return root != "/";
  return root.size() > p.size() && root.compare(0, p.size(), p) == 0 && root[p.size()] == '/';
}

void pushFront(std::deque<std::string>* todo, const std::string& path) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    if (slash > at) parts.emplace_back(path, at, slash - at);
    at = slash + 1;
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo->push_front(*it);
}

// One line of /proc/self/mountinfo: "<id> <parent> <maj:min> <root> <point> <options>
// [optional fields] - <type> ...", paths with their octal escapes ("\\040") decoded.
struct Mount {
  uint64_t id = 0;
  unsigned major = 0, minor = 0;
  std::string root, point, type;
};

std::string unescape(const char* p, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const bool octal = p[i] == '\\' && i + 3 < n && p[i + 1] >= '0' && p[i + 1] <= '3' &&
                       p[i + 2] >= '0' && p[i + 2] <= '7' && p[i + 3] >= '0' && p[i + 3] <= '7';
    if (octal) {
      out.push_back(static_cast<char>((p[i + 1] - '0') * 64 + (p[i + 2] - '0') * 8 + (p[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(p[i]);
    }
  }
  return out;
}

std::vector<Mount> mounts() {
  std::vector<Mount> out;
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (!f) return out;
  char* line = nullptr;
  size_t cap = 0;
  while (::getline(&line, &cap, f) > 0) {
    Mount m;
    unsigned long long id = 0, parent = 0;
    int used = 0;
    if (std::sscanf(line, "%llu %llu %u:%u %n", &id, &parent, &m.major, &m.minor, &used) != 4)
      continue;
    m.id = id;
    const char* p = line + used;
    const char* sp = std::strchr(p, ' ');
    if (!sp) continue;
    m.root = unescape(p, static_cast<size_t>(sp - p));
    p = sp + 1;
    sp = std::strchr(p, ' ');
    if (!sp) continue;
    m.point = unescape(p, static_cast<size_t>(sp - p));
    const char* dash = std::strstr(sp, " - ");
    if (!dash) continue;
    const char* type = dash + 3;
    const char* end = std::strchr(type, ' ');
    m.type = end ? std::string(type, static_cast<size_t>(end - type)) : std::string(type);
    out.push_back(std::move(m));
  }
  std::free(line);
  std::fclose(f);
  return out;
}

// `p` relative to `base` when within it ("" for base itself), else false.
bool relativeTo(const std::string& p, const std::string& base, std::string* rel) {
  if (!within(p, base)) return false;
  *rel = p.size() > base.size() ? p.substr(base == "/" ? 1 : base.size() + 1) : std::string();
  return true;
}

std::string join(const std::string& a, const std::string& b) {
  if (b.empty()) return a;
  if (a.empty()) return b;
  return a == "/" ? "/" + b : a + "/" + b;
}

// Other paths of the folder: where a mount of the folder's file system shows it (a bind mount
// of the folder, of a directory above it, or of one beneath it: *inFolder is then where in the
// folder the alias starts).
struct Alias {
  std::string path, inFolder;
};

std::vector<Alias> aliasesOf(const std::string& root, const std::vector<Mount>& all) {
  std::vector<Alias> out;
  struct statx sx;
  if (::statx(AT_FDCWD, root.c_str(), 0, STATX_MNT_ID, &sx) != 0 || !(sx.stx_mask & STATX_MNT_ID))
    return out;
  const Mount* home = nullptr;
  for (const Mount& m : all)
    if (m.id == sx.stx_mnt_id) home = &m;
  if (!home) return out;
  std::string below;  // the folder's path within its file system
  if (!relativeTo(root, home->point, &below)) return out;
  const std::string inFs = join(home->root, below);
  for (const Mount& m : all) {
    if (&m == home || m.major != home->major || m.minor != home->minor) continue;
    std::string rel;
    if (relativeTo(inFs, m.root, &rel)) out.push_back({join(m.point, rel), std::string()});
    else if (relativeTo(m.root, inFs, &rel)) out.push_back({m.point, rel});
  }
  return out;
}

// The folder's repository when it lives outside the folder (a linked worktree's or a
// submodule's `.git` file says "gitdir: X"; X/commondir names the shared one): places no link
// may reach, as the folder's own .git is.
std::vector<std::string> outsideGitDirs(const std::string& root) {
  std::vector<std::string> out;
  auto readSmall = [](const std::string& path, std::string* text) {
    FILE* f = std::fopen(path.c_str(), "re");
    if (!f) return false;
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    text->assign(buf, n);
    while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) text->pop_back();
    return true;
  };
  auto real = [](const std::string& p) {
    char* r = ::realpath(p.c_str(), nullptr);
    std::string s = r ? r : "";
    std::free(r);
    return s;
  };
  struct stat st;
  if (::lstat((root + "/.git").c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return out;
  std::string text;
  if (!readSmall(root + "/.git", &text) || text.compare(0, 8, "gitdir: ") != 0) return out;
  std::string dir = text.substr(8);
  if (dir.empty()) return out;
  if (dir[0] != '/') dir = root + "/" + dir;
  const std::string gitDir = real(dir);
  if (gitDir.empty()) return out;
  if (!within(gitDir, root)) out.push_back(gitDir);
  std::string common;
  if (readSmall(gitDir + "/commondir", &common) && !common.empty()) {
    const std::string c = real(common[0] == '/' ? common : gitDir + "/" + common);
    if (!c.empty() && !within(c, root)) out.push_back(c);
  }
  return out;
}

// `path` (outside the folder, the end of a walk) is a regular file with other hard links on
// the folder's file system: one of them may be a file of the folder (pnpm's store links the
// same inode into node_modules), so a write through a link to it would write the folder's
// file. Which names the inode has is not known without searching the folder, so any such file
// counts. Directories cannot be hard links, so a link to a directory is not refused here.
bool sharesFolderInode(const std::string& root, const std::string& path) {
  struct statx folder, file;
  if (::statx(AT_FDCWD, root.c_str(), AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &folder) != 0) return false;
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
              STATX_TYPE | STATX_NLINK, &file) != 0)
    return false;
  return S_ISREG(file.stx_mode) && file.stx_nlink > 1 && file.stx_dev_major == folder.stx_dev_major &&
         file.stx_dev_minor == folder.stx_dev_minor;
}

}  // namespace

Reach reach(const std::string& root, const std::string& abs, std::string* rest,
            const std::vector<std::string>& ownMounts) {
  // The shadow's mount points by their real path: the directory holding one is resolved (it is
  // not in the shadow), the last name kept.
  std::vector<std::string> own;
  for (const std::string& m : ownMounts) {
    const size_t slash = m.rfind('/');
    if (m.empty() || m[0] != '/' || slash == std::string::npos) continue;
    char* dir = ::realpath(slash == 0 ? "/" : m.substr(0, slash).c_str(), nullptr);
    if (!dir) continue;
    own.push_back(join(dir, m.substr(slash + 1)));
    std::free(dir);
  }
  std::deque<std::string> todo;
  pushFront(&todo, abs);
  std::string cur = "/";
  const std::vector<Mount> all = mounts();
  const std::vector<Alias> aliases = aliasesOf(root, all);
  const std::vector<std::string> gitDirs = outsideGitDirs(root);
  int links = 0;
  for (;;) {
    // The folder by its real path, or by another mount of it: inside, and where.
    std::string r;
    bool inside = relativeTo(cur, root, &r);
    for (size_t i = 0; !inside && i < aliases.size(); ++i) {
      std::string rel;
      if (relativeTo(cur, aliases[i].path, &rel)) inside = true, r = join(aliases[i].inFolder, rel);
    }
    if (inside) {
      for (const std::string& c : todo) r += (r.empty() ? "" : "/") + c;
      *rest = r;
      return Reach::Inside;
    }
    for (const std::string& g : gitDirs)
      if (within(cur, g)) return Reach::Refused;
    if (todo.empty()) break;
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      size_t slash = cur.rfind('/');
      cur = slash == 0 ? "/" : cur.substr(0, slash);
      continue;
    }
    std::string next = cur == "/" ? "/" + c : cur + "/" + c;
    if (within(next, root)) {
      cur = std::move(next);
      continue;
    }
    for (const std::string& m : own)
      if (within(next, m)) return Reach::Shadow;  // before any look inside it
    bool aliased = false;
    for (const Alias& a : aliases) aliased = aliased || within(next, a.path);
    if (aliased) {  // a mount of the folder's file system: looked at as the folder (above)
      cur = std::move(next);
      continue;
    }
    // Type and mount without a request to a FUSE server (AT_STATX_DONT_SYNC: cached attributes).
    struct statx sx;
    if (::statx(AT_FDCWD, next.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
                STATX_TYPE | STATX_MNT_ID, &sx) != 0)
      return Reach::Elsewhere;
    if (sx.stx_mask & STATX_MNT_ID) {
      std::string type;
      for (const Mount& m : all)
        if (m.id == sx.stx_mnt_id) type = m.type;
      if (type == "proc") return Reach::Refused;
      if (type.compare(0, 4, "fuse") == 0 && !above(next, root)) return Reach::Refused;
    }
    if (S_ISLNK(sx.stx_mode)) {
      if (++links > kMaxLinks) return Reach::Elsewhere;  // ELOOP for whoever follows it
      std::vector<char> buf(4096);
      ssize_t n = ::readlink(next.c_str(), buf.data(), buf.size());
      if (n <= 0 || static_cast<size_t>(n) >= buf.size()) return Reach::Elsewhere;
      std::string target(buf.data(), static_cast<size_t>(n));
      pushFront(&todo, target);
      if (target[0] == '/') cur = "/";
      continue;
    }
    if (!S_ISDIR(sx.stx_mode) && !todo.empty()) return Reach::Elsewhere;  // ENOTDIR
    cur = std::move(next);
  }
  if (above(cur, root)) return Reach::Ancestor;
  return sharesFolderInode(root, cur) ? Reach::Refused : Reach::Elsewhere;
}

}  // namespace posix
}  // namespace shadowfs
