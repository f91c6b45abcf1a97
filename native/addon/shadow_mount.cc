// The Shadow's mounts (shadow_object.h): mount, remount and unmount of the shared mount, the
// views that pin one layer each, reports of mounts that ended unasked, and the synchronous
// getters the JS thread reads (mounted, active, activity, request counts, open handles ...).
#include "shadow_object.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../winfsp/winfsp_native.h"  // OS-free: OpenHandleCount (only the winfsp backend has it)
#include "backends.h"

namespace shadowfs {

// JS thread, called by goner_: hands the report to this object's onGone property.
void Shadow::gone(Napi::Env env, GoneEvent* e) {
  Napi::HandleScope scope(env);
  Napi::Object self = Value();
  if (self.IsEmpty()) return;  // collected meanwhile: nobody listens
  Napi::Value f = self.Get("onGone");
  if (!f.IsFunction()) return;
  f.As<Napi::Function>().Call(
      self, {Napi::String::New(env, e->reason), e->view ? Napi::Number::New(env, e->view).As<Napi::Value>() : env.Null()});
}

// Worker thread (or the destructor, after the worker stopped). Nothing is reported of a
// backend once it is being disposed: its callback goes first.
void Shadow::dispose(std::unique_ptr<MountBackend> b) {
  if (!b) return;
  b->setOnGone(nullptr);
  if (b->mounted()) b->unmount(true);
  b.release()->dispose();
}

// Worker thread: the backend's unasked end reaches the JS thread (see gone()). The callback
// runs on the backend's thread; goner_ is valid until stopWorker clears every callback.
void Shadow::watchGone(MountBackend* b, uint32_t view) {
  b->setOnGone([this, view](const std::string& reason) {
    auto* e = new GoneEvent{view, reason};
    if (goner_.NonBlockingCall(e) != napi_ok) delete e;  // the environment is closing
  });
}

// JS thread: mount() -> Promise<void>. Opens the folder and mounts at the mount point given
// to the constructor; remount(mountPoint) mounts the same overlay (layers intact) again after
// unmount(). Both: worker thread.
Napi::Value Shadow::Mount(const Napi::CallbackInfo& info) {
  return enqueue(info.Env(), [this] { return mountAt(mountPoint_); });
}

Napi::Value Shadow::Remount(const Napi::CallbackInfo& info) {
  std::string mp;
  if (!stringArg(info, 0, &mp)) return rejected(info.Env(), EINVAL, "remount(mountPoint)");
  return enqueue(info.Env(), [this, mp] { return mountAt(mp); });
}

// Worker thread.
Outcome Shadow::mountAt(const std::string& mp) {
  if (live()) return ok();
  int err = 0;
  std::string message;
  if (!ov_) {
    ov_ = createOverlay(lower_, spillDir_, spillThreshold_, opts_.caseInsensitive, &err,
                        &message);
    if (!ov_) return Outcome{err ? err : EIO, message, {}};
    if (guard_) ov_->setWriteGuard(guard_);
  }
  // An unmounted leftover (the mount vanished under us) goes first: a WinFsp volume keeps its
  // mount directory (or drive letter) until it is deleted, and WinFsp refuses to mount where
  // one exists.
  std::unique_ptr<MountBackend> old;
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    old = std::move(main_);
    if (old) retiredRequests_ += old->requests();
  }
  dispose(std::move(old));
  auto b = createBackend(backendName_, ov_, nullptr, lower_, mp, opts_, &err, &message);
  if (!b) return Outcome{err ? err : EIO, message, {}};
  ov_->noteMountPoint(mp);
  watchGone(b.get(), 0);
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    main_ = std::move(b);
    ++mounts_;
    active_ = ov_->activeLayer();
  }
  return ok();
}

