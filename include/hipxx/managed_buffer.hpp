// Managed (unified) memory: one pointer valid on the host and on every device, moved between them by
// the runtime.
//
//  - `ManagedBuffer<T>` owns `size()` elements from hipMallocManaged and frees them with hipFree.
//  - `ManagedRange` borrows a byte range of managed memory: advice, prefetches and range queries act
//    on ranges, and the runtime splits and merges its per-page state at their edges, so a sub-range
//    (ManagedBuffer::range(first, count)) is a first-class thing to advise or ask about.
//
// Both offer the same operations: prefetch, advice (the typed `Advice` or the named helpers) and the
// range attributes as typed values. Locations are `Device`s; the host is `cpu_device`, HIP's
// hipCpuDeviceId, because every managed-memory call names the host with that device id.
#pragma once

#include <hipxx/device.hpp>
#include <hipxx/device_allocatable.hpp>
#include <hipxx/error.hpp>
#include <hipxx/mem_pool.hpp>  // detail::array_bytes
#include <hipxx/stream.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace hipxx {

// The host as a managed-memory location (prefetch target, preferred location, accessed-by). It is
// not a device: Device's own calls (attribute(), make_current()) refuse it.
inline constexpr Device cpu_device{hipCpuDeviceId};

// Values equal HIP's flags. Where managed memory may be used (hipMallocManaged takes global or
// host; hipStreamAttachMemAsync takes all three).
enum class Attach : unsigned {
  global = hipMemAttachGlobal,  // any stream of any device
  host = hipMemAttachHost,  // the host only, until attached to a stream
  single = hipMemAttachSingle,  // the one stream it is attached to
};

// Values equal hipMemoryAdvise.
enum class Advice : int {
  set_read_mostly = hipMemAdviseSetReadMostly,
  unset_read_mostly = hipMemAdviseUnsetReadMostly,
  set_preferred_location = hipMemAdviseSetPreferredLocation,
  unset_preferred_location = hipMemAdviseUnsetPreferredLocation,
  set_accessed_by = hipMemAdviseSetAccessedBy,
  unset_accessed_by = hipMemAdviseUnsetAccessedBy,
  set_coarse_grain = hipMemAdviseSetCoarseGrain,
  unset_coarse_grain = hipMemAdviseUnsetCoarseGrain,
};

// Values equal hipMemRangeCoherencyMode. An AMD attribute: CUDA has no coarse-grain advice.
enum class Coherency : int {
  fine_grain = hipMemRangeCoherencyModeFineGrain,
  coarse_grain = hipMemRangeCoherencyModeCoarseGrain,
  indeterminate = hipMemRangeCoherencyModeIndeterminate,  // the range mixes both
};

// Every range attribute, read with one hipMemRangeGetAttributes call, so all describe the same moment.
struct ManagedRangeAttributes {
  bool read_mostly = false;  // true only when every page is read-mostly
  std::optional<Device> preferred_location;  // none when never set or not the same on every page
  std::optional<Device> last_prefetch_location;  // likewise
  std::vector<int> accessed_by;  // device ids advised over the whole range; the host is hipCpuDeviceId
  Coherency coherency = Coherency::fine_grain;
};

namespace detail {

// HIP answers "no single location" with hipInvalidDeviceId; an optional says the same in the type.
[[nodiscard]] constexpr std::optional<Device> managed_location(int id) noexcept {
  if (id == hipInvalidDeviceId) {
    return std::nullopt;
  }
  return Device{id};
}

// HIP fills the accessed-by array from the front and marks the unused slots hipInvalidDeviceId.
[[nodiscard]] inline std::vector<int> accessed_by_list(std::vector<int> slots) {
  std::erase(slots, hipInvalidDeviceId);
  return slots;
}

// One slot per device and one for the host: the most that can ever be advised over a range.
[[nodiscard]] inline result<std::size_t> accessed_by_slots() noexcept {
  auto const count = device_count();
  if (!count) {
    return count.as_failure();
  }
  return static_cast<std::size_t>(count.value()) + 1;
}

// The operations a borrowed range and an owned buffer share, written once over the derived class's
// `range_data()` and `range_bytes()`.
template <class Derived>
class ManagedRangeOperations {
 public:
  // Moves the range to `destination` (a device, or cpu_device) in stream order: range queries report
  // the new location only once `stream` has reached the prefetch.
  [[nodiscard]] result<void> prefetch(Device destination, StreamRef stream = {}) const noexcept {
    return check(hipMemPrefetchAsync(data_of(), size_of(), destination.id(), stream.native()));
  }

