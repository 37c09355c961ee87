// The process-wide runtime: the chosen backend and the books, behind one reader-writer lock.
// Every HIP rule is checked here before the first backend call, so a refused call changes nothing.
#pragma once

#include "backend/backend.hpp"
#include "core/address_space.hpp"
#include "core/allocation_table.hpp"
#include "core/event.hpp"
#include "core/immortal.hpp"
#include "core/managed_memory.hpp"
#include "core/peer_access.hpp"
#include "core/pool_registry.hpp"
#include "core/pool_sharing.hpp"
#include "core/stream_registry.hpp"
#include "core/writer_preferring_lock.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>

namespace hipxx::core {

struct BookCounts {
  std::size_t reservations = 0;
  std::size_t mappings = 0;
  std::size_t allocations = 0;
  std::size_t linear_allocations = 0;
};

// Whose memory an address is: the runtime's (device, pool, managed, IPC or mapped memory, in its
// books) or the application's own. Stream work notes it when queued; memory of the runtime's that
// has left the books by the time the work runs (freed, unmapped, closed) is then an illegal address,
// as it is to a GPU, not memory of the application's to touch.
enum class MemoryOwner : bool { application, runtime };

struct CopyOwners {
  MemoryOwner dst = MemoryOwner::application;
  MemoryOwner src = MemoryOwner::application;
};

class alignas(64) Runtime {
 public:
  // The process's runtime, built at the first call over the backend HIPXX_BACKEND (or the machine)
  // selects. In static storage rather than on the heap: its address is fixed when the library
  // loads, so an entry point reaches the runtime's first cache line without first loading where it
  // is. Inline, so that an entry point's path does not also pass through a function of its own.
  // Never destroyed: other static destructors and atexit handlers may still call into HIP.
  [[nodiscard]] static Runtime& instance() {
    static Immortal<Runtime> runtime{&process_runtime};
    return *runtime;
  }

  explicit Runtime(std::unique_ptr<backend::Backend> backend, std::string selection_error = {});

  // hipErrorNoDevice when no backend could be started.
  [[nodiscard]] hipError_t status() const noexcept { return device_count_ > 0 ? hipSuccess : hipErrorNoDevice; }
  [[nodiscard]] backend::Backend& backend() noexcept { return *backend_; }
  [[nodiscard]] PeerAccess& peer_access() noexcept { return peer_access_; }
  [[nodiscard]] int device_count() const noexcept { return device_count_; }
  [[nodiscard]] bool valid_device(int device) const noexcept { return device >= 0 && device < device_count(); }
  [[nodiscard]] const std::string& selection_error() const noexcept { return selection_error_; }
  // "device queues", or "host threads: " and why.
  [[nodiscard]] const std::string& stream_engine() const noexcept { return stream_engine_; }

  [[nodiscard]] static int current_device() noexcept;
  // Whether the calling thread is a stream's own, running its host tasks.
  [[nodiscard]] static bool on_stream_thread() noexcept;
  [[nodiscard]] hipError_t set_current_device(int device) const noexcept;

  // Virtual memory management. The calls that change a reservation or its mappings act only on
  // reservations of the holder they are made for: the application's entry points use the default,
  // the runtime's pools pass Holder::runtime for their own ranges.
  [[nodiscard]] hipError_t reserve(void** ptr, std::size_t size, std::size_t alignment, void* hint,
                                   unsigned long long flags, Holder holder = Holder::application);
  [[nodiscard]] hipError_t free_reservation(void* ptr, std::size_t size, Holder holder = Holder::application);
  [[nodiscard]] hipError_t create(hipMemGenericAllocationHandle_t* handle, std::size_t size,
                                  const hipMemAllocationProp* properties, unsigned long long flags);
  [[nodiscard]] hipError_t release(hipMemGenericAllocationHandle_t handle);
  [[nodiscard]] hipError_t map(void* ptr, std::size_t size, std::size_t offset, hipMemGenericAllocationHandle_t handle,
                               unsigned long long flags, Holder holder = Holder::application);
  [[nodiscard]] hipError_t unmap(void* ptr, std::size_t size, Holder holder = Holder::application);
  [[nodiscard]] hipError_t set_access(void* ptr, std::size_t size, std::span<const hipMemAccessDesc> descriptors,
                                      Holder holder = Holder::application);
  [[nodiscard]] hipError_t get_access(unsigned long long* flags, const hipMemLocation* location, void* ptr);
  [[nodiscard]] hipError_t granularity(std::size_t* granularity, const hipMemAllocationProp* properties,
                                       hipMemAllocationGranularity_flags option) const;
  [[nodiscard]] hipError_t properties_of(hipMemAllocationProp* properties, hipMemGenericAllocationHandle_t handle);
  [[nodiscard]] hipError_t export_handle(void* shareable, hipMemGenericAllocationHandle_t handle,
                                         hipMemAllocationHandleType type, unsigned long long flags);
  [[nodiscard]] hipError_t import_handle(hipMemGenericAllocationHandle_t* handle, void* os_handle,
                                         hipMemAllocationHandleType type);
  [[nodiscard]] hipError_t retain(hipMemGenericAllocationHandle_t* handle, void* address,
                                  Holder holder = Holder::application);

