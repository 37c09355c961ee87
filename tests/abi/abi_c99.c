/*
 * Compile-time checks of hipxx's HIP C header against the numbers in
 * shared/spec/hip-abi.md. Built as strict C99 (-std=c99 -pedantic -Werror):
 * if this file compiles, the header is valid C99 and every value and layout
 * below holds. C99 has no _Static_assert, so a failed check becomes an
 * array of negative size.
 */
#include <hip/hip_runtime_api.h> /* through the legacy shim on purpose */
#include <hipxx/hip_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

#define ABI_CAT2(a, b) a##b
#define ABI_CAT(a, b) ABI_CAT2(a, b)
/* One check per line: the typedef name is made unique with __LINE__. */
#define ABI_CHECK(cond) typedef char ABI_CAT(abi_check_line_, __LINE__)[(cond) ? 1 : -1]
#define ABI_EQ(a, b) ABI_CHECK((long long)(a) == (long long)(b))
#define ABI_OFF(type, field, off) ABI_CHECK(offsetof(type, field) == (off))
#define ABI_SIZE(type, size) ABI_CHECK(sizeof(type) == (size))

#if defined(HIP_INCLUDE_HIP_HIP_RUNTIME_API_H) && defined(HIPXX_HIP_RUNTIME_API_H)
ABI_CHECK(1);
#else
ABI_CHECK(0); /* both guard macros must be defined */
#endif

