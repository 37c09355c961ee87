// Calls that run out of host memory half-way. The runtime's books live in standard containers, so
// any call can meet std::bad_alloc after the backend already did its part (reserved, mapped, made a
// thread's work count). This test replaces operator new so that the n-th allocation of the calling
// thread fails, and walks n up from 0 until the call succeeds: every failure must be
// hipErrorOutOfMemory and leave the process as it found it (books, file descriptors, memory
// mappings, pool counters), and what the call would have made must still work afterwards.
#include <doctest/doctest.h>

#include "stream_test_support.hpp"
#include "support/books.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <sstream>
#include <string>
#include <thread>

namespace {

// Allocations of the runtime's own code the calling thread may still make before one fails;
// negative: none fails. Only allocations made from the runtime library count: a driver, or the
// stand-in ROCr library, reports its own lack of memory as an error code of its API instead.
thread_local long allocations_before_failure = -1;

const void* runtime_library_base() {
  static const void* const base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&hipInit), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  return base;
}

bool fails_now(void* caller) {
  if (allocations_before_failure < 0) return false;
  Dl_info info{};
  if (dladdr(caller, &info) == 0 || info.dli_fbase != runtime_library_base()) return false;
  return allocations_before_failure-- == 0;
}

void* allocate_or_fail(std::size_t bytes, void* caller) {
  if (fails_now(caller)) throw std::bad_alloc{};
  if (void* memory = std::malloc(bytes == 0 ? 1 : bytes)) return memory;
  throw std::bad_alloc{};
}

void* allocate_aligned_or_fail(std::size_t bytes, std::align_val_t alignment, void* caller) {
  if (fails_now(caller)) throw std::bad_alloc{};
  const std::size_t align = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  void* memory = nullptr;
  if (posix_memalign(&memory, align, bytes == 0 ? 1 : bytes) != 0) throw std::bad_alloc{};
  return memory;
}

}  // namespace

// Every form the library may call; the aligned forms keep the library's aligned types failing too.
void* operator new(std::size_t bytes) { return allocate_or_fail(bytes, __builtin_return_address(0)); }
void* operator new[](std::size_t bytes) { return allocate_or_fail(bytes, __builtin_return_address(0)); }
void* operator new(std::size_t bytes, std::align_val_t alignment) {
  return allocate_aligned_or_fail(bytes, alignment, __builtin_return_address(0));
}
void* operator new[](std::size_t bytes, std::align_val_t alignment) {
  return allocate_aligned_or_fail(bytes, alignment, __builtin_return_address(0));
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete(void* memory, std::align_val_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::align_val_t) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t, std::align_val_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t, std::align_val_t) noexcept { std::free(memory); }

namespace {

using test_support::books;

// What a failed call must leave as it was. Large mappings are summed with a margin of 1 GiB: the
// reservations this test makes are larger, while a sanitizer's allocator splits its own ranges as
// it grows.
struct ProcessState {
  hipxxBookCounts counts{};
  std::size_t descriptors = 0;
  std::uint64_t memfd_bytes = 0;
  std::uint64_t large_mapping_bytes = 0;

  static ProcessState now() {
    ProcessState state;
    state.counts = books();
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      ++state.descriptors;
    }
    std::ifstream maps{"/proc/self/maps"};
    for (std::string line; std::getline(maps, line);) {
      std::uint64_t begin = 0;
      std::uint64_t end = 0;
      char dash = 0;
      std::istringstream fields{line};
      fields >> std::hex >> begin >> dash >> end;
      const std::uint64_t bytes = end - begin;
      if (line.find("memfd:") != std::string::npos) state.memfd_bytes += bytes;
      if (bytes >= (std::uint64_t{1} << 30)) state.large_mapping_bytes += bytes;
    }
    return state;
  }
};

void check_unchanged(const ProcessState& before, const ProcessState& after) {
  CHECK(after.counts == before.counts);
  CHECK(after.descriptors == before.descriptors);
  CHECK(after.memfd_bytes == before.memfd_bytes);
  const std::uint64_t larger = std::max(after.large_mapping_bytes, before.large_mapping_bytes);
  const std::uint64_t smaller = std::min(after.large_mapping_bytes, before.large_mapping_bytes);
  CHECK(larger - smaller < (std::uint64_t{1} << 30));
}

// Runs `call` with its n-th allocation failing, for n = 0, 1, ... until it succeeds; checks every
// failure as the header says, with `extra` checking what ProcessState does not see. Returns how
// many runs failed (the caller undoes the successful one).
int fail_until_done(
    const std::function<hipError_t()>& call, const std::function<void()>& extra = [] {}) {
  for (long fail_at = 0;; ++fail_at) {
    CAPTURE(fail_at);
    const ProcessState before = ProcessState::now();
    allocations_before_failure = fail_at;
    const hipError_t result = call();
    allocations_before_failure = -1;
    if (result == hipSuccess) return static_cast<int>(fail_at);
    REQUIRE(result == hipErrorOutOfMemory);
    check_unchanged(before, ProcessState::now());
    extra();
    REQUIRE(fail_at < 10000);
  }
}

}  // namespace