  // The runtime rounds the range out to whole pages. `device` matters only for the location advice
  // (preferred location, accessed-by), where cpu_device names the host.
  [[nodiscard]] result<void> advise(Advice advice, Device device = cpu_device) const noexcept {
    return check(hipMemAdvise(data_of(), size_of(), static_cast<hipMemoryAdvise>(advice), device.id()));
  }

  [[nodiscard]] result<void> set_read_mostly(bool on) const noexcept {
    return advise(on ? Advice::set_read_mostly : Advice::unset_read_mostly);
  }

  // None removes the preference.
  [[nodiscard]] result<void> set_preferred_location(std::optional<Device> location) const noexcept {
    return location ? advise(Advice::set_preferred_location, *location) : advise(Advice::unset_preferred_location);
  }

  [[nodiscard]] result<void> set_accessed_by(Device device, bool on) const noexcept {
    return advise(on ? Advice::set_accessed_by : Advice::unset_accessed_by, device);
  }

  [[nodiscard]] result<void> set_coarse_grain(bool on) const noexcept {
    return advise(on ? Advice::set_coarse_grain : Advice::unset_coarse_grain);
  }

  [[nodiscard]] result<bool> read_mostly() const noexcept {
    auto const value = int_attribute(hipMemRangeAttributeReadMostly);
    if (!value) {
      return value.as_failure();
    }
    return value.value() != 0;
  }

  [[nodiscard]] result<std::optional<Device>> preferred_location() const noexcept {
    return location_attribute(hipMemRangeAttributePreferredLocation);
  }

  [[nodiscard]] result<std::optional<Device>> last_prefetch_location() const noexcept {
    return location_attribute(hipMemRangeAttributeLastPrefetchLocation);
  }

  // The ids with accessed-by advice over the whole range, the host (hipCpuDeviceId) first.
  [[nodiscard]] result<std::vector<int>> accessed_by() const {
    auto const slots = accessed_by_slots();
    if (!slots) {
      return slots.as_failure();
    }
    std::vector<int> ids(slots.value(), hipInvalidDeviceId);
    if (auto const error = hipMemRangeGetAttribute(ids.data(), ids.size() * sizeof(int), hipMemRangeAttributeAccessedBy,
                                                   data_of(), size_of());
        error != hipSuccess) {
      return failure(error);
    }
    return accessed_by_list(std::move(ids));
  }

  [[nodiscard]] result<Coherency> coherency() const noexcept {
    auto const value = int_attribute(hipMemRangeAttributeCoherencyMode);
    if (!value) {
      return value.as_failure();
    }
    return static_cast<Coherency>(value.value());
  }

