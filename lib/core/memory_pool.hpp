// The stream-ordered allocator. A pool reserves one large virtual range through the books at
// creation and maps physical chunks into it as allocations need them, so pool memory is ordinary
// mapped memory to every other part of the runtime (copies, access checks, retain).
//
// Allocation sizes are rounded to size classes (eight per power of two) so a freed block is reused
// by the next request of its class in constant time. A freed block remembers the stream and the
// point in that stream after which it is truly free; the reuse policies decide which other streams
// may take it and whether a dependency must be inserted first.
//
// Allocation and free are the hot path, so neither takes the pool's lock when it can help it: each
// stream keeps the blocks freed on it in a list of its own (reusing them on that stream is always
// legal in stream order), which addresses are live is kept in a table of atomics, and the used
// bytes are counted per thread (core/pool_usage.hpp) so that threads do not share a counter. The pool's
// lock guards the layout (holes, chunks), the attributes, blocks that belong to no stream, and the
// set of stream lists, which trimming and other streams' allocations search under it.
#pragma once

#include "core/chunk_users.hpp"
#include "core/pool_access.hpp"
#include "core/pool_usage.hpp"
#include "core/stream.hpp"

#include <hipxx/hip_runtime_api.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

namespace hipxx::core {

class Runtime;

struct PoolAttributes {
  bool follow_event_dependencies = true;
  bool allow_opportunistic = true;
  bool allow_internal_dependencies = true;
  std::uint64_t release_threshold = 0;
  std::uint64_t reserved_high = 0;
};

// How a block may be handed to a stream other than the one that freed it.
struct PoolGrant {
  std::uintptr_t address = 0;
  // Set when the allocation must first wait for the freeing stream to reach `point`.
  std::shared_ptr<Stream> wait_stream;
  std::uint64_t wait_point = 0;
};

// Held for a few instructions, nearly always by the one thread that uses a stream: an uncontended
// lock and unlock are one atomic exchange and one store, cheaper than a std::mutex pair.
class SpinLock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// Which 256-byte granules of a pool start a live allocation, and of which size class. Read and
// changed with atomics, so a free is checked (live, not interior, not freed twice) without a lock.
// The table comes in pages, each made under the pool's lock when a block is first carved in its
// range and kept for the pool's life: readers never see one go away.
//
// To find the allocation that holds an address inside it (a copy's bounds), a block also notes its
// start in each 64 KiB span whose first byte it covers past its own start. A block that starts
// within 64 KiB before an address is found by a look back over the granules; one that starts
// further back covers the start of the address's span, and is found there. A note outlives its
// block, so what it names is checked against the granules.
class LiveGranules {
 public:
  explicit LiveGranules(std::size_t virtual_bytes);

  // Under the pool's lock, before the first mark() of a block of `bytes` at `offset`.
  void prepare(std::uintptr_t offset, std::size_t bytes);
  void mark(std::uintptr_t offset, std::size_t size_class, std::size_t bytes) noexcept;
  // Ends the allocation starting at `offset`: its size class, or nothing when none is live there.
  [[nodiscard]] std::optional<std::size_t> take(std::uintptr_t offset) noexcept;
  [[nodiscard]] std::optional<std::size_t> find(std::uintptr_t offset) const noexcept;
  struct Held {
    std::uintptr_t start = 0;
    std::size_t size_class = 0;
  };
  // The live allocation that starts nearest at or before `offset`: the one that holds `offset`, if
  // any does (the caller checks its extent; no other can, since live blocks do not overlap).
  [[nodiscard]] std::optional<Held> nearest_at_or_before(std::uintptr_t offset) const noexcept;
  // Slow: walks every table.
  [[nodiscard]] std::size_t count() const noexcept;

 private:
  using Slot = std::atomic<std::uint16_t>;  // 0: not live; otherwise size class + 1
  using SpanNote = std::atomic<std::uint64_t>;  // 0: none; otherwise the noting block's granule + 1
  static constexpr std::size_t kGranuleShift = 8;  // 256 bytes, the smallest class and alignment
  static constexpr std::size_t kPageShift = 16;  // granules per page: 16 MiB of pool, 128 KiB of table
  static constexpr std::size_t kPageSlots = std::size_t{1} << kPageShift;
  static constexpr std::size_t kSpanShift = 16;  // 64 KiB spans: 256 granules, 256 notes a page
  static constexpr std::size_t kPageSpans = std::size_t{1} << (kGranuleShift + kPageShift - kSpanShift);

