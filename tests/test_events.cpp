// Events: creation flags and refusals, record on streams and the null stream, query, synchronize,
// elapsed time and its refusals, re-record semantics, hipStreamWaitEvent, destroyed events.
#include "stream_test_support.hpp"

#include <pthread.h>
#include <sched.h>

#include <string>

using namespace stest;
using namespace std::chrono_literals;

namespace {

hipEvent_t make_event(unsigned flags = hipEventDefault) {
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreateWithFlags(&event, flags) == hipSuccess);
  REQUIRE(event != nullptr);
  return event;
}

// Queues a copy of `buffer` to the host on `consumer`, which must still be held after the settle
// time; opens `gate`, and checks that the copy then ran and saw `expected` in every byte.
void check_held_until_open(hipStream_t consumer, const void* buffer, std::size_t bytes, Gate& gate,
                           unsigned char expected) {
  std::vector<unsigned char> seen(bytes, 0);
  REQUIRE(hipMemcpyAsync(seen.data(), buffer, bytes, hipMemcpyDeviceToHost, consumer) == hipSuccess);
  std::atomic<bool> consumer_done{false};
  add_flag_callback(consumer, &consumer_done);
  CHECK(still_pending(consumer));
  CHECK_FALSE(consumer_done.load());
  gate.open();
  CHECK(hipStreamSynchronize(consumer) == hipSuccess);
  CHECK(consumer_done.load());
  CHECK(seen == std::vector<unsigned char>(bytes, expected));
}

void sleep_callback(hipStream_t, hipError_t, void* user_data) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(user_data)));
}

}  // namespace

TEST_SUITE_BEGIN("events");

TEST_CASE("hipEventCreate and hipEventCreateWithFlags accept every documented flag") {
  LeakCheck leaks;
  std::vector<hipEvent_t> events;
  hipEvent_t plain = nullptr;
  REQUIRE(hipEventCreate(&plain) == hipSuccess);
  events.push_back(plain);
  for (const unsigned flags :
       {unsigned{hipEventDefault}, unsigned{hipEventBlockingSync}, unsigned{hipEventDisableTiming},
        unsigned{hipEventInterprocess | hipEventDisableTiming}, unsigned{hipEventBlockingSync | hipEventDisableTiming},
        unsigned{hipEventDisableSystemFence}, unsigned{hipEventReleaseToDevice}, unsigned{hipEventReleaseToSystem}}) {
    CAPTURE(flags);
    events.push_back(make_event(flags));
  }
  std::vector<hipEvent_t> sorted = events;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (hipEvent_t event : events) {
    CHECK(hipEventQuery(event) == hipSuccess);  // never recorded: complete
    CHECK(hipEventSynchronize(event) == hipSuccess);
    CHECK(hipEventRecord(event, nullptr) == hipSuccess);
    CHECK(hipEventSynchronize(event) == hipSuccess);
    CHECK(hipEventQuery(event) == hipSuccess);
  }
  for (hipEvent_t event : events) CHECK(hipEventDestroy(event) == hipSuccess);
}

TEST_CASE("hipEventCreateWithFlags refuses unknown flags, interprocess with timing, and a null out pointer") {
  LeakCheck leaks;
  const hipEvent_t sentinel = reinterpret_cast<hipEvent_t>(std::uintptr_t{0xbeef0});
  for (const unsigned flags : {0x8U, 0x10U, 0x100U, 0x10000000U, unsigned{hipEventInterprocess},
                               unsigned{hipEventInterprocess | hipEventBlockingSync}}) {
    CAPTURE(flags);
    hipEvent_t event = sentinel;
    CHECK(hipEventCreateWithFlags(&event, flags) == hipErrorInvalidValue);
    CHECK(event == sentinel);
  }
  CHECK(hipEventCreate(nullptr) == hipErrorInvalidValue);
  CHECK(hipEventCreateWithFlags(nullptr, hipEventDefault) == hipErrorInvalidValue);
}

