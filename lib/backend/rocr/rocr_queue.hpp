// The ROCr backend's device queues and timestamps: stream work as ROCr's own asynchronous operations,
// ordered by HSA signals, with no host thread of hipxx's in the way.
#pragma once

#include "backend/backend.hpp"
#include "backend/rocr/hsa_runtime.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace hipxx::backend::rocr {

// Waits until `signal` is below 1: down to 0 when the work is done, below 0 where it failed on the
// device. HSA lets a single wait return before its condition holds, so this asks until it does.
[[nodiscard]] hsa_signal_value_t wait_until_down(const RuntimeApi& api, hsa_signal_t signal) noexcept;

// Signals are kept and used again rather than destroyed: creating one is a kernel call on ROCr (an
// interrupt event each), and a signal the runtime has just decremented for us may still be in the
// runtime's hands for a moment after its value changed, which a destroy would pull from under it
// (ROCr lowers a prefetch's signal on a thread of its own, then notifies that signal's waiters).
// The synchronous waits of the backend take theirs from here too, for the same reason.
class SignalPool {
 public:
  explicit SignalPool(const RuntimeApi& api) : api_(api) {}
  SignalPool(const SignalPool&) = delete;
  SignalPool& operator=(const SignalPool&) = delete;
  SignalPool(SignalPool&&) = delete;
  SignalPool& operator=(SignalPool&&) = delete;
  ~SignalPool();

  // One owner's hold on a signal; the signal goes back to the pool when the last one lets go.
  class Held {
   public:
    Held(SignalPool& pool, hsa_signal_t signal) noexcept : pool_(pool), signal_(signal) {}
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    Held(Held&&) = delete;
    Held& operator=(Held&&) = delete;
    ~Held() { pool_.give_back(signal_); }
    [[nodiscard]] hsa_signal_t get() const noexcept { return signal_; }

   private:
    SignalPool& pool_;
    hsa_signal_t signal_;
  };

  // A signal of value `initial`, or null where ROCr cannot make one.
  [[nodiscard]] std::shared_ptr<Held> take(hsa_signal_value_t initial);

 private:
  void give_back(hsa_signal_t signal) noexcept;

  const RuntimeApi& api_;
  std::mutex mutex_;
  std::vector<hsa_signal_t> free_;  // with room for every signal made, so that give_back cannot fail
  std::size_t made_ = 0;
};

using SignalRef = std::shared_ptr<SignalPool::Held>;

// One part of a copy that one agent's copy engine does: within one allocation or mapping on each side.
struct CopyPiece {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  hsa_agent_t engine{};
};

// The block of a value a fill by copies starts from.
inline constexpr std::size_t kFillPatternBytes = 4096;

// The bytes a fill by copies of `bytes` copies next, with `filled` done: the pattern's block first,
// then as many as are filled already (each copy doubles them), up to the end.
[[nodiscard]] inline std::size_t next_fill_block(std::size_t filled, std::size_t bytes) noexcept {
  return filled == 0 ? std::min(bytes, kFillPatternBytes) : std::min(filled, bytes - filled);
}

// What a queue needs of the backend that made it (which outlives its queues).
class QueueSupport {
 public:
  QueueSupport() = default;
  QueueSupport(const QueueSupport&) = delete;
  QueueSupport& operator=(const QueueSupport&) = delete;
  QueueSupport(QueueSupport&&) = delete;
  QueueSupport& operator=(QueueSupport&&) = delete;
  virtual ~QueueSupport() = default;

  [[nodiscard]] virtual const RuntimeApi& runtime_api() const noexcept = 0;
  [[nodiscard]] virtual SignalPool& signal_pool() noexcept = 0;
  // The pieces of a copy between device memory that engines can do as they are, or nothing where
  // some part needs the host (application memory, or device memory no one GPU reaches on both sides).
  [[nodiscard]] virtual std::optional<std::vector<CopyPiece>> plan_copy(void* dst, const void* src,
                                                                        std::size_t bytes) = 0;
  // The pieces of a fill of device memory, each with an engine that may write it (`src` unused), or
  // nothing where some part is not device memory a GPU may write.
  [[nodiscard]] virtual std::optional<std::vector<CopyPiece>> plan_fill(void* dst, std::size_t bytes) = 0;
  // kFillPatternBytes of `value` that every GPU may copy from; null where none can be had.
  [[nodiscard]] virtual const void* fill_pattern(unsigned char value) = 0;
  // Eight bytes every GPU may copy from, for the value of a word a queue writes; they go back to the
  // backend when the last owner lets go. Null where none can be had.
  [[nodiscard]] virtual std::shared_ptr<void> word_source() = 0;
  // A device's GPU agent; the CPU agent for hipCpuDeviceId.
  [[nodiscard]] virtual hsa_agent_t agent_for(int device) const noexcept = 0;
};

// A queue for one device's streams, or null where ROCr cannot make the signals it starts with.
[[nodiscard]] std::unique_ptr<Queue> make_queue(QueueSupport& support, int device);
[[nodiscard]] std::unique_ptr<Timestamp> make_timestamp(bool timing);

}  // namespace hipxx::backend::rocr
