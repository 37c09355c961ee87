// One stream: an ordered queue of work. Where the backend has device queues of its own (CUDA
// streams), the stream's device work goes straight onto one, numbered, and the queue writes the
// numbers the books wait for to a progress word as it passes them; the host thread then runs only
// the little work the host must do itself (bookkeeping, and waits the device cannot express).
// Where it has none (the host backend), every piece of work is a host task run in order by the
// stream's own thread, and calls the backend's synchronous operations. Either way the books see
// the same numbered points.
#pragma once

#include "backend/backend.hpp"

#include <hipxx/hip_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hipxx::core {

// A unit of stream work. Its result becomes the stream's status, which later callbacks receive.
using StreamTask = std::function<hipError_t()>;
// The same work put on a device queue as the stream's work number `sequence`. hipErrorNotSupported:
// the queue cannot do it (nothing was queued), and the stream runs the host form in its place.
// One that throws std::bad_alloc has queued nothing either.
using QueueWork = std::function<hipError_t(backend::Queue&, std::uint64_t sequence)>;

// A pool a stream has used, by its base address and its never-reused serial (a base comes back
// once a destroyed pool's range is freed).
struct PoolRef {
  std::uintptr_t base = 0;
  std::uint64_t serial = 0;
};

// Adds `pool` to `pools` unless a pool of its serial is there already.
void add_pool_once(std::vector<PoolRef>& pools, PoolRef pool);

struct StreamTraits {
  int device = 0;
  unsigned flags = hipStreamDefault;
  int priority = 0;
  std::vector<std::uint32_t> cu_mask{};
  bool is_null = false;
};

// Drops the calling thread's cached resolution of a stream handle (core/stream_registry.cpp). A
// thread that runs stream work does so after each piece of it: it may never resolve another handle,
// and its cache would keep a stream that its work named alive after the stream was destroyed.
void forget_resolved_stream() noexcept;

// What a thread that runs stream work knows of the stream it runs: calls that would wait for that
// stream from there (a device synchronize, say, from a callback) would wait for themselves.
struct StreamWorkSource {
  int device = -1;
  bool waited_for_by_null_stream = false;  // the null stream itself, or a blocking stream
  // The running work's stream (its serial) and the point after that work; 0 where no one task runs
  // (the stream's thread between tasks).
  std::uint64_t stream = 0;
  std::uint64_t point = 0;
};

// Marks the calling thread as running stream work (a callback the driver calls, say) of `source`
// while it lives: such a thread never waits for room on a stream (see Stream::wait_for_room).
class RunningStreamWork {
 public:
  explicit RunningStreamWork(StreamWorkSource source) noexcept;
  RunningStreamWork(const RunningStreamWork&) = delete;
  RunningStreamWork& operator=(const RunningStreamWork&) = delete;
  RunningStreamWork(RunningStreamWork&&) = delete;
  RunningStreamWork& operator=(RunningStreamWork&&) = delete;
  ~RunningStreamWork();

  // The stream work the calling thread runs, if it runs any (StreamRegistry::waits_for_running_work
  // asks whether a wait would reach it).
  [[nodiscard]] static std::optional<StreamWorkSource> current() noexcept;

 private:
  StreamWorkSource was_source_;
};

