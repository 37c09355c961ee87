#include "backend/cuda/wait_kernels.hpp"

#include "backend/cuda/cuda_queue.hpp"

#include <cstdint>

namespace hipxx::backend::cuda {
namespace {

// hipxx_wait_word32/64(address, value, mask, condition): spins until the word at `address`, and-ed
// with `mask`, meets `condition` (WaitCondition's order: 0 at least, unsigned; 1 equal; 2 a bit in
// common with `value`; 3 a bit clear in both it and `value & mask`), sleeping 200 ns between reads.
// Written for sm_70 (nanosleep, ld.relaxed.sys), the oldest target with both.
constexpr const char* kWaitKernelsPtx = R"ptx(
.version 6.3
.target sm_70
.address_size 64

.visible .entry hipxx_wait_word32(
	.param .u64 hipxx_wait_word32_address,
	.param .u32 hipxx_wait_word32_value,
	.param .u32 hipxx_wait_word32_mask,
	.param .u32 hipxx_wait_word32_condition)
{
	.reg .pred %p<5>;
	.reg .u32 %c;
	.reg .u64 %address;
	.reg .b32 %v<7>;
	ld.param.u64 %address, [hipxx_wait_word32_address];
	ld.param.u32 %v1, [hipxx_wait_word32_value];
	ld.param.u32 %v2, [hipxx_wait_word32_mask];
	ld.param.u32 %c, [hipxx_wait_word32_condition];
$spin:
	ld.relaxed.sys.u32 %v3, [%address];
	and.b32 %v3, %v3, %v2;
	setp.eq.u32 %p1, %c, 0;
	setp.ge.u32 %p2, %v3, %v1;
	and.pred %p2, %p1, %p2;
	setp.eq.u32 %p1, %c, 1;
	setp.eq.u32 %p3, %v3, %v1;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	setp.eq.u32 %p1, %c, 2;
	and.b32 %v4, %v3, %v1;
	setp.ne.u32 %p3, %v4, 0;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	setp.eq.u32 %p1, %c, 3;
	and.b32 %v5, %v1, %v2;
	or.b32 %v5, %v5, %v3;
	not.b32 %v5, %v5;
	setp.ne.u32 %p3, %v5, 0;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	@%p2 bra $done;
	nanosleep.u32 200;
	bra.uni $spin;
$done:
	ret;
}

.visible .entry hipxx_wait_word64(
	.param .u64 hipxx_wait_word64_address,
	.param .u64 hipxx_wait_word64_value,
	.param .u64 hipxx_wait_word64_mask,
	.param .u32 hipxx_wait_word64_condition)
{
	.reg .pred %p<5>;
	.reg .u32 %c;
	.reg .u64 %address;
	.reg .b64 %v<7>;
	ld.param.u64 %address, [hipxx_wait_word64_address];
	ld.param.u64 %v1, [hipxx_wait_word64_value];
	ld.param.u64 %v2, [hipxx_wait_word64_mask];
	ld.param.u32 %c, [hipxx_wait_word64_condition];
$spin:
	ld.relaxed.sys.u64 %v3, [%address];
	and.b64 %v3, %v3, %v2;
	setp.eq.u32 %p1, %c, 0;
	setp.ge.u64 %p2, %v3, %v1;
	and.pred %p2, %p1, %p2;
	setp.eq.u32 %p1, %c, 1;
	setp.eq.u64 %p3, %v3, %v1;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	setp.eq.u32 %p1, %c, 2;
	and.b64 %v4, %v3, %v1;
	setp.ne.u64 %p3, %v4, 0;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	setp.eq.u32 %p1, %c, 3;
	and.b64 %v5, %v1, %v2;
	or.b64 %v5, %v5, %v3;
	not.b64 %v5, %v5;
	setp.ne.u64 %p3, %v5, 0;
	and.pred %p3, %p1, %p3;
	or.pred %p2, %p2, %p3;
	@%p2 bra $done;
	nanosleep.u32 200;
	bra.uni $spin;
$done:
	ret;
}
)ptx";

}  // namespace

bool WaitKernels::load() noexcept {
  std::call_once(loading_, [this] {
    CUmodule module = nullptr;
    if (api_.cuModuleLoadData(&module, kWaitKernelsPtx) != CUDA_SUCCESS) return;
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
    void* arguments[] = {&device_address, &value, &mask, &condition};
    return to_hip(api_.cuLaunchKernel(word32_, 1, 1, 1, 1, 1, 1, 0, stream, arguments, nullptr));
  }
  std::uint64_t value = wait.value;
  std::uint64_t mask = wait.mask;
  void* arguments[] = {&device_address, &value, &mask, &condition};
  return to_hip(api_.cuLaunchKernel(word64_, 1, 1, 1, 1, 1, 1, 0, stream, arguments, nullptr));
}

}  // namespace hipxx::backend::cuda
