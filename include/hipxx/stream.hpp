// Streams: `StreamRef` borrows one, `Stream` owns one. Every hipxx function that enqueues work takes a
// StreamRef, so it accepts an owned Stream, a raw hipStream_t from legacy code, the null stream and
// the per-thread stream alike, and never decides for the caller who destroys the stream.
#pragma once

#include <hipxx/detail/unique_handle.hpp>
#include <hipxx/device.hpp>
#include <hipxx/error.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace hipxx {

// Values equal HIP's flags so conversion is a cast both ways. A blocking stream (HIP's "default")
// is ordered with the null stream; a non-blocking one is not.
enum class StreamFlags : unsigned {
  blocking = hipStreamDefault,
  non_blocking = hipStreamNonBlocking,
};

// Lower numbers are greater priorities, as in HIP; values outside [greatest, least] are clamped by
// the runtime at creation, so a priority read back may differ from the one asked for.
struct PriorityRange {
  int least;
  int greatest;
};

[[nodiscard]] inline result<PriorityRange> stream_priority_range() noexcept {
  PriorityRange range{};
  if (auto const error = hipDeviceGetStreamPriorityRange(&range.least, &range.greatest); error != hipSuccess) {
    return failure(error);
  }
  return range;
}

namespace detail {

// The operations a borrowed and an owned stream share, written once over `native()`. A null
// handle is the null stream to a StreamRef but "nothing" to a moved-from Stream, so an empty owner
// answers hipErrorInvalidHandle instead of quietly acting on the null stream.
template <class Derived>
class StreamOperations {
 public:
  // true when all work enqueued so far has finished; false while some is pending.
  [[nodiscard]] result<bool> query() const noexcept {
    if (empty_owner()) {
      return failure(hipErrorInvalidHandle);
    }
    switch (auto const error = hipStreamQuery(native_of()); error) {
      case hipSuccess: return true;
      case hipErrorNotReady: return false;
      default: return failure(error);
    }
  }

  [[nodiscard]] result<void> synchronize() const noexcept {
    if (empty_owner()) {
      return failure(hipErrorInvalidHandle);
    }
    return check(hipStreamSynchronize(native_of()));
  }

  [[nodiscard]] result<StreamFlags> flags() const noexcept {
    if (empty_owner()) {
      return failure(hipErrorInvalidHandle);
    }
    unsigned value = 0;
    if (auto const error = hipStreamGetFlags(native_of(), &value); error != hipSuccess) {
      return failure(error);
    }
    return static_cast<StreamFlags>(value);
  }

  [[nodiscard]] result<int> priority() const noexcept {
    if (empty_owner()) {
      return failure(hipErrorInvalidHandle);
    }
    int value = 0;
    if (auto const error = hipStreamGetPriority(native_of(), &value); error != hipSuccess) {
      return failure(error);
    }
    return value;
  }

  // Fills `words` with the compute-unit mask, 32 units per word, first unit in the lowest bit.
  [[nodiscard]] result<void> cu_mask(std::span<std::uint32_t> words) const noexcept {
    if (empty_owner()) {
      return failure(hipErrorInvalidHandle);
    }
    if (words.empty() || words.size() > UINT32_MAX) {
      return failure(hipErrorInvalidValue);
    }
    return check(hipExtStreamGetCUMask(native_of(), static_cast<std::uint32_t>(words.size()), words.data()));
  }

  // HIP cannot say which device a stream belongs to, so the mask is as wide as the current device
  // has compute units: bits past them mean nothing (hipExtStreamCreateWithCUMask ignores them).
  [[nodiscard]] result<std::vector<std::uint32_t>> cu_mask() const {
    auto const here = current_device();
    if (!here) {
      return here.as_failure();
    }
    auto const units = here.value().attribute(hipDeviceAttributeMultiprocessorCount);
    if (!units) {
      return units.as_failure();
    }
    std::size_t const word_count = units.value() > 0 ? (static_cast<std::size_t>(units.value()) + 31) / 32 : 1;
    std::vector<std::uint32_t> words(word_count, 0);
    if (auto const done = cu_mask(std::span<std::uint32_t>(words)); !done) {
      return done.as_failure();
    }
    return words;
  }

 private:
  [[nodiscard]] hipStream_t native_of() const noexcept { return static_cast<Derived const&>(*this).native(); }
  [[nodiscard]] bool empty_owner() const noexcept { return Derived::owns && native_of() == nullptr; }
};

}  // namespace detail

