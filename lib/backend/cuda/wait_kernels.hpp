// Stream waits that the driver's cuStreamWaitValue cannot express, done by a one-thread kernel on
// the stream instead: HIP compares a masked word as an unsigned number (Gte) or under a partial
// mask (Eq), where the driver's GEQ compares the signed difference and knows no mask. The kernel
// spins on the word (acquiring it at system scope, so a host's or another device's store shows) with
// a short sleep between reads, so it holds one thread of one multiprocessor while it waits; work
// queued after it on the stream starts once it returns, exactly as after a driver wait.
//
// The kernels are PTX, compiled by the driver when a device first needs them, so building the
// runtime needs no CUDA compiler. Where the driver cannot load them, waits go back to the host.
#pragma once

#include "backend/backend.hpp"
#include "backend/cuda/cuda_driver.hpp"

#include <mutex>

namespace hipxx::backend::cuda {

class WaitKernels {
 public:
  explicit WaitKernels(const QueueApi& api) noexcept : api_(api) {}
  WaitKernels(const WaitKernels&) = delete;
  WaitKernels& operator=(const WaitKernels&) = delete;
  WaitKernels(WaitKernels&&) = delete;
  WaitKernels& operator=(WaitKernels&&) = delete;
  ~WaitKernels() = default;  // the module lives as long as its context

  // Queues the wait on `stream`, whose context must be current (the queue's bind); the first launch
  // loads the module into that context, so one WaitKernels serves one device. hipErrorNotSupported
  // where the kernels could not be loaded or the driver refuses the launch: the host waits instead.
  [[nodiscard]] hipError_t launch(CUstream stream, const void* address, std::size_t bytes, const WordWait& wait);

 private:
  [[nodiscard]] bool load() noexcept;

  const QueueApi& api_;
  std::once_flag loading_;
  CUfunction word32_ = nullptr;  // null where loading failed
  CUfunction word64_ = nullptr;
};

}  // namespace hipxx::backend::cuda
