// hipxx against the raw system calls, op by op (bench/vmm_op_pairs.hpp), measured in pairs: a
// batch of raw iterations and a batch of hipxx iterations back to back, in alternating order, many
// times; each pair gives one ratio, and the median ratio is the result. On a shared or virtual
// machine the cost of system calls drifts by 10-30% from second to second, more than the books add;
// two batches a few hundred microseconds apart see nearly the same machine, so their ratio keeps
// what hipxx adds and loses most of the drift that separate benchmark runs pick up.
//
//   bench-vmm-paired [PAIRS] [ITERATIONS_PER_BATCH]      (defaults 401 and 64; HIPXX_BACKEND=host)
//
// Prints, per op: the median time per iteration of each side, the median per-pair ratio with its
// interquartile range, and the share of pairs in which hipxx was slower.
#include <hipxx/hipxx_ext.h>

#include "vmm_op_pairs.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Summary {
  double raw_ns = 0;
  double hipxx_ns = 0;
  double ratio = 0;
  double ratio_low = 0;  // 25th percentile
  double ratio_high = 0;  // 75th percentile
  double slower_share = 0;
};

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))];
}

// Nanoseconds per iteration of `iterations` calls of `step`; negative when a call failed.
template <class Step>
double batch(int iterations, Step&& step) {
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (!step()) return -1;
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / iterations;
}

template <class Operation>
bool measure(int pairs, int iterations) {
  Operation op;
  if (!op.ready()) {
    std::fprintf(stderr, "%s: set-up failed: %s\n", Operation::kName, op.failure() ? op.failure() : "?");
    return false;
  }
  const auto raw = [&] { return op.raw(); };
  const auto hipxx = [&] { return op.hipxx(); };
  // Warm both sides up: first calls fault in code, the arena's chunk, the books' nodes.
  if (batch(iterations, raw) < 0 || batch(iterations, hipxx) < 0) {
    std::fprintf(stderr, "%s: %s failed\n", Operation::kName, op.failure());
    return false;
  }
  std::vector<double> raw_ns, hipxx_ns, ratios;
  for (int pair = 0; pair < pairs; ++pair) {
    const bool raw_first = pair % 2 == 0;
    const double first = raw_first ? batch(iterations, raw) : batch(iterations, hipxx);
    const double second = raw_first ? batch(iterations, hipxx) : batch(iterations, raw);
    if (first < 0 || second < 0) {
      std::fprintf(stderr, "%s: %s failed\n", Operation::kName, op.failure());
      return false;
    }
    const double raw_time = raw_first ? first : second;
    const double hipxx_time = raw_first ? second : first;
    raw_ns.push_back(raw_time);
    hipxx_ns.push_back(hipxx_time);
    ratios.push_back(hipxx_time / raw_time);
  }
  Summary summary{.raw_ns = quantile(raw_ns, 0.5),
                  .hipxx_ns = quantile(hipxx_ns, 0.5),
                  .ratio = quantile(ratios, 0.5),
                  .ratio_low = quantile(ratios, 0.25),
                  .ratio_high = quantile(ratios, 0.75),
                  .slower_share = static_cast<double>(
                                      std::count_if(ratios.begin(), ratios.end(), [](double r) { return r > 1.0; })) /
                                  static_cast<double>(ratios.size())};
  std::printf("  %-13s %12.1f ns %12.1f ns   %6.3f  [%5.3f, %5.3f]   %5.1f%%   %s\n", Operation::kName,
              summary.hipxx_ns, summary.raw_ns, summary.ratio, summary.ratio_low, summary.ratio_high,
              100.0 * summary.slower_share, summary.ratio <= 1.15 ? "ok" : "MISSED");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 401;
  const int iterations = argc > 2 ? std::max(1, std::atoi(argv[2])) : 64;
  const char* backend = hipxxGetBackendName();
  if (backend == nullptr) {
    std::fprintf(stderr, "no hipxx backend: %s\n", hipxxGetBackendError());
    return 1;
  }
  if (std::string{backend} != "host")
    std::fprintf(stderr, "note: the raw side is a fair baseline only for the host backend\n");
  std::printf("hipxx (C API) against raw system calls, %d pairs of %d-iteration batches, backend %s\n", pairs,
              iterations, backend);
  std::printf("  %-13s %15s %15s   %6s  %-16s %7s   target <= 1.15\n", "op", "hipxx/iter", "raw/iter", "ratio",
              "[25%, 75%]", "slower");
  bool all = true;
  all = measure<vmm_ops::Reserve>(pairs, iterations) && all;
  // Create and map move whole 2 MiB allocations: fewer iterations per batch keep a pair short.
  all = measure<vmm_ops::Create>(pairs, std::max(1, iterations / 16)) && all;
  all = measure<vmm_ops::Map>(pairs, std::max(1, iterations / 16)) && all;
  all = measure<vmm_ops::SetAccess>(pairs, iterations) && all;
  all = measure<vmm_ops::ExportImport>(pairs, iterations) && all;
  return all ? 0 : 1;
}
