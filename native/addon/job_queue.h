// The addon's job queue: one worker thread per owner (a Shadow) that runs jobs in the order the
// JS thread queued them and settles each job's Promise back on the JS thread through a
// thread-safe function. Jobs never run on libuv's pool (which Node's fs shares) and the JS
// thread never waits for one (see shadow_object.h for why one serial worker per Shadow).
//
// Threads: enqueue(), stop() and the busy/idle callbacks run on the JS thread; a job's `work`
// runs on the queue's worker thread; its value builder runs on the JS thread when it settles.
#pragma once

#include <napi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shadowfs {

// The name of an errno as JS sees it in `err.code` ("ENOENT", ...; "EUNKNOWN" for others).
const char* errnoName(int e);
// JS thread: an Error with `code` (errnoName) and `errno`.
Napi::Error errnoError(Napi::Env env, int e, const std::string& message);

// What a job hands back to the JS thread: an errno and a whole sentence, or (err == 0) a way
// to build the JS value there (empty: undefined).
struct Outcome {
  int err = 0;
  std::string message;
  std::function<Napi::Value(Napi::Env)> value;
};

// Any thread: a failure about `what`, with the OS's words for `e`.
Outcome fail(int e, const std::string& what);
inline Outcome ok() { return Outcome{}; }
inline Outcome okValue(std::function<Napi::Value(Napi::Env)> v) { return Outcome{0, {}, std::move(v)}; }

class JobQueue {
 public:
  // JS thread: starts the worker. `busy` is called when a job is queued while none is pending,
  // `idle` when the last pending job has settled: the owner holds itself (and the event loop)
  // alive in between. The queue itself keeps the event loop alive only while jobs are pending.
  JobQueue(Napi::Env env, const char* name, std::function<void()> busy, std::function<void()> idle);
  ~JobQueue();  // stop() first
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // JS thread: queues `work` and returns the Promise it settles. `keep`: JS values the work
  // reads while it runs (the Buffer of a write), kept from the GC until the job settles.
  Napi::Value enqueue(Napi::Env env, std::function<Outcome()> work,
                      std::vector<Napi::Reference<Napi::Value>> keep = {});

  // JS thread: stops the worker (a job already running finishes first; queued ones are dropped
  // unrun, their Promises can never be observed now) and releases the thread-safe function.
  void stop();

 private:
  struct Job;
  static void settleOnJs(Napi::Env env, Napi::Function, JobQueue* q, Job* job);
  using Settler = Napi::TypedThreadSafeFunction<JobQueue, Job, settleOnJs>;
  void settle(Napi::Env env, Job* job);  // JS thread
  static void forget(Job* job);          // any thread, when the environment is gone
  void loop();                           // worker thread

  std::function<void()> busy_, idle_;
  std::mutex mu_;  // guards queue_ and stop_
  std::condition_variable cv_;
  std::deque<Job*> queue_;
  bool stop_ = false;
  std::thread worker_;
  Settler settler_;
  uint32_t pending_ = 0;  // JS thread only: jobs queued and not yet settled
};

}  // namespace shadowfs
