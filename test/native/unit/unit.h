// A minimal test runner for the C++ unit tests (test/native/*): TEST(name) registers a case,
// CHECK* record a failure and go on, REQUIRE* record it and end the case. Standard library only,
// so the same tests build on Windows. main() lives in unit_main.cc.
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace unit {

struct Case {
  std::string name;
  std::function<void()> fn;
};

inline std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

struct Registrar {
  Registrar(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

// Failures of the case that is running (reset by the runner before each case).
inline std::vector<std::string>& failures() {
  static std::vector<std::string> list;
  return list;
}

// Thrown by REQUIRE* to end the current case; the runner catches it.
struct Abort {};

// The symbolic name of an errno value the core returns (the tests print them on mismatch).
inline std::string errnoName(int e) {
  switch (e) {
    case 0: return "0";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ENXIO: return "ENXIO";
    case EIO: return "EIO";
    case EBADF: return "EBADF";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case ENOSPC: return "ENOSPC";
    case EROFS: return "EROFS";
    case ERANGE: return "ERANGE";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ELOOP: return "ELOOP";
    case ENODATA: return "ENODATA";
    case ENOTSUP: return "ENOTSUP";
    default: return "errno " + std::to_string(e);
  }
}

template <typename T>
std::string show(const T& v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
inline std::string show(const std::string& v) { return '"' + v + '"'; }
inline std::string show(const char* v) { return show(std::string(v)); }
inline std::string show(bool v) { return v ? "true" : "false"; }
inline std::string show(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + show(v[i]);
  return out + "]";
}

inline void fail(const char* file, int line, const std::string& what) {
  std::string f = file;
  auto slash = f.find_last_of("/\\");
  failures().push_back(f.substr(slash == std::string::npos ? 0 : slash + 1) + ":" +
                       std::to_string(line) + ": " + what);
}

template <typename A, typename B>
bool checkEq(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
  if (a == b) return true;
  fail(file, line, std::string(ea) + " == " + eb + " (" + show(a) + " vs " + show(b) + ")");
  return false;
}

inline bool checkErr(int got, int want, const char* expr, const char* file, int line) {
  if (got == want) return true;
  fail(file, line, std::string(expr) + " returned " + errnoName(got) + ", expected " + errnoName(want));
  return false;
}

}  // namespace unit

#define UNIT_CAT2(a, b) a##b
#define UNIT_CAT(a, b) UNIT_CAT2(a, b)
#define TEST(name)                                                                  \
  static void UNIT_CAT(unit_test_, name)();                                         \
  static ::unit::Registrar UNIT_CAT(unit_reg_, name)(#name, &UNIT_CAT(unit_test_, name)); \
  static void UNIT_CAT(unit_test_, name)()

#define CHECK(cond) \
  ((cond) ? true : (::unit::fail(__FILE__, __LINE__, "CHECK(" #cond ")"), false))
#define CHECK_EQ(a, b) ::unit::checkEq((a), (b), #a, #b, __FILE__, __LINE__)
// The call returns this errno (0 = success).
#define CHECK_ERR(expr, want) ::unit::checkErr((expr), (want), #expr, __FILE__, __LINE__)
#define CHECK_OK(expr) CHECK_ERR(expr, 0)
#define REQUIRE(cond) \
  do {                \
    if (!CHECK(cond)) throw ::unit::Abort{}; \
  } while (0)
#define REQUIRE_EQ(a, b) \
  do {                   \
    if (!CHECK_EQ(a, b)) throw ::unit::Abort{}; \
  } while (0)
#define REQUIRE_OK(expr) \
  do {                   \
    if (!CHECK_OK(expr)) throw ::unit::Abort{}; \
  } while (0)
