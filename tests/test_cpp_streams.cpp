// The C++ stream vocabulary: StreamRef and Stream, host callbacks with any callable, typed stream
// wait/write value, events (record, wait, query, elapsed time), and typed copies and fills.
//
// Streams that a test blocks on purpose (a wait_value on a word nobody has written yet) are
// non-blocking, so that no null-stream ordering can tie the releasing write to the blocked stream.
#include <hipxx/callback.hpp>
#include <hipxx/copy.hpp>
#include <hipxx/event.hpp>
#include <hipxx/mem_pool.hpp>
#include <hipxx/stream.hpp>
#include <hipxx/stream_value.hpp>

#include <doctest/doctest.h>

#include "support/result_printing.hpp"

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using namespace hipxx;
using namespace std::chrono_literals;

// copy_async's source: a span or a named container, never a temporary container, which is gone at
// the end of the statement while the copy waits for the stream.
template <class Source>
concept async_copy_source = requires(std::span<int> destination, Source&& source, hipxx::StreamRef stream) {
  hipxx::copy_async(destination, std::forward<Source>(source), stream);
};
static_assert(async_copy_source<std::vector<int>&> && async_copy_source<std::vector<int> const&>);
static_assert(async_copy_source<std::span<int const>> && async_copy_source<std::span<int>>);
static_assert(!async_copy_source<std::vector<int>> && !async_copy_source<std::array<int, 4>>);
// The synchronous copy is done before the temporary goes.
static_assert(requires(std::span<int> destination) { hipxx::copy(destination, std::vector<int>(4)); });

namespace {

// Word-sized device memory meant for stream wait/write value, freed with the owner.
template <class Word>
class SignalWord {
 public:
  SignalWord() {
    void* raw = nullptr;
    REQUIRE(hipExtMallocWithFlags(&raw, sizeof(Word), hipMallocSignalMemory) == hipSuccess);
    word_ = static_cast<Word*>(raw);
    set(0);
  }
  SignalWord(SignalWord const&) = delete;
  SignalWord& operator=(SignalWord const&) = delete;
  ~SignalWord() { (void)hipFree(word_); }

  [[nodiscard]] Word* get() const noexcept { return word_; }

  // Host reads and writes go through copies, since device memory need not be host-visible.
  [[nodiscard]] Word read() const {
    Word value{};
    REQUIRE(hipMemcpy(&value, word_, sizeof(Word), hipMemcpyDeviceToHost) == hipSuccess);
    return value;
  }
  void set(Word value) const { REQUIRE(hipMemcpy(word_, &value, sizeof(Word), hipMemcpyHostToDevice) == hipSuccess); }

