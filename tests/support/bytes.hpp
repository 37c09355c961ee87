// Checking that a buffer holds one byte value throughout, in a single library call: a byte-by-byte
// loop in the test itself costs each byte a sanitizer check, which under TSan made content checks
// most of a random walk's time.
#pragma once

#include <cstring>
#include <span>

namespace test_support {

// Whether every byte of `bytes` is `value` (true for an empty span). Comparing the buffer with itself
// one byte on: when the first byte is `value` and each byte equals the next, all are `value`.
[[nodiscard]] inline bool all_bytes_are(std::span<const unsigned char> bytes, unsigned char value) {
  if (bytes.empty()) return true;
  return bytes.front() == value && std::memcmp(bytes.data(), bytes.data() + 1, bytes.size() - 1) == 0;
}

}  // namespace test_support
