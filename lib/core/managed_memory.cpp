#include "core/managed_memory.hpp"

#include "core/address_space.hpp"

#include <algorithm>
#include <iterator>

namespace hipxx::core {

static_assert(kManagedLocations == 1 + AccessList::kMaxDevices, "a location set holds the host and every device");

namespace {

std::size_t location_index(int location) noexcept { return static_cast<std::size_t>(location - hipCpuDeviceId); }

// The same answer from every page, or `mixed`.
template <class Value, class Read>
Value common(const std::vector<PageState>& states, Value mixed, Read read) {
  const Value first = read(states.front());
  const bool uniform =
      std::all_of(states.begin(), states.end(), [&](const PageState& state) { return read(state) == first; });
  return uniform ? first : mixed;
}

// The allocation holding all of [address, address + bytes), or null: one body for both find()s.
// An allocation holds the whole of its last page: HIP rounds a range's end up to a page.
template <class Allocations>
auto containing(Allocations& allocations, std::uintptr_t address, std::size_t bytes, std::size_t page)
    -> decltype(&allocations.begin()->second) {
  auto after = allocations.upper_bound(address);
  if (after == allocations.begin()) return nullptr;
  auto& candidate = std::prev(after)->second;
  const std::uintptr_t end = candidate.base + (candidate.size + page - 1) / page * page;
  return address < end && bytes <= end - address ? &candidate : nullptr;
}

// Whether `request` can be answered: a place, and room of the attribute's shape.
bool answerable(const RangeQuery& request) noexcept {
  if (request.data == nullptr) return false;
  switch (request.attribute) {
    case hipMemRangeAttributeReadMostly:
    case hipMemRangeAttributePreferredLocation:
    case hipMemRangeAttributeLastPrefetchLocation:
    case hipMemRangeAttributeCoherencyMode: return request.data_size == sizeof(std::int32_t);
    case hipMemRangeAttributeAccessedBy: return request.data_size != 0 && request.data_size % sizeof(std::int32_t) == 0;
  }
  return false;
}

void answer(const std::vector<PageState>& states, const RangeQuery& request) {
  auto* out = static_cast<std::int32_t*>(request.data);
  switch (request.attribute) {
    case hipMemRangeAttributeReadMostly:
      *out =
          std::all_of(states.begin(), states.end(), [](const PageState& state) { return state.read_mostly; }) ? 1 : 0;
      return;
    case hipMemRangeAttributePreferredLocation:
      *out = common(states, hipInvalidDeviceId, [](const PageState& state) { return state.preferred_location; });
      return;
    case hipMemRangeAttributeLastPrefetchLocation:
      *out = common(states, hipInvalidDeviceId, [](const PageState& state) { return state.last_prefetch; });
      return;
    case hipMemRangeAttributeCoherencyMode: {
      const int coarse = common(states, -1, [](const PageState& state) { return state.coarse_grain ? 1 : 0; });
      *out = coarse < 0 ? hipMemRangeCoherencyModeIndeterminate
                        : (coarse == 1 ? hipMemRangeCoherencyModeCoarseGrain : hipMemRangeCoherencyModeFineGrain);
      return;
    }
    case hipMemRangeAttributeAccessedBy: {
      LocationSet everywhere;
      everywhere.set();
      for (const PageState& state : states) everywhere &= state.accessed_by;
      // Devices with the advice over the whole range, host first, then unused slots marked invalid.
      const std::size_t slots = request.data_size / sizeof(std::int32_t);
      std::size_t written = 0;
      for (int location = hipCpuDeviceId; location < kManagedLocations - 1 && written < slots; ++location) {
        if (everywhere.test(location_index(location))) out[written++] = location;
      }
      std::fill(out + written, out + slots, hipInvalidDeviceId);
      return;
    }
  }
}

}  // namespace

void ManagedMemory::add(std::uintptr_t base, std::size_t size, unsigned attach_flags) {
  std::lock_guard lock{mutex_};
  ManagedAllocation allocation{
      .base = base, .size = size, .generation = next_generation_++, .attach_flags = attach_flags, .runs = {}};
  allocation.runs.emplace(base, PageState{});
  allocations_.emplace(base, std::move(allocation));
}

void ManagedMemory::remove(std::uintptr_t base) {
  std::lock_guard lock{mutex_};
  allocations_.erase(base);
}

ManagedAllocation* ManagedMemory::find(std::uintptr_t address, std::size_t bytes) {
  return containing(allocations_, address, bytes, page_);
}

const ManagedAllocation* ManagedMemory::find(std::uintptr_t address, std::size_t bytes) const {
  return containing(allocations_, address, bytes, page_);
}

bool ManagedMemory::covers(std::uintptr_t address, std::size_t bytes) const {
  std::lock_guard lock{mutex_};
  return find(address, bytes) != nullptr;
}

std::optional<ManagedSpan> ManagedMemory::allocation_holding(std::uintptr_t address, std::size_t bytes) const {
  std::lock_guard lock{mutex_};
  const ManagedAllocation* allocation = find(address, bytes);
  if (allocation == nullptr) return std::nullopt;
  return ManagedSpan{.base = allocation->base, .size = allocation->size, .generation = allocation->generation};
}

template <class Change>
void ManagedMemory::change_pages(ManagedAllocation& allocation, std::uintptr_t address, std::size_t bytes,
                                 Change&& change) {
  // Whole pages: the start rounds down and the end rounds up, as HIP documents for advice.
  const std::uintptr_t start = std::max(allocation.base, address / page_ * page_);
  const std::uintptr_t end = std::min(allocation.base + allocation.size, (address + bytes + page_ - 1) / page_ * page_);
  auto& runs = allocation.runs;
  const auto split_at = [&](std::uintptr_t at) {
    if (at >= allocation.base + allocation.size) return;
    auto run = std::prev(runs.upper_bound(at));
    if (run->first != at) runs.emplace_hint(std::next(run), at, run->second);
  };
  split_at(start);
  split_at(end);
  for (auto run = runs.find(start); run != runs.end() && run->first < end; ++run) change(run->second);
  // Merge equal neighbours around and inside the changed span.
  auto run = runs.find(start);
  if (run != runs.begin()) run = std::prev(run);
  while (run != runs.end()) {
    auto next = std::next(run);
    if (next == runs.end() || next->first > end) break;
    if (next->second == run->second) {
      runs.erase(next);
    } else {
      run = next;
    }
  }
}

hipError_t ManagedMemory::advise(std::uintptr_t address, std::size_t bytes, hipMemoryAdvise advice, int device) {
  std::lock_guard lock{mutex_};
  ManagedAllocation* allocation = find(address, bytes);
  if (allocation == nullptr) return hipErrorInvalidValue;
  switch (advice) {
    case hipMemAdviseSetReadMostly:
      change_pages(*allocation, address, bytes, [](PageState& state) { state.read_mostly = true; });
      break;
    case hipMemAdviseUnsetReadMostly:
      change_pages(*allocation, address, bytes, [](PageState& state) { state.read_mostly = false; });
      break;
    case hipMemAdviseSetPreferredLocation:
      change_pages(*allocation, address, bytes, [device](PageState& state) { state.preferred_location = device; });
      break;
    case hipMemAdviseUnsetPreferredLocation:
      change_pages(*allocation, address, bytes,
                   [](PageState& state) { state.preferred_location = hipInvalidDeviceId; });
      break;
    case hipMemAdviseSetAccessedBy:
      change_pages(*allocation, address, bytes,
                   [device](PageState& state) { state.accessed_by.set(location_index(device)); });
      break;
    case hipMemAdviseUnsetAccessedBy:
      change_pages(*allocation, address, bytes,
                   [device](PageState& state) { state.accessed_by.reset(location_index(device)); });
      break;
    case hipMemAdviseSetCoarseGrain:
      change_pages(*allocation, address, bytes, [](PageState& state) { state.coarse_grain = true; });
      break;
    case hipMemAdviseUnsetCoarseGrain:
      change_pages(*allocation, address, bytes, [](PageState& state) { state.coarse_grain = false; });
      break;
    default: return hipErrorInvalidValue;
  }
  return hipSuccess;
}

void ManagedMemory::record_prefetch(std::uintptr_t address, std::size_t bytes, int device, std::uint64_t generation) {
  std::lock_guard lock{mutex_};
  if (ManagedAllocation* allocation = find(address, bytes);
      allocation != nullptr && allocation->generation == generation) {
    change_pages(*allocation, address, bytes, [device](PageState& state) { state.last_prefetch = device; });
  }
}

void ManagedMemory::set_attach(std::uintptr_t base, unsigned flags, std::uint64_t generation) {
  std::lock_guard lock{mutex_};
  if (ManagedAllocation* allocation = find(base, 1); allocation != nullptr && allocation->generation == generation) {
    allocation->attach_flags = flags;
  }
}

std::optional<unsigned> ManagedMemory::attach_flags(std::uintptr_t base) const {
  std::lock_guard lock{mutex_};
  const ManagedAllocation* allocation = find(base, 1);
  if (allocation == nullptr) return std::nullopt;
  return allocation->attach_flags;
}

std::vector<PageState> ManagedMemory::states_over(const ManagedAllocation& allocation, std::uintptr_t address,
                                                  std::size_t bytes) {
  std::vector<PageState> states;
  const std::uintptr_t end = address + bytes;
  for (auto run = std::prev(allocation.runs.upper_bound(address)); run != allocation.runs.end() && run->first < end;
       ++run) {
    states.push_back(run->second);
  }
  return states;
}

hipError_t ManagedMemory::query(RangeQueries requests, std::uintptr_t address, std::size_t bytes) const {
  if (requests.count == 0 || bytes == 0) return hipErrorInvalidValue;
  for (std::size_t index = 0; index < requests.count; ++index) {
    if (!answerable(requests[index])) return hipErrorInvalidValue;
  }
  std::lock_guard lock{mutex_};
  const ManagedAllocation* allocation = find(address, bytes);
  if (allocation == nullptr) return hipErrorInvalidValue;
  const std::vector<PageState> states = states_over(*allocation, address, bytes);
  for (std::size_t index = 0; index < requests.count; ++index) answer(states, requests[index]);
  return hipSuccess;
}

std::size_t ManagedMemory::run_count(std::uintptr_t base) const {
  std::lock_guard lock{mutex_};
  const ManagedAllocation* allocation = find(base, 1);
  return allocation == nullptr ? 0 : allocation->runs.size();
}

}  // namespace hipxx::core