/* ---- hipError_t (spec table, plus the listed extra values) -------------- */
ABI_SIZE(hipError_t, sizeof(int));
ABI_EQ(hipSuccess, 0);
ABI_EQ(hipErrorInvalidValue, 1);
ABI_EQ(hipErrorOutOfMemory, 2);
ABI_EQ(hipErrorMemoryAllocation, 2);
ABI_EQ(hipErrorNotInitialized, 3);
ABI_EQ(hipErrorInitializationError, 3);
ABI_EQ(hipErrorDeinitialized, 4);
ABI_EQ(hipErrorProfilerDisabled, 5);
ABI_EQ(hipErrorProfilerNotInitialized, 6);
ABI_EQ(hipErrorProfilerAlreadyStarted, 7);
ABI_EQ(hipErrorProfilerAlreadyStopped, 8);
ABI_EQ(hipErrorInvalidConfiguration, 9);
ABI_EQ(hipErrorInvalidPitchValue, 12);
ABI_EQ(hipErrorInvalidSymbol, 13);
ABI_EQ(hipErrorInvalidDevicePointer, 17);
ABI_EQ(hipErrorInvalidMemcpyDirection, 21);
ABI_EQ(hipErrorInsufficientDriver, 35);
ABI_EQ(hipErrorMissingConfiguration, 52);
ABI_EQ(hipErrorPriorLaunchFailure, 53);
ABI_EQ(hipErrorInvalidDeviceFunction, 98);
ABI_EQ(hipErrorNoDevice, 100);
ABI_EQ(hipErrorInvalidDevice, 101);
ABI_EQ(hipErrorInvalidImage, 200);
ABI_EQ(hipErrorInvalidContext, 201);
ABI_EQ(hipErrorContextAlreadyCurrent, 202);
ABI_EQ(hipErrorMapFailed, 205);
ABI_EQ(hipErrorMapBufferObjectFailed, 205);
ABI_EQ(hipErrorUnmapFailed, 206);
ABI_EQ(hipErrorArrayIsMapped, 207);
ABI_EQ(hipErrorAlreadyMapped, 208);
ABI_EQ(hipErrorNoBinaryForGpu, 209);
ABI_EQ(hipErrorAlreadyAcquired, 210);
ABI_EQ(hipErrorNotMapped, 211);
ABI_EQ(hipErrorNotMappedAsArray, 212);
ABI_EQ(hipErrorNotMappedAsPointer, 213);
ABI_EQ(hipErrorECCNotCorrectable, 214);
ABI_EQ(hipErrorUnsupportedLimit, 215);
ABI_EQ(hipErrorContextAlreadyInUse, 216);
ABI_EQ(hipErrorPeerAccessUnsupported, 217);
ABI_EQ(hipErrorInvalidKernelFile, 218);
ABI_EQ(hipErrorInvalidGraphicsContext, 219);
ABI_EQ(hipErrorInvalidSource, 300);
ABI_EQ(hipErrorFileNotFound, 301);
ABI_EQ(hipErrorSharedObjectSymbolNotFound, 302);
ABI_EQ(hipErrorSharedObjectInitFailed, 303);
ABI_EQ(hipErrorOperatingSystem, 304);
ABI_EQ(hipErrorInvalidHandle, 400);
ABI_EQ(hipErrorInvalidResourceHandle, 400);
ABI_EQ(hipErrorIllegalState, 401);
ABI_EQ(hipErrorNotFound, 500);
ABI_EQ(hipErrorNotReady, 600);
ABI_EQ(hipErrorIllegalAddress, 700);
ABI_EQ(hipErrorLaunchOutOfResources, 701);
ABI_EQ(hipErrorLaunchTimeOut, 702);
ABI_EQ(hipErrorPeerAccessAlreadyEnabled, 704);
ABI_EQ(hipErrorPeerAccessNotEnabled, 705);
ABI_EQ(hipErrorSetOnActiveProcess, 708);
ABI_EQ(hipErrorContextIsDestroyed, 709);
ABI_EQ(hipErrorAssert, 710);
ABI_EQ(hipErrorHostMemoryAlreadyRegistered, 712);
ABI_EQ(hipErrorHostMemoryNotRegistered, 713);
ABI_EQ(hipErrorLaunchFailure, 719);
ABI_EQ(hipErrorCooperativeLaunchTooLarge, 720);
ABI_EQ(hipErrorNotSupported, 801);
ABI_EQ(hipErrorStreamCaptureUnsupported, 900);
ABI_EQ(hipErrorStreamCaptureInvalidated, 901);
ABI_EQ(hipErrorStreamCaptureMerge, 902);
ABI_EQ(hipErrorStreamCaptureUnmatched, 903);
ABI_EQ(hipErrorStreamCaptureUnjoined, 904);
ABI_EQ(hipErrorStreamCaptureIsolation, 905);
ABI_EQ(hipErrorStreamCaptureImplicit, 906);
ABI_EQ(hipErrorCapturedEvent, 907);
ABI_EQ(hipErrorStreamCaptureWrongThread, 908);
ABI_EQ(hipErrorGraphExecUpdateFailure, 910);
ABI_EQ(hipErrorInvalidChannelDescriptor, 911);
ABI_EQ(hipErrorInvalidTexture, 912);
ABI_EQ(hipErrorInvalidResourceType, 914);
ABI_EQ(hipErrorInvalidResourceConfiguration, 915);
ABI_EQ(hipErrorStreamDetached, 916);
ABI_EQ(hipErrorUnknown, 999);
ABI_EQ(hipErrorRuntimeMemory, 1052);
ABI_EQ(hipErrorRuntimeOther, 1053);
ABI_EQ(hipErrorInvalidClusterSize, 1054);
ABI_EQ(hipErrorTbd, 1055);

