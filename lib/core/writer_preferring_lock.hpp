// A reader-writer lock that lets a waiting writer in ahead of new readers. The books are read on
// every copy, for as long as the copy runs, and std::shared_mutex on glibc lets readers in first:
// a steady stream of copies could then keep a map, unmap or free waiting for ever.
//
// One 32-bit word and a futex, as Rust's standard library builds its RwLock (the same protocol):
// an uncontended lock or unlock is one atomic read-modify-write, where glibc's pthread_rwlock takes
// about 45 instructions and two or three such operations per lock or unlock. Every VMM call takes
// this lock once, around a system call or two of the host backend that cost about 150 ns each, so
// the lock is a measurable part of what the books add (bench/vmm_ops.cpp).
//
// state: the low 30 bits count readers, or are all ones while a writer holds the lock; bit 30 says
// readers sleep on `state_`, bit 31 that writers sleep on `writer_notify_`. A reader does not enter
// while either bit is set, which is what lets a waiting writer in first.
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
  WriterPreferringLock() noexcept = default;
  WriterPreferringLock(const WriterPreferringLock&) = delete;
  WriterPreferringLock& operator=(const WriterPreferringLock&) = delete;

  // Not recursive: a thread holding it shared must not take it shared again while a writer waits.
  void lock() noexcept {
    std::uint32_t expected = 0;
    if (!state_.compare_exchange_weak(expected, kWriteLocked, std::memory_order_acquire, std::memory_order_relaxed)) {
      lock_contended();
    }
  }

  bool try_lock() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    while (unlocked(state)) {
      if (state_.compare_exchange_weak(state, state + kWriteLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  void unlock() noexcept {
    const std::uint32_t state = state_.fetch_sub(kWriteLocked, std::memory_order_release) - kWriteLocked;
    if ((state & (kReadersWaiting | kWritersWaiting)) != 0) wake_writer_or_readers(state);
  }

  void lock_shared() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    if (!read_lockable(state) || !state_.compare_exchange_weak(state, state + kReadLocked, std::memory_order_acquire,
                                                               std::memory_order_relaxed)) {
      lock_shared_contended();
    }
  }

  bool try_lock_shared() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    while (read_lockable(state)) {
      if (state_.compare_exchange_weak(state, state + kReadLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  void unlock_shared() noexcept {
    const std::uint32_t state = state_.fetch_sub(kReadLocked, std::memory_order_release) - kReadLocked;
    // Readers only sleep while a writer waits too, so the last reader out wakes a writer.
    if (unlocked(state) && (state & kWritersWaiting) != 0) wake_writer_or_readers(state);
  }

 private:
  static constexpr std::uint32_t kReadLocked = 1;
  static constexpr std::uint32_t kMask = (std::uint32_t{1} << 30) - 1;
  static constexpr std::uint32_t kWriteLocked = kMask;
  static constexpr std::uint32_t kMaxReaders = kMask - 1;
  static constexpr std::uint32_t kReadersWaiting = std::uint32_t{1} << 30;
  static constexpr std::uint32_t kWritersWaiting = std::uint32_t{1} << 31;
  static constexpr int kSpins = 100;

  static bool unlocked(std::uint32_t state) noexcept { return (state & kMask) == 0; }
  static bool write_locked(std::uint32_t state) noexcept { return (state & kMask) == kWriteLocked; }
  static bool read_lockable(std::uint32_t state) noexcept {
    return (state & kMask) < kMaxReaders && (state & (kReadersWaiting | kWritersWaiting)) == 0;
  }

  static void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
    // Returns at once if the word no longer holds `expected`; spurious wake-ups are fine: callers loop.
    (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
  }
  static long futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
    return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
  }

  template <class Done>
  std::uint32_t spin_until(Done done) const noexcept {
    for (int spin = kSpins;; --spin) {
      const std::uint32_t state = state_.load(std::memory_order_relaxed);
      if (done(state) || spin == 0) return state;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

  __attribute__((noinline)) void lock_shared_contended() noexcept {
    const auto settled = [](std::uint32_t s) {
      return !write_locked(s) || (s & (kReadersWaiting | kWritersWaiting)) != 0;
    };
    std::uint32_t state = spin_until(settled);
    for (;;) {
      if (read_lockable(state)) {
        if (state_.compare_exchange_weak(state, state + kReadLocked, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      // Say that a reader sleeps before sleeping, so that the unlocking side knows to wake it.
      if ((state & kReadersWaiting) == 0 &&
          !state_.compare_exchange_strong(state, state | kReadersWaiting, std::memory_order_relaxed)) {
        continue;
      }
      futex_wait(state_, state | kReadersWaiting);
      state = spin_until(settled);
    }
  }

  __attribute__((noinline)) void lock_contended() noexcept {
    const auto settled = [](std::uint32_t s) { return unlocked(s) || (s & kWritersWaiting) != 0; };
    std::uint32_t state = spin_until(settled);
    std::uint32_t other_writers_waiting = 0;
    for (;;) {
      if (unlocked(state)) {
        // Keep the writers-waiting bit once we have slept: other writers may still be asleep.
        if (state_.compare_exchange_weak(state, state | kWriteLocked | other_writers_waiting,
                                         std::memory_order_acquire, std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      if ((state & kWritersWaiting) == 0 &&
          !state_.compare_exchange_strong(state, state | kWritersWaiting, std::memory_order_relaxed)) {
        continue;
      }
      other_writers_waiting = kWritersWaiting;
      // Read the notification count before looking at the state again, so no wake-up is missed.
      const std::uint32_t seen = writer_notify_.load(std::memory_order_acquire);
      state = state_.load(std::memory_order_relaxed);
      if (unlocked(state) || (state & kWritersWaiting) == 0) continue;
      futex_wait(writer_notify_, seen);
      state = spin_until(settled);
    }
  }

  // Called by whoever unlocked the lock last, with the waiting bits it saw.
  __attribute__((noinline)) void wake_writer_or_readers(std::uint32_t state) noexcept {
    // Writers take the lock whatever the waiting bits say; readers may add their bit at any time. If
    // the lock is taken meanwhile, its holder wakes the sleepers when it unlocks.
    if (state == kWritersWaiting) {
      if (state_.compare_exchange_strong(state, 0, std::memory_order_relaxed)) {
        wake_writer();
        return;
      }
    }
    if (state == (kReadersWaiting | kWritersWaiting)) {
      // Both wait: wake one writer and leave the readers waiting.
      if (!state_.compare_exchange_strong(state, kReadersWaiting, std::memory_order_relaxed)) return;
      if (wake_writer()) return;
      // No writer was asleep in the futex (it may be about to take the lock): wake the readers.
      state = kReadersWaiting;
    }
    if (state == kReadersWaiting) {
      if (state_.compare_exchange_strong(state, 0, std::memory_order_relaxed)) (void)futex_wake(state_, INT_MAX);
    }
  }

  // Whether a writer was woken.
  bool wake_writer() noexcept {
    writer_notify_.fetch_add(1, std::memory_order_release);
    return futex_wake(writer_notify_, 1) > 0;
  }

  std::atomic<std::uint32_t> state_{0};
  std::atomic<std::uint32_t> writer_notify_{0};
};

}  // namespace hipxx::core
