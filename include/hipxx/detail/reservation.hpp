// The book a VirtualRange and its Mappings share. It lives on the heap so its address survives
// moves of the VirtualRange: a Mapping points here, not at the VirtualRange object.
#pragma once

#include <atomic>
#include <cstddef>

namespace hipxx::detail {

struct Reservation {
  void* base = nullptr;
  std::size_t size = 0;
  // Atomic because Mappings of one range may be created and destroyed on different threads.
  std::atomic<std::size_t> live_mappings{0};
};

}  // namespace hipxx::detail
