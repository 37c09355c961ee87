// HIP's virtual memory calls, checked against the books and turned into exact backend calls.
#include "core/rollback.hpp"
#include "core/runtime.hpp"

#include <bit>
#include <mutex>
#include <new>
#include <optional>

namespace hipxx::core {
namespace {

bool valid_flags(hipMemAccessFlags flags) noexcept {
  return flags == hipMemAccessFlagsProtNone || flags == hipMemAccessFlagsProtRead ||
         flags == hipMemAccessFlagsProtReadWrite;
}

// Win32 handle types name real HIP features that Linux cannot give; anything else is not a type.
hipError_t check_handle_type(hipMemAllocationHandleType type) noexcept {
  switch (type) {
    case hipMemHandleTypePosixFileDescriptor: return hipSuccess;
    case hipMemHandleTypeWin32:
    case hipMemHandleTypeWin32Kmt: return hipErrorNotSupported;
    default: return hipErrorInvalidValue;
  }
}

AccessList with_descriptors(AccessList access, std::span<const hipMemAccessDesc> descriptors) noexcept {
  for (const hipMemAccessDesc& descriptor : descriptors) access.set(descriptor.location.id, descriptor.flags);
  return access;
}

}  // namespace

hipError_t Runtime::reserve(void** ptr, std::size_t size, std::size_t alignment, void* hint, unsigned long long flags,
                            Holder holder) {
  if (ptr == nullptr || size == 0 || flags != 0 || !granular(size) || !granular(address_of(hint))) {
    return hipErrorInvalidValue;
  }
  if (alignment != 0 && (!std::has_single_bit(alignment) || !granular(alignment))) return hipErrorInvalidValue;
  const std::size_t effective_alignment = alignment == 0 ? granularity_ : alignment;
  // A hint is followed only where it keeps the alignment asked for.
  const std::uintptr_t followed = address_of(hint) % effective_alignment == 0 ? address_of(hint) : 0;
  std::unique_lock lock{mutex_};
  void* va = nullptr;
  if (const hipError_t error = backend_->reserve(size, effective_alignment, followed, &va); error != hipSuccess) {
    return error;
  }
  Rollback unreserve{[&] { (void)backend_->free_reservation(va, size); }};
  address_space_.add_reservation(address_of(va), size, holder);
  unreserve.keep();
  *ptr = va;
  return hipSuccess;
}

hipError_t Runtime::free_reservation(void* ptr, std::size_t size, Holder holder) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  std::unique_lock lock{mutex_};
  Reservation* reservation = address_space_.reservation_at(address_of(ptr));
  if (reservation == nullptr || reservation->holder != holder || reservation->size != size ||
      !reservation->mappings.empty()) {
    return hipErrorInvalidValue;
  }
  if (const hipError_t error = backend_->free_reservation(ptr, size); error != hipSuccess) return error;
  address_space_.remove_reservation(address_of(ptr));
  return hipSuccess;
}

hipError_t Runtime::reservation_mapping_count(const void* base, std::size_t* count) const {
  if (base == nullptr || count == nullptr) return hipErrorInvalidValue;
  std::shared_lock lock{mutex_};
  const Reservation* reservation = address_space_.reservation_at(address_of(base));
  if (reservation == nullptr || reservation->holder != Holder::application) return hipErrorInvalidValue;
  *count = reservation->mappings.size();
  return hipSuccess;
}

hipError_t Runtime::create(hipMemGenericAllocationHandle_t* handle, std::size_t size,
                           const hipMemAllocationProp* properties, unsigned long long flags) {
  if (handle == nullptr || properties == nullptr || flags != 0 || size == 0 || !granular(size) ||
      properties->type != hipMemAllocationTypePinned || !valid_location(properties->location)) {
    return hipErrorInvalidValue;
  }
  const hipMemAllocationHandleType requested = properties->requestedHandleType;
  if (requested != hipMemHandleTypeNone) {
    if (const hipError_t error = check_handle_type(requested); error != hipSuccess) return error;
  }
  // More than the device has is a shortage on every backend, however large: not a size a backend's
  // own calls would take for malformed (a file length past off_t's range, say).
  if (size > backend_->device(properties->location.id).total_memory) return hipErrorOutOfMemory;
  // Created before the books are locked: committing the memory is the slow part (the host backend
  // allocates every page), nothing in it reads or changes the books, and other threads' copies and
  // maps need not wait for it.
  backend::PhysicalHandle physical;
  if (const hipError_t error = backend_->create_physical(properties->location.id, size,
                                                         requested == hipMemHandleTypePosixFileDescriptor, &physical);
      error != hipSuccess) {
    return error;
  }
  std::unique_lock lock{mutex_};
  *handle = book_allocation_locked(physical, size, *properties);
  return hipSuccess;
}

