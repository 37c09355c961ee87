// The stream-ordered allocator. A pool reserves one large virtual range through the books at
// creation and maps physical chunks into it as allocations need them, so pool memory is ordinary
// mapped memory to every other part of the runtime (copies, access checks, retain).
//
// Allocation sizes are rounded to size classes (eight per power of two) so a freed block is reused
// by the next request of its class in constant time. A freed block remembers the stream and the
// point in that stream after which it is truly free; the reuse policies decide which other streams
// may take it and whether a dependency must be inserted first.
#pragma once

#include "core/flat_address_map.hpp"
#include "core/stream.hpp"

#include <hipxx/hip_runtime_api.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace hipxx::core {

class Runtime;

struct PoolAttributes {
  bool follow_event_dependencies = true;
  bool allow_opportunistic = true;
  bool allow_internal_dependencies = true;
  std::uint64_t release_threshold = 0;
  std::uint64_t reserved_high = 0;
  std::uint64_t used_high = 0;
};

// How a block may be handed to a stream other than the one that freed it.
struct PoolGrant {
  std::uintptr_t address = 0;
  // Set when the allocation must first wait for the freeing stream to reach `point`.
  std::shared_ptr<Stream> wait_stream;
  std::uint64_t wait_point = 0;
};

class MemoryPool {
 public:
  MemoryPool(Runtime& runtime, const hipMemPoolProps& properties, std::size_t chunk_bytes, std::size_t virtual_bytes,
             void* base);
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;
  ~MemoryPool();

  [[nodiscard]] static hipError_t create(Runtime& runtime, const hipMemPoolProps& properties,
                                         std::shared_ptr<MemoryPool>* out);

  [[nodiscard]] hipError_t allocate(std::size_t bytes, const std::shared_ptr<Stream>& stream, PoolGrant* grant);
  // Returns false when `address` is not a live allocation of this pool.
  [[nodiscard]] bool free(std::uintptr_t address, const std::shared_ptr<Stream>& stream);
  // Whether `address` is a live (allocated, not yet freed) allocation of this pool.
  [[nodiscard]] bool is_live(std::uintptr_t address) const;
  [[nodiscard]] bool owns(std::uintptr_t address) const noexcept {
    return address >= base_ && address - base_ < virtual_bytes_;
  }

  // Unmaps cached free memory until at most `keep_bytes` stay reserved.
  void trim_to(std::size_t keep_bytes);
  void trim_to_threshold();

  [[nodiscard]] hipError_t set_attribute(hipMemPoolAttr attribute, const void* value);
  [[nodiscard]] hipError_t get_attribute(hipMemPoolAttr attribute, void* value) const;
  [[nodiscard]] hipError_t set_access(const hipMemAccessDesc* descriptors, std::size_t count);
  [[nodiscard]] hipMemAccessFlags access(int device) const;

  [[nodiscard]] const hipMemPoolProps& properties() const noexcept { return properties_; }
  [[nodiscard]] int device() const noexcept { return properties_.location.id; }
  [[nodiscard]] std::size_t live_allocations() const;
  [[nodiscard]] std::uintptr_t base() const noexcept { return base_; }
  // Set once hipMemPoolDestroy has unnamed the pool; it then lives only for its allocations.
  void orphan() noexcept { orphaned_.store(true, std::memory_order_release); }
  [[nodiscard]] bool orphaned() const noexcept { return orphaned_.load(std::memory_order_acquire); }

 private:
  struct FreeBlock {
    std::uintptr_t offset = 0;
    std::size_t bytes = 0;
    // The freeing stream, weakly: a destroyed stream has finished its work, so its blocks are free,
    // and a cached block must not keep a destroyed stream's worker alive. `freed_on` only names it.
    const Stream* freed_on = nullptr;  // null: freed with no pending stream work (hipFree)
    std::weak_ptr<Stream> stream;      // empty for a null stream, which lives as long as the process

    // The freeing stream while it exists; null once it has been destroyed.
    [[nodiscard]] std::shared_ptr<Stream> freeing_stream() const {
      if (freed_on != nullptr && freed_on->traits().is_null) {
        return {std::shared_ptr<Stream>{}, const_cast<Stream*>(freed_on)};
      }
      return stream.lock();
    }
    std::uint64_t point = 0;
  };
  static constexpr std::size_t kClassCount = 8 * 64;

  [[nodiscard]] bool take_cached(std::size_t size_class, const std::shared_ptr<Stream>& stream, PoolGrant* grant);
  [[nodiscard]] hipError_t carve(std::size_t bytes, std::uintptr_t* offset);
  void uncarve(std::uintptr_t offset, std::size_t bytes);
  [[nodiscard]] std::size_t chunks_released_by(std::uintptr_t offset, std::size_t bytes) const;
  [[nodiscard]] hipError_t map_chunk(std::size_t chunk);
  void unmap_chunk(std::size_t chunk);
  void add_hole(std::uintptr_t offset, std::size_t bytes);
  [[nodiscard]] std::vector<hipMemAccessDesc> access_list() const;
  void note_used(std::int64_t delta);

  Runtime& runtime_;
  hipMemPoolProps properties_;
  std::size_t chunk_bytes_;
  std::size_t virtual_bytes_;
  std::uintptr_t base_;

  mutable std::mutex mutex_;
  PoolAttributes attributes_;
  std::vector<hipMemAccessFlags> access_;                      // per device
  FlatAddressMap<std::size_t> live_;                             // address -> class bytes
  std::array<std::vector<FreeBlock>, kClassCount> cached_;      // by size class
  std::map<std::uintptr_t, std::size_t> holes_;                  // uncarved space: offset -> bytes
  std::set<std::pair<std::size_t, std::uintptr_t>> holes_by_size_;
  std::vector<std::uint32_t> chunk_users_;                       // carved blocks touching each chunk
  std::size_t mapped_chunks_ = 0;
  std::uint64_t used_bytes_ = 0;
  std::atomic<bool> orphaned_{false};
};

// Rounds a request to its size class: at least 256 bytes, eight classes per power of two.
[[nodiscard]] std::size_t pool_class_bytes(std::size_t bytes) noexcept;
[[nodiscard]] std::size_t pool_class_index(std::size_t class_bytes) noexcept;

}  // namespace hipxx::core
