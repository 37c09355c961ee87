// Managed memory: hipMallocManaged, advice and its per-page state (split and merged at the edges of
// advised sub-ranges, seen through range attributes), stream-ordered prefetches, stream attachment,
// host access; then the C++ handles (ManagedBuffer, ManagedRange). Run with HIPXX_HOST_DEVICES=3
// (see meson.build) so that accessed-by lists of several devices are observable.
#include "stream_test_support.hpp"
#include "support/bytes.hpp"
#include "support/random_walk.hpp"
#include "support/views.hpp"

#include <hipxx/managed_buffer.hpp>
#include <hipxx/stream.hpp>

#include <doctest/doctest.h>

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

template <class T, class Policy>
struct doctest::StringMaker<boost::outcome_v2::basic_result<T, std::error_code, Policy>> {
  static doctest::String convert(boost::outcome_v2::basic_result<T, std::error_code, Policy> const& value) {
    if (value.has_value()) return "success";
    return ("failure: " + value.error().message()).c_str();
  }
};

template <>
struct doctest::StringMaker<std::error_code> {
  static doctest::String convert(std::error_code const& code) {
    return (std::string(code.category().name()) + ":" + std::to_string(code.value()) + " " + code.message()).c_str();
  }
};

namespace {

std::size_t const kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

// A managed allocation freed on scope exit.
struct Managed {
  void* pointer = nullptr;
  std::size_t size = 0;
  explicit Managed(std::size_t bytes, unsigned flags = hipMemAttachGlobal) : size(bytes) {
    REQUIRE(hipMallocManaged(&pointer, bytes, flags) == hipSuccess);
    REQUIRE(pointer != nullptr);
  }
  Managed(Managed const&) = delete;
  Managed& operator=(Managed const&) = delete;
  ~Managed() {
    if (pointer != nullptr) CHECK(hipFree(pointer) == hipSuccess);
  }
  [[nodiscard]] char* at(std::size_t offset) const { return static_cast<char*>(pointer) + offset; }
};

// One int-valued attribute over [offset, offset + bytes).
int attribute(hipMemRangeAttribute which, Managed const& memory, std::size_t offset, std::size_t bytes) {
  int value = -100;
  REQUIRE(hipMemRangeGetAttribute(&value, sizeof value, which, memory.at(offset), bytes) == hipSuccess);
  return value;
}

int read_mostly(Managed const& m, std::size_t offset, std::size_t bytes) {
  return attribute(hipMemRangeAttributeReadMostly, m, offset, bytes);
}
int preferred(Managed const& m, std::size_t offset, std::size_t bytes) {
  return attribute(hipMemRangeAttributePreferredLocation, m, offset, bytes);
}
int last_prefetch(Managed const& m, std::size_t offset, std::size_t bytes) {
  return attribute(hipMemRangeAttributeLastPrefetchLocation, m, offset, bytes);
}
int coherency(Managed const& m, std::size_t offset, std::size_t bytes) {
  return attribute(hipMemRangeAttributeCoherencyMode, m, offset, bytes);
}

std::vector<int> accessed_by(Managed const& m, std::size_t offset, std::size_t bytes, std::size_t slots = 4) {
  std::vector<int> ids(slots, 12345);
  REQUIRE(hipMemRangeGetAttribute(ids.data(), slots * sizeof(int), hipMemRangeAttributeAccessedBy, m.at(offset), bytes) ==
          hipSuccess);
  return ids;
}

void advise(Managed const& m, std::size_t offset, std::size_t bytes, hipMemoryAdvise advice, int device = 0) {
  REQUIRE(hipMemAdvise(m.at(offset), bytes, advice, device) == hipSuccess);
}

using Ids = std::vector<int>;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Allocation and host access.

TEST_CASE("hipMallocManaged takes exactly hipMemAttachGlobal or hipMemAttachHost and a nonzero size") {
  stest::LeakCheck leaks;
  void* pointer = nullptr;
  for (unsigned const flags : {0U, unsigned{hipMemAttachSingle}, 3U, 0x8U, ~0U}) {
    CHECK_MESSAGE(hipMallocManaged(&pointer, kPage, flags) == hipErrorInvalidValue, "flags ", flags);
  }
  CHECK(hipMallocManaged(&pointer, 0, hipMemAttachGlobal) == hipErrorInvalidValue);
  CHECK(hipMallocManaged(nullptr, kPage, hipMemAttachGlobal) == hipErrorInvalidValue);
  CHECK(pointer == nullptr);

  hipxxBookCounts const before = stest::books();
  for (unsigned const flags : {unsigned{hipMemAttachGlobal}, unsigned{hipMemAttachHost}}) {
    REQUIRE(hipMallocManaged(&pointer, 100, flags) == hipSuccess);  // not a whole page: fine
    CHECK(stest::books().linearAllocations == before.linearAllocations + 1);
    CHECK(hipFree(pointer) == hipSuccess);
    CHECK(hipFree(pointer) == hipErrorInvalidValue);  // once only
    // Freed: no longer managed memory.
    CHECK(hipMemAdvise(pointer, 100, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);
    int value = 0;
    CHECK(hipMemRangeGetAttribute(&value, sizeof value, hipMemRangeAttributeReadMostly, pointer, 100) ==
          hipErrorInvalidValue);
  }
}

TEST_CASE("managed memory written on the host is read with hipMemcpy, and the other way") {
  stest::LeakCheck leaks;
  constexpr std::size_t kCount = 5000;  // not a whole number of pages
  Managed memory{kCount * sizeof(std::uint32_t)};
  auto* const words = static_cast<std::uint32_t*>(memory.pointer);
  std::iota(words, words + kCount, 7U);

  std::vector<std::uint32_t> back(kCount);
  REQUIRE(hipMemcpy(back.data(), memory.pointer, memory.size, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back[0] == 7U);
  CHECK(back[kCount - 1] == 7U + kCount - 1);

  std::vector<std::uint32_t> source(kCount);
  std::iota(source.begin(), source.end(), 1000U);
  REQUIRE(hipMemcpy(memory.pointer, source.data(), memory.size, hipMemcpyHostToDevice) == hipSuccess);
  CHECK(words[0] == 1000U);
  CHECK(words[kCount - 1] == 1000U + kCount - 1);

  // Device memory to and from managed memory; hipMemset; hipMemcpyDefault.
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, memory.size) == hipSuccess);
  REQUIRE(hipMemcpy(device, memory.pointer, memory.size, hipMemcpyDeviceToDevice) == hipSuccess);
  REQUIRE(hipMemset(memory.pointer, 0xAB, memory.size) == hipSuccess);
  CHECK(words[17] == 0xABABABABU);
  REQUIRE(hipMemcpy(memory.pointer, device, memory.size, hipMemcpyDefault) == hipSuccess);
  CHECK(words[kCount / 2] == 1000U + kCount / 2);
  CHECK(hipFree(device) == hipSuccess);

  // Asynchronous work on a stream, then the host reads after synchronising.
  hipStream_t const stream = stest::make_stream(hipStreamNonBlocking);
  REQUIRE(hipMemsetAsync(memory.pointer, 0x11, memory.size, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(words[kCount - 1] == 0x11111111U);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Advice over the whole allocation.

TEST_CASE("a fresh allocation has no advice") {
  stest::LeakCheck leaks;
  Managed memory{4 * kPage};
  CHECK(read_mostly(memory, 0, memory.size) == 0);
  CHECK(preferred(memory, 0, memory.size) == hipInvalidDeviceId);
  CHECK(last_prefetch(memory, 0, memory.size) == hipInvalidDeviceId);
  CHECK(coherency(memory, 0, memory.size) == hipMemRangeCoherencyModeFineGrain);
  CHECK(accessed_by(memory, 0, memory.size) == Ids{-2, -2, -2, -2});
}

TEST_CASE("every advice value, set and unset" * doctest::test_suite("devices-3")) {
  stest::LeakCheck leaks;
  Managed memory{4 * kPage};
  std::size_t const all = memory.size;

  SUBCASE("read mostly (the device argument is ignored)") {
    advise(memory, 0, all, hipMemAdviseSetReadMostly, 99);
    CHECK(read_mostly(memory, 0, all) == 1);
    advise(memory, 0, all, hipMemAdviseSetReadMostly);  // twice is fine
    CHECK(read_mostly(memory, 0, all) == 1);
    advise(memory, 0, all, hipMemAdviseUnsetReadMostly, -7);
    CHECK(read_mostly(memory, 0, all) == 0);
    advise(memory, 0, all, hipMemAdviseUnsetReadMostly);  // unset when not set is fine
    CHECK(read_mostly(memory, 0, all) == 0);
  }
  SUBCASE("preferred location: devices and the host") {
    for (int const device : {0, 1, 2, hipCpuDeviceId}) {
      advise(memory, 0, all, hipMemAdviseSetPreferredLocation, device);
      CHECK(preferred(memory, 0, all) == device);
    }
    advise(memory, 0, all, hipMemAdviseUnsetPreferredLocation, 0);
    CHECK(preferred(memory, 0, all) == hipInvalidDeviceId);
  }
  SUBCASE("accessed by: a set of devices, the host listed first") {
    advise(memory, 0, all, hipMemAdviseSetAccessedBy, 2);
    CHECK(accessed_by(memory, 0, all) == Ids{2, -2, -2, -2});
    advise(memory, 0, all, hipMemAdviseSetAccessedBy, 0);
    CHECK(accessed_by(memory, 0, all) == Ids{0, 2, -2, -2});
    advise(memory, 0, all, hipMemAdviseSetAccessedBy, hipCpuDeviceId);
    CHECK(accessed_by(memory, 0, all) == Ids{-1, 0, 2, -2});
    advise(memory, 0, all, hipMemAdviseSetAccessedBy, 1);
    CHECK(accessed_by(memory, 0, all) == Ids{-1, 0, 1, 2});
    advise(memory, 0, all, hipMemAdviseSetAccessedBy, 1);  // a set: no duplicates
    CHECK(accessed_by(memory, 0, all, 5) == Ids{-1, 0, 1, 2, -2});
    advise(memory, 0, all, hipMemAdviseUnsetAccessedBy, 0);
    CHECK(accessed_by(memory, 0, all) == Ids{-1, 1, 2, -2});
    advise(memory, 0, all, hipMemAdviseUnsetAccessedBy, hipCpuDeviceId);
    CHECK(accessed_by(memory, 0, all) == Ids{1, 2, -2, -2});
    advise(memory, 0, all, hipMemAdviseUnsetAccessedBy, 1);
    advise(memory, 0, all, hipMemAdviseUnsetAccessedBy, 2);
    CHECK(accessed_by(memory, 0, all) == Ids{-2, -2, -2, -2});
  }
  SUBCASE("coarse grain") {
    advise(memory, 0, all, hipMemAdviseSetCoarseGrain);
    CHECK(coherency(memory, 0, all) == hipMemRangeCoherencyModeCoarseGrain);
    advise(memory, 0, all, hipMemAdviseUnsetCoarseGrain);
    CHECK(coherency(memory, 0, all) == hipMemRangeCoherencyModeFineGrain);
  }
  SUBCASE("each kind of advice leaves the others alone") {
    advise(memory, 0, all, hipMemAdviseSetReadMostly);
    advise(memory, 0, all, hipMemAdviseSetPreferredLocation, 1);
    advise(memory, 0, all, hipMemAdviseSetAccessedBy, 2);
    advise(memory, 0, all, hipMemAdviseSetCoarseGrain);
    CHECK(read_mostly(memory, 0, all) == 1);
    CHECK(preferred(memory, 0, all) == 1);
    CHECK(accessed_by(memory, 0, all) == Ids{2, -2, -2, -2});
    CHECK(coherency(memory, 0, all) == hipMemRangeCoherencyModeCoarseGrain);
    advise(memory, 0, all, hipMemAdviseUnsetPreferredLocation, 0);
    CHECK(read_mostly(memory, 0, all) == 1);
    CHECK(accessed_by(memory, 0, all) == Ids{2, -2, -2, -2});
    CHECK(coherency(memory, 0, all) == hipMemRangeCoherencyModeCoarseGrain);
    CHECK(last_prefetch(memory, 0, all) == hipInvalidDeviceId);
  }
}

// ---------------------------------------------------------------------------------------------
// Sub-ranges: the per-page state splits at the edges of advice and merges back.

TEST_CASE("advice on the middle third: the whole range is mixed, each third answers for itself" * doctest::test_suite("devices-3")) {
  stest::LeakCheck leaks;
  std::size_t const third = 3 * kPage;
  Managed memory{3 * third};
  std::size_t const all = memory.size;

  SUBCASE("read mostly") {
    advise(memory, third, third, hipMemAdviseSetReadMostly);
    CHECK(read_mostly(memory, 0, all) == 0);  // 1 only when every page is
    CHECK(read_mostly(memory, 0, third) == 0);
    CHECK(read_mostly(memory, third, third) == 1);
    CHECK(read_mostly(memory, 2 * third, third) == 0);
    // One page either side of the edges.
    CHECK(read_mostly(memory, third - kPage, kPage) == 0);
    CHECK(read_mostly(memory, 2 * third, kPage) == 0);
    CHECK(read_mostly(memory, third, 1) == 1);
    CHECK(read_mostly(memory, 2 * third - 1, 1) == 1);
    // Filling in the rest merges to all pages read-mostly.
    advise(memory, 0, third, hipMemAdviseSetReadMostly);
    advise(memory, 2 * third, third, hipMemAdviseSetReadMostly);
    CHECK(read_mostly(memory, 0, all) == 1);
    // Unsetting a page inside splits again.
    advise(memory, 4 * kPage, kPage, hipMemAdviseUnsetReadMostly);
    CHECK(read_mostly(memory, 0, all) == 0);
    CHECK(read_mostly(memory, 0, 4 * kPage) == 1);
    CHECK(read_mostly(memory, 5 * kPage, all - 5 * kPage) == 1);
  }
  SUBCASE("preferred location") {
    advise(memory, third, third, hipMemAdviseSetPreferredLocation, 1);
    CHECK(preferred(memory, 0, all) == hipInvalidDeviceId);  // mixed
    CHECK(preferred(memory, 0, third) == hipInvalidDeviceId);  // never set
    CHECK(preferred(memory, third, third) == 1);
    CHECK(preferred(memory, 2 * third, third) == hipInvalidDeviceId);

    advise(memory, 0, all, hipMemAdviseSetPreferredLocation, 2);
    advise(memory, third, third, hipMemAdviseSetPreferredLocation, hipCpuDeviceId);
    CHECK(preferred(memory, 0, all) == hipInvalidDeviceId);
    CHECK(preferred(memory, 0, third) == 2);
    CHECK(preferred(memory, third, third) == hipCpuDeviceId);
    CHECK(preferred(memory, 2 * third, third) == 2);
    CHECK(preferred(memory, third - 1, 2) == hipInvalidDeviceId);  // straddles an edge
    // Putting the middle back to the same value as its neighbours merges the whole.
    advise(memory, third, third, hipMemAdviseSetPreferredLocation, 2);
    CHECK(preferred(memory, 0, all) == 2);
    advise(memory, third, third, hipMemAdviseUnsetPreferredLocation, 0);
    CHECK(preferred(memory, 0, all) == hipInvalidDeviceId);
    CHECK(preferred(memory, third, third) == hipInvalidDeviceId);
    CHECK(preferred(memory, 0, third) == 2);
  }
  SUBCASE("accessed by: only devices advised over the whole range are listed") {
    advise(memory, 0, all, hipMemAdviseSetAccessedBy, 0);
    advise(memory, third, third, hipMemAdviseSetAccessedBy, 2);
    advise(memory, third, third, hipMemAdviseSetAccessedBy, hipCpuDeviceId);
    CHECK(accessed_by(memory, 0, all) == Ids{0, -2, -2, -2});
    CHECK(accessed_by(memory, 0, third) == Ids{0, -2, -2, -2});
    CHECK(accessed_by(memory, third, third) == Ids{-1, 0, 2, -2});
    CHECK(accessed_by(memory, 2 * third, third) == Ids{0, -2, -2, -2});
    CHECK(accessed_by(memory, third, 2 * third) == Ids{0, -2, -2, -2});
    advise(memory, 0, all, hipMemAdviseUnsetAccessedBy, 0);
    CHECK(accessed_by(memory, 0, all) == Ids{-2, -2, -2, -2});
    CHECK(accessed_by(memory, third, third) == Ids{-1, 2, -2, -2});
  }
  SUBCASE("coherency") {
    advise(memory, third, third, hipMemAdviseSetCoarseGrain);
    CHECK(coherency(memory, 0, all) == hipMemRangeCoherencyModeIndeterminate);
    CHECK(coherency(memory, 0, third) == hipMemRangeCoherencyModeFineGrain);
    CHECK(coherency(memory, third, third) == hipMemRangeCoherencyModeCoarseGrain);
    CHECK(coherency(memory, 2 * third, third) == hipMemRangeCoherencyModeFineGrain);
    advise(memory, third, third, hipMemAdviseUnsetCoarseGrain);
    CHECK(coherency(memory, 0, all) == hipMemRangeCoherencyModeFineGrain);
  }
}

TEST_CASE("advice rounds out to whole pages") {
  stest::LeakCheck leaks;
  Managed memory{5 * kPage};
  // Ten bytes inside page 2: the whole of page 2, nothing else.
  advise(memory, 2 * kPage + 100, 10, hipMemAdviseSetReadMostly);
  CHECK(read_mostly(memory, 2 * kPage, kPage) == 1);
  CHECK(read_mostly(memory, kPage, kPage) == 0);
  CHECK(read_mostly(memory, 3 * kPage, kPage) == 0);
  // Straddling the edge between pages 3 and 4: both.
  advise(memory, 4 * kPage - 1, 2, hipMemAdviseSetCoarseGrain);
  CHECK(coherency(memory, 3 * kPage, 2 * kPage) == hipMemRangeCoherencyModeCoarseGrain);
  CHECK(coherency(memory, 2 * kPage, kPage) == hipMemRangeCoherencyModeFineGrain);
  // Queries need not be page aligned either.
  CHECK(read_mostly(memory, 2 * kPage + 4000 % kPage, 1) == 1);
  CHECK(coherency(memory, 3 * kPage + 1, 3) == hipMemRangeCoherencyModeCoarseGrain);
}

TEST_CASE("AccessedBy result buffers: size is a multiple of 4; fewer slots keep the first ids" * doctest::test_suite("devices-3")) {
  stest::LeakCheck leaks;
  Managed memory{2 * kPage};
  for (int const device : {hipCpuDeviceId, 0, 1, 2}) advise(memory, 0, memory.size, hipMemAdviseSetAccessedBy, device);
  CHECK(accessed_by(memory, 0, memory.size, 6) == Ids{-1, 0, 1, 2, -2, -2});
  CHECK(accessed_by(memory, 0, memory.size, 4) == Ids{-1, 0, 1, 2});
  CHECK(accessed_by(memory, 0, memory.size, 2) == Ids{-1, 0});
  CHECK(accessed_by(memory, 0, memory.size, 1) == Ids{-1});
  std::array<int, 4> ids{};
  for (std::size_t const size : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{5}, std::size_t{15}}) {
    CHECK_MESSAGE(hipMemRangeGetAttribute(ids.data(), size, hipMemRangeAttributeAccessedBy, memory.pointer, memory.size) ==
                      hipErrorInvalidValue,
                  "data_size ", size);
  }
}

TEST_CASE("an allocation smaller than a page: a range may run to the end of its page, not past it") {
  stest::LeakCheck leaks;
  Managed memory{100};
  advise(memory, 0, kPage, hipMemAdviseSetReadMostly);
  CHECK(read_mostly(memory, 0, kPage) == 1);
  CHECK(read_mostly(memory, 0, memory.size) == 1);
  REQUIRE(hipMemPrefetchAsync(memory.pointer, kPage, 0, nullptr) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(last_prefetch(memory, 0, kPage) == 0);
  CHECK(hipMemAdvise(memory.pointer, kPage + 1, hipMemAdviseSetCoarseGrain, 0) == hipErrorInvalidValue);
  CHECK(hipMemPrefetchAsync(memory.pointer, kPage + 1, 0, nullptr) == hipErrorInvalidValue);
  int value = -1;
  CHECK(hipMemRangeGetAttribute(&value, sizeof value, hipMemRangeAttributeReadMostly, memory.pointer, kPage + 1) ==
        hipErrorInvalidValue);
  CHECK(value == -1);
  CHECK(coherency(memory, 0, kPage) == hipMemRangeCoherencyModeFineGrain);
}

TEST_CASE("bad advice: values, devices, pointers and ranges") {
  stest::LeakCheck leaks;
  Managed memory{4 * kPage};
  Managed neighbour{4 * kPage};
  void* const p = memory.pointer;

  for (int const value : {0, 7, 99, 102, -1}) {
    CHECK_MESSAGE(hipMemAdvise(p, kPage, static_cast<hipMemoryAdvise>(value), 0) == hipErrorInvalidValue, "advice ",
                  value);
  }
  for (hipMemoryAdvise const advice : {hipMemAdviseSetPreferredLocation, hipMemAdviseUnsetPreferredLocation,
                                       hipMemAdviseSetAccessedBy, hipMemAdviseUnsetAccessedBy}) {
    for (int const device : {3, 64, hipInvalidDeviceId, -3}) {
      CHECK_MESSAGE(hipMemAdvise(p, kPage, advice, device) == hipErrorInvalidValue, "advice ", advice, " device ",
                    device);
    }
  }
  CHECK(hipMemAdvise(nullptr, kPage, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);
  CHECK(hipMemAdvise(p, 0, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);
  CHECK(hipMemAdvise(p, memory.size + 1, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);
  CHECK(hipMemAdvise(memory.at(kPage), memory.size, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);
  CHECK(hipMemAdvise(p, SIZE_MAX, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);

  void* device = nullptr;
  REQUIRE(hipMalloc(&device, kPage) == hipSuccess);
  CHECK(hipMemAdvise(device, kPage, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);
  std::vector<char> host(kPage);
  CHECK(hipMemAdvise(host.data(), kPage, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);

  // A range that runs from one managed allocation into the next, if they happen to be adjacent,
  // is still not inside one allocation.
  auto const lo = std::min(memory.pointer, neighbour.pointer);
  CHECK(hipMemAdvise(lo, 8 * kPage, hipMemAdviseSetReadMostly, 0) == hipErrorInvalidValue);

  // Nothing changed through all the refusals.
  CHECK(read_mostly(memory, 0, memory.size) == 0);
  CHECK(preferred(memory, 0, memory.size) == hipInvalidDeviceId);
  CHECK(accessed_by(memory, 0, memory.size) == Ids{-2, -2, -2, -2});
  CHECK(hipFree(device) == hipSuccess);
}

TEST_CASE("bad range queries: sizes, attributes, pointers") {
  stest::LeakCheck leaks;
  Managed memory{2 * kPage};
  void* const p = memory.pointer;
  std::array<int, 4> data{};

  for (hipMemRangeAttribute const which : {hipMemRangeAttributeReadMostly, hipMemRangeAttributePreferredLocation,
                                           hipMemRangeAttributeLastPrefetchLocation, hipMemRangeAttributeCoherencyMode}) {
    for (std::size_t const size : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{8}, std::size_t{16}}) {
      CHECK_MESSAGE(hipMemRangeGetAttribute(data.data(), size, which, p, kPage) == hipErrorInvalidValue, "attribute ",
                    which, " size ", size);
    }
    CHECK(hipMemRangeGetAttribute(nullptr, sizeof(int), which, p, kPage) == hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttribute(data.data(), sizeof(int), which, nullptr, kPage) == hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttribute(data.data(), sizeof(int), which, p, 0) == hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttribute(data.data(), sizeof(int), which, p, memory.size + 1) == hipErrorInvalidValue);
  }
  for (int const unknown : {0, 5, 99, 101}) {
    CHECK(hipMemRangeGetAttribute(data.data(), sizeof(int), static_cast<hipMemRangeAttribute>(unknown), p, kPage) ==
          hipErrorInvalidValue);
  }
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, kPage) == hipSuccess);
  CHECK(hipMemRangeGetAttribute(data.data(), sizeof(int), hipMemRangeAttributeReadMostly, device, kPage) ==
        hipErrorInvalidValue);
  CHECK(hipFree(device) == hipSuccess);
}

TEST_CASE(
    "hipMemRangeGetAttributes reads a long request from the caller's arrays: no copy to fail, the first bad entry "
    "refused") {
  Managed memory{kPage};
  // Arrays of 2^33 requests (their pages never touched past the first, so never backed): the first
  // names ReadMostly, the second has no destination. A copy of them (192 GiB) would not fit in memory.
  constexpr std::size_t kCount = std::size_t{1} << 33;
  constexpr std::size_t kSpan = kCount * sizeof(void*);
  void* const arrays =
      mmap(nullptr, 3 * kSpan, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(arrays != MAP_FAILED);
  auto* const data = static_cast<void**>(arrays);
  auto* const sizes = reinterpret_cast<std::size_t*>(static_cast<char*>(arrays) + kSpan);
  auto* const which = reinterpret_cast<hipMemRangeAttribute*>(static_cast<char*>(arrays) + 2 * kSpan);
  int read_mostly_value = 12345;
  data[0] = &read_mostly_value;
  sizes[0] = sizeof read_mostly_value;
  which[0] = hipMemRangeAttributeReadMostly;
  CHECK(hipMemRangeGetAttributes(data, sizes, which, kCount, memory.pointer, kPage) == hipErrorInvalidValue);
  CHECK(read_mostly_value == 12345);  // nothing written where one request cannot be answered
  CHECK(hipMemRangeGetAttributes(data, sizes, which, 1, memory.pointer, kPage) == hipSuccess);
  CHECK(read_mostly_value == 0);
  CHECK(munmap(arrays, 3 * kSpan) == 0);
}

TEST_CASE("hipMemRangeGetAttributes: all five attributes in one call" * doctest::test_suite("devices-3")) {
  stest::LeakCheck leaks;
  Managed memory{6 * kPage};
  advise(memory, 0, memory.size, hipMemAdviseSetReadMostly);
  advise(memory, 0, memory.size, hipMemAdviseSetPreferredLocation, 2);
  advise(memory, 0, memory.size, hipMemAdviseSetAccessedBy, 1);
  advise(memory, 0, memory.size, hipMemAdviseSetAccessedBy, hipCpuDeviceId);
  advise(memory, 0, 3 * kPage, hipMemAdviseSetCoarseGrain);
  REQUIRE(hipMemPrefetchAsync(memory.pointer, memory.size, 0, nullptr) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);

  int read_mostly_value = -100;
  int preferred_value = -100;
  int last_prefetch_value = -100;
  int coherency_value = -100;
  std::array<int, 4> ids{};
  std::array<void*, 5> data{&read_mostly_value, &preferred_value, ids.data(), &last_prefetch_value, &coherency_value};
  std::array<std::size_t, 5> sizes{sizeof(int), sizeof(int), sizeof ids, sizeof(int), sizeof(int)};
  std::array<hipMemRangeAttribute, 5> which{hipMemRangeAttributeReadMostly, hipMemRangeAttributePreferredLocation,
                                            hipMemRangeAttributeAccessedBy, hipMemRangeAttributeLastPrefetchLocation,
                                            hipMemRangeAttributeCoherencyMode};

  SUBCASE("over the whole range") {
    REQUIRE(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 5, memory.pointer, memory.size) ==
            hipSuccess);
    CHECK(read_mostly_value == 1);
    CHECK(preferred_value == 2);
    CHECK(ids == std::array<int, 4>{-1, 1, -2, -2});
    CHECK(last_prefetch_value == 0);
    CHECK(coherency_value == hipMemRangeCoherencyModeIndeterminate);
  }
  SUBCASE("over the coarse-grain half") {
    REQUIRE(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 5, memory.pointer, 3 * kPage) ==
            hipSuccess);
    CHECK(coherency_value == hipMemRangeCoherencyModeCoarseGrain);
    CHECK(read_mostly_value == 1);
  }
  SUBCASE("the same attribute twice, in any order") {
    std::array<hipMemRangeAttribute, 2> twice{hipMemRangeAttributeCoherencyMode, hipMemRangeAttributeCoherencyMode};
    std::array<void*, 2> out{&coherency_value, &preferred_value};
    std::array<std::size_t, 2> out_sizes{sizeof(int), sizeof(int)};
    REQUIRE(hipMemRangeGetAttributes(out.data(), out_sizes.data(), twice.data(), 2, memory.at(3 * kPage), 3 * kPage) ==
            hipSuccess);
    CHECK(coherency_value == hipMemRangeCoherencyModeFineGrain);
    CHECK(preferred_value == hipMemRangeCoherencyModeFineGrain);
  }
  SUBCASE("refusals") {
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 0, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    // A count no array can hold.
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), SIZE_MAX, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttributes(nullptr, sizes.data(), which.data(), 5, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttributes(data.data(), nullptr, which.data(), 5, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), nullptr, 5, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 5, nullptr, memory.size) ==
          hipErrorInvalidValue);
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 5, memory.pointer, 0) ==
          hipErrorInvalidValue);
    sizes[3] = 8;  // one wrong size among right ones
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 5, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    sizes[3] = sizeof(int);
    data[1] = nullptr;
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 5, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    data[1] = &preferred_value;
    which[4] = static_cast<hipMemRangeAttribute>(99);
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 5, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    sizes[2] = 0;
    CHECK(hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), 3, memory.pointer, memory.size) ==
          hipErrorInvalidValue);
    // A refused call writes nothing, not even the answers before the one it refuses.
    CHECK(read_mostly_value == -100);
    CHECK(preferred_value == -100);
    CHECK(ids == std::array<int, 4>{});
    CHECK(last_prefetch_value == -100);
    CHECK(coherency_value == -100);
  }
}

// ---------------------------------------------------------------------------------------------
// Prefetch.

TEST_CASE("prefetch is stream ordered: LastPrefetchLocation changes only when the stream gets there" * doctest::test_suite("devices-3")) {
  stest::LeakCheck leaks;
  Managed memory{8 * kPage};
  hipStream_t const stream = stest::make_stream(hipStreamNonBlocking);
  {
    stest::Gate gate;
    gate.block(stream);
    REQUIRE(hipMemPrefetchAsync(memory.pointer, memory.size, 1, stream) == hipSuccess);
    REQUIRE(hipMemPrefetchAsync(memory.at(4 * kPage), 4 * kPage, 2, stream) == hipSuccess);
    CHECK(stest::still_pending(stream));
    CHECK(last_prefetch(memory, 0, memory.size) == hipInvalidDeviceId);
    CHECK(last_prefetch(memory, 0, kPage) == hipInvalidDeviceId);
    // Advice is not stream ordered: it applies at once even while the stream is held.
    advise(memory, 0, memory.size, hipMemAdviseSetReadMostly);
    CHECK(read_mostly(memory, 0, memory.size) == 1);
    std::this_thread::sleep_for(stest::kSettle);
    CHECK(last_prefetch(memory, 0, memory.size) == hipInvalidDeviceId);
    gate.open();
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  }
  CHECK(last_prefetch(memory, 0, 4 * kPage) == 1);
  CHECK(last_prefetch(memory, 4 * kPage, 4 * kPage) == 2);
  CHECK(last_prefetch(memory, 0, memory.size) == hipInvalidDeviceId);  // mixed
  CHECK(last_prefetch(memory, 4 * kPage - 1, 2) == hipInvalidDeviceId);

  // To the host on the null stream, unaligned: rounds out to whole pages like advice.
  REQUIRE(hipMemPrefetchAsync(memory.at(10), memory.size - 20, hipCpuDeviceId, nullptr) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(last_prefetch(memory, 0, memory.size) == hipCpuDeviceId);
  // Prefetching changed no advice.
  CHECK(read_mostly(memory, 0, memory.size) == 1);
  CHECK(preferred(memory, 0, memory.size) == hipInvalidDeviceId);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("bad prefetches are refused at the call") {
  stest::LeakCheck leaks;
  Managed memory{2 * kPage};
  for (int const device : {3, 100, hipInvalidDeviceId, -3}) {
    CHECK(hipMemPrefetchAsync(memory.pointer, memory.size, device, nullptr) == hipErrorInvalidValue);
  }
  CHECK(hipMemPrefetchAsync(nullptr, kPage, 0, nullptr) == hipErrorInvalidValue);
  CHECK(hipMemPrefetchAsync(memory.pointer, 0, 0, nullptr) == hipErrorInvalidValue);
  CHECK(hipMemPrefetchAsync(memory.pointer, memory.size + 1, 0, nullptr) == hipErrorInvalidValue);
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, kPage) == hipSuccess);
  CHECK(hipMemPrefetchAsync(device, kPage, 0, nullptr) == hipErrorInvalidValue);
  CHECK(hipFree(device) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(last_prefetch(memory, 0, memory.size) == hipInvalidDeviceId);
}

// ROCm 7's hipMemLocation forms name the same places: a device by ordinal, the host in three ways.
TEST_CASE("hipMemPrefetchAsync_v2 and hipMemAdvise_v2 take a device or the host as a hipMemLocation") {
  stest::LeakCheck leaks;
  Managed memory{4 * kPage};
  hipMemLocation const device0{hipMemLocationTypeDevice, 0};
  hipMemLocation const host{hipMemLocationTypeHost, 12345};  // the id of a host location is not read
  hipMemLocation const node0{hipMemLocationTypeHostNuma, 0};
  hipMemLocation const this_node{hipMemLocationTypeHostNumaCurrent, 0};

  REQUIRE(hipMemPrefetchAsync_v2(memory.pointer, memory.size, device0, 0, nullptr) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(last_prefetch(memory, 0, memory.size) == 0);
  for (hipMemLocation const& place : {host, node0, this_node}) {
    CAPTURE(place.type);
    REQUIRE(hipMemPrefetchAsync_v2(memory.pointer, memory.size, device0, 0, nullptr) == hipSuccess);
    REQUIRE(hipMemPrefetchAsync_v2(memory.at(kPage), kPage, place, 0, nullptr) == hipSuccess);
    REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
    CHECK(last_prefetch(memory, 0, kPage) == 0);
    CHECK(last_prefetch(memory, kPage, kPage) == hipCpuDeviceId);
  }

  REQUIRE(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseSetPreferredLocation, device0) == hipSuccess);
  CHECK(preferred(memory, 0, memory.size) == 0);
  REQUIRE(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseSetPreferredLocation, node0) == hipSuccess);
  CHECK(preferred(memory, 0, memory.size) == hipCpuDeviceId);
  REQUIRE(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseSetAccessedBy, host) == hipSuccess);
  REQUIRE(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseSetAccessedBy, device0) == hipSuccess);
  CHECK(accessed_by(memory, 0, memory.size) == Ids{hipCpuDeviceId, 0, hipInvalidDeviceId, hipInvalidDeviceId});
  REQUIRE(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseUnsetAccessedBy, this_node) == hipSuccess);
  CHECK(accessed_by(memory, 0, memory.size) == Ids{0, hipInvalidDeviceId, hipInvalidDeviceId, hipInvalidDeviceId});
  // Read-mostly advice names no location: whatever the location says is not read.
  REQUIRE(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseSetReadMostly,
                          hipMemLocation{hipMemLocationTypeInvalid, -7}) == hipSuccess);
  CHECK(read_mostly(memory, 0, memory.size) == 1);

  int devices = 0;
  REQUIRE(hipGetDeviceCount(&devices) == hipSuccess);
  // Locations that name nothing: refused, and nothing changes.
  for (hipMemLocation const& nowhere :
       {hipMemLocation{hipMemLocationTypeInvalid, 0}, hipMemLocation{static_cast<hipMemLocationType>(5), 0},
        hipMemLocation{hipMemLocationTypeDevice, -1}, hipMemLocation{hipMemLocationTypeDevice, devices},
        hipMemLocation{hipMemLocationTypeHostNuma, -1}, hipMemLocation{hipMemLocationTypeHostNuma, 1 << 20}}) {
    CAPTURE(nowhere.type);
    CAPTURE(nowhere.id);
    CHECK(hipMemPrefetchAsync_v2(memory.pointer, memory.size, nowhere, 0, nullptr) == hipErrorInvalidValue);
    CHECK(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseSetPreferredLocation, nowhere) ==
          hipErrorInvalidValue);
    CHECK(hipMemAdvise_v2(memory.pointer, memory.size, hipMemAdviseSetAccessedBy, nowhere) == hipErrorInvalidValue);
  }
  // Flags are for later use and must be zero; the other arguments are checked as the id forms check them.
  CHECK(hipMemPrefetchAsync_v2(memory.pointer, memory.size, host, 1, nullptr) == hipErrorInvalidValue);
  CHECK(hipMemPrefetchAsync_v2(nullptr, kPage, host, 0, nullptr) == hipErrorInvalidValue);
  CHECK(hipMemPrefetchAsync_v2(memory.pointer, memory.size + 1, device0, 0, nullptr) == hipErrorInvalidValue);
  CHECK(hipMemAdvise_v2(memory.pointer, 0, hipMemAdviseSetPreferredLocation, device0) == hipErrorInvalidValue);
  CHECK(hipMemAdvise_v2(memory.pointer, memory.size, static_cast<hipMemoryAdvise>(7), device0) == hipErrorInvalidValue);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(last_prefetch(memory, 0, kPage) == 0);
  CHECK(last_prefetch(memory, kPage, kPage) == hipCpuDeviceId);
  CHECK(preferred(memory, 0, memory.size) == hipCpuDeviceId);
  CHECK(accessed_by(memory, 0, memory.size) == Ids{0, hipInvalidDeviceId, hipInvalidDeviceId, hipInvalidDeviceId});
  CHECK(read_mostly(memory, 0, memory.size) == 1);
}

