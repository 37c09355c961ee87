#include "backend/cuda/wait_kernels.hpp"

#include "backend/cuda/cuda_queue.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hipxx::backend::cuda {
namespace {

// hipxx_wait_word<W>(address, value, mask, condition), for W of 32 and 64 bits: spins until the
// word at `address`, and-ed with `mask`, meets `condition` (WaitCondition's order: 0 at least,
// unsigned; 1 equal; 2 a bit in common with `value`; 3 a bit clear in both it and `value & mask`),
// sleeping 200 ns between reads. Each read is an acquire at system scope, so what a writer stored
// before the word (a host, another device, another stream) is visible to the work that follows the
// wait. Written for sm_70 (nanosleep, ld.acquire.sys), the oldest target with both.
constexpr std::string_view kWaitKernelTemplate = R"ptx(
.visible .entry hipxx_wait_word@W@(
	.param .u64 hipxx_wait_word@W@_address,
	.param .u@W@ hipxx_wait_word@W@_value,
	.param .u@W@ hipxx_wait_word@W@_mask,
	.param .u32 hipxx_wait_word@W@_condition)
{
	.reg .pred %p<5>;
	.reg .u32 %c;
	.reg .u64 %address;
	.reg .b@W@ %v<7>;
	ld.param.u64 %address, [hipxx_wait_word@W@_address];
	ld.param.u@W@ %v1, [hipxx_wait_word@W@_value];
	ld.param.u@W@ %v2, [hipxx_wait_word@W@_mask];
	ld.param.u32 %c, [hipxx_wait_word@W@_condition];
$spin:
	ld.acquire.sys.u@W@ %v3, [%address];
	and.b@W@ %v3, %v3, %v2;
	setp.eq.u32 %p1, %c, 0;
	setp.ge.u@W@ %p2, %v3, %v1;
	and.pred %p2, %p1, %p2;
	setp.eq.u32 %p1, %c, 1;
	setp.eq.u@W@ %p3, %v3, %v1;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	setp.eq.u32 %p1, %c, 2;
	and.b@W@ %v4, %v3, %v1;
	setp.ne.u@W@ %p3, %v4, 0;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	setp.eq.u32 %p1, %c, 3;
	and.b@W@ %v5, %v1, %v2;
	or.b@W@ %v5, %v5, %v3;
	not.b@W@ %v5, %v5;
	setp.ne.u@W@ %p3, %v5, 0;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	@%p2 bra $done;
	nanosleep.u32 200;
	bra.uni $spin;
$done:
	ret;
}
)ptx";

// The module: its header and the kernel for each word width.
std::string wait_kernels_ptx() {
  std::string ptx = ".version 6.3\n.target sm_70\n.address_size 64\n";
  for (const std::string_view width : {"32", "64"}) {
    std::string kernel{kWaitKernelTemplate};
    for (std::size_t at = kernel.find("@W@"); at != std::string::npos; at = kernel.find("@W@", at)) {
      kernel.replace(at, 3, width);
    }
    ptx += kernel;
  }
  return ptx;
}

// A launch the driver refuses (out of resources, say) leaves the wait to the host, which can always
// do it: the stream then holds its later work back itself.
hipError_t launched(CUresult result) noexcept { return result == CUDA_SUCCESS ? hipSuccess : hipErrorNotSupported; }

}  // namespace

bool WaitKernels::load() noexcept {
  std::call_once(loading_, [this] {
    CUmodule module = nullptr;
    if (api_.cuModuleLoadData(&module, wait_kernels_ptx().c_str()) != CUDA_SUCCESS) return;
    CUfunction word32 = nullptr;
    CUfunction word64 = nullptr;
    if (api_.cuModuleGetFunction(&word32, module, "hipxx_wait_word32") != CUDA_SUCCESS ||
        api_.cuModuleGetFunction(&word64, module, "hipxx_wait_word64") != CUDA_SUCCESS) {
      return;
    }
    word32_ = word32;
    word64_ = word64;
  });
  return word32_ != nullptr;
}

hipError_t WaitKernels::launch(CUstream stream, const void* address, std::size_t bytes, const WordWait& wait) {
  if (!load()) return hipErrorNotSupported;
  auto device_address = reinterpret_cast<std::uint64_t>(address);
  auto condition = static_cast<std::uint32_t>(wait.condition);
  if (bytes == sizeof(std::uint32_t)) {
    auto value = static_cast<std::uint32_t>(wait.value);
    auto mask = static_cast<std::uint32_t>(wait.mask);
    std::array<void*, 4> arguments{&device_address, &value, &mask, &condition};
    return launched(api_.cuLaunchKernel(word32_, 1, 1, 1, 1, 1, 1, 0, stream, arguments.data(), nullptr));
  }
  std::uint64_t value = wait.value;
  std::uint64_t mask = wait.mask;
  std::array<void*, 4> arguments{&device_address, &value, &mask, &condition};
  return launched(api_.cuLaunchKernel(word64_, 1, 1, 1, 1, 1, 1, 0, stream, arguments.data(), nullptr));
}

}  // namespace hipxx::backend::cuda