class Stream {
 public:
  explicit Stream(StreamTraits traits, std::unique_ptr<backend::Queue> queue = nullptr);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&&) = delete;
  Stream& operator=(Stream&&) = delete;
  // Lets queued work finish, then stops the worker.
  ~Stream();

  // Work runs in the order it is enqueued; the number names the point after this task. With a
  // device queue, the queue holds later work until the host task has run.
  std::uint64_t enqueue(StreamTask task);
  // Device work: on the queue where there is one, else (or where the queue cannot do it) `on_host`
  // as above. Behind host work still to run, it is kept (so it must own what it uses) and queued
  // once that work is done. An error is the queue refusing the work, and nothing was queued.
  // A caller that asks for the work's number (`sequence`) gets a point it can wait for on its own
  // (an event's); other device work is only marked when something waits for it (see marked_).
  [[nodiscard]] hipError_t enqueue(QueueWork on_queue, StreamTask on_host, std::uint64_t* sequence = nullptr);
  // Returns once the stream has room for one more piece of work: fewer than kMaxHostTasks waiting
  // for its thread, and room on its device queue (see backend::Queue::wait_for_room). Call it
  // holding no lock, before enqueueing. A thread that runs stream work (a stream's own thread, a
  // callback) does not wait: the work it waits behind may be waiting for it.
  void wait_for_room();
  // Later work on this stream runs after `other` reached `point`. `recorded` is the device timestamp
  // recorded at that point, where there is one (an event's): the queue can wait for it even after
  // `other` has queued more work.
  std::uint64_t enqueue_wait(const std::shared_ptr<Stream>& other, std::uint64_t point,
                             backend::Timestamp* recorded = nullptr);
  // The device queue, or null where the stream's work runs on its host thread.
  [[nodiscard]] backend::Queue* queue() const noexcept { return queue_.get(); }
  // Whether the work up to `sequence` is done; for a point the caller holds (an event's, the tail
  // when it was marked), not an arbitrary number.
  [[nodiscard]] bool reached(std::uint64_t sequence) const;
  // hipStreamQuery: hipErrorNotReady while work is pending; once it is done, the failure of any of
  // it (hipSuccess where none failed). A queue the device gave up on never gets done: its fault is
  // the answer then.
  [[nodiscard]] hipError_t query() const { return idle() || abandoned() ? status() : hipErrorNotReady; }
  // Whether the device gave up on the stream's queue (a CUDA fault): nothing queued there runs any
  // more, and its progress word is never written again. Asks the driver: not for the paths a CUDA
  // callback may take (the driver may hang a call made there), only for the application's queries.
  [[nodiscard]] bool abandoned() const;
  // Has the queue mark everything put on it so far, so that the tail read next can be waited for
  // with reached() (a pool's free, which is reused once the stream has got there).
  void mark_tail() const;
  void wait_for(std::uint64_t sequence) const;
  [[nodiscard]] std::uint64_t tail() const;
  [[nodiscard]] bool idle() const;
  void synchronize() const { wait_for(tail()); }
  // The first failure of the stream's work (or its device queue's fault), or hipSuccess.
  [[nodiscard]] hipError_t status() const;
  // The failure of work numbered up to `sequence`, if any: an event recorded before the failing
  // work does not report it. A device queue's fault, whose work number is not known, counts.
  [[nodiscard]] hipError_t failure_through(std::uint64_t sequence) const;
  // The same without asking the device queue: for a callback the queue's driver runs, which gets
  // the queue's fault from the driver and may make no driver calls itself (CUDA forbids them).
  [[nodiscard]] hipError_t work_failure_through(std::uint64_t sequence) const noexcept;

  // Stream-order knowledge for the pool allocator: work queued here from now on runs after
  // `other` reached `point` (an event wait or a null-stream barrier put that in the queue).
  void note_ordered_after(const Stream& other, std::uint64_t point);
  [[nodiscard]] std::uint64_t known_point(const Stream& other) const { return known_point(other.serial()); }
  [[nodiscard]] std::uint64_t known_point(std::uint64_t other_serial) const;

  // The pools this stream has allocated from or freed into: synchronising the stream may make
  // their cached memory safe to release, and so due for their release thresholds. Kept apart from
  // mutex_, since a pool notes itself under its own lock.
  void note_pool(PoolRef pool);
  void forget_pool(std::uint64_t serial);
  // Takes over the pools of a destroyed stream, whose frees a later synchronisation covers.
  void adopt_pools_of(Stream& other);
  [[nodiscard]] std::vector<PoolRef> pools() const;

  [[nodiscard]] const StreamTraits& traits() const noexcept { return traits_; }
  // Who runs this stream's work `point` (0: any of it, the stream's thread between tasks).
  [[nodiscard]] StreamWorkSource work_source(std::uint64_t point = 0) const noexcept;
  [[nodiscard]] std::uint64_t serial() const noexcept { return serial_; }
  [[nodiscard]] bool blocking() const noexcept { return (traits_.flags & hipStreamNonBlocking) == 0; }
  // Set by hipStreamDestroy, under the registry's lock: work that a caller resolved the stream for
  // before, and offers after (having waited for room meanwhile), is refused rather than queued
  // behind the stream's final task.
  void mark_destroyed() noexcept { destroyed_.store(true, std::memory_order_relaxed); }
  [[nodiscard]] bool destroyed() const noexcept { return destroyed_.load(std::memory_order_relaxed); }

  // Tasks waiting for the stream's thread past which wait_for_room holds producers, as a device
  // queue bounds what it keeps. Work queued by threads exempt from the wait, by callers that passed
  // the check together, and the runtime's own bookkeeping tasks may go beyond it.
  static constexpr std::size_t kMaxHostTasks = 1024;

 private:
  // Work for the stream's thread, number `sequence`: a host task, or with a device queue also
  // device work held back behind host tasks (`on_queue`, with `work` as its host form). For a host
  // task the thread waits for the queue to pass the work before it, runs it and marks the number.
  struct HostTask {
    std::uint64_t sequence = 0;
    StreamTask work;
    QueueWork on_queue{};
  };

  void run();
  void wait_for_queue_room() const {
    if (queue_) queue_->wait_for_room();
  }
  // Runs the task at the front of the queue; `lock` is held on entry and again on a true return.
  // False: the task's captured state held the stream's last reference, and *this is gone.
  bool run_front(std::unique_lock<std::mutex>& lock);
  // Under mutex_: gives the task the stream's next number and queues it for the thread; returns the
  // number. The caller wakes the worker once it has let go of the lock. The number is taken only
  // once the task is in the list: a push that throws leaves the stream's count as it was (a count
  // ahead of its work would never be reached).
  std::uint64_t push_host_task(HostTask task);
  // No work for the stream's thread queued or running: device work may go straight to the queue.
  [[nodiscard]] bool lane_idle_locked() const noexcept;
  // From the stream's thread, which nothing may throw out of: puts held-back `on_queue` on the
  // device queue as work number `sequence`, marked when done. hipSuccess once the queue took it;
  // hipErrorNotSupported where it did not, for lack of memory too: its host form runs instead.
  [[nodiscard]] hipError_t submit_held_back_locked(const QueueWork& on_queue, std::uint64_t sequence) noexcept;
  // The same, marked only when something waits for it (see marked_).
  [[nodiscard]] hipError_t submit_unmarked_locked(const QueueWork& on_queue, std::uint64_t sequence);
  // Has the queue mark `sequence` after the work just put on it.
  [[nodiscard]] hipError_t mark_submitted_locked(std::uint64_t sequence);
  // Has the queue mark device_tail_, unless a mark already covers it; for a wait on work put on the
  // queue without one.
  void mark_tail_locked() const;
  // With a device queue: the host waits until the queue marked `sequence`.
  void wait_on_queue(std::uint64_t sequence) const;
  [[nodiscard]] std::uint64_t next_sequence();
  // Under mutex_ (the stream's thread, running a task): keeps the first failure.
  void note_failure(hipError_t result, std::uint64_t sequence);
  [[nodiscard]] std::uint64_t sequence_after_tail() const noexcept {
    return enqueued_.load(std::memory_order_relaxed) + 1;
  }

  StreamTraits traits_;
  std::uint64_t serial_;  // unique for the process, unlike addresses
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::uint64_t> ordered_after_;  // other stream's serial -> point
  mutable std::mutex pools_mutex_;
  std::vector<PoolRef> pools_;  // under pools_mutex_; a handful, so searched in turn
  mutable std::condition_variable work_ready_;
  mutable std::condition_variable work_done_;
  std::condition_variable room_;
  std::size_t waiting_for_room_ = 0;  // producers held in wait_for_room
  std::deque<HostTask> host_tasks_;
  std::atomic<std::size_t> host_task_count_{0};  // host_tasks_.size(), for wait_for_room's look without the lock
  bool lane_running_ = false;  // the stream's thread is running one of host_tasks_
  std::uint64_t running_sequence_ = 0;  // which one
  std::uint64_t device_tail_ = 0;  // all work up to this number is on the queue, or done
  // The progress word reaches this number without further marks. Device work put straight on the
  // queue is not marked (a mark is one more driver call, as costly as a small copy): the first wait
  // for it marks the tail then, and host work behind it marks it before it goes in.
  mutable std::uint64_t marked_ = 0;
  // Declared before the worker, which must stop first; set once, before the worker starts.
  std::unique_ptr<backend::Queue> queue_;
  // Written under mutex_; read without it where a snapshot is enough (queries, the pool's frees).
  // With a device queue, completion is the queue's progress word and completed_ is unused.
  std::atomic<std::uint64_t> enqueued_{0};
  std::atomic<std::uint64_t> completed_{0};
  // The first failure of the stream's own work, and the number of the work that failed; read
  // without the lock (by callbacks on a driver's thread, among others). Set once.
  std::atomic<hipError_t> failure_{hipSuccess};
  std::atomic<bool> destroyed_{false};
  std::atomic<std::uint64_t> failed_at_{0};
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace hipxx::core
