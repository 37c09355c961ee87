// Our own declarations of the few CUDA driver types and entry points the CUDA backend uses, so that
// hipxx builds with no CUDA headers and links with no CUDA library: libcuda.so.1 is opened with
// dlopen at run time and each entry point is looked up with dlsym.
//
// Every name, value and layout here is part of the driver's stable C ABI (x86-64 / aarch64 Linux,
// LP64). Enumerations are given a fixed `int` underlying type, which is what a C compiler gives the
// driver's own enums, so they pass and lay out exactly as the driver expects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace hipxx::backend::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // a device address; with unified addressing, any address
using CUcontext = struct CUctx_st*;
using CUmemGenericAllocationHandle = unsigned long long;

// CUresult values the backend translates to hipError_t (the rest become hipErrorUnknown) or explains.
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;  // only for a clearer message
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
// Those with a hipError_t of the same number and meaning, passed on as such.
inline constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
inline constexpr CUresult CUDA_ERROR_MAP_FAILED = 205;
inline constexpr CUresult CUDA_ERROR_UNMAP_FAILED = 206;
inline constexpr CUresult CUDA_ERROR_ALREADY_MAPPED = 208;
inline constexpr CUresult CUDA_ERROR_NOT_MAPPED = 211;
inline constexpr CUresult CUDA_ERROR_ECC_UNCORRECTABLE = 214;
inline constexpr CUresult CUDA_ERROR_CONTEXT_ALREADY_IN_USE = 216;
inline constexpr CUresult CUDA_ERROR_OPERATING_SYSTEM = 304;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_STATE = 401;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
inline constexpr CUresult CUDA_ERROR_LAUNCH_TIMEOUT = 702;
inline constexpr CUresult CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;
inline constexpr CUresult CUDA_ERROR_ASSERT = 710;
inline constexpr CUresult CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712;
inline constexpr CUresult CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
// A kernel that faulted on the device in a way HIP has no code of its own for: a launch failure.
inline constexpr CUresult CUDA_ERROR_HARDWARE_STACK_ERROR = 714;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_INSTRUCTION = 715;
inline constexpr CUresult CUDA_ERROR_MISALIGNED_ADDRESS = 716;
inline constexpr CUresult CUDA_ERROR_INVALID_ADDRESS_SPACE = 717;
inline constexpr CUresult CUDA_ERROR_INVALID_PC = 718;

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES = 100,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
};

enum CUmemAllocationType : int {
  CU_MEM_ALLOCATION_TYPE_INVALID = 0,
  CU_MEM_ALLOCATION_TYPE_PINNED = 1,
};

enum CUmemAllocationHandleType : int {
  CU_MEM_HANDLE_TYPE_NONE = 0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
};

enum CUmemLocationType : int {
  CU_MEM_LOCATION_TYPE_INVALID = 0,
  CU_MEM_LOCATION_TYPE_DEVICE = 1,
};

// Bit sets: READWRITE includes READ.
enum CUmemAccess_flags : int {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
};

enum CUmemAllocationGranularity_flags : int {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
};

using CUstream = struct CUstream_st*;

inline constexpr CUdevice CU_DEVICE_CPU = -1;
inline constexpr unsigned CU_MEM_ATTACH_GLOBAL = 0x1;
inline constexpr unsigned CU_MEM_ATTACH_HOST = 0x2;
inline constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;

enum CUmem_advise : int {
  CU_MEM_ADVISE_SET_READ_MOSTLY = 1,
  CU_MEM_ADVISE_UNSET_READ_MOSTLY = 2,
  CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3,
  CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4,
  CU_MEM_ADVISE_SET_ACCESSED_BY = 5,
  CU_MEM_ADVISE_UNSET_ACCESSED_BY = 6,
};

// 64 opaque bytes, passed by value.
struct CUipcMemHandle {
  char reserved[64];
};

struct CUmemLocation {
  CUmemLocationType type;
  int id;  // a CUdevice when type is CU_MEM_LOCATION_TYPE_DEVICE
};

struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};

// The layouts the driver reads; a mismatch here would corrupt every cuMemCreate and cuMemSetAccess.
static_assert(sizeof(CUmemLocation) == 8);
static_assert(offsetof(CUmemAllocationProp, requestedHandleTypes) == 4);
static_assert(offsetof(CUmemAllocationProp, location) == 8);
static_assert(offsetof(CUmemAllocationProp, win32HandleMetaData) == 16);
static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24);
static_assert(sizeof(CUmemAllocationProp) == 32);
static_assert(sizeof(CUmemAccessDesc) == 12);
static_assert(sizeof(CUdeviceptr) == sizeof(void*));
static_assert(sizeof(CUipcMemHandle) == 64);

