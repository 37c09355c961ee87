// Initialization, device count, current device, attributes, and the per-device access rules of
// VMM mappings. Registered with HIPXX_HOST_DEVICES=3. Backend selection is checked in fresh
// processes: this executable re-executes itself with another environment, and the child mode
// (HIPXX_TEST_DEVICES_CHILD) runs its checks before doctest's main and exits.
#include <doctest/doctest.h>

#include "support/books.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Child mode: runs before main when HIPXX_TEST_DEVICES_CHILD is set, exits with the number of
// failed checks (0 = all good).
using test_support::books;
using test_support::LeakCheck;

namespace {

int child_failures = 0;

void child_check(bool ok, const char* what) {
  if (!ok) {
    ++child_failures;
    std::fprintf(stderr, "child check failed: %s\n", what);
  }
}

#define CHILD_CHECK(condition) child_check((condition), #condition)

void child_expect_no_device() {
  int count = 42;
  CHILD_CHECK(hipGetDeviceCount(&count) == hipErrorNoDevice);
  CHILD_CHECK(count == 0);
  CHILD_CHECK(hipxxGetBackendName() == nullptr);
  const char* why = hipxxGetBackendError();
  CHILD_CHECK(why != nullptr && std::strlen(why) > 0);
  // Where the parent names the reason it expects, the message must say it.
  if (const char* reason = std::getenv("HIPXX_TEST_EXPECT_REASON"); reason != nullptr && why != nullptr) {
    CHILD_CHECK(std::strstr(why, reason) != nullptr);
  }
  CHILD_CHECK(hipGetLastError() == hipErrorNoDevice);
  // The versions need no device.
  int runtime_version = 0;
  int driver_version = 0;
  CHILD_CHECK(hipRuntimeGetVersion(&runtime_version) == hipSuccess && runtime_version > 0);
  CHILD_CHECK(hipDriverGetVersion(&driver_version) == hipSuccess && driver_version > 0);
  CHILD_CHECK(hipGetLastError() == hipSuccess);
  CHILD_CHECK(hipRuntimeGetVersion(nullptr) == hipErrorInvalidValue);
  CHILD_CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHILD_CHECK(hipInit(0) == hipErrorNoDevice);
  CHILD_CHECK(hipSetDevice(0) == hipErrorNoDevice);
  int value = 0;
  CHILD_CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeVirtualMemoryManagementSupported, 0) == hipErrorNoDevice);
  void* ptr = nullptr;
  CHILD_CHECK(hipMalloc(&ptr, 64) == hipErrorNoDevice);
  CHILD_CHECK(hipMemAddressReserve(&ptr, 4096, 0, nullptr, 0) == hipErrorNoDevice);
  CHILD_CHECK(ptr == nullptr);
  hipxxBookCounts counts{};
  CHILD_CHECK(hipxxGetBookCounts(&counts) == hipErrorNoDevice);
  CHILD_CHECK(hipGetLastError() == hipErrorNoDevice);
  CHILD_CHECK(hipGetLastError() == hipSuccess);
  // Names do not need a backend.
  CHILD_CHECK(std::strcmp(hipGetErrorName(hipErrorNoDevice), "hipErrorNoDevice") == 0);
}

void child_expect_count(int expected, const char* backend) {
  int count = -1;
  CHILD_CHECK(hipGetDeviceCount(&count) == hipSuccess);
  CHILD_CHECK(count == expected);
  CHILD_CHECK(hipxxGetBackendName() != nullptr && std::strcmp(hipxxGetBackendName(), backend) == 0);
  CHILD_CHECK(hipxxGetBackendError() != nullptr && std::strlen(hipxxGetBackendError()) == 0);
  CHILD_CHECK(hipSetDevice(expected - 1) == hipSuccess);
  CHILD_CHECK(hipSetDevice(expected) == hipErrorInvalidDevice);
  int value = 0;
  CHILD_CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeVirtualMemoryManagementSupported, expected - 1) ==
              hipSuccess);
  CHILD_CHECK(value == 1);
  CHILD_CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeVirtualMemoryManagementSupported, expected) ==
              hipErrorInvalidDevice);
}

struct ChildMode {
  ChildMode() {
    const char* mode = std::getenv("HIPXX_TEST_DEVICES_CHILD");
    if (mode == nullptr) return;
    const std::string text{mode};
    if (text == "nodevice") {
      child_expect_no_device();
    } else if (text.rfind("count=", 0) == 0) {
      child_expect_count(std::atoi(text.c_str() + 6), "host");
    } else if (text.rfind("rocr=", 0) == 0) {
      child_expect_count(std::atoi(text.c_str() + 5), "rocr");
    } else if (text == "rocr-no-peers") {
      // ROCr says one GPU may never use another's pool: they are no peers, and access is refused.
      int can = -1;
      CHILD_CHECK(hipDeviceCanAccessPeer(&can, 0, 1) == hipSuccess && can == 0);
      CHILD_CHECK(hipDeviceCanAccessPeer(&can, 1, 0) == hipSuccess && can == 0);
      CHILD_CHECK(hipDeviceEnablePeerAccess(1, 0) == hipErrorPeerAccessUnsupported);
      CHILD_CHECK(hipDeviceDisablePeerAccess(1) == hipErrorPeerAccessNotEnabled);
      void* ptr = nullptr;  // plain allocations stay as they were
      CHILD_CHECK(hipSetDevice(1) == hipSuccess && hipMalloc(&ptr, 4096) == hipSuccess);
      CHILD_CHECK(hipMemset(ptr, 0x11, 4096) == hipSuccess && hipFree(ptr) == hipSuccess);
    } else if (text == "not-rocr") {
      int count = 0;
      CHILD_CHECK(hipGetDeviceCount(&count) == hipSuccess && count >= 1);
      CHILD_CHECK(hipxxGetBackendName() != nullptr && std::strcmp(hipxxGetBackendName(), "rocr") != 0);
    } else {
      std::fprintf(stderr, "unknown child mode '%s'\n", mode);
      ++child_failures;
    }
    std::fflush(stderr);
    _exit(child_failures);
  }
};

