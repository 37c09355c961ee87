// Address arithmetic on device pointers. Device memory is not a host array of objects, so we
// compute addresses as integers instead of with pointer arithmetic the host compiler may reason about.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hipxx::detail {

[[nodiscard]] inline void* offset_address(void const* base, std::size_t offset) noexcept {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): device addresses are opaque integers to the host.
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(base) + offset);
}

// a + b without wrap-around; false where the sum would not fit.
[[nodiscard]] constexpr bool add_fits(std::size_t a, std::size_t b) noexcept { return b <= SIZE_MAX - a; }

[[nodiscard]] constexpr bool is_multiple(std::size_t value, std::size_t unit) noexcept {
  return unit != 0 && value % unit == 0;
}

}  // namespace hipxx::detail