class StreamRef : public detail::StreamOperations<StreamRef> {
 public:
  using native_handle_type = hipStream_t;
  static constexpr bool owns = false;

  // The null stream, as in HIP, where a stream argument is left out.
  constexpr StreamRef() noexcept = default;

  // Implicit: legacy code passes its raw handle wherever hipxx asks for a stream. It is borrowed;
  // whoever created it destroys it.
  constexpr StreamRef(hipStream_t stream) noexcept : stream_(stream) {}  // NOLINT(google-explicit-constructor)

  // The null stream. It is ordered with every blocking stream of its device.
  [[nodiscard]] static constexpr StreamRef null() noexcept { return StreamRef{}; }

  // The calling thread's own default stream. The handle names a different stream on every thread,
  // so a StreamRef made from it means "this thread's stream" wherever it is used.
  [[nodiscard]] static StreamRef per_thread() noexcept { return StreamRef{hipStreamPerThread}; }

  [[nodiscard]] constexpr hipStream_t native() const noexcept { return stream_; }

  friend constexpr bool operator==(StreamRef a, StreamRef b) noexcept { return a.stream_ == b.stream_; }

 private:
  hipStream_t stream_ = nullptr;
};

// Borrowed everywhere, so it must stay as cheap to pass as the raw handle.
static_assert(std::is_trivially_copyable_v<StreamRef>);
static_assert(sizeof(StreamRef) == sizeof(hipStream_t));

class Stream : public detail::StreamOperations<Stream> {
 public:
  using native_handle_type = hipStream_t;
  static constexpr bool owns = true;

  // `priority`: see stream_priority_range(); 0 is the normal priority.
  [[nodiscard]] static result<Stream> create(StreamFlags flags = StreamFlags::blocking, int priority = 0) noexcept {
    hipStream_t stream = nullptr;
    if (auto const error = hipStreamCreateWithPriority(&stream, static_cast<unsigned>(flags), priority);
        error != hipSuccess) {
      return failure(error);
    }
    return Stream{stream};
  }

  // A blocking stream restricted to the compute units set in `cu_mask` (32 per word, first unit
  // in the lowest bit of the first word).
  [[nodiscard]] static result<Stream> create(std::span<std::uint32_t const> cu_mask) noexcept {
    if (cu_mask.empty() || cu_mask.size() > UINT32_MAX) {
      return failure(hipErrorInvalidValue);
    }
    hipStream_t stream = nullptr;
    if (auto const error =
            hipExtStreamCreateWithCUMask(&stream, static_cast<std::uint32_t>(cu_mask.size()), cu_mask.data());
        error != hipSuccess) {
      return failure(error);
    }
    return Stream{stream};
  }

  // Takes over a stream created through the C API; the way back from release().
  [[nodiscard]] static Stream adopt(hipStream_t stream) noexcept { return Stream{stream}; }

  [[nodiscard]] hipStream_t native() const noexcept { return stream_.get(); }
  [[nodiscard]] explicit operator bool() const noexcept { return native() != nullptr; }

  // An empty (moved-from) Stream lends a handle that names no stream, so that work given to it is
  // refused with hipErrorInvalidHandle: its null native() would be the null stream to the runtime.
  [[nodiscard]] StreamRef ref() const noexcept { return StreamRef{*this ? native() : no_stream()}; }
  // NOLINTNEXTLINE(google-explicit-constructor): an owner is usable wherever a borrower is.
  operator StreamRef() const noexcept { return ref(); }

  // Destroys now and reports the runtime's answer, which the destructor has to drop. On failure the
  // Stream still owns the handle.
  [[nodiscard]] result<void> destroy() noexcept { return stream_.destroy(); }

  // Gives up ownership; the caller must hipStreamDestroy the handle.
  [[nodiscard]] hipStream_t release() noexcept { return stream_.release(); }

 private:
  explicit Stream(hipStream_t stream) noexcept : stream_(stream) {}

  // Never a stream: not 0 (the null stream), 1 (hipStreamLegacy) or 2 (hipStreamPerThread), and odd,
  // so neither the address of a stream object nor one of the runtime's handles (multiples of 16).
  [[nodiscard]] static hipStream_t no_stream() noexcept { return reinterpret_cast<hipStream_t>(std::uintptr_t{3}); }

  // Never the null stream: a moved-from Stream owns nothing. HIP lets queued work finish (or run on)
  // after the handle is destroyed, so dropping a busy stream neither blocks on nor cancels its work.
  detail::UniqueHandle<hipStream_t, &hipStreamDestroy> stream_;
};

}  // namespace hipxx
