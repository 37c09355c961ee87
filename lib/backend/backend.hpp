// The one interface between the books (lib/core) and the machinery that really reserves, backs and
// maps memory. Each call is the narrowest operation all three backends (host, ROCr, CUDA) can do
// exactly: one whole mapping per map/unmap/set_access call, one whole physical allocation per map,
// and a complete access list per set_access (ROCr replaces the permissions of every agent). The
// books check HIP's looser rules first, so a backend never sees a call it must half-apply.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace hipxx::backend {

// Backend-defined identity of a physical allocation: an fd on the host backend, an
// hsa_amd_vmem_alloc_handle_t on ROCr, a CUmemGenericAllocationHandle on CUDA.
struct PhysicalHandle {
  std::uint64_t value = 0;
  // Where the driver cannot export an imported handle again (CUDA), the backend keeps the fd the
  // handle came from, and that fd is its export; it travels with the handle, so export and release
  // need no lookup. -1 where there is none.
  int kept_fd = -1;
};

// What an imported fd tells of its allocation.
struct ImportedAllocation {
  std::size_t size = 0;  // 0: the backend cannot know it before the first map
  int device = -1;  // the device whose memory it is; -1: the backend cannot tell
};

struct DeviceProperties {
  std::string name;
  std::size_t minimum_granularity = 0;
  std::size_t recommended_granularity = 0;
  std::uint64_t total_memory = 0;
  int multiprocessor_count = 0;
  bool virtual_memory = false;
  bool posix_fd_export = false;
  bool integrated = false;
  bool managed_memory = false;
  bool concurrent_managed_access = false;
  // Whether the device may use memory the system allocated (malloc, mmap) without registering it,
  // and whether it does so through the host's own page tables.
  bool pageable_memory_access = false;
  bool pageable_memory_access_uses_host_page_tables = false;
};

// What a device may do with one mapping. The books pass one grant for every device, none included.
struct AccessGrant {
  int device = 0;
  hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
};

// How a queue compares a word with a value when it waits: HIP's Gte, Eq, And and Nor conditions, in
// this order (a device kernel relies on it).
enum class WaitCondition { at_least, equal, any_common_bit, some_bit_clear_in_both };

// A stream wait as HIP defines it: the word, and-ed with `mask`, compared with `value`.
struct WordWait {
  std::uint64_t value = 0;
  std::uint64_t mask = ~std::uint64_t{0};
  WaitCondition condition = WaitCondition::equal;
};

// All the bits of a 4- or 8-byte word.
[[nodiscard]] constexpr std::uint64_t width_mask_of(std::size_t bytes) noexcept {
  return bytes == sizeof(std::uint32_t) ? 0xFFFF'FFFFULL : ~0ULL;
}

// Whether `word` (of `width_mask`'s width) meets `wait`: Gte compares unsigned numbers, And asks for a
// set bit in common, Nor for a bit clear in both the word and the value (within the mask and width).
[[nodiscard]] inline bool meets(std::uint64_t word, const WordWait& wait, std::uint64_t width_mask) noexcept {
  const std::uint64_t masked = word & wait.mask;
  switch (wait.condition) {
    case WaitCondition::at_least: return masked >= wait.value;
    case WaitCondition::equal: return masked == wait.value;
    case WaitCondition::any_common_bit: return (masked & wait.value) != 0;
    case WaitCondition::some_bit_clear_in_both: return (~(masked | (wait.value & wait.mask)) & width_mask) != 0;
  }
  return false;
}

// A point in a queue that the device timestamps when it gets there (a CUevent on CUDA). Whether
// the point was passed is the stream's progress word's to say; this gives only the times.
class Timestamp {
 public:
  Timestamp() = default;
  Timestamp(const Timestamp&) = delete;
  Timestamp& operator=(const Timestamp&) = delete;
  Timestamp(Timestamp&&) = delete;
  Timestamp& operator=(Timestamp&&) = delete;
  virtual ~Timestamp() = default;

  // Milliseconds from `start`'s latest point to this one's; both must have been passed.
  [[nodiscard]] virtual hipError_t elapsed_since(const Timestamp& start, float* milliseconds) const = 0;
};

class Queue;

