// Each VMM operation of the host backend, side by side with the raw Linux calls it is built from, in
// one binary so that both run under the same conditions. Names come in groups:
//
//   BM_<Op>/raw        the system calls alone, as the host backend issues them (for reserve, which
//                      the backend serves from its address arena, the mmap/munmap it saves)
//   BM_<Op>/hipxx      the HIP C entry point (argument checks, books, lock, backend call)
//   BM_<Op>/hipxx_cxx  the owning C++ handle (hipxx::VirtualRange, PhysicalAllocation, Mapping)
//
// so bench/ratios.py can print hipxx/raw per operation. Run with HIPXX_BACKEND=host (the default on a
// machine without a GPU); the raw side is only a fair baseline for the host backend.
#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>
#include <hipxx/mapping.hpp>
#include <hipxx/physical_allocation.hpp>
#include <hipxx/shareable_handle.hpp>
#include <hipxx/virtual_range.hpp>

#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

// One recommended granule of the host backend (a transparent huge page). Create commits the
// memfd's pages and map fills the page tables (as the host backend does), so those two grow with the
// size; the other calls hardly depend on it.
constexpr std::size_t kSize = std::size_t{2} << 20;

constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

hipMemAllocationProp prop(bool exportable) {
  hipMemAllocationProp p{};
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = exportable ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = 0;
  return p;
}

hipMemAccessDesc access(hipMemAccessFlags flags) {
  hipMemAccessDesc desc{};
  desc.location.type = hipMemLocationTypeDevice;
  desc.location.id = 0;
  desc.flags = flags;
  return desc;
}

// Stops the benchmark with a readable reason; returns false so loops can `break`.
bool ok(benchmark::State& state, bool success, const char* what) {
  if (!success) state.SkipWithError(what);
  return success;
}

bool ok(benchmark::State& state, hipError_t error, const char* what) {
  if (error != hipSuccess) {
    static thread_local std::string text;
    text = std::string{what} + ": " + hipGetErrorName(error);
    state.SkipWithError(text.c_str());
  }
  return error == hipSuccess;
}

