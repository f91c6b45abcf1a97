// See posix_reach.h.
#include "posix_reach.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
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

// The file system type of each mount of this process, by mount id (/proc/self/mountinfo:
// "<id> <parent> <maj:min> <root> <point> <options> [optional fields] - <type> ...").
std::map<uint64_t, std::string> mountTypes() {
  std::map<uint64_t, std::string> out;
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (!f) return out;
  char* line = nullptr;
  size_t cap = 0;
  while (::getline(&line, &cap, f) > 0) {
    unsigned long long id = 0;
    if (std::sscanf(line, "%llu", &id) != 1) continue;
    const char* dash = std::strstr(line, " - ");
    if (!dash) continue;
    const char* type = dash + 3;
    const char* end = std::strchr(type, ' ');
    out[id] = end ? std::string(type, static_cast<size_t>(end - type)) : std::string(type);
  }
  std::free(line);
  std::fclose(f);
  return out;
}

}  // namespace

Reach reach(const std::string& root, const std::string& abs, std::string* rest) {
  std::deque<std::string> todo;
  pushFront(&todo, abs);
  std::string cur = "/";
  std::map<uint64_t, std::string> types;
  bool typesRead = false;
  int links = 0;
  for (;;) {
    if (within(cur, root)) {
      std::string r = cur.size() > root.size() ? cur.substr(root == "/" ? 1 : root.size() + 1)
                                               : std::string();
      for (const std::string& c : todo) r += (r.empty() ? "" : "/") + c;
      *rest = r;
      return Reach::Inside;
    }
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
    // Type and mount without a request to a FUSE server (AT_STATX_DONT_SYNC: cached attributes).
    struct statx sx;
    if (::statx(AT_FDCWD, next.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
                STATX_TYPE | STATX_MNT_ID, &sx) != 0)
      return Reach::Elsewhere;
    if (sx.stx_mask & STATX_MNT_ID) {
      if (!typesRead) types = mountTypes(), typesRead = true;
      auto t = types.find(sx.stx_mnt_id);
      const std::string type = t == types.end() ? std::string() : t->second;
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
  return above(cur, root) ? Reach::Ancestor : Reach::Elsewhere;
}

}  // namespace posix
}  // namespace shadowfs