// The entry points, by the exact symbol each is exported as. Where cuda.h maps a name to `_v2`
// (cuMemAlloc, cuMemFree, cuMemsetD8, cuDeviceTotalMem, cuDevicePrimaryCtxRelease), the unversioned
// symbol is the old ABI with 32-bit sizes: only the `_v2` is declared. cuCtxSynchronize is the
// exception: cuda.h keeps the unversioned name, and cuCtxSynchronize_v2 (CUDA 13) is a different
// call that takes a context.
// `cuMemcpy` and `cuMemsetD8_v2` are the legacy-default-stream variants (not `_ptds`), so they are
// ordered with kernels the CUDA runtime launches on the default stream of the same primary context.
#define HIPXX_CUDA_DRIVER_ENTRY_POINTS(X)                                                                              \
  X(cuInit, CUresult (*)(unsigned int flags))                                                                          \
  X(cuGetErrorName, CUresult (*)(CUresult error, const char** name))                                                   \
  X(cuDeviceGetCount, CUresult (*)(int* count))                                                                        \
  X(cuDeviceGet, CUresult (*)(CUdevice * device, int ordinal))                                                         \
  X(cuDeviceGetName, CUresult (*)(char* name, int length, CUdevice device))                                            \
  X(cuDeviceTotalMem_v2, CUresult (*)(std::size_t * bytes, CUdevice device))                                           \
  X(cuDeviceCanAccessPeer, CUresult (*)(int* can_access, CUdevice device, CUdevice peer))                              \
  X(cuMemGetInfo_v2, CUresult (*)(std::size_t * free, std::size_t * total))                                            \
  X(cuDeviceGetAttribute, CUresult (*)(int* value, CUdevice_attribute attribute, CUdevice device))                     \
  X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext * context, CUdevice device))                                      \
  X(cuDevicePrimaryCtxRelease_v2, CUresult (*)(CUdevice device))                                                       \
  X(cuCtxGetCurrent, CUresult (*)(CUcontext * context))                                                                \
  X(cuCtxSetCurrent, CUresult (*)(CUcontext context))                                                                  \
  X(cuCtxSynchronize, CUresult (*)())                                                                                  \
  X(cuCtxEnablePeerAccess, CUresult (*)(CUcontext peer, unsigned int flags))                                           \
  X(cuCtxDisablePeerAccess, CUresult (*)(CUcontext peer))                                                              \
  X(cuMemAlloc_v2, CUresult (*)(CUdeviceptr * ptr, std::size_t bytes))                                                 \
  X(cuMemFree_v2, CUresult (*)(CUdeviceptr ptr))                                                                       \
  X(cuMemcpy, CUresult (*)(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes))                                       \
  X(cuMemsetD8_v2, CUresult (*)(CUdeviceptr dst, unsigned char value, std::size_t count))                              \
  X(cuMemAddressReserve, CUresult (*)(CUdeviceptr * ptr, std::size_t size, std::size_t alignment, CUdeviceptr hint,    \
                                      unsigned long long flags))                                                       \
  X(cuMemAddressFree, CUresult (*)(CUdeviceptr ptr, std::size_t size))                                                 \
  X(cuMemCreate, CUresult (*)(CUmemGenericAllocationHandle * handle, std::size_t size,                                 \
                              const CUmemAllocationProp* properties, unsigned long long flags))                        \
  X(cuMemRelease, CUresult (*)(CUmemGenericAllocationHandle handle))                                                   \
  X(cuMemMap, CUresult (*)(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle, \
                           unsigned long long flags))                                                                  \
  X(cuMemUnmap, CUresult (*)(CUdeviceptr ptr, std::size_t size))                                                       \
  X(cuMemSetAccess,                                                                                                    \
    CUresult (*)(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* descriptors, std::size_t count))            \
  X(cuMemExportToShareableHandle, CUresult (*)(void* shareable, CUmemGenericAllocationHandle handle,                   \
                                               CUmemAllocationHandleType type, unsigned long long flags))              \
  X(cuMemImportFromShareableHandle,                                                                                    \
    CUresult (*)(CUmemGenericAllocationHandle * handle, void* os_handle, CUmemAllocationHandleType type))              \
  X(cuMemGetAllocationPropertiesFromHandle,                                                                            \
    CUresult (*)(CUmemAllocationProp * properties, CUmemGenericAllocationHandle handle))                               \
  X(cuMemGetAllocationGranularity, CUresult (*)(std::size_t * granularity, const CUmemAllocationProp* properties,      \
                                                CUmemAllocationGranularity_flags option))                              \
  X(cuMemAllocManaged, CUresult (*)(CUdeviceptr * ptr, std::size_t bytes, unsigned int flags))                         \
  X(cuMemPrefetchAsync, CUresult (*)(CUdeviceptr ptr, std::size_t bytes, CUdevice device, CUstream stream))            \
  X(cuMemAdvise, CUresult (*)(CUdeviceptr ptr, std::size_t bytes, CUmem_advise advice, CUdevice device))               \
  X(cuIpcGetMemHandle, CUresult (*)(CUipcMemHandle * handle, CUdeviceptr ptr))                                         \
  X(cuIpcOpenMemHandle_v2, CUresult (*)(CUdeviceptr * ptr, CUipcMemHandle handle, unsigned int flags))                 \
  X(cuIpcCloseMemHandle, CUresult (*)(CUdeviceptr ptr))                                                                \
  X(cuMemGetAddressRange_v2, CUresult (*)(CUdeviceptr * base, std::size_t * size, CUdeviceptr ptr))

