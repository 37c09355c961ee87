// A stream callback's latency, enqueue to call, on an idle stream: hipStreamAddCallback against
// the driver's two ways, cuStreamAddCallback (the same contract: the stream's status is passed,
// and the callback runs even after an error) and cuLaunchHostFunc (no status); the three in a new
// random order each round.
// Built by bench/cuda/probes/build.sh; run as ./callback-latency [ROUNDS]
#include "side_by_side.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct Slot {
  std::atomic<bool> done{false};
  probe::Clock::time_point at{};
};

void mark(Slot& slot) {
  slot.at = probe::Clock::now();
  slot.done.store(true, std::memory_order_release);
}
void hip_callback(hipStream_t /*stream*/, hipError_t /*status*/, void* data) { mark(*static_cast<Slot*>(data)); }
void driver_callback(CUstream /*stream*/, CUresult /*status*/, void* data) { mark(*static_cast<Slot*>(data)); }
void host_function(void* data) { mark(*static_cast<Slot*>(data)); }

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
  constexpr int kWarmup = 50;
  const probe::Driver driver;
  const probe::StreamPair streams(false);
  hipStream_t hip_stream = streams.hipxx;
  CUstream stream = streams.driver;
  const std::array<const char*, 3> names{"hipStreamAddCallback", "cuStreamAddCallback", "cuLaunchHostFunc"};
  std::array<std::vector<double>, 3> samples;
  std::array<int, 3> order{0, 1, 2};
  std::mt19937 random(11);
  Slot slot;
  for (int round = 0; round < kWarmup + rounds; ++round) {
    std::shuffle(order.begin(), order.end(), random);
    for (const int kind : order) {
      slot.done.store(false, std::memory_order_relaxed);
      const auto start = probe::Clock::now();
      if (kind == 0) probe::check(hipStreamAddCallback(hip_stream, hip_callback, &slot, 0), "hipStreamAddCallback");
      if (kind == 1) probe::check(cuStreamAddCallback(stream, driver_callback, &slot, 0), "cuStreamAddCallback");
      if (kind == 2) probe::check(cuLaunchHostFunc(stream, host_function, &slot), "cuLaunchHostFunc");
      while (!slot.done.load(std::memory_order_acquire)) {
      }
      const double latency = std::chrono::duration<double, std::nano>(slot.at - start).count();
      if (kind == 0) probe::check(hipStreamSynchronize(hip_stream), "hipStreamSynchronize");
      if (kind != 0) probe::check(cuStreamSynchronize(stream), "cuStreamSynchronize");
      if (round >= kWarmup) samples[static_cast<std::size_t>(kind)].push_back(latency);
    }
  }
  const double host_function_latency = probe::median(samples[2]);
  std::printf("callback latency, enqueue to call, %d rounds (ratio to cuLaunchHostFunc)\n", rounds);
  for (std::size_t kind = 0; kind < names.size(); ++kind) {
    const double median = probe::median(samples[kind]);
    std::printf("  %-22s %8.1f ns  %.3f\n", names[kind], median, median / host_function_latency);
  }
  return 0;
}
