// Streams: creation, queries, synchronisation, callbacks and stream wait/write value.
#include "api/guard.hpp"
#include "backend/poll_until.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

using hipxx::api::guarded;
using hipxx::core::Runtime;
using hipxx::core::Stream;
using hipxx::core::StreamTraits;

namespace hipxx::api {
namespace {

// The part of a requested CU mask that names compute units the device has: words and bits past
// them are ignored, as HIP documents, so the mask kept (and given back) is the one in effect.
std::vector<std::uint32_t> effective_cu_mask(std::span<const std::uint32_t> requested, int units) {
  if (units <= 0) return {requested.begin(), requested.end()};  // a device that does not say
  const auto words_with_units = static_cast<std::size_t>((units + 31) / 32);
  const std::size_t kept = std::min(requested.size(), words_with_units);
  std::vector<std::uint32_t> mask(requested.begin(), requested.begin() + static_cast<std::ptrdiff_t>(kept));
  if (const int in_last_word = units % 32; in_last_word != 0 && kept == words_with_units) {
    mask.back() &= (1U << in_last_word) - 1U;
  }
  return mask;
}

// Lower numbers mean greater priority, as in HIP: high -1, normal 0, low 1.
constexpr int kGreatestPriority = -1;
constexpr int kLeastPriority = 1;

hipError_t create_stream(Runtime& runtime, hipStream_t* stream, unsigned flags, int priority,
                         std::vector<std::uint32_t> cu_mask = {}) {
  if (stream == nullptr || (flags & ~static_cast<unsigned>(hipStreamNonBlocking)) != 0) return hipErrorInvalidValue;
  return runtime.streams().create(stream,
                                  StreamTraits{.device = Runtime::current_device(),
                                               .flags = flags,
                                               .priority = std::clamp(priority, kGreatestPriority, kLeastPriority),
                                               .cu_mask = std::move(cu_mask),
                                               .is_null = false});
}

// For the device of the stream that will touch the word: its thread or queue loads and stores it
// with that device's access, so a word it cannot reach is refused now, not skipped at run time.
template <class Word>
hipError_t check_word(Runtime& runtime, const void* ptr, hipMemAccessFlags needed, const Stream& stream) {
  if (ptr == nullptr || reinterpret_cast<std::uintptr_t>(ptr) % sizeof(Word) != 0) return hipErrorInvalidValue;
  return runtime.accessible(ptr, sizeof(Word), needed, stream.traits().device) ? hipSuccess : hipErrorInvalidValue;
}

// HIP's wait flags as the backend's condition; none for a flag HIP does not define.
std::optional<hipxx::backend::WaitCondition> condition_of(unsigned flags) noexcept {
  using hipxx::backend::WaitCondition;
  switch (flags) {
    case hipStreamWaitValueGte: return WaitCondition::at_least;
    case hipStreamWaitValueEq: return WaitCondition::equal;
    case hipStreamWaitValueAnd: return WaitCondition::any_common_bit;
    case hipStreamWaitValueNor: return WaitCondition::some_bit_clear_in_both;
    default: return std::nullopt;
  }
}

// Conditions that hold for every word need no wait at all: Gte of 0, and Nor under a partial mask
// (the bits outside the mask are clear in both operands).
bool always_holds(const hipxx::backend::WordWait& wait, std::uint64_t width_mask) noexcept {
  using hipxx::backend::WaitCondition;
  if (wait.condition == WaitCondition::at_least) return wait.value == 0;
  return wait.condition == WaitCondition::some_bit_clear_in_both && (wait.mask & width_mask) != width_mask;
}

template <class Word>
hipError_t wait_value(hipStream_t stream, void* ptr, Word value, unsigned flags, Word mask) {
  return guarded_stream_as_value([&](Runtime& runtime) {
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    const std::optional<hipxx::backend::WaitCondition> condition = condition_of(flags);
    if (!condition) return hipErrorInvalidValue;
    if (const hipError_t error = check_word<Word>(runtime, ptr, hipMemAccessFlagsProtRead, *target);
        error != hipSuccess) {
      return error;
    }
    constexpr std::uint64_t width_mask = hipxx::backend::width_mask_of(sizeof(Word));
    const hipxx::backend::WordWait wait{.value = value, .mask = mask, .condition = *condition};
    const bool host_only = !runtime.queue_may_touch_word(ptr, sizeof(Word));
    const hipxx::core::MemoryOwner owner = runtime.owner_of(ptr);
    auto on_queue = [host_only, wait, ptr](hipxx::backend::Queue& queue, std::uint64_t /*sequence*/) {
      if (host_only) return hipErrorNotSupported;
      if (always_holds(wait, width_mask)) return hipSuccess;
      return queue.wait_word(ptr, sizeof(Word), wait);
    };
    return runtime.streams().enqueue(*target, on_queue, [&runtime, ptr, wait, owner] {
      hipError_t status = hipSuccess;
      hipxx::backend::poll_until(
          [&] {
            std::uint64_t current = 0;
            status = runtime.load_word(ptr, sizeof(Word), owner, &current);
            return status != hipSuccess || hipxx::backend::meets(current, wait, width_mask);
          },
          {.yielding_rounds = 1024, .longest_sleep = std::chrono::microseconds{50}});
      return status;
    });
  });
}

template <class Word>
hipError_t write_value(hipStream_t stream, void* ptr, Word value, unsigned /*flags: reserved*/) {
  return guarded_stream_as_value([&](Runtime& runtime) {
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    if (const hipError_t error = check_word<Word>(runtime, ptr, hipMemAccessFlagsProtReadWrite, *target);
        error != hipSuccess) {
      return error;
    }
    const hipxx::core::MemoryOwner owner = runtime.owner_of(ptr);
    return runtime.streams().enqueue(
        *target,
        [host_only = !runtime.queue_may_touch_word(ptr, sizeof(Word)), ptr, value](hipxx::backend::Queue& queue,
                                                                                   std::uint64_t /*sequence*/) {
          return host_only ? hipErrorNotSupported : queue.write_word(ptr, sizeof(Word), value);
        },
        [&runtime, ptr, value, owner] { return runtime.store_word(ptr, sizeof(Word), owner, value); });
  });
}

// What host work on a device queue needs when the driver calls it back: `call(status)`.
template <class Call>
struct QueuedHostWork : hipxx::backend::HostCall {
  QueuedHostWork(Call call_, hipxx::core::StreamWorkSource source_) noexcept
      : HostCall{.run = &run}, call(call_), source(source_) {}

