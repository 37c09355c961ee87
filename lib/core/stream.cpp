#include "core/stream.hpp"

#include "backend/poll_until.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <new>

namespace hipxx::core {

// Defined with the runtime: makes the calling thread's current device the stream's, so backend
// calls made by stream work act on the stream's device.
void adopt_device(int device) noexcept;

namespace {
std::atomic<std::uint64_t> next_serial{1};
// Set on a worker thread once its own stream has been destroyed on it: run() must not touch
// the stream again.
thread_local bool own_stream_destroyed = false;
// The stream work this thread runs (a stream's own thread, or a callback's while it runs); device
// -1 where it runs none.
thread_local StreamWorkSource running_source;
}  // namespace

RunningStreamWork::RunningStreamWork(StreamWorkSource source) noexcept : was_source_(running_source) {
  running_source = source;
}

RunningStreamWork::~RunningStreamWork() { running_source = was_source_; }

std::optional<StreamWorkSource> RunningStreamWork::current() noexcept {
  return running_source.device >= 0 ? std::optional{running_source} : std::nullopt;
}

StreamWorkSource Stream::work_source(std::uint64_t point) const noexcept {
  return {.device = traits_.device,
          .waited_for_by_null_stream = traits_.is_null || blocking(),
          .stream = serial_,
          .point = point};
}

Stream::Stream(StreamTraits traits, std::unique_ptr<backend::Queue> queue)
    : traits_(std::move(traits)),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      queue_(std::move(queue)),
      worker_([this] { run(); }) {}

void Stream::note_ordered_after(const Stream& other, std::uint64_t point) {
  std::lock_guard lock{mutex_};
  std::uint64_t& known = ordered_after_[other.serial()];
  known = std::max(known, point);
}

std::uint64_t Stream::known_point(std::uint64_t other_serial) const {
  std::lock_guard lock{mutex_};
  const auto found = ordered_after_.find(other_serial);
  return found == ordered_after_.end() ? 0 : found->second;
}

void add_pool_once(std::vector<PoolRef>& pools, PoolRef pool) {
  const bool known =
      std::any_of(pools.begin(), pools.end(), [&](const PoolRef& noted) { return noted.serial == pool.serial; });
  if (!known) pools.push_back(pool);
}

void Stream::note_pool(PoolRef pool) {
  std::lock_guard lock{pools_mutex_};
  add_pool_once(pools_, pool);
}

void Stream::forget_pool(std::uint64_t serial) {
  std::lock_guard lock{pools_mutex_};
  std::erase_if(pools_, [&](const PoolRef& noted) { return noted.serial == serial; });
}

void Stream::adopt_pools_of(Stream& other) {
  for (const PoolRef& pool : other.pools()) note_pool(pool);
}

std::vector<PoolRef> Stream::pools() const {
  std::lock_guard lock{pools_mutex_};
  return pools_;
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
    // The task whose state held the last reference has run: the queue may count it done.
    if (queue_) queue_->complete(running_sequence_);
    while (!host_tasks_.empty()) run_front(lock);
    lock.unlock();
    worker_.detach();
    own_stream_destroyed = true;
  } else {
    worker_.join();
  }
}

std::uint64_t Stream::next_sequence() {
  const std::uint64_t sequence = enqueued_.load(std::memory_order_relaxed) + 1;
  enqueued_.store(sequence, std::memory_order_release);
  return sequence;
}

bool Stream::lane_idle_locked() const noexcept { return host_tasks_.empty() && !lane_running_; }

std::uint64_t Stream::enqueue(StreamTask task) {
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock{mutex_};
    sequence = push_host_task({.work = std::move(task)});
  }
  // After the unlock, so the woken worker does not wake only to wait for the lock.
  work_ready_.notify_one();
  return sequence;
}

std::uint64_t Stream::push_host_task(HostTask task) {
  const std::uint64_t sequence = sequence_after_tail();
  task.sequence = sequence;
  // The stream's thread waits for the queue to pass the work before the task: have it marked.
  mark_tail_locked();
  host_tasks_.push_back(std::move(task));
  host_task_count_.store(host_tasks_.size(), std::memory_order_relaxed);
  enqueued_.store(sequence, std::memory_order_release);
  return sequence;
}

hipError_t Stream::submit_held_back_locked(const QueueWork& on_queue, std::uint64_t sequence) noexcept {
  hipError_t queued = hipErrorNotSupported;
  try {
    queued = on_queue(*queue_, sequence);
  } catch (const std::bad_alloc&) {
    return hipErrorNotSupported;  // not queued: the host form runs in its place, on this thread
  }
  if (queued != hipSuccess) return queued;
  // On the queue now, so it is not run again in its host form, whatever the mark does: a failed
  // mark is the stream's failure, and one that could not be queued leaves marked_ behind, so that
  // the next wait marks again.
  try {
    note_failure(mark_submitted_locked(sequence), sequence);
  } catch (const std::bad_alloc&) {
  }
  return hipSuccess;
}

