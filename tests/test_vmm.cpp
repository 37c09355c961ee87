// The virtual memory management entry points: every success path, every documented refusal (with
// the exact hipError_t, and proof that the books and the data did not move), ranges that span
// several mappings, deferred release, retain from interior addresses, and what the host backend
// really does to the pages (checked from forked children, because a wrong answer is a SIGSEGV).
#include <doctest/doctest.h>

#include "support/books.hpp"
#include "support/bytes.hpp"
#include "support/descriptors.hpp"
#include "support/random_walk.hpp"
#include "support/residency.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Printing and comparing what the assertions look at.

using test_support::books;
using test_support::LeakCheck;

namespace {

using Handle = hipMemGenericAllocationHandle_t;

void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

// The first ordinal that names no device.
int past_last_device() {
  int count = 0;
  REQUIRE(hipGetDeviceCount(&count) == hipSuccess);
  return count;
}

std::size_t granularity(hipMemAllocationGranularity_flags option = hipMemAllocationGranularityMinimum) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  std::size_t value = 0;
  REQUIRE(hipMemGetAllocationGranularity(&value, &prop, option) == hipSuccess);
  REQUIRE(value > 0);
  return value;
}

// The minimum granularity, asked for once without asserting (this runs before any test case);
// the first test case checks it against the page size.
std::size_t query_minimum_granularity() {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  std::size_t value = 0;
  return hipMemGetAllocationGranularity(&value, &prop, hipMemAllocationGranularityMinimum) == hipSuccess
             ? value
             : static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

const std::size_t G = query_minimum_granularity();

hipMemAllocationProp make_prop(hipMemAllocationHandleType type = hipMemHandleTypeNone, int device = 0) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = type;
  prop.location = {hipMemLocationTypeDevice, device};
  return prop;
}

hipMemAccessDesc make_desc(hipMemAccessFlags flags, int device = 0) {
  hipMemAccessDesc desc{};
  desc.location = {hipMemLocationTypeDevice, device};
  desc.flags = flags;
  return desc;
}

void* reserve(std::size_t size, std::size_t alignment = 0, void* hint = nullptr) {
  void* ptr = nullptr;
  REQUIRE(hipMemAddressReserve(&ptr, size, alignment, hint, 0) == hipSuccess);
  REQUIRE(ptr != nullptr);
  return ptr;
}

Handle create(std::size_t size, hipMemAllocationHandleType type = hipMemHandleTypeNone) {
  const hipMemAllocationProp prop = make_prop(type);
  Handle handle = nullptr;
  REQUIRE(hipMemCreate(&handle, size, &prop, 0) == hipSuccess);
  REQUIRE(handle != nullptr);
  return handle;
}

void grant(void* ptr, std::size_t size, hipMemAccessFlags flags, int device = 0) {
  const hipMemAccessDesc desc = make_desc(flags, device);
  REQUIRE(hipMemSetAccess(ptr, size, &desc, 1) == hipSuccess);
}

unsigned long long access_of(void* ptr, int device = 0) {
  const hipMemLocation location{hipMemLocationTypeDevice, device};
  unsigned long long flags = 0xdead;
  REQUIRE(hipMemGetAccess(&flags, &location, ptr) == hipSuccess);
  return flags;
}

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return data;
}

void write_pattern(void* dst, std::size_t bytes, unsigned seed) {
  const std::vector<unsigned char> data = pattern(bytes, seed);
  REQUIRE(hipMemcpy(dst, data.data(), bytes, hipMemcpyHostToDevice) == hipSuccess);
}

// Reads through the runtime (so it needs read access) and compares.
bool holds_pattern(const void* src, std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes, 0);
  if (hipMemcpy(data.data(), src, bytes, hipMemcpyDeviceToHost) != hipSuccess) return false;
  return data == pattern(bytes, seed);
}

// One reservation of `reservation_size` bytes with one allocation of `size` bytes mapped at its
// start, ReadWrite for device 0, filled with pattern `seed`. Cleans up after itself.
struct Mapped {
  std::size_t reservation_size;
  std::size_t size;
  unsigned seed;
  void* base = nullptr;
  Handle handle = nullptr;

  explicit Mapped(std::size_t bytes, unsigned pattern_seed = 1, std::size_t reserved = 0,
                  hipMemAllocationHandleType type = hipMemHandleTypeNone)
      : reservation_size(reserved == 0 ? bytes : reserved), size(bytes), seed(pattern_seed) {
    base = reserve(reservation_size);
    handle = create(size, type);
    REQUIRE(hipMemMap(base, size, 0, handle, 0) == hipSuccess);
    grant(base, size, hipMemAccessFlagsProtReadWrite);
    write_pattern(base, size, seed);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  ~Mapped() {
    CHECK(hipMemUnmap(base, size) == hipSuccess);
    CHECK(hipMemRelease(handle) == hipSuccess);
    CHECK(hipMemAddressFree(base, reservation_size) == hipSuccess);
  }
  [[nodiscard]] bool intact() const { return holds_pattern(base, size, seed); }
};

// Two reservations of `each` bytes that touch: [a, a+each) and [a+each, a+2*each).
struct AdjacentReservations {
  std::size_t each;
  void* first = nullptr;
  void* second = nullptr;
  explicit AdjacentReservations(std::size_t bytes) : each(bytes) {
    void* probe = reserve(2 * each);
    REQUIRE(hipMemAddressFree(probe, 2 * each) == hipSuccess);
    first = reserve(each, 0, probe);
    second = reserve(each, 0, at(probe, each));
    REQUIRE(first == probe);
    REQUIRE(second == at(probe, each));
  }
  AdjacentReservations(const AdjacentReservations&) = delete;
  AdjacentReservations& operator=(const AdjacentReservations&) = delete;
  ~AdjacentReservations() {
    CHECK(hipMemAddressFree(first, each) == hipSuccess);
    CHECK(hipMemAddressFree(second, each) == hipSuccess);
  }
};

// What happens when a forked child touches `addr`: "SIGSEGV" (or another signal name), "ok", or
// "exit N" (N = 3 when the byte read differs from `expect`).
std::string touch_in_child(void* addr, bool write, unsigned char expect) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit no_core {
      0, 0
    };
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGSEGV, &dfl, nullptr);
    sigaction(SIGBUS, &dfl, nullptr);
    volatile unsigned char* byte = static_cast<volatile unsigned char*>(addr);
    const unsigned char seen = *byte;
    if (seen != expect) _exit(3);
    if (write) *byte = static_cast<unsigned char>(seen + 1);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : "signal " + std::to_string(sig);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "ok";
  return "exit " + std::to_string(WEXITSTATUS(status));
}

void require_host_backend() {
  const char* name = hipxxGetBackendName();
  REQUIRE_MESSAGE(name != nullptr, "no backend started");
  REQUIRE_MESSAGE(std::string{name} == "host", "these tests check the host backend; run them with HIPXX_BACKEND=host");
}

Handle forged_handle() { return reinterpret_cast<Handle>(static_cast<std::uintptr_t>(0x12340)); }

}  // namespace

// =============================================================================================
TEST_SUITE_BEGIN("vmm");

TEST_CASE("granularity: minimum is the page size and recommended is 2 MiB" * doctest::test_suite("host-only")) {
  CHECK(granularity(hipMemAllocationGranularityMinimum) == static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  CHECK(granularity(hipMemAllocationGranularityRecommended) == (std::size_t{2} << 20));
  // Any requested handle type gives the same answer.
  hipMemAllocationProp prop = make_prop(hipMemHandleTypePosixFileDescriptor);
  std::size_t value = 0;
  CHECK(hipMemGetAllocationGranularity(&value, &prop, hipMemAllocationGranularityRecommended) == hipSuccess);
  CHECK(value == (std::size_t{2} << 20));
}

TEST_CASE("granularity: refused arguments") {
  LeakCheck leaks;
  const hipMemAllocationProp good = make_prop();
  std::size_t value = 77;
  CHECK_REFUSED(hipMemGetAllocationGranularity(nullptr, &good, hipMemAllocationGranularityMinimum),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAllocationGranularity(&value, nullptr, hipMemAllocationGranularityMinimum),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAllocationGranularity(&value, &good, static_cast<hipMemAllocationGranularity_flags>(7)),
                hipErrorInvalidValue);
  hipMemAllocationProp bad = good;
  bad.type = hipMemAllocationTypeInvalid;
  CHECK_REFUSED(hipMemGetAllocationGranularity(&value, &bad, hipMemAllocationGranularityMinimum), hipErrorInvalidValue);
  bad = good;
  bad.location.type = hipMemLocationTypeInvalid;
  CHECK_REFUSED(hipMemGetAllocationGranularity(&value, &bad, hipMemAllocationGranularityMinimum), hipErrorInvalidValue);
  bad = good;
  bad.location.id = past_last_device();
  CHECK_REFUSED(hipMemGetAllocationGranularity(&value, &bad, hipMemAllocationGranularityMinimum), hipErrorInvalidValue);
  bad.location.id = -1;
  CHECK_REFUSED(hipMemGetAllocationGranularity(&value, &bad, hipMemAllocationGranularityMinimum), hipErrorInvalidValue);
  CHECK(value == 77);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("reserve: a hint that would break the alignment asked for is not followed") {
  LeakCheck leaks;
  const std::size_t alignment = std::size_t{2} << 20;
  void* const probe = reserve(4 * alignment, alignment);
  REQUIRE(hipMemAddressFree(probe, 4 * alignment) == hipSuccess);
  void* const hint = at(probe, G);  // free and granular, but not on a 2 MiB boundary
  void* got = nullptr;
  REQUIRE(hipMemAddressReserve(&got, alignment, alignment, hint, 0) == hipSuccess);
  CHECK(reinterpret_cast<std::uintptr_t>(got) % alignment == 0);
  CHECK(hipMemAddressFree(got, alignment) == hipSuccess);
}

TEST_CASE("reserve and free: success paths") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();

  SUBCASE("default alignment, one and several granules") {
    for (const std::size_t size : {G, 3 * G, std::size_t{2} << 20}) {
      void* ptr = reserve(size);
      CHECK(reinterpret_cast<std::uintptr_t>(ptr) % G == 0);
      CHECK(books().reservations == start.reservations + 1);
      CHECK(hipMemAddressFree(ptr, size) == hipSuccess);
      CHECK(books() == start);
    }
  }
  SUBCASE("explicit power-of-two alignments are honoured") {
    for (const std::size_t alignment : {G, 2 * G, std::size_t{2} << 20, std::size_t{64} << 20}) {
      void* ptr = reserve(G, alignment);
      CHECK(reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0);
      CHECK(hipMemAddressFree(ptr, G) == hipSuccess);
    }
  }
  SUBCASE("reservations never overlap") {
    std::vector<void*> ptrs;
    for (int i = 0; i < 8; ++i) ptrs.push_back(reserve(4 * G));
    CHECK(books().reservations == start.reservations + 8);
    for (std::size_t i = 0; i < ptrs.size(); ++i) {
      for (std::size_t j = i + 1; j < ptrs.size(); ++j) {
        const auto a = reinterpret_cast<std::uintptr_t>(ptrs[i]);
        const auto b = reinterpret_cast<std::uintptr_t>(ptrs[j]);
        CHECK((a + 4 * G <= b || b + 4 * G <= a));
      }
    }
    for (void* ptr : ptrs) CHECK(hipMemAddressFree(ptr, 4 * G) == hipSuccess);
  }
  SUBCASE("a busy hint is only a hint") {
    void* first = reserve(2 * G);
    void* second = reserve(2 * G, 0, first);
    CHECK(second != first);
    CHECK(hipMemAddressFree(second, 2 * G) == hipSuccess);
    CHECK(hipMemAddressFree(first, 2 * G) == hipSuccess);
  }
  CHECK(books() == start);
}

TEST_CASE("reserve: refused arguments") {
  LeakCheck leaks;
  void* const sentinel = reinterpret_cast<void*>(std::uintptr_t{0x5a5a0000});
  void* ptr = sentinel;
  CHECK_REFUSED(hipMemAddressReserve(nullptr, G, 0, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, 0, 0, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G + 1, 0, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G / 2, 0, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, 0, nullptr, 1), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, 0, nullptr, 0x100000000ULL), hipErrorInvalidValue);
  // Alignment: a power of two that is a multiple of the granularity, or 0.
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, 3, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, 3 * G, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, G / 2, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, 1, nullptr, 0), hipErrorInvalidValue);
  // The hint must be granular.
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, 0, reinterpret_cast<void*>(std::uintptr_t{0x10000000} + 1), 0),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, G, 0, reinterpret_cast<void*>(std::uintptr_t{0x10000000} + G / 2), 0),
                hipErrorInvalidValue);
  CHECK(ptr == sentinel);
}

