#include "core/pool_registry.hpp"
#include "core/rollback.hpp"

#include "core/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <new>

namespace hipxx::core {
namespace {

hipError_t check_properties(const Runtime& runtime, const hipMemPoolProps& properties) {
  if (properties.allocType != hipMemAllocationTypePinned || properties.location.type != hipMemLocationTypeDevice ||
      !runtime.valid_device(properties.location.id)) {
    return hipErrorInvalidValue;
  }
  switch (properties.handleTypes) {
    case hipMemHandleTypeNone:
    case hipMemHandleTypePosixFileDescriptor: break;
    case hipMemHandleTypeWin32:
    case hipMemHandleTypeWin32Kmt: return hipErrorNotSupported;
    default: return hipErrorInvalidValue;
  }
  const bool reserved_clear = std::all_of(std::begin(properties.reserved), std::end(properties.reserved),
                                          [](unsigned char byte) { return byte == 0; });
  return reserved_clear ? hipSuccess : hipErrorInvalidValue;
}

}  // namespace

PoolRegistry::PoolRegistry(Runtime& runtime, int device_count)
    : runtime_(runtime),
      default_pools_(static_cast<std::size_t>(device_count), nullptr),
      current_pools_(static_cast<std::size_t>(device_count), nullptr),
      default_published_(static_cast<std::size_t>(device_count)),
      current_published_(static_cast<std::size_t>(device_count)) {}

void PoolRegistry::publish_current_locked(int device) {
  const auto index = static_cast<std::size_t>(device);
  ihipMemPoolHandle_t* const current = current_pools_[index];
  const bool is_default = current == nullptr || current == default_pools_[index];
  current_published_[index].store(is_default ? default_published_[index].load(std::memory_order_relaxed) : nullptr,
                                  std::memory_order_release);
}

// Work queued before a free into the pool may still use its memory: that work's streams keep the
// pool alive until they have run it, as the last owners.
void PoolRegistry::retire(const std::shared_ptr<MemoryPool>& pool) {
  for (const std::shared_ptr<Stream>& stream : pool->pending_free_streams()) {
    try {
      stream->enqueue([pool] { return hipSuccess; });
    } catch (const std::bad_alloc&) {
      stream->synchronize();  // no memory to hand the stream the pool: its work is waited for here
    }
  }
}

hipMemPool_t PoolRegistry::add_locked(std::shared_ptr<MemoryPool> pool) {
  const std::uintptr_t id = numbers_.take();
  const auto listed = by_address_.emplace(pool->base(), pool).first;
  Rollback unlist{[&] { by_address_.erase(listed); }};
  named_.emplace(id, std::move(pool));
  unlist.keep();
  return reinterpret_cast<hipMemPool_t>(id);
}

hipError_t PoolRegistry::create(hipMemPool_t* pool, const hipMemPoolProps* properties) {
  if (pool == nullptr || properties == nullptr) return hipErrorInvalidValue;
  if (const hipError_t error = check_properties(runtime_, *properties); error != hipSuccess) return error;
  std::shared_ptr<MemoryPool> created;
  if (const hipError_t error = MemoryPool::create(runtime_, *properties, &created); error != hipSuccess) return error;
  std::lock_guard lock{mutex_};
  *pool = add_locked(std::move(created));
  return hipSuccess;
}

hipError_t PoolRegistry::destroy(hipMemPool_t pool) {
  std::shared_ptr<MemoryPool> doomed;
  bool unlisted = false;
  {
    std::lock_guard lock{mutex_};
    const auto found = named_.find(id_of(pool));
    if (found == named_.end() ||
        std::find(default_pools_.begin(), default_pools_.end(), pool) != default_pools_.end()) {
      return hipErrorInvalidValue;
    }
    doomed = found->second;
    doomed->orphan();
    named_.erase(found);
    // A device whose current pool this was goes back to its default pool.
    for (std::size_t device = 0; device < current_pools_.size(); ++device) {
      if (current_pools_[device] == pool) {
        current_pools_[device] = default_pools_[device];
        publish_current_locked(static_cast<int>(device));
      }
    }
    // Paired with Runtime::allocate_async's fence: an allocation racing this destroy either sees
    // the pool orphaned (and hands its block back) or is seen here, keeping the pool listed.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    unlisted = doomed->drained() && by_address_.erase(doomed->base()) > 0;
  }
  // The last reference may be this one: its memory is unmapped outside the registry's lock.
  if (unlisted) retire(doomed);
  doomed.reset();
  return hipSuccess;
}

std::shared_ptr<MemoryPool> PoolRegistry::resolve(hipMemPool_t pool) const {
  std::lock_guard lock{mutex_};
  const auto found = named_.find(id_of(pool));
  return found == named_.end() ? nullptr : found->second;
}

hipError_t PoolRegistry::default_pool_locked(int device, hipMemPool_t* pool) {
  hipMemPool_t& slot = default_pools_.at(static_cast<std::size_t>(device));
  if (slot == nullptr) {
    hipMemPoolProps properties{};
    properties.allocType = hipMemAllocationTypePinned;
    properties.handleTypes = hipMemHandleTypeNone;
    properties.location.type = hipMemLocationTypeDevice;
    properties.location.id = device;
    std::shared_ptr<MemoryPool> created;
    if (const hipError_t error = MemoryPool::create(runtime_, properties, &created); error != hipSuccess) return error;
    MemoryPool* const made = created.get();
    slot = add_locked(std::move(created));
    default_published_[static_cast<std::size_t>(device)].store(made, std::memory_order_release);
    publish_current_locked(device);
  }
  *pool = slot;
  return hipSuccess;
}

hipError_t PoolRegistry::default_pool(int device, hipMemPool_t* pool) {
  if (pool == nullptr) return hipErrorInvalidValue;
  if (!runtime_.valid_device(device)) return hipErrorInvalidDevice;
  std::lock_guard lock{mutex_};
  return default_pool_locked(device, pool);
}

hipError_t PoolRegistry::current_pool(int device, hipMemPool_t* pool) {
  if (pool == nullptr) return hipErrorInvalidValue;
  if (!runtime_.valid_device(device)) return hipErrorInvalidDevice;
  std::lock_guard lock{mutex_};
  ihipMemPoolHandle_t* const current = current_pools_.at(static_cast<std::size_t>(device));
  if (current != nullptr) {
    *pool = current;
    return hipSuccess;
  }
  return default_pool_locked(device, pool);
}

hipError_t PoolRegistry::allocation_pool(int device, std::shared_ptr<MemoryPool>* pool) {
  if (!runtime_.valid_device(device)) return hipErrorInvalidDevice;
  if (MemoryPool* const current =
          current_published_[static_cast<std::size_t>(device)].load(std::memory_order_acquire)) {
    *pool = std::shared_ptr<MemoryPool>{std::shared_ptr<MemoryPool>{}, current};
    return hipSuccess;
  }
  std::lock_guard lock{mutex_};
  hipMemPool_t handle = current_pools_.at(static_cast<std::size_t>(device));
  if (handle == nullptr) {
    if (const hipError_t error = default_pool_locked(device, &handle); error != hipSuccess) return error;
  }
  *pool = named_.at(id_of(handle));
  return hipSuccess;
}

hipError_t PoolRegistry::set_current_pool(int device, hipMemPool_t pool) {
  if (!runtime_.valid_device(device)) return hipErrorInvalidDevice;
  std::lock_guard lock{mutex_};
  const auto found = named_.find(id_of(pool));
  if (found == named_.end() || found->second->device() != device) return hipErrorInvalidValue;
  current_pools_.at(static_cast<std::size_t>(device)) = pool;
  publish_current_locked(device);
  return hipSuccess;
}

std::shared_ptr<MemoryPool> PoolRegistry::owner_of(std::uintptr_t address) const {
  for (const std::atomic<MemoryPool*>& published : default_published_) {
    MemoryPool* const pool = published.load(std::memory_order_acquire);
    if (pool != nullptr && pool->owns(address)) return {std::shared_ptr<MemoryPool>{}, pool};
  }
  std::lock_guard lock{mutex_};
  auto after = by_address_.upper_bound(address);
  if (after == by_address_.begin()) return nullptr;
  const std::shared_ptr<MemoryPool>& candidate = std::prev(after)->second;
  return candidate->owns(address) ? candidate : nullptr;
}

void PoolRegistry::forget_if_drained(const std::shared_ptr<MemoryPool>& pool) {
  if (!pool->orphaned()) return;
  std::shared_ptr<MemoryPool> released;
  {
    std::lock_guard lock{mutex_};
    if (!pool->orphaned() || !pool->drained()) return;
    const auto found = by_address_.find(pool->base());
    if (found == by_address_.end()) return;
    released = std::move(found->second);
    by_address_.erase(found);
  }
  retire(released);
}

void PoolRegistry::trim_to_thresholds(std::span<const PoolRef> used) {
  if (used.empty()) return;
  std::vector<std::shared_ptr<MemoryPool>> pools;
  {
    std::lock_guard lock{mutex_};
    for (const PoolRef& ref : used) {
      const auto found = by_address_.find(ref.base);
      if (found != by_address_.end() && found->second->serial() == ref.serial) pools.push_back(found->second);
    }
  }
  for (const std::shared_ptr<MemoryPool>& pool : pools) pool->trim_to_threshold();
}

}  // namespace hipxx::core
