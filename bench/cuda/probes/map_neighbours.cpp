// Whether the cycle before a map changes what the map costs. Seven kinds of full cycle (the driver
// into a reservation of its own or into one slot of a chunk, hipMemMap; with access set through the
// same API, through the driver, or not at all) run in turn, each round starting one further on, so
// that each kind mostly follows the same other kind: `--shuffle` draws a new random order each
// round instead, which spreads the neighbours evenly.
// Built by bench/cuda/probes/build.sh; run as ./map-neighbours [ROUNDS] [--shuffle]
#include "vmm_cycles.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

enum class Where { own_reservation, chunk_slot, hipxx };

struct Kind {
  const char* name;
  Where where;
  probe::Grant grant;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1000;
  const bool shuffle = argc > 2 && std::strcmp(argv[2], "--shuffle") == 0;
  constexpr int kWarmup = 20;
  const probe::Driver driver;
  constexpr std::size_t kChunk = std::size_t{64} << 30;
  CUdeviceptr chunk = 0;
  probe::check(cuMemAddressReserve(&chunk, kChunk, 0, 0, 0), "cuMemAddressReserve");
  const std::vector<Kind> kinds = {
      {"driver, own reservation, access set", Where::own_reservation, probe::Grant::same_api},
      {"driver, one chunk slot, access set", Where::chunk_slot, probe::Grant::same_api},
      {"hipMemMap, hipMemSetAccess", Where::hipxx, probe::Grant::same_api},
      {"hipMemMap, the driver's cuMemSetAccess", Where::hipxx, probe::Grant::driver},
      {"driver, own reservation, no access", Where::own_reservation, probe::Grant::none},
      {"driver, one chunk slot, no access", Where::chunk_slot, probe::Grant::none},
      {"hipMemMap, no access", Where::hipxx, probe::Grant::none}};
  std::mt19937 random(42);
  for (const std::size_t size : {std::size_t{2} << 20, std::size_t{64} << 20}) {
    std::vector<std::vector<double>> samples(kinds.size());
    std::vector<std::size_t> order(kinds.size());
    for (int round = 0; round < kWarmup + rounds; ++round) {
      for (std::size_t turn = 0; turn < kinds.size(); ++turn) order[turn] = (turn + round) % kinds.size();
      if (shuffle) std::shuffle(order.begin(), order.end(), random);
      for (const std::size_t index : order) {
        const Kind& kind = kinds[index];
        const auto nothing = [] {};
        // The two chunk kinds use slots 4 GiB apart, so neither maps where the other just unmapped.
        const CUdeviceptr slot =
            kind.where == Where::chunk_slot ? chunk + (kind.grant == probe::Grant::none ? 4 * (kChunk >> 6) : 0) : 0;
        const double sample = kind.where == Where::hipxx ? probe::hipxx_cycle(driver, size, kind.grant, nothing)
                                                         : probe::driver_cycle(driver, size, kind.grant, slot, nothing);
        if (round >= kWarmup) samples[index].push_back(sample);
      }
    }
    std::printf("%zu MiB, %s order\n", size >> 20, shuffle ? "random" : "rotating");
    const double baseline = probe::median(samples[0]);
    for (std::size_t index = 0; index < kinds.size(); ++index) {
      const double median = probe::median(samples[index]);
      std::printf("  %-42s %8.1f ns  %.3f\n", kinds[index].name, median, median / baseline);
    }
  }
  probe::check(cuMemAddressFree(chunk, kChunk), "cuMemAddressFree");
  return 0;
}
