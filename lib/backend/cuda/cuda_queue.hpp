// The CUDA backend's device queues (CUstreams) and timestamps (CUevents).
#pragma once

#include "backend/backend.hpp"
#include "backend/cuda/cuda_driver.hpp"
#include "backend/cuda/cuda_errors.hpp"

#include <memory>
#include <string>

namespace hipxx::backend::cuda {

class WaitKernels;

// What the queues of one device share: the driver, the device's primary context, what the device
// can do with stream memory operations, and its wait kernels (for the waits the driver cannot do).
struct QueueDevice {
  const DriverApi* driver = nullptr;
  const QueueApi* queues = nullptr;
  CUcontext context = nullptr;
  bool wait_nor = false;  // CU_STREAM_WAIT_VALUE_NOR
  WaitKernels* wait_kernels = nullptr;  // the backend's, one per device
};

// Resolves the queue entry points; empty, or the names this libcuda lacks.
[[nodiscard]] std::string load_queue_entry_points(void* library, QueueApi& api);

// Null when the driver refuses the stream or its progress words.
[[nodiscard]] std::unique_ptr<Queue> make_queue(const QueueDevice& device, bool null_stream, bool blocking,
                                                int priority);
[[nodiscard]] std::unique_ptr<Timestamp> make_timestamp(const QueueDevice& device, bool timing);

}  // namespace hipxx::backend::cuda
