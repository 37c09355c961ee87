#include "core/allocation_table.hpp"

namespace hipxx::core {

std::shared_ptr<Allocation> AllocationTable::add(backend::PhysicalHandle physical, std::size_t size,
                                                 const hipMemAllocationProp& properties) {
  auto record = std::make_shared<Allocation>();
  record->id = next_id_;
  record->physical = physical;
  record->size = size;
  record->properties = properties;
  record->application_references = 1;
  records_.emplace(record->id, record);
  next_id_ += kIdStep;
  return record;
}

std::shared_ptr<Allocation> AllocationTable::find(hipMemGenericAllocationHandle_t handle) const {
  const auto found = records_.find(reinterpret_cast<std::uintptr_t>(handle));
  if (found == records_.end() || found->second->application_references == 0) return nullptr;
  return found->second;
}

bool AllocationTable::forget_if_unused(const Allocation& allocation) {
  if (allocation.application_references > 0 || allocation.mappings > 0) return false;
  records_.erase(allocation.id);
  return true;
}

}  // namespace hipxx::core
