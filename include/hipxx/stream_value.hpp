// Stream-ordered waits on, and writes to, one word of device-addressable memory (memory from
// hipExtMallocWithFlags(..., hipMallocSignalMemory) is meant for it). The word's type picks the 32- or
// 64-bit HIP call, so a value can never be compared at the wrong width.
#pragma once

#include <hipxx/device.hpp>
#include <hipxx/error.hpp>
#include <hipxx/stream.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace hipxx {

// Values equal HIP's flags. With `mask` applied to the word first:
enum class WaitCondition : unsigned {
  greater_equal = hipStreamWaitValueGte,  // (word & mask) >= value
  equal = hipStreamWaitValueEq,  // (word & mask) == value
  any_bit_set = hipStreamWaitValueAnd,  // ((word & mask) & value) != 0
  nor = hipStreamWaitValueNor,  // ~((word & mask) | (value & mask)) != 0
};

// Unsigned because the runtime compares words as unsigned: a signed -1 would wait "greater or
// equal" to every positive value. Any unsigned type of 4 or 8 bytes, so both `unsigned long` and
// `unsigned long long` words work whichever one std::uint64_t is.
template <class T>
concept stream_word = std::unsigned_integral<T> &&
    (sizeof(T) == sizeof(std::uint32_t) || sizeof(T) == sizeof(std::uint64_t));

// Whether `device` can run the wait calls at all (AMD reports it per device; CUDA per driver).
[[nodiscard]] inline result<bool> supports_wait_value(Device device) noexcept {
  auto const value = device.attribute(hipDeviceAttributeCanUseStreamWaitValue);
  if (!value) {
    return value.as_failure();
  }
  return value.value() != 0;
}

// Work enqueued on `stream` after this waits until `condition` holds for `*device_word`.
// `value` and `mask` take the word's own type (deduced from the pointer only), so a literal converts
// to it rather than choosing the width.
template <stream_word Word>
[[nodiscard]] result<void> wait_value(StreamRef stream, Word const* device_word, std::type_identity_t<Word> value,
                                      WaitCondition condition,
                                      std::type_identity_t<Word> mask = static_cast<Word>(~Word{0})) noexcept {
  // The runtime only reads the word; its parameter is non-const for C's sake.
  void* const word = const_cast<Word*>(device_word);
  auto const flags = static_cast<unsigned>(condition);
  if constexpr (sizeof(Word) == sizeof(std::uint32_t)) {
    return check(hipStreamWaitValue32(stream.native(), word, static_cast<std::uint32_t>(value), flags,
                                      static_cast<std::uint32_t>(mask)));
  } else {
    return check(hipStreamWaitValue64(stream.native(), word, static_cast<std::uint64_t>(value), flags,
                                      static_cast<std::uint64_t>(mask)));
  }
}

// Writes `value` to `*device_word` once all earlier work on `stream` has finished.
template <stream_word Word>
[[nodiscard]] result<void> write_value(StreamRef stream, Word* device_word, std::type_identity_t<Word> value) noexcept {
  if constexpr (sizeof(Word) == sizeof(std::uint32_t)) {
    return check(hipStreamWriteValue32(stream.native(), device_word, static_cast<std::uint32_t>(value),
                                       hipStreamWriteValueDefault));
  } else {
    return check(hipStreamWriteValue64(stream.native(), device_word, static_cast<std::uint64_t>(value),
                                       hipStreamWriteValueDefault));
  }
}

}  // namespace hipxx
