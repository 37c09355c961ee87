// Events: record, wait, query and time.
#include "api/guard.hpp"
#include "core/rollback.hpp"

#include <chrono>
#include <optional>

using hipxx::api::guarded;
using hipxx::core::Event;
using hipxx::core::EventMarker;
using hipxx::core::Runtime;
using hipxx::core::SharedEventState;
using hipxx::core::Stream;

namespace {
constexpr unsigned kKnownEventFlags = hipEventBlockingSync | hipEventDisableTiming | hipEventInterprocess |
                                      hipEventDisableSystemFence | hipEventReleaseToDevice | hipEventReleaseToSystem;

// On a device queue the record is the queue's own timestamp, so elapsed times are device times.
hipError_t record_on_queue(Runtime& runtime, const std::shared_ptr<Event>& event, const std::shared_ptr<Stream>& where,
                           std::shared_ptr<EventMarker> marker) {
  const int device = where->traits().device;
  marker->timestamp = event->timestamp_on(device, [&] {
    return std::shared_ptr<hipxx::backend::Timestamp>{runtime.backend().create_timestamp(device, event->timing())};
  });
  if (!marker->timestamp) return hipErrorOutOfMemory;
  std::uint64_t sequence = 0;
  const hipError_t queued = runtime.streams().enqueue(
      *where,
      [event, timestamp = marker->timestamp, generation = marker->generation](hipxx::backend::Queue& queue,
                                                                              std::uint64_t /*sequence*/) {
        return event->record_unless_superseded(queue, *timestamp, generation);
      },
      [] { return hipErrorNotSupported; }, &sequence);
  if (queued != hipSuccess) return queued;
  marker->sequence = sequence;
  event->set_marker(std::move(marker));
  return hipSuccess;
}

// An interprocess event's record takes its number first (and its slot: where every slot is held,
// it waits for the oldest record to settle), so the stream's task knows it from the start and waits
// for nothing. Numbers taken after it by other threads may be queued before it, but each of those
// tasks knows its number too: none waits for a task queued behind it. A record the stream refuses
// (destroyed meanwhile by another thread), or that could not be queued, is reached at once, as if
// it had run: a number left unreached would hold its slot, and every record 1024 later, for ever.
hipError_t record_shared(Runtime& runtime, const std::shared_ptr<SharedEventState>& shared, Stream& where) {
  const std::uint64_t number = shared->take_record();
  hipxx::core::Rollback reached_unqueued{[&] { shared->reach(number); }};
  const std::optional<std::uint64_t> placed = runtime.streams().enqueue(where, [shared, number] {
    shared->reach(number);
    return hipSuccess;
  });
  if (!placed) return hipErrorInvalidHandle;
  reached_unqueued.keep();
  return hipSuccess;
}

}  // namespace

extern "C" {

hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
  return guarded([&](Runtime& runtime) {
    if (event == nullptr || (flags & ~kKnownEventFlags) != 0) return hipErrorInvalidValue;
    // As in CUDA, an interprocess event must not take timestamps.
    if ((flags & hipEventInterprocess) != 0 && (flags & hipEventDisableTiming) == 0) return hipErrorInvalidValue;
    return runtime.events().create(event, flags);
  });
}

hipError_t hipEventCreate(hipEvent_t* event) { return hipEventCreateWithFlags(event, hipEventDefault); }

hipError_t hipEventDestroy(hipEvent_t event) {
  return guarded([&](Runtime& runtime) { return runtime.events().destroy(event); });
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Event> target = runtime.events().resolve(event);
    const std::shared_ptr<Stream> where = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target || !where) return hipErrorInvalidHandle;
    if (target->shared()) return record_shared(runtime, target->shared(), *where);
    auto marker = std::make_shared<EventMarker>(where, where->traits().device);
    marker->generation = target->next_generation();
    if (where->queue() != nullptr) return record_on_queue(runtime, target, where, std::move(marker));
    // Nothing pending: the marker is reached the moment it is placed, with no trip through the queue.
    if (const std::optional<std::uint64_t> point = runtime.streams().completed_point(*where)) {
      marker->sequence = *point;
      marker->reached_at = std::chrono::steady_clock::now();
      target->set_marker(marker);
      return hipSuccess;
    }
    // The marker is published only once its sequence is known: a query, synchronize or
    // hipStreamWaitEvent on another thread must never see the new marker with sequence 0, which
    // reads as complete. The task writes only reached_at, which readers take after the stream
    // reports the sequence reached.
    const std::optional<std::uint64_t> placed = runtime.streams().enqueue(*where, [marker] {
      marker->reached_at = std::chrono::steady_clock::now();
      return hipSuccess;
    });
    if (!placed) return hipErrorInvalidHandle;  // the stream was destroyed meanwhile; the event is as it was
    marker->sequence = *placed;
    target->set_marker(marker);
    return hipSuccess;
  });
}

hipError_t hipEventSynchronize(hipEvent_t event) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Event> target = runtime.events().resolve(event);
    if (!target) return hipErrorInvalidHandle;
    const hipError_t result = target->synchronize();
    // A marker whose stream is gone left it after all of its work, and the null stream of its
    // device took over the pools it used.
    if (const std::shared_ptr<EventMarker> marker = target->marker()) {
      if (const std::shared_ptr<hipxx::core::Stream> stream = marker->owner()) runtime.after_synchronize(*stream);
    }
    return result;
  });
}

hipError_t hipEventQuery(hipEvent_t event) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Event> target = runtime.events().resolve(event);
    if (!target) return hipErrorInvalidHandle;
    return target->query();
  });
}

hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  return guarded([&](Runtime& runtime) {
    if (ms == nullptr) return hipErrorInvalidValue;
    const std::shared_ptr<Event> first = runtime.events().resolve(start);
    const std::shared_ptr<Event> second = runtime.events().resolve(stop);
    if (!first || !second) return hipErrorInvalidHandle;
    return hipxx::core::elapsed_milliseconds(*first, *second, ms);
  });
}

hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t event) {
  return guarded([&](Runtime& runtime) {
    if (handle == nullptr) return hipErrorInvalidValue;
    const std::shared_ptr<Event> target = runtime.events().resolve(event);
    if (!target) return hipErrorInvalidValue;
    // Only an event made here with hipEventInterprocess (and so hipEventDisableTiming) is exported;
    // one opened from another process's handle is that process's to hand out.
    if ((target->flags() & hipEventInterprocess) == 0 || !target->shared()) return hipErrorInvalidConfiguration;
    *handle = target->shared()->handle();
    return hipSuccess;
  });
}

hipError_t hipIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t handle) {
  return guarded([&](Runtime& runtime) {
    if (event == nullptr) return hipErrorInvalidValue;
    std::shared_ptr<SharedEventState> shared;
    if (const hipError_t error = SharedEventState::open(handle, &shared); error != hipSuccess) return error;
    // Behaves as an event made here with timing disabled.
    return runtime.events().adopt(event, std::make_shared<Event>(hipEventDisableTiming, std::move(shared)));
  });
}

}  // extern "C"
