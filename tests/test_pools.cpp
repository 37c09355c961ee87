// The stream-ordered allocator: hipMallocAsync/hipFreeAsync, hipMallocFromPoolAsync, pool creation
// and destruction, current/default pools, every attribute, the release threshold and
// hipMemPoolTrimTo, the three reuse policies each on and off, pool access from another device,
// hipFree of pool memory, and the books after all of it. Runs with HIPXX_HOST_DEVICES=2.
#include "stream_test_support.hpp"
#include "support/bytes.hpp"
#include "support/random_walk.hpp"

#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

using namespace stest;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kKeepAll = ~std::uint64_t{0};

hipMemPoolProps pool_props(int device = 0) {
  hipMemPoolProps props{};
  props.allocType = hipMemAllocationTypePinned;
  props.handleTypes = hipMemHandleTypeNone;
  props.location.type = hipMemLocationTypeDevice;
  props.location.id = device;
  return props;
}

hipMemPool_t make_pool(int device = 0) {
  const hipMemPoolProps props = pool_props(device);
  hipMemPool_t pool = nullptr;
  REQUIRE(hipMemPoolCreate(&pool, &props) == hipSuccess);
  REQUIRE(pool != nullptr);
  return pool;
}

std::uint64_t get_u64(hipMemPool_t pool, hipMemPoolAttr attr) {
  std::uint64_t value = 0xDEADBEEF;
  REQUIRE(hipMemPoolGetAttribute(pool, attr, &value) == hipSuccess);
  return value;
}

int get_int(hipMemPool_t pool, hipMemPoolAttr attr) {
  int value = -7;
  REQUIRE(hipMemPoolGetAttribute(pool, attr, &value) == hipSuccess);
  return value;
}

void set_u64(hipMemPool_t pool, hipMemPoolAttr attr, std::uint64_t value) {
  REQUIRE(hipMemPoolSetAttribute(pool, attr, &value) == hipSuccess);
}

void set_policies(hipMemPool_t pool, bool follow, bool opportunistic, bool internal) {
  int value = follow ? 1 : 0;
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolReuseFollowEventDependencies, &value) == hipSuccess);
  value = opportunistic ? 1 : 0;
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowOpportunistic, &value) == hipSuccess);
  value = internal ? 1 : 0;
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowInternalDependencies, &value) == hipSuccess);
}

void* pool_alloc(hipMemPool_t pool, std::size_t bytes, hipStream_t stream) {
  void* ptr = nullptr;
  REQUIRE(hipMallocFromPoolAsync(&ptr, bytes, pool, stream) == hipSuccess);
  REQUIRE(ptr != nullptr);
  return ptr;
}

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 29 + seed * 13 + 5) & 0xff);
  return data;
}

std::vector<unsigned char> read_back(const void* device, std::size_t bytes) {
  std::vector<unsigned char> data(bytes, 0xcd);
  REQUIRE(hipMemcpy(data.data(), device, bytes, hipMemcpyDeviceToHost) == hipSuccess);
  return data;
}

hipMemPool_t default_pool(int device = 0) {
  hipMemPool_t pool = nullptr;
  REQUIRE(hipDeviceGetDefaultMemPool(&pool, device) == hipSuccess);
  REQUIRE(pool != nullptr);
  return pool;
}

// Leaves the default pools of both devices (of the one, on a one-GPU machine) as the test found them:
// no cached memory reserved.
struct TrimDefaultPools {
  TrimDefaultPools() = default;
  TrimDefaultPools(const TrimDefaultPools&) = delete;
  TrimDefaultPools& operator=(const TrimDefaultPools&) = delete;
  ~TrimDefaultPools() {
    int devices = 0;
    CHECK(hipGetDeviceCount(&devices) == hipSuccess);
    for (int device = 0; device < std::min(devices, 2); ++device) {
      CHECK(hipSetDevice(device) == hipSuccess);
      CHECK(hipDeviceSynchronize() == hipSuccess);
      hipMemPool_t pool = nullptr;
      CHECK(hipDeviceGetDefaultMemPool(&pool, device) == hipSuccess);
      CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
    }
    CHECK(hipSetDevice(0) == hipSuccess);
  }
};

hipMemLocation device_location(int id) {
  hipMemLocation location{};
  location.type = hipMemLocationTypeDevice;
  location.id = id;
  return location;
}

hipMemAccessDesc access_desc(int device, hipMemAccessFlags flags) {
  hipMemAccessDesc desc{};
  desc.location = device_location(device);
  desc.flags = flags;
  return desc;
}

hipMemAccessFlags access_of(hipMemPool_t pool, int device) {
  hipMemLocation location = device_location(device);
  hipMemAccessFlags flags = static_cast<hipMemAccessFlags>(0x55);
  REQUIRE(hipMemPoolGetAccess(&flags, pool, &location) == hipSuccess);
  return flags;
}

// The default pools are created on first use and live for the process; make them before any
// test takes its starting book counts.
const bool default_pools_made = [] {
  hipMemPool_t pool = nullptr;
  return hipDeviceGetDefaultMemPool(&pool, 0) == hipSuccess && hipDeviceGetDefaultMemPool(&pool, 1) == hipSuccess;
}();

void record_status(hipStream_t, hipError_t status, void* user_data) {
  static_cast<std::atomic<int>*>(user_data)->store(static_cast<int>(status));
}

}  // namespace

TEST_SUITE_BEGIN("pools");

TEST_CASE("both default pools exist" * doctest::test_suite("devices-2")) { CHECK(default_pools_made); }

// ---------------------------------------------------------------------------------------------
// Allocation and data

TEST_CASE("hipMallocAsync/hipFreeAsync: data round trip on created, null and per-thread streams") {
  LeakCheck leaks;
  TrimDefaultPools trim;
  hipStream_t blocking = make_stream();
  hipStream_t nonblocking = make_stream(hipStreamNonBlocking);
  for (hipStream_t stream : {blocking, nonblocking, hipStream_t{nullptr}, hipStreamLegacy, hipStreamPerThread}) {
    CAPTURE(reinterpret_cast<std::uintptr_t>(stream));
    std::vector<void*> live;
    std::vector<std::vector<unsigned char>> sent;
    std::vector<std::vector<unsigned char>> received;
    // One allocation larger than a pool chunk (32 MiB), on the first stream only: the size's path does
    // not depend on the stream, and under ThreadSanitizer each 40 MiB round trip costs seconds.
    std::vector<std::size_t> sizes = {1, 255, 256, 257, 4096, (1 << 20) + 3};
    if (stream == blocking) sizes.push_back(std::size_t{40} << 20);
    received.reserve(sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t size = sizes[i];
      void* ptr = nullptr;
      REQUIRE(hipMallocAsync(&ptr, size, stream) == hipSuccess);
      REQUIRE(ptr != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(ptr) % 256 == 0);
      live.push_back(ptr);
      sent.push_back(pattern(size, static_cast<unsigned>(i)));
      received.emplace_back(size, 0);
      REQUIRE(hipMemcpyAsync(ptr, sent.back().data(), size, hipMemcpyHostToDevice, stream) == hipSuccess);
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      REQUIRE(hipMemcpyAsync(received[i].data(), live[i], sizes[i], hipMemcpyDeviceToHost, stream) == hipSuccess);
      REQUIRE(hipFreeAsync(live[i], stream) == hipSuccess);
    }
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    for (std::size_t i = 0; i < sizes.size(); ++i) CHECK(received[i] == sent[i]);
    // Live allocations never overlapped.
    std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      ranges.emplace_back(reinterpret_cast<std::uintptr_t>(live[i]), sizes[i]);
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      CHECK(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first);
  }
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipStreamDestroy(nonblocking) == hipSuccess);
}