// ---------------------------------------------------------------------------------------------
// Stream attachment.

TEST_CASE("hipStreamAttachMemAsync: system-allocated memory, where the device uses it unregistered") {
  // "dev_ptr: pointer to managed memory or to a valid host-accessible region of system-allocated
  // memory". Such a region has no size the runtime could look up, so it comes with its length.
  stest::LeakCheck leaks;
  int pageable = -1;
  REQUIRE(hipDeviceGetAttribute(&pageable, hipDeviceAttributePageableMemoryAccess, 0) == hipSuccess);
  REQUIRE((pageable == 0 || pageable == 1));
  int host_tables = -1;
  REQUIRE(hipDeviceGetAttribute(&host_tables, hipDeviceAttributePageableMemoryAccessUsesHostPageTables, 0) ==
          hipSuccess);
  CHECK((host_tables == 0 || host_tables == 1));
  const hipError_t where_usable = pageable == 1 ? hipSuccess : hipErrorInvalidValue;
  hipStream_t const stream = stest::make_stream();
  std::vector<unsigned char> system(3 * kPage + 5, 0x21);
  for (unsigned const flags :
       {unsigned{hipMemAttachSingle}, unsigned{hipMemAttachHost}, unsigned{hipMemAttachGlobal}}) {
    CHECK(hipStreamAttachMemAsync(stream, system.data(), system.size(), flags) == where_usable);
    CHECK(hipStreamAttachMemAsync(stream, system.data() + 7, 100, flags) == where_usable);
  }
  CHECK(hipStreamAttachMemAsync(stream, system.data(), 0, hipMemAttachSingle) == hipErrorInvalidValue);
  CHECK(hipStreamAttachMemAsync(stream, system.data(), system.size(), 0) == hipErrorInvalidValue);
  // A range that runs off the end of the address space, and one the process no longer has.
  CHECK(hipStreamAttachMemAsync(stream, system.data(), SIZE_MAX, hipMemAttachSingle) == hipErrorInvalidValue);
  void* gone = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(gone != MAP_FAILED);
  REQUIRE(munmap(gone, 2 * kPage) == 0);
  CHECK(hipStreamAttachMemAsync(stream, gone, kPage, hipMemAttachSingle) == hipErrorInvalidValue);
  // Memory of the runtime's own is not system memory, whatever length is named.
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, kPage) == hipSuccess);
  CHECK(hipStreamAttachMemAsync(stream, device, kPage, hipMemAttachSingle) == hipErrorInvalidValue);
  CHECK(hipFree(device) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(test_support::all_bytes_are(system, 0x21));
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipStreamAttachMemAsync: the base of a managed allocation, whole, with a known flag") {
  stest::LeakCheck leaks;
  Managed memory{3 * kPage + 8};
  Managed host_attached{kPage, hipMemAttachHost};
  hipStream_t const stream = stest::make_stream(hipStreamNonBlocking);

  for (unsigned const flags :
       {unsigned{hipMemAttachSingle}, unsigned{hipMemAttachHost}, unsigned{hipMemAttachGlobal}}) {
    CHECK(hipStreamAttachMemAsync(stream, memory.pointer, 0, flags) == hipSuccess);
    CHECK(hipStreamAttachMemAsync(stream, memory.pointer, memory.size, flags) == hipSuccess);
    CHECK(hipStreamAttachMemAsync(nullptr, memory.pointer, 0, flags) == hipSuccess);
  }
  CHECK(hipStreamAttachMemAsync(stream, host_attached.pointer, 0, hipMemAttachSingle) == hipSuccess);

  for (unsigned const flags : {0U, 3U, 8U, ~0U}) {
    CHECK(hipStreamAttachMemAsync(stream, memory.pointer, 0, flags) == hipErrorInvalidValue);
  }
  CHECK(hipStreamAttachMemAsync(stream, memory.pointer, kPage, hipMemAttachSingle) == hipErrorInvalidValue);
  CHECK(hipStreamAttachMemAsync(stream, memory.pointer, memory.size + 1, hipMemAttachSingle) == hipErrorInvalidValue);
  CHECK(hipStreamAttachMemAsync(stream, memory.at(kPage), 0, hipMemAttachSingle) == hipErrorInvalidValue);
  CHECK(hipStreamAttachMemAsync(stream, nullptr, 0, hipMemAttachSingle) == hipErrorInvalidValue);
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, kPage) == hipSuccess);
  CHECK(hipStreamAttachMemAsync(stream, device, 0, hipMemAttachSingle) == hipErrorInvalidValue);
  CHECK(hipFree(device) == hipSuccess);

  // Queued behind a held stream, the attach waits its turn like any other work.
  {
    stest::Gate gate;
    gate.block(stream);
    CHECK(hipStreamAttachMemAsync(stream, memory.pointer, 0, hipMemAttachSingle) == hipSuccess);
    CHECK(stest::still_pending(stream));
    gate.open();
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
  }
  // The memory stays usable from the host and by copies after attaching.
  std::memset(memory.pointer, 0x5C, memory.size);
  std::vector<unsigned char> back(memory.size);
  REQUIRE(hipMemcpy(back.data(), memory.pointer, memory.size, hipMemcpyDefault) == hipSuccess);
  CHECK(back[memory.size - 1] == 0x5C);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipFree of managed memory with prefetches still queued waits for them" * doctest::test_suite("devices-2")) {
  stest::LeakCheck leaks;
  void* pointer = nullptr;
  REQUIRE(hipMallocManaged(&pointer, 4 * kPage, hipMemAttachGlobal) == hipSuccess);
  hipStream_t const stream = stest::make_stream();
  stest::Gate gate;
  gate.block(stream);
  REQUIRE(hipMemPrefetchAsync(pointer, 4 * kPage, 1, stream) == hipSuccess);
  std::thread opener = gate.open_later(std::chrono::milliseconds{30});
  CHECK(hipFree(pointer) == hipSuccess);  // returns once the stream is past the prefetch
  opener.join();
  CHECK(hipStreamQuery(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

namespace {
// Four pages of managed memory, and a stream of device 1 that `gate` holds; device 0 is current again.
std::pair<void*, hipStream_t> managed_and_held_stream_of_device_1(stest::Gate& gate) {
  void* pointer = nullptr;
  REQUIRE(hipMallocManaged(&pointer, 4 * kPage, hipMemAttachGlobal) == hipSuccess);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  hipStream_t const stream = stest::make_stream();
  REQUIRE(hipSetDevice(0) == hipSuccess);
  gate.block(stream);
  return {pointer, stream};
}
}  // namespace

TEST_CASE("a prefetch queued before hipFree does not reach the next allocation at that address" *
          doctest::test_suite("host-only")) {
  // hipFree waits for the memory's own device. A prefetch queued on another device's stream may
  // still be waiting then, and the books must not record it on whatever is allocated next at the
  // same address (nor an attach queued the same way). Host-only (with two host devices, as the
  // suite runs it): on a GPU the prefetch of freed memory is an illegal address that leaves the
  // device's context unusable for the rest of the process (two H200s, 2026-11-24), so there the
  // case is the application's error, as CUDA defines it.
  stest::LeakCheck leaks;
  stest::Gate gate;
  auto const [pointer, other_device] = managed_and_held_stream_of_device_1(gate);
  REQUIRE(hipMemPrefetchAsync(pointer, 4 * kPage, 1, other_device) == hipSuccess);
  REQUIRE(hipStreamAttachMemAsync(other_device, pointer, 0, hipMemAttachHost) == hipSuccess);
  CHECK(hipFree(pointer) == hipSuccess);
  void* next = nullptr;
  REQUIRE(hipMallocManaged(&next, 4 * kPage, hipMemAttachGlobal) == hipSuccess);
  gate.open();
  REQUIRE(hipStreamSynchronize(other_device) == hipSuccess);
  if (next != pointer) MESSAGE("the next allocation came at another address: nothing to mix up this time");
  int last_prefetch = 7;
  REQUIRE(hipMemRangeGetAttribute(&last_prefetch, sizeof last_prefetch, hipMemRangeAttributeLastPrefetchLocation, next,
                                  4 * kPage) == hipSuccess);
  CHECK(last_prefetch == hipInvalidDeviceId);
  CHECK(hipFree(next) == hipSuccess);
  CHECK(hipStreamDestroy(other_device) == hipSuccess);
}

TEST_CASE("a prefetch to the host queued before hipFree moves nothing once its memory is gone" *
          doctest::test_suite("host-only")) {
  // As above, a prefetch on another device's stream outlives the memory. Where the stream's work
  // runs on its host thread, it finds the memory gone and does nothing; a device queue reaches the
  // freed range as a GPU would, an illegal address. Never an out-of-memory error, and no advice
  // given to whatever is mapped there next.
  stest::LeakCheck leaks;
  const bool device_queues = std::string{hipxxGetStreamEngine()}.starts_with("device queues");
  stest::Gate gate;
  auto const [pointer, other_device] = managed_and_held_stream_of_device_1(gate);
  REQUIRE(hipMemPrefetchAsync(pointer, 4 * kPage, hipCpuDeviceId, other_device) == hipSuccess);
  CHECK(hipFree(pointer) == hipSuccess);
  gate.open();
  CHECK(hipStreamSynchronize(other_device) == (device_queues ? hipErrorIllegalAddress : hipSuccess));
  CHECK(hipStreamDestroy(other_device) == hipSuccess);
  (void)hipGetLastError();
}

// ---------------------------------------------------------------------------------------------
// The C++ handles.

using hipxx::Advice;
using hipxx::Attach;
using hipxx::Coherency;
using hipxx::cpu_device;
using hipxx::Device;
using hipxx::ManagedBuffer;
using hipxx::ManagedRange;

static_assert(!std::is_copy_constructible_v<ManagedBuffer<int>>);
static_assert(!std::is_copy_assignable_v<ManagedBuffer<int>>);
static_assert(std::is_nothrow_move_constructible_v<ManagedBuffer<int>>);
static_assert(std::is_nothrow_move_assignable_v<ManagedBuffer<int>>);
static_assert(std::is_trivially_copyable_v<ManagedRange>);
static_assert(static_cast<int>(Advice::set_coarse_grain) == hipMemAdviseSetCoarseGrain);
static_assert(static_cast<unsigned>(Attach::single) == hipMemAttachSingle);
static_assert(cpu_device.id() == hipCpuDeviceId);

TEST_CASE("ManagedBuffer: views come from named buffers only, never from a temporary one") {
  using namespace test_support;
  // A temporary buffer is freed at the end of the statement; a view of it would reach the memory of
  // whatever is allocated at that address next.
  using Buffer = ManagedBuffer<int>;
  static_assert(gives_data<Buffer&> && gives_data<Buffer const&> && !gives_data<Buffer> && !gives_data<Buffer const>);
  static_assert(gives_span<Buffer&> && gives_span<Buffer const&> && !gives_span<Buffer> && !gives_span<Buffer const>);
  static_assert(gives_iterators<Buffer&> && !gives_iterators<Buffer> && !gives_iterators<Buffer const>);
  static_assert(gives_element<Buffer&> && !gives_element<Buffer> && !gives_element<Buffer const>);
  static_assert(gives_range<Buffer const&> && !gives_range<Buffer> && !gives_range<Buffer const>);
  static_assert(requires { std::declval<Buffer>().size(); });
  // std::span<int const> takes a temporary range whose elements it makes const: refused here, while
  // a named buffer converts as any contiguous range does.
  static_assert(!std::is_convertible_v<Buffer, std::span<int const>>);
  static_assert(!std::is_convertible_v<Buffer const, std::span<int const>>);
  static_assert(std::is_convertible_v<Buffer&, std::span<int const>>);
  static_assert(std::is_convertible_v<Buffer const&, std::span<int>>);
  auto named = Buffer::create(4).value();
  named[3] = 9;
  std::span<int const> const view = named;
  CHECK(view.size() == 4);
  CHECK(view[3] == 9);
}

namespace {
struct alignas(512) OverAligned {
  int value;
};
template <class T>
concept managed_buffer_of = requires {
  ManagedBuffer<T>::create(1);
};
}  // namespace

// HIP promises allocations 256-byte alignment, no more: a more strictly aligned element type would be
// handed a misaligned pointer, so it is refused at compile time.
static_assert(managed_buffer_of<int> && managed_buffer_of<std::max_align_t>);
static_assert(!managed_buffer_of<OverAligned>);
static_assert(!hipxx::device_allocatable<OverAligned> && hipxx::device_storable<OverAligned>);

TEST_CASE("ManagedBuffer: create, host span, hipMemcpy, free") {
  stest::LeakCheck leaks;
  auto created = ManagedBuffer<std::uint64_t>::create(3000);
  REQUIRE(created);
  ManagedBuffer<std::uint64_t> buffer = std::move(created).value();
  CHECK(buffer.size() == 3000);
  CHECK(buffer.size_bytes() == 3000 * sizeof(std::uint64_t));
  std::span<std::uint64_t> const elements = buffer.span();
  std::iota(elements.begin(), elements.end(), std::uint64_t{1} << 40);
  std::vector<std::uint64_t> back(buffer.size());
  REQUIRE(hipMemcpy(back.data(), buffer.data(), buffer.size_bytes(), hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back[2999] == (std::uint64_t{1} << 40) + 2999);
  REQUIRE(hipMemset(buffer.data(), 0, buffer.size_bytes()) == hipSuccess);
  CHECK(buffer[1234] == 0);
  std::uint64_t sum = 0;
  for (std::uint64_t const value : buffer) sum += value;
  CHECK(sum == 0);

  auto host_attached = ManagedBuffer<float>::create(10, Attach::host);
  REQUIRE(host_attached);
  host_attached.value()[9] = 1.5F;
  CHECK(host_attached.value().span().back() == 1.5F);

  REQUIRE(buffer.free());
  CHECK_FALSE(buffer);
  CHECK(buffer.free());  // empty: nothing to do
}

TEST_CASE("ManagedBuffer: refusals at creation") {
  stest::LeakCheck leaks;
  auto const empty = ManagedBuffer<int>::create(0);
  REQUIRE_FALSE(empty);
  CHECK(empty.error() == hipErrorInvalidValue);
  auto const huge = ManagedBuffer<std::uint64_t>::create(SIZE_MAX / 4);
  REQUIRE_FALSE(huge);
  CHECK(huge.error() == hipErrorOutOfMemory);
  auto const single = ManagedBuffer<int>::create(4, Attach::single);
  REQUIRE_FALSE(single);
  CHECK(single.error() == hipErrorInvalidValue);
}

TEST_CASE("ManagedBuffer: moves, adopt and release") {
  stest::LeakCheck leaks;
  auto first = ManagedBuffer<int>::create(100).value();
  int* const data = first.data();
  first[5] = 42;
  ManagedBuffer<int> second = std::move(first);
  CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(second.data() == data);
  CHECK(second[5] == 42);
  auto third = ManagedBuffer<int>::create(1).value();
  third = std::move(second);  // frees third's old memory
  CHECK(third.data() == data);
  CHECK(third.size() == 100);

  int* const raw = third.release();
  CHECK_FALSE(third);
  auto adopted = ManagedBuffer<int>::adopt(raw, 100);
  CHECK(adopted[5] == 42);
  CHECK(adopted.read_mostly().value() == false);
}

TEST_CASE("ManagedBuffer: typed advice and attributes, over the whole and over sub-ranges" * doctest::test_suite("devices-3")) {
  stest::LeakCheck leaks;
  std::size_t const per_page = kPage / sizeof(int);
  auto buffer = ManagedBuffer<int>::create(9 * per_page).value();
  auto const middle = buffer.range(3 * per_page, 3 * per_page).value();
  auto const first = buffer.range(0, 3 * per_page).value();
  auto const last = buffer.range(6 * per_page, 3 * per_page).value();

  // Nothing advised yet.
  CHECK(buffer.read_mostly().value() == false);
  CHECK(buffer.preferred_location().value() == std::nullopt);
  CHECK(buffer.last_prefetch_location().value() == std::nullopt);
  CHECK(buffer.accessed_by().value().empty());
  CHECK(buffer.coherency().value() == Coherency::fine_grain);

  SUBCASE("read mostly") {
    REQUIRE(middle.set_read_mostly(true));
    CHECK(buffer.read_mostly().value() == false);
    CHECK(middle.read_mostly().value() == true);
    CHECK(first.read_mostly().value() == false);
    REQUIRE(buffer.set_read_mostly(true));
    CHECK(buffer.read_mostly().value() == true);
    REQUIRE(buffer.advise(Advice::unset_read_mostly));
    CHECK(middle.read_mostly().value() == false);
  }
  SUBCASE("preferred location, with the host as a location") {
    REQUIRE(buffer.set_preferred_location(Device{2}));
    REQUIRE(middle.set_preferred_location(cpu_device));
    CHECK(buffer.preferred_location().value() == std::nullopt);
    CHECK(first.preferred_location().value() == Device{2});
    CHECK(middle.preferred_location().value() == cpu_device);
    CHECK(last.preferred_location().value() == Device{2});
    REQUIRE(middle.set_preferred_location(std::nullopt));
    CHECK(middle.preferred_location().value() == std::nullopt);
    REQUIRE(middle.set_preferred_location(Device{2}));
    CHECK(buffer.preferred_location().value() == Device{2});
    auto const bad = buffer.set_preferred_location(Device{3});
    REQUIRE_FALSE(bad);
    CHECK(bad.error() == hipErrorInvalidValue);
  }
  SUBCASE("accessed by") {
    REQUIRE(buffer.set_accessed_by(Device{1}, true));
    REQUIRE(buffer.set_accessed_by(cpu_device, true));
    REQUIRE(middle.set_accessed_by(Device{0}, true));
    REQUIRE(middle.set_accessed_by(Device{2}, true));
    CHECK(buffer.accessed_by().value() == Ids{-1, 1});
    CHECK(middle.accessed_by().value() == Ids{-1, 0, 1, 2});  // every slot used: the list is complete
    REQUIRE(buffer.set_accessed_by(cpu_device, false));
    CHECK(middle.accessed_by().value() == Ids{0, 1, 2});
    CHECK(last.accessed_by().value() == Ids{1});
    REQUIRE(buffer.advise(Advice::unset_accessed_by, Device{1}));
    CHECK(buffer.accessed_by().value().empty());
  }
  SUBCASE("coherency") {
    REQUIRE(last.set_coarse_grain(true));
    CHECK(buffer.coherency().value() == Coherency::indeterminate);
    CHECK(last.coherency().value() == Coherency::coarse_grain);
    CHECK(first.coherency().value() == Coherency::fine_grain);
    REQUIRE(buffer.set_coarse_grain(false));
    CHECK(buffer.coherency().value() == Coherency::fine_grain);
  }
  SUBCASE("all attributes at once") {
    REQUIRE(buffer.set_read_mostly(true));
    REQUIRE(buffer.set_preferred_location(Device{1}));
    REQUIRE(buffer.set_accessed_by(Device{2}, true));
    REQUIRE(middle.set_coarse_grain(true));
    REQUIRE(buffer.prefetch(Device{0}));
    REQUIRE(hipxx::StreamRef::null().synchronize());
    auto const all = buffer.attributes().value();
    CHECK(all.read_mostly);
    CHECK(all.preferred_location == Device{1});
    CHECK(all.last_prefetch_location == Device{0});
    CHECK(all.accessed_by == Ids{2});
    CHECK(all.coherency == Coherency::indeterminate);
    auto const inner = middle.attributes().value();
    CHECK(inner.coherency == Coherency::coarse_grain);
    CHECK(inner.accessed_by == Ids{2});
  }
  SUBCASE("sub-ranges out of bounds") {
    CHECK(buffer.range(9 * per_page, 0));  // empty at the end is a range, though HIP refuses it
    CHECK(buffer.range(9 * per_page, 0).value().read_mostly().error() == hipErrorInvalidValue);
    CHECK(buffer.range(9 * per_page, 1).error() == hipErrorInvalidValue);
    CHECK(buffer.range(1, SIZE_MAX).error() == hipErrorInvalidValue);
    CHECK(buffer.range(SIZE_MAX, 2).error() == hipErrorInvalidValue);
  }
}

TEST_CASE("ManagedBuffer: prefetch is stream ordered, attach takes a stream" * doctest::test_suite("devices-2")) {
  stest::LeakCheck leaks;
  auto buffer = ManagedBuffer<std::byte>::create(4 * kPage).value();
  auto stream = hipxx::Stream::create(hipxx::StreamFlags::non_blocking).value();
  {
    stest::Gate gate;
    gate.block(stream.native());
    REQUIRE(buffer.prefetch(Device{1}, stream));
    REQUIRE(buffer.attach(stream));
    REQUIRE(buffer.attach(stream, Attach::global));
    CHECK(stest::still_pending(stream.native()));
    CHECK(buffer.last_prefetch_location().value() == std::nullopt);
    gate.open();
    REQUIRE(stream.synchronize());
  }
  CHECK(buffer.last_prefetch_location().value() == Device{1});
  REQUIRE(buffer.prefetch(cpu_device, stream));
  REQUIRE(stream.synchronize());
  CHECK(buffer.last_prefetch_location().value() == cpu_device);

  auto const bad = buffer.prefetch(Device{7}, stream);
  REQUIRE_FALSE(bad);
  CHECK(bad.error() == hipErrorInvalidValue);
  CHECK(buffer.attach(stream, static_cast<Attach>(0)).error() == hipErrorInvalidValue);
}

TEST_CASE("ManagedRange over memory from the C API, and over memory that is not managed") {
  stest::LeakCheck leaks;
  Managed memory{2 * kPage};
  ManagedRange const range{memory.pointer, memory.size};
  CHECK(range.data() == memory.pointer);
  CHECK(range.size_bytes() == memory.size);
  REQUIRE(range.set_accessed_by(Device{0}, true));
  CHECK(accessed_by(memory, 0, memory.size) == Ids{0, -2, -2, -2});
  CHECK(range.accessed_by().value() == Ids{0});

  std::vector<int> host(16);
  ManagedRange const not_managed{host.data(), host.size() * sizeof(int)};
  CHECK(not_managed.read_mostly().error() == hipErrorInvalidValue);
  CHECK(not_managed.accessed_by().error() == hipErrorInvalidValue);
  CHECK(not_managed.attributes().error() == hipErrorInvalidValue);
  CHECK(not_managed.set_read_mostly(true).error() == hipErrorInvalidValue);
  CHECK(not_managed.prefetch(Device{0}).error() == hipErrorInvalidValue);
}

// ---------------------------------------------------------------------------------------------
// A random walk of advice, prefetches, fills and queries over one managed allocation, with ranges
// that start and end anywhere (advice rounds out to whole pages): every answer is checked against
// a page-by-page model, so the runs of equal pages the runtime keeps split and merge correctly.

namespace {

class ManagedWalk : test_support::WalkRandom {
 public:
  explicit ManagedWalk(std::uint64_t seed) : WalkRandom(seed), memory_(kPages * kPage), pages_(kPages) {
    REQUIRE(hipGetDeviceCount(&devices_) == hipSuccess);
    stream_ = stest::make_stream(hipStreamNonBlocking);
    content_.assign(memory_.size, 0);
    REQUIRE(hipMemset(memory_.pointer, 0, memory_.size) == hipSuccess);
  }
  ManagedWalk(ManagedWalk const&) = delete;
  ManagedWalk& operator=(ManagedWalk const&) = delete;
  ManagedWalk(ManagedWalk&&) = delete;
  ManagedWalk& operator=(ManagedWalk&&) = delete;
  ~ManagedWalk() { CHECK(hipStreamDestroy(stream_) == hipSuccess); }

  void step() {
    switch (pick(8)) {
      case 0:
      case 1:
      case 2: give_advice(); break;
      case 3: prefetch(); break;
      case 4: fill(); break;
      case 5: read(); break;
      default: query(); break;
    }
  }

 private:
  static constexpr std::size_t kPages = 64;

  struct Page {
    bool read_mostly = false;
    int preferred = hipInvalidDeviceId;
    std::uint64_t accessed_by = 0;  // bit location + 1
    int last_prefetch = hipInvalidDeviceId;
  };

  // The host or a device.
  int some_location() { return static_cast<int>(pick(static_cast<std::size_t>(devices_) + 1)) - 1; }
  static std::uint64_t bit(int location) { return std::uint64_t{1} << static_cast<unsigned>(location + 1); }

  // A range of bytes anywhere in the allocation, usually page-aligned.
  std::pair<std::size_t, std::size_t> some_range() {
    if (pick(3) == 0) {
      std::size_t const first = pick(memory_.size);
      return {first, 1 + pick(memory_.size - first)};
    }
    std::size_t const first = pick(kPages);
    return {first * kPage, (1 + pick(kPages - first)) * kPage};
  }
  // The pages a byte range touches.
  static std::pair<std::size_t, std::size_t> pages_of(std::size_t offset, std::size_t bytes) {
    return {offset / kPage, (offset + bytes + kPage - 1) / kPage};
  }

  template <class Change>
  void change(std::size_t offset, std::size_t bytes, Change change_page) {
    auto const [first, end] = pages_of(offset, bytes);
    for (std::size_t page = first; page < end; ++page) change_page(pages_[page]);
  }

  void give_advice() {
    auto const [offset, bytes] = some_range();
    int const location = some_location();
    switch (pick(6)) {
      case 0:
        advise(memory_, offset, bytes, hipMemAdviseSetReadMostly);
        change(offset, bytes, [](Page& page) { page.read_mostly = true; });
        break;
      case 1:
        advise(memory_, offset, bytes, hipMemAdviseUnsetReadMostly);
        change(offset, bytes, [](Page& page) { page.read_mostly = false; });
        break;
      case 2:
        advise(memory_, offset, bytes, hipMemAdviseSetPreferredLocation, location);
        change(offset, bytes, [&](Page& page) { page.preferred = location; });
        break;
      case 3:
        advise(memory_, offset, bytes, hipMemAdviseUnsetPreferredLocation, location);
        change(offset, bytes, [](Page& page) { page.preferred = hipInvalidDeviceId; });
        break;
      case 4:
        advise(memory_, offset, bytes, hipMemAdviseSetAccessedBy, location);
        change(offset, bytes, [&](Page& page) { page.accessed_by |= bit(location); });
        break;
      default:
        advise(memory_, offset, bytes, hipMemAdviseUnsetAccessedBy, location);
        change(offset, bytes, [&](Page& page) { page.accessed_by &= ~bit(location); });
        break;
    }
  }

  // Stream ordered: the range remembers it once the stream got there.
  void prefetch() {
    auto const [offset, bytes] = some_range();
    int const location = some_location();
    REQUIRE(hipMemPrefetchAsync(memory_.at(offset), bytes, location, stream_) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream_) == hipSuccess);
    change(offset, bytes, [&](Page& page) { page.last_prefetch = location; });
  }

  // A fill through the runtime or a write on the host, wherever the pages were sent.
  void fill() {
    auto const [offset, bytes] = some_range();
    auto const byte = static_cast<unsigned char>(pick(256));
    if (pick(2) == 0) {
      REQUIRE(hipMemset(memory_.at(offset), byte, bytes) == hipSuccess);
    } else {
      std::memset(memory_.at(offset), byte, bytes);
    }
    std::fill_n(content_.begin() + static_cast<std::ptrdiff_t>(offset), bytes, byte);
  }

  // Read back through hipMemcpy or on the host.
  void read() {
    auto const [offset, bytes] = some_range();
    std::vector<unsigned char> back(bytes, 0);
    if (pick(2) == 0) {
      REQUIRE(hipMemcpy(back.data(), memory_.at(offset), bytes, hipMemcpyDeviceToHost) == hipSuccess);
    } else {
      std::memcpy(back.data(), memory_.at(offset), bytes);
    }
    CHECK(std::equal(back.begin(), back.end(), content_.begin() + static_cast<std::ptrdiff_t>(offset)));
  }

  // Every attribute over a range, against the pages it touches.
  void query() {
    auto const [offset, bytes] = some_range();
    auto const [first, end] = pages_of(offset, bytes);
    auto const pages = std::span<Page const>(pages_).subspan(first, end - first);
    auto const uniform = [&](auto read_page) {
      auto const value = read_page(pages.front());
      bool const same = std::all_of(pages.begin(), pages.end(), [&](Page const& p) { return read_page(p) == value; });
      return same ? value : hipInvalidDeviceId;
    };
    bool const all_read_mostly = std::all_of(pages.begin(), pages.end(), [](Page const& p) { return p.read_mostly; });
    CHECK(read_mostly(memory_, offset, bytes) == (all_read_mostly ? 1 : 0));
    CHECK(preferred(memory_, offset, bytes) == uniform([](Page const& p) { return p.preferred; }));
    CHECK(last_prefetch(memory_, offset, bytes) == uniform([](Page const& p) { return p.last_prefetch; }));
    std::uint64_t everywhere = ~std::uint64_t{0};
    for (Page const& page : pages) everywhere &= page.accessed_by;
    std::vector<int> expected;
    for (int location = hipCpuDeviceId; location < devices_; ++location) {
      if ((everywhere & bit(location)) != 0) expected.push_back(location);
    }
    expected.resize(4, hipInvalidDeviceId);
    CHECK(accessed_by(memory_, offset, bytes, 4) == expected);
  }

  Managed memory_;
  std::vector<Page> pages_;
  std::vector<unsigned char> content_;
  int devices_ = 0;
  hipStream_t stream_ = nullptr;
};

}  // namespace

TEST_CASE("a random walk of advice, prefetches, fills and queries agrees with a page-by-page model") {
  std::uint64_t const seed = test_support::walk_seed();
  CAPTURE(seed);
  ManagedWalk walk(seed);
  test_support::take_walk(walk, 2000, seed);
}
