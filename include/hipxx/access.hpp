// Who may touch a mapping, and how. A new mapping grants nothing, so every mapping needs at least one
// of these before its memory is usable; lists of them are built from ranges of devices.
#pragma once

#include <hipxx/device.hpp>

#include <concepts>
#include <optional>
#include <ranges>
#include <vector>

namespace hipxx {

// Values equal hipMemAccessFlags so conversion is a cast both ways; there is no write-only, as in HIP.
enum class Access : unsigned {
  none = hipMemAccessFlagsProtNone,
  read = hipMemAccessFlagsProtRead,
  read_write = hipMemAccessFlagsProtReadWrite,
};

[[nodiscard]] constexpr hipMemAccessFlags to_native(Access access) noexcept {
  return static_cast<hipMemAccessFlags>(access);
}

// nullopt for flags HIP may add later, rather than guessing what they grant.
[[nodiscard]] constexpr std::optional<Access> access_from_native(unsigned long long flags) noexcept {
  switch (flags) {
    case hipMemAccessFlagsProtNone: return Access::none;
    case hipMemAccessFlagsProtRead: return Access::read;
    case hipMemAccessFlagsProtReadWrite: return Access::read_write;
    default: return std::nullopt;
  }
}

// One device's access, built fluently: AccessDesc{gpu}.read_only().
class AccessDesc {
 public:
  constexpr explicit AccessDesc(Device device, Access access = Access::read_write) noexcept
      : device_(device), access_(access) {}

  [[nodiscard]] constexpr Device device() const noexcept { return device_; }
  [[nodiscard]] constexpr Access access() const noexcept { return access_; }

  [[nodiscard]] constexpr AccessDesc with(Access access) const noexcept { return AccessDesc{device_, access}; }
  [[nodiscard]] constexpr AccessDesc read_only() const noexcept { return with(Access::read); }
  [[nodiscard]] constexpr AccessDesc read_write() const noexcept { return with(Access::read_write); }
  [[nodiscard]] constexpr AccessDesc revoked() const noexcept { return with(Access::none); }

  [[nodiscard]] constexpr hipMemAccessDesc native() const noexcept {
    hipMemAccessDesc desc{};
    desc.location = device_.location();
    desc.flags = to_native(access_);
    return desc;
  }

  friend constexpr bool operator==(AccessDesc, AccessDesc) noexcept = default;

 private:
  Device device_;
  Access access_;
};

// Any std::ranges or range-v3 input range (range-v3 views model the std concepts). Elements must
// already be Devices: Device's constructor is explicit, so a range of ints is rejected, not guessed at.
template <class R>
concept device_range = std::ranges::input_range<R> && std::convertible_to<std::ranges::range_reference_t<R>, Device>;

template <class R>
concept access_desc_range =
    std::ranges::input_range<R> && std::convertible_to<std::ranges::range_reference_t<R>, AccessDesc>;

// The same access for every device of the range, as the array hipMemSetAccess takes.
template <device_range R>
[[nodiscard]] std::vector<hipMemAccessDesc> access_for(R&& devices, Access access) {
  std::vector<hipMemAccessDesc> out;
  if constexpr (std::ranges::sized_range<R>) {
    out.reserve(static_cast<std::size_t>(std::ranges::size(devices)));
  }
  for (auto&& device : devices) {
    out.push_back(AccessDesc{Device{device}, access}.native());
  }
  return out;
}

template <access_desc_range R>
[[nodiscard]] std::vector<hipMemAccessDesc> to_native(R&& descs) {
  std::vector<hipMemAccessDesc> out;
  if constexpr (std::ranges::sized_range<R>) {
    out.reserve(static_cast<std::size_t>(std::ranges::size(descs)));
  }
  for (auto&& desc : descs) {
    out.push_back(AccessDesc{desc}.native());
  }
  return out;
}

}  // namespace hipxx
