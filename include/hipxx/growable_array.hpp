// A device array that grows without moving: it reserves one large virtual range up front and maps
// physical chunks into it as it grows, so data() never changes, growth copies nothing, and the memory
// held is the size rounded up to a whole chunk, or what reserve() mapped ahead until shrink_to_fit()
// (where std::vector-style growth peaks at old + new).
//
// Not thread-safe, like std::vector. Elements live in device memory: data() is a device address,
// and every transfer goes through hipMemcpy/hipMemset so the same code runs on a GPU backend.
// Each chunk grants read-write access to the array's device only, and HIP copies on behalf of the
// current device, so transfers need that device to be current (hipSetDevice / Device::make_current).
#pragma once

#include <hipxx/access.hpp>
#include <hipxx/detail/address.hpp>
#include <hipxx/device.hpp>
#include <hipxx/device_storable.hpp>
#include <hipxx/error.hpp>
#include <hipxx/mapping.hpp>
#include <hipxx/physical_allocation.hpp>
#include <hipxx/virtual_range.hpp>

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace hipxx {

template <class T>
requires device_storable<T>  // elements move as bytes, by hipMemcpy, and are written in place
class GrowableArray {
 public:
  using value_type = T;
  using size_type = std::size_t;

  // Address space only: reserving it costs page-table bookkeeping, not memory.
  static constexpr std::size_t default_max_bytes = std::size_t{64} << 30;

  // `max_bytes` bounds the array for its whole life (rounded up to whole chunks). `chunk_bytes` is the
  // unit of growth, a multiple of the device's recommended granularity; 0 means that granularity.
  [[nodiscard]] static result<GrowableArray> create(Device device, std::size_t max_bytes = default_max_bytes,
                                                    std::size_t chunk_bytes = 0) {
    auto const granularity = device.granularity(Granularity::recommended);
    if (!granularity) {
      return granularity.as_failure();
    }
    if (chunk_bytes == 0) {
      chunk_bytes = granularity.value();
    }
    if (!detail::is_multiple(chunk_bytes, granularity.value()) || max_bytes < sizeof(T)) {
      return failure(hipErrorInvalidValue);
    }
    std::size_t const chunks = max_bytes / chunk_bytes + (max_bytes % chunk_bytes != 0 ? 1 : 0);
    if (chunks > SIZE_MAX / chunk_bytes) {
      return failure(hipErrorInvalidValue);
    }
    auto range = VirtualRange::reserve(chunks * chunk_bytes, granularity.value());
    if (!range) {
      return range.as_failure();
    }
    return GrowableArray{device, std::move(range).value(), chunk_bytes};
  }

  GrowableArray(GrowableArray const&) = delete;
  GrowableArray& operator=(GrowableArray const&) = delete;

  GrowableArray(GrowableArray&& other) noexcept
      : device_(other.device_),
        chunk_bytes_(other.chunk_bytes_),
        size_(std::exchange(other.size_, 0)),
        range_(std::move(other.range_)),
        chunks_(std::exchange(other.chunks_, {})) {}

  // Not defaulted: memberwise assignment would replace range_ while our old chunks are still mapped
  // into it.
  GrowableArray& operator=(GrowableArray&& other) noexcept {
    if (this != &other) {
      unmap_down_to(0);
      device_ = other.device_;
      chunk_bytes_ = other.chunk_bytes_;
      size_ = std::exchange(other.size_, 0);
      range_ = std::move(other.range_);
      chunks_ = std::exchange(other.chunks_, {});
    }
    return *this;
  }

  // Members go in reverse order: the chunks are unmapped before the range is freed.
  ~GrowableArray() = default;

  [[nodiscard]] Device device() const noexcept { return device_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  // Elements that fit in the chunks mapped now, i.e. without mapping more.
  [[nodiscard]] std::size_t capacity() const noexcept { return mapped_bytes() / sizeof(T); }
  // Elements that fit in the reserved range: the most the array can ever hold.
  [[nodiscard]] std::size_t max_size() const noexcept { return range_.size() / sizeof(T); }
  [[nodiscard]] std::size_t mapped_bytes() const noexcept { return chunks_.size() * chunk_bytes_; }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return range_.size(); }
  [[nodiscard]] std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  [[nodiscard]] std::size_t chunks_mapped() const noexcept { return chunks_.size(); }

  // A device address, the same for the array's whole life (null once moved from). Never dereference
  // it on the host: pass it to kernels and hipMemcpy. Not of a temporary array, whose range is freed
  // at the end of the statement.
  [[nodiscard]] T* data() & noexcept { return static_cast<T*>(range_.base()); }
  [[nodiscard]] T const* data() const& noexcept { return static_cast<T const*>(range_.base()); }
  void data() const&& = delete;

  // Growing maps chunks and zero-fills the new elements. Shrinking unmaps and releases every chunk
  // past the one holding the last element. On failure nothing has changed.
  [[nodiscard]] result<void> resize(std::size_t count) noexcept {
    if (count > max_size()) {
      return failure(beyond_reach());
    }
    if (count == size_) {
      return outcome::success();
    }
    if (count < size_) {
      size_ = count;
      unmap_down_to(chunks_for(count));
      return outcome::success();
    }
    std::size_t const before = chunks_.size();
    if (auto mapped = map_up_to(chunks_for(count)); !mapped) {
      return mapped;
    }
    // Also needed where no chunk is new: memory past size() may hold elements from before a shrink.
    if (auto zeroed = check(hipMemset(element_address(size_), 0, bytes_of(count - size_))); !zeroed) {
      unmap_down_to(before);
      return zeroed;
    }
    size_ = count;
    return outcome::success();
  }

  // Maps ahead for `count` elements without changing size(); shrink_to_fit() or a shrinking resize()
  // gives the extra chunks back.
  [[nodiscard]] result<void> reserve(std::size_t count) noexcept {
    if (count > max_size()) {
      return failure(beyond_reach());
    }
    return map_up_to(chunks_for(count));
  }

  void shrink_to_fit() noexcept { unmap_down_to(chunks_for(size_)); }

  void clear() noexcept {
    size_ = 0;
    unmap_down_to(0);
  }

  [[nodiscard]] result<void> push_back(T const& value) noexcept { return append(std::span<T const>(&value, 1)); }

  [[nodiscard]] result<void> append(std::span<T const> values) noexcept {
    if (values.empty()) {
      return outcome::success();
    }
    if (values.size() > max_size() - size_) {
      return failure(beyond_reach());
    }
    std::size_t const count = size_ + values.size();
    std::size_t const before = chunks_.size();
    if (auto mapped = map_up_to(chunks_for(count)); !mapped) {
      return mapped;
    }
    if (auto copied =
            check(hipMemcpy(element_address(size_), values.data(), values.size_bytes(), hipMemcpyHostToDevice));
        !copied) {
      unmap_down_to(before);
      return copied;
    }
    size_ = count;
    return outcome::success();
  }

  [[nodiscard]] result<T> read(std::size_t index) const noexcept {
    if (index >= size_) {
      return failure(hipErrorInvalidValue);
    }
    // Bytes, not a T: T need not be default-constructible.
    std::array<std::byte, sizeof(T)> bytes{};
    if (auto const error = hipMemcpy(bytes.data(), element_address(index), sizeof(T), hipMemcpyDeviceToHost);
        error != hipSuccess) {
      return failure(error);
    }
    return std::bit_cast<T>(bytes);
  }

  [[nodiscard]] result<void> write(std::size_t index, T const& value) noexcept {
    if (index >= size_) {
      return failure(hipErrorInvalidValue);
    }
    return check(hipMemcpy(element_address(index), &value, sizeof(T), hipMemcpyHostToDevice));
  }

  // Copies elements [first, first + out.size()) into `out`.
  [[nodiscard]] result<void> copy_to_host(std::span<T> out, std::size_t first = 0) const noexcept {
    if (first > size_ || out.size() > size_ - first) {
      return failure(hipErrorInvalidValue);
    }
    if (out.empty()) {
      return outcome::success();
    }
    return check(hipMemcpy(out.data(), element_address(first), out.size_bytes(), hipMemcpyDeviceToHost));
  }

  [[nodiscard]] result<std::vector<T>> to_vector() const requires std::default_initializable<T> {
    std::vector<T> out(size_);
    if (auto copied = copy_to_host(out); !copied) {
      return copied.as_failure();
    }
    return out;
  }

 private:
  // Growth past the reserved range: out of memory, or, for a moved-from array that has no range
  // left, an invalid handle (it can never grow, however little is asked).
  [[nodiscard]] hipError_t beyond_reach() const noexcept {
    return range_ ? hipErrorOutOfMemory : hipErrorInvalidHandle;
  }
  // Declared allocation first, so a chunk unmaps before it releases (the runtime would defer the
  // free anyway, but this is the order the C API documents).
  struct Chunk {
    PhysicalAllocation allocation;
    Mapping mapping;
  };

  GrowableArray(Device device, VirtualRange range, std::size_t chunk_bytes) noexcept
      : device_(device), chunk_bytes_(chunk_bytes), range_(std::move(range)) {}

  // Callers have checked count <= max_size(), so neither can overflow.
  [[nodiscard]] static constexpr std::size_t bytes_of(std::size_t count) noexcept { return count * sizeof(T); }
  [[nodiscard]] std::size_t chunks_for(std::size_t count) const noexcept {
    return (bytes_of(count) + chunk_bytes_ - 1) / chunk_bytes_;
  }

  [[nodiscard]] void* element_address(std::size_t index) const noexcept {
    return detail::offset_address(range_.base(), bytes_of(index));
  }

  [[nodiscard]] result<Chunk> make_chunk(std::size_t index) noexcept {
    auto allocation = PhysicalAllocation::create(device_, chunk_bytes_);
    if (!allocation) {
      return allocation.as_failure();
    }
    auto mapping = map(range_, index * chunk_bytes_, allocation.value());
    if (!mapping) {
      return mapping.as_failure();
    }
    if (auto granted = mapping.value().set_access(device_, Access::read_write); !granted) {
      return granted.as_failure();
    }
    return Chunk{std::move(allocation).value(), std::move(mapping).value()};
  }

  // Maps chunks until `count` are mapped, or none at all: a failure unmaps what this call mapped.
  [[nodiscard]] result<void> map_up_to(std::size_t count) noexcept {
    if (count <= chunks_.size()) {
      return outcome::success();
    }
    std::size_t const before = chunks_.size();
    try {
      // The only step that can throw, and it comes before anything is mapped.
      chunks_.reserve(count);
    } catch (std::bad_alloc const&) {
      return failure(hipErrorOutOfMemory);
    }
    while (chunks_.size() < count) {
      auto chunk = make_chunk(chunks_.size());
      if (!chunk) {
        unmap_down_to(before);
        return chunk.as_failure();
      }
      chunks_.push_back(std::move(chunk).value());  // within reserved capacity: no reallocation
    }
    return outcome::success();
  }

  // Highest addresses first, the reverse of how they were mapped.
  void unmap_down_to(std::size_t count) noexcept {
    while (chunks_.size() > count) {
      chunks_.pop_back();
    }
  }

  Device device_;
  std::size_t chunk_bytes_ = 0;
  std::size_t size_ = 0;
  VirtualRange range_;  // before chunks_: destroyed after them
  std::vector<Chunk> chunks_;
};

}  // namespace hipxx
