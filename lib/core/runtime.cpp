#include "core/runtime.hpp"
#include "core/rollback.hpp"
#include "core/whole_number.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <exception>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>

namespace hipxx::core {
namespace {

// Initial-exec: read on every call, and the runtime is linked, not opened late with dlopen.
__attribute__((tls_model("initial-exec"))) thread_local int current_device_ordinal = 0;
thread_local bool stream_thread = false;  // set by adopt_device, which only streams' threads call

constexpr int kMaxHostDevices = 64;

int host_device_count(std::string& error) {
  const char* text = std::getenv("HIPXX_HOST_DEVICES");
  if (text == nullptr || *text == '\0') return 1;
  const std::optional<long> count = whole_number(text, 1, kMaxHostDevices);
  if (!count) {
    error = "HIPXX_HOST_DEVICES must be a whole number from 1 to 64, not '" + std::string{text} + "'";
    return 0;
  }
  return static_cast<int>(*count);
}

}  // namespace

// Returned as a value, which the caller's static storage holds directly (no copy or move: a
// runtime has neither).
Runtime Runtime::process_runtime() {
  const char* text = std::getenv("HIPXX_BACKEND");
  const std::string_view choice = text == nullptr || *text == '\0' ? std::string_view{"auto"} : text;
  std::string error;
  // auto: ROCr where it finds a GPU agent, then CUDA where the driver finds a device, else the host
  // backend. Why auto passed a GPU backend over is not an error.
  if (choice == "rocr" || choice == "auto") {
    if (auto rocr = backend::make_rocr_backend(error)) return Runtime{std::move(rocr)};
    if (choice == "rocr") return Runtime{nullptr, error};
    error.clear();
  }
  if (choice == "cuda" || choice == "auto") {
    if (auto cuda = backend::make_cuda_backend(error)) return Runtime{std::move(cuda)};
    if (choice == "cuda") return Runtime{nullptr, error};
    error.clear();
  }
  if (choice == "host" || choice == "auto") {
    const int devices = host_device_count(error);
    if (devices == 0) return Runtime{nullptr, error};
    return Runtime{backend::make_host_backend(devices)};
  }
  error = "HIPXX_BACKEND must be host, rocr, cuda or auto, not '" + std::string{choice} + "'";
  return Runtime{nullptr, error};
}

Runtime::Runtime(std::unique_ptr<backend::Backend> backend, std::string selection_error)
    : backend_(std::move(backend)),
      selection_error_(std::move(selection_error)),
      streams_(backend_ ? backend_->device_count() : 0, queue_factory()),
      pools_(*this, backend_ ? backend_->device_count() : 0),
      managed_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {
  // A mapping's access list holds AccessList::kMaxDevices devices (the host backend's limit too);
  // a machine with more GPUs shows the first ones.
  device_count_ = backend_ ? std::min(backend_->device_count(), AccessList::kMaxDevices) : 0;
  if (device_count_ == 0) return;
  // Every backend's granularity is a power of two (a page, or 2 MiB), which the checks test with a mask.
  const std::size_t granularity = backend_->device(0).minimum_granularity;
  if (!std::has_single_bit(granularity) || granularity > std::numeric_limits<std::uint32_t>::max()) {
    device_count_ = 0;
    selection_error_ = "the " + std::string{backend_->name()} + " backend's granularity (" +
                       std::to_string(granularity) + " bytes) is not a power of two of at most 4 GiB";
    return;
  }
  granularity_ = static_cast<std::uint32_t>(granularity);
  direct_map_ = backend_->direct_map();
}

int Runtime::current_device() noexcept { return current_device_ordinal; }

QueueFactory Runtime::queue_factory() {
  // HIPXX_STREAMS=host keeps stream work on host threads on every backend: for comparison, and
  // as a way around a device queue that misbehaves.
  const char* const choice = std::getenv("HIPXX_STREAMS");
  if (!backend_) return {};
  if (choice != nullptr && std::string_view{choice} == "host") {
    stream_engine_ = "host threads: HIPXX_STREAMS=host";
    return {};
  }
  if (const std::string why = backend_->queues_unavailable(); !why.empty()) {
    stream_engine_ = "host threads: " + why;
    return {};
  }
  stream_engine_ = "device queues";
  return [this](const StreamTraits& traits) {
    return backend_->create_queue(traits.device, traits.is_null, (traits.flags & hipStreamNonBlocking) == 0,
                                  traits.priority);
  };
}

void adopt_device(int device) noexcept {
  current_device_ordinal = device;
  stream_thread = true;
}

bool Runtime::on_stream_thread() noexcept { return stream_thread; }

hipError_t Runtime::set_current_device(int device) const noexcept {
  if (!valid_device(device)) return hipErrorInvalidDevice;
  current_device_ordinal = device;
  return hipSuccess;
}

hipError_t Runtime::allocate(void** ptr, std::size_t size) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  if (size == 0) {
    *ptr = nullptr;
    return hipSuccess;
  }
  const int device = current_device();
  std::unique_lock lock{mutex_};
  void* at = nullptr;
  if (const hipError_t error = backend_->allocate(device, size, &at); error != hipSuccess) return error;
  Rollback deallocate{[&] { (void)backend_->deallocate(at, size); }};
  address_space_.add_linear({.base = reinterpret_cast<std::uintptr_t>(at), .size = size, .device = device});
  deallocate.keep();
  *ptr = at;
  return hipSuccess;
}