  [[nodiscard]] Slot* slot(std::uintptr_t offset) const noexcept;
  [[nodiscard]] SpanNote* span_note(std::uintptr_t offset) const noexcept;

  std::vector<std::unique_ptr<Slot[]>> owned_;  // changed under the pool's lock
  std::vector<std::atomic<Slot*>> published_;  // the same pages, for lock-free readers
  std::vector<std::unique_ptr<SpanNote[]>> owned_notes_;  // as owned_, for every page a block covers
  std::vector<std::atomic<SpanNote*>> published_notes_;
};

// The blocks of one pool freed on one stream, newest last in each size class. `point` is the
// stream's tail when the block was freed: once the stream reaches it, nothing queued before the
// free can still touch the block.
struct StreamFreeList {
  struct Block {
    std::uintptr_t offset = 0;
    std::uint64_t point = 0;
  };
  // Eight classes per power of two (pool_class_bytes), and one more: the whole range of a pool
  // with a maximum size, for a request that fits in it only as it is, not rounded to its class.
  static constexpr std::size_t kClassCount = std::size_t{8} * 64 + 1;
  static constexpr std::size_t kWholePoolClass = kClassCount - 1;

  explicit StreamFreeList(const std::shared_ptr<Stream>& stream)
      : serial(stream->serial()), stream(stream.get()), owner(stream), immortal(stream->traits().is_null) {}

  // The stream while it exists; null once it has been destroyed, after all of its work. Weakly
  // held: a cached block must not keep a destroyed stream's worker alive.
  [[nodiscard]] std::shared_ptr<Stream> freeing_stream() const {
    if (immortal) return {std::shared_ptr<Stream>{}, stream};
    return owner.lock();
  }

  const std::uint64_t serial;
  Stream* const stream;
  const std::weak_ptr<Stream> owner;
  const bool immortal;  // a null stream lives as long as the process
  SpinLock lock;
  std::array<std::vector<Block>, kClassCount> by_class;  // under `lock`
};

class MemoryPool {
 public:
  MemoryPool(Runtime& runtime, const hipMemPoolProps& properties, std::size_t chunk_bytes, std::size_t virtual_bytes,
             void* base);
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;
  MemoryPool(MemoryPool&&) = delete;
  MemoryPool& operator=(MemoryPool&&) = delete;
  ~MemoryPool();

  [[nodiscard]] static hipError_t create(Runtime& runtime, const hipMemPoolProps& properties,
                                         std::shared_ptr<MemoryPool>* out);

  [[nodiscard]] hipError_t allocate(std::size_t bytes, const std::shared_ptr<Stream>& stream, PoolGrant* grant);
  // Returns false when `address` is not a live allocation of this pool.
  [[nodiscard]] bool free(std::uintptr_t address, const std::shared_ptr<Stream>& stream);
  // Whether `address` is a live (allocated, not yet freed) allocation of this pool.
  [[nodiscard]] bool is_live(std::uintptr_t address) const;
  // No allocation is live. Frees made before it turned true are visible to pending_free_streams().
  // Exact unless allocations race it, as they do only in a program that destroys a pool it is still
  // allocating from.
  [[nodiscard]] bool drained() const { return usage_.empty(); }
  // The streams that have not yet reached a free into this pool: work queued on them before the
  // free may still use the pool's memory, so a pool let go must outlive that work.
  [[nodiscard]] std::vector<std::shared_ptr<Stream>> pending_free_streams() const;
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
  // Slow (walks the live table); drained() answers the common question.
  [[nodiscard]] std::size_t live_allocations() const;
  [[nodiscard]] std::uintptr_t base() const noexcept { return base_; }
  [[nodiscard]] std::uint64_t serial() const noexcept { return serial_; }
  // The pool's layout, which an importing process mirrors (core/pool_sharing.hpp).
  [[nodiscard]] std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  [[nodiscard]] std::size_t virtual_bytes() const noexcept { return virtual_bytes_; }
  // The size a live allocation was given (its size class), or 0 when `address` is not one.
  [[nodiscard]] std::size_t live_bytes(std::uintptr_t address) const;
  // Whether [address, address + bytes) lies within one live allocation (the block it was given).
  [[nodiscard]] bool within_one_allocation(std::uintptr_t address, std::size_t bytes) const noexcept;
  // Set once hipMemPoolDestroy has unnamed the pool; it then lives only for its allocations.
  void orphan() noexcept { orphaned_.store(true, std::memory_order_release); }
  [[nodiscard]] bool orphaned() const noexcept { return orphaned_.load(std::memory_order_acquire); }

