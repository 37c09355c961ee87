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
  if (result != hipSuccess) remember_error(result);
  return result;
}

}  // namespace hipxx::api
