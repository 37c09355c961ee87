// The VMM lifecycle that gpu-bench times (reserve, create, map, set access, unmap, release, free),
// with every cache emptied before each call: a driver call of several microseconds does much the
// same to the books between two hipxx calls. Under callgrind's cache simulation
// (bench/cold_lines.sh), the misses of one call are the cache lines it touches, a proxy for what
// hipxx adds to a sub-microsecond driver call; the host backend stands in for the driver.
//
//   bench-cold-path <cycles>
#include <hip/hip_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr std::size_t kSize = std::size_t{2} << 20;

// Bigger than any last-level cache callgrind simulates here.
std::vector<unsigned char>& scratch() {
  static std::vector<unsigned char> bytes(std::size_t{64} << 20);
  return bytes;
}

[[gnu::noinline]] void empty_the_caches() {
  std::vector<unsigned char>& bytes = scratch();
  for (std::size_t i = 0; i < bytes.size(); i += 64) ++bytes[i];
}

bool call(const char* what, hipError_t result) {
  if (result == hipSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, hipGetErrorName(result));
  return false;
}

bool cycle() {
  hipMemAllocationProp properties{};
  properties.type = hipMemAllocationTypePinned;
  properties.location = {hipMemLocationTypeDevice, 0};
  hipMemAccessDesc access{};
  access.location = {hipMemLocationTypeDevice, 0};
  access.flags = hipMemAccessFlagsProtReadWrite;
  void* va = nullptr;
  hipMemGenericAllocationHandle_t handle{};
  empty_the_caches();
  if (!call("hipMemAddressReserve", hipMemAddressReserve(&va, kSize, 0, nullptr, 0))) return false;
  empty_the_caches();
  if (!call("hipMemCreate", hipMemCreate(&handle, kSize, &properties, 0))) return false;
  empty_the_caches();
  if (!call("hipMemMap", hipMemMap(va, kSize, 0, handle, 0))) return false;
  empty_the_caches();
  if (!call("hipMemSetAccess", hipMemSetAccess(va, kSize, &access, 1))) return false;
  empty_the_caches();
  if (!call("hipMemUnmap", hipMemUnmap(va, kSize))) return false;
  empty_the_caches();
  if (!call("hipMemRelease", hipMemRelease(handle))) return false;
  empty_the_caches();
  return call("hipMemAddressFree", hipMemAddressFree(va, kSize));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CYCLES\n", argv[0]);
    return 2;
  }
  const long cycles = std::strtol(argv[1], nullptr, 10);
  for (long i = 0; i < cycles; ++i) {
    if (!cycle()) return 1;
  }
  return 0;
}