TEST_CASE("hipMemAddressReserve that runs out of host memory leaves no range reserved") {
  constexpr std::size_t kBytes = std::size_t{8} << 30;
  void* base = nullptr;
  const int failures = fail_until_done([&] { return hipMemAddressReserve(&base, kBytes, 0, nullptr, 0); });
  CHECK(failures > 0);
  CHECK(hipMemAddressFree(base, kBytes) == hipSuccess);
}

TEST_CASE("hipMalloc and hipMallocManaged that run out of host memory leave no memory behind") {
  constexpr std::size_t kBytes = std::size_t{64} << 10;
  void* memory = nullptr;
  SUBCASE("hipMalloc") {
    CHECK(fail_until_done([&] { return hipMalloc(&memory, kBytes); }) > 0);
  }
  SUBCASE("hipMallocManaged") {
    CHECK(fail_until_done([&] { return hipMallocManaged(&memory, kBytes, hipMemAttachGlobal); }) > 0);
  }
  CHECK(hipMemset(memory, 0x3C, kBytes) == hipSuccess);
  CHECK(hipFree(memory) == hipSuccess);
}

TEST_CASE("stream work that cannot be queued for lack of memory leaves the stream able to finish") {
  test_support::LeakCheck leaks;
  void* buffer = nullptr;
  REQUIRE(hipMalloc(&buffer, 4096) == hipSuccess);
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreate(&event) == hipSuccess);
  using Enqueue = std::function<hipError_t(hipStream_t)>;
  const Enqueue fill = [&](hipStream_t stream) { return hipMemsetAsync(buffer, 1, 4096, stream); };
  const Enqueue record = [&](hipStream_t stream) { return hipEventRecord(event, stream); };
  // The failed call last on a held stream, behind `queued` others: the lists holding a stream's work
  // grow (and allocate) now and then, and a failed enqueue that took a number for work it never
  // queued would leave the stream, once let go, short of that number for ever.
  for (const Enqueue& enqueue : {fill, record}) {
    for (int queued = 0; queued < 20; ++queued) {
      CAPTURE(queued);
      for (long fail_at = 0;; ++fail_at) {
        CAPTURE(fail_at);
        hipStream_t stream = nullptr;
        fail_until_done([&] { return hipStreamCreateWithFlags(&stream, hipStreamNonBlocking); });
        hipError_t result = hipSuccess;
        {
          stest::Gate gate;
          gate.block(stream);
          for (int index = 0; index < queued; ++index) REQUIRE(fill(stream) == hipSuccess);
          allocations_before_failure = fail_at;
          result = enqueue(stream);
          allocations_before_failure = -1;
        }
        CHECK(stest::eventually([&] { return hipStreamQuery(stream) == hipSuccess; }));
        CHECK(hipStreamDestroy(stream) == hipSuccess);
        if (result == hipSuccess) break;
        REQUIRE(result == hipErrorOutOfMemory);
        REQUIRE(fail_at < 1000);
      }
    }
  }
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("hipStreamDestroy of a stream with queued work either destroys it or leaves it whole") {
  test_support::LeakCheck leaks;
  void* buffer = nullptr;
  REQUIRE(hipMalloc(&buffer, 4096) == hipSuccess);
  for (long fail_at = 0; fail_at < 64; ++fail_at) {
    CAPTURE(fail_at);
    hipStream_t stream = stest::make_stream(hipStreamNonBlocking);
    stest::Gate gate;
    gate.block(stream);
    REQUIRE(hipMemsetAsync(buffer, 1, 4096, stream) == hipSuccess);
    std::thread opener = gate.open_later(std::chrono::milliseconds{5});
    allocations_before_failure = fail_at;
    const hipError_t destroyed = hipStreamDestroy(stream);
    allocations_before_failure = -1;
    opener.join();
    if (destroyed == hipSuccess) {
      CHECK(hipStreamQuery(stream) == hipErrorInvalidHandle);
    } else {
      CHECK(destroyed == hipErrorOutOfMemory);
      CHECK(hipStreamSynchronize(stream) == hipSuccess);  // still there, and still working
      CHECK(hipStreamDestroy(stream) == hipSuccess);
    }
  }
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("a thread whose per-thread stream could not be made gets one at its next use") {
  void* buffer = nullptr;
  REQUIRE(hipMalloc(&buffer, 4096) == hipSuccess);
  hipStream_t blocking = stest::make_stream();
  stest::Gate gate;
  gate.block(blocking);  // a null stream would wait for it; a per-thread stream does not
  for (long fail_at = 0;; ++fail_at) {
    CAPTURE(fail_at);
    hipError_t first = hipSuccess;
    bool finished = false;
    std::thread user([&] {
      allocations_before_failure = fail_at;
      first = hipMemsetAsync(buffer, 2, 4096, hipStreamPerThread);
      allocations_before_failure = -1;
      if (first != hipSuccess) CHECK(hipMemsetAsync(buffer, 2, 4096, hipStreamPerThread) == hipSuccess);
      finished = stest::eventually([] { return hipStreamQuery(hipStreamPerThread) == hipSuccess; },
                                   std::chrono::milliseconds{2000});
    });
    user.join();
    CHECK(finished);
    if (first == hipSuccess) break;
    CHECK(first == hipErrorOutOfMemory);
    REQUIRE(fail_at < 1000);
  }
  gate.open();
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}
