// The books of the virtual address space: reservations, the mappings inside them and plain device
// allocations, each kept in an ordered map keyed by its base address so any address inside resolves
// with one ordered lookup. HIP names ranges loosely (a set-access or an unmap may cover several
// mappings); these lookups turn such a range into the exact run of whole mappings it covers, or
// say that it does not.
//
// Reserve, free, map and unmap are each one short system call on the host backend and well under a
// microsecond in the CUDA driver, so the books keep their own cost down: the map nodes of freed
// reservations and unmapped mappings are kept for reuse instead of going back to malloc, and a
// mapping's access list is two bit masks held in place.
#pragma once

#include "core/allocation_table.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace hipxx::core {

// What each device may do with one mapping: HIP's three access levels as one bit per device in
// each of two masks (read allowed, write allowed), so copying or comparing a list costs nothing.
class AccessList {
 public:
  // The runtime shows at most this many devices (see Runtime's constructor).
  static constexpr int kMaxDevices = 64;

  [[nodiscard]] hipMemAccessFlags of(int device) const noexcept {
    if ((writable_ & bit(device)) != 0) return hipMemAccessFlagsProtReadWrite;
    return (readable_ & bit(device)) != 0 ? hipMemAccessFlagsProtRead : hipMemAccessFlagsProtNone;
  }

  // `flags` is one of HIP's three levels; the caller has checked it.
  void set(int device, hipMemAccessFlags flags) noexcept {
    readable_ = flags == hipMemAccessFlagsProtNone ? readable_ & ~bit(device) : readable_ | bit(device);
    writable_ = flags == hipMemAccessFlagsProtReadWrite ? writable_ | bit(device) : writable_ & ~bit(device);
  }

 private:
  [[nodiscard]] static std::uint64_t bit(int device) noexcept { return std::uint64_t{1} << device; }

  std::uint64_t readable_ = 0;
  std::uint64_t writable_ = 0;
};

struct MappingRecord {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  // Owned by the allocation table; its mapping count keeps the record alive while this mapping is.
  Allocation* allocation = nullptr;
  AccessList access;  // a new mapping grants no device anything

  [[nodiscard]] std::uintptr_t end() const noexcept { return base + size; }
};

using MappingMap = std::map<std::uintptr_t, MappingRecord>;

struct Reservation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  MappingMap mappings;

  [[nodiscard]] std::uintptr_t end() const noexcept { return base + size; }
  [[nodiscard]] bool contains(std::uintptr_t address, std::size_t bytes) const noexcept {
    return address >= base && bytes <= size && address - base <= size - bytes;
  }
};

enum class LinearKind { device, managed, ipc_opened };

struct LinearAllocation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  int device = 0;
  LinearKind kind = LinearKind::device;
  int opens = 0;  // ipc_opened: hipIpcOpenMemHandle calls not yet closed
};

// A run of consecutive mappings of one reservation, in address order: `count` of them from `first`.
struct Tiling {
  Reservation* reservation = nullptr;
  MappingMap::iterator first;
  std::size_t count = 0;

  [[nodiscard]] bool empty() const noexcept { return count == 0; }
};

// Not synchronised: the caller holds the runtime's lock.
class AddressSpace {
 public:
  AddressSpace();

  // May throw std::bad_alloc, and then books nothing.
  void add_reservation(std::uintptr_t base, std::size_t size);
  void remove_reservation(std::uintptr_t base);
  [[nodiscard]] Reservation* reservation_at(std::uintptr_t base);
  // The reservation holding every byte of [address, address + bytes), if one does.
  [[nodiscard]] Reservation* reservation_holding(std::uintptr_t address, std::size_t bytes);

  [[nodiscard]] bool overlaps_mapping(const Reservation& reservation, std::uintptr_t address, std::size_t bytes) const;
  // Books a mapping the caller has checked fits in `reservation` without overlap. May throw
  // std::bad_alloc, and then books nothing.
  MappingMap::iterator add_mapping(Reservation& reservation, const MappingRecord& record);
  // Forgets one mapping; returns the one after it.
  MappingMap::iterator remove_mapping(Reservation& reservation, MappingMap::iterator mapping);

  // The whole mappings that exactly tile [address, address + bytes) inside one reservation; empty
  // when the range has a gap or cuts a mapping.
  [[nodiscard]] Tiling tiling(std::uintptr_t address, std::size_t bytes);
  [[nodiscard]] MappingRecord* mapping_containing(std::uintptr_t address);

  void add_linear(const LinearAllocation& allocation);
  [[nodiscard]] std::optional<LinearAllocation> take_linear(std::uintptr_t base);
  [[nodiscard]] const LinearAllocation* linear_containing(std::uintptr_t address) const;
  [[nodiscard]] LinearAllocation* linear_at(std::uintptr_t base);

  // Whether `bytes` from `address` are usable by `device` for a copy: inside tracked memory they
  // must be mapped end to end with at least `needed` access; untracked memory is the host's.
  [[nodiscard]] bool device_may_touch(std::uintptr_t address, std::size_t bytes, int device, hipMemAccessFlags needed);
  // Inside a reservation or a linear allocation: memory of the runtime's, not the application's host memory.
  [[nodiscard]] bool tracked(std::uintptr_t address);

  [[nodiscard]] std::size_t reservation_count() const noexcept { return reservations_.size(); }
  [[nodiscard]] std::size_t mapping_count() const noexcept;
  [[nodiscard]] std::size_t linear_count() const noexcept { return linear_.size(); }

 private:
  using ReservationMap = std::map<std::uintptr_t, Reservation>;

  template <class Map>
  static auto* entry_containing(Map& map, std::uintptr_t address);
  [[nodiscard]] Reservation* reservation_containing(std::uintptr_t address);

  // Enough spare nodes for a program that keeps a few ranges or chunks coming and going; a burst of
  // frees beyond this gives its nodes back to malloc.
  static constexpr std::size_t kSpareNodes = 64;

  ReservationMap reservations_;
  // The reservation the last lookup found, or the one last added: a map mostly goes into the range
  // just reserved, and an unmap or a set-access into the one just mapped, so most lookups end here
  // without walking the tree. Atomic because lookups also run under the shared lock, each thread
  // storing what it found; only removal, under the exclusive lock, can make it stale, and it clears it.
  std::atomic<Reservation*> last_found_{nullptr};
  std::map<std::uintptr_t, LinearAllocation> linear_;
  std::vector<ReservationMap::node_type> spare_reservations_;  // capacity kSpareNodes, from the start
  std::vector<MappingMap::node_type> spare_mappings_;  // likewise
};

}  // namespace hipxx::core
