// What sharing memory between processes costs:
//   - hipIpcGetMemHandle on a fresh allocation (the first export: on the host backend, whose
//     allocations are memfds from the start, it only fills in the handle; the CUDA driver's export is
//     about 500 us on an H100) and on one already exported;
//   - hipIpcOpenMemHandle + hipIpcCloseMemHandle in another process, timed there;
//   - hipMemExportToShareableHandle + close(fd), and hipMemImportFromShareableHandle + hipMemRelease;
//   - hipFree of an exported allocation against a plain one, and hipMalloc + hipFree against the raw
//     system calls of the host backend's allocation (memfd_create, ftruncate, seals, mmap; munmap,
//     close) and against a private anonymous mapping, which cannot be shared.
//
// The other process is this same executable, started with fork+exec (a GPU runtime does not survive a
// bare fork) as `<self> --ipc-peer <fd>`, and spoken to over a socketpair. Run it directly, e.g.
//   HIPXX_BACKEND=host <dir>/bench/bench-ipc-latency --benchmark_min_time=0.2
// (HIPXX_BACKEND=cuda on an NVIDIA machine for the driver's figures).
#include <hip/hip_runtime_api.h>

#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;
constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (Linux 5.14), which older headers lack

void require(hipError_t error, char const* what) {
  if (error != hipSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, hipGetErrorName(error));
    std::exit(1);
  }
}

double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

bool write_all(int fd, void const* data, std::size_t bytes) {
  auto const* at = static_cast<unsigned char const*>(data);
  while (bytes > 0) {
    ssize_t const done = ::write(fd, at, bytes);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    at += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t bytes) {
  auto* at = static_cast<unsigned char*>(data);
  while (bytes > 0) {
    ssize_t const done = ::read(fd, at, bytes);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    at += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

// One open and one close in the peer, each timed there.
struct PeerReply {
  std::int32_t status;
  std::int32_t reserved;
  std::int64_t open_ns;
  std::int64_t close_ns;
};

int peer_main(int socket) {
  for (;;) {
    hipIpcMemHandle_t handle{};
    if (!read_all(socket, &handle, sizeof handle)) return 0;
    PeerReply reply{};
    void* mapped = nullptr;
    auto const start = Clock::now();
    reply.status = hipIpcOpenMemHandle(&mapped, handle, hipIpcMemLazyEnablePeerAccess);
    auto const opened = Clock::now();
    if (reply.status == hipSuccess) reply.status = hipIpcCloseMemHandle(mapped);
    auto const closed = Clock::now();
    reply.open_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(opened - start).count();
    reply.close_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(closed - opened).count();
    if (!write_all(socket, &reply, sizeof reply)) return 0;
  }
}

// The peer process, started once per benchmark run and ended with it.
class Peer {
 public:
  Peer() {
    std::array<int, 2> ends{};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) != 0) std::exit(1);
    std::string self = "/proc/self/exe";
    std::string flag = "--ipc-peer";
    std::string fd = "3";
    std::array<char*, 4> argv{self.data(), flag.data(), fd.data(), nullptr};
    pid_ = fork();
    if (pid_ == 0) {
      if (ends[1] == 3 ? fcntl(3, F_SETFD, 0) != 0 : dup2(ends[1], 3) != 3) _exit(126);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    close(ends[1]);
    socket_ = ends[0];
  }
  Peer(Peer const&) = delete;
  Peer& operator=(Peer const&) = delete;
  ~Peer() {
    close(socket_);  // the peer sees EOF and exits
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }

  bool open_close(hipIpcMemHandle_t const& handle, PeerReply* reply) {
    return write_all(socket_, &handle, sizeof handle) && read_all(socket_, reply, sizeof *reply);
  }

 private:
  pid_t pid_ = -1;
  int socket_ = -1;
};

// The first export of an allocation: a new allocation every iteration, only the export timed.
void BM_IpcGetMemHandle_FirstExport(benchmark::State& state) {
  auto const size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* pointer = nullptr;
    require(hipMalloc(&pointer, size), "hipMalloc");
    // Memory worth sharing holds data: its pages exist before the export.
    require(hipMemset(pointer, 0x5A, size), "hipMemset");
    hipIpcMemHandle_t handle{};
    auto const start = Clock::now();
    require(hipIpcGetMemHandle(&handle, pointer), "hipIpcGetMemHandle");
    auto const end = Clock::now();
    benchmark::DoNotOptimize(handle);
    require(hipFree(pointer), "hipFree");
    state.SetIterationTime(seconds_between(start, end));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(size));
}
// A fixed count: only the export is timed, and it is far shorter than the allocation and fill
// around it, so a time-based count would run the fills for minutes.
BENCHMARK(BM_IpcGetMemHandle_FirstExport)
    ->Arg(4 * kKiB)
    ->Arg(1 * kMiB)
    ->Arg(64 * kMiB)
    ->UseManualTime()
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

// hipMalloc + hipFree against the host backend's system calls done directly (Arg 1: a sealed memfd
// mapped shared and populated, as hipMalloc makes it) and against a private anonymous mapping
// populated as it is made (Arg 0), which is cheaper but cannot be shared without moving it.
void BM_MallocFree(benchmark::State& state) {
  auto const size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* pointer = nullptr;
    require(hipMalloc(&pointer, size), "hipMalloc");
    require(hipFree(pointer), "hipFree");
  }
}
BENCHMARK(BM_MallocFree)->Arg(4 * kKiB)->Arg(1 * kMiB)->Unit(benchmark::kMicrosecond);

