// Plain device allocations and synchronous data movement.
#include "api/guard.hpp"

#include <cstdint>

using hipxx::api::guarded;
using hipxx::core::Runtime;

extern "C" {

hipError_t hipMalloc(void** ptr, size_t size) {
  return guarded([&](Runtime& runtime) { return runtime.allocate(ptr, size); });
}

hipError_t hipFree(void* ptr) {
  return guarded([&](Runtime& runtime) { return runtime.deallocate(ptr); });
}

hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind) {
  return guarded([&](Runtime& runtime) { return runtime.copy(dst, src, sizeBytes, kind); });
}

hipError_t hipMemset(void* dst, int value, size_t sizeBytes) {
  return guarded([&](Runtime& runtime) { return runtime.fill(dst, value, sizeBytes); });
}

// A copy between devices is a device-to-device copy made by the current device, as on AMD's
// runtime: every device addresses all memory, and the ordinals are only checked.
hipError_t hipMemcpyPeer(void* dst, int dstDeviceId, const void* src, int srcDeviceId, size_t sizeBytes) {
  return guarded([&](Runtime& runtime) {
    if (!runtime.valid_device(dstDeviceId) || !runtime.valid_device(srcDeviceId)) return hipErrorInvalidDevice;
    return runtime.copy(dst, src, sizeBytes, hipMemcpyDeviceToDevice);
  });
}

hipError_t hipMemGetInfo(size_t* free, size_t* total) {
  return guarded([&](Runtime& runtime) {
    if (free == nullptr || total == nullptr) return hipErrorInvalidValue;
    const int device = Runtime::current_device();
    if (!runtime.valid_device(device)) return hipErrorInvalidDevice;
    std::uint64_t free_bytes = 0;
    std::uint64_t total_bytes = 0;
    if (const hipError_t error = runtime.backend().memory_info(device, &free_bytes, &total_bytes);
        error != hipSuccess) {
      return error;
    }
    *free = static_cast<size_t>(free_bytes);
    *total = static_cast<size_t>(total_bytes);
    return hipSuccess;
  });
}

}  // extern "C"

extern "C" {

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.copy_async(dst, src, sizeBytes, kind, stream); });
}

hipError_t hipMemsetAsync(void* dst, int value, size_t sizeBytes, hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.fill_async(dst, value, sizeBytes, stream); });
}

hipError_t hipMemcpyPeerAsync(void* dst, int dstDeviceId, const void* src, int srcDevice, size_t sizeBytes,
                              hipStream_t stream) {
  return guarded([&](Runtime& runtime) {
    if (!runtime.valid_device(dstDeviceId) || !runtime.valid_device(srcDevice)) return hipErrorInvalidDevice;
    return runtime.copy_async(dst, src, sizeBytes, hipMemcpyDeviceToDevice, stream);
  });
}

// The directions are checked as hipMemcpy checks hipMemcpyHostToDevice and the others.
hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t sizeBytes) {
  return hipMemcpy(dst, src, sizeBytes, hipMemcpyHostToDevice);
}

hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t sizeBytes) {
  return hipMemcpy(dst, src, sizeBytes, hipMemcpyDeviceToHost);
}

hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes) {
  return hipMemcpy(dst, src, sizeBytes, hipMemcpyDeviceToDevice);
}

hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t sizeBytes, hipStream_t stream) {
  return hipMemcpyAsync(dst, src, sizeBytes, hipMemcpyHostToDevice, stream);
}

hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream) {
  return hipMemcpyAsync(dst, src, sizeBytes, hipMemcpyDeviceToHost, stream);
}

hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream) {
  return hipMemcpyAsync(dst, src, sizeBytes, hipMemcpyDeviceToDevice, stream);
}

hipError_t hipMemsetD8(hipDeviceptr_t dest, unsigned char value, size_t count) { return hipMemset(dest, value, count); }

hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream) {
  return hipMemsetAsync(dest, value, count, stream);
}

hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr) {
  return guarded([&](Runtime& runtime) { return runtime.pointer_attributes(attributes, ptr); });
}

// Signal memory is ordinary device memory here: every allocation can hold wait/write values.
hipError_t hipExtMallocWithFlags(void** ptr, size_t sizeBytes, unsigned int flags) {
  return guarded([&](Runtime& runtime) {
    if (flags != hipDeviceMallocDefault && flags != hipMallocSignalMemory) return hipErrorInvalidValue;
    return runtime.allocate(ptr, sizeBytes);
  });
}

}  // extern "C"
