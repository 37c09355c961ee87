// Plain device allocations and synchronous data movement.
#include "api/guard.hpp"

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

}  // extern "C"

extern "C" {

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.copy_async(dst, src, sizeBytes, kind, stream); });
}

hipError_t hipMemsetAsync(void* dst, int value, size_t sizeBytes, hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.fill_async(dst, value, sizeBytes, stream); });
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
