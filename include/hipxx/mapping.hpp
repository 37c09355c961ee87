// A physical allocation mapped at an address of a reserved range (hipMemMap); unmapped when the
// Mapping is destroyed. A new mapping grants no access: call set_access before touching it.
//
// Ownership, in the order the C API needs it:
//  - the Mapping lies in its VirtualRange and must be destroyed first. map() refuses a temporary
//    range at compile time, and a range destroyed with live Mappings terminates (virtual_range.hpp).
//    The Mapping holds only its own address and size: the runtime's books know which range it is in,
//    so the range may move while mapped.
//  - the Mapping does not need its PhysicalAllocation: releasing the allocation while mapped is
//    allowed, the runtime frees the memory at the last unmap.
#pragma once

#include <hipxx/access.hpp>
#include <hipxx/detail/address.hpp>
#include <hipxx/device.hpp>
#include <hipxx/error.hpp>
#include <hipxx/physical_allocation.hpp>
#include <hipxx/virtual_range.hpp>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace hipxx {

class Mapping {
 public:
  Mapping(Mapping const&) = delete;
  Mapping& operator=(Mapping const&) = delete;

  Mapping(Mapping&& other) noexcept
      : address_(std::exchange(other.address_, nullptr)), size_(std::exchange(other.size_, 0)) {}

  Mapping& operator=(Mapping&& other) noexcept {
    if (this != &other) {
      reset();
      address_ = std::exchange(other.address_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  ~Mapping() { reset(); }

  // A device address: pass it to hipMemcpy and kernels, never dereference it on the host.
  // Not of a temporary: its mapping is gone at the end of the statement.
  [[nodiscard]] void* address() const& noexcept { return address_; }
  void address() const&& = delete;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] explicit operator bool() const noexcept { return address_ != nullptr; }

  // Replaces the access of the listed devices; HIP leaves devices not listed as they were.
  [[nodiscard]] result<void> set_access(std::span<hipMemAccessDesc const> descs) const noexcept {
    return check(hipMemSetAccess(address_, size_, descs.data(), descs.size()));
  }

  [[nodiscard]] result<void> set_access(AccessDesc desc) const noexcept {
    auto const native = desc.native();
    return set_access(std::span<hipMemAccessDesc const>(&native, 1));
  }

  [[nodiscard]] result<void> set_access(Device device, Access access) const noexcept {
    return set_access(AccessDesc{device, access});
  }

  template <access_desc_range R>
  [[nodiscard]] result<void> set_access(R&& descs) const {
    auto const native = to_native(std::forward<R>(descs));
    return set_access(std::span<hipMemAccessDesc const>(native));
  }

  [[nodiscard]] result<Access> access(Device device) const noexcept {
    unsigned long long flags = 0;
    auto const location = device.location();
    if (auto const error = hipMemGetAccess(&flags, &location, address_); error != hipSuccess) {
      return failure(error);
    }
    auto const access = access_from_native(flags);
    if (!access) {
      return failure(hipErrorUnknown);
    }
    return *access;
  }

  // A new owning handle to the mapped allocation, with its size known (unlike retain_from(address)).
  [[nodiscard]] result<PhysicalAllocation> retain_allocation() const noexcept {
    return PhysicalAllocation::retain_from(address_, size_);
  }

  // Unmaps now and reports the runtime's answer, which the destructor has to drop. On failure the
  // Mapping still owns the mapping.
  [[nodiscard]] result<void> unmap() noexcept {
    if (address_ == nullptr) {
      return outcome::success();
    }
    if (auto const error = hipMemUnmap(address_, size_); error != hipSuccess) {
      return failure(error);
    }
    forget();
    return outcome::success();
  }

  friend result<Mapping> map(VirtualRange& range, std::size_t offset, PhysicalAllocation const& allocation) noexcept;

 private:
  Mapping(void* address, std::size_t size) noexcept : address_(address), size_(size) {}

  // Once the runtime no longer has anything mapped for us.
  void forget() noexcept {
    address_ = nullptr;
    size_ = 0;
  }

  void reset() noexcept {
    if (address_ != nullptr) {
      (void)hipMemUnmap(address_, size_);
      forget();
    }
  }

  void* address_ = nullptr;
  std::size_t size_ = 0;
};

// Maps all of `allocation` at `offset` bytes into `range`. HIP maps whole allocations only, so the
// mapping's size is allocation.size(); offset must be a multiple of the minimum granularity.
// Refused before the runtime is asked (hipErrorInvalidValue) where the allocation is empty, of unknown
// size, or would not fit in the range.
[[nodiscard]] inline result<Mapping> map(VirtualRange& range, std::size_t offset,
                                         PhysicalAllocation const& allocation) noexcept {
  std::size_t const size = allocation.size();
  if (!range || !allocation || size == 0 || offset > range.size() || size > range.size() - offset) {
    return failure(hipErrorInvalidValue);
  }
  void* const address = detail::offset_address(range.base(), offset);
  if (auto const error = hipMemMap(address, size, 0, allocation.native_handle(), 0); error != hipSuccess) {
    return failure(error);
  }
  return Mapping{address, size};
}

// The range would be freed at the end of the full expression, under the new mapping.
result<Mapping> map(VirtualRange&& range, std::size_t offset, PhysicalAllocation const& allocation) = delete;

}  // namespace hipxx
