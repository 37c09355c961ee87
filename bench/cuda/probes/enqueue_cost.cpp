// What putting small work on a stream costs the calling thread: hipMemsetAsync and hipMemcpyAsync
// (device to device, 4 KiB) against cuMemsetD8Async and cuMemcpyAsync, hipStreamWriteValue32
// against cuStreamWriteValue32, and hipStreamWaitEvent against cuStreamWaitEvent (for an event
// recorded on another stream, which has queued more work since); batches of 64 calls on an idle
// stream, timed from the first call to the last one's return (the device's work is not waited
// for), then the streams synchronised.
// Built by bench/cuda/probes/build.sh; run as ./enqueue-cost [ROUNDS]
#include "side_by_side.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

constexpr int kBatch = 64;
constexpr std::size_t kBytes = 4096;

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 300;
  constexpr int kWarmup = 10;
  const probe::Driver driver;
  const probe::StreamPair streams(true);
  hipStream_t hip_stream = streams.hipxx;
  CUstream stream = streams.driver;
  const probe::StreamPair producers(true);
  const probe::EventPair events;
  hipEvent_t hip_event = events.hipxx;
  CUevent event = events.driver;
  const probe::BufferPair first(kBytes);
  const probe::BufferPair second(kBytes);
  void* hip_a = first.hipxx;
  void* hip_b = second.hipxx;
  const CUdeviceptr a = first.driver;
  const CUdeviceptr b = second.driver;
  const std::array<const char*, 8> names{"hipMemsetAsync",     "cuMemsetD8Async",       "hipMemcpyAsync",
                                         "cuMemcpyAsync",      "hipStreamWriteValue32", "cuStreamWriteValue32",
                                         "hipStreamWaitEvent", "cuStreamWaitEvent"};
  std::array<std::vector<double>, 8> samples;
  std::array<int, 8> order{0, 1, 2, 3, 4, 5, 6, 7};
  std::mt19937 random(5);
  for (int round = 0; round < kWarmup + rounds; ++round) {
    std::shuffle(order.begin(), order.end(), random);
    for (const int kind : order) {
      if (kind == 6) {
        probe::check(hipEventRecord(hip_event, producers.hipxx), "hipEventRecord");
        probe::check(hipMemsetAsync(hip_b, 0, kBytes, producers.hipxx), "hipMemsetAsync");
      }
      if (kind == 7) {
        probe::check(cuEventRecord(event, producers.driver), "cuEventRecord");
        probe::check(cuMemsetD8Async(b, 0, kBytes, producers.driver), "cuMemsetD8Async");
      }
      const auto start = probe::Clock::now();
      for (int call = 0; call < kBatch; ++call) {
        switch (kind) {
          case 0: probe::check(hipMemsetAsync(hip_a, call, kBytes, hip_stream), "hipMemsetAsync"); break;
          case 1:
            probe::check(cuMemsetD8Async(a, static_cast<unsigned char>(call), kBytes, stream), "cuMemsetD8Async");
            break;
          case 2:
            probe::check(hipMemcpyAsync(hip_b, hip_a, kBytes, hipMemcpyDeviceToDevice, hip_stream), "hipMemcpyAsync");
            break;
          case 3: probe::check(cuMemcpyAsync(b, a, kBytes, stream), "cuMemcpyAsync"); break;
          case 4: probe::check(hipStreamWriteValue32(hip_stream, hip_a, call, 0), "hipStreamWriteValue32"); break;
          case 5: probe::check(cuStreamWriteValue32(stream, a, call, 0), "cuStreamWriteValue32"); break;
          case 6: probe::check(hipStreamWaitEvent(hip_stream, hip_event, 0), "hipStreamWaitEvent"); break;
          case 7: probe::check(cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent"); break;
        }
      }
      const double per_call = probe::ns_since(start) / kBatch;
      probe::check(hipStreamSynchronize(hip_stream), "hipStreamSynchronize");
      probe::check(cuStreamSynchronize(stream), "cuStreamSynchronize");
      probe::check(hipStreamSynchronize(producers.hipxx), "hipStreamSynchronize");
      probe::check(cuStreamSynchronize(producers.driver), "cuStreamSynchronize");
      if (round >= kWarmup) samples[static_cast<std::size_t>(kind)].push_back(per_call);
    }
  }
  std::printf("enqueue cost per call, batches of %d, %d rounds (ratio hipxx / driver)\n", kBatch, rounds);
  for (std::size_t kind = 0; kind < names.size(); kind += 2) {
    const double hipxx = probe::median(samples[kind]);
    const double raw = probe::median(samples[kind + 1]);
    std::printf("  %-22s %8.1f ns   %-22s %8.1f ns   %.3f\n", names[kind], hipxx, names[kind + 1], raw, hipxx / raw);
  }
  return 0;
}
