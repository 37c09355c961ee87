// How long the runtime takes to hand work to a stream and back, on an idle stream, against the
// cheapest way two threads can do the same: a std::condition_variable handoff.
//
//   BM_CallbackLatency/<variant>  one way: from just before the enqueue until the callback (or the
//                                 woken thread) starts running. Timed by hand (UseManualTime) with
//                                 steady_clock stamps taken on both sides; the wait for the
//                                 acknowledgement is not timed.
//       hipxx       hipStreamAddCallback with a plain function pointer
//       hipxx_cxx   hipxx::add_callback with a capturing lambda (adds its heap state)
//       cv          notify_one to a thread waiting on a condition_variable
//   BM_EventRoundTrip/<variant>   a round trip: enqueue and wait for it to be done.
//       hipxx       hipEventRecord + hipEventSynchronize
//       hipxx_cxx   hipxx::Event::record + synchronize
//       cv          notify a waiting thread, which notifies back
#include <hipxx/callback.hpp>
#include <hipxx/event.hpp>
#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>
#include <hipxx/stream.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

bool ok(benchmark::State& state, hipError_t error, const char* what) {
  if (error != hipSuccess) {
    static thread_local std::string text;
    text = std::string{what} + ": " + hipGetErrorName(error);
    state.SkipWithError(text.c_str());
  }
  return error == hipSuccess;
}

// The time the other side started, and a ticket saying which iteration it belongs to. The waiting
// side spins (with yield) on the ticket in every variant, so the acknowledgement costs the same.
struct Stamp {
  std::atomic<std::int64_t> woke_ns{0};
  std::atomic<std::uint64_t> ticket{0};
};

void wait_for_ticket(const Stamp& stamp, std::uint64_t ticket) {
  while (stamp.ticket.load(std::memory_order_acquire) != ticket) std::this_thread::yield();
}

void set_seconds(benchmark::State& state, std::int64_t from_ns, std::int64_t to_ns) {
  state.SetIterationTime(static_cast<double>(to_ns - from_ns) * 1e-9);
}

// --- callback latency -------------------------------------------------------------------------------

struct CallbackArgs {
  Stamp* stamp;
  std::uint64_t ticket;
};

void stamp_callback(hipStream_t /*stream*/, hipError_t /*status*/, void* data) {
  auto* const args = static_cast<CallbackArgs*>(data);
  args->stamp->woke_ns.store(now_ns(), std::memory_order_relaxed);
  args->stamp->ticket.store(args->ticket, std::memory_order_release);
}

void BM_CallbackLatency_hipxx(benchmark::State& state) {
  hipStream_t stream = nullptr;
  if (!ok(state, hipStreamCreate(&stream), "hipStreamCreate")) return;
  Stamp stamp;
  CallbackArgs args{&stamp, 0};
  for (auto _ : state) {
    args.ticket += 1;
    const std::int64_t start = now_ns();
    if (!ok(state, hipStreamAddCallback(stream, stamp_callback, &args, 0), "hipStreamAddCallback")) break;
    wait_for_ticket(stamp, args.ticket);
    set_seconds(state, start, stamp.woke_ns.load(std::memory_order_relaxed));
  }
  (void)hipStreamSynchronize(stream);
  (void)hipStreamDestroy(stream);
}

void BM_CallbackLatency_hipxx_cxx(benchmark::State& state) {
  auto stream = hipxx::Stream::create();
  if (!stream) {
    state.SkipWithError("Stream::create");
    return;
  }
  Stamp stamp;
  std::uint64_t ticket = 0;
  for (auto _ : state) {
    ticket += 1;
    const std::int64_t start = now_ns();
    auto const added = hipxx::add_callback(stream.value(), [&stamp, ticket] {
      stamp.woke_ns.store(now_ns(), std::memory_order_relaxed);
      stamp.ticket.store(ticket, std::memory_order_release);
    });
    if (!added) {
      state.SkipWithError("add_callback");
      break;
    }
    wait_for_ticket(stamp, ticket);
    set_seconds(state, start, stamp.woke_ns.load(std::memory_order_relaxed));
  }
  (void)stream.value().synchronize();
}

