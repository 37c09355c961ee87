// GrowableArray: a device array that grows by mapping chunks into one reserved range.
// Every check reads device memory back through hipMemcpy (copy_to_host, read, to_vector).
#include <hipxx/growable_array.hpp>
#include <hipxx/hipxx_ext.h>

#include <doctest/doctest.h>

#include "support/descriptors.hpp"
#include "support/mappings.hpp"
#include "support/random_walk.hpp"
#include "support/result_printing.hpp"
#include "support/views.hpp"

#include <sys/resource.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

using namespace hipxx;

namespace {

using test_support::open_fds;
using test_support::runtime_like_mapping_count;

using Element = std::uint64_t;
using Array = GrowableArray<Element>;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kChunk = 2 * kMiB;  // the host backend's recommended granularity
constexpr std::size_t kPerChunk = kChunk / sizeof(Element);

constexpr Element value_at(std::size_t index) noexcept {
  return (static_cast<Element>(index) * 0x9E3779B97F4A7C15ULL) ^ 0xC0FFEE0000000000ULL;
}

std::vector<Element> values(std::size_t first, std::size_t count) {
  std::vector<Element> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = value_at(first + i);
  }
  return out;
}

hipxxBookCounts books() {
  hipxxBookCounts counts{};
  REQUIRE(hipxxGetBookCounts(&counts) == hipSuccess);
  return counts;
}

// Descriptors open right now (the directory's own descriptor excluded).
std::size_t chunks_for(std::size_t elements) { return (elements * sizeof(Element) + kChunk - 1) / kChunk; }

// Appends value_at(size()) ... value_at(size() + count - 1).
void grow_by(Array& array, std::size_t count) {
  REQUIRE(array.append(values(array.size(), count)));
}

bool holds_values(Array const& array, std::size_t first, std::size_t count) {
  std::vector<Element> host(count);
  REQUIRE(array.copy_to_host(host, first));
  return host == values(first, count);
}

// Lowers the soft limit on descriptor numbers for one scope. On the host backend every physical
// chunk is a memfd, so this is how a test makes the Nth hipMemCreate of a grow fail for real.
class DescriptorLimit {
 public:
  // The host backend raises a soft limit it meets unless told not to.
  explicit DescriptorLimit(rlim_t soft) {
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0);
    REQUIRE(::setenv("HIPXX_HOST_RAISE_NOFILE", "0", 1) == 0);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  }
  DescriptorLimit(DescriptorLimit const&) = delete;
  DescriptorLimit& operator=(DescriptorLimit const&) = delete;
  ~DescriptorLimit() {
    (void)::setrlimit(RLIMIT_NOFILE, &saved_);
    (void)::unsetenv("HIPXX_HOST_RAISE_NOFILE");
  }

 private:
  rlimit saved_{};
};

// How many more descriptors can be opened under a limit two past the highest one in use.
struct Headroom {
  rlim_t limit;
  std::size_t free_slots;
};

Headroom headroom() {
  auto const fds = open_fds();
  int const highest = *std::max_element(fds.begin(), fds.end());
  auto const limit = static_cast<std::size_t>(highest) + 3;
  return {static_cast<rlim_t>(limit), limit - fds.size()};
}

template <class A>
concept can_copy_out_whole = requires(A const& array) { array.to_vector(); };

template <class T>
concept can_hold = requires {
  typename hipxx::GrowableArray<T>;
};

}  // namespace

static_assert(!std::is_copy_constructible_v<Array> && !std::is_copy_assignable_v<Array>);
static_assert(std::is_nothrow_move_constructible_v<Array> && std::is_nothrow_move_assignable_v<Array>);
// Elements are written in place: a const or volatile element type would be written all the same.
static_assert(can_hold<int> && can_hold<std::array<char, 3>>);
static_assert(!can_hold<int const> && !can_hold<int volatile> && !can_hold<std::string>);

TEST_CASE("data() comes from a named array only, never from a temporary one") {
  // A temporary array's range is freed at the end of the statement, and its address handed out again.
  static_assert(test_support::gives_data<Array&> && test_support::gives_data<Array const&>);
  static_assert(!test_support::gives_data<Array> && !test_support::gives_data<Array const>);
  static_assert(std::is_same_v<decltype(std::declval<Array&>().data()), Element*>);
  static_assert(std::is_same_v<decltype(std::declval<Array const&>().data()), Element const*>);
}

