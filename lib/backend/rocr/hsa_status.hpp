// ROCr's status codes as the documented hipError_t, for the backend and its queues alike.
#pragma once

#include <hipxx/hip_runtime_api.h>
#include "backend/rocr/hsa_runtime.hpp"

namespace hipxx::backend::rocr {

[[nodiscard]] inline hipError_t to_hip(hsa_status_t status) noexcept {
  switch (status) {
    case HSA_STATUS_SUCCESS: return hipSuccess;
    case HSA_STATUS_ERROR_INVALID_ARGUMENT:
    case HSA_STATUS_ERROR_INVALID_ALLOCATION:
    case HSA_STATUS_ERROR_INVALID_MEMORY_POOL:
    case HSA_STATUS_ERROR_RESOURCE_FREE: return hipErrorInvalidValue;
    case HSA_STATUS_ERROR_INVALID_AGENT: return hipErrorInvalidDevice;
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES: return hipErrorOutOfMemory;
    case HSA_STATUS_ERROR_NOT_INITIALIZED: return hipErrorNotInitialized;
    case HSA_STATUS_ERROR_MEMORY_FAULT:
    case HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: return hipErrorIllegalAddress;
    default: return hipErrorUnknown;
  }
}

}  // namespace hipxx::backend::rocr
