// The random-walk test cases: which walk to take, and taking it with the seed and the step in every
// failure's message, so that a failing walk can be repeated (HIPXX_TEST_SEED=...) and stopped where it failed.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>

namespace test_support {

// HIPXX_TEST_SEED picks the walk; without it every run takes the same one.
inline std::uint64_t walk_seed() {
  const char* const chosen = std::getenv("HIPXX_TEST_SEED");
  return chosen != nullptr ? std::strtoull(chosen, nullptr, 0) : 20261124;
}

// A walk's choices, all drawn from its seed. Walks derive from it for pick().
class WalkRandom {
 public:
  explicit WalkRandom(std::uint64_t seed) : engine_(seed) {}

  // One of 0 .. count - 1, evenly.
  std::size_t pick(std::size_t count) { return std::uniform_int_distribution<std::size_t>{0, count - 1}(engine_); }

 private:
  std::mt19937_64 engine_;
};

// `steps`, divided by HIPXX_TEST_WALK_SCALE where that is set (sanitizer builds set 4).
inline int walk_steps(int steps) {
  const char* const scale = std::getenv("HIPXX_TEST_WALK_SCALE");
  const long divisor = scale != nullptr ? std::strtol(scale, nullptr, 10) : 1;
  return divisor > 1 ? static_cast<int>(steps / divisor) : steps;
}

// Calls walk.step() walk_steps(`steps`) times, and returns that count.
template <class Walk>
int take_walk(Walk& walk, int steps, std::uint64_t seed) {
  CAPTURE(seed);
  const int taken = walk_steps(steps);
  for (int step = 0; step < taken; ++step) {
    CAPTURE(step);
    walk.step();
  }
  return taken;
}

}  // namespace test_support
