// Physical memory with no address: hipMemCreate's handle. It becomes usable only once mapped into a
// VirtualRange (see mapping.hpp). Releasing it while mapped is allowed: the runtime frees the memory
// at the last unmap, so this owner need not outlive the mappings of it.
#pragma once

#include <hipxx/detail/allocation_prop.hpp>
#include <hipxx/device.hpp>
#include <hipxx/error.hpp>

#include <cstddef>
#include <utility>

namespace hipxx {

// Whether the allocation may be exported as a POSIX file descriptor (shareable_handle.hpp).
// Asked for at creation because backends may back exportable memory differently.
enum class Shareable : bool {
  no = false,
  posix_fd = true,
};

struct AllocationProperties {
  Device device;
  Shareable shareable;
  hipMemAllocationProp native;
};

class PhysicalAllocation {
 public:
  using native_handle_type = hipMemGenericAllocationHandle_t;

  // `size` must be a multiple of device.granularity(Granularity::minimum).
  [[nodiscard]] static result<PhysicalAllocation> create(Device device, std::size_t size,
                                                         Shareable shareable = Shareable::no) noexcept {
    auto const prop = detail::allocation_prop(device.id(), shareable == Shareable::posix_fd);
    native_handle_type handle{};
    if (auto const error = hipMemCreate(&handle, size, &prop, 0); error != hipSuccess) {
      return failure(error);
    }
    return PhysicalAllocation{handle, size};
  }

  // A second, independently released handle to the allocation mapped at `address` (any address
  // inside a mapping). HIP cannot report an allocation's size, so size() is the `size` given here,
  // and 0 (unknown, and then refused by map()) when none is. Mapping::retain_allocation() knows it.
  [[nodiscard]] static result<PhysicalAllocation> retain_from(void const* address, std::size_t size = 0) noexcept {
    native_handle_type handle{};
    // The runtime only looks the address up; its parameter is non-const for C's sake.
    if (auto const error = hipMemRetainAllocationHandle(&handle, const_cast<void*>(address)); error != hipSuccess) {
      return failure(error);
    }
    return PhysicalAllocation{handle, size};
  }

  // Takes over a handle obtained from the C API; the way back from release().
  [[nodiscard]] static PhysicalAllocation adopt(native_handle_type handle, std::size_t size) noexcept {
    return PhysicalAllocation{handle, size};
  }

  PhysicalAllocation(PhysicalAllocation const&) = delete;
  PhysicalAllocation& operator=(PhysicalAllocation const&) = delete;

  PhysicalAllocation(PhysicalAllocation&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), size_(std::exchange(other.size_, 0)) {}

  PhysicalAllocation& operator=(PhysicalAllocation&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  ~PhysicalAllocation() { reset(); }

  [[nodiscard]] native_handle_type native_handle() const noexcept { return handle_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }

  [[nodiscard]] result<AllocationProperties> properties() const noexcept {
    hipMemAllocationProp prop{};
    if (auto const error = hipMemGetAllocationPropertiesFromHandle(&prop, handle_); error != hipSuccess) {
      return failure(error);
    }
    auto const shareable =
        prop.requestedHandleType == hipMemHandleTypePosixFileDescriptor ? Shareable::posix_fd : Shareable::no;
    return AllocationProperties{Device{prop.location.id}, shareable, prop};
  }

  // Gives up ownership; the caller must hipMemRelease the handle.
  [[nodiscard]] native_handle_type release() noexcept {
    size_ = 0;
    return std::exchange(handle_, nullptr);
  }

 private:
  PhysicalAllocation(native_handle_type handle, std::size_t size) noexcept : handle_(handle), size_(size) {}

  void reset() noexcept {
    if (handle_ != nullptr) {
      (void)hipMemRelease(handle_);
      handle_ = nullptr;
      size_ = 0;
    }
  }

  native_handle_type handle_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace hipxx
