// hipxx against the raw CUDA driver, side by side in one process, on an NVIDIA GPU.
//
//   gpu-bench [--json=PATH] [--dry-run] [--only=LIST] [--deadline=SECONDS] [--grow-gib=N]
//
// Each comparison runs the hipxx side and the raw-driver side alternately in the same process, on the
// same device, with the same sizes and sequences; each row reports the median of both and their ratio:
//
//   event/*     hipEventRecord+hipEventSynchronize on an idle hipStreamCreate stream, against
//               cuEventRecord+cuEventSynchronize on an idle cuStreamCreate stream (host wall clock,
//               one round trip per sample); hipStreamAddCallback against cuLaunchHostFunc, from just
//               before the enqueue call to the callback's own steady_clock timestamp.
//   vmm/*       every VMM call through hipxx against the cuMem* call it becomes, at 2 MiB and 64 MiB:
//               host wall clock of each single (synchronous) call. Target <= 1.05x.
//   placement/* vmm/MemMap's ratio in two parts (report only): the driver's map into a slot of an
//               arena-sized chunk against its map into a reservation of its own, and hipMemMap
//               against the driver's map into such a chunk; for 64 GiB chunks also the driver's
//               map into slots 1 GiB apart against slots of the map's size.
//   pool/*      hipMallocAsync+hipFreeAsync against cuMemAllocAsync+cuMemFreeAsync (default pools),
//               one stream each, the identical log-uniform 256 B - 4 MiB size sequence (fixed seed),
//               64 allocations live in a ring. Throughput rows time the whole sequence plus the final
//               stream synchronize, divided by the number of allocations. Target <= 0.20 (>= 5x).
//   grow/*      0 -> 8 GiB in 64 MiB appends: hipxx::GrowableArray::resize (maps a chunk, hipMemset
//               fills it) against a doubling buffer (cuMemAlloc twice the capacity, cuMemcpyDtoD the
//               contents, cuMemFree the old one, cuMemsetD8 the new chunk). Time to the end of all device
//               work; peak device memory from cuMemGetInfo (peak of total - free, minus the value before
//               the growth) in a separate probe run, which also times the baseline's copies and fills
//               on the device with CUDA events.
//
// No CUDA header or library is needed to build it: the driver's types come from the CUDA backend's own
// declarations (lib/backend/cuda/cuda_driver.hpp), the entry points it calls are listed here, and
// libcuda.so.1 is opened with dlopen. The program sets HIPXX_BACKEND=cuda itself before its
// first HIP call (except with --dry-run, which uses whatever backend HIPXX_BACKEND or auto selects).
//
// --dry-run runs every code path with N=3 and small sizes; the raw-CUDA side runs only where libcuda
// works and hipxx itself runs on the cuda backend, and is otherwise skipped with a note.
//
// Output: a Markdown table on stdout (progress and errors go to stderr), and the same as JSON with
// --json=PATH. Exit status: 0 every row measured; 1 some benchmark failed (its row says why); 2 no usable
// CUDA driver or device (full mode only); 3 the deadline passed (partial results are printed and
// written); 64 bad command line.
#include "backend/cuda/cuda_driver.hpp"

#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>
#include <hipxx/device.hpp>
#include <hipxx/growable_array.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// ------------------------------------------------------------------------------------------------
// The CUDA driver: its types and constants are the backend's own declarations (no CUDA header); the
// bench adds the few it needs beyond the backend (events, host functions, the stream-ordered pool).
// ------------------------------------------------------------------------------------------------
namespace cu {

using namespace hipxx::backend::cuda;

using CUevent = struct CUevent_st*;
using CUhostFn = void (*)(void* user_data);

inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr unsigned CU_STREAM_DEFAULT = 0x0;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr auto CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = static_cast<CUdevice_attribute>(115);

// The entry points: the CUDA backend's own list (lib/backend/cuda/cuda_driver.hpp), and the few the
// bench calls beyond it, by the exact exported symbol. cuEventElapsedTime_v2 (CUDA 12.8+) falls back to
// cuEventElapsedTime.
#define GPU_BENCH_EXTRA_ENTRY_POINTS(X)                                                   \
  X(cuDriverGetVersion, CUresult (*)(int* version))                                       \
  X(cuMemcpyDtoD_v2, CUresult (*)(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes))   \
  X(cuStreamCreate, CUresult (*)(CUstream * stream, unsigned flags))                      \
  X(cuStreamDestroy_v2, CUresult (*)(CUstream stream))                                    \
  X(cuStreamSynchronize, CUresult (*)(CUstream stream))                                   \
  X(cuEventCreate, CUresult (*)(CUevent * event, unsigned flags))                         \
  X(cuEventDestroy_v2, CUresult (*)(CUevent event))                                       \
  X(cuEventRecord, CUresult (*)(CUevent event, CUstream stream))                          \
  X(cuEventSynchronize, CUresult (*)(CUevent event))                                      \
  X(cuEventElapsedTime_v2, CUresult (*)(float* milliseconds, CUevent start, CUevent end)) \
  X(cuMemAllocAsync, CUresult (*)(CUdeviceptr * ptr, std::size_t bytes, CUstream stream)) \
  X(cuMemFreeAsync, CUresult (*)(CUdeviceptr ptr, CUstream stream))                       \
  X(cuLaunchHostFunc, CUresult (*)(CUstream stream, CUhostFn fn, void* user_data))

#define GPU_BENCH_CUDA_ENTRY_POINTS(X) HIPXX_CUDA_DRIVER_ENTRY_POINTS(X) GPU_BENCH_EXTRA_ENTRY_POINTS(X)

struct Driver {
#define GPU_BENCH_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  GPU_BENCH_CUDA_ENTRY_POINTS(GPU_BENCH_DECLARE)
#undef GPU_BENCH_DECLARE
};

}  // namespace cu

using Clock = std::chrono::steady_clock;

double ns_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::nano>(to - from).count();
}

struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ------------------------------------------------------------------------------------------------
// Process-wide state: the driver (when usable) and the context the raw side runs in.
// ------------------------------------------------------------------------------------------------
cu::Driver g_cu;
bool g_raw = false;  // the raw-CUDA side runs
std::string g_raw_note;  // why it does not, when it does not
cu::CUdevice g_cu_device = 0;  // hipxx device 0 is CUDA ordinal 0, the same device
cu::CUcontext g_cu_context = nullptr;

std::string cu_error_text(cu::CUresult result) {
  const char* name = nullptr;
  if (g_cu.cuGetErrorName != nullptr && g_cu.cuGetErrorName(result, &name) == cu::CUDA_SUCCESS && name != nullptr) {
    return std::string{name} + " (" + std::to_string(result) + ")";
  }
  return "CUresult " + std::to_string(result);
}

std::string hip_error_text(hipError_t error) {
  const char* name = hipGetErrorName(error);
  std::string text = std::string{name != nullptr ? name : "hipError"} + " (" + std::to_string(error) + ")";
  const char* backend = hipxxGetBackendError();
  if (backend != nullptr && *backend != '\0') text += " [backend: " + std::string{backend} + "]";
  return text;
}

void cu_check(cu::CUresult result, const char* what) {
  if (result != cu::CUDA_SUCCESS) throw BenchError(std::string{what} + " failed: " + cu_error_text(result));
}

void hip_check(hipError_t error, const char* what) {
  if (error != hipSuccess) throw BenchError(std::string{what} + " failed: " + hip_error_text(error));
}

#define CU_CHECK(call) cu_check((call), #call)
#define HIP_CHECK(call) hip_check((call), #call)

template <class T>
T value_or_throw(hipxx::result<T> result, const char* what) {
  if (!result) throw BenchError(std::string{what} + " failed: " + result.error().message());
  if constexpr (!std::is_void_v<T>) return std::move(result).value();
}

// Runs `cleanup` on scope exit, errors ignored: what a failed benchmark leaves behind is released.
template <class F>
class Defer {
 public:
  explicit Defer(F cleanup) : cleanup_(std::move(cleanup)) {}
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;
  ~Defer() {
    try {
      cleanup_();
    } catch (...) {
    }
  }

 private:
  F cleanup_;
};

// ------------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------------
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

struct Config {
  bool dry_run = false;
  std::string json_path;
  double deadline_s = 170;  // the whole binary must end within 3 minutes
  std::set<std::string> only;

  int event_warmup = 50;
  int event_reps = 1000;
  int vmm_warmup = 5;
  int vmm_reps = 1000;  // a sub-microsecond call jitters by tens of ns: enough samples for its median
  std::vector<std::size_t> vmm_sizes{2 * kMiB, 64 * kMiB};
  int pool_ops = 20000;
  int pool_live = 64;
  int pool_warmup = 1;
  int pool_reps = 11;
  std::size_t pool_min = 256;
  std::size_t pool_max = 4 * kMiB;
  std::uint64_t pool_seed = 0x9E3779B97F4A7C15ULL;
  std::size_t grow_chunk = 64 * kMiB;
  std::size_t grow_target = 8 * kGiB;
  int grow_warmup = 1;
  int grow_reps = 11;

