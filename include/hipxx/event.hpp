// Events: a marker recorded into a stream, which the host can wait on or poll, other streams can
// wait on (wait()), and two of which time the work between them (elapsed()).
#pragma once

#include <hipxx/detail/unique_handle.hpp>
#include <hipxx/error.hpp>
#include <hipxx/stream.hpp>

#include <chrono>
#include <utility>

namespace hipxx {

// Bits of hipEventCreateWithFlags, combinable with |. Values equal HIP's flags.
enum class EventFlags : unsigned {
  none = hipEventDefault,
  blocking_sync = hipEventBlockingSync,  // synchronize() sleeps instead of spinning
  disable_timing = hipEventDisableTiming,  // cheaper; elapsed() then refuses the event
  interprocess = hipEventInterprocess,  // needs disable_timing too, as in HIP
  disable_system_fence = hipEventDisableSystemFence,
  release_to_device = hipEventReleaseToDevice,
  release_to_system = hipEventReleaseToSystem,
};

[[nodiscard]] constexpr EventFlags operator|(EventFlags a, EventFlags b) noexcept {
  return static_cast<EventFlags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

[[nodiscard]] constexpr EventFlags operator&(EventFlags a, EventFlags b) noexcept {
  return static_cast<EventFlags>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}

// Event times are float milliseconds in HIP; the duration keeps both the unit and the precision.
using EventDuration = std::chrono::duration<float, std::milli>;

class Event {
 public:
  using native_handle_type = hipEvent_t;

  [[nodiscard]] static result<Event> create(EventFlags flags = EventFlags::none) noexcept {
    hipEvent_t event = nullptr;
    if (auto const error = hipEventCreateWithFlags(&event, static_cast<unsigned>(flags)); error != hipSuccess) {
      return failure(error);
    }
    return Event{event};
  }

  // Takes over an event created through the C API; the way back from release().
  [[nodiscard]] static Event adopt(hipEvent_t event) noexcept { return Event{event}; }

  [[nodiscard]] hipEvent_t native() const noexcept { return event_.get(); }
  [[nodiscard]] explicit operator bool() const noexcept { return native() != nullptr; }

  // Captures the work enqueued on `stream` so far; a later record replaces the earlier capture.
  [[nodiscard]] result<void> record(StreamRef stream = StreamRef::null()) noexcept {
    return check(hipEventRecord(native(), stream.native()));
  }

  // Blocks until the recorded work has finished; returns at once for an event never recorded.
  [[nodiscard]] result<void> synchronize() const noexcept { return check(hipEventSynchronize(native())); }

  // true once the recorded work has finished (or the event was never recorded).
  [[nodiscard]] result<bool> query() const noexcept {
    switch (auto const error = hipEventQuery(native()); error) {
      case hipSuccess: return true;
      case hipErrorNotReady: return false;
      default: return failure(error);
    }
  }

  // Destroys now and reports the runtime's answer, which the destructor has to drop. On failure the
  // Event still owns the handle.
  [[nodiscard]] result<void> destroy() noexcept { return event_.destroy(); }

  // Gives up ownership; the caller must hipEventDestroy the handle.
  [[nodiscard]] hipEvent_t release() noexcept { return event_.release(); }

 private:
  explicit Event(hipEvent_t event) noexcept : event_(event) {}

  detail::UniqueHandle<hipEvent_t, &hipEventDestroy> event_;
};

// Time between two recorded events. hipErrorNotReady while either is still pending;
// hipErrorInvalidHandle where either was never recorded or was created with disable_timing.
[[nodiscard]] inline result<EventDuration> elapsed(Event const& start, Event const& stop) noexcept {
  float milliseconds = 0.0F;
  if (auto const error = hipEventElapsedTime(&milliseconds, start.native(), stop.native()); error != hipSuccess) {
    return failure(error);
  }
  return EventDuration{milliseconds};
}

// Work enqueued on `stream` after this waits for the work `event` recorded. The wait is on what the
// event captured now: recording the event again later does not move it.
[[nodiscard]] inline result<void> wait(StreamRef stream, Event const& event) noexcept {
  return check(hipStreamWaitEvent(stream.native(), event.native(), 0));
}

}  // namespace hipxx
