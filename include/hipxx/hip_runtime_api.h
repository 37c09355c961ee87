/*
 * hipxx: the HIP runtime C API, as exported by libhipxx.
 *
 * This header is written for hipxx. Names, numeric values and struct layouts
 * follow AMD's HIP headers so that code built against AMD's
 * <hip/hip_runtime_api.h> links and runs against hipxx unchanged (see
 * shared/spec/hip-abi.md). Where AMD changed something between releases the
 * newest layout is used, with compatibility spellings kept where they cost no
 * ABI. It is valid C99 and C++ and has no dependency on any AMD header.
 */
#ifndef HIPXX_HIP_RUNTIME_API_H
#define HIPXX_HIP_RUNTIME_API_H

/* Code that tests for AMD's guard macro sees this header as "the" HIP API. */
#ifndef HIP_INCLUDE_HIP_HIP_RUNTIME_API_H
#define HIP_INCLUDE_HIP_HIP_RUNTIME_API_H
#endif

/* AMD's header brings in these C headers too, and code written against it uses memset, malloc,
   exit and INT_MAX without including them itself. */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hipxx/hip_version.h>

/* ------------------------------------------------------------------------ */
/* Helper macros                                                             */
/* ------------------------------------------------------------------------ */

/* Every entry point is exported from the shared library. */
#ifndef HIPXX_API
#if defined(__GNUC__) || defined(__clang__)
#define HIPXX_API __attribute__((visibility("default")))
#else
#define HIPXX_API
#endif
#endif

/* In C++ every enum has int as its fixed underlying type: the size and values are AMD's, and any
   int a C caller passes is a valid value of the type, so the runtime can check it and refuse it. */
#ifdef __cplusplus
#define HIPXX_INT_ENUM : int
#else
#define HIPXX_INT_ENUM
#endif

/* Default arguments exist only for C++ callers. */
#ifdef __cplusplus
#define HIPXX_DEFAULT(value) = value
#else
#define HIPXX_DEFAULT(value)
#endif

/* An unnamed union member: standard in C++ and C11; GNU C99 accepts it when
 * marked as an extension. Other C99 compilers get only the first member. */
#if defined(__cplusplus)
#define HIPXX_HAVE_ANON_UNION 1
#define HIPXX_ANON_UNION union
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define HIPXX_HAVE_ANON_UNION 1
#define HIPXX_ANON_UNION union
#elif defined(__GNUC__) || defined(__clang__)
#define HIPXX_HAVE_ANON_UNION 1
#define HIPXX_ANON_UNION __extension__ union
#else
#define HIPXX_HAVE_ANON_UNION 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Error codes                                                               */
/* ------------------------------------------------------------------------ */

/* Values are fixed by the ABI. Deprecated spellings are kept as enumerators
 * of the same enum with the same value as their replacement. */
typedef enum hipError_t HIPXX_INT_ENUM {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorMemoryAllocation = 2, /* old name of hipErrorOutOfMemory */
  hipErrorNotInitialized = 3,
  hipErrorInitializationError = 3, /* old name of hipErrorNotInitialized */
  hipErrorDeinitialized = 4,
  hipErrorProfilerDisabled = 5,
  hipErrorProfilerNotInitialized = 6,
  hipErrorProfilerAlreadyStarted = 7,
  hipErrorProfilerAlreadyStopped = 8,
  hipErrorInvalidConfiguration = 9,
  hipErrorInvalidPitchValue = 12,
  hipErrorInvalidSymbol = 13,
  hipErrorInvalidDevicePointer = 17,
  hipErrorInvalidMemcpyDirection = 21,
  hipErrorInsufficientDriver = 35,
  hipErrorMissingConfiguration = 52,
  hipErrorPriorLaunchFailure = 53,
  hipErrorInvalidDeviceFunction = 98,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidImage = 200,
  hipErrorInvalidContext = 201,
  hipErrorContextAlreadyCurrent = 202,
  hipErrorMapFailed = 205,
  hipErrorMapBufferObjectFailed = 205, /* old name of hipErrorMapFailed */
  hipErrorUnmapFailed = 206,
  hipErrorArrayIsMapped = 207,
  hipErrorAlreadyMapped = 208,
  hipErrorNoBinaryForGpu = 209,
  hipErrorAlreadyAcquired = 210,
  hipErrorNotMapped = 211,
  hipErrorNotMappedAsArray = 212,
  hipErrorNotMappedAsPointer = 213,
  hipErrorECCNotCorrectable = 214,
  hipErrorUnsupportedLimit = 215,
  hipErrorContextAlreadyInUse = 216,
  hipErrorPeerAccessUnsupported = 217,
  hipErrorInvalidKernelFile = 218,
  hipErrorInvalidGraphicsContext = 219,
  hipErrorInvalidSource = 300,
  hipErrorFileNotFound = 301,
  hipErrorSharedObjectSymbolNotFound = 302,
  hipErrorSharedObjectInitFailed = 303,
  hipErrorOperatingSystem = 304,
  hipErrorInvalidHandle = 400,
  hipErrorInvalidResourceHandle = 400, /* old name of hipErrorInvalidHandle */
  hipErrorIllegalState = 401,
  hipErrorNotFound = 500,
  hipErrorNotReady = 600,
  hipErrorIllegalAddress = 700,
  hipErrorLaunchOutOfResources = 701,
  hipErrorLaunchTimeOut = 702,
  hipErrorPeerAccessAlreadyEnabled = 704,
  hipErrorPeerAccessNotEnabled = 705,
  hipErrorSetOnActiveProcess = 708,
  hipErrorContextIsDestroyed = 709,
  hipErrorAssert = 710,
  hipErrorHostMemoryAlreadyRegistered = 712,
  hipErrorHostMemoryNotRegistered = 713,
  hipErrorLaunchFailure = 719,
  hipErrorCooperativeLaunchTooLarge = 720,
  hipErrorNotSupported = 801,
  hipErrorStreamCaptureUnsupported = 900,
  hipErrorStreamCaptureInvalidated = 901,
  hipErrorStreamCaptureMerge = 902,
  hipErrorStreamCaptureUnmatched = 903,
  hipErrorStreamCaptureUnjoined = 904,
  hipErrorStreamCaptureIsolation = 905,
  hipErrorStreamCaptureImplicit = 906,
  hipErrorCapturedEvent = 907,
  hipErrorStreamCaptureWrongThread = 908,
  hipErrorGraphExecUpdateFailure = 910,
  hipErrorInvalidChannelDescriptor = 911,
  hipErrorInvalidTexture = 912,
  /* 914-916 and 1054 first appear in ROCm 7 headers. */
  hipErrorInvalidResourceType = 914,
  hipErrorInvalidResourceConfiguration = 915,
  hipErrorStreamDetached = 916,
  hipErrorUnknown = 999,
  hipErrorRuntimeMemory = 1052, /* an HSA memory call failed */
  hipErrorRuntimeOther = 1053,  /* any other HSA call failed */
  hipErrorInvalidClusterSize = 1054,
  /* Placeholder one past the last real code (AMD declares it implicitly as
   * "last + 1"; ROCm 5.x/6.x had 1054 here, ROCm 7 has 1055). */
  hipErrorTbd = 1055
} hipError_t;

