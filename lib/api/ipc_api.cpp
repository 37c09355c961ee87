// Legacy IPC entry points.
#include "api/guard.hpp"

using hipxx::api::guarded;
using hipxx::core::Runtime;

extern "C" {

hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr) {
  return guarded([&](Runtime& runtime) { return runtime.ipc_get_handle(handle, devPtr); });
}

hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int flags) {
  return guarded([&](Runtime& runtime) { return runtime.ipc_open(devPtr, handle, flags); });
}

hipError_t hipIpcCloseMemHandle(void* devPtr) {
  return guarded([&](Runtime& runtime) { return runtime.ipc_close(devPtr); });
}

}  // extern "C"
