// The numbers that stand for streams, events and pools in the C ABI (hipStream_t, hipEvent_t,
// hipMemPool_t). Each kind counts up in steps of 16 with low four bits of its own, so a handle of one
// kind passed as another (or a stale one) never names a live object of that other kind, however
// many of each a process makes; and none is reused while the runtime lives.
#pragma once

#include <cstdint>

namespace hipxx::core {

enum class HandleKind : std::uintptr_t { pool = 0x0, stream = 0x4, imported_pool = 0x8, event = 0xC };

class HandleNumbers {
 public:
  // `first`'s low four bits are replaced by the kind's.
  constexpr HandleNumbers(HandleKind kind, std::uintptr_t first) noexcept
      : next_{(first & ~kKindBits) | static_cast<std::uintptr_t>(kind)} {}

  [[nodiscard]] std::uintptr_t take() noexcept {
    const std::uintptr_t number = next_;
    next_ += kStep;
    return number;
  }

 private:
  static constexpr std::uintptr_t kStep = 16;
  static constexpr std::uintptr_t kKindBits = kStep - 1;
  std::uintptr_t next_;
};

}  // namespace hipxx::core
