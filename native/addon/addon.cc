// node-addon-api binding: the module's entry point. Exports the `Shadow` class (shadow_object.h;
// its methods are in shadow_*.cc) and the free functions: contentHash, winfsp, the memory
// budget (setMemoryBudget, memoryBudget) and the list of backends this build has
// (src/shadow/native.ts types them all).
#include <napi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../core/audit.h"
#include "../core/budget.h"
#include "../core/hash.h"
#include "../core/mask.h"
#if defined(_WIN32)
#include "../platform/win32_winfsp.h"
#endif
#if defined(__linux__)
#include "../platform/posix_mount.h"
#endif
#include "backends.h"
#include "shadow_object.h"

namespace shadowfs {

// JS thread, synchronous: contentHash(buffer) -> 16 hex digits, the hash a layer records as a
// file's base (so apply can tell whether the folder's file still has the bytes the agent
// started from).
// JS thread, synchronous: maskHides(globs, ignoreCase, paths) -> booleans, whether each path
// is masked by those globs as a layer's mask (native/core/mask.h) hides it. For what is read
// of the folder outside any layer (collect: a directory the agent removed, and what the folder
// holds there now), so it is left out just as the agent's view leaves it out.
Napi::Value MaskHides(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsArray() || !info[1].IsBoolean() || !info[2].IsArray()) {
    Napi::TypeError::New(env, "maskHides(globs, ignoreCase, paths)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto strings = [&](Napi::Array a, std::vector<std::string>* out) {
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value v = a.Get(i);
      if (!v.IsString()) return false;
      out->push_back(v.As<Napi::String>().Utf8Value());
    }
    return true;
  };
  std::vector<std::string> globs, paths;
  if (!strings(info[0].As<Napi::Array>(), &globs) || !strings(info[2].As<Napi::Array>(), &paths)) {
    Napi::TypeError::New(env, "maskHides: globs and paths are strings").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  PathMask mask(globs, info[1].As<Napi::Boolean>().Value());
  Napi::Array out = Napi::Array::New(env, paths.size());
  for (uint32_t i = 0; i < paths.size(); ++i) out.Set(i, Napi::Boolean::New(env, mask.hides(paths[i])));
  return out;
}

Napi::Value ContentHashOf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBuffer()) {
    Napi::TypeError::New(env, "contentHash(buffer)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto buf = info[0].As<Napi::Buffer<char>>();
  ContentHash h;
  h.update(buf.Data(), buf.Length());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.digest()));
  return Napi::String::New(env, hex);
}

// JS thread, synchronous: winfsp() -> { available, installDir, dll, error, resolved, missing }
// on Windows (WinFsp found through the registry and loaded by full path); null elsewhere.
Napi::Value WinFspOf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
#if defined(_WIN32)
  const WinFspLoad& l = loadWinFsp();
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", l.available);
  o.Set("installDir", l.installDir);
  o.Set("dll", l.dll);
  o.Set("error", l.error);
  o.Set("version", l.version);
  auto list = [&](const std::vector<std::string>& v) {
    Napi::Array a = Napi::Array::New(env, v.size());
    for (size_t i = 0; i < v.size(); ++i) a.Set(static_cast<uint32_t>(i), v[i]);
    return a;
  };
  o.Set("resolved", list(l.resolved));
  o.Set("missing", list(l.missing));
  return o;
#else
  return env.Null();
#endif
}

// JS thread, synchronous: setMemoryBudget(bytes) -> undefined. The process's budget for layer
// contents in memory (core/budget.h), shared by every shadow of the process; a negative number:
// none. Contents over it spill at their next change.
Napi::Value SetMemoryBudget(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "setMemoryBudget(bytes)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const double v = info[0].As<Napi::Number>().DoubleValue();
  ContentBudget::process().setLimit(v < 0 ? UINT64_MAX : static_cast<uint64_t>(v));
  return env.Undefined();
}

// JS thread, synchronous: memoryBudget() -> { limitBytes (-1: none), inMemoryBytes,
// inMemoryContents, spilledContents, spilledBytes }, for the whole process.
Napi::Value MemoryBudgetOf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const BudgetStats s = ContentBudget::process().stats();
  Napi::Object o = Napi::Object::New(env);
  o.Set("limitBytes", s.limitBytes == UINT64_MAX ? -1.0 : static_cast<double>(s.limitBytes));
  o.Set("inMemoryBytes", static_cast<double>(s.inMemoryBytes));
  o.Set("inMemoryContents", static_cast<double>(s.inMemoryContents));
  o.Set("spilledContents", static_cast<double>(s.spilledContents));
  o.Set("spilledBytes", static_cast<double>(s.spilledBytes));
  return o;
}

Napi::Object InitAll(Napi::Env env, Napi::Object exports) {
  exports.Set("Shadow", Shadow::Init(env));
  exports.Set("contentHash", Napi::Function::New(env, ContentHashOf, "contentHash"));
  exports.Set("maskHides", Napi::Function::New(env, MaskHides, "maskHides"));
  exports.Set("winfsp", Napi::Function::New(env, WinFspOf, "winfsp"));
  exports.Set("setMemoryBudget", Napi::Function::New(env, SetMemoryBudget, "setMemoryBudget"));
  exports.Set("memoryBudget", Napi::Function::New(env, MemoryBudgetOf, "memoryBudget"));
  Napi::Array names = Napi::Array::New(env);
  uint32_t i = 0;
  for (const char* n : backendNames()) names.Set(i++, n);
  exports.Set("backends", names);
#if defined(__linux__)
  // The audit trail names the processes it records (core/audit.h).
  setAuditCommLookup(processName);
#endif
  return exports;
}

}  // namespace shadowfs

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  return shadowfs::InitAll(env, exports);
}

NODE_API_MODULE(shadowfs, Init)