TEST_CASE("create reserves address space only") {
  auto const before = books();
  auto array = Array::create(Device{0}).value();
  CHECK(array.device() == Device{0});
  CHECK(array.size() == 0);
  CHECK(array.empty());
  CHECK(array.capacity() == 0);
  CHECK(array.chunks_mapped() == 0);
  CHECK(array.mapped_bytes() == 0);
  CHECK(array.chunk_bytes() == kChunk);
  CHECK(array.reserved_bytes() == Array::default_max_bytes);
  CHECK(array.max_size() == Array::default_max_bytes / sizeof(Element));
  REQUIRE(array.data() != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(array.data()) % kChunk == 0);
  CHECK(books().reservations == before.reservations + 1);
  CHECK(books().mappings == before.mappings);
  CHECK(books().allocations == before.allocations);
}

TEST_CASE("create checks the chunk size and the limit") {
  auto const before = books();
  CHECK(Array::create(Device{0}, 64 * kMiB, 3 * kMiB).error() == hipErrorInvalidValue);  // not a multiple
  CHECK(Array::create(Device{0}, 64 * kMiB, kMiB).error() == hipErrorInvalidValue);      // below the granularity
  CHECK(Array::create(Device{0}, 0).error() == hipErrorInvalidValue);
  CHECK(GrowableArray<std::array<char, 64>>::create(Device{0}, 32).error() == hipErrorInvalidValue);
  CHECK(Array::create(Device{0}, SIZE_MAX).error() == hipErrorInvalidValue);  // rounding up would wrap
  CHECK(Array::create(Device{0}, std::size_t{1} << 62).has_error());          // no such address space
  CHECK(Array::create(Device{3}).has_error());
  CHECK(books().reservations == before.reservations);

  auto const custom = Array::create(Device{0}, 5 * kMiB, 4 * kMiB).value();
  CHECK(custom.chunk_bytes() == 4 * kMiB);
  CHECK(custom.reserved_bytes() == 8 * kMiB);  // rounded up to whole chunks
  CHECK(custom.max_size() == 8 * kMiB / sizeof(Element));
}

TEST_CASE("push_back and append map chunks as they are needed, and data() never moves") {
  auto const before = books();
  auto array = Array::create(Device{0}).value();
  Element* const base = array.data();

  REQUIRE(array.push_back(value_at(0)));
  CHECK(array.size() == 1);
  CHECK(array.chunks_mapped() == 1);
  CHECK(array.mapped_bytes() == kChunk);
  CHECK(array.capacity() == kPerChunk);

  grow_by(array, kPerChunk - 1);  // exactly fills the first chunk
  CHECK(array.size() == kPerChunk);
  CHECK(array.chunks_mapped() == 1);

  REQUIRE(array.push_back(value_at(kPerChunk)));  // one element into a new chunk
  CHECK(array.chunks_mapped() == 2);
  CHECK(array.data() == base);

  grow_by(array, 3 * kPerChunk + 17);  // several chunks in one call
  CHECK(array.size() == 4 * kPerChunk + 18);
  CHECK(array.chunks_mapped() == 5);
  CHECK(array.mapped_bytes() == 5 * kChunk);
  CHECK(array.data() == base);

  // One chunk is one physical allocation and one mapping in the runtime's books.
  CHECK(books().mappings == before.mappings + 5);
  CHECK(books().allocations == before.allocations + 5);

  CHECK(holds_values(array, 0, array.size()));
  for (std::size_t const index : {std::size_t{0}, kPerChunk - 1, kPerChunk, 2 * kPerChunk, array.size() - 1}) {
    CHECK(array.read(index).value() == value_at(index));
  }
  CHECK(array.to_vector().value() == values(0, array.size()));

  CHECK(array.append({}).has_value());  // nothing to add: nothing changes
  CHECK(array.size() == 4 * kPerChunk + 18);
}

