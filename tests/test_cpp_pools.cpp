// The C++ stream-ordered allocator: MemPool and MemPoolRef (attributes, trimming, access, current
// pool), and PoolAllocation / PoolArray, which free asynchronously in stream order when destroyed.
// Run with HIPXX_HOST_DEVICES=2 (see meson.build) so that per-device pool access is observable.
#include <hipxx/callback.hpp>
#include <hipxx/copy.hpp>
#include <hipxx/event.hpp>
#include <hipxx/mem_pool.hpp>
#include <hipxx/stream.hpp>
#include <hipxx/stream_value.hpp>

#include <doctest/doctest.h>

#include "support/result_printing.hpp"
#include "support/views.hpp"

#include <range/v3/view/iota.hpp>
#include <range/v3/view/transform.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using namespace hipxx;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

Device const gpu0{0};
Device const gpu1{1};

Stream make_stream() {
  auto stream = Stream::create(StreamFlags::non_blocking);
  REQUIRE(stream);
  return std::move(stream).value();
}

MemPool make_pool(Device device = gpu0) {
  auto pool = MemPool::create(device);
  REQUIRE(pool);
  return std::move(pool).value();
}

std::uint64_t used(MemPoolRef pool) {
  auto const value = pool.used_current();
  REQUIRE(value);
  return value.value();
}

std::uint64_t reserved(MemPoolRef pool) {
  auto const value = pool.reserved_current();
  REQUIRE(value);
  return value.value();
}

bool drains_within(StreamRef stream, std::chrono::milliseconds limit) {
  auto const deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (stream.query().value()) {
      return true;
    }
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

}  // namespace

namespace {
struct alignas(512) OverAligned {
  int value;
};
template <class T>
concept pool_array_of = requires(hipxx::StreamRef stream, hipxx::MemPoolRef pool) {
  hipxx::allocate_async<T>(1, stream);
  pool.allocate<T>(1, stream);
};
}  // namespace

// Pool blocks are 256-byte aligned, as HIP promises: a more strictly aligned element type would be
// handed a misaligned pointer, so typed pool allocations refuse it at compile time.
static_assert(pool_array_of<int> && pool_array_of<std::max_align_t>);
static_assert(!pool_array_of<OverAligned>);

TEST_CASE("pool vocabulary types: owners move, references copy") {
  static_assert(!std::is_copy_constructible_v<MemPool> && std::is_nothrow_move_constructible_v<MemPool>);
  static_assert(!std::is_copy_constructible_v<PoolAllocation> && std::is_nothrow_move_constructible_v<PoolAllocation>);
  static_assert(std::is_nothrow_move_assignable_v<PoolAllocation>);
  static_assert(!std::is_copy_constructible_v<PoolArray<float>>);
  static_assert(std::is_trivially_copyable_v<MemPoolRef>);
  static_assert(std::is_convertible_v<MemPool const&, MemPoolRef>);
  static_assert(!std::is_convertible_v<hipMemPool_t, MemPoolRef>);  // explicit: null names no pool
  static_assert(device_storable<float> && device_storable<std::array<int, 4>>);
  static_assert(!device_storable<std::string> && !device_storable<float const>);
}

TEST_CASE("views of pool memory come from named owners only, never from a temporary one") {
  using namespace test_support;
  // `allocate_async<int>(n, stream).value().span()` would be freed at the `;`, and the span would then
  // reach the next allocation given the same address.
  static_assert(gives_data<PoolArray<int>&> && gives_data<PoolArray<int> const&>);
  static_assert(!gives_data<PoolArray<int>> && !gives_data<PoolArray<int> const>);
  static_assert(gives_span<PoolArray<int>&> && gives_span<PoolArray<int> const&>);
  static_assert(!gives_span<PoolArray<int>> && !gives_span<PoolArray<int> const>);
  static_assert(gives_allocation<PoolArray<int> const&> && !gives_allocation<PoolArray<int>>);
  static_assert(gives_data<PoolAllocation&> && gives_data<PoolAllocation const&>);
  static_assert(!gives_data<PoolAllocation> && !gives_data<PoolAllocation const>);
  // What a temporary may still give: its size, and its memory itself.
  static_assert(requires { std::declval<PoolArray<int>>().size(); });
  static_assert(requires { std::declval<PoolArray<int>>().into_allocation(); });
  // A temporary owner passed straight to a call lives to the end of that call: it may be lent.
  static_assert(std::is_convertible_v<MemPool, MemPoolRef> && std::is_convertible_v<Stream, StreamRef>);
}

