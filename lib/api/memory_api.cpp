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