  [[nodiscard]] bool wants(const std::string& name) const { return only.empty() || only.contains(name); }

  void make_dry() {
    dry_run = true;
    event_warmup = 1;
    event_reps = 3;
    vmm_warmup = 1;
    vmm_reps = 3;
    pool_ops = pool_live + 3;  // the ring fills, so the free-then-allocate path runs too
    pool_warmup = 1;
    pool_reps = 3;
    grow_target = 4 * grow_chunk;
    grow_warmup = 0;
    grow_reps = 3;
  }
};

// ------------------------------------------------------------------------------------------------
// Results
// ------------------------------------------------------------------------------------------------
struct Stats {
  double median = 0, min = 0, p10 = 0, p90 = 0, max = 0, mean = 0;
  std::size_t n = 0;
};

Stats stats_of(std::vector<double> samples) {
  if (samples.empty()) throw BenchError("no samples");
  std::sort(samples.begin(), samples.end());
  Stats s;
  s.n = samples.size();
  const std::size_t n = s.n;
  s.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  s.min = samples.front();
  s.max = samples.back();
  const auto rank = [&](double q) {
    return samples[std::min(n - 1, static_cast<std::size_t>(q * static_cast<double>(n)))];
  };
  s.p10 = rank(0.10);
  s.p90 = rank(0.90);
  double sum = 0;
  for (const double v : samples) sum += v;
  s.mean = sum / static_cast<double>(n);
  return s;
}

enum class TargetKind { report_only, max_ratio };

struct Row {
  std::string id;  // e.g. vmm/MemCreate/64MiB
  std::string unit;  // of the stats below: ns, us, ms, GiB
  double scale = 1;  // samples are divided by this to give `unit`
  std::optional<Stats> hipxx;
  std::optional<Stats> baseline;
  TargetKind target = TargetKind::report_only;
  double target_value = 0;
  std::string target_text = "report";
  std::string note;
  std::string error;

  [[nodiscard]] std::optional<double> ratio() const {
    if (!hipxx || !baseline || baseline->median <= 0) return std::nullopt;
    return hipxx->median / baseline->median;
  }
  [[nodiscard]] std::optional<bool> met() const {
    const auto r = ratio();
    if (!r || target == TargetKind::report_only) return std::nullopt;
    return *r <= target_value;
  }
};

struct Report {
  std::string date;
  std::string mode;
  std::string device = "(unknown)";
  std::string backend = "(none)";
  int driver_version = 0;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  // Per-step points of the growth probe runs: size reached, time since the start, memory held.
  std::vector<double> grow_size_gib;
  std::vector<double> grow_hipxx_ms, grow_hipxx_used_gib, grow_baseline_ms, grow_baseline_used_gib;
  bool complete = false;
  int exit_code = 0;
};

std::timed_mutex g_report_mutex;  // rows are added by the main thread and read by the watchdog
Report g_report;
Config g_config;

void add_row(Row row) {
  std::lock_guard lock{g_report_mutex};
  g_report.rows.push_back(std::move(row));
}

void add_note(std::string note) {
  std::lock_guard lock{g_report_mutex};
  g_report.notes.push_back(std::move(note));
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

int decimals_for(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude >= 1000) return 0;
  if (magnitude >= 100) return 1;
  if (magnitude >= 10) return 2;
  return 3;
}

std::string cell(const std::optional<Stats>& stats, const Row& row, const char* absent) {
  if (!stats) return absent;
  const double value = stats->median / row.scale;
  return fixed(value, decimals_for(value)) + " " + row.unit;
}

std::string render_markdown(const Report& report) {
  std::ostringstream out;
  out << "# hipxx GPU benchmark (" << report.mode << ")\n\n";
  out << "- date: " << report.date << "\n";
  out << "- device: " << report.device << "\n";
  out << "- hipxx backend: " << report.backend << "\n";
  if (report.driver_version != 0) {
    out << "- CUDA driver: " << report.driver_version / 1000 << "." << (report.driver_version % 1000) / 10 << "\n";
  }
  out << "- raw CUDA baseline: " << (g_raw ? "yes" : "skipped: " + g_raw_note) << "\n";
  for (const std::string& note : report.notes) out << "- note: " << note << "\n";
  if (!report.complete) out << "- INCOMPLETE: the run stopped early; rows below are what finished\n";
  out << "\n| benchmark | hipxx median | baseline median | ratio (hipxx/baseline) | target |\n";
  out << "|---|---|---|---|---|\n";
  for (const Row& row : report.rows) {
    out << "| " << row.id << " | ";
    if (!row.error.empty()) {
      out << "ERROR | ERROR | n/a | " << row.target_text << " |\n";
      continue;
    }
    out << cell(row.hipxx, row, "n/a") << " | " << cell(row.baseline, row, "skipped") << " | ";
    const auto ratio = row.ratio();
    out << (ratio ? fixed(*ratio, 3) : std::string{"n/a"}) << " | " << row.target_text;
    if (const auto met = row.met()) out << (*met ? " (met)" : " (MISSED)");
    out << " |\n";
  }
  bool any_detail = false;
  for (const Row& row : report.rows) {
    if (row.error.empty() && row.note.empty()) continue;
    if (!any_detail) out << "\n";
    any_detail = true;
    out << "- " << row.id << ": " << (row.error.empty() ? row.note : "ERROR: " + row.error) << "\n";
  }
  return out.str();
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

std::string json_array(const std::vector<double>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + json_number(values[i]);
  return out + "]";
}

std::string json_stats(const std::optional<Stats>& stats, double scale) {
  if (!stats) return "null";
  std::ostringstream out;
  out << "{\"median\": " << json_number(stats->median / scale) << ", \"min\": " << json_number(stats->min / scale)
      << ", \"p10\": " << json_number(stats->p10 / scale) << ", \"p90\": " << json_number(stats->p90 / scale)
      << ", \"max\": " << json_number(stats->max / scale) << ", \"mean\": " << json_number(stats->mean / scale)
      << ", \"n\": " << stats->n << "}";
  return out.str();
}

std::string render_json(const Report& report) {
  std::ostringstream out;
  out << "{\n  \"schema\": \"hipxx-gpu-bench/1\",\n";
  out << "  \"date\": " << json_string(report.date) << ",\n";
  out << "  \"mode\": " << json_string(report.mode) << ",\n";
  out << "  \"device\": " << json_string(report.device) << ",\n";
  out << "  \"hipxx_backend\": " << json_string(report.backend) << ",\n";
  out << "  \"cuda_driver_version\": " << report.driver_version << ",\n";
  out << "  \"raw_baseline\": " << (g_raw ? "true" : "false") << ",\n";
  out << "  \"raw_baseline_note\": " << json_string(g_raw_note) << ",\n";
  out << "  \"complete\": " << (report.complete ? "true" : "false") << ",\n";
  out << "  \"exit_code\": " << report.exit_code << ",\n";
  const Config& c = g_config;
  out << "  \"config\": {\"event_reps\": " << c.event_reps << ", \"vmm_reps\": " << c.vmm_reps
      << ", \"pool_ops\": " << c.pool_ops << ", \"pool_live\": " << c.pool_live << ", \"pool_reps\": " << c.pool_reps
      << ", \"pool_min_bytes\": " << c.pool_min << ", \"pool_max_bytes\": " << c.pool_max
      << ", \"pool_seed\": " << c.pool_seed << ", \"grow_chunk_bytes\": " << c.grow_chunk
      << ", \"grow_target_bytes\": " << c.grow_target << ", \"grow_reps\": " << c.grow_reps << "},\n";
  out << "  \"notes\": [";
  for (std::size_t i = 0; i < report.notes.size(); ++i) out << (i ? ", " : "") << json_string(report.notes[i]);
  out << "],\n  \"growth_series\": {\"note\": "
      << json_string(
             "probe runs, one point per 64 MiB step: each step waits for its device work and queries "
             "cuMemGetInfo, so these times are slower than the timed rows; used = the most total - free "
             "above the start during the step (hipxx: mapped bytes where the raw driver is unavailable)")
      << ", \"size_gib\": " << json_array(report.grow_size_gib)
      << ", \"hipxx_ms\": " << json_array(report.grow_hipxx_ms)
      << ", \"hipxx_used_gib\": " << json_array(report.grow_hipxx_used_gib)
      << ", \"baseline_ms\": " << json_array(report.grow_baseline_ms)
      << ", \"baseline_used_gib\": " << json_array(report.grow_baseline_used_gib) << "},\n";
  out << "  \"results\": [";
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const Row& row = report.rows[i];
    const auto ratio = row.ratio();
    const auto met = row.met();
    out << (i ? "," : "") << "\n    {\"benchmark\": " << json_string(row.id) << ", \"unit\": " << json_string(row.unit)
        << ", \"hipxx\": " << json_stats(row.hipxx, row.scale)
        << ", \"baseline\": " << json_stats(row.baseline, row.scale)
        << ", \"ratio\": " << (ratio ? json_number(*ratio) : "null")
        << ", \"target\": {\"kind\": " << json_string(row.target == TargetKind::max_ratio ? "max_ratio" : "report_only")
        << ", \"value\": " << (row.target == TargetKind::max_ratio ? json_number(row.target_value) : "null")
        << ", \"text\": " << json_string(row.target_text)
        << "}, \"met\": " << (met ? (*met ? "true" : "false") : "null") << ", \"note\": " << json_string(row.note)
        << ", \"error\": " << (row.error.empty() ? "null" : json_string(row.error)) << "}";
  }
  out << "\n  ]\n}\n";
  return out.str();
}

