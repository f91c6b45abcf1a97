// node-addon-api binding: exposes `Shadow` objects to TypeScript (src/native.ts types them).
// A Shadow owns one overlay (the folder plus named layers), the shared mount that shows the
// active layer, and any views that pin one layer each.
//
// Threads. The JS thread never waits here: every operation that can wait on the overlay's
// locks, on the user's folder or on the kernel (mounting, unmounting, cache invalidation) is a
// job that runs on the Shadow's own worker thread (not libuv's pool, which Node's fs shares)
// and settles a Promise back on the JS thread through a thread-safe function. The JS thread
// only checks arguments, queues jobs, builds results and reads the cheap getters (mounted,
// active, activity), which take `infoMu_` for a few instructions and nothing else.
//
// Why one serial worker per Shadow: jobs run in exactly the order JS issued them (a write
// queued before an activate lands before it, as when these calls were synchronous), and the
// addon's own state (ov_, main_, views_, nextView_) is only ever changed by that one thread, so
// it needs no lock of its own beyond `infoMu_` for the getters. A long job (a big API write, an
// activate that waits for a copy-up) delays the next jobs of the same shadow, never the JS
// thread, other shadows, or programs using the mounts: their requests are served by the
// backends' own loop threads and never enter this queue.
// The queue itself (a worker thread, Promises settled through a thread-safe function) is in
// job_queue.{h,cc}.
#include <napi.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "../core/backend.h"
#include "../core/hash.h"
#if defined(_WIN32)
#include "../platform/win32_winfsp.h"
#endif
#include "../core/path.h"
#include "../winfsp/winfsp_native.h"  // OS-free: OpenHandleCount (only the winfsp backend has it)
#include "backends.h"
#include "file_tools.h"
#include "job_queue.h"

