// Many threads at once: each on its own ranges (every call must succeed and every byte must be its
// own), and several on the SAME range (exactly one winner, the losers refused cleanly). The books
// are back to where they started at the end of every case.
#include <doctest/doctest.h>

#include "support/books.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Handle = hipMemGenericAllocationHandle_t;

constexpr int kThreads = 8;

using test_support::books;

const hipxxBookCounts kZero{0, 0, 0, 0};

// Failures seen on worker threads, reported on the test's thread (doctest asserts there).
class Failures {
 public:
  void add(const std::string& what) {
    std::lock_guard lock{mutex_};
    if (messages_.size() < 20) messages_.push_back(what);
    ++count_;
  }
  void report() {
    for (const std::string& message : messages_) FAIL_CHECK(message);
    CHECK(count_ == 0);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
  int count_ = 0;
};

#define EXPECT_CALL(failures, call, expected)                                                            \
  do {                                                                                                 \
    const hipError_t got_ = (call);                                                                    \
    if (got_ != (expected)) {                                                                          \
      (failures).add(std::string{#call} + " returned " + hipGetErrorName(got_) + ", expected " +        \
                     hipGetErrorName(expected));                                                       \
    }                                                                                                  \
  } while (0)

std::size_t granularity() {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  std::size_t value = 0;
  REQUIRE(hipMemGetAllocationGranularity(&value, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
  return value;
}

hipMemAllocationProp pinned(hipMemAllocationHandleType type = hipMemHandleTypeNone) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = type;
  prop.location = {hipMemLocationTypeDevice, 0};
  return prop;
}

hipMemAccessDesc desc(hipMemAccessFlags flags) {
  hipMemAccessDesc d{};
  d.location = {hipMemLocationTypeDevice, 0};
  d.flags = flags;
  return d;
}

void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

}  // namespace

TEST_SUITE_BEGIN("concurrency");

TEST_CASE("threads on their own ranges: the whole lifecycle, over and over") {
  REQUIRE(books() == kZero);
  const std::size_t g = granularity();
  constexpr int kIterations = 60;
  Failures failures;
  std::atomic<int> completed{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const hipMemAllocationProp prop = pinned();
      const hipMemAccessDesc rw = desc(hipMemAccessFlagsProtReadWrite);
      std::vector<unsigned char> data(2 * g);
      std::vector<unsigned char> back(2 * g);
      for (int i = 0; i < kIterations; ++i) {
        void* base = nullptr;
        Handle first = nullptr;
        Handle second = nullptr;
        EXPECT_CALL(failures, hipMemAddressReserve(&base, 3 * g, 0, nullptr, 0), hipSuccess);
        EXPECT_CALL(failures, hipMemCreate(&first, g, &prop, 0), hipSuccess);
        EXPECT_CALL(failures, hipMemCreate(&second, g, &prop, 0), hipSuccess);
        EXPECT_CALL(failures, hipMemMap(base, g, 0, first, 0), hipSuccess);
        EXPECT_CALL(failures, hipMemMap(at(base, g), g, 0, second, 0), hipSuccess);
        EXPECT_CALL(failures, hipMemSetAccess(base, 2 * g, &rw, 1), hipSuccess);  // spans both
        const auto stamp = static_cast<unsigned char>(t * 31 + i);
        for (std::size_t k = 0; k < data.size(); ++k) data[k] = static_cast<unsigned char>(stamp + k % 251);
        EXPECT_CALL(failures, hipMemcpy(base, data.data(), 2 * g, hipMemcpyHostToDevice), hipSuccess);
        // Retain from inside the second mapping gives that handle back.
        Handle retained = nullptr;
        EXPECT_CALL(failures, hipMemRetainAllocationHandle(&retained, at(base, g + 5)), hipSuccess);
        if (retained != second) failures.add("retain returned another thread's handle");
        EXPECT_CALL(failures, hipMemRelease(retained), hipSuccess);
        // Release the first while mapped: deferred until the unmap below.
        EXPECT_CALL(failures, hipMemRelease(first), hipSuccess);
        EXPECT_CALL(failures, hipMemcpy(back.data(), base, 2 * g, hipMemcpyDeviceToHost), hipSuccess);
        if (back != data) failures.add("thread " + std::to_string(t) + " read someone else's bytes");
        EXPECT_CALL(failures, hipMemUnmap(base, 2 * g), hipSuccess);  // spans both
        EXPECT_CALL(failures, hipMemRelease(second), hipSuccess);
        EXPECT_CALL(failures, hipMemAddressFree(base, 3 * g), hipSuccess);
        // Plain memory in between.
        void* linear = nullptr;
        EXPECT_CALL(failures, hipMalloc(&linear, 1000 + static_cast<std::size_t>(t)), hipSuccess);
        EXPECT_CALL(failures, hipMemset(linear, stamp, 1000), hipSuccess);
        EXPECT_CALL(failures, hipFree(linear), hipSuccess);
      }
      completed.fetch_add(1);
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(completed.load() == kThreads);
  failures.report();
  CHECK(books() == kZero);
}

TEST_CASE("threads racing to map the same address: exactly one wins each round") {
  REQUIRE(books() == kZero);
  const std::size_t g = granularity();
  constexpr int kRounds = 40;
  void* base = nullptr;
  REQUIRE(hipMemAddressReserve(&base, 2 * g, 0, nullptr, 0) == hipSuccess);
  const hipMemAllocationProp prop = pinned();
  std::vector<Handle> handles(kThreads);
  for (Handle& handle : handles) REQUIRE(hipMemCreate(&handle, g, &prop, 0) == hipSuccess);

  std::vector<std::vector<hipError_t>> results(kRounds, std::vector<hipError_t>(kThreads, hipErrorUnknown));
  std::barrier start(kThreads);
  std::barrier finish(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        const hipError_t result = hipMemMap(at(base, g), g, 0, handles[static_cast<std::size_t>(t)], 0);
        results[static_cast<std::size_t>(round)][static_cast<std::size_t>(t)] = result;
        finish.arrive_and_wait();
        // The winner unmaps; everyone meets at the start barrier before the next round.
        if (result == hipSuccess) (void)hipMemUnmap(at(base, g), g);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    int winners = 0;
    for (const hipError_t result : results[static_cast<std::size_t>(round)]) {
      if (result == hipSuccess) ++winners;
      else CHECK(result == hipErrorInvalidValue);
    }
    CHECK(winners == 1);
  }
  CHECK(books().mappings == 0);
  for (Handle handle : handles) CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 2 * g) == hipSuccess);
  CHECK(books() == kZero);
}

TEST_CASE("threads racing with overlapping, different-sized maps: never two overlapping mappings") {
  REQUIRE(books() == kZero);
  const std::size_t g = granularity();
  constexpr int kRounds = 40;
  void* base = nullptr;
  REQUIRE(hipMemAddressReserve(&base, 4 * g, 0, nullptr, 0) == hipSuccess);
  // Thread t maps a 2-granule allocation at offset (t % 3) granules: every pair overlaps.
  const hipMemAllocationProp prop = pinned();
  std::vector<Handle> handles(kThreads);
  for (Handle& handle : handles) REQUIRE(hipMemCreate(&handle, 2 * g, &prop, 0) == hipSuccess);
  std::atomic<int> bad_rounds{0};
  // winners[round * 3 + offset]: how many threads won at that offset in that round.
  std::vector<std::atomic<int>> winners(static_cast<std::size_t>(kRounds) * 3);
  std::barrier start(kThreads);
  std::barrier mapped(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      void* where = at(base, static_cast<std::size_t>(t % 3) * g);
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        const hipError_t result = hipMemMap(where, 2 * g, 0, handles[static_cast<std::size_t>(t)], 0);
        if (result != hipSuccess && result != hipErrorInvalidValue) bad_rounds.fetch_add(1);
        if (result == hipSuccess) winners[static_cast<std::size_t>(round * 3 + t % 3)].fetch_add(1);
        mapped.arrive_and_wait();
        if (result == hipSuccess) (void)hipMemUnmap(where, 2 * g);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(bad_rounds.load() == 0);
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    const auto won = [&](int offset) { return winners[static_cast<std::size_t>(round * 3 + offset)].load(); };
    // At most one winner per offset; [0,2) and [2,4) may coexist, [1,3) overlaps both.
    CHECK(won(0) <= 1);
    CHECK(won(1) <= 1);
    CHECK(won(2) <= 1);
    CHECK(won(0) + won(1) + won(2) >= 1);
    CHECK_FALSE((won(1) == 1 && won(0) + won(2) > 0));
  }
  for (Handle handle : handles) CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 4 * g) == hipSuccess);
  CHECK(books() == kZero);
}