// Prints the table and writes the JSON; false when the JSON could not be written.
bool emit(const Report& report) {
  const std::string table = render_markdown(report);
  std::fwrite(table.data(), 1, table.size(), stdout);
  std::fflush(stdout);
  if (g_config.json_path.empty()) return true;
  const std::string json = render_json(report);
  std::FILE* file = std::fopen(g_config.json_path.c_str(), "w");
  if (file == nullptr) {
    std::fprintf(stderr, "error: cannot write %s: %s\n", g_config.json_path.c_str(), std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(json.data(), 1, json.size(), file) == json.size();
  const bool closed = std::fclose(file) == 0;
  if (!ok || !closed) {
    std::fprintf(stderr, "error: writing %s failed\n", g_config.json_path.c_str());
    return false;
  }
  std::fprintf(stderr, "wrote %s\n", g_config.json_path.c_str());
  return true;
}

// ------------------------------------------------------------------------------------------------
// The deadline: past it, print what has finished and end the process, whatever is hanging.
// ------------------------------------------------------------------------------------------------
std::atomic<const char*> g_stage{"startup"};

class Watchdog {
 public:
  explicit Watchdog(double seconds)
      : thread_([this, seconds] {
          std::unique_lock lock{mutex_};
          const auto limit = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
          if (cv_.wait_for(lock, limit, [this] { return stop_; })) return;
          std::fprintf(stderr, "error: the deadline of %.0f s passed during '%s'; printing partial results\n", seconds,
                       g_stage.load());
          // The main thread may hold the lock forever if it hangs inside one; then print unlocked.
          const bool locked = g_report_mutex.try_lock_for(std::chrono::seconds(2));
          Report partial = g_report;
          if (locked) g_report_mutex.unlock();
          partial.complete = false;
          partial.exit_code = 3;
          partial.notes.push_back(std::string{"deadline passed during "} + g_stage.load());
          (void)emit(partial);
          std::fflush(nullptr);
          std::_Exit(3);
        }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock{mutex_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

void progress(const char* format, ...) __attribute__((format(printf, 1, 2)));
void progress(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
}

std::string size_name(std::size_t bytes) {
  if (bytes % kGiB == 0) return std::to_string(bytes / kGiB) + "GiB";
  if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "MiB";
  return std::to_string(bytes) + "B";
}

// Runs one benchmark section; its failure becomes an error row and the next section still runs.
void section(const char* name, const std::function<void()>& body) {
  if (!g_config.wants(name)) return;
  g_stage.store(name);
  const auto start = Clock::now();
  progress("[%s] start", name);
  try {
    body();
  } catch (const std::exception& error) {
    progress("[%s] FAILED: %s", name, error.what());
    Row row;
    row.id = std::string{name} + "/(section)";
    row.error = error.what();
    add_row(std::move(row));
  }
  progress("[%s] done in %.2f s", name, ns_between(start, Clock::now()) / 1e9);
}

Row make_row(std::string id, std::string unit, double scale, const std::vector<double>& hipxx,
             const std::vector<double>& baseline) {
  Row row;
  row.id = std::move(id);
  row.unit = std::move(unit);
  row.scale = scale;
  if (!hipxx.empty()) row.hipxx = stats_of(hipxx);
  if (!baseline.empty()) row.baseline = stats_of(baseline);
  return row;
}

void set_target(Row& row, double max_ratio, std::string text) {
  row.target = TargetKind::max_ratio;
  row.target_value = max_ratio;
  row.target_text = std::move(text);
}

// Waits for a flag a callback sets, for at most `limit`; false on timeout.
bool spin_until(const std::atomic<bool>& flag, std::chrono::seconds limit) {
  const auto give_up = Clock::now() + limit;
  for (unsigned spins = 0;; ++spins) {
    if (flag.load(std::memory_order_acquire)) return true;
    if ((spins & 1023U) == 0 && Clock::now() > give_up) return false;
  }
}

// ------------------------------------------------------------------------------------------------
// 1. Event round trip and callback latency
// ------------------------------------------------------------------------------------------------
struct CallbackSlot {
  std::atomic<bool> done{false};
  Clock::time_point at{};
};

void hip_callback(hipStream_t /*stream*/, hipError_t /*status*/, void* user_data) {
  auto* slot = static_cast<CallbackSlot*>(user_data);
  slot->at = Clock::now();
  slot->done.store(true, std::memory_order_release);
}

void cu_host_function(void* user_data) {
  auto* slot = static_cast<CallbackSlot*>(user_data);
  slot->at = Clock::now();
  slot->done.store(true, std::memory_order_release);
}

void bench_events() {
  hipStream_t stream = nullptr;
  hipEvent_t event = nullptr;
  cu::CUstream cu_stream = nullptr;
  cu::CUevent cu_event = nullptr;
  Defer cleanup{[&] {
    if (event != nullptr) (void)hipEventDestroy(event);
    if (stream != nullptr) (void)hipStreamDestroy(stream);
    if (cu_event != nullptr) (void)g_cu.cuEventDestroy_v2(cu_event);
    if (cu_stream != nullptr) (void)g_cu.cuStreamDestroy_v2(cu_stream);
  }};
  HIP_CHECK(hipStreamCreate(&stream));
  HIP_CHECK(hipEventCreate(&event));
  if (g_raw) {
    CU_CHECK(g_cu.cuStreamCreate(&cu_stream, cu::CU_STREAM_DEFAULT));
    CU_CHECK(g_cu.cuEventCreate(&cu_event, cu::CU_EVENT_DEFAULT));
  }

  const auto hip_round_trip = [&] {
    const auto start = Clock::now();
    HIP_CHECK(hipEventRecord(event, stream));
    HIP_CHECK(hipEventSynchronize(event));
    return ns_between(start, Clock::now());
  };
  const auto cu_round_trip = [&] {
    const auto start = Clock::now();
    CU_CHECK(g_cu.cuEventRecord(cu_event, cu_stream));
    CU_CHECK(g_cu.cuEventSynchronize(cu_event));
    return ns_between(start, Clock::now());
  };
  CallbackSlot slot;
  const auto hip_callback_latency = [&] {
    slot.done.store(false, std::memory_order_relaxed);
    const auto start = Clock::now();
    HIP_CHECK(hipStreamAddCallback(stream, hip_callback, &slot, 0));
    if (!spin_until(slot.done, std::chrono::seconds(10))) throw BenchError("hipStreamAddCallback: no callback in 10 s");
    const double latency = ns_between(start, slot.at);
    HIP_CHECK(hipStreamSynchronize(stream));  // idle again before the next sample
    return latency;
  };
  const auto cu_callback_latency = [&] {
    slot.done.store(false, std::memory_order_relaxed);
    const auto start = Clock::now();
    CU_CHECK(g_cu.cuLaunchHostFunc(cu_stream, cu_host_function, &slot));
    if (!spin_until(slot.done, std::chrono::seconds(10))) throw BenchError("cuLaunchHostFunc: no callback in 10 s");
    const double latency = ns_between(start, slot.at);
    CU_CHECK(g_cu.cuStreamSynchronize(cu_stream));
    return latency;
  };

  // Interleaved sample by sample, the side that goes first alternating.
  const auto interleave = [&](const std::function<double()>& hip_side, const std::function<double()>& cu_side,
                              std::vector<double>& hip_samples, std::vector<double>& cu_samples) {
    for (int i = 0; i < g_config.event_warmup; ++i) {
      (void)hip_side();
      if (g_raw) (void)cu_side();
    }
    for (int i = 0; i < g_config.event_reps; ++i) {
      if (i % 2 == 0 || !g_raw) {
        hip_samples.push_back(hip_side());
        if (g_raw) cu_samples.push_back(cu_side());
      } else {
        cu_samples.push_back(cu_side());
        hip_samples.push_back(hip_side());
      }
    }
  };

  std::vector<double> hip_event, cu_event_samples, hip_cb, cu_cb;
  interleave(hip_round_trip, cu_round_trip, hip_event, cu_event_samples);
  Row event_row = make_row("event/record+synchronize (idle stream)", "us", 1e3, hip_event, cu_event_samples);
  event_row.note = "hipEventRecord+hipEventSynchronize vs cuEventRecord+cuEventSynchronize, one round trip per sample";
  add_row(std::move(event_row));

  interleave(hip_callback_latency, cu_callback_latency, hip_cb, cu_cb);
  Row callback_row = make_row("event/callback latency (enqueue to callback)", "us", 1e3, hip_cb, cu_cb);
  callback_row.note =
      "hipStreamAddCallback vs cuLaunchHostFunc on an idle stream, steady_clock before the enqueue "
      "call to steady_clock inside the callback";
  add_row(std::move(callback_row));
}

// ------------------------------------------------------------------------------------------------
// 2. VMM operations
// ------------------------------------------------------------------------------------------------
enum VmmOp : int {
  kReserve,
  kCreate,
  kMap,
  kSetAccess,
  kUnmap,
  kRelease,
  kAddressFree,
  kExport,
  kImport,
  kReleaseImported,
  kVmmOpCount
};

constexpr const char* kVmmOpNames[kVmmOpCount] = {"MemAddressReserve",
                                                  "MemCreate",
                                                  "MemMap",
                                                  "MemSetAccess",
                                                  "MemUnmap",
                                                  "MemRelease",
                                                  "MemAddressFree",
                                                  "MemExportToShareableHandle(fd)",
                                                  "MemImportFromShareableHandle(fd)",
                                                  "MemRelease(imported)"};

using VmmSamples = std::vector<std::vector<double>>;

template <class Call>
void timed(VmmSamples* samples, VmmOp op, Call&& call) {
  const auto start = Clock::now();
  call();
  const double elapsed = ns_between(start, Clock::now());
  if (samples != nullptr) (*samples)[op].push_back(elapsed);
}

// The lifecycle of one mapping: reserve, create, map, grant, unmap, release, free.
void hip_vmm_cycle(std::size_t size, bool exportable, VmmSamples* samples) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = exportable ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
  prop.location = {hipMemLocationTypeDevice, 0};
  hipMemAccessDesc access{};
  access.location = {hipMemLocationTypeDevice, 0};
  access.flags = hipMemAccessFlagsProtReadWrite;

  void* va = nullptr;
  hipMemGenericAllocationHandle_t handle = nullptr;
  bool mapped = false;
  Defer cleanup{[&] {
    if (mapped) (void)hipMemUnmap(va, size);
    if (handle != nullptr) (void)hipMemRelease(handle);
    if (va != nullptr) (void)hipMemAddressFree(va, size);
  }};
  timed(samples, kReserve, [&] { HIP_CHECK(hipMemAddressReserve(&va, size, 0, nullptr, 0)); });
  timed(samples, kCreate, [&] { HIP_CHECK(hipMemCreate(&handle, size, &prop, 0)); });
  timed(samples, kMap, [&] { HIP_CHECK(hipMemMap(va, size, 0, handle, 0)); });
  mapped = true;
  timed(samples, kSetAccess, [&] { HIP_CHECK(hipMemSetAccess(va, size, &access, 1)); });
  timed(samples, kUnmap, [&] { HIP_CHECK(hipMemUnmap(va, size)); });
  mapped = false;
  timed(samples, kRelease, [&] { HIP_CHECK(hipMemRelease(handle)); });
  handle = nullptr;
  timed(samples, kAddressFree, [&] { HIP_CHECK(hipMemAddressFree(va, size)); });
  va = nullptr;
}

void cu_vmm_cycle(std::size_t size, bool exportable, VmmSamples* samples) {
  cu::CUmemAllocationProp prop{};
  prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = exportable ? cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : cu::CU_MEM_HANDLE_TYPE_NONE;
  prop.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, g_cu_device};
  cu::CUmemAccessDesc access{};
  access.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, g_cu_device};
  access.flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  cu::CUdeviceptr va = 0;
  cu::CUmemGenericAllocationHandle handle = 0;
  bool created = false;
  bool mapped = false;
  Defer cleanup{[&] {
    if (mapped) (void)g_cu.cuMemUnmap(va, size);
    if (created) (void)g_cu.cuMemRelease(handle);
    if (va != 0) (void)g_cu.cuMemAddressFree(va, size);
  }};
  timed(samples, kReserve, [&] { CU_CHECK(g_cu.cuMemAddressReserve(&va, size, 0, 0, 0)); });
  timed(samples, kCreate, [&] { CU_CHECK(g_cu.cuMemCreate(&handle, size, &prop, 0)); });
  created = true;
  timed(samples, kMap, [&] { CU_CHECK(g_cu.cuMemMap(va, size, 0, handle, 0)); });
  mapped = true;
  timed(samples, kSetAccess, [&] { CU_CHECK(g_cu.cuMemSetAccess(va, size, &access, 1)); });
  timed(samples, kUnmap, [&] { CU_CHECK(g_cu.cuMemUnmap(va, size)); });
  mapped = false;
  timed(samples, kRelease, [&] { CU_CHECK(g_cu.cuMemRelease(handle)); });
  created = false;
  timed(samples, kAddressFree, [&] { CU_CHECK(g_cu.cuMemAddressFree(va, size)); });
  va = 0;
}

// Export to a POSIX fd, import it back (in this process), release the imported handle, close the fd.
void hip_share_cycle(hipMemGenericAllocationHandle_t handle, VmmSamples* samples) {
  int fd = -1;
  hipMemGenericAllocationHandle_t imported = nullptr;
  Defer cleanup{[&] {
    if (imported != nullptr) (void)hipMemRelease(imported);
    if (fd >= 0) close(fd);
  }};
  timed(samples, kExport,
        [&] { HIP_CHECK(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0)); });
  timed(samples, kImport, [&] {
    HIP_CHECK(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                              hipMemHandleTypePosixFileDescriptor));
  });
  timed(samples, kReleaseImported, [&] { HIP_CHECK(hipMemRelease(imported)); });
  imported = nullptr;
}

