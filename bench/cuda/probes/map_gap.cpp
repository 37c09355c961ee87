// Whether a map costs less when more time has passed since the cycle before it: full cycles
// through the driver and through hipxx, with a busy wait of 0 to 100 us between the create and the
// timed map, all ten kinds in a new random order each round.
// Built by bench/cuda/probes/build.sh; run as ./map-gap [ROUNDS]
#include "vmm_cycles.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1000;
  constexpr int kWarmup = 20;
  constexpr std::array<double, 5> kWaits{0, 2, 5, 20, 100};
  const probe::Driver driver;
  std::mt19937 random(42);
  for (const std::size_t size : {std::size_t{2} << 20, std::size_t{64} << 20}) {
    std::array<std::array<std::vector<double>, kWaits.size()>, 2> samples;  // [hipxx][wait]
    std::vector<std::size_t> order(2 * kWaits.size());
    for (std::size_t index = 0; index < order.size(); ++index) order[index] = index;
    for (int round = 0; round < kWarmup + rounds; ++round) {
      std::shuffle(order.begin(), order.end(), random);
      for (const std::size_t kind : order) {
        const std::size_t hipxx = kind / kWaits.size();
        const std::size_t wait = kind % kWaits.size();
        const auto before_map = [&] { probe::spin_for(kWaits[wait]); };
        const double sample = hipxx != 0 ? probe::hipxx_cycle(driver, size, probe::Grant::same_api, before_map)
                                         : probe::driver_cycle(driver, size, probe::Grant::same_api, 0, before_map);
        if (round >= kWarmup) samples[hipxx][wait].push_back(sample);
      }
    }
    std::printf("%zu MiB: wait before the map | driver's map | hipMemMap | ratio\n", size >> 20);
    for (std::size_t wait = 0; wait < kWaits.size(); ++wait) {
      const double driver_map = probe::median(samples[0][wait]);
      const double hipxx_map = probe::median(samples[1][wait]);
      std::printf("  %5.0f us  %8.1f ns  %8.1f ns  %.3f\n", kWaits[wait], driver_map, hipxx_map,
                  hipxx_map / driver_map);
    }
  }
  return 0;
}
