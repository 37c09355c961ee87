// The stream-ordered allocator under a steady churn, side by side with glibc malloc/free on the
// identical pattern, in one binary so that all run under the same conditions:
//
//   64 allocations stay live in a ring; each iteration frees the oldest and allocates a new one, with
//   sizes drawn log-uniformly from 256 B to 4 MiB (fixed seed, drawn before timing starts). One
//   iteration is one free+allocate pair, so the reported time is ns per pair.
//
//   BM_PoolPair/hipxx       hipFreeAsync + hipMallocAsync on one stream (the C entry points)
//   BM_PoolPair/hipxx_cxx   the same through hipxx::PoolAllocation (move-assigning into the ring slot
//                           frees the old allocation, then allocate_async makes the new one)
//   BM_PoolPair/malloc      free + malloc
//   BM_PoolPairMT/<variant>/threads:N   the same per thread, every thread with its own stream and
//                           ring, all on the device's one default pool; items_per_second is the total
//                           throughput in pairs per second.
//
// No memory is touched: this measures the allocators' bookkeeping, not page faults. The default pool's
// release threshold is set to UINT64_MAX, so the pool keeps the chunks it has mapped between runs.
#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>
#include <hipxx/mem_pool.hpp>
#include <hipxx/stream.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kLive = 64;
constexpr std::size_t kSizeCount = std::size_t{1} << 16;  // a power of two, so the index wraps with a mask
constexpr double kSmallest = 256.0;
constexpr double kLargest = 4.0 * 1024 * 1024;
constexpr std::uint64_t kSeed = 20240601;

// Drawn once, before any timing: every variant and thread replays the same sequence.
const std::vector<std::size_t>& sizes() {
  static const std::vector<std::size_t> drawn = [] {
    std::mt19937_64 engine{kSeed};
    std::uniform_real_distribution<double> exponent{std::log(kSmallest), std::log(kLargest)};
    std::vector<std::size_t> out(kSizeCount);
    for (auto& size : out) size = static_cast<std::size_t>(std::exp(exponent(engine)));
    return out;
  }();
  return drawn;
}

// Threads start at different points of the sequence, so they do not ask for the same size in step.
std::size_t first_index(const benchmark::State& state) {
  return static_cast<std::size_t>(state.thread_index()) * (kSizeCount / 8);
}

bool ok(benchmark::State& state, hipError_t error, const char* what) {
  if (error != hipSuccess) {
    static thread_local std::string text;
    text = std::string{what} + ": " + hipGetErrorName(error);
    state.SkipWithError(text.c_str());
  }
  return error == hipSuccess;
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// --- C entry points ---------------------------------------------------------------------------------

void BM_PoolPair_hipxx(benchmark::State& state) {
  const std::vector<std::size_t>& size = sizes();
  hipStream_t stream = nullptr;
  if (!ok(state, hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), "hipStreamCreateWithFlags")) return;
  std::array<void*, kLive> ring{};
  std::size_t next = first_index(state);
  bool good = true;
  for (void*& slot : ring) {
    good = good && ok(state, hipMallocAsync(&slot, size[next++ & (kSizeCount - 1)], stream), "hipMallocAsync");
  }
  std::size_t oldest = 0;
  if (good) {
    for (auto _ : state) {
      if (!ok(state, hipFreeAsync(ring[oldest], stream), "hipFreeAsync")) break;
      if (!ok(state, hipMallocAsync(&ring[oldest], size[next++ & (kSizeCount - 1)], stream), "hipMallocAsync")) {
        ring[oldest] = nullptr;
        break;
      }
      benchmark::DoNotOptimize(ring[oldest]);
      oldest = (oldest + 1) % kLive;
    }
  }
  for (void* slot : ring) {
    if (slot != nullptr) (void)hipFreeAsync(slot, stream);
  }
  (void)hipStreamSynchronize(stream);
  (void)hipStreamDestroy(stream);
  report(state);
}

// --- the C++ owners ---------------------------------------------------------------------------------