  // Plain memory and data movement.
  [[nodiscard]] hipError_t allocate(void** ptr, std::size_t size);
  [[nodiscard]] hipError_t deallocate(void* ptr);
  // What hipFree of pool memory waits for before the memory goes: the streams of `device`, the
  // pool's, and those of the calling thread's device, which may reach it as a peer.
  void finish_streams_before_pool_free(int device);
  // Whether, from stream work the calling thread runs (a callback), waiting for every stream of
  // `device` (a device synchronize, hipFree), or for `device`'s null stream (a synchronous copy or
  // fill), would wait for that work itself: through its own stream, or through another stream that
  // waits for it (an event recorded after it, null-stream order). Refused with hipErrorIllegalState.
  [[nodiscard]] bool device_wait_reaches_running_work(int device) const;
  [[nodiscard]] bool null_stream_wait_reaches_running_work(int device) const;
  [[nodiscard]] hipError_t copy(void* dst, const void* src, std::size_t bytes, hipMemcpyKind kind);
  [[nodiscard]] hipError_t fill(void* dst, int value, std::size_t bytes);
  [[nodiscard]] hipError_t copy_async(void* dst, const void* src, std::size_t bytes, hipMemcpyKind kind,
                                      hipStream_t stream);
  [[nodiscard]] hipError_t fill_async(void* dst, int value, std::size_t bytes, hipStream_t stream);
  [[nodiscard]] hipError_t synchronize();

  // Streams and events.
  [[nodiscard]] StreamRegistry& streams() noexcept { return streams_; }
  [[nodiscard]] EventRegistry& events() noexcept { return events_; }
  [[nodiscard]] PoolRegistry& pools() noexcept { return pools_; }
  // Pools shared between processes: export, import, and imported pointers.
  [[nodiscard]] PoolSharing& pool_sharing() noexcept { return pool_sharing_; }

  // The stream-ordered allocator.
  [[nodiscard]] hipError_t allocate_async(void** ptr, std::size_t size, hipMemPool_t pool, hipStream_t stream);
  [[nodiscard]] hipError_t free_async(void* ptr, hipStream_t stream);
  // Managed memory.
  [[nodiscard]] hipError_t allocate_managed(void** ptr, std::size_t size, unsigned flags);
  [[nodiscard]] hipError_t prefetch(const void* ptr, std::size_t bytes, int device, hipStream_t stream);
  [[nodiscard]] hipError_t advise(const void* ptr, std::size_t bytes, hipMemoryAdvise advice, int device);
  // Every request answered, or none written.
  [[nodiscard]] hipError_t range_attributes(RangeQueries requests, const void* ptr, std::size_t bytes) const;
  [[nodiscard]] hipError_t attach(hipStream_t stream, void* ptr, std::size_t length, unsigned flags);
  [[nodiscard]] ManagedMemory& managed() noexcept { return managed_; }

  // Legacy IPC.
  [[nodiscard]] hipError_t ipc_get_handle(hipIpcMemHandle_t* handle, void* ptr);
  [[nodiscard]] hipError_t ipc_open(void** ptr, const hipIpcMemHandle_t& handle, unsigned flags);
  [[nodiscard]] hipError_t ipc_close(void* ptr);

  // What every synchronisation point does after waiting: honour the release thresholds of the
  // pools whose freed memory it made safe to release, the pools the waited-for streams used,
  // whichever device they belong to (and no others: their frees are no safer than before).
  void after_synchronize(const Stream& stream);
  void after_device_synchronize(int device);
  // Whether `device` may read (or write) `bytes` at `address`. Stream work is checked for the
  // stream's device, which runs it, not the caller's current device.
  [[nodiscard]] bool accessible(const void* address, std::size_t bytes, hipMemAccessFlags needed, int device) const;
  // False where `address` lies in a pool of this process and the range leaves the allocation that
  // holds it (or no allocation holds it): a copy or fill there would reach the pool's next block,
  // which the pool's mappings alone do not show. Asked without the runtime's lock, which the pool
  // registry's may not be taken under.
  [[nodiscard]] bool within_pool_allocation(const void* address, std::size_t bytes) const;
  // Inside managed memory, which device queues may not wait on or write to (CUDA refuses it).
  [[nodiscard]] bool in_managed_memory(const void* address, std::size_t bytes) const {
    return managed_.covers(reinterpret_cast<std::uintptr_t>(address), bytes);
  }
  // Whether a device queue may wait on or write the word itself: not in managed memory (the CUDA
  // driver refuses stream memory operations there) nor in the application's own host memory, which
  // a device without pageable-memory access would fault on (a CUDA fault spoils the whole context).
  // Other words are waited for and written by the stream's host thread.
  [[nodiscard]] bool queue_may_touch_word(const void* address, std::size_t bytes) const;
  [[nodiscard]] MemoryOwner owner_of(const void* address) const;
  // Single machine words, for stream wait/write value: `owner` is the word's owner when the work was
  // queued.
  [[nodiscard]] hipError_t load_word(const void* address, std::size_t bytes, MemoryOwner owner,
                                     std::uint64_t* value) const;
  [[nodiscard]] hipError_t store_word(void* address, std::size_t bytes, MemoryOwner owner, std::uint64_t value) const;

