// HIP's managed memory calls, checked against the books and the per-page advice state.
#include "core/rollback.hpp"
#include "core/runtime.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>

namespace hipxx::core {

hipError_t Runtime::allocate_managed(void** ptr, std::size_t size, unsigned flags) {
  if (ptr == nullptr || size == 0 || (flags != hipMemAttachGlobal && flags != hipMemAttachHost)) {
    return hipErrorInvalidValue;
  }
  const int device = current_device();
  std::unique_lock lock{mutex_};
  void* at = nullptr;
  if (const hipError_t error = backend_->allocate_managed(size, flags, &at); error != hipSuccess) return error;
  Rollback deallocate{[&] { (void)backend_->deallocate(at, size); }};
  address_space_.add_linear(
      {.base = address_of(at), .size = size, .device = device, .kind = LinearKind::managed, .opens = 0});
  Rollback unbook{[&] { (void)address_space_.take_linear(address_of(at)); }};
  managed_.add(address_of(at), size, flags);
  unbook.keep();
  deallocate.keep();
  *ptr = at;
  return hipSuccess;
}

hipError_t Runtime::prefetch(const void* ptr, std::size_t bytes, int device, hipStream_t stream) {
  const std::shared_ptr<Stream> target = streams_.resolve(stream, current_device());
  if (!target) return hipErrorInvalidHandle;
  if (ptr == nullptr || bytes == 0 || !valid_location_or_host(device)) return hipErrorInvalidValue;
  const std::optional<ManagedSpan> allocation = managed_.allocation_holding(address_of(ptr), bytes);
  if (!allocation) return hipErrorInvalidValue;
  const std::uint64_t generation = allocation->generation;
  bytes = allocation->bytes_from(address_of(ptr), bytes);
  // The move happens in stream order, and the range remembers it only once it has happened.
  if (target->queue() == nullptr) {
    const std::optional<std::uint64_t> queued = streams_.enqueue(*target, [this, ptr, bytes, device, generation] {
      // The memory may have been freed since the call (by a thread whose hipFree waited for other
      // devices' streams), and its address given to another allocation: a hint for memory that is
      // gone moves nothing. hipFree takes the lock exclusively before the memory goes.
      std::shared_lock lock{mutex_};
      const std::optional<ManagedSpan> still = managed_.allocation_holding(address_of(ptr), bytes);
      if (!still || still->generation != generation) return hipSuccess;
      const hipError_t result = backend_->prefetch(ptr, bytes, device);
      if (result == hipSuccess) managed_.record_prefetch(address_of(ptr), bytes, device, generation);
      return result;
    });
    return queued ? hipSuccess : hipErrorInvalidHandle;
  }
  // A device queue moves the pages itself; a host task after it tells the books.
  if (const hipError_t queued = streams_.enqueue(
          *target,
          [=](backend::Queue& queue, std::uint64_t /*sequence*/) { return queue.prefetch(ptr, bytes, device); },
          [this, ptr, bytes, device] { return backend_->prefetch(ptr, bytes, device); });
      queued != hipSuccess) {
    return queued;
  }
  const auto record = [this, ptr, bytes, device, generation] {
    managed_.record_prefetch(address_of(ptr), bytes, device, generation);
    return hipSuccess;
  };
  // The move is queued: a stream destroyed since (by another thread, while this one waited for
  // room) still runs it, and the books learn of it here once it has.
  if (!streams_.enqueue(*target, record)) {
    target->synchronize();
    (void)record();
  }
  return hipSuccess;
}

hipError_t Runtime::advise(const void* ptr, std::size_t bytes, hipMemoryAdvise advice, int device) {
  if (ptr == nullptr || bytes == 0) return hipErrorInvalidValue;
  const std::optional<ManagedSpan> allocation = managed_.allocation_holding(address_of(ptr), bytes);
  if (!allocation) return hipErrorInvalidValue;
  // Read-mostly and coarse-grain advice name no location; the others need a device or the host.
  const bool names_location = advice != hipMemAdviseSetReadMostly && advice != hipMemAdviseUnsetReadMostly &&
                              advice != hipMemAdviseSetCoarseGrain && advice != hipMemAdviseUnsetCoarseGrain;
  if (names_location && !valid_location_or_host(device)) return hipErrorInvalidValue;
  // The books check the advice value before the backend hears of it.
  switch (advice) {
    case hipMemAdviseSetReadMostly:
    case hipMemAdviseUnsetReadMostly:
    case hipMemAdviseSetPreferredLocation:
    case hipMemAdviseUnsetPreferredLocation:
    case hipMemAdviseSetAccessedBy:
    case hipMemAdviseUnsetAccessedBy:
    case hipMemAdviseSetCoarseGrain:
    case hipMemAdviseUnsetCoarseGrain: break;
    default: return hipErrorInvalidValue;
  }
  if (const hipError_t error = backend_->advise(ptr, allocation->bytes_from(address_of(ptr), bytes), advice, device);
      error != hipSuccess) {
    return error;
  }
  return managed_.advise(address_of(ptr), bytes, advice, device);
}

hipError_t Runtime::range_attributes(RangeQueries requests, const void* ptr, std::size_t bytes) const {
  if (ptr == nullptr) return hipErrorInvalidValue;
  return managed_.query(requests, address_of(ptr), bytes);
}

// Memory the system allocated may be attached where the stream's device uses such memory without
// registering it: a region mapped in this process that is none of the runtime's own allocations,
// with its length, since the system keeps no sizes the runtime could look up. Nothing about it is
// recorded: attachment decides which streams may touch managed pages, and these pages are not
// managed by the runtime.
hipError_t Runtime::attachable_system_memory(int device, const void* ptr, std::size_t length) const {
  const std::uintptr_t address = address_of(ptr);
  if (length == 0 || address + length < address || !backend_->device(device).pageable_memory_access) {
    return hipErrorInvalidValue;
  }
  {
    std::shared_lock lock{mutex_};
    if (address_space_.overlaps_tracked(address, address + length)) return hipErrorInvalidValue;
  }
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t start = address / page * page;
  // msync asks nothing of the pages but that they are mapped: ENOMEM where any is not.
  return msync(reinterpret_cast<void*>(start), address + length - start, MS_ASYNC) == 0 ? hipSuccess
                                                                                        : hipErrorInvalidValue;
}

hipError_t Runtime::attach(hipStream_t stream, void* ptr, std::size_t length, unsigned flags) {
  const std::shared_ptr<Stream> target = streams_.resolve(stream, current_device());
  if (!target) return hipErrorInvalidHandle;
  if (ptr == nullptr || (flags != hipMemAttachGlobal && flags != hipMemAttachHost && flags != hipMemAttachSingle)) {
    return hipErrorInvalidValue;
  }
  const std::optional<ManagedSpan> allocation = managed_.allocation_holding(address_of(ptr), 1);
  if (!allocation) return attachable_system_memory(target->traits().device, ptr, length);
  // Managed memory attaches whole: from its base, with length 0 or its full size.
  if (allocation->base != address_of(ptr) || (length != 0 && length != allocation->size)) return hipErrorInvalidValue;
  const std::optional<std::uint64_t> queued = streams_.enqueue(*target, [this, span = *allocation, flags] {
    managed_.set_attach(span.base, flags, span.generation);
    return hipSuccess;
  });
  return queued ? hipSuccess : hipErrorInvalidHandle;
}

}  // namespace hipxx::core