// Physical memory as the host backend makes it: a memfd of that size with every page allocated.
int memfd(std::size_t size) {
  const int fd = memfd_create("bench-raw", MFD_CLOEXEC);
  if (fd >= 0 && (ftruncate(fd, static_cast<off_t>(size)) != 0 || fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// A mapping as the host backend makes it: mapped read-write, page tables filled by write faults
// (MADV_POPULATE_WRITE), then closed to every device until access is set.
bool map_fd(void* va, int fd) {
  return mmap(va, kSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED &&
         madvise(va, kSize, MADV_POPULATE_WRITE) == 0 && mprotect(va, kSize, PROT_NONE) == 0;
}

// --- reserve + free: hipMemAddressReserve/hipMemAddressFree vs mmap(PROT_NONE)/munmap -------------
// The host backend hands reservations out of its address arena (backend/address_arena.hpp), so its
// side makes no system call once the arena has its first chunk; the raw side is what a reservation
// costs a program that asks the kernel for each one.

void BM_Reserve_raw(benchmark::State& state) {
  for (auto _ : state) {
    void* va = mmap(nullptr, kSize, PROT_NONE, kReserveFlags, -1, 0);
    if (!ok(state, va != MAP_FAILED, "mmap")) break;
    benchmark::DoNotOptimize(va);
    munmap(va, kSize);
  }
}

void BM_Reserve_hipxx(benchmark::State& state) {
  for (auto _ : state) {
    void* va = nullptr;
    if (!ok(state, hipMemAddressReserve(&va, kSize, 0, nullptr, 0), "hipMemAddressReserve")) break;
    benchmark::DoNotOptimize(va);
    if (!ok(state, hipMemAddressFree(va, kSize), "hipMemAddressFree")) break;
  }
}

void BM_Reserve_hipxx_cxx(benchmark::State& state) {
  for (auto _ : state) {
    auto range = hipxx::VirtualRange::reserve(kSize);
    if (!ok(state, range.has_value(), "VirtualRange::reserve")) break;
    benchmark::DoNotOptimize(range.value().base());
  }
}

// --- create + release: hipMemCreate/hipMemRelease vs the same memfd calls ----------------------
// The host backend commits a new allocation by populating a read-write mapping of its memfd and keeps
// that mapping for the first map; release unmaps it. (2 MiB is below the size where it splits the
// populating over threads, so both sides run on one thread.)

void BM_Create_raw(benchmark::State& state) {
  for (auto _ : state) {
    const int fd = memfd_create("bench-raw", MFD_CLOEXEC);
    void* at = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(kSize)) == 0) {
      at = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    const bool populated = at != MAP_FAILED && madvise(at, kSize, MADV_POPULATE_WRITE) == 0;
    if (at != MAP_FAILED) munmap(at, kSize);
    if (fd >= 0) close(fd);
    if (!ok(state, populated, "memfd_create/ftruncate/mmap/madvise")) break;
  }
}

void BM_Create_hipxx(benchmark::State& state) {
  const hipMemAllocationProp p = prop(false);
  for (auto _ : state) {
    hipMemGenericAllocationHandle_t handle{};
    if (!ok(state, hipMemCreate(&handle, kSize, &p, 0), "hipMemCreate")) break;
    if (!ok(state, hipMemRelease(handle), "hipMemRelease")) break;
  }
}

void BM_Create_hipxx_cxx(benchmark::State& state) {
  for (auto _ : state) {
    auto allocation = hipxx::PhysicalAllocation::create(hipxx::Device{0}, kSize);
    if (!ok(state, allocation.has_value(), "PhysicalAllocation::create")) break;
  }
}

// --- map + unmap: hipMemMap/hipMemUnmap vs mmap(MAP_FIXED|MAP_SHARED, fd) + madvise
//     (MADV_POPULATE_WRITE) + mprotect(PROT_NONE), then the PROT_NONE placeholder back

void BM_Map_raw(benchmark::State& state) {
  void* va = mmap(nullptr, kSize, PROT_NONE, kReserveFlags, -1, 0);
  const int fd = memfd(kSize);
  if (ok(state, va != MAP_FAILED && fd >= 0, "setup")) {
    for (auto _ : state) {
      if (!ok(state, map_fd(va, fd), "mmap fd")) break;
      if (!ok(state, mmap(va, kSize, PROT_NONE, kReserveFlags | MAP_FIXED, -1, 0) != MAP_FAILED, "mmap placeholder")) {
        break;
      }
    }
  }
  if (fd >= 0) close(fd);
  if (va != MAP_FAILED) munmap(va, kSize);
}

void BM_Map_hipxx(benchmark::State& state) {
  const hipMemAllocationProp p = prop(false);
  void* va = nullptr;
  hipMemGenericAllocationHandle_t handle{};
  if (!ok(state, hipMemAddressReserve(&va, kSize, 0, nullptr, 0), "reserve")) return;
  if (ok(state, hipMemCreate(&handle, kSize, &p, 0), "create")) {
    for (auto _ : state) {
      if (!ok(state, hipMemMap(va, kSize, 0, handle, 0), "hipMemMap")) break;
      if (!ok(state, hipMemUnmap(va, kSize), "hipMemUnmap")) break;
    }
    (void)hipMemRelease(handle);
  }
  (void)hipMemAddressFree(va, kSize);
}

void BM_Map_hipxx_cxx(benchmark::State& state) {
  auto range = hipxx::VirtualRange::reserve(kSize);
  auto allocation = hipxx::PhysicalAllocation::create(hipxx::Device{0}, kSize);
  if (!ok(state, range.has_value() && allocation.has_value(), "setup")) return;
  for (auto _ : state) {
    auto mapping = hipxx::map(range.value(), 0, allocation.value());
    if (!ok(state, mapping.has_value(), "hipxx::map")) break;
  }
}

// --- set access: hipMemSetAccess vs mprotect, alternating read-write and read-only ---------------

void BM_SetAccess_raw(benchmark::State& state) {
  void* va = mmap(nullptr, kSize, PROT_NONE, kReserveFlags, -1, 0);
  const int fd = memfd(kSize);
  if (ok(state, va != MAP_FAILED && fd >= 0 && map_fd(va, fd), "setup")) {
    bool write = true;
    for (auto _ : state) {
      if (!ok(state, mprotect(va, kSize, write ? PROT_READ | PROT_WRITE : PROT_READ) == 0, "mprotect")) break;
      write = !write;
    }
  }
  if (fd >= 0) close(fd);
  if (va != MAP_FAILED) munmap(va, kSize);
}

void BM_SetAccess_hipxx(benchmark::State& state) {
  const hipMemAllocationProp p = prop(false);
  void* va = nullptr;
  hipMemGenericAllocationHandle_t handle{};
  if (!ok(state, hipMemAddressReserve(&va, kSize, 0, nullptr, 0), "reserve")) return;
  if (ok(state, hipMemCreate(&handle, kSize, &p, 0), "create") &&
      ok(state, hipMemMap(va, kSize, 0, handle, 0), "map")) {
    const hipMemAccessDesc read_write = access(hipMemAccessFlagsProtReadWrite);
    const hipMemAccessDesc read_only = access(hipMemAccessFlagsProtRead);
    bool write = true;
    for (auto _ : state) {
      if (!ok(state, hipMemSetAccess(va, kSize, write ? &read_write : &read_only, 1), "hipMemSetAccess")) break;
      write = !write;
    }
    (void)hipMemUnmap(va, kSize);
  }
  if (handle != nullptr) (void)hipMemRelease(handle);
  (void)hipMemAddressFree(va, kSize);
}

void BM_SetAccess_hipxx_cxx(benchmark::State& state) {
  auto range = hipxx::VirtualRange::reserve(kSize);
  auto allocation = hipxx::PhysicalAllocation::create(hipxx::Device{0}, kSize);
  if (!ok(state, range.has_value() && allocation.has_value(), "setup")) return;
  auto mapping = hipxx::map(range.value(), 0, allocation.value());
  if (!ok(state, mapping.has_value(), "map")) return;
  bool write = true;
  for (auto _ : state) {
    const auto granted =
        mapping.value().set_access(hipxx::Device{0}, write ? hipxx::Access::read_write : hipxx::Access::read);
    if (!ok(state, granted.has_value(), "Mapping::set_access")) break;
    write = !write;
  }
}

// --- export + import: hipMemExportToShareableHandle/hipMemImportFromShareableHandle (+ closing both)
//     vs the calls the host backend makes for them: export is a dup; import checks the descriptor
//     (fstat, F_GET_SEALS: only a memfd is device memory, F_GETFL: opened read-write) and keeps a dup;
//     then both descriptors are closed -------------------------------------------------------------

void BM_ExportImport_raw(benchmark::State& state) {
  const int fd = memfd(kSize);
  if (ok(state, fd >= 0, "setup")) {
    for (auto _ : state) {
      const int exported = fcntl(fd, F_DUPFD_CLOEXEC, 0);
      struct stat status {};
      if (!ok(state, exported >= 0 && fstat(exported, &status) == 0, "dup/fstat")) break;
      const int seals = fcntl(exported, F_GET_SEALS);
      const int mode = fcntl(exported, F_GETFL);
      const int imported = fcntl(exported, F_DUPFD_CLOEXEC, 0);
      benchmark::DoNotOptimize(seals);
      benchmark::DoNotOptimize(mode);
      close(exported);
      if (!ok(state, imported >= 0, "dup")) break;
      close(imported);
    }
    close(fd);
  }
}

void BM_ExportImport_hipxx(benchmark::State& state) {
  const hipMemAllocationProp p = prop(true);
  hipMemGenericAllocationHandle_t handle{};
  if (!ok(state, hipMemCreate(&handle, kSize, &p, 0), "create")) return;
  for (auto _ : state) {
    int fd = -1;
    if (!ok(state, hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0), "export")) {
      break;
    }
    hipMemGenericAllocationHandle_t imported{};
    const hipError_t error = hipMemImportFromShareableHandle(
        &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)), hipMemHandleTypePosixFileDescriptor);
    close(fd);
    if (!ok(state, error, "import")) break;
    if (!ok(state, hipMemRelease(imported), "release")) break;
  }
  (void)hipMemRelease(handle);
}