 private:
  Word* word_ = nullptr;
};

Stream make_stream(StreamFlags flags = StreamFlags::non_blocking) {
  auto stream = Stream::create(flags);
  REQUIRE(stream);
  return std::move(stream).value();
}

// Whether `stream` finishes all its work within `limit`; polls so that a broken wait fails the
// test instead of hanging it.
bool drains_within(StreamRef stream, std::chrono::milliseconds limit) {
  auto const deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto const done = stream.query();
    REQUIRE(done);
    if (done.value()) {
      return true;
    }
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// Counts live instances, so a test can prove a callback's state was freed exactly when promised.
struct Tracked {
  explicit Tracked(std::atomic<int>& live) : live(&live) { live.fetch_add(1); }
  Tracked(Tracked const& other) : live(other.live) { live->fetch_add(1); }
  Tracked(Tracked&& other) noexcept : live(other.live) { live->fetch_add(1); }
  Tracked& operator=(Tracked const&) = delete;
  Tracked& operator=(Tracked&&) = delete;
  ~Tracked() { live->fetch_sub(1); }
  std::atomic<int>* live;
};

template <class Pointer>
concept writable_word = requires(Pointer word) { write_value(StreamRef{}, word, 1); };

// Stands for any function of the library that takes a stream.
hipStream_t takes_stream(StreamRef stream) { return stream.native(); }

}  // namespace

TEST_CASE("StreamRef is a trivially copyable borrow of any stream handle") {
  static_assert(std::is_trivially_copyable_v<StreamRef>);
  static_assert(std::is_nothrow_convertible_v<hipStream_t, StreamRef>);
  static_assert(std::is_convertible_v<Stream const&, StreamRef>);
  static_assert(!std::is_convertible_v<StreamRef, Stream>);
  static_assert(!std::is_copy_constructible_v<Stream>);
  static_assert(std::is_nothrow_move_constructible_v<Stream> && std::is_nothrow_move_assignable_v<Stream>);

  CHECK(StreamRef{}.native() == nullptr);
  CHECK(StreamRef::null() == StreamRef{});
  CHECK(StreamRef::per_thread().native() == hipStreamPerThread);
  CHECK(StreamRef::per_thread() != StreamRef::null());

  // The null and per-thread streams are usable through the reference like any other.
  CHECK(StreamRef::null().synchronize());
  CHECK(StreamRef::per_thread().synchronize());
  CHECK(StreamRef::per_thread().query().value());

  auto const stream = make_stream();
  CHECK(takes_stream(stream) == stream.native());
  CHECK(takes_stream(stream.native()) == stream.native());
  CHECK(takes_stream(StreamRef::null()) == nullptr);
  StreamRef const ref = stream;
  CHECK(ref == stream.ref());
  CHECK(ref.query().value());
}

TEST_CASE("Stream::create reports flags and priority; CU-masked streams report their mask") {
  auto const range = stream_priority_range();
  REQUIRE(range);
  CHECK(range.value().greatest <= range.value().least);

  auto const plain = Stream::create();
  REQUIRE(plain);
  CHECK(plain.value().flags().value() == StreamFlags::blocking);
  CHECK(plain.value().priority().value() == 0);

  auto const urgent = Stream::create(StreamFlags::non_blocking, range.value().greatest);
  REQUIRE(urgent);
  CHECK(urgent.value().flags().value() == StreamFlags::non_blocking);
  CHECK(urgent.value().priority().value() == range.value().greatest);

  // Out of range is clamped, not refused.
  auto const lazy = Stream::create(StreamFlags::blocking, range.value().least + 100);
  REQUIRE(lazy);
  CHECK(lazy.value().priority().value() == range.value().least);

  // Units 0 and 2, of which the device keeps those it has.
  auto const units = current_device().value().attribute(hipDeviceAttributeMultiprocessorCount);
  REQUIRE(units);
  std::vector<std::uint32_t> const mask{0x5U};
  auto const masked = Stream::create(mask);
  REQUIRE(masked);
  auto const read_back = masked.value().cu_mask();
  REQUIRE(read_back);
  REQUIRE_FALSE(read_back.value().empty());
  CHECK(read_back.value().front() == (units.value() >= 3 ? 0x5U : 0x1U));

  // Without a mask every unit of the device is enabled.
  auto const full = plain.value().cu_mask();
  REQUIRE(full);
  std::size_t set_bits = 0;
  for (auto const word : full.value()) {
    set_bits += static_cast<std::size_t>(std::popcount(word));
  }
  CHECK(set_bits == static_cast<std::size_t>(units.value()));

  auto const empty = Stream::create(std::span<std::uint32_t const>{});
  REQUIRE_FALSE(empty);
  CHECK(empty.error() == std::errc::invalid_argument);
  CHECK(empty.error().category() == hip_category());
}

TEST_CASE("Stream owns its handle: destroyed once, movable, releasable") {
  auto first = make_stream();
  hipStream_t const first_native = first.native();

  Stream moved{std::move(first)};
  CHECK(moved.native() == first_native);
  CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move): checking the moved-from state is the point
  // A moved-from owner is not the null stream: it refuses rather than act on the null stream.
  REQUIRE_FALSE(first.query());
  CHECK(first.query().error() == make_error_code(hipErrorInvalidHandle));
  CHECK(first.synchronize().error() == make_error_code(hipErrorInvalidHandle));