// JS thread: openView(layer, mountPoint) -> Promise<id>. Worker thread: pins the layer and
// mounts a backend that always shows it.
Napi::Value Shadow::OpenView(const Napi::CallbackInfo& info) {
  std::string layer, mp, prefix;
  if (!stringArg(info, 0, &layer) || !stringArg(info, 1, &mp))
    return rejected(info.Env(), EINVAL, "openView(layer, mountPoint, volumePrefix?)");
  // A view is a volume of its own: on Windows its own network prefix (or none: a disk volume).
  const bool ownPrefix = stringArg(info, 2, &prefix);
  return enqueue(info.Env(), [this, layer, mp, prefix, ownPrefix] {  // worker thread
    if (!live()) return notMounted();
    Layer* pinned = ov_->pin(layer);
    if (!pinned) return Outcome{ENXIO, "no layer " + layer, {}};
    int err = 0;
    std::string message;
    MountOptions opts = opts_;
    opts.volumePrefix = ownPrefix ? prefix : std::string();
    auto b = createBackend(backendName_, ov_, pinned, lower_, mp, opts, &err, &message);
    if (!b) {
      ov_->unpin(pinned);
      return Outcome{err ? err : EIO, message, {}};
    }
    ov_->noteMountPoint(mp);
    uint32_t id = nextView_++;
    watchGone(b.get(), id);
    {
      std::lock_guard<std::mutex> lock(infoMu_);
      views_[id] = View{std::move(b), layer};
    }
    return okValue([id](Napi::Env env) -> Napi::Value { return Napi::Number::New(env, id); });
  });
}

// JS thread: closeView(id, lazy) -> Promise<void>. Worker thread: unmounts it (EBUSY while in
// use unless lazy).
Napi::Value Shadow::CloseView(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber())
    return rejected(info.Env(), EINVAL, "closeView(id, lazy)");
  uint32_t id = info[0].As<Napi::Number>().Uint32Value();
  bool lazy = info.Length() > 1 && info[1].ToBoolean().Value();
  return enqueue(info.Env(), [this, id, lazy] {  // worker thread
    auto it = views_.find(id);
    if (it == views_.end()) return ok();
    int e = it->second.backend->unmount(lazy);
    if (e) return fail(e, "cannot unmount the view");
    std::unique_ptr<MountBackend> b;
    {
      std::lock_guard<std::mutex> lock(infoMu_);
      b = std::move(it->second.backend);
      retiredRequests_ += b->requests();
      views_.erase(it);
    }
    dispose(std::move(b));
    return ok();
  });
}

// JS thread: unmount(lazy, forGood) -> Promise<void>. Worker thread: the views first, then the
// shared mount (a non-lazy unmount joins the backends' loop threads). For good, the overlay goes
// too, and with it the layers and the folder's open descriptor: an unmounted shadow leaves the
// folder free (a bind mount of it, or the disk it is on, can be unmounted at once, not only
// once the GC has collected this object). A mount still serving after a lazy unmount holds the
// overlay until it ends. Without forGood (suspend) the overlay stays for remount().
Napi::Value Shadow::Unmount(const Napi::CallbackInfo& info) {
  bool lazy = info.Length() > 0 && info[0].ToBoolean().Value();
  bool forGood = info.Length() > 1 && info[1].ToBoolean().Value();
  return enqueue(info.Env(), [this, lazy, forGood] {  // worker thread
    if (!main_) {
      if (forGood && views_.empty()) dropOverlay();
      return ok();
    }
    for (auto it = views_.begin(); it != views_.end();) {
      int e = it->second.backend->unmount(lazy);
      if (e) return fail(e, "cannot unmount a view");
      std::unique_ptr<MountBackend> b;
      {
        std::lock_guard<std::mutex> lock(infoMu_);
        b = std::move(it->second.backend);
        retiredRequests_ += b->requests();
        it = views_.erase(it);
      }
      dispose(std::move(b));
    }
    int e = main_->unmount(lazy);
    if (e) return fail(e, "cannot unmount");
    std::unique_ptr<MountBackend> b;
    {
      std::lock_guard<std::mutex> lock(infoMu_);
      b = std::move(main_);
      retiredRequests_ += b->requests();
    }
    dispose(std::move(b));
    if (forGood) dropOverlay();
    return ok();
  });
}

// Worker thread, nothing mounted: lets go of the overlay (every job but mounting needs live()).
void Shadow::dropOverlay() {
  std::shared_ptr<Overlay> gone;
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    gone = std::move(ov_);
  }
}

