// Timestamps taken with the host's clock when a queue passes a record, for queues whose device gives
// no clock of its own: the host backend's stand-in queues, and ROCr's, which pass records on ROCr's
// signal-handler thread.
#pragma once

#include "backend/backend.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace hipxx::backend {

// What a timestamp's records reached. Each record starts a new point and only the latest counts, as
// with a GPU event; shared with the queue work that passes a point, since an event may be destroyed
// while a record of it is still queued.
class HostClockRecords {
 public:
  using Clock = std::chrono::steady_clock;

  std::uint64_t begin_record() { return recorded_.fetch_add(1, std::memory_order_acq_rel) + 1; }
  // Notes the time now for `record`, unless a later record was passed already.
  void pass(std::uint64_t record);
  [[nodiscard]] std::uint64_t latest_record() const { return recorded_.load(std::memory_order_acquire); }
  [[nodiscard]] bool passed(std::uint64_t record) const;
  // Whether the latest record has been passed, and when.
  [[nodiscard]] std::pair<bool, Clock::time_point> passed_at() const;

 private:
  std::atomic<std::uint64_t> recorded_{0};
  mutable std::mutex mutex_;
  std::uint64_t passed_ = 0;
  Clock::time_point at_{};
};

class HostClockTimestamp : public Timestamp {
 public:
  explicit HostClockTimestamp(bool timing) : timing_(timing) {}

  // hipErrorInvalidHandle unless both take times; hipErrorNotReady until both latest records are passed.
  hipError_t elapsed_since(const Timestamp& start, float* milliseconds) const final;

  [[nodiscard]] bool timing() const noexcept { return timing_; }
  [[nodiscard]] const std::shared_ptr<HostClockRecords>& records() const noexcept { return records_; }

 private:
  const bool timing_;
  const std::shared_ptr<HostClockRecords> records_ = std::make_shared<HostClockRecords>();
};

}  // namespace hipxx::backend