hipMemGenericAllocationHandle_t Runtime::book_allocation_locked(backend::PhysicalHandle physical, std::size_t size,
                                                                const hipMemAllocationProp& properties) {
  try {
    return AllocationTable::handle_of(allocations_.add(physical, size, properties));
  } catch (...) {
    // The books could not grow: give the memory back rather than lose track of it.
    (void)backend_->release_physical(physical);
    throw;
  }
}

std::optional<backend::PhysicalHandle> Runtime::drop_reference_locked(Allocation& allocation) {
  --allocation.application_references;
  return allocations_.forget_if_unused(allocation);
}

hipError_t Runtime::release(hipMemGenericAllocationHandle_t handle) {
  std::optional<backend::PhysicalHandle> unused;
  {
    std::unique_lock lock{mutex_};
    Allocation* allocation = allocations_.find(handle);
    if (allocation == nullptr) return hipErrorInvalidValue;
    unused = drop_reference_locked(*allocation);
  }
  // Freed after the books are unlocked: they no longer name it, and giving back a large allocation
  // (the host backend's last close of the memfd frees every page) need not hold up other threads.
  return unused ? backend_->release_physical(*unused) : hipSuccess;
}

hipError_t Runtime::map(void* ptr, std::size_t size, std::size_t offset, hipMemGenericAllocationHandle_t handle,
                        unsigned long long flags, Holder holder) {
  const std::uintptr_t address = address_of(ptr);
  if (ptr == nullptr || size == 0 || offset != 0 || flags != 0 || !granular(address) || !granular(size)) {
    return hipErrorInvalidValue;
  }
  std::unique_lock lock{mutex_};
  Allocation* allocation = allocations_.find(handle);
  if (allocation == nullptr || (allocation->size != 0 && allocation->size != size)) return hipErrorInvalidValue;
  Reservation* reservation = address_space_.reservation_holding(address, size);
  if (reservation == nullptr || reservation->holder != holder) return hipErrorInvalidValue;
  const std::optional<MappingTree::iterator> place = AddressSpace::place_for(*reservation, address, size);
  if (!place) return hipErrorInvalidValue;
  // Booked first, because booking is what may throw: a mapping is never made that the books lack.
  // The allocation counts it before the driver call too, so that a map that succeeds has nothing
  // left to do once the driver returns.
  (void)address_space_.add_mapping(
      *reservation, *place, MappingRecord{.base = address, .size = size, .allocation = allocation, .access = {}});
  const std::size_t size_before = allocation->size;
  allocation->size = size;
  ++allocation->mappings;
  const backend::PhysicalHandle physical = allocation->physical;
  if (direct_map_.call != nullptr) {
    // The driver's map runs with the books unlocked: other threads' calls need not wait for it, and
    // once it returns, a map that succeeded touches nothing of the runtime's, not even the lock. The
    // booking stays as it is meanwhile: an unmap takes a mapping out of the books only once the
    // driver has unmapped it, which it cannot do to a range it has not mapped, and a reservation
    // with a mapping in it is not freed.
    const backend::DirectMap direct = direct_map_;
    lock.release()->unlock();
    if (direct.call(direct.context, ptr, size, physical.value) == 0) return hipSuccess;
    lock = std::unique_lock{mutex_};
  }
  // A backend whose own books ran out of memory has not mapped: unbooked as for any refusal.
  const hipError_t error = [&] {
    try {
      return backend_->map(ptr, size, physical);
    } catch (const std::bad_alloc&) {
      return hipErrorOutOfMemory;
    }
  }();
  if (error != hipSuccess) {
    const std::optional<backend::PhysicalHandle> unused =
        unbook_failed_map_locked(*reservation, address, *allocation, size_before);
    lock.unlock();
    if (unused) (void)backend_->release_physical(*unused);
    return error;
  }
  return hipSuccess;
}

