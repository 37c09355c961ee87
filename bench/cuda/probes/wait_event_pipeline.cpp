// How long a consumer stream takes to finish after its producer is let go, when the consumer waits
// for an event that the producer recorded and then queued more work behind: the producer waits on
// a word (so the event is pending when the consumer's wait is queued), records the event, queues a
// memset; the consumer waits for the event and queues 32 memsets; then a third stream writes the
// word and the time to the consumer's end is taken. hipxx against the driver, in turn.
// Built by bench/cuda/probes/build.sh; run as ./wait-event-pipeline [ROUNDS]
#include "side_by_side.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kConsumerWork = 32;
constexpr std::size_t kBytes = 4096;

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 300;
  constexpr int kWarmup = 10;
  const probe::Driver driver;
  const probe::StreamPair producers(true);
  const probe::StreamPair consumers(true);
  const probe::StreamPair releasers(true);
  const probe::EventPair events;
  hipEvent_t hip_event = events.hipxx;
  CUevent event = events.driver;
  const probe::BufferPair gates(sizeof(std::uint32_t));
  const probe::BufferPair buffers(kBytes);
  void* hip_gate = gates.hipxx;
  void* hip_buffer = buffers.hipxx;
  const CUdeviceptr gate = gates.driver;
  const CUdeviceptr buffer = buffers.driver;
  std::vector<double> hipxx_latency;
  std::vector<double> driver_latency;
  for (int round = 0; round < kWarmup + rounds; ++round) {
    const auto value = static_cast<std::uint32_t>(round + 1);
    for (const bool hipxx : {round % 2 == 0, round % 2 != 0}) {
      double latency = 0;
      if (hipxx) {
        probe::check(hipStreamWaitValue32(producers.hipxx, hip_gate, value, hipStreamWaitValueEq, 0xFFFFFFFFU),
                     "hipStreamWaitValue32");
        probe::check(hipEventRecord(hip_event, producers.hipxx), "hipEventRecord");
        probe::check(hipMemsetAsync(hip_buffer, 1, kBytes, producers.hipxx), "hipMemsetAsync");
        probe::check(hipStreamWaitEvent(consumers.hipxx, hip_event, 0), "hipStreamWaitEvent");
        for (int work = 0; work < kConsumerWork; ++work) {
          probe::check(hipMemsetAsync(hip_buffer, work, kBytes, consumers.hipxx), "hipMemsetAsync");
        }
        const auto start = probe::Clock::now();
        probe::check(hipStreamWriteValue32(releasers.hipxx, hip_gate, value, 0), "hipStreamWriteValue32");
        probe::check(hipStreamSynchronize(consumers.hipxx), "hipStreamSynchronize");
        latency = probe::ns_since(start);
        probe::check(hipStreamSynchronize(producers.hipxx), "hipStreamSynchronize");
      } else {
        probe::check(cuStreamWaitValue32(producers.driver, gate, value, CU_STREAM_WAIT_VALUE_EQ),
                     "cuStreamWaitValue32");
        probe::check(cuEventRecord(event, producers.driver), "cuEventRecord");
        probe::check(cuMemsetD8Async(buffer, 1, kBytes, producers.driver), "cuMemsetD8Async");
        probe::check(cuStreamWaitEvent(consumers.driver, event, 0), "cuStreamWaitEvent");
        for (int work = 0; work < kConsumerWork; ++work) {
          probe::check(cuMemsetD8Async(buffer, static_cast<unsigned char>(work), kBytes, consumers.driver),
                       "cuMemsetD8Async");
        }
        const auto start = probe::Clock::now();
        probe::check(cuStreamWriteValue32(releasers.driver, gate, value, 0), "cuStreamWriteValue32");
        probe::check(cuStreamSynchronize(consumers.driver), "cuStreamSynchronize");
        latency = probe::ns_since(start);
        probe::check(cuStreamSynchronize(producers.driver), "cuStreamSynchronize");
      }
      if (round >= kWarmup) (hipxx ? hipxx_latency : driver_latency).push_back(latency);
    }
  }
  const double hipxx_median = probe::median(hipxx_latency);
  const double driver_median = probe::median(driver_latency);
  std::printf(
      "release to consumer done, %d memsets behind an event wait, %d rounds: hipxx %.1f us, driver %.1f us, %.3f\n",
      kConsumerWork, rounds, hipxx_median / 1e3, driver_median / 1e3, hipxx_median / driver_median);
  return 0;
}
