// The Shadow binding object itself (shadow_object.h): its method table, construction and
// teardown (the worker, the gone reports, the environment's cleanup hook), the argument checks
// every method shares, and the cache invalidation after a layer changed.
#include "shadow_object.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../core/path.h"

namespace shadowfs {

const char* typeName(FileType t) {
  switch (t) {
    case FileType::Directory: return "directory";
    case FileType::Symlink: return "symlink";
    case FileType::Regular: return "file";
    default: return "special";
  }
}

Napi::Function Shadow::Init(Napi::Env env) {
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
                      InstanceMethod("moveLayer", &Shadow::MoveLayer),
                      InstanceMethod("changes", &Shadow::Changes),
                      InstanceMethod("keepMoved", &Shadow::KeepMoved),
                      InstanceMethod("releaseMoved", &Shadow::ReleaseMoved),
                      InstanceMethod("stats", &Shadow::Stats),
                      InstanceMethod("setMask", &Shadow::SetMask),
                      InstanceMethod("guarded", &Shadow::Guarded),
                      InstanceMethod("auditRead", &Shadow::AuditRead),
                      InstanceMethod("auditLoad", &Shadow::AuditLoad),
                      InstanceMethod("setAuditLimits", &Shadow::SetAuditLimits),
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
// ioUring, spillThreshold, spillDir, volumePrefix, debug, protectGit, protectedPaths,
// protectedGitDirs }):
// only records the options and starts the worker; nothing is opened or mounted until mount()
// (a job, like every I/O). A mount (shared or view) that ends without being asked to calls
// this object's `onGone(reason, viewId | null)` property, if it is a function, on the JS thread.
Shadow::Shadow(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Shadow>(info) {
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
  bool guardGit = true;
  flag("protectGit", &guardGit);
  std::vector<std::string> guardPaths;
  if (o.Get("protectedPaths").IsArray()) {
    Napi::Array a = o.Get("protectedPaths").As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i)
      if (a.Get(i).IsString()) guardPaths.push_back(a.Get(i).As<Napi::String>());
  }
  std::vector<std::string> gitDirs;
  if (o.Get("protectedGitDirs").IsArray()) {
    Napi::Array a = o.Get("protectedGitDirs").As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i)
      if (a.Get(i).IsString()) gitDirs.push_back(a.Get(i).As<Napi::String>());
  }
  if (guardGit || !guardPaths.empty())
    guard_ = std::make_shared<const WriteGuard>(guardGit, guardPaths, opts_.caseInsensitive, gitDirs);
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
Shadow::~Shadow() {
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
void Shadow::onEnvCleanup(void* self) { static_cast<Shadow*>(self)->stopWorker(); }

void Shadow::stopWorker() {
  queue_->stop();
  // No backend may call goner_ once it is released: their callbacks go first (the worker,
  // the only other thread that changes main_ and views_, has ended).
  if (main_) main_->setOnGone(nullptr);
  for (auto& [id, v] : views_) v.backend->setOnGone(nullptr);
  goner_.Release();
  stopped_ = true;
}

// JS thread: a Promise already rejected (bad arguments), so every method reports the same way.
Napi::Value Shadow::rejected(Napi::Env env, int e, const std::string& message) {
  auto d = Napi::Promise::Deferred::New(env);
  d.Reject(errnoError(env, e, message).Value());
  return d.Promise();
}

// JS thread: a path the API cannot take (absolute, "..", NUL, an over-long name). Marked
// `invalidPath` so that TypeScript tells it apart from other EINVALs (INVALID_PATH against
// INVALID_ARGUMENT).
Napi::Value Shadow::rejectedPath(Napi::Env env, const std::string& message) {
  auto d = Napi::Promise::Deferred::New(env);
  Napi::Error e = errnoError(env, EINVAL, message);
  e.Set("invalidPath", Napi::Boolean::New(env, true));
  d.Reject(e.Value());
  return d.Promise();
}

// JS thread.
bool Shadow::stringArg(const Napi::CallbackInfo& info, size_t i, std::string* out) {
  if (info.Length() <= i || !info[i].IsString()) return false;
  *out = info[i].As<Napi::String>();
  return true;
}

// JS thread.
bool Shadow::pathArg(const Napi::CallbackInfo& info, size_t i, std::string* out) {
  return info.Length() > i && info[i].IsString() &&
         normalizeApiPath(info[i].As<Napi::String>(), out);
}

// Worker thread. The layer changed behind the kernel's back: invalidate in every mount that
// shows it (these calls write to /dev/fuse and may wait for the kernel).
void Shadow::layerChanged(const std::string& layer, const std::vector<std::string>& paths, bool all) {
  auto apply = [&](MountBackend* b) {
    b->invalidatePaths(paths);
    if (all) b->invalidateAll();
  };
  if (main_ && activeName() == layer) apply(main_.get());
  for (auto& [id, v] : views_)
    if (v.layer == layer) apply(v.backend.get());
}

// Worker thread. A name the mask hid may be cached as absent (a negative entry), which no path
// list can name: the switch's invalidation bumps the kernel's epoch where it can (Linux 6.16),
// then every name and attribute the kernel holds goes as after an API change. Older kernels
// keep such negative entries for the mount's negativeTimeout.
void Shadow::maskChanged(const std::string& layer) {
  auto apply = [&](MountBackend* b) {
    b->invalidateForSwitch({});
    b->invalidateAll();
  };
  if (main_ && activeName() == layer) apply(main_.get());
  for (auto& [id, v] : views_)
    if (v.layer == layer) apply(v.backend.get());
}

}  // namespace shadowfs
