#include "core/runtime.hpp"

#include <charconv>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace hipxx::core {
namespace {

thread_local int current_device_ordinal = 0;

constexpr int kMaxHostDevices = 64;

int host_device_count(std::string& error) {
  const char* text = std::getenv("HIPXX_HOST_DEVICES");
  if (text == nullptr || *text == '\0') return 1;
  const std::string_view value{text};
  int count = 0;
  const auto [end, code] = std::from_chars(value.data(), value.data() + value.size(), count);
  if (code != std::errc{} || end != value.data() + value.size() || count < 1 || count > kMaxHostDevices) {
    error = "HIPXX_HOST_DEVICES must be a whole number from 1 to 64, not '" + std::string{value} + "'";
    return 0;
  }
  return count;
}

std::unique_ptr<Runtime> select_runtime() {
  const char* text = std::getenv("HIPXX_BACKEND");
  const std::string_view choice = text == nullptr || *text == '\0' ? std::string_view{"auto"} : text;
  std::string error;
  if (choice == "host" || choice == "auto") {
    const int devices = host_device_count(error);
    if (devices == 0) return std::make_unique<Runtime>(nullptr, error);
    return std::make_unique<Runtime>(backend::make_host_backend(devices));
  }
  if (choice == "rocr" || choice == "cuda") {
    error = "the " + std::string{choice} + " backend is not part of this build";
  } else {
    error = "HIPXX_BACKEND must be host, rocr, cuda or auto, not '" + std::string{choice} + "'";
  }
  return std::make_unique<Runtime>(nullptr, error);
}

}  // namespace

Runtime& Runtime::instance() {
  // Never destroyed: other static destructors and atexit handlers may still call into HIP.
  static Runtime* const runtime = select_runtime().release();
  return *runtime;
}

Runtime::Runtime(std::unique_ptr<backend::Backend> backend, std::string selection_error)
    : backend_(std::move(backend)), selection_error_(std::move(selection_error)) {
  if (backend_ && backend_->device_count() > 0) granularity_ = backend_->device(0).minimum_granularity;
}

hipError_t Runtime::status() const noexcept { return device_count() > 0 ? hipSuccess : hipErrorNoDevice; }

int Runtime::current_device() noexcept { return current_device_ordinal; }

hipError_t Runtime::set_current_device(int device) noexcept {
  if (!valid_device(device)) return hipErrorInvalidDevice;
  current_device_ordinal = device;
  return hipSuccess;
}

bool Runtime::valid_location(const hipMemLocation& location) const noexcept {
  return location.type == hipMemLocationTypeDevice && valid_device(location.id);
}

bool Runtime::granular(std::uintptr_t value) const noexcept { return value % granularity_ == 0; }

hipError_t Runtime::allocate(void** ptr, std::size_t size) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  if (size == 0) {
    *ptr = nullptr;
    return hipSuccess;
  }
  const int device = current_device();
  std::unique_lock lock{mutex_};
  void* at = nullptr;
  if (const hipError_t error = backend_->allocate(device, size, &at); error != hipSuccess) return error;
  address_space_.add_linear({.base = reinterpret_cast<std::uintptr_t>(at), .size = size, .device = device});
  *ptr = at;
  return hipSuccess;
}

hipError_t Runtime::deallocate(void* ptr) {
  if (ptr == nullptr) return hipSuccess;
  std::unique_lock lock{mutex_};
  const auto taken = address_space_.take_linear(reinterpret_cast<std::uintptr_t>(ptr));
  if (!taken) return hipErrorInvalidValue;
  if (const hipError_t error = backend_->synchronize(taken->device); error != hipSuccess) return error;
  return backend_->deallocate(ptr, taken->size);
}

namespace {
bool known_direction(hipMemcpyKind kind) noexcept {
  switch (kind) {
    case hipMemcpyHostToHost:
    case hipMemcpyHostToDevice:
    case hipMemcpyDeviceToHost:
    case hipMemcpyDeviceToDevice:
    case hipMemcpyDefault:
    case hipMemcpyDeviceToDeviceNoCU:
      return true;
  }
  return false;
}
}  // namespace

hipError_t Runtime::copy(void* dst, const void* src, std::size_t bytes, hipMemcpyKind kind) {
  if (!known_direction(kind)) return hipErrorInvalidMemcpyDirection;
  if (bytes == 0) return hipSuccess;
  if (dst == nullptr || src == nullptr) return hipErrorInvalidValue;
  const int device = current_device();
  std::shared_lock lock{mutex_};
  if (!address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(dst), bytes, device,
                                       hipMemAccessFlagsProtReadWrite) ||
      !address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(src), bytes, device,
                                       hipMemAccessFlagsProtRead)) {
    return hipErrorInvalidValue;
  }
  return backend_->copy(dst, src, bytes);
}

hipError_t Runtime::fill(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) return hipSuccess;
  if (dst == nullptr) return hipErrorInvalidValue;
  const int device = current_device();
  std::shared_lock lock{mutex_};
  if (!address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(dst), bytes, device,
                                       hipMemAccessFlagsProtReadWrite)) {
    return hipErrorInvalidValue;
  }
  return backend_->fill(dst, static_cast<unsigned char>(value), bytes);
}

hipError_t Runtime::synchronize() { return backend_->synchronize(current_device()); }

BookCounts Runtime::counts() const {
  std::shared_lock lock{mutex_};
  return {.reservations = address_space_.reservation_count(),
          .mappings = address_space_.mapping_count(),
          .allocations = allocations_.size(),
          .linear_allocations = address_space_.linear_count()};
}

}  // namespace hipxx::core