TEST_CASE("record on a stream: NotReady while the stream is held, hipSuccess after, and synchronize waits") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  hipEvent_t before = make_event();
  hipEvent_t after = make_event();
  REQUIRE(hipEventRecord(before, stream) == hipSuccess);
  gate.block(stream);
  REQUIRE(hipEventRecord(after, stream) == hipSuccess);
  CHECK(eventually([&] { return hipEventQuery(before) == hipSuccess; }));
  CHECK(hipEventSynchronize(before) == hipSuccess);
  std::this_thread::sleep_for(kSettle);
  CHECK(hipEventQuery(after) == hipErrorNotReady);
  const auto start = std::chrono::steady_clock::now();
  std::thread opener = gate.open_later(80ms);
  CHECK(hipEventSynchronize(after) == hipSuccess);
  CHECK(std::chrono::steady_clock::now() - start >= 70ms);
  opener.join();
  CHECK(hipEventQuery(after) == hipSuccess);
  CHECK(hipEventDestroy(before) == hipSuccess);
  CHECK(hipEventDestroy(after) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("record on the null stream, hipStreamLegacy and hipStreamPerThread") {
  LeakCheck leaks;
  hipEvent_t event = make_event();
  CHECK(hipEventRecord(event) == hipSuccess);  // the default stream argument is the null stream
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipEventQuery(event) == hipSuccess);
  for (hipStream_t special : {hipStream_t{nullptr}, hipStreamLegacy, hipStreamPerThread}) {
    CHECK(hipEventRecord(event, special) == hipSuccess);
    CHECK(hipEventSynchronize(event) == hipSuccess);
    CHECK(hipEventQuery(event) == hipSuccess);
  }

  // A record on the null stream completes only after earlier work of blocking streams.
  Gate gate;
  hipStream_t blocking = make_stream(hipStreamDefault);
  gate.block(blocking);
  CHECK(hipEventRecord(event, nullptr) == hipSuccess);
  std::this_thread::sleep_for(kSettle);
  CHECK(hipEventQuery(event) == hipErrorNotReady);
  gate.open();
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipEventQuery(event) == hipSuccess);

  // ... and a record on a blocking stream completes only after earlier null-stream work.
  Gate null_gate;
  null_gate.block(nullptr);
  CHECK(hipEventRecord(event, blocking) == hipSuccess);
  std::this_thread::sleep_for(kSettle);
  CHECK(hipEventQuery(event) == hipErrorNotReady);
  null_gate.open();
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipStreamDestroy(blocking) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}

