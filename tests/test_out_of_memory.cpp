// Calls that run out of host memory half-way. The runtime's books live in standard containers, so
// any call can meet std::bad_alloc after the backend already did its part (reserved, mapped, made a
// thread's work count). This test replaces operator new so that the n-th allocation of the calling
// thread fails, and walks n up from 0 until the call succeeds: every failure must be
// hipErrorOutOfMemory and leave the process as it found it (books, file descriptors, memory
// mappings, pool counters), and what the call would have made must still work afterwards.
#include <doctest/doctest.h>

#include "stream_test_support.hpp"
#include "support/books.hpp"

#include "backend/named_memfd.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <thread>

namespace {

// Allocations of the runtime's own code the calling thread may still make before one fails;
// negative: none fails. Only allocations made from the runtime library count: a driver, or the
// stand-in ROCr library, reports its own lack of memory as an error code of its API instead.
thread_local long allocations_before_failure = -1;
// With this set, the calling thread's allocations count from wherever they are made (the standard
// library's own code, say, which makes a std::string's): for a runtime function called directly.
thread_local bool every_caller_counts = false;
// The same count for the runtime's own threads (stream workers, the pool broker): what they may
// still allocate before one allocation fails, all of them together. The thread that arms it (the
// test's) is left out.
std::atomic<long> other_threads_before_failure = -1;
thread_local bool arms_other_threads = false;

const void* runtime_library_base() {
  static const void* const base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&hipInit), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  return base;
}

bool made_by_runtime(void* caller) {
  Dl_info info{};
  return dladdr(caller, &info) != 0 && info.dli_fbase == runtime_library_base();
}