bool Runtime::device_wait_reaches_running_work(int device) const {
  return streams_.waits_for_running_work(device, false);
}

bool Runtime::null_stream_wait_reaches_running_work(int device) const {
  return streams_.waits_for_running_work(device, true);
}

hipError_t Runtime::finish_device_work(int device) {
  if (device_wait_reaches_running_work(device)) return hipErrorIllegalState;
  // A stream's failure is its synchronize's to report; what waited here goes on all the same.
  (void)streams_.synchronize_device(device);
  return backend_->synchronize(device);
}

void Runtime::finish_streams_before_pool_free(int device) {
  (void)streams_.synchronize_device(device);
  finish_calling_device_streams(device);
}

void Runtime::finish_calling_device_streams(int device) {
  const int current = current_device();
  if (current != device && valid_device(current) && !device_wait_reaches_running_work(current)) {
    (void)streams_.synchronize_device(current);
  }
}

hipError_t Runtime::deallocate(void* ptr) {
  if (ptr == nullptr) return hipSuccess;
  if (const std::shared_ptr<MemoryPool> pool = pools_.owner_of(reinterpret_cast<std::uintptr_t>(ptr))) {
    // hipFree of a stream-ordered allocation waits for the device, then frees at once. A stream of
    // the calling thread's device may use it too (a pool may serve another device's streams).
    if (device_wait_reaches_running_work(pool->device())) return hipErrorIllegalState;
    finish_streams_before_pool_free(pool->device());
    if (!pool->free(reinterpret_cast<std::uintptr_t>(ptr), nullptr)) return hipErrorInvalidValue;
    pools_.forget_if_drained(pool);
    return hipSuccess;
  }
  // A pointer imported from another process's pool is freed there (core/pool_sharing.hpp).
  if (const auto freed = pool_sharing_.free_imported(reinterpret_cast<std::uintptr_t>(ptr), nullptr)) return *freed;
  int device = 0;
  {
    std::shared_lock lock{mutex_};
    const LinearAllocation* linear = address_space_.linear_containing(reinterpret_cast<std::uintptr_t>(ptr));
    // Memory opened with hipIpcOpenMemHandle is closed with hipIpcCloseMemHandle, never freed.
    if (linear == nullptr || linear->base != reinterpret_cast<std::uintptr_t>(ptr) ||
        linear->kind == LinearKind::ipc_opened) {
      return hipErrorInvalidValue;
    }
    device = linear->device;
  }
  // Like hipFree on a GPU: queued work that may still use the memory finishes first, on its
  // device and on the calling thread's (which may reach it as a peer).
  if (const hipError_t error = finish_device_work(device); error != hipSuccess) return error;
  finish_calling_device_streams(device);
  std::unique_lock lock{mutex_};
  const auto taken = address_space_.take_linear(reinterpret_cast<std::uintptr_t>(ptr));
  if (!taken) return hipErrorInvalidValue;  // another thread freed it meanwhile
  if (taken->kind == LinearKind::managed) managed_.remove(taken->base);
  return backend_->deallocate(ptr, taken->size);
}

