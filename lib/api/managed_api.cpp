// Managed memory entry points.
#include "api/guard.hpp"

using hipxx::api::guarded;
using hipxx::core::Runtime;

extern "C" {

hipError_t hipMallocManaged(void** dev_ptr, size_t size, unsigned int flags) {
  return guarded([&](Runtime& runtime) { return runtime.allocate_managed(dev_ptr, size, flags); });
}

hipError_t hipMemPrefetchAsync(const void* dev_ptr, size_t count, int device, hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.prefetch(dev_ptr, count, device, stream); });
}

hipError_t hipMemAdvise(const void* dev_ptr, size_t count, hipMemoryAdvise advice, int device) {
  return guarded([&](Runtime& runtime) { return runtime.advise(dev_ptr, count, advice, device); });
}

hipError_t hipMemRangeGetAttribute(void* data, size_t data_size, hipMemRangeAttribute attribute, const void* dev_ptr,
                                   size_t count) {
  return guarded([&](Runtime& runtime) { return runtime.range_attribute(data, data_size, attribute, dev_ptr, count); });
}

hipError_t hipMemRangeGetAttributes(void** data, size_t* data_sizes, hipMemRangeAttribute* attributes,
                                    size_t num_attributes, const void* dev_ptr, size_t count) {
  return guarded([&](Runtime& runtime) {
    if (data == nullptr || data_sizes == nullptr || attributes == nullptr || num_attributes == 0) {
      return hipErrorInvalidValue;
    }
    for (size_t index = 0; index < num_attributes; ++index) {
      const hipError_t error =
          runtime.range_attribute(data[index], data_sizes[index], attributes[index], dev_ptr, count);
      if (error != hipSuccess) return error;
    }
    return hipSuccess;
  });
}

hipError_t hipStreamAttachMemAsync(hipStream_t stream, void* dev_ptr, size_t length, unsigned int flags) {
  return guarded([&](Runtime& runtime) { return runtime.attach(stream, dev_ptr, length, flags); });
}

}  // extern "C"
