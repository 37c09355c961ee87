// What HIP remembers about managed memory: per page-aligned range, the advice given
// (read-mostly, preferred location, accessed-by devices, coarse grain) and where the last prefetch
// went. Ranges live in an ordered map of runs of pages with equal state; advice over part of a run
// splits it, and runs that become equal merge again, so the map stays as small as the state.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace hipxx::core {

// The host (hipCpuDeviceId) and every device: bit 0 the host, bit d + 1 device d.
inline constexpr int kManagedLocations = 1 + 64;
using LocationSet = std::bitset<kManagedLocations>;

struct PageState {
  bool read_mostly = false;
  int preferred_location = hipInvalidDeviceId;
  LocationSet accessed_by;
  int last_prefetch = hipInvalidDeviceId;
  bool coarse_grain = false;
  bool operator==(const PageState&) const = default;
};

struct ManagedAllocation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  // Never the same for two allocations: stream work that records its effect when it runs names the
  // allocation it was queued for, so that, should the memory be freed and its address taken by a
  // new allocation before then, the new one's state is left alone.
  std::uint64_t generation = 0;
  unsigned attach_flags = hipMemAttachGlobal;
  std::map<std::uintptr_t, PageState> runs;  // run start -> state, up to the next start or the end
};

// An allocation as stream work names it.
struct ManagedSpan {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  std::uint64_t generation = 0;

  // Of `bytes` from `address`, those inside the allocation: a range may end anywhere in its last page.
  [[nodiscard]] std::size_t bytes_from(std::uintptr_t address, std::size_t bytes) const noexcept {
    return std::min(bytes, base + size - address);
  }
};

// One attribute asked of a range, and where its answer goes.
struct RangeQuery {
  hipMemRangeAttribute attribute{};
  void* data = nullptr;
  std::size_t data_size = 0;
};

// The attributes hipMemRangeGetAttributes asks, read from the caller's three arrays where they lie:
// the count is the caller's, and copying the arrays would make a count that no memory holds an
// allocation failure rather than the caller's error.
struct RangeQueries {
  void* const* data = nullptr;
  const std::size_t* data_sizes = nullptr;
  const hipMemRangeAttribute* attributes = nullptr;
  std::size_t count = 0;

  [[nodiscard]] RangeQuery operator[](std::size_t index) const noexcept {
    return {.attribute = attributes[index], .data = data[index], .data_size = data_sizes[index]};
  }
};

class ManagedMemory {
 public:
  explicit ManagedMemory(std::size_t page_size) : page_(page_size) {}

  void add(std::uintptr_t base, std::size_t size, unsigned attach_flags);
  void remove(std::uintptr_t base);
  // Whether [address, address + bytes) lies inside one managed allocation (its last page all of it).
  [[nodiscard]] bool covers(std::uintptr_t address, std::size_t bytes) const;
  // The allocation holding [address, address + bytes), if one does.
  [[nodiscard]] std::optional<ManagedSpan> allocation_holding(std::uintptr_t address, std::size_t bytes) const;

  [[nodiscard]] hipError_t advise(std::uintptr_t address, std::size_t bytes, hipMemoryAdvise advice, int device);
  // Both change only the allocation of the given generation, if it still exists.
  void record_prefetch(std::uintptr_t address, std::size_t bytes, int device, std::uint64_t generation);
  void set_attach(std::uintptr_t base, unsigned flags, std::uint64_t generation);
  [[nodiscard]] std::optional<unsigned> attach_flags(std::uintptr_t base) const;

  // Attributes over a range, as hipMemRangeGetAttribute(s) define them: all answered, or, where one
  // cannot be, none written.
  [[nodiscard]] hipError_t query(RangeQueries requests, std::uintptr_t address, std::size_t bytes) const;
  [[nodiscard]] std::size_t run_count(std::uintptr_t base) const;

 private:
  template <class Change>
  void change_pages(ManagedAllocation& allocation, std::uintptr_t address, std::size_t bytes, Change&& change);
  [[nodiscard]] ManagedAllocation* find(std::uintptr_t address, std::size_t bytes);
  [[nodiscard]] const ManagedAllocation* find(std::uintptr_t address, std::size_t bytes) const;
  [[nodiscard]] static std::vector<PageState> states_over(const ManagedAllocation& allocation, std::uintptr_t address,
                                                          std::size_t bytes);

  std::size_t page_;
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, ManagedAllocation> allocations_;
  std::uint64_t next_generation_ = 1;
};

}  // namespace hipxx::core
