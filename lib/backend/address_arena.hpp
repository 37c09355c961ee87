// Hands out virtual address ranges from a few large chunks that a backend reserves from the system or
// the driver once, as a GPU driver does from its own address-space heap. A reservation then costs a
// lookup here instead of one to three system or driver calls (mmap and two trims on the host
// backend, cuMemAddressReserve on CUDA), and freeing one costs none.
//
// Chunks stay reserved until the arena is destroyed: address space without memory behind it costs
// nothing but page-table-free bookkeeping in the kernel or driver. Ranges never straddle two chunks,
// because drivers map only within one reservation. A request larger than `largest` bytes, smaller
// than `smallest`, or aligned more strictly than the chunks are, is the backend's to reserve directly.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace hipxx::backend {

class AddressArena {
 public:
  // Reserves `size` bytes at an address aligned to `alignment`; 0 where it cannot.
  using ReserveChunk = std::function<std::uintptr_t(std::size_t size, std::size_t alignment)>;
  using ReleaseChunk = std::function<void(std::uintptr_t base, std::size_t size)>;

  struct Shape {
    std::size_t chunk_size = 0;  // bytes per chunk
    std::size_t chunk_alignment = 0;  // power of two; every chunk starts on a multiple of it
    std::size_t largest = 0;  // the largest request served from chunks
    std::size_t smallest = 1;  // the smallest (a driver may treat small reservations better)
  };

  AddressArena(Shape shape, ReserveChunk reserve_chunk, ReleaseChunk release_chunk);
  AddressArena(const AddressArena&) = delete;
  AddressArena& operator=(const AddressArena&) = delete;
  AddressArena(AddressArena&&) = delete;
  AddressArena& operator=(AddressArena&&) = delete;
  ~AddressArena();

  [[nodiscard]] bool serves(std::size_t size, std::size_t alignment) const noexcept {
    return size != 0 && size >= shape_.smallest && size <= shape_.largest && alignment <= shape_.chunk_alignment;
  }

  // Reserves the first chunk now, so that the address space a process starts with is the one it
  // keeps (leak checks that count mappings see no chunk appear later). False where it cannot.
  bool prepare();

  // A range of `size` bytes aligned to `alignment` (a power of two; serves() must hold), or 0 where no
  // chunk has room and no new chunk could be reserved. Throws std::bad_alloc only before changing
  // anything.
  [[nodiscard]] std::uintptr_t take(std::size_t size, std::size_t alignment);

  // The range [address, address + size) where all of it is free in one chunk; 0, changing nothing,
  // where it is not (a hint the arena cannot honour). Throws std::bad_alloc only before changing anything.
  [[nodiscard]] std::uintptr_t take_at(std::uintptr_t address, std::size_t size);

  // Whether `address` lies in one of the chunks (and so is the arena's to give out, not the system's).
  [[nodiscard]] bool holds(std::uintptr_t address) const noexcept;

  // Returns a range that take() or take_at() gave out. False, changing nothing, where `base` lies in no chunk:
  // the range was reserved directly and the backend frees it itself.
  [[nodiscard]] bool give_back(std::uintptr_t base, std::size_t size);

  // Bytes reserved in chunks, and bytes of them not given out (for the arena's tests).
  [[nodiscard]] std::size_t reserved_bytes() const noexcept;
  [[nodiscard]] std::size_t free_bytes() const;

 private:
  using ByAddress = std::map<std::uintptr_t, std::size_t>;  // free extent start -> size
  using BySize = std::set<std::pair<std::size_t, std::uintptr_t>>;  // (size, start) of the same extents

  // 4 TiB of 64 GiB chunks: more than any process asks for in ranges of at most a few GiB.
  static constexpr std::size_t kMostChunks = 64;

  [[nodiscard]] bool add_chunk_locked();
  [[nodiscard]] std::span<const std::uintptr_t> chunk_bases() const noexcept;
  [[nodiscard]] bool starts_chunk(std::uintptr_t address) const noexcept;
  void add_extent_locked(std::uintptr_t start, std::size_t size);
  void remove_extent_locked(ByAddress::iterator extent);
  void carve_locked(ByAddress::iterator extent, std::uintptr_t start, std::size_t size);
  void keep_spares_locked();

  const Shape shape_;
  const ReserveChunk reserve_chunk_;
  const ReleaseChunk release_chunk_;
  mutable std::mutex mutex_;
  // Chunks only ever join: a base is written before the count that covers it is published, so
  // holds() reads them without the lock (a free of a range that is not the arena's takes no lock).
  std::array<std::uintptr_t, kMostChunks> chunk_bases_{};
  std::atomic<std::size_t> chunk_count_{0};
  ByAddress free_by_address_;
  BySize free_by_size_;
  // Nodes of extents that went away, reused for the next extents so a steady take/give_back cycle
  // allocates nothing. Each holds at least two of either kind, from the start.
  std::vector<ByAddress::node_type> spare_address_nodes_;
  std::vector<BySize::node_type> spare_size_nodes_;
};

}  // namespace hipxx::backend
