// The virtual memory management entry points of shared/seeds/vmm-hip.txt.
#include "api/guard.hpp"

using hipxx::api::guarded;
using hipxx::core::Runtime;

extern "C" {

hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr, unsigned long long flags) {
  return guarded([&](Runtime& runtime) { return runtime.reserve(ptr, size, alignment, addr, flags); });
}

hipError_t hipMemAddressFree(void* ptr, size_t size) {
  return guarded([&](Runtime& runtime) { return runtime.free_reservation(ptr, size); });
}

hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size, const hipMemAllocationProp* prop,
                        unsigned long long flags) {
  return guarded([&](Runtime& runtime) { return runtime.create(handle, size, prop, flags); });
}

hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle) {
  return guarded([&](Runtime& runtime) { return runtime.release(handle); });
}

hipError_t hipMemMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                     unsigned long long flags) {
  return guarded([&](Runtime& runtime) { return runtime.map(ptr, size, offset, handle, flags); });
}

hipError_t hipMemUnmap(void* ptr, size_t size) {
  return guarded([&](Runtime& runtime) { return runtime.unmap(ptr, size); });
}

hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count) {
  return guarded([&](Runtime& runtime) {
    if (desc == nullptr) return hipErrorInvalidValue;
    return runtime.set_access(ptr, size, {desc, count});
  });
}

hipError_t hipMemGetAccess(unsigned long long* flags, const hipMemLocation* location, void* ptr) {
  return guarded([&](Runtime& runtime) { return runtime.get_access(flags, location, ptr); });
}

hipError_t hipMemGetAllocationGranularity(size_t* granularity, const hipMemAllocationProp* prop,
                                          hipMemAllocationGranularity_flags option) {
  return guarded([&](Runtime& runtime) { return runtime.granularity(granularity, prop, option); });
}

hipError_t hipMemGetAllocationPropertiesFromHandle(hipMemAllocationProp* prop, hipMemGenericAllocationHandle_t handle) {
  return guarded([&](Runtime& runtime) { return runtime.properties_of(prop, handle); });
}

hipError_t hipMemExportToShareableHandle(void* shareableHandle, hipMemGenericAllocationHandle_t handle,
                                         hipMemAllocationHandleType handleType, unsigned long long flags) {
  return guarded([&](Runtime& runtime) { return runtime.export_handle(shareableHandle, handle, handleType, flags); });
}

hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* handle, void* osHandle,
                                           hipMemAllocationHandleType shHandleType) {
  return guarded([&](Runtime& runtime) { return runtime.import_handle(handle, osHandle, shHandleType); });
}

hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t* handle, void* addr) {
  return guarded([&](Runtime& runtime) { return runtime.retain(handle, addr); });
}

// Documented as unsupported on AMD GPUs: sparse arrays do not exist in this runtime either.
hipError_t hipMemMapArrayAsync(hipArrayMapInfo* /*mapInfoList*/, unsigned int /*count*/, hipStream_t /*stream*/) {
  return guarded([](Runtime&) { return hipErrorNotSupported; });
}

}  // extern "C"
