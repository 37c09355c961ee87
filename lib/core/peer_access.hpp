// Which devices may use which other devices' memory (hipDeviceEnablePeerAccess), process-wide as HIP
// keeps it, with the backend told of every change so that the driver grants or revokes the access.
#pragma once

#include "backend/backend.hpp"

#include <hipxx/hip_runtime_api.h>

#include <mutex>
#include <set>
#include <utility>

namespace hipxx::core {

class PeerAccess {
 public:
  // `device` may use `peer`'s memory from now on; hipErrorPeerAccessAlreadyEnabled where it already
  // may. The caller has checked both ordinals, and that they differ.
  [[nodiscard]] hipError_t enable(backend::Backend& backend, int device, int peer);
  // The reverse; hipErrorPeerAccessNotEnabled where `device` was not given access to `peer`.
  [[nodiscard]] hipError_t disable(backend::Backend& backend, int device, int peer);

 private:
  std::mutex mutex_;  // held across the backend's call, so that changes reach it in order
  std::set<std::pair<int, int>> enabled_;  // (device, peer)
};

}  // namespace hipxx::core
