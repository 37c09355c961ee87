// The CUDA backend's translation of driver results, which needs no GPU: every CUresult that has a
// hipError_t of the same meaning comes out as it (HIP numbers those as CUDA does), the kernel faults
// HIP has no code for come out as a launch failure, and anything else as hipErrorUnknown.
#include <doctest/doctest.h>

#include "backend/cuda/cuda_errors.hpp"

#include <array>

using hipxx::backend::cuda::to_hip;

TEST_CASE("driver results with a HIP counterpart keep their number") {
  // CUDA_ERROR_INVALID_VALUE ... CUDA_ERROR_NOT_SUPPORTED, as cuda.h numbers them.
  constexpr std::array kSameNumber{0,   1,   2,   3,   4,   100, 101, 201, 205, 206, 208, 211, 214, 216, 217,
                                   304, 400, 401, 500, 600, 700, 701, 702, 704, 705, 709, 710, 712, 713, 719, 801};
  for (const int result : kSameNumber) {
    CAPTURE(result);
    CHECK(static_cast<int>(to_hip(result)) == result);
  }
}

TEST_CASE("kernel faults HIP has no code for are launch failures; other results are unknown") {
  for (int result = 714; result <= 718; ++result) {  // hardware stack error ... invalid program counter
    CAPTURE(result);
    CHECK(to_hip(result) == hipErrorLaunchFailure);
  }
  for (const int result : {34, 800, 999, 12345, -1}) {  // stub library, not permitted, unknown, no such
    CAPTURE(result);
    CHECK(to_hip(result) == hipErrorUnknown);
  }
  static_assert(to_hip(hipxx::backend::cuda::CUDA_ERROR_ILLEGAL_ADDRESS) == hipErrorIllegalAddress);
}