TEST_CASE("reserve: a size no address space can hold fails cleanly") {
  LeakCheck leaks;
  const std::size_t huge = SIZE_MAX & ~(G - 1);
  void* ptr = nullptr;
  CHECK_REFUSED(hipMemAddressReserve(&ptr, huge, 0, nullptr, 0), hipErrorOutOfMemory);
  CHECK(ptr == nullptr);
  // With an alignment larger than a page the over-reservation must not wrap around.
  CHECK_REFUSED(hipMemAddressReserve(&ptr, huge, std::size_t{2} << 20, nullptr, 0), hipErrorOutOfMemory);
  CHECK(ptr == nullptr);
  CHECK_REFUSED(hipMemAddressReserve(&ptr, huge - (std::size_t{1} << 30), std::size_t{1} << 30, nullptr, 0),
                hipErrorOutOfMemory);
  CHECK(ptr == nullptr);
}

TEST_CASE("free: refused arguments change nothing") {
  LeakCheck leaks;
  Mapped mapped(G, 11, 4 * G);  // a mapping in the first granule of a 4-granule reservation
  void* const base = mapped.base;

  CHECK_REFUSED(hipMemAddressFree(nullptr, 4 * G), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemAddressFree(at(base, G), 3 * G), hipErrorInvalidValue);  // interior start
  CHECK_REFUSED(hipMemAddressFree(base, 3 * G), hipErrorInvalidValue);  // shorter
  CHECK_REFUSED(hipMemAddressFree(base, 5 * G), hipErrorInvalidValue);  // longer
  CHECK_REFUSED(hipMemAddressFree(base, 0), hipErrorInvalidValue);
  int on_stack = 0;
  CHECK_REFUSED(hipMemAddressFree(&on_stack, G), hipErrorInvalidValue);  // never reserved
  // A mapping inside: refused, and the mapping keeps working.
  CHECK_REFUSED(hipMemAddressFree(base, 4 * G), hipErrorInvalidValue);
  CHECK(mapped.intact());
  CHECK(access_of(base) == hipMemAccessFlagsProtReadWrite);

  // Free really forgets: a second free of the same range is refused.
  void* other = reserve(2 * G);
  CHECK(hipMemAddressFree(other, 2 * G) == hipSuccess);
  CHECK_REFUSED(hipMemAddressFree(other, 2 * G), hipErrorInvalidValue);
}

TEST_CASE("free: allowed once the last mapping inside is gone") {
  LeakCheck leaks;
  void* base = reserve(2 * G);
  Handle a = create(G);
  Handle b = create(G);
  REQUIRE(hipMemMap(base, G, 0, a, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, G), G, 0, b, 0) == hipSuccess);
  CHECK_REFUSED(hipMemAddressFree(base, 2 * G), hipErrorInvalidValue);
  CHECK(hipMemUnmap(base, G) == hipSuccess);
  CHECK_REFUSED(hipMemAddressFree(base, 2 * G), hipErrorInvalidValue);
  CHECK(hipMemUnmap(at(base, G), G) == hipSuccess);
  CHECK(hipMemAddressFree(base, 2 * G) == hipSuccess);
  CHECK(hipMemRelease(a) == hipSuccess);
  CHECK(hipMemRelease(b) == hipSuccess);
}

TEST_CASE("hipxxGetReservationMappingCount follows map and unmap, and names whole reservations only") {
  LeakCheck leaks;
  void* base = reserve(3 * G);
  Handle a = create(G);
  Handle b = create(G);
  std::size_t count = 99;
  REQUIRE(hipxxGetReservationMappingCount(base, &count) == hipSuccess);
  CHECK(count == 0);
  REQUIRE(hipMemMap(base, G, 0, a, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, 2 * G), G, 0, b, 0) == hipSuccess);
  REQUIRE(hipxxGetReservationMappingCount(base, &count) == hipSuccess);
  CHECK(count == 2);
  // Only the start of a reservation names it; nothing else is a reservation.
  CHECK_REFUSED(hipxxGetReservationMappingCount(at(base, G), &count), hipErrorInvalidValue);
  CHECK_REFUSED(hipxxGetReservationMappingCount(nullptr, &count), hipErrorInvalidValue);
  CHECK_REFUSED(hipxxGetReservationMappingCount(base, nullptr), hipErrorInvalidValue);
  CHECK(hipMemUnmap(base, G) == hipSuccess);
  REQUIRE(hipxxGetReservationMappingCount(base, &count) == hipSuccess);
  CHECK(count == 1);
  CHECK(hipMemUnmap(at(base, 2 * G), G) == hipSuccess);
  REQUIRE(hipxxGetReservationMappingCount(base, &count) == hipSuccess);
  CHECK(count == 0);
  CHECK(hipMemAddressFree(base, 3 * G) == hipSuccess);
  CHECK_REFUSED(hipxxGetReservationMappingCount(base, &count), hipErrorInvalidValue);
  CHECK(hipMemRelease(a) == hipSuccess);
  CHECK(hipMemRelease(b) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("create and release: success and properties round-trip") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  for (const hipMemAllocationHandleType type : {hipMemHandleTypeNone, hipMemHandleTypePosixFileDescriptor}) {
    for (const std::size_t size : {G, 3 * G, std::size_t{2} << 20}) {
      CAPTURE(type);
      CAPTURE(size);
      Handle handle = create(size, type);
      CHECK(books().allocations == start.allocations + 1);
      CHECK(books().mappings == start.mappings);
      hipMemAllocationProp prop{};
      std::memset(&prop, 0xff, sizeof prop);
      REQUIRE(hipMemGetAllocationPropertiesFromHandle(&prop, handle) == hipSuccess);
      CHECK(prop.type == hipMemAllocationTypePinned);
      CHECK(prop.requestedHandleType == type);
      CHECK(prop.location.type == hipMemLocationTypeDevice);
      CHECK(prop.location.id == 0);
      CHECK(hipMemRelease(handle) == hipSuccess);
      CHECK(books() == start);
    }
  }
  // Handles are never reused: a released handle stays invalid after new ones are created.
  Handle first = create(G);
  REQUIRE(hipMemRelease(first) == hipSuccess);
  Handle second = create(G);
  CHECK(second != first);
  CHECK_REFUSED(hipMemRelease(first), hipErrorInvalidValue);
  CHECK(hipMemRelease(second) == hipSuccess);
}

TEST_CASE("create: refused arguments") {
  LeakCheck leaks;
  const hipMemAllocationProp good = make_prop();
  Handle const sentinel = forged_handle();
  Handle handle = sentinel;

  CHECK_REFUSED(hipMemCreate(nullptr, G, &good, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemCreate(&handle, G, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemCreate(&handle, 0, &good, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemCreate(&handle, G + 1, &good, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemCreate(&handle, G / 2, &good, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemCreate(&handle, G, &good, 1), hipErrorInvalidValue);

  hipMemAllocationProp bad = good;
  bad.type = hipMemAllocationTypeInvalid;
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);
  bad.type = hipMemAllocationTypeMax;
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);

  bad = good;
  bad.location.type = hipMemLocationTypeInvalid;
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);
  bad.location.type = static_cast<hipMemLocationType>(7);
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);
  bad = good;
  bad.location.id = past_last_device();
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);
  bad.location.id = -1;
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);

  // Handle types: Windows ones are real but unsupported here; anything else is not a type.
  bad = good;
  bad.requestedHandleType = hipMemHandleTypeWin32;
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorNotSupported);
  bad.requestedHandleType = hipMemHandleTypeWin32Kmt;
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorNotSupported);
  bad.requestedHandleType = static_cast<hipMemAllocationHandleType>(3);
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);
  bad.requestedHandleType = static_cast<hipMemAllocationHandleType>(0x40);
  CHECK_REFUSED(hipMemCreate(&handle, G, &bad, 0), hipErrorInvalidValue);

  CHECK(handle == sentinel);
}

