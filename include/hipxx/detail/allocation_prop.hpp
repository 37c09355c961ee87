// The allocation properties hipxx asks for. Kept in one place because the granularity query and
// hipMemCreate must describe the same kind of memory, or the granularity they agree on is a guess.
#pragma once

#include <hipxx/hip_runtime_api.h>

namespace hipxx::detail {

// Fields are assigned by name, not by position, so that the ROCm 7 layout (a union for the handle
// types) and the older one both compile.
[[nodiscard]] inline hipMemAllocationProp allocation_prop(int device, bool exportable) noexcept {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = exportable ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = device;
  return prop;
}

}  // namespace hipxx::detail