TEST_CASE("default and current pools of a device" * doctest::test_suite("devices-2")) {
  auto const fallback = MemPool::default_for(gpu0);
  REQUIRE(fallback);
  auto const current = MemPool::current_for(gpu0);
  REQUIRE(current);
  CHECK(current.value() == fallback.value());
  CHECK(MemPool::default_for(gpu1).value() != fallback.value());

  {
    auto const pool = make_pool();
    REQUIRE(pool.make_current_for(gpu0));
    CHECK(MemPool::current_for(gpu0).value() == pool.ref());

    // allocate_async draws from the device's current pool.
    auto const stream = make_stream();
    auto const allocation = allocate_async(kMiB, stream);
    REQUIRE(allocation);
    CHECK(used(pool) >= kMiB);
  }
  // Destroying the current pool hands the device back its default pool.
  CHECK(MemPool::current_for(gpu0).value() == fallback.value());

  auto const no_device = MemPool::default_for(Device{7});
  REQUIRE_FALSE(no_device);
  CHECK(no_device.error().category() == hip_category());
}

TEST_CASE("MemPool::create refuses what HIP refuses, as hip error codes") {
  auto const bad = MemPool::create(Device{7});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().category() == hip_category());
  CHECK(bad.error() == make_error_code(hipErrorInvalidValue));
  CHECK(bad.error() == std::errc::invalid_argument);
  CHECK(bad.error().message().find("hipErrorInvalidValue") != std::string::npos);
  // .value() throws for those who prefer exceptions.
  CHECK_THROWS_AS((void)MemPool::create(Device{7}).value(), std::system_error);

  auto const shareable = MemPool::create(gpu0, {.shareable = Shareable::posix_fd, .max_size = 64 * kMiB});
  CHECK(shareable);
}

TEST_CASE("pool attributes as typed getters and setters") {
  auto const pool = make_pool();

  CHECK(pool.release_threshold().value() == 0);
  REQUIRE(pool.set_release_threshold(std::uint64_t{1} << 40));
  CHECK(pool.release_threshold().value() == std::uint64_t{1} << 40);

  CHECK(pool.reuse_policy().value() == ReusePolicy{});
  ReusePolicy const strict{.follow_event_dependencies = false, .allow_opportunistic = true,
                           .allow_internal_dependencies = false};
  REQUIRE(pool.set_reuse_policy(strict));
  CHECK(pool.reuse_policy().value() == strict);
  REQUIRE(pool.set_reuse_policy({}));
  CHECK(pool.reuse_policy().value() == ReusePolicy{});

  CHECK(pool.used_current().value() == 0);
  CHECK(pool.used_high().value() == 0);
  CHECK(pool.reserved_current().value() == 0);

  auto const stream = make_stream();
  {
    auto const big = pool.allocate(4 * kMiB, stream);
    REQUIRE(big);
    CHECK(used(pool) >= 4 * kMiB);
    CHECK(reserved(pool) >= used(pool));
    CHECK(pool.used_high().value() >= 4 * kMiB);
    CHECK(pool.reserved_high().value() >= reserved(pool));
  }
  REQUIRE(stream.synchronize());
  CHECK(used(pool) == 0);
  CHECK(pool.used_high().value() >= 4 * kMiB);  // the mark stays until reset
  REQUIRE(pool.reset_used_high());
  CHECK(pool.used_high().value() == 0);

  // The threshold kept the memory cached; trimming returns it.
  CHECK(reserved(pool) > 0);
  REQUIRE(pool.trim_to(0));
  CHECK(reserved(pool) == 0);
  CHECK(pool.reserved_high().value() > 0);
  REQUIRE(pool.reset_reserved_high());
  CHECK(pool.reserved_high().value() == 0);

  // A borrowed reference reads the same pool.
  MemPoolRef const ref = pool;
  CHECK(ref.release_threshold().value() == std::uint64_t{1} << 40);
}

