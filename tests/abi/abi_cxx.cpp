// C++ view of hipxx's HIP C header: it must compile cleanly as C++20 (with
// -Werror), give C linkage, accept the spec's default arguments, and expose
// every entry point with exactly the spec's type (std::is_same, so an enum
// parameter cannot silently become an unsigned int as C would allow).
#include <hip/hip_runtime.h>
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <hipxx/hip_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#define CHECK_SIG(fn, ret, params) \
  static_assert(std::is_same<decltype(&fn), ret(*) params>::value, #fn ": signature differs from the spec")
/* For entry points that C++ also overloads (as AMD's header does, with templates taking T**): the
   cast names the C entry point, and compiles only where one has exactly this type. Unevaluated, so
   it is a constant expression in sanitizer builds too. */
#define CHECK_OVERLOADED_SIG(fn, ret, params)                                                  \
  static_assert(std::is_same<decltype(static_cast<ret(*) params>(&fn)), ret(*) params>::value, \
                #fn ": no overload has the spec's signature")

CHECK_SIG(hipMemAddressFree, hipError_t, (void* devPtr, size_t size));
CHECK_SIG(hipMemAddressReserve, hipError_t, (void** ptr, size_t size, size_t alignment, void* addr, unsigned long long flags));
CHECK_SIG(hipMemCreate, hipError_t, (hipMemGenericAllocationHandle_t* handle, size_t size, const hipMemAllocationProp* prop, unsigned long long flags));
CHECK_SIG(hipMemExportToShareableHandle, hipError_t, (void* shareableHandle, hipMemGenericAllocationHandle_t handle, hipMemAllocationHandleType handleType, unsigned long long flags));
CHECK_SIG(hipMemGetAccess, hipError_t, (unsigned long long* flags, const hipMemLocation* location, void* ptr));
CHECK_SIG(hipMemGetAllocationGranularity, hipError_t, (size_t* granularity, const hipMemAllocationProp* prop, hipMemAllocationGranularity_flags option));
CHECK_SIG(hipMemGetAllocationPropertiesFromHandle, hipError_t, (hipMemAllocationProp* prop, hipMemGenericAllocationHandle_t handle));
CHECK_SIG(hipMemImportFromShareableHandle, hipError_t, (hipMemGenericAllocationHandle_t* handle, void* osHandle, hipMemAllocationHandleType shHandleType));
CHECK_SIG(hipMemMap, hipError_t, (void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle, unsigned long long flags));
CHECK_SIG(hipMemMapArrayAsync, hipError_t, (hipArrayMapInfo* mapInfoList, unsigned int count, hipStream_t stream));
CHECK_SIG(hipMemRelease, hipError_t, (hipMemGenericAllocationHandle_t handle));
CHECK_SIG(hipMemRetainAllocationHandle, hipError_t, (hipMemGenericAllocationHandle_t* handle, void* addr));
CHECK_SIG(hipMemSetAccess, hipError_t, (void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count));
CHECK_SIG(hipMemUnmap, hipError_t, (void* ptr, size_t size));
CHECK_OVERLOADED_SIG(hipMallocManaged, hipError_t, (void** dev_ptr, size_t size, unsigned int flags));
CHECK_SIG(hipMemPrefetchAsync, hipError_t, (const void* dev_ptr, size_t count, int device, hipStream_t stream));
CHECK_SIG(hipMemAdvise, hipError_t, (const void* dev_ptr, size_t count, hipMemoryAdvise advice, int device));
CHECK_SIG(hipMemPrefetchAsync_v2, hipError_t,
          (const void* dev_ptr, size_t count, hipMemLocation location, unsigned int flags, hipStream_t stream));
CHECK_SIG(hipMemAdvise_v2, hipError_t,
          (const void* dev_ptr, size_t count, hipMemoryAdvise advice, hipMemLocation location));
CHECK_SIG(hipMemRangeGetAttribute, hipError_t, (void* data, size_t data_size, hipMemRangeAttribute attribute, const void* dev_ptr, size_t count));
CHECK_SIG(hipMemRangeGetAttributes, hipError_t, (void** data, size_t* data_sizes, hipMemRangeAttribute* attributes, size_t num_attributes, const void* dev_ptr, size_t count));
CHECK_SIG(hipStreamAttachMemAsync, hipError_t, (hipStream_t stream, void* dev_ptr, size_t length, unsigned int flags));
CHECK_SIG(hipIpcGetMemHandle, hipError_t, (hipIpcMemHandle_t* handle, void* devPtr));
CHECK_SIG(hipIpcOpenMemHandle, hipError_t, (void** devPtr, hipIpcMemHandle_t handle, unsigned int flags));
CHECK_SIG(hipIpcCloseMemHandle, hipError_t, (void* devPtr));
CHECK_SIG(hipIpcGetEventHandle, hipError_t, (hipIpcEventHandle_t* handle, hipEvent_t event));
CHECK_SIG(hipIpcOpenEventHandle, hipError_t, (hipEvent_t* event, hipIpcEventHandle_t handle));
CHECK_SIG(hipStreamCreate, hipError_t, (hipStream_t* stream));
CHECK_SIG(hipStreamCreateWithFlags, hipError_t, (hipStream_t* stream, unsigned int flags));
CHECK_SIG(hipStreamCreateWithPriority, hipError_t, (hipStream_t* stream, unsigned int flags, int priority));
CHECK_SIG(hipDeviceGetStreamPriorityRange, hipError_t, (int* leastPriority, int* greatestPriority));
CHECK_SIG(hipStreamDestroy, hipError_t, (hipStream_t stream));
CHECK_SIG(hipStreamQuery, hipError_t, (hipStream_t stream));
CHECK_SIG(hipStreamSynchronize, hipError_t, (hipStream_t stream));
CHECK_SIG(hipStreamWaitEvent, hipError_t, (hipStream_t stream, hipEvent_t event, unsigned int flags));
CHECK_SIG(hipStreamGetFlags, hipError_t, (hipStream_t stream, unsigned int* flags));
CHECK_SIG(hipStreamGetPriority, hipError_t, (hipStream_t stream, int* priority));
CHECK_SIG(hipExtStreamCreateWithCUMask, hipError_t, (hipStream_t* stream, uint32_t cuMaskSize, const uint32_t* cuMask));
CHECK_SIG(hipExtStreamGetCUMask, hipError_t, (hipStream_t stream, uint32_t cuMaskSize, uint32_t* cuMask));
CHECK_SIG(hipStreamAddCallback, hipError_t, (hipStream_t stream, hipStreamCallback_t callback, void* userData, unsigned int flags));
CHECK_SIG(hipStreamWaitValue32, hipError_t, (hipStream_t stream, void* ptr, uint32_t value, unsigned int flags, uint32_t mask));
CHECK_SIG(hipStreamWaitValue64, hipError_t, (hipStream_t stream, void* ptr, uint64_t value, unsigned int flags, uint64_t mask));
CHECK_SIG(hipStreamWriteValue32, hipError_t, (hipStream_t stream, void* ptr, uint32_t value, unsigned int flags));
CHECK_SIG(hipStreamWriteValue64, hipError_t, (hipStream_t stream, void* ptr, uint64_t value, unsigned int flags));
CHECK_OVERLOADED_SIG(hipMallocAsync, hipError_t, (void** dev_ptr, size_t size, hipStream_t stream));
CHECK_SIG(hipFreeAsync, hipError_t, (void* dev_ptr, hipStream_t stream));
CHECK_SIG(hipMemPoolTrimTo, hipError_t, (hipMemPool_t mem_pool, size_t min_bytes_to_hold));
CHECK_SIG(hipMemPoolSetAttribute, hipError_t, (hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value));
CHECK_SIG(hipMemPoolGetAttribute, hipError_t, (hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value));
CHECK_SIG(hipMemPoolSetAccess, hipError_t, (hipMemPool_t mem_pool, const hipMemAccessDesc* desc_list, size_t count));
CHECK_SIG(hipMemPoolGetAccess, hipError_t, (hipMemAccessFlags* flags, hipMemPool_t mem_pool, hipMemLocation* location));
CHECK_SIG(hipMemPoolCreate, hipError_t, (hipMemPool_t* mem_pool, const hipMemPoolProps* pool_props));
CHECK_SIG(hipMemPoolDestroy, hipError_t, (hipMemPool_t mem_pool));
CHECK_OVERLOADED_SIG(hipMallocFromPoolAsync, hipError_t,
                     (void** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream));
CHECK_SIG(hipMemPoolExportToShareableHandle, hipError_t, (void* shared_handle, hipMemPool_t mem_pool, hipMemAllocationHandleType handle_type, unsigned int flags));
CHECK_SIG(hipMemPoolImportFromShareableHandle, hipError_t, (hipMemPool_t* mem_pool, void* shared_handle, hipMemAllocationHandleType handle_type, unsigned int flags));
CHECK_SIG(hipMemPoolExportPointer, hipError_t, (hipMemPoolPtrExportData* export_data, void* dev_ptr));
CHECK_SIG(hipMemPoolImportPointer, hipError_t, (void** dev_ptr, hipMemPool_t mem_pool, hipMemPoolPtrExportData* export_data));
CHECK_SIG(hipDeviceGetDefaultMemPool, hipError_t, (hipMemPool_t* mem_pool, int device));
CHECK_SIG(hipDeviceSetMemPool, hipError_t, (int device, hipMemPool_t mem_pool));
CHECK_SIG(hipDeviceGetMemPool, hipError_t, (hipMemPool_t* mem_pool, int device));
CHECK_SIG(hipGetErrorString, const char*, (hipError_t hipError));
CHECK_SIG(hipGetErrorName, const char*, (hipError_t hip_error));
CHECK_SIG(hipGetLastError, hipError_t, (void));
CHECK_SIG(hipPeekAtLastError, hipError_t, (void));
CHECK_SIG(hipInit, hipError_t, (unsigned int flags));
CHECK_SIG(hipGetDeviceCount, hipError_t, (int* count));
CHECK_SIG(hipSetDevice, hipError_t, (int deviceId));
CHECK_SIG(hipGetDevice, hipError_t, (int* deviceId));
CHECK_SIG(hipDeviceGetAttribute, hipError_t, (int* pi, hipDeviceAttribute_t attr, int deviceId));
CHECK_SIG(hipDeviceSynchronize, hipError_t, (void));
CHECK_OVERLOADED_SIG(hipMalloc, hipError_t, (void** ptr, size_t size));
CHECK_SIG(hipFree, hipError_t, (void* ptr));
CHECK_SIG(hipMemcpy, hipError_t, (void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind));
CHECK_SIG(hipMemcpyAsync, hipError_t, (void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream));
CHECK_SIG(hipMemset, hipError_t, (void* dst, int value, size_t sizeBytes));
CHECK_SIG(hipMemsetAsync, hipError_t, (void* dst, int value, size_t sizeBytes, hipStream_t stream));
CHECK_SIG(hipEventCreate, hipError_t, (hipEvent_t* event));
CHECK_SIG(hipEventCreateWithFlags, hipError_t, (hipEvent_t* event, unsigned flags));
CHECK_SIG(hipEventRecord, hipError_t, (hipEvent_t event, hipStream_t stream));
CHECK_SIG(hipEventSynchronize, hipError_t, (hipEvent_t event));
CHECK_SIG(hipEventQuery, hipError_t, (hipEvent_t event));
CHECK_SIG(hipEventDestroy, hipError_t, (hipEvent_t event));
CHECK_SIG(hipEventElapsedTime, hipError_t, (float* ms, hipEvent_t start, hipEvent_t stop));
CHECK_SIG(hipPointerGetAttributes, hipError_t, (hipPointerAttribute_t* attributes, const void* ptr));
CHECK_SIG(hipDeviceCanAccessPeer, hipError_t, (int* canAccessPeer, int deviceId, int peerDeviceId));
CHECK_SIG(hipDriverGetVersion, hipError_t, (int* driverVersion));
CHECK_SIG(hipRuntimeGetVersion, hipError_t, (int* runtimeVersion));
CHECK_OVERLOADED_SIG(hipExtMallocWithFlags, hipError_t, (void** ptr, size_t sizeBytes, unsigned int flags));
CHECK_SIG(hipMemGetInfo, hipError_t, (size_t * free, size_t* total));
CHECK_SIG(hipDeviceEnablePeerAccess, hipError_t, (int peerDeviceId, unsigned int flags));
CHECK_SIG(hipDeviceDisablePeerAccess, hipError_t, (int peerDeviceId));
CHECK_SIG(hipMemcpyPeer, hipError_t, (void* dst, int dstDeviceId, const void* src, int srcDeviceId, size_t sizeBytes));
CHECK_SIG(hipMemcpyPeerAsync, hipError_t,
          (void* dst, int dstDeviceId, const void* src, int srcDevice, size_t sizeBytes, hipStream_t stream));
CHECK_SIG(hipLaunchHostFunc, hipError_t, (hipStream_t stream, hipHostFn_t fn, void* userData));
static_assert(std::is_same<hipHostFn_t, void (*)(void*)>::value, "");
CHECK_SIG(hipDeviceGet, hipError_t, (hipDevice_t * device, int ordinal));
CHECK_SIG(hipMemcpyHtoD, hipError_t, (hipDeviceptr_t dst, void* src, size_t sizeBytes));
CHECK_SIG(hipMemcpyDtoH, hipError_t, (void* dst, hipDeviceptr_t src, size_t sizeBytes));
CHECK_SIG(hipMemcpyDtoD, hipError_t, (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes));
CHECK_SIG(hipMemcpyHtoDAsync, hipError_t, (hipDeviceptr_t dst, void* src, size_t sizeBytes, hipStream_t stream));
CHECK_SIG(hipMemcpyDtoHAsync, hipError_t, (void* dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream));
CHECK_SIG(hipMemcpyDtoDAsync, hipError_t,
          (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream));
CHECK_SIG(hipMemsetD8, hipError_t, (hipDeviceptr_t dest, unsigned char value, size_t count));
CHECK_SIG(hipMemsetD8Async, hipError_t, (hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream));

// Default arguments exist only in C++; these calls are unevaluated, so the
// program does not need the runtime library to link.
#define ANY(T) std::declval<T>()
#define RETURNS_HIP_ERROR(call) static_assert(std::is_same<decltype(call), hipError_t>::value, #call)
RETURNS_HIP_ERROR(hipMallocManaged(ANY(void**), 16));
RETURNS_HIP_ERROR(hipMemPrefetchAsync(ANY(void*), 16, 0));
RETURNS_HIP_ERROR(hipMemPrefetchAsync_v2(ANY(void*), 16, ANY(hipMemLocation), 0));
RETURNS_HIP_ERROR(hipStreamAttachMemAsync(ANY(hipStream_t), ANY(void*)));
RETURNS_HIP_ERROR(hipStreamAttachMemAsync(ANY(hipStream_t), ANY(void*), 0));
RETURNS_HIP_ERROR(hipStreamWaitEvent(ANY(hipStream_t), ANY(hipEvent_t)));
RETURNS_HIP_ERROR(hipStreamWaitValue32(ANY(hipStream_t), ANY(void*), 1u, hipStreamWaitValueEq));
RETURNS_HIP_ERROR(hipStreamWaitValue64(ANY(hipStream_t), ANY(void*), 1u, hipStreamWaitValueEq));
RETURNS_HIP_ERROR(hipMemcpyAsync(ANY(void*), ANY(const void*), 1, hipMemcpyDefault));
RETURNS_HIP_ERROR(hipMemsetAsync(ANY(void*), 0, 1));
RETURNS_HIP_ERROR(hipMemcpyPeerAsync(ANY(void*), 0, ANY(const void*), 1, 16));
RETURNS_HIP_ERROR(hipEventRecord(ANY(hipEvent_t)));
RETURNS_HIP_ERROR(hipMemsetD8Async(ANY(void*), 0, 1));

// The allocation calls take a pointer to any pointer type, and hipMallocAsync a pool, as AMD's
// header has them in C++.
RETURNS_HIP_ERROR(hipMalloc(ANY(int**), 16));
RETURNS_HIP_ERROR(hipMalloc(ANY(void**), 16));
RETURNS_HIP_ERROR(hipMallocManaged(ANY(float**), 16));
RETURNS_HIP_ERROR(hipMallocManaged(ANY(float**), 16, hipMemAttachHost));
RETURNS_HIP_ERROR(hipExtMallocWithFlags(ANY(std::uint64_t**), 16, hipMallocSignalMemory));
RETURNS_HIP_ERROR(hipMallocAsync(ANY(double**), 16, ANY(hipStream_t)));
RETURNS_HIP_ERROR(hipMallocAsync(ANY(double**), 16, nullptr));
RETURNS_HIP_ERROR(hipMallocAsync(ANY(void**), 16, ANY(hipMemPool_t), ANY(hipStream_t)));
RETURNS_HIP_ERROR(hipMallocAsync(ANY(char**), 16, ANY(hipMemPool_t), ANY(hipStream_t)));
RETURNS_HIP_ERROR(hipMallocFromPoolAsync(ANY(char**), 16, ANY(hipMemPool_t), ANY(hipStream_t)));
static_assert(HIP_VERSION == HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH, "");

// A few values, seen from C++ (the full list is in abi_c99.c).
static_assert(sizeof(hipError_t) == sizeof(int), "");
static_assert(hipErrorMemoryAllocation == hipErrorOutOfMemory, "aliases are enumerators of hipError_t");
static_assert(std::is_same<decltype(hipErrorInvalidResourceHandle), hipError_t>::value, "");
static_assert(hipDeviceAttributeVirtualMemoryManagementSupported == 89, "");
static_assert(hipDeviceAttributeFineGrainSupport == 10016, "");
static_assert(hipMemoryTypeManaged == 3, "");
static_assert(sizeof(hipMemAllocationProp) == 32 || sizeof(void*) != 8, "");
static_assert(offsetof(hipMemAllocationProp, requestedHandleTypes) == 4, "");
static_assert(sizeof(hipArrayMapInfo) == 152 || sizeof(void*) != 8, "");
static_assert(std::is_standard_layout<hipMemPoolProps>::value && std::is_trivial<hipMemPoolProps>::value, "");

int main() {
  // Code written against either spelling of the ROCm 7 union compiles.
  hipMemAllocationProp prop{};
  prop.requestedHandleTypes = hipMemHandleTypePosixFileDescriptor;
  if (prop.requestedHandleType != hipMemHandleTypePosixFileDescriptor) return 1;
  if (hipStreamPerThread != reinterpret_cast<hipStream_t>(2)) return 1;
  return 0;
}
