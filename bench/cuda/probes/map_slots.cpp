// Where in a kept reservation the driver's map is cheapest, against the map into a reservation made
// for the cycle (what gpu-bench's vmm/MemMap baseline does). Full cycles (create, map, set access,
// unmap, release), only the map timed, every kind in a new random order each round; each kind that
// keeps a reservation has one of its own, reserved once:
//   one reservation of the map's size, kept;
//   the first slot of a kept reservation of 16 MiB to 64 GiB (those at least the map's size), and in
//   a 64 GiB one the same slot 1 GiB in, 8 or 32 slots in turn, side by side or 1 GiB apart; and the
//   address hipxx's reserve gives with the map made by the driver.
// Built by bench/cuda/probes/build.sh; run as ./map-slots [ROUNDS]
#include "vmm_cycles.hpp"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

struct Kind {
  const char* name;
  std::size_t chunk;  // 0: a reservation of the driver's per cycle; else kMapSize, kHipxxReserve or a size
  std::size_t first;  // offset of the first slot
  std::size_t stride;  // distance between slots
  std::size_t slots;  // how many slots it takes in turn
  bool hipxx_map = false;  // with hipxx's reserve: hipxx's whole cycle, not the driver's map
};

constexpr std::size_t kHipxxReserve = ~std::size_t{0};
constexpr std::size_t kMapSize = kHipxxReserve - 1;  // a kept reservation as large as the map

// The driver's map into the address hipxx's reserve gives (so the arena's placement, without hipxx's map).
double arena_cycle(const probe::Driver& driver, std::size_t size) {
  void* va = nullptr;
  probe::check(hipMemAddressReserve(&va, size, 0, nullptr, 0), "hipMemAddressReserve");
  const double elapsed =
      probe::driver_cycle(driver, size, probe::Grant::same_api, reinterpret_cast<CUdeviceptr>(va), [] {});
  probe::check(hipMemAddressFree(va, size), "hipMemAddressFree");
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1000;
  constexpr int kWarmup = 20;
  const probe::Driver driver;
  std::mt19937 random(11);
  for (const std::size_t size : {2 * kMiB, 64 * kMiB}) {
    std::vector<Kind> kinds = {
        {"a reservation per cycle", 0, 0, 0, 1},
        {"hipxx's reserve, driver's map", kHipxxReserve, 0, 0, 1},
        {"its size, kept", kMapSize, 0, 0, 1},
        {"16 MiB kept: first slot", 16 * kMiB, 0, 0, 1},
        {"128 MiB kept: first slot", 128 * kMiB, 0, 0, 1},
        {"1 GiB kept: first slot", kGiB, 0, 0, 1},
        {"4 GiB kept: first slot", 4 * kGiB, 0, 0, 1},
        {"64 GiB kept: first slot", 64 * kGiB, 0, 0, 1},
        {"64 GiB kept: slot 1 GiB in", 64 * kGiB, kGiB, 0, 1},
        {"64 GiB kept: 8 slots side by side", 64 * kGiB, 0, size, 8},
        {"64 GiB kept: 8 slots 1 GiB apart", 64 * kGiB, 0, kGiB, 8},
        {"64 GiB kept: 32 slots 1 GiB apart", 64 * kGiB, 0, kGiB, 32},
        {"64 GiB kept: 8 slots 2 MiB past 1 GiB apart", 64 * kGiB, 2 * kMiB, kGiB, 8},
        {"hipMemMap", kHipxxReserve, 0, 0, 1, true},
    };
    for (Kind& kind : kinds) {
      if (kind.chunk == kMapSize) kind.chunk = size;
    }
    std::erase_if(
        kinds, [&](const Kind& kind) { return kind.chunk != kHipxxReserve && kind.chunk != 0 && kind.chunk < size; });
    std::vector<CUdeviceptr> chunks(kinds.size(), 0);
    for (std::size_t index = 0; index < kinds.size(); ++index) {
      if (kinds[index].chunk != 0 && kinds[index].chunk != kHipxxReserve) {
        probe::check(cuMemAddressReserve(&chunks[index], kinds[index].chunk, 2 * kMiB, 0, 0), "cuMemAddressReserve");
      }
    }
    std::vector<std::vector<double>> samples(kinds.size());
    std::vector<std::size_t> order(kinds.size());
    for (std::size_t index = 0; index < order.size(); ++index) order[index] = index;
    for (int round = 0; round < kWarmup + rounds; ++round) {
      std::shuffle(order.begin(), order.end(), random);
      for (const std::size_t index : order) {
        const Kind& kind = kinds[index];
        double sample = 0;
        if (kind.chunk == kHipxxReserve) {
          sample = kind.hipxx_map ? probe::hipxx_cycle(driver, size, probe::Grant::same_api, [] {})
                                  : arena_cycle(driver, size);
        } else if (kind.chunk == 0) {
          sample = probe::driver_cycle(driver, size, probe::Grant::same_api, 0, [] {});
        } else {
          const std::size_t slot = static_cast<std::size_t>(round) % kind.slots;
          sample = probe::driver_cycle(driver, size, probe::Grant::same_api,
                                       chunks[index] + kind.first + slot * kind.stride, [] {});
        }
        if (round >= kWarmup) samples[index].push_back(sample);
      }
    }
    std::printf("%zu MiB, random order, %d rounds\n", size / kMiB, rounds);
    const double baseline = probe::median(samples[0]);
    for (std::size_t index = 0; index < kinds.size(); ++index) {
      const double median = probe::median(samples[index]);
      std::printf("  %-46s %8.1f ns  %.3f\n", kinds[index].name, median, median / baseline);
    }
    for (std::size_t index = 0; index < kinds.size(); ++index) {
      if (chunks[index] != 0) probe::check(cuMemAddressFree(chunks[index], kinds[index].chunk), "cuMemAddressFree");
    }
  }
  return 0;
}