TEST_CASE("resize grows zero-filled and shrinks by unmapping and releasing chunks") {
  auto const before = books();
  auto array = Array::create(Device{0}).value();
  Element* const base = array.data();
  grow_by(array, kPerChunk + 10);

  REQUIRE(array.resize(3 * kPerChunk + 5));
  CHECK(array.size() == 3 * kPerChunk + 5);
  CHECK(array.chunks_mapped() == 4);
  CHECK(holds_values(array, 0, kPerChunk + 10));
  std::vector<Element> tail(array.size() - (kPerChunk + 10));
  REQUIRE(array.copy_to_host(tail, kPerChunk + 10));
  CHECK(std::all_of(tail.begin(), tail.end(), [](Element e) { return e == 0; }));

  // Shrinking keeps only the chunks that hold elements, and the elements in them.
  REQUIRE(array.resize(kPerChunk + 3));
  CHECK(array.size() == kPerChunk + 3);
  CHECK(array.chunks_mapped() == 2);
  CHECK(books().mappings == before.mappings + 2);
  CHECK(books().allocations == before.allocations + 2);
  CHECK(holds_values(array, 0, kPerChunk + 3));
  CHECK(array.data() == base);

  // Elements dropped by a shrink inside a chunk that stays mapped do not come back on regrowth.
  REQUIRE(array.resize(kPerChunk + 10));
  CHECK(array.read(kPerChunk + 3).value() == 0);
  CHECK(array.read(kPerChunk + 9).value() == 0);
  CHECK(array.read(kPerChunk + 2).value() == value_at(kPerChunk + 2));

  // Written values survive a grow that maps new chunks behind them.
  REQUIRE(array.write(kPerChunk + 9, 77));
  REQUIRE(array.resize(6 * kPerChunk));
  CHECK(array.read(kPerChunk + 9).value() == 77);
  CHECK(array.chunks_mapped() == 6);

  REQUIRE(array.resize(0));
  CHECK(array.empty());
  CHECK(array.chunks_mapped() == 0);
  CHECK(array.mapped_bytes() == 0);
  CHECK(books().mappings == before.mappings);
  CHECK(books().allocations == before.allocations);
  CHECK(array.data() == base);

  grow_by(array, 5);
  CHECK(holds_values(array, 0, 5));
  array.clear();
  CHECK(array.size() == 0);
  CHECK(array.chunks_mapped() == 0);
}

TEST_CASE("reserve maps ahead without changing the size; shrink_to_fit gives it back") {
  auto array = Array::create(Device{0}).value();
  grow_by(array, 10);
  REQUIRE(array.reserve(3 * kPerChunk));
  CHECK(array.size() == 10);
  CHECK(array.chunks_mapped() == 3);
  CHECK(array.capacity() == 3 * kPerChunk);
  grow_by(array, 2 * kPerChunk);  // fits: nothing new is mapped
  CHECK(array.chunks_mapped() == 3);
  REQUIRE(array.reserve(kPerChunk));  // less than mapped: a no-op, as for std::vector
  CHECK(array.chunks_mapped() == 3);

  REQUIRE(array.resize(array.size()));  // not a shrink: the reserved chunks stay
  CHECK(array.chunks_mapped() == 3);
  REQUIRE(array.resize(20));
  CHECK(array.chunks_mapped() == 1);
  REQUIRE(array.reserve(4 * kPerChunk));
  CHECK(array.chunks_mapped() == 4);
  array.shrink_to_fit();
  CHECK(array.chunks_mapped() == 1);
  CHECK(holds_values(array, 0, 20));
  CHECK(array.reserve(array.max_size() + 1).error() == hipErrorOutOfMemory);
  CHECK(array.chunks_mapped() == 1);
}

TEST_CASE("the memory held is the size rounded up to a whole chunk") {
  auto array = Array::create(Device{0}, 64 * kMiB).value();
  std::size_t const sizes[] = {1, kPerChunk, kPerChunk + 1, 7 * kPerChunk / 2, 3, 0, 2 * kPerChunk - 1, 31 * kPerChunk};
  for (std::size_t const size : sizes) {
    REQUIRE(array.resize(size));
    CHECK(array.chunks_mapped() == chunks_for(size));
    CHECK(array.mapped_bytes() == chunks_for(size) * kChunk);
    CHECK(array.mapped_bytes() - size * sizeof(Element) < kChunk);
  }
}

TEST_CASE("elements may straddle two chunks") {
  struct Triple {
    std::uint64_t a, b, c;
  };
  static_assert(kChunk % sizeof(Triple) != 0);
  auto array = GrowableArray<Triple>::create(Device{0}, 16 * kMiB).value();
  std::vector<Triple> host(kChunk / sizeof(Triple) + 100);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = Triple{i, ~i, i * 3};
  }
  REQUIRE(array.append(host));
  CHECK(array.chunks_mapped() == 2);
  std::size_t const straddler = kChunk / sizeof(Triple);  // starts in chunk 0, ends in chunk 1
  auto const got = array.read(straddler).value();
  CHECK(got.a == straddler);
  CHECK(got.b == ~straddler);
  CHECK(got.c == straddler * 3);
}

