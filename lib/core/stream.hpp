// One stream: an ordered queue of work run by its own host thread. Work items call the backend's
// synchronous operations, so the same engine gives every backend HIP's stream ordering; a backend
// with native queues can take over later without the books noticing.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hipxx::core {

// A unit of stream work. Its result becomes the stream's status, which later callbacks receive.
using StreamTask = std::function<hipError_t()>;

struct StreamTraits {
  int device = 0;
  unsigned flags = hipStreamDefault;
  int priority = 0;
  std::vector<std::uint32_t> cu_mask{};
  bool is_null = false;
};

class Stream {
 public:
  explicit Stream(StreamTraits traits);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Lets queued work finish, then stops the worker.
  ~Stream();

  // Work runs in the order it is enqueued; the number names the point after this task.
  std::uint64_t enqueue(StreamTask task);
  [[nodiscard]] bool reached(std::uint64_t sequence) const;
  void wait_for(std::uint64_t sequence) const;
  [[nodiscard]] std::uint64_t tail() const;
  [[nodiscard]] bool idle() const;
  void synchronize() const { wait_for(tail()); }
  // The status of the last task that failed, or hipSuccess.
  [[nodiscard]] hipError_t status() const;

  // Stream-order knowledge for the pool allocator: work queued here from now on runs after
  // `other` reached `point` (an event wait or a null-stream barrier put that in the queue).
  void note_ordered_after(const Stream& other, std::uint64_t point);
  [[nodiscard]] std::uint64_t known_point(const Stream& other) const;

  [[nodiscard]] const StreamTraits& traits() const noexcept { return traits_; }
  [[nodiscard]] std::uint64_t serial() const noexcept { return serial_; }
  [[nodiscard]] bool blocking() const noexcept { return (traits_.flags & hipStreamNonBlocking) == 0; }

 private:
  void run();
  // Runs the task at the front of the queue; `lock` is held on entry and again on a true return.
  // False: the task's captured state held the stream's last reference, and *this is gone.
  bool run_front(std::unique_lock<std::mutex>& lock);

  StreamTraits traits_;
  std::uint64_t serial_;  // unique for the process, unlike addresses
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::uint64_t> ordered_after_;  // other stream's serial -> point
  mutable std::condition_variable work_ready_;
  mutable std::condition_variable work_done_;
  std::deque<std::pair<std::uint64_t, StreamTask>> queue_;
  // Written under mutex_; read without it where a snapshot is enough (queries, the pool's frees).
  std::atomic<std::uint64_t> enqueued_{0};
  std::atomic<std::uint64_t> completed_{0};
  hipError_t status_ = hipSuccess;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace hipxx::core