  [[nodiscard]] result<ManagedRangeAttributes> attributes() const {
    auto const slots = accessed_by_slots();
    if (!slots) {
      return slots.as_failure();
    }
    int read_mostly_value = 0;
    int preferred = hipInvalidDeviceId;
    int last_prefetch = hipInvalidDeviceId;
    int coherency_value = hipMemRangeCoherencyModeFineGrain;
    std::vector<int> ids(slots.value(), hipInvalidDeviceId);
    std::array<void*, 5> data{&read_mostly_value, &preferred, ids.data(), &last_prefetch, &coherency_value};
    std::array<std::size_t, 5> sizes{sizeof(int), sizeof(int), ids.size() * sizeof(int), sizeof(int), sizeof(int)};
    std::array<hipMemRangeAttribute, 5> which{hipMemRangeAttributeReadMostly, hipMemRangeAttributePreferredLocation,
                                              hipMemRangeAttributeAccessedBy, hipMemRangeAttributeLastPrefetchLocation,
                                              hipMemRangeAttributeCoherencyMode};
    if (auto const error =
            hipMemRangeGetAttributes(data.data(), sizes.data(), which.data(), which.size(), data_of(), size_of());
        error != hipSuccess) {
      return failure(error);
    }
    return ManagedRangeAttributes{
        .read_mostly = read_mostly_value != 0,
        .preferred_location = managed_location(preferred),
        .last_prefetch_location = managed_location(last_prefetch),
        .accessed_by = accessed_by_list(std::move(ids)),
        .coherency = static_cast<Coherency>(coherency_value),
    };
  }

 private:
  [[nodiscard]] void const* data_of() const noexcept { return static_cast<Derived const&>(*this).range_data(); }
  [[nodiscard]] std::size_t size_of() const noexcept { return static_cast<Derived const&>(*this).range_bytes(); }

  [[nodiscard]] result<int> int_attribute(hipMemRangeAttribute attribute) const noexcept {
    int value = 0;
    // The runtime only writes `value`; the range is const for C's sake too.
    if (auto const error = hipMemRangeGetAttribute(&value, sizeof value, attribute, data_of(), size_of());
        error != hipSuccess) {
      return failure(error);
    }
    return value;
  }

  [[nodiscard]] result<std::optional<Device>> location_attribute(hipMemRangeAttribute attribute) const noexcept {
    auto const value = int_attribute(attribute);
    if (!value) {
      return value.as_failure();
    }
    return managed_location(value.value());
  }
};

}  // namespace detail

// A borrowed byte range inside one managed allocation. Nothing is checked until a call uses it: the
// runtime answers hipErrorInvalidValue for a range that is not managed memory.
class ManagedRange : public detail::ManagedRangeOperations<ManagedRange> {
 public:
  constexpr ManagedRange(void const* data, std::size_t bytes) noexcept : data_(data), bytes_(bytes) {}

  [[nodiscard]] constexpr void const* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t size_bytes() const noexcept { return bytes_; }

 private:
  friend class detail::ManagedRangeOperations<ManagedRange>;
  [[nodiscard]] constexpr void const* range_data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t range_bytes() const noexcept { return bytes_; }

  void const* data_;
  std::size_t bytes_;
};

template <device_allocatable T>
class ManagedBuffer : public detail::ManagedRangeOperations<ManagedBuffer<T>> {
 public:
  using value_type = T;

  // `count` elements, attached globally (any stream) or to the host. The memory is uninitialised, as
  // from hipMallocManaged. HIP refuses a zero-byte managed allocation (hipErrorInvalidValue); a count
  // whose size in bytes overflows is hipErrorOutOfMemory.
  [[nodiscard]] static result<ManagedBuffer> create(std::size_t count, Attach attach = Attach::global) noexcept {
    std::size_t bytes = 0;
    if (!detail::array_bytes<T>(count, &bytes)) {
      return failure(hipErrorOutOfMemory);
    }
    void* data = nullptr;
    if (auto const error = hipMallocManaged(&data, bytes, static_cast<unsigned>(attach)); error != hipSuccess) {
      return failure(error);
    }
    return ManagedBuffer{static_cast<T*>(data), count};
  }

  // Takes over memory from hipMallocManaged holding `count` elements; the way back from release().
  [[nodiscard]] static ManagedBuffer adopt(T* data, std::size_t count) noexcept { return ManagedBuffer{data, count}; }

  ManagedBuffer(ManagedBuffer const&) = delete;
  ManagedBuffer& operator=(ManagedBuffer const&) = delete;

  ManagedBuffer(ManagedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}

