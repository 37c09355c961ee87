// Plain device memory: hipMalloc/hipFree, hipMemcpy (every kind, and the refused ones), hipMemset,
// with the books checked after every refusal.
#include <doctest/doctest.h>

#include "support/books.hpp"
#include "support/descriptors.hpp"
#include "support/residency.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

using test_support::books;
using test_support::LeakCheck;

namespace {

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 37 + seed * 11) & 0xff);
  return data;
}

std::vector<unsigned char> read_back(const void* device, std::size_t bytes) {
  std::vector<unsigned char> data(bytes, 0xcd);
  REQUIRE(hipMemcpy(data.data(), device, bytes, hipMemcpyDeviceToHost) == hipSuccess);
  return data;
}

void* malloc_device(std::size_t bytes) {
  void* ptr = nullptr;
  REQUIRE(hipMalloc(&ptr, bytes) == hipSuccess);
  REQUIRE(ptr != nullptr);
  return ptr;
}

void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

}  // namespace

TEST_SUITE_BEGIN("memory");

TEST_CASE("hipMalloc and hipFree: success paths and the books") {
  LeakCheck leaks;
  const hipxxBookCounts start = books();
  std::vector<void*> ptrs;
  for (const std::size_t size : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{100000},
                                 std::size_t{3} << 20}) {
    void* ptr = malloc_device(size);
    ptrs.push_back(ptr);
    CHECK(reinterpret_cast<std::uintptr_t>(ptr) % 256 == 0);  // HIP promises at least 256-byte alignment
    CHECK(books().linearAllocations == start.linearAllocations + ptrs.size());
    // The whole allocation is usable.
    const std::vector<unsigned char> data = pattern(size, static_cast<unsigned>(size));
    CHECK(hipMemcpy(ptr, data.data(), size, hipMemcpyHostToDevice) == hipSuccess);
    CHECK(read_back(ptr, size) == data);
  }
  // Distinct allocations do not overlap.
  std::vector<void*> sorted = ptrs;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (void* ptr : ptrs) CHECK(hipFree(ptr) == hipSuccess);
  CHECK(books() == start);
  CHECK(books().reservations == start.reservations);
}

TEST_CASE("hipMalloc: size 0 gives nullptr, and refused arguments") {
  LeakCheck leaks;
  void* ptr = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  CHECK_REFUSED(hipMalloc(&ptr, 0), hipSuccess);
  CHECK(ptr == nullptr);
  CHECK_REFUSED(hipMalloc(nullptr, 16), hipErrorInvalidValue);
  CHECK_REFUSED(hipMalloc(nullptr, 0), hipErrorInvalidValue);
  ptr = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  CHECK_REFUSED(hipMalloc(&ptr, SIZE_MAX), hipErrorOutOfMemory);
  CHECK_REFUSED(hipMalloc(&ptr, SIZE_MAX / 2), hipErrorOutOfMemory);
  // More than the device has, though a size the address space could hold.
  std::size_t total = 0;
  REQUIRE(hipDeviceTotalMem(&total, 0) == hipSuccess);
  CHECK_REFUSED(hipMalloc(&ptr, total + (std::size_t{1} << 30)), hipErrorOutOfMemory);
  CHECK(ptr == reinterpret_cast<void*>(std::uintptr_t{0x1000}));
}

