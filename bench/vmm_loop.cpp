// A fixed number of one VMM operation, for instruction counts under valgrind --tool=callgrind, where
// timings of sub-microsecond calls drown in system-call noise (bench/instructions.sh runs it).
//
//   bench-vmm-loop <operation> <iterations>
//
// Operations, each one side of an op of vmm_op_pairs.hpp (2 MiB, host backend):
//   export-import      hipMemExportToShareableHandle + hipMemImportFromShareableHandle + close + hipMemRelease
//   export-import-raw  the system calls the host backend makes for that: dup, fstat, F_GET_SEALS,
//                      F_GETFL, dup, close, close
//   reserve            hipMemAddressReserve + hipMemAddressFree
//   reserve-cxx        hipxx::VirtualRange::reserve + its destructor
//   reserve-raw        mmap(PROT_NONE) + munmap
//   map-unmap          hipMemMap + hipMemUnmap of one allocation over one range (after the first
//                      map, each map populates afresh)
//   map-unmap-raw      mmap(MAP_SHARED|MAP_FIXED) + madvise(MADV_POPULATE_WRITE) + mprotect, then the
//                      PROT_NONE placeholder mmap back over it
#include <hipxx/virtual_range.hpp>

#include "vmm_op_pairs.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

// `iterations` of one side of an op; 0, or 1 where the set-up or an iteration failed.
template <class Operation, bool Hipxx>
int loop(long iterations) {
  Operation op;
  if (!op.ready()) return 1;
  for (long i = 0; i < iterations; ++i) {
    if (!(Hipxx ? op.hipxx() : op.raw())) return 1;
  }
  return 0;
}

int reserve_cxx(long iterations) {
  for (long i = 0; i < iterations; ++i) {
    if (!hipxx::VirtualRange::reserve(vmm_ops::kSize)) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s export-import[-raw]|reserve[-cxx|-raw]|map-unmap[-raw] ITERATIONS\n", argv[0]);
    return 2;
  }
  const std::string_view operation{argv[1]};
  const long iterations = std::strtol(argv[2], nullptr, 10);
  if (operation == "export-import") return loop<vmm_ops::ExportImport, true>(iterations);
  if (operation == "export-import-raw") return loop<vmm_ops::ExportImport, false>(iterations);
  if (operation == "reserve") return loop<vmm_ops::Reserve, true>(iterations);
  if (operation == "reserve-cxx") return reserve_cxx(iterations);
  if (operation == "reserve-raw") return loop<vmm_ops::Reserve, false>(iterations);
  if (operation == "map-unmap") return loop<vmm_ops::Map, true>(iterations);
  if (operation == "map-unmap-raw") return loop<vmm_ops::Map, false>(iterations);
  std::fprintf(stderr, "unknown operation %s\n", argv[1]);
  return 2;
}