  // Move-assignment destroys the stream it replaces.
  auto second = make_stream();
  hipStream_t const second_native = second.native();
  second = std::move(moved);
  CHECK(second.native() == first_native);
  CHECK(hipStreamQuery(second_native) == hipErrorInvalidHandle);

  // release() and adopt() hand the handle across the C boundary and back.
  hipStream_t const raw = second.release();
  CHECK_FALSE(second);
  CHECK(hipStreamQuery(raw) == hipSuccess);
  {
    auto const adopted = Stream::adopt(raw);
    CHECK(adopted.native() == raw);
  }
  CHECK(hipStreamQuery(raw) == hipErrorInvalidHandle);

  // destroy() reports, and leaves the owner empty.
  auto third = make_stream();
  hipStream_t const third_native = third.native();
  CHECK(third.destroy());
  CHECK_FALSE(third);
  CHECK(hipStreamQuery(third_native) == hipErrorInvalidHandle);
  CHECK(third.destroy());  // nothing left to destroy
}

TEST_CASE("a moved-from Stream lends a handle that every call refuses, never the null stream") {
  auto first = make_stream();
  Stream const kept{std::move(first)};
  StreamRef const empty = first;  // NOLINT(bugprone-use-after-move): the moved-from owner is the point
  CHECK(empty != StreamRef::null());
  auto const refused = [](auto const& outcome) {
    return !outcome && outcome.error() == make_error_code(hipErrorInvalidHandle);
  };
  CHECK(refused(empty.query()));

  std::vector<std::uint32_t> const source(16, 5);
  std::vector<std::uint32_t> destination(16, 9);
  CHECK(refused(copy_async(std::span{destination}, source, first)));
  CHECK(refused(fill_bytes_async(std::span{destination}, 0x00, first)));

  std::atomic<int> live{0};
  std::atomic<bool> ran{false};
  auto const callback = add_callback(first, [&ran, tracked = Tracked{live}] { ran = true; });
  CHECK(refused(callback));
  CHECK(live.load() == 0);

  auto event = Event::create().value();
  CHECK(refused(event.record(first)));

  // The C calls under these two document hipErrorInvalidValue, not hipErrorInvalidHandle.
  auto const refused_as_value = [](auto const& outcome) {
    return !outcome && outcome.error() == make_error_code(hipErrorInvalidValue);
  };
  CHECK(refused_as_value(allocate_async<std::uint32_t>(16, first)));

  SignalWord<std::uint32_t> const word;
  CHECK(refused_as_value(write_value(first, word.get(), 7)));

  // Had any of them gone to the null stream, it would have run by now.
  REQUIRE(StreamRef::null().synchronize());
  CHECK(destination == std::vector<std::uint32_t>(16, 9));
  CHECK_FALSE(ran.load());
  CHECK(word.read() == 0U);
  // Only a recorded event can time anything.
  auto stop = Event::create().value();
  REQUIRE(stop.record(StreamRef::null()));
  REQUIRE(stop.synchronize());
  CHECK(refused(elapsed(event, stop)));
}