/* ---- hipDeviceAttribute_t anchors (spec) --------------------------------- */
ABI_SIZE(hipDeviceAttribute_t, sizeof(int));
ABI_EQ(hipDeviceAttributeCudaCompatibleBegin, 0);
ABI_EQ(hipDeviceAttributeConcurrentManagedAccess, 9);
ABI_EQ(hipDeviceAttributeDirectManagedMemAccessFromHost, 13);
ABI_EQ(hipDeviceAttributeIntegrated, 16);
ABI_EQ(hipDeviceAttributeManagedMemory, 24);
ABI_EQ(hipDeviceAttributeMultiprocessorCount, 63);
ABI_EQ(hipDeviceAttributePageableMemoryAccess, 65);
ABI_EQ(hipDeviceAttributePageableMemoryAccessUsesHostPageTables, 66);
ABI_EQ(hipDeviceAttributeStreamPrioritiesSupported, 78);
ABI_EQ(hipDeviceAttributeTotalGlobalMem, 84);
ABI_EQ(hipDeviceAttributeUnifiedAddressing, 85);
ABI_EQ(hipDeviceAttributeWarpSize, 87);
ABI_EQ(hipDeviceAttributeMemoryPoolsSupported, 88);
ABI_EQ(hipDeviceAttributeVirtualMemoryManagementSupported, 89);
ABI_EQ(hipDeviceAttributeHostRegisterSupported, 90);
ABI_EQ(hipDeviceAttributeMemoryPoolSupportedHandleTypes, 91);
ABI_EQ(hipDeviceAttributeHostNumaId, 92);
ABI_EQ(hipDeviceAttributeCudaCompatibleEnd, 9999);
ABI_EQ(hipDeviceAttributeAmdSpecificBegin, 10000);
ABI_EQ(hipDeviceAttributeCanUseStreamWaitValue, 10013);
ABI_EQ(hipDeviceAttributeFineGrainSupport, 10016);
ABI_EQ(hipDeviceAttributeAmdSpecificEnd, 19999);
ABI_EQ(hipDeviceAttributeVendorSpecificBegin, 20000);

/* ---- Enums of the seeds' calls (spec) ------------------------------------ */
ABI_SIZE(hipMemAllocationType, sizeof(int));
ABI_EQ(hipMemAllocationTypeInvalid, 0);
ABI_EQ(hipMemAllocationTypePinned, 1);
ABI_EQ(hipMemAllocationTypeMax, 0x7FFFFFFF);
ABI_SIZE(hipMemAllocationHandleType, sizeof(int));
ABI_EQ(hipMemHandleTypeNone, 0);
ABI_EQ(hipMemHandleTypePosixFileDescriptor, 1);
ABI_EQ(hipMemHandleTypeWin32, 2);
ABI_EQ(hipMemHandleTypeWin32Kmt, 4);
ABI_SIZE(hipMemLocationType, sizeof(int));
ABI_EQ(hipMemLocationTypeInvalid, 0);
ABI_EQ(hipMemLocationTypeDevice, 1);
ABI_EQ(hipMemLocationTypeHost, 2);
ABI_EQ(hipMemLocationTypeHostNuma, 3);
ABI_EQ(hipMemLocationTypeHostNumaCurrent, 4);
ABI_SIZE(hipMemAccessFlags, sizeof(int));
ABI_EQ(hipMemAccessFlagsProtNone, 0);
ABI_EQ(hipMemAccessFlagsProtRead, 1);
ABI_EQ(hipMemAccessFlagsProtReadWrite, 3);
ABI_SIZE(hipMemAllocationGranularity_flags, sizeof(int));
ABI_EQ(hipMemAllocationGranularityMinimum, 0);
ABI_EQ(hipMemAllocationGranularityRecommended, 1);
ABI_SIZE(hipMemoryAdvise, sizeof(int));
ABI_EQ(hipMemAdviseSetReadMostly, 1);
ABI_EQ(hipMemAdviseUnsetReadMostly, 2);
ABI_EQ(hipMemAdviseSetPreferredLocation, 3);
ABI_EQ(hipMemAdviseUnsetPreferredLocation, 4);
ABI_EQ(hipMemAdviseSetAccessedBy, 5);
ABI_EQ(hipMemAdviseUnsetAccessedBy, 6);
ABI_EQ(hipMemAdviseSetCoarseGrain, 100);
ABI_EQ(hipMemAdviseUnsetCoarseGrain, 101);
ABI_SIZE(hipMemRangeAttribute, sizeof(int));
ABI_EQ(hipMemRangeAttributeReadMostly, 1);
ABI_EQ(hipMemRangeAttributePreferredLocation, 2);
ABI_EQ(hipMemRangeAttributeAccessedBy, 3);
ABI_EQ(hipMemRangeAttributeLastPrefetchLocation, 4);
ABI_EQ(hipMemRangeAttributeCoherencyMode, 100);
ABI_SIZE(hipMemRangeCoherencyMode, sizeof(int));
ABI_EQ(hipMemRangeCoherencyModeFineGrain, 0);
ABI_EQ(hipMemRangeCoherencyModeCoarseGrain, 1);
ABI_EQ(hipMemRangeCoherencyModeIndeterminate, 2);
ABI_SIZE(hipMemPoolAttr, sizeof(int));
ABI_EQ(hipMemPoolReuseFollowEventDependencies, 1);
ABI_EQ(hipMemPoolReuseAllowOpportunistic, 2);
ABI_EQ(hipMemPoolReuseAllowInternalDependencies, 3);
ABI_EQ(hipMemPoolAttrReleaseThreshold, 4);
ABI_EQ(hipMemPoolAttrReservedMemCurrent, 5);
ABI_EQ(hipMemPoolAttrReservedMemHigh, 6);
ABI_EQ(hipMemPoolAttrUsedMemCurrent, 7);
ABI_EQ(hipMemPoolAttrUsedMemHigh, 8);
ABI_SIZE(hipMemcpyKind, sizeof(int));
ABI_EQ(hipMemcpyHostToHost, 0);
ABI_EQ(hipMemcpyHostToDevice, 1);
ABI_EQ(hipMemcpyDeviceToHost, 2);
ABI_EQ(hipMemcpyDeviceToDevice, 3);
ABI_EQ(hipMemcpyDefault, 4);
ABI_EQ(hipMemcpyDeviceToDeviceNoCU, 1024);
ABI_SIZE(hipMemoryType, sizeof(int));
ABI_EQ(hipMemoryTypeUnregistered, 0);
ABI_EQ(hipMemoryTypeHost, 1);
ABI_EQ(hipMemoryTypeDevice, 2);
ABI_EQ(hipMemoryTypeManaged, 3);
ABI_EQ(hipMemoryTypeArray, 10);
ABI_EQ(hipMemoryTypeUnified, 11);
ABI_SIZE(hipMemHandleType, sizeof(int));
ABI_EQ(hipMemHandleTypeGeneric, 0);
ABI_SIZE(hipMemOperationType, sizeof(int));
ABI_EQ(hipMemOperationTypeMap, 1);
ABI_EQ(hipMemOperationTypeUnmap, 2);
ABI_SIZE(hipArraySparseSubresourceType, sizeof(int));
ABI_EQ(hipArraySparseSubresourceTypeSparseLevel, 0);
ABI_EQ(hipArraySparseSubresourceTypeMiptail, 1);
ABI_SIZE(hipResourceType, sizeof(int));
ABI_EQ(hipResourceTypeArray, 0);
ABI_EQ(hipResourceTypeMipmappedArray, 1);