TEST_CASE("hipMallocAsync/hipFreeAsync refusals") {
  LeakCheck leaks;
  TrimDefaultPools trim;
  hipStream_t stream = make_stream();
  void* ptr = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  CHECK(hipMallocAsync(nullptr, 256, stream) == hipErrorInvalidValue);
  CHECK(hipMallocAsync(&ptr, 0, stream) == hipSuccess);  // like hipMalloc: nothing, and a null pointer
  CHECK(ptr == nullptr);
  CHECK(hipFreeAsync(nullptr, stream) == hipErrorInvalidValue);
  int on_stack = 0;
  CHECK(hipFreeAsync(&on_stack, stream) == hipErrorInvalidValue);
  void* linear = nullptr;
  REQUIRE(hipMalloc(&linear, 4096) == hipSuccess);
  CHECK(hipFreeAsync(linear, stream) == hipErrorInvalidValue);  // not pool memory
  CHECK(hipFree(linear) == hipSuccess);
  REQUIRE(hipMallocAsync(&ptr, 4096, stream) == hipSuccess);
  CHECK(hipFreeAsync(static_cast<char*>(ptr) + 256, stream) == hipErrorInvalidValue);  // interior
  CHECK(hipFreeAsync(ptr, stream) == hipSuccess);
  CHECK(hipFreeAsync(ptr, stream) == hipErrorInvalidValue);  // twice
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

// A pool's blocks lie side by side in its mappings: a copy or fill that ran past its allocation would
// write into the next one, as it would for hipMalloc memory, which is refused likewise.
TEST_CASE("copies and fills of pool memory stay within the allocation they start in") {
  LeakCheck leaks;
  TrimDefaultPools trim;
  hipStream_t stream = make_stream();
  const hipMemPool_t named = make_pool();
  for (const hipMemPool_t pool : {hipMemPool_t{nullptr}, named}) {
    CAPTURE(pool == nullptr);
    const auto allocate = [&](std::size_t bytes) {
      void* ptr = nullptr;
      REQUIRE((pool == nullptr ? hipMallocAsync(&ptr, bytes, stream)
                               : hipMallocFromPoolAsync(&ptr, bytes, pool, stream)) == hipSuccess);
      return static_cast<unsigned char*>(ptr);
    };
    unsigned char* const first = allocate(256);
    unsigned char* const second = allocate(256);
    REQUIRE(second == first + 256);  // carved side by side
    REQUIRE(hipMemsetAsync(second, 0x11, 256, stream) == hipSuccess);
    std::vector<unsigned char> host(512, 0xAB);
    CHECK(hipMemset(first, 0x22, 512) == hipErrorInvalidValue);
    CHECK(hipMemsetAsync(first, 0x22, 257, stream) == hipErrorInvalidValue);
    CHECK(hipMemcpy(first, host.data(), 512, hipMemcpyHostToDevice) == hipErrorInvalidValue);
    CHECK(hipMemcpyAsync(first + 128, host.data(), 129, hipMemcpyHostToDevice, stream) == hipErrorInvalidValue);
    CHECK(hipMemcpy(host.data(), first + 1, 256, hipMemcpyDeviceToHost) == hipErrorInvalidValue);  // reads too
    CHECK(hipMemcpyAsync(second, first, 257, hipMemcpyDeviceToDevice, stream) == hipErrorInvalidValue);
    // Within: interior ranges, to the last byte.
    CHECK(hipMemsetAsync(first + 128, 0x33, 128, stream) == hipSuccess);
    CHECK(hipMemcpy(host.data(), first + 255, 1, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(host[0] == 0x33);
    REQUIRE(hipMemcpy(host.data(), second, 256, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(std::all_of(host.begin(), host.begin() + 256, [](unsigned char byte) { return byte == 0x11; }));

    // A block larger than the look-back, over several pages of the pool's tables: ranges deep inside
    // it are found through its notes, and the end still holds.
    constexpr std::size_t kLarge = std::size_t{40} << 20;
    unsigned char* const large = allocate(kLarge);
    CHECK(hipMemsetAsync(large + (std::size_t{30} << 20), 0x44, std::size_t{10} << 20, stream) == hipSuccess);
    CHECK(hipMemsetAsync(large + (std::size_t{30} << 20) + 4096, 0x44, std::size_t{10} << 20, stream) ==
          hipErrorInvalidValue);
    CHECK(hipMemcpy(host.data(), large + kLarge - 1, 1, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(host[0] == 0x44);
    CHECK(hipMemcpy(host.data(), large + kLarge - 1, 2, hipMemcpyDeviceToHost) == hipErrorInvalidValue);

    // Freed memory of the pool is no allocation's: refused, as a freed hipMalloc pointer is.
    CHECK(hipFreeAsync(second, stream) == hipSuccess);
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipMemset(second, 0, 256) == hipErrorInvalidValue);
    CHECK(hipFreeAsync(large, stream) == hipSuccess);
    CHECK(hipFreeAsync(first, stream) == hipSuccess);
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
  }
  CHECK(hipMemPoolDestroy(named) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipMallocFromPoolAsync draws from the named pool, on any device's stream" *
          doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  TrimDefaultPools trim;
  hipMemPool_t pool = make_pool(0);
  hipMemPool_t other_device_pool = make_pool(1);
  hipStream_t stream = make_stream();
  constexpr std::size_t kBytes = 100000;
  void* ptr = pool_alloc(pool, kBytes, stream);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) >= kBytes);
  CHECK(get_u64(default_pool(0), hipMemPoolAttrUsedMemCurrent) == 0);
  const std::vector<unsigned char> data = pattern(kBytes, 4);
  std::vector<unsigned char> back(kBytes, 0);
  REQUIRE(hipMemcpyAsync(ptr, data.data(), kBytes, hipMemcpyHostToDevice, stream) == hipSuccess);
  REQUIRE(hipMemcpyAsync(back.data(), ptr, kBytes, hipMemcpyDeviceToHost, stream) == hipSuccess);
  REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(back == data);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);

  // A pool of device 1 serves a stream of device 0.
  void* remote = pool_alloc(other_device_pool, 4096, stream);
  CHECK(get_u64(other_device_pool, hipMemPoolAttrUsedMemCurrent) >= 4096);
  REQUIRE(hipFreeAsync(remote, stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);

  // Refusals.
  void* none = nullptr;
  CHECK(hipMallocFromPoolAsync(&none, 256, nullptr, stream) == hipErrorInvalidValue);
  CHECK(hipMallocFromPoolAsync(nullptr, 256, pool, stream) == hipErrorInvalidValue);
  CHECK(hipMallocFromPoolAsync(&none, 256, reinterpret_cast<hipMemPool_t>(std::uintptr_t{0x40}), stream) ==
        hipErrorInvalidValue);
  CHECK(none == nullptr);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  CHECK(hipMallocFromPoolAsync(&none, 256, pool, stream) == hipErrorInvalidValue);
  CHECK(none == nullptr);
  CHECK(hipMemPoolDestroy(other_device_pool) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipFree releases a stream-ordered allocation") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  hipStream_t stream = make_stream();
  void* ptr = pool_alloc(pool, 8192, stream);
  REQUIRE(hipMemsetAsync(ptr, 0x12, 8192, stream) == hipSuccess);
  CHECK(hipFree(ptr) == hipSuccess);  // waits for the memset, then frees
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(hipFreeAsync(ptr, stream) == hipErrorInvalidValue);
  CHECK(hipFree(ptr) == hipErrorInvalidValue);
  void* again = pool_alloc(pool, 8192, stream);
  CHECK(hipFree(static_cast<char*>(again) + 256) == hipErrorInvalidValue);
  CHECK(hipFree(again) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("the application's virtual memory calls do not reach into a pool's memory") {
  // A pool reserves and maps its memory through the same books as hipMemAddressReserve. An unmap,
  // a free, a map into its holes or a change of access by the application would take the memory
  // from under the blocks it gave out, so every one of those is refused as for memory the
  // application never reserved, whatever range is named.
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  hipStream_t stream = make_stream();
  constexpr std::size_t kBytes = 8192;
  char* const block = static_cast<char*>(pool_alloc(pool, kBytes, stream));
  const std::vector<unsigned char> data = pattern(kBytes, 41);
  REQUIRE(hipMemcpy(block, data.data(), kBytes, hipMemcpyHostToDevice) == hipSuccess);
  const std::uint64_t reserved = get_u64(pool, hipMemPoolAttrReservedMemCurrent);
  REQUIRE(reserved >= kBytes);
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = device_location(0);
  std::size_t granularity = 0;
  REQUIRE(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
  const hipxxBookCounts before = books();

  hipMemGenericAllocationHandle_t retained = nullptr;
  CHECK(hipMemRetainAllocationHandle(&retained, block) == hipErrorInvalidValue);
  CHECK(retained == nullptr);
  const hipMemAccessDesc none = access_desc(0, hipMemAccessFlagsProtNone);
  // Whole chunks from the block's start, and the whole reservation at any size up to 1 TiB.
  for (std::size_t size = granularity; size <= reserved; size *= 2) {
    CAPTURE(size);
    CHECK(hipMemSetAccess(block, size, &none, 1) == hipErrorInvalidValue);
    CHECK(hipMemUnmap(block, size) == hipErrorInvalidValue);
  }
  for (std::size_t size = granularity; size <= (std::size_t{1} << 40); size *= 2) {
    CAPTURE(size);
    CHECK(hipMemAddressFree(block, size) == hipErrorInvalidValue);
  }
  // The pool's reservation goes on past its mapped chunks: no allocation of the application's
  // goes there.
  hipMemGenericAllocationHandle_t own = nullptr;
  REQUIRE(hipMemCreate(&own, granularity, &prop, 0) == hipSuccess);
  CHECK(hipMemMap(block + reserved, granularity, 0, own, 0) == hipErrorInvalidValue);
  CHECK(hipMemRelease(own) == hipSuccess);
  CHECK(books() == before);

  // The pool and its block are as they were.
  CHECK(read_back(block, kBytes) == data);
  char* const second = static_cast<char*>(pool_alloc(pool, kBytes, stream));
  REQUIRE(hipMemsetAsync(second, 0x5a, kBytes, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(read_back(second, kBytes) == std::vector<unsigned char>(kBytes, 0x5a));
  CHECK(hipFreeAsync(second, stream) == hipSuccess);
  CHECK(hipFreeAsync(block, stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Creation and destruction

TEST_CASE("hipMemPoolCreate checks its properties" * doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  hipMemPool_t pool = nullptr;
  const hipMemPool_t sentinel = reinterpret_cast<hipMemPool_t>(std::uintptr_t{0xfeed0});

  hipMemPoolProps props = pool_props();
  CHECK(hipMemPoolCreate(nullptr, &props) == hipErrorInvalidValue);
  pool = sentinel;
  CHECK(hipMemPoolCreate(&pool, nullptr) == hipErrorInvalidValue);

  const auto refused = [&](const hipMemPoolProps& bad, hipError_t expected) {
    hipMemPool_t out = sentinel;
    CHECK(hipMemPoolCreate(&out, &bad) == expected);
    CHECK(out == sentinel);
  };
  props = pool_props();
  props.allocType = hipMemAllocationTypeInvalid;
  refused(props, hipErrorInvalidValue);
  props.allocType = static_cast<hipMemAllocationType>(7);
  refused(props, hipErrorInvalidValue);
  props = pool_props();
  props.location.type = hipMemLocationTypeInvalid;
  refused(props, hipErrorInvalidValue);
  props = pool_props();
  props.location.id = 2;  // two devices
  refused(props, hipErrorInvalidValue);
  props.location.id = -1;
  refused(props, hipErrorInvalidValue);
  props = pool_props();
  props.handleTypes = hipMemHandleTypeWin32;
  refused(props, hipErrorNotSupported);
  props.handleTypes = hipMemHandleTypeWin32Kmt;
  refused(props, hipErrorNotSupported);
  for (const std::size_t index : {std::size_t{0}, std::size_t{31}, sizeof(props.reserved) - 1}) {
    props = pool_props();
    props.reserved[index] = 1;
    refused(props, hipErrorInvalidValue);
  }

  // Accepted: POSIX fd handles, the second device, a maximum size.
  for (const int variant : {0, 1, 2}) {
    props = pool_props(variant == 1 ? 1 : 0);
    if (variant == 0) props.handleTypes = hipMemHandleTypePosixFileDescriptor;
    if (variant == 2) props.maxSize = std::size_t{64} << 20;
    hipMemPool_t created = nullptr;
    CHECK(hipMemPoolCreate(&created, &props) == hipSuccess);
    CHECK(created != nullptr);
    CHECK(hipMemPoolDestroy(created) == hipSuccess);
  }
}

TEST_CASE("a nonzero maxSize caps the memory the pool reserves; one that cannot be reserved is refused") {
  LeakCheck leaks;
  hipStream_t stream = make_stream();
  const auto capped_pool = [](std::size_t max_size) {
    hipMemPoolProps props = pool_props();
    props.maxSize = max_size;
    hipMemPool_t pool = nullptr;
    REQUIRE(hipMemPoolCreate(&pool, &props) == hipSuccess);
    set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
    return pool;
  };
  const auto refused = [&](hipMemPool_t pool, std::size_t bytes) {
    void* ptr = &stream;
    CHECK(hipMallocFromPoolAsync(&ptr, bytes, pool, stream) == hipErrorOutOfMemory);
    CHECK(ptr == &stream);
  };

  SUBCASE("1 MiB (rounded up to the granularity): 16 times that fails, the cap fits and then nothing more") {
    hipMemAllocationProp prop{};
    prop.type = hipMemAllocationTypePinned;
    prop.location = device_location(0);
    std::size_t granularity = 0;
    REQUIRE(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
    const std::size_t cap = ((std::size_t{1} << 20) + granularity - 1) / granularity * granularity;
    hipMemPool_t pool = capped_pool(std::size_t{1} << 20);
    refused(pool, 16 * cap);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
    CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
    void* whole = pool_alloc(pool, cap, stream);
    refused(pool, 256);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == cap);
    REQUIRE(hipFreeAsync(whole, stream) == hipSuccess);
    CHECK(pool_alloc(pool, cap, stream) == whole);
    REQUIRE(hipFreeAsync(whole, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
  SUBCASE("48 MiB, not a whole number of default chunks: all of it is usable, and no more") {
    hipMemPool_t pool = capped_pool(std::size_t{48} << 20);
    void* large = pool_alloc(pool, std::size_t{40} << 20, stream);
    void* rest = pool_alloc(pool, std::size_t{8} << 20, stream);
    refused(pool, 256);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == std::uint64_t{48} << 20);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemHigh) == std::uint64_t{48} << 20);
    REQUIRE(hipFreeAsync(large, stream) == hipSuccess);
    REQUIRE(hipFreeAsync(rest, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
  SUBCASE("50 MiB holds one allocation of up to 50 MiB, though its size class (52 MiB) is larger") {
    constexpr std::size_t kCap = std::size_t{50} << 20;
    hipMemPool_t pool = capped_pool(kCap);
    for (const std::size_t bytes : {kCap, kCap - (std::size_t{1} << 20), kCap - 4096}) {
      CAPTURE(bytes);
      void* block = pool_alloc(pool, bytes, stream);
      // The block is the whole pool: nothing else fits beside it, and all of it is in use.
      refused(pool, 256);
      CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == kCap);
      CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == kCap);
      // Its last page is memory too.
      unsigned char* const last_page = static_cast<unsigned char*>(block) + bytes - 4096;
      REQUIRE(hipMemsetAsync(last_page, 0x5a, 4096, stream) == hipSuccess);
      REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
      const std::vector<unsigned char> tail = read_back(last_page, 4096);
      CHECK(test_support::all_bytes_are(tail, 0x5a));
      REQUIRE(hipFreeAsync(block, stream) == hipSuccess);
      CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
    }
    // Freed, the range serves smaller allocations again.
    void* small = pool_alloc(pool, std::size_t{20} << 20, stream);
    void* other = pool_alloc(pool, std::size_t{20} << 20, stream);
    CHECK(small != other);
    REQUIRE(hipFreeAsync(small, stream) == hipSuccess);
    REQUIRE(hipFreeAsync(other, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
  SUBCASE("hipMemPoolCreate refuses a maxSize that no range can hold, and leaves the handle alone") {
    for (const std::size_t max_size : {SIZE_MAX, SIZE_MAX - (std::size_t{32} << 20) + 2}) {
      CAPTURE(max_size);
      hipMemPoolProps props = pool_props();
      props.maxSize = max_size;
      const hipMemPool_t sentinel = reinterpret_cast<hipMemPool_t>(std::uintptr_t{0xfeed0});
      hipMemPool_t pool = sentinel;
      CHECK(hipMemPoolCreate(&pool, &props) == hipErrorInvalidValue);
      CHECK(pool == sentinel);
    }
  }
  (void)hipGetLastError();
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

// Blocks freed and kept for reuse belong to their size class; an allocation of another size that
// finds no room releases those no stream can still touch, rather than failing while the pool holds
// memory nobody uses.
TEST_CASE("an allocation that finds no room releases kept blocks of other sizes that no stream still uses") {
  LeakCheck leaks;
  hipStream_t stream = make_stream();
  hipStream_t held = make_stream();
  constexpr std::size_t kCap = std::size_t{64} << 20;
  constexpr std::size_t kQuarter = kCap / 4;
  hipMemPoolProps props = pool_props();
  props.maxSize = kCap;
  hipMemPool_t pool = nullptr;
  REQUIRE(hipMemPoolCreate(&pool, &props) == hipSuccess);
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);

  // Four quarters, freed: the pool keeps them all.
  std::array<void*, 4> quarters{};
  for (void*& quarter : quarters) quarter = pool_alloc(pool, kQuarter, stream);
  for (void* quarter : quarters) REQUIRE(hipFreeAsync(quarter, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == kCap);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);

  // Half the pool is no quarter: the kept quarters make way for it.
  void* half = pool_alloc(pool, kCap / 2, stream);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == kCap / 2);

  // A quarter freed on a held stream may still be in use there: it is not released for the other
  // half, which waits for room until the stream has passed the free.
  Gate gate;
  void* pending = pool_alloc(pool, kQuarter, held);
  gate.block(held);
  REQUIRE(hipMemsetAsync(pending, 0x11, kQuarter, held) == hipSuccess);
  REQUIRE(hipFreeAsync(pending, held) == hipSuccess);
  void* other_half = &pool;
  CHECK(hipMallocFromPoolAsync(&other_half, kCap / 2, pool, stream) == hipErrorOutOfMemory);
  CHECK(other_half == &pool);
  gate.open();
  REQUIRE(hipStreamSynchronize(held) == hipSuccess);
  other_half = pool_alloc(pool, kCap / 2, stream);
  CHECK(other_half != half);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == kCap);

  REQUIRE(hipFreeAsync(half, stream) == hipSuccess);
  REQUIRE(hipFreeAsync(other_half, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  CHECK(hipStreamDestroy(held) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("a stream/event/pool handle passed as another kind is refused: none names a live object of that kind") {
  LeakCheck leaks;
  // Enough of each that streams reach the numbers events start from, and events those of pools
  // (each kind once counted from its own start, in the same steps). Each stream is a thread, which
  // under TSan costs milliseconds: no more of them than that.
  constexpr std::size_t kEach = 260;
  std::vector<hipStream_t> streams(kEach);
  std::vector<hipEvent_t> events(kEach);
  std::vector<hipMemPool_t> pools;
  for (hipStream_t& stream : streams) REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
  for (hipEvent_t& event : events) REQUIRE(hipEventCreate(&event) == hipSuccess);
  for (int made = 0; made < 4; ++made) pools.push_back(make_pool());

  for (hipEvent_t event : events) {
    const auto as_stream = reinterpret_cast<hipStream_t>(event);
    REQUIRE(hipStreamQuery(as_stream) == hipErrorInvalidHandle);
    REQUIRE(hipStreamDestroy(as_stream) == hipErrorInvalidHandle);
    REQUIRE(hipMemPoolDestroy(reinterpret_cast<hipMemPool_t>(event)) == hipErrorInvalidValue);
  }
  for (hipStream_t stream : streams) {
    REQUIRE(hipEventDestroy(reinterpret_cast<hipEvent_t>(stream)) == hipErrorInvalidHandle);
    REQUIRE(hipMemPoolDestroy(reinterpret_cast<hipMemPool_t>(stream)) == hipErrorInvalidValue);
  }
  for (hipMemPool_t pool : pools) {
    CHECK(hipStreamDestroy(reinterpret_cast<hipStream_t>(pool)) == hipErrorInvalidHandle);
    CHECK(hipEventDestroy(reinterpret_cast<hipEvent_t>(pool)) == hipErrorInvalidHandle);
  }
  // Nothing was destroyed by the refused calls.
  for (hipStream_t stream : streams) REQUIRE(hipStreamDestroy(stream) == hipSuccess);
  for (hipEvent_t event : events) REQUIRE(hipEventDestroy(event) == hipSuccess);
  for (hipMemPool_t pool : pools) CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("allocations racing the destroy of their pool: each is refused, or usable and freed") {
  LeakCheck leaks;
  std::atomic<hipMemPool_t> current{make_pool()};
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::atomic<int> broken{0};
  std::atomic<int> granted{0};
  std::vector<std::thread> allocators;
  for (int thread = 0; thread < 2; ++thread) {
    allocators.emplace_back([&] {
      hipStream_t stream = nullptr;
      REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
      std::vector<unsigned char> back(4096);
      while (!stop) {
        void* block = nullptr;
        const hipError_t allocated = hipMallocFromPoolAsync(&block, back.size(), current.load(), stream);
        if (allocated != hipSuccess) {
          if (allocated != hipErrorInvalidValue) ++broken;
          ++refused;
          continue;
        }
        ++granted;
        const bool usable =
            hipMemsetAsync(block, 0x5A, back.size(), stream) == hipSuccess &&
            hipMemcpyAsync(back.data(), block, back.size(), hipMemcpyDeviceToHost, stream) == hipSuccess &&
            hipStreamSynchronize(stream) == hipSuccess && back.front() == 0x5A;
        if (!usable || hipFreeAsync(block, stream) != hipSuccess) ++broken;
      }
      if (hipStreamDestroy(stream) != hipSuccess) ++broken;
    });
  }
  for (int round = 0; round < 30; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds{500});
    const hipMemPool_t doomed = current.exchange(make_pool());
    CHECK(hipMemPoolDestroy(doomed) == hipSuccess);
  }
  stop = true;
  for (std::thread& allocator : allocators) allocator.join();
  CHECK(broken == 0);
  CHECK(granted > 0);
  CHECK(hipMemPoolDestroy(current.load()) == hipSuccess);
  CHECK(hipDeviceSynchronize() == hipSuccess);
}

TEST_CASE("hipMallocAsync while another thread destroys the device's current pool: never refused") {
  LeakCheck leaks;
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::atomic<int> granted{0};
  std::thread allocator([&] {
    hipStream_t stream = nullptr;
    REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
    while (!stop) {
      // No pool named: the device's current one, whichever that is at the moment, serves.
      void* block = nullptr;
      if (hipMallocAsync(&block, 4096, stream) != hipSuccess) {
        ++refused;
        continue;
      }
      ++granted;
      if (hipFreeAsync(block, stream) != hipSuccess) ++refused;
    }
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  });
  hipMemPool_t default_pool = nullptr;
  REQUIRE(hipDeviceGetDefaultMemPool(&default_pool, 0) == hipSuccess);
  for (int round = 0; round < 300 && refused == 0; ++round) {
    const hipMemPool_t pool = make_pool();
    REQUIRE(hipDeviceSetMemPool(0, pool) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);  // the device's current pool is its default one again
  }
  stop = true;
  allocator.join();
  CHECK(refused == 0);
  CHECK(granted > 0);
  hipMemPool_t current = nullptr;
  CHECK(hipDeviceGetMemPool(&current, 0) == hipSuccess);
  CHECK(current == default_pool);
  CHECK(hipDeviceSynchronize() == hipSuccess);
}

TEST_CASE("hipMemPoolDestroy: default pools cannot be destroyed; unknown pools are refused" *
          doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  CHECK(hipMemPoolDestroy(default_pool(0)) == hipErrorInvalidValue);
  CHECK(hipMemPoolDestroy(default_pool(1)) == hipErrorInvalidValue);
  CHECK(hipMemPoolDestroy(nullptr) == hipErrorInvalidValue);
  CHECK(hipMemPoolDestroy(reinterpret_cast<hipMemPool_t>(std::uintptr_t{0x70})) == hipErrorInvalidValue);
  hipMemPool_t pool = make_pool();
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipErrorInvalidValue);
  // Every other pool call refuses the destroyed pool.
  std::uint64_t value = 0;
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, &value) == hipErrorInvalidValue);
  CHECK(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &value) == hipErrorInvalidValue);
  CHECK(hipMemPoolTrimTo(pool, 0) == hipErrorInvalidValue);
  hipMemAccessDesc desc = access_desc(0, hipMemAccessFlagsProtReadWrite);
  CHECK(hipMemPoolSetAccess(pool, &desc, 1) == hipErrorInvalidValue);
  hipMemLocation location = device_location(0);
  hipMemAccessFlags flags{};
  CHECK(hipMemPoolGetAccess(&flags, pool, &location) == hipErrorInvalidValue);
  CHECK(hipDeviceSetMemPool(0, pool) == hipErrorInvalidValue);
}

TEST_CASE("hipMemPoolDestroy with an outstanding allocation: success, the memory stays usable, then frees") {
  LeakCheck leaks;
  hipStream_t stream = make_stream();
  constexpr std::size_t kBytes = 65536;
  const std::vector<unsigned char> data = pattern(kBytes, 8);
  for (const bool free_async : {true, false}) {
    CAPTURE(free_async);
    hipMemPool_t pool = make_pool();
    void* ptr = pool_alloc(pool, kBytes, stream);
    REQUIRE(hipMemcpyAsync(ptr, data.data(), kBytes, hipMemcpyHostToDevice, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipErrorInvalidValue);
    // Still usable.
    CHECK(read_back(ptr, kBytes) == data);
    REQUIRE(hipMemsetAsync(ptr, 0x3D, kBytes, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(read_back(ptr, kBytes) == std::vector<unsigned char>(kBytes, 0x3D));
    if (free_async) {
      CHECK(hipFreeAsync(ptr, stream) == hipSuccess);
      CHECK(hipStreamSynchronize(stream) == hipSuccess);
    } else {
      CHECK(hipFree(ptr) == hipSuccess);
    }
    CHECK(hipFreeAsync(ptr, stream) == hipErrorInvalidValue);
  }
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipMemPoolDestroy while a free is still pending: work ordered before the free still succeeds") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  constexpr std::size_t kBytes = 65536;
  hipMemPool_t pool = make_pool();
  void* ptr = pool_alloc(pool, kBytes, stream);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  gate.block(stream);
  REQUIRE(hipMemsetAsync(ptr, 0x5E, kBytes, stream) == hipSuccess);
  REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);  // returns at once
  std::atomic<int> status{-1};
  REQUIRE(hipStreamAddCallback(stream, record_status, &status, 0) == hipSuccess);
  gate.open();
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  // The memset ran on memory that was still the application's in stream order.
  CHECK(status.load() == static_cast<int>(hipSuccess));
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipDeviceSetMemPool / hipDeviceGetMemPool / hipDeviceGetDefaultMemPool" * doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  TrimDefaultPools trim;
  const hipMemPool_t default0 = default_pool(0);
  const hipMemPool_t default1 = default_pool(1);
  CHECK(default0 != default1);
  CHECK(default_pool(0) == default0);  // stable
  hipMemPool_t current = nullptr;
  REQUIRE(hipDeviceGetMemPool(&current, 0) == hipSuccess);
  CHECK(current == default0);
  REQUIRE(hipDeviceGetMemPool(&current, 1) == hipSuccess);
  CHECK(current == default1);

  // Refusals: bad devices and null outputs.
  hipMemPool_t out = nullptr;
  CHECK(hipDeviceGetDefaultMemPool(&out, 2) == hipErrorInvalidDevice);
  CHECK(hipDeviceGetDefaultMemPool(&out, -1) == hipErrorInvalidDevice);
  CHECK(hipDeviceGetMemPool(&out, 2) == hipErrorInvalidDevice);
  CHECK(hipDeviceGetMemPool(&out, -1) == hipErrorInvalidDevice);
  CHECK(hipDeviceGetDefaultMemPool(nullptr, 0) == hipErrorInvalidValue);
  CHECK(hipDeviceGetMemPool(nullptr, 0) == hipErrorInvalidValue);
  CHECK(out == nullptr);

  hipMemPool_t pool0 = make_pool(0);
  hipMemPool_t pool1 = make_pool(1);
  CHECK(hipDeviceSetMemPool(2, pool0) == hipErrorInvalidDevice);
  CHECK(hipDeviceSetMemPool(-1, pool0) == hipErrorInvalidDevice);
  CHECK(hipDeviceSetMemPool(0, pool1) == hipErrorInvalidValue);  // the pool of another device
  CHECK(hipDeviceSetMemPool(1, pool0) == hipErrorInvalidValue);
  CHECK(hipDeviceSetMemPool(0, nullptr) == hipErrorInvalidValue);
  REQUIRE(hipDeviceGetMemPool(&current, 0) == hipSuccess);
  CHECK(current == default0);

  // hipMallocAsync draws from the current pool.
  CHECK(hipDeviceSetMemPool(0, pool0) == hipSuccess);
  REQUIRE(hipDeviceGetMemPool(&current, 0) == hipSuccess);
  CHECK(current == pool0);
  hipStream_t stream = make_stream();
  void* ptr = nullptr;
  REQUIRE(hipMallocAsync(&ptr, 5000, stream) == hipSuccess);
  CHECK(get_u64(pool0, hipMemPoolAttrUsedMemCurrent) >= 5000);
  CHECK(get_u64(default0, hipMemPoolAttrUsedMemCurrent) == 0);

  // A stream of device 1 draws from device 1's current pool.
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK(hipDeviceSetMemPool(1, pool1) == hipSuccess);
  hipStream_t stream1 = make_stream();
  void* ptr1 = nullptr;
  REQUIRE(hipMallocAsync(&ptr1, 7000, stream1) == hipSuccess);
  CHECK(get_u64(pool1, hipMemPoolAttrUsedMemCurrent) >= 7000);
  REQUIRE(hipFreeAsync(ptr1, stream1) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream1) == hipSuccess);
  CHECK(hipStreamDestroy(stream1) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);

  // Back to the default by name, then destroying the current pool resets it to the default.
  CHECK(hipDeviceSetMemPool(0, default0) == hipSuccess);
  REQUIRE(hipDeviceGetMemPool(&current, 0) == hipSuccess);
  CHECK(current == default0);
  CHECK(hipDeviceSetMemPool(0, pool0) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool0) == hipSuccess);  // ptr is still outstanding
  REQUIRE(hipDeviceGetMemPool(&current, 0) == hipSuccess);
  CHECK(current == default0);
  CHECK(hipDeviceSetMemPool(0, pool0) == hipErrorInvalidValue);
  CHECK(hipMemPoolDestroy(pool1) == hipSuccess);
  REQUIRE(hipDeviceGetMemPool(&current, 1) == hipSuccess);
  CHECK(current == default1);
  void* from_default = nullptr;
  REQUIRE(hipMallocAsync(&from_default, 3000, stream) == hipSuccess);
  CHECK(get_u64(default0, hipMemPoolAttrUsedMemCurrent) >= 3000);
  REQUIRE(hipFreeAsync(from_default, stream) == hipSuccess);
  REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Attributes

TEST_CASE("every hipMemPoolAttr round-trips or is refused as documented") {
  LeakCheck leaks;
  for (const bool use_default : {false, true}) {
    CAPTURE(use_default);
    hipMemPool_t pool = use_default ? default_pool(0) : make_pool();
    // Reuse policies: int 0 or 1, enabled by default.
    for (const hipMemPoolAttr attr : {hipMemPoolReuseFollowEventDependencies, hipMemPoolReuseAllowOpportunistic,
                                      hipMemPoolReuseAllowInternalDependencies}) {
      CAPTURE(static_cast<int>(attr));
      CHECK(get_int(pool, attr) == 1);
      for (const int value : {0, 1, 0}) {
        int set = value;
        CHECK(hipMemPoolSetAttribute(pool, attr, &set) == hipSuccess);
        CHECK(get_int(pool, attr) == value);
      }
      for (int bad : {2, -1, 100, INT_MIN}) {
        CHECK(hipMemPoolSetAttribute(pool, attr, &bad) == hipErrorInvalidValue);
        CHECK(get_int(pool, attr) == 0);
      }
      int one = 1;
      CHECK(hipMemPoolSetAttribute(pool, attr, &one) == hipSuccess);
    }
    // Release threshold: uint64, default 0.
    CHECK(get_u64(pool, hipMemPoolAttrReleaseThreshold) == 0);
    for (const std::uint64_t value : {std::uint64_t{12345}, kKeepAll, std::uint64_t{1} << 40, std::uint64_t{0}}) {
      set_u64(pool, hipMemPoolAttrReleaseThreshold, value);
      CHECK(get_u64(pool, hipMemPoolAttrReleaseThreshold) == value);
    }
    // Current values are read-only.
    for (const hipMemPoolAttr attr : {hipMemPoolAttrReservedMemCurrent, hipMemPoolAttrUsedMemCurrent}) {
      CAPTURE(static_cast<int>(attr));
      for (std::uint64_t value : {std::uint64_t{0}, std::uint64_t{1}, kKeepAll}) {
        CHECK(hipMemPoolSetAttribute(pool, attr, &value) == hipErrorInvalidValue);
      }
      CHECK(get_u64(pool, attr) == 0);
    }
    // High-water marks: only reset with 0.
    for (const hipMemPoolAttr attr : {hipMemPoolAttrReservedMemHigh, hipMemPoolAttrUsedMemHigh}) {
      CAPTURE(static_cast<int>(attr));
      for (std::uint64_t value : {std::uint64_t{1}, std::uint64_t{4096}, kKeepAll}) {
        CHECK(hipMemPoolSetAttribute(pool, attr, &value) == hipErrorInvalidValue);
      }
      std::uint64_t zero = 0;
      CHECK(hipMemPoolSetAttribute(pool, attr, &zero) == hipSuccess);
      CHECK(get_u64(pool, attr) == 0);
    }
    // Unknown attributes (kept inside the enum's value range, so the cast is defined) and null values.
    for (const int attr : {0, 9, 15}) {
      std::uint64_t value = 0;
      CHECK(hipMemPoolGetAttribute(pool, static_cast<hipMemPoolAttr>(attr), &value) == hipErrorInvalidValue);
      CHECK(hipMemPoolSetAttribute(pool, static_cast<hipMemPoolAttr>(attr), &value) == hipErrorInvalidValue);
    }
    CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, nullptr) == hipErrorInvalidValue);
    CHECK(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, nullptr) == hipErrorInvalidValue);
    CHECK(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowOpportunistic, nullptr) == hipErrorInvalidValue);
    if (!use_default) CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
  std::uint64_t value = 0;
  CHECK(hipMemPoolGetAttribute(nullptr, hipMemPoolAttrReleaseThreshold, &value) == hipErrorInvalidValue);
  CHECK(hipMemPoolSetAttribute(nullptr, hipMemPoolAttrReleaseThreshold, &value) == hipErrorInvalidValue);
}

TEST_CASE("UsedMemCurrent/High and ReservedMemCurrent/High follow allocations and frees") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  hipStream_t stream = make_stream();
  for (const hipMemPoolAttr attr : {hipMemPoolAttrReservedMemCurrent, hipMemPoolAttrReservedMemHigh,
                                    hipMemPoolAttrUsedMemCurrent, hipMemPoolAttrUsedMemHigh}) {
    CHECK(get_u64(pool, attr) == 0);
  }
  constexpr std::size_t kSmall = 1 << 20;
  constexpr std::size_t kLarge = 3 << 20;
  void* small = pool_alloc(pool, kSmall, stream);
  const std::uint64_t used_small = get_u64(pool, hipMemPoolAttrUsedMemCurrent);
  CHECK(used_small >= kSmall);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) >= used_small);
  void* large = pool_alloc(pool, kLarge, stream);
  const std::uint64_t used_both = get_u64(pool, hipMemPoolAttrUsedMemCurrent);
  CHECK(used_both >= used_small + kLarge);
  const std::uint64_t reserved_both = get_u64(pool, hipMemPoolAttrReservedMemCurrent);
  CHECK(reserved_both >= used_both);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == used_both);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemHigh) == reserved_both);

  // Freeing lowers the current use at once; the high mark stays until reset.
  REQUIRE(hipFreeAsync(small, stream) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == used_both - used_small);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == used_both);
  std::uint64_t zero = 0;
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemHigh, &zero) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == used_both - used_small);

  REQUIRE(hipFreeAsync(large, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);  // threshold 0: everything goes back
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemHigh) == reserved_both);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == used_both - used_small);
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolAttrReservedMemHigh, &zero) == hipSuccess);
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemHigh, &zero) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemHigh) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == 0);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// Sizes that are size classes themselves (powers of two from 256 bytes), so the pool's used bytes
// are the sum of the requests and a test can state them exactly.
std::size_t class_sized(std::size_t step) { return std::size_t{256} << (step % 13); }