TEST_CASE("typed wait_value and write_value order work across streams") {
  static_assert(stream_word<std::uint32_t> && stream_word<std::uint64_t>);
  static_assert(stream_word<unsigned long> && stream_word<unsigned long long>);
  static_assert(!stream_word<int> && !stream_word<std::int64_t> && !stream_word<std::uint16_t> && !stream_word<bool>);
  static_assert(!writable_word<int*>);
  static_assert(writable_word<std::uint64_t*> && writable_word<unsigned long long*>);

  auto const waiter = make_stream();
  auto const releaser = make_stream();

  SUBCASE("32-bit greater_equal, with the wait reaching the word's width only") {
    SignalWord<std::uint32_t> const gate;
    SignalWord<std::uint32_t> const marker;
    REQUIRE(wait_value(waiter, gate.get(), 5, WaitCondition::greater_equal));
    REQUIRE(write_value(waiter, marker.get(), 0xABCDU));
    CHECK_FALSE(drains_within(waiter, 30ms));
    CHECK(marker.read() == 0U);

    REQUIRE(write_value(releaser, gate.get(), 4));  // not yet
    REQUIRE(releaser.synchronize());
    CHECK_FALSE(drains_within(waiter, 30ms));

    REQUIRE(write_value(releaser, gate.get(), 7));
    CHECK(drains_within(waiter, 5000ms));
    CHECK(marker.read() == 0xABCDU);
  }

  SUBCASE("64-bit equal under a mask, with values past 32 bits") {
    SignalWord<std::uint64_t> const gate;
    SignalWord<std::uint64_t> const marker;
    constexpr std::uint64_t high = std::uint64_t{1} << 40;
    // Only the high half is compared, so the low bits written below do not matter.
    REQUIRE(wait_value(waiter, gate.get(), high, WaitCondition::equal, 0xFFFFFFFF00000000ULL));
    REQUIRE(write_value(waiter, marker.get(), high + 1));
    CHECK_FALSE(drains_within(waiter, 30ms));

    REQUIRE(write_value(releaser, gate.get(), high | 0x1234U));
    CHECK(drains_within(waiter, 5000ms));
    CHECK(marker.read() == high + 1);
  }

  SUBCASE("any_bit_set and nor") {
    SignalWord<std::uint32_t> const gate;
    REQUIRE(wait_value(waiter, gate.get(), 0x10U, WaitCondition::any_bit_set));
    REQUIRE(write_value(releaser, gate.get(), 0x01U));
    REQUIRE(releaser.synchronize());
    CHECK_FALSE(drains_within(waiter, 30ms));
    REQUIRE(write_value(releaser, gate.get(), 0x11U));
    CHECK(drains_within(waiter, 5000ms));

    // ~((0x11 & 0xFF) | (0x0F & 0xFF)) has bits set above the mask, so this holds at once.
    REQUIRE(wait_value(waiter, gate.get(), 0x0FU, WaitCondition::nor, 0xFFU));
    CHECK(drains_within(waiter, 5000ms));
  }

  SUBCASE("a const word can be waited on, and a bad word is an error in the hip category") {
    SignalWord<std::uint64_t> const gate;
    gate.set(3);
    std::uint64_t const* const read_only = gate.get();
    REQUIRE(wait_value(waiter, read_only, 3, WaitCondition::equal));
    CHECK(drains_within(waiter, 5000ms));

    auto const refused = write_value(waiter, static_cast<std::uint32_t*>(nullptr), 1);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().category() == hip_category());
    CHECK(refused.error() == make_error_code(hipErrorInvalidValue));
  }
}

