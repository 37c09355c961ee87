#include "core/allocation_table.hpp"

#include <algorithm>
#include <new>

namespace hipxx::core {

Allocation& AllocationTable::add(backend::PhysicalHandle physical, std::size_t size,
                                 const hipMemAllocationProp& properties) {
  if (free_slots_.empty()) add_slot();
  const std::uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  Allocation& record = *slots_[slot];
  const std::uintptr_t generation = (record.id >> (kAlignmentBits + kSlotBits)) + 1;
  record = Allocation{.id = ((generation << kSlotBits) | slot) << kAlignmentBits,
                      .application_references = 1,
                      .mappings = 0,
                      .size = size,
                      .physical = physical,
                      .properties = properties};
  return record;
}

Allocation* AllocationTable::find(hipMemGenericAllocationHandle_t handle) const noexcept {
  const auto id = reinterpret_cast<std::uintptr_t>(handle);
  const std::uintptr_t slot = slot_of(id);
  if (slot >= slots_.size()) return nullptr;
  Allocation* const record = slots_[slot];
  return record->id == id && record->application_references > 0 ? record : nullptr;
}

std::optional<backend::PhysicalHandle> AllocationTable::forget_if_unused(const Allocation& allocation) {
  if (allocation.application_references > 0 || allocation.mappings > 0) return std::nullopt;
  const auto slot = static_cast<std::uint32_t>(slot_of(allocation.id));
  slots_[slot]->id |= kForgotten;
  // Cannot throw: add_slot keeps room in free_slots_ for every slot there is.
  free_slots_.push_back(slot);
  return allocation.physical;
}

void AllocationTable::add_slot() {
  if (slots_.size() > kSlotMask) throw std::bad_alloc{};  // no slot number left for another record
  // Room first, so that forgetting a record never allocates (it runs where the physical memory must
  // still be freed) and a bad_alloc here leaves the table as it was.
  if (free_slots_.capacity() <= slots_.size()) free_slots_.reserve(std::max<std::size_t>(16, 2 * slots_.size()));
  slots_.reserve(slots_.size() + 1);
  slots_.push_back(&storage_.emplace_back());  // cannot throw: room was reserved
  free_slots_.push_back(static_cast<std::uint32_t>(slots_.size() - 1));
}

}  // namespace hipxx::core