// A call a queue makes on a driver thread, in queue order, with the queue's status. The runtime
// allocates it with whatever the call needs after this base, and the queue passes it to `run`
// exactly once, which then owns it; `run` must not call the runtime. One allocation per call, and
// the driver's own callback argument is the call itself.
struct HostCall {
  void (*run)(HostCall* call, hipError_t status) = nullptr;
  // Set by Queue::host_call: where to mark the call's number once it has run.
  Queue* queue = nullptr;
  std::uint64_t sequence = 0;
};

// A backend's own in-order work queue on one device (a CUstream; a chain of signals on ROCr), so stream
// work runs on the device with no host thread in the way. The runtime numbers the work it puts on a
// queue and has the queue write a number, after that work, to a progress word in host memory where
// it needs to know when the queue gets there (a wait, an event, a pool's free): reading the word
// tells the books how far the queue got. A queue never waits on a word the host writes:
// GPUs multiplex queues onto a few hardware channels, and a queue held by such a wait can hold up
// the very work that would release it. Queues wait for each other only in ways the driver sees
// (wait_queue), and work the host must do first is held back on the host until it is done.
class Queue {
 public:
  Queue() = default;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;
  Queue(Queue&&) = delete;
  Queue& operator=(Queue&&) = delete;
  virtual ~Queue() = default;

  // The highest number the device has written so far.
  [[nodiscard]] virtual std::uint64_t progress() const noexcept = 0;
  // Has the device write `sequence` to the progress word once all earlier work is done; nothing
  // where the host call just queued as that number writes it itself (see host_call).
  [[nodiscard]] hipError_t mark(std::uint64_t sequence) {
    return sequence == marked_by_host_call_ ? hipSuccess : write_mark(sequence);
  }

  [[nodiscard]] virtual hipError_t copy(void* dst, const void* src, std::size_t bytes) = 0;
  [[nodiscard]] virtual hipError_t fill(void* dst, unsigned char value, std::size_t bytes) = 0;
  // One naturally aligned 4- or 8-byte word. hipErrorNotSupported where the device cannot do it
  // for this address (CUDA refuses managed memory): the runtime then does it on the host.
  [[nodiscard]] virtual hipError_t write_word(void* address, std::size_t bytes, std::uint64_t value) = 0;
  // Later work waits until the word meets `wait` (see meets); hipErrorNotSupported where the device
  // cannot evaluate that condition, and the runtime then waits on the host.
  [[nodiscard]] virtual hipError_t wait_word(const void* address, std::size_t bytes, const WordWait& wait) = 0;
  // Later work waits for all work queued on `other` so far (an event recorded there and waited on).
  [[nodiscard]] virtual hipError_t wait_queue(Queue& other) = 0;
  // Later work waits until the latest record of `timestamp` (on this queue or another) has passed;
  // hipErrorNotSupported where it cannot (a timestamp of another backend's).
  [[nodiscard]] virtual hipError_t wait_timestamp(Timestamp& timestamp) = 0;
  // The host did work number `sequence` itself, after everything queued before it had finished and
  // before anything later was queued: the progress word says so.
  virtual void complete(std::uint64_t sequence) noexcept = 0;
  // Queues `call` as work number `sequence`; once this succeeds the queue owns it until it hands it
  // to call->run. The thread that runs the call marks `sequence` itself after it, as complete()
  // does, so the mark that follows costs the device nothing: a callback needs no second driver call.
  [[nodiscard]] hipError_t host_call(HostCall* call, std::uint64_t sequence) {
    call->queue = this;
    call->sequence = sequence;
    const hipError_t queued = queue_host_call(call);
    if (queued == hipSuccess) marked_by_host_call_ = sequence;
    return queued;
  }
  [[nodiscard]] virtual hipError_t prefetch(const void* ptr, std::size_t bytes, int device) = 0;
  [[nodiscard]] virtual hipError_t record(Timestamp& timestamp) = 0;
  // An error the device reported for this queue's work, or hipSuccess (also while work is pending).
  [[nodiscard]] virtual hipError_t fault() = 0;
  // Whether the device gave up on the queue, so that work on it will never run and a wait for it
  // ends at the fault. Where a failure fails only its own work (the rest still runs, and reaches the
  // memory it names), a wait must go on until that work is done: freeing the memory sooner would
  // pull it out from under a running copy.
  [[nodiscard]] virtual bool abandoned() = 0;
  // Whether all work put on the queue so far has finished (the driver's stream query), for work
  // the runtime did not have marked.
  [[nodiscard]] virtual bool finished() = 0;
  // Returns once the queue has room for more work: a queue that keeps a bounded amount in flight
  // holds the thread that would queue beyond it until its oldest work is done. The runtime calls it
  // with none of its locks held, so that a full queue holds up no one but the thread that fills it;
  // queues whose driver keeps its own bound (or none) return at once.
  virtual void wait_for_room() {}

