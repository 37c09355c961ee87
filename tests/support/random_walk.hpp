// The random-walk test cases: which walk to take, and taking it with the seed and the step in every
// failure's message, so that a failing walk can be repeated (HIPXX_TEST_SEED=...) and stopped where it failed.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>

namespace test_support {

// HIPXX_TEST_SEED picks the walk; without it every run takes the same one.
inline std::uint64_t walk_seed() {
  const char* const chosen = std::getenv("HIPXX_TEST_SEED");
  return chosen != nullptr ? std::strtoull(chosen, nullptr, 0) : 20261124;
}

// Calls walk.step() `steps` times.
template <class Walk>
void take_walk(Walk& walk, int steps, std::uint64_t seed) {
  CAPTURE(seed);
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    walk.step();
  }
}

}  // namespace test_support
