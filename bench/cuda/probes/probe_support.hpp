// What the map probes share: a checked call, medians, and a busy wait. The probes talk to the CUDA
// driver directly (cuda.h, -lcuda) beside hipxx's C ABI, so they are built by hand on a machine
// with the CUDA toolkit by bench/cuda/probes/build.sh, not by meson.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace probe {

using Clock = std::chrono::steady_clock;

// Stops the probe at the first failed call: a probe's figures mean nothing after one.
template <class Result>
void check(Result result, const char* what) {
  if (static_cast<int>(result) != 0) {
    std::printf("%s failed: %d\n", what, static_cast<int>(result));
    std::exit(1);
  }
}

inline double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

inline double ns_since(Clock::time_point start) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

inline void spin_for(double microseconds) {
  const auto end = Clock::now() + std::chrono::duration<double, std::micro>(microseconds);
  while (Clock::now() < end) {
  }
}

}  // namespace probe
