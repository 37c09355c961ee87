#include "backend/address_arena.hpp"

#include <algorithm>

namespace hipxx::backend {
namespace {

constexpr std::size_t kMostSpareNodes = 8;

std::uintptr_t align_up(std::uintptr_t address, std::size_t alignment) noexcept {
  return (address + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
}

}  // namespace

AddressArena::AddressArena(Shape shape, ReserveChunk reserve_chunk, ReleaseChunk release_chunk)
    : shape_(shape), reserve_chunk_(std::move(reserve_chunk)), release_chunk_(std::move(release_chunk)) {}

AddressArena::~AddressArena() {
  for (const std::uintptr_t base : chunk_bases()) release_chunk_(base, shape_.chunk_size);
}

bool AddressArena::prepare() {
  std::lock_guard lock{mutex_};
  return chunk_count_.load(std::memory_order_relaxed) != 0 || add_chunk_locked();
}

bool AddressArena::add_chunk_locked() {
  const std::size_t count = chunk_count_.load(std::memory_order_relaxed);
  if (count == kMostChunks) return false;
  keep_spares_locked();
  const std::uintptr_t base = reserve_chunk_(shape_.chunk_size, shape_.chunk_alignment);
  if (base == 0) return false;
  chunk_bases_[count] = base;
  chunk_count_.store(count + 1, std::memory_order_release);
  add_extent_locked(base, shape_.chunk_size);
  return true;
}

std::span<const std::uintptr_t> AddressArena::chunk_bases() const noexcept {
  return {chunk_bases_.data(), chunk_count_.load(std::memory_order_acquire)};
}

bool AddressArena::starts_chunk(std::uintptr_t address) const noexcept {
  const auto bases = chunk_bases();
  return std::find(bases.begin(), bases.end(), address) != bases.end();
}

// Both nodes come from the spares, which keep_spares_locked() has filled, so this cannot throw.
void AddressArena::add_extent_locked(std::uintptr_t start, std::size_t size) {
  ByAddress::node_type by_address = std::move(spare_address_nodes_.back());
  spare_address_nodes_.pop_back();
  BySize::node_type by_size = std::move(spare_size_nodes_.back());
  spare_size_nodes_.pop_back();
  by_address.key() = start;
  by_address.mapped() = size;
  by_size.value() = {size, start};
  free_by_address_.insert(std::move(by_address));
  free_by_size_.insert(std::move(by_size));
}

void AddressArena::remove_extent_locked(ByAddress::iterator extent) {
  spare_size_nodes_.push_back(free_by_size_.extract({extent->second, extent->first}));
  spare_address_nodes_.push_back(free_by_address_.extract(extent));
}

// Makes sure two extents can be added without allocating (the most any one call adds), and drops
// spares beyond a few. Allocation happens here, before the caller changes anything.
void AddressArena::keep_spares_locked() {
  spare_address_nodes_.reserve(kMostSpareNodes + 2);
  spare_size_nodes_.reserve(kMostSpareNodes + 2);
  while (spare_address_nodes_.size() < 2) {
    ByAddress scratch;
    scratch.emplace(0, 0);
    spare_address_nodes_.push_back(scratch.extract(scratch.begin()));
  }
  while (spare_size_nodes_.size() < 2) {
    BySize scratch;
    scratch.emplace(0, 0);
    spare_size_nodes_.push_back(scratch.extract(scratch.begin()));
  }
  if (spare_address_nodes_.size() > kMostSpareNodes) spare_address_nodes_.resize(kMostSpareNodes);
  if (spare_size_nodes_.size() > kMostSpareNodes) spare_size_nodes_.resize(kMostSpareNodes);
}

std::uintptr_t AddressArena::take(std::size_t size, std::size_t alignment) {
  std::lock_guard lock{mutex_};
  keep_spares_locked();
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Best fit: the smallest extent that holds the request once its start is aligned. With the usual
    // request (a multiple of the granularity, aligned to it) the first candidate fits.
    for (auto candidate = free_by_size_.lower_bound({size, 0}); candidate != free_by_size_.end(); ++candidate) {
      const auto [extent_size, extent_start] = *candidate;
      const std::uintptr_t start = align_up(extent_start, alignment);
      const std::uintptr_t extent_end = extent_start + extent_size;
      if (start > extent_end || extent_end - start < size) continue;
      carve_locked(free_by_address_.find(extent_start), start, size);
      return start;
    }
    if (attempt == 0 && !add_chunk_locked()) return 0;
  }
  return 0;
}

// Takes [start, start + size) out of a free extent that holds it, keeping what is left on either side.
void AddressArena::carve_locked(ByAddress::iterator extent, std::uintptr_t start, std::size_t size) {
  const std::uintptr_t extent_start = extent->first;
  const std::uintptr_t extent_end = extent->first + extent->second;
  remove_extent_locked(extent);
  if (start > extent_start) add_extent_locked(extent_start, start - extent_start);
  if (start + size < extent_end) add_extent_locked(start + size, extent_end - (start + size));
}

std::uintptr_t AddressArena::take_at(std::uintptr_t address, std::size_t size) {
  std::lock_guard lock{mutex_};
  auto extent = free_by_address_.upper_bound(address);
  if (extent == free_by_address_.begin()) return 0;
  --extent;
  const std::uintptr_t extent_end = extent->first + extent->second;
  if (address >= extent_end || extent_end - address < size) return 0;
  keep_spares_locked();
  carve_locked(extent, address, size);
  return address;
}

bool AddressArena::holds(std::uintptr_t address) const noexcept {
  const auto bases = chunk_bases();
  return std::any_of(bases.begin(), bases.end(),
                     [&](std::uintptr_t base) { return address >= base && address - base < shape_.chunk_size; });
}

bool AddressArena::give_back(std::uintptr_t base, std::size_t size) {
  if (!holds(base)) return false;
  std::lock_guard lock{mutex_};
  keep_spares_locked();
  std::uintptr_t start = base;
  std::uintptr_t end = base + size;
  // Joins free neighbours in the same chunk, so the chunk's free space stays in as few extents as it can.
  auto next = free_by_address_.lower_bound(base);
  if (next != free_by_address_.begin() && !starts_chunk(base)) {
    const auto previous = std::prev(next);
    if (previous->first + previous->second == base) {
      start = previous->first;
      remove_extent_locked(previous);
    }
  }
  if (next != free_by_address_.end() && next->first == end && !starts_chunk(end)) {
    end += next->second;
    remove_extent_locked(next);
  }
  add_extent_locked(start, end - start);
  return true;
}

std::size_t AddressArena::reserved_bytes() const noexcept { return chunk_bases().size() * shape_.chunk_size; }

std::size_t AddressArena::free_bytes() const {
  std::lock_guard lock{mutex_};
  std::size_t total = 0;
  for (const auto& [start, size] : free_by_address_) total += size;
  return total;
}

}  // namespace hipxx::backend