/* ------------------------------------------------------------------------ */
/* Device attributes (hipDeviceGetAttribute)                                 */
/* ------------------------------------------------------------------------ */

/* Numbered as in current AMD headers. 0..9999 mirror CUDA's attributes,
 * 10000..19999 are AMD-specific. Slots named Unused<N> held attributes that
 * AMD retired (they returned strings or arrays, not an int). */
typedef enum hipDeviceAttribute_t HIPXX_INT_ENUM {
  hipDeviceAttributeCudaCompatibleBegin = 0,
  hipDeviceAttributeEccEnabled = 0,
  hipDeviceAttributeAccessPolicyMaxWindowSize = 1,
  hipDeviceAttributeAsyncEngineCount = 2,
  hipDeviceAttributeCanMapHostMemory = 3,
  hipDeviceAttributeCanUseHostPointerForRegisteredMem = 4,
  hipDeviceAttributeClockRate = 5,
  hipDeviceAttributeComputeMode = 6,
  hipDeviceAttributeComputePreemptionSupported = 7,
  hipDeviceAttributeConcurrentKernels = 8,
  hipDeviceAttributeConcurrentManagedAccess = 9,
  hipDeviceAttributeCooperativeLaunch = 10,
  hipDeviceAttributeCooperativeMultiDeviceLaunch = 11,
  hipDeviceAttributeDeviceOverlap = 12,
  hipDeviceAttributeDirectManagedMemAccessFromHost = 13,
  hipDeviceAttributeGlobalL1CacheSupported = 14,
  hipDeviceAttributeHostNativeAtomicSupported = 15,
  hipDeviceAttributeIntegrated = 16,
  hipDeviceAttributeIsMultiGpuBoard = 17,
  hipDeviceAttributeKernelExecTimeout = 18,
  hipDeviceAttributeL2CacheSize = 19,
  hipDeviceAttributeLocalL1CacheSupported = 20,
  hipDeviceAttributeLuid = 21,
  hipDeviceAttributeLuidDeviceNodeMask = 22,
  hipDeviceAttributeComputeCapabilityMajor = 23,
  hipDeviceAttributeManagedMemory = 24,
  hipDeviceAttributeMaxBlocksPerMultiProcessor = 25,
  hipDeviceAttributeMaxBlockDimX = 26,
  hipDeviceAttributeMaxBlockDimY = 27,
  hipDeviceAttributeMaxBlockDimZ = 28,
  hipDeviceAttributeMaxGridDimX = 29,
  hipDeviceAttributeMaxGridDimY = 30,
  hipDeviceAttributeMaxGridDimZ = 31,
  hipDeviceAttributeMaxSurface1D = 32,
  hipDeviceAttributeMaxSurface1DLayered = 33,
  hipDeviceAttributeMaxSurface2D = 34,
  hipDeviceAttributeMaxSurface2DLayered = 35,
  hipDeviceAttributeMaxSurface3D = 36,
  hipDeviceAttributeMaxSurfaceCubemap = 37,
  hipDeviceAttributeMaxSurfaceCubemapLayered = 38,
  hipDeviceAttributeMaxTexture1DWidth = 39,
  hipDeviceAttributeMaxTexture1DLayered = 40,
  hipDeviceAttributeMaxTexture1DLinear = 41,
  hipDeviceAttributeMaxTexture1DMipmap = 42,
  hipDeviceAttributeMaxTexture2DWidth = 43,
  hipDeviceAttributeMaxTexture2DHeight = 44,
  hipDeviceAttributeMaxTexture2DGather = 45,
  hipDeviceAttributeMaxTexture2DLayered = 46,
  hipDeviceAttributeMaxTexture2DLinear = 47,
  hipDeviceAttributeMaxTexture2DMipmap = 48,
  hipDeviceAttributeMaxTexture3DWidth = 49,
  hipDeviceAttributeMaxTexture3DHeight = 50,
  hipDeviceAttributeMaxTexture3DDepth = 51,
  hipDeviceAttributeMaxTexture3DAlt = 52,
  hipDeviceAttributeMaxTextureCubemap = 53,
  hipDeviceAttributeMaxTextureCubemapLayered = 54,
  hipDeviceAttributeMaxThreadsDim = 55,
  hipDeviceAttributeMaxThreadsPerBlock = 56,
  hipDeviceAttributeMaxThreadsPerMultiProcessor = 57,
  hipDeviceAttributeMaxPitch = 58,
  hipDeviceAttributeMemoryBusWidth = 59,
  hipDeviceAttributeMemoryClockRate = 60,
  hipDeviceAttributeComputeCapabilityMinor = 61,
  hipDeviceAttributeMultiGpuBoardGroupID = 62,
  hipDeviceAttributeMultiprocessorCount = 63,
  hipDeviceAttributeUnused1 = 64, /* ROCm 5.x: hipDeviceAttributeName */
  hipDeviceAttributePageableMemoryAccess = 65,
  hipDeviceAttributePageableMemoryAccessUsesHostPageTables = 66,
  hipDeviceAttributePciBusId = 67,
  hipDeviceAttributePciDeviceId = 68,
  hipDeviceAttributePciDomainId = 69,
  hipDeviceAttributePciDomainID = 69, /* older spelling */
  hipDeviceAttributePersistingL2CacheMaxSize = 70,
  hipDeviceAttributeMaxRegistersPerBlock = 71,
  hipDeviceAttributeMaxRegistersPerMultiprocessor = 72,
  hipDeviceAttributeReservedSharedMemPerBlock = 73,
  hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
  hipDeviceAttributeSharedMemPerBlockOptin = 75,
  hipDeviceAttributeSharedMemPerMultiprocessor = 76,
  hipDeviceAttributeSingleToDoublePrecisionPerfRatio = 77,
  hipDeviceAttributeStreamPrioritiesSupported = 78,
  hipDeviceAttributeSurfaceAlignment = 79,
  hipDeviceAttributeTccDriver = 80,
  hipDeviceAttributeTextureAlignment = 81,
  hipDeviceAttributeTexturePitchAlignment = 82,
  hipDeviceAttributeTotalConstantMemory = 83,
  hipDeviceAttributeTotalGlobalMem = 84,
  hipDeviceAttributeUnifiedAddressing = 85,
  hipDeviceAttributeUnused2 = 86, /* ROCm 5.x: hipDeviceAttributeUuid */
  hipDeviceAttributeWarpSize = 87,
  hipDeviceAttributeMemoryPoolsSupported = 88,
  hipDeviceAttributeVirtualMemoryManagementSupported = 89,
  hipDeviceAttributeHostRegisterSupported = 90,
  hipDeviceAttributeMemoryPoolSupportedHandleTypes = 91,
  hipDeviceAttributeHostNumaId = 92,
  /* 93..99: additions of ROCm 7 headers. */
  hipDeviceAttributeDmaBufSupported = 93,
  hipDeviceAttributeGPUDirectRDMAWithHipVMMSupported = 94,
  hipDeviceAttributeHandleTypeFabricSupported = 95,
  hipDeviceAttributeHostAllocDmaBufSupported = 96,
  hipDeviceAttributeGPUDirectRDMASupported = 97,
  hipDeviceAttributeGPUDirectRDMAFlushWritesOptions = 98,
  hipDeviceAttributeGPUDirectRDMAWritesOrdering = 99,
  hipDeviceAttributeCudaCompatibleEnd = 9999,

  hipDeviceAttributeAmdSpecificBegin = 10000,
  hipDeviceAttributeClockInstructionRate = 10000,
  hipDeviceAttributeUnused3 = 10001, /* ROCm 5.x: hipDeviceAttributeArch */
  hipDeviceAttributeMaxSharedMemoryPerMultiprocessor = 10002,
  hipDeviceAttributeUnused4 = 10003, /* ROCm 5.x: hipDeviceAttributeGcnArch */
  hipDeviceAttributeUnused5 = 10004, /* ROCm 5.x: hipDeviceAttributeGcnArchName */
  hipDeviceAttributeHdpMemFlushCntl = 10005,
  hipDeviceAttributeHdpRegFlushCntl = 10006,
  hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc = 10007,
  hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim = 10008,
  hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim = 10009,
  hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem = 10010,
  hipDeviceAttributeIsLargeBar = 10011,
  hipDeviceAttributeAsicRevision = 10012,
  hipDeviceAttributeCanUseStreamWaitValue = 10013,
  hipDeviceAttributeImageSupport = 10014,
  hipDeviceAttributePhysicalMultiProcessorCount = 10015,
  hipDeviceAttributeFineGrainSupport = 10016,
  hipDeviceAttributeWallClockRate = 10017,
  hipDeviceAttributeNumberOfXccs = 10018,
  /* 10019..10022: additions of ROCm 7 headers. */
  hipDeviceAttributeMaxAvailableVgprsPerThread = 10019,
  hipDeviceAttributePciChipId = 10020,
  hipDeviceAttributeExpertSchedMode = 10021,
  hipDeviceAttributeMaxDynDataPrefetchRegions = 10022,
  hipDeviceAttributeAmdSpecificEnd = 19999,

  hipDeviceAttributeVendorSpecificBegin = 20000
} hipDeviceAttribute_t;

