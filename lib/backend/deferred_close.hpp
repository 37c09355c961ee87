// Closes file descriptors on a thread of its own, so that a call which merely has to let go of one
// does not pay for close(2) itself. On the CUDA backend, releasing an imported handle is a 6 us
// driver call; the fd the import keeps (what lets the handle be exported again) would add a quarter
// of a microsecond more, 4% of the call, on the caller's thread.
//
// While descriptors keep arriving, the thread wakes every `poll_period` and closes what has
// gathered, so handing one over is a push under an uncontended lock: no system call. After
// `idle_periods` wakes with nothing to do it sleeps until the next hand-over, which then pays one
// wake-up. A descriptor stays open at most about one period after its hand-over while the thread
// runs; whatever it keeps alive (the CUDA driver frees an exported allocation only when its last fd
// closes) lives that much longer.
//
// The thread starts at the first hand-over, and again in a child after fork (which inherits the
// list but not the thread). Where no thread can be had, descriptors are closed on the spot.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace hipxx::backend {

class DeferredClose {
 public:
  struct Pace {
    std::chrono::microseconds poll_period{500};
    unsigned idle_periods = 100;  // about 50 ms of polling with nothing to close, then sleep
  };

  // Descriptors waiting at once; a hand-over beyond this closes on the spot.
  static constexpr std::size_t kSlots = 256;

  // Runs `body(closer)` on a new thread that nobody joins; false where no thread could be started.
  using ThreadStarter = bool (*)(void (*body)(DeferredClose&), DeferredClose& closer);
  // The starter every closer uses but a test's: std::thread, detached.
  static bool start_detached(void (*body)(DeferredClose&), DeferredClose& closer) noexcept;

  DeferredClose() noexcept : DeferredClose(Pace{}) {}
  explicit DeferredClose(Pace pace, ThreadStarter start_thread = &start_detached) noexcept;
  // Stops the thread, then closes whatever is still waiting.
  ~DeferredClose();
  DeferredClose(const DeferredClose&) = delete;
  DeferredClose& operator=(const DeferredClose&) = delete;
  DeferredClose(DeferredClose&&) = delete;
  DeferredClose& operator=(DeferredClose&&) = delete;

  // Takes ownership of `fd` and closes it soon. Never fails: with every slot taken or no thread to
  // be had, it closes `fd` now.
  void close_later(int fd) noexcept;

  // Closes everything handed over before the call, on the calling thread where the thread has not
  // taken it yet; returns once all of it is closed.
  void flush() noexcept;

  // Descriptors handed over and not yet taken for closing.
  [[nodiscard]] std::size_t pending() const noexcept;

 private:
  enum State : std::uint32_t { kPolling, kAsleep, kStopping };

  void run() noexcept;
  // Closes every descriptor waiting in a slot; says whether there was any.
  bool close_waiting() noexcept;
  [[nodiscard]] bool any_waiting() const noexcept;
  // Makes sure this process has a thread; false where none could be started.
  [[nodiscard]] bool ensure_thread() noexcept;
  [[nodiscard]] bool thread_is_ours() const noexcept;

  const Pace pace_;
  const ThreadStarter start_thread_;
  // Lock-free on both sides, so that a fork can never leave the child a list locked by a thread it
  // does not have. -1 marks an empty slot.
  std::array<std::atomic<int>, kSlots> slots_;
  std::atomic<std::size_t> next_slot_{0};  // where the next hand-over starts looking
  std::atomic<std::uint32_t> state_{kPolling};
  // The fork generation (see the .cpp) whose process runs the thread; 0: no thread yet.
  std::atomic<std::uint64_t> thread_generation_{0};
  std::atomic<bool> thread_busy_{false};  // a pass over the slots is under way on the thread
  std::atomic<bool> thread_done_{false};
};

}  // namespace hipxx::backend