void BM_ExportImport_hipxx_cxx(benchmark::State& state) {
  auto allocation = hipxx::PhysicalAllocation::create(hipxx::Device{0}, kSize, hipxx::Shareable::posix_fd);
  if (!ok(state, allocation.has_value(), "setup")) return;
  for (auto _ : state) {
    auto fd = hipxx::export_handle(allocation.value());
    if (!ok(state, fd.has_value(), "export_handle")) break;
    auto imported = hipxx::import_handle(fd.value(), kSize);
    if (!ok(state, imported.has_value(), "import_handle")) break;
  }
}

void register_all() {
  struct Entry {
    const char* name;
    void (*function)(benchmark::State&);
  };
  const Entry entries[] = {
      {"BM_Reserve/raw", BM_Reserve_raw},
      {"BM_Reserve/hipxx", BM_Reserve_hipxx},
      {"BM_Reserve/hipxx_cxx", BM_Reserve_hipxx_cxx},
      {"BM_Create/raw", BM_Create_raw},
      {"BM_Create/hipxx", BM_Create_hipxx},
      {"BM_Create/hipxx_cxx", BM_Create_hipxx_cxx},
      {"BM_Map/raw", BM_Map_raw},
      {"BM_Map/hipxx", BM_Map_hipxx},
      {"BM_Map/hipxx_cxx", BM_Map_hipxx_cxx},
      {"BM_SetAccess/raw", BM_SetAccess_raw},
      {"BM_SetAccess/hipxx", BM_SetAccess_hipxx},
      {"BM_SetAccess/hipxx_cxx", BM_SetAccess_hipxx_cxx},
      {"BM_ExportImport/raw", BM_ExportImport_raw},
      {"BM_ExportImport/hipxx", BM_ExportImport_hipxx},
      {"BM_ExportImport/hipxx_cxx", BM_ExportImport_hipxx_cxx},
  };
  for (const Entry& entry : entries) benchmark::RegisterBenchmark(entry.name, entry.function);
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
  // Every hipxx benchmark undid what it did: the books must be empty again.
  hipxxBookCounts books{};
  if (hipxxGetBookCounts(&books) == hipSuccess &&
      (books.reservations != 0 || books.mappings != 0 || books.allocations != 0)) {
    std::fprintf(stderr, "leak: %zu reservations, %zu mappings, %zu allocations left\n", books.reservations,
                 books.mappings, books.allocations);
    return 1;
  }
  return 0;
}
