// The system's page size, asked of the system once: sysconf costs more than the bookkeeping of some
// of the calls that need it.
#pragma once

#include <unistd.h>

#include <cstddef>

namespace hipxx::backend {

[[nodiscard]] inline std::size_t page_size() noexcept {
  static const auto size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace hipxx::backend
