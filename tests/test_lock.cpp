// The runtime's reader-writer lock (lib/core/writer_preferring_lock.hpp) on its own: exclusion,
// shared reading, and a waiting writer let in ahead of new readers.
#include <doctest/doctest.h>

#include "core/writer_preferring_lock.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

using hipxx::core::WriterPreferringLock;

namespace {

// Polls `done` for up to five seconds.
template <class Done>
bool eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace

TEST_CASE("the lock: try_lock and try_lock_shared say what is held") {
  WriterPreferringLock lock;
  REQUIRE(lock.try_lock());
  CHECK_FALSE(lock.try_lock());
  CHECK_FALSE(lock.try_lock_shared());
  lock.unlock();

  REQUIRE(lock.try_lock_shared());
  REQUIRE(lock.try_lock_shared());  // several readers at once
  CHECK_FALSE(lock.try_lock());
  lock.unlock_shared();
  CHECK_FALSE(lock.try_lock());
  lock.unlock_shared();
  CHECK(lock.try_lock());
  lock.unlock();
}

TEST_CASE("the lock: a waiting writer keeps new readers out, then gets in before them") {
  WriterPreferringLock lock;
  lock.lock_shared();
  std::atomic<bool> writer_in{false};
  std::thread writer{[&] {
    std::unique_lock held{lock};
    writer_in = true;
  }};
  // Once the writer waits, no new reader gets in, though only a reader holds the lock.
  CHECK(eventually([&] {
    if (!lock.try_lock_shared()) return true;
    lock.unlock_shared();
    return false;
  }));
  CHECK_FALSE(writer_in.load());
  std::atomic<bool> reader_in{false};
  std::thread reader{[&] {
    std::shared_lock held{lock};
    reader_in = true;
  }};
  lock.unlock_shared();
  writer.join();
  reader.join();
  CHECK(writer_in.load());
  CHECK(reader_in.load());
  CHECK(lock.try_lock());
  lock.unlock();
}

TEST_CASE("the lock: writers exclude everyone under load") {
  WriterPreferringLock lock;
  constexpr int kThreads = 6;
  constexpr int kRounds = 20000;
  long long plain = 0;  // written only under the exclusive lock; TSan checks the claim
  std::atomic<int> inside_shared{0};
  std::atomic<bool> broken{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        if ((round + t) % 3 == 0) {
          std::unique_lock held{lock};
          if (inside_shared.load(std::memory_order_relaxed) != 0) broken = true;
          ++plain;
        } else {
          std::shared_lock held{lock};
          inside_shared.fetch_add(1, std::memory_order_relaxed);
          volatile long long seen = plain;
          (void)seen;
          inside_shared.fetch_sub(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK_FALSE(broken.load());
  long long expected = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int round = 0; round < kRounds; ++round) expected += (round + t) % 3 == 0 ? 1 : 0;
  }
  CHECK(plain == expected);
}