void BM_OsBaseline_Allocation(benchmark::State& state) {
  auto const size = static_cast<std::size_t>(state.range(0));
  bool const shareable = state.range(1) != 0;
  for (auto _ : state) {
    void* pages = MAP_FAILED;
    int fd = -1;
    if (shareable) {
      fd = memfd_create("hipxx-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) == 0 &&
          fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
        pages = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      }
      if (pages != MAP_FAILED && madvise(pages, size, kPopulateWrite) != 0) {
        munmap(pages, size);
        pages = MAP_FAILED;
      }
    } else {
      pages = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    }
    if (pages == MAP_FAILED) {
      state.SkipWithError("allocation failed");
      break;
    }
    munmap(pages, size);
    if (fd >= 0) close(fd);
  }
}
BENCHMARK(BM_OsBaseline_Allocation)
    ->ArgNames({"bytes", "memfd"})
    ->Args({4 * kKiB, 0})
    ->Args({4 * kKiB, 1})
    ->Args({1 * kMiB, 0})
    ->Args({1 * kMiB, 1})
    ->Unit(benchmark::kMicrosecond);

// hipFree of an exported allocation against one never exported.
void BM_Free(benchmark::State& state) {
  auto const size = static_cast<std::size_t>(state.range(0));
  bool const exported = state.range(1) != 0;
  for (auto _ : state) {
    void* pointer = nullptr;
    require(hipMalloc(&pointer, size), "hipMalloc");
    if (exported) {
      hipIpcMemHandle_t handle{};
      require(hipIpcGetMemHandle(&handle, pointer), "hipIpcGetMemHandle");
    }
    auto const start = Clock::now();
    require(hipFree(pointer), "hipFree");
    state.SetIterationTime(seconds_between(start, Clock::now()));
  }
}
BENCHMARK(BM_Free)->ArgNames({"bytes", "exported"})->Args({1 * kMiB, 0})->Args({1 * kMiB, 1})->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Exporting again: the same handle, made afresh from the same facts.
void BM_IpcGetMemHandle_Again(benchmark::State& state) {
  void* pointer = nullptr;
  require(hipMalloc(&pointer, 1 * kMiB), "hipMalloc");
  hipIpcMemHandle_t handle{};
  require(hipIpcGetMemHandle(&handle, pointer), "hipIpcGetMemHandle");
  for (auto _ : state) {
    require(hipIpcGetMemHandle(&handle, pointer), "hipIpcGetMemHandle");
    benchmark::DoNotOptimize(handle);
  }
  require(hipFree(pointer), "hipFree");
}
BENCHMARK(BM_IpcGetMemHandle_Again);

