// The addon's job queue (job_queue.h): a serial worker thread and the Promises it settles.
#include "job_queue.h"

#include <cerrno>
#include <cstring>
#include <exception>
#include <new>

namespace shadowfs {

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
    case ENOMEM: return "ENOMEM";
    case EXDEV: return "EXDEV";  // revert under a moved/opaque directory
    case EFBIG: return "EFBIG";  // a file too large to read into one Buffer
    case EAGAIN: return "EAGAIN";  // revert with a stamp: the layer changed meanwhile
    default: return "EUNKNOWN";
  }
}

Napi::Error errnoError(Napi::Env env, int e, const std::string& message) {
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("code", Napi::String::New(env, errnoName(e)));
  err.Set("errno", Napi::Number::New(env, e));
  return err;
}

Outcome fail(int e, const std::string& what) { return Outcome{e, what + ": " + std::strerror(e), {}}; }

// One queued operation. Made and destroyed on the JS thread; `work` runs on the worker.
struct JobQueue::Job {
  std::function<Outcome()> work;
  Napi::Promise::Deferred deferred;
  std::vector<Napi::Reference<Napi::Value>> keep;
  Outcome outcome;
  explicit Job(Napi::Env env) : deferred(Napi::Promise::Deferred::New(env)) {}
};

JobQueue::JobQueue(Napi::Env env, const char* name, std::function<void()> busy,
                   std::function<void()> idle)
    : busy_(std::move(busy)), idle_(std::move(idle)) {
  // Keeps the event loop alive only while jobs are pending (see enqueue()).
  settler_ = Settler::New(env, name, 0, 1, this);
  settler_.Unref(env);
  worker_ = std::thread([this] { loop(); });
}

JobQueue::~JobQueue() {
  if (worker_.joinable()) stop();
}

void JobQueue::stop() {
  std::deque<Job*> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !worker_.joinable()) return;
    stop_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  for (Job* j : dropped) forget(j);
  settler_.Release();
}

void JobQueue::loop() {
  for (;;) {
    Job* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = queue_.front();
      queue_.pop_front();
    }
    try {
      job->outcome = job->work();
    } catch (const std::bad_alloc&) {
      job->outcome = fail(ENOMEM, "out of memory");
    } catch (const std::exception& e) {
      job->outcome = Outcome{EIO, std::string("internal error: ") + e.what(), {}};
    } catch (...) {
      job->outcome = Outcome{EIO, "internal error", {}};
    }
    if (settler_.NonBlockingCall(job) != napi_ok) forget(job);  // the environment is closing
  }
}

Napi::Value JobQueue::enqueue(Napi::Env env, std::function<Outcome()> work,
                              std::vector<Napi::Reference<Napi::Value>> keep) {
  auto* job = new Job(env);
  job->work = std::move(work);
  job->keep = std::move(keep);
  Napi::Promise promise = job->deferred.Promise();
  if (pending_++ == 0) {
    busy_();
    settler_.Ref(env);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(job);
  }
  cv_.notify_one();
  return promise;
}

// JS thread (env is null when the environment is going away: then only free the job).
void JobQueue::settleOnJs(Napi::Env env, Napi::Function, JobQueue* q, Job* job) {
  if (env == nullptr || q == nullptr) {
    forget(job);
    return;
  }
  q->settle(env, job);
}

void JobQueue::settle(Napi::Env env, Job* job) {
  {
    Napi::HandleScope scope(env);
    if (job->outcome.err) {
      job->deferred.Reject(errnoError(env, job->outcome.err, job->outcome.message).Value());
    } else {
      Napi::Value v = job->outcome.value ? job->outcome.value(env) : env.Undefined();
      // A value that could not be made (a Buffer the runtime refused) rejects with its error.
      if (env.IsExceptionPending())
        job->deferred.Reject(env.GetAndClearPendingException().Value());
      else
        job->deferred.Resolve(v);
    }
  }
  delete job;
  if (--pending_ == 0) {
    settler_.Unref(env);
    idle_();
  }
}

void JobQueue::forget(Job* job) {
  for (auto& r : job->keep) r.SuppressDestruct();
  delete job;
}

}  // namespace shadowfs