namespace {
bool known_direction(hipMemcpyKind kind) noexcept {
  switch (kind) {
    case hipMemcpyHostToHost:
    case hipMemcpyHostToDevice:
    case hipMemcpyDeviceToHost:
    case hipMemcpyDeviceToDevice:
    case hipMemcpyDefault:
    case hipMemcpyDeviceToDeviceNoCU: return true;
  }
  return false;
}
}  // namespace

bool Runtime::within_pool_allocation(const void* address, std::size_t bytes) const {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const std::shared_ptr<MemoryPool> pool = pools_.owner_of(at);
  return !pool || pool->within_one_allocation(at, bytes);
}

bool Runtime::accessible(const void* address, std::size_t bytes, hipMemAccessFlags needed, int device) const {
  if (!within_pool_allocation(address, bytes)) return false;
  std::shared_lock lock{mutex_};
  return address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(address), bytes, device, needed);
}

hipError_t Runtime::check_copy(void* dst, const void* src, std::size_t bytes, int device) const {
  const bool ok =
      address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(dst), bytes, device,
                                      hipMemAccessFlagsProtReadWrite) &&
      address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(src), bytes, device, hipMemAccessFlagsProtRead);
  return ok ? hipSuccess : hipErrorInvalidValue;
}

MemoryOwner Runtime::owner_of_locked(const void* address) const {
  return address_space_.tracked(reinterpret_cast<std::uintptr_t>(address)) ? MemoryOwner::runtime
                                                                           : MemoryOwner::application;
}

CopyOwners Runtime::owners_of_locked(void* dst, const void* src) const {
  return {.dst = owner_of_locked(dst), .src = owner_of_locked(src)};
}

MemoryOwner Runtime::owner_of(const void* address) const {
  std::shared_lock lock{mutex_};
  return owner_of_locked(address);
}

// Checked again under the lock when the work runs: the memory may have been unmapped or freed since
// the call was queued, and then the stream reports an illegal address instead of touching it.
hipError_t Runtime::copy_now(void* dst, const void* src, std::size_t bytes, int device, CopyOwners owners) const {
  std::shared_lock lock{mutex_};
  const CopyOwners now = owners_of_locked(dst, src);
  if (now.dst != owners.dst || now.src != owners.src || check_copy(dst, src, bytes, device) != hipSuccess) {
    return hipErrorIllegalAddress;
  }
  return backend_->copy(dst, src, bytes);
}

hipError_t Runtime::fill_now(void* dst, unsigned char value, std::size_t bytes, int device, MemoryOwner owner) const {
  std::shared_lock lock{mutex_};
  if (owner_of_locked(dst) != owner || !address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(dst), bytes,
                                                                        device, hipMemAccessFlagsProtReadWrite)) {
    return hipErrorIllegalAddress;
  }
  return backend_->fill(dst, value, bytes);
}

hipError_t Runtime::run_on_null_stream(int device, StreamTask work) {
  const std::shared_ptr<Stream> null_stream = streams_.resolve(nullptr, device);
  if (!null_stream) return hipErrorInvalidHandle;
  // The caller waits for its own work, not for the stream to get past it: a queue that faulted
  // ends waits on the stream at once, while the work, which borrows the caller's arguments, is
  // still to run. Its result goes to the caller, not to the null stream's failures, so later work
  // of the stream is not blamed for it.
  auto finished = std::make_shared<std::promise<hipError_t>>();
  std::future<hipError_t> result = finished->get_future();
  // A null stream is never destroyed, so the work is never refused.
  (void)streams_.enqueue(*null_stream, [finished, work = std::move(work)] {
    try {
      finished->set_value(work());
    } catch (...) {
      finished->set_exception(std::current_exception());
    }
    return hipSuccess;
  });
  return result.get();
}