// Open and close in another process, timed there; the socket round trip is not counted.
void BM_IpcOpenClose_InPeer(benchmark::State& state) {
  auto const size = static_cast<std::size_t>(state.range(0));
  void* pointer = nullptr;
  require(hipMalloc(&pointer, size), "hipMalloc");
  hipIpcMemHandle_t handle{};
  require(hipIpcGetMemHandle(&handle, pointer), "hipIpcGetMemHandle");
  {
    Peer peer;
    double open_seconds = 0;
    double close_seconds = 0;
    for (auto _ : state) {
      PeerReply reply{};
      if (!peer.open_close(handle, &reply) || reply.status != hipSuccess) {
        state.SkipWithError("the peer could not open the handle");
        break;
      }
      open_seconds += static_cast<double>(reply.open_ns) * 1e-9;
      close_seconds += static_cast<double>(reply.close_ns) * 1e-9;
      state.SetIterationTime(static_cast<double>(reply.open_ns + reply.close_ns) * 1e-9);
    }
    auto const iterations = static_cast<double>(state.iterations() > 0 ? state.iterations() : 1);
    state.counters["open_us"] = open_seconds / iterations * 1e6;
    state.counters["close_us"] = close_seconds / iterations * 1e6;
  }
  require(hipFree(pointer), "hipFree");
}
BENCHMARK(BM_IpcOpenClose_InPeer)->Arg(4 * kKiB)->Arg(1 * kMiB)->Arg(64 * kMiB)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

hipMemAllocationProp exportable_prop() {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  return prop;
}

std::size_t minimum_granularity(hipMemAllocationProp const& prop) {
  std::size_t granularity = 0;
  require(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum),
          "hipMemGetAllocationGranularity");
  return granularity;
}

// hipMemExportToShareableHandle of one allocation, and closing the descriptor it returns.
void BM_ShareableExport_Close(benchmark::State& state) {
  auto const prop = exportable_prop();
  std::size_t const size = minimum_granularity(prop);
  hipMemGenericAllocationHandle_t allocation{};
  require(hipMemCreate(&allocation, size, &prop, 0), "hipMemCreate");
  for (auto _ : state) {
    int fd = -1;
    require(hipMemExportToShareableHandle(&fd, allocation, hipMemHandleTypePosixFileDescriptor, 0),
            "hipMemExportToShareableHandle");
    close(fd);
  }
  require(hipMemRelease(allocation), "hipMemRelease");
  state.counters["bytes"] = static_cast<double>(size);
}
BENCHMARK(BM_ShareableExport_Close)->Unit(benchmark::kMicrosecond);

// hipMemImportFromShareableHandle of an exported descriptor, and hipMemRelease of the new handle.
void BM_ShareableImport_Release(benchmark::State& state) {
  auto const prop = exportable_prop();
  std::size_t const size = minimum_granularity(prop);
  hipMemGenericAllocationHandle_t allocation{};
  require(hipMemCreate(&allocation, size, &prop, 0), "hipMemCreate");
  int fd = -1;
  require(hipMemExportToShareableHandle(&fd, allocation, hipMemHandleTypePosixFileDescriptor, 0),
          "hipMemExportToShareableHandle");
  for (auto _ : state) {
    hipMemGenericAllocationHandle_t imported{};
    // HIP passes the descriptor by value inside the pointer argument.
    require(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                            hipMemHandleTypePosixFileDescriptor),
            "hipMemImportFromShareableHandle");
    require(hipMemRelease(imported), "hipMemRelease");
  }
  close(fd);
  require(hipMemRelease(allocation), "hipMemRelease");
  state.counters["bytes"] = static_cast<double>(size);
}
BENCHMARK(BM_ShareableImport_Release)->Unit(benchmark::kMicrosecond);

// Pool sharing (hipMemPoolExportToShareableHandle and friends), timed in this one process, which may
// import its own pools: every import still goes through the broker thread over Unix sockets, as
// from another process, minus the scheduling of a second process.
hipMemPool_t exportable_pool() {
  hipMemPoolProps props{};
  props.allocType = hipMemAllocationTypePinned;
  props.handleTypes = hipMemHandleTypePosixFileDescriptor;
  props.location.type = hipMemLocationTypeDevice;
  props.location.id = 0;
  hipMemPool_t pool = nullptr;
  require(hipMemPoolCreate(&pool, &props), "hipMemPoolCreate");
  return pool;
}

int export_pool(hipMemPool_t pool) {
  int fd = -1;
  require(hipMemPoolExportToShareableHandle(&fd, pool, hipMemHandleTypePosixFileDescriptor, 0),
          "hipMemPoolExportToShareableHandle");
  return fd;
}

