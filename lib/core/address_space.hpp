// The books of the virtual address space: reservations, the mappings inside them and plain device
// allocations, each kept in an ordered tree keyed by its base address so any address inside resolves
// with one ordered lookup. HIP names ranges loosely (a set-access or an unmap may cover several
// mappings); these lookups turn such a range into the exact run of whole mappings it covers, or
// say that it does not.
//
// Reserve, free, map and unmap are each one short system call on the host backend and well under a
// microsecond in the CUDA driver, whose work between two calls pushes the books out of the cache; so
// the books keep the lines a call touches few (bench/cold_lines.sh counts them; on the H100, halving
// them did not move map's ratio beyond the runs' spread: bench/RESULTS.md). A map reads the
// reservation's line, takes a node kept from an earlier unmap (one line holding the node's tree
// links and its record, chained through the node itself while spare), and links it in; freed
// reservations' nodes are kept too, and a mapping's access list is two bit masks held in place.
#pragma once

#include "core/allocation_table.hpp"

#include <boost/intrusive/set.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace hipxx::core {

// A pointer as the number the books key memory by.
inline std::uintptr_t address_of(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

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

using MappingHook = boost::intrusive::set_base_hook<boost::intrusive::optimize_size<true>,
                                                    boost::intrusive::link_mode<boost::intrusive::normal_link>>;

// One booked mapping: its tree links and its record in one cache line, so booking a mapping in
// a map (a driver call of well under a microsecond) writes one line. A node the books keep for
// reuse holds no record, only the link to the next kept node.
struct alignas(64) MappingNode : MappingHook {
  MappingNode() noexcept : next_spare{nullptr} {}
  // The constructor does start the union's chain link; clang-tidy 14 asks the anonymous union itself.
  union {  // NOLINT(cppcoreguidelines-pro-type-member-init)
    MappingRecord record;
    MappingNode* next_spare;
  };
};
static_assert(sizeof(MappingNode) == 64);

struct MappingBase {
  using type = std::uintptr_t;
  type operator()(const MappingNode& node) const noexcept { return node.record.base; }
};

// A reservation's mappings in address order. It owns its nodes and frees those still in it when it
// goes; the address space hands nodes in and takes them back out.
class MappingTree {
  using Set = boost::intrusive::set<MappingNode, boost::intrusive::key_of_value<MappingBase>,
                                    boost::intrusive::constant_time_size<true>>;

 public:
  using iterator = Set::iterator;

  MappingTree() = default;
  MappingTree(const MappingTree&) = delete;
  MappingTree& operator=(const MappingTree&) = delete;
  MappingTree(MappingTree&&) noexcept = default;
  MappingTree& operator=(MappingTree&&) = delete;
  ~MappingTree() {
    nodes_.clear_and_dispose([](MappingNode* node) { const std::unique_ptr<MappingNode> freed{node}; });
  }

  [[nodiscard]] bool empty() const noexcept { return nodes_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
  [[nodiscard]] iterator begin() noexcept { return nodes_.begin(); }
  [[nodiscard]] iterator end() noexcept { return nodes_.end(); }
  [[nodiscard]] iterator find(std::uintptr_t base) noexcept { return nodes_.find(base); }
  [[nodiscard]] iterator lower_bound(std::uintptr_t base) noexcept { return nodes_.lower_bound(base); }
  [[nodiscard]] iterator upper_bound(std::uintptr_t base) noexcept { return nodes_.upper_bound(base); }
  // The last mapping, which every mapping made in address order goes after.
  [[nodiscard]] const MappingRecord* last() const noexcept { return empty() ? nullptr : &nodes_.crbegin()->record; }

  // Links a node the caller owns and gives up, in front of `before` (which keeps the order). Out of
  // line, so that the tree's rebalancing does not spread a map's own path over more cache lines.
  [[gnu::noinline]] iterator adopt_before(const iterator& before, MappingNode& node) noexcept;
  // Unlinks one node and hands it back to the caller, who now owns it; returns the one after it.
  iterator release(const iterator& mapping, MappingNode*& released) noexcept {
    released = &*mapping;
    return nodes_.erase(mapping);
  }

 private:
  Set nodes_;
};

// Whose a reservation is. A memory pool reserves its address range through the same books as the
// application, but hands it out block by block: the application's own virtual memory calls must
// see it as no reservation of theirs, or an unmap or free of it would pull memory from under every
// block the pool has given out.
enum class Holder : std::uint8_t { application, runtime };

// A reservation and its mappings: what a map reads and writes of it shares one cache line.
struct alignas(64) Reservation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  MappingTree mappings;
  Holder holder = Holder::application;

  [[nodiscard]] std::uintptr_t end() const noexcept { return base + size; }
  [[nodiscard]] bool contains(std::uintptr_t address, std::size_t bytes) const noexcept {
    return address >= base && bytes <= size && address - base <= size - bytes;
  }
};
static_assert(sizeof(Reservation) == 64);

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
  MappingTree::iterator first;
  std::size_t count = 0;

  [[nodiscard]] bool empty() const noexcept { return count == 0; }
};

// Not synchronised: the caller holds the runtime's lock.
class AddressSpace {
 public:
  AddressSpace();
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;
  AddressSpace(AddressSpace&&) = delete;
  AddressSpace& operator=(AddressSpace&&) = delete;
  ~AddressSpace();

  // May throw std::bad_alloc, and then books nothing.
  void add_reservation(std::uintptr_t base, std::size_t size, Holder holder);
  void remove_reservation(std::uintptr_t base);
  [[nodiscard]] Reservation* reservation_at(std::uintptr_t base);
  // The reservation holding every byte of [address, address + bytes), if one does.
  [[nodiscard]] Reservation* reservation_holding(std::uintptr_t address, std::size_t bytes) {
    Reservation* reservation = reservation_containing(address);
    return reservation != nullptr && reservation->contains(address, bytes) ? reservation : nullptr;
  }