hipError_t Stream::submit_unmarked_locked(const QueueWork& on_queue, std::uint64_t sequence) {
  const hipError_t queued = on_queue(*queue_, sequence);
  if (queued == hipSuccess) device_tail_ = sequence;
  return queued;
}

hipError_t Stream::mark_submitted_locked(std::uint64_t sequence) {
  device_tail_ = sequence;
  if (const hipError_t marked = queue_->mark(sequence); marked != hipSuccess) return marked;
  marked_ = sequence;
  return hipSuccess;
}

void Stream::mark_tail_locked() const {
  // A failed mark leaves marked_ behind, so the next wait tries again; an abandoned queue's waits end at once.
  if (queue_ && marked_ < device_tail_ && queue_->mark(device_tail_) == hipSuccess) marked_ = device_tail_;
}

void Stream::mark_tail() const {
  std::lock_guard lock{mutex_};
  mark_tail_locked();
}

hipError_t Stream::enqueue(QueueWork on_queue, StreamTask on_host, std::uint64_t* sequence) {
  if (!queue_) {
    const std::uint64_t point = enqueue(std::move(on_host));
    if (sequence != nullptr) *sequence = point;
    return hipSuccess;
  }
  std::uint64_t point = 0;
  {
    std::lock_guard lock{mutex_};
    if (lane_idle_locked()) {
      // Nothing of the host's ahead of it: straight onto the queue. The number is taken only once
      // the queue accepted the work, so a refusal leaves the stream's count as it was.
      const hipError_t queued = on_queue(*queue_, sequence_after_tail());
      if (queued != hipErrorNotSupported) {
        if (queued != hipSuccess) return queued;
        point = next_sequence();
        if (sequence == nullptr) {
          device_tail_ = point;  // marked when something waits for it
          return hipSuccess;
        }
        if (const hipError_t marked = mark_submitted_locked(point); marked != hipSuccess) return marked;
        *sequence = point;
        return hipSuccess;
      }
      point = push_host_task({.work = std::move(on_host)});
    } else {
      // Held back behind the host's work; the stream's thread queues it once that is done.
      point = push_host_task({.work = std::move(on_host), .on_queue = std::move(on_queue)});
    }
  }
  work_ready_.notify_one();
  if (sequence != nullptr) *sequence = point;
  return hipSuccess;
}

std::uint64_t Stream::enqueue_wait(const std::shared_ptr<Stream>& other, std::uint64_t point,
                                   backend::Timestamp* recorded) {
  note_ordered_after(*other, point);
  auto on_host = [other, point] {
    other->wait_for(point);
    return hipSuccess;
  };
  if (!queue_ || !other->queue_ || other.get() == this) return enqueue(std::move(on_host));
  std::uint64_t sequence = 0;
  {
    // Both locks, taken together (std::scoped_lock avoids the order problem): the wait is placed in
    // this queue and recorded in the other's at one moment of both streams.
    std::scoped_lock both{mutex_, other->mutex_};
    // Taken once the work is queued, as push_host_task takes it.
    const std::uint64_t next = sequence_after_tail();
    // The point is the end of the other's device queue (or done): wait there, in a way the driver
    // sees. A queue wait covers everything queued so far, so where the other stream has queued more
    // since (a stream wait that holds it, say), it would wait for that too, which HIP does not: then,
    // as where the other's host thread still has work before the point, this stream's host thread
    // waits for the point, and this stream's later work is held back behind that wait.
    // A timestamp recorded at the point waits for that point alone, once the record is on the
    // other's queue (not still held back behind its host work).
    if (lane_idle_locked() && recorded != nullptr && point <= other->device_tail_ &&
        submit_unmarked_locked(
            [recorded](backend::Queue& queue, std::uint64_t /*sequence*/) { return queue.wait_timestamp(*recorded); },
            next) == hipSuccess) {
      return next_sequence();
    }
    if (lane_idle_locked() && other->device_tail_ == point &&
        submit_unmarked_locked(
            [&other](backend::Queue& queue, std::uint64_t /*sequence*/) { return queue.wait_queue(*other->queue_); },
            next) == hipSuccess) {
      return next_sequence();
    }
    sequence = push_host_task({.work = std::move(on_host)});
  }
  work_ready_.notify_one();
  return sequence;
}

bool Stream::abandoned() const { return queue_ && queue_->abandoned(); }

bool Stream::reached(std::uint64_t sequence) const {
  if (queue_) return queue_->progress() >= sequence;
  return completed_.load(std::memory_order_acquire) >= sequence;
}

void Stream::wait_on_queue(std::uint64_t sequence) const {
  // A queue the device gave up on never gets there: that ends the wait. A queue that still runs
  // the work behind a failure gets there, and the wait is for that work too.
  (void)backend::poll_until([&] { return queue_->progress() >= sequence; },
                            {.yielding_rounds = 4096, .longest_sleep = std::chrono::microseconds{200}},
                            [&] { return queue_->abandoned(); });
}