/* ------------------------------------------------------------------------ */
/* Opaque handles and callback types                                         */
/* ------------------------------------------------------------------------ */

typedef int hipDevice_t;
typedef void* hipDeviceptr_t;

typedef struct ihipStream_t* hipStream_t;
typedef struct ihipEvent_t* hipEvent_t;
typedef struct ihipMemPoolHandle_t* hipMemPool_t;
typedef struct ihipMemGenericAllocationHandle* hipMemGenericAllocationHandle_t;

/* Reserved stream handle values (0 is the null stream). */
#define hipStreamLegacy ((hipStream_t)1)
#define hipStreamPerThread ((hipStream_t)2)

/* Called on a runtime-owned thread once all earlier work in the stream is done. */
typedef void (*hipStreamCallback_t)(hipStream_t stream, hipError_t status, void* userData);
typedef void (*hipHostFn_t)(void* userData);

/* ------------------------------------------------------------------------ */
/* Flag values                                                               */
/* ------------------------------------------------------------------------ */

/* hipStreamCreateWithFlags */
#define hipStreamDefault 0x00
#define hipStreamNonBlocking 0x01

/* hipEventCreateWithFlags */
#define hipEventDefault 0x0
#define hipEventBlockingSync 0x1
#define hipEventDisableTiming 0x2
#define hipEventInterprocess 0x4
#define hipEventDisableSystemFence 0x20000000
#define hipEventReleaseToDevice 0x40000000
#define hipEventReleaseToSystem 0x80000000

/* hipMallocManaged / hipStreamAttachMemAsync */
#define hipMemAttachGlobal 0x01
#define hipMemAttachHost 0x02
#define hipMemAttachSingle 0x04

/* hipExtMallocWithFlags. hipMallocSignalMemory gives memory that is
 * suitable as the target of the stream wait/write-value calls. */
#define hipDeviceMallocDefault 0x0
#define hipDeviceMallocFinegrained 0x1
#define hipMallocSignalMemory 0x2
#define hipDeviceMallocUncached 0x3
#define hipDeviceMallocContiguous 0x4

