// What every entry point does around its work: make sure a backend runs, turn exceptions into
// error codes (nothing may unwind through the C ABI), and remember failures for hipGetLastError.
#pragma once

#include "core/runtime.hpp"

#include <new>
#include <system_error>

namespace hipxx::api {

void remember_error(hipError_t error) noexcept;

template <class Work>
hipError_t guarded(Work&& work) noexcept {
  hipError_t result = hipSuccess;
  try {
    core::Runtime& runtime = core::Runtime::instance();
    result = runtime.status();
    if (result == hipSuccess) result = work(runtime);
  } catch (const std::bad_alloc&) {
    result = hipErrorOutOfMemory;
  } catch (const std::system_error& error) {
    // The system out of room for another thread (std::thread's way of saying so), descriptor (an
    // eventfd, say) or memory.
    const std::error_code code = error.code();
    const bool exhausted = code == std::errc::resource_unavailable_try_again ||
                           code == std::errc::too_many_files_open || code == std::errc::too_many_files_open_in_system ||
                           code == std::errc::not_enough_memory;
    result = exhausted ? hipErrorOutOfMemory : hipErrorUnknown;
  } catch (...) {
    result = hipErrorUnknown;
  }
  // A query's "not yet" is an answer, not a failure: as in AMD's runtime, it is not remembered.
  if (result != hipSuccess && result != hipErrorNotReady) remember_error(result);
  return result;
}

// For the entry points whose documentation lists hipErrorInvalidValue and not hipErrorInvalidHandle
// (the stream-ordered allocator, stream wait and write value, prefetch and attach): there a stream
// that is none (destroyed, forged, or destroyed by another thread while the call waited for room)
// is an invalid value, as AMD's runtime also answers for the stream-ordered allocator.
template <class Work>
hipError_t guarded_stream_as_value(Work&& work) noexcept {
  return guarded([&](core::Runtime& runtime) {
    const hipError_t result = work(runtime);
    return result == hipErrorInvalidHandle ? hipErrorInvalidValue : result;
  });
}

}  // namespace hipxx::api
