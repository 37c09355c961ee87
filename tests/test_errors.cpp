// Last-error bookkeeping (per thread; peek keeps it, get resets it) and the name and description
// of every hipError_t value in the ABI table.
#include <doctest/doctest.h>

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <atomic>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

inline std::ostream& operator<<(std::ostream& os, hipError_t e) {
  return os << hipGetErrorName(e) << "(" << static_cast<int>(e) << ")";
}

namespace {

// Every value of the ABI's hipError_t table, with the name AMD's runtime reports for it (aliases
// share a value; the primary name is reported).
const std::vector<std::pair<int, const char*>> kErrorNames = {
    {0, "hipSuccess"},
    {1, "hipErrorInvalidValue"},
    {2, "hipErrorOutOfMemory"},
    {3, "hipErrorNotInitialized"},
    {4, "hipErrorDeinitialized"},
    {5, "hipErrorProfilerDisabled"},
    {6, "hipErrorProfilerNotInitialized"},
    {7, "hipErrorProfilerAlreadyStarted"},
    {8, "hipErrorProfilerAlreadyStopped"},
    {9, "hipErrorInvalidConfiguration"},
    {12, "hipErrorInvalidPitchValue"},
    {13, "hipErrorInvalidSymbol"},
    {17, "hipErrorInvalidDevicePointer"},
    {21, "hipErrorInvalidMemcpyDirection"},
    {35, "hipErrorInsufficientDriver"},
    {52, "hipErrorMissingConfiguration"},
    {53, "hipErrorPriorLaunchFailure"},
    {98, "hipErrorInvalidDeviceFunction"},
    {100, "hipErrorNoDevice"},
    {101, "hipErrorInvalidDevice"},
    {200, "hipErrorInvalidImage"},
    {201, "hipErrorInvalidContext"},
    {202, "hipErrorContextAlreadyCurrent"},
    {205, "hipErrorMapFailed"},
    {206, "hipErrorUnmapFailed"},
    {207, "hipErrorArrayIsMapped"},
    {208, "hipErrorAlreadyMapped"},
    {209, "hipErrorNoBinaryForGpu"},
    {210, "hipErrorAlreadyAcquired"},
    {211, "hipErrorNotMapped"},
    {212, "hipErrorNotMappedAsArray"},
    {213, "hipErrorNotMappedAsPointer"},
    {214, "hipErrorECCNotCorrectable"},
    {215, "hipErrorUnsupportedLimit"},
    {216, "hipErrorContextAlreadyInUse"},
    {217, "hipErrorPeerAccessUnsupported"},
    {218, "hipErrorInvalidKernelFile"},
    {219, "hipErrorInvalidGraphicsContext"},
    {300, "hipErrorInvalidSource"},
    {301, "hipErrorFileNotFound"},
    {302, "hipErrorSharedObjectSymbolNotFound"},
    {303, "hipErrorSharedObjectInitFailed"},
    {304, "hipErrorOperatingSystem"},
    {400, "hipErrorInvalidHandle"},
    {401, "hipErrorIllegalState"},
    {500, "hipErrorNotFound"},
    {600, "hipErrorNotReady"},
    {700, "hipErrorIllegalAddress"},
    {701, "hipErrorLaunchOutOfResources"},
    {702, "hipErrorLaunchTimeOut"},
    {704, "hipErrorPeerAccessAlreadyEnabled"},
    {705, "hipErrorPeerAccessNotEnabled"},
    {708, "hipErrorSetOnActiveProcess"},
    {709, "hipErrorContextIsDestroyed"},
    {710, "hipErrorAssert"},
    {712, "hipErrorHostMemoryAlreadyRegistered"},
    {713, "hipErrorHostMemoryNotRegistered"},
    {719, "hipErrorLaunchFailure"},
    {720, "hipErrorCooperativeLaunchTooLarge"},
    {801, "hipErrorNotSupported"},
    {900, "hipErrorStreamCaptureUnsupported"},
    {901, "hipErrorStreamCaptureInvalidated"},
    {902, "hipErrorStreamCaptureMerge"},
    {903, "hipErrorStreamCaptureUnmatched"},
    {904, "hipErrorStreamCaptureUnjoined"},
    {905, "hipErrorStreamCaptureIsolation"},
    {906, "hipErrorStreamCaptureImplicit"},
    {907, "hipErrorCapturedEvent"},
    {908, "hipErrorStreamCaptureWrongThread"},
    {910, "hipErrorGraphExecUpdateFailure"},
    {911, "hipErrorInvalidChannelDescriptor"},
    {912, "hipErrorInvalidTexture"},
    {999, "hipErrorUnknown"},
    {1052, "hipErrorRuntimeMemory"},
    {1053, "hipErrorRuntimeOther"},
};

hipError_t error(int value) { return static_cast<hipError_t>(value); }

// A call that fails with a known error and changes nothing.
hipError_t fail_invalid_value() { return hipMalloc(nullptr, 1); }
hipError_t fail_invalid_device() { return hipSetDevice(-1); }

}  // namespace