/* hipStreamWaitValue32/64 comparisons */
#define hipStreamWaitValueGte 0x0
#define hipStreamWaitValueEq 0x1
#define hipStreamWaitValueAnd 0x2
#define hipStreamWaitValueNor 0x3

/* hipStreamWriteValue32/64 */
#define hipStreamWriteValueDefault 0x0

/* hipIpcOpenMemHandle */
#define hipIpcMemLazyEnablePeerAccess 0x01

/* Size in bytes of the IPC handles below. */
#define HIP_IPC_HANDLE_SIZE 64

/* Pseudo device ordinals (int). Range attributes report hipInvalidDeviceId
 * when a range has no single answer. */
#define hipCpuDeviceId ((int)-1)
#define hipInvalidDeviceId ((int)-2)

/* ------------------------------------------------------------------------ */
/* Memory copies and pointer attributes                                      */
/* ------------------------------------------------------------------------ */

typedef enum hipMemcpyKind HIPXX_INT_ENUM {
  hipMemcpyHostToHost = 0,
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4, /* direction inferred from the pointers */
  hipMemcpyDeviceToDeviceNoCU = 1024
} hipMemcpyKind;

/* Where a pointer's memory lives. (ROCm 5.x numbered these differently:
 * Host=0, Device=1, Array=2, Unified=3; ROCm 6 moved to the values below.) */
typedef enum hipMemoryType HIPXX_INT_ENUM {
  hipMemoryTypeUnregistered = 0,
  hipMemoryTypeHost = 1,
  hipMemoryTypeDevice = 2,
  hipMemoryTypeManaged = 3,
  hipMemoryTypeArray = 10,
  hipMemoryTypeUnified = 11
} hipMemoryType;

/* Result of hipPointerGetAttributes. ROCm 5.x named the first field "memoryType": both names
 * are the same member where anonymous unions exist. */
typedef struct hipPointerAttribute_t {
#if HIPXX_HAVE_ANON_UNION
  HIPXX_ANON_UNION {
    enum hipMemoryType type;
    enum hipMemoryType memoryType;
  };
#else
  enum hipMemoryType type;
#endif
  int device;
  void* devicePointer;
  void* hostPointer;
  int isManaged;
  unsigned allocationFlags;
} hipPointerAttribute_t;

/* ------------------------------------------------------------------------ */
/* Device properties (hipGetDeviceProperties)                                */
/* ------------------------------------------------------------------------ */

/* Feature bits of a device's instruction set, one bit each in this order. */
typedef struct {
  unsigned hasGlobalInt32Atomics : 1;
  unsigned hasGlobalFloatAtomicExch : 1;
  unsigned hasSharedInt32Atomics : 1;
  unsigned hasSharedFloatAtomicExch : 1;
  unsigned hasFloatAtomicAdd : 1;
  unsigned hasGlobalInt64Atomics : 1;
  unsigned hasSharedInt64Atomics : 1;
  unsigned hasDoubles : 1;
  unsigned hasWarpVote : 1;
  unsigned hasWarpBallot : 1;
  unsigned hasWarpShuffle : 1;
  unsigned hasFunnelShift : 1;
  unsigned hasThreadFenceSystem : 1;
  unsigned hasSyncThreadsExt : 1;
  unsigned hasSurfaceFuncs : 1;
  unsigned has3dGrid : 1;
  unsigned hasDynamicParallelism : 1;
} hipDeviceArch_t;

typedef struct hipUUID_t {
  char bytes[16];
} hipUUID;

/* HIP 6's layout, under the names AMD's header gives it: hipDeviceProp_t and
 * hipGetDeviceProperties are macros for the R0600 struct and entry point, so
 * that binaries built against the older layout never reach this one. */
#define hipGetDeviceProperties hipGetDevicePropertiesR0600
#define hipDeviceProp_t hipDeviceProp_tR0600

typedef struct hipDeviceProp_tR0600 {
  char name[256];
  hipUUID uuid;
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int deviceOverlap;
  int multiProcessorCount;
  int kernelExecTimeoutEnabled;
  int integrated;
  int canMapHostMemory;
  int computeMode;
  int maxTexture1D;
  int maxTexture1DMipmap;
  int maxTexture1DLinear;
  int maxTexture2D[2];
  int maxTexture2DMipmap[2];
  int maxTexture2DLinear[3];
  int maxTexture2DGather[2];
  int maxTexture3D[3];
  int maxTexture3DAlt[3];
  int maxTextureCubemap;
  int maxTexture1DLayered[2];
  int maxTexture2DLayered[3];
  int maxTextureCubemapLayered[2];
  int maxSurface1D;
  int maxSurface2D[2];
  int maxSurface3D[3];
  int maxSurface1DLayered[2];
  int maxSurface2DLayered[3];
  int maxSurfaceCubemap;
  int maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int tccDriver;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  int streamPrioritiesSupported;
  int globalL1CacheSupported;
  int localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  int multiGpuBoardGroupID;
  int hostNativeAtomicSupported;
  int singleToDoublePrecisionPerfRatio;
  int pageableMemoryAccess;
  int concurrentManagedAccess;
  int computePreemptionSupported;
  int canUseHostPointerForRegisteredMem;
  int cooperativeLaunch;
  int cooperativeMultiDeviceLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables;
  int directManagedMemAccessFromHost;
  int maxBlocksPerMultiProcessor;
  int accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported;
  int sparseHipArraySupported;
  int hostRegisterReadOnlySupported;
  int timelineSemaphoreInteropSupported;
  int memoryPoolsSupported;
  int gpuDirectRDMASupported;
  unsigned int gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned int memoryPoolSupportedHandleTypes;
  int deferredMappingHipArraySupported;
  int ipcEventSupported;
  int clusterLaunch;
  int unifiedFunctionPointers;
  int reserved[63];
  int hipReserved[32];
  /* AMD's own members. */
  char gcnArchName[256];
  size_t maxSharedMemoryPerMultiProcessor;
  int clockInstructionRate;
  hipDeviceArch_t arch;
  unsigned int* hdpMemFlushCntl;
  unsigned int* hdpRegFlushCntl;
  int cooperativeMultiDeviceUnmatchedFunc;
  int cooperativeMultiDeviceUnmatchedGridDim;
  int cooperativeMultiDeviceUnmatchedBlockDim;
  int cooperativeMultiDeviceUnmatchedSharedMem;
  int isLargeBar;
  int asicRevision;
} hipDeviceProp_tR0600;

