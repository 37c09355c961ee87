// Legacy IPC: sharing a hipMalloc allocation with another process by a 64-byte handle.
//
//  - `IpcHandle` is the handle as a value: export_memory() makes one for the base of an allocation,
//    bytes() turns it into plain bytes to send over any channel (a pipe, a socket, a file), and
//    from_bytes() turns them back in the other process.
//  - `IpcMapping` owns the other process's view: open() maps a handle, the destructor unmaps it
//    with hipIpcCloseMemHandle.
//
// The exporter keeps owning the memory: its hipFree ends the handle (no new opens), and HIP leaves
// mappings already open undefined after it, so the exporter frees only once every importer closed.
// For memory from hipMemCreate, export a file descriptor instead (shareable_handle.hpp).
#pragma once

#include <hipxx/error.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace hipxx {

class IpcHandle {
 public:
  static constexpr std::size_t size = HIP_IPC_HANDLE_SIZE;
  using bytes_type = std::array<std::byte, size>;

  // The handle for the allocation starting at `device_base`, which must be the base of a hipMalloc
  // allocation: an interior pointer, managed, pool or hipMemCreate memory is hipErrorInvalidValue.
  // Exporting again gives the same handle; memory allocated later at the same address gets a new one.
  [[nodiscard]] static result<IpcHandle> export_memory(void* device_base) noexcept {
    hipIpcMemHandle_t native{};
    if (auto const error = hipIpcGetMemHandle(&native, device_base); error != hipSuccess) {
      return failure(error);
    }
    return from_native(native);
  }

  // Bytes as received: nothing is checked here, the runtime judges them at open().
  [[nodiscard]] static IpcHandle from_bytes(std::span<std::byte const, size> bytes) noexcept {
    IpcHandle handle;
    std::copy(bytes.begin(), bytes.end(), handle.bytes_.begin());
    return handle;
  }

  [[nodiscard]] static IpcHandle from_native(hipIpcMemHandle_t const& native) noexcept {
    return IpcHandle{std::bit_cast<bytes_type>(native)};
  }

  [[nodiscard]] bytes_type const& bytes() const noexcept { return bytes_; }
  [[nodiscard]] hipIpcMemHandle_t native() const noexcept { return std::bit_cast<hipIpcMemHandle_t>(bytes_); }

  friend bool operator==(IpcHandle const&, IpcHandle const&) noexcept = default;

 private:
  // Private: every handle comes from an export or from bytes someone chose to trust, never from
  // nothing, so a forgotten initialisation cannot pass for a handle.
  IpcHandle() noexcept = default;
  explicit IpcHandle(bytes_type const& bytes) noexcept : bytes_(bytes) {}

  bytes_type bytes_{};
};

// Plain bytes, so it may travel as the payload of send_fd or be written to a socket as it is.
static_assert(std::is_trivially_copyable_v<IpcHandle> && std::has_unique_object_representations_v<IpcHandle>);
static_assert(sizeof(IpcHandle) == sizeof(hipIpcMemHandle_t));

class IpcMapping {
 public:
  // Maps memory another process exported. The flag is always hipIpcMemLazyEnablePeerAccess: CUDA
  // requires it, and HIP documents it as the only value. A handle exported by this same process is
  // hipErrorInvalidContext (use the pointer itself); a damaged or forged one is an error, never a
  // mapping of something else. HIP does not tell the importer the size: the exporter sends it along.
  [[nodiscard]] static result<IpcMapping> open(IpcHandle const& handle) noexcept {
    void* data = nullptr;
    if (auto const error = hipIpcOpenMemHandle(&data, handle.native(), hipIpcMemLazyEnablePeerAccess);
        error != hipSuccess) {
      return failure(error);
    }
    return IpcMapping{data};
  }

  // Takes over a pointer from hipIpcOpenMemHandle; the way back from release().
  [[nodiscard]] static IpcMapping adopt(void* data) noexcept { return IpcMapping{data}; }

  IpcMapping(IpcMapping const&) = delete;
  IpcMapping& operator=(IpcMapping const&) = delete;

  IpcMapping(IpcMapping&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}

  IpcMapping& operator=(IpcMapping&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }

  ~IpcMapping() { reset(); }

  // A device address of the exporter's memory, in this process; null for an empty (moved-from) owner.
  // Not of a temporary: the mapping is closed at the end of the statement.
  [[nodiscard]] void* data() const& noexcept { return data_; }
  void data() const&& = delete;
  [[nodiscard]] explicit operator bool() const noexcept { return data_ != nullptr; }

  // Unmaps now and reports the runtime's answer, which the destructor has to drop. On failure the
  // IpcMapping still owns the mapping.
  [[nodiscard]] result<void> close() noexcept {
    if (data_ == nullptr) {
      return outcome::success();
    }
    if (auto const error = hipIpcCloseMemHandle(data_); error != hipSuccess) {
      return failure(error);
    }
    data_ = nullptr;
    return outcome::success();
  }

  // Gives up ownership; the caller must hipIpcCloseMemHandle the pointer.
  [[nodiscard]] void* release() noexcept { return std::exchange(data_, nullptr); }

 private:
  explicit IpcMapping(void* data) noexcept : data_(data) {}

  void reset() noexcept {
    if (data_ != nullptr) {
      (void)hipIpcCloseMemHandle(std::exchange(data_, nullptr));
    }
  }

  void* data_ = nullptr;
};

}  // namespace hipxx