const ChildMode child_mode;

struct ChildResult {
  bool exited = false;
  int code = -1;
};

// Runs this executable again in child mode with `env` added (or removed, for a null value).
ChildResult run_child(const char* mode, const std::vector<std::pair<const char*, const char*>>& env) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("HIPXX_TEST_DEVICES_CHILD", mode, 1);
    for (const auto& [name, value] : env) {
      if (value == nullptr)
        unsetenv(name);
      else
        setenv(name, value, 1);
    }
    char* const argv[] = {const_cast<char*>("test_devices"), nullptr};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  ChildResult result;
  result.exited = WIFEXITED(status);
  result.code = result.exited ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

// ---------------------------------------------------------------------------------------------

// The number of devices this registration runs with (HIPXX_HOST_DEVICES, default 1).
int configured_devices() {
  const char* text = std::getenv("HIPXX_HOST_DEVICES");
  return text == nullptr || *text == '\0' ? 1 : std::atoi(text);
}

int device_count() {
  int count = 0;
  REQUIRE(hipGetDeviceCount(&count) == hipSuccess);
  return count;
}

void require_devices(int wanted) {
  REQUIRE_MESSAGE(device_count() >= wanted, "this test needs HIPXX_HOST_DEVICES=3 (see tests/meson.build)");
}

int current_device() {
  int device = -1;
  REQUIRE(hipGetDevice(&device) == hipSuccess);
  return device;
}

// Puts the calling thread back on device 0 at the end of a test case.
struct DeviceGuard {
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { CHECK(hipSetDevice(0) == hipSuccess); }
};

void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

std::size_t page() {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  std::size_t value = 0;
  REQUIRE(hipMemGetAllocationGranularity(&value, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
  return value;
}

hipMemAllocationProp make_prop(int device, hipMemAllocationHandleType type = hipMemHandleTypeNone) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = type;
  prop.location = {hipMemLocationTypeDevice, device};
  return prop;
}

hipMemAccessDesc make_desc(hipMemAccessFlags flags, int device) {
  hipMemAccessDesc desc{};
  desc.location = {hipMemLocationTypeDevice, device};
  desc.flags = flags;
  return desc;
}

unsigned long long access_of(void* ptr, int device) {
  const hipMemLocation location{hipMemLocationTypeDevice, device};
  unsigned long long flags = 0xdead;
  REQUIRE(hipMemGetAccess(&flags, &location, ptr) == hipSuccess);
  return flags;
}

// One reservation with one mapped allocation (created on device `owner`) and no access yet.
struct Mapping {
  std::size_t size;
  void* base = nullptr;
  hipMemGenericAllocationHandle_t handle = nullptr;
  explicit Mapping(std::size_t bytes, int owner = 0) : size(bytes) {
    REQUIRE(hipMemAddressReserve(&base, size, 0, nullptr, 0) == hipSuccess);
    const hipMemAllocationProp prop = make_prop(owner);
    REQUIRE(hipMemCreate(&handle, size, &prop, 0) == hipSuccess);
    REQUIRE(hipMemMap(base, size, 0, handle, 0) == hipSuccess);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    CHECK(hipMemUnmap(base, size) == hipSuccess);
    CHECK(hipMemRelease(handle) == hipSuccess);
    CHECK(hipMemAddressFree(base, size) == hipSuccess);
  }
};

}  // namespace

// =============================================================================================
TEST_SUITE_BEGIN("devices");

TEST_CASE("hipInit: flags must be 0") {
  CHECK(hipInit(0) == hipSuccess);
  CHECK(hipInit(0) == hipSuccess);  // idempotent
  CHECK(hipInit(1) == hipErrorInvalidValue);
  CHECK(hipInit(2) == hipErrorInvalidValue);
  CHECK(hipInit(~0U) == hipErrorInvalidValue);
  (void)hipGetLastError();
}

TEST_CASE("hipGetDeviceCount honours HIPXX_HOST_DEVICES" * doctest::test_suite("host-only")) {
  int count = -1;
  CHECK(hipGetDeviceCount(&count) == hipSuccess);
  CHECK(count == configured_devices());
  CHECK(hipGetDeviceCount(nullptr) == hipErrorInvalidValue);
  CHECK(std::string{hipxxGetBackendName()} == "host");
  CHECK(std::string{hipxxGetBackendError()}.empty());
  (void)hipGetLastError();
}

TEST_CASE("hipSetDevice and hipGetDevice") {
  DeviceGuard restore;
  const int count = device_count();
  CHECK(current_device() == 0);  // the default device
  for (int device = count - 1; device >= 0; --device) {
    CHECK(hipSetDevice(device) == hipSuccess);
    CHECK(current_device() == device);
  }
  REQUIRE(hipSetDevice(count - 1) == hipSuccess);
  for (const int bad : {-1, -2, count, count + 1, 64, INT_MAX, INT_MIN}) {
    CAPTURE(bad);
    CHECK(hipSetDevice(bad) == hipErrorInvalidDevice);
    CHECK(current_device() == count - 1);  // unchanged
  }
  CHECK(hipGetDevice(nullptr) == hipErrorInvalidValue);
  (void)hipGetLastError();
}

