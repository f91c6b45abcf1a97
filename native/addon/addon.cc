// node-addon-api binding: exposes `Mount` objects to TypeScript (src/native.ts types them).
// Every method here runs on the JS thread. The file-system loop runs on the backend's own
// native threads and never calls back into JS; methods here change the overlay directly and
// then ask the backend to invalidate the kernel's caches.
#include <napi.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "../core/backend.h"
#include "../core/path.h"
#include "backends.h"

namespace shadowfs {
namespace {

const char* errnoName(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ELOOP: return "ELOOP";
    case EBUSY: return "EBUSY";
    case EINVAL: return "EINVAL";
    case EIO: return "EIO";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENODEV: return "ENODEV";
    case ENOTCONN: return "ENOTCONN";
    default: return "EUNKNOWN";
  }
}

Napi::Error errnoError(Napi::Env env, int e, const std::string& what) {
  Napi::Error err = Napi::Error::New(env, what + ": " + std::strerror(e));
  err.Set("code", Napi::String::New(env, errnoName(e)));
  err.Set("errno", Napi::Number::New(env, e));
  return err;
}

const char* typeName(FileType t) {
  switch (t) {
    case FileType::Directory: return "directory";
    case FileType::Symlink: return "symlink";
    case FileType::Regular: return "file";
    default: return "special";
  }
}

const char* kindName(Change::Kind k) {
  switch (k) {
    case Change::Kind::Added: return "added";
    case Change::Kind::Modified: return "modified";
    case Change::Kind::Deleted: return "deleted";
    default: return "metadata";
  }
}

class Mount : public Napi::ObjectWrap<Mount> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "Mount",
                       {InstanceMethod("write", &Mount::Write),
                        InstanceMethod("remove", &Mount::Remove),
                        InstanceMethod("reset", &Mount::Reset),
                        InstanceMethod("changes", &Mount::Changes),
                        InstanceMethod("stats", &Mount::Stats),
                        InstanceMethod("unmount", &Mount::Unmount),
                        InstanceAccessor("mounted", &Mount::Mounted, nullptr)});
  }

  // new Mount(backend, lower, mountPoint, { entryTimeout, attrTimeout, negativeTimeout, debug })
  explicit Mount(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Mount>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString() ||
        !info[3].IsObject()) {
      Napi::TypeError::New(env, "Mount(backend, lower, mountPoint, options)").ThrowAsJavaScriptException();
      return;
    }
    MountOptions opts;
    Napi::Object o = info[3].As<Napi::Object>();
    auto num = [&](const char* k, double* out) {
      Napi::Value v = o.Get(k);
      if (v.IsNumber()) *out = v.As<Napi::Number>().DoubleValue();
    };
    num("entryTimeout", &opts.entryTimeout);
    num("attrTimeout", &opts.attrTimeout);
    num("negativeTimeout", &opts.negativeTimeout);
    Napi::Value dbg = o.Get("debug");
    opts.debug = dbg.IsBoolean() && dbg.As<Napi::Boolean>().Value();
    int err = 0;
    std::string message;
    backend_ = createBackend(info[0].As<Napi::String>(), info[1].As<Napi::String>(),
                             info[2].As<Napi::String>(), opts, &err, &message);
    if (!backend_) {
      Napi::Error e = Napi::Error::New(env, message);
      e.Set("code", Napi::String::New(env, errnoName(err)));
      e.Set("errno", Napi::Number::New(env, err));
      e.ThrowAsJavaScriptException();
    }
  }

  ~Mount() override {
    if (!backend_) return;
    if (backend_->mounted()) backend_->unmount(true);
    backend_.release()->dispose();
  }

 private:
  bool live(Napi::Env env) {
    if (backend_ && backend_->mounted()) return true;
    errnoError(env, ENOTCONN, "the shadow is not mounted").ThrowAsJavaScriptException();
    return false;
  }

  bool pathArg(const Napi::CallbackInfo& info, size_t i, std::string* out) {
    if (info.Length() <= i || !info[i].IsString() ||
        !normalizeApiPath(info[i].As<Napi::String>(), out)) {
      errnoError(info.Env(), EINVAL, "invalid path").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  // write(path, data: Buffer, mode, uid, gid)
  Napi::Value Write(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string path;
    if (!live(env) || !pathArg(info, 0, &path)) return env.Undefined();
    if (info.Length() < 5 || !info[1].IsBuffer()) {
      Napi::TypeError::New(env, "write(path, buffer, mode, uid, gid)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    auto buf = info[1].As<Napi::Buffer<char>>();
    Caller who{info[3].As<Napi::Number>().Uint32Value(), info[4].As<Napi::Number>().Uint32Value()};
    int e = backend_->overlay().putFile(path, std::string(buf.Data(), buf.Length()),
                                        info[2].As<Napi::Number>().Uint32Value(), who);
    if (e) {
      errnoError(env, e, "cannot write " + path).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    backend_->invalidatePaths({path});
    return env.Undefined();
  }

  Napi::Value Remove(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string path;
    if (!live(env) || !pathArg(info, 0, &path)) return env.Undefined();
    int e = backend_->overlay().remove(path);
    if (e) {
      errnoError(env, e, "cannot remove " + path).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    backend_->invalidatePaths({path});
    return env.Undefined();
  }

  Napi::Value Reset(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!live(env)) return env.Undefined();
    auto paths = backend_->overlay().reset();
    // Names first (this also drops negative entries for what the layer had deleted), then
    // the attributes and pages of everything the kernel still holds.
    backend_->invalidatePaths(paths);
    backend_->invalidateAll();
    return Napi::Number::New(env, static_cast<double>(paths.size()));
  }

  Napi::Value Changes(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!live(env)) return env.Undefined();
    auto list = backend_->overlay().changes();
    Napi::Array out = Napi::Array::New(env, list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      Napi::Object c = Napi::Object::New(env);
      c.Set("path", list[i].path);
      c.Set("kind", kindName(list[i].kind));
      c.Set("type", typeName(list[i].type));
      out.Set(static_cast<uint32_t>(i), c);
    }
    return out;
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!live(env)) return env.Undefined();
    Napi::Object o = Napi::Object::New(env);
    o.Set("layerBytes", static_cast<double>(backend_->overlay().layerBytes()));
    return o;
  }

  // unmount(lazy: boolean)
  Napi::Value Unmount(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!backend_) return env.Undefined();
    bool lazy = info.Length() > 0 && info[0].ToBoolean().Value();
    int e = backend_->unmount(lazy);
    if (e) {
      errnoError(env, e, "cannot unmount").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    backend_.release()->dispose();
    return env.Undefined();
  }

  Napi::Value Mounted(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), backend_ && backend_->mounted());
  }

  std::unique_ptr<MountBackend> backend_;
};

}  // namespace

Napi::Object InitAll(Napi::Env env, Napi::Object exports) {
  exports.Set("Mount", Mount::Init(env));
  Napi::Array names = Napi::Array::New(env);
  uint32_t i = 0;
  for (const char* n : backendNames()) names.Set(i++, n);
  exports.Set("backends", names);
  return exports;
}

}  // namespace shadowfs

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  return shadowfs::InitAll(env, exports);
}

NODE_API_MODULE(shadowfs, Init)
