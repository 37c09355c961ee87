// Streams: creation and its refusals, handles that name nothing, priorities, flags, CU masks, query
// and synchronize, callbacks, stream wait/write value with every comparison at both widths,
// null-stream ordering, hipStreamPerThread, async copies and fills, ordering under load, and
// that destroyed streams leave no thread behind.
#include "stream_test_support.hpp"
#include "support/bytes.hpp"
#include "support/random_walk.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>
#include <memory>
#include <numeric>
#include <string>

using namespace stest;
using namespace std::chrono_literals;

namespace {

void* malloc_device(std::size_t bytes) {
  void* ptr = nullptr;
  REQUIRE(hipMalloc(&ptr, bytes) == hipSuccess);
  REQUIRE(ptr != nullptr);
  return ptr;
}

std::vector<unsigned char> read_back(const void* device, std::size_t bytes) {
  std::vector<unsigned char> data(bytes, 0xcd);
  REQUIRE(hipMemcpy(data.data(), device, bytes, hipMemcpyDeviceToHost) == hipSuccess);
  return data;
}

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 131 + seed * 17 + 1) & 0xff);
  return data;
}

void never_called(hipStream_t, hipError_t, void* user_data) { static_cast<std::atomic<int>*>(user_data)->fetch_add(1); }
void never_called_host(void* user_data) { static_cast<std::atomic<int>*>(user_data)->fetch_add(1); }

}  // namespace

TEST_SUITE_BEGIN("streams");

TEST_CASE("hipxxGetStreamEngine says where stream work runs, and why when on host threads") {
  const char* engine = hipxxGetStreamEngine();
  REQUIRE(engine != nullptr);
  const std::string said{engine};
  const char* streams = std::getenv("HIPXX_STREAMS");
  const char* host_queues = std::getenv("HIPXX_HOST_QUEUES");
  const char* backend = hipxxGetBackendName();
  REQUIRE(backend != nullptr);
  if (streams != nullptr && std::string{streams} == "host") {
    CHECK(said == "host threads: HIPXX_STREAMS=host");
  } else if (std::string{backend} == "host") {
    const bool queues = host_queues != nullptr && std::string{host_queues} == "1";
    CHECK(said == (queues ? std::string{"device queues"}
                          : std::string{"host threads: the host backend runs stream work on host threads unless "
                                        "HIPXX_HOST_QUEUES=1"}));
  } else if (std::string{backend} == "rocr") {
    // The stand-in, like every ROCr with the virtual memory API, has hsa_amd_signal_async_handler.
    CHECK(said == "device queues");
  } else {
    CHECK((said == "device queues" || said.starts_with("host threads: ")));
  }
}

// ---------------------------------------------------------------------------------------------
// Creation and destruction

TEST_CASE("every create variant gives a distinct, usable stream that can be destroyed once") {
  LeakCheck leaks;
  std::vector<hipStream_t> streams(6, nullptr);
  CHECK(hipStreamCreate(&streams[0]) == hipSuccess);
  CHECK(hipStreamCreateWithFlags(&streams[1], hipStreamDefault) == hipSuccess);
  CHECK(hipStreamCreateWithFlags(&streams[2], hipStreamNonBlocking) == hipSuccess);
  CHECK(hipStreamCreateWithPriority(&streams[3], hipStreamDefault, 0) == hipSuccess);
  CHECK(hipStreamCreateWithPriority(&streams[4], hipStreamNonBlocking, -1) == hipSuccess);
  const std::uint32_t mask = 0x1;
  CHECK(hipExtStreamCreateWithCUMask(&streams[5], 1, &mask) == hipSuccess);
  for (hipStream_t stream : streams) {
    CHECK(stream != nullptr);
    CHECK(stream != hipStreamLegacy);
    CHECK(stream != hipStreamPerThread);
    CHECK(hipStreamQuery(stream) == hipSuccess);
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
  }
  std::vector<hipStream_t> sorted = streams;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (hipStream_t stream : streams) CHECK(hipStreamDestroy(stream) == hipSuccess);
  for (hipStream_t stream : streams) CHECK(hipStreamDestroy(stream) == hipErrorInvalidHandle);
  // Handles are not reused: a new stream never takes a destroyed stream's name.
  hipStream_t fresh = nullptr;
  REQUIRE(hipStreamCreate(&fresh) == hipSuccess);
  CHECK(std::find(streams.begin(), streams.end(), fresh) == streams.end());
  CHECK(hipStreamDestroy(fresh) == hipSuccess);
}

TEST_CASE("bad flags and null out pointers are refused with hipErrorInvalidValue") {
  LeakCheck leaks;
  const hipStream_t sentinel = reinterpret_cast<hipStream_t>(std::uintptr_t{0xdead0});
  for (const unsigned flags : {0x2U, 0x4U, 0x3U, 0x80000000U, 0xFFFFFFFFU}) {
    CAPTURE(flags);
    hipStream_t stream = sentinel;
    CHECK(hipStreamCreateWithFlags(&stream, flags) == hipErrorInvalidValue);
    CHECK(stream == sentinel);
    CHECK(hipStreamCreateWithPriority(&stream, flags, 0) == hipErrorInvalidValue);
    CHECK(stream == sentinel);
  }
  CHECK(hipStreamCreate(nullptr) == hipErrorInvalidValue);
  CHECK(hipStreamCreateWithFlags(nullptr, hipStreamDefault) == hipErrorInvalidValue);
  CHECK(hipStreamCreateWithFlags(nullptr, hipStreamNonBlocking) == hipErrorInvalidValue);
  CHECK(hipStreamCreateWithPriority(nullptr, hipStreamDefault, 0) == hipErrorInvalidValue);
  const std::uint32_t mask = 0x1;
  CHECK(hipExtStreamCreateWithCUMask(nullptr, 1, &mask) == hipErrorInvalidValue);
  hipStream_t stream = sentinel;
  CHECK(hipExtStreamCreateWithCUMask(&stream, 0, &mask) == hipErrorInvalidValue);
  CHECK(hipExtStreamCreateWithCUMask(&stream, 1, nullptr) == hipErrorInvalidValue);
  CHECK(stream == sentinel);
  // hipGetLastError remembers the refusal and then clears.
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipSuccess);
}

