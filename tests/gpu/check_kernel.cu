// gpu-kernel-check: memory reserved, created, mapped and opened through hipxx's HIP C API on the CUDA
// backend is real device memory that a CUDA kernel reads and writes, in both directions:
//   1. a kernel writes a pattern into the mapped range; hipMemcpy brings it back intact;
//   2. hipMemset fills the range; a kernel checks every byte (counting mismatches in hipMalloc memory);
//   3. revoking access (hipMemSetAccess to none: unmap and re-map inside the backend) and granting it
//      again keeps the contents, and a kernel can write the range again afterwards;
//   4. where the device exports POSIX fds: the allocation, exported and imported again, mapped at a
//      second address, shows a kernel the same bytes.
// Exits 77 (skipped, for meson) only where the CUDA runtime itself sees no device; if it sees one and
// hipxx does not, that is a failure.
#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kSkip = 77;

bool ok = true;

bool check_hip(hipError_t result, const char* call, int line) {
  if (result == hipSuccess) return true;
  std::fprintf(stderr, "line %d: %s -> %s\n", line, call, hipGetErrorName(result));
  ok = false;
  return false;
}

bool check_cuda(cudaError_t result, const char* call, int line) {
  if (result == cudaSuccess) return true;
  std::fprintf(stderr, "line %d: %s -> %s\n", line, call, cudaGetErrorName(result));
  ok = false;
  return false;
}

#define HIP(call) check_hip((call), #call, __LINE__)
#define CUDA(call) check_cuda((call), #call, __LINE__)
#define EXPECT(condition)                                                    \
  do {                                                                       \
    if (!(condition)) {                                                      \
      std::fprintf(stderr, "line %d: expected %s\n", __LINE__, #condition);  \
      ok = false;                                                            \
    }                                                                        \
  } while (0)

__host__ __device__ std::uint32_t pattern(std::size_t index, std::uint32_t seed) {
  return seed ^ static_cast<std::uint32_t>(index * 2654435761u);
}

__global__ void write_pattern(std::uint32_t* words, std::size_t count, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    words[i] = pattern(i, seed);
  }
}

__global__ void count_mismatches(const unsigned char* bytes, std::size_t count, unsigned char expected,
                                 unsigned long long* mismatches) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (bytes[i] != expected) atomicAdd(mismatches, 1ULL);
  }
}

constexpr unsigned kBlocks = 120;
constexpr unsigned kThreads = 256;

// Writes the pattern with a kernel and checks it through hipMemcpy.
void kernel_writes(void* va, std::size_t size, std::uint32_t seed) {
  const std::size_t count = size / sizeof(std::uint32_t);
  write_pattern<<<kBlocks, kThreads>>>(static_cast<std::uint32_t*>(va), count, seed);
  CUDA(cudaGetLastError());
  CUDA(cudaDeviceSynchronize());
  std::vector<std::uint32_t> host(count, 0);
  if (!HIP(hipMemcpy(host.data(), va, size, hipMemcpyDeviceToHost))) return;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += host[i] != pattern(i, seed) ? 1 : 0;
  if (wrong != 0) std::fprintf(stderr, "kernel pattern (seed %#x): %zu of %zu words wrong\n", seed, wrong, count);
  EXPECT(wrong == 0);
}

// Counts, with a kernel, the bytes of [va, va + size) that are not `expected`.
unsigned long long kernel_mismatches(const void* va, std::size_t size, unsigned char expected,
                                     unsigned long long* counter) {
  unsigned long long mismatches = ~0ULL;
  if (!HIP(hipMemset(counter, 0, sizeof *counter))) return mismatches;
  count_mismatches<<<kBlocks, kThreads>>>(static_cast<const unsigned char*>(va), size, expected, counter);
  CUDA(cudaGetLastError());
  CUDA(cudaDeviceSynchronize());
  HIP(hipMemcpy(&mismatches, counter, sizeof mismatches, hipMemcpyDeviceToHost));
  return mismatches;
}

}  // namespace

