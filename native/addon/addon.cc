// node-addon-api binding: exposes `Shadow` objects to TypeScript (src/native.ts types them).
// A Shadow owns one overlay (the folder plus named layers), the shared mount that shows the
// active layer, and any views that pin one layer each.
//
// Every method here runs on the JS thread. The file-system loops run on the backends' own
// native threads and never call back into JS; methods here change the overlay directly and then
// ask the backends that show the changed layer to invalidate the kernel's caches.
#include <napi.h>

#include <cerrno>
#include <cstring>
#include <map>
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
    case ENXIO: return "ENXIO";  // unknown layer
    case EROFS: return "EROFS";
    case ENOSYS: return "ENOSYS";
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

class Shadow : public Napi::ObjectWrap<Shadow> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "Shadow",
                       {InstanceMethod("createLayer", &Shadow::CreateLayer),
                        InstanceMethod("cloneLayer", &Shadow::CloneLayer),
                        InstanceMethod("dropLayer", &Shadow::DropLayer),
                        InstanceMethod("layers", &Shadow::Layers),
                        InstanceMethod("activate", &Shadow::Activate),
                        InstanceMethod("write", &Shadow::Write),
                        InstanceMethod("remove", &Shadow::Remove),
                        InstanceMethod("readFile", &Shadow::ReadFile),
                        InstanceMethod("reset", &Shadow::Reset),
                        InstanceMethod("changes", &Shadow::Changes),
                        InstanceMethod("stats", &Shadow::Stats),
                        InstanceMethod("openView", &Shadow::OpenView),
                        InstanceMethod("closeView", &Shadow::CloseView),
                        InstanceMethod("unmount", &Shadow::Unmount),
                        InstanceMethod("remount", &Shadow::Remount),
                        InstanceMethod("activity", &Shadow::Activity),
                        InstanceAccessor("active", &Shadow::Active, nullptr),
                        InstanceAccessor("mounted", &Shadow::Mounted, nullptr)});
  }

  // new Shadow(backend, lower, mountPoint, { entryTimeout, attrTimeout, negativeTimeout,
  //                                          useEpoch, debug })
  explicit Shadow(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Shadow>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString() ||
        !info[3].IsObject()) {
      Napi::TypeError::New(env, "Shadow(backend, lower, mountPoint, options)")
          .ThrowAsJavaScriptException();
      return;
    }
    Napi::Object o = info[3].As<Napi::Object>();
    auto num = [&](const char* k, double* out) {
      Napi::Value v = o.Get(k);
      if (v.IsNumber()) *out = v.As<Napi::Number>().DoubleValue();
    };
    auto flag = [&](const char* k, bool* out) {
      Napi::Value v = o.Get(k);
      if (v.IsBoolean()) *out = v.As<Napi::Boolean>().Value();
    };
    num("entryTimeout", &opts_.entryTimeout);
    num("attrTimeout", &opts_.attrTimeout);
    num("negativeTimeout", &opts_.negativeTimeout);
    flag("useEpoch", &opts_.useEpoch);
    flag("allowOther", &opts_.allowOther);
    flag("debug", &opts_.debug);
    double threshold = -1;
    num("spillThreshold", &threshold);
    std::string spillDir;
    if (o.Get("spillDir").IsString()) spillDir = o.Get("spillDir").As<Napi::String>();
    backendName_ = info[0].As<Napi::String>();
    lower_ = info[1].As<Napi::String>();
    int err = 0;
    std::string message;
    ov_ = createOverlay(lower_, spillDir,
                        threshold >= 0 ? static_cast<uint64_t>(threshold) : UINT64_MAX, &err,
                        &message);
    if (ov_) main_ = createBackend(backendName_, ov_, nullptr, lower_, info[2].As<Napi::String>(),
                                   opts_, &err, &message);
    if (!main_) {
      Napi::Error e = Napi::Error::New(env, message);
      e.Set("code", Napi::String::New(env, errnoName(err)));
      e.Set("errno", Napi::Number::New(env, err));
      e.ThrowAsJavaScriptException();
    }
  }

  ~Shadow() override {
    for (auto& [id, v] : views_) dispose(std::move(v.backend));
    if (main_) dispose(std::move(main_));
  }

 private:
  struct View {
    std::unique_ptr<MountBackend> backend;
    std::string layer;
  };

  static void dispose(std::unique_ptr<MountBackend> b) {
    if (!b) return;
    if (b->mounted()) b->unmount(true);
    b.release()->dispose();
  }

  bool live(Napi::Env env) {
    if (main_ && main_->mounted()) return true;
    errnoError(env, ENOTCONN, "the shadow is not mounted").ThrowAsJavaScriptException();
    return false;
  }

  bool stringArg(const Napi::CallbackInfo& info, size_t i, std::string* out) {
    if (info.Length() <= i || !info[i].IsString()) {
      errnoError(info.Env(), EINVAL, "expected a string argument").ThrowAsJavaScriptException();
      return false;
    }
    *out = info[i].As<Napi::String>();
    return true;
  }

  bool pathArg(const Napi::CallbackInfo& info, size_t i, std::string* out) {
    if (info.Length() <= i || !info[i].IsString() ||
        !normalizeApiPath(info[i].As<Napi::String>(), out)) {
      errnoError(info.Env(), EINVAL, "invalid path").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  bool check(Napi::Env env, int e, const std::string& what) {
    if (!e) return true;
    errnoError(env, e, what).ThrowAsJavaScriptException();
    return false;
  }

  // The layer changed behind the kernel's back: invalidate in every mount that shows it.
  void layerChanged(const std::string& layer, const std::vector<std::string>& paths, bool all) {
    auto apply = [&](MountBackend* b) {
      b->invalidatePaths(paths);
      if (all) b->invalidateAll();
    };
    if (main_ && ov_->activeLayer() == layer) apply(main_.get());
    for (auto& [id, v] : views_)
      if (v.layer == layer) apply(v.backend.get());
  }

  Napi::Value CreateLayer(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string name;
    if (!live(env) || !stringArg(info, 0, &name)) return env.Undefined();
    check(env, ov_->createLayer(name), "cannot create layer " + name);
    return env.Undefined();
  }

  Napi::Value CloneLayer(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string from, to;
    if (!live(env) || !stringArg(info, 0, &from) || !stringArg(info, 1, &to)) return env.Undefined();
    check(env, ov_->cloneLayer(from, to), "cannot copy layer " + from + " to " + to);
    return env.Undefined();
  }

  Napi::Value DropLayer(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string name;
    if (!live(env) || !stringArg(info, 0, &name)) return env.Undefined();
    check(env, ov_->dropLayer(name), "cannot drop layer " + name);
    return env.Undefined();
  }

  Napi::Value Layers(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!live(env)) return env.Undefined();
    auto names = ov_->layerNames();
    Napi::Array out = Napi::Array::New(env, names.size());
    for (size_t i = 0; i < names.size(); ++i) out.Set(static_cast<uint32_t>(i), names[i]);
    return out;
  }

  // activate(name | null) -> { paths, epoch }
  Napi::Value Activate(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string name;
    if (!live(env)) return env.Undefined();
    if (info.Length() > 0 && !info[0].IsNull() && !stringArg(info, 0, &name)) return env.Undefined();
    std::vector<std::string> changed;
    if (!check(env, ov_->activate(name, &changed), "cannot activate layer " + name))
      return env.Undefined();
    main_->invalidateForSwitch(changed);
    Napi::Object o = Napi::Object::New(env);
    o.Set("paths", static_cast<double>(changed.size()));
    o.Set("epoch", main_->usesEpoch());
    return o;
  }

  // write(layer, path, data: Buffer, mode, uid, gid)
  Napi::Value Write(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, path;
    if (!live(env) || !stringArg(info, 0, &layer) || !pathArg(info, 1, &path))
      return env.Undefined();
    if (info.Length() < 6 || !info[2].IsBuffer() || !info[3].IsNumber() || !info[4].IsNumber() ||
        !info[5].IsNumber()) {
      Napi::TypeError::New(env, "write(layer, path, buffer, mode, uid, gid)")
          .ThrowAsJavaScriptException();
      return env.Undefined();
    }
    auto buf = info[2].As<Napi::Buffer<char>>();
    Caller who{info[4].As<Napi::Number>().Uint32Value(), info[5].As<Napi::Number>().Uint32Value()};
    if (check(env,
              ov_->putFile(layer, path, std::string(buf.Data(), buf.Length()),
                           info[3].As<Napi::Number>().Uint32Value(), who),
              "cannot write " + path))
      layerChanged(layer, {path}, false);
    return env.Undefined();
  }

  Napi::Value Remove(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, path;
    if (!live(env) || !stringArg(info, 0, &layer) || !pathArg(info, 1, &path))
      return env.Undefined();
    if (check(env, ov_->remove(layer, path), "cannot remove " + path))
      layerChanged(layer, {path}, false);
    return env.Undefined();
  }

  Napi::Value ReadFile(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, path, data;
    if (!live(env) || !stringArg(info, 0, &layer) || !pathArg(info, 1, &path))
      return env.Undefined();
    if (!check(env, ov_->readFile(layer, path, &data), "cannot read " + path))
      return env.Undefined();
    return Napi::Buffer<char>::Copy(env, data.data(), data.size());
  }

  Napi::Value Reset(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer;
    if (!live(env) || !stringArg(info, 0, &layer)) return env.Undefined();
    std::vector<std::string> paths;
    if (!check(env, ov_->reset(layer, &paths), "cannot reset layer " + layer))
      return env.Undefined();
    // Names first (this also drops negative entries for what the layer had deleted), then the
    // attributes and pages of everything the kernel still holds.
    layerChanged(layer, paths, true);
    return Napi::Number::New(env, static_cast<double>(paths.size()));
  }

  Napi::Value Changes(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer;
    if (!live(env) || !stringArg(info, 0, &layer)) return env.Undefined();
    std::vector<Change> list;
    if (!check(env, ov_->changes(layer, &list), "cannot list changes of " + layer))
      return env.Undefined();
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
    std::string layer;
    if (!live(env) || !stringArg(info, 0, &layer)) return env.Undefined();
    LayerStats st;
    if (!check(env, ov_->stats(layer, &st), "cannot read stats of " + layer))
      return env.Undefined();
    Napi::Object o = Napi::Object::New(env);
    o.Set("memoryBytes", static_cast<double>(st.memoryBytes));
    o.Set("paths", static_cast<double>(st.paths));
    o.Set("spilledBytes", static_cast<double>(st.spilledBytes));
    return o;
  }

  // openView(layer, mountPoint) -> id
  Napi::Value OpenView(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, mp;
    if (!live(env) || !stringArg(info, 0, &layer) || !stringArg(info, 1, &mp))
      return env.Undefined();
    Layer* pinned = ov_->pin(layer);
    if (!pinned) {
      errnoError(env, ENXIO, "no layer " + layer).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    int err = 0;
    std::string message;
    auto b = createBackend(backendName_, ov_, pinned, lower_, mp, opts_, &err, &message);
    if (!b) {
      ov_->unpin(pinned);
      Napi::Error e = Napi::Error::New(env, message);
      e.Set("code", Napi::String::New(env, errnoName(err)));
      e.Set("errno", Napi::Number::New(env, err));
      e.ThrowAsJavaScriptException();
      return env.Undefined();
    }
    uint32_t id = nextView_++;
    views_[id] = View{std::move(b), layer};
    return Napi::Number::New(env, id);
  }

  // closeView(id, lazy)
  Napi::Value CloseView(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsNumber()) return env.Undefined();
    auto it = views_.find(info[0].As<Napi::Number>().Uint32Value());
    if (it == views_.end()) return env.Undefined();
    bool lazy = info.Length() > 1 && info[1].ToBoolean().Value();
    if (!check(env, it->second.backend->unmount(lazy), "cannot unmount the view"))
      return env.Undefined();
    dispose(std::move(it->second.backend));
    views_.erase(it);
    return env.Undefined();
  }

  // unmount(lazy): the views first, then the shared mount.
  Napi::Value Unmount(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!main_) return env.Undefined();
    bool lazy = info.Length() > 0 && info[0].ToBoolean().Value();
    for (auto it = views_.begin(); it != views_.end();) {
      if (!check(env, it->second.backend->unmount(lazy), "cannot unmount a view"))
        return env.Undefined();
      dispose(std::move(it->second.backend));
      it = views_.erase(it);
    }
    if (!check(env, main_->unmount(lazy), "cannot unmount")) return env.Undefined();
    retiredRequests_ += main_->requests();
    dispose(std::move(main_));
    return env.Undefined();
  }

  // remount(mountPoint): mounts the same overlay (layers intact) again after unmount().
  Napi::Value Remount(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string mp;
    if (!stringArg(info, 0, &mp)) return env.Undefined();
    if (main_ && main_->mounted()) return env.Undefined();
    int err = 0;
    std::string message;
    main_ = createBackend(backendName_, ov_, nullptr, lower_, mp, opts_, &err, &message);
    if (!main_) {
      Napi::Error e = Napi::Error::New(env, message);
      e.Set("code", Napi::String::New(env, errnoName(err)));
      e.Set("errno", Napi::Number::New(env, err));
      e.ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  // activity(): file-system requests served by the shared mount and the views, ever.
  Napi::Value Activity(const Napi::CallbackInfo& info) {
    uint64_t n = main_ ? main_->requests() : 0;
    for (auto& [id, v] : views_) n += v.backend->requests();
    return Napi::Number::New(info.Env(), static_cast<double>(n + retiredRequests_));
  }

  Napi::Value Active(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!ov_) return env.Null();
    std::string a = ov_->activeLayer();
    return a.empty() ? env.Null() : Napi::String::New(env, a);
  }

  Napi::Value Mounted(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), main_ && main_->mounted());
  }

  std::shared_ptr<Overlay> ov_;
  std::unique_ptr<MountBackend> main_;
  std::map<uint32_t, View> views_;
  uint32_t nextView_ = 1;
  uint64_t retiredRequests_ = 0;  // served by mounts since unmounted
  std::string backendName_;
  std::string lower_;
  MountOptions opts_;
};

}  // namespace

Napi::Object InitAll(Napi::Env env, Napi::Object exports) {
  exports.Set("Shadow", Shadow::Init(env));
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
