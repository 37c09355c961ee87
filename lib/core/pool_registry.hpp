// The pools the application can name: hipMemPool_t values are never-reused numbers. Each device
// has a default pool, created on first use, and a current pool that hipMallocAsync draws from. A
// destroyed pool with outstanding allocations stays alive, unnamed, until the last one is freed.
#pragma once

#include "core/handle_numbers.hpp"
#include "core/memory_pool.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

namespace hipxx::core {

// A pool handle as the number the registry files it under.
[[nodiscard]] inline std::uintptr_t id_of(hipMemPool_t pool) noexcept { return reinterpret_cast<std::uintptr_t>(pool); }

class PoolRegistry {
 public:
  explicit PoolRegistry(Runtime& runtime, int device_count);

  [[nodiscard]] hipError_t create(hipMemPool_t* pool, const hipMemPoolProps* properties);
  [[nodiscard]] hipError_t destroy(hipMemPool_t pool);
  [[nodiscard]] std::shared_ptr<MemoryPool> resolve(hipMemPool_t pool) const;

  [[nodiscard]] hipError_t default_pool(int device, hipMemPool_t* pool);
  [[nodiscard]] hipError_t current_pool(int device, hipMemPool_t* pool);
  [[nodiscard]] hipError_t set_current_pool(int device, hipMemPool_t pool);
  // The pool hipMallocAsync draws from on `device`, in one look-up. A default pool comes back
  // without ownership (see owner_of).
  [[nodiscard]] hipError_t allocation_pool(int device, std::shared_ptr<MemoryPool>* pool);

  // The pool (live or destroyed) whose range holds `address`. A default pool comes back without
  // ownership, read without the lock: it lives as long as the process, and every thread's
  // allocations would otherwise share its reference count. A weak_ptr made from one is expired.
  [[nodiscard]] std::shared_ptr<MemoryPool> owner_of(std::uintptr_t address) const;
  // Lets a destroyed pool go once its last allocation is freed.
  void forget_if_drained(const std::shared_ptr<MemoryPool>& pool);
  // Synchronisation points honour the release thresholds of the pools they made releasable memory
  // in; pools since destroyed and let go are skipped.
  void trim_to_thresholds(std::span<const PoolRef> pools);

 private:
  [[nodiscard]] hipError_t default_pool_locked(int device, hipMemPool_t* pool);
  hipMemPool_t add_locked(std::shared_ptr<MemoryPool> pool);
  void publish_current_locked(int device);
  // Has the streams with frees into a pool the registry no longer lists keep it alive; the caller then
  // drops the registry's reference.
  static void retire(const std::shared_ptr<MemoryPool>& pool);

  Runtime& runtime_;
  mutable std::mutex mutex_;
  HandleNumbers numbers_{HandleKind::pool, 0x7000};
  std::unordered_map<std::uintptr_t, std::shared_ptr<MemoryPool>> named_;
  std::map<std::uintptr_t, std::shared_ptr<MemoryPool>> by_address_;  // named and destroyed-but-busy
  std::vector<hipMemPool_t> default_pools_;
  std::vector<hipMemPool_t> current_pools_;
  // Default pools are never destroyed, so the hot paths read them without the lock. The current
  // pool is published only while it is the default: any other may be destroyed at any time.
  std::vector<std::atomic<MemoryPool*>> default_published_;
  std::vector<std::atomic<MemoryPool*>> current_published_;
};

}  // namespace hipxx::core