TEST_CASE("add_callback runs any callable exactly once and frees its state after the call") {
  auto const stream = make_stream();

  SUBCASE("lambdas capturing by reference, in stream order, with or without the status") {
    std::mutex mutex;
    std::vector<int> order;
    hipError_t seen = hipErrorUnknown;
    REQUIRE(add_callback(stream, [&] {
      std::lock_guard const lock{mutex};
      order.push_back(1);
    }));
    REQUIRE(add_callback(stream, [&](hipError_t status) {
      std::lock_guard const lock{mutex};
      order.push_back(2);
      seen = status;
    }));
    REQUIRE(stream.synchronize());
    CHECK(order == std::vector<int>{1, 2});
    CHECK(seen == hipSuccess);
  }

  SUBCASE("move-only captures; the state dies right after the call") {
    std::atomic<int> live{0};
    std::atomic<int> calls{0};
    auto owned = std::make_unique<Tracked>(live);
    auto payload = std::make_unique<int>(42);
    int observed = 0;
    REQUIRE(add_callback(stream, [owned = std::move(owned), payload = std::move(payload), &calls, &observed] {
      observed = *payload;
      calls.fetch_add(1);
    }));
    REQUIRE(stream.synchronize());
    CHECK(calls.load() == 1);
    CHECK(observed == 42);
    CHECK(live.load() == 0);
  }

  SUBCASE("a callable run as an rvalue, and a generic one that takes the status") {
    struct Once {
      int* target;
      void operator()() && { ++*target; }
    };
    int runs = 0;
    REQUIRE(add_callback(stream, Once{&runs}));
    hipError_t status = hipErrorUnknown;
    REQUIRE(add_callback(stream, [&status](auto... given) {
      if constexpr (sizeof...(given) == 1) {
        status = (given, ...);
      }
    }));
    REQUIRE(stream.synchronize());
    CHECK(runs == 1);
    CHECK(status == hipSuccess);
  }

  SUBCASE("copied lvalues, function pointers and results that are dropped") {
    static std::atomic<int> pointer_calls{0};
    std::atomic<int> live{0};
    Tracked const tracked{live};
    int copies_run = 0;
    auto const callable = [tracked, &copies_run] { return ++copies_run; };
    REQUIRE(add_callback(stream, callable));
    REQUIRE(add_callback(stream, callable));
    REQUIRE(add_callback(stream, +[] { pointer_calls.fetch_add(1); }));
    REQUIRE(stream.synchronize());
    CHECK(copies_run == 2);
    CHECK(pointer_calls.load() == 1);
    CHECK(live.load() == 2);  // `tracked` and the copy inside `callable`; the queued copies are gone
  }

  SUBCASE("a refused callback is freed at once and never runs") {
    std::atomic<int> live{0};
    bool ran = false;
    hipStream_t dead = nullptr;
    {
      auto doomed = make_stream();
      dead = doomed.native();
    }
    auto const refused = add_callback(StreamRef{dead}, [tracked = Tracked{live}, &ran] { ran = true; });
    REQUIRE_FALSE(refused);
    CHECK(refused.error() == make_error_code(hipErrorInvalidHandle));
    CHECK(refused.error().category().name() == std::string{"hip"});
    CHECK(live.load() == 0);
    CHECK_FALSE(ran);
  }

  SUBCASE("a callback holds later work back until it returns") {
    SignalWord<std::uint32_t> const marker;
    std::atomic<bool> release{false};
    REQUIRE(add_callback(stream, [&release] {
      while (!release.load()) {
        std::this_thread::sleep_for(1ms);
      }
    }));
    REQUIRE(write_value(stream, marker.get(), 9));
    CHECK_FALSE(drains_within(stream, 30ms));
    CHECK(marker.read() == 0U);
    release.store(true);
    CHECK(drains_within(stream, 5000ms));
    CHECK(marker.read() == 9U);
  }

  SUBCASE("callbacks on a stream destroyed right away still run, once") {
    std::atomic<int> live{0};
    std::atomic<int> calls{0};
    {
      auto const short_lived = make_stream();
      for (int i = 0; i < 16; ++i) {
        REQUIRE(add_callback(short_lived, [tracked = Tracked{live}, &calls] { calls.fetch_add(1); }));
      }
    }
    auto const deadline = std::chrono::steady_clock::now() + 5s;
    while ((calls.load() < 16 || live.load() != 0) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    CHECK(calls.load() == 16);
    CHECK(live.load() == 0);
  }
}

TEST_CASE("Event: record, query, synchronize, wait across streams") {
  static_assert(!std::is_copy_constructible_v<Event>);
  static_assert(std::is_nothrow_move_constructible_v<Event>);
  CHECK(static_cast<unsigned>(EventFlags::blocking_sync | EventFlags::disable_timing) ==
        (hipEventBlockingSync | hipEventDisableTiming));

  auto created = Event::create();
  REQUIRE(created);
  Event event = std::move(created).value();
  CHECK(event.query().value());  // never recorded: nothing to wait for
  CHECK(event.synchronize());

  auto const blocked = make_stream();
  auto const follower = make_stream();
  auto const releaser = make_stream();
  SignalWord<std::uint32_t> const gate;
  SignalWord<std::uint32_t> const marker;

  REQUIRE(wait_value(blocked, gate.get(), 1, WaitCondition::equal));
  REQUIRE(event.record(blocked));
  CHECK_FALSE(event.query().value());

  // The follower waits for what the event captured, not for anything recorded later.
  REQUIRE(wait(follower, event));
  REQUIRE(write_value(follower, marker.get(), 5));
  CHECK_FALSE(drains_within(follower, 30ms));
  CHECK(marker.read() == 0U);

  REQUIRE(write_value(releaser, gate.get(), 1));
  CHECK(event.synchronize());
  CHECK(event.query().value());
  CHECK(drains_within(follower, 5000ms));
  CHECK(marker.read() == 5U);

  // Move-assignment destroys the event it replaces; release() and adopt() round-trip.
  hipEvent_t const replaced = event.native();
  event = Event::create(EventFlags::disable_timing).value();
  CHECK(hipEventQuery(replaced) == hipErrorInvalidHandle);
  hipEvent_t const raw = event.release();
  CHECK_FALSE(event);
  { auto const adopted = Event::adopt(raw); }
  CHECK(hipEventQuery(raw) == hipErrorInvalidHandle);

  // A moved-from (empty) event is an error, not a crash.
  CHECK(event.record(blocked).error() == make_error_code(hipErrorInvalidHandle));
}

TEST_CASE("elapsed() measures the work between two events as a chrono duration") {
  static_assert(std::is_same_v<EventDuration, std::chrono::duration<float, std::milli>>);
  auto const stream = make_stream(StreamFlags::blocking);
  auto start = Event::create().value();
  auto stop = Event::create().value();

  REQUIRE(start.record(stream));
  REQUIRE(add_callback(stream, [] { std::this_thread::sleep_for(20ms); }));
  REQUIRE(stop.record(stream));
  REQUIRE(stop.synchronize());

  auto const span = elapsed(start, stop);
  REQUIRE(span);
  CHECK(span.value() >= 15ms);
  CHECK(span.value() < 5s);
  // Reversed, it is negative rather than an error, as in HIP.
  CHECK(elapsed(stop, start).value() <= -15ms);

  SUBCASE("refused for events without timing, never recorded, or still pending") {
    auto untimed = Event::create(EventFlags::disable_timing).value();
    REQUIRE(untimed.record(stream));
    REQUIRE(untimed.synchronize());
    CHECK(elapsed(start, untimed).error() == make_error_code(hipErrorInvalidHandle));

    auto const never = Event::create().value();
    CHECK(elapsed(start, never).error() == make_error_code(hipErrorInvalidHandle));

    auto const blocked = make_stream();
    SignalWord<std::uint32_t> const gate;
    REQUIRE(wait_value(blocked, gate.get(), 1, WaitCondition::equal));
    auto pending = Event::create().value();
    REQUIRE(pending.record(blocked));
    CHECK(elapsed(start, pending).error() == make_error_code(hipErrorNotReady));
    REQUIRE(write_value(stream, gate.get(), 1));
    CHECK(pending.synchronize());
    CHECK(elapsed(start, pending));
  }

  SUBCASE("flags HIP refuses come back as hip errors") {
    auto const refused = Event::create(EventFlags::interprocess);  // timing is not allowed across processes
    REQUIRE_FALSE(refused);
    CHECK(refused.error().category() == hip_category());
    CHECK(refused.error() == std::errc::invalid_argument);
    CHECK(Event::create(EventFlags::interprocess | EventFlags::disable_timing));
  }
}

TEST_CASE("copy_async and fill_bytes_async move typed elements in stream order, in every direction") {
  constexpr std::size_t kCount = 3000;
  auto stream = Stream::create(StreamFlags::non_blocking).value();
  auto const pool = MemPool::default_for(Device{0}).value();
  auto first = pool.allocate<std::uint32_t>(kCount, stream.ref()).value();
  auto second = pool.allocate<std::uint32_t>(kCount, stream.ref()).value();
  REQUIRE(first.span().size() == kCount);
  std::vector<std::uint32_t> source(kCount);
  for (std::size_t i = 0; i < kCount; ++i) source[i] = static_cast<std::uint32_t>(i * 2654435761U);
  std::vector<std::uint32_t> back(kCount, 7);

  // Host to device, device to device, a fill of part of it, device to host: each after the last.
  REQUIRE(copy_async(first.span(), source, stream.ref()));
  REQUIRE(copy_async(second.span(), first.span(), stream.ref()));
  REQUIRE(fill_bytes_async(second.span().subspan(10, 5), 0xFF, stream.ref()));
  REQUIRE(copy_async(std::span{back}, second.span(), stream.ref()));
  REQUIRE(stream.synchronize());
  std::vector<std::uint32_t> expected = source;
  std::fill_n(expected.begin() + 10, 5, 0xFFFFFFFFU);
  CHECK(back == expected);

  // The synchronous forms, and a zero fill.
  REQUIRE(fill_bytes(first.span(), 0x00));
  std::vector<std::uint32_t> zeros(kCount, 1);
  REQUIRE(copy(std::span{zeros}, first.span()));
  CHECK(zeros == std::vector<std::uint32_t>(kCount, 0));
  REQUIRE(copy(second.span().first(3), std::span<std::uint32_t const>{source}.last(3)));
  REQUIRE(copy(std::span{back}.first(3), second.span().first(3)));
  CHECK(std::equal(back.begin(), back.begin() + 3, source.end() - 3));

  // Spans of different lengths are refused before anything moves.
  std::vector<std::uint32_t> untouched(kCount, 9);
  auto const short_copy = copy_async(std::span{untouched}, first.span().first(5), stream.ref());
  REQUIRE_FALSE(short_copy);
  CHECK(short_copy.error() == make_error_code(hipErrorInvalidValue));
  CHECK_FALSE(copy(std::span{untouched}.first(4), std::span<std::uint32_t const>{source}.first(5)));
  REQUIRE(stream.synchronize());
  CHECK(untouched == std::vector<std::uint32_t>(kCount, 9));
  // The runtime's own refusals come back as errors too: a copy on a stream that is gone.
  StreamRef const gone = stream.ref();
  first.free_on(StreamRef::null());
  second.free_on(StreamRef::null());
  REQUIRE(stream.destroy());
  auto const on_gone = copy_async(std::span{untouched}, source, gone);
  REQUIRE_FALSE(on_gone);
  CHECK(on_gone.error() == make_error_code(hipErrorInvalidHandle));
}

TEST_CASE("copies and fills take spans of fixed extent, as std::array gives") {
  auto stream = Stream::create(StreamFlags::non_blocking).value();
  auto device = allocate_async<std::uint32_t>(4, stream).value();
  std::array<std::uint32_t, 4> const source{1, 2, 3, 4};
  std::array<std::uint32_t, 4> back{};

  REQUIRE(copy_async(device.span(), source, stream));
  REQUIRE(copy_async(std::span{back}, device.span(), stream));
  REQUIRE(stream.synchronize());
  CHECK(back == source);

  // Fills take device memory (a GPU may not fill the application's own): spans of it with a fixed extent.
  REQUIRE(fill_bytes_async(std::span<std::uint32_t, 2>{device.data(), 2}, 0xFF, stream));
  REQUIRE(copy_async(std::span{back}, device.span(), stream));
  REQUIRE(stream.synchronize());
  CHECK(back == std::array<std::uint32_t, 4>{0xFFFFFFFFU, 0xFFFFFFFFU, 3, 4});

  REQUIRE(fill_bytes(std::span<std::uint32_t, 4>{device.data(), 4}, 0x00));
  REQUIRE(copy(std::span{back}, device.span()));
  CHECK(back == std::array<std::uint32_t, 4>{});
  REQUIRE(copy(std::span{back}, std::span{source}));
  CHECK(back == source);

  // A fixed extent is no promise that the other side has as many elements.
  std::array<std::uint32_t, 3> shorter{};
  CHECK(copy(std::span{shorter}, std::span{source}).error() == make_error_code(hipErrorInvalidValue));
  REQUIRE(device.free());
}
