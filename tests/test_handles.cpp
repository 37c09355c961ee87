// The owning handles over HIP's virtual memory calls: errors, devices, access lists, physical
// allocations, reserved ranges, mappings, shareable handles and descriptor passing.
// Run with HIPXX_HOST_DEVICES=2 (see meson.build) so that per-device access is observable.
#include <hipxx/hipxx.hpp>
#include <hipxx/hipxx_ext.h>

#include <doctest/doctest.h>

#include "support/descriptors.hpp"
#include "support/hidden_error_code.hpp"
#include "support/mappings.hpp"
#include "support/result_printing.hpp"
#include "support/views.hpp"

#include <range/v3/view/filter.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/transform.hpp>

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <array>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <list>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

using namespace hipxx;

namespace {

using test_support::open_fd_count;
using test_support::runtime_like_mapping_count;

hipxxBookCounts books() {
  hipxxBookCounts counts{};
  REQUIRE(hipxxGetBookCounts(&counts) == hipSuccess);
  return counts;
}

std::size_t page_granularity() { return Device{0}.granularity(Granularity::minimum).value(); }

std::vector<std::uint32_t> pattern(std::size_t bytes, std::uint32_t seed) {
  std::vector<std::uint32_t> out(bytes / sizeof(std::uint32_t));
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = seed * 2654435761U + static_cast<std::uint32_t>(i);
  }
  return out;
}

// Data moves only through the runtime's copy, never by dereferencing device memory.
hipError_t upload(void* device, std::vector<std::uint32_t> const& host) {
  return hipMemcpy(device, host.data(), host.size() * sizeof(std::uint32_t), hipMemcpyHostToDevice);
}

std::vector<std::uint32_t> download(void const* device, std::size_t bytes) {
  std::vector<std::uint32_t> host(bytes / sizeof(std::uint32_t));
  REQUIRE(hipMemcpy(host.data(), device, bytes, hipMemcpyDeviceToHost) == hipSuccess);
  return host;
}

// A range, one allocation mapped at its start, and read-write access for device 0.
struct Mapped {
  VirtualRange range;
  PhysicalAllocation allocation;
  Mapping mapping;
};

Mapped make_mapped(std::size_t bytes, Shareable shareable = Shareable::no) {
  auto range = VirtualRange::reserve(bytes).value();
  auto allocation = PhysicalAllocation::create(Device{0}, bytes, shareable).value();
  auto mapping = map(range, 0, allocation).value();
  REQUIRE(mapping.set_access(Device{0}, Access::read_write));
  return Mapped{std::move(range), std::move(allocation), std::move(mapping)};
}

template <class R>
concept mappable = requires(R&& range, PhysicalAllocation const& allocation) {
  hipxx::map(std::forward<R>(range), std::size_t{0}, allocation);
};

}  // namespace

// Owners are move-only, and a temporary range cannot be mapped into: it would be freed under the mapping.
static_assert(!std::is_copy_constructible_v<PhysicalAllocation> && !std::is_copy_assignable_v<PhysicalAllocation>);
static_assert(!std::is_copy_constructible_v<VirtualRange> && !std::is_copy_assignable_v<VirtualRange>);
static_assert(!std::is_copy_constructible_v<Mapping> && !std::is_copy_assignable_v<Mapping>);
static_assert(!std::is_copy_constructible_v<FileDescriptor> && !std::is_copy_assignable_v<FileDescriptor>);
static_assert(std::is_nothrow_move_constructible_v<PhysicalAllocation> && std::is_nothrow_move_assignable_v<PhysicalAllocation>);
static_assert(std::is_nothrow_move_constructible_v<VirtualRange> && std::is_nothrow_move_assignable_v<VirtualRange>);
static_assert(std::is_nothrow_move_constructible_v<Mapping> && std::is_nothrow_move_assignable_v<Mapping>);
static_assert(std::is_nothrow_move_constructible_v<FileDescriptor> && std::is_nothrow_move_assignable_v<FileDescriptor>);
static_assert(mappable<VirtualRange&>);
static_assert(!mappable<VirtualRange>);
static_assert(!mappable<VirtualRange const&>);
static_assert(!std::is_convertible_v<int, Device>);
static_assert(!device_range<std::vector<int>>);
static_assert(device_range<std::vector<Device>>);
static_assert(access_desc_range<std::array<AccessDesc, 2>>);

TEST_CASE("the hip error category names HIP's errors and maps them to portable conditions") {
  std::error_code const code = make_error_code(hipErrorInvalidValue);
  CHECK(std::string(code.category().name()) == "hip");
  CHECK(code.value() == 1);
  CHECK(code.message().find("hipErrorInvalidValue") != std::string::npos);
  CHECK(&code.category() == &hip_category());
  // A value the runtime has no name for keeps its number in the message; hipErrorUnknown itself
  // needs none.
  CHECK(std::error_code(123456, hip_category()).message().find("123456") != std::string::npos);
  CHECK(make_error_code(hipErrorUnknown).message().find("999") == std::string::npos);
  CHECK(hipxx::make_error_code(hipErrorInvalidValue) == code);

  // is_error_code_enum: the enum converts implicitly and compares with codes.
  std::error_code const implicit = hipErrorOutOfMemory;
  CHECK(implicit == hipErrorOutOfMemory);
  CHECK(implicit != hipErrorInvalidValue);
  CHECK(implicit == std::errc::not_enough_memory);
  CHECK(code == std::errc::invalid_argument);
  CHECK(make_error_code(hipErrorNotSupported) == std::errc::not_supported);
  CHECK(make_error_code(hipErrorInvalidDevice) != std::errc::invalid_argument);
  CHECK_FALSE(make_error_code(hipSuccess));

  auto const ok = check(hipSuccess);
  CHECK(ok.has_value());
  auto const bad = check(hipErrorNotMapped);
  REQUIRE(bad.has_error());
  CHECK(bad.error() == hipErrorNotMapped);
  CHECK(bad.error().message().find("hipErrorNotMapped") != std::string::npos);

  // .value() on a failure throws std::system_error carrying the same code.
  result<int> const failed = failure(hipErrorInvalidDevice);
  try {
    (void)failed.value();
    FAIL("value() of a failure did not throw");
  } catch (std::system_error const& error) {
    CHECK(error.code() == hipErrorInvalidDevice);
  }
  CHECK_THROWS_AS(bad.value(), std::system_error);
}