TEST_CASE("PoolAllocation frees asynchronously in stream order, and the memory is reused") {
  auto const pool = make_pool();
  REQUIRE(pool.set_release_threshold(UINT64_MAX));  // keep freed memory cached
  auto const stream = make_stream();

  void* first_address = nullptr;
  {
    auto allocation = pool.allocate(kMiB, stream);
    REQUIRE(allocation);
    first_address = allocation.value().data();
    CHECK(first_address != nullptr);
    CHECK(allocation.value().size() == kMiB);
    CHECK(allocation.value().stream() == stream.ref());
    CHECK(used(pool) >= kMiB);
  }
  // Destruction enqueued the free; it counts as unused at once.
  CHECK(used(pool) == 0);

  // The next allocation of the same size on the same stream takes the same memory.
  auto again = pool.allocate(kMiB, stream);
  REQUIRE(again);
  CHECK(again.value().data() == first_address);

  SUBCASE("the destructor does not wait for the stream") {
    auto const blocked = make_stream();
    void* gate_raw = nullptr;
    REQUIRE(hipExtMallocWithFlags(&gate_raw, sizeof(std::uint32_t), hipMallocSignalMemory) == hipSuccess);
    auto* const gate = static_cast<std::uint32_t*>(gate_raw);
    std::uint32_t zero = 0;
    REQUIRE(hipMemcpy(gate, &zero, sizeof zero, hipMemcpyHostToDevice) == hipSuccess);

    REQUIRE(wait_value(blocked, gate, 1, WaitCondition::equal));
    auto const before = used(pool);
    {
      auto pending = pool.allocate(2 * kMiB, blocked);
      REQUIRE(pending);
      CHECK(used(pool) >= before + 2 * kMiB);
    }  // the free is queued behind the blocked wait, and the destructor returns at once
    CHECK(used(pool) == before);
    CHECK_FALSE(blocked.query().value());

    REQUIRE(write_value(stream, gate, 1));
    CHECK(drains_within(blocked, 5000ms));
    CHECK(hipFree(gate) == hipSuccess);
  }

  SUBCASE("explicit free() reports, and leaves the owner empty") {
    auto& allocation = again.value();
    REQUIRE(allocation.free());
    CHECK_FALSE(allocation);
    CHECK(allocation.data() == nullptr);
    CHECK(allocation.size() == 0);
    CHECK(used(pool) == 0);
    CHECK(allocation.free());  // nothing left to free
  }
}

TEST_CASE("PoolAllocation move semantics, release and adopt") {
  auto const pool = make_pool();
  auto const stream = make_stream();

  auto made = pool.allocate(kMiB, stream);
  REQUIRE(made);
  PoolAllocation first = std::move(made).value();
  void* const address = first.data();

  PoolAllocation moved{std::move(first)};
  CHECK(moved.data() == address);
  CHECK(moved.size() == kMiB);
  CHECK(moved.stream() == stream.ref());
  CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move)
  CHECK(first.size() == 0);
  CHECK(used(pool) >= kMiB);

  // Move-assignment frees the allocation it replaces.
  auto second = pool.allocate(3 * kMiB, stream).value();
  auto const both = used(pool);
  second = std::move(moved);
  CHECK(second.data() == address);
  CHECK(used(pool) < both);
  CHECK(used(pool) >= kMiB);

  // release() hands the pointer to C code; adopt() takes it back.
  auto const size = second.size();
  void* const raw = second.release();
  CHECK_FALSE(second);
  CHECK(used(pool) >= kMiB);
  {
    auto const adopted = PoolAllocation::adopt(raw, size, stream);
    CHECK(adopted.data() == address);
  }
  CHECK(used(pool) == 0);

  // A zero-byte allocation owns nothing and frees nothing.
  auto const nothing = pool.allocate(0, stream);
  REQUIRE(nothing);
  CHECK(nothing.value().data() == nullptr);
  CHECK_FALSE(nothing.value());
}

