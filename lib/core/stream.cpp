#include "core/stream.hpp"

#include <algorithm>
#include <atomic>

namespace hipxx::core {

// Defined with the runtime: makes the calling thread's current device the stream's, so backend
// calls made by stream work act on the stream's device.
void adopt_device(int device) noexcept;

namespace {
std::atomic<std::uint64_t> next_serial{1};
// Set on a worker thread once its own stream has been destroyed on it: run() must not touch
// the stream again.
thread_local bool own_stream_destroyed = false;
}  // namespace

Stream::Stream(StreamTraits traits)
    : traits_(std::move(traits)), serial_(next_serial.fetch_add(1, std::memory_order_relaxed)), worker_([this] { run(); }) {}

void Stream::note_ordered_after(const Stream& other, std::uint64_t point) {
  std::lock_guard lock{mutex_};
  std::uint64_t& known = ordered_after_[other.serial()];
  known = std::max(known, point);
}

std::uint64_t Stream::known_point(const Stream& other) const {
  std::lock_guard lock{mutex_};
  const auto found = ordered_after_.find(other.serial());
  return found == ordered_after_.end() ? 0 : found->second;
}

Stream::~Stream() {
  {
    std::lock_guard lock{mutex_};
    stopping_ = true;
  }
  work_ready_.notify_all();
  // The last owner can be state captured by this stream's own task (an event marker, a wait on
  // itself); then this is the worker thread, which cannot join itself. It finishes the queue here,
  // as the worker would have, and leaves run() without touching *this again.
  if (worker_.get_id() == std::this_thread::get_id()) {
    std::unique_lock lock{mutex_};
    while (!queue_.empty()) run_front(lock);
    lock.unlock();
    worker_.detach();
    own_stream_destroyed = true;
  } else {
    worker_.join();
  }
}

std::uint64_t Stream::enqueue(StreamTask task) {
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock{mutex_};
    sequence = enqueued_.load(std::memory_order_relaxed) + 1;
    enqueued_.store(sequence, std::memory_order_release);
    queue_.emplace_back(sequence, std::move(task));
  }
  work_ready_.notify_one();
  return sequence;
}

bool Stream::reached(std::uint64_t sequence) const { return completed_.load(std::memory_order_acquire) >= sequence; }

void Stream::wait_for(std::uint64_t sequence) const {
  std::unique_lock lock{mutex_};
  work_done_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed) >= sequence; });
}

std::uint64_t Stream::tail() const { return enqueued_.load(std::memory_order_acquire); }

bool Stream::idle() const {
  // Completed first: it never passes enqueued, so a stale pair can only under-report idleness.
  const std::uint64_t completed = completed_.load(std::memory_order_acquire);
  return completed == enqueued_.load(std::memory_order_acquire);
}

hipError_t Stream::status() const {
  std::lock_guard lock{mutex_};
  return status_;
}

void Stream::run() {
  adopt_device(traits_.device);
  std::unique_lock lock{mutex_};
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    if (!run_front(lock)) return;  // the stream was destroyed by its own task's state
  }
}

bool Stream::run_front(std::unique_lock<std::mutex>& lock) {
  auto [sequence, task] = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  hipError_t result = hipErrorUnknown;
  try {
    result = task();
  } catch (...) {
    result = hipErrorUnknown;
  }
  task = nullptr;  // captured state dies outside the lock, before waiters wake
  if (own_stream_destroyed) return false;  // that state held the last reference: *this is gone
  lock.lock();
  if (result != hipSuccess) status_ = result;
  completed_ = sequence;
  work_done_.notify_all();
  return true;
}

}  // namespace hipxx::core
