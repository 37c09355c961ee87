// A reader-writer lock that lets a waiting writer in ahead of new readers. The books are read on
// every copy, for as long as the copy runs, and std::shared_mutex on glibc lets readers in first:
// a steady stream of copies could then keep a map, unmap or free waiting for ever.
//
// It is one 32-bit word, because the books are locked around calls that take well under a
// microsecond (a CUDA map, a pool allocation), and glibc's writer-preferring rwlock spent about a
// hundred instructions and two contended cache lines per lock and unlock there. Uncontended, taking
// and releasing the lock is one compare-and-swap and one atomic subtraction or and. Threads that
// must wait sleep on the word with futex(2) and say so in one bit, so that a release makes a system
// call only when someone sleeps.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace hipxx::core {

class WriterPreferringLock {
 public:
  WriterPreferringLock() = default;
  WriterPreferringLock(const WriterPreferringLock&) = delete;
  WriterPreferringLock& operator=(const WriterPreferringLock&) = delete;
  WriterPreferringLock(WriterPreferringLock&&) = delete;
  WriterPreferringLock& operator=(WriterPreferringLock&&) = delete;
  ~WriterPreferringLock() = default;

  // Not recursive: a thread holding it shared must not take it shared again while a writer waits.
  void lock() noexcept {
    std::uint32_t state = 0;
    if (state_.compare_exchange_strong(state, kWriter, std::memory_order_acquire, std::memory_order_relaxed)) return;
    lock_slowly();
  }

  bool try_lock() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    while ((state & (kWriter | kReaders)) == 0) {
      if (state_.compare_exchange_weak(state, state | kWriter, std::memory_order_acquire, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  void unlock() noexcept {
    const std::uint32_t before = state_.fetch_and(~(kWriter | kSleepers), std::memory_order_release);
    if ((before & kSleepers) != 0) wake_all();
  }

  void lock_shared() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    if ((state & (kWriter | kWriterWaits)) == 0 &&
        state_.compare_exchange_strong(state, state + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    lock_shared_slowly();
  }

  bool try_lock_shared() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    while ((state & (kWriter | kWriterWaits)) == 0) {
      if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  void unlock_shared() noexcept {
    const std::uint32_t after = state_.fetch_sub(1, std::memory_order_release) - 1;
    // The last reader out lets a waiting writer in; it wakes the sleepers, who sort out who goes.
    if ((after & kReaders) == 0 && (after & kSleepers) != 0) clear_sleepers_and_wake();
  }

 private:
  static constexpr std::uint32_t kReaders = (std::uint32_t{1} << 29) - 1;  // how many hold it shared
  static constexpr std::uint32_t kSleepers = std::uint32_t{1} << 29;  // someone sleeps on the word
  static constexpr std::uint32_t kWriter = std::uint32_t{1} << 30;  // a writer holds it
  static constexpr std::uint32_t kWriterWaits = std::uint32_t{1} << 31;  // a writer waits: readers stay out

  // The slow paths below are kept out of line: every VMM call takes this lock, mostly uncontended,
  // and their code inlined there would spread the calls' own paths over more cache lines.

  [[gnu::noinline, gnu::cold]] void lock_slowly() noexcept {
    waiting_writers_.fetch_add(1, std::memory_order_relaxed);
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((state & (kWriter | kReaders)) == 0) {
        // Free: take it, keeping the waiting bit for the other writers (cleared below if none).
        if (state_.compare_exchange_weak(state, state | kWriter, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
          break;
        }
        continue;
      }
      if ((state & kWriterWaits) == 0) {
        if (!state_.compare_exchange_weak(state, state | kWriterWaits, std::memory_order_relaxed)) continue;
        state |= kWriterWaits;
      }
      state = sleep_while(state);
    }
    // The last waiting writer in takes the waiting bit away. A writer that starts waiting meanwhile
    // sets it again in its own loop, so readers may slip in once in between: a delay, never a fault.
    if (waiting_writers_.fetch_sub(1, std::memory_order_relaxed) == 1) {
      state_.fetch_and(~kWriterWaits, std::memory_order_relaxed);
    }
  }

  [[gnu::noinline, gnu::cold]] void lock_shared_slowly() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((state & (kWriter | kWriterWaits)) == 0) {
        if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      state = sleep_while(state);
    }
  }

  // Marks the word as slept on and sleeps while it still reads `state` (plus the mark). Returns the
  // word as it is afterwards. The kernel compares the word before sleeping, so a release that came
  // in between (and so may have woken nobody) makes the wait return at once.
  std::uint32_t sleep_while(std::uint32_t state) noexcept {
    if ((state & kSleepers) == 0) {
      if (!state_.compare_exchange_strong(state, state | kSleepers, std::memory_order_relaxed)) return state;
      state |= kSleepers;
    }
    syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, state, nullptr, nullptr, 0);
    return state_.load(std::memory_order_relaxed);
  }

  [[gnu::noinline, gnu::cold]] void clear_sleepers_and_wake() noexcept {
    state_.fetch_and(~kSleepers, std::memory_order_relaxed);
    wake_all();
  }

  [[gnu::noinline, gnu::cold]] void wake_all() noexcept {
    syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }

  [[nodiscard]] std::uint32_t* word() noexcept { return reinterpret_cast<std::uint32_t*>(&state_); }

  std::atomic<std::uint32_t> state_{0};
  std::atomic<std::uint32_t> waiting_writers_{0};
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
};

}  // namespace hipxx::core