  static void run(HostCall* base, hipError_t status) {
    // Every HostCall whose run is this one is a QueuedHostWork<Call>: run and type are set together.
    const std::unique_ptr<QueuedHostWork> owned{
        static_cast<QueuedHostWork*>(base)};  // NOLINT(cppcoreguidelines-pro-type-static-cast-downcast)
    const hipxx::core::RunningStreamWork running{owned->source};
    owned->call(status);
    hipxx::core::forget_resolved_stream();
  }

  Call call;
  hipxx::core::StreamWorkSource source;
};

// Queues `call(status)` on `target` in stream order, with the stream's status at that point: on the
// device queue, whose driver calls back once the work before it is done, or on the stream's thread.
template <class Call>
hipError_t enqueue_host_work(Runtime& runtime, Stream& target, Call call) {
  Stream* const raw = &target;
  // The driver owns the call's state once it accepted it, and hands it back exactly once.
  return runtime.streams().enqueue(
      target,
      [raw, call](hipxx::backend::Queue& queue, std::uint64_t sequence) {
        // The queue's fault, or else a failure of the stream's work before this call that ran on
        // the stream's thread (read without locks or driver calls: this runs on a driver's thread).
        const auto with_stream_failure = [raw, call, sequence](hipError_t status) {
          call(status != hipSuccess ? status : raw->work_failure_through(sequence));
        };
        auto work = std::make_unique<QueuedHostWork<decltype(with_stream_failure)>>(with_stream_failure,
                                                                                    raw->work_source(sequence));
        const hipError_t accepted = queue.host_call(work.get(), sequence);
        if (accepted == hipSuccess) (void)work.release();
        return accepted;
      },
      [raw, call] {
        call(raw->status());
        return hipSuccess;
      });
}

}  // namespace
}  // namespace hipxx::api

extern "C" {

hipError_t hipStreamCreate(hipStream_t* stream) {
  return guarded([&](Runtime& runtime) { return hipxx::api::create_stream(runtime, stream, hipStreamDefault, 0); });
}

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  return guarded([&](Runtime& runtime) { return hipxx::api::create_stream(runtime, stream, flags, 0); });
}

hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags, int priority) {
  return guarded([&](Runtime& runtime) { return hipxx::api::create_stream(runtime, stream, flags, priority); });
}

hipError_t hipExtStreamCreateWithCUMask(hipStream_t* stream, uint32_t cuMaskSize, const uint32_t* cuMask) {
  return guarded([&](Runtime& runtime) {
    if (cuMaskSize == 0 || cuMask == nullptr) return hipErrorInvalidValue;
    const int units = runtime.backend().device(Runtime::current_device()).multiprocessor_count;
    return hipxx::api::create_stream(runtime, stream, hipStreamDefault, 0,
                                     hipxx::api::effective_cu_mask({cuMask, cuMaskSize}, units));
  });
}