TEST_CASE("hipMemGetInfo: the current device's total, and free memory that an allocation takes and gives back") {
  LeakCheck leaks;
  std::size_t device_total = 0;
  REQUIRE(hipDeviceTotalMem(&device_total, 0) == hipSuccess);
  std::size_t free_before = 0;
  std::size_t total = 0;
  REQUIRE(hipMemGetInfo(&free_before, &total) == hipSuccess);
  CHECK(total == device_total);
  CHECK(free_before > 0);
  CHECK(free_before <= total);

  // A committed allocation of 2 GiB: free memory falls and comes back once it is freed. By more than
  // a quarter of it: some kernels' accounting (a sandboxed one here showed half) and whatever other
  // processes (other tests, which take and give back up to about a GiB) do meanwhile blur the
  // figure; as those may take or give back more at the wrong moment, the test tries up to eight
  // times.
  constexpr std::size_t kBytes = std::size_t{2} << 30;
  constexpr std::size_t kMargin = kBytes / 4;
  REQUIRE(free_before > kBytes + kMargin);
  bool fell_and_came_back = false;
  for (int attempt = 0; attempt < 8 && !fell_and_came_back; ++attempt) {
    REQUIRE(hipMemGetInfo(&free_before, &total) == hipSuccess);
    void* ptr = malloc_device(kBytes);
    std::size_t free_during = 0;
    CHECK(hipMemGetInfo(&free_during, &total) == hipSuccess);
    CHECK(hipFree(ptr) == hipSuccess);
    // The memory goes back once the driver has let go of it, which may be a moment after hipFree
    // returns (the host backend closes descriptors on a thread of its own).
    std::size_t free_after = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{2};
    do {
      CHECK(hipMemGetInfo(&free_after, &total) == hipSuccess);
      if (free_after > free_during + kMargin) break;
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    } while (std::chrono::steady_clock::now() < deadline);
    MESSAGE("attempt ", attempt, ": free before ", free_before, ", during ", free_during, ", after ", free_after);
    fell_and_came_back = free_during + kMargin < free_before && free_after > free_during + kMargin;
  }
  CHECK(fell_and_came_back);

  // Refusals write nothing.
  std::size_t untouched = 77;
  CHECK_REFUSED(hipMemGetInfo(nullptr, &untouched), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemGetInfo(&untouched, nullptr), hipErrorInvalidValue);
  CHECK(untouched == 77);
}

// As on a GPU, hipMalloc commits the memory: a shortage is its hipErrorOutOfMemory, not a signal at
// some later first touch, and the first touch of each page costs no fault.
TEST_CASE("host: hipMalloc commits every page and fills the page tables" * doctest::test_suite("host-only")) {
  LeakCheck leaks;
  constexpr std::size_t kPages = 256;
  constexpr std::size_t kPage = 4096;
  void* const ptr = malloc_device(kPages * kPage);
  CHECK(test_support::resident_kib(ptr) == static_cast<long>(kPages * kPage / 1024));
  const auto faults = [] {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_minflt + usage.ru_majflt;
  };
  auto* const bytes = static_cast<volatile unsigned char*>(ptr);
  const long before = faults();
  unsigned sum = 0;
  for (std::size_t page = 0; page < kPages; ++page) {
    sum += bytes[page * kPage + 1];
    bytes[page * kPage] = static_cast<unsigned char>(page);
  }
  const long touched = faults() - before;
  CHECK(sum == 0);  // committed memory starts zeroed
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  CHECK(touched < 8);  // a handful at most (the loop's own stack or code), never one per page
#else
  (void)touched;  // sanitizers fault in their own shadow memory on a range's first touch
#endif
  CHECK(hipFree(ptr) == hipSuccess);
}

// The system-call numbers a seccomp filter sees are those of the architecture it checks for.
#if defined(__x86_64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_RISCV64;
#else
#error "test_memory.cpp: add this architecture's AUDIT_ARCH value"
#endif