/* ------------------------------------------------------------------------ */
/* Inter-process handles                                                     */
/* ------------------------------------------------------------------------ */

typedef struct hipIpcMemHandle_st {
  char reserved[HIP_IPC_HANDLE_SIZE];
} hipIpcMemHandle_t;

typedef struct hipIpcEventHandle_st {
  char reserved[HIP_IPC_HANDLE_SIZE];
} hipIpcEventHandle_t;

/* ------------------------------------------------------------------------ */
/* Managed (unified) memory                                                  */
/* ------------------------------------------------------------------------ */

typedef enum hipMemoryAdvise HIPXX_INT_ENUM {
  hipMemAdviseSetReadMostly = 1,
  hipMemAdviseUnsetReadMostly = 2,
  hipMemAdviseSetPreferredLocation = 3,
  hipMemAdviseUnsetPreferredLocation = 4,
  hipMemAdviseSetAccessedBy = 5,
  hipMemAdviseUnsetAccessedBy = 6,
  hipMemAdviseSetCoarseGrain = 100,   /* AMD: coherent only at kernel boundaries */
  hipMemAdviseUnsetCoarseGrain = 101  /* AMD: back to fine-grained coherence */
} hipMemoryAdvise;

typedef enum hipMemRangeCoherencyMode HIPXX_INT_ENUM {
  hipMemRangeCoherencyModeFineGrain = 0,
  hipMemRangeCoherencyModeCoarseGrain = 1,
  hipMemRangeCoherencyModeIndeterminate = 2 /* range mixes both modes */
} hipMemRangeCoherencyMode;

typedef enum hipMemRangeAttribute HIPXX_INT_ENUM {
  hipMemRangeAttributeReadMostly = 1,
  hipMemRangeAttributePreferredLocation = 2,
  hipMemRangeAttributeAccessedBy = 3,
  hipMemRangeAttributeLastPrefetchLocation = 4,
  hipMemRangeAttributeCoherencyMode = 100 /* value is a hipMemRangeCoherencyMode */
} hipMemRangeAttribute;

/* ------------------------------------------------------------------------ */
/* Locations, access rights, allocation properties                           */
/* ------------------------------------------------------------------------ */

typedef enum hipMemLocationType HIPXX_INT_ENUM {
  hipMemLocationTypeInvalid = 0,
  hipMemLocationTypeNone = 0,
  hipMemLocationTypeDevice = 1,           /* id is a device ordinal */
  hipMemLocationTypeHost = 2,             /* ROCm 7: id ignored */
  hipMemLocationTypeHostNuma = 3,         /* ROCm 7: id is a host NUMA node */
  hipMemLocationTypeHostNumaCurrent = 4   /* ROCm 7: calling thread's node */
} hipMemLocationType;

typedef struct hipMemLocation {
  hipMemLocationType type;
  int id;
} hipMemLocation;

typedef enum hipMemAccessFlags HIPXX_INT_ENUM {
  hipMemAccessFlagsProtNone = 0,
  hipMemAccessFlagsProtRead = 1,
  hipMemAccessFlagsProtReadWrite = 3
} hipMemAccessFlags;

typedef struct hipMemAccessDesc {
  hipMemLocation location;
  hipMemAccessFlags flags;
} hipMemAccessDesc;

typedef enum hipMemAllocationType HIPXX_INT_ENUM {
  hipMemAllocationTypeInvalid = 0x0,
  hipMemAllocationTypePinned = 0x1,
  hipMemAllocationTypeManaged = 0x2,        /* later ROCm addition */
  hipMemAllocationTypeUncached = 0x40000000, /* later ROCm addition */
  hipMemAllocationTypeMax = 0x7FFFFFFF
} hipMemAllocationType;

/* Bit values; hipMemPoolProps::handleTypes may combine several. */
typedef enum hipMemAllocationHandleType HIPXX_INT_ENUM {
  hipMemHandleTypeNone = 0x0,
  hipMemHandleTypePosixFileDescriptor = 0x1,
  hipMemHandleTypeWin32 = 0x2,
  hipMemHandleTypeWin32Kmt = 0x4,
  hipMemHandleTypeFabric = 0x8 /* later ROCm addition */
} hipMemAllocationHandleType;

typedef enum hipMemAllocationGranularity_flags HIPXX_INT_ENUM {
  hipMemAllocationGranularityMinimum = 0x0,
  hipMemAllocationGranularityRecommended = 0x1
} hipMemAllocationGranularity_flags;

/* Properties of a physical allocation (hipMemCreate). This is the layout of
 * ROCm 6 and later; ROCm 5.x ordered the fields differently and had no
 * allocFlags sub-struct. requestedHandleTypes (ROCm 7) aliases
 * requestedHandleType so code written for either name compiles. */
typedef struct hipMemAllocationProp {
  hipMemAllocationType type;
#if HIPXX_HAVE_ANON_UNION
  HIPXX_ANON_UNION {
    hipMemAllocationHandleType requestedHandleType;
    hipMemAllocationHandleType requestedHandleTypes;
  };
#else
  hipMemAllocationHandleType requestedHandleType;
#endif
  hipMemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
  } allocFlags;
} hipMemAllocationProp;

/* ------------------------------------------------------------------------ */
/* Stream-ordered allocator (memory pools)                                   */
/* ------------------------------------------------------------------------ */

/* Reuse policies take an int; the other attributes take a uint64_t. */
typedef enum hipMemPoolAttr HIPXX_INT_ENUM {
  hipMemPoolReuseFollowEventDependencies = 0x1,
  hipMemPoolReuseAllowOpportunistic = 0x2,
  hipMemPoolReuseAllowInternalDependencies = 0x3,
  hipMemPoolAttrReleaseThreshold = 0x4,
  hipMemPoolAttrReservedMemCurrent = 0x5,
  hipMemPoolAttrReservedMemHigh = 0x6,
  hipMemPoolAttrUsedMemCurrent = 0x7,
  hipMemPoolAttrUsedMemHigh = 0x8
} hipMemPoolAttr;

