// The books of managed memory (lib/core/managed_memory) on their own: the advice kept per run of
// pages, for every location a runtime can have (the host and up to 64 devices), without a runtime
// of 64 devices around them.
#include <doctest/doctest.h>

#include "core/managed_memory.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

using hipxx::core::ManagedMemory;

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::uintptr_t kBase = std::uintptr_t{1} << 32;
constexpr int kDevices = 64;

// Every location with accessed-by advice over [address, address + bytes), host first.
std::vector<int> accessed_by(const ManagedMemory& books, std::uintptr_t address, std::size_t bytes) {
  std::array<std::int32_t, kDevices + 2> slots{};
  void* const data = slots.data();
  const std::size_t data_size = sizeof slots;
  const hipMemRangeAttribute attribute = hipMemRangeAttributeAccessedBy;
  REQUIRE(books.query({.data = &data, .data_sizes = &data_size, .attributes = &attribute, .count = 1}, address,
                      bytes) == hipSuccess);
  std::vector<int> locations;
  for (const std::int32_t slot : slots) {
    if (slot != hipInvalidDeviceId) locations.push_back(slot);
  }
  return locations;
}

}  // namespace

TEST_CASE("accessed-by advice is kept apart for the host and each of 64 devices") {
  ManagedMemory books{kPage};
  books.add(kBase, 4 * kPage, hipMemAttachGlobal);

  std::vector<int> expected;
  for (int location = hipCpuDeviceId; location < kDevices; ++location) {
    CAPTURE(location);
    REQUIRE(books.advise(kBase, 4 * kPage, hipMemAdviseSetAccessedBy, location) == hipSuccess);
    expected.push_back(location);
    CHECK(accessed_by(books, kBase, 4 * kPage) == expected);
  }
  // The last device's advice is its own: taking the host's away leaves it.
  REQUIRE(books.advise(kBase, 4 * kPage, hipMemAdviseUnsetAccessedBy, hipCpuDeviceId) == hipSuccess);
  std::vector<int> after = accessed_by(books, kBase, 4 * kPage);
  CHECK(after.size() == kDevices);
  CHECK(after.front() == 0);
  CHECK(after.back() == kDevices - 1);

  REQUIRE(books.advise(kBase, 4 * kPage, hipMemAdviseUnsetAccessedBy, kDevices - 1) == hipSuccess);
  after = accessed_by(books, kBase, 4 * kPage);
  CHECK(after.size() == kDevices - 1);
  CHECK(after.back() == kDevices - 2);
}

TEST_CASE("the last device's advice over part of an allocation splits and merges its runs") {
  ManagedMemory books{kPage};
  books.add(kBase, 4 * kPage, hipMemAttachGlobal);
  REQUIRE(books.advise(kBase + kPage, kPage, hipMemAdviseSetAccessedBy, kDevices - 1) == hipSuccess);
  CHECK(books.run_count(kBase) == 3);
  CHECK(accessed_by(books, kBase + kPage, kPage) == std::vector<int>{kDevices - 1});
  // Over the whole allocation only pages with the advice count: none of the others has it.
  CHECK(accessed_by(books, kBase, 4 * kPage).empty());
  CHECK(accessed_by(books, kBase, kPage).empty());

  REQUIRE(books.advise(kBase, 4 * kPage, hipMemAdviseUnsetAccessedBy, kDevices - 1) == hipSuccess);
  CHECK(books.run_count(kBase) == 1);
}
