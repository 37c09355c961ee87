// hipGetLastError, hipPeekAtLastError, hipGetErrorName and hipGetErrorString.
#include "api/guard.hpp"

#include <string_view>

namespace hipxx::api {
namespace {

thread_local hipError_t last_error = hipSuccess;

struct ErrorText {
  const char* name;
  const char* description;
};

// Aliases (hipErrorMemoryAllocation and the like) share a value, so each value has one name: the
// primary one AMD's runtime reports.
ErrorText text_of(hipError_t error) noexcept {
  switch (static_cast<int>(error)) {
    case 0: return {"hipSuccess", "no error"};
    case 1: return {"hipErrorInvalidValue", "an argument is out of range or invalid"};
    case 2: return {"hipErrorOutOfMemory", "out of memory"};
    case 3: return {"hipErrorNotInitialized", "the runtime is not initialized"};
    case 4: return {"hipErrorDeinitialized", "the runtime has been shut down"};
    case 5: return {"hipErrorProfilerDisabled", "profiler disabled"};
    case 6: return {"hipErrorProfilerNotInitialized", "profiler not initialized"};
    case 7: return {"hipErrorProfilerAlreadyStarted", "profiler already started"};
    case 8: return {"hipErrorProfilerAlreadyStopped", "profiler already stopped"};
    case 9: return {"hipErrorInvalidConfiguration", "invalid launch configuration"};
    case 12: return {"hipErrorInvalidPitchValue", "invalid pitch"};
    case 13: return {"hipErrorInvalidSymbol", "invalid symbol"};
    case 17: return {"hipErrorInvalidDevicePointer", "invalid device pointer"};
    case 21: return {"hipErrorInvalidMemcpyDirection", "invalid copy direction"};
    case 35: return {"hipErrorInsufficientDriver", "driver too old for this runtime"};
    case 52: return {"hipErrorMissingConfiguration", "missing launch configuration"};
    case 53: return {"hipErrorPriorLaunchFailure", "an earlier launch failed"};
    case 98: return {"hipErrorInvalidDeviceFunction", "invalid device function"};
    case 100: return {"hipErrorNoDevice", "no usable device"};
    case 101: return {"hipErrorInvalidDevice", "invalid device ordinal"};
    case 200: return {"hipErrorInvalidImage", "invalid code object"};
    case 201: return {"hipErrorInvalidContext", "invalid context"};
    case 202: return {"hipErrorContextAlreadyCurrent", "context already current"};
    case 205: return {"hipErrorMapFailed", "mapping failed"};
    case 206: return {"hipErrorUnmapFailed", "unmapping failed"};
    case 207: return {"hipErrorArrayIsMapped", "array is mapped"};
    case 208: return {"hipErrorAlreadyMapped", "already mapped"};
    case 209: return {"hipErrorNoBinaryForGpu", "no code object for this device"};
    case 210: return {"hipErrorAlreadyAcquired", "resource already acquired"};
    case 211: return {"hipErrorNotMapped", "not mapped"};
    case 212: return {"hipErrorNotMappedAsArray", "not mapped as an array"};
    case 213: return {"hipErrorNotMappedAsPointer", "not mapped as a pointer"};
    case 214: return {"hipErrorECCNotCorrectable", "uncorrectable ECC error"};
    case 215: return {"hipErrorUnsupportedLimit", "limit not supported"};
    case 216: return {"hipErrorContextAlreadyInUse", "context already in use"};
    case 217: return {"hipErrorPeerAccessUnsupported", "peer access not supported"};
    case 218: return {"hipErrorInvalidKernelFile", "invalid kernel file"};
    case 219: return {"hipErrorInvalidGraphicsContext", "invalid graphics context"};
    case 300: return {"hipErrorInvalidSource", "invalid source"};
    case 301: return {"hipErrorFileNotFound", "file not found"};
    case 302: return {"hipErrorSharedObjectSymbolNotFound", "shared object symbol not found"};
    case 303: return {"hipErrorSharedObjectInitFailed", "shared object initialization failed"};
    case 304: return {"hipErrorOperatingSystem", "operating system call failed"};
    case 400: return {"hipErrorInvalidHandle", "invalid handle"};
    case 401: return {"hipErrorIllegalState", "operation not allowed in the current state"};
    case 500: return {"hipErrorNotFound", "not found"};
    case 600: return {"hipErrorNotReady", "work still pending"};
    case 700: return {"hipErrorIllegalAddress", "illegal address"};
    case 701: return {"hipErrorLaunchOutOfResources", "launch out of resources"};
    case 702: return {"hipErrorLaunchTimeOut", "launch timed out"};
    case 704: return {"hipErrorPeerAccessAlreadyEnabled", "peer access already enabled"};
    case 705: return {"hipErrorPeerAccessNotEnabled", "peer access not enabled"};
    case 708: return {"hipErrorSetOnActiveProcess", "cannot set while the process is active"};
    case 709: return {"hipErrorContextIsDestroyed", "context destroyed"};
    case 710: return {"hipErrorAssert", "device assertion failed"};
    case 712: return {"hipErrorHostMemoryAlreadyRegistered", "host memory already registered"};
    case 713: return {"hipErrorHostMemoryNotRegistered", "host memory not registered"};
    case 719: return {"hipErrorLaunchFailure", "launch failed"};
    case 720: return {"hipErrorCooperativeLaunchTooLarge", "cooperative launch too large"};
    case 801: return {"hipErrorNotSupported", "operation not supported"};
    case 900: return {"hipErrorStreamCaptureUnsupported", "not allowed while a stream is capturing"};
    case 901: return {"hipErrorStreamCaptureInvalidated", "stream capture invalidated"};
    case 902: return {"hipErrorStreamCaptureMerge", "stream captures cannot merge"};
    case 903: return {"hipErrorStreamCaptureUnmatched", "capture was not started in this stream"};
    case 904: return {"hipErrorStreamCaptureUnjoined", "capture forked a stream that never rejoined"};
    case 905: return {"hipErrorStreamCaptureIsolation", "dependency crosses a capture boundary"};
    case 906: return {"hipErrorStreamCaptureImplicit", "implicit dependency on a capturing stream"};
    case 907: return {"hipErrorCapturedEvent", "event was recorded in a capturing stream"};
    case 908: return {"hipErrorStreamCaptureWrongThread", "capture ended on another thread"};
    case 910: return {"hipErrorGraphExecUpdateFailure", "graph update failed"};
    case 911: return {"hipErrorInvalidChannelDescriptor", "invalid channel descriptor"};
    case 912: return {"hipErrorInvalidTexture", "invalid texture"};
    case 914: return {"hipErrorInvalidResourceType", "invalid resource type"};
    case 915: return {"hipErrorInvalidResourceConfiguration", "invalid resource configuration"};
    case 916: return {"hipErrorStreamDetached", "stream detached"};
    case 999: return {"hipErrorUnknown", "unknown error"};
    case 1052: return {"hipErrorRuntimeMemory", "runtime memory call failed"};
    case 1053: return {"hipErrorRuntimeOther", "runtime call failed"};
    case 1054: return {"hipErrorInvalidClusterSize", "invalid cluster size"};
    case 1055: return {"hipErrorTbd", "marker of the end of the error codes"};
    default: return {"hipErrorUnknown", "unknown error"};
  }
}

}  // namespace

void remember_error(hipError_t error) noexcept { last_error = error; }

}  // namespace hipxx::api

extern "C" {

hipError_t hipGetLastError(void) {
  const hipError_t error = hipxx::api::last_error;
  hipxx::api::last_error = hipSuccess;
  return error;
}

hipError_t hipPeekAtLastError(void) { return hipxx::api::last_error; }

const char* hipGetErrorName(hipError_t error) { return hipxx::api::text_of(error).name; }

const char* hipGetErrorString(hipError_t error) { return hipxx::api::text_of(error).description; }

}  // extern "C"