TEST_CASE("a free racing with a map: the outcomes are consistent") {
  REQUIRE(books() == kZero);
  const std::size_t g = granularity();
  constexpr int kRounds = 100;
  const hipMemAllocationProp prop = pinned();
  Handle handle = nullptr;
  REQUIRE(hipMemCreate(&handle, g, &prop, 0) == hipSuccess);
  int map_won = 0;
  int free_won = 0;
  int inconsistent = 0;
  for (int round = 0; round < kRounds; ++round) {
    void* base = nullptr;
    REQUIRE(hipMemAddressReserve(&base, g, 0, nullptr, 0) == hipSuccess);
    std::barrier start(2);
    hipError_t map_result = hipErrorUnknown;
    hipError_t free_result = hipErrorUnknown;
    std::thread mapper([&] {
      start.arrive_and_wait();
      map_result = hipMemMap(base, g, 0, handle, 0);
    });
    std::thread freer([&] {
      start.arrive_and_wait();
      free_result = hipMemAddressFree(base, g);
    });
    mapper.join();
    freer.join();
    if (map_result == hipSuccess && free_result == hipErrorInvalidValue) {
      ++map_won;
      REQUIRE(hipMemUnmap(base, g) == hipSuccess);
      REQUIRE(hipMemAddressFree(base, g) == hipSuccess);
    } else if (free_result == hipSuccess && map_result == hipErrorInvalidValue) {
      ++free_won;
    } else {
      ++inconsistent;
    }
  }
  CHECK(inconsistent == 0);
  CHECK(map_won + free_won == kRounds);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(books() == kZero);
}

