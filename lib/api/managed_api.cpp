// Managed memory entry points.
#include "api/guard.hpp"

#include <unistd.h>
#include <string>

using hipxx::api::guarded;
using hipxx::api::guarded_stream_as_value;
using hipxx::core::Runtime;

namespace {

// The device id that the id-taking calls know a location by: a device's ordinal, or hipCpuDeviceId
// for every kind of host location. hipInvalidDeviceId, which those calls refuse where they need a
// location, for a location that names nothing: an unknown kind, a negative device ordinal, a host
// NUMA node this machine lacks. A NUMA node is checked, not chosen: the pages go to host memory.
int device_of(const hipMemLocation& location) {
  switch (location.type) {
    case hipMemLocationTypeDevice: return location.id >= 0 ? location.id : hipInvalidDeviceId;
    case hipMemLocationTypeHost:
    case hipMemLocationTypeHostNumaCurrent: return hipCpuDeviceId;
    case hipMemLocationTypeHostNuma: {
      if (location.id < 0) return hipInvalidDeviceId;
      // Node 0 exists on every Linux machine, also where /sys is not mounted.
      const std::string node = "/sys/devices/system/node/node" + std::to_string(location.id);
      return location.id == 0 || access(node.c_str(), F_OK) == 0 ? hipCpuDeviceId : hipInvalidDeviceId;
    }
    default: return hipInvalidDeviceId;
  }
}

}  // namespace

extern "C" {

hipError_t hipMallocManaged(void** dev_ptr, size_t size, unsigned int flags) {
  return guarded([&](Runtime& runtime) { return runtime.allocate_managed(dev_ptr, size, flags); });
}

hipError_t hipMemPrefetchAsync(const void* dev_ptr, size_t count, int device, hipStream_t stream) {
  return guarded_stream_as_value([&](Runtime& runtime) { return runtime.prefetch(dev_ptr, count, device, stream); });
}

hipError_t hipMemAdvise(const void* dev_ptr, size_t count, hipMemoryAdvise advice, int device) {
  return guarded([&](Runtime& runtime) { return runtime.advise(dev_ptr, count, advice, device); });
}

hipError_t hipMemPrefetchAsync_v2(const void* dev_ptr, size_t count, hipMemLocation location, unsigned int flags,
                                  hipStream_t stream) {
  return guarded_stream_as_value([&](Runtime& runtime) {
    if (flags != 0) return hipErrorInvalidValue;
    return runtime.prefetch(dev_ptr, count, device_of(location), stream);
  });
}

hipError_t hipMemAdvise_v2(const void* dev_ptr, size_t count, hipMemoryAdvise advice, hipMemLocation location) {
  return guarded([&](Runtime& runtime) { return runtime.advise(dev_ptr, count, advice, device_of(location)); });
}

hipError_t hipMemRangeGetAttribute(void* data, size_t data_size, hipMemRangeAttribute attribute, const void* dev_ptr,
                                   size_t count) {
  return guarded([&](Runtime& runtime) {
    return runtime.range_attributes({.data = &data, .data_sizes = &data_size, .attributes = &attribute, .count = 1},
                                    dev_ptr, count);
  });
}

hipError_t hipMemRangeGetAttributes(void** data, size_t* data_sizes, hipMemRangeAttribute* attributes,
                                    size_t num_attributes, const void* dev_ptr, size_t count) {
  return guarded([&](Runtime& runtime) {
    // A count larger than any array of pointers can be is a count no caller's arrays hold.
    constexpr size_t kLongestArray = PTRDIFF_MAX / sizeof(void*);
    if (data == nullptr || data_sizes == nullptr || attributes == nullptr || num_attributes == 0 ||
        num_attributes > kLongestArray) {
      return hipErrorInvalidValue;
    }
    return runtime.range_attributes(
        {.data = data, .data_sizes = data_sizes, .attributes = attributes, .count = num_attributes}, dev_ptr, count);
  });
}

hipError_t hipStreamAttachMemAsync(hipStream_t stream, void* dev_ptr, size_t length, unsigned int flags) {
  return guarded_stream_as_value([&](Runtime& runtime) { return runtime.attach(stream, dev_ptr, length, flags); });
}

}  // extern "C"