// Before Linux 5.14 the kernel answers MADV_POPULATE_WRITE with EINVAL, and the host backend commits
// with fallocate and fills the page tables with MAP_POPULATE instead. A child whose seccomp filter
// gives that answer takes that way: the first allocation finds out, and from then on every
// hipMalloc, and every map of hipMemCreate memory, still arrives committed and in the page tables.
TEST_CASE("host: where the kernel lacks MADV_POPULATE_WRITE, memory is still committed and mapped in" *
          doctest::test_suite("host-only")) {
  constexpr std::size_t kPage = 4096;
  constexpr std::size_t kBytes = 256 * kPage;
  std::fflush(nullptr);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::array<sock_filter, 9> filter{{
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),  // the advice's low half
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 23 /* MADV_POPULATE_WRITE */, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    }};
    const sock_fprog program{.len = static_cast<unsigned short>(filter.size()), .filter = filter.data()};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) _exit(11);
    void* const probe = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED || madvise(probe, kPage, 23) == 0 || errno != EINVAL) _exit(23);  // the filter holds
    munmap(probe, kPage);
    void* first = nullptr;  // finds out; committed by fallocate, its tables filled by first touches
    if (hipMalloc(&first, kPage) != hipSuccess) _exit(12);
    void* ptr = nullptr;
    if (hipMalloc(&ptr, kBytes) != hipSuccess) _exit(13);
    if (test_support::resident_kib(ptr) != static_cast<long>(kBytes / 1024)) _exit(14);
    const auto* bytes = static_cast<const volatile unsigned char*>(ptr);
    for (std::size_t offset = 0; offset < kBytes; offset += kPage) {
      if (bytes[offset] != 0) _exit(15);
    }
    if (hipFree(ptr) != hipSuccess || hipFree(first) != hipSuccess) _exit(16);

    hipMemAllocationProp prop{};
    prop.type = hipMemAllocationTypePinned;
    prop.location = {hipMemLocationTypeDevice, 0};
    hipMemGenericAllocationHandle_t handle{};
    void* base = nullptr;
    if (hipMemCreate(&handle, kBytes, &prop, 0) != hipSuccess) _exit(17);
    if (hipMemAddressReserve(&base, kBytes, 0, nullptr, 0) != hipSuccess) _exit(18);
    if (hipMemMap(base, kBytes, 0, handle, 0) != hipSuccess) _exit(19);
    if (test_support::resident_kib(base) != static_cast<long>(kBytes / 1024)) _exit(20);
    if (hipMemUnmap(base, kBytes) != hipSuccess || hipMemRelease(handle) != hipSuccess) _exit(21);
    if (hipMemAddressFree(base, kBytes) != hipSuccess) _exit(22);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// Each step of a plain allocation can fail on its own (the memfd, its size and seals, the mapping,