// Streams, events, host calls and stream memory operations: what the backend's device queues use.
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstreamCallback = void (*)(CUstream stream, CUresult status, void* data);

// The legacy default stream, which synchronises with every blocking stream of its context.
inline CUstream_st* const CU_STREAM_LEGACY = reinterpret_cast<CUstream>(std::uintptr_t{0x1});
inline constexpr unsigned CU_STREAM_DEFAULT = 0x0;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr unsigned CU_STREAM_WAIT_VALUE_GEQ = 0x0;
inline constexpr unsigned CU_STREAM_WAIT_VALUE_EQ = 0x1;
inline constexpr unsigned CU_STREAM_WAIT_VALUE_AND = 0x2;
inline constexpr unsigned CU_STREAM_WAIT_VALUE_NOR = 0x3;
inline constexpr unsigned CU_STREAM_WRITE_VALUE_DEFAULT = 0x0;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x1;
inline constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x2;
inline constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
inline constexpr auto CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = static_cast<CUdevice_attribute>(122);
inline constexpr auto CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR = static_cast<CUdevice_attribute>(123);

// Looked up separately: a driver without them still runs the backend, with stream work on host
// threads. The stream memory operations are the `_v2` symbols, which need no kernel-module option.
// cuEventElapsedTime is resolved as cuEventElapsedTime_v2 where the driver has it (CUDA 12.8+).
#define HIPXX_CUDA_QUEUE_ENTRY_POINTS(X)                                                                              \
  X(cuCtxGetStreamPriorityRange, CUresult (*)(int* least, int* greatest))                                             \
  X(cuStreamCreateWithPriority, CUresult (*)(CUstream * stream, unsigned flags, int priority))                        \
  X(cuStreamDestroy_v2, CUresult (*)(CUstream stream))                                                                \
  X(cuStreamSynchronize, CUresult (*)(CUstream stream))                                                               \
  X(cuStreamQuery, CUresult (*)(CUstream stream))                                                                     \
  X(cuStreamAddCallback, CUresult (*)(CUstream stream, CUstreamCallback callback, void* data, unsigned flags))        \
  X(cuStreamWaitValue32_v2, CUresult (*)(CUstream stream, CUdeviceptr address, std::uint32_t value, unsigned flags))  \
  X(cuStreamWaitValue64_v2, CUresult (*)(CUstream stream, CUdeviceptr address, std::uint64_t value, unsigned flags))  \
  X(cuStreamWriteValue32_v2, CUresult (*)(CUstream stream, CUdeviceptr address, std::uint32_t value, unsigned flags)) \
  X(cuStreamWriteValue64_v2, CUresult (*)(CUstream stream, CUdeviceptr address, std::uint64_t value, unsigned flags)) \
  X(cuMemcpyAsync, CUresult (*)(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream))                \
  X(cuMemsetD8Async, CUresult (*)(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream))          \
  X(cuEventCreate, CUresult (*)(CUevent * event, unsigned flags))                                                     \
  X(cuEventDestroy_v2, CUresult (*)(CUevent event))                                                                   \
  X(cuEventRecord, CUresult (*)(CUevent event, CUstream stream))                                                      \
  X(cuStreamWaitEvent, CUresult (*)(CUstream stream, CUevent event, unsigned flags))                                  \
  X(cuEventElapsedTime, CUresult (*)(float* milliseconds, CUevent start, CUevent end))                                \
  X(cuMemHostAlloc, CUresult (*)(void** pointer, std::size_t bytes, unsigned flags))                                  \
  X(cuMemFreeHost, CUresult (*)(void* pointer))                                                                       \
  X(cuPointerGetAttribute, CUresult (*)(void* data, int attribute, CUdeviceptr pointer))                              \
  X(cuModuleLoadData, CUresult (*)(CUmodule * module, const void* image))                                             \
  X(cuModuleGetFunction, CUresult (*)(CUfunction * function, CUmodule module, const char* name))                     \
  X(cuLaunchKernel, CUresult (*)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,              \
                                 unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,        \
                                 CUstream stream, void** parameters, void** extra))

struct QueueApi {
#define HIPXX_CUDA_DECLARE_QUEUE_ENTRY_POINT(name, type) std::type_identity_t<type> name = nullptr;
  HIPXX_CUDA_QUEUE_ENTRY_POINTS(HIPXX_CUDA_DECLARE_QUEUE_ENTRY_POINT)
#undef HIPXX_CUDA_DECLARE_QUEUE_ENTRY_POINT
};

// One function pointer per entry point, named as the symbol; all set once `load` succeeds.
struct DriverApi {
#define HIPXX_CUDA_DECLARE_ENTRY_POINT(name, type) std::type_identity_t<type> name = nullptr;
  HIPXX_CUDA_DRIVER_ENTRY_POINTS(HIPXX_CUDA_DECLARE_ENTRY_POINT)
#undef HIPXX_CUDA_DECLARE_ENTRY_POINT
};

}  // namespace hipxx::backend::cuda