/* ROCm 5.x had reserved[64] where maxSize + reserved[56] now sit; the
 * struct size is unchanged. */
typedef struct hipMemPoolProps {
  hipMemAllocationType allocType;
  hipMemAllocationHandleType handleTypes;
  hipMemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;               /* 0 means a system-chosen limit */
  unsigned char reserved[56];   /* must be zero */
} hipMemPoolProps;

/* Opaque blob that identifies one pool allocation across processes. */
typedef struct hipMemPoolPtrExportData {
  unsigned char reserved[64];
} hipMemPoolPtrExportData;

/* ------------------------------------------------------------------------ */
/* Arrays (only what hipMemMapArrayAsync needs)                              */
/* ------------------------------------------------------------------------ */

typedef enum hipChannelFormatKind HIPXX_INT_ENUM {
  hipChannelFormatKindSigned = 0,
  hipChannelFormatKindUnsigned = 1,
  hipChannelFormatKindFloat = 2,
  hipChannelFormatKindNone = 3
} hipChannelFormatKind;

typedef struct hipChannelFormatDesc {
  int x;
  int y;
  int z;
  int w;
  enum hipChannelFormatKind f;
} hipChannelFormatDesc;

typedef enum hipArray_Format HIPXX_INT_ENUM {
  HIP_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  HIP_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  HIP_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  HIP_AD_FORMAT_SIGNED_INT8 = 0x08,
  HIP_AD_FORMAT_SIGNED_INT16 = 0x09,
  HIP_AD_FORMAT_SIGNED_INT32 = 0x0a,
  HIP_AD_FORMAT_HALF = 0x10,
  HIP_AD_FORMAT_FLOAT = 0x20
} hipArray_Format;

/* Arrays are opaque to callers (as in ROCm 6 and later). */
struct hipArray;
typedef struct hipArray* hipArray_t;
typedef const struct hipArray* hipArray_const_t;

/* Held by value inside hipArrayMapInfo, so its size is part of the ABI
 * (64 bytes on LP64; num_channels fills what was tail padding in ROCm 5.x). */
typedef struct hipMipmappedArray {
  void* data;
  struct hipChannelFormatDesc desc;
  unsigned int type;
  unsigned int width;
  unsigned int height;
  unsigned int depth;
  unsigned int min_mipmap_level;
  unsigned int max_mipmap_level;
  unsigned int flags;
  enum hipArray_Format format;
  unsigned int num_channels;
} hipMipmappedArray;
typedef struct hipMipmappedArray* hipMipmappedArray_t;
typedef const struct hipMipmappedArray* hipMipmappedArray_const_t;

typedef enum hipResourceType HIPXX_INT_ENUM {
  hipResourceTypeArray = 0x00,
  hipResourceTypeMipmappedArray = 0x01,
  hipResourceTypeLinear = 0x02,
  hipResourceTypePitch2D = 0x03
} hipResourceType;

typedef enum hipMemHandleType HIPXX_INT_ENUM {
  hipMemHandleTypeGeneric = 0x0
} hipMemHandleType;

typedef enum hipMemOperationType HIPXX_INT_ENUM {
  hipMemOperationTypeMap = 0x1,
  hipMemOperationTypeUnmap = 0x2
} hipMemOperationType;

typedef enum hipArraySparseSubresourceType HIPXX_INT_ENUM {
  hipArraySparseSubresourceTypeSparseLevel = 0x0,
  hipArraySparseSubresourceTypeMiptail = 0x1
} hipArraySparseSubresourceType;

/* One request of hipMemMapArrayAsync. */
typedef struct hipArrayMapInfo {
  hipResourceType resourceType;
  union {
    hipMipmappedArray mipmap;
    hipArray_t array;
  } resource;
  hipArraySparseSubresourceType subresourceType;
  union {
    struct {
      unsigned int level;  /* mip level (0 for plain arrays) */
      unsigned int layer;  /* layer index (0 unless layered) */
      unsigned int offsetX;
      unsigned int offsetY;
      unsigned int offsetZ;
      unsigned int extentWidth;
      unsigned int extentHeight;
      unsigned int extentDepth;
    } sparseLevel;
    struct {
      unsigned int layer;
      unsigned long long offset;
      unsigned long long size;
    } miptail;
  } subresource;
  hipMemOperationType memOperationType;
  hipMemHandleType memHandleType;
  union {
    hipMemGenericAllocationHandle_t memHandle;
  } memHandle;
  unsigned long long offset;
  unsigned int deviceBitMask;
  unsigned int flags;        /* must be zero */
  unsigned int reserved[2];  /* must be zero */
} hipArrayMapInfo;

/* ======================================================================== */
/* Entry points                                                             */
/* ======================================================================== */

/* --- Initialisation, versions, errors ----------------------------------- */

HIPXX_API hipError_t hipInit(unsigned int flags);
HIPXX_API hipError_t hipDriverGetVersion(int* driverVersion);
HIPXX_API hipError_t hipRuntimeGetVersion(int* runtimeVersion);

HIPXX_API const char* hipGetErrorString(hipError_t hipError);
HIPXX_API const char* hipGetErrorName(hipError_t hip_error);
HIPXX_API hipError_t hipGetLastError(void);
HIPXX_API hipError_t hipPeekAtLastError(void);

/* --- Devices ------------------------------------------------------------- */

HIPXX_API hipError_t hipGetDeviceCount(int* count);
HIPXX_API hipError_t hipDeviceGet(hipDevice_t* device, int ordinal);
HIPXX_API hipError_t hipSetDevice(int deviceId);
HIPXX_API hipError_t hipGetDevice(int* deviceId);
HIPXX_API hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int deviceId);
HIPXX_API hipError_t hipDeviceSynchronize(void);
HIPXX_API hipError_t hipDeviceCanAccessPeer(int* canAccessPeer, int deviceId, int peerDeviceId);
HIPXX_API hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags);
HIPXX_API hipError_t hipDeviceDisablePeerAccess(int peerDeviceId);
HIPXX_API hipError_t hipDeviceGetName(char* name, int len, hipDevice_t device);
/* What the runtime knows of the device; see README for the members it leaves 0. */
HIPXX_API hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600* prop, int deviceId);
HIPXX_API hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device);
HIPXX_API hipError_t hipDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);