namespace shadowfs {
namespace {

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

class Shadow;

// The largest file readFile returns: 4 GiB, what Node 20 can hold in one Buffer (later Node
// versions hold more). Larger files are refused with EFBIG.
constexpr uint64_t kMaxReadBytes = uint64_t(1) << 32;
// The most one readRange returns (callers read larger files in pieces).
constexpr uint64_t kMaxRangeBytes = uint64_t(64) << 20;

// A mount that ended without being asked to (MountBackend::reportGone): made on a backend
// thread, handed to the JS thread by the Shadow's `goner_`.
struct GoneEvent {
  uint32_t view = 0;  // 0: the shared mount; else the view's id
  std::string reason;
};
void goneOnJs(Napi::Env env, Napi::Function, Shadow* shadow, GoneEvent* e);
using Goner = Napi::TypedThreadSafeFunction<Shadow, GoneEvent, goneOnJs>;

class Shadow : public Napi::ObjectWrap<Shadow> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "Shadow",
                       {InstanceMethod("mount", &Shadow::Mount),
                        InstanceMethod("createLayer", &Shadow::CreateLayer),
                        InstanceMethod("cloneLayer", &Shadow::CloneLayer),
                        InstanceMethod("dropLayer", &Shadow::DropLayer),
                        InstanceMethod("layers", &Shadow::Layers),
                        InstanceMethod("activate", &Shadow::Activate),
                        InstanceMethod("write", &Shadow::Write),
                        InstanceMethod("remove", &Shadow::Remove),
                        InstanceMethod("readFile", &Shadow::ReadFile),
                        InstanceMethod("readRange", &Shadow::ReadRange),
                        InstanceMethod("dataExtents", &Shadow::DataExtents),
                        InstanceMethod("writeAt", &Shadow::WriteAt),
                        InstanceMethod("truncate", &Shadow::Truncate),
                        InstanceMethod("reset", &Shadow::Reset),
                        InstanceMethod("changes", &Shadow::Changes),
                        InstanceMethod("stats", &Shadow::Stats),
                        InstanceMethod("openView", &Shadow::OpenView),
                        InstanceMethod("closeView", &Shadow::CloseView),
                        InstanceMethod("unmount", &Shadow::Unmount),
                        InstanceMethod("remount", &Shadow::Remount),
                        InstanceMethod("activity", &Shadow::Activity),
                        InstanceMethod("requestCounts", &Shadow::RequestCounts),
                        InstanceMethod("openHandles", &Shadow::OpenHandles),
                        InstanceMethod("transport", &Shadow::Transport),
                        InstanceMethod("folderChanges", &Shadow::FolderChanges),
                        InstanceMethod("stat", &Shadow::Stat),
                        InstanceMethod("readdir", &Shadow::Readdir),
                        InstanceMethod("readlink", &Shadow::Readlink),
                        InstanceMethod("symlink", &Shadow::Symlink),
                        InstanceMethod("mkdir", &Shadow::Mkdir),
                        InstanceMethod("chmod", &Shadow::Chmod),
                        InstanceMethod("revert", &Shadow::Revert),
                        InstanceMethod("writeFile", &Shadow::WriteFile),
                        InstanceMethod("editFile", &Shadow::EditFile),
                        InstanceAccessor("active", &Shadow::Active, nullptr),
                        InstanceAccessor("mounted", &Shadow::Mounted, nullptr)});
  }

  // JS thread. new Shadow(backend, lower, mountPoint, { entryTimeout, attrTimeout,
  // negativeTimeout, useEpoch, allowOther, caseInsensitive, openRoundTrips, passthrough,
  // ioUring, spillThreshold, spillDir, volumePrefix, debug }):
  // only records the options and starts the worker; nothing is opened or mounted until mount()
  // (a job, like every I/O). A mount (shared or view) that ends without being asked to calls
  // this object's `onGone(reason, viewId | null)` property, if it is a function, on the JS thread.
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
    flag("caseInsensitive", &opts_.caseInsensitive);
    flag("openRoundTrips", &opts_.openRoundTrips);
    flag("passthrough", &opts_.passthrough);
    flag("ioUring", &opts_.ioUring);
    double threshold = -1;
    num("spillThreshold", &threshold);
    spillThreshold_ = threshold >= 0 ? static_cast<uint64_t>(threshold) : UINT64_MAX;
    if (o.Get("spillDir").IsString()) spillDir_ = o.Get("spillDir").As<Napi::String>();
    if (o.Get("volumePrefix").IsString()) opts_.volumePrefix = o.Get("volumePrefix").As<Napi::String>();
    backendName_ = info[0].As<Napi::String>();
    lower_ = info[1].As<Napi::String>();
    mountPoint_ = info[2].As<Napi::String>();
    // The Shadow stays alive (and the event loop with it) while any job is pending.
    queue_ = std::make_unique<JobQueue>(env, "shadowfs.Shadow", [this] { Ref(); }, [this] { Unref(); });
    // Never keeps the process alive: a gone report matters only while someone listens.
    goner_ = Goner::New(env, "shadowfs.Shadow.gone", 0, 1, this);
    goner_.Unref(env);
    // Registered after the job queue's settler hook, so it runs before it (hooks run in reverse).
    env_ = env;
    napi_add_env_cleanup_hook(env_, onEnvCleanup, this);
  }

  // JS thread (the GC, or the environment's teardown). Jobs hold a strong reference to this
  // object, so normally nothing is queued now. A shadow nobody unmounted is unmounted lazily
  // here, after the worker has stopped.
  ~Shadow() override {
    if (!stopped_) {
      napi_remove_env_cleanup_hook(env_, onEnvCleanup, this);
      stopWorker();
    }
    for (auto& [id, v] : views_) dispose(std::move(v.backend));
    if (main_) dispose(std::move(main_));
  }

  // JS thread, when the environment (the process, or a worker_threads Worker) ends: stops the
  // worker and releases the settler before Node closes it. Queued jobs are dropped unrun (their
  // Promises can never be observed now); a job already running finishes first.
  static void onEnvCleanup(void* self) { static_cast<Shadow*>(self)->stopWorker(); }

  void stopWorker() {
    queue_->stop();
    // No backend may call goner_ once it is released: their callbacks go first (the worker,
    // the only other thread that changes main_ and views_, has ended).
    if (main_) main_->setOnGone(nullptr);
    for (auto& [id, v] : views_) v.backend->setOnGone(nullptr);
    goner_.Release();
    stopped_ = true;
  }

  // JS thread, called by goner_: hands the report to this object's onGone property.
  void gone(Napi::Env env, GoneEvent* e) {
    Napi::HandleScope scope(env);
    Napi::Object self = Value();
    if (self.IsEmpty()) return;  // collected meanwhile: nobody listens
    Napi::Value f = self.Get("onGone");
    if (!f.IsFunction()) return;
    f.As<Napi::Function>().Call(
        self, {Napi::String::New(env, e->reason), e->view ? Napi::Number::New(env, e->view).As<Napi::Value>() : env.Null()});
  }

 private:
  struct View {
    std::unique_ptr<MountBackend> backend;
    std::string layer;
  };

  // JS thread: queues `work` on this shadow's worker (see JobQueue) and returns its Promise.
  Napi::Value enqueue(Napi::Env env, std::function<Outcome()> work,
                      std::vector<Napi::Reference<Napi::Value>> keep = {}) {
    return queue_->enqueue(env, std::move(work), std::move(keep));
  }

  // JS thread: a Promise already rejected (bad arguments), so every method reports the same way.
  static Napi::Value rejected(Napi::Env env, int e, const std::string& message) {
    auto d = Napi::Promise::Deferred::New(env);
    d.Reject(errnoError(env, e, message).Value());
    return d.Promise();
  }

  // JS thread: a path the API cannot take (absolute, "..", NUL, an over-long name). Marked
  // `invalidPath` so that TypeScript tells it apart from other EINVALs (INVALID_PATH against
  // INVALID_ARGUMENT).
  static Napi::Value rejectedPath(Napi::Env env, const std::string& message) {
    auto d = Napi::Promise::Deferred::New(env);
    Napi::Error e = errnoError(env, EINVAL, message);
    e.Set("invalidPath", Napi::Boolean::New(env, true));
    d.Reject(e.Value());
    return d.Promise();
  }

  // JS thread.
  static bool stringArg(const Napi::CallbackInfo& info, size_t i, std::string* out) {
    if (info.Length() <= i || !info[i].IsString()) return false;
    *out = info[i].As<Napi::String>();
    return true;
  }

  // JS thread.
  static bool pathArg(const Napi::CallbackInfo& info, size_t i, std::string* out) {
    return info.Length() > i && info[i].IsString() &&
           normalizeApiPath(info[i].As<Napi::String>(), out);
  }

  // Worker thread.
  bool live() const { return main_ && main_->mounted(); }
  static Outcome notMounted() { return Outcome{ENOTCONN, "the shadow is not mounted", {}}; }

  // Worker thread (or the destructor, after the worker stopped). Nothing is reported of a
  // backend once it is being disposed: its callback goes first.
  static void dispose(std::unique_ptr<MountBackend> b) {
    if (!b) return;
    b->setOnGone(nullptr);
    if (b->mounted()) b->unmount(true);
    b.release()->dispose();
  }

  // Worker thread: the backend's unasked end reaches the JS thread (see gone()). The callback
  // runs on the backend's thread; goner_ is valid until stopWorker clears every callback.
  void watchGone(MountBackend* b, uint32_t view) {
    b->setOnGone([this, view](const std::string& reason) {
      auto* e = new GoneEvent{view, reason};
      if (goner_.NonBlockingCall(e) != napi_ok) delete e;  // the environment is closing
    });
  }

  // Worker thread. The layer changed behind the kernel's back: invalidate in every mount that
  // shows it (these calls write to /dev/fuse and may wait for the kernel).
  void layerChanged(const std::string& layer, const std::vector<std::string>& paths, bool all) {
    auto apply = [&](MountBackend* b) {
      b->invalidatePaths(paths);
      if (all) b->invalidateAll();
    };
    if (main_ && activeName() == layer) apply(main_.get());
    for (auto& [id, v] : views_)
      if (v.layer == layer) apply(v.backend.get());
  }

  // Any thread.
  std::string activeName() {
    std::lock_guard<std::mutex> lock(infoMu_);
    return active_;
  }

  // JS thread: mount() -> Promise<void>. Opens the folder and mounts at the mount point given
  // to the constructor; remount(mountPoint) mounts the same overlay (layers intact) again after
  // unmount(). Both: worker thread.
  Napi::Value Mount(const Napi::CallbackInfo& info) {
    return enqueue(info.Env(), [this] { return mountAt(mountPoint_); });
  }

  Napi::Value Remount(const Napi::CallbackInfo& info) {
    std::string mp;
    if (!stringArg(info, 0, &mp)) return rejected(info.Env(), EINVAL, "remount(mountPoint)");
    return enqueue(info.Env(), [this, mp] { return mountAt(mp); });
  }

  // Worker thread.
  Outcome mountAt(const std::string& mp) {
    if (live()) return ok();
    int err = 0;
    std::string message;
    if (!ov_) {
      ov_ = createOverlay(lower_, spillDir_, spillThreshold_, opts_.caseInsensitive, &err,
                          &message);
      if (!ov_) return Outcome{err ? err : EIO, message, {}};
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
    watchGone(b.get(), 0);
    {
      std::lock_guard<std::mutex> lock(infoMu_);
      main_ = std::move(b);
      ++mounts_;
      active_ = ov_->activeLayer();
    }
    return ok();
  }

  // JS thread: createLayer(name) -> Promise<void> (an existing layer is kept as it is).
  Napi::Value CreateLayer(const Napi::CallbackInfo& info) {
    std::string name;
    if (!stringArg(info, 0, &name)) return rejected(info.Env(), EINVAL, "createLayer(name)");
    return enqueue(info.Env(), [this, name] {  // worker thread
      if (!live()) return notMounted();
      int e = ov_->createLayer(name);
      return e ? fail(e, "cannot create layer " + name) : ok();
    });
  }

  // JS thread: cloneLayer(from, to) -> Promise<void>; EEXIST when `to` exists.
  Napi::Value CloneLayer(const Napi::CallbackInfo& info) {
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
  Napi::Value DropLayer(const Napi::CallbackInfo& info) {
    std::string name;
    if (!stringArg(info, 0, &name)) return rejected(info.Env(), EINVAL, "dropLayer(name)");
    return enqueue(info.Env(), [this, name] {  // worker thread
      if (!live()) return notMounted();
      int e = ov_->dropLayer(name);
      return e ? fail(e, "cannot drop layer " + name) : ok();
    });
  }

  // JS thread: layers() -> Promise<string[]>.
  Napi::Value Layers(const Napi::CallbackInfo& info) {
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
  Napi::Value Activate(const Napi::CallbackInfo& info) {
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

  // JS thread: write(layer, path, data: Buffer, mode, uid, gid) -> Promise<void>. The Buffer is
  // kept alive and read by the worker (no copy on the JS thread).
  Napi::Value Write(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "write: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(env, "write: invalid path");
    if (info.Length() < 6 || !info[2].IsBuffer() || !info[3].IsNumber() || !info[4].IsNumber() ||
        !info[5].IsNumber())
      return rejected(env, EINVAL, "write(layer, path, buffer, mode, uid, gid)");
    auto buf = info[2].As<Napi::Buffer<char>>();
    const char* data = buf.Data();
    size_t size = buf.Length();
    uint32_t mode = info[3].As<Napi::Number>().Uint32Value();
    Caller who{info[4].As<Napi::Number>().Uint32Value(), info[5].As<Napi::Number>().Uint32Value()};
    std::vector<Napi::Reference<Napi::Value>> keep;
    keep.push_back(Napi::Persistent(info[2]));
    return enqueue(
        env,
        [this, layer, path, data, size, mode, who] {  // worker thread
          if (!live()) return notMounted();
          int e = ov_->putFile(layer, path, std::string(data, size), mode, who);
          if (e) return fail(e, "cannot write " + path);
          layerChanged(layer, {path}, false);
          return ok();
        },
        std::move(keep));
  }

  // JS thread: remove(layer, path) -> Promise<void>.
  Napi::Value Remove(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "remove: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "remove: invalid path");
    return enqueue(info.Env(), [this, layer, path] {  // worker thread
      if (!live()) return notMounted();
      int e = ov_->remove(layer, path);
      if (e) return fail(e, "cannot remove " + path);
      layerChanged(layer, {path}, false);
      return ok();
    });
  }

  // JS thread: readFile(layer, path) -> Promise<Buffer>. The worker reads; the Buffer wraps the
  // bytes it read (no copy). A file larger than kMaxReadBytes is refused with EFBIG before any of
  // it is read (and again after, should it have grown meanwhile), so no read can need a Buffer
  // the runtime cannot make.
  Napi::Value ReadFile(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readFile: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readFile: invalid path");
    return enqueue(info.Env(), [this, layer, path] {  // worker thread
      if (!live()) return notMounted();
      auto tooLarge = [&path](uint64_t size) {
        return Outcome{EFBIG,
                       "cannot read " + path + ": it holds " + std::to_string(size) + " bytes, more than the " +
                           std::to_string(kMaxReadBytes) + " one read can return",
                       {}};
      };
      Attr a;
      Outcome st = onLayer(layer, [&](Layer* L) -> Outcome {
        int e = ov_->getattr(L, path, &a);
        return e ? fail(e, "cannot read " + path) : ok();
      });
      if (st.err) return st;
      if (a.type == FileType::Regular && a.size > kMaxReadBytes) return tooLarge(a.size);
      auto data = std::make_shared<std::string>();
      int e = ov_->readFile(layer, path, data.get());
      if (e) return fail(e, "cannot read " + path);
      if (data->size() > kMaxReadBytes) return tooLarge(data->size());
      return okValue([data, path](Napi::Env env) -> Napi::Value {  // JS thread
        return bufferOf(env, data.get(), path);
      });
    });
  }

  // JS thread: a Buffer that takes over `data`'s bytes (no copy), or an exception pending and an
  // empty value. Not Napi::Buffer::NewOrCopy: when the runtime refuses an external buffer, Node
  // has already run the finalizer (freeing the bytes and the finalizer's data) and
  // node-addon-api frees that data again, a double free. Callers keep sizes within what every
  // supported Node accepts; should the call fail anyway, the bytes are left to whoever may
  // still hold them (a leak, never a double free) and the read is rejected.
  static Napi::Value bufferOf(Napi::Env env, std::string* data, const std::string& path) {
    if (data->empty()) return Napi::Buffer<char>::New(env, 0);
    auto* owned = new std::string(std::move(*data));
    napi_value buf;
    napi_status s = napi_create_external_buffer(
        env, owned->size(), owned->data(),
        [](napi_env, void*, void* hint) { delete static_cast<std::string*>(hint); }, owned, &buf);
    if (s != napi_ok) {
      if (env.IsExceptionPending()) env.GetAndClearPendingException();
      errnoError(env, ENOMEM, "cannot read " + path + ": the runtime could not make a buffer of " +
                                  std::to_string(owned->size()) + " bytes")
          .ThrowAsJavaScriptException();
      return Napi::Value();
    }
    return Napi::Value(env, buf);
  }

  // JS thread: a whole number argument of at most 2^53 (a byte offset or count), or false.
  static bool offsetArg(const Napi::CallbackInfo& info, size_t i, uint64_t* out) {
    if (info.Length() <= i || !info[i].IsNumber()) return false;
    double d = info[i].As<Napi::Number>().DoubleValue();
    if (!(d >= 0) || d > 9007199254740992.0 || d != static_cast<double>(static_cast<uint64_t>(d))) return false;
    *out = static_cast<uint64_t>(d);
    return true;
  }

  // JS thread: readRange(layer, path, offset, length) -> Promise<{ data: Buffer, size }>: at most
  // `length` (<= kMaxRangeBytes) bytes at `offset` of a regular file as the layer shows it, and
  // the file's size. Files of any size can be read this way, a piece at a time.
  Napi::Value ReadRange(const Napi::CallbackInfo& info) {
    std::string layer, path;
    uint64_t offset = 0, length = 0;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readRange: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readRange: invalid path");
    if (!offsetArg(info, 2, &offset) || !offsetArg(info, 3, &length) || length > kMaxRangeBytes)
      return rejected(info.Env(), EINVAL,
                      "readRange(layer, path, offset, length): offset and length are whole numbers, length at most " +
                          std::to_string(kMaxRangeBytes));
    return enqueue(info.Env(), [this, layer, path, offset, length] {  // worker thread
      if (!live()) return notMounted();
      auto data = std::make_shared<std::string>();
      uint64_t total = 0;
      int e = ov_->readRange(layer, path, offset, static_cast<size_t>(length), data.get(), &total);
      if (e) return fail(e, "cannot read " + path);
      return okValue([data, path, total](Napi::Env env) -> Napi::Value {  // JS thread
        Napi::Value buf = bufferOf(env, data.get(), path);
        if (buf.IsEmpty()) return buf;
        Napi::Object o = Napi::Object::New(env);
        o.Set("data", buf);
        o.Set("size", static_cast<double>(total));
        return o;
      });
    });
  }

  // JS thread: dataExtents(layer, path) -> Promise<{ size, extents: [offset, length][] }>: where a
  // regular file as the layer shows it holds data (the rest reads as zeros: holes).
  Napi::Value DataExtents(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "dataExtents: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "dataExtents: invalid path");
    return enqueue(info.Env(), [this, layer, path] {  // worker thread
      if (!live()) return notMounted();
      auto list = std::make_shared<std::vector<Extent>>();
      uint64_t total = 0;
      int e = ov_->dataExtents(layer, path, list.get(), &total);
      if (e) return fail(e, "cannot read " + path);
      return okValue([list, total](Napi::Env env) -> Napi::Value {  // JS thread
        Napi::Array a = Napi::Array::New(env, list->size());
        for (uint32_t i = 0; i < list->size(); ++i) {
          Napi::Array pair = Napi::Array::New(env, 2);
          pair.Set(0u, static_cast<double>((*list)[i].off));
          pair.Set(1u, static_cast<double>((*list)[i].len));
          a.Set(i, pair);
        }
        Napi::Object o = Napi::Object::New(env);
        o.Set("size", static_cast<double>(total));
        o.Set("extents", a);
        return o;
      });
    });
  }

  // JS thread: writeAt(layer, path, data: Buffer, offset) -> Promise<void>: writes `data` at
  // `offset` into an existing regular file of the layer (copied up first if it is the folder's),
  // growing it as needed; what lies between its old end and `offset` reads as zeros (a hole in
  // a spilled file). The Buffer is kept alive and read in place by the worker.
  Napi::Value WriteAt(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, path;
    uint64_t offset = 0;
    if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "writeAt: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(env, "writeAt: invalid path");
    if (info.Length() < 4 || !info[2].IsBuffer() || !offsetArg(info, 3, &offset))
      return rejected(env, EINVAL, "writeAt(layer, path, buffer, offset)");
    auto buf = info[2].As<Napi::Buffer<char>>();
    const char* data = buf.Data();
    size_t size = buf.Length();
    std::vector<Napi::Reference<Napi::Value>> keep;
    keep.push_back(Napi::Persistent(info[2]));
    return enqueue(
        env,
        [this, layer, path, data, size, offset] {  // worker thread
          Outcome o = onLayer(layer, [&](Layer* L) {
            Handle* h = nullptr;
            Attr a;
            OpenIntent intent;
            intent.write = true;
            int e = ov_->open(L, path, intent, &h, &a);
            if (e) return fail(e, "cannot write " + path);
            e = ov_->write(h, data, size, offset);
            ov_->release(h);
            return e ? fail(e, "cannot write " + path) : ok();
          });
          if (!o.err) layerChanged(layer, {path}, false);
          return o;
        },
        std::move(keep));
  }

  // JS thread: truncate(layer, path, size) -> Promise<void>: sets the size of a regular file of
  // the layer (growing it leaves a hole where the content is spilled).
  Napi::Value Truncate(const Napi::CallbackInfo& info) {
    std::string layer, path;
    uint64_t size = 0;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "truncate: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "truncate: invalid path");
    if (!offsetArg(info, 2, &size)) return rejected(info.Env(), EINVAL, "truncate(layer, path, size)");
    return enqueue(info.Env(), [this, layer, path, size] {  // worker thread
      Outcome o = onLayer(layer, [&](Layer* L) {
        Attr v, out;
        v.size = size;
        int e = ov_->setattr(L, path, nullptr, kSetSize, v, &out);
        return e ? fail(e, "cannot truncate " + path) : ok();
      });
      if (!o.err) layerChanged(layer, {path}, false);
      return o;
    });
  }

  // --- One layer's tree as that layer shows it, without switching the shared mount: the same
  // file-system operations the backends serve, on the layer pinned for the call. ---

  // Worker thread: runs `fn` on layer `layer` pinned (ENXIO when there is no such layer).
  template <typename F>
  Outcome onLayer(const std::string& layer, F fn) {
    if (!live()) return notMounted();
    Layer* L = ov_->pin(layer);
    if (!L) return Outcome{ENXIO, "no layer " + layer, {}};
    Outcome out;
    try {
      out = fn(L);
    } catch (...) {
      ov_->unpin(L);
      throw;
    }
    ov_->unpin(L);
    return out;
  }

  static Napi::Object attrObject(Napi::Env env, const Attr& a) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("type", typeName(a.type));
    o.Set("mode", static_cast<double>(a.perm & 07777));
    o.Set("size", static_cast<double>(a.size));
    o.Set("mtimeMs", static_cast<double>(a.mtime.sec) * 1e3 + static_cast<double>(a.mtime.nsec) / 1e6);
    o.Set("ino", static_cast<double>(a.ino));
    return o;
  }

  // JS thread: stat(layer, path) -> Promise<{ type, mode, size, mtimeMs, ino }> (symlinks not
  // followed).
  Napi::Value Stat(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "stat: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "stat: invalid path");
    return enqueue(info.Env(), [this, layer, path] {  // worker thread
      return onLayer(layer, [&](Layer* L) {
        Attr a;
        int e = ov_->getattr(L, path, &a);
        if (e) return fail(e, "cannot stat " + (path.empty() ? std::string(".") : path));
        return okValue([a](Napi::Env env) -> Napi::Value { return attrObject(env, a); });
      });
    });
  }

  // JS thread: readdir(layer, path) -> Promise<{ name, type }[]> (no "." or "..").
  Napi::Value Readdir(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readdir: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readdir: invalid path");
    return enqueue(info.Env(), [this, layer, path] {  // worker thread
      return onLayer(layer, [&](Layer* L) {
        auto list = std::make_shared<std::vector<DirEntry>>();
        int e = ov_->readdir(L, path, list.get());
        if (e) return fail(e, "cannot list " + (path.empty() ? std::string(".") : path));
        return okValue([list](Napi::Env env) -> Napi::Value {  // JS thread
          Napi::Array a = Napi::Array::New(env);
          uint32_t i = 0;
          for (const DirEntry& d : *list) {
            if (d.name == "." || d.name == "..") continue;
            Napi::Object o = Napi::Object::New(env);
            o.Set("name", d.name);
            o.Set("type", typeName(d.type));
            a.Set(i++, o);
          }
          return a;
        });
      });
    });
  }

  // JS thread: readlink(layer, path) -> Promise<string>.
  Napi::Value Readlink(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readlink: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readlink: invalid path");
    return enqueue(info.Env(), [this, layer, path] {  // worker thread
      return onLayer(layer, [&](Layer* L) {
        auto target = std::make_shared<std::string>();
        int e = ov_->readlink(L, path, target.get());
        if (e) return fail(e, "cannot read the link " + path);
        return okValue([target](Napi::Env env) -> Napi::Value { return Napi::String::New(env, *target); });
      });
    });
  }

  // JS thread: symlink(layer, target, path, uid, gid) -> Promise<void>.
  Napi::Value Symlink(const Napi::CallbackInfo& info) {
    std::string layer, target, path;
    if (!stringArg(info, 0, &layer) || !stringArg(info, 1, &target) || info.Length() < 5 ||
        !info[3].IsNumber() || !info[4].IsNumber())
      return rejected(info.Env(), EINVAL, "symlink(layer, target, path, uid, gid)");
    if (!pathArg(info, 2, &path)) return rejectedPath(info.Env(), "symlink: invalid path");
    Caller who{info[3].As<Napi::Number>().Uint32Value(), info[4].As<Napi::Number>().Uint32Value()};
    return enqueue(info.Env(), [this, layer, target, path, who] {  // worker thread
      Outcome o = onLayer(layer, [&](Layer* L) {
        Attr a;
        int e = ov_->symlink(L, target, path, who, &a);
        return e ? fail(e, "cannot make the link " + path) : ok();
      });
      if (!o.err) layerChanged(layer, {path}, false);
      return o;
    });
  }

  // JS thread: mkdir(layer, path, mode, uid, gid) -> Promise<void>.
  Napi::Value Mkdir(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer) || info.Length() < 5 || !info[2].IsNumber() ||
        !info[3].IsNumber() || !info[4].IsNumber())
      return rejected(info.Env(), EINVAL, "mkdir(layer, path, mode, uid, gid)");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "mkdir: invalid path");
    uint32_t mode = info[2].As<Napi::Number>().Uint32Value() & 07777;
    Caller who{info[3].As<Napi::Number>().Uint32Value(), info[4].As<Napi::Number>().Uint32Value()};
    return enqueue(info.Env(), [this, layer, path, mode, who] {  // worker thread
      Outcome o = onLayer(layer, [&](Layer* L) {
        Attr a;
        int e = ov_->mkdir(L, path, mode, who, &a);
        return e ? fail(e, "cannot make the directory " + path) : ok();
      });
      if (!o.err) layerChanged(layer, {path}, false);
      return o;
    });
  }

  // JS thread: chmod(layer, path, mode) -> Promise<void>.
  Napi::Value Chmod(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer) || info.Length() < 3 || !info[2].IsNumber())
      return rejected(info.Env(), EINVAL, "chmod(layer, path, mode)");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "chmod: invalid path");
    uint32_t mode = info[2].As<Napi::Number>().Uint32Value() & 07777;
    return enqueue(info.Env(), [this, layer, path, mode] {  // worker thread
      Outcome o = onLayer(layer, [&](Layer* L) {
        Attr values, out;
        values.perm = mode;
        int e = ov_->setattr(L, path, nullptr, kSetMode, values, &out);
        return e ? fail(e, "cannot change the mode of " + path) : ok();
      });
      if (!o.err) layerChanged(layer, {path}, false);
      return o;
    });
  }

  // --- The agent file tools, each one job and one Overlay::updateFile: atomic with respect
  // to every other change of that file (API jobs, and programs writing through the mounts). ---

  // JS thread: an `expect` argument ({ exists?, size?, mtimeMs?, hash? } or null/undefined).
  static bool expectArg(const Napi::CallbackInfo& info, size_t i, Expect* out) {
    if (info.Length() <= i || info[i].IsNull() || info[i].IsUndefined()) return true;
    if (!info[i].IsObject()) return false;
    Napi::Object o = info[i].As<Napi::Object>();
    Napi::Value v = o.Get("exists");
    if (v.IsBoolean()) out->exists = v.As<Napi::Boolean>().Value();
    else if (!v.IsUndefined()) return false;
    for (auto [key, field] : {std::pair<const char*, std::optional<double>*>{"size", &out->size},
                              {"mtimeMs", &out->mtimeMs}}) {
      v = o.Get(key);
      if (v.IsNumber()) *field = v.As<Napi::Number>().DoubleValue();
      else if (!v.IsUndefined()) return false;
    }
    v = o.Get("hash");
    if (v.IsString()) out->hash = v.As<Napi::String>().Utf8Value();
    else if (!v.IsUndefined()) return false;
    return true;
  }

  // JS thread: what an update left, for the caller's next precondition.
  struct FileAfter {
    double size = 0, mtimeMs = 0, mode = 0;
    std::string hash;
  };
  static FileAfter afterOf(const Attr& a, const std::string* content) {
    return FileAfter{static_cast<double>(a.size), mtimeMsOf(a), static_cast<double>(a.perm & 07777),
                     content ? hashHex(*content) : std::string()};
  }
  static void setAfter(Napi::Object o, const FileAfter& f) {
    o.Set("size", f.size);
    o.Set("mtimeMs", f.mtimeMs);
    o.Set("mode", f.mode);
    if (!f.hash.empty()) o.Set("hash", f.hash);
  }

  // JS thread: writeFile(layer, path, data: Buffer, mode: number | null, uid, gid, expect?) ->
  // Promise<{ status: 'written', created, size, mtimeMs, mode, hash } |
  //         { status: 'conflict', reason, exists, size?, mtimeMs?, mode?, hash? }>.
  // A whole regular file, written with its mode in the same step: a new file gets `mode` (or
  // 0644), an existing one keeps its own unless `mode` is given. With `expect`, only when the
  // file is still what the caller saw (else 'conflict', nothing written). Parents are made.
  Napi::Value WriteFile(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, path;
    Expect expect;
    if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "writeFile: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(env, "writeFile: invalid path");
    if (info.Length() < 6 || !info[2].IsBuffer() || !(info[3].IsNumber() || info[3].IsNull()) ||
        !info[4].IsNumber() || !info[5].IsNumber() || !expectArg(info, 6, &expect))
      return rejected(env, EINVAL, "writeFile(layer, path, buffer, mode | null, uid, gid, expect?)");
    auto buf = info[2].As<Napi::Buffer<char>>();
    const char* data = buf.Data();
    size_t size = buf.Length();
    std::optional<uint32_t> mode;
    if (info[3].IsNumber()) mode = info[3].As<Napi::Number>().Uint32Value() & 07777;
    Caller who{info[4].As<Napi::Number>().Uint32Value(), info[5].As<Napi::Number>().Uint32Value()};
    std::vector<Napi::Reference<Napi::Value>> keep;
    keep.push_back(Napi::Persistent(info[2]));
    return enqueue(
        env,
        [this, layer, path, data, size, mode, who, expect] {  // worker thread
          if (!live()) return notMounted();
          std::string conflict;
          bool existed = false;
          FileAfter seen;
          FileUpdate u;
          u.mayCreate = true;
          u.readContent = expect.needsContent();
          u.change = [&](const FileNow& now, FileChange* ch) {  // the file's content lock held
            existed = now.exists;
            conflict.clear();
            if (!meets(expect, now, &conflict)) {
              if (now.exists) seen = afterOf(now.attr, now.content);
              return;
            }
            ch->write = true;
            ch->content.assign(data, size);
            ch->perm = mode;
          };
          FileUpdateResult r;
          int e = ov_->updateFile(layer, path, u, who, &r);
          if (e) return fail(e, "cannot write " + path);
          if (!r.written)
            return okValue([conflict, existed, seen](Napi::Env env) -> Napi::Value {  // JS thread
              Napi::Object o = Napi::Object::New(env);
              o.Set("status", "conflict");
              o.Set("reason", conflict);
              o.Set("exists", existed);
              if (existed) setAfter(o, seen);
              return o;
            });
          layerChanged(layer, {path}, false);
          FileAfter after = afterOf(r.attr, nullptr);
          after.hash = hashHex(std::string(data, size));
          bool created = r.created;
          return okValue([after, created](Napi::Env env) -> Napi::Value {  // JS thread
            Napi::Object o = Napi::Object::New(env);
            o.Set("status", "written");
            o.Set("created", created);
            setAfter(o, after);
            return o;
          });
        },
        std::move(keep));
  }

  // JS thread: editFile(layer, path, edits: { oldText, newText, replaceAll? }[], maxBytes,
  // expect?) -> Promise<{ status, ... }>: the edits applied one after the other to the file's
  // text in one step, or nothing written and a status that says why: 'written' (replacements:
  // number[] per edit, size, mtimeMs, mode, hash), 'no-match' (edit), 'ambiguous' (edit, count,
  // lines), 'binary', 'not-utf8', 'too-large' (size), 'conflict' (reason, as writeFile).
  Napi::Value EditFile(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string layer, path;
    uint64_t maxBytes = 0;
    Expect expect;
    const char* usage = "editFile(layer, path, [{ oldText, newText, replaceAll? }], maxBytes, expect?)";
    if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "editFile: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(env, "editFile: invalid path");
    if (info.Length() < 4 || !info[2].IsArray() || !offsetArg(info, 3, &maxBytes) || !expectArg(info, 4, &expect))
      return rejected(env, EINVAL, usage);
    std::vector<TextEdit> edits;
    Napi::Array a = info[2].As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value v = a.Get(i);
      if (!v.IsObject()) return rejected(env, EINVAL, usage);
      Napi::Object o = v.As<Napi::Object>();
      Napi::Value ot = o.Get("oldText"), nt = o.Get("newText"), all = o.Get("replaceAll");
      if (!ot.IsString() || !nt.IsString() || !(all.IsBoolean() || all.IsUndefined()))
        return rejected(env, EINVAL, usage);
      TextEdit e{ot.As<Napi::String>().Utf8Value(), nt.As<Napi::String>().Utf8Value(),
                 all.IsBoolean() && all.As<Napi::Boolean>().Value()};
      if (e.oldText.empty()) return rejected(env, EINVAL, "editFile: an edit's oldText must not be empty");
      edits.push_back(std::move(e));
    }
    if (edits.empty()) return rejected(env, EINVAL, "editFile: no edits");
    Caller who{0, 0};  // never creates
    return enqueue(env, [this, layer, path, edits = std::move(edits), maxBytes, expect, who] {  // worker thread
      if (!live()) return notMounted();
      EditResult er;
      std::string conflict, newHash;
      FileAfter seen;
      FileUpdate u;
      u.readContent = true;
      u.maxRead = maxBytes;
      u.change = [&](const FileNow& now, FileChange* ch) {  // the file's content lock held
        conflict.clear();
        seen = afterOf(now.attr, nullptr);
        if (!meets(expect, now, &conflict)) {
          seen.hash = hashHex(*now.content);
          return;
        }
        er = applyEdits(*now.content, edits, &ch->content);
        ch->write = er.status == EditResult::Ok;
        if (ch->write) newHash = hashHex(ch->content);
      };
      FileUpdateResult r;
      int e = ov_->updateFile(layer, path, u, who, &r);
      if (e == EFBIG) {
        double size = static_cast<double>(r.attr.size);
        return okValue([size](Napi::Env env) -> Napi::Value {  // JS thread
          Napi::Object o = Napi::Object::New(env);
          o.Set("status", "too-large");
          o.Set("size", size);
          return o;
        });
      }
      if (e) return fail(e, "cannot edit " + path);
      if (r.written) {
        layerChanged(layer, {path}, false);
        FileAfter after = afterOf(r.attr, nullptr);
        after.hash = newHash;
        return okValue([after, er](Napi::Env env) -> Napi::Value {  // JS thread
          Napi::Object o = Napi::Object::New(env);
          o.Set("status", "written");
          Napi::Array reps = Napi::Array::New(env, er.replacements.size());
          for (uint32_t i = 0; i < er.replacements.size(); ++i) reps.Set(i, er.replacements[i]);
          o.Set("replacements", reps);
          setAfter(o, after);
          return o;
        });
      }
      return okValue([er, conflict, seen](Napi::Env env) -> Napi::Value {  // JS thread
        Napi::Object o = Napi::Object::New(env);
        if (!conflict.empty()) {
          o.Set("status", "conflict");
          o.Set("reason", conflict);
          o.Set("exists", true);
          setAfter(o, seen);
          return o;
        }
        switch (er.status) {
          case EditResult::NoMatch: o.Set("status", "no-match"); break;
          case EditResult::Ambiguous: o.Set("status", "ambiguous"); break;
          case EditResult::Binary: o.Set("status", "binary"); break;
          case EditResult::NotUtf8: o.Set("status", "not-utf8"); break;
          default: o.Set("status", "unchanged"); break;
        }
        o.Set("edit", static_cast<double>(er.edit));
        o.Set("count", static_cast<double>(er.count));
        Napi::Array lines = Napi::Array::New(env, er.lines.size());
        for (uint32_t i = 0; i < er.lines.size(); ++i) lines.Set(i, er.lines[i]);
        o.Set("lines", lines);
        return o;
      });
    });
  }

  // JS thread: revert(layer, path) -> Promise<void>: the folder shows through at `path` again
  // (EXDEV under a deleted, opaque or moved directory of the layer).
  Napi::Value Revert(const Napi::CallbackInfo& info) {
    std::string layer, path;
    if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "revert: expected a layer name");
    if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "revert: invalid path");
    return enqueue(info.Env(), [this, layer, path] {  // worker thread
      if (!live()) return notMounted();
      bool wasDir = false;
      int e = ov_->revert(layer, path, &wasDir);
      if (e) return fail(e, "cannot give " + path + " back to the folder");
      layerChanged(layer, {path}, wasDir);
      return ok();
    });
  }

  // JS thread: reset(layer) -> Promise<number> (paths the layer held).
  Napi::Value Reset(const Napi::CallbackInfo& info) {
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

  // JS thread: changes(layer) -> Promise<{ path, kind, type, base? }[]>.
  Napi::Value Changes(const Napi::CallbackInfo& info) {
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
  Napi::Value Stats(const Napi::CallbackInfo& info) {
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

  // JS thread: openView(layer, mountPoint) -> Promise<id>. Worker thread: pins the layer and
  // mounts a backend that always shows it.
  Napi::Value OpenView(const Napi::CallbackInfo& info) {
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
  Napi::Value CloseView(const Napi::CallbackInfo& info) {
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

  // JS thread: unmount(lazy) -> Promise<void>. Worker thread: the views first, then the shared
  // mount (a non-lazy unmount joins the backends' loop threads).
  Napi::Value Unmount(const Napi::CallbackInfo& info) {
    bool lazy = info.Length() > 0 && info[0].ToBoolean().Value();
    return enqueue(info.Env(), [this, lazy] {  // worker thread
      if (!main_) return ok();
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
      return ok();
    });
  }

  // JS thread, synchronous: the shared mount's requests by kind since it was mounted (an
  // object of counts; empty for a backend that counts none).
  Napi::Value RequestCounts(const Napi::CallbackInfo& info) {
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
  Napi::Value OpenHandles(const Napi::CallbackInfo& info) {
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
  Napi::Value Transport(const Napi::CallbackInfo& info) {
    std::lock_guard<std::mutex> lock(infoMu_);
    Napi::Object out = Napi::Object::New(info.Env());
    if (main_)
      for (auto& [name, on] : main_->transport()) out.Set(name, Napi::Boolean::New(info.Env(), on));
    return out;
  }

  // JS thread, synchronous: file-system requests served by the shared mount and the views,
  // ever (atomic counters of the backends, read under infoMu_ so none is disposed meanwhile).
  Napi::Value Activity(const Napi::CallbackInfo& info) {
    std::lock_guard<std::mutex> lock(infoMu_);
    uint64_t n = retiredRequests_ + (main_ ? main_->requests() : 0);
    for (auto& [id, v] : views_) n += v.backend->requests();
    return Napi::Number::New(info.Env(), static_cast<double>(n));
  }

  // JS thread, synchronous: folderChanges(since) -> { mount, seq, paths, overflow } (the folder
  // changes the shared mount's watcher reported after sequence number `since`; `mount` counts
  // mounts, and sequence numbers start again at each), or null when the backend has no watcher
  // or nothing is mounted. Reads a locked in-memory journal, no I/O.
  Napi::Value FolderChanges(const Napi::CallbackInfo& info) {
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
  Napi::Value Active(const Napi::CallbackInfo& info) {
    std::string a = activeName();
    return a.empty() ? info.Env().Null() : Napi::String::New(info.Env(), a);
  }

  // JS thread, synchronous: whether the shared mount is mounted (an atomic of the backend).
  Napi::Value Mounted(const Napi::CallbackInfo& info) {
    std::lock_guard<std::mutex> lock(infoMu_);
    return Napi::Boolean::New(info.Env(), main_ && main_->mounted());
  }

  // Set by the constructor, then read-only.
  std::string backendName_;
  std::string lower_;
  std::string mountPoint_;
  std::string spillDir_;
  uint64_t spillThreshold_ = UINT64_MAX;
  MountOptions opts_;

  // Changed by the worker thread only; the JS thread's getters read main_, views_,
  // retiredRequests_ and active_ under infoMu_, which the worker holds only to change them.
  std::shared_ptr<Overlay> ov_;
  std::unique_ptr<MountBackend> main_;
  std::map<uint32_t, View> views_;
  uint32_t nextView_ = 1;
  uint64_t retiredRequests_ = 0;  // served by mounts since unmounted
  std::string active_;
  std::mutex infoMu_;
  uint64_t mounts_ = 0;  // times the shared mount was mounted: tells one folder journal from the next

  // The job queue: filled on the JS thread, drained by its worker (the only thread that runs
  // this Shadow's jobs, see the top of this file).
  std::unique_ptr<JobQueue> queue_;
  Goner goner_;  // gone reports; released by stopWorker after every backend's callback is cleared
  napi_env env_ = nullptr;
  bool stopped_ = false;  // JS thread only: stopWorker() ran
};

// JS thread (env is null when the environment is going away: then only free the event).
void goneOnJs(Napi::Env env, Napi::Function, Shadow* shadow, GoneEvent* e) {
  if (env != nullptr && shadow != nullptr) shadow->gone(env, e);
  delete e;
}

}  // namespace

// JS thread, synchronous: contentHash(buffer) -> 16 hex digits, the hash a layer records as a
// file's base (so apply can tell whether the folder's file still has the bytes the agent
// started from).
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

Napi::Object InitAll(Napi::Env env, Napi::Object exports) {
  exports.Set("Shadow", Shadow::Init(env));
  exports.Set("contentHash", Napi::Function::New(env, ContentHashOf, "contentHash"));
  exports.Set("winfsp", Napi::Function::New(env, WinFspOf, "winfsp"));
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