TEST_CASE("the current device belongs to the calling thread" * doctest::test_suite("devices-3")) {
  require_devices(3);
  DeviceGuard restore;
  REQUIRE(hipSetDevice(2) == hipSuccess);
  int seen_initially = -1;
  int seen_after = -1;
  std::thread other([&] {
    (void)hipGetDevice(&seen_initially);
    (void)hipSetDevice(1);
    (void)hipGetDevice(&seen_after);
  });
  other.join();
  CHECK(seen_initially == 0);
  CHECK(seen_after == 1);
  CHECK(current_device() == 2);
}

TEST_CASE("hipDeviceGetAttribute: known attributes on every device") {
  const int count = device_count();
  for (int device = 0; device < count; ++device) {
    CAPTURE(device);
    int value = -1;
    CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeVirtualMemoryManagementSupported, device) == hipSuccess);
    CHECK(value == 1);
    CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeUnifiedAddressing, device) == hipSuccess);
    CHECK(value == 1);
    CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeMultiprocessorCount, device) == hipSuccess);
    CHECK(value >= 1);
    CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeTotalGlobalMem, device) == hipSuccess);
    CHECK(value > 0);
    CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeIntegrated, device) == hipSuccess);
    if (std::string{hipxxGetBackendName()} == "host") {
      CHECK(value == 1);  // the host backend's devices are the host
    } else {
      CHECK((value == 0 || value == 1));
    }
  }
}

TEST_CASE("hipGetDeviceProperties: what the device calls and attributes report, in AMD's HIP 6 struct") {
  const int count = device_count();
  for (int device = 0; device < count; ++device) {
    CAPTURE(device);
    hipDeviceProp_t properties;
    std::memset(&properties, 0x5a, sizeof properties);
    REQUIRE(hipGetDeviceProperties(&properties, device) == hipSuccess);
    std::array<char, 256> name{};
    REQUIRE(hipDeviceGetName(name.data(), static_cast<int>(name.size()), device) == hipSuccess);
    CHECK(std::string{properties.name} == std::string{name.data()});
    std::size_t total = 0;
    REQUIRE(hipDeviceTotalMem(&total, device) == hipSuccess);
    CHECK(properties.totalGlobalMem == total);
    const auto attribute = [device](hipDeviceAttribute_t which) {
      int value = -1;
      REQUIRE(hipDeviceGetAttribute(&value, which, device) == hipSuccess);
      return value;
    };
    CHECK(properties.multiProcessorCount == attribute(hipDeviceAttributeMultiprocessorCount));
    CHECK(properties.integrated == attribute(hipDeviceAttributeIntegrated));
    CHECK(properties.managedMemory == attribute(hipDeviceAttributeManagedMemory));
    CHECK(properties.concurrentManagedAccess == attribute(hipDeviceAttributeConcurrentManagedAccess));
    CHECK(properties.pageableMemoryAccess == attribute(hipDeviceAttributePageableMemoryAccess));
    CHECK(properties.pageableMemoryAccessUsesHostPageTables ==
          attribute(hipDeviceAttributePageableMemoryAccessUsesHostPageTables));
    CHECK(properties.memoryPoolsSupported == 1);
    CHECK(static_cast<int>(properties.memoryPoolSupportedHandleTypes) ==
          attribute(hipDeviceAttributeMemoryPoolSupportedHandleTypes));
    CHECK(properties.unifiedAddressing == 1);
    CHECK(properties.streamPrioritiesSupported == 1);
    // What the runtime does not know is 0, never left as the caller's bytes.
    CHECK(properties.warpSize == 0);
    CHECK(properties.gcnArchName[0] == '\0');
    CHECK(properties.reserved[62] == 0);
    CHECK(properties.asicRevision == 0);
  }
  hipDeviceProp_t untouched;
  std::memset(&untouched, 0x5a, sizeof untouched);
  for (const int bad : {-1, count, INT_MAX}) {
    CAPTURE(bad);
    CHECK(hipGetDeviceProperties(&untouched, bad) == hipErrorInvalidDevice);
  }
  CHECK(untouched.totalGlobalMem == 0x5a5a5a5a5a5a5a5aULL);
  CHECK(hipGetDeviceProperties(nullptr, 0) == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
}

TEST_CASE("hipDeviceGetAttribute: refusals") {
  const int count = device_count();
  int value = 1234;
  for (const int bad : {-1, count, count + 5, INT_MAX}) {
    CAPTURE(bad);
    CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeVirtualMemoryManagementSupported, bad) ==
          hipErrorInvalidDevice);
  }
  for (const int attribute : {-1, 50000, 0x7ffffff0, INT_MIN}) {
    CAPTURE(attribute);
    CHECK(hipDeviceGetAttribute(&value, static_cast<hipDeviceAttribute_t>(attribute), 0) == hipErrorInvalidValue);
  }
  CHECK(value == 1234);
  CHECK(hipDeviceGetAttribute(nullptr, hipDeviceAttributeVirtualMemoryManagementSupported, 0) == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
}