// Another thread may have released the allocation while the books were unlocked for a direct map,
// so the failed mapping may have been the last use of its memory: then the caller frees it. Other
// threads may have booked and unbooked mappings around it meanwhile too, so it is found again by its
// address rather than by a place taken before the lock was let go (it is still there: nothing
// unbooks a mapping the driver has not made).
std::optional<backend::PhysicalHandle> Runtime::unbook_failed_map_locked(Reservation& reservation,
                                                                         std::uintptr_t address, Allocation& allocation,
                                                                         std::size_t size_before) {
  (void)address_space_.remove_mapping(reservation, reservation.mappings.find(address));
  if (--allocation.mappings == 0) allocation.size = size_before;
  return allocations_.forget_if_unused(allocation);
}

hipError_t Runtime::unmap(void* ptr, std::size_t size, Holder holder) {
  const std::uintptr_t address = address_of(ptr);
  if (ptr == nullptr || size == 0) return hipErrorInvalidValue;
  std::unique_lock lock{mutex_};
  const Tiling tiles = address_space_.tiling(address, size);
  if (tiles.empty() || tiles.reservation->holder != holder) return hipErrorInvalidValue;
  hipError_t result = hipSuccess;
  MappingTree::iterator mapping = tiles.first;
  for (std::size_t index = 0; index < tiles.count; ++index) {
    const MappingRecord record = mapping->record;
    if (const hipError_t error = backend_->unmap(reinterpret_cast<void*>(record.base), record.size);
        error != hipSuccess) {
      return error;  // the mappings already undone stay undone; the rest are intact and still booked
    }
    mapping = address_space_.remove_mapping(*tiles.reservation, mapping);
    --record.allocation->mappings;
    if (const auto unused = allocations_.forget_if_unused(*record.allocation)) {
      if (const hipError_t error = backend_->release_physical(*unused); error != hipSuccess) result = error;
    }
  }
  return result;
}

hipError_t Runtime::apply_access_locked(MappingRecord& mapping, const AccessList& access) {
  // The backend takes one grant per device. The scratch list grows once (which may throw, before any
  // backend call) and is reused under the write lock the caller holds.
  grants_scratch_.resize(static_cast<std::size_t>(device_count()));
  for (std::size_t device = 0; device < grants_scratch_.size(); ++device) {
    grants_scratch_[device] = {.device = static_cast<int>(device), .flags = access.of(static_cast<int>(device))};
  }
  if (const hipError_t error = backend_->set_access(reinterpret_cast<void*>(mapping.base), mapping.size,
                                                    grants_scratch_, mapping.allocation->physical);
      error != hipSuccess) {
    return error;
  }
  mapping.access = access;
  return hipSuccess;
}

hipError_t Runtime::set_access(void* ptr, std::size_t size, std::span<const hipMemAccessDesc> descriptors,
                               Holder holder) {
  if (ptr == nullptr || size == 0 || descriptors.empty()) return hipErrorInvalidValue;
  for (const hipMemAccessDesc& descriptor : descriptors) {
    if (!valid_location(descriptor.location) || !valid_flags(descriptor.flags)) return hipErrorInvalidValue;
  }
  std::unique_lock lock{mutex_};
  const Tiling tiles = address_space_.tiling(address_of(ptr), size);
  if (tiles.empty() || tiles.reservation->holder != holder) return hipErrorInvalidValue;
  MappingRecord& first = tiles.first->record;
  if (tiles.count == 1) return apply_access_locked(first, with_descriptors(first.access, descriptors));
  // Several mappings: remember how each was, so a refusal part-way can put back what this call
  // already changed and leave every mapping as it was.
  std::vector<AccessList> before;
  before.reserve(tiles.count);
  MappingTree::iterator mapping = tiles.first;
  for (std::size_t index = 0; index < tiles.count; ++index, ++mapping) before.push_back(mapping->record.access);
  mapping = tiles.first;
  for (std::size_t index = 0; index < tiles.count; ++index, ++mapping) {
    if (const hipError_t error = apply_access_locked(mapping->record, with_descriptors(before[index], descriptors));
        error != hipSuccess) {
      MappingTree::iterator undo = tiles.first;
      for (std::size_t done = 0; done < index; ++done, ++undo) (void)apply_access_locked(undo->record, before[done]);
      return error;
    }
  }
  return hipSuccess;
}