TEST_CASE("copies racing with access changes and unmaps: success or a clean refusal, never a fault") {
  REQUIRE(books() == kZero);
  const std::size_t g = granularity();
  void* base = nullptr;
  REQUIRE(hipMemAddressReserve(&base, g, 0, nullptr, 0) == hipSuccess);
  const hipMemAllocationProp prop = pinned();
  Handle handle = nullptr;
  REQUIRE(hipMemCreate(&handle, g, &prop, 0) == hipSuccess);

  std::atomic<bool> stop{false};
  std::atomic<int> copies_ok{0};
  std::atomic<int> copies_refused{0};
  Failures failures;
  std::vector<std::thread> copiers;
  for (int t = 0; t < kThreads - 1; ++t) {
    copiers.emplace_back([&, t] {
      // Each copier has its own slice, so the copies do not race with each other (only with the
      // access changes, which is what this case is about).
      const std::size_t slice = g / kThreads;
      void* mine = at(base, static_cast<std::size_t>(t) * slice);
      std::vector<unsigned char> buffer(slice, static_cast<unsigned char>(t));
      while (!stop.load()) {
        const hipError_t result = t % 2 == 0 ? hipMemcpy(mine, buffer.data(), slice, hipMemcpyHostToDevice)
                                             : hipMemcpy(buffer.data(), mine, slice, hipMemcpyDeviceToHost);
        if (result == hipSuccess) copies_ok.fetch_add(1);
        else if (result == hipErrorInvalidValue) copies_refused.fetch_add(1);
        else failures.add(std::string{"copy returned "} + hipGetErrorName(result));
      }
    });
  }
  // The writer runs on its own thread so that a writer shut out by the copiers fails this test
  // after a deadline instead of hanging it.
  constexpr int kWriterRounds = 300;
  std::atomic<int> writer_rounds{0};
  std::thread writer([&] {
    const hipMemAccessDesc rw = desc(hipMemAccessFlagsProtReadWrite);
    const hipMemAccessDesc none = desc(hipMemAccessFlagsProtNone);
    for (int i = 0; i < kWriterRounds; ++i) {
      EXPECT_CALL(failures, hipMemMap(base, g, 0, handle, 0), hipSuccess);
      EXPECT_CALL(failures, hipMemSetAccess(base, g, &rw, 1), hipSuccess);
      std::this_thread::yield();
      EXPECT_CALL(failures, hipMemSetAccess(base, g, &none, 1), hipSuccess);
      EXPECT_CALL(failures, hipMemSetAccess(base, g, &rw, 1), hipSuccess);
      std::this_thread::yield();
      EXPECT_CALL(failures, hipMemUnmap(base, g), hipSuccess);
      writer_rounds.fetch_add(1);
    }
  });
  // Generous, so that only a writer really shut out fails (not a slow sanitizer build): unstarved,
  // the rounds take well under a second on the host backend.
  constexpr int kDeadlineSeconds = 60;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kDeadlineSeconds);
  while (writer_rounds.load() < kWriterRounds && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int rounds_in_time = writer_rounds.load();
  stop.store(true);
  for (std::thread& thread : copiers) thread.join();
  writer.join();
  CHECK_MESSAGE(rounds_in_time == kWriterRounds,
                "map/set-access/unmap were starved by concurrent hipMemcpy calls: only ", rounds_in_time, " of ",
                kWriterRounds, " writer rounds finished in ", kDeadlineSeconds, " s");
  failures.report();
  CHECK(copies_ok.load() + copies_refused.load() > 0);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, g) == hipSuccess);
  CHECK(books() == kZero);
}