bool fails_now(void* caller) {
  if (allocations_before_failure >= 0) {
    if (!every_caller_counts && !made_by_runtime(caller)) return false;
    return allocations_before_failure-- == 0;
  }
  if (arms_other_threads || other_threads_before_failure.load(std::memory_order_relaxed) < 0 ||
      !made_by_runtime(caller)) {
    return false;
  }
  return other_threads_before_failure.fetch_sub(1, std::memory_order_relaxed) == 0;
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

// Whether a failed call must leave ProcessState as it was: a trim that fails half-way may have
// released some memory already, as it would have released it all.
// And whether its file descriptors must be as they were at once: a pool import's request reaches the
// exporter's broker thread, which may still hold the channel it came with for a while.
enum class Partial { refused, allowed, descriptors_later };

// What a failed call must leave as it was. Large mappings are summed with a margin of 1 GiB: the
// reservations this test makes are larger, while a sanitizer's allocator splits its own ranges as
// it grows.
struct ProcessState {
  hipxxBookCounts counts{};
  std::map<std::string, std::string> descriptors;  // number -> what it names, as /proc/self/fd says
  std::uint64_t memfd_bytes = 0;
  std::uint64_t large_mapping_bytes = 0;

  static ProcessState now() {
    ProcessState state;
    state.counts = books();
    // The listing's own descriptor names the listed directory: it is left out.
    const std::string listing = "/proc/" + std::to_string(getpid()) + "/fd";
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code closed_meanwhile;
      std::string target = std::filesystem::read_symlink(entry.path(), closed_meanwhile).string();
      if (!closed_meanwhile && target != listing) state.descriptors.emplace(entry.path().filename(), std::move(target));
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

// Whether every descriptor open in `now` was open in `before` under the same number, naming the
// same thing. Some may be gone: a pool's broker closes its copy of a descriptor it sent only after
// the reply that lets the receiving call return, so `before` may still show that copy.
bool nothing_opened(const ProcessState& before, const ProcessState& now) {
  return std::ranges::all_of(now.descriptors, [&](const auto& entry) {
    const auto found = before.descriptors.find(entry.first);
    return found != before.descriptors.end() && found->second == entry.second;
  });
}

// What a failure shows: the descriptors opened since `before`, or now naming something else.
std::string descriptors_opened(const ProcessState& before, const ProcessState& now) {
  std::string text;
  for (const auto& [fd, target] : now.descriptors) {
    const auto found = before.descriptors.find(fd);
    if (found == before.descriptors.end()) {
      text.append(" new ").append(fd).append(" (").append(target).append(");");
    } else if (found->second != target) {
      text.append(" reused ").append(fd).append(" (").append(found->second).append(" -> ").append(target).append(");");
    }
  }
  return text;
}

// `after`: the state right after the call. `when`: at once, or given a moment for the ends of
// sockets the broker holds, which it closes once it sees the other end closed.
void check_nothing_opened(const ProcessState& before, const ProcessState& after, Partial when) {
  ProcessState latest = after;
  const auto look = [&] {
    latest = ProcessState::now();
    return nothing_opened(before, latest);
  };
  const bool clean = nothing_opened(before, latest) ||
                     (when == Partial::descriptors_later && stest::eventually(look, std::chrono::milliseconds{5000}));
  INFO("descriptors:", descriptors_opened(before, latest));
  CHECK(clean);
}

void check_unchanged(const ProcessState& before, const ProcessState& after, Partial when) {
  CHECK(after.counts == before.counts);
  check_nothing_opened(before, after, when);
  CHECK(after.memfd_bytes == before.memfd_bytes);
  const std::uint64_t larger = std::max(after.large_mapping_bytes, before.large_mapping_bytes);
  const std::uint64_t smaller = std::min(after.large_mapping_bytes, before.large_mapping_bytes);
  CHECK(larger - smaller < (std::uint64_t{1} << 30));
}

// Runs `call` with its n-th allocation failing, for n = 0, 1, ... until it succeeds; checks every
// failure as the header says, with `extra` checking what ProcessState does not see. Returns how
// many runs failed (the caller undoes the successful one).
int fail_until_done(
    const std::function<hipError_t()>& call, const std::function<void()>& extra = [] {},
    Partial partial = Partial::refused) {
  for (long fail_at = 0;; ++fail_at) {
    CAPTURE(fail_at);
    const ProcessState before = ProcessState::now();
    allocations_before_failure = fail_at;
    const hipError_t result = call();
    allocations_before_failure = -1;
    if (result == hipSuccess) return static_cast<int>(fail_at);
    REQUIRE(result == hipErrorOutOfMemory);
    if (partial != Partial::allowed) check_unchanged(before, ProcessState::now(), partial);
    extra();
    REQUIRE(fail_at < 10000);
  }
}

// Runs `run` with the n-th allocation the runtime's other threads make failing, for n = 0, 1, ...
// until a run in which none failed; `run` checks what it must. Returns how many runs met a failure.
int fail_other_threads_until_untouched(const std::function<void()>& run) {
  arms_other_threads = true;
  for (long fail_at = 0;; ++fail_at) {
    CAPTURE(fail_at);
    other_threads_before_failure = fail_at;
    run();
    if (other_threads_before_failure.exchange(-1) >= 0) {
      arms_other_threads = false;
      return static_cast<int>(fail_at);
    }
    REQUIRE(fail_at < 1000);
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

TEST_CASE("VMM calls that run out of host memory leave the books, the mappings and the fds as they were") {
  test_support::LeakCheck leaks;
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  int exportable = 0;
  REQUIRE(hipDeviceGetAttribute(&exportable, hipDeviceAttributeMemoryPoolSupportedHandleTypes, 0) == hipSuccess);
  if ((exportable & hipMemHandleTypePosixFileDescriptor) != 0) {
    prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  }
  std::size_t bytes = 0;
  REQUIRE(hipMemGetAllocationGranularity(&bytes, &prop, hipMemAllocationGranularityRecommended) == hipSuccess);
  void* base = nullptr;
  REQUIRE(hipMemAddressReserve(&base, 2 * bytes, 0, nullptr, 0) == hipSuccess);
  hipMemGenericAllocationHandle_t handle{};
  fail_until_done([&] { return hipMemCreate(&handle, bytes, &prop, 0); });
  fail_until_done([&] { return hipMemMap(base, bytes, 0, handle, 0); });
  const hipMemAccessDesc access{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  fail_until_done([&] { return hipMemSetAccess(base, bytes, &access, 1); });
  REQUIRE(hipMemset(base, 0x4D, bytes) == hipSuccess);
  if (prop.requestedHandleType == hipMemHandleTypePosixFileDescriptor) {
    int fd = -1;
    fail_until_done([&] { return hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0); });
    hipMemGenericAllocationHandle_t imported{};
    fail_until_done([&] {
      return hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                             hipMemHandleTypePosixFileDescriptor);
    });
    close(fd);
    void* twin = static_cast<char*>(base) + bytes;
    fail_until_done([&] { return hipMemMap(twin, bytes, 0, imported, 0); });
    fail_until_done([&] { return hipMemSetAccess(twin, bytes, &access, 1); });
    unsigned char seen = 0;
    REQUIRE(hipMemcpy(&seen, twin, 1, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(seen == 0x4D);
    CHECK(hipMemUnmap(twin, bytes) == hipSuccess);
    CHECK(hipMemRelease(imported) == hipSuccess);
  }
  CHECK(hipMemUnmap(base, bytes) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 2 * bytes) == hipSuccess);
}

TEST_CASE("hipMalloc and hipMallocManaged that run out of host memory leave no memory behind") {
  constexpr std::size_t kBytes = std::size_t{64} << 10;
  void* memory = nullptr;
  // What a driver sets up at its first allocation (the CUDA driver opens a device file then) is
  // done before the sweeps, so that they see only what the runtime leaves.
  REQUIRE(hipMalloc(&memory, kBytes) == hipSuccess);
  REQUIRE(hipFree(memory) == hipSuccess);
  REQUIRE(hipMallocManaged(&memory, kBytes, hipMemAttachGlobal) == hipSuccess);
  REQUIRE(hipFree(memory) == hipSuccess);
  SUBCASE("hipMalloc") {
    CHECK(fail_until_done([&] { return hipMalloc(&memory, kBytes); }) > 0);
  }
  SUBCASE("hipMallocManaged") {
    CHECK(fail_until_done([&] { return hipMallocManaged(&memory, kBytes, hipMemAttachGlobal); }) > 0);
  }
  CHECK(hipMemset(memory, 0x3C, kBytes) == hipSuccess);
  CHECK(hipFree(memory) == hipSuccess);
}

// The host backend's device memory is memfds, which count against the process's limit on file
// sizes: sizing one past it would send SIGXFSZ and end the process. A GPU has no such limit; the
// allocation is refused as one the device cannot hold.
TEST_CASE("host backend: allocations past the file size limit are hipErrorOutOfMemory, and the process lives" *
          doctest::test_suite("host-only")) {
  test_support::LeakCheck leaks;
  constexpr std::size_t kPast = std::size_t{4} << 20;
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  rlimit lowered = saved;
  lowered.rlim_cur = std::min<rlim_t>(rlim_t{1} << 20, saved.rlim_max);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &lowered) == 0);
  void* memory = nullptr;
  const hipError_t plain = hipMalloc(&memory, kPast);
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  hipMemGenericAllocationHandle_t handle{};
  const hipError_t physical = hipMemCreate(&handle, kPast, &prop, 0);
  void* within = nullptr;
  const hipError_t small = hipMalloc(&within, std::size_t{64} << 10);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &saved) == 0);
  CHECK(plain == hipErrorOutOfMemory);
  CHECK(memory == nullptr);
  CHECK(physical == hipErrorOutOfMemory);
  CHECK(small == hipSuccess);
  CHECK(hipFree(within) == hipSuccess);
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

namespace {

hipMemPoolProps device_pool_props(hipMemAllocationHandleType handle_types = hipMemHandleTypeNone) {
  hipMemPoolProps props{};
  props.allocType = hipMemAllocationTypePinned;
  props.handleTypes = handle_types;
  props.location = {hipMemLocationTypeDevice, 0};
  return props;
}

std::uint64_t pool_attribute(hipMemPool_t pool, hipMemPoolAttr attribute) {
  std::uint64_t value = 0;
  REQUIRE(hipMemPoolGetAttribute(pool, attribute, &value) == hipSuccess);
  return value;
}

// What a failed pool call must leave as it was, besides ProcessState.
std::function<void()> pool_unchanged(hipMemPool_t pool) {
  return [pool, reserved = pool_attribute(pool, hipMemPoolAttrReservedMemCurrent),
          used = pool_attribute(pool, hipMemPoolAttrUsedMemCurrent)] {
    CHECK(pool_attribute(pool, hipMemPoolAttrReservedMemCurrent) == reserved);
    CHECK(pool_attribute(pool, hipMemPoolAttrUsedMemCurrent) == used);
  };
}

}  // namespace

TEST_CASE("pools: creation, allocation and frees that run out of host memory leave the pool as it was") {
  test_support::LeakCheck leaks;
  const hipMemPoolProps props = device_pool_props();
  hipMemPool_t pool = nullptr;
  CHECK(fail_until_done([&] { return hipMemPoolCreate(&pool, &props); }) > 0);
  std::uint64_t keep_all = UINT64_MAX;
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &keep_all) == hipSuccess);
  hipStream_t allocating = stest::make_stream(hipStreamNonBlocking);
  hipStream_t freeing = stest::make_stream(hipStreamNonBlocking);

  // The first allocation grows the pool (a chunk created, mapped, granted; a hole split; a page of
  // the live table); later ones of other sizes split and join holes. Each is checked every time.
  std::vector<void*> blocks;
  for (const std::size_t bytes :
       {std::size_t{1} << 20, std::size_t{3} << 10, std::size_t{40} << 20, std::size_t{256}}) {
    CAPTURE(bytes);
    void* block = nullptr;
    const auto before = pool_unchanged(pool);
    fail_until_done([&] { return hipMallocFromPoolAsync(&block, bytes, pool, allocating); }, [&] { before(); });
    REQUIRE(hipMemsetAsync(block, 0x21, bytes, allocating) == hipSuccess);
    blocks.push_back(block);
  }
  REQUIRE(hipStreamSynchronize(allocating) == hipSuccess);
  const std::uint64_t used = pool_attribute(pool, hipMemPoolAttrUsedMemCurrent);

  // A free that fails leaves the block allocated: used memory as it was, and the free can be made.
  hipEvent_t allocated = nullptr;
  REQUIRE(hipEventCreate(&allocated) == hipSuccess);
  REQUIRE(hipEventRecord(allocated, allocating) == hipSuccess);
  REQUIRE(hipStreamWaitEvent(freeing, allocated, 0) == hipSuccess);
  fail_until_done([&] { return hipFreeAsync(blocks[0], freeing); },
                  [&] { CHECK(pool_attribute(pool, hipMemPoolAttrUsedMemCurrent) == used); });
  fail_until_done([&] { return hipFree(blocks[1]); },
                  [&] { CHECK(pool_attribute(pool, hipMemPoolAttrUsedMemCurrent) < used); });
  fail_until_done([&] { return hipFreeAsync(blocks[2], allocating); });
  fail_until_done([&] { return hipFreeAsync(blocks[3], allocating); });
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  CHECK(pool_attribute(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(hipFree(blocks[0]) == hipErrorInvalidValue);  // freed once, and only once

  // Trimming: blocks no failed trim lost, so a trim that gets through releases all of them.
  CHECK(pool_attribute(pool, hipMemPoolAttrReservedMemCurrent) > 0);
  fail_until_done([&] { return hipMemPoolTrimTo(pool, 0); }, [] {}, Partial::allowed);
  CHECK(pool_attribute(pool, hipMemPoolAttrReservedMemCurrent) == 0);

  CHECK(hipEventDestroy(allocated) == hipSuccess);
  CHECK(hipStreamDestroy(allocating) == hipSuccess);
  CHECK(hipStreamDestroy(freeing) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("the pool broker's thread, short of memory, answers hipErrorOutOfMemory or a moment later, and goes on") {
  const hipxxBookCounts books_before = books();
  const hipMemPoolProps props = device_pool_props(hipMemHandleTypePosixFileDescriptor);
  hipMemPool_t exported = nullptr;
  REQUIRE(hipMemPoolCreate(&exported, &props) == hipSuccess);
  void* block = nullptr;
  REQUIRE(hipMallocFromPoolAsync(&block, std::size_t{1} << 20, exported, nullptr) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  int fd = -1;
  REQUIRE(hipMemPoolExportToShareableHandle(&fd, exported, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  hipMemPoolPtrExportData data{};
  REQUIRE(hipMemPoolExportPointer(&data, block) == hipSuccess);
  // The import's requests reach the broker's thread in this same process: its allocations fail.
  // (This case comes before the file's other pool sharing case, so the broker's lists are new and
  // the first import makes them grow.)
  const int failed_runs = fail_other_threads_until_untouched([&] {
    hipMemPool_t imported = nullptr;
    const hipError_t pool_result = hipMemPoolImportFromShareableHandle(
        &imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)), hipMemHandleTypePosixFileDescriptor, 0);
    CHECK((pool_result == hipSuccess || pool_result == hipErrorOutOfMemory));
    if (pool_result != hipSuccess) return;
    void* mirror = nullptr;
    const hipError_t pointer_result = hipMemPoolImportPointer(&mirror, imported, &data);
    CHECK((pointer_result == hipSuccess || pointer_result == hipErrorOutOfMemory));
    if (pointer_result == hipSuccess) CHECK(hipFree(mirror) == hipSuccess);
    CHECK(hipMemPoolDestroy(imported) == hipSuccess);
  });
  CHECK(failed_runs > 0);
  CHECK(close(fd) == 0);
  CHECK(hipFree(block) == hipSuccess);
  CHECK(hipMemPoolDestroy(exported) == hipSuccess);
  // The broker holds a pool only while it answers a request about it, so the pool goes at once or
  // a moment later, on the broker's thread: either way nothing of it stays.
  CHECK(stest::eventually([&] { return books() == books_before; }, std::chrono::milliseconds{5000}));
}

TEST_CASE("pool sharing: imports and frees of imported pointers that run out of host memory leave nothing behind") {
  test_support::LeakCheck leaks;
  int handle_types = 0;
  REQUIRE(hipDeviceGetAttribute(&handle_types, hipDeviceAttributeMemoryPoolSupportedHandleTypes, 0) == hipSuccess);
  REQUIRE((handle_types & hipMemHandleTypePosixFileDescriptor) != 0);
  const hipMemPoolProps props = device_pool_props(hipMemHandleTypePosixFileDescriptor);
  hipMemPool_t exported = nullptr;
  REQUIRE(hipMemPoolCreate(&exported, &props) == hipSuccess);
  hipStream_t stream = stest::make_stream(hipStreamNonBlocking);
  void* block = nullptr;
  REQUIRE(hipMallocFromPoolAsync(&block, std::size_t{1} << 20, exported, stream) == hipSuccess);
  REQUIRE(hipMemsetAsync(block, 0x5C, std::size_t{1} << 20, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  int fd = -1;
  REQUIRE(hipMemPoolExportToShareableHandle(&fd, exported, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  hipMemPoolPtrExportData data{};
  REQUIRE(hipMemPoolExportPointer(&data, block) == hipSuccess);

  // The same process imports its own pool, as another process would: a mirror of its own.
  const ProcessState before_imports = ProcessState::now();
  hipMemPool_t imported = nullptr;
  fail_until_done(
      [&] {
        return hipMemPoolImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                                   hipMemHandleTypePosixFileDescriptor, 0);
      },
      [] {}, Partial::descriptors_later);
  void* mirror = nullptr;
  fail_until_done([&] { return hipMemPoolImportPointer(&mirror, imported, &data); }, pool_unchanged(imported),
                  Partial::descriptors_later);
  unsigned char seen = 0;
  REQUIRE(hipMemcpy(&seen, mirror, 1, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(seen == 0x5C);
  fail_until_done([&] { return hipFreeAsync(mirror, stream); });
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(pool_attribute(imported, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(hipFreeAsync(mirror, stream) == hipErrorInvalidValue);  // freed once, and only once

  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
  // Every channel the imports opened, failed ones included, is closed by now, at both ends.
  ProcessState latest;
  INFO("descriptors:", descriptors_opened(before_imports, latest));
  CHECK(stest::eventually(
      [&] {
        latest = ProcessState::now();
        return latest.descriptors == before_imports.descriptors;
      },
      std::chrono::milliseconds{5000}));
  close(fd);
  CHECK(hipFreeAsync(block, stream) == hipSuccess);
  // The free done before the pool goes: a pool destroyed with a free still queued lives on until the
  // stream's thread gets there, and the leak check could come first.
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(exported) == hipSuccess);
}

TEST_CASE("opening another process's memfd, short of memory, leaves no descriptor of it open") {
  // Enough descriptors that the ones opened next have two digits: their /proc paths no longer fit a
  // string's own storage, so building one would allocate.
  std::vector<int> fillers;
  for (int index = 0; index < 12; ++index) fillers.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const std::string name = "hipxx-test-oom-open";
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  REQUIRE(fd >= 10);
  REQUIRE(ftruncate(fd, 4096) == 0);
  for (long fail_at = 0;; ++fail_at) {
    CAPTURE(fail_at);
    const ProcessState before = ProcessState::now();
    void* at = MAP_FAILED;
    bool failed = false;
    every_caller_counts = true;
    allocations_before_failure = fail_at;
    try {
      at = hipxx::backend::map_peer_memfd(getpid(), fd, name, 4096);
    } catch (const std::bad_alloc&) {
      failed = true;
    }
    allocations_before_failure = -1;
    every_caller_counts = false;
    check_nothing_opened(before, ProcessState::now(), Partial::refused);
    if (!failed) {
      REQUIRE(at != MAP_FAILED);
      CHECK(munmap(at, 4096) == 0);
      CHECK(fail_at > 0);
      break;
    }
    REQUIRE(fail_at < 100);
  }
  CHECK(close(fd) == 0);
  for (const int filler : fillers) CHECK(close(filler) == 0);
}

TEST_CASE("device work held back behind a stream's host work: its thread, short of memory, still runs it once") {
  // A callback queued behind a wait for a word of host memory, which the stream's thread does: with
  // a device queue (HIPXX_HOST_QUEUES=1, or a GPU), that thread puts the callback on the queue once
  // the wait is over, and needs memory to.
  hipStream_t stream = stest::make_stream(hipStreamNonBlocking);
  const int failed_runs = fail_other_threads_until_untouched([&] {
    std::atomic<std::uint32_t> gate = 0;
    int calls = 0;
    arms_other_threads = true;
    const std::int64_t armed = other_threads_before_failure.exchange(-1);
    REQUIRE(hipStreamWaitValue32(stream, &gate, 1, hipStreamWaitValueEq, 0xFFFFFFFF) == hipSuccess);
    REQUIRE(hipLaunchHostFunc(
                stream, [](void* count) { ++*static_cast<int*>(count); }, &calls) == hipSuccess);
    other_threads_before_failure = armed;  // from here on, the stream's thread's allocations fail
    gate = 1;
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(calls == 1);
  });
  MESSAGE("runs that met a failure: " << failed_runs);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}
