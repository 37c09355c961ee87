// The stream-ordered allocator and its memory pools.
#include "api/guard.hpp"

using hipxx::api::guarded;
using hipxx::core::MemoryPool;
using hipxx::core::Runtime;

extern "C" {

hipError_t hipMallocAsync(void** dev_ptr, size_t size, hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.allocate_async(dev_ptr, size, nullptr, stream); });
}

hipError_t hipMallocFromPoolAsync(void** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream) {
  return guarded([&](Runtime& runtime) {
    if (mem_pool == nullptr) return hipErrorInvalidValue;
    return runtime.allocate_async(dev_ptr, size, mem_pool, stream);
  });
}

hipError_t hipFreeAsync(void* dev_ptr, hipStream_t stream) {
  return guarded([&](Runtime& runtime) { return runtime.free_async(dev_ptr, stream); });
}

hipError_t hipMemPoolCreate(hipMemPool_t* mem_pool, const hipMemPoolProps* pool_props) {
  return guarded([&](Runtime& runtime) { return runtime.pools().create(mem_pool, pool_props); });
}

hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool) {
  return guarded([&](Runtime& runtime) { return runtime.pools().destroy(mem_pool); });
}

hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool);
    if (!pool) return hipErrorInvalidValue;
    pool->trim_to(min_bytes_to_hold);
    return hipSuccess;
  });
}

hipError_t hipMemPoolSetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool);
    if (!pool) return hipErrorInvalidValue;
    return pool->set_attribute(attr, value);
  });
}

hipError_t hipMemPoolGetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool);
    if (!pool) return hipErrorInvalidValue;
    return pool->get_attribute(attr, value);
  });
}

hipError_t hipMemPoolSetAccess(hipMemPool_t mem_pool, const hipMemAccessDesc* desc_list, size_t count) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool);
    if (!pool) return hipErrorInvalidValue;
    return pool->set_access(desc_list, count);
  });
}

hipError_t hipMemPoolGetAccess(hipMemAccessFlags* flags, hipMemPool_t mem_pool, hipMemLocation* location) {
  return guarded([&](Runtime& runtime) {
    if (flags == nullptr || location == nullptr) return hipErrorInvalidValue;
    const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool);
    if (!pool || location->type != hipMemLocationTypeDevice || !runtime.valid_device(location->id)) {
      return hipErrorInvalidValue;
    }
    *flags = pool->access(location->id);
    return hipSuccess;
  });
}

hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* mem_pool, int device) {
  return guarded([&](Runtime& runtime) { return runtime.pools().default_pool(device, mem_pool); });
}

hipError_t hipDeviceGetMemPool(hipMemPool_t* mem_pool, int device) {
  return guarded([&](Runtime& runtime) { return runtime.pools().current_pool(device, mem_pool); });
}

hipError_t hipDeviceSetMemPool(int device, hipMemPool_t mem_pool) {
  return guarded([&](Runtime& runtime) { return runtime.pools().set_current_pool(device, mem_pool); });
}

}  // extern "C"
