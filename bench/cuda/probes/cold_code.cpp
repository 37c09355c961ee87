// What cold code costs next to the driver's cuMemMap: the map alone, and the map with 8 lines of
// code run before it and 8 after, laid out in different ways (straight, a taken jump per line, a call
// per line on one page or on 8 pages, an indirect call per line). None of the extra code depends
// on the code before it, so the differences are fetch costs, not a chain of results.
// Built by bench/cuda/probes/build.sh; run as ./cold-code [CYCLES] [MiB]
#include "probe_support.hpp"

#include <cuda.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

std::array<volatile unsigned, 16> sinks;

// One function per cache line, or per page: each stores to its own word and returns.
template <int N>
[[gnu::noinline, gnu::aligned(64)]] void on_its_line() {
  sinks[N] = N;
}
template <int N>
[[gnu::noinline, gnu::aligned(4096)]] void on_its_page() {
  sinks[N + 8] = N;
}

[[gnu::noinline, gnu::aligned(64)]] void calls_on_one_page() {
  on_its_line<0>(), on_its_line<1>(), on_its_line<2>(), on_its_line<3>();
  on_its_line<4>(), on_its_line<5>(), on_its_line<6>(), on_its_line<7>();
}
[[gnu::noinline, gnu::aligned(64)]] void calls_on_eight_pages() {
  on_its_page<0>(), on_its_page<1>(), on_its_page<2>(), on_its_page<3>();
  on_its_page<4>(), on_its_page<5>(), on_its_page<6>(), on_its_page<7>();
}
using Function = void (*)();
Function volatile line_functions[8]{on_its_line<0>, on_its_line<1>, on_its_line<2>, on_its_line<3>,
                                    on_its_line<4>, on_its_line<5>, on_its_line<6>, on_its_line<7>};
[[gnu::noinline, gnu::aligned(64)]] void indirect_calls() {
  for (const Function function : line_functions) function();  // each target loaded: no direct call
}
// 8 lines of 4-byte no-ops: fetched in order, nothing to compute.
[[gnu::noinline, gnu::aligned(64)]] void straight_lines() {
  asm volatile(".rept 128\n nopl 0(%%rax)\n .endr" ::: "memory");
}
// 8 lines, each ending in a taken jump to the next.
[[gnu::noinline, gnu::aligned(64)]] void jump_per_line() {
  asm volatile(
      ".rept 8\n"
      "  jmp 1f\n"
      "  .p2align 6\n"
      "1:\n"
      ".endr\n" ::
          : "memory");
}

struct Variant {
  const char* name;
  Function around;  // run before and after the map; null: the map alone
};

}  // namespace

int main(int argc, char** argv) {
  const int cycles = argc > 1 ? std::atoi(argv[1]) : 3000;
  const std::size_t size = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2) << 20;
  probe::check(cuInit(0), "cuInit");
  CUdevice device = 0;
  probe::check(cuDeviceGet(&device, 0), "cuDeviceGet");
  CUcontext context = nullptr;
  probe::check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  probe::check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
  CUmemGenericAllocationHandle handle = 0;
  probe::check(cuMemCreate(&handle, size, &prop, 0), "cuMemCreate");
  CUdeviceptr va = 0;
  probe::check(cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve");

  const std::vector<Variant> variants = {{"map alone", nullptr},
                                         {"+ 2 x 8 lines of straight code", straight_lines},
                                         {"+ 2 x 8 lines, a taken jump each", jump_per_line},
                                         {"+ 2 x 8 calls, a line each, one page", calls_on_one_page},
                                         {"+ 2 x 8 calls, a page each", calls_on_eight_pages},
                                         {"+ 2 x 8 indirect calls, a line each", indirect_calls}};
  std::vector<std::vector<double>> samples(variants.size());
  for (int cycle = 0; cycle < cycles; ++cycle) {
    for (std::size_t turn = 0; turn < variants.size(); ++turn) {
      const std::size_t index = (turn + static_cast<std::size_t>(cycle)) % variants.size();
      const Function around = variants[index].around;
      const auto start = probe::Clock::now();
      if (around != nullptr) around();
      probe::check(cuMemMap(va, size, 0, handle, 0), "cuMemMap");
      if (around != nullptr) around();
      samples[index].push_back(probe::ns_since(start));
      probe::check(cuMemUnmap(va, size), "cuMemUnmap");
    }
  }
  std::printf("%d cycles, %zu MiB\n", cycles, size >> 20);
  const double alone = probe::median(samples[0]);
  for (std::size_t index = 0; index < variants.size(); ++index) {
    const double median = probe::median(samples[index]);
    std::printf("  %-40s %8.1f ns  (%+6.1f)\n", variants[index].name, median, median - alone);
  }
  probe::check(cuMemAddressFree(va, size), "cuMemAddressFree");
  probe::check(cuMemRelease(handle), "cuMemRelease");
  return 0;
}