int main() {
  int cuda_devices = 0;
  if (cudaGetDeviceCount(&cuda_devices) != cudaSuccess || cuda_devices == 0) {
    std::printf("gpu-kernel-check: skipped, the CUDA runtime sees no device\n");
    return kSkip;
  }
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::fprintf(stderr, "gpu-kernel-check: the CUDA runtime sees %d device(s) but hipxx none: %s\n", cuda_devices,
                 hipxxGetBackendError());
    return 1;
  }
  const char* backend = hipxxGetBackendName();
  if (backend == nullptr || std::strcmp(backend, "cuda") != 0) {
    std::fprintf(stderr, "gpu-kernel-check: needs HIPXX_BACKEND=cuda, runs on '%s'\n", backend ? backend : "?");
    return 1;
  }
  HIP(hipSetDevice(0));
  CUDA(cudaSetDevice(0));  // the same primary context hipxx uses

  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  int posix_fd = 0;
  HIP(hipDeviceGetAttribute(&posix_fd, hipDeviceAttributeMemoryPoolSupportedHandleTypes, 0));
  const bool exportable = (posix_fd & hipMemHandleTypePosixFileDescriptor) != 0;
  prop.requestedHandleType = exportable ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
  std::size_t granularity = 0;
  if (!HIP(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityRecommended))) return 1;
  const std::size_t size = 2 * granularity;

  void* va = nullptr;  // room for two mappings: the allocation, and (step 4) its imported twin
  hipMemGenericAllocationHandle_t handle{};
  if (!HIP(hipMemAddressReserve(&va, 2 * size, 0, nullptr, 0)) || !HIP(hipMemCreate(&handle, size, &prop, 0)) ||
      !HIP(hipMemMap(va, size, 0, handle, 0))) {
    return 1;
  }
  const hipMemAccessDesc read_write{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  const hipMemAccessDesc no_access{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtNone};
  HIP(hipMemSetAccess(va, size, &read_write, 1));

  unsigned long long* counter = nullptr;
  if (!HIP(hipMalloc(reinterpret_cast<void**>(&counter), sizeof *counter))) return 1;

  // 1. kernel writes, hipMemcpy reads.
  kernel_writes(va, size, 0x5eed1234u);

  // 2. hipMemset writes, kernel reads.
  HIP(hipMemset(va, 0xa5, size));
  EXPECT(kernel_mismatches(va, size, 0xa5, counter) == 0);

  // 3. revoke and grant again: the contents stay, and the range is writable again.
  HIP(hipMemSetAccess(va, size, &no_access, 1));
  unsigned char probe = 0;
  EXPECT(hipMemcpy(&probe, va, 1, hipMemcpyDeviceToHost) == hipErrorInvalidValue);  // the books refuse
  HIP(hipMemSetAccess(va, size, &read_write, 1));
  EXPECT(kernel_mismatches(va, size, 0xa5, counter) == 0);
  kernel_writes(va, size, 0x0badf00du);

  // 4. the same physical memory through an exported and re-imported handle.
  if (exportable) {
    HIP(hipMemset(va, 0x3c, size));
    int fd = -1;
    hipMemGenericAllocationHandle_t imported{};
    void* twin = static_cast<char*>(va) + size;
    if (HIP(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0)) &&
        HIP(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                            hipMemHandleTypePosixFileDescriptor))) {
      close(fd);  // the import holds the memory; the fd stays ours either way
      if (HIP(hipMemMap(twin, size, 0, imported, 0))) {
        HIP(hipMemSetAccess(twin, size, &read_write, 1));
        EXPECT(kernel_mismatches(twin, size, 0x3c, counter) == 0);
        HIP(hipMemUnmap(twin, size));
      }
      HIP(hipMemRelease(imported));
    }
  } else {
    std::printf("gpu-kernel-check: device 0 exports no POSIX fds; step 4 skipped\n");
  }

  HIP(hipFree(counter));
  HIP(hipMemUnmap(va, size));
  HIP(hipMemRelease(handle));
  HIP(hipMemAddressFree(va, 2 * size));
  hipxxBookCounts books{};
  HIP(hipxxGetBookCounts(&books));
  EXPECT(books.reservations == 0 && books.mappings == 0 && books.allocations == 0 && books.linearAllocations == 0);

  std::printf("gpu-kernel-check: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