/* ---- Flag macros (spec) -------------------------------------------------- */
ABI_EQ(hipStreamDefault, 0x0);
ABI_EQ(hipStreamNonBlocking, 0x1);
ABI_EQ(hipEventDefault, 0x0);
ABI_EQ(hipEventBlockingSync, 0x1);
ABI_EQ(hipEventDisableTiming, 0x2);
ABI_EQ(hipEventInterprocess, 0x4);
ABI_EQ(hipEventDisableSystemFence, 0x20000000);
ABI_EQ(hipEventReleaseToDevice, 0x40000000);
ABI_EQ(hipEventReleaseToSystem, 0x80000000u);
ABI_EQ(hipMemAttachGlobal, 0x1);
ABI_EQ(hipMemAttachHost, 0x2);
ABI_EQ(hipMemAttachSingle, 0x4);
ABI_EQ(hipDeviceMallocDefault, 0x0);
ABI_EQ(hipMallocSignalMemory, 0x2);
ABI_EQ(hipStreamWaitValueGte, 0);
ABI_EQ(hipStreamWaitValueEq, 1);
ABI_EQ(hipStreamWaitValueAnd, 2);
ABI_EQ(hipStreamWaitValueNor, 3);
ABI_EQ(hipIpcMemLazyEnablePeerAccess, 0x1);
ABI_EQ(HIP_IPC_HANDLE_SIZE, 64);
ABI_EQ(hipCpuDeviceId, -1);
ABI_EQ(hipInvalidDeviceId, -2);
ABI_CHECK(sizeof(hipCpuDeviceId) == sizeof(int));
ABI_CHECK(sizeof(hipInvalidDeviceId) == sizeof(int));
ABI_EQ(HIP_VERSION, HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH);