  ManagedBuffer& operator=(ManagedBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  // hipFree waits for the device's queued work first, so work still using the memory finishes.
  ~ManagedBuffer() { reset(); }

  // data(), span(), the elements and ranges are views of the memory, so not of a temporary buffer:
  // it is freed at the end of the statement, and the view would reach whatever is allocated there next.
  // (A range-for over `create(n).value()` is not caught: C++20 binds the loop to a reference into
  // the result, which is gone before begin() is called. Name the buffer first.)
  [[nodiscard]] T* data() const& noexcept { return data_; }
  void data() const&& = delete;
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] explicit operator bool() const noexcept { return data_ != nullptr; }

  // The elements, for the host to read and write. This is the one place hipxx hands device memory to
  // host code as ordinary objects: managed memory is defined to be host accessible, which no other
  // hipxx memory is. The host must not touch it while device work that uses it may be running,
  // unless the device reports hipDeviceAttributeConcurrentManagedAccess: synchronise the stream
  // first, as for any data the device writes.
  [[nodiscard]] std::span<T> span() const& noexcept { return {data_, count_}; }
  void span() const&& = delete;
  [[nodiscard]] T& operator[](std::size_t index) const& noexcept { return data_[index]; }
  void operator[](std::size_t index) const&& = delete;
  [[nodiscard]] T* begin() const& noexcept { return data_; }
  void begin() const&& = delete;
  [[nodiscard]] T* end() const& noexcept { return data_ + count_; }
  void end() const&& = delete;
  // std::span<T const> takes any contiguous range, a temporary one too where its elements are const,
  // and reads it through a name of its own, past the deleted overloads above. This makes that
  // conversion ambiguous, so `std::span<T const> s = create(n).value();` (or such a temporary
  // passed for a span parameter) does not compile; the direct form `std::span<T const> s{...}` still
  // does, and still dangles.
  operator std::span<T const>() && = delete;
  operator std::span<T const>() const&& = delete;

  // The whole buffer as a range, and `count` elements from `first` (hipErrorInvalidValue where they
  // do not fit). Advice on a sub-range applies to whole pages: the runtime rounds it out.
  [[nodiscard]] ManagedRange range() const& noexcept { return ManagedRange{data_, size_bytes()}; }
  void range() const&& = delete;

  [[nodiscard]] result<ManagedRange> range(std::size_t first, std::size_t count) const& noexcept {
    if (first > count_ || count > count_ - first) {
      return failure(hipErrorInvalidValue);
    }
    return ManagedRange{data_ + first, count * sizeof(T)};
  }
  void range(std::size_t first, std::size_t count) const&& = delete;

  // Makes the memory usable by `stream` alone (single), by any stream (global) or by the host
  // (host), from the point `stream` reaches this call. HIP attaches a managed allocation whole.
  [[nodiscard]] result<void> attach(StreamRef stream, Attach attach = Attach::single) const noexcept {
    return check(hipStreamAttachMemAsync(stream.native(), data_, 0, static_cast<unsigned>(attach)));
  }

  // Frees now and reports the runtime's answer, which the destructor has to drop. On failure the
  // ManagedBuffer still owns the memory.
  [[nodiscard]] result<void> free() noexcept {
    if (data_ == nullptr) {
      return outcome::success();
    }
    if (auto const error = hipFree(data_); error != hipSuccess) {
      return failure(error);
    }
    data_ = nullptr;
    count_ = 0;
    return outcome::success();
  }

  // Gives up ownership; the caller must hipFree the pointer.
  [[nodiscard]] T* release() noexcept {
    count_ = 0;
    return std::exchange(data_, nullptr);
  }

 private:
  friend class detail::ManagedRangeOperations<ManagedBuffer>;
  [[nodiscard]] void const* range_data() const noexcept { return data_; }
  [[nodiscard]] std::size_t range_bytes() const noexcept { return size_bytes(); }

  ManagedBuffer(T* data, std::size_t count) noexcept : data_(data), count_(count) {}

  void reset() noexcept {
    if (data_ != nullptr) {
      (void)hipFree(data_);
      data_ = nullptr;
      count_ = 0;
    }
  }

  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace hipxx
