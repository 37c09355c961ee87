// Growing to a target size by appending 64 MiB at a time: hipxx::GrowableArray against the classic
// doubling buffer. Every appended chunk is written, so the memory measured is memory really held
// (malloc's pages exist only once touched; the host backend commits a chunk's memfd pages when it
// creates the chunk and fills its page tables when it maps it, as a GPU driver does).
//
//   BM_Grow/hipxx/<bytes>        GrowableArray<uint64_t> with 64 MiB chunks; append = hipMemcpy
//   BM_Grow/malloc_copy/<bytes>  what std::vector does: malloc twice the capacity, memcpy, free
//   BM_Grow/realloc/<bytes>      std::realloc doubling. On glibc a block this large is its own mmap
//                                and realloc moves it with mremap: no copy, no old + new peak. Shown
//                                because it is what realloc really costs here, not a strawman.
//
// Each measurement runs in a fresh child process (fork), which resets its peak RSS (VmHWM) with
// /proc/self/clear_refs where the kernel allows it and reports:
//   peak_rss     VmHWM at the end, bytes
//   peak_growth  VmHWM minus the RSS just before growing (the 64 MiB source buffer is already in it)
//   peak_over    peak_growth minus the target size: what the strategy held beyond the data itself
//   child_cpu_s  the child's user + system CPU time over the same span: on a busy machine a steadier
//                comparison than wall time, since time spent waiting for a CPU is not counted
// Time is the child's own steady-clock time for creating and growing (not freeing).
//
// HIPXX_BENCH_GROW_BYTES sets the largest target (default 8 GiB); 3/4 of it is measured too, where
// doubling overshoots (its peak is twice the size at its last doubling, not the final size).
#include <hipxx/device.hpp>
#include <hipxx/growable_array.hpp>
#include <hipxx/hipxx_ext.h>

#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kChunk = std::size_t{64} << 20;
constexpr std::size_t kDefaultTarget = std::size_t{8} << 30;

struct Measurement {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the child while growing: less disturbed by other load
  std::uint64_t peak_rss = 0;
  std::uint64_t rss_before = 0;
  int ok = 0;
  char backend[16] = {};
  char error[128] = {};
};

std::uint64_t status_kib(const char* key) {
  std::ifstream status{"/proc/self/status"};
  std::string line;
  const std::size_t length = std::strlen(key);
  while (std::getline(status, line)) {
    if (line.compare(0, length, key) == 0) return std::strtoull(line.c_str() + length, nullptr, 10) * 1024;
  }
  return 0;
}

// Makes VmHWM equal the current RSS (Linux 4.0 and later); harmless where refused.
void reset_peak_rss() {
  const int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!write(fd, "5", 1);
  close(fd);
}

// The 64 MiB every variant appends, filled before the clock starts.
std::vector<std::uint64_t> source_chunk() {
  std::vector<std::uint64_t> chunk(kChunk / sizeof(std::uint64_t));
  for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = i * 0x9E3779B97F4A7C15ULL;
  return chunk;
}

using Clock = std::chrono::steady_clock;

// User plus system CPU time of this process so far, in seconds (page faults count as system time).
double cpu_now() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

