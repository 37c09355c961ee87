// An open-addressing hash map from addresses to small values, for the allocator's hot path: one
// probe sequence in one flat array, no allocation per entry (a std::unordered_map allocates a node
// on every insert). Keys are never zero; erasure shifts later entries back, so no tombstones build up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace hipxx::core {

template <class Value>
class FlatAddressMap {
 public:
  FlatAddressMap() : slots_(kInitialSlots) {}

  void insert(std::uintptr_t key, Value value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(key, std::move(value));
    ++size_;
  }

  [[nodiscard]] const Value* find(std::uintptr_t key) const {
    for (std::size_t index = home(key);; index = next(index)) {
      const Slot& slot = slots_[index];
      if (slot.key == key) return &slot.value;
      if (slot.key == 0) return nullptr;
    }
  }

  [[nodiscard]] bool contains(std::uintptr_t key) const { return find(key) != nullptr; }

  // Removes the entry and returns its value, if there was one.
  std::optional<Value> take(std::uintptr_t key) {
    std::size_t index = home(key);
    while (slots_[index].key != key) {
      if (slots_[index].key == 0) return std::nullopt;
      index = next(index);
    }
    std::optional<Value> taken{std::move(slots_[index].value)};
    // Backward shift: pull later members of the probe run into the hole, so lookups never stop early.
    for (std::size_t hole = index, probe = next(index);; probe = next(probe)) {
      Slot& candidate = slots_[probe];
      if (candidate.key == 0) {
        slots_[hole] = Slot{};
        break;
      }
      const std::size_t wanted = home(candidate.key);
      const bool movable = hole <= probe ? (wanted <= hole || wanted > probe) : (wanted <= hole && wanted > probe);
      if (movable) {
        slots_[hole] = std::move(candidate);
        hole = probe;
      }
    }
    --size_;
    return taken;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    std::uintptr_t key = 0;
    Value value{};
  };
  static constexpr std::size_t kInitialSlots = 128;

  [[nodiscard]] std::size_t home(std::uintptr_t key) const noexcept {
    // Fibonacci hashing spreads the aligned, regularly spaced addresses over the table.
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20) & (slots_.size() - 1);
  }
  [[nodiscard]] std::size_t next(std::size_t index) const noexcept { return (index + 1) & (slots_.size() - 1); }

  void place(std::uintptr_t key, Value value) {
    std::size_t index = home(key);
    while (slots_[index].key != 0) index = next(index);
    slots_[index] = Slot{key, std::move(value)};
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (Slot& slot : old) {
      if (slot.key != 0) place(slot.key, std::move(slot.value));
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace hipxx::core
