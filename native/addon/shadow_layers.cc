// The Shadow's layers as a whole (shadow_object.h): create, clone, drop, list, activate
// (switch the shared mount) and reset, and what a layer holds: its changes and its stats; and
// a layer's masked paths.
#include "shadow_object.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../core/path.h"

namespace shadowfs {

namespace {

const char* kindName(Change::Kind k) {
  switch (k) {
    case Change::Kind::Added: return "added";
    case Change::Kind::Modified: return "modified";
    case Change::Kind::Deleted: return "deleted";
    default: return "metadata";
  }
}

}  // namespace

// JS thread: createLayer(name) -> Promise<void> (an existing layer is kept as it is).
Napi::Value Shadow::CreateLayer(const Napi::CallbackInfo& info) {
  std::string name;
  if (!stringArg(info, 0, &name)) return rejected(info.Env(), EINVAL, "createLayer(name)");
  return enqueue(info.Env(), [this, name] {  // worker thread
    if (!live()) return notMounted();
    int e = ov_->createLayer(name);
    return e ? fail(e, "cannot create layer " + name) : ok();
  });
}

// JS thread: cloneLayer(from, to) -> Promise<void>; EEXIST when `to` exists.
Napi::Value Shadow::CloneLayer(const Napi::CallbackInfo& info) {
  std::string from, to;
  if (!stringArg(info, 0, &from) || !stringArg(info, 1, &to))
    return rejected(info.Env(), EINVAL, "cloneLayer(from, to)");
  return enqueue(info.Env(), [this, from, to] {  // worker thread
    if (!live()) return notMounted();
    int e = ov_->cloneLayer(from, to);
    return e ? fail(e, "cannot copy layer " + from + " to " + to) : ok();
  });
}

// JS thread: dropLayer(name) -> Promise<void>; EBUSY while active or viewed.
Napi::Value Shadow::DropLayer(const Napi::CallbackInfo& info) {
  std::string name;
  if (!stringArg(info, 0, &name)) return rejected(info.Env(), EINVAL, "dropLayer(name)");
  return enqueue(info.Env(), [this, name] {  // worker thread
    if (!live()) return notMounted();
    int e = ov_->dropLayer(name);
    return e ? fail(e, "cannot drop layer " + name) : ok();
  });
}

// JS thread: layers() -> Promise<string[]>.
Napi::Value Shadow::Layers(const Napi::CallbackInfo& info) {
  return enqueue(info.Env(), [this] {  // worker thread
    if (!live()) return notMounted();
    auto names = std::make_shared<std::vector<std::string>>(ov_->layerNames());
    return okValue([names](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Array out = Napi::Array::New(env, names->size());
      for (size_t i = 0; i < names->size(); ++i) out.Set(static_cast<uint32_t>(i), (*names)[i]);
      return out;
    });
  });
}

// JS thread: activate(name | null) -> Promise<{ paths, epoch, ms }>. The worker swaps the
// layer (waiting for file-system calls in flight) and invalidates the kernel's caches before
// the Promise settles; `ms` is the time that took on the worker (the switch itself, without
// the trip through the queue).
Napi::Value Shadow::Activate(const Napi::CallbackInfo& info) {
  std::string name;
  if (info.Length() > 0 && !info[0].IsNull() && !info[0].IsUndefined() &&
      !stringArg(info, 0, &name))
    return rejected(info.Env(), EINVAL, "activate(name | null)");
  return enqueue(info.Env(), [this, name] {  // worker thread
    if (!live()) return notMounted();
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> changed;
    int e = ov_->activate(name, &changed);
    if (e) return fail(e, "cannot activate layer " + name);
    {
      std::lock_guard<std::mutex> lock(infoMu_);
      active_ = name;
    }
    main_->invalidateForSwitch(changed);
    double paths = static_cast<double>(changed.size());
    bool epoch = main_->usesEpoch();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return okValue([paths, epoch, ms](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Object o = Napi::Object::New(env);
      o.Set("paths", paths);
      o.Set("epoch", epoch);
      o.Set("ms", ms);
      return o;
    });
  });
}

// JS thread: reset(layer) -> Promise<number> (paths the layer held).
Napi::Value Shadow::Reset(const Napi::CallbackInfo& info) {
  std::string layer;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "reset(layer)");
  return enqueue(info.Env(), [this, layer] {  // worker thread
    if (!live()) return notMounted();
    std::vector<std::string> paths;
    int e = ov_->reset(layer, &paths);
    if (e) return fail(e, "cannot reset layer " + layer);
    // Names first (this also drops negative entries for what the layer had deleted), then the
    // attributes and pages of everything the kernel still holds.
    layerChanged(layer, paths, true);
    double n = static_cast<double>(paths.size());
    return okValue([n](Napi::Env env) -> Napi::Value { return Napi::Number::New(env, n); });
  });
}