TEST_CASE("UsedMemHigh stays exact when threads take turns, whichever thread or stream frees") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
  const std::array<hipStream_t, 2> streams = {make_stream(hipStreamNonBlocking), make_stream(hipStreamNonBlocking)};
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  // One thread allocates, another frees on the other stream, a third allocates again: each step is
  // counted by a different thread, and every one of them ends before the next starts.
  // Run on a thread of their own; asserted here, since a failed REQUIRE must not throw on a thread.
  const auto on_thread = [](auto&& step) {
    hipError_t error = hipErrorUnknown;
    std::thread{[&] { error = step(); }}.join();
    return error;
  };
  void* first = nullptr;
  REQUIRE(on_thread([&] { return hipMallocFromPoolAsync(&first, 2 * kMiB, pool, streams[0]); }) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == 2 * kMiB);
  REQUIRE(on_thread([&] { return hipFreeAsync(first, streams[1]); }) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  void* second = pool_alloc(pool, kMiB, streams[0]);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == 2 * kMiB);  // 1 MiB in use: below the mark
  void* third = pool_alloc(pool, 2 * kMiB, streams[1]);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 3 * kMiB);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == 3 * kMiB);  // a new mark, exactly
  REQUIRE(on_thread([&] { return hipFreeAsync(third, streams[0]); }) == hipSuccess);
  std::uint64_t zero = 0;
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemHigh, &zero) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == kMiB);
  void* fourth = nullptr;
  REQUIRE(on_thread([&] { return hipMallocFromPoolAsync(&fourth, 256, pool, streams[1]); }) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == kMiB + 256);
  REQUIRE(hipFreeAsync(second, streams[1]) == hipSuccess);
  REQUIRE(hipFreeAsync(fourth, streams[0]) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == kMiB + 256);
  for (hipStream_t stream : streams) {
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("UsedMemCurrent/High under threads: exact when they pause, bounded while they churn, 0 at the end") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
  constexpr std::size_t kThreads = 4;
  constexpr std::size_t kHeld = 24;
  constexpr int kRounds = 2000;
  std::vector<hipStream_t> streams;
  for (std::size_t t = 0; t < kThreads; ++t) streams.push_back(make_stream(hipStreamNonBlocking));
  std::vector<std::vector<void*>> held(kThreads);
  std::vector<std::uint64_t> held_bytes(kThreads, 0);
  std::vector<std::uint64_t> peaks(kThreads, 0);  // each thread's own largest live total
  std::atomic<int> failures{0};
  const auto run_threads = [&](auto&& body) {
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { body(t); });
    for (std::thread& thread : threads) thread.join();
  };
  // Allocations only: the total rises to its peak at the end, where the threads stop.
  run_threads([&](std::size_t t) {
    for (std::size_t i = 0; i < kHeld; ++i) {
      void* ptr = nullptr;
      const std::size_t bytes = class_sized(i + t);
      if (hipMallocFromPoolAsync(&ptr, bytes, pool, streams[t]) != hipSuccess) ++failures;
      held[t].push_back(ptr);
      held_bytes[t] += bytes;
    }
    peaks[t] = held_bytes[t];
  });
  REQUIRE(failures.load() == 0);
  std::uint64_t total = 0;
  for (const std::uint64_t bytes : held_bytes) total += bytes;
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == total);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == total);

  // Churn: each thread frees its oldest block, on its neighbour's stream every other time, and
  // allocates another, so that threads count frees of memory other threads' streams allocated.
  run_threads([&](std::size_t t) {
    std::size_t oldest = 0;
    for (int round = 0; round < kRounds; ++round) {
      const std::size_t bytes = class_sized(static_cast<std::size_t>(round) * 7 + t);
      hipStream_t free_stream = round % 2 == 0 ? streams[t] : streams[(t + 1) % kThreads];
      if (hipFreeAsync(held[t][oldest], free_stream) != hipSuccess) ++failures;
      held_bytes[t] -= class_sized(oldest + t);  // the slot's size: kept below by construction
      if (hipMallocFromPoolAsync(&held[t][oldest], class_sized(oldest + t), pool, streams[t]) != hipSuccess) {
        ++failures;
      }
      held_bytes[t] += class_sized(oldest + t);
      // And a short-lived one of another size, which raises this thread's total for a moment.
      void* extra = nullptr;
      if (hipMallocFromPoolAsync(&extra, bytes, pool, streams[t]) != hipSuccess) ++failures;
      peaks[t] = std::max(peaks[t], held_bytes[t] + bytes);
      if (hipFreeAsync(extra, streams[(t + round) % kThreads]) != hipSuccess) ++failures;
      oldest = (oldest + 1) % kHeld;
    }
  });
  REQUIRE(failures.load() == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == total);
  // Never below a peak that any one thread reached on its own; never above all threads at their
  // peaks at once, which bounds the true peak and whatever racing frees may add to the mark.
  const std::uint64_t high = get_u64(pool, hipMemPoolAttrUsedMemHigh);
  std::uint64_t peak_sum = 0;
  for (const std::uint64_t peak : peaks) {
    CHECK(high >= peak);
    peak_sum += peak;
  }
  CHECK(high >= total);
  CHECK(high <= peak_sum);
  CHECK(high <= get_u64(pool, hipMemPoolAttrReservedMemHigh));

  run_threads([&](std::size_t t) {
    for (void* ptr : held[t]) {
      if (hipFreeAsync(ptr, streams[(t + 1) % kThreads]) != hipSuccess) ++failures;
    }
  });
  CHECK(failures.load() == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == high);
  std::uint64_t zero = 0;
  REQUIRE(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemHigh, &zero) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == 0);
  for (hipStream_t stream : streams) {
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Release threshold and trimming

TEST_CASE("release threshold 0: reserved memory returns at the next synchronisation; a large one keeps it") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  hipStream_t stream = make_stream();
  constexpr std::size_t kBytes = std::size_t{5} << 20;

  SUBCASE("threshold 0 and hipStreamSynchronize") {
    void* ptr = pool_alloc(pool, kBytes, stream);
    REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  }
  SUBCASE("threshold 0 and hipDeviceSynchronize") {
    void* ptr = pool_alloc(pool, kBytes, stream);
    REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
    REQUIRE(hipDeviceSynchronize() == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  }
  SUBCASE("threshold 0 and hipEventSynchronize") {
    hipEvent_t event = nullptr;
    REQUIRE(hipEventCreate(&event) == hipSuccess);
    void* ptr = pool_alloc(pool, kBytes, stream);
    REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
    REQUIRE(hipEventRecord(event, stream) == hipSuccess);
    REQUIRE(hipEventSynchronize(event) == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }
  SUBCASE("threshold 0 keeps what is live") {
    void* live = pool_alloc(pool, kBytes, stream);
    void* freed = pool_alloc(pool, kBytes, stream);
    REQUIRE(hipFreeAsync(freed, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) >= get_u64(pool, hipMemPoolAttrUsedMemCurrent));
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) > 0);
    REQUIRE(hipFreeAsync(live, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  }
  SUBCASE("a large threshold keeps the memory reserved") {
    set_u64(pool, hipMemPoolAttrReleaseThreshold, std::uint64_t{1} << 40);
    void* ptr = pool_alloc(pool, kBytes, stream);
    REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    REQUIRE(hipDeviceSynchronize() == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) >= kBytes);
    CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
    // Lowering the threshold releases at the next synchronisation.
    set_u64(pool, hipMemPoolAttrReleaseThreshold, 0);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  }
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("release threshold 0: a synchronisation trims the pools its streams freed into, of any device" *
          doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  constexpr std::size_t kBytes = std::size_t{4} << 20;
  for (const int pool_device : {0, 1}) {
    const int stream_device = 1 - pool_device;
    CAPTURE(pool_device);
    hipMemPool_t pool = make_pool(pool_device);
    REQUIRE(hipSetDevice(stream_device) == hipSuccess);
    hipStream_t stream = make_stream();
    const auto freed_and_waited = [&](const std::function<void()>& synchronize) {
      void* ptr = pool_alloc(pool, kBytes, stream);
      REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
      synchronize();
      return get_u64(pool, hipMemPoolAttrReservedMemCurrent);
    };
    CHECK(freed_and_waited([&] { REQUIRE(hipStreamSynchronize(stream) == hipSuccess); }) == 0);
    CHECK(freed_and_waited([&] { REQUIRE(hipDeviceSynchronize() == hipSuccess); }) == 0);
    hipEvent_t event = nullptr;
    REQUIRE(hipEventCreate(&event) == hipSuccess);
    CHECK(freed_and_waited([&] {
            REQUIRE(hipEventRecord(event, stream) == hipSuccess);
            REQUIRE(hipEventSynchronize(event) == hipSuccess);
          }) == 0);
    CHECK(hipEventDestroy(event) == hipSuccess);
    // Freed on a stream destroyed since: the device's synchronisation still trims it.
    void* ptr = pool_alloc(pool, kBytes, stream);
    REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
    REQUIRE(hipDeviceSynchronize() == hipSuccess);
    CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
    REQUIRE(hipSetDevice(0) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
}

TEST_CASE("hipMemPoolTrimTo releases down to its argument but never below outstanding allocations") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  constexpr std::size_t kBlock = std::size_t{40} << 20;
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(pool_alloc(pool, kBlock, stream));
  const std::vector<unsigned char> data = pattern(kBlock, 2);
  REQUIRE(hipMemcpyAsync(blocks[0], data.data(), kBlock, hipMemcpyHostToDevice, stream) == hipSuccess);
  for (int i = 1; i < 4; ++i) REQUIRE(hipFreeAsync(blocks[static_cast<std::size_t>(i)], stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  const std::uint64_t used = get_u64(pool, hipMemPoolAttrUsedMemCurrent);
  const std::uint64_t reserved = get_u64(pool, hipMemPoolAttrReservedMemCurrent);
  CHECK(used >= kBlock);
  CHECK(reserved >= 4 * kBlock);

  // Holding more than is reserved: a no-op.
  CHECK(hipMemPoolTrimTo(pool, reserved + 1) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == reserved);
  CHECK(hipMemPoolTrimTo(pool, reserved) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == reserved);
  // Part way: at least the argument stays reserved.
  const std::uint64_t half = reserved / 2;
  CHECK(hipMemPoolTrimTo(pool, half) == hipSuccess);
  const std::uint64_t after_half = get_u64(pool, hipMemPoolAttrReservedMemCurrent);
  CHECK(after_half >= half);
  CHECK(after_half < reserved);
  // All the way: what backs the live allocation stays, and it still holds its data.
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  const std::uint64_t floor = get_u64(pool, hipMemPoolAttrReservedMemCurrent);
  CHECK(floor >= used);
  CHECK(floor < after_half);
  CHECK(read_back(blocks[0], kBlock) == data);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == used);

  // A free whose stream has not reached it yet cannot be trimmed.
  Gate gate;
  void* pending = pool_alloc(pool, kBlock, stream);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  gate.block(stream);
  REQUIRE(hipMemsetAsync(pending, 0x01, kBlock, stream) == hipSuccess);
  REQUIRE(hipFreeAsync(pending, stream) == hipSuccess);
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) >= used + kBlock);
  gate.open();
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == floor);

  REQUIRE(hipFreeAsync(blocks[0], stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  CHECK(hipMemPoolTrimTo(nullptr, 0) == hipErrorInvalidValue);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Reuse policies

namespace {

constexpr std::size_t kReuseBytes = 1 << 20;

struct ReuseFixture {
  hipMemPool_t pool = make_pool();
  hipStream_t a = make_stream(hipStreamNonBlocking);
  hipStream_t b = make_stream(hipStreamNonBlocking);
  ReuseFixture() { set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll); }
  ReuseFixture(const ReuseFixture&) = delete;
  ReuseFixture& operator=(const ReuseFixture&) = delete;
  ~ReuseFixture() {
    CHECK(hipStreamSynchronize(a) == hipSuccess);
    CHECK(hipStreamSynchronize(b) == hipSuccess);
    CHECK(hipStreamDestroy(a) == hipSuccess);
    CHECK(hipStreamDestroy(b) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
};

}  // namespace

TEST_CASE("reuse: the same stream always gets its freed block back, whatever the policies") {
  LeakCheck leaks;
  for (const bool policies_on : {false, true}) {
    CAPTURE(policies_on);
    ReuseFixture f;
    set_policies(f.pool, policies_on, policies_on, policies_on);
    void* first = pool_alloc(f.pool, kReuseBytes, f.a);
    REQUIRE(hipFreeAsync(first, f.a) == hipSuccess);
    void* second = pool_alloc(f.pool, kReuseBytes, f.a);
    CHECK(second == first);
    // Also while the stream is held, so the free has not happened yet.
    Gate gate;
    gate.block(f.a);
    REQUIRE(hipFreeAsync(second, f.a) == hipSuccess);
    void* third = pool_alloc(f.pool, kReuseBytes, f.a);
    CHECK(third == first);
    REQUIRE(hipFreeAsync(third, f.a) == hipSuccess);
    gate.open();
  }
}

TEST_CASE("reuse: FollowEventDependencies, on and off") {
  LeakCheck leaks;
  for (const bool follow : {true, false}) {
    for (const bool with_wait : {true, false}) {
      CAPTURE(follow);
      CAPTURE(with_wait);
      ReuseFixture f;
      set_policies(f.pool, follow, false, false);
      Gate gate;
      void* freed = pool_alloc(f.pool, kReuseBytes, f.a);
      gate.block(f.a);  // the free below is not reached, so only a dependency makes reuse safe
      REQUIRE(hipFreeAsync(freed, f.a) == hipSuccess);
      hipEvent_t event = nullptr;
      REQUIRE(hipEventCreateWithFlags(&event, hipEventDisableTiming) == hipSuccess);
      REQUIRE(hipEventRecord(event, f.a) == hipSuccess);
      if (with_wait) REQUIRE(hipStreamWaitEvent(f.b, event, 0) == hipSuccess);
      void* taken = pool_alloc(f.pool, kReuseBytes, f.b);
      if (follow && with_wait) {
        CHECK(taken == freed);
      } else {
        CHECK(taken != freed);
      }
      // B's use of the block is ordered after A's free when it was reused.
      std::atomic<bool> b_ran{false};
      add_flag_callback(f.b, &b_ran);
      if (with_wait) {
        CHECK(still_pending(f.b));
        CHECK_FALSE(b_ran.load());
      }
      gate.open();
      CHECK(hipStreamSynchronize(f.b) == hipSuccess);
      CHECK(b_ran.load());
      REQUIRE(hipFreeAsync(taken, f.b) == hipSuccess);
      CHECK(hipEventDestroy(event) == hipSuccess);
    }
  }
}

TEST_CASE("reuse: FollowEventDependencies counts a wait on an event that had already completed") {
  LeakCheck leaks;
  ReuseFixture f;
  set_policies(f.pool, true, false, false);
  void* freed = pool_alloc(f.pool, kReuseBytes, f.a);
  REQUIRE(hipMemsetAsync(freed, 1, kReuseBytes, f.a) == hipSuccess);
  REQUIRE(hipFreeAsync(freed, f.a) == hipSuccess);
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreateWithFlags(&event, hipEventDisableTiming) == hipSuccess);
  REQUIRE(hipEventRecord(event, f.a) == hipSuccess);
  REQUIRE(hipEventSynchronize(event) == hipSuccess);
  // Nothing left to wait for, but B is now ordered after A's free all the same.
  REQUIRE(hipStreamWaitEvent(f.b, event, 0) == hipSuccess);
  void* taken = pool_alloc(f.pool, kReuseBytes, f.b);
  CHECK(taken == freed);
  REQUIRE(hipFreeAsync(taken, f.b) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}

TEST_CASE("reuse: FollowEventDependencies through the null stream") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
  set_policies(pool, true, false, false);
  hipStream_t blocking = make_stream(hipStreamDefault);
  void* scratch = nullptr;
  REQUIRE(hipMalloc(&scratch, 256) == hipSuccess);
  Gate gate;
  void* freed = pool_alloc(pool, kReuseBytes, blocking);
  gate.block(blocking);
  REQUIRE(hipFreeAsync(freed, blocking) == hipSuccess);
  // Null-stream work queued now runs after everything queued on the blocking stream so far.
  REQUIRE(hipMemsetAsync(scratch, 0, 256, nullptr) == hipSuccess);
  void* taken = pool_alloc(pool, kReuseBytes, nullptr);
  CHECK(taken == freed);
  REQUIRE(hipFreeAsync(taken, nullptr) == hipSuccess);
  gate.open();
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(hipFree(scratch) == hipSuccess);
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("reuse: AllowOpportunistic, on and off") {
  LeakCheck leaks;
  for (const bool opportunistic : {true, false}) {
    CAPTURE(opportunistic);
    ReuseFixture f;
    set_policies(f.pool, false, opportunistic, false);
    void* freed = pool_alloc(f.pool, kReuseBytes, f.a);
    REQUIRE(hipFreeAsync(freed, f.a) == hipSuccess);
    REQUIRE(hipStreamSynchronize(f.a) == hipSuccess);  // the free has completed
    void* taken = pool_alloc(f.pool, kReuseBytes, f.b);
    if (opportunistic) {
      CHECK(taken == freed);
    } else {
      CHECK(taken != freed);
    }
    // A free that has not completed is never taken opportunistically.
    Gate gate;
    void* pending = pool_alloc(f.pool, kReuseBytes, f.a);
    gate.block(f.a);
    REQUIRE(hipFreeAsync(pending, f.a) == hipSuccess);
    void* other = pool_alloc(f.pool, kReuseBytes, f.b);
    CHECK(other != pending);
    REQUIRE(hipFreeAsync(other, f.b) == hipSuccess);
    REQUIRE(hipFreeAsync(taken, f.b) == hipSuccess);
    gate.open();
  }
}

TEST_CASE("reuse: AllowOpportunistic takes a block freed after device work once its stream got there, unwaited") {
  // Nothing waits on the freeing stream: the free itself must let the pool learn when the stream
  // has passed it. The work is given time; a round whose work was not done by then tries again.
  LeakCheck leaks;
  ReuseFixture f;
  set_policies(f.pool, false, true, false);
  bool reused = false;
  // B keeps what it took until the end: a block B freed itself would be its first choice in the
  // next round, and no later round could then show the reuse.
  std::vector<void*> taken_by_b;
  for (const auto settle : {50ms, 250ms, 1000ms, 3000ms}) {
    void* freed = pool_alloc(f.pool, kReuseBytes, f.a);
    REQUIRE(hipMemsetAsync(freed, 0x3C, kReuseBytes, f.a) == hipSuccess);
    REQUIRE(hipFreeAsync(freed, f.a) == hipSuccess);
    std::this_thread::sleep_for(settle);
    taken_by_b.push_back(pool_alloc(f.pool, kReuseBytes, f.b));
    reused = taken_by_b.back() == freed;
    if (reused) break;
  }
  CHECK(reused);
  for (void* taken : taken_by_b) REQUIRE(hipFreeAsync(taken, f.b) == hipSuccess);
  REQUIRE(hipStreamSynchronize(f.b) == hipSuccess);
}

TEST_CASE("reuse: AllowInternalDependencies, on and off; when on, the allocating stream waits for the free") {
  LeakCheck leaks;
  for (const bool internal : {true, false}) {
    CAPTURE(internal);
    ReuseFixture f;
    set_policies(f.pool, false, false, internal);
    Gate gate;
    void* freed = pool_alloc(f.pool, kReuseBytes, f.a);
    REQUIRE(hipStreamSynchronize(f.a) == hipSuccess);
    gate.block(f.a);
    REQUIRE(hipMemsetAsync(freed, 0xA1, kReuseBytes, f.a) == hipSuccess);
    REQUIRE(hipFreeAsync(freed, f.a) == hipSuccess);
    void* taken = pool_alloc(f.pool, kReuseBytes, f.b);
    REQUIRE(hipMemsetAsync(taken, 0xB2, kReuseBytes, f.b) == hipSuccess);
    std::atomic<bool> b_ran{false};
    add_flag_callback(f.b, &b_ran);
    if (internal) {
      CHECK(taken == freed);
      CHECK(still_pending(f.b));
      CHECK_FALSE(b_ran.load());
    } else {
      CHECK(taken != freed);
      CHECK(eventually([&] { return b_ran.load(); }));
      // B completes once its callback has returned, a moment after the flag is set.
      CHECK(eventually([&] { return hipStreamQuery(f.b) == hipSuccess; }));
    }
    gate.open();
    CHECK(hipStreamSynchronize(f.b) == hipSuccess);
    CHECK(b_ran.load());
    REQUIRE(hipStreamSynchronize(f.a) == hipSuccess);
    // B's memset came after A's, so B's bytes are what the block holds.
    CHECK(read_back(taken, kReuseBytes) == std::vector<unsigned char>(kReuseBytes, 0xB2));
    REQUIRE(hipFreeAsync(taken, f.b) == hipSuccess);
  }
}

TEST_CASE("thousands of cross-stream reuses on a held stream: each waits for its free, all go through once let go") {
  LeakCheck leaks;
  constexpr int kRounds = 3000;
  constexpr std::size_t kBytes = 256;
  ReuseFixture f;
  set_policies(f.pool, false, false, true);
  // A's frees cannot be over while A is held, so each block B takes back from A has B wait for
  // A's free: one operation on B's queue, which is held too and cannot drain. Held by callbacks,
  // which every backend runs from its device queue (a wait-value gate may be waited for on the
  // host, with the work behind it held back in the runtime). A's callback may not start until B's
  // returns where one thread runs them all; it holds A all the same.
  HeldCallback b_held;
  REQUIRE(hipStreamAddCallback(f.b, held_callback, &b_held, 0) == hipSuccess);
  REQUIRE(b_held.entered_within(5s));
  HeldCallback a_held;
  REQUIRE(hipStreamAddCallback(f.a, held_callback, &a_held, 0) == hipSuccess);
  std::vector<void*> taken(kRounds, nullptr);
  std::atomic<int> rounds{0};
  std::atomic<int> refused{0};
  std::thread producer([&] {
    for (void*& block : taken) {
      void* freed = nullptr;
      if (hipMallocFromPoolAsync(&freed, kBytes, f.pool, f.a) != hipSuccess || hipFreeAsync(freed, f.a) != hipSuccess ||
          hipMallocFromPoolAsync(&block, kBytes, f.pool, f.b) != hipSuccess || block != freed) {
        refused.fetch_add(1);
      }
      rounds.fetch_add(1);
    }
  });
  const int rounds_while_held = count_once_stalled(rounds, kRounds);
  // The waits are operations like any other on B: bounded.
  CHECK(rounds_while_held > 0);
  CHECK(rounds_while_held < kRounds);
  // The producer waits for room with none of the runtime's locks: the pool and its streams serve
  // other threads meanwhile.
  void* other = pool_alloc(f.pool, kBytes, f.a);
  CHECK(hipFreeAsync(other, f.a) == hipSuccess);
  CHECK(hipMemPoolTrimTo(f.pool, 0) == hipSuccess);
  CHECK(still_pending(f.b));
  a_held.let_go();
  b_held.let_go();
  producer.join();
  CHECK(refused.load() == 0);
  CHECK(hipStreamSynchronize(f.b) == hipSuccess);
  CHECK(std::set<void*>(taken.begin(), taken.end()).size() == taken.size());
  for (void* block : taken) CHECK(hipFreeAsync(block, f.b) == hipSuccess);
  CHECK(hipStreamSynchronize(f.b) == hipSuccess);
  CHECK(get_u64(f.pool, hipMemPoolAttrUsedMemCurrent) == 0);
}

TEST_CASE("reuse with every policy off and no order between the streams: a fresh block") {
  LeakCheck leaks;
  ReuseFixture f;
  set_policies(f.pool, false, false, false);
  void* freed = pool_alloc(f.pool, kReuseBytes, f.a);
  REQUIRE(hipFreeAsync(freed, f.a) == hipSuccess);
  REQUIRE(hipStreamSynchronize(f.a) == hipSuccess);
  void* taken = pool_alloc(f.pool, kReuseBytes, f.b);
  CHECK(taken != freed);
  REQUIRE(hipFreeAsync(taken, f.b) == hipSuccess);
}

// A free on the null stream comes after earlier work of blocking streams (and a free on a
// blocking stream after earlier null-stream work), so a block reused by another stream must not
// be touched by that earlier work once the new owner has written it.
TEST_CASE("reuse honours null-stream ordering of the free") {
  LeakCheck leaks;
  for (const bool free_on_null : {true, false}) {
    CAPTURE(free_on_null);
    hipMemPool_t pool = make_pool();
    set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
    hipStream_t blocking = make_stream(hipStreamDefault);
    hipStream_t other = make_stream(hipStreamNonBlocking);
    Gate gate;
    void* first = pool_alloc(pool, kReuseBytes, blocking);
    REQUIRE(hipStreamSynchronize(blocking) == hipSuccess);
    hipStream_t user = free_on_null ? blocking : nullptr;
    hipStream_t freer = free_on_null ? nullptr : blocking;
    gate.block(user);
    REQUIRE(hipMemsetAsync(first, 0xAA, kReuseBytes, user) == hipSuccess);
    REQUIRE(hipFreeAsync(first, freer) == hipSuccess);
    void* second = pool_alloc(pool, kReuseBytes, other);
    REQUIRE(hipMemsetAsync(second, 0x55, kReuseBytes, other) == hipSuccess);
    std::thread opener = gate.open_later(100ms);
    CHECK(hipStreamSynchronize(other) == hipSuccess);
    opener.join();
    CHECK(hipDeviceSynchronize() == hipSuccess);
    const bool reused = second == first;
    CAPTURE(reused);
    CHECK(read_back(second, kReuseBytes) == std::vector<unsigned char>(kReuseBytes, 0x55));
    REQUIRE(hipFreeAsync(second, other) == hipSuccess);
    CHECK(hipStreamSynchronize(other) == hipSuccess);
    CHECK(hipStreamDestroy(blocking) == hipSuccess);
    CHECK(hipStreamDestroy(other) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
}

// ---------------------------------------------------------------------------------------------
// Streams destroyed while the pool still remembers frees made on them: a cached block must not
// keep the stream (and its worker thread) alive, and whoever takes the block must not end up
// joining that worker, which would wait for all of the destroyed stream's remaining work.

TEST_CASE("streams destroyed after stream-ordered frees leave no thread behind") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);  // the freed blocks stay cached
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  const std::size_t before = quiet_thread_count();
  for (int i = 0; i < 6; ++i) {
    hipStream_t stream = make_stream(i % 2 == 0 ? hipStreamDefault : hipStreamNonBlocking);
    void* ptr = pool_alloc(pool, kReuseBytes * static_cast<std::size_t>(i + 1), stream);
    REQUIRE(hipMemsetAsync(ptr, i, kReuseBytes, stream) == hipSuccess);
    REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
    if (i % 3 == 0) REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
  CHECK(settled_thread_count(before) == before);
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  CHECK(settled_thread_count(before) == before);
}

TEST_CASE("an allocation does not wait for later work of a destroyed stream whose free it reuses") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
  hipStream_t other = make_stream(hipStreamNonBlocking);
  Gate gate;
  hipStream_t doomed = make_stream(hipStreamNonBlocking);
  void* freed = pool_alloc(pool, kReuseBytes, doomed);
  REQUIRE(hipFreeAsync(freed, doomed) == hipSuccess);
  REQUIRE(hipStreamSynchronize(doomed) == hipSuccess);  // the free has completed
  gate.block(doomed);  // later, unrelated work is held
  CHECK(hipStreamDestroy(doomed) == hipSuccess);  // returns at once; the held work stays queued
  void* taken = pool_alloc(pool, kReuseBytes, other);  // opportunistic reuse of the completed free
  CHECK(taken == freed);
  // Had the allocation made `other` wait for the destroyed stream, `other` would now be held behind
  // the closed gate; it is idle.
  CHECK(hipStreamQuery(other) == hipSuccess);
  gate.open();
  REQUIRE(hipFreeAsync(taken, other) == hipSuccess);
  CHECK(hipStreamSynchronize(other) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Access

TEST_CASE("pool access: the owner is always read-write; another device needs hipMemPoolSetAccess" *
          doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool(0);
  CHECK(access_of(pool, 0) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(pool, 1) == hipMemAccessFlagsProtNone);
  // The owner cannot be lowered.
  for (const hipMemAccessFlags flags : {hipMemAccessFlagsProtNone, hipMemAccessFlagsProtRead}) {
    const hipMemAccessDesc desc = access_desc(0, flags);
    CHECK(hipMemPoolSetAccess(pool, &desc, 1) == hipErrorInvalidValue);
    CHECK(access_of(pool, 0) == hipMemAccessFlagsProtReadWrite);
  }
  const hipMemAccessDesc owner_rw = access_desc(0, hipMemAccessFlagsProtReadWrite);
  CHECK(hipMemPoolSetAccess(pool, &owner_rw, 1) == hipSuccess);

  constexpr std::size_t kBytes = 8192;
  hipStream_t stream = make_stream();
  void* ptr = pool_alloc(pool, kBytes, stream);
  REQUIRE(hipMemsetAsync(ptr, 0x10, kBytes, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  const std::vector<unsigned char> data = pattern(kBytes, 6);
  std::vector<unsigned char> back(kBytes, 0);

  // Device 1 has no access yet.
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK(hipMemcpy(ptr, data.data(), kBytes, hipMemcpyHostToDevice) != hipSuccess);
  CHECK(hipMemcpy(back.data(), ptr, kBytes, hipMemcpyDeviceToHost) != hipSuccess);
  CHECK(hipMemset(ptr, 0, kBytes) != hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  CHECK(read_back(ptr, kBytes) == std::vector<unsigned char>(kBytes, 0x10));

  // Read-only: reads work, writes do not.
  const hipMemAccessDesc read_only = access_desc(1, hipMemAccessFlagsProtRead);
  CHECK(hipMemPoolSetAccess(pool, &read_only, 1) == hipSuccess);
  CHECK(access_of(pool, 1) == hipMemAccessFlagsProtRead);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK(hipMemcpy(back.data(), ptr, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == std::vector<unsigned char>(kBytes, 0x10));
  CHECK(hipMemcpy(ptr, data.data(), kBytes, hipMemcpyHostToDevice) != hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);

  // Read-write: copies from device 1 land.
  const hipMemAccessDesc read_write = access_desc(1, hipMemAccessFlagsProtReadWrite);
  CHECK(hipMemPoolSetAccess(pool, &read_write, 1) == hipSuccess);
  CHECK(access_of(pool, 1) == hipMemAccessFlagsProtReadWrite);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK(hipMemcpy(ptr, data.data(), kBytes, hipMemcpyHostToDevice) == hipSuccess);
  // Memory the pool maps after the grant is covered too.
  void* later = nullptr;
  hipStream_t stream1 = make_stream();
  REQUIRE(hipMallocFromPoolAsync(&later, std::size_t{48} << 20, pool, stream1) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream1) == hipSuccess);
  CHECK(hipMemcpy(static_cast<char*>(later) + (std::size_t{40} << 20), data.data(), kBytes, hipMemcpyHostToDevice) ==
        hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  CHECK(read_back(ptr, kBytes) == data);
  CHECK(read_back(static_cast<char*>(later) + (std::size_t{40} << 20), kBytes) == data);

  // Revoked again.
  const hipMemAccessDesc none = access_desc(1, hipMemAccessFlagsProtNone);
  CHECK(hipMemPoolSetAccess(pool, &none, 1) == hipSuccess);
  CHECK(access_of(pool, 1) == hipMemAccessFlagsProtNone);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK(hipMemcpy(back.data(), ptr, kBytes, hipMemcpyDeviceToHost) != hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);

  REQUIRE(hipFreeAsync(later, stream) == hipSuccess);
  REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream1) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("pool access refusals leave the access unchanged" * doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool(0);
  const hipMemAccessDesc good = access_desc(1, hipMemAccessFlagsProtRead);
  CHECK(hipMemPoolSetAccess(pool, nullptr, 1) == hipErrorInvalidValue);
  CHECK(hipMemPoolSetAccess(pool, &good, 0) == hipErrorInvalidValue);
  CHECK(hipMemPoolSetAccess(nullptr, &good, 1) == hipErrorInvalidValue);
  hipMemAccessDesc bad = access_desc(2, hipMemAccessFlagsProtRead);
  CHECK(hipMemPoolSetAccess(pool, &bad, 1) == hipErrorInvalidValue);
  bad = access_desc(-1, hipMemAccessFlagsProtRead);
  CHECK(hipMemPoolSetAccess(pool, &bad, 1) == hipErrorInvalidValue);
  bad = access_desc(1, static_cast<hipMemAccessFlags>(2));
  CHECK(hipMemPoolSetAccess(pool, &bad, 1) == hipErrorInvalidValue);
  bad = access_desc(1, hipMemAccessFlagsProtRead);
  bad.location.type = hipMemLocationTypeInvalid;
  CHECK(hipMemPoolSetAccess(pool, &bad, 1) == hipErrorInvalidValue);
  // A list with one bad entry changes nothing.
  const hipMemAccessDesc list[2] = {good, access_desc(0, hipMemAccessFlagsProtRead)};
  CHECK(hipMemPoolSetAccess(pool, list, 2) == hipErrorInvalidValue);
  CHECK(access_of(pool, 1) == hipMemAccessFlagsProtNone);
  CHECK(access_of(pool, 0) == hipMemAccessFlagsProtReadWrite);

  hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
  hipMemLocation location = device_location(1);
  CHECK(hipMemPoolGetAccess(nullptr, pool, &location) == hipErrorInvalidValue);
  CHECK(hipMemPoolGetAccess(&flags, pool, nullptr) == hipErrorInvalidValue);
  CHECK(hipMemPoolGetAccess(&flags, nullptr, &location) == hipErrorInvalidValue);
  location = device_location(2);
  CHECK(hipMemPoolGetAccess(&flags, pool, &location) == hipErrorInvalidValue);
  location = device_location(0);
  location.type = hipMemLocationTypeInvalid;
  CHECK(hipMemPoolGetAccess(&flags, pool, &location) == hipErrorInvalidValue);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Threads and the books

TEST_CASE("pools under threads: 8 threads allocate, fill, copy and free on their own streams") {
  LeakCheck leaks;
  TrimDefaultPools trim;
  hipMemPool_t shared = make_pool();
  constexpr int kThreads = 8;
  constexpr int kRounds = 60;
  std::atomic<int> failures{0};
  std::atomic<int> corrupt{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      hipStream_t stream = nullptr;
      if (hipStreamCreateWithFlags(&stream, t % 2 == 0 ? hipStreamDefault : hipStreamNonBlocking) != hipSuccess) {
        ++failures;
        return;
      }
      std::vector<unsigned char> back;
      for (int round = 0; round < kRounds; ++round) {
        const std::size_t bytes = 512 + static_cast<std::size_t>((round * 977 + t * 131) % 20000);
        const auto byte = static_cast<unsigned char>(t * 16 + round % 16);
        void* ptr = nullptr;
        const hipError_t allocated =
            round % 2 == 0 ? hipMallocAsync(&ptr, bytes, stream) : hipMallocFromPoolAsync(&ptr, bytes, shared, stream);
        if (allocated != hipSuccess) {
          ++failures;
          continue;
        }
        back.assign(bytes, 0);
        if (hipMemsetAsync(ptr, byte, bytes, stream) != hipSuccess) ++failures;
        if (hipMemcpyAsync(back.data(), ptr, bytes, hipMemcpyDeviceToHost, stream) != hipSuccess) ++failures;
        if (hipFreeAsync(ptr, stream) != hipSuccess) ++failures;
        if (hipStreamSynchronize(stream) != hipSuccess) ++failures;
        if (!test_support::all_bytes_are(back, byte)) ++corrupt;
      }
      if (hipStreamDestroy(stream) != hipSuccess) ++failures;
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  CHECK(corrupt.load() == 0);
  CHECK(get_u64(shared, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(get_u64(default_pool(0), hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(hipMemPoolDestroy(shared) == hipSuccess);
}

TEST_CASE("the books return to their starting values once pools are trimmed and destroyed" *
          doctest::test_suite("devices-2")) {
  const hipxxBookCounts start = books();
  hipStream_t stream = make_stream();
  std::vector<hipMemPool_t> pools;
  for (int i = 0; i < 3; ++i) pools.push_back(make_pool(i % 2));
  std::vector<void*> outstanding;
  for (hipMemPool_t pool : pools) {
    set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
    for (int j = 0; j < 4; ++j) {
      void* ptr = pool_alloc(pool, (std::size_t{1} << 20) * static_cast<std::size_t>(j + 1), stream);
      if (j == 0) {
        outstanding.push_back(ptr);
      } else {
        REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
      }
    }
  }
  void* from_default = nullptr;
  REQUIRE(hipMallocAsync(&from_default, std::size_t{33} << 20, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK_FALSE(books() == start);
  // Destroy one pool with its allocation still outstanding, trim another.
  CHECK(hipMemPoolDestroy(pools[0]) == hipSuccess);
  CHECK(hipMemPoolTrimTo(pools[1], 0) == hipSuccess);
  for (void* ptr : outstanding) REQUIRE(hipFreeAsync(ptr, stream) == hipSuccess);
  REQUIRE(hipFreeAsync(from_default, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipMemPoolTrimTo(pools[1], 0) == hipSuccess);
  CHECK(hipMemPoolDestroy(pools[1]) == hipSuccess);
  CHECK(hipMemPoolDestroy(pools[2]) == hipSuccess);
  CHECK(hipMemPoolTrimTo(default_pool(0), 0) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(books() == start);
}

// ---------------------------------------------------------------------------------------------
// The hot path: frees land on their stream's own list and queue no work, live allocations are
// tracked without the pool's lock. What must still hold around that.

TEST_CASE("blocks freed on a destroyed stream are free for any stream, whatever the policies") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
  set_policies(pool, false, false, false);
  hipStream_t doomed = make_stream(hipStreamNonBlocking);
  hipStream_t other = make_stream(hipStreamNonBlocking);
  void* freed = pool_alloc(pool, kReuseBytes, doomed);
  REQUIRE(hipFreeAsync(freed, doomed) == hipSuccess);
  REQUIRE(hipStreamSynchronize(doomed) == hipSuccess);
  CHECK(hipStreamDestroy(doomed) == hipSuccess);  // idle: gone at once, with all of its work
  void* taken = pool_alloc(pool, kReuseBytes, other);
  CHECK(taken == freed);
  REQUIRE(hipFreeAsync(taken, other) == hipSuccess);
  CHECK(hipStreamSynchronize(other) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("racing frees of one allocation: exactly one succeeds and the pool's counts stay exact") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  const std::array<hipStream_t, 2> streams = {make_stream(hipStreamNonBlocking), make_stream(hipStreamNonBlocking)};
  int single_successes = 0;
  for (int round = 0; round < 200; ++round) {
    void* ptr = pool_alloc(pool, 4096 + static_cast<std::size_t>(round % 7) * 4096, streams[0]);
    std::atomic<int> ready{0};
    std::atomic<int> successes{0};
    std::vector<std::thread> threads;
    for (hipStream_t stream : streams) {
      threads.emplace_back([&, stream] {
        ready.fetch_add(1);
        while (ready.load() < 2) std::this_thread::yield();
        if (hipFreeAsync(ptr, stream) == hipSuccess) successes.fetch_add(1);
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (successes.load() == 1) ++single_successes;
  }
  CHECK(single_successes == 200);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  for (hipStream_t stream : streams) {
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("hipMemPoolDestroy with frees pending on several streams: the memory outlives each stream's work") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 65536;
  hipMemPool_t pool = make_pool();
  const std::array<hipStream_t, 2> streams = {make_stream(hipStreamNonBlocking), make_stream(hipStreamDefault)};
  std::array<void*, 2> blocks{};
  for (std::size_t i = 0; i < 2; ++i) blocks[i] = pool_alloc(pool, kBytes, streams[i]);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  Gate gate;
  std::array<std::atomic<int>, 2> status{};
  for (std::size_t i = 0; i < 2; ++i) {
    status[i] = -1;
    gate.block(streams[i]);
    REQUIRE(hipMemsetAsync(blocks[i], 0x6B, kBytes, streams[i]) == hipSuccess);
    REQUIRE(hipFreeAsync(blocks[i], streams[i]) == hipSuccess);
  }
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);  // drained, so unlisted at once
  for (std::size_t i = 0; i < 2; ++i) {
    REQUIRE(hipStreamAddCallback(streams[i], record_status, &status[i], 0) == hipSuccess);
  }
  gate.open();
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(hipStreamSynchronize(streams[i]) == hipSuccess);
    CHECK(status[i].load() == static_cast<int>(hipSuccess));  // the memsets found their memory mapped
    CHECK(hipStreamDestroy(streams[i]) == hipSuccess);
  }
}

TEST_CASE("memory freed on many threads' streams counts at once, and is all trimmed once reached") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  set_u64(pool, hipMemPoolAttrReleaseThreshold, kKeepAll);
  constexpr int kThreads = 4;
  std::vector<hipStream_t> streams;
  for (int t = 0; t < kThreads; ++t)
    streams.push_back(make_stream(t % 2 == 0 ? hipStreamNonBlocking : hipStreamDefault));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<void*> live;
      for (int i = 0; i < 16; ++i) {
        void* ptr = nullptr;
        const std::size_t bytes = (std::size_t{1} << (8 + (i + t) % 14)) + static_cast<std::size_t>(i);
        if (hipMallocFromPoolAsync(&ptr, bytes, pool, streams[static_cast<std::size_t>(t)]) != hipSuccess) ++failures;
        live.push_back(ptr);
      }
      for (void* ptr : live) {
        if (hipFreeAsync(ptr, streams[static_cast<std::size_t>(t)]) != hipSuccess) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) > 0);
  // Half the streams live on, half are gone: the blocks on both kinds of list are released.
  for (std::size_t t = 0; t < streams.size(); ++t) {
    CHECK(hipStreamSynchronize(streams[t]) == hipSuccess);
    if (t % 2 == 0) CHECK(hipStreamDestroy(streams[t]) == hipSuccess);
  }
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  for (std::size_t t = 1; t < streams.size(); t += 2) CHECK(hipStreamDestroy(streams[t]) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// A random walk: allocations of random sizes from two pools (one reusing across streams as freely
// as the policies allow, one with every policy off) on three streams (the null stream among them),
// filled, handed between streams through events, freed on their own stream or another, read back
// and trimmed away, in random order, while the two other streams are now and then held by a gate,
// so that frees wait unreached and fills pile up behind them. Whatever reuse the pool chose, live
// blocks never overlap and each holds what its last fill wrote.

namespace {

class PoolWalk : test_support::WalkRandom {
 public:
  explicit PoolWalk(std::uint64_t seed) : WalkRandom(seed) {
    streams_ = {make_stream(hipStreamNonBlocking), make_stream(hipStreamNonBlocking), nullptr};
    pools_ = {make_pool(), make_pool()};
    set_policies(pools_[1], false, false, false);
  }
  PoolWalk(const PoolWalk&) = delete;
  PoolWalk& operator=(const PoolWalk&) = delete;
  PoolWalk(PoolWalk&&) = delete;
  PoolWalk& operator=(PoolWalk&&) = delete;
  ~PoolWalk() {
    open_all();
    for (const Block& block : live_) CHECK(hipFreeAsync(block.ptr, streams_[block.stream]) == hipSuccess);
    CHECK(hipDeviceSynchronize() == hipSuccess);
    for (hipMemPool_t pool : pools_) {
      CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
      CHECK(hipMemPoolDestroy(pool) == hipSuccess);
    }
    for (hipStream_t stream : streams_) {
      if (stream != nullptr) CHECK(hipStreamDestroy(stream) == hipSuccess);
    }
  }

  void step() {
    switch (pick(15)) {
      case 0:
      case 1:
      case 2: allocate(); break;
      case 3:
      case 4: free_one(); break;
      case 5: hand_over(); break;
      case 6:
      case 7: refill(); break;
      case 8:
      case 9: check_one(); break;
      case 10: trim(); break;
      case 11: hold(); break;
      case 12: let_go(); break;
      case 13: recycle(); break;
      default: check_counts(); break;
    }
  }

  [[nodiscard]] std::size_t checked() const noexcept { return checked_; }
  [[nodiscard]] std::size_t most_live() const noexcept { return most_live_; }

 private:
  struct Block {
    void* ptr = nullptr;
    std::size_t size = 0;
    std::size_t stream = 0;  // the stream its last use was queued on
    std::size_t pool = 0;
    unsigned char byte = 0;  // what its last fill wrote
  };

  static constexpr std::size_t kMaxLive = 48;
  static constexpr std::size_t kMaxSpent = 6;  // gates opened and not yet freed

  // Mostly one of three sizes, so that freed blocks are often reused (by size class), else any size
  // up to 2 MiB, so that the pool carves new blocks as well.
  std::size_t some_size() {
    static constexpr std::array<std::size_t, 3> kCommon{100, 4000, 65536};
    return pick(4) == 0 ? 1 + pick(std::size_t{2} << 20) : kCommon.at(pick(kCommon.size()));
  }

  // `later` waits for all work queued on `earlier` so far (nothing to do on the same stream).
  void order_after(std::size_t later, std::size_t earlier) {
    if (later == earlier) return;
    hipEvent_t event = nullptr;
    REQUIRE(hipEventCreateWithFlags(&event, hipEventDisableTiming) == hipSuccess);
    REQUIRE(hipEventRecord(event, streams_[earlier]) == hipSuccess);
    REQUIRE(hipStreamWaitEvent(streams_[later], event, 0) == hipSuccess);
    REQUIRE(hipEventDestroy(event) == hipSuccess);
  }

  void fill(Block& block) {
    block.byte = static_cast<unsigned char>(pick(256));
    REQUIRE(hipMemsetAsync(block.ptr, block.byte, block.size, streams_[block.stream]) == hipSuccess);
  }

  void allocate() {
    if (live_.size() == kMaxLive) return;
    Block block{.size = some_size(), .stream = pick(streams_.size()), .pool = pick(pools_.size())};
    block.ptr = pool_alloc(pools_[block.pool], block.size, streams_[block.stream]);
    const auto start = reinterpret_cast<std::uintptr_t>(block.ptr);
    for (const Block& other : live_) {
      const auto other_start = reinterpret_cast<std::uintptr_t>(other.ptr);
      CHECK_MESSAGE((start + block.size <= other_start || other_start + other.size <= start),
                    "a new block overlaps a live one");
    }
    fill(block);
    live_.push_back(block);
    most_live_ = std::max(most_live_, live_.size());
  }

  std::vector<Block>::iterator some_block() { return live_.begin() + static_cast<std::ptrdiff_t>(pick(live_.size())); }

  // Freed on its own stream, or on another ordered after its last use.
  void free_one() {
    if (live_.empty()) return;
    const auto block = some_block();
    const std::size_t on = pick(streams_.size());
    order_after(on, block->stream);
    REQUIRE(hipFreeAsync(block->ptr, streams_[on]) == hipSuccess);
    live_.erase(block);
  }

  // Freed on its stream and at once asked for again, same size and pool, on another stream: the
  // pool may hand the block straight back, ordered after the free however far that stream is.
  void recycle() {
    if (live_.empty()) return;
    const auto block = some_block();
    Block again{.size = block->size, .stream = pick(streams_.size()), .pool = block->pool};
    REQUIRE(hipFreeAsync(block->ptr, streams_[block->stream]) == hipSuccess);
    live_.erase(block);
    again.ptr = pool_alloc(pools_[again.pool], again.size, streams_[again.stream]);
    fill(again);
    live_.push_back(again);
  }

  // Used next on another stream, ordered after its last use there.
  void hand_over() {
    if (live_.empty()) return;
    Block& block = *some_block();
    const std::size_t to = pick(streams_.size());
    order_after(to, block.stream);
    block.stream = to;
    fill(block);
  }

  void refill() {
    if (live_.empty()) return;
    fill(*some_block());
  }

  // Holds stream 0 or 1 until let go. Not the null stream, on which a gate is made (hipMemset):
  // nor while the null stream waits for a held stream, as a hand-over may have it do.
  void hold() {
    const std::size_t stream = pick(holds_.size());
    std::unique_ptr<Gate>& gate = holds_[stream];
    if (gate || spent_.size() >= kMaxSpent || hipStreamQuery(nullptr) != hipSuccess) return;
    gate = std::make_unique<Gate>();
    gate->block(streams_[stream]);
  }

  void let_go() {
    std::unique_ptr<Gate>& gate = holds_[pick(holds_.size())];
    if (!gate) return;
    gate->open();
    spent_.push_back(std::move(gate));  // freed once nothing is held: hipFree waits for every stream
  }

  void open_all() {
    for (std::unique_ptr<Gate>& gate : holds_) {
      if (!gate) continue;
      gate->open();
      spent_.push_back(std::move(gate));
    }
    spent_.clear();
  }

  void check_one() {
    if (live_.empty()) return;
    open_all();
    const Block& block = *some_block();
    REQUIRE(hipStreamSynchronize(streams_[block.stream]) == hipSuccess);
    const std::vector<unsigned char> back = read_back(block.ptr, block.size);
    CHECK_MESSAGE(test_support::all_bytes_are(back, block.byte), "a block does not hold what its last fill wrote");
    ++checked_;
  }

  // Trims what is free and reached; live blocks stay.
  void trim() { REQUIRE(hipMemPoolTrimTo(pools_[pick(pools_.size())], 0) == hipSuccess); }

  // Used memory covers every live block; reserved memory covers used memory.
  void check_counts() {
    for (std::size_t pool = 0; pool < pools_.size(); ++pool) {
      std::uint64_t live_bytes = 0;
      for (const Block& block : live_) {
        if (block.pool == pool) live_bytes += block.size;
      }
      const std::uint64_t used = get_u64(pools_[pool], hipMemPoolAttrUsedMemCurrent);
      CHECK(used >= live_bytes);
      CHECK(get_u64(pools_[pool], hipMemPoolAttrReservedMemCurrent) >= used);
    }
  }

  std::array<hipStream_t, 3> streams_{};
  std::array<hipMemPool_t, 2> pools_{};
  std::vector<Block> live_;
  std::array<std::unique_ptr<Gate>, 2> holds_;  // streams_[0] and [1]
  std::vector<std::unique_ptr<Gate>> spent_;
  std::size_t checked_ = 0;
  std::size_t most_live_ = 0;
};

}  // namespace

TEST_CASE(
    "a random walk of allocations, fills, hand-overs and frees across pools and streams keeps every block whole") {
  LeakCheck leaks;
  TrimDefaultPools trim_defaults;
  const std::uint64_t seed = test_support::walk_seed();
  CAPTURE(seed);
  constexpr int kSteps = 4000;
  PoolWalk walk(seed);
  const int steps = test_support::take_walk(walk, kSteps, seed);
  CHECK(walk.checked() > static_cast<std::size_t>(steps / 10));
  CHECK(walk.most_live() > 16);
}

TEST_CASE("threads sharing one pool, each on its own stream: blocks never overlap and keep their fills") {
  LeakCheck leaks;
  hipMemPool_t pool = make_pool();
  constexpr int kThreads = 4;
  const int rounds = test_support::walk_steps(1500);
  std::mutex live_mutex;
  std::map<std::uintptr_t, std::size_t> live;  // every thread's blocks: start -> size
  std::atomic<int> overlaps{0};
  std::atomic<int> corrupted{0};
  std::atomic<int> refused{0};
  const auto worker = [&](int index) {
    test_support::WalkRandom random(test_support::walk_seed() + static_cast<std::uint64_t>(index));
    const auto pick = [&](std::size_t count) { return random.pick(count); };
    hipStream_t stream = nullptr;
    if (hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) != hipSuccess) {
      refused.fetch_add(1);
      return;
    }
    struct Block {
      void* ptr;
      std::size_t size;
      unsigned char byte;
    };
    std::vector<Block> mine;
    const auto forget = [&](const Block& block) {
      std::lock_guard lock{live_mutex};
      live.erase(reinterpret_cast<std::uintptr_t>(block.ptr));
    };
    for (int round = 0; round < rounds; ++round) {
      if (mine.size() < 12 && pick(3) != 0) {
        Block block{nullptr, 1 + pick(std::size_t{96} << 10), static_cast<unsigned char>(pick(256))};
        if (hipMallocFromPoolAsync(&block.ptr, block.size, pool, stream) != hipSuccess ||
            hipMemsetAsync(block.ptr, block.byte, block.size, stream) != hipSuccess) {
          refused.fetch_add(1);
          continue;
        }
        const auto start = reinterpret_cast<std::uintptr_t>(block.ptr);
        {
          std::lock_guard lock{live_mutex};
          const auto after = live.lower_bound(start);
          if ((after != live.end() && after->first < start + block.size) ||
              (after != live.begin() && std::prev(after)->first + std::prev(after)->second > start)) {
            overlaps.fetch_add(1);
          }
          live[start] = block.size;
        }
        mine.push_back(block);
      } else if (!mine.empty()) {
        const std::size_t at = pick(mine.size());
        if (pick(4) == 0) {
          // Read back once the stream is done: the fill, and nothing another thread queued since.
          std::vector<unsigned char> back(mine[at].size, 0);
          if (hipStreamSynchronize(stream) != hipSuccess ||
              hipMemcpy(back.data(), mine[at].ptr, back.size(), hipMemcpyDeviceToHost) != hipSuccess) {
            refused.fetch_add(1);
          } else if (!test_support::all_bytes_are(back, mine[at].byte)) {
            corrupted.fetch_add(1);
          }
        }
        forget(mine[at]);
        if (hipFreeAsync(mine[at].ptr, stream) != hipSuccess) refused.fetch_add(1);
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
    for (const Block& block : mine) {
      forget(block);
      if (hipFreeAsync(block.ptr, stream) != hipSuccess) refused.fetch_add(1);
    }
    if (hipStreamSynchronize(stream) != hipSuccess || hipStreamDestroy(stream) != hipSuccess) refused.fetch_add(1);
  };
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int index = 0; index < kThreads; ++index) threads.emplace_back(worker, index);
  for (std::thread& thread : threads) thread.join();
  CHECK(overlaps.load() == 0);
  CHECK(corrupted.load() == 0);
  CHECK(refused.load() == 0);
  CHECK(live.empty());
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

// A pool may serve another device's streams: hipFree of its memory waits for the streams of the
// calling thread's device too, or the block goes to the next allocation while that work still writes.
TEST_CASE("hipFree of pool memory used on a stream of the current device, from another device's pool" *
          doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  hipMemPool_t device1_pool = nullptr;
  REQUIRE(hipDeviceGetDefaultMemPool(&device1_pool, 1) == hipSuccess);
  const hipMemAccessDesc from_device0{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  REQUIRE(hipMemPoolSetAccess(device1_pool, &from_device0, 1) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  hipStream_t on_device0 = make_stream(hipStreamNonBlocking);
  void* first = nullptr;
  REQUIRE(hipMallocFromPoolAsync(&first, kBytes, device1_pool, on_device0) == hipSuccess);
  REQUIRE(hipLaunchHostFunc(
              on_device0, [](void*) { std::this_thread::sleep_for(200ms); }, nullptr) == hipSuccess);
  REQUIRE(hipMemsetAsync(first, 0xAA, kBytes, on_device0) == hipSuccess);
  CHECK(hipFree(first) == hipSuccess);
  CHECK(hipStreamQuery(on_device0) == hipSuccess);  // waited for

  REQUIRE(hipSetDevice(1) == hipSuccess);
  hipStream_t on_device1 = make_stream(hipStreamNonBlocking);
  void* second = nullptr;
  REQUIRE(hipMallocAsync(&second, kBytes, on_device1) == hipSuccess);
  REQUIRE(hipMemsetAsync(second, 0x55, kBytes, on_device1) == hipSuccess);
  REQUIRE(hipStreamSynchronize(on_device1) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  std::vector<unsigned char> back(kBytes);
  REQUIRE(hipMemcpy(back.data(), second, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(test_support::all_bytes_are(back, 0x55));
  CHECK(hipFreeAsync(second, on_device1) == hipSuccess);
  CHECK(hipStreamDestroy(on_device1) == hipSuccess);
  CHECK(hipStreamDestroy(on_device0) == hipSuccess);
  const hipMemAccessDesc revoked{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtNone};
  CHECK(hipMemPoolSetAccess(device1_pool, &revoked, 1) == hipSuccess);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
}