TEST_CASE("retain and release racing on one mapped allocation keep the count exact") {
  REQUIRE(books() == kZero);
  const std::size_t g = granularity();
  void* base = nullptr;
  REQUIRE(hipMemAddressReserve(&base, 2 * g, 0, nullptr, 0) == hipSuccess);
  const hipMemAllocationProp prop = pinned();
  Handle handle = nullptr;
  REQUIRE(hipMemCreate(&handle, 2 * g, &prop, 0) == hipSuccess);
  REQUIRE(hipMemMap(base, 2 * g, 0, handle, 0) == hipSuccess);
  Failures failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        Handle retained = nullptr;
        EXPECT_CALL(failures, hipMemRetainAllocationHandle(&retained, at(base, static_cast<std::size_t>(t * 97 + i))),
                    hipSuccess);
        if (retained != handle) failures.add("retain gave a different handle");
        EXPECT_CALL(failures, hipMemRelease(retained), hipSuccess);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  failures.report();
  // Exactly the creation's reference is left: one release frees the handle, and it is deferred
  // until the unmap.
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipErrorInvalidValue);
  CHECK(books().allocations == 1);
  CHECK(hipMemUnmap(base, 2 * g) == hipSuccess);
  CHECK(books().allocations == 0);
  CHECK(hipMemAddressFree(base, 2 * g) == hipSuccess);
  CHECK(books() == kZero);
  (void)hipGetLastError();
}

TEST_CASE("legacy IPC exports racing with hipFree and new allocations: a handle or a clean refusal") {
  REQUIRE(books() == kZero);
  constexpr std::size_t kSize = 64 * 1024;
  constexpr int kWorkers = 4;
  constexpr int kRounds = 60;
  // One allocation every thread exports and none frees: every export gives the same 64 bytes.
  void* stable = nullptr;
  REQUIRE(hipMalloc(&stable, kSize) == hipSuccess);
  hipIpcMemHandle_t expected{};
  REQUIRE(hipIpcGetMemHandle(&expected, stable) == hipSuccess);
  // One slot per thread, which that thread frees and allocates afresh while the next thread exports
  // whatever pointer the slot holds at that moment.
  std::array<std::atomic<void*>, kWorkers> slots{};
  for (std::atomic<void*>& slot : slots) {
    void* ptr = nullptr;
    REQUIRE(hipMalloc(&ptr, kSize) == hipSuccess);
    slot.store(ptr);
  }
  Failures failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers; ++t) {
    threads.emplace_back([&, t] {
      std::atomic<void*>& own = slots[static_cast<std::size_t>(t)];
      std::atomic<void*>& neighbour = slots[static_cast<std::size_t>((t + 1) % kWorkers)];
      for (int round = 0; round < kRounds; ++round) {
        hipIpcMemHandle_t handle{};
        EXPECT_CALL(failures, hipIpcGetMemHandle(&handle, stable), hipSuccess);
        if (std::memcmp(&handle, &expected, sizeof handle) != 0) failures.add("a second export gave other bytes");
        // The neighbour's pointer may be freed under this export: success, or the refusal an
        // unknown pointer gets, and nothing else.
        const hipError_t raced = hipIpcGetMemHandle(&handle, neighbour.load());
        if (raced != hipSuccess && raced != hipErrorInvalidValue) {
          failures.add(std::string{"an export racing with hipFree returned "} + hipGetErrorName(raced));
        }
        void* old = own.exchange(nullptr);
        EXPECT_CALL(failures, hipFree(old), hipSuccess);
        void* fresh = nullptr;
        EXPECT_CALL(failures, hipMalloc(&fresh, kSize), hipSuccess);
        own.store(fresh);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  failures.report();
  for (std::atomic<void*>& slot : slots) CHECK(hipFree(slot.load()) == hipSuccess);
  CHECK(hipFree(stable) == hipSuccess);
  CHECK(books() == kZero);
  (void)hipGetLastError();
}

TEST_SUITE_END();
