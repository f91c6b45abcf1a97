// The `Shadow` class of the node-addon-api binding (src/shadow/native.ts types it). A Shadow owns one
// overlay (the folder plus named layers), the shared mount that shows the active layer, and any
// views that pin one layer each. Its methods live in files by area:
//   shadow_object.cc      the method table, construction and teardown, shared argument checks
//   shadow_mount.cc       mount, remount, unmount, views, gone events, the synchronous getters
//   shadow_layers.cc      layer create/clone/drop/list/activate/reset, changes, stats
//   shadow_files.cc       one file or directory of a layer: read, write, stat, list, links ...
//   shadow_file_tools.cc  the agent file tools (writeFile, editFile): one atomic update each
// addon.cc registers the class and the module's free functions.
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
#pragma once

#include <napi.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../core/backend.h"
#include "file_tools.h"
#include "job_queue.h"

namespace shadowfs {

// "directory", "symlink", "file" or "special", as stat() and readdir() report a type.
const char* typeName(FileType t);

class Shadow;

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
  // shadow_object.cc
  static Napi::Function Init(Napi::Env env);
  explicit Shadow(const Napi::CallbackInfo& info);
  ~Shadow() override;
  static void onEnvCleanup(void* self);
  void stopWorker();

  // shadow_mount.cc
  void gone(Napi::Env env, GoneEvent* e);

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

  // shadow_object.cc: argument checks and rejections every method shares; JS thread.
  static Napi::Value rejected(Napi::Env env, int e, const std::string& message);
  static Napi::Value rejectedPath(Napi::Env env, const std::string& message);
  static bool stringArg(const Napi::CallbackInfo& info, size_t i, std::string* out);
  static bool pathArg(const Napi::CallbackInfo& info, size_t i, std::string* out);

  // Worker thread.
  bool live() const { return main_ && main_->mounted(); }
  static Outcome notMounted() { return Outcome{ENOTCONN, "the shadow is not mounted", {}}; }

  // shadow_object.cc, worker thread: invalidates a changed layer in every mount that shows it.
  void layerChanged(const std::string& layer, const std::vector<std::string>& paths, bool all);

  // Any thread.
  std::string activeName() {
    std::lock_guard<std::mutex> lock(infoMu_);
    return active_;
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

  // shadow_mount.cc
  static void dispose(std::unique_ptr<MountBackend> b);
  void dropOverlay();
  void watchGone(MountBackend* b, uint32_t view);
  Napi::Value Mount(const Napi::CallbackInfo& info);
  Napi::Value Remount(const Napi::CallbackInfo& info);
  Outcome mountAt(const std::string& mp);
  Napi::Value OpenView(const Napi::CallbackInfo& info);
  Napi::Value CloseView(const Napi::CallbackInfo& info);
  Napi::Value Unmount(const Napi::CallbackInfo& info);
  Napi::Value RequestCounts(const Napi::CallbackInfo& info);
  Napi::Value OpenHandles(const Napi::CallbackInfo& info);
  Napi::Value Transport(const Napi::CallbackInfo& info);
  Napi::Value Activity(const Napi::CallbackInfo& info);
  Napi::Value FolderChanges(const Napi::CallbackInfo& info);
  Napi::Value Active(const Napi::CallbackInfo& info);
  Napi::Value Mounted(const Napi::CallbackInfo& info);

  // shadow_layers.cc
  Napi::Value CreateLayer(const Napi::CallbackInfo& info);
  Napi::Value CloneLayer(const Napi::CallbackInfo& info);
  Napi::Value DropLayer(const Napi::CallbackInfo& info);
  Napi::Value Layers(const Napi::CallbackInfo& info);
  Napi::Value Activate(const Napi::CallbackInfo& info);
  Napi::Value Reset(const Napi::CallbackInfo& info);
  Napi::Value MoveLayer(const Napi::CallbackInfo& info);
  Napi::Value Changes(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value SetMask(const Napi::CallbackInfo& info);
  Napi::Value Guarded(const Napi::CallbackInfo& info);
  Napi::Value KeepMoved(const Napi::CallbackInfo& info);
  Napi::Value ReleaseMoved(const Napi::CallbackInfo& info);
  // shadow_audit.cc
  Napi::Value AuditRead(const Napi::CallbackInfo& info);
  Napi::Value AuditLoad(const Napi::CallbackInfo& info);
  Napi::Value SetAuditLimits(const Napi::CallbackInfo& info);
  // shadow_object.cc, worker thread: a layer's mask changed; every mount that shows it forgets
  // every name it cached, negative ones included (the epoch, where the kernel has it).
  void maskChanged(const std::string& layer);

  // shadow_files.cc
  Napi::Value Write(const Napi::CallbackInfo& info);
  Napi::Value Remove(const Napi::CallbackInfo& info);
  Napi::Value ReadFile(const Napi::CallbackInfo& info);
  static Napi::Value bufferOf(Napi::Env env, std::string* data, const std::string& path);
  static bool offsetArg(const Napi::CallbackInfo& info, size_t i, uint64_t* out);
  Napi::Value ReadRange(const Napi::CallbackInfo& info);
  Napi::Value DataExtents(const Napi::CallbackInfo& info);
  Napi::Value WriteAt(const Napi::CallbackInfo& info);
  Napi::Value Truncate(const Napi::CallbackInfo& info);
  static Napi::Object attrObject(Napi::Env env, const Attr& a);
  Napi::Value Stat(const Napi::CallbackInfo& info);
  Napi::Value Readdir(const Napi::CallbackInfo& info);
  Napi::Value Readlink(const Napi::CallbackInfo& info);
  Napi::Value Symlink(const Napi::CallbackInfo& info);
  Napi::Value Mkdir(const Napi::CallbackInfo& info);
  Napi::Value Chmod(const Napi::CallbackInfo& info);
  Napi::Value Revert(const Napi::CallbackInfo& info);

  // shadow_file_tools.cc
  // JS thread: what an update left, for the caller's next precondition.
  struct FileAfter {
    double size = 0, mtimeMs = 0, mode = 0;
    std::string hash;
  };
  static bool expectArg(const Napi::CallbackInfo& info, size_t i, Expect* out);
  static FileAfter afterOf(const Attr& a, const std::string* content);
  static void setAfter(Napi::Object o, const FileAfter& f);
  Napi::Value WriteFile(const Napi::CallbackInfo& info);
  Napi::Value EditFile(const Napi::CallbackInfo& info);

  // Set by the constructor, then read-only.
  std::string backendName_;
  std::string lower_;
  std::string mountPoint_;
  std::string spillDir_;
  // The write guard (native/core/write_guard.h), made by the constructor, given to the overlay
  // when it is made; null: none. Immutable, so the JS thread asks it directly (Guarded).
  std::shared_ptr<const WriteGuard> guard_;
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

}  // namespace shadowfs
