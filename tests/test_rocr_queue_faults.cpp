// The ROCr backend's device queues when work fails on the device: ROCr lowers the failed work's
// completion signal below zero, and work queued after it waits for that signal to reach zero, which
// it never does. Over the stand-in libhsa-runtime64 (tests/rocr), whose hsa_stand_in_fail_copies
// makes copies fail on its engines as a faulting copy does on a GPU. The test chooses the ROCr
// backend itself (HIPXX_ROCR_LIBRARY names the stand-in), so it runs so wherever it is started.
// tests/meson.build slows the stand-in's copies (HIPXX_STAND_IN_COPY_DELAY_US) so that the work
// after the failing copy is queued before that copy fails, and so depends on it.
#include <doctest/doctest.h>

#include <hip/hip_runtime_api.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <vector>

namespace {

using FailCopies = void (*)(unsigned);

// The stand-in the backend loaded, and its hook.
FailCopies stand_in_hook() {
  const char* const path = std::getenv("HIPXX_ROCR_LIBRARY");
  REQUIRE(path != nullptr);
  void* const library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE_MESSAGE(library != nullptr, "the ROCr backend has not loaded ", path);
  auto* const hook = reinterpret_cast<FailCopies>(dlsym(library, "hsa_stand_in_fail_copies"));
  dlclose(library);  // the backend's own reference keeps it loaded
  const bool found = hook != nullptr;
  REQUIRE(found);
  return hook;
}

struct RocrBackend {
  RocrBackend() {
    REQUIRE(setenv("HIPXX_BACKEND", "rocr", 1) == 0);
    REQUIRE(hipInit(0) == hipSuccess);
  }
};

// The ROCr backend, the stand-in's hook, and two device buffers: the source of 1s, the target
// freed at the end.
struct TwoBuffers {
  static constexpr std::size_t kBytes = std::size_t{1} << 20;
  RocrBackend backend;
  FailCopies fail_copies = stand_in_hook();
  void* source = nullptr;
  void* target = nullptr;

  TwoBuffers() {
    REQUIRE(hipMalloc(&source, kBytes) == hipSuccess);
    REQUIRE(hipMalloc(&target, kBytes) == hipSuccess);
    REQUIRE(hipMemset(source, 1, kBytes) == hipSuccess);
  }
  TwoBuffers(const TwoBuffers&) = delete;
  TwoBuffers& operator=(const TwoBuffers&) = delete;
  ~TwoBuffers() {
    (void)hipDeviceSynchronize();
    CHECK(hipFree(source) == hipSuccess);
    CHECK(hipFree(target) == hipSuccess);
  }
};

}  // namespace

TEST_CASE_FIXTURE(TwoBuffers,
                  "work queued after a copy that failed on the device still runs; the failure is reported") {
  REQUIRE(hipMemset(target, 0, kBytes) == hipSuccess);

  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
  fail_copies(1);
  REQUIRE(hipMemcpyAsync(target, source, kBytes, hipMemcpyDeviceToDevice, stream) == hipSuccess);
  // Behind the failed copy: without the queue letting go of the failed signal it never starts.
  REQUIRE(hipMemsetAsync(source, 2, kBytes, stream) == hipSuccess);
  // The synchronize waits for the work behind the failure too, and reports the failure.
  CHECK(hipStreamSynchronize(stream) == hipErrorIllegalAddress);
  // Drained, the stream still reports its failure, and so does its device, until it is destroyed.
  CHECK(hipStreamQuery(stream) == hipErrorIllegalAddress);
  CHECK(hipDeviceSynchronize() == hipErrorIllegalAddress);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipDeviceSynchronize() == hipSuccess);

  // The failed copy moved nothing; the fill after it ran.
  std::vector<unsigned char> seen(kBytes);
  REQUIRE(hipMemcpy(seen.data(), target, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(std::all_of(seen.begin(), seen.end(), [](unsigned char byte) { return byte == 0; }));
  REQUIRE(hipMemcpy(seen.data(), source, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(std::all_of(seen.begin(), seen.end(), [](unsigned char byte) { return byte == 2; }));
}

TEST_CASE_FIXTURE(TwoBuffers, "a stream that reported a failure still waits for the work queued on it after") {
  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
  fail_copies(1);
  REQUIRE(hipMemcpyAsync(target, source, kBytes, hipMemcpyDeviceToDevice, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipErrorIllegalAddress);

  // The stream keeps its failure, and later copies still run, each slowed by the stand-in: each
  // wait below is over only once the copy is, though the failure is known from the start.
  REQUIRE(hipMemcpyAsync(target, source, kBytes, hipMemcpyDeviceToDevice, stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipErrorIllegalAddress);
  std::vector<unsigned char> seen(kBytes);
  REQUIRE(hipMemcpy(seen.data(), target, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(std::all_of(seen.begin(), seen.end(), [](unsigned char byte) { return byte == 1; }));

  REQUIRE(hipMemsetAsync(target, 5, kBytes, stream) == hipSuccess);
  CHECK(hipDeviceSynchronize() == hipErrorIllegalAddress);
  REQUIRE(hipMemcpy(seen.data(), target, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(std::all_of(seen.begin(), seen.end(), [](unsigned char byte) { return byte == 5; }));

  // hipFree waits for it as well: the stand-in aborts where memory is freed under a running copy.
  void* scratch = nullptr;
  REQUIRE(hipMalloc(&scratch, kBytes) == hipSuccess);
  REQUIRE(hipMemcpyAsync(scratch, source, kBytes, hipMemcpyDeviceToDevice, stream) == hipSuccess);
  CHECK(hipFree(scratch) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE_FIXTURE(
    TwoBuffers,
    "a synchronous copy or fill behind failed work on the null stream still does its work before it returns") {
  std::vector<unsigned char> seen(kBytes, 0);

  // The failing copy keeps the null stream busy, so the calls below go behind it on that stream;
  // its failure breaks the queue while they wait, and they must still wait for their own work.
  fail_copies(1);
  REQUIRE(hipMemcpyAsync(target, source, kBytes, hipMemcpyDeviceToDevice, nullptr) == hipSuccess);
  CHECK(hipMemcpy(seen.data(), source, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(std::all_of(seen.begin(), seen.end(), [](unsigned char byte) { return byte == 1; }));

  fail_copies(1);
  REQUIRE(hipMemcpyAsync(target, source, kBytes, hipMemcpyDeviceToDevice, nullptr) == hipSuccess);
  CHECK(hipMemset(source, 3, kBytes) == hipSuccess);
  REQUIRE(hipMemcpy(seen.data(), source, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(std::all_of(seen.begin(), seen.end(), [](unsigned char byte) { return byte == 3; }));
}
