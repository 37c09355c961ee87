// The CUresult a driver call returned, as the documented hipError_t. Header-only and free of the
// driver, so that the translation is tested where no GPU is.
#pragma once

#include "backend/cuda/cuda_driver.hpp"

#include <hipxx/hip_runtime_api.h>

namespace hipxx::backend::cuda {

// hipErrorUnknown where HIP has no counterpart.
[[nodiscard]] constexpr hipError_t to_hip(CUresult result) noexcept {
  switch (result) {
    case CUDA_SUCCESS: return hipSuccess;
    case CUDA_ERROR_INVALID_VALUE: return hipErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return hipErrorOutOfMemory;
    case CUDA_ERROR_NOT_INITIALIZED: return hipErrorNotInitialized;
    case CUDA_ERROR_DEINITIALIZED: return hipErrorDeinitialized;
    case CUDA_ERROR_NO_DEVICE: return hipErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return hipErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return hipErrorInvalidContext;
    case CUDA_ERROR_MAP_FAILED: return hipErrorMapFailed;
    case CUDA_ERROR_UNMAP_FAILED: return hipErrorUnmapFailed;
    case CUDA_ERROR_ALREADY_MAPPED: return hipErrorAlreadyMapped;
    case CUDA_ERROR_NOT_MAPPED: return hipErrorNotMapped;
    case CUDA_ERROR_ECC_UNCORRECTABLE: return hipErrorECCNotCorrectable;
    case CUDA_ERROR_CONTEXT_ALREADY_IN_USE: return hipErrorContextAlreadyInUse;
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: return hipErrorPeerAccessUnsupported;
    case CUDA_ERROR_OPERATING_SYSTEM: return hipErrorOperatingSystem;
    case CUDA_ERROR_INVALID_HANDLE: return hipErrorInvalidHandle;
    case CUDA_ERROR_ILLEGAL_STATE: return hipErrorIllegalState;
    case CUDA_ERROR_NOT_FOUND: return hipErrorNotFound;
    case CUDA_ERROR_NOT_READY: return hipErrorNotReady;
    case CUDA_ERROR_ILLEGAL_ADDRESS: return hipErrorIllegalAddress;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return hipErrorLaunchOutOfResources;
    case CUDA_ERROR_LAUNCH_TIMEOUT: return hipErrorLaunchTimeOut;
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return hipErrorPeerAccessAlreadyEnabled;
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: return hipErrorPeerAccessNotEnabled;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return hipErrorContextIsDestroyed;
    case CUDA_ERROR_ASSERT: return hipErrorAssert;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return hipErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return hipErrorHostMemoryNotRegistered;
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED: return hipErrorLaunchFailure;
    case CUDA_ERROR_NOT_SUPPORTED: return hipErrorNotSupported;
    default: return hipErrorUnknown;
  }
}

}  // namespace hipxx::backend::cuda
