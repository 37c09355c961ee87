#include "core/allocation_table.hpp"

#include <algorithm>

namespace hipxx::core {

Allocation& AllocationTable::add(backend::PhysicalHandle physical, std::size_t size,
                                 const hipMemAllocationProp& properties) {
  if (free_slots_.empty()) add_slot();
  Allocation* record = free_slots_.back();
  by_id_.insert(next_id_, record);
  free_slots_.pop_back();
  *record = Allocation{.id = next_id_,
                       .physical = physical,
                       .size = size,
                       .properties = properties,
                       .application_references = 1,
                       .mappings = 0};
  next_id_ += kIdStep;
  return *record;
}

Allocation* AllocationTable::find(hipMemGenericAllocationHandle_t handle) const {
  const auto id = reinterpret_cast<std::uintptr_t>(handle);
  if (id == 0) return nullptr;  // the index's mark of an empty slot, never an id
  Allocation* const* found = by_id_.find(id);
  if (found == nullptr || (*found)->application_references == 0) return nullptr;
  return *found;
}

bool AllocationTable::forget_if_unused(const Allocation& allocation) {
  if (allocation.application_references > 0 || allocation.mappings > 0) return false;
  // Cannot throw: add_slot keeps room in free_slots_ for every slot there is.
  if (const auto taken = by_id_.take(allocation.id)) free_slots_.push_back(*taken);
  return true;
}

void AllocationTable::add_slot() {
  // Room first, so that forgetting a record never allocates (it runs where the physical memory must
  // still be freed) and a bad_alloc here leaves the table as it was.
  if (free_slots_.capacity() <= slots_.size()) free_slots_.reserve(std::max<std::size_t>(16, 2 * slots_.size()));
  free_slots_.push_back(&slots_.emplace_back());
}

}  // namespace hipxx::core
