// Handles made in pairs, one through hipxx and one through the CUDA driver, for probes that time
// the two side by side; each pair goes when its owner does.
#pragma once

#include "probe_support.hpp"

#include <cuda.h>
#include <hipxx/hip_runtime_api.h>

#include <cstddef>

namespace probe {

struct Driver {
  CUdevice device = 0;

  Driver() {
    check(hipSetDevice(0), "hipSetDevice");  // hipxx starts first: both share the primary context
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&device, 0), "cuDeviceGet");
    CUcontext context = nullptr;
    check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  }
};

// A hipxx stream and a driver stream of the same kind, for probes that time stream work side by side.
struct StreamPair {
  hipStream_t hipxx = nullptr;
  CUstream driver = nullptr;

  explicit StreamPair(bool non_blocking) {
    check(hipStreamCreateWithFlags(&hipxx, non_blocking ? hipStreamNonBlocking : hipStreamDefault),
          "hipStreamCreateWithFlags");
    check(cuStreamCreate(&driver, non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT), "cuStreamCreate");
  }
  StreamPair(const StreamPair&) = delete;
  StreamPair& operator=(const StreamPair&) = delete;
  StreamPair(StreamPair&&) = delete;
  StreamPair& operator=(StreamPair&&) = delete;
  ~StreamPair() {
    check(cuStreamDestroy(driver), "cuStreamDestroy");
    check(hipStreamDestroy(hipxx), "hipStreamDestroy");
  }
};

// A hipxx event and a driver event, neither keeping times.
struct EventPair {
  hipEvent_t hipxx = nullptr;
  CUevent driver = nullptr;

  EventPair() {
    check(hipEventCreateWithFlags(&hipxx, hipEventDisableTiming), "hipEventCreateWithFlags");
    check(cuEventCreate(&driver, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  EventPair(EventPair&&) = delete;
  EventPair& operator=(EventPair&&) = delete;
  ~EventPair() {
    check(cuEventDestroy(driver), "cuEventDestroy");
    check(hipEventDestroy(hipxx), "hipEventDestroy");
  }
};

// Device memory of the same size from hipMalloc and from cuMemAlloc.
struct BufferPair {
  void* hipxx = nullptr;
  CUdeviceptr driver = 0;

  explicit BufferPair(std::size_t bytes) {
    check(hipMalloc(&hipxx, bytes), "hipMalloc");
    check(cuMemAlloc(&driver, bytes), "cuMemAlloc");
  }
  BufferPair(const BufferPair&) = delete;
  BufferPair& operator=(const BufferPair&) = delete;
  BufferPair(BufferPair&&) = delete;
  BufferPair& operator=(BufferPair&&) = delete;
  ~BufferPair() {
    check(cuMemFree(driver), "cuMemFree");
    check(hipFree(hipxx), "hipFree");
  }
};

}  // namespace probe