TEST_CASE("element types need not be default-constructible") {
  struct Pair {
    Pair(int first, int second) : x(first), y(second) {}
    int x;
    int y;
  };
  static_assert(!std::is_default_constructible_v<Pair> && std::is_trivially_copyable_v<Pair>);
  auto array = GrowableArray<Pair>::create(Device{0}, 4 * kMiB).value();
  REQUIRE(array.push_back(Pair{3, 4}));
  REQUIRE(array.push_back(Pair{5, 6}));
  auto const second = array.read(1).value();
  CHECK(second.x == 5);
  CHECK(second.y == 6);
  static_assert(!can_copy_out_whole<GrowableArray<Pair>>);
  static_assert(can_copy_out_whole<Array>);
}

TEST_CASE("out-of-range reads and writes are errors that change nothing") {
  auto array = Array::create(Device{0}).value();
  grow_by(array, 100);
  CHECK(array.read(100).error() == hipErrorInvalidValue);
  CHECK(array.write(100, 1).error() == hipErrorInvalidValue);
  std::vector<Element> host(10);
  CHECK(array.copy_to_host(host, 91).error() == hipErrorInvalidValue);
  CHECK(array.copy_to_host(host, SIZE_MAX).error() == hipErrorInvalidValue);
  REQUIRE(array.copy_to_host(host, 90));
  CHECK(host == values(90, 10));
  CHECK(array.copy_to_host(std::span<Element>{}, 100).has_value());
  CHECK(array.size() == 100);
  CHECK(holds_values(array, 0, 100));
}

TEST_CASE("the capacity limit is an error that changes nothing") {
  auto array = Array::create(Device{0}, 4 * kMiB).value();
  grow_by(array, array.max_size());
  CHECK(array.size() == 2 * kPerChunk);
  CHECK(array.push_back(1).error() == hipErrorOutOfMemory);
  CHECK(array.append(values(0, 3)).error() == hipErrorOutOfMemory);
  CHECK(array.resize(array.max_size() + 1).error() == hipErrorOutOfMemory);
  CHECK(array.resize(SIZE_MAX).error() == hipErrorOutOfMemory);
  CHECK(array.size() == 2 * kPerChunk);
  CHECK(array.chunks_mapped() == 2);
  CHECK(holds_values(array, 0, array.size()));
}

TEST_CASE("a grow that fails midway unmaps what it mapped and leaves the array unchanged" * doctest::test_suite("host-only")) {
  auto const backend = std::string{hipxxGetBackendName()};
  REQUIRE_MESSAGE(backend == "host", "provoking a failed hipMemCreate relies on the host backend's memfds");

  auto array = Array::create(Device{0}).value();
  grow_by(array, kPerChunk + 5);
  Element* const base = array.data();
  auto const books_before = books();
  auto const fds_before = open_fds().size();

  auto const room = headroom();
  REQUIRE(room.free_slots >= 2);  // so the failing call really maps chunks before it fails
  std::size_t const wanted = array.size() + (room.free_slots + 2) * kPerChunk;
  auto const appended = values(array.size(), wanted - array.size());

  result<void> resized = outcome::success();
  result<void> appended_result = outcome::success();
  {
    DescriptorLimit const limit{room.limit};
    resized = array.resize(wanted);
    appended_result = array.append(appended);
  }
  REQUIRE(resized.has_error());
  CHECK(resized.error() == hipErrorOutOfMemory);
  REQUIRE(appended_result.has_error());
  CHECK(appended_result.error() == hipErrorOutOfMemory);

  CHECK(array.size() == kPerChunk + 5);
  CHECK(array.chunks_mapped() == 2);
  CHECK(array.mapped_bytes() == 2 * kChunk);
  CHECK(array.data() == base);
  CHECK(holds_values(array, 0, array.size()));
  CHECK(books().mappings == books_before.mappings);
  CHECK(books().allocations == books_before.allocations);
  CHECK(open_fds().size() == fds_before);

  // With the limit lifted the same grow succeeds.
  REQUIRE(array.append(appended));
  CHECK(array.size() == wanted);
  CHECK(array.data() == base);
  CHECK(holds_values(array, 0, array.size()));
}

