// The reader/writer lock of the core (and of the backends that share its locking rules).
//
// std::shared_mutex everywhere but MinGW builds. There libstdc++ builds it on winpthreads'
// pthread_rwlock_t, and under wine (mingw-w64 10, the toolchain of our Windows builds) two
// exclusive holders were seen inside it at once: 6 bad rounds in 3000 of eight threads doing
// find-or-insert on one map, then a crash; std::mutex, SRWLOCK and a lock built on a mutex and
// condition variables had none. Whether real Windows shows it is not known here; the Windows
// module we ship is a MinGW build, so it does not use that lock. MSVC's std::shared_mutex is an
// SRWLOCK and is kept.
//
// The replacement holds to what the core asks of a shared mutex (lock, try_lock, unlock,
// lock_shared, try_lock_shared, unlock_shared, so std::unique_lock and std::shared_lock work),
// and prefers writers: once one waits, new readers wait behind it, so a stream of readers cannot
// starve a layer switch.
#pragma once

#include <shared_mutex>

#if defined(__MINGW32__)
#include <condition_variable>
#include <mutex>
#endif

namespace shadowfs {

#if defined(__MINGW32__)
class SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() {
    std::unique_lock<std::mutex> g(m_);
    ++writersWaiting_;
    writerGate_.wait(g, [this] { return !writer_ && readers_ == 0; });
    --writersWaiting_;
    writer_ = true;
  }
  bool try_lock() {
    std::lock_guard<std::mutex> g(m_);
    if (writer_ || readers_ != 0) return false;
    writer_ = true;
    return true;
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> g(m_);
      writer_ = false;
    }
    writerGate_.notify_one();
    readerGate_.notify_all();
  }
  void lock_shared() {
    std::unique_lock<std::mutex> g(m_);
    readerGate_.wait(g, [this] { return !writer_ && writersWaiting_ == 0; });
    ++readers_;
  }
  bool try_lock_shared() {
    std::lock_guard<std::mutex> g(m_);
    if (writer_ || writersWaiting_ != 0) return false;
    ++readers_;
    return true;
  }
  void unlock_shared() {
    bool last;
    {
      std::lock_guard<std::mutex> g(m_);
      last = --readers_ == 0;
    }
    if (last) writerGate_.notify_one();
  }

 private:
  std::mutex m_;
  std::condition_variable readerGate_;
  std::condition_variable writerGate_;
  unsigned readers_ = 0;         // holders of the shared lock
  unsigned writersWaiting_ = 0;  // writers blocked in lock()
  bool writer_ = false;          // the exclusive lock is held
};
#else
using SharedMutex = std::shared_mutex;
#endif

}  // namespace shadowfs