hipMemPool_t import_pool(int fd) {
  hipMemPool_t imported = nullptr;
  require(hipMemPoolImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                              hipMemHandleTypePosixFileDescriptor, 0),
          "hipMemPoolImportFromShareableHandle");
  return imported;
}

// Against BM_ShareableExport_Close: a socketpair handed to the broker instead of a dup of one chunk.
void BM_PoolExport_Close(benchmark::State& state) {
  hipMemPool_t const pool = exportable_pool();
  for (auto _ : state) close(export_pool(pool));
  require(hipMemPoolDestroy(pool), "hipMemPoolDestroy");
}
BENCHMARK(BM_PoolExport_Close)->Unit(benchmark::kMicrosecond);

// Against BM_ShareableImport_Release: a broker round trip (a private channel and the pool's layout),
// a mirror range reserved, and hipMemPoolDestroy giving it back.
void BM_PoolImport_Destroy(benchmark::State& state) {
  hipMemPool_t const pool = exportable_pool();
  int const fd = export_pool(pool);
  for (auto _ : state) require(hipMemPoolDestroy(import_pool(fd)), "hipMemPoolDestroy");
  close(fd);
  require(hipMemPoolDestroy(pool), "hipMemPoolDestroy");
}
BENCHMARK(BM_PoolImport_Destroy)->Unit(benchmark::kMicrosecond);

void BM_PoolExportPointer(benchmark::State& state) {
  hipMemPool_t const pool = exportable_pool();
  void* pointer = nullptr;
  require(hipMallocFromPoolAsync(&pointer, 1 * kMiB, pool, nullptr), "hipMallocFromPoolAsync");
  for (auto _ : state) {
    hipMemPoolPtrExportData data{};
    require(hipMemPoolExportPointer(&data, pointer), "hipMemPoolExportPointer");
    benchmark::DoNotOptimize(data);
  }
  require(hipFree(pointer), "hipFree");
  require(hipMemPoolDestroy(pool), "hipMemPoolDestroy");
}
BENCHMARK(BM_PoolExportPointer);

// hipMemPoolImportPointer + hipFree. chunk_mapped=0: each import fetches the chunk's fd from the
// broker, imports and maps it, and the free unmaps it; 1: another imported pointer keeps the chunk
// mapped, so both are bookkeeping only.
void BM_PoolImportPointer_Free(benchmark::State& state) {
  bool const chunk_mapped = state.range(0) != 0;
  hipMemPool_t const pool = exportable_pool();
  void* kept = nullptr;
  void* timed = nullptr;
  require(hipMallocFromPoolAsync(&kept, 4 * kKiB, pool, nullptr), "hipMallocFromPoolAsync");
  require(hipMallocFromPoolAsync(&timed, 4 * kKiB, pool, nullptr), "hipMallocFromPoolAsync");
  int const fd = export_pool(pool);
  hipMemPool_t const imported = import_pool(fd);
  hipMemPoolPtrExportData kept_data{};
  hipMemPoolPtrExportData timed_data{};
  require(hipMemPoolExportPointer(&kept_data, kept), "hipMemPoolExportPointer");
  require(hipMemPoolExportPointer(&timed_data, timed), "hipMemPoolExportPointer");
  void* kept_import = nullptr;
  if (chunk_mapped) require(hipMemPoolImportPointer(&kept_import, imported, &kept_data), "hipMemPoolImportPointer");
  double import_seconds = 0;
  for (auto _ : state) {
    void* mapped = nullptr;
    auto const start = Clock::now();
    require(hipMemPoolImportPointer(&mapped, imported, &timed_data), "hipMemPoolImportPointer");
    auto const middle = Clock::now();
    require(hipFree(mapped), "hipFree");
    import_seconds += seconds_between(start, middle);
  }
  state.counters["import_us"] = import_seconds / static_cast<double>(std::max<std::int64_t>(state.iterations(), 1)) * 1e6;
  if (chunk_mapped) require(hipFree(kept_import), "hipFree");
  require(hipMemPoolDestroy(imported), "hipMemPoolDestroy");
  close(fd);
  require(hipFree(kept), "hipFree");
  require(hipFree(timed), "hipFree");
  require(hipMemPoolDestroy(pool), "hipMemPoolDestroy");
}
BENCHMARK(BM_PoolImportPointer_Free)->ArgName("chunk_mapped")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string_view{argv[1]} == "--ipc-peer") return peer_main(std::atoi(argv[2]));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
