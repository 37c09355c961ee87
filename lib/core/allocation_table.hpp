// Physical allocations as the application sees them: each hipMemGenericAllocationHandle_t is a
// never-reused number naming one record here, so a stale or forged handle is looked up, not
// dereferenced. A record lives while the application holds references (create, import and retain
// add one; release drops one) or while any mapping still uses it, which is how a release of a
// mapped handle defers the physical free to the last unmap.
//
// Records sit in slots that never move and are recycled, and the id index is one flat array: a
// create/release pair allocates nothing once the table has warmed up. The books only touch records
// under the runtime's lock, so the counts above are all the lifetime management a record needs.
#pragma once

#include "backend/backend.hpp"
#include "core/flat_address_map.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace hipxx::core {

struct Allocation {
  std::uintptr_t id = 0;
  backend::PhysicalHandle physical;
  std::size_t size = 0;  // 0 where an imported allocation's size cannot be known
  hipMemAllocationProp properties{};
  int application_references = 0;
  int mappings = 0;
};

// Not synchronised: the caller holds the runtime's lock.
class AllocationTable {
 public:
  // The new record, with one application reference. Its address stays valid until it is forgotten.
  [[nodiscard]] Allocation& add(backend::PhysicalHandle physical, std::size_t size,
                                const hipMemAllocationProp& properties);

  // The record behind a handle the application may still use, or null.
  [[nodiscard]] Allocation* find(hipMemGenericAllocationHandle_t handle) const;

  // Drops the record once nothing refers to it; the caller then frees the physical memory.
  [[nodiscard]] bool forget_if_unused(const Allocation& allocation);

  [[nodiscard]] std::size_t size() const noexcept { return by_id_.size(); }

  [[nodiscard]] static hipMemGenericAllocationHandle_t handle_of(const Allocation& allocation) noexcept {
    return reinterpret_cast<hipMemGenericAllocationHandle_t>(allocation.id);
  }

 private:
  // Handles look like aligned pointers, so code that stores them in pointer-tagged structures works.
  static constexpr std::uintptr_t kIdStep = 16;

  void add_slot();

  std::uintptr_t next_id_ = 0x48000;
  FlatAddressMap<Allocation*> by_id_;
  std::deque<Allocation> slots_;  // a deque never moves its elements as it grows
  std::vector<Allocation*> free_slots_;  // slots of forgotten records, reused before the deque grows
};

}  // namespace hipxx::core
