// Initialization, devices and their attributes.
#include "api/guard.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <type_traits>

namespace hipxx::api {
namespace {

constexpr int kRuntimeVersion = 60'300'000;  // reports HIP 6.3 as AMD encodes it: major*1e7 + minor*1e5

int clamp_to_int(std::uint64_t value) noexcept {
  return static_cast<int>(std::min<std::uint64_t>(value, std::numeric_limits<int>::max()));
}

// Peer access is between the calling thread's current device and another valid one: that device,
// or hipErrorInvalidDevice.
hipError_t current_device_with_peer(const core::Runtime& runtime, int peer, int* device) {
  *device = core::Runtime::current_device();
  const bool pair = runtime.valid_device(*device) && runtime.valid_device(peer) && peer != *device;
  return pair ? hipSuccess : hipErrorInvalidDevice;
}

hipError_t attribute_of(const backend::DeviceProperties& device, hipDeviceAttribute_t attribute, int* value) {
  switch (attribute) {
    case hipDeviceAttributeVirtualMemoryManagementSupported: *value = device.virtual_memory ? 1 : 0; break;
    case hipDeviceAttributeMemoryPoolSupportedHandleTypes:
      *value = device.posix_fd_export ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
      break;
    // The stream-ordered pools and stream wait/write value are the runtime's own, on every backend.
    case hipDeviceAttributeMemoryPoolsSupported:
    case hipDeviceAttributeCanUseStreamWaitValue: *value = 1; break;
    case hipDeviceAttributeManagedMemory: *value = device.managed_memory ? 1 : 0; break;
    case hipDeviceAttributeConcurrentManagedAccess: *value = device.concurrent_managed_access ? 1 : 0; break;
    case hipDeviceAttributePageableMemoryAccess: *value = device.pageable_memory_access ? 1 : 0; break;
    case hipDeviceAttributePageableMemoryAccessUsesHostPageTables:
      *value = device.pageable_memory_access_uses_host_page_tables ? 1 : 0;
      break;
    case hipDeviceAttributeStreamPrioritiesSupported:
    case hipDeviceAttributeUnifiedAddressing: *value = 1; break;
    case hipDeviceAttributeIntegrated: *value = device.integrated ? 1 : 0; break;
    case hipDeviceAttributeMultiprocessorCount: *value = device.multiprocessor_count; break;
    case hipDeviceAttributeTotalGlobalMem: *value = clamp_to_int(device.total_memory); break;
    default: return hipErrorInvalidValue;
  }
  return hipSuccess;
}

// hipGetDeviceProperties reports what hipDeviceGetAttribute does, member for member, so the two
// never disagree; the members no attribute answers stay 0.
void fill_properties(const backend::DeviceProperties& device, hipDeviceProp_tR0600& properties) {
  const auto set = [&](hipDeviceAttribute_t attribute, auto& member) {
    int value = 0;
    if (attribute_of(device, attribute, &value) == hipSuccess) {
      member = static_cast<std::remove_reference_t<decltype(member)>>(value);
    }
  };
  const std::size_t kept = std::min(device.name.size(), sizeof properties.name - 1);
  device.name.copy(std::data(properties.name), kept);
  properties.totalGlobalMem = static_cast<std::size_t>(device.total_memory);
  set(hipDeviceAttributeMultiprocessorCount, properties.multiProcessorCount);
  set(hipDeviceAttributeIntegrated, properties.integrated);
  set(hipDeviceAttributeManagedMemory, properties.managedMemory);
  set(hipDeviceAttributeConcurrentManagedAccess, properties.concurrentManagedAccess);
  set(hipDeviceAttributePageableMemoryAccess, properties.pageableMemoryAccess);
  set(hipDeviceAttributePageableMemoryAccessUsesHostPageTables, properties.pageableMemoryAccessUsesHostPageTables);
  set(hipDeviceAttributeStreamPrioritiesSupported, properties.streamPrioritiesSupported);
  set(hipDeviceAttributeUnifiedAddressing, properties.unifiedAddressing);
  set(hipDeviceAttributeMemoryPoolsSupported, properties.memoryPoolsSupported);
  set(hipDeviceAttributeMemoryPoolSupportedHandleTypes, properties.memoryPoolSupportedHandleTypes);
}

// The versions are answered where no backend started too (as AMD's runtime does), so that a program
// can report them before it looks for a device.
hipError_t report_version(int* version) noexcept {
  if (version == nullptr) {
    remember_error(hipErrorInvalidValue);
    return hipErrorInvalidValue;
  }
  *version = kRuntimeVersion;
  return hipSuccess;
}

}  // namespace
}  // namespace hipxx::api

using hipxx::api::guarded;
using hipxx::core::Runtime;