void BM_PoolPair_hipxx_cxx(benchmark::State& state) {
  const std::vector<std::size_t>& size = sizes();
  auto stream = hipxx::Stream::create(hipxx::StreamFlags::non_blocking);
  if (!stream) {
    state.SkipWithError("Stream::create");
    return;
  }
  std::vector<hipxx::PoolAllocation> ring;
  ring.reserve(kLive);
  std::size_t next = first_index(state);
  for (std::size_t i = 0; i < kLive; ++i) {
    auto allocation = hipxx::allocate_async(size[next++ & (kSizeCount - 1)], stream.value());
    if (!allocation) {
      state.SkipWithError("allocate_async");
      return;
    }
    ring.push_back(std::move(allocation).value());
  }
  std::size_t oldest = 0;
  for (auto _ : state) {
    // Free first, as the C variant does, so both hand the pool the same sequence of requests.
    (void)ring[oldest].free();
    auto allocation = hipxx::allocate_async(size[next++ & (kSizeCount - 1)], stream.value());
    if (!allocation) {
      state.SkipWithError("allocate_async");
      break;
    }
    ring[oldest] = std::move(allocation).value();
    benchmark::DoNotOptimize(ring[oldest].data());
    oldest = (oldest + 1) % kLive;
  }
  ring.clear();
  (void)stream.value().synchronize();
  report(state);
}

// --- glibc ------------------------------------------------------------------------------------------

void BM_PoolPair_malloc(benchmark::State& state) {
  const std::vector<std::size_t>& size = sizes();
  std::array<void*, kLive> ring{};
  std::size_t next = first_index(state);
  for (void*& slot : ring) slot = std::malloc(size[next++ & (kSizeCount - 1)]);
  std::size_t oldest = 0;
  for (auto _ : state) {
    std::free(ring[oldest]);
    ring[oldest] = std::malloc(size[next++ & (kSizeCount - 1)]);
    benchmark::DoNotOptimize(ring[oldest]);
    oldest = (oldest + 1) % kLive;
  }
  for (void* slot : ring) std::free(slot);
  report(state);
}

// With --benchmark_repetitions: on a shared machine the fastest repetition is the one least
// disturbed by other processes, so it is reported beside the median.
double fastest(const std::vector<double>& runs) { return runs.empty() ? 0.0 : *std::min_element(runs.begin(), runs.end()); }

void register_all() {
  struct Entry {
    const char* name;
    void (*function)(benchmark::State&);
  };
  const Entry single[] = {
      {"BM_PoolPair/hipxx", BM_PoolPair_hipxx},
      {"BM_PoolPair/hipxx_cxx", BM_PoolPair_hipxx_cxx},
      {"BM_PoolPair/malloc", BM_PoolPair_malloc},
  };
  for (const Entry& entry : single) benchmark::RegisterBenchmark(entry.name, entry.function)->ComputeStatistics("min", fastest);
  // Wall-clock time, since the point is how throughput scales when threads run side by side.
  const Entry threaded[] = {
      {"BM_PoolPairMT/hipxx", BM_PoolPair_hipxx},
      {"BM_PoolPairMT/hipxx_cxx", BM_PoolPair_hipxx_cxx},
      {"BM_PoolPairMT/malloc", BM_PoolPair_malloc},
  };
  for (const Entry& entry : threaded) {
    benchmark::RegisterBenchmark(entry.name, entry.function)->ThreadRange(1, 8)->UseRealTime()->ComputeStatistics("min", fastest);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const char* backend = hipxxGetBackendName();
  if (backend == nullptr) {
    std::fprintf(stderr, "no hipxx backend: %s\n", hipxxGetBackendError());
    return 1;
  }
  benchmark::AddCustomContext("hipxx_backend", backend);
  benchmark::AddCustomContext("pool_pattern", "64 live, log-uniform 256 B..4 MiB, seed 20240601");
  (void)sizes();
  // Steady state is what is measured, as an application that sets a release threshold sees it. With
  // the default threshold of 0, each run's final synchronize would trim the pool, and the next run
  // would map its chunks again inside the timed loop (a 32 MiB chunk is committed and populated on the
  // host backend: milliseconds), which swamps the bookkeeping and makes runs bimodal.
  auto const pool = hipxx::MemPool::default_for(hipxx::Device{0});
  if (!pool || !pool.value().set_release_threshold(UINT64_MAX)) {
    std::fprintf(stderr, "cannot set the default pool's release threshold\n");
    return 1;
  }
  benchmark::AddCustomContext("pool_release_threshold", "UINT64_MAX (the pool keeps what it maps)");
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Every benchmark freed what it allocated: the default pool must have nothing in use.
  auto const used = pool ? pool.value().used_current() : hipxx::result<std::uint64_t>{hipxx::failure(hipErrorUnknown)};
  if (!used || used.value() != 0) {
    std::fprintf(stderr, "leak: the default pool still has %llu bytes in use\n",
                 used ? static_cast<unsigned long long>(used.value()) : 0ULL);
    return 1;
  }
  return 0;
}
