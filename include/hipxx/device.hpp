// A device is an ordinal, nothing more: HIP has no device object to own, so `Device` is a value that
// is cheap to copy and compare, and exists so that an int meaning "device" cannot be confused with
// an int meaning anything else.
#pragma once

#include <hipxx/detail/allocation_prop.hpp>
#include <hipxx/error.hpp>

#include <compare>
#include <cstddef>
#include <vector>

namespace hipxx {

enum class Granularity {
  minimum,  // the smallest size and alignment hipMemCreate and hipMemMap accept
  recommended,  // what the runtime advises for speed (large pages on the host backend)
};

// A snapshot of a device's memory, in bytes: what is not in use (by any process) and the total.
struct MemoryInfo {
  std::size_t free = 0;
  std::size_t total = 0;
};

class Device {
 public:
  // Explicit: a bare int is as likely to be a count or a size as a device.
  constexpr explicit Device(int id) noexcept : id_(id) {}

  [[nodiscard]] constexpr int id() const noexcept { return id_; }

  [[nodiscard]] constexpr hipMemLocation location() const noexcept {
    hipMemLocation location{};
    location.type = hipMemLocationTypeDevice;
    location.id = id_;
    return location;
  }

  friend constexpr bool operator==(Device, Device) noexcept = default;
  friend constexpr std::strong_ordering operator<=>(Device, Device) noexcept = default;

  [[nodiscard]] result<int> attribute(hipDeviceAttribute_t attribute) const noexcept {
    int value = 0;
    if (auto const error = hipDeviceGetAttribute(&value, attribute, id_); error != hipSuccess) {
      return failure(error);
    }
    return value;
  }

  // Of plain (non-exportable) pinned device memory; sizes and offsets of every VMM call must be
  // multiples of the minimum.
  [[nodiscard]] result<std::size_t> granularity(Granularity which = Granularity::recommended) const noexcept {
    auto const prop = detail::allocation_prop(id_, false);
    auto const option =
        which == Granularity::minimum ? hipMemAllocationGranularityMinimum : hipMemAllocationGranularityRecommended;
    std::size_t value = 0;
    if (auto const error = hipMemGetAllocationGranularity(&value, &prop, option); error != hipSuccess) {
      return failure(error);
    }
    return value;
  }

  [[nodiscard]] result<bool> supports_virtual_memory() const noexcept {
    auto const value = attribute(hipDeviceAttributeVirtualMemoryManagementSupported);
    if (!value) {
      return value.as_failure();
    }
    return value.value() != 0;
  }

  [[nodiscard]] result<void> make_current() const noexcept { return check(hipSetDevice(id_)); }

  // hipMemGetInfo asks about the current device: this device is made current for the question,
  // and the calling thread's current device is what it was before, whatever the answer.
  [[nodiscard]] result<MemoryInfo> memory_info() const noexcept {
    int current = 0;
    if (auto const error = hipGetDevice(&current); error != hipSuccess) {
      return failure(error);
    }
    if (auto const error = hipSetDevice(id_); error != hipSuccess) {
      return failure(error);
    }
    MemoryInfo info;
    auto const error = hipMemGetInfo(&info.free, &info.total);
    (void)hipSetDevice(current);
    if (error != hipSuccess) {
      return failure(error);
    }
    return info;
  }

 private:
  int id_;
};

[[nodiscard]] inline result<int> device_count() noexcept {
  int count = 0;
  if (auto const error = hipGetDeviceCount(&count); error != hipSuccess) {
    return failure(error);
  }
  return count;
}

[[nodiscard]] inline result<Device> current_device() noexcept {
  int id = 0;
  if (auto const error = hipGetDevice(&id); error != hipSuccess) {
    return failure(error);
  }
  return Device{id};
}

// The checked way to turn an ordinal from the outside world (a flag, an environment variable) into
// a Device: hipErrorInvalidDevice where there is no such device.
[[nodiscard]] inline result<Device> device(int id) noexcept {
  auto const count = device_count();
  if (!count) {
    return count.as_failure();
  }
  if (id < 0 || id >= count.value()) {
    return failure(hipErrorInvalidDevice);
  }
  return Device{id};
}

[[nodiscard]] inline result<std::vector<Device>> devices() {
  auto const count = device_count();
  if (!count) {
    return count.as_failure();
  }
  std::vector<Device> out;
  out.reserve(static_cast<std::size_t>(count.value()));
  for (int id = 0; id < count.value(); ++id) {
    out.emplace_back(id);
  }
  return out;
}

}  // namespace hipxx
