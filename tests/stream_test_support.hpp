// Helpers shared by the stream, event and pool tests: printing, the books, wait-value gates that
// hold a stream until the test opens them, callback recorders and a thread counter.
#pragma once

#include <doctest/doctest.h>

#include "support/books.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace stest {

using namespace std::chrono_literals;

using test_support::books;
using test_support::LeakCheck;

// How long "still blocked" is observed before a test concludes that work did not run.
inline constexpr auto kSettle = 40ms;

// Polls `done` until it holds or `limit` passes.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Entries in /proc/self/task: the threads of this process.
inline std::size_t thread_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++count;
  return count;
}

// The thread count once it has held still for 50 ms (waiting at most 5 s): a count taken while the
// worker of a stream destroyed just before is still leaving would count it, and the test would then
// find one thread fewer.
inline std::size_t quiet_thread_count() {
  std::size_t now = thread_count();
  for (int still = 0, round = 0; still < 10 && round < 1000; ++round) {
    std::this_thread::sleep_for(5ms);
    const std::size_t next = thread_count();
    still = next == now ? still + 1 : 0;
    now = next;
  }
  return now;
}

// Waits (bounded) for the thread count to come back to `expected`: joined threads leave
// /proc/self/task a moment after join returns, and a stream's worker that its own work outlived
// leaves on its own. Up to 5 s, as long as `eventually` waits: a sanitizer build on a busy two-core
// machine can take far longer than usual to run a thread's exit.
inline std::size_t settled_thread_count(std::size_t expected) {
  std::size_t now = thread_count();
  for (int i = 0; i < 1000 && now != expected; ++i) {
    std::this_thread::sleep_for(5ms);
    now = thread_count();
  }
  return now;
}

inline hipStream_t make_stream(unsigned flags = hipStreamDefault) {
  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreateWithFlags(&stream, flags) == hipSuccess);
  REQUIRE(stream != nullptr);
  return stream;
}

// A word of signal memory that streams wait on (hipStreamWaitValue32 >= 1) until the test opens
// it with hipStreamWriteValue32 from a non-blocking stream of its own. Every gate still closed
// is opened before any gate frees its memory, since hipFree waits for the device's streams.
class Gate {
 public:
  Gate() {
    REQUIRE(hipExtMallocWithFlags(&word_, sizeof(std::uint64_t), hipMallocSignalMemory) == hipSuccess);
    REQUIRE(hipMemset(word_, 0, sizeof(std::uint64_t)) == hipSuccess);
    REQUIRE(hipStreamCreateWithFlags(&releaser_, hipStreamNonBlocking) == hipSuccess);
    std::lock_guard lock{registry_mutex()};
    registry().push_back(this);
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() {
    {
      std::lock_guard lock{registry_mutex()};
      for (Gate* gate : registry()) gate->open();
      registry().erase(std::find(registry().begin(), registry().end(), this));
    }
    CHECK(hipStreamDestroy(releaser_) == hipSuccess);
    CHECK(hipFree(word_) == hipSuccess);
  }

  // Everything queued on `stream` after this waits until the gate opens.
  void block(hipStream_t stream) const {
    REQUIRE(hipStreamWaitValue32(stream, word_, 1, hipStreamWaitValueGte, 0xFFFFFFFFU) == hipSuccess);
  }
  void open() {
    if (open_.exchange(true)) return;
    CHECK(hipStreamWriteValue32(releaser_, word_, 1, 0) == hipSuccess);
    CHECK(hipStreamSynchronize(releaser_) == hipSuccess);
  }
  // Opens the gate from another thread after `delay`, for tests whose main thread must block.
  std::thread open_later(std::chrono::milliseconds delay) {
    return std::thread([this, delay] {
      std::this_thread::sleep_for(delay);
      open();
    });
  }
  [[nodiscard]] void* word() const noexcept { return word_; }

 private:
  static std::vector<Gate*>& registry() {
    static std::vector<Gate*> gates;
    return gates;
  }
  static std::mutex& registry_mutex() {
    static std::mutex mutex;
    return mutex;
  }

  void* word_ = nullptr;
  hipStream_t releaser_ = nullptr;
  std::atomic<bool> open_{false};
};

// Records what callbacks saw, in the order they ran.
struct CallbackLog {
  struct Entry {
    hipStream_t stream;
    hipError_t status;
    int tag;
  };
  std::mutex mutex;
  std::vector<Entry> entries;

  [[nodiscard]] std::size_t size() {
    std::lock_guard lock{mutex};
    return entries.size();
  }
  [[nodiscard]] std::vector<int> tags() {
    std::lock_guard lock{mutex};
    std::vector<int> out;
    for (const Entry& entry : entries) out.push_back(entry.tag);
    return out;
  }
};

struct CallbackTicket {
  CallbackLog* log;
  int tag;
};

inline void record_callback(hipStream_t stream, hipError_t status, void* user_data) {
  auto* ticket = static_cast<CallbackTicket*>(user_data);
  std::lock_guard lock{ticket->log->mutex};
  ticket->log->entries.push_back({stream, status, ticket->tag});
}

// A callback that raises a flag.
inline void set_flag(hipStream_t, hipError_t, void* user_data) {
  static_cast<std::atomic<bool>*>(user_data)->store(true);
}

inline void add_flag_callback(hipStream_t stream, std::atomic<bool>* flag) {
  REQUIRE(hipStreamAddCallback(stream, set_flag, flag, 0) == hipSuccess);
}

// Whether `stream` is still busy after the settle time.
inline bool still_pending(hipStream_t stream) {
  std::this_thread::sleep_for(kSettle);
  return hipStreamQuery(stream) == hipErrorNotReady;
}

// held_callback's state: the callback waits in the stream until the test lets it go.
struct HeldCallback {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false;
  bool may_leave = false;

  [[nodiscard]] bool entered_within(std::chrono::seconds limit) {
    std::unique_lock lock{mutex};
    return changed.wait_for(lock, limit, [&] { return entered; });
  }
  void let_go() {
    {
      std::lock_guard lock{mutex};
      may_leave = true;
    }
    changed.notify_all();
  }
};

inline void held_callback(hipStream_t, hipError_t, void* user_data) {
  auto* held = static_cast<HeldCallback*>(user_data);
  std::unique_lock lock{held->mutex};
  held->entered = true;
  held->changed.notify_all();
  held->changed.wait(lock, [&] { return held->may_leave; });
}

// How far another thread's `count` got: polled until it reaches `limit` or stops moving for a
// quarter of a second.
inline int count_once_stalled(const std::atomic<int>& count, int limit) {
  for (int seen = -1; count.load() < limit && count.load() != seen;) {
    seen = count.load();
    std::this_thread::sleep_for(250ms);
  }
  return count.load();
}

}  // namespace stest