hipError_t Runtime::copy(void* dst, const void* src, std::size_t bytes, hipMemcpyKind kind) {
  if (!known_direction(kind)) return hipErrorInvalidMemcpyDirection;
  if (bytes == 0) return hipSuccess;
  if (dst == nullptr || src == nullptr) return hipErrorInvalidValue;
  if (!within_pool_allocation(dst, bytes) || !within_pool_allocation(src, bytes)) return hipErrorInvalidValue;
  const int device = current_device();
  CopyOwners owners;
  {
    std::shared_lock lock{mutex_};
    if (const hipError_t error = check_copy(dst, src, bytes, device); error != hipSuccess) return error;
    if (streams_.device_idle(device)) return backend_->copy(dst, src, bytes);
    owners = owners_of_locked(dst, src);
  }
  if (null_stream_wait_reaches_running_work(device)) return hipErrorIllegalState;
  return run_on_null_stream(device, [&] { return copy_now(dst, src, bytes, device, owners); });
}

hipError_t Runtime::fill(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) return hipSuccess;
  if (dst == nullptr || !within_pool_allocation(dst, bytes)) return hipErrorInvalidValue;
  const int device = current_device();
  const auto byte = static_cast<unsigned char>(value);
  MemoryOwner owner = MemoryOwner::application;
  {
    std::shared_lock lock{mutex_};
    if (!address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(dst), bytes, device,
                                         hipMemAccessFlagsProtReadWrite)) {
      return hipErrorInvalidValue;
    }
    if (streams_.device_idle(device)) return backend_->fill(dst, byte, bytes);
    owner = owner_of_locked(dst);
  }
  if (null_stream_wait_reaches_running_work(device)) return hipErrorIllegalState;
  return run_on_null_stream(device, [&] { return fill_now(dst, byte, bytes, device, owner); });
}

hipError_t Runtime::copy_async(void* dst, const void* src, std::size_t bytes, hipMemcpyKind kind, hipStream_t stream) {
  if (!known_direction(kind)) return hipErrorInvalidMemcpyDirection;
  const int device = current_device();
  const std::shared_ptr<Stream> target = streams_.resolve(stream, device);
  if (!target) return hipErrorInvalidHandle;
  if (bytes == 0) return hipSuccess;
  if (dst == nullptr || src == nullptr) return hipErrorInvalidValue;
  if (!within_pool_allocation(dst, bytes) || !within_pool_allocation(src, bytes)) return hipErrorInvalidValue;
  // The stream's device runs the copy, and copy_now checks for it again when it does: memory it
  // cannot reach is refused here rather than skipped there.
  const int stream_device = target->traits().device;
  CopyOwners owners;
  {
    std::shared_lock lock{mutex_};
    if (const hipError_t error = check_copy(dst, src, bytes, stream_device); error != hipSuccess) return error;
    owners = owners_of_locked(dst, src);
  }
  const bool host_memory = owners.dst == MemoryOwner::application || owners.src == MemoryOwner::application;
  // A device queue's copy to or from the application's own host memory would hold the calling
  // thread until the queue got there (CUDA stages pageable memory that way); the stream's host
  // thread does those copies instead, so hipMemcpyAsync stays asynchronous.
  return streams_.enqueue(
      *target,
      [=](backend::Queue& queue, std::uint64_t /*sequence*/) {
        return host_memory ? hipErrorNotSupported : queue.copy(dst, src, bytes);
      },
      [this, dst, src, bytes, stream_device, owners] { return copy_now(dst, src, bytes, stream_device, owners); });
}