TEST_CASE("free_on moves the free to another stream; a dead free stream still frees") {
  auto const pool = make_pool();
  auto const allocating = make_stream();

  SUBCASE("free_on") {
    auto const consumer = make_stream();
    auto allocation = pool.allocate(kMiB, allocating).value();
    // The consumer's work must come after the allocation: an event orders it.
    auto ready = Event::create(EventFlags::disable_timing).value();
    REQUIRE(ready.record(allocating));
    REQUIRE(wait(consumer, ready));
    allocation.free_on(consumer);
    CHECK(allocation.stream() == consumer.ref());
    REQUIRE(allocation.free());
    CHECK(used(pool) == 0);
    REQUIRE(consumer.synchronize());
  }

  SUBCASE("the allocating stream destroyed first") {
    std::optional<PoolAllocation> survivor;
    {
      auto const short_lived = make_stream();
      survivor.emplace(pool.allocate(kMiB, short_lived).value());
    }
    CHECK(used(pool) >= kMiB);
    // free() reports the dead stream and keeps ownership; the destructor falls back to the null stream.
    auto const refused = survivor->free();
    REQUIRE_FALSE(refused);
    CHECK(refused.error() == make_error_code(hipErrorInvalidValue));
    CHECK(*survivor);
    survivor.reset();
    CHECK(used(pool) == 0);
  }
}

namespace {

std::span<unsigned char> bytes_of(PoolAllocation const& allocation) {
  return {static_cast<unsigned char*>(allocation.data()), allocation.size()};
}

// Work on `stream` that writes `pattern` into the allocation, held back a while by a callback.
bool write_later(PoolAllocation const& allocation, std::vector<unsigned char> const& pattern, StreamRef stream) {
  return add_callback(stream, [] { std::this_thread::sleep_for(200ms); }) &&
         copy_async(bytes_of(allocation), std::span{pattern}, stream);
}

// Allocates again from `pool` on `stream`, writes `pattern`, and reads the memory back once every
// stream of the device is done: what an earlier owner's queued write left there shows.
std::vector<unsigned char> reallocate_and_read_back(MemPoolRef pool, std::vector<unsigned char> const& pattern,
                                                    StreamRef stream) {
  std::vector<unsigned char> back(pattern.size(), 0);
  auto next = pool.allocate(pattern.size(), stream);
  if (!next || !copy_async(bytes_of(next.value()), std::span{pattern}, stream) || !stream.synchronize() ||
      hipDeviceSynchronize() != hipSuccess || !copy_async(std::span{back}, bytes_of(next.value()), stream) ||
      !stream.synchronize()) {
    back.clear();
  }
  return back;
}

}  // namespace

// The per-thread stream's handle names another stream on another thread: the free must still come
// after the allocating thread's work, or the next allocation gets memory that work still writes.
TEST_CASE("an allocation on the per-thread stream dropped on another thread is freed after that thread's work") {
  auto const pool = make_pool();
  std::vector<unsigned char> const first(kMiB, 0xAA);
  std::vector<unsigned char> const second(kMiB, 0xBB);
  std::vector<unsigned char> back;
  bool queued = false;
  std::thread allocating([&] {
    auto allocation = pool.allocate(kMiB, StreamRef::per_thread()).value();
    queued = write_later(allocation, first, StreamRef::per_thread());
    std::thread dropping([&, moved = std::move(allocation)]() mutable {
      { auto const gone = std::move(moved); }
      back = reallocate_and_read_back(pool, second, StreamRef::per_thread());
    });
    dropping.join();
  });
  allocating.join();
  REQUIRE(queued);
  CHECK(back == second);
}