/* --- Plain device memory and copies -------------------------------------- */

HIPXX_API hipError_t hipMalloc(void** ptr, size_t size);
HIPXX_API hipError_t hipExtMallocWithFlags(void** ptr, size_t sizeBytes, unsigned int flags);
HIPXX_API hipError_t hipFree(void* ptr);
HIPXX_API hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind);
HIPXX_API hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes,
                                    hipMemcpyKind kind, hipStream_t stream HIPXX_DEFAULT(0));
HIPXX_API hipError_t hipMemset(void* dst, int value, size_t sizeBytes);
HIPXX_API hipError_t hipMemsetAsync(void* dst, int value, size_t sizeBytes,
                                    hipStream_t stream HIPXX_DEFAULT(0));
/* The driver-style spellings: hipMemcpy with the direction named, hipMemset of bytes. */
HIPXX_API hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t sizeBytes);
HIPXX_API hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t sizeBytes);
HIPXX_API hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes);
HIPXX_API hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t sizeBytes, hipStream_t stream);
HIPXX_API hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream);
HIPXX_API hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream);
HIPXX_API hipError_t hipMemsetD8(hipDeviceptr_t dest, unsigned char value, size_t count);
HIPXX_API hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count,
                                      hipStream_t stream HIPXX_DEFAULT(0));
HIPXX_API hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr);
HIPXX_API hipError_t hipMemGetInfo(size_t* free, size_t* total);
HIPXX_API hipError_t hipMemcpyPeer(void* dst, int dstDeviceId, const void* src, int srcDeviceId, size_t sizeBytes);
HIPXX_API hipError_t hipMemcpyPeerAsync(void* dst, int dstDeviceId, const void* src, int srcDevice, size_t sizeBytes,
                                        hipStream_t stream HIPXX_DEFAULT(0));

/* --- Streams ------------------------------------------------------------- */

HIPXX_API hipError_t hipStreamCreate(hipStream_t* stream);
HIPXX_API hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags);
HIPXX_API hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags,
                                                 int priority);
HIPXX_API hipError_t hipExtStreamCreateWithCUMask(hipStream_t* stream, uint32_t cuMaskSize,
                                                  const uint32_t* cuMask);
HIPXX_API hipError_t hipExtStreamGetCUMask(hipStream_t stream, uint32_t cuMaskSize,
                                           uint32_t* cuMask);
HIPXX_API hipError_t hipStreamDestroy(hipStream_t stream);
HIPXX_API hipError_t hipStreamQuery(hipStream_t stream);
HIPXX_API hipError_t hipStreamSynchronize(hipStream_t stream);
HIPXX_API hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event,
                                        unsigned int flags HIPXX_DEFAULT(0));
HIPXX_API hipError_t hipStreamGetFlags(hipStream_t stream, unsigned int* flags);
HIPXX_API hipError_t hipStreamGetPriority(hipStream_t stream, int* priority);
HIPXX_API hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t callback,
                                          void* userData, unsigned int flags);
HIPXX_API hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData);

/* Wait/write-value operations on memory from hipExtMallocWithFlags(...,
 * hipMallocSignalMemory) or other memory the device can address. */
HIPXX_API hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value,
                                          unsigned int flags,
                                          uint32_t mask HIPXX_DEFAULT(0xFFFFFFFF));
HIPXX_API hipError_t hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value,
                                          unsigned int flags,
                                          uint64_t mask HIPXX_DEFAULT(0xFFFFFFFFFFFFFFFF));
HIPXX_API hipError_t hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value,
                                           unsigned int flags);
HIPXX_API hipError_t hipStreamWriteValue64(hipStream_t stream, void* ptr, uint64_t value,
                                           unsigned int flags);

/* --- Events -------------------------------------------------------------- */

HIPXX_API hipError_t hipEventCreate(hipEvent_t* event);
HIPXX_API hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags);
HIPXX_API hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream HIPXX_DEFAULT(NULL));
HIPXX_API hipError_t hipEventSynchronize(hipEvent_t event);
HIPXX_API hipError_t hipEventQuery(hipEvent_t event);
HIPXX_API hipError_t hipEventDestroy(hipEvent_t event);
HIPXX_API hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop);

/* --- Managed memory ------------------------------------------------------ */

HIPXX_API hipError_t hipMallocManaged(void** dev_ptr, size_t size,
                                      unsigned int flags HIPXX_DEFAULT(hipMemAttachGlobal));
HIPXX_API hipError_t hipMemPrefetchAsync(const void* dev_ptr, size_t count, int device,
                                         hipStream_t stream HIPXX_DEFAULT(0));
HIPXX_API hipError_t hipMemAdvise(const void* dev_ptr, size_t count, hipMemoryAdvise advice,
                                  int device);
/* ROCm 7: the location as a hipMemLocation rather than a device id. A device is its ordinal; the
   host, a host NUMA node (which must exist) and the calling thread's node all mean host memory, as
   hipCpuDeviceId does. flags must be 0. */
HIPXX_API hipError_t hipMemPrefetchAsync_v2(const void* dev_ptr, size_t count,
                                            hipMemLocation location, unsigned int flags,
                                            hipStream_t stream HIPXX_DEFAULT(0));
HIPXX_API hipError_t hipMemAdvise_v2(const void* dev_ptr, size_t count, hipMemoryAdvise advice,
                                     hipMemLocation location);
HIPXX_API hipError_t hipMemRangeGetAttribute(void* data, size_t data_size,
                                             hipMemRangeAttribute attribute,
                                             const void* dev_ptr, size_t count);
HIPXX_API hipError_t hipMemRangeGetAttributes(void** data, size_t* data_sizes,
                                              hipMemRangeAttribute* attributes,
                                              size_t num_attributes, const void* dev_ptr,
                                              size_t count);
HIPXX_API hipError_t hipStreamAttachMemAsync(hipStream_t stream, void* dev_ptr,
                                             size_t length HIPXX_DEFAULT(0),
                                             unsigned int flags HIPXX_DEFAULT(hipMemAttachSingle));

