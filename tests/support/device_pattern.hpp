// Writing and checking the peer protocol's byte pattern (ipc_test::pattern) in device memory through
// hipMemcpy, as the multi-process tests do on both sides of a shared allocation.
#pragma once

#include <doctest/doctest.h>

#include "../ipc_protocol.hpp"

#include <hip/hip_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace test_support {

// Writes pattern `seed` over [offset, offset + length) of `device`.
inline void fill(void* device, std::size_t offset, std::size_t length, std::uint64_t seed) {
  std::vector<unsigned char> bytes(length);
  for (std::size_t index = 0; index < length; ++index) bytes[index] = ipc_test::pattern(seed, offset + index);
  REQUIRE(hipMemcpy(static_cast<unsigned char*>(device) + offset, bytes.data(), length, hipMemcpyHostToDevice) ==
          hipSuccess);
}

// How many bytes of [offset, offset + length) of `device` differ from pattern `seed`.
inline std::size_t mismatches(void const* device, std::size_t offset, std::size_t length, std::uint64_t seed) {
  std::vector<unsigned char> bytes(length);
  REQUIRE(hipMemcpy(bytes.data(), static_cast<unsigned char const*>(device) + offset, length, hipMemcpyDeviceToHost) ==
          hipSuccess);
  std::size_t differ = 0;
  for (std::size_t index = 0; index < length; ++index) differ += bytes[index] != ipc_test::pattern(seed, offset + index);
  return differ;
}

}  // namespace test_support