TEST_CASE("hipEventElapsedTime measures at least the sleep between two records") {
  LeakCheck leaks;
  hipStream_t stream = make_stream();
  hipEvent_t start = make_event();
  hipEvent_t stop = make_event(hipEventBlockingSync);
  int sleep_ms = 120;
  REQUIRE(hipEventRecord(start, stream) == hipSuccess);
  REQUIRE(hipStreamAddCallback(stream, sleep_callback, &sleep_ms, 0) == hipSuccess);
  REQUIRE(hipEventRecord(stop, stream) == hipSuccess);
  REQUIRE(hipEventSynchronize(stop) == hipSuccess);
  float ms = -1.0F;
  CHECK(hipEventElapsedTime(&ms, start, stop) == hipSuccess);
  CHECK(ms >= 119.9F);
  CHECK(ms < 5000.0F);
  // Reversed: the negative span.
  float reversed = 1.0F;
  CHECK(hipEventElapsedTime(&reversed, stop, start) == hipSuccess);
  CHECK(reversed <= -119.9F);
  // The same event twice: zero.
  float same = -1.0F;
  CHECK(hipEventElapsedTime(&same, start, start) == hipSuccess);
  CHECK(same == 0.0F);
  CHECK(hipEventElapsedTime(nullptr, start, stop) == hipErrorInvalidValue);

  // Across streams, the records ordered by the host.
  hipStream_t other = make_stream(hipStreamNonBlocking);
  REQUIRE(hipEventRecord(start, other) == hipSuccess);
  REQUIRE(hipEventSynchronize(start) == hipSuccess);
  std::this_thread::sleep_for(30ms);
  REQUIRE(hipEventRecord(stop, stream) == hipSuccess);
  REQUIRE(hipEventSynchronize(stop) == hipSuccess);
  CHECK(hipEventElapsedTime(&ms, start, stop) == hipSuccess);
  CHECK(ms >= 29.9F);
  CHECK(hipEventDestroy(start) == hipSuccess);
  CHECK(hipEventDestroy(stop) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
}

TEST_CASE("hipEventElapsedTime refusals: disabled timing, unrecorded, pending, destroyed") {
  LeakCheck leaks;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  hipEvent_t timed = make_event();
  hipEvent_t other = make_event();
  hipEvent_t untimed = make_event(hipEventDisableTiming);
  float ms = 42.0F;

  // Neither recorded.
  CHECK(hipEventElapsedTime(&ms, timed, other) == hipErrorInvalidHandle);
  REQUIRE(hipEventRecord(timed, stream) == hipSuccess);
  REQUIRE(hipEventSynchronize(timed) == hipSuccess);
  // One recorded.
  CHECK(hipEventElapsedTime(&ms, timed, other) == hipErrorInvalidHandle);
  CHECK(hipEventElapsedTime(&ms, other, timed) == hipErrorInvalidHandle);
  // Disabled timing, recorded and complete.
  REQUIRE(hipEventRecord(untimed, stream) == hipSuccess);
  REQUIRE(hipEventSynchronize(untimed) == hipSuccess);
  CHECK(hipEventElapsedTime(&ms, timed, untimed) == hipErrorInvalidHandle);
  CHECK(hipEventElapsedTime(&ms, untimed, timed) == hipErrorInvalidHandle);
  CHECK(hipEventElapsedTime(&ms, untimed, untimed) == hipErrorInvalidHandle);
  CHECK(ms == 42.0F);

  // Pending.
  Gate gate;
  gate.block(stream);
  REQUIRE(hipEventRecord(other, stream) == hipSuccess);
  std::this_thread::sleep_for(kSettle);
  CHECK(hipEventElapsedTime(&ms, timed, other) == hipErrorNotReady);
  CHECK(hipEventElapsedTime(&ms, other, timed) == hipErrorNotReady);
  CHECK(ms == 42.0F);
  gate.open();
  REQUIRE(hipEventSynchronize(other) == hipSuccess);
  CHECK(hipEventElapsedTime(&ms, timed, other) == hipSuccess);
  CHECK(ms >= 0.0F);

  // Destroyed.
  CHECK(hipEventDestroy(other) == hipSuccess);
  CHECK(hipEventElapsedTime(&ms, timed, other) == hipErrorInvalidHandle);
  CHECK(hipEventElapsedTime(&ms, other, timed) == hipErrorInvalidHandle);
  CHECK(hipEventDestroy(timed) == hipSuccess);
  CHECK(hipEventDestroy(untimed) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("re-recording: query and synchronize follow the latest record only") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t held = make_stream(hipStreamNonBlocking);
  hipStream_t idle = make_stream(hipStreamNonBlocking);
  hipEvent_t event = make_event();
  gate.block(held);

  // Pending record, then a record on an idle stream: the event is complete.
  REQUIRE(hipEventRecord(event, held) == hipSuccess);
  std::this_thread::sleep_for(kSettle);
  CHECK(hipEventQuery(event) == hipErrorNotReady);
  REQUIRE(hipEventRecord(event, idle) == hipSuccess);
  CHECK(eventually([&] { return hipEventQuery(event) == hipSuccess; }));
  CHECK(hipEventSynchronize(event) == hipSuccess);  // does not wait for the held stream
  CHECK(hipStreamQuery(held) == hipErrorNotReady);

  // Complete record, then a record on the held stream: pending again.
  REQUIRE(hipEventRecord(event, held) == hipSuccess);
  std::this_thread::sleep_for(kSettle);
  CHECK(hipEventQuery(event) == hipErrorNotReady);
  // A stream waiting on the event waits for the latest record.
  hipStream_t waiter = make_stream(hipStreamNonBlocking);
  REQUIRE(hipStreamWaitEvent(waiter, event, 0) == hipSuccess);
  std::atomic<bool> waited{false};
  add_flag_callback(waiter, &waited);
  CHECK(still_pending(waiter));
  CHECK_FALSE(waited.load());
  gate.open();
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipEventQuery(event) == hipSuccess);
  CHECK(hipStreamSynchronize(waiter) == hipSuccess);
  CHECK(waited.load());

  // Re-recording on the same stream after it drained.
  REQUIRE(hipEventRecord(event, held) == hipSuccess);
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipEventQuery(event) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
  for (hipStream_t stream : {held, idle, waiter}) CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("hipStreamWaitEvent makes one stream wait for another stream's event") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 4096;
  void* buffer = nullptr;
  REQUIRE(hipMalloc(&buffer, kBytes) == hipSuccess);
  REQUIRE(hipMemset(buffer, 0, kBytes) == hipSuccess);
  Gate gate;
  hipStream_t producer = make_stream(hipStreamNonBlocking);
  hipStream_t consumer = make_stream(hipStreamNonBlocking);
  hipEvent_t early = make_event();
  hipEvent_t ready = make_event(hipEventDisableTiming);

  // An event recorded before the gate does not hold the consumer.
  REQUIRE(hipEventRecord(early, producer) == hipSuccess);
  gate.block(producer);
  REQUIRE(hipMemsetAsync(buffer, 0x61, kBytes, producer) == hipSuccess);
  REQUIRE(hipEventRecord(ready, producer) == hipSuccess);
  REQUIRE(hipStreamWaitEvent(consumer, early, 0) == hipSuccess);
  std::atomic<bool> early_passed{false};
  add_flag_callback(consumer, &early_passed);
  CHECK(eventually([&] { return early_passed.load(); }));

  // One recorded behind the gate does: the copy waits, then sees the producer's memset.
  REQUIRE(hipStreamWaitEvent(consumer, ready, 0) == hipSuccess);
  check_held_until_open(consumer, buffer, kBytes, gate, 0x61);

  // The null stream and a never-recorded event.
  hipEvent_t never = make_event();
  CHECK(hipStreamWaitEvent(consumer, never, 0) == hipSuccess);
  CHECK(hipStreamSynchronize(consumer) == hipSuccess);
  Gate second;
  second.block(producer);
  REQUIRE(hipEventRecord(ready, producer) == hipSuccess);
  CHECK(hipStreamWaitEvent(nullptr, ready, 0) == hipSuccess);
  std::atomic<bool> null_done{false};
  add_flag_callback(nullptr, &null_done);
  CHECK(still_pending(nullptr));
  CHECK_FALSE(null_done.load());
  second.open();
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(null_done.load());

  // Refusals.
  CHECK(hipStreamWaitEvent(consumer, ready, 1) == hipErrorInvalidValue);
  CHECK(hipStreamWaitEvent(consumer, ready, 0xFFFFFFFFU) == hipErrorInvalidValue);
  CHECK(hipStreamWaitEvent(consumer, nullptr, 0) == hipErrorInvalidHandle);
  CHECK(hipStreamQuery(consumer) == hipSuccess);

  for (hipEvent_t event : {early, ready, never}) CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipStreamDestroy(producer) == hipSuccess);
  CHECK(hipStreamDestroy(consumer) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

TEST_CASE("a wait queued before its event is recorded again waits for that record, not the later one") {
  LeakCheck leaks;
  constexpr std::size_t kBytes = 4096;
  void* buffer = nullptr;
  REQUIRE(hipMalloc(&buffer, kBytes) == hipSuccess);
  hipStream_t producer = make_stream(hipStreamNonBlocking);
  hipStream_t consumer = make_stream(hipStreamNonBlocking);
  hipStream_t other = make_stream(hipStreamNonBlocking);
  for (const unsigned flags : {hipEventDefault, hipEventDisableTiming}) {
    CAPTURE(flags);
    REQUIRE(hipMemset(buffer, 0, kBytes) == hipSuccess);
    Gate gate;
    hipEvent_t event = make_event(flags);
    gate.block(producer);
    REQUIRE(hipMemsetAsync(buffer, 0x5C, kBytes, producer) == hipSuccess);
    REQUIRE(hipEventRecord(event, producer) == hipSuccess);
    REQUIRE(hipStreamWaitEvent(consumer, event, 0) == hipSuccess);
    // Recorded again where nothing holds it: that record is passed at once, and the event with it.
    REQUIRE(hipEventRecord(event, other) == hipSuccess);
    REQUIRE(hipStreamSynchronize(other) == hipSuccess);
    CHECK(hipEventQuery(event) == hipSuccess);
    // The consumer still waits for the producer's record.
    check_held_until_open(consumer, buffer, kBytes, gate, 0x5C);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }
  CHECK(hipStreamDestroy(producer) == hipSuccess);
  CHECK(hipStreamDestroy(consumer) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
  CHECK(hipFree(buffer) == hipSuccess);
}

// A record queued behind host work of its stream (a wait for a word of application memory, which
// every backend waits for on the stream's host thread) reaches the device only once that work is
// done: after a later record of the same event went straight onto another stream's queue. The event
// stands for the later record all the same.
TEST_CASE("a record held back behind host work does not take the event from a later record: waits") {
  LeakCheck leaks;
  hipStream_t held = make_stream(hipStreamNonBlocking);
  hipStream_t later = make_stream(hipStreamNonBlocking);
  hipStream_t waiter = make_stream(hipStreamNonBlocking);
  for (const unsigned flags : {hipEventDefault, hipEventDisableTiming}) {
    CAPTURE(flags);
    alignas(8) std::uint32_t host_word = 0;
    Gate before_held_record;  // opened only by the waiter, after its wait
    Gate before_later_record;
    hipEvent_t event = make_event(flags);
    REQUIRE(hipStreamWaitValue32(held, &host_word, 1, hipStreamWaitValueEq, 0xFFFFFFFFU) == hipSuccess);
    before_held_record.block(held);
    REQUIRE(hipEventRecord(event, held) == hipSuccess);
    before_later_record.block(later);
    REQUIRE(hipEventRecord(event, later) == hipSuccess);  // the latest record
    __atomic_store_n(&host_word, 1U, __ATOMIC_SEQ_CST);
    std::this_thread::sleep_for(50ms);  // the held stream's thread puts its record on the device meanwhile
    REQUIRE(hipStreamWaitEvent(waiter, event, 0) == hipSuccess);
    REQUIRE(hipStreamWriteValue32(waiter, before_held_record.word(), 1, 0) == hipSuccess);
    before_later_record.open();
    // Waiting for the held record instead, the waiter would wait for the gate it opens itself.
    CHECK(eventually([&] { return hipStreamQuery(waiter) == hipSuccess; }));
    before_held_record.open();
    CHECK(hipStreamSynchronize(held) == hipSuccess);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }
  CHECK(hipStreamDestroy(held) == hipSuccess);
  CHECK(hipStreamDestroy(later) == hipSuccess);
  CHECK(hipStreamDestroy(waiter) == hipSuccess);
}

TEST_CASE("a record held back behind host work does not take the event from a later record: elapsed time") {
  LeakCheck leaks;
  hipStream_t held = make_stream(hipStreamNonBlocking);
  hipStream_t later = make_stream(hipStreamNonBlocking);
  alignas(8) std::uint32_t host_word = 0;
  hipEvent_t start = make_event();
  hipEvent_t stop = make_event();
  REQUIRE(hipStreamWaitValue32(held, &host_word, 1, hipStreamWaitValueEq, 0xFFFFFFFFU) == hipSuccess);
  REQUIRE(hipEventRecord(stop, held) == hipSuccess);
  REQUIRE(hipEventRecord(start, later) == hipSuccess);
  REQUIRE(hipEventRecord(stop, later) == hipSuccess);  // the latest record, right after start
  REQUIRE(hipEventSynchronize(stop) == hipSuccess);
  float first = -1.0F;
  REQUIRE(hipEventElapsedTime(&first, start, stop) == hipSuccess);
  std::this_thread::sleep_for(200ms);
  __atomic_store_n(&host_word, 1U, __ATOMIC_SEQ_CST);  // the earlier record of stop passes now
  REQUIRE(hipStreamSynchronize(held) == hipSuccess);
  float second = -1.0F;
  REQUIRE(hipEventElapsedTime(&second, start, stop) == hipSuccess);
  CHECK(second == first);
  CHECK(second < 100.0F);
  CHECK(hipEventDestroy(start) == hipSuccess);
  CHECK(hipEventDestroy(stop) == hipSuccess);
  CHECK(hipStreamDestroy(held) == hipSuccess);
  CHECK(hipStreamDestroy(later) == hipSuccess);
}

TEST_CASE("destroyed and forged events are refused with hipErrorInvalidHandle") {
  LeakCheck leaks;
  hipStream_t stream = make_stream();
  hipEvent_t event = make_event();
  REQUIRE(hipEventRecord(event, stream) == hipSuccess);
  REQUIRE(hipEventDestroy(event) == hipSuccess);
  hipEvent_t alive = make_event();
  REQUIRE(hipEventRecord(alive, stream) == hipSuccess);
  int on_stack = 0;
  for (hipEvent_t bad : {event, hipEvent_t{nullptr}, reinterpret_cast<hipEvent_t>(std::uintptr_t{0x10}),
                         reinterpret_cast<hipEvent_t>(&on_stack)}) {
    CAPTURE(reinterpret_cast<std::uintptr_t>(bad));
    float ms = 5.0F;
    CHECK(hipEventDestroy(bad) == hipErrorInvalidHandle);
    CHECK(hipEventRecord(bad, stream) == hipErrorInvalidHandle);
    CHECK(hipEventRecord(bad, nullptr) == hipErrorInvalidHandle);
    CHECK(hipEventQuery(bad) == hipErrorInvalidHandle);
    CHECK(hipEventSynchronize(bad) == hipErrorInvalidHandle);
    CHECK(hipEventElapsedTime(&ms, bad, alive) == hipErrorInvalidHandle);
    CHECK(hipEventElapsedTime(&ms, alive, bad) == hipErrorInvalidHandle);
    CHECK(hipStreamWaitEvent(stream, bad, 0) == hipErrorInvalidHandle);
    CHECK(ms == 5.0F);
  }
  // A destroyed event's pending record still runs harmlessly; the stream drains.
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(hipEventDestroy(alive) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("an event outlives the stream it was recorded on") {
  LeakCheck leaks;
  hipStream_t stream = make_stream();
  hipEvent_t start = make_event();
  hipEvent_t stop = make_event();
  REQUIRE(hipEventRecord(start, stream) == hipSuccess);
  REQUIRE(hipEventRecord(stop, stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipEventSynchronize(stop) == hipSuccess);
  CHECK(hipEventQuery(stop) == hipSuccess);
  float ms = -1.0F;
  CHECK(hipEventElapsedTime(&ms, start, stop) == hipSuccess);
  CHECK(ms >= 0.0F);
  hipStream_t other = make_stream();
  CHECK(hipStreamWaitEvent(other, stop, 0) == hipSuccess);
  CHECK(hipStreamSynchronize(other) == hipSuccess);
  CHECK(hipStreamDestroy(other) == hipSuccess);
  CHECK(hipEventDestroy(start) == hipSuccess);
  CHECK(hipEventDestroy(stop) == hipSuccess);
}

TEST_CASE("an event recorded on a stream destroyed while busy completes when that work has run") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  hipEvent_t event = make_event();
  gate.block(stream);
  REQUIRE(hipEventRecord(event, stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  std::this_thread::sleep_for(kSettle);
  CHECK(hipEventQuery(event) == hipErrorNotReady);
  // Another stream waiting on the event waits for the destroyed stream's work.
  hipStream_t waiter = make_stream(hipStreamNonBlocking);
  REQUIRE(hipStreamWaitEvent(waiter, event, 0) == hipSuccess);
  std::atomic<bool> waited{false};
  add_flag_callback(waiter, &waited);
  CHECK(still_pending(waiter));
  CHECK_FALSE(waited.load());
  std::thread opener = gate.open_later(50ms);
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipEventQuery(event) == hipSuccess);
  CHECK(hipStreamSynchronize(waiter) == hipSuccess);
  CHECK(waited.load());
  opener.join();
  CHECK(hipStreamDestroy(waiter) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}

TEST_CASE("a stream waiting on an event recorded on itself does not deadlock") {
  LeakCheck leaks;
  Gate gate;
  hipStream_t stream = make_stream(hipStreamNonBlocking);
  hipEvent_t event = make_event();
  gate.block(stream);
  REQUIRE(hipEventRecord(event, stream) == hipSuccess);
  REQUIRE(hipStreamWaitEvent(stream, event, 0) == hipSuccess);
  std::atomic<bool> after{false};
  add_flag_callback(stream, &after);
  CHECK(still_pending(stream));
  gate.open();
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(after.load());
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

// An event's marker must not keep a destroyed stream (and its worker thread) alive.
TEST_CASE("a destroyed stream leaves no thread behind while an event recorded on it lives") {
  LeakCheck leaks;
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  const std::size_t before = quiet_thread_count();
  std::vector<hipEvent_t> events;
  for (int i = 0; i < 4; ++i) {
    hipStream_t stream = make_stream();
    events.push_back(make_event());
    REQUIRE(hipEventRecord(events.back(), stream) == hipSuccess);
    REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
    CHECK(hipStreamDestroy(stream) == hipSuccess);
  }
  CHECK(settled_thread_count(before) == before);
  for (hipEvent_t event : events) {
    CHECK(hipEventQuery(event) == hipSuccess);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }
  CHECK(settled_thread_count(before) == before);
}

TEST_CASE("events under threads: many threads record, query and wait on shared events") {
  LeakCheck leaks;
  constexpr int kThreads = 8;
  constexpr int kRounds = 200;
  std::vector<hipEvent_t> events;
  for (int i = 0; i < 4; ++i) events.push_back(make_event());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      hipStream_t stream = nullptr;
      if (hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) != hipSuccess) {
        ++failures;
        return;
      }
      for (int round = 0; round < kRounds; ++round) {
        hipEvent_t event = events[static_cast<std::size_t>((t + round) % 4)];
        if (hipEventRecord(event, stream) != hipSuccess) ++failures;
        const hipError_t query = hipEventQuery(event);
        if (query != hipSuccess && query != hipErrorNotReady) ++failures;
        if (hipStreamWaitEvent(stream, events[static_cast<std::size_t>((t + round + 1) % 4)], 0) != hipSuccess) {
          ++failures;
        }
        if (round % 16 == 0 && hipEventSynchronize(event) != hipSuccess) ++failures;
      }
      if (hipStreamSynchronize(stream) != hipSuccess) ++failures;
      if (hipStreamDestroy(stream) != hipSuccess) ++failures;
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  for (hipEvent_t event : events) {
    CHECK(hipEventSynchronize(event) == hipSuccess);
    CHECK(hipEventQuery(event) == hipSuccess);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }
}

TEST_CASE("an interprocess event recorded by several threads on one stream, some of them rarely run, never hangs") {
  // Each record takes a slot of the event's 1024; one whose slot is still held waits for the oldest
  // record to settle. Recorders that are preempted mid-call (here: two of four at the idle
  // scheduling class, all on one processor) must not leave a record queued behind one that waits for
  // it. Two seconds of records, then every record settles.
  LeakCheck leaks;
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreateWithFlags(&event, hipEventInterprocess | hipEventDisableTiming) == hipSuccess);
  hipStream_t stream = make_stream();
  cpu_set_t one_processor;
  CPU_ZERO(&one_processor);
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  for (int processor = 0; processor < CPU_SETSIZE; ++processor) {
    if (CPU_ISSET(processor, &allowed)) {
      CPU_SET(processor, &one_processor);
      break;
    }
  }
  std::atomic<bool> stop = false;
  std::atomic<long> records = 0;
  std::atomic<int> failures = 0;
  std::vector<std::thread> recorders;
  for (int index = 0; index < 4; ++index) {
    recorders.emplace_back([&, index] {
      (void)pthread_setaffinity_np(pthread_self(), sizeof one_processor, &one_processor);
      if (index < 2) {
        const sched_param lowest{};
        (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &lowest);
      }
      while (!stop) {
        if (hipEventRecord(event, stream) != hipSuccess) ++failures;
        ++records;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds{2});
  stop = true;
  for (std::thread& recorder : recorders) recorder.join();
  CHECK(failures == 0);
  CHECK(records > 1024);
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}