 protected:
  // What mark and host_call do on the device: the write of the progress word, and the call queued
  // so that, once it has run, it has call->queue complete call->sequence.
  [[nodiscard]] virtual hipError_t write_mark(std::uint64_t sequence) = 0;
  [[nodiscard]] virtual hipError_t queue_host_call(HostCall* call) = 0;

 private:
  // The number of the host call queued last. Only a stream's work, under the stream's lock, queues
  // or marks, so a plain number will do.
  std::uint64_t marked_by_host_call_ = 0;
};

// A map that is one call into a driver, which a backend may offer beside its virtual map(): the
// runtime keeps it next to its lock and calls it directly. A map through the backend object waits
// for that object's cache lines, its table of virtual functions and its table of driver entries,
// one after the other, each a cold line where the application has been doing other work; on an
// H100, where the driver's map takes under a microsecond, that part of the path cost as much as the
// runtime's lock and books together (bench/RESULTS.md). `call(context, ...)` returns 0 where the
// mapping was made; any other answer means it was not, and the runtime then asks map(), which
// tries again and says why it failed. The runtime makes the call without its lock, so it must be
// safe beside any other call into the backend from another thread, as a driver's own entry point is.
struct DirectMap {
  using Call = int (*)(std::uintptr_t context, void* va, std::size_t size, std::uint64_t physical) noexcept;
  Call call = nullptr;  // null: the backend has none, and the runtime uses map()
  std::uintptr_t context = 0;  // what `call` needs, as a number: the driver's entry point, say
};