void cu_share_cycle(cu::CUmemGenericAllocationHandle handle, VmmSamples* samples) {
  int fd = -1;
  cu::CUmemGenericAllocationHandle imported = 0;
  bool have_imported = false;
  Defer cleanup{[&] {
    if (have_imported) (void)g_cu.cuMemRelease(imported);
    if (fd >= 0) close(fd);
  }};
  timed(samples, kExport, [&] {
    CU_CHECK(g_cu.cuMemExportToShareableHandle(&fd, handle, cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  });
  timed(samples, kImport, [&] {
    CU_CHECK(g_cu.cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                                 cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  });
  have_imported = true;
  timed(samples, kReleaseImported, [&] { CU_CHECK(g_cu.cuMemRelease(imported)); });
  have_imported = false;
}

// Runs hipxx's and the driver's version of one cycle `reps` times, alternating which goes first.
template <class HipCycle, class CuCycle>
void alternate(int warmup, int reps, HipCycle&& hip_cycle, CuCycle&& cu_cycle, VmmSamples& hip_samples,
               VmmSamples& cu_samples) {
  for (int i = 0; i < warmup; ++i) {
    hip_cycle(nullptr);
    if (g_raw) cu_cycle(nullptr);
  }
  for (int i = 0; i < reps; ++i) {
    if (i % 2 == 0 || !g_raw) {
      hip_cycle(&hip_samples);
      if (g_raw) cu_cycle(&cu_samples);
    } else {
      cu_cycle(&cu_samples);
      hip_cycle(&hip_samples);
    }
  }
}

void add_vmm_rows(std::size_t size, const VmmSamples& hip_samples, const VmmSamples& cu_samples, int first, int last,
                  const std::string& error) {
  for (int op = first; op < last; ++op) {
    Row row;
    row.id = "vmm/" + std::string{kVmmOpNames[op]} + "/" + size_name(size);
    if (error.empty()) {
      row = make_row(row.id, "us", 1e3, hip_samples[static_cast<std::size_t>(op)],
                     cu_samples[static_cast<std::size_t>(op)]);
    } else {
      row.error = error;
    }
    set_target(row, 1.05, "<= 1.05");
    add_row(std::move(row));
  }
}

void bench_vmm() {
  int vmm = 0;
  HIP_CHECK(hipDeviceGetAttribute(&vmm, hipDeviceAttributeVirtualMemoryManagementSupported, 0));
  if (vmm == 0) throw BenchError("hipxx reports no virtual memory management on device 0");
  int handle_types = 0;
  HIP_CHECK(hipDeviceGetAttribute(&handle_types, hipDeviceAttributeMemoryPoolSupportedHandleTypes, 0));
  bool exportable = (handle_types & hipMemHandleTypePosixFileDescriptor) != 0;
  if (g_raw) {
    int cu_fd = 0;
    CU_CHECK(g_cu.cuDeviceGetAttribute(&cu_fd, cu::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                       g_cu_device));
    exportable = exportable && cu_fd != 0;
  }
  if (!exportable)
    add_note(
        "POSIX fd export is not supported here: VMM allocations are not exportable and export/import rows are skipped");

  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = exportable ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
  prop.location = {hipMemLocationTypeDevice, 0};
  std::size_t granularity = 0;
  HIP_CHECK(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum));
  if (g_raw) {
    cu::CUmemAllocationProp cu_prop{};
    cu_prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
    cu_prop.requestedHandleTypes =
        exportable ? cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : cu::CU_MEM_HANDLE_TYPE_NONE;
    cu_prop.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, g_cu_device};
    std::size_t cu_granularity = 0;
    CU_CHECK(g_cu.cuMemGetAllocationGranularity(&cu_granularity, &cu_prop, cu::CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    granularity = std::max(granularity, cu_granularity);
  }

  add_note("vmm rows: host wall clock of each single call, median of " + std::to_string(g_config.vmm_reps) +
           " cycles, hipxx and raw cycles alternating; allocations are pinned on device 0" +
           (exportable ? ", requested with the POSIX fd handle type on both sides" : "") +
           "; export/import work on one long-lived allocation per side and import the fd into this same process");
  for (const std::size_t size : g_config.vmm_sizes) {
    const auto start = Clock::now();
    if (granularity == 0 || size % granularity != 0) {
      add_note("vmm " + size_name(size) + " skipped: not a multiple of the granularity " + std::to_string(granularity));
      continue;
    }
    // Lifecycle ops.
    {
      VmmSamples hip_samples(kVmmOpCount), cu_samples(kVmmOpCount);
      std::string error;
      try {
        alternate(
            g_config.vmm_warmup, g_config.vmm_reps, [&](VmmSamples* s) { hip_vmm_cycle(size, exportable, s); },
            [&](VmmSamples* s) { cu_vmm_cycle(size, exportable, s); }, hip_samples, cu_samples);
      } catch (const std::exception& e) {
        error = e.what();
        progress("[vmm] %s lifecycle FAILED: %s", size_name(size).c_str(), e.what());
      }
      add_vmm_rows(size, hip_samples, cu_samples, kReserve, kExport, error);
    }
    // Export / import, on one long-lived exportable allocation per side.
    if (exportable) {
      VmmSamples hip_samples(kVmmOpCount), cu_samples(kVmmOpCount);
      std::string error;
      hipMemGenericAllocationHandle_t hip_handle = nullptr;
      cu::CUmemGenericAllocationHandle cu_handle = 0;
      bool have_cu_handle = false;
      try {
        Defer cleanup{[&] {
          if (hip_handle != nullptr) (void)hipMemRelease(hip_handle);
          if (have_cu_handle) (void)g_cu.cuMemRelease(cu_handle);
        }};
        HIP_CHECK(hipMemCreate(&hip_handle, size, &prop, 0));
        if (g_raw) {
          cu::CUmemAllocationProp cu_prop{};
          cu_prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
          cu_prop.requestedHandleTypes = cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
          cu_prop.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, g_cu_device};
          CU_CHECK(g_cu.cuMemCreate(&cu_handle, size, &cu_prop, 0));
          have_cu_handle = true;
        }
        alternate(
            g_config.vmm_warmup, g_config.vmm_reps, [&](VmmSamples* s) { hip_share_cycle(hip_handle, s); },
            [&](VmmSamples* s) { cu_share_cycle(cu_handle, s); }, hip_samples, cu_samples);
      } catch (const std::exception& e) {
        error = e.what();
        progress("[vmm] %s export/import FAILED: %s", size_name(size).c_str(), e.what());
      }
      add_vmm_rows(size, hip_samples, cu_samples, kExport, kVmmOpCount, error);
    }
    progress("[vmm] %s: %d reps in %.2f s", size_name(size).c_str(), g_config.vmm_reps,
             ns_between(start, Clock::now()) / 1e9);
  }
}

// ------------------------------------------------------------------------------------------------
// 2b. Where map's ratio comes from: the arena's placement, and the books
// ------------------------------------------------------------------------------------------------
// hipxx maps into a sub-range of a driver reservation it made once (an arena chunk), where the raw
// side of vmm/MemMap maps into a reservation of its own. These rows split the ratio in two, with
// three kinds of map timed in turn in each cycle, each just after its allocation's create:
//   the driver's map into a reservation of its own (what vmm/MemMap's baseline does),
//   the driver's map into one slot of a chunk reserved once, as large as hipxx's arena uses,
//   hipMemMap into a range hipxx's arena gives;
// and for the 64 GiB chunks, the driver's map into slots 1 GiB apart: whether the slot's alignment
// is what makes a map into a chunk slower than into a reservation of its own.
enum class MapPlacement { own_reservation, chunk, chunk_spread, hipxx };

// The alignment of a reservation the driver chose, as the number of trailing zero bits.
int alignment_bits(cu::CUdeviceptr va) { return va == 0 ? 64 : std::countr_zero(static_cast<std::uint64_t>(va)); }

double map_sample(MapPlacement placement, std::size_t size, cu::CUdeviceptr chunk_slot, int& own_alignment) {
  if (placement == MapPlacement::hipxx) {
    hipMemAllocationProp prop{};
    prop.type = hipMemAllocationTypePinned;
    prop.location = {hipMemLocationTypeDevice, 0};
    void* va = nullptr;
    hipMemGenericAllocationHandle_t handle = nullptr;
    HIP_CHECK(hipMemAddressReserve(&va, size, 0, nullptr, 0));
    Defer free_va{[&] { (void)hipMemAddressFree(va, size); }};
    HIP_CHECK(hipMemCreate(&handle, size, &prop, 0));
    Defer release{[&] { (void)hipMemRelease(handle); }};
    const auto start = Clock::now();
    HIP_CHECK(hipMemMap(va, size, 0, handle, 0));
    const double elapsed = ns_between(start, Clock::now());
    HIP_CHECK(hipMemUnmap(va, size));
    return elapsed;
  }
  cu::CUmemAllocationProp prop{};
  prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, g_cu_device};
  cu::CUdeviceptr va = chunk_slot;
  if (placement == MapPlacement::own_reservation) {
    CU_CHECK(g_cu.cuMemAddressReserve(&va, size, 0, 0, 0));
    own_alignment = std::min(own_alignment, alignment_bits(va));
  }
  Defer free_va{[&] {
    if (placement == MapPlacement::own_reservation) (void)g_cu.cuMemAddressFree(va, size);
  }};
  cu::CUmemGenericAllocationHandle handle = 0;
  CU_CHECK(g_cu.cuMemCreate(&handle, size, &prop, 0));
  Defer release{[&] { (void)g_cu.cuMemRelease(handle); }};
  const auto start = Clock::now();
  CU_CHECK(g_cu.cuMemMap(va, size, 0, handle, 0));
  const double elapsed = ns_between(start, Clock::now());
  CU_CHECK(g_cu.cuMemUnmap(va, size));
  return elapsed;
}

void bench_placement() {
  if (!g_raw)
    add_note("placement rows: the raw driver's maps are skipped (" + g_raw_note + "); hipMemMap alone is timed");
  for (const std::size_t size : g_config.vmm_sizes) {
    // The chunk sizes of the CUDA backend's arenas (lib/backend/cuda/cuda_backend.cpp).
    const std::size_t chunk_size = size <= 8 * kMiB ? 16 * kMiB : 64 * kGiB;
    const std::size_t slots = std::min<std::size_t>(8, chunk_size / size);
    const bool spread = chunk_size >= 8 * kGiB && size <= kGiB;  // 8 slots 1 GiB apart fit
    cu::CUdeviceptr chunk = 0;
    if (g_raw) CU_CHECK(g_cu.cuMemAddressReserve(&chunk, chunk_size, 2 * kMiB, 0, 0));
    Defer free_chunk{[&] {
      if (chunk != 0) (void)g_cu.cuMemAddressFree(chunk, chunk_size);
    }};
    std::vector<double> own, in_chunk, spread_out, hipxx;
    int own_alignment = 64;
    std::vector<MapPlacement> kinds{MapPlacement::own_reservation, MapPlacement::chunk, MapPlacement::hipxx};
    if (spread) kinds.push_back(MapPlacement::chunk_spread);
    for (int i = -g_config.vmm_warmup; i < g_config.vmm_reps; ++i) {
      const auto cycle = static_cast<std::size_t>(i + g_config.vmm_warmup);
      for (std::size_t k = 0; k < kinds.size(); ++k) {
        // Each kind takes every position in the cycle in turn.
        const MapPlacement kind = kinds[(k + cycle) % kinds.size()];
        if (!g_raw && kind != MapPlacement::hipxx) continue;
        const cu::CUdeviceptr slot =
            kind == MapPlacement::chunk_spread ? chunk + (cycle % 8) * kGiB : chunk + (cycle % slots) * size;
        const double sample = map_sample(kind, size, slot, own_alignment);
        if (i < 0) continue;
        switch (kind) {
          case MapPlacement::own_reservation: own.push_back(sample); break;
          case MapPlacement::chunk: in_chunk.push_back(sample); break;
          case MapPlacement::chunk_spread: spread_out.push_back(sample); break;
          case MapPlacement::hipxx: hipxx.push_back(sample); break;
        }
      }
    }
    if (g_raw) {
      Row arena = make_row("placement/driver map in an arena-sized chunk vs in its own reservation/" + size_name(size),
                           "us", 1e3, in_chunk, own);
      arena.note = "both sides raw cuMemMap; the hipxx column is the map into one of " + std::to_string(slots) +
                   " rotating slots of a " + size_name(chunk_size) + " reservation made once; the driver's own " +
                   "reservations of this size were aligned to 2^" + std::to_string(own_alignment) + " bytes";
      add_row(std::move(arena));
      if (spread) {
        Row aligned =
            make_row("placement/driver map in chunk slots 1 GiB apart vs slots of its size/" + size_name(size), "us",
                     1e3, spread_out, in_chunk);
        aligned.note = "both sides raw cuMemMap into the same " + size_name(chunk_size) +
                       " chunk: 8 rotating slots 1 GiB apart against 8 adjacent slots of the map's size";
        add_row(std::move(aligned));
      }
    }
    Row books = make_row("placement/hipMemMap vs driver map in an arena-sized chunk/" + size_name(size), "us", 1e3,
                         hipxx, in_chunk);
    books.note = "what hipxx adds to the driver's map where both map into a chunk";
    add_row(std::move(books));
  }
}

// ------------------------------------------------------------------------------------------------
// 3. Stream-ordered pool: allocate/free pairs
// ------------------------------------------------------------------------------------------------
std::vector<std::size_t> pool_sizes() {
  // Log-uniform in [min, max], from a fixed seed; mt19937_64's output is specified by the standard,
  // and the mapping to a double is done here, so the sequence is the same everywhere.
  std::mt19937_64 random{g_config.pool_seed};
  const double low = std::log(static_cast<double>(g_config.pool_min));
  const double high = std::log(static_cast<double>(g_config.pool_max));
  std::vector<std::size_t> sizes(static_cast<std::size_t>(g_config.pool_ops));
  for (std::size_t& size : sizes) {
    const double unit = static_cast<double>(random() >> 11) * 0x1.0p-53;
    const auto bytes = static_cast<std::size_t>(std::exp(low + unit * (high - low)));
    size = std::clamp(bytes, g_config.pool_min, g_config.pool_max);
  }
  return sizes;
}

// One pass over the sequence; returns total ns. With `pairs` set, also times each free+allocate pair
// once the ring is full (extra clock reads, so those passes are kept apart from the throughput ones).
double hip_pool_pass(hipStream_t stream, const std::vector<std::size_t>& sizes, std::vector<double>* pairs) {
  const std::size_t live = static_cast<std::size_t>(g_config.pool_live);
  std::vector<void*> ring(live, nullptr);
  Defer cleanup{[&] {
    for (void*& ptr : ring) {
      if (ptr != nullptr) (void)hipFreeAsync(ptr, stream);
    }
    (void)hipStreamSynchronize(stream);
  }};
  const auto start = Clock::now();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    void*& slot = ring[i % live];
    const auto pair_start = pairs != nullptr ? Clock::now() : Clock::time_point{};
    if (slot != nullptr) {
      HIP_CHECK(hipFreeAsync(slot, stream));
      slot = nullptr;
    }
    HIP_CHECK(hipMallocAsync(&slot, sizes[i], stream));
    if (pairs != nullptr && i >= live) pairs->push_back(ns_between(pair_start, Clock::now()));
  }
  for (void*& ptr : ring) {
    if (ptr != nullptr) HIP_CHECK(hipFreeAsync(ptr, stream));
    ptr = nullptr;
  }
  HIP_CHECK(hipStreamSynchronize(stream));
  return ns_between(start, Clock::now());
}

