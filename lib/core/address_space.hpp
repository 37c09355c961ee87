// The books of the virtual address space: reservations, the mappings inside them and plain device
// allocations, each kept in an ordered map keyed by its base address so any address inside resolves
// with one ordered lookup. HIP names ranges loosely (a set-access or an unmap may cover several
// mappings); these lookups turn such a range into the exact list of whole mappings it covers, or
// say that it does not.
#pragma once

#include "core/allocation_table.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace hipxx::core {

struct MappingRecord {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  std::shared_ptr<Allocation> allocation;
  std::vector<hipMemAccessFlags> access;  // one entry per device

  [[nodiscard]] std::uintptr_t end() const noexcept { return base + size; }
};

struct Reservation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  std::map<std::uintptr_t, MappingRecord> mappings;

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

// Not synchronised: the caller holds the runtime's lock.
class AddressSpace {
 public:
  void add_reservation(std::uintptr_t base, std::size_t size);
  void remove_reservation(std::uintptr_t base);
  [[nodiscard]] Reservation* reservation_at(std::uintptr_t base);
  // The reservation holding every byte of [address, address + bytes), if one does.
  [[nodiscard]] Reservation* reservation_holding(std::uintptr_t address, std::size_t bytes);

  // The whole mappings that exactly tile [address, address + bytes) inside one reservation, in
  // address order; empty when the range has a gap or cuts a mapping.
  [[nodiscard]] std::vector<MappingRecord*> tiling(std::uintptr_t address, std::size_t bytes);
  [[nodiscard]] MappingRecord* mapping_containing(std::uintptr_t address);
  [[nodiscard]] bool overlaps_mapping(const Reservation& reservation, std::uintptr_t address,
                                      std::size_t bytes) const;

  void add_linear(const LinearAllocation& allocation);
  [[nodiscard]] std::optional<LinearAllocation> take_linear(std::uintptr_t base);
  [[nodiscard]] const LinearAllocation* linear_containing(std::uintptr_t address) const;
  [[nodiscard]] LinearAllocation* linear_at(std::uintptr_t base);

  // Whether `bytes` from `address` are usable by `device` for a copy: inside tracked memory they
  // must be mapped end to end with at least `needed` access; untracked memory is the host's.
  [[nodiscard]] bool device_may_touch(std::uintptr_t address, std::size_t bytes, int device,
                                      hipMemAccessFlags needed);

  [[nodiscard]] std::size_t reservation_count() const noexcept { return reservations_.size(); }
  [[nodiscard]] std::size_t mapping_count() const noexcept;
  [[nodiscard]] std::size_t linear_count() const noexcept { return linear_.size(); }

 private:
  template <class Map>
  static auto* entry_containing(Map& map, std::uintptr_t address);

  std::map<std::uintptr_t, Reservation> reservations_;
  std::map<std::uintptr_t, LinearAllocation> linear_;
};

}  // namespace hipxx::core