// The null stream's handle names the current device's: freed while another device is current, the
// allocation still goes after the work queued on its own device's null stream.
TEST_CASE("an allocation on the null stream dropped while another device is current" *
          doctest::test_suite("devices-2")) {
  REQUIRE(gpu1.make_current());
  auto const pool = make_pool(gpu1);
  std::vector<unsigned char> const first(kMiB, 0xAA);
  std::vector<unsigned char> const second(kMiB, 0xBB);
  std::optional<PoolAllocation> allocation{pool.allocate(kMiB, StreamRef::null()).value()};
  REQUIRE(write_later(*allocation, first, StreamRef::null()));
  REQUIRE(gpu0.make_current());
  allocation.reset();
  int current = -1;
  CHECK((hipGetDevice(&current) == hipSuccess && current == 0));  // the free left the current device
  REQUIRE(gpu1.make_current());
  auto const stream = make_stream();
  CHECK(reallocate_and_read_back(pool, second, stream) == second);
  REQUIRE(gpu0.make_current());
}

TEST_CASE("typed pool arrays") {
  auto const pool = make_pool();
  auto const stream = make_stream();

  auto made = pool.allocate<float>(1000, stream);
  REQUIRE(made);
  auto& floats = made.value();
  CHECK(floats.size() == 1000);
  CHECK(floats.size_bytes() == 1000 * sizeof(float));
  static_assert(std::is_same_v<decltype(floats.data()), float*>);

  std::vector<float> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<float>(i) * 0.5F;
  }
  REQUIRE(hipMemcpyAsync(floats.data(), host.data(), floats.size_bytes(), hipMemcpyHostToDevice, stream.native()) ==
          hipSuccess);
  std::vector<float> back(1000);
  REQUIRE(hipMemcpyAsync(back.data(), floats.data(), floats.size_bytes(), hipMemcpyDeviceToHost, stream.native()) ==
          hipSuccess);
  REQUIRE(stream.synchronize());
  CHECK(back == host);

  // From the device's current pool, through the free function.
  auto const doubles = allocate_async<double>(16, stream);
  REQUIRE(doubles);
  CHECK(doubles.value().size() == 16);
  CHECK(doubles.value().allocation().size() == 16 * sizeof(double));

  // A count whose byte size overflows cannot be held by any pool.
  auto const huge = pool.allocate<double>(SIZE_MAX / 4, stream);
  REQUIRE_FALSE(huge);
  CHECK(huge.error() == make_error_code(hipErrorOutOfMemory));
  CHECK(huge.error() == std::errc::not_enough_memory);

  auto bytes = std::move(floats).into_allocation();
  CHECK(bytes.size() == 1000 * sizeof(float));
  CHECK(used(pool) >= bytes.size());
}

TEST_CASE("pool access from ranges of devices" * doctest::test_suite("devices-2")) {
  auto const pool = make_pool();
  CHECK(pool.access(gpu0).value() == Access::read_write);
  CHECK(pool.access(gpu1).value() == Access::none);

  std::vector<Device> const peers{gpu1};
  REQUIRE(pool.set_access(peers, Access::read));
  CHECK(pool.access(gpu1).value() == Access::read);

  // Any range of Devices, range-v3 views included.
  auto const everyone = ranges::views::iota(0, 2) | ranges::views::transform([](int id) { return Device{id}; });
  REQUIRE(pool.set_access(everyone, Access::read_write));
  CHECK(pool.access(gpu1).value() == Access::read_write);

  REQUIRE(pool.set_access(AccessDesc{gpu1}.revoked()));
  CHECK(pool.access(gpu1).value() == Access::none);

  // Memory already handed out follows the pool's access.
  auto const stream = make_stream();
  auto const allocation = pool.allocate(kMiB, stream).value();
  REQUIRE(pool.set_access(gpu1, Access::read));
  auto location = gpu1.location();
  unsigned long long flags = 0;
  REQUIRE(hipMemGetAccess(&flags, &location, allocation.data()) == hipSuccess);
  CHECK(flags == hipMemAccessFlagsProtRead);

  // The owning device keeps read-write access to its pool; a refused change changes nothing.
  auto const refused = pool.set_access(std::vector<AccessDesc>{AccessDesc{gpu1}, AccessDesc{gpu0}.read_only()});
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == make_error_code(hipErrorInvalidValue));
  CHECK(pool.access(gpu1).value() == Access::read);
}