double cu_pool_pass(cu::CUstream stream, const std::vector<std::size_t>& sizes, std::vector<double>* pairs) {
  const std::size_t live = static_cast<std::size_t>(g_config.pool_live);
  std::vector<cu::CUdeviceptr> ring(live, 0);
  Defer cleanup{[&] {
    for (cu::CUdeviceptr& ptr : ring) {
      if (ptr != 0) (void)g_cu.cuMemFreeAsync(ptr, stream);
    }
    (void)g_cu.cuStreamSynchronize(stream);
  }};
  const auto start = Clock::now();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    cu::CUdeviceptr& slot = ring[i % live];
    const auto pair_start = pairs != nullptr ? Clock::now() : Clock::time_point{};
    if (slot != 0) {
      CU_CHECK(g_cu.cuMemFreeAsync(slot, stream));
      slot = 0;
    }
    CU_CHECK(g_cu.cuMemAllocAsync(&slot, sizes[i], stream));
    if (pairs != nullptr && i >= live) pairs->push_back(ns_between(pair_start, Clock::now()));
  }
  for (cu::CUdeviceptr& ptr : ring) {
    if (ptr != 0) CU_CHECK(g_cu.cuMemFreeAsync(ptr, stream));
    ptr = 0;
  }
  CU_CHECK(g_cu.cuStreamSynchronize(stream));
  return ns_between(start, Clock::now());
}