bool grow_hipxx(std::size_t target, const std::vector<std::uint64_t>& chunk, Measurement& m) {
  const auto start = Clock::now();
  const double cpu_start = cpu_now();
  auto array = hipxx::GrowableArray<std::uint64_t>::create(hipxx::Device{0}, target, kChunk);
  if (!array) {
    std::snprintf(m.error, sizeof m.error, "create: %s", array.error().message().c_str());
    return false;
  }
  for (std::size_t size = 0; size < target; size += kChunk) {
    if (auto appended = array.value().append(chunk); !appended) {
      std::snprintf(m.error, sizeof m.error, "append: %s", appended.error().message().c_str());
      return false;
    }
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  m.cpu_seconds = cpu_now() - cpu_start;
  m.peak_rss = status_kib("VmHWM:");
  // Spot-check one element per chunk, after the clock stopped.
  for (std::size_t index = 0; index < array.value().size(); index += chunk.size() + 1) {
    auto value = array.value().read(index);
    if (!value || value.value() != chunk[index % chunk.size()]) {
      std::snprintf(m.error, sizeof m.error, "wrong contents at element %zu", index);
      return false;
    }
  }
  return true;
}

template <bool UseRealloc>
bool grow_doubling(std::size_t target, const std::vector<std::uint64_t>& chunk, Measurement& m) {
  const auto start = Clock::now();
  const double cpu_start = cpu_now();
  std::size_t capacity = kChunk;
  auto* data = static_cast<unsigned char*>(std::malloc(capacity));
  if (data == nullptr) return false;
  for (std::size_t size = 0; size < target; size += kChunk) {
    if (size + kChunk > capacity) {
      const std::size_t bigger = capacity * 2;
      unsigned char* moved = nullptr;
      if constexpr (UseRealloc) {
        moved = static_cast<unsigned char*>(std::realloc(data, bigger));
      } else {
        moved = static_cast<unsigned char*>(std::malloc(bigger));
        if (moved != nullptr) {
          std::memcpy(moved, data, size);
          std::free(data);
        }
      }
      if (moved == nullptr) {
        std::free(data);
        std::snprintf(m.error, sizeof m.error, "out of memory at %zu bytes", bigger);
        return false;
      }
      data = moved;
      capacity = bigger;
    }
    std::memcpy(data + size, chunk.data(), kChunk);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(data);
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  m.cpu_seconds = cpu_now() - cpu_start;
  m.peak_rss = status_kib("VmHWM:");
  bool ok = true;
  for (std::size_t offset = 0; offset < target; offset += kChunk + sizeof(std::uint64_t)) {
    std::uint64_t value = 0;
    std::memcpy(&value, data + offset, sizeof value);
    ok = ok && value == chunk[(offset % kChunk) / sizeof(std::uint64_t)];
  }
  std::free(data);
  if (!ok) std::snprintf(m.error, sizeof m.error, "wrong contents");
  return ok;
}

using Grow = bool (*)(std::size_t, const std::vector<std::uint64_t>&, Measurement&);

// Runs one growth in a fresh child and brings its measurement back through a pipe.
Measurement measure_in_child(Grow grow, std::size_t target) {
  Measurement m{};
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    std::snprintf(m.error, sizeof m.error, "pipe: %s", std::strerror(errno));
    return m;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    Measurement child{};
    {
      // The runtime starts here, in the child: the parent never touches it, so no backend state
      // (a GPU driver's, or a stream's thread) is ever inherited across fork.
      const char* backend = hipxxGetBackendName();
      std::snprintf(child.backend, sizeof child.backend, "%s", backend != nullptr ? backend : "none");
      const auto chunk = source_chunk();
      reset_peak_rss();
      child.rss_before = status_kib("VmRSS:");
      child.ok = grow(target, chunk, child) ? 1 : 0;
    }
    (void)!write(pipe_fds[1], &child, sizeof child);
    _exit(0);
  }
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    std::snprintf(m.error, sizeof m.error, "fork: %s", std::strerror(errno));
    return m;
  }
  const ssize_t got = read(pipe_fds[0], &m, sizeof m);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof m)) {
    m = Measurement{};
    std::snprintf(m.error, sizeof m.error, "the child died (status 0x%x): out of memory?", status);
  }
  return m;
}

void run(benchmark::State& state, Grow grow) {
  const auto target = static_cast<std::size_t>(state.range(0));
  Measurement m{};
  for (auto _ : state) {
    m = measure_in_child(grow, target);
    if (!m.ok) {
      state.SkipWithError(m.error[0] != '\0' ? m.error : "failed");
      return;
    }
    state.SetIterationTime(m.seconds);
  }
  state.SetLabel(m.backend);
  const double growth = static_cast<double>(m.peak_rss) - static_cast<double>(m.rss_before);
  using Counter = benchmark::Counter;
  state.counters["peak_rss"] = Counter(static_cast<double>(m.peak_rss), Counter::kDefaults, Counter::kIs1024);
  state.counters["peak_growth"] = Counter(growth, Counter::kDefaults, Counter::kIs1024);
  state.counters["peak_over"] = Counter(growth - static_cast<double>(target), Counter::kDefaults, Counter::kIs1024);
  state.counters["child_cpu_s"] = m.cpu_seconds;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(target));
}

std::size_t target_bytes() {
  const char* text = std::getenv("HIPXX_BENCH_GROW_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultTarget;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  // Whole chunks only, and at least one.
  const std::size_t chunks = std::max<std::size_t>(1, static_cast<std::size_t>(value) / kChunk);
  if (end == text || *end != '\0') {
    std::fprintf(stderr, "HIPXX_BENCH_GROW_BYTES must be a byte count; using the default\n");
    return kDefaultTarget;
  }
  return chunks * kChunk;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const std::size_t target = target_bytes();
  std::vector<std::int64_t> targets{static_cast<std::int64_t>(target)};
  if (const std::size_t three_quarters = target / 4 * 3 / kChunk * kChunk; three_quarters >= 2 * kChunk) {
    targets.insert(targets.begin(), static_cast<std::int64_t>(three_quarters));
  }
  benchmark::AddCustomContext("grow_chunk_bytes", std::to_string(kChunk));

  const struct {
    const char* name;
    Grow grow;
  } variants[] = {
      {"BM_Grow/hipxx", grow_hipxx},
      {"BM_Grow/malloc_copy", grow_doubling<false>},
      {"BM_Grow/realloc", grow_doubling<true>},
  };
  for (const std::int64_t bytes : targets) {
    for (const auto& variant : variants) {
      benchmark::RegisterBenchmark(variant.name, run, variant.grow)
          ->Arg(bytes)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
