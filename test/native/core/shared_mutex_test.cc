// The core's reader/writer lock (native/core/shared_mutex.h) keeps writers alone and lets
// readers share: eight threads do find-or-insert on one map, reading under the shared lock and
// inserting under the exclusive one, as the core's tables do. With two writers inside at once
// the threads disagree on a key's value, or the map breaks. MinGW's std::shared_mutex failed
// this under wine (about one round in 500), which is why MinGW builds use our own lock.
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../../../native/core/shared_mutex.h"
#include "../unit/unit.h"

using shadowfs::SharedMutex;

TEST(shared_mutex_keeps_writers_alone_and_readers_together) {
  const int kThreads = 8, kKeys = 1000, kRounds = 200;
  int bad = 0;
  for (int round = 0; round < kRounds; ++round) {
    SharedMutex mu;
    std::unordered_map<int, int> map;
    int next = 0;
    std::vector<std::vector<int>> seen(kThreads, std::vector<int>(kKeys));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kKeys; ++i) {
          int key = (i * 7 + t * 131) % kKeys, value = -1;
          {
            std::shared_lock<SharedMutex> r(mu);
            auto it = map.find(key);
            if (it != map.end()) value = it->second;
          }
          if (value < 0) {
            std::unique_lock<SharedMutex> w(mu);
            auto it = map.find(key);
            value = it != map.end() ? it->second : (map.emplace(key, next), next++);
          }
          seen[t][key] = value;
        }
      });
    for (auto& th : threads) th.join();
    bool agree = next == kKeys;
    for (int t = 1; t < kThreads; ++t) agree = agree && seen[t] == seen[0];
    if (!agree) ++bad;
  }
  CHECK_EQ(bad, 0);
}

TEST(shared_mutex_try_locks_answer_what_is_held) {
  SharedMutex mu;
  CHECK(mu.try_lock_shared());
  CHECK(mu.try_lock_shared());
  CHECK(!mu.try_lock());
  mu.unlock_shared();
  mu.unlock_shared();
  CHECK(mu.try_lock());
  CHECK(!mu.try_lock_shared());
  mu.unlock();
  // A writer waits while a reader holds the lock, then gets in.
  std::shared_lock<SharedMutex> reader(mu);
  std::atomic<bool> trying{false}, wrote{false};
  std::thread writer([&] {
    trying = true;
    std::unique_lock<SharedMutex> w(mu);
    wrote = true;
  });
  while (!trying) std::this_thread::yield();
  for (int i = 0; i < 1000; ++i) std::this_thread::yield();
  CHECK(!wrote);
  reader.unlock();
  writer.join();
  CHECK(wrote);
}
