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
#include <set>
#include <utility>

namespace hipxx::backend {

// What a timestamp's records reached. Each record starts a new point and only the latest counts for
// the time and for whether the event is done, as with a GPU event; but a wait queued after one
// record waits for that record itself, which queues on different streams may pass after a later
// one. Shared with the queue work that passes a point, since an event may be destroyed while a
// record of it is still queued.
class HostClockRecords {
 public:
  using Clock = std::chrono::steady_clock;

  std::uint64_t begin_record();
  // Notes `record` passed, and the time now for it unless a later record was passed already.
  void pass(std::uint64_t record);
  [[nodiscard]] std::uint64_t latest_record() const { return recorded_.load(std::memory_order_acquire); }
  // Whether `record` itself has been passed (0, no record, always has).
  [[nodiscard]] bool passed(std::uint64_t record) const;
  // Whether the latest record has been passed, and when.
  [[nodiscard]] std::pair<bool, Clock::time_point> passed_at() const;

 private:
  std::atomic<std::uint64_t> recorded_{0};  // written under mutex_; read without it for the latest
  mutable std::mutex mutex_;
  std::set<std::uint64_t> pending_;  // records begun and not yet passed; a few at a time
  std::uint64_t passed_ = 0;  // the latest record passed
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