// As a GPU refuses what it lacks: on the host backend, committing more than the machine has would
// otherwise wake the kernel's out-of-memory killer, which ends this process or another.
TEST_CASE("create: more memory than the device has is hipErrorOutOfMemory and creates nothing") {
  LeakCheck leaks;
  const hipMemAllocationProp good = make_prop();
  std::size_t total = 0;
  REQUIRE(hipDeviceTotalMem(&total, 0) == hipSuccess);
  const std::size_t beyond = (total / G + 1) * G + (std::size_t{1} << 30);
  Handle const sentinel = forged_handle();
  Handle handle = sentinel;
  CHECK_REFUSED(hipMemCreate(&handle, beyond, &good, 0), hipErrorOutOfMemory);
  CHECK_REFUSED(hipMemCreate(&handle, 2 * beyond, &good, 0), hipErrorOutOfMemory);
  // However far past it: sizes beyond any file length or address space are a shortage too.
  CHECK_REFUSED(hipMemCreate(&handle, std::size_t{1} << 62, &good, 0), hipErrorOutOfMemory);
  CHECK_REFUSED(hipMemCreate(&handle, std::size_t{1} << 63, &good, 0), hipErrorOutOfMemory);
  CHECK_REFUSED(hipMemCreate(&handle, SIZE_MAX / G * G, &good, 0), hipErrorOutOfMemory);
  CHECK(handle == sentinel);
  // The refusal took nothing: the same call for what fits still succeeds.
  REQUIRE(hipMemCreate(&handle, G, &good, 0) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
}

TEST_CASE("release: refused handles") {
  LeakCheck leaks;
  CHECK_REFUSED(hipMemRelease(nullptr), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemRelease(forged_handle()), hipErrorInvalidValue);
  Handle handle = create(G);
  CHECK_REFUSED(hipMemRelease(reinterpret_cast<Handle>(reinterpret_cast<std::uintptr_t>(handle) + 1)),
                hipErrorInvalidValue);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK_REFUSED(hipMemRelease(handle), hipErrorInvalidValue);
  hipMemAllocationProp prop{};
  CHECK_REFUSED(hipMemGetAllocationPropertiesFromHandle(&prop, handle), hipErrorInvalidValue);
}

TEST_CASE("properties from handle: refused arguments") {
  LeakCheck leaks;
  Handle handle = create(G);
  hipMemAllocationProp prop{};
  CHECK_REFUSED(hipMemGetAllocationPropertiesFromHandle(nullptr, handle), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAllocationPropertiesFromHandle(&prop, nullptr), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAllocationPropertiesFromHandle(&prop, forged_handle()), hipErrorInvalidValue);
  CHECK(hipMemRelease(handle) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("map: success, and a new mapping has no access") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  void* base = reserve(4 * G);
  Handle handle = create(2 * G);
  REQUIRE(hipMemMap(at(base, G), 2 * G, 0, handle, 0) == hipSuccess);
  CHECK(books().mappings == start.mappings + 1);
  CHECK(access_of(at(base, G)) == hipMemAccessFlagsProtNone);
  CHECK(access_of(at(base, 3 * G - 1)) == hipMemAccessFlagsProtNone);

  // No access: copies in and out and memset are refused, and change nothing.
  const std::vector<unsigned char> data = pattern(2 * G, 5);
  std::vector<unsigned char> back(2 * G, 0xee);
  CHECK_REFUSED(hipMemcpy(at(base, G), data.data(), 2 * G, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(back.data(), at(base, G), 2 * G, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(at(base, G), 1, 16), hipErrorInvalidValue);
  CHECK(back == std::vector<unsigned char>(2 * G, 0xee));

  grant(at(base, G), 2 * G, hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(at(base, G)) == hipMemAccessFlagsProtReadWrite);
  write_pattern(at(base, G), 2 * G, 5);
  CHECK(holds_pattern(at(base, G), 2 * G, 5));
  // Fresh physical memory reads as zero.
  Handle fresh = create(G);
  REQUIRE(hipMemMap(base, G, 0, fresh, 0) == hipSuccess);
  grant(base, G, hipMemAccessFlagsProtRead);
  std::vector<unsigned char> zeros(G, 0xee);
  CHECK(hipMemcpy(zeros.data(), base, G, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(zeros == std::vector<unsigned char>(G, 0));

  CHECK(hipMemUnmap(base, G) == hipSuccess);
  CHECK(hipMemUnmap(at(base, G), 2 * G) == hipSuccess);
  CHECK(books().mappings == start.mappings);
  CHECK(hipMemRelease(fresh) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 4 * G) == hipSuccess);
}

TEST_CASE("map: a remapped range starts with no access again") {
  LeakCheck leaks;
  void* base = reserve(G);
  Handle handle = create(G);
  REQUIRE(hipMemMap(base, G, 0, handle, 0) == hipSuccess);
  grant(base, G, hipMemAccessFlagsProtReadWrite);
  write_pattern(base, G, 9);
  REQUIRE(hipMemUnmap(base, G) == hipSuccess);
  REQUIRE(hipMemMap(base, G, 0, handle, 0) == hipSuccess);
  CHECK(access_of(base) == hipMemAccessFlagsProtNone);
  grant(base, G, hipMemAccessFlagsProtRead);
  CHECK(holds_pattern(base, G, 9));  // the physical memory kept its data
  CHECK(hipMemUnmap(base, G) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, G) == hipSuccess);
}

TEST_CASE("map: refused arguments change nothing") {
  LeakCheck leaks;
  void* base = reserve(4 * G);
  Handle one = create(G);
  Handle two = create(2 * G);

  CHECK_REFUSED(hipMemMap(nullptr, G, 0, one, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemMap(base, G, G, one, 0), hipErrorInvalidValue);  // offset must be 0
  CHECK_REFUSED(hipMemMap(base, 2 * G, G, two, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemMap(base, G, 0, one, 1), hipErrorInvalidValue);  // flags must be 0
  CHECK_REFUSED(hipMemMap(base, 2 * G, 0, one, 0), hipErrorInvalidValue);  // bigger than the allocation
  CHECK_REFUSED(hipMemMap(base, G, 0, two, 0), hipErrorInvalidValue);  // smaller than the allocation
  CHECK_REFUSED(hipMemMap(base, 0, 0, one, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemMap(at(base, 1), G, 0, one, 0), hipErrorInvalidValue);  // not granular
  CHECK_REFUSED(hipMemMap(base, G, 0, nullptr, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemMap(base, G, 0, forged_handle(), 0), hipErrorInvalidValue);
  // Outside any reservation.
  std::vector<unsigned char> host(2 * G);
  void* host_page = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(host.data()) + G - 1) & ~(G - 1));
  CHECK_REFUSED(hipMemMap(host_page, G, 0, one, 0), hipErrorInvalidValue);
  // Running past the end of the reservation.
  CHECK_REFUSED(hipMemMap(at(base, 3 * G), 2 * G, 0, two, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemMap(at(base, 4 * G), G, 0, one, 0), hipErrorInvalidValue);
  // A released handle.
  Handle gone = create(G);
  REQUIRE(hipMemRelease(gone) == hipSuccess);
  CHECK_REFUSED(hipMemMap(base, G, 0, gone, 0), hipErrorInvalidValue);

  // Nothing was mapped by any of the above.
  Handle retained = nullptr;
  CHECK_REFUSED(hipMemRetainAllocationHandle(&retained, base), hipErrorInvalidValue);
  // And the arguments that were refused work once corrected.
  CHECK(hipMemMap(base, G, 0, one, 0) == hipSuccess);
  CHECK(hipMemMap(at(base, 2 * G), 2 * G, 0, two, 0) == hipSuccess);
  CHECK(hipMemUnmap(base, G) == hipSuccess);
  CHECK(hipMemUnmap(at(base, 2 * G), 2 * G) == hipSuccess);
  CHECK(hipMemRelease(one) == hipSuccess);
  CHECK(hipMemRelease(two) == hipSuccess);
  CHECK(hipMemAddressFree(base, 4 * G) == hipSuccess);
}

TEST_CASE("map: overlapping an existing mapping is refused") {
  LeakCheck leaks;
  Mapped mapped(2 * G, 21, 6 * G);  // [0, 2G) mapped inside [0, 6G)
  Handle one = create(G);
  Handle two = create(2 * G);
  CHECK_REFUSED(hipMemMap(mapped.base, 2 * G, 0, two, 0), hipErrorInvalidValue);  // same range
  CHECK_REFUSED(hipMemMap(mapped.base, G, 0, one, 0), hipErrorInvalidValue);  // its first granule
  CHECK_REFUSED(hipMemMap(at(mapped.base, G), G, 0, one, 0), hipErrorInvalidValue);  // its last granule
  CHECK_REFUSED(hipMemMap(at(mapped.base, G), 2 * G, 0, two, 0), hipErrorInvalidValue);  // straddles its end
  CHECK(mapped.intact());
  CHECK(access_of(mapped.base) == hipMemAccessFlagsProtReadWrite);
  // Right after it: fine. Then anything touching that second mapping [2G, 3G): refused.
  REQUIRE(hipMemMap(at(mapped.base, 2 * G), G, 0, one, 0) == hipSuccess);
  CHECK_REFUSED(hipMemMap(at(mapped.base, 2 * G), 2 * G, 0, two, 0), hipErrorInvalidValue);  // its start
  CHECK_REFUSED(hipMemMap(at(mapped.base, G), 2 * G, 0, two, 0), hipErrorInvalidValue);  // both
  CHECK(hipMemMap(at(mapped.base, 3 * G), 2 * G, 0, two, 0) == hipSuccess);
  CHECK(hipMemUnmap(at(mapped.base, 2 * G), 3 * G) == hipSuccess);  // spans both extra mappings
  CHECK(mapped.intact());
  CHECK(hipMemRelease(one) == hipSuccess);
  CHECK(hipMemRelease(two) == hipSuccess);
}

TEST_CASE("map: out of address order, each mapping goes into its gap, and a gap's neighbours refuse overlaps") {
  LeakCheck leaks;
  constexpr std::size_t kGranules = 8;
  void* base = reserve(kGranules * G);
  std::vector<Handle> handles;
  for (std::size_t i = 0; i < kGranules; ++i) handles.push_back(create(G));
  Handle wide = create(2 * G);
  // Granule 6 first, then 2 and 0 in front of it, then 4 between: none of them after the last one.
  for (const std::size_t granule : {6, 2, 0, 4}) {
    REQUIRE(hipMemMap(at(base, granule * G), G, 0, handles[granule], 0) == hipSuccess);
  }
  // A two-granule mapping into a one-granule gap overlaps the mapping on one side or the other.
  CHECK_REFUSED(hipMemMap(at(base, G), 2 * G, 0, wide, 0), hipErrorInvalidValue);  // runs into 2
  CHECK_REFUSED(hipMemMap(at(base, 3 * G), 2 * G, 0, wide, 0), hipErrorInvalidValue);  // runs into 4
  CHECK_REFUSED(hipMemMap(at(base, 5 * G), 2 * G, 0, wide, 0), hipErrorInvalidValue);  // runs into 6
  CHECK_REFUSED(hipMemMap(at(base, 7 * G), 2 * G, 0, wide, 0), hipErrorInvalidValue);  // past the end
  CHECK(books().mappings == leaks.start.mappings + 4);
  // The gaps, from the last one back: the reservation is then mapped end to end, in order.
  for (const std::size_t granule : {7, 5, 3, 1}) {
    REQUIRE(hipMemMap(at(base, granule * G), G, 0, handles[granule], 0) == hipSuccess);
  }
  std::size_t count = 0;
  REQUIRE(hipxxGetReservationMappingCount(base, &count) == hipSuccess);
  CHECK(count == kGranules);
  // One grant and one copy over all eight; each granule shows its own allocation.
  grant(base, kGranules * G, hipMemAccessFlagsProtReadWrite);
  write_pattern(base, kGranules * G, 53);
  CHECK(holds_pattern(base, kGranules * G, 53));
  for (std::size_t granule = 0; granule < kGranules; ++granule) {
    Handle retained = nullptr;
    REQUIRE(hipMemRetainAllocationHandle(&retained, at(base, granule * G + G / 2)) == hipSuccess);
    CHECK(retained == handles[granule]);
    CHECK(hipMemRelease(retained) == hipSuccess);
  }
  CHECK(hipMemUnmap(base, kGranules * G) == hipSuccess);
  CHECK(books().mappings == leaks.start.mappings);
  for (Handle handle : handles) CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemRelease(wide) == hipSuccess);
  CHECK(hipMemAddressFree(base, kGranules * G) == hipSuccess);
}

TEST_CASE("map and unmap: more mappings at once than the books keep spare nodes for, twice over") {
  // The books keep the nodes of 64 unmapped mappings for reuse and free the rest; mapping 200 at
  // once, unmapping them all and mapping them again goes through both, and ASan sees every node.
  LeakCheck leaks;
  constexpr std::size_t kMappings = 200;
  void* base = reserve(kMappings * G);
  Handle handle = create(G);
  for (int round = 0; round < 2; ++round) {
    // Every other granule first, then the ones between: both ways into the tree.
    for (std::size_t granule = 0; granule < kMappings; granule += 2) {
      REQUIRE(hipMemMap(at(base, granule * G), G, 0, handle, 0) == hipSuccess);
    }
    for (std::size_t granule = kMappings - 1; granule < kMappings; granule -= 2) {
      REQUIRE(hipMemMap(at(base, granule * G), G, 0, handle, 0) == hipSuccess);
    }
    std::size_t count = 0;
    REQUIRE(hipxxGetReservationMappingCount(base, &count) == hipSuccess);
    CHECK(count == kMappings);
    CHECK(hipMemUnmap(base, kMappings * G) == hipSuccess);
    REQUIRE(hipxxGetReservationMappingCount(base, &count) == hipSuccess);
    CHECK(count == 0);
  }
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, kMappings * G) == hipSuccess);
}

TEST_CASE("map: the range must lie inside one reservation") {
  LeakCheck leaks;
  AdjacentReservations pair(2 * G);
  Handle two = create(2 * G);
  // [first + G, second + G) is reserved end to end, but by two reservations.
  CHECK_REFUSED(hipMemMap(at(pair.first, G), 2 * G, 0, two, 0), hipErrorInvalidValue);
  CHECK(hipMemMap(pair.second, 2 * G, 0, two, 0) == hipSuccess);
  CHECK(hipMemUnmap(pair.second, 2 * G) == hipSuccess);
  CHECK(hipMemRelease(two) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("unmap: refused ranges change nothing") {
  LeakCheck leaks;
  // [0,2G) mapping A, [2G,3G) mapping B, [3G,4G) empty, [4G,5G) mapping C; reservation [0, 6G)
  void* base = reserve(6 * G);
  Handle a = create(2 * G);
  Handle b = create(G);
  Handle c = create(G);
  REQUIRE(hipMemMap(base, 2 * G, 0, a, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, 2 * G), G, 0, b, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, 4 * G), G, 0, c, 0) == hipSuccess);
  grant(base, 3 * G, hipMemAccessFlagsProtReadWrite);
  grant(at(base, 4 * G), G, hipMemAccessFlagsProtReadWrite);
  write_pattern(base, 3 * G, 31);
  write_pattern(at(base, 4 * G), G, 32);

  CHECK_REFUSED(hipMemUnmap(nullptr, G), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemUnmap(base, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemUnmap(base, G), hipErrorInvalidValue);  // first half of A
  CHECK_REFUSED(hipMemUnmap(at(base, G), G), hipErrorInvalidValue);  // second half of A
  CHECK_REFUSED(hipMemUnmap(at(base, G), 2 * G), hipErrorInvalidValue);  // cuts A, whole B
  CHECK_REFUSED(hipMemUnmap(base, 4 * G), hipErrorInvalidValue);  // A, B and the gap
  CHECK_REFUSED(hipMemUnmap(at(base, 2 * G), 3 * G), hipErrorInvalidValue);  // B, gap, C
  CHECK_REFUSED(hipMemUnmap(base, 5 * G), hipErrorInvalidValue);  // everything with the gap
  CHECK_REFUSED(hipMemUnmap(at(base, 3 * G), G), hipErrorInvalidValue);  // the gap alone
  CHECK_REFUSED(hipMemUnmap(at(base, 5 * G), G), hipErrorInvalidValue);  // reserved, never mapped
  CHECK_REFUSED(hipMemUnmap(at(base, 4 * G), 2 * G), hipErrorInvalidValue);  // C and the tail
  CHECK_REFUSED(hipMemUnmap(at(base, 4 * G), 3 * G), hipErrorInvalidValue);  // past the reservation
  CHECK_REFUSED(hipMemUnmap(at(base, 1), 2 * G), hipErrorInvalidValue);
  std::vector<unsigned char> host(G);
  CHECK_REFUSED(hipMemUnmap(host.data(), G), hipErrorInvalidValue);

  // Every mapping is still there with its data and access.
  CHECK(holds_pattern(base, 3 * G, 31));
  CHECK(holds_pattern(at(base, 4 * G), G, 32));
  CHECK(access_of(at(base, G)) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(at(base, 2 * G)) == hipMemAccessFlagsProtReadWrite);

  CHECK(hipMemUnmap(at(base, 4 * G), G) == hipSuccess);
  CHECK_REFUSED(hipMemUnmap(at(base, 4 * G), G), hipErrorInvalidValue);  // twice
  CHECK(hipMemUnmap(base, 3 * G) == hipSuccess);  // A and B together
  CHECK(books().mappings == leaks.start.mappings);
  CHECK(hipMemRelease(a) == hipSuccess);
  CHECK(hipMemRelease(b) == hipSuccess);
  CHECK(hipMemRelease(c) == hipSuccess);
  CHECK(hipMemAddressFree(base, 6 * G) == hipSuccess);
}

TEST_CASE("unmap and set access: one call may span several whole adjacent mappings") {
  LeakCheck leaks;
  constexpr int kMappings = 4;
  void* base = reserve(kMappings * 2 * G);
  std::vector<Handle> handles;
  for (int i = 0; i < kMappings; ++i) {
    // Alternate sizes so the tiling is not uniform: G, 2G, G, 2G at 0, G, 3G, 4G.
    handles.push_back(create(i % 2 == 0 ? G : 2 * G));
  }
  std::size_t offset = 0;
  for (int i = 0; i < kMappings; ++i) {
    const std::size_t size = i % 2 == 0 ? G : 2 * G;
    REQUIRE(hipMemMap(at(base, offset), size, 0, handles[static_cast<std::size_t>(i)], 0) == hipSuccess);
    offset += size;
  }
  const std::size_t total = offset;  // 6G
  CHECK(books().mappings == leaks.start.mappings + kMappings);

  // One set-access over all four, then one copy over all four.
  grant(base, total, hipMemAccessFlagsProtReadWrite);
  for (std::size_t o = 0; o < total; o += G) CHECK(access_of(at(base, o)) == hipMemAccessFlagsProtReadWrite);
  write_pattern(base, total, 41);
  CHECK(holds_pattern(base, total, 41));

  // A sub-span of whole mappings (the middle two): read-only, the others untouched.
  grant(at(base, G), 3 * G, hipMemAccessFlagsProtRead);
  CHECK(access_of(base) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(at(base, G)) == hipMemAccessFlagsProtRead);
  CHECK(access_of(at(base, 3 * G)) == hipMemAccessFlagsProtRead);
  CHECK(access_of(at(base, 4 * G)) == hipMemAccessFlagsProtReadWrite);
  const std::vector<unsigned char> junk(total, 0x77);
  CHECK_REFUSED(hipMemcpy(base, junk.data(), total, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK(holds_pattern(base, total, 41));

  // One unmap over the first three, then the last alone.
  CHECK(hipMemUnmap(base, 4 * G) == hipSuccess);
  CHECK(books().mappings == leaks.start.mappings + 1);
  CHECK(hipMemUnmap(at(base, 4 * G), 2 * G) == hipSuccess);
  CHECK(books().mappings == leaks.start.mappings);
  for (Handle handle : handles) CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, kMappings * 2 * G) == hipSuccess);
}

TEST_CASE("unmap and set access: adjacent mappings in two reservations are not one range") {
  LeakCheck leaks;
  AdjacentReservations pair(G);
  Handle a = create(G);
  Handle b = create(G);
  REQUIRE(hipMemMap(pair.first, G, 0, a, 0) == hipSuccess);
  REQUIRE(hipMemMap(pair.second, G, 0, b, 0) == hipSuccess);
  const hipMemAccessDesc rw = make_desc(hipMemAccessFlagsProtReadWrite);
  CHECK_REFUSED(hipMemSetAccess(pair.first, 2 * G, &rw, 1), hipErrorInvalidValue);
  CHECK(access_of(pair.first) == hipMemAccessFlagsProtNone);
  CHECK(access_of(pair.second) == hipMemAccessFlagsProtNone);
  CHECK_REFUSED(hipMemUnmap(pair.first, 2 * G), hipErrorInvalidValue);
  CHECK(books().mappings == leaks.start.mappings + 2);
  // Copies stay inside one reservation too, even with both sides granted.
  grant(pair.first, G, hipMemAccessFlagsProtReadWrite);
  grant(pair.second, G, hipMemAccessFlagsProtReadWrite);
  write_pattern(pair.first, G, 43);
  write_pattern(pair.second, G, 44);
  const std::vector<unsigned char> junk(2 * G, 0x12);
  CHECK_REFUSED(hipMemcpy(at(pair.first, G / 2), junk.data(), G, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK(holds_pattern(pair.first, G, 43));
  CHECK(holds_pattern(pair.second, G, 44));
  CHECK(hipMemUnmap(pair.first, G) == hipSuccess);
  CHECK(hipMemUnmap(pair.second, G) == hipSuccess);
  CHECK(hipMemRelease(a) == hipSuccess);
  CHECK(hipMemRelease(b) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("set access: None, Read and ReadWrite decide what copies may do") {
  LeakCheck leaks;
  Mapped mapped(2 * G, 51);
  const std::vector<unsigned char> junk(2 * G, 0x33);
  std::vector<unsigned char> back(2 * G);

  SUBCASE("read-only: copies out work, copies in and memset fail") {
    grant(mapped.base, 2 * G, hipMemAccessFlagsProtRead);
    CHECK(access_of(mapped.base) == hipMemAccessFlagsProtRead);
    CHECK(mapped.intact());
    CHECK_REFUSED(hipMemcpy(mapped.base, junk.data(), 2 * G, hipMemcpyHostToDevice), hipErrorInvalidValue);
    CHECK_REFUSED(hipMemcpy(at(mapped.base, 10), junk.data(), 1, hipMemcpyDefault), hipErrorInvalidValue);
    CHECK_REFUSED(hipMemset(mapped.base, 0, 2 * G), hipErrorInvalidValue);
    // Device-to-device out of it into a writable buffer works.
    void* linear = nullptr;
    REQUIRE(hipMalloc(&linear, 2 * G) == hipSuccess);
    CHECK(hipMemcpy(linear, mapped.base, 2 * G, hipMemcpyDeviceToDevice) == hipSuccess);
    CHECK(holds_pattern(linear, 2 * G, 51));
    CHECK_REFUSED(hipMemcpy(mapped.base, linear, 2 * G, hipMemcpyDeviceToDevice), hipErrorInvalidValue);
    CHECK(hipFree(linear) == hipSuccess);
    CHECK(mapped.intact());
  }
  SUBCASE("none again after ReadWrite: every copy fails, the data survives") {
    grant(mapped.base, 2 * G, hipMemAccessFlagsProtNone);
    CHECK(access_of(mapped.base) == hipMemAccessFlagsProtNone);
    CHECK_REFUSED(hipMemcpy(back.data(), mapped.base, 2 * G, hipMemcpyDeviceToHost), hipErrorInvalidValue);
    CHECK_REFUSED(hipMemcpy(mapped.base, junk.data(), 2 * G, hipMemcpyHostToDevice), hipErrorInvalidValue);
    grant(mapped.base, 2 * G, hipMemAccessFlagsProtReadWrite);
    CHECK(mapped.intact());
  }
  SUBCASE("ReadWrite: memset and partial copies") {
    CHECK(hipMemset(at(mapped.base, G), 0x1ab, 100) == hipSuccess);  // only the low byte counts
    REQUIRE(hipMemcpy(back.data(), mapped.base, 2 * G, hipMemcpyDeviceToHost) == hipSuccess);
    std::vector<unsigned char> expected = pattern(2 * G, 51);
    std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(G), 100, 0xab);
    CHECK(back == expected);
    write_pattern(mapped.base, 2 * G, 51);
  }
  SUBCASE("several descriptors in one call; the last one for a device wins") {
    const hipMemAccessDesc list[] = {make_desc(hipMemAccessFlagsProtNone), make_desc(hipMemAccessFlagsProtRead)};
    CHECK(hipMemSetAccess(mapped.base, 2 * G, list, 2) == hipSuccess);
    CHECK(access_of(mapped.base) == hipMemAccessFlagsProtRead);
    grant(mapped.base, 2 * G, hipMemAccessFlagsProtReadWrite);
  }
}

TEST_CASE("set access: refused arguments leave access and data unchanged") {
  LeakCheck leaks;
  // [0,G) A (Read), [G,2G) B (ReadWrite), [3G,4G) C (Read); reservation [0, 4G)
  void* base = reserve(4 * G);
  Handle a = create(G);
  Handle b = create(G);
  Handle c = create(G);
  REQUIRE(hipMemMap(base, G, 0, a, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, G), G, 0, b, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, 3 * G), G, 0, c, 0) == hipSuccess);
  grant(base, 2 * G, hipMemAccessFlagsProtReadWrite);
  grant(at(base, 3 * G), G, hipMemAccessFlagsProtReadWrite);
  write_pattern(base, 2 * G, 61);
  write_pattern(at(base, 3 * G), G, 62);
  grant(base, G, hipMemAccessFlagsProtRead);
  grant(at(base, 3 * G), G, hipMemAccessFlagsProtRead);

  const hipMemAccessDesc rw = make_desc(hipMemAccessFlagsProtReadWrite);
  const hipMemAccessDesc none = make_desc(hipMemAccessFlagsProtNone);
  CHECK_REFUSED(hipMemSetAccess(nullptr, G, &rw, 1), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemSetAccess(base, 0, &rw, 1), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemSetAccess(base, G, nullptr, 1), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemSetAccess(base, G, &rw, 0), hipErrorInvalidValue);
  hipMemAccessDesc bad = rw;
  bad.flags = static_cast<hipMemAccessFlags>(2);  // write-only is not a HIP access
  CHECK_REFUSED(hipMemSetAccess(base, G, &bad, 1), hipErrorInvalidValue);
  bad.flags = static_cast<hipMemAccessFlags>(4);
  CHECK_REFUSED(hipMemSetAccess(base, G, &bad, 1), hipErrorInvalidValue);
  bad = rw;
  bad.location.type = hipMemLocationTypeInvalid;
  CHECK_REFUSED(hipMemSetAccess(base, G, &bad, 1), hipErrorInvalidValue);
  bad = rw;
  bad.location.id = past_last_device();
  CHECK_REFUSED(hipMemSetAccess(base, G, &bad, 1), hipErrorInvalidValue);
  bad.location.id = -1;
  CHECK_REFUSED(hipMemSetAccess(base, G, &bad, 1), hipErrorInvalidValue);
  // One bad descriptor among good ones spoils the whole call.
  const hipMemAccessDesc mixed[] = {none, bad};
  CHECK_REFUSED(hipMemSetAccess(base, G, mixed, 2), hipErrorInvalidValue);
  // Ranges: gap, cut mapping, unmapped, outside.
  CHECK_REFUSED(hipMemSetAccess(base, 4 * G, &none, 1), hipErrorInvalidValue);  // A, B, gap, C
  CHECK_REFUSED(hipMemSetAccess(at(base, G), 3 * G, &none, 1), hipErrorInvalidValue);  // B, gap, C
  CHECK_REFUSED(hipMemSetAccess(base, 3 * G, &none, 1), hipErrorInvalidValue);  // A, B, gap
  CHECK_REFUSED(hipMemSetAccess(at(base, 2 * G), G, &rw, 1), hipErrorInvalidValue);  // the gap
  CHECK_REFUSED(hipMemSetAccess(base, G / 2, &none, 1), hipErrorInvalidValue);  // cuts A
  CHECK_REFUSED(hipMemSetAccess(at(base, G / 2), G, &none, 1), hipErrorInvalidValue);  // cuts A and B
  CHECK_REFUSED(hipMemSetAccess(at(base, 3 * G), 2 * G, &none, 1), hipErrorInvalidValue);  // past the end
  std::vector<unsigned char> host(G);
  CHECK_REFUSED(hipMemSetAccess(host.data(), G, &rw, 1), hipErrorInvalidValue);

  CHECK(access_of(base) == hipMemAccessFlagsProtRead);
  CHECK(access_of(at(base, G)) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(at(base, 3 * G)) == hipMemAccessFlagsProtRead);
  CHECK(holds_pattern(base, 2 * G, 61));
  CHECK(holds_pattern(at(base, 3 * G), G, 62));

  CHECK(hipMemUnmap(base, 2 * G) == hipSuccess);
  CHECK(hipMemUnmap(at(base, 3 * G), G) == hipSuccess);
  for (Handle handle : {a, b, c}) CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 4 * G) == hipSuccess);
}

TEST_CASE("get access: reports per address and refuses what is not mapped") {
  LeakCheck leaks;
  Mapped mapped(2 * G, 71, 4 * G);
  CHECK(access_of(mapped.base) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(at(mapped.base, G + 17)) == hipMemAccessFlagsProtReadWrite);  // any address inside
  CHECK(access_of(at(mapped.base, 2 * G - 1)) == hipMemAccessFlagsProtReadWrite);

  const hipMemLocation device0{hipMemLocationTypeDevice, 0};
  unsigned long long flags = 0xabc;
  CHECK_REFUSED(hipMemGetAccess(nullptr, &device0, mapped.base), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAccess(&flags, nullptr, mapped.base), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAccess(&flags, &device0, nullptr), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAccess(&flags, &device0, at(mapped.base, 2 * G)), hipErrorInvalidValue);  // reserved only
  CHECK_REFUSED(hipMemGetAccess(&flags, &device0, at(mapped.base, 4 * G - 1)), hipErrorInvalidValue);
  int on_stack = 0;
  CHECK_REFUSED(hipMemGetAccess(&flags, &device0, &on_stack), hipErrorInvalidValue);
  const hipMemLocation no_device{hipMemLocationTypeDevice, past_last_device()};
  CHECK_REFUSED(hipMemGetAccess(&flags, &no_device, mapped.base), hipErrorInvalidValue);
  const hipMemLocation invalid{hipMemLocationTypeInvalid, 0};
  CHECK_REFUSED(hipMemGetAccess(&flags, &invalid, mapped.base), hipErrorInvalidValue);
  CHECK(flags == 0xabc);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("retain: any address inside a mapping gives the same handle and one more reference") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  void* base = reserve(4 * G);
  Handle handle = create(2 * G);
  REQUIRE(hipMemMap(at(base, G), 2 * G, 0, handle, 0) == hipSuccess);
  grant(at(base, G), 2 * G, hipMemAccessFlagsProtReadWrite);
  write_pattern(at(base, G), 2 * G, 81);

  const std::size_t offsets[] = {G, G + 1, G + 123, 2 * G, 2 * G + G / 2 + 7, 3 * G - 1};
  for (const std::size_t offset : offsets) {
    CAPTURE(offset);
    Handle retained = nullptr;
    CHECK(hipMemRetainAllocationHandle(&retained, at(base, offset)) == hipSuccess);
    CHECK(retained == handle);
  }
  CHECK(books().allocations == start.allocations + 1);  // still one allocation

  // Six retains plus the creation: seven releases needed. After unmapping, the allocation
  // survives every release but the last.
  CHECK(hipMemUnmap(at(base, G), 2 * G) == hipSuccess);
  for (std::size_t i = 0; i < std::size(offsets); ++i) {
    CHECK(hipMemRelease(handle) == hipSuccess);
    CHECK(books().allocations == start.allocations + 1);
  }
  // Still usable: map it again and the data is there.
  REQUIRE(hipMemMap(base, 2 * G, 0, handle, 0) == hipSuccess);
  grant(base, 2 * G, hipMemAccessFlagsProtRead);
  CHECK(holds_pattern(base, 2 * G, 81));
  CHECK(hipMemUnmap(base, 2 * G) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);  // the last one
  CHECK(books().allocations == start.allocations);
  CHECK_REFUSED(hipMemRelease(handle), hipErrorInvalidValue);
  CHECK(hipMemAddressFree(base, 4 * G) == hipSuccess);
}

TEST_CASE("retain: refused arguments") {
  LeakCheck leaks;
  Mapped mapped(G, 82, 3 * G);
  Handle const sentinel = forged_handle();
  Handle handle = sentinel;
  CHECK_REFUSED(hipMemRetainAllocationHandle(nullptr, mapped.base), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemRetainAllocationHandle(&handle, nullptr), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemRetainAllocationHandle(&handle, at(mapped.base, G)), hipErrorInvalidValue);  // not mapped
  CHECK_REFUSED(hipMemRetainAllocationHandle(&handle, at(mapped.base, 3 * G - 1)), hipErrorInvalidValue);
  int on_stack = 0;
  CHECK_REFUSED(hipMemRetainAllocationHandle(&handle, &on_stack), hipErrorInvalidValue);
  void* linear = nullptr;
  REQUIRE(hipMalloc(&linear, 64) == hipSuccess);
  CHECK_REFUSED(hipMemRetainAllocationHandle(&handle, linear), hipErrorInvalidValue);
  CHECK(hipFree(linear) == hipSuccess);
  CHECK(handle == sentinel);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("release of a mapped handle defers the physical free to the last unmap") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  void* base = reserve(4 * G);
  Handle handle = create(G);
  REQUIRE(hipMemMap(base, G, 0, handle, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, 2 * G), G, 0, handle, 0) == hipSuccess);  // two views of one allocation
  grant(base, G, hipMemAccessFlagsProtReadWrite);
  grant(at(base, 2 * G), G, hipMemAccessFlagsProtRead);
  write_pattern(base, G, 91);

  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(books().allocations == start.allocations + 1);  // alive: still mapped
  CHECK(books().mappings == start.mappings + 2);
  // The application's handle is gone...
  hipMemAllocationProp prop{};
  CHECK_REFUSED(hipMemRelease(handle), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetAllocationPropertiesFromHandle(&prop, handle), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemMap(at(base, 3 * G), G, 0, handle, 0), hipErrorInvalidValue);
  // ...the memory is not: both views still read (and the writable one still writes).
  CHECK(holds_pattern(base, G, 91));
  CHECK(holds_pattern(at(base, 2 * G), G, 91));
  write_pattern(base, G, 92);
  CHECK(holds_pattern(at(base, 2 * G), G, 92));

  CHECK(hipMemUnmap(base, G) == hipSuccess);
  CHECK(books().allocations == start.allocations + 1);  // the second view keeps it
  CHECK(holds_pattern(at(base, 2 * G), G, 92));
  CHECK(hipMemUnmap(at(base, 2 * G), G) == hipSuccess);
  CHECK(books().allocations == start.allocations);  // the last unmap freed it
  CHECK(books().mappings == start.mappings);
  CHECK(hipMemAddressFree(base, 4 * G) == hipSuccess);
}

TEST_CASE("release of a mapped handle: a spanning unmap frees it once") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  void* base = reserve(2 * G);
  Handle handle = create(G);
  REQUIRE(hipMemMap(base, G, 0, handle, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, G), G, 0, handle, 0) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(books().allocations == start.allocations + 1);
  CHECK(hipMemUnmap(base, 2 * G) == hipSuccess);
  CHECK(books().allocations == start.allocations);
  CHECK(hipMemAddressFree(base, 2 * G) == hipSuccess);
}

TEST_CASE("retain after a deferred release brings the handle back") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  void* base = reserve(G);
  Handle handle = create(G);
  REQUIRE(hipMemMap(base, G, 0, handle, 0) == hipSuccess);
  REQUIRE(hipMemRelease(handle) == hipSuccess);
  Handle again = nullptr;
  CHECK(hipMemRetainAllocationHandle(&again, at(base, 5)) == hipSuccess);
  CHECK(again == handle);
  hipMemAllocationProp prop{};
  CHECK(hipMemGetAllocationPropertiesFromHandle(&prop, again) == hipSuccess);
  CHECK(hipMemUnmap(base, G) == hipSuccess);
  CHECK(books().allocations == start.allocations + 1);  // the retain holds it now
  CHECK(hipMemRelease(again) == hipSuccess);
  CHECK(books().allocations == start.allocations);
  CHECK(hipMemAddressFree(base, G) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("export and import: a second handle to the same memory in one process") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  Mapped mapped(2 * G, 101, 2 * G, hipMemHandleTypePosixFileDescriptor);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, mapped.handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  REQUIRE(fd >= 0);
  CHECK(fcntl(fd, F_GETFD) >= 0);
  int second_fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&second_fd, mapped.handle, hipMemHandleTypePosixFileDescriptor, 0) ==
          hipSuccess);
  CHECK(second_fd != fd);  // each export is a new descriptor the caller owns
  CHECK(close(second_fd) == 0);

  Handle imported = nullptr;
  REQUIRE(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                          hipMemHandleTypePosixFileDescriptor) == hipSuccess);
  CHECK(close(fd) == 0);  // the runtime keeps its own reference
  CHECK(imported != mapped.handle);
  CHECK(books().allocations == start.allocations + 2);
  hipMemAllocationProp prop{};
  REQUIRE(hipMemGetAllocationPropertiesFromHandle(&prop, imported) == hipSuccess);
  CHECK(prop.type == hipMemAllocationTypePinned);
  CHECK(prop.requestedHandleType == hipMemHandleTypePosixFileDescriptor);
  CHECK(prop.location.type == hipMemLocationTypeDevice);
  CHECK(prop.location.id == 0);

  void* view = reserve(2 * G);
  CHECK_REFUSED(hipMemMap(view, G, 0, imported, 0), hipErrorInvalidValue);  // the size came with the fd
  REQUIRE(hipMemMap(view, 2 * G, 0, imported, 0) == hipSuccess);
  grant(view, 2 * G, hipMemAccessFlagsProtReadWrite);
  CHECK(holds_pattern(view, 2 * G, 101));
  write_pattern(view, 2 * G, 102);
  CHECK(holds_pattern(mapped.base, 2 * G, 102));
  // The imported allocation can be exported again.
  int re_export = -1;
  CHECK(hipMemExportToShareableHandle(&re_export, imported, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  CHECK(close(re_export) == 0);

  CHECK(hipMemUnmap(view, 2 * G) == hipSuccess);
  CHECK(hipMemRelease(imported) == hipSuccess);
  CHECK(hipMemAddressFree(view, 2 * G) == hipSuccess);
  mapped.seed = 102;
  CHECK(mapped.intact());
}

TEST_CASE("two imports of one descriptor at once: releasing one leaves the other whole, exportable too") {
  // ROCr may answer both imports with one handle of its own, counted twice.
  LeakCheck leaks;
  Mapped mapped(G, 103, G, hipMemHandleTypePosixFileDescriptor);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, mapped.handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  const auto import = [](int from) {
    Handle imported = nullptr;
    REQUIRE(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(from)),
                                            hipMemHandleTypePosixFileDescriptor) == hipSuccess);
    return imported;
  };
  const Handle first = import(fd);
  const Handle second = import(fd);
  CHECK(close(fd) == 0);
  CHECK(first != second);
  void* view = reserve(G);
  REQUIRE(hipMemMap(view, G, 0, second, 0) == hipSuccess);
  CHECK(hipMemRelease(first) == hipSuccess);
  grant(view, G, hipMemAccessFlagsProtReadWrite);
  CHECK(holds_pattern(view, G, 103));
  CHECK(hipMemset(view, 0x5a, G) == hipSuccess);

  int again = -1;
  REQUIRE(hipMemExportToShareableHandle(&again, second, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  const Handle third = import(again);
  CHECK(close(again) == 0);
  void* other = reserve(G);
  REQUIRE(hipMemMap(other, G, 0, third, 0) == hipSuccess);
  grant(other, G, hipMemAccessFlagsProtRead);
  std::vector<unsigned char> seen(G);
  CHECK(hipMemcpy(seen.data(), other, G, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(seen == std::vector<unsigned char>(G, 0x5a));

  CHECK(hipMemUnmap(other, G) == hipSuccess);
  CHECK(hipMemRelease(third) == hipSuccess);
  CHECK(hipMemAddressFree(other, G) == hipSuccess);
  CHECK(hipMemUnmap(view, G) == hipSuccess);
  CHECK(hipMemRelease(second) == hipSuccess);
  CHECK(hipMemAddressFree(view, G) == hipSuccess);
}

TEST_CASE("an imported handle gives back the descriptor it keeps, at the latest by the next device synchronisation") {
  // What a process that imports and releases many handles relies on: no descriptor piles up. A
  // backend may close the one it keeps for re-export a little after the release (the CUDA backend
  // does it on a thread of its own); hipDeviceSynchronize finishes such closes.
  Mapped mapped(G, 7, G, hipMemHandleTypePosixFileDescriptor);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, mapped.handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  const std::size_t before = test_support::open_fd_count();  // which synchronises first
  for (int round = 0; round < 50; ++round) {
    Handle imported = nullptr;
    REQUIRE(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                            hipMemHandleTypePosixFileDescriptor) == hipSuccess);
    REQUIRE(hipMemRelease(imported) == hipSuccess);
  }
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  CHECK(test_support::open_fd_count() == before);
  CHECK(close(fd) == 0);
}

TEST_CASE("export: refused arguments") {
  LeakCheck leaks;
  Handle shareable = create(G, hipMemHandleTypePosixFileDescriptor);
  Handle plain = create(G);
  int fd = -7;
  CHECK_REFUSED(hipMemExportToShareableHandle(nullptr, shareable, hipMemHandleTypePosixFileDescriptor, 0),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, shareable, hipMemHandleTypePosixFileDescriptor, 1),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, shareable, hipMemHandleTypeNone, 0), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, shareable, hipMemHandleTypeWin32, 0), hipErrorNotSupported);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, shareable, hipMemHandleTypeWin32Kmt, 0), hipErrorNotSupported);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, shareable, static_cast<hipMemAllocationHandleType>(3), 0),
                hipErrorInvalidValue);
  // Only an allocation created for the handle type may be exported as it.
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, plain, hipMemHandleTypePosixFileDescriptor, 0),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, nullptr, hipMemHandleTypePosixFileDescriptor, 0),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, forged_handle(), hipMemHandleTypePosixFileDescriptor, 0),
                hipErrorInvalidValue);
  CHECK(hipMemRelease(shareable) == hipSuccess);
  CHECK_REFUSED(hipMemExportToShareableHandle(&fd, shareable, hipMemHandleTypePosixFileDescriptor, 0),
                hipErrorInvalidValue);
  CHECK(fd == -7);
  CHECK(hipMemRelease(plain) == hipSuccess);
}