void Stream::wait_for(std::uint64_t sequence) const {
  if (queue_) {
    {
      // Beyond device_tail_ lies work of the stream's thread, which marks it as it goes.
      std::lock_guard lock{mutex_};
      if (sequence <= device_tail_) mark_tail_locked();
    }
    wait_on_queue(sequence);
    return;
  }
  std::unique_lock lock{mutex_};
  work_done_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed) >= sequence; });
}

std::uint64_t Stream::tail() const { return enqueued_.load(std::memory_order_acquire); }

bool Stream::idle() const {
  // Completed first: it never passes enqueued, so a stale pair can only under-report idleness.
  const std::uint64_t completed = queue_ ? queue_->progress() : completed_.load(std::memory_order_acquire);
  if (completed >= enqueued_.load(std::memory_order_acquire)) return true;
  if (!queue_) return false;
  // Not as far as the marks tell; but work put straight on the queue is not marked, so ask the
  // queue. Under the lock, so that no work goes on it between the answer and the mark below.
  std::lock_guard lock{mutex_};
  if (marked_ >= device_tail_ || device_tail_ != enqueued_.load(std::memory_order_relaxed)) return false;
  if (!queue_->finished()) {
    mark_tail_locked();  // later looks read the word, not the driver
    return false;
  }
  marked_ = device_tail_;
  queue_->complete(device_tail_);
  return true;
}

hipError_t Stream::status() const { return failure_through(std::numeric_limits<std::uint64_t>::max()); }

hipError_t Stream::work_failure_through(std::uint64_t sequence) const noexcept {
  const hipError_t failed = failure_.load(std::memory_order_acquire);
  return failed != hipSuccess && failed_at_.load(std::memory_order_relaxed) <= sequence ? failed : hipSuccess;
}

hipError_t Stream::failure_through(std::uint64_t sequence) const {
  if (const hipError_t failed = work_failure_through(sequence); failed != hipSuccess) return failed;
  return queue_ ? queue_->fault() : hipSuccess;
}

void Stream::note_failure(hipError_t result, std::uint64_t sequence) {
  if (result == hipSuccess || failure_.load(std::memory_order_relaxed) != hipSuccess) return;
  failed_at_.store(sequence, std::memory_order_relaxed);
  failure_.store(result, std::memory_order_release);
}

void Stream::wait_for_room() {
  if (RunningStreamWork::current()) return;
  // The count read without the lock: a producer that misses a task just pushed goes one over the
  // bound, and the common enqueue takes the lock only once.
  if (host_task_count_.load(std::memory_order_relaxed) >= kMaxHostTasks) {
    std::unique_lock lock{mutex_};
    ++waiting_for_room_;
    room_.wait(lock, [&] { return host_tasks_.size() < kMaxHostTasks; });
    --waiting_for_room_;
  }
  wait_for_queue_room();
}

void Stream::run() {
  const RunningStreamWork running{work_source()};
  adopt_device(traits_.device);
  std::unique_lock lock{mutex_};
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !host_tasks_.empty(); });
    if (host_tasks_.empty()) return;  // stopping, and everything queued has run
    if (!run_front(lock)) return;  // the stream was destroyed by its own task's state
  }
}

bool Stream::run_front(std::unique_lock<std::mutex>& lock) {
  HostTask task = std::move(host_tasks_.front());
  host_tasks_.pop_front();
  host_task_count_.store(host_tasks_.size(), std::memory_order_relaxed);
  if (waiting_for_room_ > 0 && host_tasks_.size() < kMaxHostTasks) room_.notify_all();
  lane_running_ = true;
  running_sequence_ = task.sequence;
  // Device work held back behind host work goes onto the queue now, in its turn, once the queue has
  // room (waited for without the lock, which the stream's other callers need meanwhile).
  if (task.on_queue) {
    lock.unlock();
    wait_for_queue_room();
    lock.lock();
    const hipError_t queued = submit_held_back_locked(task.on_queue, task.sequence);
    task.on_queue = nullptr;
    if (queued == hipSuccess) {
      task.work = nullptr;
      lane_running_ = false;
      work_done_.notify_all();
      return true;
    }
    if (queued != hipErrorNotSupported) note_failure(queued, task.sequence);  // and the host form runs in its place
  }
  lock.unlock();
  // Without a device queue, tasks run in order on this thread, so the one before has completed.
  if (queue_) wait_on_queue(task.sequence - 1);
  hipError_t result = hipErrorUnknown;
  try {
    const RunningStreamWork running{work_source(task.sequence)};
    result = task.work ? task.work() : hipSuccess;
  } catch (...) {
    result = hipErrorUnknown;
  }
  task.work = nullptr;  // captured state dies outside the lock, before waiters wake
  forget_resolved_stream();
  if (own_stream_destroyed) {
    // That state held the last reference: *this is gone, its destructor finished the queue.
    return false;
  }
  lock.lock();
  note_failure(result, task.sequence);
  if (queue_) {
    device_tail_ = task.sequence;
    marked_ = task.sequence;
    queue_->complete(task.sequence);
  } else {
    completed_ = task.sequence;
  }
  lane_running_ = false;
  work_done_.notify_all();
  return true;
}

}  // namespace hipxx::core
