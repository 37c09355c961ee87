#include "backend/deferred_close.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <thread>

namespace hipxx::backend {
namespace {

// Goes up in every child a fork makes: a thread started under an older generation belongs to the
// parent, and the child starts its own.
std::atomic<std::uint64_t> fork_generation_counter{1};

void count_fork() noexcept { fork_generation_counter.fetch_add(1, std::memory_order_relaxed); }

std::uint64_t fork_generation() noexcept {
  // Should registering fail, a child never counts as one: it hands descriptors to the parent's
  // thread, which it does not have, and they stay open until the closer is destroyed or the
  // child exits.
  static const int registered = pthread_atfork(nullptr, nullptr, count_fork);
  (void)registered;
  return fork_generation_counter.load(std::memory_order_relaxed);
}

}  // namespace

bool DeferredClose::start_detached(void (*body)(DeferredClose&), DeferredClose& closer) noexcept {
  try {
    std::thread{body, std::ref(closer)}.detach();
    return true;
  } catch (...) {
    return false;
  }
}

DeferredClose::DeferredClose(Pace pace, ThreadStarter start_thread) noexcept
    : pace_(pace), start_thread_(start_thread) {
  for (std::atomic<int>& slot : slots_) slot.store(-1, std::memory_order_relaxed);
}

DeferredClose::~DeferredClose() {
  if (thread_is_ours()) {
    state_.store(kStopping);
    state_.notify_one();
    thread_done_.wait(false);
  }
  (void)close_waiting();
}

void DeferredClose::close_later(int fd) noexcept {
  if (!ensure_thread()) {
    (void)close(fd);
    return;
  }
  const std::size_t start = next_slot_.load(std::memory_order_relaxed);
  for (std::size_t step = 0; step < kSlots; ++step) {
    const std::size_t index = (start + step) % kSlots;
    int empty = -1;
    if (slots_[index].load(std::memory_order_relaxed) == -1 && slots_[index].compare_exchange_strong(empty, fd)) {
      next_slot_.store((index + 1) % kSlots, std::memory_order_relaxed);
      // Another caller's thread start may have failed since this one's ensure_thread: that caller
      // then empties every slot, unless this store came after; then this caller does it.
      if (!thread_is_ours()) {
        (void)close_waiting();
        return;
      }
      // Paired with the thread's store of kAsleep before its last look at the slots: either it sees
      // this descriptor, or this sees it asleep and wakes it.
      if (state_.load() == kAsleep) {
        std::uint32_t asleep = kAsleep;
        if (state_.compare_exchange_strong(asleep, kPolling)) state_.notify_one();
      }
      return;
    }
  }
  (void)close(fd);  // every slot taken: a burst the thread has not caught up with
}

void DeferredClose::flush() noexcept {
  (void)close_waiting();
  // A pass the thread began before the loop above may still hold descriptors it took out.
  if (thread_is_ours()) thread_busy_.wait(true);
}

std::size_t DeferredClose::pending() const noexcept {
  std::size_t count = 0;
  for (const std::atomic<int>& slot : slots_) count += slot.load(std::memory_order_relaxed) >= 0 ? 1 : 0;
  return count;
}

void DeferredClose::run() noexcept {
  unsigned idle = 0;
  for (;;) {
    thread_busy_.store(true);
    const bool closed_some = close_waiting();
    thread_busy_.store(false);
    thread_busy_.notify_all();
    idle = closed_some ? 0 : idle + 1;
    std::uint32_t state = state_.load();
    if (state == kStopping) break;
    if (idle < pace_.idle_periods) {
      std::this_thread::sleep_for(pace_.poll_period);
      continue;
    }
    if (!state_.compare_exchange_strong(state, kAsleep)) continue;  // told to stop meanwhile
    if (any_waiting()) {
      std::uint32_t asleep = kAsleep;
      (void)state_.compare_exchange_strong(asleep, kPolling);
      idle = 0;
      continue;
    }
    state_.wait(kAsleep);
    idle = 0;
  }
  thread_done_.store(true);
  thread_done_.notify_all();
}

bool DeferredClose::close_waiting() noexcept {
  bool closed_some = false;
  for (std::atomic<int>& slot : slots_) {
    // Sequentially consistent (a plain load on x86): after a failed thread start, this look and a
    // racing hand-over's check of the thread (close_later) must not both miss the other.
    if (slot.load() < 0) continue;
    if (const int fd = slot.exchange(-1); fd >= 0) {
      (void)close(fd);
      closed_some = true;
    }
  }
  return closed_some;
}

bool DeferredClose::any_waiting() const noexcept {
  return std::ranges::any_of(slots_, [](const std::atomic<int>& slot) { return slot.load() >= 0; });
}

bool DeferredClose::thread_is_ours() const noexcept {
  // Sequentially consistent: close_later's store to a slot and this load, against ensure_thread's
  // undoing of a failed start and its emptying of the slots, must not both miss the other.
  return thread_generation_.load() == fork_generation();
}

bool DeferredClose::ensure_thread() noexcept {
  const std::uint64_t generation = fork_generation();
  std::uint64_t running = thread_generation_.load(std::memory_order_acquire);
  if (running == generation) return true;
  // The first hand-over in this process (or in this child) starts the thread; a racing one sees the
  // generation already claimed and hands over to the thread about to run.
  if (!thread_generation_.compare_exchange_strong(running, generation)) return thread_generation_.load() == generation;
  // A child inherits the parent's flags as they stood; its own thread starts from scratch.
  state_.store(kPolling);
  thread_busy_.store(false);
  thread_done_.store(false);
  if (start_thread_([](DeferredClose& closer) { closer.run(); }, *this)) return true;
  thread_generation_.store(running);
  // A racing caller may have seen the generation claimed and handed its descriptor over to the
  // thread that did not start.
  (void)close_waiting();
  return false;
}

}  // namespace hipxx::backend