// A thread that waits on a condition variable for the next ticket, as a stream's worker does.
class Handoff {
 public:
  Handoff() : worker_([this] { run(); }) {}
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;
  ~Handoff() {
    {
      std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    ready_.notify_one();
    worker_.join();
  }

  // One way: returns once the worker has been told; the worker stamps when it wakes.
  void post(std::uint64_t ticket) {
    {
      std::lock_guard lock{mutex_};
      posted_ = ticket;
    }
    ready_.notify_one();
  }

  // Round trip: tells the worker and waits on a second condition variable for its answer.
  void round_trip(std::uint64_t ticket) {
    post(ticket);
    std::unique_lock lock{mutex_};
    done_.wait(lock, [&] { return answered_ == ticket; });
  }

  Stamp stamp;

 private:
  void run() {
    std::uint64_t seen = 0;
    std::unique_lock lock{mutex_};
    while (true) {
      ready_.wait(lock, [&] { return stopping_ || posted_ != seen; });
      if (stopping_) return;
      seen = posted_;
      stamp.woke_ns.store(now_ns(), std::memory_order_relaxed);
      stamp.ticket.store(seen, std::memory_order_release);
      answered_ = seen;
      done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable done_;
  std::uint64_t posted_ = 0;
  std::uint64_t answered_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

void BM_CallbackLatency_cv(benchmark::State& state) {
  Handoff handoff;
  std::uint64_t ticket = 0;
  for (auto _ : state) {
    ticket += 1;
    const std::int64_t start = now_ns();
    handoff.post(ticket);
    wait_for_ticket(handoff.stamp, ticket);
    set_seconds(state, start, handoff.stamp.woke_ns.load(std::memory_order_relaxed));
  }
}

// --- event round trip -------------------------------------------------------------------------------

void BM_EventRoundTrip_hipxx(benchmark::State& state) {
  hipStream_t stream = nullptr;
  hipEvent_t event = nullptr;
  if (!ok(state, hipStreamCreate(&stream), "hipStreamCreate")) return;
  if (ok(state, hipEventCreate(&event), "hipEventCreate")) {
    for (auto _ : state) {
      if (!ok(state, hipEventRecord(event, stream), "hipEventRecord")) break;
      if (!ok(state, hipEventSynchronize(event), "hipEventSynchronize")) break;
    }
    (void)hipEventDestroy(event);
  }
  (void)hipStreamDestroy(stream);
}

void BM_EventRoundTrip_hipxx_cxx(benchmark::State& state) {
  auto stream = hipxx::Stream::create();
  auto event = hipxx::Event::create();
  if (!stream || !event) {
    state.SkipWithError("Stream::create / Event::create");
    return;
  }
  for (auto _ : state) {
    if (!event.value().record(stream.value()) || !event.value().synchronize()) {
      state.SkipWithError("record / synchronize");
      break;
    }
  }
}

void BM_EventRoundTrip_cv(benchmark::State& state) {
  Handoff handoff;
  std::uint64_t ticket = 0;
  for (auto _ : state) handoff.round_trip(++ticket);
}

// With --benchmark_repetitions: on a shared machine the fastest repetition is the one least
// disturbed by other processes, so it is reported beside the median.
double fastest(const std::vector<double>& runs) { return runs.empty() ? 0.0 : *std::min_element(runs.begin(), runs.end()); }

void register_all() {
  struct Entry {
    const char* name;
    void (*function)(benchmark::State&);
  };
  const Entry one_way[] = {
      {"BM_CallbackLatency/hipxx", BM_CallbackLatency_hipxx},
      {"BM_CallbackLatency/hipxx_cxx", BM_CallbackLatency_hipxx_cxx},
      {"BM_CallbackLatency/cv", BM_CallbackLatency_cv},
  };
  for (const Entry& entry : one_way) {
    benchmark::RegisterBenchmark(entry.name, entry.function)->UseManualTime()->ComputeStatistics("min", fastest);
  }
  const Entry round_trip[] = {
      {"BM_EventRoundTrip/hipxx", BM_EventRoundTrip_hipxx},
      {"BM_EventRoundTrip/hipxx_cxx", BM_EventRoundTrip_hipxx_cxx},
      {"BM_EventRoundTrip/cv", BM_EventRoundTrip_cv},
  };
  for (const Entry& entry : round_trip) {
    benchmark::RegisterBenchmark(entry.name, entry.function)->UseRealTime()->ComputeStatistics("min", fastest);
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
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