void bench_pool() {
  if (g_raw) {
    int pools = 0;
    CU_CHECK(g_cu.cuDeviceGetAttribute(&pools, cu::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, g_cu_device));
    if (pools == 0) throw BenchError("the CUDA device reports no memory pool support (cuMemAllocAsync)");
  }
  const std::vector<std::size_t> sizes = pool_sizes();
  hipStream_t stream = nullptr;
  cu::CUstream cu_stream = nullptr;
  Defer cleanup{[&] {
    if (stream != nullptr) (void)hipStreamDestroy(stream);
    if (cu_stream != nullptr) (void)g_cu.cuStreamDestroy_v2(cu_stream);
  }};
  HIP_CHECK(hipStreamCreate(&stream));
  if (g_raw) CU_CHECK(g_cu.cuStreamCreate(&cu_stream, cu::CU_STREAM_DEFAULT));

  const double ops = static_cast<double>(sizes.size());
  std::vector<double> hip_per_pair, cu_per_pair;
  for (int i = 0; i < g_config.pool_warmup; ++i) {
    (void)hip_pool_pass(stream, sizes, nullptr);
    if (g_raw) (void)cu_pool_pass(cu_stream, sizes, nullptr);
  }
  for (int i = 0; i < g_config.pool_reps; ++i) {
    if (i % 2 == 0 || !g_raw) {
      hip_per_pair.push_back(hip_pool_pass(stream, sizes, nullptr) / ops);
      if (g_raw) cu_per_pair.push_back(cu_pool_pass(cu_stream, sizes, nullptr) / ops);
    } else {
      cu_per_pair.push_back(cu_pool_pass(cu_stream, sizes, nullptr) / ops);
      hip_per_pair.push_back(hip_pool_pass(stream, sizes, nullptr) / ops);
    }
  }
  Row throughput = make_row("pool/malloc+free pair (" + std::to_string(sizes.size()) + " ops, 64 live)", "ns", 1,
                            hip_per_pair, cu_per_pair);
  set_target(throughput, 0.20, "<= 0.20 (>= 5x faster)");
  throughput.note =
      "hipMallocAsync+hipFreeAsync vs cuMemAllocAsync+cuMemFreeAsync (default pools), whole sequence "
      "incl. final stream synchronize / number of allocations; median over " +
      std::to_string(g_config.pool_reps) + " passes";
  add_row(std::move(throughput));

  std::vector<double> hip_pairs, cu_pairs;
  (void)hip_pool_pass(stream, sizes, &hip_pairs);
  if (g_raw) (void)cu_pool_pass(cu_stream, sizes, &cu_pairs);
  Row latency = make_row("pool/single pair latency (free+malloc)", "ns", 1, hip_pairs, cu_pairs);
  latency.note = "each free+allocate pair timed alone once the ring is full, one pass per side";
  add_row(std::move(latency));
}

// ------------------------------------------------------------------------------------------------
// 4. Growable array against realloc-doubling with device-to-device copies
// ------------------------------------------------------------------------------------------------
std::size_t device_used_bytes() {
  std::size_t free = 0, total = 0;
  CU_CHECK(g_cu.cuMemGetInfo_v2(&free, &total));
  return total - free;
}

// What a probe run found: peak device memory above the starting point, (baseline) device time, and
// after every step the time since the start and the device memory in use, for the growth plot.
struct GrowProbe {
  std::size_t peak_bytes = 0;
  double device_ms = 0;
  bool device_timed = false;
  std::vector<double> step_ms;
  std::vector<double> step_used_gib;

  void record_step(Clock::time_point start, std::size_t used_bytes) {
    step_ms.push_back(ns_between(start, Clock::now()) / 1e6);
    step_used_gib.push_back(static_cast<double>(used_bytes) / static_cast<double>(kGiB));
  }
};

