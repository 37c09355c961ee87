// Interprocess events: one event that several processes record, poll, wait on and have streams
// wait for, through a 64-byte handle.
//
//  - The exporting process makes the event with EventFlags::interprocess | EventFlags::disable_timing
//    and takes its `IpcEventHandle` (export_event()); bytes() and from_bytes() carry it over any
//    channel.
//  - Another process opens it (open_ipc_event()) as an Event of its own, with timing disabled,
//    which it destroys as any Event. Each process's records count: the event stands for the newest
//    record any of them made.
//
// The exporter keeps owning the event: once it destroyed it, the handle names nothing (new opens
// fail), and HIP leaves use of events already opened undefined.
#pragma once

#include <hipxx/error.hpp>
#include <hipxx/event.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <span>
#include <type_traits>

namespace hipxx {

class IpcEventHandle {
 public:
  static constexpr std::size_t size = sizeof(hipIpcEventHandle_t);
  using bytes_type = std::array<std::byte, size>;

  // The handle of `event`, made in this process with the interprocess and disable-timing flags:
  // hipErrorInvalidConfiguration for any other event (one opened from another process included).
  [[nodiscard]] static result<IpcEventHandle> export_event(Event const& event) noexcept {
    hipIpcEventHandle_t native{};
    if (auto const error = hipIpcGetEventHandle(&native, event.native()); error != hipSuccess) return failure(error);
    return from_native(native);
  }

  // Bytes as received: nothing is checked here, the runtime judges them at open_ipc_event().
  [[nodiscard]] static IpcEventHandle from_bytes(std::span<std::byte const, size> bytes) noexcept {
    IpcEventHandle handle;
    std::copy(bytes.begin(), bytes.end(), handle.bytes_.begin());
    return handle;
  }

  [[nodiscard]] static IpcEventHandle from_native(hipIpcEventHandle_t const& native) noexcept {
    return IpcEventHandle{std::bit_cast<bytes_type>(native)};
  }

  [[nodiscard]] bytes_type const& bytes() const noexcept { return bytes_; }
  [[nodiscard]] hipIpcEventHandle_t native() const noexcept { return std::bit_cast<hipIpcEventHandle_t>(bytes_); }

  friend bool operator==(IpcEventHandle const&, IpcEventHandle const&) noexcept = default;

 private:
  // Private, as for IpcHandle: a handle comes from an export or from bytes, never from nothing.
  IpcEventHandle() noexcept = default;
  explicit IpcEventHandle(bytes_type const& bytes) noexcept : bytes_(bytes) {}

  bytes_type bytes_{};
};

static_assert(std::is_trivially_copyable_v<IpcEventHandle> && std::has_unique_object_representations_v<IpcEventHandle>);

// The event another process exported. hipErrorInvalidContext for a handle this process exported
// itself; hipErrorInvalidValue for bytes that name no live event.
[[nodiscard]] inline result<Event> open_ipc_event(IpcEventHandle const& handle) noexcept {
  hipEvent_t event = nullptr;
  if (auto const error = hipIpcOpenEventHandle(&event, handle.native()); error != hipSuccess) return failure(error);
  return Event::adopt(event);
}

}  // namespace hipxx
