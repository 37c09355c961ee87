// Each VMM operation of the host backend, side by side with the raw Linux calls it is built from, in
// one binary so that both run under the same conditions. Names come in groups:
//
//   BM_<Op>/raw        the system calls alone, as the host backend issues them (for reserve, which
//                      the backend serves from its address arena, the mmap/munmap it saves)
//   BM_<Op>/hipxx      the HIP C entry point (argument checks, books, lock, backend call)
//   BM_<Op>/hipxx_cxx  the owning C++ handle (hipxx::VirtualRange, PhysicalAllocation, Mapping)
//
// so bench/ratios.py can print hipxx/raw per operation. The ops and their raw sides are in
// vmm_op_pairs.hpp; bench-vmm-paired measures the same pairs in alternating batches. Run with HIPXX_BACKEND=host (the
// default on a machine without a GPU); the raw side is only a fair baseline for the host backend.
#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>
#include <hipxx/mapping.hpp>
#include <hipxx/physical_allocation.hpp>
#include <hipxx/shareable_handle.hpp>
#include <hipxx/virtual_range.hpp>

#include <benchmark/benchmark.h>

#include "vmm_op_pairs.hpp"

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

using namespace vmm_ops;

// Stops the benchmark with a readable reason; returns false so loops can `break`.
bool ok(benchmark::State& state, bool success, const char* what) {
  if (!success) state.SkipWithError(what);
  return success;
}

// One side of an op of vmm_op_pairs.hpp, on its own.
template <class Operation, bool Hipxx>
void BM_Side(benchmark::State& state) {
  Operation op;
  if (!ok(state, op.ready(), op.failure() != nullptr ? op.failure() : "set-up")) return;
  for (auto _ : state) {
    const bool done = Hipxx ? op.hipxx() : op.raw();
    if (!ok(state, done, op.failure())) break;
  }
}

// The owning C++ handles (hipxx::VirtualRange, PhysicalAllocation, Mapping) doing the same.

void BM_Reserve_hipxx_cxx(benchmark::State& state) {
  for (auto _ : state) {
    auto range = hipxx::VirtualRange::reserve(kSize);
    if (!ok(state, range.has_value(), "VirtualRange::reserve")) break;
    benchmark::DoNotOptimize(range.value().base());
  }
}

void BM_Create_hipxx_cxx(benchmark::State& state) {
  for (auto _ : state) {
    auto allocation = hipxx::PhysicalAllocation::create(hipxx::Device{0}, kSize);
    if (!ok(state, allocation.has_value(), "PhysicalAllocation::create")) break;
  }
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
      {"BM_Reserve/raw", BM_Side<Reserve, false>},
      {"BM_Reserve/hipxx", BM_Side<Reserve, true>},
      {"BM_Reserve/hipxx_cxx", BM_Reserve_hipxx_cxx},
      {"BM_Create/raw", BM_Side<Create, false>},
      {"BM_Create/hipxx", BM_Side<Create, true>},
      {"BM_Create/hipxx_cxx", BM_Create_hipxx_cxx},
      {"BM_Map/raw", BM_Side<Map, false>},
      {"BM_Map/hipxx", BM_Side<Map, true>},
      {"BM_Map/hipxx_cxx", BM_Map_hipxx_cxx},
      {"BM_SetAccess/raw", BM_Side<SetAccess, false>},
      {"BM_SetAccess/hipxx", BM_Side<SetAccess, true>},
      {"BM_SetAccess/hipxx_cxx", BM_SetAccess_hipxx_cxx},
      {"BM_ExportImport/raw", BM_Side<ExportImport, false>},
      {"BM_ExportImport/hipxx", BM_Side<ExportImport, true>},
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