hipError_t Runtime::fill_async(void* dst, int value, std::size_t bytes, hipStream_t stream) {
  const int device = current_device();
  const std::shared_ptr<Stream> target = streams_.resolve(stream, device);
  if (!target) return hipErrorInvalidHandle;
  if (bytes == 0) return hipSuccess;
  if (dst == nullptr || !within_pool_allocation(dst, bytes)) return hipErrorInvalidValue;
  // As for copies: checked for the device that runs the fill, which checks again when it does.
  const int stream_device = target->traits().device;
  MemoryOwner owner = MemoryOwner::application;
  {
    std::shared_lock lock{mutex_};
    if (!address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(dst), bytes, stream_device,
                                         hipMemAccessFlagsProtReadWrite)) {
      return hipErrorInvalidValue;
    }
    owner = owner_of_locked(dst);
  }
  const auto byte = static_cast<unsigned char>(value);
  return streams_.enqueue(
      *target, [=](backend::Queue& queue, std::uint64_t /*sequence*/) { return queue.fill(dst, byte, bytes); },
      [this, dst, byte, bytes, stream_device, owner] { return fill_now(dst, byte, bytes, stream_device, owner); });
}

bool Runtime::queue_may_touch_word(const void* address, std::size_t bytes) const {
  if (in_managed_memory(address, bytes)) return false;
  std::shared_lock lock{mutex_};
  return address_space_.tracked(reinterpret_cast<std::uintptr_t>(address));
}

// Checked again at every use, under the lock: the word may have been freed or unmapped while a
// wait was queued, and then the stream reports an illegal address instead of touching it.
hipError_t Runtime::load_word(const void* address, std::size_t bytes, MemoryOwner owner, std::uint64_t* value) const {
  std::shared_lock lock{mutex_};
  if (owner_of_locked(address) != owner ||
      !address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(address), bytes, current_device(),
                                       hipMemAccessFlagsProtRead)) {
    return hipErrorIllegalAddress;
  }
  return backend_->load_word(address, bytes, value);
}

hipError_t Runtime::store_word(void* address, std::size_t bytes, MemoryOwner owner, std::uint64_t value) const {
  std::shared_lock lock{mutex_};
  if (owner_of_locked(address) != owner ||
      !address_space_.device_may_touch(reinterpret_cast<std::uintptr_t>(address), bytes, current_device(),
                                       hipMemAccessFlagsProtReadWrite)) {
    return hipErrorIllegalAddress;
  }
  return backend_->store_word(address, bytes, value);
}

hipError_t Runtime::synchronize() {
  const int device = current_device();
  if (device_wait_reaches_running_work(device)) return hipErrorIllegalState;
  // Work that failed on any stream of the device is reported here, as HIP reports an earlier
  // asynchronous failure at the next synchronize; the device's own failure comes first.
  const hipError_t streams_failure = streams_.synchronize_device(device);
  const hipError_t result = backend_->synchronize(device);
  after_device_synchronize(device);
  return result != hipSuccess ? result : streams_failure;
}

void Runtime::after_synchronize(const Stream& stream) {
  pools_.trim_to_thresholds(streams_.pools_synchronized_by(stream));
}

void Runtime::after_device_synchronize(int device) {
  pools_.trim_to_thresholds(streams_.pools_synchronized_on(device));
}

hipError_t Runtime::allocate_async(void** ptr, std::size_t size, hipMemPool_t pool, hipStream_t stream) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  // By reference, into this thread's cache: nothing below resolves another stream.
  const std::shared_ptr<Stream>& target = streams_.resolve(stream, current_device());
  if (!target) return hipErrorInvalidHandle;
  PoolGrant grant;
  for (;;) {
    grant = PoolGrant{};  // nothing of a grant handed back below carries over to the next pool's
    std::shared_ptr<MemoryPool> source;
    if (pool == nullptr) {
      if (const hipError_t error = pools_.allocation_pool(target->traits().device, &source); error != hipSuccess) {
        return error;
      }
    } else {
      source = pools_.resolve(pool);
      if (!source) return hipErrorInvalidValue;
    }
    if (size == 0) {
      *ptr = nullptr;
      return hipSuccess;
    }
    if (const hipError_t error = source->allocate(size, target, &grant); error != hipSuccess) return error;
    // A pool destroyed meanwhile may have found itself drained before this allocation counted, and
    // gone: the block is handed back rather than out. The fences pair with PoolRegistry::destroy's,
    // so that this thread sees the destroy or the destroy sees the allocation (then the pool stays
    // until the block comes back, here).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!source->orphaned()) break;
    (void)source->free(grant.address, nullptr);
    pools_.forget_if_drained(source);
    // A pool the caller named is gone. The device's current pool, which the caller did not name, has
    // been replaced (by its default pool, or whichever pool that thread set): that one serves.
    if (pool != nullptr) return hipErrorInvalidValue;
  }
  if (grant.wait_stream) {
    // Reuse across streams with no order between them: the allocating stream waits for the free.
    bool queued = false;
    try {
      queued = streams_.enqueue_wait(*target, grant.wait_stream, grant.wait_point);
    } catch (const std::bad_alloc&) {
      // No memory to queue the wait: below.
    }
    // Not queued (no memory, or the stream was destroyed meanwhile by another thread): the free is
    // waited for here, and the block is the caller's all the same.
    if (!queued) grant.wait_stream->wait_for(grant.wait_point);
  }
  *ptr = reinterpret_cast<void*>(grant.address);
  return hipSuccess;
}

