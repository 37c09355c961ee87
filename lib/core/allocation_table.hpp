// Physical allocations as the application sees them: each hipMemGenericAllocationHandle_t is a
// never-reused number naming one record here, so a stale or forged handle is looked up, not
// dereferenced. A record lives while the application holds references (create, import and retain
// add one; release drops one) or while any mapping still uses it, which is how a release of a
// mapped handle defers the physical free to the last unmap.
//
// Records sit in slots that never move and are recycled. A handle names its slot's number and the
// slot's generation, which goes up each time the slot is reused: finding a record is one indexed
// load and one comparison (these lookups sit on sub-microsecond calls: map, release, export), and
// a handle of a forgotten record never matches again. A create/release pair allocates nothing once
// the table has warmed up. The books only touch records under the runtime's lock, so the counts
// above are all the lifetime management a record needs.
#pragma once

#include "backend/backend.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace hipxx::core {

// What map, unmap and release read (the first five fields) shares one cache line; the properties,
// read only by queries, come after it.
struct alignas(64) Allocation {
  std::uintptr_t id = 0;
  int application_references = 0;
  int mappings = 0;
  std::size_t size = 0;  // 0 where an imported allocation's size cannot be known
  backend::PhysicalHandle physical;
  hipMemAllocationProp properties{};
};

// Not synchronised: the caller holds the runtime's lock.
class AllocationTable {
 public:
  // The new record, with one application reference. Its address stays valid until it is forgotten.
  [[nodiscard]] Allocation& add(backend::PhysicalHandle physical, std::size_t size,
                                const hipMemAllocationProp& properties);

  // The record behind a handle the application may still use, or null.
  [[nodiscard]] Allocation* find(hipMemGenericAllocationHandle_t handle) const noexcept;

  // Drops the record once nothing refers to it, and then gives the physical memory it named, which
  // the caller frees.
  [[nodiscard]] std::optional<backend::PhysicalHandle> forget_if_unused(const Allocation& allocation);

  [[nodiscard]] std::size_t size() const noexcept { return slots_.size() - free_slots_.size(); }

  [[nodiscard]] static hipMemGenericAllocationHandle_t handle_of(const Allocation& allocation) noexcept {
    return reinterpret_cast<hipMemGenericAllocationHandle_t>(allocation.id);
  }

 private:
  // An id is ((generation << kSlotBits) | slot) << kAlignmentBits: handles look like aligned
  // pointers, so code that stores them in pointer-tagged structures works. Generations start at 1,
  // so no id is small; 2^36 of them per slot outlast any process.
  static constexpr unsigned kAlignmentBits = 4;
  static constexpr unsigned kSlotBits = 24;  // at most 16 Mi records at once
  static constexpr std::uintptr_t kSlotMask = (std::uintptr_t{1} << kSlotBits) - 1;
  // Or'ed into a forgotten record's id, which no handle has (their low bits are clear): the slot then
  // matches nothing, and still knows its generation for the next record.
  static constexpr std::uintptr_t kForgotten = 1;

  [[nodiscard]] static std::uintptr_t slot_of(std::uintptr_t id) noexcept { return (id >> kAlignmentBits) & kSlotMask; }

  void add_slot();

  std::vector<Allocation*> slots_;  // slot number -> its record in storage_; first, read by every lookup
  std::deque<Allocation> storage_;  // never moves its elements as it grows
  std::vector<std::uint32_t> free_slots_;  // numbers of forgotten records' slots, reused first
};

}  // namespace hipxx::core
