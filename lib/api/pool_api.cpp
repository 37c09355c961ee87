// The stream-ordered allocator and its memory pools, including pools shared between processes.
// A handle is either a pool of this process (the pool registry's) or one imported from another
// (core/pool_sharing.hpp); calls that make sense for both ask the registry first. Allocation calls
// ask only the registry, so an imported pool is refused there, as HIP requires.
#include "api/guard.hpp"
#include "core/imported_pool.hpp"

using hipxx::api::guarded;
using hipxx::api::guarded_stream_as_value;
using hipxx::core::ImportedPool;
using hipxx::core::MemoryPool;
using hipxx::core::Runtime;

extern "C" {

hipError_t hipMallocAsync(void** dev_ptr, size_t size, hipStream_t stream) {
  return guarded_stream_as_value(
      [&](Runtime& runtime) { return runtime.allocate_async(dev_ptr, size, nullptr, stream); });
}

hipError_t hipMallocFromPoolAsync(void** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream) {
  return guarded_stream_as_value([&](Runtime& runtime) {
    if (mem_pool == nullptr) return hipErrorInvalidValue;
    return runtime.allocate_async(dev_ptr, size, mem_pool, stream);
  });
}

hipError_t hipFreeAsync(void* dev_ptr, hipStream_t stream) {
  return guarded_stream_as_value([&](Runtime& runtime) { return runtime.free_async(dev_ptr, stream); });
}

hipError_t hipMemPoolCreate(hipMemPool_t* mem_pool, const hipMemPoolProps* pool_props) {
  return guarded([&](Runtime& runtime) { return runtime.pools().create(mem_pool, pool_props); });
}

hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool) {
  return guarded([&](Runtime& runtime) {
    const hipError_t error = runtime.pools().destroy(mem_pool);
    return error == hipErrorInvalidValue ? runtime.pool_sharing().destroy_imported(mem_pool) : error;
  });
}

hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold) {
  return guarded([&](Runtime& runtime) {
    const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool);
    if (!pool) {
      // An imported pool caches nothing: what it maps is in use by imported pointers.
      return runtime.pool_sharing().imported(mem_pool) ? hipSuccess : hipErrorInvalidValue;
    }
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
    if (const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool)) {
      return pool->get_attribute(attr, value);
    }
    const std::shared_ptr<ImportedPool> imported = runtime.pool_sharing().imported(mem_pool);
    return imported ? imported->get_attribute(attr, value) : hipErrorInvalidValue;
  });
}

hipError_t hipMemPoolSetAccess(hipMemPool_t mem_pool, const hipMemAccessDesc* desc_list, size_t count) {
  return guarded([&](Runtime& runtime) {
    if (const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool)) {
      return pool->set_access(desc_list, count);
    }
    const std::shared_ptr<ImportedPool> imported = runtime.pool_sharing().imported(mem_pool);
    return imported ? imported->set_access(desc_list, count) : hipErrorInvalidValue;
  });
}

hipError_t hipMemPoolGetAccess(hipMemAccessFlags* flags, hipMemPool_t mem_pool, hipMemLocation* location) {
  return guarded([&](Runtime& runtime) {
    if (flags == nullptr || location == nullptr) return hipErrorInvalidValue;
    if (location->type != hipMemLocationTypeDevice || !runtime.valid_device(location->id)) {
      return hipErrorInvalidValue;
    }
    if (const std::shared_ptr<MemoryPool> pool = runtime.pools().resolve(mem_pool)) {
      *flags = pool->access(location->id);
      return hipSuccess;
    }
    const std::shared_ptr<ImportedPool> imported = runtime.pool_sharing().imported(mem_pool);
    if (!imported) return hipErrorInvalidValue;
    *flags = imported->access(location->id);
    return hipSuccess;
  });
}

hipError_t hipMemPoolExportToShareableHandle(void* shared_handle, hipMemPool_t mem_pool,
                                             hipMemAllocationHandleType handle_type, unsigned int flags) {
  return guarded([&](Runtime& runtime) {
    return runtime.pool_sharing().export_pool(shared_handle, mem_pool, handle_type, flags);
  });
}

hipError_t hipMemPoolImportFromShareableHandle(hipMemPool_t* mem_pool, void* shared_handle,
                                               hipMemAllocationHandleType handle_type, unsigned int flags) {
  return guarded([&](Runtime& runtime) {
    return runtime.pool_sharing().import_pool(mem_pool, shared_handle, handle_type, flags);
  });
}

hipError_t hipMemPoolExportPointer(hipMemPoolPtrExportData* export_data, void* dev_ptr) {
  return guarded([&](Runtime& runtime) { return runtime.pool_sharing().export_pointer(export_data, dev_ptr); });
}

hipError_t hipMemPoolImportPointer(void** dev_ptr, hipMemPool_t mem_pool, hipMemPoolPtrExportData* export_data) {
  return guarded(
      [&](Runtime& runtime) { return runtime.pool_sharing().import_pointer(dev_ptr, mem_pool, export_data); });
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