// JS thread: moveLayer(from, to) -> Promise<number> (paths `to` held before and holds now).
Napi::Value Shadow::MoveLayer(const Napi::CallbackInfo& info) {
  std::string from, to;
  if (!stringArg(info, 0, &from) || !stringArg(info, 1, &to))
    return rejected(info.Env(), EINVAL, "moveLayer(from, to)");
  return enqueue(info.Env(), [this, from, to] {  // worker thread
    if (!live()) return notMounted();
    std::vector<std::string> paths;
    int e = ov_->moveLayer(from, to, &paths);
    if (e) return fail(e, "cannot move the layer of " + from + " to " + to);
    layerChanged(to, paths, true);  // as reset: names first, then what the kernel still holds
    double n = static_cast<double>(paths.size());
    return okValue([n](Napi::Env env) -> Napi::Value { return Napi::Number::New(env, n); });
  });
}

// JS thread: changes(layer) -> Promise<{ path, kind, type, base? }[]>.
Napi::Value Shadow::Changes(const Napi::CallbackInfo& info) {
  std::string layer;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "changes(layer)");
  return enqueue(info.Env(), [this, layer] {  // worker thread
    if (!live()) return notMounted();
    auto list = std::make_shared<std::vector<Change>>();
    int e = ov_->changes(layer, list.get());
    if (e) return fail(e, "cannot list changes of " + layer);
    return okValue([list](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Array out = Napi::Array::New(env, list->size());
      for (size_t i = 0; i < list->size(); ++i) {
        const Change& ch = (*list)[i];
        Napi::Object c = Napi::Object::New(env);
        c.Set("path", ch.path);
        c.Set("kind", kindName(ch.kind));
        c.Set("type", typeName(ch.type));
        if (ch.origin) c.Set("origin", *ch.origin);
        if (ch.base) {
          // What the folder's file was when the layer took it (for conflict detection).
          // Times in nanoseconds as decimal strings: they do not fit a double exactly.
          const Base& b = *ch.base;
          Napi::Object o = Napi::Object::New(env);
          o.Set("ino", static_cast<double>(b.ino));
          o.Set("size", static_cast<double>(b.size));
          o.Set("mtimeNs", std::to_string(static_cast<uint64_t>(b.mtime.sec) * 1000000000ull +
                                          static_cast<uint64_t>(b.mtime.nsec)));
          o.Set("ctimeNs", std::to_string(static_cast<uint64_t>(b.ctime.sec) * 1000000000ull +
                                          static_cast<uint64_t>(b.ctime.nsec)));
          if (b.hashed) {
            char hex[17];
            std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(b.hash));
            o.Set("hash", hex);
          } else {
            o.Set("hash", env.Null());
          }
          c.Set("base", o);
        }
        out.Set(static_cast<uint32_t>(i), c);
      }
      return out;
    });
  });
}

// JS thread: stats(layer) -> Promise<{ memoryBytes, paths, spilledBytes }>.
Napi::Value Shadow::Stats(const Napi::CallbackInfo& info) {
  std::string layer;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "stats(layer)");
  return enqueue(info.Env(), [this, layer] {  // worker thread
    if (!live()) return notMounted();
    LayerStats st;
    int e = ov_->stats(layer, &st);
    if (e) return fail(e, "cannot read stats of " + layer);
    return okValue([st](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Object o = Napi::Object::New(env);
      o.Set("memoryBytes", static_cast<double>(st.memoryBytes));
      o.Set("paths", static_cast<double>(st.paths));
      o.Set("spilledBytes", static_cast<double>(st.spilledBytes));
      return o;
    });
  });
}