TEST_SUITE_BEGIN("errors");

TEST_CASE("the header's enumerators have the ABI's values") {
  CHECK(hipSuccess == 0);
  CHECK(hipErrorInvalidValue == 1);
  CHECK(hipErrorOutOfMemory == 2);
  CHECK(hipErrorMemoryAllocation == hipErrorOutOfMemory);
  CHECK(hipErrorNotInitialized == 3);
  CHECK(hipErrorInitializationError == hipErrorNotInitialized);
  CHECK(hipErrorInvalidMemcpyDirection == 21);
  CHECK(hipErrorNoDevice == 100);
  CHECK(hipErrorInvalidDevice == 101);
  CHECK(hipErrorMapFailed == 205);
  CHECK(hipErrorMapBufferObjectFailed == hipErrorMapFailed);
  CHECK(hipErrorInvalidHandle == 400);
  CHECK(hipErrorInvalidResourceHandle == hipErrorInvalidHandle);
  CHECK(hipErrorNotSupported == 801);
  CHECK(hipErrorUnknown == 999);
  CHECK(hipErrorRuntimeOther == 1053);
  CHECK(sizeof(hipError_t) == sizeof(int));
}

TEST_CASE("hipGetErrorName gives the exact name of every value") {
  for (const auto& [value, name] : kErrorNames) {
    CAPTURE(value);
    const char* reported = hipGetErrorName(error(value));
    REQUIRE(reported != nullptr);
    CHECK(std::string{reported} == name);
  }
  // Aliases report their primary name.
  CHECK(std::string{hipGetErrorName(hipErrorMemoryAllocation)} == "hipErrorOutOfMemory");
  CHECK(std::string{hipGetErrorName(hipErrorInitializationError)} == "hipErrorNotInitialized");
  CHECK(std::string{hipGetErrorName(hipErrorMapBufferObjectFailed)} == "hipErrorMapFailed");
  CHECK(std::string{hipGetErrorName(hipErrorInvalidResourceHandle)} == "hipErrorInvalidHandle");
}

TEST_CASE("hipGetErrorString gives a distinct description of every value") {
  std::map<std::string, int> seen;
  for (const auto& [value, name] : kErrorNames) {
    CAPTURE(value);
    const char* text = hipGetErrorString(error(value));
    REQUIRE(text != nullptr);
    CHECK(std::strlen(text) > 0);
    CHECK(std::string{text} != name);  // a description, not the name again
    const auto [where, fresh] = seen.emplace(text, value);
    CHECK_MESSAGE(fresh, "same description as ", where->second);
  }
}

TEST_CASE("values outside the table are hipErrorUnknown") {
  const std::string unknown_text = hipGetErrorString(hipErrorUnknown);
  for (const int value : {-1, 10, 11, 14, 16, 18, 99, 102, 203, 220, 305, 402, 501, 601, 703, 800, 802, 909, 913,
                          998, 1000, 1051, 1056, 100000, 0x7fffffff}) {
    CAPTURE(value);
    REQUIRE(hipGetErrorName(error(value)) != nullptr);
    CHECK(std::string{hipGetErrorName(error(value))} == "hipErrorUnknown");
    REQUIRE(hipGetErrorString(error(value)) != nullptr);
    CHECK(std::string{hipGetErrorString(error(value))} == unknown_text);
  }
}

TEST_CASE("hipGetErrorName and hipGetErrorString do not touch the last error") {
  (void)hipGetLastError();
  REQUIRE(fail_invalid_device() == hipErrorInvalidDevice);
  (void)hipGetErrorName(error(123456));
  (void)hipGetErrorString(error(-5));
  CHECK(hipGetLastError() == hipErrorInvalidDevice);
}

TEST_CASE("last error: starts clean, peek keeps it, get resets it") {
  (void)hipGetLastError();
  CHECK(hipPeekAtLastError() == hipSuccess);
  CHECK(hipGetLastError() == hipSuccess);

  REQUIRE(fail_invalid_value() == hipErrorInvalidValue);
  CHECK(hipPeekAtLastError() == hipErrorInvalidValue);
  CHECK(hipPeekAtLastError() == hipErrorInvalidValue);  // peeking twice changes nothing
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipSuccess);
  CHECK(hipPeekAtLastError() == hipSuccess);
}