// hipErrorInvalidHandle where a call documents it; hipErrorInvalidValue from the calls whose
// documentation lists that code and not hipErrorInvalidHandle (stream wait and write value, the
// stream-ordered allocator, prefetch and attach).
TEST_CASE("destroyed and forged handles are refused by every stream call, with the code each documents") {
  // The device's default pool reserves its range at its first allocation and keeps it.
  hipMemPool_t pool = nullptr;
  REQUIRE(hipDeviceGetDefaultMemPool(&pool, 0) == hipSuccess);
  void* pooled = nullptr;
  REQUIRE(hipMallocAsync(&pooled, 256, nullptr) == hipSuccess);
  REQUIRE(hipFreeAsync(pooled, nullptr) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  REQUIRE(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  LeakCheck leaks;
  REQUIRE(hipMallocAsync(&pooled, 256, nullptr) == hipSuccess);
  hipStream_t destroyed = make_stream();
  REQUIRE(hipStreamDestroy(destroyed) == hipSuccess);
  int on_stack = 0;
  const std::vector<hipStream_t> bad = {
      destroyed,
      reinterpret_cast<hipStream_t>(std::uintptr_t{3}),
      reinterpret_cast<hipStream_t>(std::uintptr_t{0x1234}),
      reinterpret_cast<hipStream_t>(&on_stack),
      reinterpret_cast<hipStream_t>(reinterpret_cast<std::uintptr_t>(destroyed) + 1),
  };
  void* device = malloc_device(4096);
  void* word = nullptr;
  REQUIRE(hipExtMallocWithFlags(&word, 8, hipMallocSignalMemory) == hipSuccess);
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreate(&event) == hipSuccess);
  std::vector<unsigned char> host(64);
  std::atomic<int> calls{0};
  void* managed = nullptr;
  REQUIRE(hipMallocManaged(&managed, 4096) == hipSuccess);
  int last_prefetch = 0;
  REQUIRE(hipMemRangeGetAttribute(&last_prefetch, sizeof last_prefetch, hipMemRangeAttributeLastPrefetchLocation,
                                  managed, 4096) == hipSuccess);
  for (hipStream_t stream : bad) {
    CAPTURE(reinterpret_cast<std::uintptr_t>(stream));
    unsigned flags = 77;
    int priority = 77;
    std::uint32_t mask[2] = {7, 7};
    void* ptr = nullptr;
    CHECK(hipStreamDestroy(stream) == hipErrorInvalidHandle);
    CHECK(hipStreamQuery(stream) == hipErrorInvalidHandle);
    CHECK(hipStreamSynchronize(stream) == hipErrorInvalidHandle);
    CHECK(hipStreamGetFlags(stream, &flags) == hipErrorInvalidHandle);
    CHECK(hipStreamGetPriority(stream, &priority) == hipErrorInvalidHandle);
    CHECK(hipExtStreamGetCUMask(stream, 2, mask) == hipErrorInvalidHandle);
    CHECK(hipStreamWaitEvent(stream, event, 0) == hipErrorInvalidHandle);
    CHECK(hipStreamAddCallback(stream, never_called, &calls, 0) == hipErrorInvalidHandle);
    CHECK(hipLaunchHostFunc(stream, never_called_host, &calls) == hipErrorInvalidHandle);
    CHECK(hipStreamWaitValue32(stream, word, 0, hipStreamWaitValueGte, 0xFFFFFFFFU) == hipErrorInvalidValue);
    CHECK(hipStreamWaitValue64(stream, word, 0, hipStreamWaitValueGte, ~std::uint64_t{0}) == hipErrorInvalidValue);
    CHECK(hipStreamWriteValue32(stream, word, 1, 0) == hipErrorInvalidValue);
    CHECK(hipStreamWriteValue64(stream, word, 1, 0) == hipErrorInvalidValue);
    CHECK(hipMemcpyAsync(device, host.data(), 64, hipMemcpyHostToDevice, stream) == hipErrorInvalidHandle);
    CHECK(hipMemsetAsync(device, 1, 64, stream) == hipErrorInvalidHandle);
    CHECK(hipEventRecord(event, stream) == hipErrorInvalidHandle);
    CHECK(hipMallocAsync(&ptr, 256, stream) == hipErrorInvalidValue);
    CHECK(ptr == nullptr);
    CHECK(hipMallocFromPoolAsync(&ptr, 256, pool, stream) == hipErrorInvalidValue);
    CHECK(ptr == nullptr);
    CHECK(hipFreeAsync(pooled, stream) == hipErrorInvalidValue);
    CHECK(hipMemPrefetchAsync(managed, 4096, 0, stream) == hipErrorInvalidValue);
    CHECK(hipStreamAttachMemAsync(stream, managed, 0, hipMemAttachGlobal) == hipErrorInvalidValue);
    CHECK(flags == 77);
    CHECK(priority == 77);
    CHECK(mask[0] == 7);
  }
  // Nothing refused ran: the memory is untouched and no callback fired.
  CHECK(read_back(word, 8) == std::vector<unsigned char>(8, 0));
  CHECK(calls.load() == 0);
  CHECK(hipEventQuery(event) == hipSuccess);  // never recorded
  int still = 1;
  CHECK(hipMemRangeGetAttribute(&still, sizeof still, hipMemRangeAttributeLastPrefetchLocation, managed, 4096) ==
        hipSuccess);
  CHECK(still == last_prefetch);
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipFreeAsync(pooled, nullptr) == hipSuccess);  // still allocated: no refused free took it
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
  CHECK(hipFree(managed) == hipSuccess);
  CHECK(hipFree(word) == hipSuccess);
  CHECK(hipFree(device) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Priorities, flags, CU masks

TEST_CASE("priorities clamp into hipDeviceGetStreamPriorityRange and round-trip") {
  LeakCheck leaks;
  int least = 99;
  int greatest = 99;
  REQUIRE(hipDeviceGetStreamPriorityRange(&least, &greatest) == hipSuccess);
  CHECK(least == 1);
  CHECK(greatest == -1);
  // Either output may be left out.
  int only = 99;
  CHECK(hipDeviceGetStreamPriorityRange(&only, nullptr) == hipSuccess);
  CHECK(only == least);
  CHECK(hipDeviceGetStreamPriorityRange(nullptr, &only) == hipSuccess);
  CHECK(only == greatest);

  for (const int requested : {INT_MIN, -100, -2, -1, 0, 1, 2, 100, INT_MAX}) {
    for (const unsigned flags : {unsigned{hipStreamDefault}, unsigned{hipStreamNonBlocking}}) {
      CAPTURE(requested);
      CAPTURE(flags);
      hipStream_t stream = nullptr;
      REQUIRE(hipStreamCreateWithPriority(&stream, flags, requested) == hipSuccess);
      int priority = 77;
      CHECK(hipStreamGetPriority(stream, &priority) == hipSuccess);
      CHECK(priority == std::clamp(requested, greatest, least));
      unsigned got_flags = 77;
      CHECK(hipStreamGetFlags(stream, &got_flags) == hipSuccess);
      CHECK(got_flags == flags);
      CHECK(hipStreamDestroy(stream) == hipSuccess);
    }
  }
  // Streams made without a priority have the normal one, inside the range.
  hipStream_t plain = make_stream();
  int priority = 77;
  CHECK(hipStreamGetPriority(plain, &priority) == hipSuccess);
  CHECK(priority == 0);
  CHECK(hipStreamGetPriority(plain, nullptr) == hipErrorInvalidValue);
  CHECK(hipStreamDestroy(plain) == hipSuccess);
  for (hipStream_t special : {hipStream_t{nullptr}, hipStreamLegacy, hipStreamPerThread}) {
    priority = 77;
    CHECK(hipStreamGetPriority(special, &priority) == hipSuccess);
    CHECK(priority >= greatest);
    CHECK(priority <= least);
  }
}

TEST_CASE("hipStreamGetFlags round-trips the creation flags") {
  LeakCheck leaks;
  hipStream_t blocking = make_stream(hipStreamDefault);
  hipStream_t nonblocking = make_stream(hipStreamNonBlocking);
  hipStream_t created = nullptr;
  REQUIRE(hipStreamCreate(&created) == hipSuccess);
  unsigned flags = 77;
  CHECK(hipStreamGetFlags(blocking, &flags) == hipSuccess);
  CHECK(flags == hipStreamDefault);
  CHECK(hipStreamGetFlags(nonblocking, &flags) == hipSuccess);
  CHECK(flags == hipStreamNonBlocking);
  CHECK(hipStreamGetFlags(created, &flags) == hipSuccess);
  CHECK(flags == hipStreamDefault);
  for (hipStream_t special : {hipStream_t{nullptr}, hipStreamLegacy, hipStreamPerThread}) {
    flags = 77;
    CHECK(hipStreamGetFlags(special, &flags) == hipSuccess);
    CHECK(flags == hipStreamDefault);
  }
  CHECK(hipStreamGetFlags(blocking, nullptr) == hipErrorInvalidValue);
  for (hipStream_t stream : {blocking, nonblocking, created}) CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("CU masks: create/get round trip, the default mask, and refusals") {
  LeakCheck leaks;
  int units = 0;
  REQUIRE(hipDeviceGetAttribute(&units, hipDeviceAttributeMultiprocessorCount, 0) == hipSuccess);
  REQUIRE(units >= 1);
  // A mask that names only compute units the device has.
  const std::uint32_t one = units >= 32 ? 0x80000001U : (units == 1 ? 0x1U : 0x2U);
  hipStream_t masked = nullptr;
  REQUIRE(hipExtStreamCreateWithCUMask(&masked, 1, &one) == hipSuccess);
  std::uint32_t got[4] = {0xAAAAAAAA, 0xAAAAAAAA, 0xAAAAAAAA, 0xAAAAAAAA};
  CHECK(hipExtStreamGetCUMask(masked, 1, got) == hipSuccess);
  CHECK(got[0] == one);
  CHECK(got[1] == 0xAAAAAAAA);  // only cuMaskSize words are written
  // The stream works like any other and has the default flags and priority.
  unsigned flags = 77;
  CHECK(hipStreamGetFlags(masked, &flags) == hipSuccess);
  CHECK(flags == hipStreamDefault);
  CHECK(hipMemsetAsync(nullptr, 0, 0, masked) == hipSuccess);
  CHECK(hipStreamSynchronize(masked) == hipSuccess);

  // A stream made without a mask reports every compute unit of its device.
  hipStream_t plain = make_stream();
  std::uint32_t all[4] = {};
  CHECK(hipExtStreamGetCUMask(plain, 4, all) == hipSuccess);
  int bits = 0;
  for (std::uint32_t word : all) bits += __builtin_popcount(word);
  CHECK(bits == std::min(units, 128));
  CHECK((all[0] & 1U) == 1U);

  // Words and bits past the device's compute units are ignored: what comes back is what is in effect.
  const std::array<std::uint32_t, 5> beyond{0xFFFFFFFFU, 0xFFFFFFFFU, 0xFFFFFFFFU, 0xFFFFFFFFU, 0xFFFFFFFFU};
  hipStream_t wide = nullptr;
  REQUIRE(hipExtStreamCreateWithCUMask(&wide, static_cast<std::uint32_t>(beyond.size()), beyond.data()) == hipSuccess);
  std::uint32_t in_effect[5] = {};
  CHECK(hipExtStreamGetCUMask(wide, 5, in_effect) == hipSuccess);
  int effective_bits = 0;
  for (std::uint32_t word : in_effect) effective_bits += __builtin_popcount(word);
  CHECK(effective_bits == std::min(units, 160));
  CHECK(hipStreamSynchronize(wide) == hipSuccess);
  CHECK(hipStreamDestroy(wide) == hipSuccess);

  // Refusals.
  CHECK(hipExtStreamGetCUMask(masked, 0, got) == hipErrorInvalidValue);
  CHECK(hipExtStreamGetCUMask(masked, 1, nullptr) == hipErrorInvalidValue);
  CHECK(hipStreamDestroy(masked) == hipSuccess);
  CHECK(hipExtStreamGetCUMask(masked, 1, got) == hipErrorInvalidHandle);
  CHECK(hipStreamDestroy(plain) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Query and synchronize

TEST_CASE("hipStreamQuery is NotReady while work is pending and hipSuccess once it ran") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t stream = make_stream();
  hipStream_t other = make_stream(hipStreamNonBlocking);
  CHECK(hipStreamQuery(stream) == hipSuccess);  // a new stream is idle
  gate.block(stream);
  std::atomic<bool> ran{false};
  add_flag_callback(stream, &ran);
  CHECK(hipStreamQuery(stream) == hipErrorNotReady);
  CHECK(still_pending(stream));
  CHECK_FALSE(ran.load());
  CHECK(hipStreamQuery(other) == hipSuccess);  // another stream is unaffected
  // Released by a write from another stream.
  REQUIRE(hipStreamWriteValue32(other, gate.word(), 1, 0) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(ran.load());
  CHECK(hipStreamQuery(stream) == hipSuccess);
  gate.open();
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
}

TEST_CASE("work nothing waited for: once it is done, the first hipStreamQuery says so") {
  // On a device queue such work is not marked in the stream's progress until something waits;
  // a query must still not report a finished stream as busy. Nothing else may look at the stream
  // before the query (a synchronous copy would), so the work is given time instead; a round whose
  // work was not done by then is tried again with more time.
  LeakCheck leaks;
  constexpr std::size_t kBytes = 4096;
  void* buffer = malloc_device(kBytes);
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  bool first_query_said_done = false;
  unsigned char value = 0;
  for (const auto settle : {50ms, 250ms, 1000ms}) {
    ++value;
    REQUIRE(hipMemsetAsync(buffer, value, kBytes, stream) == hipSuccess);
    std::this_thread::sleep_for(settle);
    first_query_said_done = hipStreamQuery(stream) == hipSuccess;
    if (first_query_said_done) break;
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  }
  CHECK(first_query_said_done);
  CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, value));
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("a stream gated on a wait value is released by a host hipMemcpy") {
  LeakCheck leaks;
  Gate gate;
  // Non-blocking, so the synchronous copy (null-stream order) does not wait for the gated stream.
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  gate.block(stream);
  std::atomic<bool> ran{false};
  add_flag_callback(stream, &ran);
  CHECK(still_pending(stream));
  const std::uint32_t one = 1;
  REQUIRE(hipMemcpy(gate.word(), &one, sizeof one, hipMemcpyHostToDevice) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(ran.load());
  CHECK(hipStreamQuery(stream) == hipSuccess);
  gate.open();
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipStreamSynchronize blocks until the released work has run") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  gate.block(stream);
  std::atomic<bool> ran{false};
  add_flag_callback(stream, &ran);
  const auto start = std::chrono::steady_clock::now();
  std::thread opener = gate.open_later(100ms);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(ran.load());
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  opener.join();
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Callbacks

TEST_CASE("callbacks run exactly once each, in order, with the stream handle and hipSuccess") {
  LeakCheck leaks;
  for (const unsigned flags : {unsigned{hipStreamDefault}, unsigned{hipStreamNonBlocking}}) {
    CAPTURE(flags);
    hipStream_t stream = make_stream(flags);
    CallbackLog log;
    constexpr int kCount = 200;
    std::vector<CallbackTicket> tickets;
    tickets.reserve(kCount);
    for (int i = 0; i < kCount; ++i) tickets.push_back({&log, i});
    for (int i = 0; i < kCount; ++i)
      REQUIRE(hipStreamAddCallback(stream, record_callback, &tickets[i], 0) == hipSuccess);
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    std::vector<int> expected(kCount);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(log.tags() == expected);
    for (const CallbackLog::Entry& entry : log.entries) {
      CHECK(entry.stream == stream);
      CHECK(entry.status == hipSuccess);
    }
    // Nothing runs twice later.
    std::this_thread::sleep_for(10ms);
    CHECK(log.size() == kCount);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
}

TEST_CASE("callbacks on the null stream, hipStreamLegacy and hipStreamPerThread receive that handle") {
  LeakCheck leaks;
  CallbackLog log;
  CallbackTicket tickets[3] = {{&log, 0}, {&log, 1}, {&log, 2}};
  REQUIRE(hipStreamAddCallback(nullptr, record_callback, &tickets[0], 0) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  REQUIRE(hipStreamAddCallback(hipStreamLegacy, record_callback, &tickets[1], 0) == hipSuccess);
  REQUIRE(hipStreamSynchronize(hipStreamLegacy) == hipSuccess);
  REQUIRE(hipStreamAddCallback(hipStreamPerThread, record_callback, &tickets[2], 0) == hipSuccess);
  REQUIRE(hipStreamSynchronize(hipStreamPerThread) == hipSuccess);
  REQUIRE(log.size() == 3);
  CHECK(log.entries[0].stream == nullptr);
  CHECK(log.entries[1].stream == hipStreamLegacy);
  CHECK(log.entries[2].stream == hipStreamPerThread);
  for (const CallbackLog::Entry& entry : log.entries) CHECK(entry.status == hipSuccess);
}

namespace {

// A host function's record: its tag, in the shared log of a stream's host work.
struct HostFunctionTicket {
  CallbackLog* log;
  int tag;
};

void record_host_function(void* user_data) {
  auto* ticket = static_cast<HostFunctionTicket*>(user_data);
  std::lock_guard lock{ticket->log->mutex};
  ticket->log->entries.push_back({nullptr, hipSuccess, ticket->tag});
}

}  // namespace

TEST_CASE("hipLaunchHostFunc: once each, in stream order among callbacks and copies, on every kind of stream") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 1 << 16;
  void* device = malloc_device(kBytes);
  const std::vector<unsigned char> sent = pattern(kBytes, 9);
  hipStream_t created = make_stream(hipStreamNonBlocking);
  for (hipStream_t stream : {created, hipStream_t{nullptr}, hipStreamLegacy, hipStreamPerThread}) {
    CAPTURE(reinterpret_cast<std::uintptr_t>(stream));
    CallbackLog log;
    HostFunctionTicket first{&log, 0};
    CallbackTicket middle{&log, 1};
    HostFunctionTicket last{&log, 2};
    std::vector<unsigned char> back(kBytes);
    REQUIRE(hipMemsetAsync(device, 0, kBytes, stream) == hipSuccess);
    REQUIRE(hipLaunchHostFunc(stream, record_host_function, &first) == hipSuccess);
    REQUIRE(hipMemcpyAsync(device, sent.data(), kBytes, hipMemcpyHostToDevice, stream) == hipSuccess);
    REQUIRE(hipStreamAddCallback(stream, record_callback, &middle, 0) == hipSuccess);
    REQUIRE(hipMemcpyAsync(back.data(), device, kBytes, hipMemcpyDeviceToHost, stream) == hipSuccess);
    REQUIRE(hipLaunchHostFunc(stream, record_host_function, &last) == hipSuccess);
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(log.tags() == std::vector<int>{0, 1, 2});
    CHECK(back == sent);  // the last host function came after the copy back had finished
    std::this_thread::sleep_for(10ms);
    CHECK(log.size() == 3);  // nothing ran twice
  }
  CHECK(hipStreamDestroy(created) == hipSuccess);
  CHECK(hipFree(device) == hipSuccess);
}

TEST_CASE("hipLaunchHostFunc holds later work until it returns, and refuses a null function") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 4096;
  void* buffer = malloc_device(kBytes);
  REQUIRE(hipMemset(buffer, 0, kBytes) == hipSuccess);
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  HeldCallback held;
  // A host function has no stream or status to receive: held_callback's state through a wrapper.
  const hipHostFn_t hold = [](void* user_data) { held_callback(nullptr, hipSuccess, user_data); };
  REQUIRE(hipLaunchHostFunc(stream, hold, &held) == hipSuccess);
  REQUIRE(hipMemsetAsync(buffer, 0x6B, kBytes, stream) == hipSuccess);
  REQUIRE(held.entered_within(5s));
  std::this_thread::sleep_for(kSettle);
  CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0));
  CHECK(hipStreamQuery(stream) == hipErrorNotReady);
  held.let_go();
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0x6B));

  std::atomic<int> calls{0};
  CHECK(hipLaunchHostFunc(stream, nullptr, &calls) == hipErrorInvalidValue);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(calls.load() == 0);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("hipStreamAddCallback refuses a null callback and non-zero flags") {
  LeakCheck leaks;
  hipStream_t stream = make_stream();
  std::atomic<int> calls{0};
  CHECK(hipStreamAddCallback(stream, nullptr, nullptr, 0) == hipErrorInvalidValue);
  CHECK(hipStreamAddCallback(stream, never_called, &calls, 1) == hipErrorInvalidValue);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(calls.load() == 0);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

namespace {

struct SleepyCallback {
  std::atomic<bool> done{false};
  void* buffer = nullptr;
  std::atomic<int> byte_seen{-1};
};

void sleepy_callback(hipStream_t, hipError_t, void* user_data) {
  auto* sleepy = static_cast<SleepyCallback*>(user_data);
  std::this_thread::sleep_for(150ms);
  sleepy->done = true;
}

}  // namespace

TEST_CASE("a callback blocks later work on its stream until it returns") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 4096;
  void* buffer = malloc_device(kBytes);
  REQUIRE(hipMemset(buffer, 0, kBytes) == hipSuccess);
  // Non-blocking, so the main thread's hipMemcpy reads do not wait for this stream.
  hipStream_t stream = make_stream(hipStreamNonBlocking);

  SUBCASE("held until the test lets it go") {
    HeldCallback held;
    REQUIRE(hipStreamAddCallback(stream, held_callback, &held, 0) == hipSuccess);
    REQUIRE(hipMemsetAsync(buffer, 0x7F, kBytes, stream) == hipSuccess);
    REQUIRE(held.entered_within(5s));
    CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0));
    std::this_thread::sleep_for(kSettle);
    CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0));
    CHECK(hipStreamQuery(stream) == hipErrorNotReady);
    held.let_go();
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0x7F));
  }

  SUBCASE("the last work queued: the stream is busy while it runs and idle once it returned") {
    // With a device queue the callback marks its own place in the stream: nothing after it does.
    HeldCallback held;
    REQUIRE(hipStreamAddCallback(stream, held_callback, &held, 0) == hipSuccess);
    REQUIRE(held.entered_within(5s));
    std::this_thread::sleep_for(kSettle);
    CHECK(hipStreamQuery(stream) == hipErrorNotReady);
    held.let_go();
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipStreamQuery(stream) == hipSuccess);
  }

  SUBCASE("a sleeping callback: the memset after it has not happened while it sleeps") {
    SleepyCallback sleepy;
    REQUIRE(hipStreamAddCallback(stream, sleepy_callback, &sleepy, 0) == hipSuccess);
    REQUIRE(hipMemsetAsync(buffer, 0x3C, kBytes, stream) == hipSuccess);
    std::atomic<bool> after{false};
    add_flag_callback(stream, &after);
    std::this_thread::sleep_for(50ms);
    CHECK_FALSE(sleepy.done.load());
    CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0));
    CHECK_FALSE(after.load());
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(sleepy.done.load());
    CHECK(after.load());
    CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0x3C));
  }

  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("thousands of operations queued behind a held callback all run, in order, once it returns") {
  LeakCheck leaks;
  // Fill i sets slot i % kSlots to i's low byte: a slot ends holding the last fill queued for it
  // only where every fill ran, in the order queued.
  constexpr int kFills = 5000;
  constexpr std::size_t kSlots = 64;
  constexpr std::size_t kSlotBytes = 64;
  void* buffer = malloc_device(kSlots * kSlotBytes);
  REQUIRE(hipMemset(buffer, 0, kSlots * kSlotBytes) == hipSuccess);
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  HeldCallback held;
  REQUIRE(hipStreamAddCallback(stream, held_callback, &held, 0) == hipSuccess);
  REQUIRE(held.entered_within(5s));

  std::atomic<int> queued{0};
  std::atomic<int> refused{0};
  std::thread producer([&] {
    for (int i = 0; i < kFills; ++i) {
      auto* const slot = static_cast<unsigned char*>(buffer) + (static_cast<std::size_t>(i) % kSlots) * kSlotBytes;
      if (hipMemsetAsync(slot, i & 0xFF, kSlotBytes, stream) != hipSuccess) refused.fetch_add(1);
      queued.fetch_add(1);
    }
  });
  const int queued_while_held = count_once_stalled(queued, kFills);
  // Each operation on a ROCr queue holds signals (kernel resources), the CUDA driver takes about a
  // thousand per stream, and a stream's own thread keeps a bounded list too: the thread that
  // queues them is held back once a bounded number wait.
  CHECK(queued_while_held > 0);
  CHECK(queued_while_held < kFills);
  // Only the thread that fills the stream waits: the runtime's other calls go on meanwhile.
  CHECK(read_back(buffer, kSlots * kSlotBytes) == std::vector<unsigned char>(kSlots * kSlotBytes, 0));
  hipStream_t other = make_stream(hipStreamNonBlocking);
  CHECK(hipMemsetAsync(buffer, 0, 1, other) == hipSuccess);
  CHECK(hipStreamSynchronize(other) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
  held.let_go();
  producer.join();
  CHECK(refused.load() == 0);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  std::vector<unsigned char> expected(kSlots * kSlotBytes);
  for (std::size_t slot = 0; slot < kSlots; ++slot) {
    const std::size_t last = slot + ((kFills - 1 - slot) / kSlots) * kSlots;
    std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(slot * kSlotBytes), kSlotBytes,
                static_cast<unsigned char>(last & 0xFF));
  }
  CHECK(read_back(buffer, kSlots * kSlotBytes) == expected);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

namespace {

// A host function that queues kFills fills on its own stream, each setting slot i % kSlots to i's
// low byte, more than a stream keeps waiting before it holds a producer back.
struct SelfFeeding {
  static constexpr int kFills = 3000;
  static constexpr std::size_t kSlots = 16;
  void* buffer = nullptr;
  hipStream_t stream = nullptr;
  std::atomic<int> refused{0};
  std::atomic<bool> returned{false};

  static void run(void* user_data) {
    auto* self = static_cast<SelfFeeding*>(user_data);
    for (int i = 0; i < kFills; ++i) {
      void* const slot = static_cast<unsigned char*>(self->buffer) + static_cast<std::size_t>(i) % kSlots;
      if (hipMemsetAsync(slot, i & 0xFF, 1, self->stream) != hipSuccess) self->refused.fetch_add(1);
    }
    self->returned.store(true);
  }
};

}  // namespace

// A HIP callback may not call the runtime on a GPU; the host backend runs it on the stream's own
// thread, which must never wait for room behind the work it is running.
TEST_CASE("a stream's own thread queues past the bound without waiting for itself" * doctest::test_suite("host-only")) {
  LeakCheck leaks;
  SelfFeeding feeding;
  feeding.buffer = malloc_device(SelfFeeding::kSlots);
  feeding.stream = make_stream(hipStreamNonBlocking);
  REQUIRE(hipLaunchHostFunc(feeding.stream, SelfFeeding::run, &feeding) == hipSuccess);
  REQUIRE(eventually([&] { return feeding.returned.load(); }, 20000ms));
  CHECK(feeding.refused.load() == 0);
  CHECK(hipStreamSynchronize(feeding.stream) == hipSuccess);
  std::vector<unsigned char> expected(SelfFeeding::kSlots);
  for (std::size_t slot = 0; slot < SelfFeeding::kSlots; ++slot) {
    expected[slot] = static_cast<unsigned char>(
        (slot + ((SelfFeeding::kFills - 1 - slot) / SelfFeeding::kSlots) * SelfFeeding::kSlots) & 0xFF);
  }
  CHECK(read_back(feeding.buffer, SelfFeeding::kSlots) == expected);
  CHECK(hipStreamDestroy(feeding.stream) == hipSuccess);
  CHECK(hipFree(feeding.buffer) == hipSuccess);
}

TEST_CASE("thousands of event waits queued on a held stream all pass once it returns; others go on meanwhile") {
  LeakCheck leaks;
  constexpr int kWaits = 3000;
  void* buffer = malloc_device(64);  // hipFree waits for every stream: freed once they are let go
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  hipStream_t recorder = make_stream(hipStreamNonBlocking);
  HeldCallback held;
  REQUIRE(hipStreamAddCallback(stream, held_callback, &held, 0) == hipSuccess);
  REQUIRE(held.entered_within(5s));
  // An event the waits cannot pass yet: recorded behind a callback that holds its stream too (one
  // that may not even start while the first holds the thread callbacks run on).
  HeldCallback recorder_held;
  REQUIRE(hipStreamAddCallback(recorder, held_callback, &recorder_held, 0) == hipSuccess);
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreateWithFlags(&event, hipEventDisableTiming) == hipSuccess);
  REQUIRE(hipEventRecord(event, recorder) == hipSuccess);

  std::atomic<int> waits{0};
  std::atomic<int> refused{0};
  std::thread waiter([&] {
    for (int i = 0; i < kWaits; ++i) {
      if (hipStreamWaitEvent(stream, event, 0) != hipSuccess) refused.fetch_add(1);
      waits.fetch_add(1);
    }
  });
  const int waits_while_held = count_once_stalled(waits, kWaits);
  // Each wait is an operation on the stream like any other: bounded too.
  CHECK(waits_while_held > 0);
  CHECK(waits_while_held < kWaits);
  CHECK(hipEventQuery(event) == hipErrorNotReady);
  CHECK(hipStreamQuery(recorder) == hipErrorNotReady);
  CHECK(hipMemset(buffer, 0x5A, 64) == hipSuccess);
  CHECK(read_back(buffer, 64) == std::vector<unsigned char>(64, 0x5A));
  recorder_held.let_go();
  held.let_go();
  waiter.join();
  CHECK(refused.load() == 0);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipEventQuery(event) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipStreamDestroy(recorder) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Stream wait value / write value

namespace {

struct WaitCase {
  const char* name;
  bool wide;  // 64-bit
  unsigned flags;
  std::uint64_t value;
  std::uint64_t mask;
  std::uint64_t initial;  // must block
  std::vector<std::uint64_t> still_held;  // writes that must not release the wait
  std::uint64_t release;  // the write that releases it
};

// The documented conditions (with `mask` applied to *ptr, and for Nor to value too):
//   Gte: (*ptr & mask) >= value        Eq:  (*ptr & mask) == value
//   And: ((*ptr & mask) & value) != 0  Nor: ~((*ptr & mask) | (value & mask)) != 0, at the word width
const std::vector<WaitCase>& wait_cases() {
  // A case a row (two for the long ones), kept as a table reads.
  // clang-format off
  static const std::vector<WaitCase> cases = {
      {"Gte32 masked", false, hipStreamWaitValueGte, 0x10, 0xFF, 0x1200, {0xFF0F, 0xFFFFFF00}, 0x1210},
      {"Gte32 full", false, hipStreamWaitValueGte, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, {0x00000001}, 0xFFFFFFFF},
      {"Eq32 masked", false, hipStreamWaitValueEq, 0x050, 0x0FF0, 0x0A0, {0x060, 0x1040, 0x0F0}, 0xFFFFF05F},
      {"And32 masked", false, hipStreamWaitValueAnd, 0x30, 0xF0, 0x0F, {0x4F, 0xFFFFFF0F, 0x80}, 0x1F},
      {"Nor32 full mask", false, hipStreamWaitValueNor, 0xFFFF0000, 0xFFFFFFFF, 0x0000FFFF, {0x0001FFFF, 0x8000FFFF},
       0x0000FFFE},
      {"Gte64 masked high", true, hipStreamWaitValueGte, 0x0001000000000000ULL, 0xFFFF000000000000ULL,
       0x0000FFFFFFFFFFFFULL, {0x0000000000000001ULL, 0x00007FFFFFFFFFFFULL}, 0x0001000000000000ULL},
      {"Gte64 full", true, hipStreamWaitValueGte, 0x100000000ULL, ~0ULL, 0xFFFFFFFFULL, {0xFFFFFFFEULL},
       0x100000000ULL},
      {"Eq64 masked", true, hipStreamWaitValueEq, 0x1200000000000034ULL, 0xFF000000000000FFULL, 0,
       {0x1300000000000034ULL, 0x0000000000000034ULL, 0x12FFFFFFFFFFFF00ULL}, 0x12ABCDEF01234534ULL},
      {"And64 masked high", true, hipStreamWaitValueAnd, 0x8000000000000000ULL, 0xF000000000000000ULL,
       0x7FFFFFFFFFFFFFFFULL, {0x4000000000000000ULL, 0x0FFFFFFFFFFFFFFFULL}, 0x8000000000000000ULL},
      {"Nor64 full mask", true, hipStreamWaitValueNor, 0xFFFFFFFF00000000ULL, ~0ULL, 0x00000000FFFFFFFFULL,
       {0x80000000FFFFFFFFULL, 0x00000001FFFFFFFFULL}, 0x00000000FFFFFFFEULL},
      {"Nor64 low mask", true, hipStreamWaitValueNor, 0xFFFFFFFF00000000ULL, 0x00000000FFFFFFFFULL, 0, {}, 0},
  };
  // clang-format on
  return cases;
}

hipError_t wait_on(hipStream_t stream, void* word, const WaitCase& c) {
  return c.wide ? hipStreamWaitValue64(stream, word, c.value, c.flags, c.mask)
                : hipStreamWaitValue32(stream, word, static_cast<std::uint32_t>(c.value), c.flags,
                                       static_cast<std::uint32_t>(c.mask));
}

hipError_t write_to(hipStream_t stream, void* word, bool wide, std::uint64_t value) {
  return wide ? hipStreamWriteValue64(stream, word, value, 0)
              : hipStreamWriteValue32(stream, word, static_cast<std::uint32_t>(value), 0);
}

}  // namespace

TEST_CASE("stream wait value: Gte/Eq/And/Nor with masks, 32 and 64 bit, block and release as documented") {
  LeakCheck leaks;
  void* word = nullptr;
  REQUIRE(hipExtMallocWithFlags(&word, 16, hipMallocSignalMemory) == hipSuccess);
  hipStream_t writer = make_stream(hipStreamNonBlocking);
  for (const WaitCase& c : wait_cases()) {
    CAPTURE(std::string{c.name});
    REQUIRE(hipMemset(word, 0, 16) == hipSuccess);
    REQUIRE(hipMemcpy(word, &c.initial, c.wide ? 8 : 4, hipMemcpyHostToDevice) == hipSuccess);
    hipStream_t stream = make_stream(hipStreamNonBlocking);
    REQUIRE(wait_on(stream, word, c) == hipSuccess);
    std::atomic<bool> passed{false};
    add_flag_callback(stream, &passed);
    if (c.still_held.empty() && c.release == 0 && c.initial == 0) {
      // Nor with a mask narrower than the word: the complement always has bits set.
      CHECK(hipStreamSynchronize(stream) == hipSuccess);
      CHECK(passed.load());
    } else {
      CHECK(still_pending(stream));
      CHECK_FALSE(passed.load());
      for (const std::uint64_t held : c.still_held) {
        CAPTURE(held);
        REQUIRE(write_to(writer, word, c.wide, held) == hipSuccess);
        REQUIRE(hipStreamSynchronize(writer) == hipSuccess);
        CHECK(still_pending(stream));
        CHECK_FALSE(passed.load());
      }
      REQUIRE(write_to(writer, word, c.wide, c.release) == hipSuccess);
      REQUIRE(hipStreamSynchronize(writer) == hipSuccess);
      CHECK(hipStreamSynchronize(stream) == hipSuccess);
      CHECK(passed.load());
      // Once it holds, a later wait with the same condition passes at once.
      REQUIRE(wait_on(stream, word, c) == hipSuccess);
      CHECK(hipStreamSynchronize(stream) == hipSuccess);
      if (hipStreamQuery(stream) == hipErrorNotReady) {
        // Not expected; release so the test can finish.
        REQUIRE(write_to(writer, word, c.wide, c.release) == hipSuccess);
      }
    }
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
  CHECK(hipStreamDestroy(writer) == hipSuccess);
  CHECK(hipFree(word) == hipSuccess);
}

TEST_CASE("stream wait value: conditions that already hold pass at once, and the default masks are full") {
  LeakCheck leaks;
  void* word = nullptr;
  REQUIRE(hipExtMallocWithFlags(&word, 8, hipMallocSignalMemory) == hipSuccess);
  const std::uint64_t initial = 0x00000005FFFFFFF0ULL;
  REQUIRE(hipMemcpy(word, &initial, 8, hipMemcpyHostToDevice) == hipSuccess);
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  // Default mask arguments (C++ only): every bit.
  CHECK(hipStreamWaitValue32(stream, word, 0xFFFFFFF0U, hipStreamWaitValueEq) == hipSuccess);
  CHECK(hipStreamWaitValue64(stream, word, initial, hipStreamWaitValueEq) == hipSuccess);
  CHECK(hipStreamWaitValue32(stream, word, 0xFFFFFFF0U, hipStreamWaitValueGte) == hipSuccess);
  CHECK(hipStreamWaitValue64(stream, word, 0x500000000ULL, hipStreamWaitValueGte) == hipSuccess);
  CHECK(hipStreamWaitValue32(stream, word, 0x10, hipStreamWaitValueAnd) == hipSuccess);
  CHECK(hipStreamWaitValue64(stream, word, 0x400000000ULL, hipStreamWaitValueAnd) == hipSuccess);
  // Nor: ~(0xFFFFFFF0 | 0x00000001) = 0x0000000E at 32 bits.
  CHECK(hipStreamWaitValue32(stream, word, 0x1, hipStreamWaitValueNor) == hipSuccess);
  // Nor 32 with a narrow mask: the bits outside the mask make the complement non-zero.
  CHECK(hipStreamWaitValue32(stream, word, 0xFFFF, hipStreamWaitValueNor, 0xFFFF) == hipSuccess);
  // Eq/Gte with a mask that hides everything compare 0.
  CHECK(hipStreamWaitValue32(stream, word, 0, hipStreamWaitValueEq, 0) == hipSuccess);
  CHECK(hipStreamWaitValue64(stream, word, 0, hipStreamWaitValueGte, 0) == hipSuccess);
  std::atomic<bool> passed{false};
  add_flag_callback(stream, &passed);
  CHECK(eventually([&] { return passed.load(); }, 5000ms));
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(word) == hipSuccess);
}

TEST_CASE("stream wait/write value refuse bad flags, null, misaligned and out-of-range pointers") {
  LeakCheck leaks;
  void* word = nullptr;
  REQUIRE(hipExtMallocWithFlags(&word, 16, hipMallocSignalMemory) == hipSuccess);
  REQUIRE(hipMemset(word, 0, 16) == hipSuccess);
  auto* bytes = static_cast<char*>(word);
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  for (const unsigned flags : {4U, 5U, 0x100U, 0xFFFFFFFFU}) {
    CAPTURE(flags);
    CHECK(hipStreamWaitValue32(stream, word, 0, flags, 0xFFFFFFFFU) == hipErrorInvalidValue);
    CHECK(hipStreamWaitValue64(stream, word, 0, flags, ~0ULL) == hipErrorInvalidValue);
  }
  CHECK(hipStreamWaitValue32(stream, nullptr, 0, hipStreamWaitValueGte, 0xFFFFFFFFU) == hipErrorInvalidValue);
  CHECK(hipStreamWaitValue64(stream, nullptr, 0, hipStreamWaitValueGte, ~0ULL) == hipErrorInvalidValue);
  CHECK(hipStreamWriteValue32(stream, nullptr, 1, 0) == hipErrorInvalidValue);
  CHECK(hipStreamWriteValue64(stream, nullptr, 1, 0) == hipErrorInvalidValue);
  for (const int offset : {1, 2, 3}) {
    CAPTURE(offset);
    CHECK(hipStreamWaitValue32(stream, bytes + offset, 1, hipStreamWaitValueGte, 0xFFFFFFFFU) == hipErrorInvalidValue);
    CHECK(hipStreamWriteValue32(stream, bytes + offset, 1, 0) == hipErrorInvalidValue);
  }
  for (const int offset : {1, 2, 4, 6}) {
    CAPTURE(offset);
    CHECK(hipStreamWaitValue64(stream, bytes + offset, 1, hipStreamWaitValueGte, ~0ULL) == hipErrorInvalidValue);
    CHECK(hipStreamWriteValue64(stream, bytes + offset, 1, 0) == hipErrorInvalidValue);
  }
  // A reserved but unmapped range is no memory at all.
  void* reserved = nullptr;
  REQUIRE(hipMemAddressReserve(&reserved, 1 << 21, 0, nullptr, 0) == hipSuccess);
  CHECK(hipStreamWaitValue32(stream, reserved, 1, hipStreamWaitValueGte, 0xFFFFFFFFU) == hipErrorInvalidValue);
  CHECK(hipStreamWriteValue64(stream, reserved, 1, 0) == hipErrorInvalidValue);
  CHECK(hipMemAddressFree(reserved, 1 << 21) == hipSuccess);
  // Nothing was queued and nothing was written.
  CHECK(hipStreamQuery(stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(read_back(word, 16) == std::vector<unsigned char>(16, 0));
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(word) == hipSuccess);
}

namespace {

void* pool_memory_of(hipStream_t stream, std::size_t bytes) {
  void* ptr = nullptr;
  REQUIRE(hipMallocAsync(&ptr, bytes, stream) == hipSuccess);
  REQUIRE(hipMemsetAsync(ptr, 0, bytes, stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  return ptr;
}

void record_status(hipStream_t, hipError_t status, void* user_data) {
  static_cast<std::atomic<int>*>(user_data)->store(static_cast<int>(status));
}

// The stream's status as a callback queued now sees it once the stream gets there.
hipError_t stream_status(hipStream_t stream) {
  std::atomic<int> status{-1};
  REQUIRE(hipStreamAddCallback(stream, record_status, &status, 0) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  return static_cast<hipError_t>(status.load());
}

}  // namespace

// Pool memory is reachable only from its own device (until hipMemPoolSetAccess says otherwise), so
// which device a check asks about shows: the stream's device runs the work, whatever is current.
TEST_CASE("stream memory operations check the memory for the stream's device, not the caller's current one" *
          doctest::test_suite("devices-2")) {
  int devices = 0;
  REQUIRE(hipGetDeviceCount(&devices) == hipSuccess);
  REQUIRE(devices >= 2);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  const hipStream_t on_one = make_stream(hipStreamNonBlocking);
  auto* const one_memory = static_cast<char*>(pool_memory_of(on_one, 256));
  REQUIRE(hipSetDevice(0) == hipSuccess);
  const hipStream_t on_zero = make_stream(hipStreamNonBlocking);
  auto* const zero_memory = static_cast<char*>(pool_memory_of(on_zero, 256));

  SUBCASE("device 1's memory on device 1's stream is accepted while device 0 is current") {
    CHECK(hipStreamWriteValue32(on_one, one_memory, 7, 0) == hipSuccess);
    CHECK(hipStreamWaitValue32(on_one, one_memory, 7, hipStreamWaitValueEq, 0xFFFFFFFFU) == hipSuccess);
    CHECK(hipStreamWriteValue64(on_one, one_memory + 8, 9, 0) == hipSuccess);
    CHECK(hipStreamWaitValue64(on_one, one_memory + 8, 9, hipStreamWaitValueEq, ~0ULL) == hipSuccess);
    CHECK(hipMemsetAsync(one_memory + 64, 0x5A, 64, on_one) == hipSuccess);
    CHECK(hipMemcpyAsync(one_memory + 128, one_memory + 64, 64, hipMemcpyDeviceToDevice, on_one) == hipSuccess);
    CHECK(stream_status(on_one) == hipSuccess);
    REQUIRE(hipSetDevice(1) == hipSuccess);
    const std::vector<unsigned char> back = read_back(one_memory, 256);
    REQUIRE(hipSetDevice(0) == hipSuccess);
    std::uint32_t low = 0;
    std::uint64_t high = 0;
    std::memcpy(&low, back.data(), sizeof low);
    std::memcpy(&high, back.data() + 8, sizeof high);
    CHECK(low == 7);
    CHECK(high == 9);
    CHECK(std::vector<unsigned char>(back.begin() + 128, back.begin() + 192) == std::vector<unsigned char>(64, 0x5A));
  }

  SUBCASE("device 0's memory on device 1's stream is refused up front, whichever device is current") {
    for (const int current : {0, 1}) {
      CAPTURE(current);
      REQUIRE(hipSetDevice(current) == hipSuccess);
      CHECK(hipStreamWaitValue32(on_one, zero_memory, 1, hipStreamWaitValueEq, 0xFFFFFFFFU) == hipErrorInvalidValue);
      CHECK(hipStreamWaitValue64(on_one, zero_memory + 8, 1, hipStreamWaitValueEq, ~0ULL) == hipErrorInvalidValue);
      CHECK(hipStreamWriteValue32(on_one, zero_memory, 7, 0) == hipErrorInvalidValue);
      CHECK(hipStreamWriteValue64(on_one, zero_memory + 8, 7, 0) == hipErrorInvalidValue);
      CHECK(hipMemsetAsync(zero_memory, 0x5A, 64, on_one) == hipErrorInvalidValue);
      CHECK(hipMemcpyAsync(one_memory, zero_memory, 64, hipMemcpyDeviceToDevice, on_one) == hipErrorInvalidValue);
      CHECK(hipMemcpyAsync(zero_memory, one_memory, 64, hipMemcpyDeviceToDevice, on_one) == hipErrorInvalidValue);
    }
    REQUIRE(hipSetDevice(0) == hipSuccess);
    // Nothing was queued: the stream saw no failure, and both memories kept their contents.
    CHECK(stream_status(on_one) == hipSuccess);
    CHECK(read_back(zero_memory, 256) == std::vector<unsigned char>(256, 0));
    REQUIRE(hipSetDevice(1) == hipSuccess);
    CHECK(read_back(one_memory, 256) == std::vector<unsigned char>(256, 0));
    REQUIRE(hipSetDevice(0) == hipSuccess);
  }

  (void)hipGetLastError();
  CHECK(hipFreeAsync(one_memory, on_one) == hipSuccess);
  CHECK(hipFreeAsync(zero_memory, on_zero) == hipSuccess);
  CHECK(hipStreamSynchronize(on_one) == hipSuccess);
  CHECK(hipStreamSynchronize(on_zero) == hipSuccess);
  CHECK(hipStreamDestroy(on_one) == hipSuccess);
  CHECK(hipStreamDestroy(on_zero) == hipSuccess);
}

TEST_CASE("stream write value stores both widths in stream order") {
  LeakCheck leaks;
  void* word = nullptr;
  REQUIRE(hipExtMallocWithFlags(&word, 16, hipMallocSignalMemory) == hipSuccess);
  hipStream_t stream = make_stream();
  REQUIRE(hipMemsetAsync(word, 0xEE, 16, stream) == hipSuccess);
  REQUIRE(hipStreamWriteValue32(stream, word, 0x11223344U, 0) == hipSuccess);
  REQUIRE(hipStreamWriteValue64(stream, static_cast<char*>(word) + 8, 0x0102030405060708ULL, 0) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  std::uint32_t low = 0;
  std::uint32_t untouched = 0;
  std::uint64_t high = 0;
  REQUIRE(hipMemcpy(&low, word, 4, hipMemcpyDeviceToHost) == hipSuccess);
  REQUIRE(hipMemcpy(&untouched, static_cast<char*>(word) + 4, 4, hipMemcpyDeviceToHost) == hipSuccess);
  REQUIRE(hipMemcpy(&high, static_cast<char*>(word) + 8, 8, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(low == 0x11223344U);
  CHECK(untouched == 0xEEEEEEEEU);
  CHECK(high == 0x0102030405060708ULL);
  // A write queued behind a gate lands only when the gate opens.
  {
    Gate gate;
    hipStream_t gated = make_stream(hipStreamNonBlocking);
    gate.block(gated);
    REQUIRE(hipStreamWriteValue32(gated, word, 0xCAFEF00DU, 0) == hipSuccess);
    std::this_thread::sleep_for(kSettle);
    REQUIRE(hipMemcpy(&low, word, 4, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(low == 0x11223344U);
    gate.open();
    CHECK(hipStreamSynchronize(gated) == hipSuccess);
    REQUIRE(hipMemcpy(&low, word, 4, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(low == 0xCAFEF00DU);
    CHECK(hipStreamDestroy(gated) == hipSuccess);
  }
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(word) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Null-stream semantics

TEST_CASE("null stream: blocking streams wait for earlier null-stream work; non-blocking streams do not") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t blocking = make_stream(hipStreamDefault);
  hipStream_t nonblocking = make_stream(hipStreamNonBlocking);
  for (hipStream_t null_name : {hipStream_t{nullptr}, hipStreamLegacy}) {
    CAPTURE(reinterpret_cast<std::uintptr_t>(null_name));
    Gate null_gate;
    null_gate.block(null_name);
    std::atomic<bool> blocking_ran{false};
    std::atomic<bool> nonblocking_ran{false};
    add_flag_callback(blocking, &blocking_ran);
    add_flag_callback(nonblocking, &nonblocking_ran);
    CHECK(eventually([&] { return nonblocking_ran.load(); }));
    // The stream completes once its callback has returned, which on a device queue is a moment
    // after the flag is set.
    CHECK(eventually([&] { return hipStreamQuery(nonblocking) == hipSuccess; }));
    CHECK(still_pending(blocking));
    CHECK_FALSE(blocking_ran.load());
    CHECK(hipStreamQuery(null_name) == hipErrorNotReady);
    null_gate.open();
    CHECK(hipStreamSynchronize(blocking) == hipSuccess);
    CHECK(blocking_ran.load());
    CHECK(hipStreamSynchronize(null_name) == hipSuccess);
  }
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipStreamDestroy(nonblocking) == hipSuccess);
}

TEST_CASE("null stream: null-stream work waits for earlier blocking-stream work, not for non-blocking streams") {
  LeakCheck leaks;
  Gate blocking_gate;
  Gate nonblocking_gate;
  hipStream_t blocking = make_stream(hipStreamDefault);
  hipStream_t nonblocking = make_stream(hipStreamNonBlocking);

  // A gated non-blocking stream does not hold the null stream.
  nonblocking_gate.block(nonblocking);
  std::atomic<bool> null_ran{false};
  add_flag_callback(nullptr, &null_ran);
  CHECK(eventually([&] { return null_ran.load(); }));
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(hipStreamQuery(nonblocking) == hipErrorNotReady);

  // A gated blocking stream does.
  blocking_gate.block(blocking);
  std::atomic<bool> null_after{false};
  std::atomic<bool> legacy_after{false};
  add_flag_callback(nullptr, &null_after);
  add_flag_callback(hipStreamLegacy, &legacy_after);
  CHECK(still_pending(nullptr));
  CHECK_FALSE(null_after.load());
  CHECK_FALSE(legacy_after.load());
  // hipStreamSynchronize(null) waits for the blocking stream too.
  std::thread opener = blocking_gate.open_later(60ms);
  const auto start = std::chrono::steady_clock::now();
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  opener.join();
  CHECK(null_after.load());
  CHECK(legacy_after.load());
  CHECK(hipStreamQuery(blocking) == hipSuccess);

  // The non-blocking stream is still held; release it.
  CHECK(hipStreamQuery(nonblocking) == hipErrorNotReady);
  nonblocking_gate.open();
  CHECK(hipStreamSynchronize(nonblocking) == hipSuccess);
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipStreamDestroy(nonblocking) == hipSuccess);
}

TEST_CASE("null stream: a synchronous hipMemset waits for earlier work on a blocking stream") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 1024;
  void* buffer = malloc_device(kBytes);
  REQUIRE(hipMemset(buffer, 0, kBytes) == hipSuccess);
  Gate gate;
  hipStream_t blocking = make_stream(hipStreamDefault);
  gate.block(blocking);
  REQUIRE(hipMemsetAsync(buffer, 0x11, kBytes, blocking) == hipSuccess);
  std::thread opener = gate.open_later(60ms);
  // Runs in null-stream order: after the blocking stream's memset, so its value wins.
  CHECK(hipMemset(buffer, 0x22, kBytes) == hipSuccess);
  opener.join();
  CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0x22));
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("null stream: work queued on a blocking stream before hipStreamDestroy still comes first") {
  // hipStreamDestroy may return while the stream's work is pending; that work keeps its place
  // ahead of null-stream work queued after it.
  LeakCheck leaks;
  constexpr std::size_t kBytes = 1024;
  void* buffer = malloc_device(kBytes);
  REQUIRE(hipMemset(buffer, 0, kBytes) == hipSuccess);
  for (const int variant : {0, 1, 2}) {
    CAPTURE(variant);
    REQUIRE(hipMemset(buffer, 0, kBytes) == hipSuccess);
    Gate gate;
    hipStream_t blocking = make_stream(hipStreamDefault);
    gate.block(blocking);
    REQUIRE(hipMemsetAsync(buffer, 0x11, kBytes, blocking) == hipSuccess);
    std::thread opener = gate.open_later(80ms);
    CHECK(hipStreamDestroy(blocking) == hipSuccess);
    if (variant == 0) {
      CHECK(hipMemsetAsync(buffer, 0x22, kBytes, nullptr) == hipSuccess);  // null-stream order
      CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
    } else if (variant == 1) {
      CHECK(hipMemset(buffer, 0x22, kBytes) == hipSuccess);  // synchronous, null-stream order
    } else {
      // hipStreamSynchronize(null) waits for the blocking streams' work, this one's included.
      CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
      CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0x11));
      CHECK(hipMemset(buffer, 0x22, kBytes) == hipSuccess);
    }
    opener.join();
    CHECK(hipDeviceSynchronize() == hipSuccess);
    CHECK(read_back(buffer, kBytes) == std::vector<unsigned char>(kBytes, 0x22));
  }
  CHECK(hipFree(buffer) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// hipStreamPerThread

TEST_CASE("hipStreamPerThread works and names a different stream in each thread") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 4096;
  void* buffer = malloc_device(kBytes);
  const std::vector<unsigned char> data = pattern(kBytes, 9);
  std::vector<unsigned char> back(kBytes, 0);
  REQUIRE(hipMemcpyAsync(buffer, data.data(), kBytes, hipMemcpyHostToDevice, hipStreamPerThread) == hipSuccess);
  REQUIRE(hipMemcpyAsync(back.data(), buffer, kBytes, hipMemcpyDeviceToHost, hipStreamPerThread) == hipSuccess);
  CHECK(hipStreamSynchronize(hipStreamPerThread) == hipSuccess);
  CHECK(back == data);
  CHECK(hipStreamQuery(hipStreamPerThread) == hipSuccess);
  CHECK(hipStreamDestroy(hipStreamPerThread) == hipErrorInvalidHandle);  // not the application's to destroy
  CHECK(hipStreamQuery(hipStreamPerThread) == hipSuccess);

  // Gate this thread's per-thread stream; another thread's per-thread stream is not held by it.
  void* word = nullptr;
  REQUIRE(hipExtMallocWithFlags(&word, 8, hipMallocSignalMemory) == hipSuccess);
  REQUIRE(hipMemset(word, 0, 8) == hipSuccess);
  hipStream_t releaser = make_stream(hipStreamNonBlocking);
  REQUIRE(hipStreamWaitValue32(hipStreamPerThread, word, 1, hipStreamWaitValueGte, 0xFFFFFFFFU) == hipSuccess);
  std::atomic<bool> main_ran{false};
  add_flag_callback(hipStreamPerThread, &main_ran);
  CHECK(hipStreamQuery(hipStreamPerThread) == hipErrorNotReady);

  std::atomic<bool> other_ran{false};
  hipError_t other_query = hipErrorUnknown;
  hipError_t other_sync = hipErrorUnknown;
  std::thread other([&] {
    add_flag_callback(hipStreamPerThread, &other_ran);
    other_sync = hipStreamSynchronize(hipStreamPerThread);
    other_query = hipStreamQuery(hipStreamPerThread);
  });
  other.join();
  CHECK(other_sync == hipSuccess);
  CHECK(other_query == hipSuccess);
  CHECK(other_ran.load());
  CHECK_FALSE(main_ran.load());
  CHECK(hipStreamQuery(hipStreamPerThread) == hipErrorNotReady);

  REQUIRE(hipStreamWriteValue32(releaser, word, 1, 0) == hipSuccess);
  CHECK(hipStreamSynchronize(hipStreamPerThread) == hipSuccess);
  CHECK(main_ran.load());
  CHECK(hipStreamDestroy(releaser) == hipSuccess);
  CHECK(hipFree(word) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("hipStreamPerThread of an exited thread takes its worker thread with it") {
  LeakCheck leaks;
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);  // the null stream's worker exists
  const std::size_t before = quiet_thread_count();
  for (int round = 0; round < 4; ++round) {
    std::thread user([] {
      std::atomic<bool> ran{false};
      add_flag_callback(hipStreamPerThread, &ran);
      CHECK(hipStreamSynchronize(hipStreamPerThread) == hipSuccess);
      CHECK(ran.load());
    });
    user.join();
  }
  CHECK(settled_thread_count(before) == before);
}

// ---------------------------------------------------------------------------------------------
// Async copies and fills

TEST_CASE("hipMemcpyAsync and hipMemsetAsync move real data in stream order") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 1 << 20;
  void* first = malloc_device(kBytes);
  void* second = malloc_device(kBytes);
  const std::vector<unsigned char> data = pattern(kBytes, 1);
  std::vector<unsigned char> back(kBytes, 0);
  std::vector<unsigned char> back_default(kBytes, 0);
  for (const unsigned flags : {unsigned{hipStreamDefault}, unsigned{hipStreamNonBlocking}}) {
    CAPTURE(flags);
    hipStream_t stream = make_stream(flags);
    REQUIRE(hipMemcpyAsync(first, data.data(), kBytes, hipMemcpyHostToDevice, stream) == hipSuccess);
    REQUIRE(hipMemsetAsync(static_cast<char*>(first) + 1000, 0xAB, 5000, stream) == hipSuccess);
    REQUIRE(hipMemcpyAsync(second, first, kBytes, hipMemcpyDeviceToDevice, stream) == hipSuccess);
    REQUIRE(hipMemsetAsync(first, 0, kBytes, stream) == hipSuccess);
    REQUIRE(hipMemcpyAsync(back.data(), second, kBytes, hipMemcpyDeviceToHost, stream) == hipSuccess);
    REQUIRE(hipMemcpyAsync(back_default.data(), first, kBytes, hipMemcpyDefault, stream) == hipSuccess);
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    std::vector<unsigned char> expected = data;
    std::fill(expected.begin() + 1000, expected.begin() + 6000, 0xAB);
    CHECK(back == expected);
    CHECK(back_default == std::vector<unsigned char>(kBytes, 0));
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
  // The same on the null stream and hipStreamPerThread.
  for (hipStream_t special : {hipStream_t{nullptr}, hipStreamLegacy, hipStreamPerThread}) {
    REQUIRE(hipMemsetAsync(first, 0x5A, kBytes, special) == hipSuccess);
    REQUIRE(hipMemcpyAsync(back.data(), first, kBytes, hipMemcpyDeviceToHost, special) == hipSuccess);
    CHECK(hipStreamSynchronize(special) == hipSuccess);
    CHECK(back == std::vector<unsigned char>(kBytes, 0x5A));
  }
  CHECK(hipFree(first) == hipSuccess);
  CHECK(hipFree(second) == hipSuccess);
}

namespace {

// Two allocations of `each` bytes on device 0 mapped side by side in one reserved range,
// read-write for devices 0 to `devices` - 1.
struct TwoMappings {
  // Device memory on device 0.
  [[nodiscard]] static hipMemAllocationProp device_prop() {
    hipMemAllocationProp prop{};
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    return prop;
  }

  // The least multiple of device 0's allocation granularity that holds `bytes`.
  [[nodiscard]] static std::size_t size_for(std::size_t bytes) {
    const hipMemAllocationProp prop = device_prop();
    std::size_t granule = 0;
    REQUIRE(hipMemGetAllocationGranularity(&granule, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
    REQUIRE(granule > 0);
    return (bytes + granule - 1) / granule * granule;
  }

  explicit TwoMappings(std::size_t each, int devices = 1) : each(each) {
    REQUIRE(hipMemAddressReserve(&base, 2 * each, 0, nullptr, 0) == hipSuccess);
    const hipMemAllocationProp prop = device_prop();
    std::vector<hipMemAccessDesc> access(static_cast<std::size_t>(devices));
    for (int device = 0; device < devices; ++device) {
      access[static_cast<std::size_t>(device)].location = {hipMemLocationTypeDevice, device};
      access[static_cast<std::size_t>(device)].flags = hipMemAccessFlagsProtReadWrite;
    }
    for (std::size_t index = 0; index < 2; ++index) {
      REQUIRE(hipMemCreate(&handles[index], each, &prop, 0) == hipSuccess);
      REQUIRE(hipMemMap(at(index), each, 0, handles[index], 0) == hipSuccess);
      REQUIRE(hipMemSetAccess(at(index), each, access.data(), access.size()) == hipSuccess);
    }
  }
  TwoMappings(const TwoMappings&) = delete;
  TwoMappings& operator=(const TwoMappings&) = delete;
  ~TwoMappings() {
    for (std::size_t index = 0; index < 2; ++index) {
      CHECK(hipMemUnmap(at(index), each) == hipSuccess);
      CHECK(hipMemRelease(handles[index]) == hipSuccess);
    }
    CHECK(hipMemAddressFree(base, 2 * each) == hipSuccess);
  }
  [[nodiscard]] void* at(std::size_t index) const { return static_cast<char*>(base) + index * each; }

  std::size_t each;
  void* base = nullptr;
  std::array<hipMemGenericAllocationHandle_t, 2> handles{};
};

}  // namespace

TEST_CASE(
    "hipMemsetAsync and hipMemset set exactly the bytes asked: odd offsets and lengths, large fills, "
    "across mappings") {
  LeakCheck leaks;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  struct Fill {
    std::size_t offset;
    std::size_t bytes;
    unsigned char value;
  };
  SUBCASE("hipMalloc memory") {
    constexpr std::size_t kBytes = (std::size_t{3} << 20) + 8192;
    void* device = malloc_device(kBytes);
    // Fewer bytes than a word at a word's start, and six bytes that hold no whole word, among them.
    const std::array<Fill, 10> fills{{{0, 1, 0x01},
                                      {3, 1, 0x02},
                                      {5, 4095, 0x03},
                                      {4101, 4096, 0x04},
                                      {8199, 4097, 0x05},
                                      {16384, 3 * 4096 + 5, 0x06},
                                      {65537, (std::size_t{1} << 20) + 7, 0x07},
                                      {(std::size_t{2} << 20) + 1, (std::size_t{1} << 20) + 4000, 0x00},
                                      {(std::size_t{3} << 20) + 4097, 6, 0x09},
                                      {kBytes - 3, 3, 0xFF}}};
    for (const bool on_stream : {true, false}) {
      CAPTURE(on_stream);
      std::vector<unsigned char> expected(kBytes, 0xEE);
      REQUIRE(hipMemset(device, 0xEE, kBytes) == hipSuccess);
      for (const Fill& fill : fills) {
        char* const at = static_cast<char*>(device) + fill.offset;
        REQUIRE((on_stream ? hipMemsetAsync(at, fill.value, fill.bytes, stream)
                           : hipMemset(at, fill.value, fill.bytes)) == hipSuccess);
        std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(fill.offset), fill.bytes, fill.value);
      }
      REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
      CHECK(read_back(device, kBytes) == expected);
    }
    CHECK(hipFree(device) == hipSuccess);
  }
  SUBCASE("two mappings side by side in one reserved range") {
    // At least 64 KiB each, so that every fill below has room on both sides of the seam.
    const std::size_t size = TwoMappings::size_for(std::size_t{1} << 16);
    {
      const TwoMappings memory{size};
      std::vector<unsigned char> expected(2 * size, 0x33);
      REQUIRE(hipMemsetAsync(memory.base, 0x33, 2 * size, stream) == hipSuccess);
      // Each crosses from the first mapping into the second.
      const std::array<Fill, 3> fills{{{size - 1, 2, 0x44}, {size - 5000, 12001, 0x55}, {size / 2 + 3, size, 0x66}}};
      for (const Fill& fill : fills) {
        REQUIRE(hipMemsetAsync(static_cast<char*>(memory.base) + fill.offset, fill.value, fill.bytes, stream) ==
                hipSuccess);
        std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(fill.offset), fill.bytes, fill.value);
      }
      REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
      CHECK(read_back(memory.base, 2 * size) == expected);
    }
  }
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE(
    "hipMemcpyAsync and hipMemcpy move exactly the bytes asked: odd offsets and lengths, every direction, "
    "across mappings") {
  LeakCheck leaks;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t size = TwoMappings::size_for(3 * kMiB);  // each of the two mappings
  const TwoMappings mapped{size};
  constexpr std::size_t kLinear = 3 * kMiB + 8192;
  void* linear = malloc_device(kLinear);
  std::vector<unsigned char> host(kLinear);

  enum class Where { host, linear, mapped };
  struct Copy {
    Where to;
    std::size_t to_offset;
    Where from;
    std::size_t from_offset;
    std::size_t bytes;
  };
  // Larger than a staging buffer's megabyte and not a multiple of anything, across the seam of the
  // two mappings, within them, and a few bytes at odd places.
  const std::array<Copy, 8> copies{{{Where::linear, 1, Where::host, 0, 3 * kMiB + 5},
                                    {Where::mapped, size - kMiB - 3, Where::linear, 7, 2 * kMiB + 11},
                                    {Where::mapped, size + 9, Where::mapped, 5, 12345},
                                    {Where::host, 3, Where::mapped, size - 2, 4},
                                    {Where::linear, 2, Where::linear, kMiB + 3, 1},
                                    {Where::mapped, 1, Where::host, 11, 5},
                                    {Where::linear, kLinear - 3, Where::mapped, 2 * size - 3, 3},
                                    {Where::host, 100, Where::linear, 1, 3 * kMiB}}};
  for (const bool on_stream : {true, false}) {
    CAPTURE(on_stream);
    host = pattern(kLinear, on_stream ? 3 : 4);
    REQUIRE(hipMemset(linear, 0x11, kLinear) == hipSuccess);
    REQUIRE(hipMemset(mapped.base, 0x22, 2 * size) == hipSuccess);
    // What each should hold afterwards.
    std::vector<unsigned char> host_model = host;
    std::vector<unsigned char> linear_model(kLinear, 0x11);
    std::vector<unsigned char> mapped_model(2 * size, 0x22);
    const auto address = [&](Where where, std::size_t offset) -> unsigned char* {
      switch (where) {
        case Where::host: return host.data() + offset;
        case Where::linear: return static_cast<unsigned char*>(linear) + offset;
        case Where::mapped: return static_cast<unsigned char*>(mapped.base) + offset;
      }
      return nullptr;
    };
    const auto model = [&](Where where, std::size_t offset) {
      switch (where) {
        case Where::host: return host_model.begin() + static_cast<std::ptrdiff_t>(offset);
        case Where::linear: return linear_model.begin() + static_cast<std::ptrdiff_t>(offset);
        case Where::mapped: return mapped_model.begin() + static_cast<std::ptrdiff_t>(offset);
      }
      return host_model.end();
    };
    for (const Copy& copy : copies) {
      CAPTURE(copy.to_offset);
      CAPTURE(copy.from_offset);
      unsigned char* const dst = address(copy.to, copy.to_offset);
      const unsigned char* const src = address(copy.from, copy.from_offset);
      REQUIRE((on_stream ? hipMemcpyAsync(dst, src, copy.bytes, hipMemcpyDefault, stream)
                         : hipMemcpy(dst, src, copy.bytes, hipMemcpyDefault)) == hipSuccess);
      const auto from = model(copy.from, copy.from_offset);
      std::copy(from, from + static_cast<std::ptrdiff_t>(copy.bytes), model(copy.to, copy.to_offset));
    }
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(host == host_model);
    CHECK(read_back(linear, kLinear) == linear_model);
    CHECK(read_back(mapped.base, 2 * size) == mapped_model);
  }
  CHECK(hipFree(linear) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

// The fills on device 0's stream take a while (many pieces of work on a GPU's copy engines, or the
// stand-in's delayed copies), so a copy on device 1's stream that did not wait would read old bytes.
TEST_CASE("an event recorded on one device's stream orders device-to-device work on another device's stream" *
          doctest::test_suite("devices-2")) {
  int devices = 0;
  REQUIRE(hipGetDeviceCount(&devices) == hipSuccess);
  REQUIRE(devices >= 2);
  LeakCheck leaks;
  const std::size_t size = TwoMappings::size_for(std::size_t{8} << 20);
  {
    const TwoMappings memory{size, 2};
    auto* const written = static_cast<unsigned char*>(memory.at(0));
    void* const copied = memory.at(1);
    REQUIRE(hipSetDevice(0) == hipSuccess);
    const hipStream_t producer = make_stream(hipStreamNonBlocking);
    hipEvent_t done = nullptr;
    REQUIRE(hipEventCreateWithFlags(&done, hipEventDisableTiming) == hipSuccess);
    REQUIRE(hipSetDevice(1) == hipSuccess);
    const hipStream_t consumer = make_stream(hipStreamNonBlocking);
    for (unsigned char round = 1; round <= 3; ++round) {
      CAPTURE(static_cast<int>(round));
      // Sixteen fills, each of half a megabyte, then the whole in this round's value.
      for (std::size_t part = 0; part < 16; ++part) {
        REQUIRE(hipMemsetAsync(written + part * (size / 16), 0xF0 + part, size / 16, producer) == hipSuccess);
      }
      REQUIRE(hipMemsetAsync(written, round, size, producer) == hipSuccess);
      REQUIRE(hipEventRecord(done, producer) == hipSuccess);
      REQUIRE(hipStreamWaitEvent(consumer, done, 0) == hipSuccess);
      REQUIRE(hipMemcpyAsync(copied, written, size, hipMemcpyDeviceToDevice, consumer) == hipSuccess);
      REQUIRE(hipStreamSynchronize(consumer) == hipSuccess);
      CHECK(read_back(copied, size) == std::vector<unsigned char>(size, round));
    }
    CHECK(hipStreamDestroy(consumer) == hipSuccess);
    REQUIRE(hipSetDevice(0) == hipSuccess);
    CHECK(hipStreamDestroy(producer) == hipSuccess);
    CHECK(hipEventDestroy(done) == hipSuccess);
  }
}

TEST_CASE("hipMemcpyAsync and hipMemsetAsync refusals") {
  LeakCheck leaks;
  void* device = malloc_device(4096);
  std::vector<unsigned char> host(4096);
  hipStream_t stream = make_stream();
  CHECK(hipMemcpyAsync(nullptr, host.data(), 16, hipMemcpyHostToDevice, stream) == hipErrorInvalidValue);
  CHECK(hipMemcpyAsync(device, nullptr, 16, hipMemcpyHostToDevice, stream) == hipErrorInvalidValue);
  CHECK(hipMemcpyAsync(device, host.data(), 16, static_cast<hipMemcpyKind>(7), stream) ==
        hipErrorInvalidMemcpyDirection);
  CHECK(hipMemsetAsync(nullptr, 0, 16, stream) == hipErrorInvalidValue);
  CHECK(hipMemsetAsync(device, 0, 4097, stream) == hipErrorInvalidValue);  // past the end
  CHECK(hipMemcpyAsync(device, host.data(), 4097, hipMemcpyHostToDevice, stream) == hipErrorInvalidValue);
  // Zero bytes is a no-op.
  CHECK(hipMemcpyAsync(device, host.data(), 0, hipMemcpyHostToDevice, stream) == hipSuccess);
  CHECK(hipMemsetAsync(device, 0, 0, stream) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(device) == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Ordering under load

namespace {

struct OrderLog {
  std::mutex mutex;
  std::vector<int> seen;
};

struct OrderTicket {
  OrderLog* log;
  int sequence;
};

void record_order(hipStream_t, hipError_t status, void* user_data) {
  auto* ticket = static_cast<OrderTicket*>(user_data);
  std::lock_guard lock{ticket->log->mutex};
  ticket->log->seen.push_back(status == hipSuccess ? ticket->sequence : -1);
}

}  // namespace

TEST_CASE("ordering under load: 8 threads x 3 streams of memsets, copies and callbacks keep per-stream order") {
  LeakCheck leaks;
  constexpr int kThreads = 8;
  constexpr int kStreamsPerThread = 3;
  constexpr int kOps = 120;
  constexpr std::size_t kSlot = 256;
  struct Lane {
    hipStream_t stream = nullptr;
    void* device = nullptr;
    std::vector<unsigned char> host;
    OrderLog log;
    std::vector<OrderTicket> tickets;
  };
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int i = 0; i < kThreads * kStreamsPerThread; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->stream = make_stream(i % 2 == 0 ? hipStreamDefault : hipStreamNonBlocking);
    lane->device = malloc_device(kSlot);
    lane->host.assign(kSlot * kOps, 0);
    lane->tickets.resize(kOps);
    for (int op = 0; op < kOps; ++op) lane->tickets[op] = {&lane->log, op};
    lanes.push_back(std::move(lane));
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int op = 0; op < kOps; ++op) {
        for (int s = 0; s < kStreamsPerThread; ++s) {
          Lane& lane = *lanes[static_cast<std::size_t>(t * kStreamsPerThread + s)];
          const auto byte = static_cast<unsigned char>((op * 7 + s + t) & 0xff);
          // memset, then copy the result out to this op's slot, then a callback.
          if (hipMemsetAsync(lane.device, byte, kSlot, lane.stream) != hipSuccess) ++failures;
          if (hipMemcpyAsync(lane.host.data() + kSlot * static_cast<std::size_t>(op), lane.device, kSlot,
                             hipMemcpyDeviceToHost, lane.stream) != hipSuccess) {
            ++failures;
          }
          if (hipStreamAddCallback(lane.stream, record_order, &lane.tickets[static_cast<std::size_t>(op)], 0) !=
              hipSuccess) {
            ++failures;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  CHECK(hipDeviceSynchronize() == hipSuccess);
  std::vector<int> expected(kOps);
  std::iota(expected.begin(), expected.end(), 0);
  for (int t = 0; t < kThreads; ++t) {
    for (int s = 0; s < kStreamsPerThread; ++s) {
      Lane& lane = *lanes[static_cast<std::size_t>(t * kStreamsPerThread + s)];
      CAPTURE(t);
      CAPTURE(s);
      {
        std::lock_guard lock{lane.log.mutex};
        CHECK(lane.log.seen == expected);
      }
      bool slots_ok = true;
      for (int op = 0; op < kOps && slots_ok; ++op) {
        const auto byte = static_cast<unsigned char>((op * 7 + s + t) & 0xff);
        slots_ok = test_support::all_bytes_are(
            std::span{lane.host}.subspan(kSlot * static_cast<std::size_t>(op), kSlot), byte);
        if (!slots_ok) CAPTURE(op);
      }
      CHECK(slots_ok);
    }
  }
  for (auto& lane : lanes) {
    CHECK(hipStreamDestroy(lane->stream) == hipSuccess);
    CHECK(hipFree(lane->device) == hipSuccess);
  }
}

// ---------------------------------------------------------------------------------------------
// Threads

TEST_CASE("destroyed streams leave no thread behind") {
  LeakCheck leaks;
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);  // the null stream's worker exists
  const std::size_t before = quiet_thread_count();
  void* buffer = malloc_device(16 * 4096);  // a slice per stream: unordered streams never share bytes
  std::vector<hipStream_t> streams;
  for (int i = 0; i < 16; ++i) {
    hipStream_t stream = nullptr;
    switch (i % 4) {
      case 0: REQUIRE(hipStreamCreate(&stream) == hipSuccess); break;
      case 1: REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess); break;
      case 2: REQUIRE(hipStreamCreateWithPriority(&stream, hipStreamDefault, -1) == hipSuccess); break;
      default: {
        const std::uint32_t mask = 1;
        REQUIRE(hipExtStreamCreateWithCUMask(&stream, 1, &mask) == hipSuccess);
      }
    }
    streams.push_back(stream);
    REQUIRE(hipMemsetAsync(static_cast<char*>(buffer) + 4096 * i, i, 4096, stream) == hipSuccess);
  }
  CHECK(thread_count() >= before);
  // Some with work still queued, some synchronised first.
  for (std::size_t i = 0; i < streams.size(); ++i) {
    if (i % 2 == 0) CHECK(hipStreamSynchronize(streams[i]) == hipSuccess);
    CHECK(hipStreamDestroy(streams[i]) == hipSuccess);
  }
  CHECK(settled_thread_count(before) == before);

  // A stream destroyed while its work is held: hipStreamDestroy may wait for the work or leave
  // it to finish; either way the thread is gone once the work has run.
  Gate gate;
  const std::size_t with_gate = thread_count();
  hipStream_t held = make_stream();
  gate.block(held);
  REQUIRE(hipMemsetAsync(buffer, 0x44, 4096, held) == hipSuccess);
  std::thread opener = gate.open_later(50ms);
  CHECK(hipStreamDestroy(held) == hipSuccess);
  opener.join();
  CHECK(hipDeviceSynchronize() == hipSuccess);
  CHECK(settled_thread_count(with_gate) == with_gate);
  CHECK(read_back(buffer, 4096) == std::vector<unsigned char>(4096, 0x44));
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("a destroyed stream whose last reference is work queued on it finishes cleanly") {
  // An event recorded on a held stream keeps the stream alive after hipStreamDestroy; destroying
  // the event leaves the queued record as the stream's only owner, so the stream dies on its own
  // worker thread when that work finishes.
  LeakCheck leaks;
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  const std::size_t before = quiet_thread_count();
  for (int round = 0; round < 3; ++round) {
    hipStream_t stream = make_stream(hipStreamNonBlocking);
    hipEvent_t event = nullptr;
    REQUIRE(hipEventCreate(&event) == hipSuccess);
    Gate local;
    local.block(stream);
    REQUIRE(hipEventRecord(event, stream) == hipSuccess);
    std::atomic<bool> after{false};
    add_flag_callback(stream, &after);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
    CHECK(hipEventDestroy(event) == hipSuccess);
    local.open();
    CHECK(eventually([&] { return after.load(); }));
  }
  CHECK(settled_thread_count(before) == before);
}

// ---------------------------------------------------------------------------------------------
// A random walk of fills and copies over a few buffers on the null stream, two blocking streams and
// a non-blocking one. A buffer moves to another stream in a way HIP orders: the null stream's
// implicit order with blocking streams, an event (one of a few, re-recorded again and again), or
// the host synchronizing. Gates hold streams now and then, so work really waits. Each buffer is
// read back and compared with what the model says the work queued so far leaves in it.

namespace {

class StreamWalk : test_support::WalkRandom {
 public:
  explicit StreamWalk(std::uint64_t seed) : WalkRandom(seed) {
    streams_ = {nullptr, make_stream(hipStreamDefault), make_stream(hipStreamDefault),
                make_stream(hipStreamNonBlocking)};
    for (hipEvent_t& event : events_) REQUIRE(hipEventCreateWithFlags(&event, hipEventDisableTiming) == hipSuccess);
    for (Buffer& buffer : buffers_) {
      buffer.model.assign(kBytes, 0);
      buffer.ptr = malloc_device(kBytes);
      REQUIRE(hipMemset(buffer.ptr, 0, kBytes) == hipSuccess);
    }
    // Made before any stream is held: a gate's set-up is a hipMemset, which waits for blocking streams.
    for (auto& gate : gates_) gate = std::make_unique<Gate>();
  }
  StreamWalk(const StreamWalk&) = delete;
  StreamWalk& operator=(const StreamWalk&) = delete;
  StreamWalk(StreamWalk&&) = delete;
  StreamWalk& operator=(StreamWalk&&) = delete;
  ~StreamWalk() {
    open_all();
    CHECK(hipDeviceSynchronize() == hipSuccess);
    for (Buffer& buffer : buffers_) {
      CHECK(read_back(buffer.ptr, kBytes) == buffer.model);
      CHECK(hipFree(buffer.ptr) == hipSuccess);
    }
    for (hipEvent_t event : events_) CHECK(hipEventDestroy(event) == hipSuccess);
    gates_ = {};
    for (hipStream_t stream : streams_) {
      if (stream != nullptr) CHECK(hipStreamDestroy(stream) == hipSuccess);
    }
  }

  void step() {
    switch (pick(10)) {
      case 0:
      case 1:
      case 2: fill(); break;
      case 3:
      case 4:
      case 5: copy(); break;
      case 6: hold(); break;
      case 7: let_go(); break;
      default: verify(); break;
    }
  }

  [[nodiscard]] std::size_t verified() const noexcept { return verified_; }
  [[nodiscard]] std::size_t holds() const noexcept { return holds_; }

 private:
  static constexpr std::size_t kBytes = std::size_t{64} * 1024;
  static constexpr std::size_t kNull = 0;
  static constexpr std::size_t kNonBlocking = 3;

  struct Buffer {
    void* ptr = nullptr;
    std::size_t stream = 0;  // where its last use was queued
    std::vector<unsigned char> model;
  };

  // Whether HIP orders work queued on `to` after work already queued on `from`, with nothing done.
  static bool implicitly_ordered(std::size_t from, std::size_t to) {
    if (from == to) return true;
    const bool either_null = from == kNull || to == kNull;
    return either_null && from != kNonBlocking && to != kNonBlocking;
  }

  // Has `buffer`'s later work on `to` follow its earlier work, by one of the ways HIP allows.
  void move(Buffer& buffer, std::size_t to) {
    const std::size_t from = buffer.stream;
    buffer.stream = to;
    if (implicitly_ordered(from, to) && pick(4) != 0) return;
    // The host waits only while nothing is held: `from` may be waiting for a held stream itself.
    if (std::none_of(held_by_.begin(), held_by_.end(), [](const Gate* gate) { return gate != nullptr; }) &&
        pick(4) == 0) {
      REQUIRE(hipStreamSynchronize(streams_[from]) == hipSuccess);
      return;
    }
    hipEvent_t event = events_[pick(events_.size())];
    REQUIRE(hipEventRecord(event, streams_[from]) == hipSuccess);
    REQUIRE(hipStreamWaitEvent(streams_[to], event, 0) == hipSuccess);
  }

  // A fill of part of one buffer.
  void fill() {
    Buffer& buffer = buffers_[pick(buffers_.size())];
    move(buffer, pick(streams_.size()));
    const std::size_t offset = pick(kBytes);
    const std::size_t bytes = 1 + pick(kBytes - offset);
    const auto byte = static_cast<unsigned char>(pick(256));
    REQUIRE(hipMemsetAsync(static_cast<unsigned char*>(buffer.ptr) + offset, byte, bytes, streams_[buffer.stream]) ==
            hipSuccess);
    std::fill_n(buffer.model.begin() + static_cast<std::ptrdiff_t>(offset), bytes, byte);
  }

  // A copy between two buffers (or within one: the ranges never overlap) on one stream, after the
  // earlier work on both.
  void copy() {
    const std::size_t from = pick(buffers_.size());
    const std::size_t to = pick(buffers_.size());
    const std::size_t stream = pick(streams_.size());
    move(buffers_[from], stream);
    move(buffers_[to], stream);
    const std::size_t bytes = 1 + pick(kBytes / 2);
    const std::size_t source = pick(kBytes / 2 - bytes + 1);
    const std::size_t target = kBytes / 2 + pick(kBytes / 2 - bytes + 1);
    REQUIRE(hipMemcpyAsync(static_cast<unsigned char*>(buffers_[to].ptr) + target,
                           static_cast<unsigned char*>(buffers_[from].ptr) + source, bytes, hipMemcpyDeviceToDevice,
                           streams_[stream]) == hipSuccess);
    std::copy_n(buffers_[from].model.begin() + static_cast<std::ptrdiff_t>(source), bytes,
                buffers_[to].model.begin() + static_cast<std::ptrdiff_t>(target));
  }

  // Holds one of the created streams with an unused gate, until let go.
  void hold() {
    const std::size_t stream = 1 + pick(streams_.size() - 1);
    if (held_by_[stream] != nullptr || next_gate_ == gates_.size()) return;
    held_by_[stream] = gates_[next_gate_++].get();
    held_by_[stream]->block(streams_[stream]);
    ++holds_;
  }

  void let_go() {
    Gate*& gate = held_by_[pick(held_by_.size())];
    if (gate == nullptr) return;
    gate->open();
    gate = nullptr;
  }

  void open_all() {
    for (Gate*& gate : held_by_) {
      if (gate != nullptr) gate->open();
      gate = nullptr;
    }
  }

  // Reads a buffer back once its stream is done (hipMemcpy runs on the null stream, which waits for
  // blocking streams: every gate is opened first).
  void verify() {
    Buffer& buffer = buffers_[pick(buffers_.size())];
    open_all();
    REQUIRE(hipStreamSynchronize(streams_[buffer.stream]) == hipSuccess);
    CHECK(read_back(buffer.ptr, kBytes) == buffer.model);
    ++verified_;
  }

  std::array<hipStream_t, 4> streams_{};
  std::array<hipEvent_t, 3> events_{};
  std::array<Buffer, 6> buffers_{};
  std::array<std::unique_ptr<Gate>, 24> gates_{};
  std::size_t next_gate_ = 0;
  std::array<Gate*, 4> held_by_{};  // per stream; the null stream is never held
  std::size_t verified_ = 0;
  std::size_t holds_ = 0;
};

}  // namespace

TEST_CASE(
    "a random walk of fills and copies handed between streams by HIP's orderings leaves every buffer as modelled") {
  LeakCheck leaks;
  const std::uint64_t seed = test_support::walk_seed();
  CAPTURE(seed);
  StreamWalk walk(seed);
  const int steps = test_support::take_walk(walk, 1500, seed);
  CHECK(walk.verified() > static_cast<std::size_t>(steps / 15));
  CHECK(walk.holds() > static_cast<std::size_t>(steps / 150));
}

namespace {

// A page of device 0's memory mapped read-write, which the failure tests unmap themselves (under
// work queued to use it); released at scope exit.
struct UnmappedLater {
  UnmappedLater() {
    const hipMemAllocationProp prop = TwoMappings::device_prop();
    REQUIRE(hipMemAddressReserve(&base, bytes, 0, nullptr, 0) == hipSuccess);
    REQUIRE(hipMemCreate(&handle, bytes, &prop, 0) == hipSuccess);
    REQUIRE(hipMemMap(base, bytes, 0, handle, 0) == hipSuccess);
    const hipMemAccessDesc access{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
    REQUIRE(hipMemSetAccess(base, bytes, &access, 1) == hipSuccess);
  }
  UnmappedLater(const UnmappedLater&) = delete;
  UnmappedLater& operator=(const UnmappedLater&) = delete;
  ~UnmappedLater() {
    CHECK(hipMemRelease(handle) == hipSuccess);
    CHECK(hipMemAddressFree(base, bytes) == hipSuccess);
  }

  std::size_t bytes = TwoMappings::size_for(4096);
  void* base = nullptr;
  hipMemGenericAllocationHandle_t handle{};
};

}  // namespace

TEST_CASE(
    "work that failed where it ran is reported by its stream's synchronize and query, by events recorded after "
    "it, and by the device's synchronize, until the stream is destroyed") {
  LeakCheck leaks;
  // A copy from the application's memory runs on the stream's host thread on every engine, and
  // checks the destination there: unmapped while the stream was held, it fails without a touch.
  const UnmappedLater mapping;
  const std::size_t bytes = mapping.bytes;
  void* const base = mapping.base;
  const std::vector<unsigned char> source(bytes, 0x7E);
  void* elsewhere_buffer = malloc_device(64);

  hipStream_t failing = make_stream(hipStreamNonBlocking);
  hipStream_t healthy = make_stream(hipStreamNonBlocking);
  hipEvent_t before = nullptr;
  hipEvent_t after = nullptr;
  hipEvent_t elsewhere = nullptr;
  REQUIRE(hipEventCreate(&before) == hipSuccess);
  REQUIRE(hipEventCreate(&after) == hipSuccess);
  REQUIRE(hipEventCreate(&elsewhere) == hipSuccess);
  {
    Gate gate;
    REQUIRE(hipEventRecord(before, failing) == hipSuccess);
    gate.block(failing);
    REQUIRE(hipMemcpyAsync(base, source.data(), bytes, hipMemcpyHostToDevice, failing) == hipSuccess);
    REQUIRE(hipEventRecord(after, failing) == hipSuccess);
    REQUIRE(hipMemsetAsync(elsewhere_buffer, 1, 64, healthy) == hipSuccess);
    REQUIRE(hipEventRecord(elsewhere, healthy) == hipSuccess);
    CHECK(hipMemUnmap(base, bytes) == hipSuccess);
    gate.open();
    CHECK(hipStreamSynchronize(failing) == hipErrorIllegalAddress);
  }
  CHECK(hipStreamQuery(failing) == hipErrorIllegalAddress);
  CHECK(hipEventSynchronize(after) == hipErrorIllegalAddress);
  CHECK(hipEventQuery(after) == hipErrorIllegalAddress);
  CHECK(hipDeviceSynchronize() == hipErrorIllegalAddress);
  // The failure stays the stream's: another stream and its events are unaffected.
  CHECK(hipStreamSynchronize(healthy) == hipSuccess);
  CHECK(hipStreamQuery(healthy) == hipSuccess);
  CHECK(hipEventSynchronize(elsewhere) == hipSuccess);
  CHECK(hipEventQuery(elsewhere) == hipSuccess);
  // Recorded before the failing work, an event does not report it.
  CHECK(hipEventSynchronize(before) == hipSuccess);
  CHECK(hipEventQuery(before) == hipSuccess);
  // A callback queued after it gets it as its status, whichever engine runs the callback.
  CallbackLog log;
  CallbackTicket ticket{&log, 1};
  REQUIRE(hipStreamAddCallback(failing, record_callback, &ticket, 0) == hipSuccess);
  CHECK(hipStreamSynchronize(failing) == hipErrorIllegalAddress);
  REQUIRE(log.size() == 1);
  CHECK(log.entries.front().status == hipErrorIllegalAddress);

  CHECK(hipStreamDestroy(failing) == hipSuccess);
  CHECK(hipDeviceSynchronize() == hipSuccess);
  CHECK(hipEventSynchronize(after) == hipSuccess);  // its stream, and its failure, are gone
  CHECK(hipStreamDestroy(healthy) == hipSuccess);
  for (hipEvent_t event : {before, after, elsewhere}) CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipFree(elsewhere_buffer) == hipSuccess);
}

// Copies from the application's memory and word writes to managed memory run on the stream's host
// thread on every engine, which checks the memory again when it gets there: memory of the
// runtime's that has left its books by then is not taken for the application's own.
TEST_CASE("a copy into a mapping whose reservation was freed before it ran fails with hipErrorIllegalAddress") {
  LeakCheck leaks;
  const std::vector<unsigned char> source(4096, 0x5A);
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  const hipMemAllocationProp prop = TwoMappings::device_prop();
  const std::size_t bytes = TwoMappings::size_for(source.size());
  void* base = nullptr;
  hipMemGenericAllocationHandle_t handle{};
  REQUIRE(hipMemAddressReserve(&base, bytes, 0, nullptr, 0) == hipSuccess);
  REQUIRE(hipMemCreate(&handle, bytes, &prop, 0) == hipSuccess);
  REQUIRE(hipMemMap(base, bytes, 0, handle, 0) == hipSuccess);
  const hipMemAccessDesc access{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  REQUIRE(hipMemSetAccess(base, bytes, &access, 1) == hipSuccess);
  {
    Gate gate;
    gate.block(stream);
    REQUIRE(hipMemcpyAsync(base, source.data(), source.size(), hipMemcpyHostToDevice, stream) == hipSuccess);
    CHECK(hipMemUnmap(base, bytes) == hipSuccess);
    CHECK(hipMemRelease(handle) == hipSuccess);
    CHECK(hipMemAddressFree(base, bytes) == hipSuccess);
    gate.open();
    CHECK(hipStreamSynchronize(stream) == hipErrorIllegalAddress);
  }
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE(
    "memory freed while another device's stream has work on it queued: that work fails with "
    "hipErrorIllegalAddress" *
    doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  // hipFree waits for the memory's own device, not for other devices' streams.
  const std::vector<unsigned char> source(4096, 0x5A);
  REQUIRE(hipSetDevice(1) == hipSuccess);
  hipStream_t on_second = make_stream(hipStreamNonBlocking);
  REQUIRE(hipSetDevice(0) == hipSuccess);

  SUBCASE("device memory, with a copy into it") {
    void* const memory = malloc_device(source.size());
    Gate gate;
    gate.block(on_second);
    REQUIRE(hipMemcpyAsync(memory, source.data(), source.size(), hipMemcpyHostToDevice, on_second) == hipSuccess);
    CHECK(hipFree(memory) == hipSuccess);
    gate.open();
    CHECK(hipStreamSynchronize(on_second) == hipErrorIllegalAddress);
  }

  SUBCASE("managed memory, with a word write and a wait on it") {
    void* managed = nullptr;
    REQUIRE(hipMallocManaged(&managed, 4096, hipMemAttachGlobal) == hipSuccess);
    auto* const word = static_cast<std::uint32_t*>(managed);
    Gate gate;
    gate.block(on_second);
    REQUIRE(hipStreamWriteValue32(on_second, word, 7, 0) == hipSuccess);
    REQUIRE(hipStreamWaitValue32(on_second, word + 1, 1, hipStreamWaitValueEq, 0xFFFFFFFFU) == hipSuccess);
    CHECK(hipFree(managed) == hipSuccess);
    gate.open();
    CHECK(hipStreamSynchronize(on_second) == hipErrorIllegalAddress);
  }

  CHECK(hipStreamDestroy(on_second) == hipSuccess);
}

namespace {
// What a callback got from the calls that would wait for its own stream.
struct SelfWaitingCalls {
  void* memory = nullptr;
  const unsigned char* source = nullptr;
  std::size_t bytes = 0;
  hipError_t freed = hipSuccess;
  hipError_t device_synchronized = hipSuccess;
  hipError_t copied = hipSuccess;
  hipError_t filled = hipSuccess;
};

void call_what_waits_for_itself(hipStream_t /*stream*/, hipError_t /*status*/, void* data) {
  auto* calls = static_cast<SelfWaitingCalls*>(data);
  calls->freed = hipFree(calls->memory);
  calls->device_synchronized = hipDeviceSynchronize();
  calls->copied = hipMemcpy(calls->memory, calls->source, calls->bytes, hipMemcpyHostToDevice);
  calls->filled = hipMemset(calls->memory, 0, calls->bytes);
}
}  // namespace

TEST_CASE(
    "a callback's hipFree, hipDeviceSynchronize and, on a blocking or the null stream, hipMemcpy and hipMemset "
    "would wait for the callback itself: refused with hipErrorIllegalState, not left to hang") {
  LeakCheck leaks;
  const std::vector<unsigned char> source(4096, 0x3C);
  void* const memory = malloc_device(source.size());
  hipStream_t blocking = make_stream(hipStreamDefault);
  for (hipStream_t stream : {blocking, hipStream_t{nullptr}}) {
    CAPTURE(stream);
    SelfWaitingCalls calls{.memory = memory, .source = source.data(), .bytes = source.size()};
    REQUIRE(hipStreamAddCallback(stream, call_what_waits_for_itself, &calls, 0) == hipSuccess);
    CHECK(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(calls.freed == hipErrorIllegalState);
    CHECK(calls.device_synchronized == hipErrorIllegalState);
    CHECK(calls.copied == hipErrorIllegalState);
    CHECK(calls.filled == hipErrorIllegalState);
  }
  // The refused free left the memory allocated and usable.
  REQUIRE(hipMemcpy(memory, source.data(), source.size(), hipMemcpyHostToDevice) == hipSuccess);
  CHECK(test_support::all_bytes_are(read_back(memory, source.size()), 0x3C));
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipFree(memory) == hipSuccess);
}

TEST_CASE("a callback that names its own stream does not keep the stream, or its thread, after it is destroyed") {
  LeakCheck leaks;
  const auto round = [] {
    hipStream_t stream = make_stream(hipStreamNonBlocking);
    REQUIRE(hipStreamAddCallback(
                stream, [](hipStream_t self, hipError_t, void*) { (void)hipStreamQuery(self); }, nullptr, 0) ==
            hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    REQUIRE(hipStreamDestroy(stream) == hipSuccess);
  };
  round();  // whatever the runtime starts once, at the first stream's end, is there from now on
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  const std::size_t before = quiet_thread_count();
  for (int rounds = 0; rounds < 20; ++rounds) round();
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  CHECK(eventually([&] { return thread_count() <= before; }));
}

namespace {
// A stream that its own first callback fills past the bound on what a stream holds (its own thread
// may queue past it), then holds until `let_go` is set.
struct OverfullStream {
  hipStream_t stream = nullptr;
  std::atomic<bool> filled{false};
  std::atomic<bool> let_go{false};

  static void fill_and_hold(void* data) {
    auto* self = static_cast<OverfullStream*>(data);
    for (int task = 0; task < 1100; ++task)
      (void)hipLaunchHostFunc(
          self->stream, [](void*) {}, nullptr);
    self->filled = true;
    while (!self->let_go) std::this_thread::sleep_for(1ms);
  }
};
}  // namespace

namespace {
// An application's thread_local whose destructor names the per-thread stream of a device its thread
// never used. Made before the runtime's state of its thread, it is destroyed after it.
struct LateStreamQuery {
  hipError_t* seen = nullptr;
  ~LateStreamQuery() {
    (void)hipSetDevice(1);
    const hipError_t result = hipStreamQuery(hipStreamPerThread);
    if (seen != nullptr) *seen = result;
  }
};
thread_local LateStreamQuery late_query;
}  // namespace

namespace {
// An application's thread_local, made before the runtime's state of its thread (so destroyed after
// it), whose destructor synchronizes and destroys the stream it was given.
struct StreamEndedLate {
  hipStream_t stream = nullptr;
  hipError_t* synchronized = nullptr;
  hipError_t* destroyed = nullptr;
  ~StreamEndedLate() {
    if (stream == nullptr) return;
    *synchronized = hipStreamSynchronize(stream);
    *destroyed = hipStreamDestroy(stream);
  }
};
thread_local StreamEndedLate ended_late;
}  // namespace

TEST_CASE("a stream a thread_local's destructor synchronizes and destroys at thread exit ends, worker and all") {
  LeakCheck leaks;
  std::thread([] { (void)hipStreamQuery(nullptr); }).join();
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  const std::size_t before = quiet_thread_count();
  constexpr int kThreads = 20;
  std::vector<hipError_t> results(2 * kThreads, hipErrorUnknown);
  std::vector<hipError_t> created(kThreads, hipErrorUnknown);
  for (int index = 0; index < kThreads; ++index) {
    std::thread([&, index] {
      ended_late.stream = nullptr;  // the application's thread_local is made first
      hipStream_t stream = nullptr;
      created[index] = hipStreamCreate(&stream);
      (void)hipStreamSynchronize(stream);  // then the runtime's state of the thread
      ended_late.synchronized = &results[2 * index];
      ended_late.destroyed = &results[2 * index + 1];
      ended_late.stream = stream;
    }).join();
  }
  for (const hipError_t result : created) CHECK(result == hipSuccess);
  for (const hipError_t result : results) CHECK(result == hipSuccess);
  CHECK(settled_thread_count(before) == before);
}

TEST_CASE("the per-thread stream named after the thread's runtime state went is no stream, and none is made" *
          doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  // Whatever the runtime starts once, at the first per-thread stream's end, is there from now on.
  std::thread([] { (void)hipStreamQuery(hipStreamPerThread); }).join();
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  const std::size_t before = quiet_thread_count();
  std::vector<hipError_t> seen(20, hipSuccess);
  for (hipError_t& result : seen) {
    std::thread([&result] {
      late_query.seen = &result;
      (void)hipStreamQuery(hipStreamPerThread);  // device 0's: the runtime's state of the thread is made
    }).join();
  }
  for (const hipError_t result : seen) CHECK(result == hipErrorInvalidHandle);
  CHECK(settled_thread_count(before) == before);
}

namespace {
// A callback that waits until the test has queued what it needs behind it, then makes `call`.
struct GatedCall {
  std::atomic<bool> go = false;
  std::function<hipError_t()> call;
  hipError_t result = hipErrorUnknown;
};

void run_gated_call(void* data) {
  auto* gated = static_cast<GatedCall*>(data);
  while (!gated->go.load()) std::this_thread::yield();
  gated->result = gated->call();
}
}  // namespace

TEST_CASE("a callback's synchronous copy that would wait for it through another stream's event wait is refused") {
  LeakCheck leaks;
  const std::vector<unsigned char> source(64, 0x2B);
  void* const memory = malloc_device(source.size());
  hipStream_t running = make_stream(hipStreamNonBlocking);
  hipStream_t blocking = make_stream(hipStreamDefault);
  hipEvent_t before = nullptr;
  hipEvent_t after = nullptr;
  REQUIRE(hipEventCreate(&before) == hipSuccess);
  REQUIRE(hipEventCreate(&after) == hipSuccess);
  for (const bool waits_for_later : {false, true}) {
    CAPTURE(waits_for_later);
    GatedCall copy;
    copy.call = [&] { return hipMemcpy(memory, source.data(), source.size(), hipMemcpyHostToDevice); };
    REQUIRE(hipEventRecord(before, running) == hipSuccess);
    REQUIRE(hipLaunchHostFunc(running, run_gated_call, &copy) == hipSuccess);
    REQUIRE(hipEventRecord(after, running) == hipSuccess);
    // The blocking stream, which the null stream's synchronous copy waits for, waits for the
    // callback's stream: after the callback, or (no cycle) only up to before it.
    REQUIRE(hipStreamWaitEvent(blocking, waits_for_later ? after : before, 0) == hipSuccess);
    copy.go = true;
    CHECK(hipStreamSynchronize(running) == hipSuccess);
    CHECK(copy.result == (waits_for_later ? hipErrorIllegalState : hipSuccess));
    CHECK(hipStreamSynchronize(blocking) == hipSuccess);
  }
  CHECK(hipEventDestroy(before) == hipSuccess);
  CHECK(hipEventDestroy(after) == hipSuccess);
  CHECK(hipStreamDestroy(running) == hipSuccess);
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipFree(memory) == hipSuccess);
}

TEST_CASE("a callback's hipFree of another device's memory, whose stream waits for the callback, is refused" *
          doctest::test_suite("devices-2")) {
  LeakCheck leaks;
  REQUIRE(hipSetDevice(1) == hipSuccess);
  void* const other_memory = malloc_device(4096);
  hipStream_t other = make_stream(hipStreamNonBlocking);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  hipStream_t running = make_stream(hipStreamNonBlocking);
  hipEvent_t after = nullptr;
  REQUIRE(hipEventCreate(&after) == hipSuccess);
  GatedCall free_call;
  free_call.call = [&] { return hipFree(other_memory); };
  REQUIRE(hipLaunchHostFunc(running, run_gated_call, &free_call) == hipSuccess);
  REQUIRE(hipEventRecord(after, running) == hipSuccess);
  REQUIRE(hipStreamWaitEvent(other, after, 0) == hipSuccess);
  free_call.go = true;
  CHECK(hipStreamSynchronize(running) == hipSuccess);
  CHECK(free_call.result == hipErrorIllegalState);
  // Refused, the memory is as it was, and is freed once the wait is over.
  CHECK(hipStreamSynchronize(other) == hipSuccess);
  CHECK(hipFree(other_memory) == hipSuccess);
  CHECK(hipEventDestroy(after) == hipSuccess);
  CHECK(hipStreamDestroy(running) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
}

namespace {
// A child process of this executable (HIPXX_TEST_STREAMS_CHILD=at-exit) uses a stream and the null
// stream in main's place, then exits: its atexit handler, which glibc runs after the exiting thread's
// thread_locals are gone, uses them again, and exits with the number of calls that failed.
void* at_exit_memory = nullptr;
hipStream_t at_exit_stream = nullptr;

void use_streams_at_exit() {
  constexpr std::size_t kBytes = 4096;
  int failures = 0;
  const auto check = [&failures](bool passed) { failures += passed ? 0 : 1; };
  check(hipStreamQuery(at_exit_stream) == hipSuccess);
  check(hipMemsetAsync(at_exit_memory, 2, kBytes, at_exit_stream) == hipSuccess);
  check(hipStreamSynchronize(at_exit_stream) == hipSuccess);
  check(hipMemsetAsync(at_exit_memory, 3, kBytes, nullptr) == hipSuccess);
  check(hipStreamSynchronize(nullptr) == hipSuccess);
  std::array<unsigned char, kBytes> host{};
  check(hipMemcpy(host.data(), at_exit_memory, kBytes, hipMemcpyDeviceToHost) == hipSuccess);
  check(host.front() == 3 && host.back() == 3);
  // The per-thread stream went with the thread's state.
  check(hipStreamQuery(hipStreamPerThread) == hipErrorInvalidHandle);
  check(hipStreamDestroy(at_exit_stream) == hipSuccess);
  check(hipFree(at_exit_memory) == hipSuccess);
  std::fflush(nullptr);
  _exit(failures);
}

struct AtExitChild {
  AtExitChild() {
    const char* mode = std::getenv("HIPXX_TEST_STREAMS_CHILD");
    if (mode == nullptr || std::string_view{mode} != "at-exit") return;
    if (hipMalloc(&at_exit_memory, 4096) != hipSuccess || hipStreamCreate(&at_exit_stream) != hipSuccess ||
        hipMemsetAsync(at_exit_memory, 1, 4096, at_exit_stream) != hipSuccess ||
        hipStreamQuery(hipStreamPerThread) != hipSuccess || hipDeviceSynchronize() != hipSuccess ||
        std::atexit(use_streams_at_exit) != 0) {
      _exit(100);
    }
    std::exit(101);  // the handler exits first, with its own code
  }
};
const AtExitChild at_exit_child;

// Runs this executable again as the child `mode`; its exit code.
int run_streams_child(const char* mode) {
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) environment.emplace_back(*variable);
  environment.push_back(std::string{"HIPXX_TEST_STREAMS_CHILD="} + mode);
  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::array<char*, 2> argv{const_cast<char*>("/proc/self/exe"), nullptr};
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
}  // namespace

TEST_CASE("streams and the null stream work in an atexit handler, after the exiting thread's state went") {
  CHECK(run_streams_child("at-exit") == 0);
}

TEST_CASE("work offered to a stream while it is destroyed, by a thread that waited for room, is refused") {
  LeakCheck leaks;
  std::uint32_t word = 0;
  void* managed = nullptr;
  REQUIRE(hipMallocManaged(&managed, 4096) == hipSuccess);
  const auto last_prefetch = [managed] {
    int location = -100;
    REQUIRE(hipMemRangeGetAttribute(&location, sizeof location, hipMemRangeAttributeLastPrefetchLocation, managed,
                                    4096) == hipSuccess);
    return location;
  };
  const int prefetched_before = last_prefetch();
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreate(&event) == hipSuccess);
  hipStream_t held = make_stream(hipStreamNonBlocking);
  Gate gate;
  gate.block(held);
  REQUIRE(hipEventRecord(event, held) == hipSuccess);  // not reached: a wait for it is queued
  std::function<hipError_t(hipStream_t)> offer;
  // Whether the work ran after all, where that shows (unset where it does not).
  std::function<bool()> ran;
  // The code of the refusal: hipErrorInvalidValue where the call documents no hipErrorInvalidHandle.
  hipError_t refusal = hipErrorInvalidHandle;
  SUBCASE("a value write") {
    offer = [&word](hipStream_t stream) { return hipStreamWriteValue32(stream, &word, 1, 0); };
    ran = [&word] { return word == 1; };
    refusal = hipErrorInvalidValue;
  }
  SUBCASE("an event record") {
    offer = [](hipStream_t stream) {
      hipEvent_t own = nullptr;
      REQUIRE(hipEventCreate(&own) == hipSuccess);
      const hipError_t result = hipEventRecord(own, stream);
      CHECK(hipEventDestroy(own) == hipSuccess);
      return result;
    };
  }
  SUBCASE("a wait for an event") {
    offer = [event](hipStream_t stream) { return hipStreamWaitEvent(stream, event, 0); };
  }
  // Whether the event is complete afterwards, whichever way the record went: a refused record takes
  // no number that nothing would ever reach.
  hipEvent_t interprocess = nullptr;
  REQUIRE(hipEventCreateWithFlags(&interprocess, hipEventInterprocess | hipEventDisableTiming) == hipSuccess);
  std::function<bool()> settled;
  SUBCASE("an interprocess event's record") {
    offer = [interprocess](hipStream_t stream) { return hipEventRecord(interprocess, stream); };
    settled = [interprocess] { return hipEventQuery(interprocess) == hipSuccess; };
  }
  SUBCASE("a managed memory attach") {
    offer = [managed](hipStream_t stream) { return hipStreamAttachMemAsync(stream, managed, 0, hipMemAttachGlobal); };
    refusal = hipErrorInvalidValue;
  }
  SUBCASE("a managed memory prefetch") {
    offer = [managed](hipStream_t stream) { return hipMemPrefetchAsync(managed, 4096, 0, stream); };
    ran = [&] { return last_prefetch() != prefetched_before; };
    refusal = hipErrorInvalidValue;
  }
  OverfullStream full;
  full.stream = make_stream(hipStreamNonBlocking);
  REQUIRE(hipLaunchHostFunc(full.stream, OverfullStream::fill_and_hold, &full) == hipSuccess);
  REQUIRE(eventually([&] { return full.filled.load(); }));
  hipError_t late = hipSuccess;
  std::atomic<bool> returned{false};
  // Resolves the stream, then waits for room (or, where it comes later, finds the handle gone).
  std::thread offering([&] {
    late = offer(full.stream);
    returned = true;
  });
  std::this_thread::sleep_for(100ms);
  // A stream whose work goes to a driver's queue (CUDA's) has no bound to wait at: there the work
  // was accepted before the destroy, and it runs as the stream's last work.
  const bool waited_for_room = !returned;
  CHECK(hipStreamDestroy(full.stream) == hipSuccess);
  full.let_go = true;
  offering.join();
  gate.open();
  CHECK(hipDeviceSynchronize() == hipSuccess);
  std::this_thread::sleep_for(20ms);  // room for work that slipped behind the stream's end to show
  if (waited_for_room) {
    CHECK(late == refusal);
    if (ran) CHECK_FALSE(ran());  // nothing of it ran after the stream's end
  } else {
    MESSAGE("the work did not wait for room: accepted before the destroy");
    CHECK(late == hipSuccess);
    if (ran) CHECK(ran());
  }
  if (settled) CHECK(settled());
  CHECK(hipEventDestroy(interprocess) == hipSuccess);
  CHECK(hipStreamDestroy(held) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipFree(managed) == hipSuccess);
}

TEST_CASE("a synchronous copy that fails reports its failure once: the null stream it ran on is not left failed") {
  LeakCheck leaks;
  const UnmappedLater mapping;
  const std::size_t bytes = mapping.bytes;
  void* const base = mapping.base;
  const std::vector<unsigned char> source(bytes, 0x3D);
  hipStream_t blocking = make_stream(hipStreamDefault);
  hipError_t copied = hipSuccess;
  {
    // The copy waits on the null stream behind the held blocking stream, checked and queued; its
    // destination is unmapped before it runs.
    Gate gate;
    gate.block(blocking);
    std::thread copier([&] { copied = hipMemcpy(base, source.data(), bytes, hipMemcpyHostToDevice); });
    CHECK(eventually([] { return hipStreamQuery(nullptr) == hipErrorNotReady; }));
    CHECK(hipMemUnmap(base, bytes) == hipSuccess);
    gate.open();
    copier.join();
  }
  CHECK(copied == hipErrorIllegalAddress);
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(hipDeviceSynchronize() == hipSuccess);
  void* other = malloc_device(64);
  CHECK(hipMemset(other, 1, 64) == hipSuccess);
  CHECK(hipFree(other) == hipSuccess);
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
}

namespace {
void sleep_200ms(void* /*unused*/) { std::this_thread::sleep_for(200ms); }
void wait_until_released(void* released) {
  while (!static_cast<std::atomic<bool>*>(released)->load()) std::this_thread::sleep_for(1ms);
}
}  // namespace

// A synchronize waits for the work queued before it is called. Work another thread queues while it
// waits is not its to wait for: here that work waits for the synchronizing thread, which would
// then never return (the check lets it go after 5 s).
TEST_CASE("null-stream and device synchronize wait for the work queued before them, not for work queued meanwhile") {
  LeakCheck leaks;
  hipStream_t blocking = make_stream();
  std::function<hipError_t()> synchronize;
  SUBCASE("hipStreamSynchronize of the null stream") {
    synchronize = [] { return hipStreamSynchronize(nullptr); };
  }
  SUBCASE("hipDeviceSynchronize") {
    // On CUDA it ends with cuCtxSynchronize, which also covers the application's own CUDA streams,
    // and which waits for whatever is queued in the context when it is called: the work another
    // thread queued meanwhile too (seen on an H100). The driver defines that wait, not hipxx.
    if (std::string_view{hipxxGetBackendName()} == "cuda") {
      MESSAGE("CUDA backend: hipDeviceSynchronize is the driver's context synchronize here");
      CHECK(hipStreamDestroy(blocking) == hipSuccess);
      return;
    }
    synchronize = [] { return hipDeviceSynchronize(); };
  }
  std::atomic<bool> released{false};
  std::atomic<bool> returned{false};
  REQUIRE(hipLaunchHostFunc(nullptr, sleep_200ms, nullptr) == hipSuccess);
  std::thread other([&] {
    std::this_thread::sleep_for(100ms);
    CHECK(hipLaunchHostFunc(blocking, wait_until_released, &released) == hipSuccess);
  });
  std::thread backstop([&] {
    for (int waited = 0; waited < 5000 && !returned; ++waited) std::this_thread::sleep_for(1ms);
    released = true;
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK(synchronize() == hipSuccess);
  const auto took = std::chrono::steady_clock::now() - start;
  returned = true;
  CHECK(took < 3s);
  CHECK_FALSE(released.load());  // the synchronize returned before anything let the later work go
  released = true;
  other.join();
  backstop.join();
  CHECK(hipStreamSynchronize(blocking) == hipSuccess);
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
}