TEST_CASE("an error code made inside a shared library with hidden symbols is in the same hip category") {
  std::error_code const code = invalid_value_from_hidden_library();
  CHECK(&code.category() == &hip_category());
  CHECK(code == hipErrorInvalidValue);
  CHECK(code == make_error_code(hipErrorInvalidValue));
}

TEST_CASE("devices: count, current device, attributes and granularity" * doctest::test_suite("devices-2")) {
  auto const count = device_count();
  REQUIRE(count);
  CHECK(count.value() == 2);

  auto const all = devices().value();
  std::vector<Device> const expected{Device{0}, Device{1}};
  CHECK(all == expected);

  CHECK(current_device().value() == Device{0});
  REQUIRE(Device{1}.make_current());
  CHECK(current_device().value() == Device{1});
  REQUIRE(Device{0}.make_current());
  CHECK(current_device().value().id() == 0);
  CHECK(Device{7}.make_current().error() == hipErrorInvalidDevice);
  CHECK(current_device().value() == Device{0});

  CHECK(device(1).value() == Device{1});
  CHECK(device(2).error() == hipErrorInvalidDevice);
  CHECK(device(-1).error() == hipErrorInvalidDevice);

  CHECK(Device{0}.supports_virtual_memory().value());
  CHECK(Device{1}.attribute(hipDeviceAttributeVirtualMemoryManagementSupported).value() == 1);
  CHECK(Device{9}.attribute(hipDeviceAttributeVirtualMemoryManagementSupported).error() == hipErrorInvalidDevice);

  auto const minimum = Device{0}.granularity(Granularity::minimum).value();
  auto const recommended = Device{0}.granularity().value();
  if (std::string{hipxxGetBackendName()} == "host") {
    CHECK(minimum == static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  }
  CHECK(recommended == std::size_t{2} << 20);
  CHECK(recommended % minimum == 0);
  CHECK(Device{5}.granularity().has_error());

  CHECK(Device{1}.location().type == hipMemLocationTypeDevice);
  CHECK(Device{1}.location().id == 1);
  CHECK(Device{0} < Device{1});
}

TEST_CASE("Device::memory_info: that device's memory, whichever device is current" * doctest::test_suite("devices-2")) {
  REQUIRE(Device{0}.make_current());
  auto const all = devices().value();  // held: a range-for would not keep the result alive
  for (Device const device : all) {
    CAPTURE(device.id());
    auto const info = device.memory_info();
    REQUIRE(info);
    std::size_t total = 0;
    REQUIRE(hipDeviceTotalMem(&total, device.id()) == hipSuccess);
    CHECK(info.value().total == total);
    CHECK(info.value().free > 0);
    CHECK(info.value().free <= info.value().total);
    CHECK(current_device().value() == Device{0});
  }
  REQUIRE(Device{1}.make_current());
  CHECK(Device{3}.memory_info().error() == hipErrorInvalidDevice);
  CHECK(current_device().value() == Device{1});
  REQUIRE(Device{0}.make_current());
}

TEST_CASE("access descriptors are built from std and range-v3 ranges of devices") {
  CHECK(to_native(Access::none) == hipMemAccessFlagsProtNone);
  CHECK(to_native(Access::read) == hipMemAccessFlagsProtRead);
  CHECK(to_native(Access::read_write) == hipMemAccessFlagsProtReadWrite);
  CHECK(access_from_native(hipMemAccessFlagsProtRead) == Access::read);
  CHECK_FALSE(access_from_native(2).has_value());  // write-only does not exist in HIP

  constexpr AccessDesc desc = AccessDesc{Device{1}}.read_only();
  static_assert(desc.access() == Access::read && desc.device() == Device{1});
  CHECK(desc.native().location.id == 1);
  CHECK(desc.native().location.type == hipMemLocationTypeDevice);
  CHECK(desc.native().flags == hipMemAccessFlagsProtRead);
  CHECK(AccessDesc{Device{0}}.access() == Access::read_write);
  CHECK(desc.revoked().access() == Access::none);

  std::vector<Device> const list{Device{0}, Device{1}};
  auto const from_vector = access_for(list, Access::read);
  REQUIRE(from_vector.size() == 2);
  CHECK(from_vector[0].location.id == 0);
  CHECK(from_vector[1].location.id == 1);
  CHECK(from_vector[1].flags == hipMemAccessFlagsProtRead);

  // A lazy range-v3 pipeline with no size: only odd ordinals.
  auto odd = ranges::views::iota(0, 6) | ranges::views::filter([](int id) { return id % 2 == 1; }) |
             ranges::views::transform([](int id) { return Device{id}; });
  auto const from_range_v3 = access_for(odd, Access::read_write);
  REQUIRE(from_range_v3.size() == 3);
  CHECK(from_range_v3[2].location.id == 5);
  CHECK(from_range_v3[2].flags == hipMemAccessFlagsProtReadWrite);

  // Any std container or view: a node-based list, and a span. (Clang 14 cannot compile libstdc++ 12's
  // std::views, so the lazy case is left to range-v3 above.)
  std::list<Device> const linked{Device{1}, Device{0}};
  auto const from_list = access_for(linked, Access::none);
  REQUIRE(from_list.size() == 2);
  CHECK(from_list[0].location.id == 1);
  CHECK(from_list[1].flags == hipMemAccessFlagsProtNone);
  auto const from_span = access_for(std::span<Device const>(list).subspan(1), Access::read);
  REQUIRE(from_span.size() == 1);
  CHECK(from_span[0].location.id == 1);

  std::array const descs{AccessDesc{Device{0}}, AccessDesc{Device{1}, Access::read}};
  auto const native = to_native(descs);
  REQUIRE(native.size() == 2);
  CHECK(native[0].flags == hipMemAccessFlagsProtReadWrite);
  CHECK(native[1].flags == hipMemAccessFlagsProtRead);
}

TEST_CASE("PhysicalAllocation: create, properties, move, release" * doctest::test_suite("devices-2")) {
  std::size_t const bytes = 4 * page_granularity();
  auto const before = books();
  {
    auto allocation = PhysicalAllocation::create(Device{1}, bytes).value();
    CHECK(static_cast<bool>(allocation));
    CHECK(allocation.size() == bytes);
    CHECK(books().allocations == before.allocations + 1);

    auto const properties = allocation.properties().value();
    CHECK(properties.device == Device{1});
    CHECK(properties.shareable == Shareable::no);
    CHECK(properties.native.type == hipMemAllocationTypePinned);
    CHECK(properties.native.location.type == hipMemLocationTypeDevice);

    auto const shareable = PhysicalAllocation::create(Device{0}, bytes, Shareable::posix_fd).value();
    CHECK(shareable.properties().value().shareable == Shareable::posix_fd);
    CHECK(shareable.properties().value().native.requestedHandleType == hipMemHandleTypePosixFileDescriptor);

    auto const native = allocation.native_handle();
    PhysicalAllocation moved = std::move(allocation);
    CHECK(moved.native_handle() == native);
    CHECK(moved.size() == bytes);
    CHECK_FALSE(static_cast<bool>(allocation));  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    CHECK(allocation.size() == 0);               // NOLINT(bugprone-use-after-move)
    CHECK(allocation.properties().has_error());  // NOLINT(bugprone-use-after-move)

    // Move-assignment releases what the target held.
    auto other = PhysicalAllocation::create(Device{0}, bytes).value();
    CHECK(books().allocations == before.allocations + 3);
    other = std::move(moved);
    CHECK(books().allocations == before.allocations + 2);
    CHECK(other.native_handle() == native);

    // release() hands the handle to the C API; adopt() takes it back.
    auto const raw = other.release();
    CHECK_FALSE(static_cast<bool>(other));
    CHECK(books().allocations == before.allocations + 2);
    auto adopted = PhysicalAllocation::adopt(raw, bytes);
    CHECK(adopted.native_handle() == raw);
    auto const raw_again = adopted.release();
    CHECK(hipMemRelease(raw_again) == hipSuccess);
    CHECK(books().allocations == before.allocations + 1);
  }
  CHECK(books().allocations == before.allocations);

  CHECK(PhysicalAllocation::create(Device{0}, bytes + 1).error() == hipErrorInvalidValue);
  CHECK(PhysicalAllocation::create(Device{0}, 0).error() == hipErrorInvalidValue);
  CHECK(PhysicalAllocation::create(Device{4}, bytes).error() == hipErrorInvalidValue);
  CHECK(books().allocations == before.allocations);
}

TEST_CASE("addresses come from named owners only: a temporary's range, mapping or memory is gone at the ';'") {
  using namespace test_support;
  static_assert(gives_base<VirtualRange&> && gives_base<VirtualRange const&>);
  static_assert(!gives_base<VirtualRange> && !gives_base<VirtualRange const>);
  static_assert(gives_address<Mapping&> && gives_address<Mapping const&>);
  static_assert(!gives_address<Mapping> && !gives_address<Mapping const>);
  static_assert(gives_data<IpcMapping&> && gives_data<IpcMapping const&> && !gives_data<IpcMapping>);
  static_assert(gives_data<ImportedPoolPointer&> && gives_data<ImportedPoolPointer const&> &&
                !gives_data<ImportedPoolPointer>);
  // What a temporary may still give: its size.
  static_assert(requires { std::declval<VirtualRange>().size(); });
  static_assert(requires { std::declval<Mapping>().size(); });
}

TEST_CASE("VirtualRange: reserve, contains, move, free") {
  std::size_t const page = page_granularity();
  std::size_t const two_mib = std::size_t{2} << 20;
  auto const before = books();
  {
    auto range = VirtualRange::reserve(8 * two_mib, two_mib).value();
    REQUIRE(range.base() != nullptr);
    CHECK(range.size() == 8 * two_mib);
    CHECK(reinterpret_cast<std::uintptr_t>(range.base()) % two_mib == 0);
    CHECK(books().reservations == before.reservations + 1);
    CHECK(range.mapping_count() == 0);

    auto const* base = static_cast<char const*>(range.base());
    CHECK(range.contains(base));
    CHECK(range.contains(base, range.size()));
    CHECK_FALSE(range.contains(base, range.size() + 1));
    CHECK(range.contains(base + range.size() - 1));
    CHECK_FALSE(range.contains(base + range.size()));
    CHECK(range.contains(base + range.size(), 0));
    CHECK_FALSE(range.contains(base - 1));
    CHECK_FALSE(range.contains(base + page, SIZE_MAX));

    void* const address = range.base();
    VirtualRange moved = std::move(range);
    CHECK(moved.base() == address);
    CHECK_FALSE(static_cast<bool>(range));  // NOLINT(bugprone-use-after-move)
    CHECK(range.base() == nullptr);          // NOLINT(bugprone-use-after-move)
    CHECK_FALSE(range.contains(address));    // NOLINT(bugprone-use-after-move)
    CHECK(books().reservations == before.reservations + 1);

    auto second = VirtualRange::reserve(page).value();
    CHECK(books().reservations == before.reservations + 2);
    second = std::move(moved);  // frees what `second` held
    CHECK(books().reservations == before.reservations + 1);
    CHECK(second.base() == address);
  }
  CHECK(books().reservations == before.reservations);

  CHECK(VirtualRange::reserve(0).error() == hipErrorInvalidValue);
  CHECK(VirtualRange::reserve(page + 1).error() == hipErrorInvalidValue);
  CHECK(VirtualRange::reserve(page, 3 * page).error() == hipErrorInvalidValue);
  CHECK(books().reservations == before.reservations);
}

TEST_CASE("Mapping: no access until granted, per-device access, data through hipMemcpy" * doctest::test_suite("devices-2")) {
  std::size_t const bytes = 4 * page_granularity();
  auto range = VirtualRange::reserve(2 * bytes).value();
  auto allocation = PhysicalAllocation::create(Device{0}, bytes).value();
  auto mapping = map(range, bytes, allocation).value();
  CHECK(mapping.address() == static_cast<char*>(range.base()) + bytes);
  CHECK(mapping.size() == bytes);
  CHECK(range.mapping_count() == 1);

  // A new mapping grants nothing, so the runtime refuses to copy into it.
  CHECK(mapping.access(Device{0}).value() == Access::none);
  CHECK(mapping.access(Device{1}).value() == Access::none);
  auto const data = pattern(bytes, 1);
  CHECK(upload(mapping.address(), data) == hipErrorInvalidValue);

  REQUIRE(mapping.set_access(Device{0}, Access::read_write));
  CHECK(mapping.access(Device{0}).value() == Access::read_write);
  CHECK(mapping.access(Device{1}).value() == Access::none);
  REQUIRE(upload(mapping.address(), data) == hipSuccess);
  CHECK(download(mapping.address(), bytes) == data);

  // Granting device 1 leaves device 0's access as it was.
  REQUIRE(mapping.set_access(AccessDesc{Device{1}}.read_only()));
  CHECK(mapping.access(Device{0}).value() == Access::read_write);
  CHECK(mapping.access(Device{1}).value() == Access::read);

  // Device 1 may read but not write.
  REQUIRE(Device{1}.make_current());
  CHECK(download(mapping.address(), bytes) == data);
  CHECK(upload(mapping.address(), pattern(bytes, 2)) == hipErrorInvalidValue);
  REQUIRE(Device{0}.make_current());

  // A list built from a range-v3 pipeline: every device read-write.
  auto every_device = ranges::views::iota(0, 2) | ranges::views::transform([](int id) {
                        return AccessDesc{Device{id}, Access::read_write};
                      });
  REQUIRE(mapping.set_access(every_device));
  CHECK(mapping.access(Device{1}).value() == Access::read_write);
  REQUIRE(mapping.set_access(access_for(std::vector{Device{1}}, Access::none)));
  CHECK(mapping.access(Device{1}).value() == Access::none);
  CHECK(mapping.access(Device{0}).value() == Access::read_write);

  // Refused without changing anything: a device that does not exist.
  CHECK(mapping.set_access(Device{3}, Access::read).error() == hipErrorInvalidValue);
  CHECK(mapping.access(Device{0}).value() == Access::read_write);
  CHECK(mapping.access(Device{3}).error() == hipErrorInvalidValue);
}

TEST_CASE("map refuses what cannot fit and what is already mapped") {
  std::size_t const page = page_granularity();
  auto range = VirtualRange::reserve(4 * page).value();
  auto big = PhysicalAllocation::create(Device{0}, 2 * page).value();
  auto const before = books();

  CHECK(map(range, 3 * page, big).error() == hipErrorInvalidValue);  // would run past the end
  CHECK(map(range, 5 * page, big).error() == hipErrorInvalidValue);  // starts past the end
  CHECK(map(range, SIZE_MAX - page, big).error() == hipErrorInvalidValue);
  CHECK(map(range, 1, big).error() == hipErrorInvalidValue);  // not granular: the runtime refuses

  PhysicalAllocation empty = std::move(big);
  CHECK(map(range, 0, big).error() == hipErrorInvalidValue);  // NOLINT(bugprone-use-after-move)

  auto unknown_size = PhysicalAllocation::adopt(empty.release(), 0);
  CHECK(map(range, 0, unknown_size).error() == hipErrorInvalidValue);
  CHECK(range.mapping_count() == 0);

  auto first = map(range, 0, PhysicalAllocation::adopt(unknown_size.release(), 2 * page)).value();
  CHECK(map(range, page, PhysicalAllocation::create(Device{0}, page).value()).error() == hipErrorInvalidValue);
  CHECK(range.mapping_count() == 1);
  CHECK(books().mappings == before.mappings + 1);

  VirtualRange moved_from = VirtualRange::reserve(page).value();
  VirtualRange keeper = std::move(moved_from);
  CHECK(map(moved_from, 0, PhysicalAllocation::create(Device{0}, page).value()).error() ==  // NOLINT
        hipErrorInvalidValue);
}

TEST_CASE("Mapping: move semantics and explicit unmap keep the range's books right") {
  std::size_t const page = page_granularity();
  auto range = VirtualRange::reserve(4 * page).value();
  auto allocation = PhysicalAllocation::create(Device{0}, page).value();
  auto const before = books();

  auto mapping = map(range, 0, allocation).value();
  void* const address = mapping.address();
  Mapping moved = std::move(mapping);
  CHECK(moved.address() == address);
  CHECK(moved.size() == page);
  CHECK_FALSE(static_cast<bool>(mapping));  // NOLINT(bugprone-use-after-move)
  CHECK(mapping.address() == nullptr);      // NOLINT(bugprone-use-after-move)
  CHECK(range.mapping_count() == 1);
  CHECK(books().mappings == before.mappings + 1);

  // Move-assignment unmaps what the target held.
  auto other = map(range, 2 * page, allocation).value();
  CHECK(range.mapping_count() == 2);
  CHECK(books().mappings == before.mappings + 2);
  other = std::move(moved);
  CHECK(range.mapping_count() == 1);
  CHECK(books().mappings == before.mappings + 1);
  CHECK(other.address() == address);

  REQUIRE(other.unmap());
  CHECK_FALSE(static_cast<bool>(other));
  CHECK(range.mapping_count() == 0);
  CHECK(books().mappings == before.mappings);
  CHECK(other.unmap());  // unmapping an empty Mapping is a no-op

  // Nothing is mapped now, so the range can be freed.
  { VirtualRange gone = std::move(range); }
  CHECK(books().reservations == before.reservations - 1);
}

TEST_CASE("an allocation released while mapped stays usable until the last unmap") {
  std::size_t const bytes = 2 * page_granularity();
  auto const before = books();
  {
    auto range = VirtualRange::reserve(bytes).value();
    Mapping mapping = [&] {
      auto allocation = PhysicalAllocation::create(Device{0}, bytes).value();
      return map(range, 0, allocation).value();
    }();  // the allocation's owner is gone here
    CHECK(books().allocations == before.allocations + 1);
    REQUIRE(mapping.set_access(Device{0}, Access::read_write));
    auto const data = pattern(bytes, 3);
    REQUIRE(upload(mapping.address(), data) == hipSuccess);
    CHECK(download(mapping.address(), bytes) == data);

    // A temporary allocation maps too, for the same reason.
    auto range2 = VirtualRange::reserve(bytes).value();
    auto mapping2 = map(range2, 0, PhysicalAllocation::create(Device{0}, bytes).value()).value();
    CHECK(books().allocations == before.allocations + 2);
  }
  CHECK(books().allocations == before.allocations);
  CHECK(books().mappings == before.mappings);
  CHECK(books().reservations == before.reservations);
}

TEST_CASE("retain: a second handle to mapped memory, from the mapping or any address in it") {
  std::size_t const bytes = 4 * page_granularity();
  auto const data = pattern(bytes, 4);
  auto const before = books();
  {
    auto first = make_mapped(bytes);
    REQUIRE(upload(first.mapping.address(), data) == hipSuccess);

    auto retained = first.mapping.retain_allocation().value();
    CHECK(retained.size() == bytes);
    CHECK(retained.native_handle() == first.allocation.native_handle());
    {
      auto* const inside = static_cast<char*>(first.mapping.address()) + bytes / 2;
      auto const from_address = PhysicalAllocation::retain_from(inside).value();
      CHECK(from_address.size() == 0);  // HIP cannot tell; see retain_from
      CHECK(from_address.native_handle() == first.allocation.native_handle());
      auto const sized = PhysicalAllocation::retain_from(inside, bytes).value();
      CHECK(sized.size() == bytes);
    }
    // Past the mapping, inside the range: nothing to retain.
    CHECK(PhysicalAllocation::retain_from(static_cast<char*>(first.range.base()) + bytes).has_error());
    CHECK(PhysicalAllocation::retain_from(data.data()).has_error());

    // The retained handle alone keeps the memory alive once the creator's handle and the mapping are gone.
    first.allocation = std::move(retained);
    REQUIRE(first.mapping.unmap());
    CHECK(books().mappings == before.mappings);
    CHECK(books().allocations == before.allocations + 1);
    auto mapping = map(first.range, 0, first.allocation).value();
    REQUIRE(mapping.set_access(Device{0}, Access::read));
    CHECK(download(mapping.address(), bytes) == data);
  }
  CHECK(books().allocations == before.allocations);
  CHECK(books().mappings == before.mappings);
  CHECK(books().reservations == before.reservations);
}

TEST_CASE("export and import within one process: two mappings of one allocation") {
  std::size_t const bytes = 4 * page_granularity();
  auto const before = books();
  auto const fds_before = open_fd_count();
  {
    auto exporter = make_mapped(bytes, Shareable::posix_fd);
    auto fd = export_handle(exporter.allocation).value();
    REQUIRE(static_cast<bool>(fd));
    struct stat status {};
    REQUIRE(::fstat(fd.get(), &status) == 0);

    auto imported = import_handle(fd, bytes).value();
    CHECK(imported.size() == bytes);
    CHECK(imported.native_handle() != exporter.allocation.native_handle());
    CHECK(imported.properties().value().shareable == Shareable::posix_fd);
    REQUIRE(fd.close());  // the import does not need the descriptor any more

    auto range = VirtualRange::reserve(bytes).value();
    auto mapping = map(range, 0, imported).value();
    REQUIRE(mapping.set_access(Device{0}, Access::read_write));

    auto const first = pattern(bytes, 5);
    REQUIRE(upload(exporter.mapping.address(), first) == hipSuccess);
    CHECK(download(mapping.address(), bytes) == first);
    auto const second = pattern(bytes, 6);
    REQUIRE(upload(mapping.address(), second) == hipSuccess);
    CHECK(download(exporter.mapping.address(), bytes) == second);

    // Only allocations created shareable can be exported.
    auto plain = PhysicalAllocation::create(Device{0}, bytes).value();
    CHECK(export_handle(plain).error() == hipErrorInvalidValue);
    CHECK(import_handle(FileDescriptor{}, bytes).has_error());
  }
  CHECK(open_fd_count() == fds_before);
  CHECK(books().allocations == before.allocations);
}

TEST_CASE("FileDescriptor: owns, duplicates, releases") {
  auto const fds_before = open_fd_count();
  {
    std::array<int, 2> pipe_ends{};
    REQUIRE(::pipe2(pipe_ends.data(), O_CLOEXEC) == 0);
    FileDescriptor read_end{pipe_ends[0]};
    FileDescriptor write_end{pipe_ends[1]};
    CHECK(open_fd_count() == fds_before + 2);

    auto copy = write_end.dup().value();
    CHECK(copy.get() != write_end.get());
    CHECK((::fcntl(copy.get(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(open_fd_count() == fds_before + 3);
    char const byte = 'x';
    REQUIRE(::write(copy.get(), &byte, 1) == 1);
    char got = 0;
    REQUIRE(::read(read_end.get(), &got, 1) == 1);
    CHECK(got == 'x');

    FileDescriptor moved = std::move(copy);
    CHECK_FALSE(static_cast<bool>(copy));  // NOLINT(bugprone-use-after-move)
    CHECK(open_fd_count() == fds_before + 3);
    moved = std::move(write_end);  // closes the duplicate
    CHECK(open_fd_count() == fds_before + 2);

    int const raw = moved.release();
    CHECK_FALSE(static_cast<bool>(moved));
    CHECK(open_fd_count() == fds_before + 2);
    CHECK(::close(raw) == 0);
    CHECK(open_fd_count() == fds_before + 1);

    CHECK(FileDescriptor{}.dup().error() == std::errc::bad_file_descriptor);
  }
  CHECK(open_fd_count() == fds_before);
}

namespace {

// Two connected sockets of `type` to pass descriptors over, and a pipe whose ends to pass.
struct SocketsAndPipe {
  FileDescriptor left;
  FileDescriptor right;
  FileDescriptor pipe_read;
  FileDescriptor pipe_write;
};

SocketsAndPipe sockets_and_pipe(int type) {
  std::array<int, 2> ends{};
  REQUIRE(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, ends.data()) == 0);
  std::array<int, 2> pipe_ends{};
  REQUIRE(::pipe2(pipe_ends.data(), O_CLOEXEC) == 0);
  return {FileDescriptor{ends[0]}, FileDescriptor{ends[1]}, FileDescriptor{pipe_ends[0]}, FileDescriptor{pipe_ends[1]}};
}

}  // namespace

TEST_CASE("send_fd / recv_fd over a socketpair carry a descriptor and a payload") {
  struct Offer {
    std::uint64_t size;
    std::uint32_t tag;
    std::uint32_t generation;
  };
  auto const fds_before = open_fd_count();
  {
    auto [left, right, pipe_read, pipe_write] = sockets_and_pipe(SOCK_STREAM);

    REQUIRE(send_fd<Offer>(left, pipe_write, Offer{.size = 123456789, .tag = 42, .generation = 3}));
    auto received = recv_fd<Offer>(right).value();
    CHECK(received.payload.size == 123456789);
    CHECK(received.payload.tag == 42);
    CHECK(received.payload.generation == 3);
    REQUIRE(static_cast<bool>(received.fd));
    CHECK(received.fd.get() != pipe_write.get());
    CHECK((::fcntl(received.fd.get(), F_GETFD) & FD_CLOEXEC) != 0);

    // The received descriptor is the same pipe.
    char const byte = 'y';
    REQUIRE(::write(received.fd.get(), &byte, 1) == 1);
    char got = 0;
    REQUIRE(::read(pipe_read.get(), &got, 1) == 1);
    CHECK(got == 'y');

    // The default payload is a uint64_t.
    REQUIRE(send_fd(left.get(), pipe_read, std::uint64_t{7}));
    CHECK(recv_fd(right.get()).value().payload == 7);

    // Plain data with no descriptor is a protocol error, not a descriptor -1.
    std::uint64_t const plain = 1;
    REQUIRE(::send(left.get(), &plain, sizeof(plain), 0) == static_cast<ssize_t>(sizeof(plain)));
    CHECK(recv_fd(right).error() == std::errc::bad_message);

    // The peer went away.
    REQUIRE(left.close());
    CHECK(recv_fd(right).error() == std::errc::connection_reset);
    CHECK(send_fd(right, pipe_read, std::uint64_t{1}).error() == std::errc::broken_pipe);

    CHECK(send_fd(FileDescriptor{}, pipe_read, std::uint64_t{1}).error() == std::errc::bad_file_descriptor);
  }
  CHECK(open_fd_count() == fds_before);
}

namespace {

struct Padded {
  std::uint64_t size;
  std::uint32_t tag;  // followed by 4 bytes of padding
};

struct Pair {
  std::uint32_t first;
  std::uint32_t second;
};

template <class Payload, class Argument>
concept sendable = requires(FileDescriptor const& fd, Argument const& payload) {
  send_fd<Payload>(fd, fd, payload);
};

template <class Argument>
concept sendable_unnamed = requires(FileDescriptor const& fd, Argument const& payload) {
  send_fd(fd, fd, payload);
};

}  // namespace

TEST_CASE("send_fd sends the payload type it names, uint64_t unless told, never one deduced from the argument") {
  // A literal is an int, but goes as the uint64_t that recv_fd reads by default; any other type is named.
  static_assert(sendable_unnamed<int>);
  static_assert(!sendable_unnamed<Pair>);
  static_assert(sendable<Pair, Pair>);
  // Padding bytes would carry this process's leftovers to the other one.
  static_assert(!sendable<Padded, Padded>);
  static_assert(sendable<std::array<std::uint32_t, 3>, std::array<std::uint32_t, 3>>);

  auto const fds_before = open_fd_count();
  {
    // Seqpacket: a payload of the wrong size is refused there, where a stream would wait for the rest.
    auto [left, right, pipe_read, pipe_write] = sockets_and_pipe(SOCK_SEQPACKET);
    REQUIRE(send_fd(left, pipe_write, 4096));
    auto received = recv_fd(right);
    REQUIRE(received);
    CHECK(received.value().payload == 4096);
    REQUIRE(send_fd(left.get(), pipe_write, 7));
    CHECK(recv_fd(right.get()).value().payload == 7);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("send_fd / recv_fd over datagram and seqpacket sockets: a message of the wrong size is refused whole") {
  auto const fds_before = open_fd_count();
  for (int const type : {SOCK_DGRAM, SOCK_SEQPACKET}) {
    CAPTURE(type);
    auto [left, right, pipe_read, pipe_write] = sockets_and_pipe(type);

    // Shorter than the payload asked for: refused, and the message after it arrives intact.
    REQUIRE(send_fd<std::uint32_t>(left, pipe_write, 0x11111111));
    REQUIRE(send_fd(left, pipe_read, std::uint64_t{0x2222222222222222}));
    CHECK(recv_fd<std::uint64_t>(right).error() == std::errc::message_size);
    auto next = recv_fd<std::uint64_t>(right);
    REQUIRE(next);
    CHECK(next.value().payload == 0x2222222222222222);
    CHECK(static_cast<bool>(next.value().fd));

    // Longer than the payload asked for: refused too.
    REQUIRE(send_fd(left, pipe_write, std::uint64_t{3}));
    CHECK(recv_fd<std::uint32_t>(right).error() == std::errc::message_size);

    // A message of the right size goes through.
    REQUIRE(send_fd(left, pipe_write, std::uint64_t{4}));
    CHECK(recv_fd<std::uint64_t>(right).value().payload == 4);
  }
  CHECK(open_fd_count() == fds_before);
}

// Sends `count` copies of `fd` with an 8-byte payload in one message, as no send_fd ever does.
bool send_copies(int socket, int fd, std::size_t count, std::size_t payload_bytes = sizeof(std::uint64_t)) {
  std::uint64_t payload = 5;
  iovec io{.iov_base = &payload, .iov_len = payload_bytes};
  alignas(cmsghdr) std::array<unsigned char, CMSG_SPACE(sizeof(int) * 16)> control{};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = CMSG_SPACE(sizeof(int) * count);
  cmsghdr* const header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * count);
  for (std::size_t index = 0; index < count; ++index) {
    std::memcpy(CMSG_DATA(header) + index * sizeof(int), &fd, sizeof(int));
  }
  return ::sendmsg(socket, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(payload_bytes);
}

TEST_CASE("recv_fd refuses a message with more than one descriptor, and keeps none of them") {
  auto const fds_before = open_fd_count();
  {
    auto [left, right, pipe_read, pipe_write] = sockets_and_pipe(SOCK_SEQPACKET);
    // A few fit in the room for one (aligned, with room for credentials): counted, not left to the
    // kernel; more than fit the kernel closes, and says so.
    for (std::size_t const count : {std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{16}}) {
      CAPTURE(count);
      REQUIRE(send_copies(left.get(), pipe_write.get(), count));
      CHECK(recv_fd<std::uint64_t>(right).error() == std::errc::message_size);
    }
    REQUIRE(send_copies(left.get(), pipe_write.get(), 1));
    CHECK(recv_fd<std::uint64_t>(right).value().payload == 5);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("recv_fd on a socket that passes credentials receives the descriptor all the same") {
  auto const fds_before = open_fd_count();
  for (int const type : {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM}) {
    CAPTURE(type);
    auto [left, right, pipe_read, pipe_write] = sockets_and_pipe(type);
    int const on = 1;
    REQUIRE(::setsockopt(right.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) == 0);
    REQUIRE(send_fd(left, pipe_write, std::uint64_t{42}));
    auto received = recv_fd(right);
    REQUIRE(received);
    CHECK(received.value().payload == 42);
    // It is the pipe's write end: what goes in comes out of the read end.
    char const byte = 'x';
    REQUIRE(::write(received.value().fd.get(), &byte, 1) == 1);
    char back = 0;
    CHECK(::read(pipe_read.get(), &back, 1) == 1);
    CHECK(back == 'x');
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("a message of no bytes that brings a descriptor is a short message, not the peer's end") {
  auto const fds_before = open_fd_count();
  for (int const type : {SOCK_SEQPACKET, SOCK_DGRAM}) {
    CAPTURE(type);
    auto [left, right, pipe_read, pipe_write] = sockets_and_pipe(type);
    REQUIRE(send_copies(left.get(), pipe_write.get(), 1, 0));
    auto const refused = recv_fd(right);
    REQUIRE_FALSE(refused);
    CHECK(refused.error() == std::errc::message_size);
    // The socket still works.
    REQUIRE(send_fd(left, pipe_write, std::uint64_t{9}));
    CHECK(recv_fd(right).value().payload == 9);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("fd passing across fork(): data written through one mapping is seen through another" * doctest::test_suite("fork-child")) {
  std::size_t const bytes = 8 * page_granularity();
  auto const first = pattern(bytes, 7);
  auto const second = pattern(bytes, 8);

  std::array<int, 2> ends{};
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) == 0);
  FileDescriptor parent_end{ends[0]};
  FileDescriptor child_end{ends[1]};

  pid_t const child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child reports through its exit status (doctest belongs to the parent) and leaves with
    // _exit so that none of the parent's atexit work runs twice.
    int status = [&]() -> int {
      (void)parent_end.close();
      auto offer = recv_fd(child_end);
      if (!offer) return 10;
      auto allocation = import_handle(offer.value().fd, offer.value().payload);
      if (!allocation) return 11;
      auto range = VirtualRange::reserve(allocation.value().size());
      if (!range) return 12;
      auto mapping = map(range.value(), 0, allocation.value());
      if (!mapping || !mapping.value().set_access(Device{0}, Access::read_write)) return 13;
      std::vector<std::uint32_t> seen(first.size());
      if (hipMemcpy(seen.data(), mapping.value().address(), bytes, hipMemcpyDeviceToHost) != hipSuccess) return 14;
      if (seen != first) return 15;
      if (upload(mapping.value().address(), second) != hipSuccess) return 16;
      char const done = 'd';
      if (::send(child_end.get(), &done, 1, MSG_NOSIGNAL) != 1) return 17;
      return 0;
    }();
    ::_exit(status);
  }

  REQUIRE(child_end.close());
  {
    auto exporter = make_mapped(bytes, Shareable::posix_fd);
    REQUIRE(upload(exporter.mapping.address(), first) == hipSuccess);
    auto fd = export_handle(exporter.allocation).value();
    REQUIRE(send_fd(parent_end, fd, std::uint64_t{bytes}));

    char done = 0;
    ssize_t got = 0;
    do {
      got = ::recv(parent_end.get(), &done, 1, 0);
    } while (got < 0 && errno == EINTR);
    CHECK(got == 1);
    CHECK(done == 'd');
    CHECK(download(exporter.mapping.address(), bytes) == second);
  }

  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("destroying a VirtualRange that still has mappings terminates instead of freeing under them" * doctest::test_suite("fork-child")) {
  std::size_t const page = page_granularity();
  pid_t const child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The abort is the expected outcome: keep doctest's crash handler and its report out of it.
    std::signal(SIGABRT, SIG_DFL);
    (void)std::freopen("/dev/null", "w", stdout);
    (void)std::freopen("/dev/null", "w", stderr);
    auto range = VirtualRange::reserve(page).value();
    auto mapping = map(range, 0, PhysicalAllocation::create(Device{0}, page).value()).value();
    { VirtualRange doomed = std::move(range); }
    ::_exit(0);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
}

TEST_CASE("VirtualRange: mapping_count is the runtime's, and a range moved while mapped stays whole") {
  std::size_t const page = page_granularity();
  auto const before = books();
  {
    auto range = VirtualRange::reserve(4 * page).value();
    auto allocation = PhysicalAllocation::create(Device{0}, page).value();
    auto mapping = map(range, page, allocation).value();
    CHECK(range.mapping_count() == 1);

    // A hipMemMap made directly into the range counts too.
    auto raw = PhysicalAllocation::create(Device{0}, page).value();
    void* const raw_address = static_cast<char*>(range.base()) + 3 * page;
    REQUIRE(hipMemMap(raw_address, page, 0, raw.native_handle(), 0) == hipSuccess);
    CHECK(range.mapping_count() == 2);
    REQUIRE(hipMemUnmap(raw_address, page) == hipSuccess);
    CHECK(range.mapping_count() == 1);

    // Moving the range while mapped: the Mapping does not point at the range object.
    VirtualRange moved = std::move(range);
    CHECK(range.mapping_count() == 0);  // NOLINT(bugprone-use-after-move)
    CHECK(moved.mapping_count() == 1);
    REQUIRE(mapping.set_access(Device{0}, Access::read_write));
    REQUIRE(mapping.unmap());
    CHECK(moved.mapping_count() == 0);
    CHECK(books().mappings == before.mappings);
  }
  CHECK(books().reservations == before.reservations);
  CHECK(books().allocations == before.allocations);
}

TEST_CASE("destroying a VirtualRange with a hipMemMap still inside terminates too" * doctest::test_suite("fork-child")) {
  std::size_t const page = page_granularity();
  pid_t const child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGABRT, SIG_DFL);
    (void)std::freopen("/dev/null", "w", stdout);
    (void)std::freopen("/dev/null", "w", stderr);
    {
      auto range = VirtualRange::reserve(page).value();
      auto allocation = PhysicalAllocation::create(Device{0}, page).value();
      if (hipMemMap(range.base(), page, 0, allocation.native_handle(), 0) != hipSuccess) ::_exit(2);
    }
    ::_exit(0);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
}

TEST_CASE("a full lifecycle leaks no descriptor, no mapping and no book entry") {
  auto const cycle = [] {
    std::size_t const bytes = 4 * page_granularity();
    auto exporter = make_mapped(bytes, Shareable::posix_fd);
    auto const data = pattern(bytes, 9);
    REQUIRE(upload(exporter.mapping.address(), data) == hipSuccess);
    REQUIRE(exporter.mapping.set_access(access_for(devices().value(), Access::read_write)));

    std::array<int, 2> ends{};
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) == 0);
    FileDescriptor left{ends[0]};
    FileDescriptor right{ends[1]};
    REQUIRE(send_fd(left, export_handle(exporter.allocation).value(), std::uint64_t{bytes}));
    auto received = recv_fd(right).value();
    auto imported = import_handle(received.fd, received.payload).value();

    auto range = VirtualRange::reserve(4 * bytes).value();
    std::vector<Mapping> mappings;
    for (std::size_t i = 0; i < 4; ++i) {
      mappings.push_back(map(range, i * bytes, i % 2 == 0 ? imported : exporter.allocation).value());
      REQUIRE(mappings.back().set_access(Device{0}, Access::read));
    }
    CHECK(download(mappings[3].address(), bytes) == data);
    auto retained = mappings[2].retain_allocation().value();
    CHECK(retained.size() == bytes);
  };

  cycle();  // warm up: the first run may grow the heap or start lazily initialised state
  // A backend may close the descriptor an import keeps shortly after the release; a device-wide
  // synchronisation is where every such close has happened.
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  auto const fds = open_fd_count();
  auto const maps = runtime_like_mapping_count();
  auto const counts = books();
  cycle();
  cycle();
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  CHECK(open_fd_count() == fds);
  CHECK(runtime_like_mapping_count() == maps);
  CHECK(books().reservations == counts.reservations);
  CHECK(books().mappings == counts.mappings);
  CHECK(books().allocations == counts.allocations);
}