// Time in ns from the first call to all device work done; `probe` also watches memory (and the clock
// then includes the queries: probe runs are not timed).
double hip_grow(GrowProbe* probe) {
  const std::size_t chunk = g_config.grow_chunk;
  const std::size_t start_used = probe != nullptr && g_raw ? device_used_bytes() : 0;
  std::size_t peak = 0;
  const auto start = Clock::now();
  auto array = value_or_throw(hipxx::GrowableArray<std::uint8_t>::create(hipxx::Device{0}, g_config.grow_target, chunk),
                              "GrowableArray::create");
  for (std::size_t size = chunk; size <= g_config.grow_target; size += chunk) {
    // resize maps the new chunk and fills it with hipMemset, so the memory is really there.
    value_or_throw(array.resize(size), "GrowableArray::resize");
    if (probe != nullptr) {
      const std::size_t used = g_raw ? device_used_bytes() : 0;
      const std::size_t held = g_raw ? used - std::min(used, start_used) : array.mapped_bytes();
      peak = std::max(peak, held);
      probe->record_step(start, held);
    }
  }
  HIP_CHECK(hipDeviceSynchronize());
  const double elapsed = ns_between(start, Clock::now());
  if (array.size() != g_config.grow_target) throw BenchError("GrowableArray ended at the wrong size");
  if (probe != nullptr) probe->peak_bytes = peak;
  return elapsed;  // the array unmaps and releases here, outside the clock
}

double cu_grow(GrowProbe* probe) {
  const std::size_t chunk = g_config.grow_chunk;
  cu::CUdeviceptr data = 0;
  std::size_t capacity = 0;
  cu::CUevent before = nullptr, after = nullptr;
  Defer cleanup{[&] {
    (void)g_cu.cuCtxSynchronize();
    if (data != 0) (void)g_cu.cuMemFree_v2(data);
    if (before != nullptr) (void)g_cu.cuEventDestroy_v2(before);
    if (after != nullptr) (void)g_cu.cuEventDestroy_v2(after);
  }};
  if (probe != nullptr) {
    CU_CHECK(g_cu.cuEventCreate(&before, cu::CU_EVENT_DEFAULT));
    CU_CHECK(g_cu.cuEventCreate(&after, cu::CU_EVENT_DEFAULT));
  }
  const std::size_t start_used = probe != nullptr ? device_used_bytes() : 0;
  std::size_t peak = 0;
  double device_ms = 0;
  std::size_t step_peak = 0;  // the most held during the current step (old and new buffer at a doubling)
  const auto watch = [&] {
    if (probe == nullptr) return;
    const std::size_t used = device_used_bytes();
    step_peak = std::max(step_peak, used - std::min(used, start_used));
    peak = std::max(peak, step_peak);
  };
  // The step's time and the most memory it held: the points of the growth plot.
  const auto step_done = [&](Clock::time_point start) {
    if (probe == nullptr) return;
    CU_CHECK(g_cu.cuCtxSynchronize());
    probe->record_step(start, step_peak);
    step_peak = 0;
  };
  // Device time of one step's copy and fill, on the legacy default stream they run on.
  const auto device_span = [&](const std::function<void()>& work) {
    if (probe == nullptr) return work();
    CU_CHECK(g_cu.cuEventRecord(before, nullptr));
    work();
    CU_CHECK(g_cu.cuEventRecord(after, nullptr));
    CU_CHECK(g_cu.cuEventSynchronize(after));
    float ms = 0;
    CU_CHECK(g_cu.cuEventElapsedTime_v2(&ms, before, after));
    device_ms += ms;
  };

  const auto start = Clock::now();
  for (std::size_t size = 0; size < g_config.grow_target; size += chunk) {
    if (size + chunk > capacity) {
      const std::size_t bigger = std::max(chunk, capacity * 2);
      cu::CUdeviceptr moved = 0;
      CU_CHECK(g_cu.cuMemAlloc_v2(&moved, bigger));
      watch();  // old and new both held: the doubling's peak
      if (size > 0) {
        device_span([&] { CU_CHECK(g_cu.cuMemcpyDtoD_v2(moved, data, size)); });
        CU_CHECK(g_cu.cuCtxSynchronize());  // the copy has read the old buffer before it goes
      }
      if (data != 0) CU_CHECK(g_cu.cuMemFree_v2(data));
      data = moved;
      capacity = bigger;
    }
    device_span([&] { CU_CHECK(g_cu.cuMemsetD8_v2(data + size, 0, chunk)); });
    watch();
    step_done(start);
  }
  CU_CHECK(g_cu.cuCtxSynchronize());
  const double elapsed = ns_between(start, Clock::now());
  if (probe != nullptr) {
    probe->peak_bytes = peak;
    probe->device_ms = device_ms;
    probe->device_timed = true;
  }
  return elapsed;
}

void record_growth_series(const GrowProbe& hipxx, const GrowProbe& baseline) {
  std::lock_guard lock{g_report_mutex};
  g_report.grow_size_gib.clear();
  for (std::size_t step = 1; step <= hipxx.step_ms.size(); ++step) {
    g_report.grow_size_gib.push_back(static_cast<double>(step * g_config.grow_chunk) / static_cast<double>(kGiB));
  }
  g_report.grow_hipxx_ms = hipxx.step_ms;
  g_report.grow_hipxx_used_gib = hipxx.step_used_gib;
  g_report.grow_baseline_ms = baseline.step_ms;
  g_report.grow_baseline_used_gib = baseline.step_used_gib;
}

void bench_grow() {
  if (g_config.grow_target % g_config.grow_chunk != 0 || g_config.grow_target == 0) {
    throw BenchError("the growth target must be a whole number of chunks");
  }
  for (int i = 0; i < g_config.grow_warmup; ++i) {
    (void)hip_grow(nullptr);
    if (g_raw) (void)cu_grow(nullptr);
  }
  std::vector<double> hip_ns, cu_ns;
  for (int i = 0; i < g_config.grow_reps; ++i) {
    const auto start = Clock::now();
    if (i % 2 == 0 || !g_raw) {
      hip_ns.push_back(hip_grow(nullptr));
      if (g_raw) cu_ns.push_back(cu_grow(nullptr));
    } else {
      cu_ns.push_back(cu_grow(nullptr));
      hip_ns.push_back(hip_grow(nullptr));
    }
    progress("[grow] rep %d/%d in %.2f s", i + 1, g_config.grow_reps, ns_between(start, Clock::now()) / 1e9);
  }
  const std::string label =
      "0->" + size_name(g_config.grow_target) + " in " + size_name(g_config.grow_chunk) + " appends";
  Row time_row = make_row("grow/total time (" + label + ")", "ms", 1e6, hip_ns, cu_ns);
  time_row.note =
      "GrowableArray::resize (map + hipMemset) vs cuMemAlloc(2x)+cuMemcpyDtoD+cuMemFree+cuMemsetD8, "
      "to the end of all device work; lower is better";
  add_row(std::move(time_row));

  GrowProbe hip_probe, cu_probe;
  (void)hip_grow(&hip_probe);
  if (g_raw) (void)cu_grow(&cu_probe);
  record_growth_series(hip_probe, cu_probe);
  Row memory_row =
      make_row("grow/peak device memory (" + label + ")", "GiB", static_cast<double>(kGiB),
               {static_cast<double>(hip_probe.peak_bytes)},
               g_raw ? std::vector<double>{static_cast<double>(cu_probe.peak_bytes)} : std::vector<double>{});
  memory_row.note = g_raw ? "peak of (total - free) from cuMemGetInfo after every step (and after each doubling's "
                            "allocation), minus the value before growing; one probe run per side; lower is better"
                          : "hipxx: GrowableArray::mapped_bytes (no cuMemGetInfo without CUDA); raw CUDA side skipped";
  add_row(std::move(memory_row));
  if (cu_probe.device_timed) {
    Row device_row;
    device_row.id = "grow/baseline device time of copies+fills (CUDA events)";
    device_row.unit = "ms";
    device_row.baseline = stats_of({cu_probe.device_ms});
    device_row.note =
        "sum of cuEventElapsedTime around each cuMemcpyDtoD/cuMemsetD8 of the baseline's probe run "
        "(informational; hipxx has no copies)";
    add_row(std::move(device_row));
  }
}

// ------------------------------------------------------------------------------------------------
// Start-up
// ------------------------------------------------------------------------------------------------
std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return buffer;
}

// Loads libcuda.so.1 and starts the driver; on failure says why in `why`.
bool start_driver(std::string& why) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    why = "libcuda.so.1 could not be loaded (" + std::string{reason != nullptr ? reason : "no reason given"} +
          "): no NVIDIA driver on this machine";
    return false;
  }
#define GPU_BENCH_RESOLVE(name, type) g_cu.name = reinterpret_cast<decltype(g_cu.name)>(dlsym(library, #name));
  GPU_BENCH_CUDA_ENTRY_POINTS(GPU_BENCH_RESOLVE)
