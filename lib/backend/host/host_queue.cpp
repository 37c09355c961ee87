#include "backend/host/host_queue.hpp"

#include "backend/host_clock_timestamp.hpp"
#include "backend/poll_until.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace hipxx::backend {
namespace {

class HostQueue final : public Queue {
 public:
  explicit HostQueue(Backend& backend) : backend_(backend), worker_([this] { run(); }) {}
  HostQueue(const HostQueue&) = delete;
  HostQueue& operator=(const HostQueue&) = delete;
  HostQueue(HostQueue&&) = delete;
  HostQueue& operator=(HostQueue&&) = delete;

  ~HostQueue() override {
    {
      std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    work_ready_.notify_one();
    worker_.join();
  }

  [[nodiscard]] std::uint64_t progress() const noexcept override { return progress_.load(std::memory_order_acquire); }

  hipError_t write_mark(std::uint64_t sequence) override {
    return push([this, sequence] { progress_.store(sequence, std::memory_order_release); });
  }

  hipError_t copy(void* dst, const void* src, std::size_t bytes) override {
    return push([this, dst, src, bytes] { note(backend_.copy(dst, src, bytes)); });
  }

  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    return push([this, dst, value, bytes] { note(backend_.fill(dst, value, bytes)); });
  }

  hipError_t write_word(void* address, std::size_t bytes, std::uint64_t value) override {
    return push([this, address, bytes, value] { note(backend_.store_word(address, bytes, value)); });
  }

  hipError_t wait_word(const void* address, std::size_t bytes, const WordWait& wait) override {
    const std::uint64_t width_mask = width_mask_of(bytes);
    return push([this, address, bytes, wait, width_mask] {
      poll_until([&] {
        std::uint64_t word = 0;
        if (backend_.load_word(address, bytes, &word) != hipSuccess) return true;  // nothing to wait on
        return meets(word, wait, width_mask);
      });
    });
  }

  // As a GPU event: the other queue sets a flag when it gets there, and this one waits for the flag.
  hipError_t wait_queue(Queue& other) override {
    auto* source = dynamic_cast<HostQueue*>(&other);
    if (source == nullptr) return hipErrorNotSupported;
    auto reached = std::make_shared<std::atomic<bool>>(false);
    if (const hipError_t error = source->push([reached] { reached->store(true, std::memory_order_release); });
        error != hipSuccess) {
      return error;
    }
    return push([reached] { poll_until([&] { return reached->load(std::memory_order_acquire); }); });
  }

  // As a GPU's event wait: for the record that is the timestamp's latest now, not a later one.
  hipError_t wait_timestamp(Timestamp& timestamp) override {
    auto* stamp = dynamic_cast<HostClockTimestamp*>(&timestamp);
    if (stamp == nullptr) return hipErrorNotSupported;
    const std::uint64_t record = stamp->records()->latest_record();
    return push([records = stamp->records(), record] { poll_until([&] { return records->passed(record); }); });
  }

  void complete(std::uint64_t sequence) noexcept override { progress_.store(sequence, std::memory_order_release); }

  // As on CUDA, the call marks its own number after it has run.
  hipError_t queue_host_call(HostCall* call) override {
    return push([this, call, sequence = call->sequence] {
      call->run(call, fault_.load(std::memory_order_relaxed));  // frees the call
      complete(sequence);
    });
  }

  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    return push([this, ptr, bytes, device] { note(backend_.prefetch(ptr, bytes, device)); });
  }

  hipError_t record(Timestamp& timestamp) override {
    auto* stamp = dynamic_cast<HostClockTimestamp*>(&timestamp);
    if (stamp == nullptr) return hipErrorNotSupported;
    const std::uint64_t record = stamp->records()->begin_record();
    return push([records = stamp->records(), record] { records->pass(record); });
  }

  hipError_t fault() override { return fault_.load(std::memory_order_relaxed); }
  // The worker runs every operation, those after a failed one too.
  bool abandoned() override { return false; }

  bool finished() override {
    std::lock_guard lock{mutex_};
    return operations_.empty() && !running_;
  }

  // As a GPU's queue, this one keeps a bounded amount of work: a thread that would queue more waits
  // here, without the runtime's locks, until the worker has taken some. The worker itself never
  // waits (a callback that queues work on its own stream would wait for itself).
  void wait_for_room() override {
    if (std::this_thread::get_id() == worker_.get_id()) return;
    std::unique_lock lock{mutex_};
    ++waiting_for_room_;
    room_.wait(lock, [&] { return operations_.size() < kMaxQueued; });
    --waiting_for_room_;
  }

 private:
  hipError_t push(std::function<void()> operation) {
    {
      std::lock_guard lock{mutex_};
      operations_.push_back(std::move(operation));
    }
    work_ready_.notify_one();
    return hipSuccess;
  }

  void note(hipError_t result) {
    if (result != hipSuccess) fault_.store(result, std::memory_order_relaxed);
  }

  void run() {
    std::unique_lock lock{mutex_};
    for (;;) {
      work_ready_.wait(lock, [&] { return stopping_ || !operations_.empty(); });
      if (operations_.empty()) return;
      std::function<void()> operation = std::move(operations_.front());
      operations_.pop_front();
      running_ = true;
      if (waiting_for_room_ > 0 && operations_.size() < kMaxQueued) room_.notify_all();
      lock.unlock();
      operation();
      operation = nullptr;  // what it captured goes before the queue counts it finished
      lock.lock();
      running_ = false;
    }
  }

  // Operations queued and not yet taken by the worker, past which wait_for_room holds producers.
  // Work queued with no wait for room (by threads that passed the check together) may go beyond it.
  static constexpr std::size_t kMaxQueued = 256;

  Backend& backend_;
  std::atomic<std::uint64_t> progress_{0};
  std::atomic<hipError_t> fault_{hipSuccess};
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable room_;
  int waiting_for_room_ = 0;
  std::deque<std::function<void()>> operations_;
  bool stopping_ = false;
  bool running_ = false;  // the worker is running an operation it took off operations_
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Queue> make_host_queue(Backend& backend) { return std::make_unique<HostQueue>(backend); }

std::unique_ptr<Timestamp> make_host_timestamp(bool timing) { return std::make_unique<HostClockTimestamp>(timing); }

}  // namespace hipxx::backend