/* ---- Handles ------------------------------------------------------------- */
ABI_SIZE(hipStream_t, sizeof(void*));
ABI_SIZE(hipEvent_t, sizeof(void*));
ABI_SIZE(hipMemPool_t, sizeof(void*));
ABI_SIZE(hipMemGenericAllocationHandle_t, sizeof(void*));
ABI_SIZE(hipDeviceptr_t, sizeof(void*));
ABI_SIZE(hipStreamCallback_t, sizeof(void (*)(void)));

/* ---- Struct layouts: pointer-size independent parts ---------------------- */
ABI_SIZE(hipMemLocation, 8);
ABI_OFF(hipMemLocation, type, 0);
ABI_OFF(hipMemLocation, id, 4);
ABI_SIZE(hipMemAccessDesc, 12);
ABI_OFF(hipMemAccessDesc, location, 0);
ABI_OFF(hipMemAccessDesc, flags, 8);
ABI_SIZE(hipMemPoolPtrExportData, 64);
ABI_SIZE(hipIpcMemHandle_t, 64);
ABI_SIZE(hipIpcEventHandle_t, 64);
ABI_CHECK(sizeof(((hipMemPoolProps*)0)->reserved) == 56);
ABI_OFF(hipMemAllocationProp, type, 0);
ABI_OFF(hipMemAllocationProp, requestedHandleType, 4);
ABI_OFF(hipMemAllocationProp, requestedHandleTypes, 4); /* union alias (ROCm 7) */
ABI_OFF(hipMemAllocationProp, location, 8);
ABI_OFF(hipMemPoolProps, allocType, 0);
ABI_OFF(hipMemPoolProps, handleTypes, 4);
ABI_OFF(hipMemPoolProps, location, 8);
ABI_OFF(hipPointerAttribute_t, type, 0);
ABI_OFF(hipPointerAttribute_t, device, 4);
ABI_OFF(hipArrayMapInfo, resourceType, 0);
ABI_CHECK(sizeof(((hipMemAllocationProp*)0)->allocFlags) == 4);
ABI_CHECK(sizeof(((hipMemAllocationProp*)0)->allocFlags.compressionType) == 1);
ABI_CHECK(sizeof(((hipMemAllocationProp*)0)->allocFlags.gpuDirectRDMACapable) == 1);
ABI_CHECK(sizeof(((hipMemAllocationProp*)0)->allocFlags.usage) == 2);

/* ---- Struct layouts on LP64 (x86_64 / aarch64 Linux) --------------------- */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
ABI_SIZE(hipMemAllocationProp, 32);
ABI_OFF(hipMemAllocationProp, win32HandleMetaData, 16);
ABI_OFF(hipMemAllocationProp, allocFlags, 24);
ABI_OFF(hipMemAllocationProp, allocFlags.compressionType, 24);
ABI_OFF(hipMemAllocationProp, allocFlags.gpuDirectRDMACapable, 25);
ABI_OFF(hipMemAllocationProp, allocFlags.usage, 26);

ABI_SIZE(hipMemPoolProps, 88);
ABI_OFF(hipMemPoolProps, win32SecurityAttributes, 16);
ABI_OFF(hipMemPoolProps, maxSize, 24);
ABI_OFF(hipMemPoolProps, reserved, 32);

ABI_SIZE(hipPointerAttribute_t, 32);
ABI_OFF(hipPointerAttribute_t, devicePointer, 8);
ABI_OFF(hipPointerAttribute_t, hostPointer, 16);
ABI_OFF(hipPointerAttribute_t, isManaged, 24);
ABI_OFF(hipPointerAttribute_t, allocationFlags, 28);
#if HIPXX_HAVE_ANON_UNION
ABI_OFF(hipPointerAttribute_t, memoryType, 0); /* ROCm 5's name of the same member */
#endif