#undef GPU_BENCH_RESOLVE
  if (g_cu.cuEventElapsedTime_v2 == nullptr) {  // drivers before CUDA 12.8 have only the unversioned one
    g_cu.cuEventElapsedTime_v2 =
        reinterpret_cast<decltype(g_cu.cuEventElapsedTime_v2)>(dlsym(library, "cuEventElapsedTime"));
  }
  std::string missing;
#define GPU_BENCH_MISSING(name, type) \
  if (g_cu.name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string{#name};
  GPU_BENCH_CUDA_ENTRY_POINTS(GPU_BENCH_MISSING)
#undef GPU_BENCH_MISSING
  if (!missing.empty()) {
    why = "libcuda.so.1 lacks " + missing + " (a driver for CUDA 11.2 or later is needed)";
    return false;
  }
  if (const cu::CUresult result = g_cu.cuInit(0); result != cu::CUDA_SUCCESS) {
    why = "cuInit failed with " + cu_error_text(result);
    if (result == cu::CUDA_ERROR_NO_DEVICE) why += ": the driver sees no NVIDIA device";
    if (result == cu::CUDA_ERROR_STUB_LIBRARY) why += ": this libcuda.so.1 is the toolkit's stub, not the driver";
    return false;
  }
  int count = 0;
  if (const cu::CUresult result = g_cu.cuDeviceGetCount(&count); result != cu::CUDA_SUCCESS || count <= 0) {
    why = result != cu::CUDA_SUCCESS ? "cuDeviceGetCount failed with " + cu_error_text(result)
                                     : "the CUDA driver reports no devices";
    return false;
  }
  if (const cu::CUresult result = g_cu.cuDeviceGet(&g_cu_device, 0); result != cu::CUDA_SUCCESS) {
    why = "cuDeviceGet(0) failed with " + cu_error_text(result);
    return false;
  }
  // The primary context: the one hipxx's CUDA backend uses, so both sides run in the same context.
  if (const cu::CUresult result = g_cu.cuDevicePrimaryCtxRetain(&g_cu_context, g_cu_device);
      result != cu::CUDA_SUCCESS) {
    why = "cuDevicePrimaryCtxRetain failed with " + cu_error_text(result);
    return false;
  }
  if (const cu::CUresult result = g_cu.cuCtxSetCurrent(g_cu_context); result != cu::CUDA_SUCCESS) {
    why = "cuCtxSetCurrent failed with " + cu_error_text(result);
    return false;
  }
  return true;
}

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: gpu-bench [--json=PATH] [--dry-run] [--only=event,vmm,placement,pool,grow]\n"
               "                 [--deadline=SECONDS] [--grow-gib=N]\n"
               "  Compares hipxx (HIPXX_BACKEND=cuda, set by the program) with the raw CUDA driver on GPU 0\n"
               "  and prints a Markdown table; --json=PATH also writes it as JSON.\n"
               "  --dry-run   every code path with N=3 and small sizes, on whatever backend is present;\n"
               "              the raw-CUDA side is skipped where there is no CUDA driver\n"
               "  --deadline  stop, print partial results and exit 3 after this many seconds (default 170)\n"
               "exit: 0 ok, 1 a benchmark failed, 2 no CUDA, 3 deadline passed, 64 bad arguments\n");
}

bool parse_arguments(int argc, char** argv, Config& config) {
  std::optional<double> grow_gib;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const auto take_value = [&](const char* name) {
      const std::string prefix = std::string{name} + "=";
      if (arg.rfind(prefix, 0) == 0) {
        value = arg.substr(prefix.size());
        return true;
      }
      if (arg == name && i + 1 < argc) {
        value = argv[++i];
        return true;
      }
      return false;
    };
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (arg == "--dry-run") {
      config.dry_run = true;
    } else if (take_value("--json")) {
      if (value.empty()) return false;
      config.json_path = value;
    } else if (take_value("--only")) {
      std::stringstream list{value};
      std::string name;
      while (std::getline(list, name, ',')) {
        if (name != "event" && name != "vmm" && name != "placement" && name != "pool" && name != "grow") {
          std::fprintf(stderr, "error: unknown benchmark '%s' in --only\n", name.c_str());
          return false;
        }
        config.only.insert(name);
      }
    } else if (take_value("--deadline")) {
      char* end = nullptr;
      config.deadline_s = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(config.deadline_s > 0)) return false;
    } else if (take_value("--grow-gib")) {
      char* end = nullptr;
      grow_gib = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(*grow_gib > 0) || *grow_gib > 64) return false;
    } else {
      std::fprintf(stderr, "error: unknown argument '%s'\n", arg.c_str());
      return false;
    }
  }
  if (config.dry_run) config.make_dry();
  if (grow_gib) {
    const auto chunks =
        static_cast<std::size_t>(*grow_gib * static_cast<double>(kGiB) / static_cast<double>(config.grow_chunk));
    config.grow_target = std::max<std::size_t>(1, chunks) * config.grow_chunk;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_arguments(argc, argv, g_config)) {
    usage(stderr);
    return 64;
  }
  g_report.date = today_utc();
  g_report.mode = g_config.dry_run ? "dry-run" : "full";

  // Before the first HIP call: the runtime picks its backend once, on first use.
  if (!g_config.dry_run) {
    const char* before = std::getenv("HIPXX_BACKEND");
    if (before != nullptr && std::string{before} != "cuda") {
      std::fprintf(stderr, "note: HIPXX_BACKEND=%s replaced by cuda\n", before);
    }
    setenv("HIPXX_BACKEND", "cuda", 1);
  }

  std::string why;
  const bool driver = start_driver(why);
  if (!driver && !g_config.dry_run) {
    std::fprintf(stderr,
                 "error: no CUDA: %s.\n"
                 "This benchmark needs an NVIDIA GPU and its driver. Use --dry-run to test the harness without one.\n",
                 why.c_str());
    return 2;
  }
  if (driver) {
    (void)g_cu.cuDriverGetVersion(&g_report.driver_version);
  }

  std::optional<Watchdog> watchdog;
  watchdog.emplace(g_config.deadline_s);

  // hipxx.
  int devices = 0;
  if (const hipError_t error = hipGetDeviceCount(&devices); error != hipSuccess || devices <= 0) {
    const char* backend_error = hipxxGetBackendError();
    std::fprintf(stderr, "error: hipxx has no device: %s%s%s\n", hip_error_text(error).c_str(),
                 backend_error != nullptr && *backend_error != '\0' ? ": " : "",
                 backend_error != nullptr ? backend_error : "");
    return 1;  // the driver itself works (full mode checked it): this is hipxx's failure
  }
  const char* backend = hipxxGetBackendName();
  g_report.backend = backend != nullptr ? backend : "(none)";
  if (!g_config.dry_run && g_report.backend != "cuda") {
    std::fprintf(stderr, "error: hipxx runs on the '%s' backend, not cuda\n", g_report.backend.c_str());
    return 1;
  }
  if (const hipError_t error = hipSetDevice(0); error != hipSuccess) {
    std::fprintf(stderr, "error: hipSetDevice(0): %s\n", hip_error_text(error).c_str());
    return 1;
  }
  char name[256] = {};
  if (hipDeviceGetName(name, static_cast<int>(sizeof name), 0) == hipSuccess) g_report.device = name;

  // The raw side runs only where it compares like with like: hipxx itself on the same CUDA device.
  if (driver && g_report.backend == "cuda") {
    g_raw = true;
    char cu_name[256] = {};
    if (g_cu.cuDeviceGetName(cu_name, static_cast<int>(sizeof cu_name) - 1, g_cu_device) == cu::CUDA_SUCCESS &&
        std::string{cu_name} != g_report.device) {
      add_note("hipxx device 0 is '" + g_report.device + "' but CUDA device 0 is '" + cu_name + "'");
    }
  } else if (driver) {
    g_raw_note =
        "hipxx runs on the " + g_report.backend + " backend, so a raw CUDA comparison would not be like with like";
  } else {
    g_raw_note = why;
  }
  progress("hipxx GPU benchmark (%s): device '%s', backend %s, raw CUDA %s", g_report.mode.c_str(),
           g_report.device.c_str(), g_report.backend.c_str(), g_raw ? "yes" : ("skipped: " + g_raw_note).c_str());

  const auto start = Clock::now();
  section("event", bench_events);
  section("vmm", bench_vmm);
  section("placement", bench_placement);
  section("pool", bench_pool);
  section("grow", bench_grow);
  g_stage.store("output");
  progress("all benchmarks done in %.1f s", ns_between(start, Clock::now()) / 1e9);

  int exit_code = 0;
  {
    std::lock_guard lock{g_report_mutex};
    for (const Row& row : g_report.rows) {
      if (!row.error.empty()) exit_code = 1;
    }
    g_report.complete = true;
    g_report.exit_code = exit_code;
  }
  watchdog.reset();  // from here on nothing can hang, and the watchdog must not print a second time
  if (!emit(g_report)) exit_code = 1;
  return exit_code;
}