TEST_CASE("moving an array moves its storage; the old home is released") {
  auto const before = books();
  auto array = Array::create(Device{0}, 64 * kMiB).value();
  grow_by(array, 2 * kPerChunk + 1);
  Element* const base = array.data();

  Array moved = std::move(array);
  CHECK(moved.data() == base);
  CHECK(moved.size() == 2 * kPerChunk + 1);
  CHECK(moved.chunks_mapped() == 3);
  CHECK(holds_values(moved, 0, moved.size()));
  CHECK(array.size() == 0);           // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(array.data() == nullptr);     // NOLINT(bugprone-use-after-move)
  CHECK(array.chunks_mapped() == 0);  // NOLINT(bugprone-use-after-move)
  // NOLINTBEGIN(bugprone-use-after-move): no range left to grow into, which is no shortage of memory
  CHECK(array.push_back(1).error() == make_error_code(hipErrorInvalidHandle));
  CHECK(array.resize(1).error() == make_error_code(hipErrorInvalidHandle));
  CHECK(array.reserve(1).error() == make_error_code(hipErrorInvalidHandle));
  // NOLINTEND(bugprone-use-after-move)

  auto other = Array::create(Device{0}, 64 * kMiB).value();
  grow_by(other, 3 * kPerChunk);
  CHECK(books().reservations == before.reservations + 2);
  CHECK(books().mappings == before.mappings + 6);
  other = std::move(moved);  // the target's chunks go before its range
  CHECK(books().reservations == before.reservations + 1);
  CHECK(books().mappings == before.mappings + 3);
  CHECK(other.data() == base);
  CHECK(holds_values(other, 0, other.size()));
}

TEST_CASE("destroying arrays leaks no descriptor, mapping or book entry") {
  auto const cycle = [] {
    auto array = Array::create(Device{0}, 256 * kMiB, 4 * kMiB).value();
    grow_by(array, 5 * kPerChunk);
    REQUIRE(array.resize(kPerChunk));
    REQUIRE(array.reserve(4 * kPerChunk));
    auto second = GrowableArray<std::uint8_t>::create(Device{0}).value();
    REQUIRE(second.resize(3 * kChunk + 1));
  };
  cycle();  // warm up lazily initialised state
  // And the counters themselves: under ASan their first run may be the first use of an allocator size
  // class, which maps a new heap region while /proc/self/maps is being read.
  (void)open_fds();
  (void)runtime_like_mapping_count();
  auto const fds = open_fds().size();
  auto const maps = runtime_like_mapping_count();
  auto const counts = books();
  cycle();
  cycle();
  CHECK(open_fds().size() == fds);
  CHECK(runtime_like_mapping_count() == maps);
  CHECK(books().reservations == counts.reservations);
  CHECK(books().mappings == counts.mappings);
  CHECK(books().allocations == counts.allocations);
}

// ---------------------------------------------------------------------------------------------
// A random walk of appends, resizes, reserves, shrinks, clears, writes and reads, the array checked
// after every step against a std::vector and a count of the chunks it should hold, with an element
// that straddles chunk boundaries.

namespace {

struct Triple {
  std::uint32_t a;
  std::uint32_t b;
  std::uint32_t c;
  bool operator==(Triple const&) const = default;
};
static_assert(sizeof(Triple) == 12);

class ArrayWalk : test_support::WalkRandom {
 public:
  explicit ArrayWalk(std::uint64_t seed)
      : WalkRandom(seed), array_(GrowableArray<Triple>::create(Device{0}, kMaxChunks * kChunk).value()) {}

  void step() {
    switch (pick(12)) {
      case 0:
      case 1:
      case 2: append(); break;
      case 3: push_back(); break;
      case 4:
      case 5: resize(); break;
      case 6: reserve(); break;
      case 7: shrink_to_fit(); break;
      case 8: write(); break;
      case 9: refuse(); break;
      case 10:
        if (pick(8) == 0) clear();
        break;
      default: break;
    }
    check();
  }

  [[nodiscard]] std::size_t largest() const noexcept { return largest_; }

 private:
  static constexpr std::size_t kMaxChunks = 4;

  // A count of elements, up to an eighth of the array's limit: often within a chunk, sometimes
  // across several.
  std::size_t some_count() { return pick(4) == 0 ? pick(array_.max_size() / 8) : pick(3000); }
  Triple some_value() {
    auto const word = [&] { return static_cast<std::uint32_t>(pick(std::size_t{1} << 32)); };
    return {word(), word(), word()};
  }
  [[nodiscard]] static std::size_t chunks_of(std::size_t count) {
    return (count * sizeof(Triple) + kChunk - 1) / kChunk;
  }

