// Where the driver's map is cheapest: full cycles (create, map, set access, unmap, release) into a
// reservation made for the cycle and freed after it, into one reservation of the map's size kept
// across cycles, into the first slot of a 16 MiB or of a 64 GiB reservation kept across cycles, and
// hipMemMap into what hipxx's reserve gives; all kinds in a new random order each round.
// Built by bench/cuda/probes/build.sh; run as ./map-placement [ROUNDS]
#include "vmm_cycles.hpp"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct Kind {
  const char* name;
  std::size_t kept_size;  // 0: a reservation of its own each cycle (or hipxx's)
  bool hipxx;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1000;
  constexpr int kWarmup = 20;
  const probe::Driver driver;
  std::mt19937 random(7);
  for (const std::size_t size : {std::size_t{2} << 20, std::size_t{64} << 20}) {
    std::vector<Kind> kinds = {{"driver, a reservation per cycle", 0, false},
                               {"driver, one reservation of its size, kept", size, false}};
    if (size <= (std::size_t{16} << 20))
      kinds.push_back({"driver, first slot of a kept 16 MiB one", std::size_t{16} << 20, false});
    kinds.push_back({"driver, first slot of a kept 64 GiB one", std::size_t{64} << 30, false});
    kinds.push_back({"hipMemMap", 0, true});
    std::vector<CUdeviceptr> kept(kinds.size(), 0);
    for (std::size_t index = 0; index < kinds.size(); ++index) {
      if (kinds[index].kept_size != 0) {
        probe::check(cuMemAddressReserve(&kept[index], kinds[index].kept_size, 0, 0, 0), "cuMemAddressReserve");
      }
    }
    std::vector<std::vector<double>> samples(kinds.size());
    std::vector<std::size_t> order(kinds.size());
    for (std::size_t index = 0; index < order.size(); ++index) order[index] = index;
    for (int round = 0; round < kWarmup + rounds; ++round) {
      std::shuffle(order.begin(), order.end(), random);
      for (const std::size_t index : order) {
        const auto nothing = [] {};
        const double sample = kinds[index].hipxx
                                  ? probe::hipxx_cycle(driver, size, probe::Grant::same_api, nothing)
                                  : probe::driver_cycle(driver, size, probe::Grant::same_api, kept[index], nothing);
        if (round >= kWarmup) samples[index].push_back(sample);
      }
    }
    std::printf("%zu MiB, random order\n", size >> 20);
    const double baseline = probe::median(samples[0]);
    for (std::size_t index = 0; index < kinds.size(); ++index) {
      const double median = probe::median(samples[index]);
      std::printf("  %-44s %8.1f ns  %.3f\n", kinds[index].name, median, median / baseline);
    }
    for (std::size_t index = 0; index < kinds.size(); ++index) {
      if (kept[index] != 0) probe::check(cuMemAddressFree(kept[index], kinds[index].kept_size), "cuMemAddressFree");
    }
  }
  return 0;
}