  [[nodiscard]] BookCounts counts() const;
  // How many mappings the reservation starting at `base` holds (hipxxGetReservationMappingCount).
  [[nodiscard]] hipError_t reservation_mapping_count(const void* base, std::size_t* count) const;
  // What the books know of an address (hipPointerGetAttributes).
  [[nodiscard]] hipError_t pointer_attributes(hipPointerAttribute_t* attributes, const void* ptr) const;

 private:
  [[nodiscard]] hipError_t attachable_system_memory(int device, const void* ptr, std::size_t length) const;
  // What instance() builds.
  [[nodiscard]] static Runtime process_runtime();

  // Inline: every VMM call checks its arguments with these before anything else.
  [[nodiscard]] bool valid_location(const hipMemLocation& location) const noexcept {
    return location.type == hipMemLocationTypeDevice && valid_device(location.id);
  }
  [[nodiscard]] bool granular(std::uintptr_t value) const noexcept {
    return (value & (std::uintptr_t{granularity_} - 1)) == 0;
  }
  [[nodiscard]] bool valid_location_or_host(int device) const noexcept {
    return device == hipCpuDeviceId || valid_device(device);
  }
  // Drops one application reference; the physical memory to free, once the books are unlocked, where
  // that was the last use.
  [[nodiscard]] std::optional<backend::PhysicalHandle> drop_reference_locked(Allocation& allocation);
  [[nodiscard]] hipError_t apply_access_locked(MappingRecord& mapping, const AccessList& access);
  // Undoes the booking of a map the backend refused; the physical memory to free, once the books are
  // unlocked, where that mapping was its last use.
  [[nodiscard]] std::optional<backend::PhysicalHandle> unbook_failed_map_locked(Reservation& reservation,
                                                                                std::uintptr_t address,
                                                                                Allocation& allocation,
                                                                                std::size_t size_before);
  // Books a new physical allocation; if the books cannot grow, releases it and rethrows.
  [[nodiscard]] hipMemGenericAllocationHandle_t book_allocation_locked(backend::PhysicalHandle physical,
                                                                       std::size_t size,
                                                                       const hipMemAllocationProp& properties);

  // What a map reads (the lock, the checks' figures, the backend's direct map, and the address
  // space's first members: its last-found reservation and its spare mapping nodes) shares the
  // object's first cache line, at an address fixed when the library loads (instance()). A map,
  // well under a microsecond in the CUDA driver, is often called where other work has pushed this
  // line out of the caches: one line to wait for, and no chain of lines each found through the last.
  mutable WriterPreferringLock mutex_;
  std::uint32_t granularity_ = 0;  // a power of two (checked at start-up), so a mask checks it
  int device_count_ = 0;  // fixed once the backend has started
  backend::DirectMap direct_map_;  // fixed once the backend has started
  mutable AddressSpace address_space_;
  std::unique_ptr<backend::Backend> backend_;
  AllocationTable allocations_;
  // Grants for every device, refilled by each set_access under the write lock: no allocation per call.
  std::vector<backend::AccessGrant> grants_scratch_;
  std::string selection_error_;
  std::string stream_engine_;
  [[nodiscard]] hipError_t check_copy(void* dst, const void* src, std::size_t bytes, int device) const;
  // Waits for the work queued on `device` (its streams', then the backend's), as hipFree does before
  // it lets memory go; refused (hipErrorIllegalState) on a thread that runs such work itself.
  [[nodiscard]] hipError_t finish_device_work(int device);
  // Waits for the streams of the calling thread's current device too, where that is not `device`
  // (the device whose memory hipFree lets go) and the thread does not run such work itself.
  void finish_calling_device_streams(int device);
  [[nodiscard]] MemoryOwner owner_of_locked(const void* address) const;
  [[nodiscard]] CopyOwners owners_of_locked(void* dst, const void* src) const;
  [[nodiscard]] hipError_t copy_now(void* dst, const void* src, std::size_t bytes, int device, CopyOwners owners) const;
  [[nodiscard]] hipError_t fill_now(void* dst, unsigned char value, std::size_t bytes, int device,
                                    MemoryOwner owner) const;
  // Runs `work` in null-stream order on the null stream's host thread, even where the stream has a
  // device queue: a synchronous copy or fill checks the memory under the books' lock as it goes, so
  // memory another thread unmaps meanwhile is refused, not touched. Returns the work's result.
  [[nodiscard]] hipError_t run_on_null_stream(int device, StreamTask work);
  // Device queues for new streams, unless the backend has none or HIPXX_STREAMS=host.
  [[nodiscard]] QueueFactory queue_factory();

  StreamRegistry streams_;
  EventRegistry events_;
  PoolRegistry pools_;
  ManagedMemory managed_;
  PeerAccess peer_access_;
  // Last, so it goes first: its broker thread and imported mirrors still use the rest.
  PoolSharing pool_sharing_{*this};
};

}  // namespace hipxx::core
