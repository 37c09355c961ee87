// A reserved range of device virtual addresses with nothing behind it (hipMemAddressReserve).
// Physical allocations are mapped into it with hipxx::map (mapping.hpp).
//
// The range is its address and size, held in place: reserving allocates nothing beside the
// runtime's own book entry, and moving a range copies two words. The runtime's books are the one
// count of what is mapped in it (hipxxGetReservationMappingCount), so a Mapping needs no pointer
// back to its range and the range may move while mapped.
//
// Lifetime rule: every Mapping into a range must be destroyed before the range. The runtime refuses
// hipMemAddressFree while anything is mapped, and a destructor cannot report that, so destroying (or
// assigning over) a VirtualRange that still has mappings (Mappings, or hipMemMap calls made directly
// into it) calls std::terminate, as std::thread does for a joinable thread: loud and defined, never a
// leaked or half-freed range. In a class, declare the VirtualRange member before the Mappings so that
// the compiler destroys them first.
#pragma once

#include <hipxx/hipxx_ext.h>
#include <hipxx/detail/address.hpp>
#include <hipxx/error.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <utility>

namespace hipxx {

class Mapping;

class VirtualRange {
 public:
  // `size` and `alignment` must be multiples of the minimum granularity; alignment 0 means the
  // minimum. `hint` is a requested address the runtime may ignore.
  [[nodiscard]] static result<VirtualRange> reserve(std::size_t size, std::size_t alignment = 0,
                                                    void* hint = nullptr) noexcept {
    void* base = nullptr;
    if (auto const error = hipMemAddressReserve(&base, size, alignment, hint, 0); error != hipSuccess) {
      return failure(error);
    }
    return VirtualRange{base, size};
  }

  VirtualRange(VirtualRange const&) = delete;
  VirtualRange& operator=(VirtualRange const&) = delete;

  VirtualRange(VirtualRange&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}

  VirtualRange& operator=(VirtualRange&& other) noexcept {
    if (this != &other) {
      reset();
      base_ = std::exchange(other.base_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  ~VirtualRange() { reset(); }

  // Not of a temporary: its range is freed at the end of the statement.
  [[nodiscard]] void* base() const& noexcept { return base_; }
  void base() const&& = delete;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] explicit operator bool() const noexcept { return base_ != nullptr; }

  // Whether [address, address + bytes) lies wholly inside the range.
  [[nodiscard]] bool contains(void const* address, std::size_t bytes = 1) const noexcept {
    if (base_ == nullptr) {
      return false;
    }
    auto const first = reinterpret_cast<std::uintptr_t>(base_);
    auto const at = reinterpret_cast<std::uintptr_t>(address);
    return at >= first && at - first <= size_ && bytes <= size_ - (at - first);
  }

  // The mappings in the range now, as the runtime's books hold them: live Mappings, and any
  // hipMemMap made directly into the range. 0 for an empty range.
  [[nodiscard]] std::size_t mapping_count() const noexcept {
    std::size_t count = 0;
    if (base_ == nullptr || hipxxGetReservationMappingCount(base_, &count) != hipSuccess) {
      return 0;
    }
    return count;
  }

 private:
  VirtualRange(void* base, std::size_t size) noexcept : base_(base), size_(size) {}

  void reset() noexcept {
    if (base_ == nullptr) {
      return;
    }
    // The runtime refuses to free a range that still has mappings and changes nothing then; a
    // Mapping would be left pointing into freed address space otherwise (the lifetime rule above).
    if (hipMemAddressFree(base_, size_) != hipSuccess && mapping_count() != 0) {
      std::terminate();
    }
    base_ = nullptr;
    size_ = 0;
  }

  void* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace hipxx