class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  Backend(Backend&&) = delete;
  Backend& operator=(Backend&&) = delete;
  virtual ~Backend() = default;

  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  [[nodiscard]] virtual int device_count() const noexcept = 0;
  [[nodiscard]] virtual const DeviceProperties& device(int ordinal) const = 0;

  // Virtual address space. `alignment` is a power of two no smaller than the minimum granularity;
  // `hint` is a requested address, a multiple of `alignment` (or 0 for none), that may be ignored.
  [[nodiscard]] virtual hipError_t reserve(std::size_t size, std::size_t alignment, std::uintptr_t hint, void** va) = 0;
  [[nodiscard]] virtual hipError_t free_reservation(void* va, std::size_t size) = 0;

  // Physical memory.
  [[nodiscard]] virtual hipError_t create_physical(int device, std::size_t size, bool exportable,
                                                   PhysicalHandle* out) = 0;
  [[nodiscard]] virtual hipError_t release_physical(PhysicalHandle handle) = 0;
  // The caller owns the returned fd.
  [[nodiscard]] virtual hipError_t export_fd(PhysicalHandle handle, int* fd) = 0;
  // Does not take ownership of `fd`. Reports what the backend can tell of the allocation.
  [[nodiscard]] virtual hipError_t import_fd(int fd, PhysicalHandle* out, ImportedAllocation* facts) = 0;

  // One whole physical allocation into part of one reservation; no access until set_access.
  [[nodiscard]] virtual hipError_t map(void* va, std::size_t size, PhysicalHandle handle) = 0;
  // Asked once, when the runtime starts; what it gives must stay valid while the backend lives.
  [[nodiscard]] virtual DirectMap direct_map() const noexcept { return {}; }
  [[nodiscard]] virtual hipError_t unmap(void* va, std::size_t size) = 0;
  // Replaces the access of every device to one whole mapping (one grant per device). `handle` is the
  // allocation the mapping shows, for a backend that revokes access by mapping it afresh.
  [[nodiscard]] virtual hipError_t set_access(void* va, std::size_t size, std::span<const AccessGrant> grants,
                                              PhysicalHandle handle) = 0;

  // Data movement between any two addresses the books have validated.
  [[nodiscard]] virtual hipError_t copy(void* dst, const void* src, std::size_t bytes) = 0;
  [[nodiscard]] virtual hipError_t fill(void* dst, unsigned char value, std::size_t bytes) = 0;
  [[nodiscard]] virtual hipError_t synchronize(int device) = 0;
  // A snapshot of `device`'s memory: what is not in use now, by this process or any other, and
  // the total it can give out (DeviceProperties::total_memory), in bytes.
  [[nodiscard]] virtual hipError_t memory_info(int device, std::uint64_t* free, std::uint64_t* total) = 0;
  // Lets `device` use the plain allocations (allocate()) of `peer`, present and future, or takes
  // that back; the runtime keeps the books and calls this once per change. The host backend's
  // devices all reach all memory already.
  [[nodiscard]] virtual hipError_t set_peer_access(int /*device*/, int /*peer*/, bool /*enabled*/) {
    return hipSuccess;
  }
  // Whether `device` can be given access to `peer`'s memory (hipDeviceCanAccessPeer); a device is
  // never its own peer. Where the driver has no say, any two devices can.
  [[nodiscard]] virtual hipError_t can_access_peer(int device, int peer, bool* can) {
    *can = device != peer;
    return hipSuccess;
  }
  // One naturally aligned 4- or 8-byte word, read or written atomically (stream wait/write value).
  [[nodiscard]] virtual hipError_t load_word(const void* address, std::size_t bytes, std::uint64_t* value) = 0;
  [[nodiscard]] virtual hipError_t store_word(void* address, std::size_t bytes, std::uint64_t value) = 0;

  // Plain device allocations (hipMalloc); deallocate also frees managed memory.
  [[nodiscard]] virtual hipError_t allocate(int device, std::size_t size, void** out) = 0;
  [[nodiscard]] virtual hipError_t deallocate(void* ptr, std::size_t size) = 0;

  // Managed memory: one pointer valid on the host and on every device. `device` may be
  // hipCpuDeviceId where HIP allows the host as a location.
  [[nodiscard]] virtual hipError_t allocate_managed(std::size_t size, unsigned flags, void** out) = 0;
  [[nodiscard]] virtual hipError_t prefetch(const void* ptr, std::size_t bytes, int device) = 0;
  [[nodiscard]] virtual hipError_t advise(const void* ptr, std::size_t bytes, hipMemoryAdvise advice, int device) = 0;

  // Legacy IPC of plain allocations. The handle's 64 bytes are the backend's own format; a handle
  // from this same process is refused with hipErrorInvalidContext.
  [[nodiscard]] virtual hipError_t ipc_get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle) = 0;
  [[nodiscard]] virtual hipError_t ipc_open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size) = 0;
  [[nodiscard]] virtual hipError_t ipc_close(void* ptr, std::size_t size) = 0;

  // A queue of the backend's own for a stream, or null where the backend has none (the host
  // backend): the runtime then runs that stream's work on a host thread of its own. `null_stream`
  // asks for the device's legacy default queue where the backend has one, so that work of other
  // libraries on it (CUDA kernels on the default stream) meets HIP's null-stream order.
  [[nodiscard]] virtual std::unique_ptr<Queue> create_queue(int /*device*/, bool /*null_stream*/, bool /*blocking*/,
                                                            int /*priority*/) {
    return nullptr;
  }
  // Why create_queue gives null, or "" where it gives queues.
  [[nodiscard]] virtual std::string queues_unavailable() const { return "the backend has no device queues"; }
  // Null where create_queue is.
  [[nodiscard]] virtual std::unique_ptr<Timestamp> create_timestamp(int /*device*/, bool /*timing*/) { return nullptr; }
};

// Reads HIPXX_HOST_DEVICES; the embedded default, always available on Linux.
[[nodiscard]] std::unique_ptr<Backend> make_host_backend(int device_count);

// ROCr, opened with dlopen("libhsa-runtime64.so.1", or the path in HIPXX_ROCR_LIBRARY). Null, with the
// reason in `error`, where the library is absent or lacks the virtual memory API, hsa_init fails or
// ROCr reports no GPU agent.
[[nodiscard]] std::unique_ptr<Backend> make_rocr_backend(std::string& error);

// The CUDA driver, opened with dlopen("libcuda.so.1") (no build-time CUDA dependency). Null, with the
// reason in `error`, where the library is absent, cuInit fails or the driver reports no device.
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend(std::string& error);

}  // namespace hipxx::backend