/* ---- hipDeviceProp_t: HIP 6's hipDeviceProp_tR0600 (LP64): 1472 bytes, AMD's members from
 * gcnArchName on at 1160 ------------------------------------------------------------ */
ABI_SIZE(hipDeviceArch_t, 4);
ABI_SIZE(hipUUID, 16);
ABI_SIZE(hipDeviceProp_t, 1472);
ABI_SIZE(hipDeviceProp_tR0600, 1472);
ABI_OFF(hipDeviceProp_t, name, 0);
ABI_OFF(hipDeviceProp_t, uuid, 256);
ABI_OFF(hipDeviceProp_t, luidDeviceNodeMask, 280);
ABI_OFF(hipDeviceProp_t, totalGlobalMem, 288);
ABI_OFF(hipDeviceProp_t, warpSize, 308);
ABI_OFF(hipDeviceProp_t, multiProcessorCount, 388);
ABI_OFF(hipDeviceProp_t, concurrentKernels, 576);
ABI_OFF(hipDeviceProp_t, managedMemory, 652);
ABI_OFF(hipDeviceProp_t, memoryPoolsSupported, 744);
ABI_OFF(hipDeviceProp_t, memoryPoolSupportedHandleTypes, 760);
ABI_OFF(hipDeviceProp_t, reserved, 780);
ABI_OFF(hipDeviceProp_t, gcnArchName, 1160);
ABI_OFF(hipDeviceProp_t, maxSharedMemoryPerMultiProcessor, 1416);
ABI_OFF(hipDeviceProp_t, arch, 1428);
ABI_OFF(hipDeviceProp_t, hdpMemFlushCntl, 1432);
ABI_OFF(hipDeviceProp_t, asicRevision, 1468);

ABI_SIZE(hipMipmappedArray, 64); /* same as ROCm 5.2's, checked against Debian's header */
ABI_SIZE(hipArrayMapInfo, 152);
ABI_OFF(hipArrayMapInfo, resource, 8);
ABI_OFF(hipArrayMapInfo, resource.mipmap, 8);
ABI_OFF(hipArrayMapInfo, resource.array, 8);
ABI_OFF(hipArrayMapInfo, subresourceType, 72);
ABI_OFF(hipArrayMapInfo, subresource, 80);
ABI_OFF(hipArrayMapInfo, subresource.sparseLevel.level, 80);
ABI_OFF(hipArrayMapInfo, subresource.sparseLevel.extentDepth, 108);
ABI_OFF(hipArrayMapInfo, subresource.miptail.layer, 80);
ABI_OFF(hipArrayMapInfo, subresource.miptail.offset, 88);
ABI_OFF(hipArrayMapInfo, subresource.miptail.size, 96);
ABI_OFF(hipArrayMapInfo, memOperationType, 112);
ABI_OFF(hipArrayMapInfo, memHandleType, 116);
ABI_OFF(hipArrayMapInfo, memHandle, 120);
ABI_OFF(hipArrayMapInfo, memHandle.memHandle, 120);
ABI_OFF(hipArrayMapInfo, offset, 128);
ABI_OFF(hipArrayMapInfo, deviceBitMask, 136);
ABI_OFF(hipArrayMapInfo, flags, 140);
ABI_OFF(hipArrayMapInfo, reserved, 144);
#endif

/* ---- Entry points: the spec's signatures, redeclared. --------------------
 * A redeclaration whose type is incompatible with the header's is a hard
 * error in C, so this pins every parameter and return type. */