namespace {
void* as_os_handle(int fd) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(static_cast<unsigned>(fd))); }
}  // namespace

TEST_CASE("import: refused descriptors") {
  LeakCheck leaks;
  Handle source = create(G, hipMemHandleTypePosixFileDescriptor);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, source, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  Handle const sentinel = forged_handle();
  Handle handle = sentinel;

  CHECK_REFUSED(hipMemImportFromShareableHandle(nullptr, as_os_handle(fd), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(fd), hipMemHandleTypeWin32),
                hipErrorNotSupported);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(fd), hipMemHandleTypeWin32Kmt),
                hipErrorNotSupported);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(fd), hipMemHandleTypeNone), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(fd), static_cast<hipMemAllocationHandleType>(5)),
                hipErrorInvalidValue);
  // Values that cannot be descriptors.
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(~std::uintptr_t{0}),
                                                hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(std::uintptr_t{1} << 40),
                                                hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);

  // A read-only descriptor of the same memory.
  const std::string proc_path = "/proc/self/fd/" + std::to_string(fd);
  const int read_only = open(proc_path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(read_only >= 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(read_only), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  CHECK(close(read_only) == 0);
  // A closed descriptor.
  const int closed = dup(fd);
  REQUIRE(closed >= 0);
  REQUIRE(close(closed) == 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(closed), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  // Descriptors that are not shareable memory: a pipe, /dev/zero, a directory, a regular file.
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  CHECK_REFUSED(
      hipMemImportFromShareableHandle(&handle, as_os_handle(pipe_fds[1]), hipMemHandleTypePosixFileDescriptor),
      hipErrorInvalidValue);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  const int zero = open("/dev/zero", O_RDWR | O_CLOEXEC);
  REQUIRE(zero >= 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(zero), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  close(zero);
  const int directory = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(directory >= 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(directory), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  close(directory);
  {
    // A read-write regular file of a whole page: a file on disk, not exported device memory.
    // On a disk file system: a tmpfs file is shared memory much like a memfd.
    std::string path;
    for (const char* dir : {".", "/var/tmp", "/tmp"}) {
      struct statfs fs {};
      if (statfs(dir, &fs) == 0 && fs.f_type != TMPFS_MAGIC) {
        path = std::string{dir} + "/hipxx-test-vmm-XXXXXX";
        break;
      }
    }
    REQUIRE_MESSAGE(!path.empty(), "no disk-backed directory for a regular file");
    const int file = mkstemp(path.data());
    REQUIRE(file >= 0);
    unlink(path.c_str());
    REQUIRE(ftruncate(file, static_cast<off_t>(G)) == 0);
    CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(file), hipMemHandleTypePosixFileDescriptor),
                  hipErrorInvalidValue);
    close(file);
  }
  // An empty memfd that never came from hipMemCreate has no size to map.
  const int empty = memfd_create("hipxx-test-empty", MFD_CLOEXEC);
  REQUIRE(empty >= 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(empty), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  close(empty);
  // A memfd of a whole page whose size is not sealed: whoever else holds it could shrink it under
  // the importer's mappings.
  const int unsealed = memfd_create("hipxx-test-unsealed", MFD_CLOEXEC);
  REQUIRE(unsealed >= 0);
  REQUIRE(ftruncate(unsealed, static_cast<off_t>(G)) == 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(unsealed), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  close(unsealed);
  // Memory sealed against writes: it could never be mapped read-write.
  const int sealed = memfd_create("hipxx-test-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(sealed >= 0);
  REQUIRE(ftruncate(sealed, static_cast<off_t>(G)) == 0);
  REQUIRE(fcntl(sealed, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(sealed), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  close(sealed);
  // Sized and sealed against shrinking and growing, but with its seals open: whoever else holds it
  // could seal it against writes after the import, and every map would fail.
  const int reseal = memfd_create("hipxx-test-open-seals", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(reseal >= 0);
  REQUIRE(ftruncate(reseal, static_cast<off_t>(G)) == 0);
  REQUIRE(fcntl(reseal, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  CHECK_REFUSED(hipMemImportFromShareableHandle(&handle, as_os_handle(reseal), hipMemHandleTypePosixFileDescriptor),
                hipErrorInvalidValue);
  close(reseal);
  // Huge-page memory, sealed as an allocation is: it cannot be mapped at the offered granularity.
  const std::size_t huge = std::size_t{2} << 20;
  const int huge_pages = memfd_create("hipxx-test-huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
  if (huge_pages < 0) {
    MESSAGE("this kernel makes no huge-page memfd (errno " << errno << "): that refusal is not checked here");
  } else {
    REQUIRE(ftruncate(huge_pages, static_cast<off_t>(huge)) == 0);
    REQUIRE(fcntl(huge_pages, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
    CHECK_REFUSED(
        hipMemImportFromShareableHandle(&handle, as_os_handle(huge_pages), hipMemHandleTypePosixFileDescriptor),
        hipErrorInvalidValue);
    close(huge_pages);
  }
  CHECK(handle == sentinel);

  CHECK(close(fd) == 0);
  CHECK(hipMemRelease(source) == hipSuccess);
}

TEST_CASE("import: descriptor 0 is a descriptor like any other") {
  // It arrives as a null pointer. A process whose standard input is closed gets 0 from the export.
  LeakCheck leaks;
  const Mapped source(G, 121, G, hipMemHandleTypePosixFileDescriptor);
  const int saved_input = fcntl(0, F_DUPFD_CLOEXEC, 3);
  REQUIRE(saved_input >= 0);
  REQUIRE(close(0) == 0);
  int fd = -1;
  const hipError_t exported = hipMemExportToShareableHandle(&fd, source.handle, hipMemHandleTypePosixFileDescriptor, 0);
  Handle imported = nullptr;
  const hipError_t imported_result =
      hipMemImportFromShareableHandle(&imported, as_os_handle(fd), hipMemHandleTypePosixFileDescriptor);
  // Standard input back before anything can fail.
  if (fd == 0) REQUIRE(dup2(saved_input, 0) == 0);
  if (fd > 0) close(fd);
  REQUIRE(close(saved_input) == 0);
  REQUIRE(exported == hipSuccess);
  CHECK(fd == 0);
  REQUIRE(imported_result == hipSuccess);
  void* view = reserve(G);
  REQUIRE(hipMemMap(view, G, 0, imported, 0) == hipSuccess);
  grant(view, G, hipMemAccessFlagsProtRead);
  CHECK(holds_pattern(view, G, 121));
  CHECK(hipMemUnmap(view, G) == hipSuccess);
  CHECK(hipMemAddressFree(view, G) == hipSuccess);
  CHECK(hipMemRelease(imported) == hipSuccess);
}

TEST_CASE("an exported descriptor outlives the allocation's handle") {
  LeakCheck leaks;
  Handle source = create(G, hipMemHandleTypePosixFileDescriptor);
  void* first = reserve(G);
  REQUIRE(hipMemMap(first, G, 0, source, 0) == hipSuccess);
  grant(first, G, hipMemAccessFlagsProtReadWrite);
  write_pattern(first, G, 111);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, source, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  CHECK(hipMemUnmap(first, G) == hipSuccess);
  CHECK(hipMemRelease(source) == hipSuccess);  // the allocation is gone from the books

  Handle imported = nullptr;
  REQUIRE(hipMemImportFromShareableHandle(&imported, as_os_handle(fd), hipMemHandleTypePosixFileDescriptor) ==
          hipSuccess);
  CHECK(close(fd) == 0);
  REQUIRE(hipMemMap(first, G, 0, imported, 0) == hipSuccess);
  grant(first, G, hipMemAccessFlagsProtRead);
  CHECK(holds_pattern(first, G, 111));
  CHECK(hipMemUnmap(first, G) == hipSuccess);
  CHECK(hipMemRelease(imported) == hipSuccess);
  CHECK(hipMemAddressFree(first, G) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("hipMemMapArrayAsync is not supported") {
  LeakCheck leaks;
  hipArrayMapInfo info{};
  info.resourceType = hipResourceTypeArray;
  info.memOperationType = hipMemOperationTypeMap;
  info.memHandleType = hipMemHandleTypeGeneric;
  CHECK_REFUSED(hipMemMapArrayAsync(&info, 1, nullptr), hipErrorNotSupported);
  CHECK_REFUSED(hipMemMapArrayAsync(nullptr, 0, nullptr), hipErrorNotSupported);
}

TEST_CASE("hipMemcpy and hipMemset respect mapping boundaries") {
  LeakCheck leaks;
  // [0,G) A ReadWrite, [G,2G) B ReadWrite, [2G,3G) C none, [3G,4G) unmapped.
  void* base = reserve(4 * G);
  Handle a = create(G);
  Handle b = create(G);
  Handle c = create(G);
  REQUIRE(hipMemMap(base, G, 0, a, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, G), G, 0, b, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, 2 * G), G, 0, c, 0) == hipSuccess);
  grant(base, 2 * G, hipMemAccessFlagsProtReadWrite);
  write_pattern(base, 2 * G, 121);

  std::vector<unsigned char> host(4 * G, 0x5c);
  const std::vector<unsigned char> junk(4 * G, 0x66);
  // Across A and B: fine, both ways.
  CHECK(hipMemcpy(host.data(), at(base, G / 2), G, hipMemcpyDeviceToHost) == hipSuccess);
  // Into C, or over into it.
  CHECK_REFUSED(hipMemcpy(at(base, 2 * G - 8), junk.data(), 16, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(host.data(), at(base, 2 * G - 8), 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(at(base, 2 * G - 8), 0, 16), hipErrorInvalidValue);
  // Into the unmapped tail or past the reservation.
  CHECK(hipMemUnmap(at(base, 2 * G), G) == hipSuccess);
  CHECK_REFUSED(hipMemcpy(at(base, 2 * G - 8), junk.data(), 16, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(at(base, 3 * G), junk.data(), 16, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(host.data(), at(base, 3 * G), 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(at(base, 4 * G - 8), junk.data(), 16, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(at(base, 3 * G), 0, 1), hipErrorInvalidValue);
  // A copy between two mappings of the same reservation.
  CHECK(hipMemcpy(at(base, G), base, G, hipMemcpyDeviceToDevice) == hipSuccess);
  std::vector<unsigned char> first_half(G);
  REQUIRE(hipMemcpy(first_half.data(), at(base, G), G, hipMemcpyDeviceToHost) == hipSuccess);
  const std::vector<unsigned char> expected = pattern(2 * G, 121);
  CHECK(std::equal(first_half.begin(), first_half.end(), expected.begin()));

  CHECK(hipMemUnmap(base, 2 * G) == hipSuccess);
  for (Handle handle : {a, b, c}) CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 4 * G) == hipSuccess);
}

TEST_CASE("a refused VMM call is the thread's last error") {
  LeakCheck leaks;
  (void)hipGetLastError();
  CHECK(hipMemRelease(forged_handle()) == hipErrorInvalidValue);
  CHECK(hipPeekAtLastError() == hipErrorInvalidValue);
  hipArrayMapInfo info{};
  CHECK(hipMemMapArrayAsync(&info, 1, nullptr) == hipErrorNotSupported);
  CHECK(hipGetLastError() == hipErrorNotSupported);
  CHECK(hipGetLastError() == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// A random walk through the calls, each one's result predicted by a model of the documented rules:
// what the unit cases above check one at a time, in the orders and mixtures a program makes.

namespace {

// What the runtime should hold, kept by the test.
class VmmModel {
 public:
  struct Allocation {
    Handle handle = nullptr;
    std::size_t size = 0;
    bool released = false;
    int mappings = 0;
    int content = -1;  // the byte every position holds, once written; -1 before
  };
  struct Mapping {
    std::size_t offset = 0;  // in its reservation
    std::size_t allocation = 0;  // index into allocations
    bool writable = false;
  };
  struct Reservation {
    void* base = nullptr;
    std::size_t size = 0;
    std::vector<Mapping> mappings;  // kept in address order
  };

  std::vector<Reservation> reservations;
  std::vector<Allocation> allocations;

  // The run of whole mappings covering [offset, offset + size) of `reservation` exactly, end to end
  // with no gap: their positions in its list, or nothing where the range is not such a run.
  [[nodiscard]] std::optional<std::pair<std::size_t, std::size_t>> tiling(const Reservation& reservation,
                                                                          std::size_t offset, std::size_t size) const {
    std::size_t first = 0;
    while (first < reservation.mappings.size() && reservation.mappings[first].offset < offset) ++first;
    if (first == reservation.mappings.size() || reservation.mappings[first].offset != offset) return std::nullopt;
    std::size_t end = offset;
    std::size_t last = first;
    for (; last < reservation.mappings.size() && end < offset + size; ++last) {
      if (reservation.mappings[last].offset != end) return std::nullopt;
      end += allocations[reservation.mappings[last].allocation].size;
    }
    if (end != offset + size) return std::nullopt;
    return std::pair{first, last};
  }

  [[nodiscard]] bool overlaps(const Reservation& reservation, std::size_t offset, std::size_t size) const {
    return std::any_of(reservation.mappings.begin(), reservation.mappings.end(), [&](const Mapping& mapping) {
      const std::size_t mapped_size = allocations[mapping.allocation].size;
      return offset < mapping.offset + mapped_size && mapping.offset < offset + size;
    });
  }

  [[nodiscard]] hipxxBookCounts books_beside(hipxxBookCounts start) const {
    start.reservations += reservations.size();
    for (const Reservation& reservation : reservations) start.mappings += reservation.mappings.size();
    start.allocations += static_cast<std::size_t>(std::count_if(
        allocations.begin(), allocations.end(), [](const Allocation& a) { return !a.released || a.mappings > 0; }));
    return start;
  }
};

class VmmWalk : test_support::WalkRandom {
 public:
  explicit VmmWalk(std::uint64_t seed) : WalkRandom(seed) {}

  void step() {
    switch (pick(10)) {
      case 0: reserve_one(); break;
      case 1: free_one(); break;
      case 2: create_one(); break;
      case 3: release_one(); break;
      case 4:
      case 5: map_one(); break;
      case 6: unmap_some(); break;
      case 7: grant_some(); break;
      case 8: write_one(); break;
      default: read_one(); break;
    }
    CHECK_EQ(books(), model_.books_beside(start_));
  }

  // Unmaps, releases and frees whatever the walk left.
  void finish() {
    for (VmmModel::Reservation& reservation : model_.reservations) {
      for (const VmmModel::Mapping& mapping : reservation.mappings) {
        CHECK(hipMemUnmap(at(reservation.base, mapping.offset), model_.allocations[mapping.allocation].size) ==
              hipSuccess);
      }
      CHECK(hipMemAddressFree(reservation.base, reservation.size) == hipSuccess);
    }
    for (const VmmModel::Allocation& allocation : model_.allocations) {
      if (!allocation.released) CHECK(hipMemRelease(allocation.handle) == hipSuccess);
    }
    model_ = {};
    CHECK_EQ(books(), start_);
  }

  [[nodiscard]] std::size_t successes() const noexcept { return successes_; }
  [[nodiscard]] std::size_t refusals() const noexcept { return refusals_; }

 private:
  static constexpr std::size_t kMaxReservations = 6;
  static constexpr std::size_t kMaxAllocations = 10;

  // Checks a call's result against the model's prediction and counts it.
  void expect(hipError_t result, bool allowed, const char* call) {
    CAPTURE(call);
    if (allowed) {
      CHECK_EQ(result, hipSuccess);
      ++successes_;
    } else {
      CHECK_EQ(result, hipErrorInvalidValue);
      ++refusals_;
    }
  }

  void reserve_one() {
    if (model_.reservations.size() == kMaxReservations) return;
    const std::size_t size = (1 + pick(8)) * G;
    void* base = nullptr;
    REQUIRE(hipMemAddressReserve(&base, size, 0, nullptr, 0) == hipSuccess);
    model_.reservations.push_back({.base = base, .size = size, .mappings = {}});
  }

  void free_one() {
    if (model_.reservations.empty()) return;
    const std::size_t index = pick(model_.reservations.size());
    const VmmModel::Reservation& reservation = model_.reservations[index];
    // Sometimes the wrong size, which is refused like a reservation with mappings in it.
    const bool wrong_size = pick(4) == 0;
    const std::size_t size = wrong_size ? reservation.size + G : reservation.size;
    const bool allowed = !wrong_size && reservation.mappings.empty();
    expect(hipMemAddressFree(reservation.base, size), allowed, "hipMemAddressFree");
    if (allowed) model_.reservations.erase(model_.reservations.begin() + static_cast<std::ptrdiff_t>(index));
  }

  void create_one() {
    if (model_.allocations.size() == kMaxAllocations) {
      // Forget one whose memory is gone, to make room; its handle stays refused.
      const auto gone = std::find_if(model_.allocations.begin(), model_.allocations.end(),
                                     [](const VmmModel::Allocation& a) { return a.released && a.mappings == 0; });
      if (gone == model_.allocations.end()) return;
      CHECK(hipMemRelease(gone->handle) == hipErrorInvalidValue);
      forget(static_cast<std::size_t>(gone - model_.allocations.begin()));
    }
    const std::size_t size = (1 + pick(3)) * G;
    model_.allocations.push_back({.handle = create(size), .size = size});
  }

  // Drops allocation `index` from the model, renumbering the mappings that name later ones.
  void forget(std::size_t index) {
    model_.allocations.erase(model_.allocations.begin() + static_cast<std::ptrdiff_t>(index));
    for (VmmModel::Reservation& reservation : model_.reservations) {
      for (VmmModel::Mapping& mapping : reservation.mappings) {
        if (mapping.allocation > index) --mapping.allocation;
      }
    }
  }

  void release_one() {
    if (model_.allocations.empty()) return;
    VmmModel::Allocation& allocation = model_.allocations[pick(model_.allocations.size())];
    expect(hipMemRelease(allocation.handle), !allocation.released, "hipMemRelease");
    allocation.released = true;
  }

  void map_one() {
    if (model_.reservations.empty() || model_.allocations.empty()) return;
    VmmModel::Reservation& reservation = model_.reservations[pick(model_.reservations.size())];
    const std::size_t index = pick(model_.allocations.size());
    VmmModel::Allocation& allocation = model_.allocations[index];
    const std::size_t offset = pick(reservation.size / G) * G;
    // Now and then a size other than the allocation's, which is refused.
    const std::size_t size = pick(8) == 0 ? allocation.size + G : allocation.size;
    const bool allowed = !allocation.released && size == allocation.size && offset + size <= reservation.size &&
                         !model_.overlaps(reservation, offset, size);
    expect(hipMemMap(at(reservation.base, offset), size, 0, allocation.handle, 0), allowed, "hipMemMap");
    if (!allowed) return;
    ++allocation.mappings;
    const auto place = std::find_if(reservation.mappings.begin(), reservation.mappings.end(),
                                    [&](const VmmModel::Mapping& mapping) { return mapping.offset > offset; });
    reservation.mappings.insert(place, {.offset = offset, .allocation = index, .writable = false});
  }

  // A range of one reservation: usually a run of its mappings, else any granular range in it.
  std::pair<std::size_t, std::size_t> range_in(const VmmModel::Reservation& reservation) {
    if (!reservation.mappings.empty() && pick(3) != 0) {
      const std::size_t first = pick(reservation.mappings.size());
      const std::size_t last = first + pick(std::min<std::size_t>(3, reservation.mappings.size() - first));
      const std::size_t offset = reservation.mappings[first].offset;
      const VmmModel::Mapping& end = reservation.mappings[last];
      return {offset, end.offset + model_.allocations[end.allocation].size - offset};
    }
    const std::size_t granules = reservation.size / G;
    const std::size_t first = pick(granules);
    return {first * G, (1 + pick(granules - first)) * G};
  }

  void unmap_some() {
    if (model_.reservations.empty()) return;
    VmmModel::Reservation& reservation = model_.reservations[pick(model_.reservations.size())];
    const auto [offset, size] = range_in(reservation);
    const auto run = model_.tiling(reservation, offset, size);
    expect(hipMemUnmap(at(reservation.base, offset), size), run.has_value(), "hipMemUnmap");
    if (!run) return;
    for (std::size_t position = run->first; position < run->second; ++position) {
      --model_.allocations[reservation.mappings[position].allocation].mappings;
    }
    reservation.mappings.erase(reservation.mappings.begin() + static_cast<std::ptrdiff_t>(run->first),
                               reservation.mappings.begin() + static_cast<std::ptrdiff_t>(run->second));
  }

  void grant_some() {
    if (model_.reservations.empty()) return;
    VmmModel::Reservation& reservation = model_.reservations[pick(model_.reservations.size())];
    const auto [offset, size] = range_in(reservation);
    const auto run = model_.tiling(reservation, offset, size);
    const bool writable = pick(4) != 0;
    const hipMemAccessDesc desc = make_desc(writable ? hipMemAccessFlagsProtReadWrite : hipMemAccessFlagsProtNone);
    expect(hipMemSetAccess(at(reservation.base, offset), size, &desc, 1), run.has_value(), "hipMemSetAccess");
    if (!run) return;
    for (std::size_t position = run->first; position < run->second; ++position) {
      reservation.mappings[position].writable = writable;
    }
  }

  // A mapping picked at random, with its reservation.
  std::optional<std::pair<VmmModel::Reservation*, VmmModel::Mapping*>> some_mapping() {
    if (model_.reservations.empty()) return std::nullopt;
    VmmModel::Reservation& reservation = model_.reservations[pick(model_.reservations.size())];
    if (reservation.mappings.empty()) return std::nullopt;
    return std::pair{&reservation, &reservation.mappings[pick(reservation.mappings.size())]};
  }

  void write_one() {
    const auto found = some_mapping();
    if (!found) return;
    const auto [reservation, mapping] = *found;
    VmmModel::Allocation& allocation = model_.allocations[mapping->allocation];
    const int byte = static_cast<int>(pick(256));
    const unsigned long long expected_access =
        mapping->writable ? hipMemAccessFlagsProtReadWrite : hipMemAccessFlagsProtNone;
    CHECK(access_of(at(reservation->base, mapping->offset)) == expected_access);
    expect(hipMemset(at(reservation->base, mapping->offset), byte, allocation.size), mapping->writable, "hipMemset");
    if (mapping->writable) allocation.content = byte;
  }

  // Reads a mapping back: it shows what was last written to its allocation through any mapping.
  void read_one() {
    const auto found = some_mapping();
    if (!found) return;
    const auto [reservation, mapping] = *found;
    const VmmModel::Allocation& allocation = model_.allocations[mapping->allocation];
    std::vector<unsigned char> back(allocation.size, 0);
    const hipError_t result =
        hipMemcpy(back.data(), at(reservation->base, mapping->offset), allocation.size, hipMemcpyDeviceToHost);
    expect(result, mapping->writable, "hipMemcpy from the mapping");
    if (result != hipSuccess || allocation.content < 0) return;
    CHECK(test_support::all_bytes_are(back, static_cast<unsigned char>(allocation.content)));
  }

  VmmModel model_;
  hipxxBookCounts start_ = books();
  std::size_t successes_ = 0;
  std::size_t refusals_ = 0;
};

}  // namespace

TEST_CASE("a random walk through reserve, create, map, access, copies, unmap, release and free agrees with the model") {
  LeakCheck leaks;
  const std::uint64_t seed = test_support::walk_seed();
  CAPTURE(seed);
  VmmWalk walk(seed);
  constexpr int kSteps = 3000;
  const int steps = test_support::take_walk(walk, kSteps, seed);
  walk.finish();
  // The walk met both sides of the rules often enough to mean something.
  CHECK(walk.successes() > static_cast<std::size_t>(steps / 6));
  CHECK(walk.refusals() > static_cast<std::size_t>(steps / 20));
}

// ---------------------------------------------------------------------------------------------
// Host backend only: what the pages really allow. HIPXX_BACKEND=host is set by the test registration.
TEST_CASE("host backend: page protection follows the access flags" * doctest::test_suite("host-only")) {
  require_host_backend();
  LeakCheck leaks;
  void* base = reserve(2 * G);
  Handle handle = create(G);
  unsigned char* byte = static_cast<unsigned char*>(base);

  // Reserved only: nothing there.
  CHECK(touch_in_child(base, false, 0) == "SIGSEGV");
  REQUIRE(hipMemMap(base, G, 0, handle, 0) == hipSuccess);
  // Mapped, no access yet.
  CHECK(touch_in_child(base, false, 0) == "SIGSEGV");
  CHECK(touch_in_child(at(base, G - 1), false, 0) == "SIGSEGV");

  grant(base, G, hipMemAccessFlagsProtReadWrite);
  REQUIRE(hipMemset(base, 0x42, G) == hipSuccess);
  CHECK(touch_in_child(base, false, 0x42) == "ok");
  CHECK(touch_in_child(at(base, G - 1), true, 0x42) == "ok");
  // The host can use the pages directly, like hipMemcpy does.
  byte[7] = 0x99;
  unsigned char seen = 0;
  REQUIRE(hipMemcpy(&seen, at(base, 7), 1, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(seen == 0x99);

  grant(base, G, hipMemAccessFlagsProtRead);
  CHECK(touch_in_child(base, false, 0x42) == "ok");
  CHECK(touch_in_child(base, true, 0x42) == "SIGSEGV");
  CHECK(byte[0] == 0x42);

  grant(base, G, hipMemAccessFlagsProtNone);
  CHECK(touch_in_child(base, false, 0x42) == "SIGSEGV");

  // The second granule of the reservation never had a mapping.
  CHECK(touch_in_child(at(base, G), false, 0) == "SIGSEGV");

  grant(base, G, hipMemAccessFlagsProtReadWrite);
  REQUIRE(hipMemUnmap(base, G) == hipSuccess);
  CHECK(touch_in_child(base, false, 0x42) == "SIGSEGV");  // unmapped: the placeholder is back
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 2 * G) == hipSuccess);
}

TEST_CASE("host backend: a free hint is honoured, and alignment with it" * doctest::test_suite("host-only")) {
  require_host_backend();
  LeakCheck leaks;
  void* probe = reserve(std::size_t{8} << 20, std::size_t{4} << 20);
  REQUIRE(hipMemAddressFree(probe, std::size_t{8} << 20) == hipSuccess);
  void* hinted = reserve(std::size_t{2} << 20, std::size_t{2} << 20, at(probe, std::size_t{2} << 20));
  CHECK(hinted == at(probe, std::size_t{2} << 20));
  CHECK(hipMemAddressFree(hinted, std::size_t{2} << 20) == hipSuccess);
  // A hint that does not meet the alignment is ignored in favour of the alignment.
  void* aligned = reserve(G, std::size_t{4} << 20, at(probe, G));
  CHECK(reinterpret_cast<std::uintptr_t>(aligned) % (std::size_t{4} << 20) == 0);
  CHECK(hipMemAddressFree(aligned, G) == hipSuccess);
}

TEST_CASE("host backend: a mapping is a shared view of the physical memory" * doctest::test_suite("host-only")) {
  require_host_backend();
  LeakCheck leaks;
  void* base = reserve(2 * G);
  Handle handle = create(G);
  REQUIRE(hipMemMap(base, G, 0, handle, 0) == hipSuccess);
  REQUIRE(hipMemMap(at(base, G), G, 0, handle, 0) == hipSuccess);
  grant(base, 2 * G, hipMemAccessFlagsProtReadWrite);
  static_cast<unsigned char*>(base)[100] = 0x17;
  CHECK(static_cast<unsigned char*>(base)[G + 100] == 0x17);
  // A forked child writing through its inherited mapping writes the same memory.
  CHECK(touch_in_child(at(base, 100), true, 0x17) == "ok");
  CHECK(static_cast<unsigned char*>(base)[G + 100] == 0x18);
  CHECK(hipMemUnmap(base, 2 * G) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 2 * G) == hipSuccess);
}

TEST_CASE(
    "host backend: an exported allocation's size is sealed, so no holder of the fd can pull the memory "
    "from under the mappings" *
    doctest::test_suite("host-only")) {
  require_host_backend();
  LeakCheck leaks;
  const Mapped source(G, 122, G, hipMemHandleTypePosixFileDescriptor);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, source.handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  // What another process holding the fd would try; without the seals the mapping's next touch,
  // in the exporter and in every importer, would be a SIGBUS.
  CHECK(ftruncate(fd, 0) != 0);
  CHECK(ftruncate(fd, static_cast<off_t>(2 * G)) != 0);
  struct stat status {};
  REQUIRE(fstat(fd, &status) == 0);
  CHECK(status.st_size == static_cast<off_t>(G));
  CHECK(source.intact());
  CHECK(close(fd) == 0);
}

TEST_SUITE_END();

using test_support::resident_kib;

TEST_CASE("host backend: map fills the page tables, so neither reads nor writes fault after a grant" *
          doctest::test_suite("host-only")) {
  require_host_backend();
  LeakCheck leaks;
  constexpr std::size_t kPages = 256;
  const std::size_t bytes = kPages * G;
  void* base = reserve(bytes);
  Handle handle = create(bytes);
  REQUIRE(hipMemMap(base, bytes, 0, handle, 0) == hipSuccess);
  // Every page has its page-table entry already, though nothing may touch it yet.
  CHECK(resident_kib(base) == static_cast<long>(bytes / 1024));
  grant(base, bytes, hipMemAccessFlagsProtReadWrite);
  const auto faults = [] {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_minflt + usage.ru_majflt;
  };
  auto* bytes_at = static_cast<volatile unsigned char*>(base);
  const long before_writes = faults();
  for (std::size_t page = 0; page < kPages; ++page) bytes_at[page * G] = static_cast<unsigned char>(page);
  const long writes = faults() - before_writes;
  unsigned sum = 0;
  const long before_reads = faults();
  for (std::size_t page = 0; page < kPages; ++page) sum += bytes_at[page * G + 1];
  const long reads = faults() - before_reads;
  CHECK(sum == 0);  // committed memory starts zeroed
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // A handful at most (the loop's own stack or code), never one per page. Sanitizers fault in their
  // own shadow memory on the first touch of each range, so they are left out of this count.
  CHECK(writes < 8);
  CHECK(reads < 8);
#else
  (void)writes;
  (void)reads;
#endif
  CHECK(hipMemUnmap(base, bytes) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, bytes) == hipSuccess);
}

TEST_CASE("host backend: a large allocation is committed over several threads, and every map of it is populated" *
          doctest::test_suite("host-only")) {
  require_host_backend();
  LeakCheck leaks;
  // 32 MiB: above the size at which create splits the populating over threads (where the machine has
  // more than one core). The first map moves create's populated mapping in; the second maps afresh.
  const std::size_t bytes = std::size_t{32} << 20;
  void* base = reserve(2 * bytes);
  Handle handle = create(bytes);
  REQUIRE(hipMemMap(base, bytes, 0, handle, 0) == hipSuccess);
  CHECK(resident_kib(base) == static_cast<long>(bytes / 1024));
  grant(base, bytes, hipMemAccessFlagsProtReadWrite);
  auto* first = static_cast<volatile unsigned char*>(base);
  unsigned long sum = 0;
  for (std::size_t offset = 0; offset < bytes; offset += G) sum += first[offset + 3];
  CHECK(sum == 0);  // committed memory starts zeroed, on every thread's part
  REQUIRE(hipMemset(base, 0x5a, bytes) == hipSuccess);
  REQUIRE(hipMemUnmap(base, bytes) == hipSuccess);
  CHECK(touch_in_child(base, false, 0) == "SIGSEGV");  // the placeholder is back, nothing left behind

  void* second = at(base, bytes);
  REQUIRE(hipMemMap(second, bytes, 0, handle, 0) == hipSuccess);
  CHECK(resident_kib(second) == static_cast<long>(bytes / 1024));
  grant(second, bytes, hipMemAccessFlagsProtRead);
  const auto* again = static_cast<const volatile unsigned char*>(second);
  bool kept = true;
  for (std::size_t offset = 0; offset < bytes; offset += G)
    kept = kept && again[offset] == 0x5a && again[offset + G - 1] == 0x5a;
  CHECK(kept);
  CHECK(hipMemUnmap(second, bytes) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 2 * bytes) == hipSuccess);
}

TEST_CASE("host backend: an allocation released without ever being mapped leaves no mapping behind" *
          doctest::test_suite("host-only")) {
  require_host_backend();
  LeakCheck leaks;
  const auto maps_lines = [] {
    std::ifstream maps{"/proc/self/maps"};
    std::size_t lines = 0;
    for (std::string line; std::getline(maps, line);) ++lines;
    return lines;
  };
  Handle warm_up = create(std::size_t{4} << 20);  // whatever the first call sets up stays
  CHECK(hipMemRelease(warm_up) == hipSuccess);
  const std::size_t before = maps_lines();
  for (int round = 0; round < 3; ++round) {
    Handle handle = create(std::size_t{4} << 20);
    CHECK(maps_lines() == before + 1);  // create's populated mapping, kept for the first map
    CHECK(hipMemRelease(handle) == hipSuccess);
    CHECK(maps_lines() == before);
  }
}

TEST_CASE("host backend: with no room for create's populating mapping, create commits without one" *
          doctest::test_suite("host-only") * doctest::test_suite("fork-child")) {
  require_host_backend();
  constexpr std::size_t kBytes = std::size_t{32} << 20;
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Address space for 16 MiB more than the child has: create's 32 MiB mapping cannot be made, while
    // the arena's reservation and the map (which replaces part of it) need none.
    if (!test_support::limit_address_space(std::size_t{16} << 20)) _exit(10);
    hipMemAllocationProp prop{};
    prop.type = hipMemAllocationTypePinned;
    prop.location = {hipMemLocationTypeDevice, 0};
    hipMemGenericAllocationHandle_t handle{};
    if (hipMemCreate(&handle, kBytes, &prop, 0) != hipSuccess) _exit(11);
    void* base = nullptr;
    if (hipMemAddressReserve(&base, kBytes, 0, nullptr, 0) != hipSuccess) _exit(12);
    if (hipMemMap(base, kBytes, 0, handle, 0) != hipSuccess) _exit(13);
    hipMemAccessDesc access{};
    access.location = {hipMemLocationTypeDevice, 0};
    access.flags = hipMemAccessFlagsProtReadWrite;
    if (hipMemSetAccess(base, kBytes, &access, 1) != hipSuccess) _exit(14);
    const auto* bytes = static_cast<const volatile unsigned char*>(base);
    for (std::size_t offset = 0; offset < kBytes; offset += 4096) {
      if (bytes[offset] != 0) _exit(15);  // committed, and zeroed
    }
    if (hipMemset(base, 0x3c, kBytes) != hipSuccess || bytes[kBytes - 1] != 0x3c) _exit(16);
    if (hipMemUnmap(base, kBytes) != hipSuccess || hipMemRelease(handle) != hipSuccess) _exit(17);
    if (hipMemAddressFree(base, kBytes) != hipSuccess) _exit(18);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