hipError_t Runtime::get_access(unsigned long long* flags, const hipMemLocation* location, void* ptr) {
  if (flags == nullptr || location == nullptr || ptr == nullptr || !valid_location(*location)) {
    return hipErrorInvalidValue;
  }
  std::shared_lock lock{mutex_};
  const MappingRecord* mapping = address_space_.mapping_containing(address_of(ptr));
  if (mapping == nullptr) return hipErrorInvalidValue;
  *flags = mapping->access.of(location->id);
  return hipSuccess;
}

hipError_t Runtime::granularity(std::size_t* granularity, const hipMemAllocationProp* properties,
                                hipMemAllocationGranularity_flags option) const {
  if (granularity == nullptr || properties == nullptr || properties->type != hipMemAllocationTypePinned ||
      !valid_location(properties->location)) {
    return hipErrorInvalidValue;
  }
  const backend::DeviceProperties& device = backend_->device(properties->location.id);
  switch (option) {
    case hipMemAllocationGranularityMinimum: *granularity = device.minimum_granularity; return hipSuccess;
    case hipMemAllocationGranularityRecommended: *granularity = device.recommended_granularity; return hipSuccess;
  }
  return hipErrorInvalidValue;
}

hipError_t Runtime::properties_of(hipMemAllocationProp* properties, hipMemGenericAllocationHandle_t handle) {
  if (properties == nullptr) return hipErrorInvalidValue;
  std::shared_lock lock{mutex_};
  const Allocation* allocation = allocations_.find(handle);
  if (allocation == nullptr) return hipErrorInvalidValue;
  *properties = allocation->properties;
  return hipSuccess;
}

hipError_t Runtime::export_handle(void* shareable, hipMemGenericAllocationHandle_t handle,
                                  hipMemAllocationHandleType type, unsigned long long flags) {
  if (shareable == nullptr || flags != 0) return hipErrorInvalidValue;
  if (const hipError_t error = check_handle_type(type); error != hipSuccess) return error;
  std::shared_lock lock{mutex_};
  const Allocation* allocation = allocations_.find(handle);
  // As with CUDA, only an allocation created for this handle type may be exported as it.
  if (allocation == nullptr || allocation->properties.requestedHandleType != type) return hipErrorInvalidValue;
  int fd = -1;
  if (const hipError_t error = backend_->export_fd(allocation->physical, &fd); error != hipSuccess) return error;
  *static_cast<int*>(shareable) = fd;
  return hipSuccess;
}

hipError_t Runtime::import_handle(hipMemGenericAllocationHandle_t* handle, void* os_handle,
                                  hipMemAllocationHandleType type) {
  if (handle == nullptr) return hipErrorInvalidValue;
  if (const hipError_t error = check_handle_type(type); error != hipSuccess) return error;
  // The descriptor comes by value inside the pointer, so descriptor 0 arrives as a null pointer:
  // the backend, not this check, tells whether it names memory.
  const auto fd_bits = address_of(os_handle);
  if (fd_bits > static_cast<std::uintptr_t>(INT32_MAX)) return hipErrorInvalidValue;
  const int device = current_device();
  // The backend checks and copies the descriptor (four system calls on the host backend) before the
  // books are locked: nothing there reads or changes the books, and a refusal leaves them untouched.
  backend::PhysicalHandle physical;
  backend::ImportedAllocation facts;
  if (const hipError_t error = backend_->import_fd(static_cast<int>(fd_bits), &physical, &facts); error != hipSuccess) {
    return error;
  }
  std::unique_lock lock{mutex_};
  hipMemAllocationProp properties{};
  properties.type = hipMemAllocationTypePinned;
  properties.requestedHandleType = type;
  // The device whose memory it is, where the backend can tell; else the device importing it.
  properties.location = {.type = hipMemLocationTypeDevice, .id = valid_device(facts.device) ? facts.device : device};
  *handle = book_allocation_locked(physical, facts.size, properties);
  return hipSuccess;
}

hipError_t Runtime::retain(hipMemGenericAllocationHandle_t* handle, void* address, Holder holder) {
  if (handle == nullptr || address == nullptr) return hipErrorInvalidValue;
  std::unique_lock lock{mutex_};
  const MappingRecord* mapping = address_space_.mapping_containing(address_of(address), holder);
  if (mapping == nullptr) return hipErrorInvalidValue;
  ++mapping->allocation->application_references;
  *handle = AllocationTable::handle_of(*mapping->allocation);
  return hipSuccess;
}

}  // namespace hipxx::core