  // Where a mapping of [address, address + bytes) goes in `reservation`'s order (the mapping it goes
  // before), or nothing where it would overlap one. The caller has checked the reservation holds it.
  [[nodiscard]] static std::optional<MappingTree::iterator> place_for(Reservation& reservation, std::uintptr_t address,
                                                                      std::size_t bytes) {
    MappingTree& mappings = reservation.mappings;
    // Mappings mostly come in address order (a growing array, a pool's chunks): after the last one
    // needs no walk down the tree.
    if (const MappingRecord* last = mappings.last(); last == nullptr || last->end() <= address) return mappings.end();
    return place_among(mappings, address, bytes);
  }
  // Books a mapping at the place place_for gave. May throw std::bad_alloc, and then books nothing.
  MappingTree::iterator add_mapping(Reservation& reservation, const MappingTree::iterator& before,
                                    const MappingRecord& record) {
    MappingNode& node = take_node();
    node.record = record;
    return reservation.mappings.adopt_before(before, node);
  }
  // Forgets one mapping; returns the one after it.
  MappingTree::iterator remove_mapping(Reservation& reservation, const MappingTree::iterator& mapping) noexcept;

  // The whole mappings that exactly tile [address, address + bytes) inside one reservation; empty
  // when the range has a gap or cuts a mapping.
  [[nodiscard]] Tiling tiling(std::uintptr_t address, std::size_t bytes);
  [[nodiscard]] MappingRecord* mapping_containing(std::uintptr_t address);
  // The same, only in a reservation of the given holder.
  [[nodiscard]] MappingRecord* mapping_containing(std::uintptr_t address, Holder holder);

  void add_linear(const LinearAllocation& allocation);
  [[nodiscard]] std::optional<LinearAllocation> take_linear(std::uintptr_t base);
  [[nodiscard]] const LinearAllocation* linear_containing(std::uintptr_t address) const;
  [[nodiscard]] LinearAllocation* linear_at(std::uintptr_t base);

  // Whether `bytes` from `address` are usable by `device` for a copy: inside tracked memory they
  // must be mapped end to end with at least `needed` access; untracked memory is the host's.
  [[nodiscard]] bool device_may_touch(std::uintptr_t address, std::size_t bytes, int device, hipMemAccessFlags needed);
  // Inside a reservation or a linear allocation: memory of the runtime's, not the application's host memory.
  [[nodiscard]] bool tracked(std::uintptr_t address);
  // Whether any byte of [address, end) is tracked: a range of the application's host memory has none.
  [[nodiscard]] bool overlaps_tracked(std::uintptr_t address, std::uintptr_t end);

  [[nodiscard]] std::size_t reservation_count() const noexcept { return reservations_.size(); }
  [[nodiscard]] std::size_t mapping_count() const noexcept;
  [[nodiscard]] std::size_t linear_count() const noexcept { return linear_.size(); }

 private:
  using ReservationMap = std::map<std::uintptr_t, Reservation>;

  // A map or an unmap is a driver call of about a microsecond or less on CUDA, often made where
  // other work has pushed hipxx's code out of the caches: the common case of each lookup below is
  // inline and short, and the rest (a walk down a tree, an allocation) out of line, so that a
  // call's own path covers few lines of code.
  [[nodiscard]] Reservation* reservation_containing(std::uintptr_t address) {
    if (Reservation* const last = last_found_.load(std::memory_order_relaxed);
        last != nullptr && address - last->base < last->size) {
      return last;
    }
    return reservation_by_search(address);
  }
  [[gnu::noinline]] Reservation* reservation_by_search(std::uintptr_t address);
  [[nodiscard, gnu::noinline]] static std::optional<MappingTree::iterator> place_among(MappingTree& mappings,
                                                                                       std::uintptr_t address,
                                                                                       std::size_t bytes);
  [[nodiscard]] static MappingRecord* mapping_in(MappingTree& mappings, std::uintptr_t address) noexcept;
  [[nodiscard]] MappingNode& take_node() {
    if (spare_mappings_ == nullptr) return new_node();
    MappingNode& node = *spare_mappings_;
    spare_mappings_ = node.next_spare;
    --spare_mapping_count_;
    return node;
  }
  [[nodiscard, gnu::noinline, gnu::cold]] static MappingNode& new_node();
  void keep_node(MappingNode& node) noexcept;

  // Enough spare nodes for a program that keeps a few ranges or chunks coming and going; a burst of
  // frees beyond this gives its nodes back to malloc.
  static constexpr std::size_t kSpareNodes = 64;

  // First, where the runtime puts them beside its lock: what a map reads here before its driver call.
  //
  // The reservation the last lookup found, or the one last added: a map mostly goes into the range
  // just reserved, and an unmap or a set-access into the one just mapped, so most lookups end here
  // without walking the tree. Atomic because lookups also run under the shared lock, each thread
  // storing what it found; only removal, under the exclusive lock, can make it stale, and it clears it.
  std::atomic<Reservation*> last_found_{nullptr};
  // Mapping nodes kept for reuse, chained through themselves, so taking one reads only the node.
  MappingNode* spare_mappings_ = nullptr;
  std::size_t spare_mapping_count_ = 0;

  ReservationMap reservations_;
  std::map<std::uintptr_t, LinearAllocation> linear_;
  std::vector<ReservationMap::node_type> spare_reservations_;  // capacity kSpareNodes, from the start
};

}  // namespace hipxx::core