// JS thread: setMask(layer, globs: string[]) -> Promise<void> (an empty list: no mask). Every
// mount that shows the layer forgets what its kernel cached, so a name masked now is gone at
// once and one unmasked shows again.
Napi::Value Shadow::SetMask(const Napi::CallbackInfo& info) {
  std::string layer;
  std::vector<std::string> globs;
  if (!stringArg(info, 0, &layer) || info.Length() < 2 || !info[1].IsArray())
    return rejected(info.Env(), EINVAL, "setMask(layer, globs)");
  Napi::Array arr = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < arr.Length(); ++i) {
    Napi::Value v = arr.Get(i);
    if (!v.IsString()) return rejected(info.Env(), EINVAL, "setMask(layer, globs): globs are strings");
    globs.push_back(v.As<Napi::String>());
  }
  return enqueue(info.Env(), [this, layer, globs] {  // worker thread
    if (!live()) return notMounted();
    int e = ov_->setMask(layer, globs);
    if (e) return fail(e, "cannot set the mask of layer " + layer);
    maskChanged(layer);
    return ok();
  });
}

// JS thread: keepMoved(paths: string[]) -> Promise<{ kept: Array<{ layer, path }>, hold }>: the
// folder paths are about to be changed by an apply; every layer's entries that read one of them
// from where an agent moved them take their own copy first, and moves made until
// releaseMoved(hold) do the same at once (Overlay::keepMoved).
Napi::Value Shadow::KeepMoved(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsArray()) return rejected(info.Env(), EINVAL, "keepMoved(paths)");
  std::vector<std::string> paths;
  Napi::Array arr = info[0].As<Napi::Array>();
  for (uint32_t i = 0; i < arr.Length(); ++i) {
    Napi::Value v = arr.Get(i);
    std::string p;
    if (!v.IsString() || !normalizeApiPath(v.As<Napi::String>(), &p) || p.empty())
      return rejectedPath(info.Env(), "keepMoved: invalid path");
    paths.push_back(std::move(p));
  }
  return enqueue(info.Env(), [this, paths] {  // worker thread
    if (!live()) return notMounted();
    auto kept = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
    uint64_t hold = 0;
    int e = ov_->keepMoved(paths, kept.get(), &hold);
    if (e) ov_->releaseMoved(hold);
    // What was kept is the same bytes under the same numbers: caches are dropped all the same.
    std::map<std::string, std::vector<std::string>> byLayer;
    for (const auto& [layer, path] : *kept) byLayer[layer].push_back(path);
    for (const auto& [layer, ps] : byLayer) layerChanged(layer, ps, false);
    if (e) return fail(e, "cannot keep what the layers moved before the folder changes");
    return okValue([kept, hold](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Array list = Napi::Array::New(env, kept->size());
      for (size_t i = 0; i < kept->size(); ++i) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("layer", (*kept)[i].first);
        o.Set("path", (*kept)[i].second);
        list.Set(static_cast<uint32_t>(i), o);
      }
      Napi::Object out = Napi::Object::New(env);
      out.Set("kept", list);
      out.Set("hold", static_cast<double>(hold));
      return out;
    });
  });
}

// JS thread: releaseMoved(hold) -> undefined: the apply that keepMoved held for is done.
Napi::Value Shadow::ReleaseMoved(const Napi::CallbackInfo& info) {
  if (ov_ && info.Length() >= 1 && info[0].IsNumber())
    ov_->releaseMoved(static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()));
  return info.Env().Undefined();
}

// JS thread: guarded(paths: string[], links?: boolean[]) -> boolean[]: which of the normalised
// relative paths no layer may write (the write guard; all false without one); a path whose
// `links` entry is true is a symbolic link to be made there, refused also beneath a `.git`
// (WriteGuard::refusesSpecial). Synchronous: the guard is immutable.
Napi::Value Shadow::Guarded(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray() || (info.Length() > 1 && !info[1].IsUndefined() && !info[1].IsArray())) {
    Napi::TypeError::New(env, "guarded(paths, links?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array in = info[0].As<Napi::Array>();
  Napi::Array links = info.Length() > 1 && info[1].IsArray() ? info[1].As<Napi::Array>() : Napi::Array::New(env, 0);
  Napi::Array out = Napi::Array::New(env, in.Length());
  for (uint32_t i = 0; i < in.Length(); ++i) {
    Napi::Value v = in.Get(i);
    bool refused = false;
    if (guard_ && v.IsString()) {
      const std::string path = v.As<Napi::String>().Utf8Value();
      const bool link = i < links.Length() && links.Get(i).ToBoolean().Value();
      refused = guard_->refuses(path) || (link && guard_->refusesSpecial(path));
    }
    out.Set(i, Napi::Boolean::New(env, refused));
  }
  return out;
}

}  // namespace shadowfs
