// Copies and fills, in a stream's order or at once, between any memory the runtime knows (device,
// pool, managed and mapped memory) and host memory. The runtime tells which side is which
// (hipMemcpyDefault), so one call serves every direction; spans of device_storable elements keep
// the byte counts right.
//
// A refused call changes nothing: spans of different lengths are hipErrorInvalidValue before the
// runtime is asked, and the runtime checks the memory (a side it does not know is host memory, and
// device memory must be reachable from the stream's device) as hipMemcpyAsync and hipMemsetAsync do.
#pragma once

#include <hipxx/hip_runtime_api.h>
#include <hipxx/device_storable.hpp>
#include <hipxx/error.hpp>
#include <hipxx/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <type_traits>

namespace hipxx {

// `source` into `destination`, element for element, once the stream gets there. The host memory of
// either side must stay valid, and the source unchanged, until then. The destination's extent is a
// parameter because T is deduced from it, and a span of fixed extent (from a std::array, say) would
// not deduce as std::span<T>; the source is not deduced, so any span or container converts to it.
template <device_storable T, std::size_t Extent>
[[nodiscard]] result<void> copy_async(std::span<T, Extent> destination, std::span<std::type_identity_t<T> const> source,
                                      StreamRef stream) noexcept {
  if (destination.size() != source.size()) return failure(hipErrorInvalidValue);
  return check(
      hipMemcpyAsync(destination.data(), source.data(), source.size_bytes(), hipMemcpyDefault, stream.native()));
}

// A temporary container as the source: it is gone at the end of the statement, before the stream
// copies from it. (A span, which borrows, and a named container pass.)
template <device_storable T, std::size_t Extent, std::ranges::contiguous_range Source>
requires(!std::is_lvalue_reference_v<Source> &&
         !std::ranges::borrowed_range<Source>) result<void> copy_async(std::span<T, Extent> destination,
                                                                       Source&& source, StreamRef stream)
= delete;

// The same, done when this returns (hipMemcpy: after earlier work on the null stream).
template <device_storable T, std::size_t Extent>
[[nodiscard]] result<void> copy(std::span<T, Extent> destination,
                                std::span<std::type_identity_t<T> const> source) noexcept {
  if (destination.size() != source.size()) return failure(hipErrorInvalidValue);
  return check(hipMemcpy(destination.data(), source.data(), source.size_bytes(), hipMemcpyDefault));
}

// Every byte of `destination` set to `byte` once the stream gets there. A byte pattern, as
// hipMemsetAsync writes: for wider elements, 0x00 and 0xFF are the values that mean what they say.
template <device_storable T, std::size_t Extent>
[[nodiscard]] result<void> fill_bytes_async(std::span<T, Extent> destination, std::uint8_t byte,
                                            StreamRef stream) noexcept {
  return check(hipMemsetAsync(destination.data(), byte, destination.size_bytes(), stream.native()));
}

// The same, done when this returns.
template <device_storable T, std::size_t Extent>
[[nodiscard]] result<void> fill_bytes(std::span<T, Extent> destination, std::uint8_t byte) noexcept {
  return check(hipMemset(destination.data(), byte, destination.size_bytes()));
}

}  // namespace hipxx