extern "C" {

hipError_t hipInit(unsigned int flags) {
  return guarded([&](Runtime&) { return flags == 0 ? hipSuccess : hipErrorInvalidValue; });
}

hipError_t hipGetDeviceCount(int* count) {
  if (count == nullptr) {
    hipxx::api::remember_error(hipErrorInvalidValue);
    return hipErrorInvalidValue;
  }
  *count = 0;
  return guarded([&](Runtime& runtime) {
    *count = runtime.device_count();
    return hipSuccess;
  });
}

// A device handle is its ordinal, as on AMD's runtime.
hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
  return guarded([&](Runtime& runtime) {
    if (device == nullptr) return hipErrorInvalidValue;
    if (!runtime.valid_device(ordinal)) return hipErrorInvalidDevice;
    *device = ordinal;
    return hipSuccess;
  });
}

hipError_t hipSetDevice(int device) {
  return guarded([&](Runtime& runtime) { return runtime.set_current_device(device); });
}

hipError_t hipGetDevice(int* device) {
  return guarded([&](Runtime&) {
    if (device == nullptr) return hipErrorInvalidValue;
    *device = Runtime::current_device();
    return hipSuccess;
  });
}

hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int device) {
  return guarded([&](Runtime& runtime) {
    if (value == nullptr) return hipErrorInvalidValue;
    if (!runtime.valid_device(device)) return hipErrorInvalidDevice;
    return hipxx::api::attribute_of(runtime.backend().device(device), attribute, value);
  });
}

hipError_t hipDeviceSynchronize(void) {
  return guarded([](Runtime& runtime) { return runtime.synchronize(); });
}

hipError_t hipDriverGetVersion(int* version) { return hipxx::api::report_version(version); }

hipError_t hipRuntimeGetVersion(int* version) { return hipxx::api::report_version(version); }

hipError_t hipDeviceCanAccessPeer(int* can_access, int device, int peer) {
  return guarded([&](Runtime& runtime) {
    if (can_access == nullptr) return hipErrorInvalidValue;
    if (!runtime.valid_device(device) || !runtime.valid_device(peer)) return hipErrorInvalidDevice;
    bool can = false;
    if (const hipError_t error = runtime.backend().can_access_peer(device, peer, &can); error != hipSuccess) {
      return error;
    }
    *can_access = can ? 1 : 0;
    return hipSuccess;
  });
}

hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags) {
  return guarded([&](Runtime& runtime) {
    if (flags != 0) return hipErrorInvalidValue;
    int device = 0;
    if (const hipError_t error = hipxx::api::current_device_with_peer(runtime, peerDeviceId, &device);
        error != hipSuccess) {
      return error;
    }
    bool can = false;
    if (const hipError_t error = runtime.backend().can_access_peer(device, peerDeviceId, &can); error != hipSuccess) {
      return error;
    }
    if (!can) return hipErrorPeerAccessUnsupported;
    return runtime.peer_access().enable(runtime.backend(), device, peerDeviceId);
  });
}

hipError_t hipDeviceDisablePeerAccess(int peerDeviceId) {
  return guarded([&](Runtime& runtime) {
    int device = 0;
    if (const hipError_t error = hipxx::api::current_device_with_peer(runtime, peerDeviceId, &device);
        error != hipSuccess) {
      return error;
    }
    return runtime.peer_access().disable(runtime.backend(), device, peerDeviceId);
  });
}

hipError_t hipDeviceGetName(char* name, int len, hipDevice_t device) {
  return guarded([&](Runtime& runtime) {
    if (name == nullptr || len <= 0) return hipErrorInvalidValue;
    if (!runtime.valid_device(device)) return hipErrorInvalidDevice;
    const std::string& full = runtime.backend().device(device).name;
    const std::size_t kept = std::min(full.size(), static_cast<std::size_t>(len) - 1);
    full.copy(name, kept);
    name[kept] = '\0';
    return hipSuccess;
  });
}

hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600* prop, int deviceId) {
  return guarded([&](Runtime& runtime) {
    if (prop == nullptr) return hipErrorInvalidValue;
    if (!runtime.valid_device(deviceId)) return hipErrorInvalidDevice;
    hipDeviceProp_tR0600 properties{};
    hipxx::api::fill_properties(runtime.backend().device(deviceId), properties);
    *prop = properties;
    return hipSuccess;
  });
}

hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device) {
  return guarded([&](Runtime& runtime) {
    if (bytes == nullptr) return hipErrorInvalidValue;
    if (!runtime.valid_device(device)) return hipErrorInvalidDevice;
    *bytes = runtime.backend().device(device).total_memory;
    return hipSuccess;
  });
}

}  // extern "C"