hipError_t Runtime::free_async(void* ptr, hipStream_t stream) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  // By reference, into this thread's cache: nothing below resolves another stream.
  const std::shared_ptr<Stream>& target = streams_.resolve(stream, current_device());
  if (!target) return hipErrorInvalidHandle;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const std::shared_ptr<MemoryPool> pool = pools_.owner_of(address);
  if (!pool || !pool->is_live(address)) {
    // Not ours: perhaps a pointer imported from another process's pool (asked only now, so frees of
    // this process's own pool memory never look there).
    return pool_sharing_.free_imported(address, target).value_or(hipErrorInvalidValue);
  }
  // The free takes its place in stream order like any other work: the pool records the stream's
  // tail, which covers all work that may still use the block. Where a null-stream barrier would
  // come first (a free on the null stream comes after earlier work of blocking streams, and the
  // reverse), an empty task puts it in the queue, so the recorded point lies behind it; otherwise
  // nothing is queued, which keeps the common free off the stream's worker. A pool unnamed by
  // hipMemPoolDestroy outlives the work queued before its frees (PoolRegistry::retire).
  if (streams_.would_wait_for_others(*target)) {
    if (const hipError_t error = streams_.enqueue(
            *target, [](backend::Queue&, std::uint64_t /*sequence*/) { return hipSuccess; }, [] { return hipSuccess; });
        error != hipSuccess) {
      return error;
    }
  }
  if (!pool->free(address, target)) return hipErrorInvalidValue;
  pools_.forget_if_drained(pool);
  return hipSuccess;
}

hipError_t Runtime::pointer_attributes(hipPointerAttribute_t* attributes, const void* ptr) const {
  if (attributes == nullptr || ptr == nullptr) return hipErrorInvalidValue;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  hipPointerAttribute_t found{};
  found.type = hipMemoryTypeUnregistered;
  found.device = hipInvalidDeviceId;
  std::shared_lock lock{mutex_};
  if (const LinearAllocation* linear = address_space_.linear_containing(address)) {
    const bool managed = linear->kind == LinearKind::managed;
    found.type = managed ? hipMemoryTypeManaged : hipMemoryTypeDevice;
    found.device = linear->device;
    // HIP's struct has non-const pointers; the caller's memory is not written through them.
    found.devicePointer = const_cast<void*>(ptr);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    found.hostPointer = managed ? const_cast<void*>(ptr) : nullptr;  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    found.isManaged = managed ? 1 : 0;
  } else if (const MappingRecord* mapping = address_space_.mapping_containing(address)) {
    found.type = hipMemoryTypeDevice;
    found.device = mapping->allocation->properties.location.id;
    found.devicePointer = const_cast<void*>(ptr);  // NOLINT(cppcoreguidelines-pro-type-const-cast): as above
  }
  // Memory the books do not know is the host's own, unregistered: reported, not refused.
  *attributes = found;
  return hipSuccess;
}

BookCounts Runtime::counts() const {
  std::shared_lock lock{mutex_};
  return {.reservations = address_space_.reservation_count(),
          .mappings = address_space_.mapping_count(),
          .allocations = allocations_.size(),
          .linear_allocations = address_space_.linear_count()};
}

}  // namespace hipxx::core