TEST_CASE("versions and peers") {
  int version = 0;
  CHECK(hipDriverGetVersion(&version) == hipSuccess);
  CHECK(version > 0);
  CHECK(hipRuntimeGetVersion(&version) == hipSuccess);
  CHECK(version > 0);
  CHECK(hipDriverGetVersion(nullptr) == hipErrorInvalidValue);
  CHECK(hipRuntimeGetVersion(nullptr) == hipErrorInvalidValue);

  const int count = device_count();
  int can = -1;
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      CHECK(hipDeviceCanAccessPeer(&can, a, b) == hipSuccess);
      CHECK(can == (a != b ? 1 : 0));
    }
  }
  CHECK(hipDeviceCanAccessPeer(&can, 0, count) == hipErrorInvalidDevice);
  CHECK(hipDeviceCanAccessPeer(&can, -1, 0) == hipErrorInvalidDevice);
  CHECK(hipDeviceCanAccessPeer(nullptr, 0, 0) == hipErrorInvalidValue);
  (void)hipGetLastError();
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("backend selection in fresh processes") {
  SUBCASE("HIPXX_BACKEND=bogus: no device") {
    const ChildResult result = run_child("nodevice", {{"HIPXX_BACKEND", "bogus"}});
    CHECK(result.exited);
    CHECK(result.code == 0);
  }
  SUBCASE("HIPXX_HOST_DEVICES out of range or malformed: no device") {
    for (const char* bad : {"0", "65", "-1", "abc", "2x", " 3"}) {
      CAPTURE(bad);
      const ChildResult result = run_child("nodevice", {{"HIPXX_BACKEND", "host"}, {"HIPXX_HOST_DEVICES", bad}});
      CHECK(result.exited);
      CHECK(result.code == 0);
    }
  }
  SUBCASE("HIPXX_HOST_DEVICES sets the count") {
    for (const auto& [text, mode] :
         std::vector<std::pair<const char*, const char*>>{{"1", "count=1"}, {"5", "count=5"}, {"64", "count=64"}}) {
      CAPTURE(text);
      const ChildResult result = run_child(mode, {{"HIPXX_BACKEND", "host"}, {"HIPXX_HOST_DEVICES", text}});
      CHECK(result.exited);
      CHECK(result.code == 0);
    }
    const ChildResult unset = run_child("count=1", {{"HIPXX_BACKEND", "host"}, {"HIPXX_HOST_DEVICES", nullptr}});
    CHECK(unset.exited);
    CHECK(unset.code == 0);
  }
  SUBCASE("a child that expects the wrong thing fails (the harness itself works)") {
    const ChildResult result = run_child("count=2", {{"HIPXX_BACKEND", "host"}, {"HIPXX_HOST_DEVICES", "3"}});
    CHECK(result.exited);
    CHECK(result.code != 0);
  }
}

// The stand-in libhsa-runtime64 (tests/rocr) lies beside this executable in the build tree.
std::string stand_in_library() {
  std::string self(PATH_MAX, '\0');
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size());
  REQUIRE(length > 0);
  self.resize(static_cast<std::size_t>(length));
  const std::string library = self.substr(0, self.rfind('/')) + "/rocr/libhsa-runtime64.so.1";
  REQUIRE_MESSAGE(access(library.c_str(), R_OK) == 0, "the stand-in is built with the tests: " << library);
  return library;
}

