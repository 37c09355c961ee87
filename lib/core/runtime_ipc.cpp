// Legacy IPC: exporting plain allocations by handle, and the books of handles opened here.
#include "core/rollback.hpp"
#include "core/runtime.hpp"

#include <mutex>

namespace hipxx::core {

namespace {
// Only the base of a plain device allocation can be exported.
bool exportable(const LinearAllocation* allocation) noexcept {
  return allocation != nullptr && allocation->kind == LinearKind::device;
}
}  // namespace

hipError_t Runtime::ipc_get_handle(hipIpcMemHandle_t* handle, void* ptr) {
  if (handle == nullptr || ptr == nullptr) return hipErrorInvalidValue;
  const auto base = reinterpret_cast<std::uintptr_t>(ptr);
  std::unique_lock lock{mutex_};
  const LinearAllocation* allocation = address_space_.linear_at(base);
  if (!exportable(allocation)) return hipErrorInvalidValue;
  return backend_->ipc_get_handle(ptr, allocation->size, handle);
}

hipError_t Runtime::ipc_open(void** ptr, const hipIpcMemHandle_t& handle, unsigned flags) {
  if (ptr == nullptr || (flags & ~static_cast<unsigned>(hipIpcMemLazyEnablePeerAccess)) != 0) {
    return hipErrorInvalidValue;
  }
  const int device = current_device();
  std::unique_lock lock{mutex_};
  void* at = nullptr;
  std::size_t size = 0;
  if (const hipError_t error = backend_->ipc_open(handle, &at, &size); error != hipSuccess) return error;
  // The CUDA driver answers a second open of a handle in one process with the same mapping and
  // counts the opens: so do the books, and each open takes one close.
  LinearAllocation* const existing = address_space_.linear_at(reinterpret_cast<std::uintptr_t>(at));
  if (existing != nullptr && existing->kind == LinearKind::ipc_opened) {
    ++existing->opens;
  } else {
    Rollback close{[&] { (void)backend_->ipc_close(at, size); }};
    address_space_.add_linear({.base = reinterpret_cast<std::uintptr_t>(at),
                               .size = size,
                               .device = device,
                               .kind = LinearKind::ipc_opened,
                               .opens = 1});
    close.keep();
  }
  *ptr = at;
  return hipSuccess;
}

hipError_t Runtime::ipc_close(void* ptr) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  int device = 0;
  {
    std::shared_lock lock{mutex_};
    const LinearAllocation* const opened = address_space_.linear_at(address);
    if (opened == nullptr || opened->kind != LinearKind::ipc_opened) return hipErrorInvalidValue;
    device = opened->device;
  }
  // As hipFree does (and AMD's hipIpcCloseMemHandle): queued work that may still use the memory
  // finishes first.
  if (const hipError_t error = finish_device_work(device); error != hipSuccess) return error;
  std::unique_lock lock{mutex_};
  LinearAllocation* const opened = address_space_.linear_at(address);
  // Closed by another thread meanwhile.
  if (opened == nullptr || opened->kind != LinearKind::ipc_opened) return hipErrorInvalidValue;
  if (const hipError_t error = backend_->ipc_close(ptr, opened->size); error != hipSuccess) return error;
  if (--opened->opens == 0) (void)address_space_.take_linear(address);
  return hipSuccess;
}

}  // namespace hipxx::core
