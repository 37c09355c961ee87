// What the C API tests compare and print: the runtime's book counts (hipxxGetBookCounts) and
// hipError_t values, a per-test-case leak check over the books, and CHECK_REFUSED, which asserts
// both the exact error of a refused call and that the books did not move.
#pragma once

#include <doctest/doctest.h>

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <ostream>

inline bool operator==(const hipxxBookCounts& a, const hipxxBookCounts& b) {
  return a.reservations == b.reservations && a.mappings == b.mappings && a.allocations == b.allocations &&
         a.linearAllocations == b.linearAllocations;
}

inline std::ostream& operator<<(std::ostream& os, const hipxxBookCounts& c) {
  return os << "{reservations=" << c.reservations << ", mappings=" << c.mappings
            << ", allocations=" << c.allocations << ", linear=" << c.linearAllocations << "}";
}

inline std::ostream& operator<<(std::ostream& os, hipError_t e) {
  return os << hipGetErrorName(e) << "(" << static_cast<int>(e) << ")";
}

namespace test_support {

inline hipxxBookCounts books() {
  hipxxBookCounts counts{};
  REQUIRE(hipxxGetBookCounts(&counts) == hipSuccess);
  return counts;
}

// Fails the test case if the books at its end differ from those at its start.
struct LeakCheck {
  hipxxBookCounts start = books();
  LeakCheck() = default;
  LeakCheck(const LeakCheck&) = delete;
  LeakCheck& operator=(const LeakCheck&) = delete;
  ~LeakCheck() { CHECK_MESSAGE(books() == start, "the test case leaked runtime objects"); }
};

}  // namespace test_support

// A refused call: the exact error, and the books exactly as they were.
#define CHECK_REFUSED(call, code)                                \
  do {                                                           \
    const hipxxBookCounts books_before_ = test_support::books(); \
    CHECK_EQ((call), (code));                                    \
    CHECK_EQ(test_support::books(), books_before_);              \
  } while (0)