// the commit); whichever fails, the call is hipErrorOutOfMemory and leaves no descriptor, mapping or
// entry in the books behind. Here the mapping fails: the child has address space for 16 MiB more.
TEST_CASE("host: a hipMalloc with no address space left is hipErrorOutOfMemory and leaves nothing behind" *
          doctest::test_suite("host-only")) {
  constexpr std::size_t kBig = std::size_t{32} << 20;
  constexpr std::size_t kSmall = std::size_t{4} << 20;
  std::fflush(nullptr);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const std::size_t descriptors = test_support::open_fd_count();
    const hipxxBookCounts before = books();
    if (!test_support::limit_address_space(std::size_t{16} << 20)) _exit(10);
    void* ptr = nullptr;
    if (hipMalloc(&ptr, kBig) != hipErrorOutOfMemory || ptr != nullptr) _exit(11);
    if (test_support::open_fd_count() != descriptors || !(books() == before)) _exit(12);
    if (hipMalloc(&ptr, kSmall) != hipSuccess) _exit(13);  // what fits is still given
    if (static_cast<const volatile unsigned char*>(ptr)[kSmall - 1] != 0) _exit(14);
    if (hipFree(ptr) != hipSuccess) _exit(15);
    if (test_support::open_fd_count() != descriptors || !(books() == before)) _exit(16);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// The host backend holds a descriptor for each allocation. A program that meets its soft limit on
// open descriptors has it raised toward the hard one; where the hard limit stops it, the allocation
// is hipErrorOutOfMemory and nothing else changes.
TEST_CASE("host: allocations past the soft descriptor limit raise it; at the hard limit they are refused" *
          doctest::test_suite("host-only")) {
  LeakCheck leaks;
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  const auto in_use = static_cast<rlim_t>(test_support::open_fd_count());
  REQUIRE_MESSAGE(saved.rlim_max >= in_use + 256, "the hard limit on descriptors leaves no room for the test");
  rlimit low = saved;
  low.rlim_cur = in_use + 8;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);

  constexpr std::size_t kPage = 4096;
  std::vector<void*> plain;
  std::vector<hipMemGenericAllocationHandle_t> physical;
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  for (int index = 0; index < 32; ++index) {
    void* ptr = nullptr;
    CHECK(hipMalloc(&ptr, kPage) == hipSuccess);
    if (ptr != nullptr) plain.push_back(ptr);
    hipMemGenericAllocationHandle_t handle = nullptr;
    CHECK(hipMemCreate(&handle, kPage, &prop, 0) == hipSuccess);
    if (handle != nullptr) physical.push_back(handle);
  }
  rlimit raised{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &raised) == 0);
  CHECK(raised.rlim_cur >= in_use + 64);
  CHECK(raised.rlim_max == saved.rlim_max);
  for (void* ptr : plain) CHECK(hipFree(ptr) == hipSuccess);
  plain.clear();
  for (hipMemGenericAllocationHandle_t handle : physical) CHECK(hipMemRelease(handle) == hipSuccess);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);

  // HIPXX_HOST_RAISE_NOFILE=0 leaves the soft limit alone: the allocation past it is refused.
  REQUIRE(setenv("HIPXX_HOST_RAISE_NOFILE", "0", 1) == 0);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  hipError_t refusal = hipSuccess;
  for (int index = 0; index < 64 && refusal == hipSuccess; ++index) {
    void* ptr = nullptr;
    refusal = hipMalloc(&ptr, kPage);
    if (refusal == hipSuccess) plain.push_back(ptr);
  }
  rlimit kept{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &kept) == 0);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  REQUIRE(unsetenv("HIPXX_HOST_RAISE_NOFILE") == 0);
  CHECK(refusal == hipErrorOutOfMemory);
  CHECK(kept.rlim_cur == low.rlim_cur);
  CHECK(plain.size() < 16);  // about eight: the limit was set eight above the count
  for (void* ptr : plain) CHECK(hipFree(ptr) == hipSuccess);

  // The hard limit cannot be raised back without privilege, so a child process meets it.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const auto used = static_cast<rlim_t>(test_support::open_fd_count());
    const rlimit tight{used + 4, used + 4};
    if (setrlimit(RLIMIT_NOFILE, &tight) != 0) _exit(10);
    std::vector<void*> taken;
    hipError_t refusal = hipSuccess;
    for (int index = 0; index < 64 && refusal == hipSuccess; ++index) {
      void* ptr = nullptr;
      refusal = hipMalloc(&ptr, kPage);
      if (refusal == hipSuccess) taken.push_back(ptr);
    }
    if (refusal != hipErrorOutOfMemory) _exit(11);
    // A few more than four fit: the count above includes descriptors open only while it counts.
    if (taken.empty() || taken.size() > 8) _exit(12);
    // Freeing one makes room for one.
    if (hipFree(taken.back()) != hipSuccess) _exit(13);
    taken.pop_back();
    void* again = nullptr;
    if (hipMalloc(&again, kPage) != hipSuccess) _exit(14);
    taken.push_back(again);
    for (void* ptr : taken) {
      if (hipFree(ptr) != hipSuccess) _exit(15);
    }
    if (static_cast<rlim_t>(test_support::open_fd_count()) != used) _exit(16);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("hipFree: nullptr is fine; double, interior and unknown pointers are refused") {
  LeakCheck leaks;
  CHECK_REFUSED(hipFree(nullptr), hipSuccess);
  void* ptr = malloc_device(4096);
  void* other = malloc_device(64);
  const std::vector<unsigned char> data = pattern(64, 3);
  REQUIRE(hipMemcpy(other, data.data(), 64, hipMemcpyHostToDevice) == hipSuccess);

  CHECK_REFUSED(hipFree(at(ptr, 1)), hipErrorInvalidValue);
  CHECK_REFUSED(hipFree(at(ptr, 4095)), hipErrorInvalidValue);
  int on_stack = 0;
  CHECK_REFUSED(hipFree(&on_stack), hipErrorInvalidValue);
  std::vector<int> on_heap(16);
  CHECK_REFUSED(hipFree(on_heap.data()), hipErrorInvalidValue);
  // A VMM reservation is not hipMalloc memory.
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  std::size_t granularity = 0;
  REQUIRE(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
  void* reserved = nullptr;
  REQUIRE(hipMemAddressReserve(&reserved, granularity, 0, nullptr, 0) == hipSuccess);
  CHECK_REFUSED(hipFree(reserved), hipErrorInvalidValue);
  CHECK(hipMemAddressFree(reserved, granularity) == hipSuccess);

  CHECK(hipFree(ptr) == hipSuccess);
  CHECK_REFUSED(hipFree(ptr), hipErrorInvalidValue);
  CHECK(read_back(other, 64) == data);  // the neighbour is untouched
  CHECK(hipFree(other) == hipSuccess);
}

TEST_CASE("hipMemcpy: every valid kind moves the bytes") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 10000;
  void* a = malloc_device(kBytes);
  void* b = malloc_device(kBytes);
  unsigned seed = 1;
  for (const hipMemcpyKind kind : {hipMemcpyHostToHost, hipMemcpyHostToDevice, hipMemcpyDeviceToHost,
                                   hipMemcpyDeviceToDevice, hipMemcpyDefault, hipMemcpyDeviceToDeviceNoCU}) {
    CAPTURE(kind);
    const std::vector<unsigned char> data = pattern(kBytes, ++seed);
    CHECK(hipMemcpy(a, data.data(), kBytes, kind) == hipSuccess);         // host -> device
    CHECK(hipMemcpy(b, a, kBytes, kind) == hipSuccess);                   // device -> device
    std::vector<unsigned char> back(kBytes, 0);
    CHECK(hipMemcpy(back.data(), b, kBytes, kind) == hipSuccess);         // device -> host
    CHECK(back == data);
    std::vector<unsigned char> host_copy(kBytes, 0);
    CHECK(hipMemcpy(host_copy.data(), data.data(), kBytes, kind) == hipSuccess);  // host -> host
    CHECK(host_copy == data);
  }
  // Parts of allocations, up to the last byte.
  const std::vector<unsigned char> tail = pattern(16, 99);
  CHECK(hipMemcpy(at(a, kBytes - 16), tail.data(), 16, hipMemcpyHostToDevice) == hipSuccess);
  CHECK(hipMemcpy(at(b, 100), at(a, kBytes - 16), 16, hipMemcpyDeviceToDevice) == hipSuccess);
  std::vector<unsigned char> back(16);
  CHECK(hipMemcpy(back.data(), at(b, 100), 16, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == tail);
  CHECK(hipFree(a) == hipSuccess);
  CHECK(hipFree(b) == hipSuccess);
}

TEST_CASE("C++ callers allocate into a pointer of any type, and give hipMallocAsync a pool") {
  // The device's default pool, made at its first use, lives for the process: made before the count.
  hipMemPool_t before = nullptr;
  REQUIRE(hipDeviceGetMemPool(&before, 0) == hipSuccess);
  LeakCheck leaks;
  constexpr std::size_t kCount = 256;
  int* ints = nullptr;
  REQUIRE(hipMalloc(&ints, kCount * sizeof(int)) == hipSuccess);
  const std::vector<int> values(kCount, 0x01020304);
  CHECK(hipMemcpy(ints, values.data(), kCount * sizeof(int), hipMemcpyHostToDevice) == hipSuccess);
  std::vector<int> back(kCount, 0);
  CHECK(hipMemcpy(back.data(), ints, kCount * sizeof(int), hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == values);
  CHECK(hipFree(ints) == hipSuccess);

  float* managed = nullptr;
  REQUIRE(hipMallocManaged(&managed, kCount * sizeof(float)) == hipSuccess);
  managed[kCount - 1] = 2.5F;  // the default flags: attached globally, the host may touch it
  CHECK(managed[kCount - 1] == 2.5F);
  CHECK(hipFree(managed) == hipSuccess);

  std::uint64_t* signal = nullptr;
  REQUIRE(hipExtMallocWithFlags(&signal, sizeof(std::uint64_t), hipMallocSignalMemory) == hipSuccess);
  CHECK(hipFree(signal) == hipSuccess);

  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreate(&stream) == hipSuccess);
  hipMemPoolProps props{};
  props.allocType = hipMemAllocationTypePinned;
  props.location.type = hipMemLocationTypeDevice;
  props.location.id = 0;
  hipMemPool_t pool = nullptr;
  REQUIRE(hipMemPoolCreate(&pool, &props) == hipSuccess);
  double* doubles = nullptr;
  char* chars = nullptr;
  void* bytes = nullptr;
  CHECK(hipMallocAsync(&doubles, kCount * sizeof(double), pool, stream) == hipSuccess);
  CHECK(hipMallocAsync(&chars, kCount, pool, stream) == hipSuccess);
  CHECK(hipFreeAsync(chars, stream) == hipSuccess);
  // The stream-only form takes the device's current pool: made this pool for the call.
  REQUIRE(hipDeviceSetMemPool(0, pool) == hipSuccess);
  CHECK(hipMallocAsync(&chars, kCount, stream) == hipSuccess);
  REQUIRE(hipDeviceSetMemPool(0, before) == hipSuccess);
  CHECK(hipMallocAsync(&bytes, kCount, pool, stream) == hipSuccess);
  short* from = nullptr;
  CHECK(hipMallocFromPoolAsync(&from, kCount, pool, stream) == hipSuccess);
  for (void* allocated : {static_cast<void*>(doubles), static_cast<void*>(chars), bytes, static_cast<void*>(from)}) {
    CHECK(allocated != nullptr);
    CHECK(hipMemsetAsync(allocated, 0x3f, kCount, stream) == hipSuccess);
    CHECK(hipFreeAsync(allocated, stream) == hipSuccess);
  }
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("hipMemcpy: unknown kinds are hipErrorInvalidMemcpyDirection") {
  LeakCheck leaks;
  void* dev = malloc_device(256);
  const std::vector<unsigned char> data = pattern(256, 4);
  REQUIRE(hipMemcpy(dev, data.data(), 256, hipMemcpyHostToDevice) == hipSuccess);
  const std::vector<unsigned char> junk(256, 0xee);
  for (const int kind : {5, 6, 7, 100, 1023, 1025, -1, 0x7fffffff}) {
    CAPTURE(kind);
    CHECK_REFUSED(hipMemcpy(dev, junk.data(), 256, static_cast<hipMemcpyKind>(kind)), hipErrorInvalidMemcpyDirection);
    // The kind is judged before anything else.
    CHECK_REFUSED(hipMemcpy(dev, junk.data(), 0, static_cast<hipMemcpyKind>(kind)), hipErrorInvalidMemcpyDirection);
    CHECK_REFUSED(hipMemcpy(nullptr, nullptr, 8, static_cast<hipMemcpyKind>(kind)), hipErrorInvalidMemcpyDirection);
  }
  CHECK(read_back(dev, 256) == data);
  CHECK(hipFree(dev) == hipSuccess);
}

TEST_CASE("hipMemcpy: null pointers, and ranges that run past an allocation") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 4096 + 100;  // not a page multiple, so the end is inside a page
  void* dev = malloc_device(kBytes);
  const std::vector<unsigned char> data = pattern(kBytes, 5);
  REQUIRE(hipMemcpy(dev, data.data(), kBytes, hipMemcpyHostToDevice) == hipSuccess);
  std::vector<unsigned char> host(2 * kBytes, 0x44);

  CHECK_REFUSED(hipMemcpy(nullptr, data.data(), 16, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(host.data(), nullptr, 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(nullptr, nullptr, 16, hipMemcpyDefault), hipErrorInvalidValue);
  // Zero bytes is a no-op that succeeds, even with null pointers.
  CHECK_REFUSED(hipMemcpy(nullptr, nullptr, 0, hipMemcpyDefault), hipSuccess);
  CHECK_REFUSED(hipMemcpy(dev, host.data(), 0, hipMemcpyHostToDevice), hipSuccess);

  const std::vector<unsigned char> junk(2 * kBytes, 0x99);
  CHECK_REFUSED(hipMemcpy(at(dev, kBytes - 8), junk.data(), 9, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(dev, junk.data(), kBytes + 1, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(dev, junk.data(), 2 * kBytes, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(host.data(), at(dev, 1), kBytes, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(dev, dev, kBytes + 4096, hipMemcpyDeviceToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(dev, junk.data(), SIZE_MAX, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(at(dev, 16), dev, SIZE_MAX - 8, hipMemcpyDeviceToDevice), hipErrorInvalidValue);
  CHECK(host == std::vector<unsigned char>(2 * kBytes, 0x44));
  CHECK(read_back(dev, kBytes) == data);
  CHECK(hipFree(dev) == hipSuccess);
}

TEST_CASE("hipMemset: values, partial ranges and refusals") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 5000;
  void* dev = malloc_device(kBytes);
  CHECK(hipMemset(dev, 0x5a, kBytes) == hipSuccess);
  CHECK(read_back(dev, kBytes) == std::vector<unsigned char>(kBytes, 0x5a));
  CHECK(hipMemset(at(dev, 1000), 0x1ff, 10) == hipSuccess);  // only the low byte of the value counts
  CHECK(hipMemset(at(dev, kBytes - 1), -1, 1) == hipSuccess);
  std::vector<unsigned char> expected(kBytes, 0x5a);
  std::fill_n(expected.begin() + 1000, 10, 0xff);
  expected[kBytes - 1] = 0xff;
  CHECK(read_back(dev, kBytes) == expected);

  CHECK_REFUSED(hipMemset(nullptr, 0, 16), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(nullptr, 0, 0), hipSuccess);
  CHECK_REFUSED(hipMemset(dev, 0, 0), hipSuccess);
  CHECK_REFUSED(hipMemset(at(dev, kBytes - 4), 0, 5), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(dev, 0, kBytes + 1), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(dev, 0, SIZE_MAX), hipErrorInvalidValue);
  CHECK(read_back(dev, kBytes) == expected);
  CHECK(hipFree(dev) == hipSuccess);
}

TEST_CASE("hipDeviceSynchronize succeeds") { CHECK(hipDeviceSynchronize() == hipSuccess); }

TEST_CASE("a refused memory call is the thread's last error") {
  (void)hipGetLastError();
  CHECK(hipMemcpy(nullptr, nullptr, 4, static_cast<hipMemcpyKind>(9)) == hipErrorInvalidMemcpyDirection);
  CHECK(hipMalloc(nullptr, 4) == hipErrorInvalidValue);
  CHECK(hipPeekAtLastError() == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipSuccess);
}

TEST_SUITE_END();

TEST_CASE("hipPointerGetAttributes tells device, managed, mapped and host memory apart") {
  void* device = nullptr;
  void* managed = nullptr;
  REQUIRE(hipMalloc(&device, 4096) == hipSuccess);
  REQUIRE(hipMallocManaged(&managed, 4096, hipMemAttachGlobal) == hipSuccess);
  hipPointerAttribute_t attributes{};
  REQUIRE(hipPointerGetAttributes(&attributes, static_cast<char*>(device) + 100) == hipSuccess);
  CHECK(attributes.type == hipMemoryTypeDevice);
  CHECK(attributes.device == 0);
  CHECK(attributes.isManaged == 0);
  REQUIRE(hipPointerGetAttributes(&attributes, managed) == hipSuccess);
  CHECK(attributes.type == hipMemoryTypeManaged);
  CHECK(attributes.isManaged == 1);
  CHECK(attributes.hostPointer == managed);
  int on_stack = 0;
  REQUIRE(hipPointerGetAttributes(&attributes, &on_stack) == hipSuccess);
  CHECK(attributes.type == hipMemoryTypeUnregistered);
  CHECK(hipPointerGetAttributes(&attributes, nullptr) == hipErrorInvalidValue);
  CHECK(hipPointerGetAttributes(nullptr, device) == hipErrorInvalidValue);
  CHECK(hipFree(managed) == hipSuccess);
  CHECK(hipFree(device) == hipSuccess);
}