TEST_CASE("last error: a later success does not clear it; a later failure replaces it") {
  (void)hipGetLastError();
  REQUIRE(fail_invalid_value() == hipErrorInvalidValue);
  int count = 0;
  REQUIRE(hipGetDeviceCount(&count) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  void* ptr = nullptr;
  REQUIRE(hipMalloc(&ptr, 16) == hipSuccess);
  REQUIRE(hipFree(ptr) == hipSuccess);
  CHECK(hipPeekAtLastError() == hipErrorInvalidValue);

  REQUIRE(fail_invalid_device() == hipErrorInvalidDevice);
  CHECK(hipPeekAtLastError() == hipErrorInvalidDevice);
  REQUIRE(hipMemcpy(nullptr, nullptr, 1, static_cast<hipMemcpyKind>(77)) == hipErrorInvalidMemcpyDirection);
  CHECK(hipGetLastError() == hipErrorInvalidMemcpyDirection);
  CHECK(hipGetLastError() == hipSuccess);
}

TEST_CASE("last error: failures of every kind of entry point are recorded") {
  (void)hipGetLastError();
  CHECK(hipGetDeviceCount(nullptr) == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipInit(1) == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipGetDevice(nullptr) == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  int value = 0;
  CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeVirtualMemoryManagementSupported, 99) ==
        hipErrorInvalidDevice);
  CHECK(hipGetLastError() == hipErrorInvalidDevice);
  CHECK(hipMemRelease(nullptr) == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipMemMapArrayAsync(nullptr, 0, nullptr) == hipErrorNotSupported);
  CHECK(hipGetLastError() == hipErrorNotSupported);
  CHECK(hipxxGetBookCounts(nullptr) == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipSuccess);
}

TEST_CASE("last error: a query's hipErrorNotReady is an answer, not a failure, and is not recorded") {
  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreateWithFlags(&event, hipEventDisableTiming) == hipSuccess);
  // The stream is held by a callback until the queries are done.
  std::atomic<bool> go = false;
  REQUIRE(hipLaunchHostFunc(
              stream,
              [](void* flag) {
                while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
              },
              &go) == hipSuccess);
  REQUIRE(hipEventRecord(event, stream) == hipSuccess);
  (void)hipGetLastError();
  CHECK(hipStreamQuery(stream) == hipErrorNotReady);
  CHECK(hipEventQuery(event) == hipErrorNotReady);
  CHECK(hipPeekAtLastError() == hipSuccess);
  // Nor does it replace an earlier failure.
  REQUIRE(fail_invalid_value() == hipErrorInvalidValue);
  CHECK(hipStreamQuery(stream) == hipErrorNotReady);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  go = true;
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipEventQuery(event) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipGetLastError() == hipSuccess);
}

TEST_CASE("last error: each thread has its own") {
  (void)hipGetLastError();
  REQUIRE(fail_invalid_value() == hipErrorInvalidValue);

  hipError_t other_initial = hipErrorUnknown;
  hipError_t other_after_fail = hipErrorUnknown;
  hipError_t other_after_get = hipErrorUnknown;
  std::thread other([&] {
    other_initial = hipPeekAtLastError();  // the main thread's failure is not visible here
    (void)fail_invalid_device();
    other_after_fail = hipGetLastError();
    other_after_get = hipPeekAtLastError();
  });
  other.join();
  CHECK(other_initial == hipSuccess);
  CHECK(other_after_fail == hipErrorInvalidDevice);
  CHECK(other_after_get == hipSuccess);
  // And the other thread's failure and reset did not touch ours.
  CHECK(hipGetLastError() == hipErrorInvalidValue);

  // Many threads at once, each with its own error.
  constexpr int kThreads = 8;
  std::vector<hipError_t> seen(kThreads, hipErrorUnknown);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &seen] {
      for (int i = 0; i < 200; ++i) {
        if (t % 2 == 0) (void)fail_invalid_value();
        else (void)fail_invalid_device();
      }
      seen[static_cast<std::size_t>(t)] = hipGetLastError();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CAPTURE(t);
    CHECK(seen[static_cast<std::size_t>(t)] == (t % 2 == 0 ? hipErrorInvalidValue : hipErrorInvalidDevice));
  }
  CHECK(hipGetLastError() == hipSuccess);
}

TEST_SUITE_END();