 private:
  static constexpr std::size_t kClassCount = StreamFreeList::kClassCount;

  // A request's size class here, and the bytes of each block of a class.
  [[nodiscard]] std::size_t class_of(std::size_t bytes) const noexcept;
  [[nodiscard]] std::size_t block_bytes(std::size_t size_class) const noexcept;
  [[nodiscard]] StreamFreeList& free_list_of(const std::shared_ptr<Stream>& stream);
  [[nodiscard]] StreamFreeList& free_list_locked(const std::shared_ptr<Stream>& stream);
  [[nodiscard]] hipError_t allocate_locked(std::size_t size_class, StreamFreeList& own,
                                           const std::shared_ptr<Stream>& stream, PoolGrant* grant,
                                           std::uintptr_t* offset);
  [[nodiscard]] bool take_from_other_streams(std::size_t size_class, const std::shared_ptr<Stream>& stream,
                                             PoolGrant* grant, std::uintptr_t* offset);
  [[nodiscard]] bool usable_by(const std::shared_ptr<Stream>& stream, const Stream& freeing, std::uint64_t point) const;
  void adopt_lists_of_destroyed_streams();
  // The two ends of free(): the block onto the stream's list, or (no stream) the pool's own.
  [[nodiscard]] std::optional<std::size_t> free_to_stream(std::uintptr_t offset, const std::shared_ptr<Stream>& stream);
  [[nodiscard]] std::optional<std::size_t> free_to_pool(std::uintptr_t offset);
  [[nodiscard]] hipError_t carve(std::size_t bytes, std::uintptr_t* offset);
  // Whether any kept block went back to the pool's free range.
  [[nodiscard]] bool trim_locked(std::size_t keep_bytes);
  void uncarve(std::uintptr_t offset, std::size_t bytes);
  [[nodiscard]] hipError_t map_chunk(std::size_t chunk);
  void unmap_chunk(std::size_t chunk);
  void add_hole(std::uintptr_t offset, std::size_t bytes);

  Runtime& runtime_;
  hipMemPoolProps properties_;
  std::size_t chunk_bytes_;
  std::size_t virtual_bytes_;
  std::uintptr_t base_;
  // Unique for the process, unlike addresses: names this pool in a thread's cached free-list look-up.
  const std::uint64_t serial_;
  // Its table of pages is read on every allocation and free; pages are added under mutex_.
  LiveGranules live_;

  // The lock and what it guards start a line of their own: taking the lock (a carve, a search of
  // other streams' lists) must not evict the fields above from the other cores' caches.
  alignas(64) mutable std::mutex mutex_;
  PoolAttributes attributes_;
  PoolAccess access_;
  // One list per stream that has freed here; a list goes once its stream is destroyed, its blocks
  // then free for anyone. Lock order: mutex_, then a list's lock.
  std::vector<std::unique_ptr<StreamFreeList>> free_lists_;
  std::array<std::vector<std::uintptr_t>, kClassCount> unowned_;  // free, no stream work pending
  std::map<std::uintptr_t, std::size_t> holes_;  // uncarved space: offset -> bytes
  std::set<std::pair<std::size_t, std::uintptr_t>> holes_by_size_;
  ChunkUsers chunks_;
  // Changed by every allocation and free, each thread on lines of its own (core/pool_usage.hpp);
  // kept apart from the fields read on the hot path (orphaned_, the layout).
  alignas(64) PoolUsage usage_;
  alignas(64) std::atomic<bool> orphaned_{false};
};

// Rounds a request to its size class: at least 256 bytes, eight classes per power of two.
[[nodiscard]] std::size_t pool_class_bytes(std::size_t bytes) noexcept;
[[nodiscard]] std::size_t pool_class_index(std::size_t class_bytes) noexcept;
// The class bytes of a class index: pool_class_bytes_at(pool_class_index(c)) == c.
[[nodiscard]] std::size_t pool_class_bytes_at(std::size_t size_class) noexcept;

}  // namespace hipxx::core