  void append() {
    std::vector<Triple> values(std::min(some_count(), array_.max_size() - model_.size()));
    std::generate(values.begin(), values.end(), [&] { return some_value(); });
    REQUIRE(array_.append(values));
    model_.insert(model_.end(), values.begin(), values.end());
    chunks_ = std::max(chunks_, chunks_of(model_.size()));
  }

  void push_back() {
    if (model_.size() == array_.max_size()) return;
    Triple const value = some_value();
    REQUIRE(array_.push_back(value));
    model_.push_back(value);
    chunks_ = std::max(chunks_, chunks_of(model_.size()));
  }

  // To any size up to the limit: growing zero-fills, shrinking gives back the chunks past the end.
  void resize() {
    std::size_t const count = pick(2) == 0 ? pick(array_.max_size() + 1) : model_.size() + some_count() / 4;
    if (count > array_.max_size()) return;
    REQUIRE(array_.resize(count));
    if (count < model_.size()) chunks_ = chunks_of(count);
    if (count > model_.size()) chunks_ = std::max(chunks_, chunks_of(count));
    model_.resize(count, Triple{0, 0, 0});
  }

  void reserve() {
    std::size_t const count = pick(array_.max_size() + 1);
    REQUIRE(array_.reserve(count));
    chunks_ = std::max(chunks_, chunks_of(count));
  }

  void shrink_to_fit() {
    array_.shrink_to_fit();
    chunks_ = chunks_of(model_.size());
  }

  void clear() {
    array_.clear();
    model_.clear();
    chunks_ = 0;
  }

  void write() {
    if (model_.empty()) return;
    std::size_t const index = pick(model_.size());
    Triple const value = some_value();
    REQUIRE(array_.write(index, value));
    model_[index] = value;
  }

  // Past the end and past the limit: refused, with nothing changed (check() confirms).
  void refuse() {
    CHECK(array_.read(model_.size()).error() == hipErrorInvalidValue);
    CHECK(array_.write(model_.size(), some_value()).error() == hipErrorInvalidValue);
    CHECK(array_.resize(array_.max_size() + 1 + pick(100)).error() == hipErrorOutOfMemory);
    CHECK(array_.reserve(array_.max_size() + 1).error() == hipErrorOutOfMemory);
    if (!model_.empty()) {
      std::vector<Triple> values(array_.max_size() - model_.size() + 1);
      CHECK(array_.append(values).error() == hipErrorOutOfMemory);
    }
  }

  // The size, the chunks, the books, an element or a stretch of them, and now and then all.
  void check() {
    largest_ = std::max(largest_, model_.size());
    REQUIRE(array_.size() == model_.size());
    CHECK(array_.data() == base_);
    CHECK(array_.chunks_mapped() == chunks_);
    CHECK(array_.capacity() == chunks_ * kChunk / sizeof(Triple));
    hipxxBookCounts const now = books();
    CHECK(now.mappings == start_.mappings + chunks_);
    CHECK(now.allocations == start_.allocations + chunks_);
    if (model_.empty()) return;
    std::size_t const index = pick(model_.size());
    CHECK(array_.read(index).value() == model_[index]);
    std::size_t const first = pick(model_.size());
    std::vector<Triple> stretch(std::min<std::size_t>(1 + pick(4096), model_.size() - first));
    REQUIRE(array_.copy_to_host(stretch, first));
    CHECK(std::equal(stretch.begin(), stretch.end(), model_.begin() + static_cast<std::ptrdiff_t>(first)));
    if (pick(50) == 0) CHECK(array_.to_vector().value() == model_);
  }

  hipxxBookCounts start_ = books();
  GrowableArray<Triple> array_;
  Triple const* base_ = array_.data();
  std::vector<Triple> model_;
  std::size_t chunks_ = 0;  // the chunks the array should hold mapped
  std::size_t largest_ = 0;
};

}  // namespace

TEST_CASE("a random walk of appends, resizes, reserves, shrinks and writes keeps the array equal to a vector") {
  hipxxBookCounts const before = books();
  {
    std::uint64_t const seed = test_support::walk_seed();
    CAPTURE(seed);
    ArrayWalk walk(seed);
    test_support::take_walk(walk, 1000, seed);
    CHECK(walk.largest() > kPerChunk);  // the walk went past one chunk
  }
  hipxxBookCounts const after = books();
  CHECK(after.reservations == before.reservations);
  CHECK(after.mappings == before.mappings);
  CHECK(after.allocations == before.allocations);
}