TEST_CASE("choosing the ROCr backend, and why it is passed over") {
  const std::string library = stand_in_library();
  SUBCASE("HIPXX_BACKEND=rocr with ROCr's virtual memory API: the GPU agents are the devices") {
    const ChildResult result = run_child(
        "rocr=2", {{"HIPXX_BACKEND", "rocr"}, {"HIPXX_ROCR_LIBRARY", library.c_str()}, {"HIPXX_STAND_IN_GPUS", "2"}});
    CHECK(result.exited);
    CHECK(result.code == 0);
  }
  SUBCASE("auto tries ROCr first") {
    const ChildResult result = run_child(
        "rocr=3", {{"HIPXX_BACKEND", nullptr}, {"HIPXX_ROCR_LIBRARY", library.c_str()}, {"HIPXX_STAND_IN_GPUS", "3"}});
    CHECK(result.exited);
    CHECK(result.code == 0);
  }
  SUBCASE("GPUs ROCr says can never use each other's pools are no peers") {
    const ChildResult result = run_child("rocr-no-peers", {{"HIPXX_BACKEND", "rocr"},
                                                           {"HIPXX_ROCR_LIBRARY", library.c_str()},
                                                           {"HIPXX_STAND_IN_GPUS", "2"},
                                                           {"HIPXX_STAND_IN_NO_PEER", "1"}});
    CHECK(result.exited);
    CHECK(result.code == 0);
  }
  SUBCASE("a ROCr without the virtual memory API: no backend under rocr, another one under auto") {
    const ChildResult refused =
        run_child("nodevice", {{"HIPXX_BACKEND", "rocr"},
                               {"HIPXX_ROCR_LIBRARY", library.c_str()},
                               {"HIPXX_STAND_IN_NO_VMEM", "1"},
                               {"HIPXX_TEST_EXPECT_REASON", "HSA_AMD_SYSTEM_INFO_VIRTUAL_MEM_API_SUPPORTED"}});
    CHECK(refused.exited);
    CHECK(refused.code == 0);
    const ChildResult passed_over = run_child(
        "not-rocr",
        {{"HIPXX_BACKEND", "auto"}, {"HIPXX_ROCR_LIBRARY", library.c_str()}, {"HIPXX_STAND_IN_NO_VMEM", "1"}});
    CHECK(passed_over.exited);
    CHECK(passed_over.code == 0);
  }
  SUBCASE("HIPXX_ROCR_LIBRARY naming no library: no backend, and the message says which file") {
    const ChildResult result =
        run_child("nodevice", {{"HIPXX_BACKEND", "rocr"},
                               {"HIPXX_ROCR_LIBRARY", "/nonexistent/libhsa-runtime64.so.1"},
                               {"HIPXX_TEST_EXPECT_REASON", "/nonexistent/libhsa-runtime64.so.1"}});
    CHECK(result.exited);
    CHECK(result.code == 0);
  }
  SUBCASE("the expected reason is checked (the harness itself works)") {
    const ChildResult result = run_child("nodevice", {{"HIPXX_BACKEND", "rocr"},
                                                      {"HIPXX_ROCR_LIBRARY", "/nonexistent/libhsa-runtime64.so.1"},
                                                      {"HIPXX_TEST_EXPECT_REASON", "a reason never given"}});
    CHECK(result.exited);
    CHECK(result.code != 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Per-device access to VMM mappings.
TEST_CASE("set access is per device; copies check the current device" * doctest::test_suite("devices-3")) {
  require_devices(3);
  LeakCheck leaks;
  DeviceGuard restore;
  const std::size_t g = page();
  Mapping mapping(2 * g);
  const std::vector<unsigned char> data(2 * g, 0x3c);
  std::vector<unsigned char> back(2 * g, 0);

  for (int device = 0; device < 3; ++device) CHECK(access_of(mapping.base, device) == hipMemAccessFlagsProtNone);

  // Device 1 only.
  const hipMemAccessDesc rw1 = make_desc(hipMemAccessFlagsProtReadWrite, 1);
  REQUIRE(hipMemSetAccess(mapping.base, 2 * g, &rw1, 1) == hipSuccess);
  CHECK(access_of(mapping.base, 0) == hipMemAccessFlagsProtNone);
  CHECK(access_of(mapping.base, 1) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(at(mapping.base, 2 * g - 1), 1) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(mapping.base, 2) == hipMemAccessFlagsProtNone);

  REQUIRE(hipSetDevice(0) == hipSuccess);
  CHECK_REFUSED(hipMemcpy(mapping.base, data.data(), 2 * g, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemcpy(back.data(), mapping.base, 2 * g, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(mapping.base, 0, 16), hipErrorInvalidValue);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK(hipMemcpy(mapping.base, data.data(), 2 * g, hipMemcpyHostToDevice) == hipSuccess);
  CHECK(hipMemcpy(back.data(), mapping.base, 2 * g, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == data);
  REQUIRE(hipSetDevice(2) == hipSuccess);
  CHECK_REFUSED(hipMemcpy(back.data(), mapping.base, 2 * g, hipMemcpyDeviceToHost), hipErrorInvalidValue);

  // Adding device 2 read-only leaves device 1 as it was.
  const hipMemAccessDesc r2 = make_desc(hipMemAccessFlagsProtRead, 2);
  REQUIRE(hipMemSetAccess(mapping.base, 2 * g, &r2, 1) == hipSuccess);
  CHECK(access_of(mapping.base, 0) == hipMemAccessFlagsProtNone);
  CHECK(access_of(mapping.base, 1) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_of(mapping.base, 2) == hipMemAccessFlagsProtRead);
  std::fill(back.begin(), back.end(), 0);
  CHECK(hipMemcpy(back.data(), mapping.base, 2 * g, hipMemcpyDeviceToHost) == hipSuccess);  // on device 2
  CHECK(back == data);
  // And device 1 still reads and writes through it, where the backend's call could have taken its
  // access away (ROCr's documented set_access replaces the access of every agent it does not name).
  REQUIRE(hipSetDevice(1) == hipSuccess);
  std::fill(back.begin(), back.end(), 0);
  CHECK(hipMemcpy(back.data(), mapping.base, 2 * g, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == data);
  CHECK(hipMemcpy(mapping.base, data.data(), 2 * g, hipMemcpyHostToDevice) == hipSuccess);
  REQUIRE(hipSetDevice(2) == hipSuccess);
  const std::vector<unsigned char> junk(2 * g, 0x77);
  CHECK_REFUSED(hipMemcpy(mapping.base, junk.data(), 2 * g, hipMemcpyHostToDevice), hipErrorInvalidValue);
  CHECK_REFUSED(hipMemset(mapping.base, 1, 1), hipErrorInvalidValue);

  // A thread starts on device 0, which has no access, whatever this thread's device is.
  hipError_t from_other_thread = hipSuccess;
  std::thread other([&] {
    std::vector<unsigned char> buffer(16);
    from_other_thread = hipMemcpy(buffer.data(), mapping.base, 16, hipMemcpyDeviceToHost);
  });
  other.join();
  CHECK(from_other_thread == hipErrorInvalidValue);

  // One call with a descriptor per device.
  const hipMemAccessDesc all[] = {make_desc(hipMemAccessFlagsProtRead, 0), make_desc(hipMemAccessFlagsProtNone, 1),
                                  make_desc(hipMemAccessFlagsProtReadWrite, 2)};
  REQUIRE(hipMemSetAccess(mapping.base, 2 * g, all, 3) == hipSuccess);
  CHECK(access_of(mapping.base, 0) == hipMemAccessFlagsProtRead);
  CHECK(access_of(mapping.base, 1) == hipMemAccessFlagsProtNone);
  CHECK(access_of(mapping.base, 2) == hipMemAccessFlagsProtReadWrite);
  CHECK(hipMemcpy(mapping.base, junk.data(), 2 * g, hipMemcpyHostToDevice) == hipSuccess);  // on device 2
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK_REFUSED(hipMemcpy(back.data(), mapping.base, 2 * g, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  CHECK(hipMemcpy(back.data(), mapping.base, 2 * g, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == junk);
  CHECK_REFUSED(hipMemcpy(mapping.base, data.data(), 2 * g, hipMemcpyHostToDevice), hipErrorInvalidValue);
}

TEST_CASE("device ordinals beyond the count are refused everywhere" * doctest::test_suite("devices-3")) {
  require_devices(3);
  LeakCheck leaks;
  const std::size_t g = page();
  Mapping mapping(g);
  const hipMemAccessDesc rw0 = make_desc(hipMemAccessFlagsProtReadWrite, 0);
  REQUIRE(hipMemSetAccess(mapping.base, g, &rw0, 1) == hipSuccess);

  const hipMemAccessDesc rw3 = make_desc(hipMemAccessFlagsProtReadWrite, 3);
  CHECK_REFUSED(hipMemSetAccess(mapping.base, g, &rw3, 1), hipErrorInvalidValue);
  const hipMemAccessDesc list[] = {make_desc(hipMemAccessFlagsProtNone, 0), make_desc(hipMemAccessFlagsProtRead, 2),
                                   rw3};
  CHECK_REFUSED(hipMemSetAccess(mapping.base, g, list, 3), hipErrorInvalidValue);
  CHECK(access_of(mapping.base, 0) == hipMemAccessFlagsProtReadWrite);  // nothing applied
  CHECK(access_of(mapping.base, 2) == hipMemAccessFlagsProtNone);

  const hipMemLocation location3{hipMemLocationTypeDevice, 3};
  unsigned long long flags = 0;
  CHECK_REFUSED(hipMemGetAccess(&flags, &location3, mapping.base), hipErrorInvalidValue);

  hipMemGenericAllocationHandle_t handle = nullptr;
  const hipMemAllocationProp prop3 = make_prop(3);
  CHECK_REFUSED(hipMemCreate(&handle, g, &prop3, 0), hipErrorInvalidValue);
  std::size_t granularity = 0;
  CHECK_REFUSED(hipMemGetAllocationGranularity(&granularity, &prop3, hipMemAllocationGranularityMinimum),
                hipErrorInvalidValue);
  CHECK(handle == nullptr);
  CHECK(granularity == 0);
}

TEST_CASE("allocations remember their device, imported ones too, whichever device imports them" *
          doctest::test_suite("devices-3")) {
  require_devices(3);
  LeakCheck leaks;
  DeviceGuard restore;
  const std::size_t g = page();
  for (int device = 0; device < 3; ++device) {
    CAPTURE(device);
    const hipMemAllocationProp prop = make_prop(device, hipMemHandleTypePosixFileDescriptor);
    std::size_t granularity = 0;
    CHECK(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
    CHECK(granularity == g);
    hipMemGenericAllocationHandle_t handle = nullptr;
    REQUIRE(hipMemCreate(&handle, g, &prop, 0) == hipSuccess);
    hipMemAllocationProp back{};
    REQUIRE(hipMemGetAllocationPropertiesFromHandle(&back, handle) == hipSuccess);
    CHECK(back.location.type == hipMemLocationTypeDevice);
    CHECK(back.location.id == device);

    int fd = -1;
    REQUIRE(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
    const int importer = (device + 1) % 3;
    REQUIRE(hipSetDevice(importer) == hipSuccess);
    hipMemGenericAllocationHandle_t imported = nullptr;
    REQUIRE(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                            hipMemHandleTypePosixFileDescriptor) == hipSuccess);
    close(fd);
    back = {};
    REQUIRE(hipMemGetAllocationPropertiesFromHandle(&back, imported) == hipSuccess);
    CHECK(back.location.type == hipMemLocationTypeDevice);
    CHECK(back.location.id == device);
    CHECK(hipMemRelease(imported) == hipSuccess);
    CHECK(hipMemRelease(handle) == hipSuccess);
  }
}

TEST_CASE("spanning set access for another device, and hipMalloc memory on any device" *
          doctest::test_suite("devices-3")) {
  require_devices(3);
  LeakCheck leaks;
  DeviceGuard restore;
  const std::size_t g = page();
  void* base = nullptr;
  REQUIRE(hipMemAddressReserve(&base, 3 * g, 0, nullptr, 0) == hipSuccess);
  std::vector<hipMemGenericAllocationHandle_t> handles(3);
  for (std::size_t i = 0; i < 3; ++i) {
    const hipMemAllocationProp prop = make_prop(static_cast<int>(i));
    REQUIRE(hipMemCreate(&handles[i], g, &prop, 0) == hipSuccess);
    REQUIRE(hipMemMap(at(base, i * g), g, 0, handles[i], 0) == hipSuccess);
  }
  const hipMemAccessDesc rw2 = make_desc(hipMemAccessFlagsProtReadWrite, 2);
  REQUIRE(hipMemSetAccess(base, 3 * g, &rw2, 1) == hipSuccess);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(access_of(at(base, i * g), 2) == hipMemAccessFlagsProtReadWrite);
    CHECK(access_of(at(base, i * g), 0) == hipMemAccessFlagsProtNone);
  }
  // Plain device memory from device 1, copied into the mapping by device 2.
  REQUIRE(hipSetDevice(1) == hipSuccess);
  void* linear = nullptr;
  REQUIRE(hipMalloc(&linear, 3 * g) == hipSuccess);
  REQUIRE(hipMemset(linear, 0x2e, 3 * g) == hipSuccess);
  REQUIRE(hipSetDevice(2) == hipSuccess);
  CHECK(hipMemcpy(base, linear, 3 * g, hipMemcpyDeviceToDevice) == hipSuccess);
  std::vector<unsigned char> back(3 * g);
  CHECK(hipMemcpy(back.data(), base, 3 * g, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == std::vector<unsigned char>(3 * g, 0x2e));
  REQUIRE(hipSetDevice(0) == hipSuccess);
  CHECK_REFUSED(hipMemcpy(base, linear, 3 * g, hipMemcpyDeviceToDevice), hipErrorInvalidValue);
  CHECK(hipFree(linear) == hipSuccess);  // freed from another device than it was made on

  CHECK(hipMemUnmap(base, 3 * g) == hipSuccess);
  for (hipMemGenericAllocationHandle_t handle : handles) CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, 3 * g) == hipSuccess);
}

TEST_CASE("hipMemset of memory of one device granted only to another, created or imported" *
          doctest::test_suite("devices-3")) {
  require_devices(2);
  LeakCheck leaks;
  DeviceGuard restore;
  // More than one 4 KiB block, with bytes outside whole words at both ends.
  const std::size_t size = 4 * page();
  const hipMemAllocationProp prop = make_prop(0, hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t created = nullptr;
  REQUIRE(hipMemCreate(&created, size, &prop, 0) == hipSuccess);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, created, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  hipMemGenericAllocationHandle_t imported = nullptr;
  REQUIRE(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                          hipMemHandleTypePosixFileDescriptor) == hipSuccess);
  CHECK(close(fd) == 0);
  const hipMemAccessDesc rw1 = make_desc(hipMemAccessFlagsProtReadWrite, 1);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  for (const auto& [handle, value] : {std::pair{created, 0x3c}, std::pair{imported, 0xc3}}) {
    CAPTURE(value);
    void* base = nullptr;
    REQUIRE(hipMemAddressReserve(&base, size, 0, nullptr, 0) == hipSuccess);
    REQUIRE(hipMemMap(base, size, 0, handle, 0) == hipSuccess);
    REQUIRE(hipMemSetAccess(base, size, &rw1, 1) == hipSuccess);
    CHECK(hipMemset(base, 0, size) == hipSuccess);
    CHECK(hipMemset(at(base, 1), value, size - 2) == hipSuccess);
    std::vector<unsigned char> back(size);
    CHECK(hipMemcpy(back.data(), base, size, hipMemcpyDeviceToHost) == hipSuccess);
    std::vector<unsigned char> expected(size, static_cast<unsigned char>(value));
    expected.front() = 0;
    expected.back() = 0;
    CHECK(back == expected);
    CHECK(hipMemUnmap(base, size) == hipSuccess);
    CHECK(hipMemAddressFree(base, size) == hipSuccess);
  }
  CHECK(hipMemRelease(imported) == hipSuccess);
  CHECK(hipMemRelease(created) == hipSuccess);
}

TEST_CASE("hipDeviceEnablePeerAccess/DisablePeerAccess: per ordered pair, with the documented refusals" *
          doctest::test_suite("devices-3")) {
  require_devices(3);
  LeakCheck leaks;
  DeviceGuard restore;
  const int count = device_count();
  constexpr std::size_t kBytes = 64 * 1024;
  std::vector<unsigned char> sent(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) sent[i] = static_cast<unsigned char>(i * 7 + 3);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  void* before_enabling = nullptr;  // device 1's memory from before device 0 was given access
  REQUIRE(hipMalloc(&before_enabling, kBytes) == hipSuccess);
  REQUIRE(hipMemcpy(before_enabling, sent.data(), kBytes, hipMemcpyHostToDevice) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);

  CHECK_REFUSED(hipDeviceEnablePeerAccess(1, 1), hipErrorInvalidValue);
  CHECK_REFUSED(hipDeviceEnablePeerAccess(0, 0), hipErrorInvalidDevice);  // not its own peer
  CHECK_REFUSED(hipDeviceEnablePeerAccess(count, 0), hipErrorInvalidDevice);
  CHECK_REFUSED(hipDeviceEnablePeerAccess(-1, 0), hipErrorInvalidDevice);
  CHECK_REFUSED(hipDeviceDisablePeerAccess(1), hipErrorPeerAccessNotEnabled);
  CHECK_REFUSED(hipDeviceDisablePeerAccess(0), hipErrorInvalidDevice);

  CHECK(hipDeviceEnablePeerAccess(1, 0) == hipSuccess);
  CHECK_REFUSED(hipDeviceEnablePeerAccess(1, 0), hipErrorPeerAccessAlreadyEnabled);
  // Device 1 may use device 0's memory only once it is given access itself.
  REQUIRE(hipSetDevice(1) == hipSuccess);
  CHECK_REFUSED(hipDeviceDisablePeerAccess(0), hipErrorPeerAccessNotEnabled);
  CHECK(hipDeviceEnablePeerAccess(0, 0) == hipSuccess);
  CHECK(hipDeviceDisablePeerAccess(0) == hipSuccess);
  void* after_enabling = nullptr;  // made while device 0 has access to device 1
  REQUIRE(hipMalloc(&after_enabling, kBytes) == hipSuccess);
  REQUIRE(hipSetDevice(2) == hipSuccess);
  void* on_two = nullptr;
  REQUIRE(hipMalloc(&on_two, kBytes) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);

  // Copies made by device 0 between its own memory and its peer's, old and new (on ROCr, where a
  // copy engine must reach both sides, device 0's engine now can), and a third device's.
  void* on_zero = nullptr;
  REQUIRE(hipMalloc(&on_zero, kBytes) == hipSuccess);
  std::vector<unsigned char> back(kBytes);
  CHECK(hipMemcpyPeer(on_zero, 0, before_enabling, 1, kBytes) == hipSuccess);
  CHECK(hipMemcpyPeer(after_enabling, 1, on_zero, 0, kBytes) == hipSuccess);
  CHECK(hipMemcpyPeer(on_two, 2, after_enabling, 1, kBytes) == hipSuccess);
  CHECK(hipMemcpy(back.data(), on_two, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == sent);

  CHECK(hipDeviceDisablePeerAccess(1) == hipSuccess);
  CHECK_REFUSED(hipDeviceDisablePeerAccess(1), hipErrorPeerAccessNotEnabled);
  // Taken back, the access can be given again; copies go on as before.
  CHECK(hipDeviceEnablePeerAccess(1, 0) == hipSuccess);
  CHECK(hipDeviceDisablePeerAccess(1) == hipSuccess);
  REQUIRE(hipMemset(on_two, 0, kBytes) == hipSuccess);
  CHECK(hipMemcpyPeer(on_two, 2, before_enabling, 1, kBytes) == hipSuccess);
  CHECK(hipMemcpy(back.data(), on_two, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == sent);

  CHECK(hipFree(before_enabling) == hipSuccess);
  CHECK(hipFree(after_enabling) == hipSuccess);
  CHECK(hipFree(on_zero) == hipSuccess);
  CHECK(hipFree(on_two) == hipSuccess);
}

TEST_CASE("hipMemcpyPeer/Async: device memory of one device into another's, made by the current device" *
          doctest::test_suite("devices-3")) {
  require_devices(3);
  LeakCheck leaks;
  DeviceGuard restore;
  constexpr std::size_t kBytes = 3 * 4096 + 17;
  std::vector<unsigned char> sent(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) sent[i] = static_cast<unsigned char>(i * 13 + 1);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  void* on_one = nullptr;
  REQUIRE(hipMalloc(&on_one, kBytes) == hipSuccess);
  REQUIRE(hipMemcpy(on_one, sent.data(), kBytes, hipMemcpyHostToDevice) == hipSuccess);
  REQUIRE(hipSetDevice(2) == hipSuccess);
  void* on_two = nullptr;
  REQUIRE(hipMalloc(&on_two, kBytes) == hipSuccess);
  REQUIRE(hipMemset(on_two, 0, kBytes) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  std::vector<unsigned char> back(kBytes);

  CHECK(hipMemcpyPeer(on_two, 2, on_one, 1, kBytes) == hipSuccess);
  CHECK(hipMemcpy(back.data(), on_two, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == sent);

  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
  REQUIRE(hipMemset(on_two, 0, kBytes) == hipSuccess);
  CHECK(hipMemcpyPeerAsync(on_two, 2, on_one, 1, kBytes, stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipMemcpy(back.data(), on_two, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == sent);

  // Ordinals out of range are refused before anything moves.
  REQUIRE(hipMemset(on_two, 0, kBytes) == hipSuccess);
  CHECK_REFUSED(hipMemcpyPeer(on_two, 3, on_one, 1, kBytes), hipErrorInvalidDevice);
  CHECK_REFUSED(hipMemcpyPeer(on_two, 2, on_one, -1, kBytes), hipErrorInvalidDevice);
  CHECK_REFUSED(hipMemcpyPeerAsync(on_two, -1, on_one, 1, kBytes, stream), hipErrorInvalidDevice);
  CHECK_REFUSED(hipMemcpyPeerAsync(on_two, 2, on_one, 3, kBytes, stream), hipErrorInvalidDevice);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipMemcpy(back.data(), on_two, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(back == std::vector<unsigned char>(kBytes, 0));

  // The copy is the current device's: memory mapped for device 2 alone is out of device 0's reach,
  // as it is for hipMemcpy.
  const std::size_t g = page();
  void* base = nullptr;
  REQUIRE(hipMemAddressReserve(&base, g, 0, nullptr, 0) == hipSuccess);
  hipMemGenericAllocationHandle_t handle{};
  const hipMemAllocationProp prop = make_prop(2);
  REQUIRE(hipMemCreate(&handle, g, &prop, 0) == hipSuccess);
  REQUIRE(hipMemMap(base, g, 0, handle, 0) == hipSuccess);
  const hipMemAccessDesc rw2 = make_desc(hipMemAccessFlagsProtReadWrite, 2);
  REQUIRE(hipMemSetAccess(base, g, &rw2, 1) == hipSuccess);
  CHECK_REFUSED(hipMemcpyPeer(base, 2, on_one, 1, g < kBytes ? g : kBytes), hipErrorInvalidValue);
  REQUIRE(hipSetDevice(2) == hipSuccess);
  CHECK(hipMemcpyPeer(base, 2, on_one, 1, g < kBytes ? g : kBytes) == hipSuccess);

  CHECK(hipMemUnmap(base, g) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  CHECK(hipMemAddressFree(base, g) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(on_one) == hipSuccess);
  CHECK(hipFree(on_two) == hipSuccess);
}

TEST_CASE("host backend: the pages are as open as the most open device" * doctest::test_suite("host-only")) {
  require_devices(3);
  REQUIRE(std::string{hipxxGetBackendName()} == "host");
  LeakCheck leaks;
  const std::size_t g = page();
  Mapping mapping(g);
  const auto child_reads = [&] {
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
      sigaction(SIGSEGV, &dfl, nullptr);
      const volatile unsigned char* byte = static_cast<const volatile unsigned char*>(mapping.base);
      (void)*byte;
      _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  };
  CHECK_FALSE(child_reads());
  const hipMemAccessDesc r2 = make_desc(hipMemAccessFlagsProtRead, 2);
  REQUIRE(hipMemSetAccess(mapping.base, g, &r2, 1) == hipSuccess);
  CHECK(child_reads());
  const hipMemAccessDesc none2 = make_desc(hipMemAccessFlagsProtNone, 2);
  REQUIRE(hipMemSetAccess(mapping.base, g, &none2, 1) == hipSuccess);
  CHECK_FALSE(child_reads());
}

TEST_SUITE_END();
