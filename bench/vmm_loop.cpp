// A fixed number of one VMM operation, for instruction counts under valgrind --tool=callgrind, where
// timings of sub-microsecond calls drown in system-call noise (bench/instructions.sh runs it).
//
//   bench-vmm-loop <operation> <iterations>
//
// Operations, each the same sequence as its bench-vmm-ops group (2 MiB, host backend):
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
#include <hipxx/hip_runtime_api.h>
#include <hipxx/virtual_range.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

constexpr std::size_t kSize = std::size_t{2} << 20;

int export_import(long iterations) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  prop.location = {hipMemLocationTypeDevice, 0};
  hipMemGenericAllocationHandle_t handle{};
  if (hipMemCreate(&handle, kSize, &prop, 0) != hipSuccess) return 1;
  for (long i = 0; i < iterations; ++i) {
    int fd = -1;
    if (hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) != hipSuccess) return 1;
    hipMemGenericAllocationHandle_t imported{};
    const hipError_t error = hipMemImportFromShareableHandle(
        &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)), hipMemHandleTypePosixFileDescriptor);
    close(fd);
    if (error != hipSuccess || hipMemRelease(imported) != hipSuccess) return 1;
  }
  return hipMemRelease(handle) == hipSuccess ? 0 : 1;
}

int export_import_raw(long iterations) {
  const int fd = memfd_create("bench-loop", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, kSize) != 0 || fallocate(fd, 0, 0, kSize) != 0) return 1;
  for (long i = 0; i < iterations; ++i) {
    const int exported = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    struct stat status {};
    if (exported < 0 || fstat(exported, &status) != 0) return 1;
    if (fcntl(exported, F_GET_SEALS) < 0 || fcntl(exported, F_GETFL) < 0) return 1;
    const int imported = fcntl(exported, F_DUPFD_CLOEXEC, 0);
    close(exported);
    if (imported < 0) return 1;
    close(imported);
  }
  close(fd);
  return 0;
}

int reserve(long iterations) {
  for (long i = 0; i < iterations; ++i) {
    void* va = nullptr;
    if (hipMemAddressReserve(&va, kSize, 0, nullptr, 0) != hipSuccess || hipMemAddressFree(va, kSize) != hipSuccess) {
      return 1;
    }
  }
  return 0;
}

int reserve_cxx(long iterations) {
  for (long i = 0; i < iterations; ++i) {
    if (!hipxx::VirtualRange::reserve(kSize)) return 1;
  }
  return 0;
}

int reserve_raw(long iterations) {
  for (long i = 0; i < iterations; ++i) {
    void* va = mmap(nullptr, kSize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (va == MAP_FAILED || munmap(va, kSize) != 0) return 1;
  }
  return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int map_unmap(long iterations) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  hipMemGenericAllocationHandle_t handle{};
  void* va = nullptr;
  if (hipMemCreate(&handle, kSize, &prop, 0) != hipSuccess) return 1;
  if (hipMemAddressReserve(&va, kSize, 0, nullptr, 0) != hipSuccess) return 1;
  for (long i = 0; i < iterations; ++i) {
    if (hipMemMap(va, kSize, 0, handle, 0) != hipSuccess || hipMemUnmap(va, kSize) != hipSuccess) return 1;
  }
  return hipMemAddressFree(va, kSize) == hipSuccess && hipMemRelease(handle) == hipSuccess ? 0 : 1;
}

int map_unmap_raw(long iterations) {
  constexpr int kPlaceholder = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED;
  const int fd = memfd_create("bench-loop", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, kSize) != 0 || fallocate(fd, 0, 0, kSize) != 0) return 1;
  void* va = mmap(nullptr, kSize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (va == MAP_FAILED) return 1;
  for (long i = 0; i < iterations; ++i) {
    if (mmap(va, kSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) return 1;
    if (madvise(va, kSize, MADV_POPULATE_WRITE) != 0 || mprotect(va, kSize, PROT_NONE) != 0) return 1;
    if (mmap(va, kSize, PROT_NONE, kPlaceholder, -1, 0) == MAP_FAILED) return 1;
  }
  munmap(va, kSize);
  close(fd);
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
  if (operation == "export-import") return export_import(iterations);
  if (operation == "export-import-raw") return export_import_raw(iterations);
  if (operation == "reserve") return reserve(iterations);
  if (operation == "reserve-cxx") return reserve_cxx(iterations);
  if (operation == "reserve-raw") return reserve_raw(iterations);
  if (operation == "map-unmap") return map_unmap(iterations);
  if (operation == "map-unmap-raw") return map_unmap_raw(iterations);
  std::fprintf(stderr, "unknown operation %s\n", argv[1]);
  return 2;
}