hipError_t hipExtStreamGetCUMask(hipStream_t stream, uint32_t cuMaskSize, uint32_t* cuMask) {
  return guarded([&](Runtime& runtime) {
    if (cuMaskSize == 0 || cuMask == nullptr) return hipErrorInvalidValue;
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    // A stream without a mask may use every compute unit of its device.
    const std::vector<std::uint32_t>& mask = target->traits().cu_mask;
    const int units = runtime.backend().device(target->traits().device).multiprocessor_count;
    for (uint32_t word = 0; word < cuMaskSize; ++word) {
      if (!mask.empty()) {
        cuMask[word] = word < mask.size() ? mask[word] : 0;
        continue;
      }
      const int first = static_cast<int>(word) * 32;
      const int in_word = std::clamp(units - first, 0, 32);
      cuMask[word] = in_word == 32 ? 0xFFFFFFFFU : (1U << in_word) - 1U;
    }
    return hipSuccess;
  });
}

hipError_t hipDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  return guarded([&](Runtime&) {
    if (leastPriority != nullptr) *leastPriority = hipxx::api::kLeastPriority;
    if (greatestPriority != nullptr) *greatestPriority = hipxx::api::kGreatestPriority;
    return hipSuccess;
  });
}

hipError_t hipStreamDestroy(hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.streams().destroy(stream); });
}

hipError_t hipStreamQuery(hipStream_t stream) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    return target->query();
  });
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    runtime.streams().synchronize(*target);
    runtime.after_synchronize(*target);
    // Work of the stream that failed where it ran (on the device, or on the stream's thread) is
    // reported here, as HIP reports errors of earlier asynchronous work at a synchronize.
    return target->status();
  });
}

hipError_t hipStreamGetFlags(hipStream_t stream, unsigned int* flags) {
  return guarded([&](Runtime& runtime) {
    if (flags == nullptr) return hipErrorInvalidValue;
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    *flags = target->traits().flags;
    return hipSuccess;
  });
}

hipError_t hipStreamGetPriority(hipStream_t stream, int* priority) {
  return guarded([&](Runtime& runtime) {
    if (priority == nullptr) return hipErrorInvalidValue;
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    *priority = target->traits().priority;
    return hipSuccess;
  });
}

hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    const std::shared_ptr<hipxx::core::Event> awaited = runtime.events().resolve(event);
    if (!target || !awaited) return hipErrorInvalidHandle;
    if (flags != 0) return hipErrorInvalidValue;
    if (const std::shared_ptr<hipxx::core::SharedEventState>& shared = awaited->shared()) {
      // The newest record of an interprocess event, which any process may have made: the stream's
      // later work waits, on its host thread, until that record is reached.
      const std::uint64_t record = shared->newest();
      if (shared->reached(record)) return hipSuccess;
      return runtime.streams().enqueue(*target,
                                       [shared, record] {
                                         shared->wait_for(record);
                                         return hipSuccess;
                                       })
                 ? hipSuccess
                 : hipErrorInvalidHandle;
    }
    const std::shared_ptr<hipxx::core::EventMarker> marker = awaited->marker();
    if (!marker) return hipSuccess;  // an event never recorded is already complete
    const std::shared_ptr<Stream> recorded_on = marker->owner();
    if (!recorded_on) return hipSuccess;  // destroyed after all of its work: nothing left to wait for
    if (recorded_on->reached(marker->sequence)) {
      // No wait to queue, but the order still holds, and follow-event-dependencies reuse in the pools
      // goes by it (enqueue_wait notes it where a wait is queued).
      target->note_ordered_after(*recorded_on, marker->sequence);
      return hipSuccess;
    }
    return runtime.streams().enqueue_wait(*target, recorded_on, marker->sequence, marker->timestamp.get())
               ? hipSuccess
               : hipErrorInvalidHandle;
  });
}

hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t callback, void* userData, unsigned int flags) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    if (callback == nullptr || flags != 0) return hipErrorInvalidValue;
    return hipxx::api::enqueue_host_work(
        runtime, *target, [stream, callback, userData](hipError_t status) { callback(stream, status, userData); });
  });
}

hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<Stream> target = runtime.streams().resolve(stream, Runtime::current_device());
    if (!target) return hipErrorInvalidHandle;
    if (fn == nullptr) return hipErrorInvalidValue;
    return hipxx::api::enqueue_host_work(runtime, *target, [fn, userData](hipError_t /*status*/) { fn(userData); });
  });
}

hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags, uint32_t mask) {
  return hipxx::api::wait_value<std::uint32_t>(stream, ptr, value, flags, mask);
}

hipError_t hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value, unsigned int flags, uint64_t mask) {
  return hipxx::api::wait_value<std::uint64_t>(stream, ptr, value, flags, mask);
}

hipError_t hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags) {
  return hipxx::api::write_value<std::uint32_t>(stream, ptr, value, flags);
}

hipError_t hipStreamWriteValue64(hipStream_t stream, void* ptr, uint64_t value, unsigned int flags) {
  return hipxx::api::write_value<std::uint64_t>(stream, ptr, value, flags);
}

}  // extern "C"