// JS thread, synchronous: the shared mount's requests by kind since it was mounted (an
// object of counts; empty for a backend that counts none).
Napi::Value Shadow::RequestCounts(const Napi::CallbackInfo& info) {
  std::lock_guard<std::mutex> lock(infoMu_);
  Napi::Object out = Napi::Object::New(info.Env());
  if (main_)
    for (auto& [name, n] : main_->requestCounts()) out.Set(name, Napi::Number::New(info.Env(), static_cast<double>(n)));
  return out;
}

// JS thread, synchronous: handles programs have open in the shared mount and the views (opens
// minus closes), for idle unmount and suspend to treat a shadow in use as busy; null when a
// mounted backend does not count them (only winfsp does: OpenHandleCount), 0 when nothing is
// mounted. Read under infoMu_ so no backend is disposed meanwhile.
Napi::Value Shadow::OpenHandles(const Napi::CallbackInfo& info) {
  std::lock_guard<std::mutex> lock(infoMu_);
  uint64_t n = 0;
  bool known = true;
  auto add = [&](const MountBackend* b) {
    if (!b || !b->mounted()) return;
    if (auto* c = dynamic_cast<const OpenHandleCount*>(b)) n += c->openHandles();
    else known = false;
  };
  add(main_.get());
  for (auto& [id, v] : views_) add(v.backend.get());
  if (!known) return info.Env().Null();
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

// JS thread, synchronous: what the shared mount's kernel connection agreed to (an object of
// booleans; empty for a backend that reports none).
Napi::Value Shadow::Transport(const Napi::CallbackInfo& info) {
  std::lock_guard<std::mutex> lock(infoMu_);
  Napi::Object out = Napi::Object::New(info.Env());
  if (main_)
    for (auto& [name, on] : main_->transport()) out.Set(name, Napi::Boolean::New(info.Env(), on));
  return out;
}

// JS thread, synchronous: file-system requests served by the shared mount and the views,
// ever (atomic counters of the backends, read under infoMu_ so none is disposed meanwhile).
Napi::Value Shadow::Activity(const Napi::CallbackInfo& info) {
  std::lock_guard<std::mutex> lock(infoMu_);
  uint64_t n = retiredRequests_ + (main_ ? main_->requests() : 0);
  for (auto& [id, v] : views_) n += v.backend->requests();
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

// JS thread, synchronous: folderChanges(since) -> { mount, seq, paths, overflow } (the folder
// changes the shared mount's watcher reported after sequence number `since`; `mount` counts
// mounts, and sequence numbers start again at each), or null when the backend has no watcher
// or nothing is mounted. Reads a locked in-memory journal, no I/O.
Napi::Value Shadow::FolderChanges(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "folderChanges(since)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  double since = info[0].As<Napi::Number>().DoubleValue();
  uint64_t seq = 0, mount = 0;
  bool overflow = false;
  std::vector<std::string> paths;
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    mount = mounts_;
    const ChangeJournal* j = main_ ? main_->folderChanges() : nullptr;
    if (!j) return env.Null();
    paths = j->since(since > 0 ? static_cast<uint64_t>(since) : 0, &seq, &overflow);
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("mount", static_cast<double>(mount));
  o.Set("seq", static_cast<double>(seq));
  o.Set("overflow", overflow);
  Napi::Array a = Napi::Array::New(env, paths.size());
  for (size_t i = 0; i < paths.size(); ++i) a.Set(static_cast<uint32_t>(i), paths[i]);
  o.Set("paths", a);
  return o;
}

// JS thread, synchronous: the layer the last activate() made active (the addon is the only
// one that switches it), or null.
Napi::Value Shadow::Active(const Napi::CallbackInfo& info) {
  std::string a = activeName();
  return a.empty() ? info.Env().Null() : Napi::String::New(info.Env(), a);
}

// JS thread, synchronous: whether the shared mount is mounted (an atomic of the backend).
Napi::Value Shadow::Mounted(const Napi::CallbackInfo& info) {
  std::lock_guard<std::mutex> lock(infoMu_);
  return Napi::Boolean::New(info.Env(), main_ && main_->mounted());
}

// JS thread (env is null when the environment is going away: then only free the event).
void goneOnJs(Napi::Env env, Napi::Function, Shadow* shadow, GoneEvent* e) {
  if (env != nullptr && shadow != nullptr) shadow->gone(env, e);
  delete e;
}

}  // namespace shadowfs
