#include "core/peer_access.hpp"

namespace hipxx::core {

hipError_t PeerAccess::enable(backend::Backend& backend, int device, int peer) {
  const std::lock_guard lock{mutex_};
  if (enabled_.contains({device, peer})) return hipErrorPeerAccessAlreadyEnabled;
  if (const hipError_t error = backend.set_peer_access(device, peer, true); error != hipSuccess) return error;
  enabled_.insert({device, peer});
  return hipSuccess;
}

hipError_t PeerAccess::disable(backend::Backend& backend, int device, int peer) {
  const std::lock_guard lock{mutex_};
  if (!enabled_.contains({device, peer})) return hipErrorPeerAccessNotEnabled;
  if (const hipError_t error = backend.set_peer_access(device, peer, false); error != hipSuccess) return error;
  enabled_.erase({device, peer});
  return hipSuccess;
}

}  // namespace hipxx::core