/* --- Inter-process memory ------------------------------------------------ */

HIPXX_API hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr);
HIPXX_API hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle,
                                         unsigned int flags);
HIPXX_API hipError_t hipIpcCloseMemHandle(void* devPtr);
HIPXX_API hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t event);
HIPXX_API hipError_t hipIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t handle);

/* --- Stream-ordered allocation and memory pools -------------------------- */

HIPXX_API hipError_t hipMallocAsync(void** dev_ptr, size_t size, hipStream_t stream);
HIPXX_API hipError_t hipFreeAsync(void* dev_ptr, hipStream_t stream);
HIPXX_API hipError_t hipMallocFromPoolAsync(void** dev_ptr, size_t size, hipMemPool_t mem_pool,
                                            hipStream_t stream);
HIPXX_API hipError_t hipMemPoolCreate(hipMemPool_t* mem_pool, const hipMemPoolProps* pool_props);
HIPXX_API hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool);
HIPXX_API hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold);
HIPXX_API hipError_t hipMemPoolSetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr,
                                            void* value);
HIPXX_API hipError_t hipMemPoolGetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr,
                                            void* value);
HIPXX_API hipError_t hipMemPoolSetAccess(hipMemPool_t mem_pool, const hipMemAccessDesc* desc_list,
                                         size_t count);
HIPXX_API hipError_t hipMemPoolGetAccess(hipMemAccessFlags* flags, hipMemPool_t mem_pool,
                                         hipMemLocation* location);
HIPXX_API hipError_t hipMemPoolExportToShareableHandle(void* shared_handle, hipMemPool_t mem_pool,
                                                       hipMemAllocationHandleType handle_type,
                                                       unsigned int flags);
HIPXX_API hipError_t hipMemPoolImportFromShareableHandle(hipMemPool_t* mem_pool,
                                                         void* shared_handle,
                                                         hipMemAllocationHandleType handle_type,
                                                         unsigned int flags);
HIPXX_API hipError_t hipMemPoolExportPointer(hipMemPoolPtrExportData* export_data, void* dev_ptr);
HIPXX_API hipError_t hipMemPoolImportPointer(void** dev_ptr, hipMemPool_t mem_pool,
                                             hipMemPoolPtrExportData* export_data);
HIPXX_API hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* mem_pool, int device);
HIPXX_API hipError_t hipDeviceSetMemPool(int device, hipMemPool_t mem_pool);
HIPXX_API hipError_t hipDeviceGetMemPool(hipMemPool_t* mem_pool, int device);

/* --- Virtual memory management ------------------------------------------- */

HIPXX_API hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr,
                                          unsigned long long flags);
HIPXX_API hipError_t hipMemAddressFree(void* devPtr, size_t size);
HIPXX_API hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size,
                                  const hipMemAllocationProp* prop, unsigned long long flags);
HIPXX_API hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle);
HIPXX_API hipError_t hipMemMap(void* ptr, size_t size, size_t offset,
                               hipMemGenericAllocationHandle_t handle, unsigned long long flags);
HIPXX_API hipError_t hipMemMapArrayAsync(hipArrayMapInfo* mapInfoList, unsigned int count,
                                         hipStream_t stream);
HIPXX_API hipError_t hipMemUnmap(void* ptr, size_t size);
HIPXX_API hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc,
                                     size_t count);
HIPXX_API hipError_t hipMemGetAccess(unsigned long long* flags, const hipMemLocation* location,
                                     void* ptr);
HIPXX_API hipError_t hipMemGetAllocationGranularity(size_t* granularity,
                                                    const hipMemAllocationProp* prop,
                                                    hipMemAllocationGranularity_flags option);
HIPXX_API hipError_t hipMemGetAllocationPropertiesFromHandle(hipMemAllocationProp* prop,
                                                             hipMemGenericAllocationHandle_t handle);
HIPXX_API hipError_t hipMemExportToShareableHandle(void* shareableHandle,
                                                   hipMemGenericAllocationHandle_t handle,
                                                   hipMemAllocationHandleType handleType,
                                                   unsigned long long flags);
HIPXX_API hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* handle,
                                                     void* osHandle,
                                                     hipMemAllocationHandleType shHandleType);
HIPXX_API hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t* handle,
                                                  void* addr);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* C++ conveniences AMD's header has: the allocation calls take a pointer to any pointer type, and
   hipMallocAsync takes a pool as hipMallocFromPoolAsync does. Leaving them out is
   __HIP_DISABLE_CPP_FUNCTIONS__, as there. */
#if defined(__cplusplus) && !defined(__HIP_DISABLE_CPP_FUNCTIONS__)
template <class T>
static inline hipError_t hipMalloc(T** ptr, size_t size) {
  return hipMalloc(reinterpret_cast<void**>(ptr), size);
}

template <class T>
static inline hipError_t hipMallocManaged(T** dev_ptr, size_t size, unsigned int flags = hipMemAttachGlobal) {
  return hipMallocManaged(reinterpret_cast<void**>(dev_ptr), size, flags);
}

template <class T>
static inline hipError_t hipExtMallocWithFlags(T** ptr, size_t size, unsigned int flags) {
  return hipExtMallocWithFlags(reinterpret_cast<void**>(ptr), size, flags);
}

static inline hipError_t hipMallocAsync(void** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream) {
  return hipMallocFromPoolAsync(dev_ptr, size, mem_pool, stream);
}

template <class T>
static inline hipError_t hipMallocAsync(T** dev_ptr, size_t size, hipStream_t stream) {
  return hipMallocAsync(reinterpret_cast<void**>(dev_ptr), size, stream);
}

template <class T>
static inline hipError_t hipMallocAsync(T** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream) {
  return hipMallocFromPoolAsync(reinterpret_cast<void**>(dev_ptr), size, mem_pool, stream);
}

template <class T>
static inline hipError_t hipMallocFromPoolAsync(T** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream) {
  return hipMallocFromPoolAsync(reinterpret_cast<void**>(dev_ptr), size, mem_pool, stream);
}
#endif

#endif /* HIPXX_HIP_RUNTIME_API_H */
