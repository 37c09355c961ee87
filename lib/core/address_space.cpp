#include "core/address_space.hpp"

#include <iterator>

namespace hipxx::core {

namespace {

// The entry of an ordered map of base addresses that holds `address`, or null.
template <class Map>
auto* entry_containing(Map& map, std::uintptr_t address) {
  using Value = std::remove_reference_t<decltype(map.begin()->second)>;
  auto after = map.upper_bound(address);
  if (after == map.begin()) return static_cast<Value*>(nullptr);
  auto& candidate = std::prev(after)->second;
  return address < candidate.base + candidate.size ? &candidate : static_cast<Value*>(nullptr);
}

}  // namespace

AddressSpace::AddressSpace() {
  // Reserved now, so that keeping a freed node never allocates (and so never throws) later.
  spare_reservations_.reserve(kSpareNodes);
}

AddressSpace::~AddressSpace() {
  while (spare_mappings_ != nullptr) {
    std::unique_ptr<MappingNode> node{spare_mappings_};
    spare_mappings_ = node->next_spare;
  }
}

void AddressSpace::add_reservation(std::uintptr_t base, std::size_t size, Holder holder) {
  Reservation* added = nullptr;
  if (spare_reservations_.empty()) {
    added = &reservations_.emplace(base, Reservation{.base = base, .size = size, .mappings = {}, .holder = holder})
                 .first->second;
  } else {
    ReservationMap::node_type node = std::move(spare_reservations_.back());
    spare_reservations_.pop_back();
    node.key() = base;
    node.mapped().base = base;
    node.mapped().size = size;  // its mappings are empty: only an empty reservation is ever freed
    node.mapped().holder = holder;
    added = &reservations_.insert(std::move(node)).position->second;
  }
  last_found_.store(added, std::memory_order_relaxed);  // a map into it usually comes next
}

void AddressSpace::remove_reservation(std::uintptr_t base) {
  ReservationMap::node_type node = reservations_.extract(base);
  if (node.empty()) return;
  if (last_found_.load(std::memory_order_relaxed) == &node.mapped()) {
    last_found_.store(nullptr, std::memory_order_relaxed);
  }
  if (spare_reservations_.size() < kSpareNodes) spare_reservations_.push_back(std::move(node));
}

Reservation* AddressSpace::reservation_by_search(std::uintptr_t address) {
  Reservation* const found = entry_containing(reservations_, address);
  if (found != nullptr) last_found_.store(found, std::memory_order_relaxed);
  return found;
}

MappingNode& AddressSpace::new_node() { return *std::make_unique<MappingNode>().release(); }  // owned by the tree next

MappingTree::iterator MappingTree::adopt_before(const iterator& before, MappingNode& node) noexcept {
  return nodes_.insert_before(before, node);
}

void AddressSpace::keep_node(MappingNode& node) noexcept {
  if (spare_mapping_count_ == kSpareNodes) {
    const std::unique_ptr<MappingNode> freed{&node};
    return;
  }
  node.next_spare = spare_mappings_;
  spare_mappings_ = &node;
  ++spare_mapping_count_;
}

std::optional<MappingTree::iterator> AddressSpace::place_among(MappingTree& mappings, std::uintptr_t address,
                                                               std::size_t bytes) {
  const MappingTree::iterator after = mappings.lower_bound(address + bytes);
  if (after != mappings.begin() && std::prev(after)->record.end() > address) return std::nullopt;
  return after;
}

MappingTree::iterator AddressSpace::remove_mapping(Reservation& reservation,
                                                   const MappingTree::iterator& mapping) noexcept {
  MappingNode* released = nullptr;
  const MappingTree::iterator next = reservation.mappings.release(mapping, released);
  keep_node(*released);
  return next;
}

Reservation* AddressSpace::reservation_at(std::uintptr_t base) {
  const auto found = reservations_.find(base);
  return found == reservations_.end() ? nullptr : &found->second;
}

Tiling AddressSpace::tiling(std::uintptr_t address, std::size_t bytes) {
  Reservation* reservation = reservation_holding(address, bytes);
  if (reservation == nullptr || bytes == 0) return {};
  const MappingTree::iterator first = reservation->mappings.find(address);
  const std::uintptr_t end = address + bytes;
  std::uintptr_t cursor = address;
  std::size_t count = 0;
  for (auto mapping = first; cursor < end; ++mapping, ++count) {
    if (mapping == reservation->mappings.end() || mapping->record.base != cursor || mapping->record.end() > end) {
      return {};
    }
    cursor = mapping->record.end();
  }
  return {.reservation = reservation, .first = first, .count = count};
}

MappingRecord* AddressSpace::mapping_in(MappingTree& mappings, std::uintptr_t address) noexcept {
  const MappingTree::iterator after = mappings.upper_bound(address);
  if (after == mappings.begin()) return nullptr;
  MappingRecord& candidate = std::prev(after)->record;
  return address < candidate.end() ? &candidate : nullptr;
}

MappingRecord* AddressSpace::mapping_containing(std::uintptr_t address) {
  Reservation* reservation = reservation_containing(address);
  return reservation == nullptr ? nullptr : mapping_in(reservation->mappings, address);
}

MappingRecord* AddressSpace::mapping_containing(std::uintptr_t address, Holder holder) {
  Reservation* reservation = reservation_containing(address);
  return reservation == nullptr || reservation->holder != holder ? nullptr : mapping_in(reservation->mappings, address);
}

void AddressSpace::add_linear(const LinearAllocation& allocation) { linear_.emplace(allocation.base, allocation); }

std::optional<LinearAllocation> AddressSpace::take_linear(std::uintptr_t base) {
  const auto found = linear_.find(base);
  if (found == linear_.end()) return std::nullopt;
  LinearAllocation taken = found->second;
  linear_.erase(found);
  return taken;
}

LinearAllocation* AddressSpace::linear_at(std::uintptr_t base) {
  const auto found = linear_.find(base);
  return found == linear_.end() ? nullptr : &found->second;
}

const LinearAllocation* AddressSpace::linear_containing(std::uintptr_t address) const {
  auto after = linear_.upper_bound(address);
  if (after == linear_.begin()) return nullptr;
  const LinearAllocation& candidate = std::prev(after)->second;
  return address < candidate.base + candidate.size ? &candidate : nullptr;
}

bool AddressSpace::tracked(std::uintptr_t address) {
  return linear_containing(address) != nullptr || reservation_containing(address) != nullptr;
}

bool AddressSpace::overlaps_tracked(std::uintptr_t address, std::uintptr_t end) {
  if (tracked(address)) return true;
  if (const auto next = linear_.lower_bound(address); next != linear_.end() && next->first < end) return true;
  const auto next = reservations_.lower_bound(address);
  return next != reservations_.end() && next->first < end;
}

bool AddressSpace::device_may_touch(std::uintptr_t address, std::size_t bytes, int device, hipMemAccessFlags needed) {
  const std::uintptr_t end = address + bytes;
  if (end < address) return false;
  if (const LinearAllocation* linear = linear_containing(address)) return end <= linear->base + linear->size;
  Reservation* reservation = reservation_containing(address);
  // A host range must not run into tracked memory either.
  if (reservation == nullptr) return !overlaps_tracked(address, end);
  if (!reservation->contains(address, bytes)) return false;
  std::uintptr_t cursor = address;
  while (cursor < end) {
    const MappingRecord* mapping = mapping_in(reservation->mappings, cursor);
    if (mapping == nullptr) return false;
    const hipMemAccessFlags granted = mapping->access.of(device);
    const bool enough = needed == hipMemAccessFlagsProtRead ? granted != hipMemAccessFlagsProtNone
                                                            : granted == hipMemAccessFlagsProtReadWrite;
    if (!enough) return false;
    cursor = mapping->end();
  }
  return true;
}

std::size_t AddressSpace::mapping_count() const noexcept {
  std::size_t count = 0;
  for (const auto& [base, reservation] : reservations_) count += reservation.mappings.size();
  return count;
}

}  // namespace hipxx::core
