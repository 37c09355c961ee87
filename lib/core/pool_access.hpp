// Which devices may use a pool's memory, for pools made here and pools imported from another
// process alike: one flag per device, the pool's own device always read-write, and a change applied
// to every chunk the pool has mapped, all or nothing. Not locked: the pool holds its own lock around
// set() and reads.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hipxx::core {

class Runtime;

class PoolAccess {
 public:
  PoolAccess(int device_count, int owner);

  // hipMemPoolSetAccess's checks: device locations, known flags, and the owner kept read-write.
  [[nodiscard]] hipError_t check(const hipMemAccessDesc* descriptors, std::size_t count) const;
  // Applies checked descriptors to each chunk in use (chunk_users[k] > 0 maps [base + k * chunk_bytes,
  // + chunk_bytes)). On a failure the chunks already changed and the flags are put back.
  [[nodiscard]] hipError_t set(Runtime& runtime, std::span<const hipMemAccessDesc> descriptors,
                               std::span<const std::uint32_t> chunk_users, std::uintptr_t base,
                               std::size_t chunk_bytes);

  [[nodiscard]] hipMemAccessFlags of(int device) const { return flags_.at(static_cast<std::size_t>(device)); }
  // One descriptor per device, as a new chunk's set_access wants them.
  [[nodiscard]] std::vector<hipMemAccessDesc> list() const;
  // Maps `handle` as a new chunk of `bytes` at `at` and grants it these flags, all or nothing. The
  // handle is released whatever happens: the mapping keeps the memory alive, and a pool keeps no
  // handle of its own.
  [[nodiscard]] hipError_t map_chunk(Runtime& runtime, void* at, std::size_t bytes,
                                     hipMemGenericAllocationHandle_t handle) const;

 private:
  int owner_;
  std::vector<hipMemAccessFlags> flags_;  // per device
};

}  // namespace hipxx::core