hipError_t hipMemAddressFree(void* devPtr, size_t size);
hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void* addr, unsigned long long flags);
hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size, const hipMemAllocationProp* prop, unsigned long long flags);
hipError_t hipMemExportToShareableHandle(void* shareableHandle, hipMemGenericAllocationHandle_t handle, hipMemAllocationHandleType handleType, unsigned long long flags);
hipError_t hipMemGetAccess(unsigned long long* flags, const hipMemLocation* location, void* ptr);
hipError_t hipMemGetAllocationGranularity(size_t* granularity, const hipMemAllocationProp* prop, hipMemAllocationGranularity_flags option);
hipError_t hipMemGetAllocationPropertiesFromHandle(hipMemAllocationProp* prop, hipMemGenericAllocationHandle_t handle);
hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* handle, void* osHandle, hipMemAllocationHandleType shHandleType);
hipError_t hipMemMap(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle, unsigned long long flags);
hipError_t hipMemMapArrayAsync(hipArrayMapInfo* mapInfoList, unsigned int count, hipStream_t stream);
hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle);
hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t* handle, void* addr);
hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count);
hipError_t hipMemUnmap(void* ptr, size_t size);
hipError_t hipMallocManaged(void** dev_ptr, size_t size, unsigned int flags);
hipError_t hipMemPrefetchAsync(const void* dev_ptr, size_t count, int device, hipStream_t stream);
hipError_t hipMemAdvise(const void* dev_ptr, size_t count, hipMemoryAdvise advice, int device);
hipError_t hipMemPrefetchAsync_v2(const void* dev_ptr, size_t count, hipMemLocation location, unsigned int flags,
                                  hipStream_t stream);
hipError_t hipMemAdvise_v2(const void* dev_ptr, size_t count, hipMemoryAdvise advice, hipMemLocation location);
hipError_t hipMemRangeGetAttribute(void* data, size_t data_size, hipMemRangeAttribute attribute, const void* dev_ptr, size_t count);
hipError_t hipMemRangeGetAttributes(void** data, size_t* data_sizes, hipMemRangeAttribute* attributes, size_t num_attributes, const void* dev_ptr, size_t count);
hipError_t hipStreamAttachMemAsync(hipStream_t stream, void* dev_ptr, size_t length, unsigned int flags);
hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr);
hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int flags);
hipError_t hipIpcCloseMemHandle(void* devPtr);
hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t event);
hipError_t hipIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t handle);
hipError_t hipStreamCreate(hipStream_t* stream);
hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags);
hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int flags, int priority);
hipError_t hipDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipStreamQuery(hipStream_t stream);
hipError_t hipStreamSynchronize(hipStream_t stream);
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);
hipError_t hipStreamGetFlags(hipStream_t stream, unsigned int* flags);
hipError_t hipStreamGetPriority(hipStream_t stream, int* priority);
hipError_t hipExtStreamCreateWithCUMask(hipStream_t* stream, uint32_t cuMaskSize, const uint32_t* cuMask);
hipError_t hipExtStreamGetCUMask(hipStream_t stream, uint32_t cuMaskSize, uint32_t* cuMask);
hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t callback, void* userData, unsigned int flags);
hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags, uint32_t mask);
hipError_t hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value, unsigned int flags, uint64_t mask);
hipError_t hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags);
hipError_t hipStreamWriteValue64(hipStream_t stream, void* ptr, uint64_t value, unsigned int flags);
hipError_t hipMallocAsync(void** dev_ptr, size_t size, hipStream_t stream);
hipError_t hipFreeAsync(void* dev_ptr, hipStream_t stream);
hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold);
hipError_t hipMemPoolSetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value);
hipError_t hipMemPoolGetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void* value);
hipError_t hipMemPoolSetAccess(hipMemPool_t mem_pool, const hipMemAccessDesc* desc_list, size_t count);
hipError_t hipMemPoolGetAccess(hipMemAccessFlags* flags, hipMemPool_t mem_pool, hipMemLocation* location);
hipError_t hipMemPoolCreate(hipMemPool_t* mem_pool, const hipMemPoolProps* pool_props);
hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool);
hipError_t hipMallocFromPoolAsync(void** dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream);
hipError_t hipMemPoolExportToShareableHandle(void* shared_handle, hipMemPool_t mem_pool, hipMemAllocationHandleType handle_type, unsigned int flags);
hipError_t hipMemPoolImportFromShareableHandle(hipMemPool_t* mem_pool, void* shared_handle, hipMemAllocationHandleType handle_type, unsigned int flags);
hipError_t hipMemPoolExportPointer(hipMemPoolPtrExportData* export_data, void* dev_ptr);
hipError_t hipMemPoolImportPointer(void** dev_ptr, hipMemPool_t mem_pool, hipMemPoolPtrExportData* export_data);
hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* mem_pool, int device);
hipError_t hipDeviceSetMemPool(int device, hipMemPool_t mem_pool);
hipError_t hipDeviceGetMemPool(hipMemPool_t* mem_pool, int device);
const char* hipGetErrorString(hipError_t hipError);
const char* hipGetErrorName(hipError_t hip_error);
hipError_t hipGetLastError(void);
hipError_t hipPeekAtLastError(void);
hipError_t hipInit(unsigned int flags);
hipError_t hipGetDeviceCount(int* count);
hipError_t hipSetDevice(int deviceId);
hipError_t hipGetDevice(int* deviceId);
hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int deviceId);
hipError_t hipDeviceSynchronize(void);
hipError_t hipMalloc(void** ptr, size_t size);
hipError_t hipFree(void* ptr);
hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind);
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream);
hipError_t hipMemset(void* dst, int value, size_t sizeBytes);
hipError_t hipMemsetAsync(void* dst, int value, size_t sizeBytes, hipStream_t stream);
hipError_t hipEventCreate(hipEvent_t* event);
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t hipEventSynchronize(hipEvent_t event);
hipError_t hipEventQuery(hipEvent_t event);
hipError_t hipEventDestroy(hipEvent_t event);
hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop);
hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr);
hipError_t hipDeviceCanAccessPeer(int* canAccessPeer, int deviceId, int peerDeviceId);
hipError_t hipDriverGetVersion(int* driverVersion);
hipError_t hipRuntimeGetVersion(int* runtimeVersion);
hipError_t hipExtMallocWithFlags(void** ptr, size_t sizeBytes, unsigned int flags);
hipError_t hipMemGetInfo(size_t* free, size_t* total);
hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags);
hipError_t hipDeviceDisablePeerAccess(int peerDeviceId);
hipError_t hipMemcpyPeer(void* dst, int dstDeviceId, const void* src, int srcDeviceId, size_t sizeBytes);
hipError_t hipMemcpyPeerAsync(void* dst, int dstDeviceId, const void* src, int srcDevice, size_t sizeBytes,
                              hipStream_t stream);
hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData);
hipError_t hipDeviceGet(hipDevice_t* device, int ordinal);
hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600* prop, int deviceId);
hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t sizeBytes);
hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t sizeBytes);
hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes);
hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t sizeBytes, hipStream_t stream);
hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream);
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream);
hipError_t hipMemsetD8(hipDeviceptr_t dest, unsigned char value, size_t count);
hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream);

int main(void) {
  /* The checks above are evaluated by the compiler. The calls below sit in
   * sizeof, so they are type-checked but never emitted (the program links
   * without the runtime library). Pointer-valued macros are not integer
   * constant expressions, so they are checked here at run time. */
  void* p = 0;
  if ((uintptr_t)hipStreamLegacy != 1 || (uintptr_t)hipStreamPerThread != 2) return 1;
  hipStreamCallback_t cb = 0;
  hipHostFn_t fn = 0;
  (void)sizeof(hipLaunchHostFunc(hipStreamPerThread, fn, p));
  (void)sizeof(hipMallocManaged(&p, 16, hipMemAttachGlobal));
  {
    hipDeviceProp_t properties;
    (void)sizeof(hipGetDeviceProperties(&properties, 0)); /* the R0600 entry point, by AMD's macro */
  }
  (void)sizeof(hipStreamAddCallback(hipStreamPerThread, cb, p, 0));
  (void)sizeof(hipStreamWaitValue64(hipStreamLegacy, p, 1, hipStreamWaitValueGte, ~(uint64_t)0));
  return 0;
}
