#include "backend/host_clock_timestamp.hpp"

namespace hipxx::backend {

std::uint64_t HostClockRecords::begin_record() {
  std::lock_guard lock{mutex_};
  const std::uint64_t record = recorded_.load(std::memory_order_relaxed) + 1;
  pending_.insert(record);
  recorded_.store(record, std::memory_order_release);
  return record;
}

void HostClockRecords::pass(std::uint64_t record) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock{mutex_};
  pending_.erase(record);
  if (record > passed_) {
    passed_ = record;
    at_ = now;
  }
}

bool HostClockRecords::passed(std::uint64_t record) const {
  std::lock_guard lock{mutex_};
  return record <= recorded_.load(std::memory_order_relaxed) && !pending_.contains(record);
}

std::pair<bool, HostClockRecords::Clock::time_point> HostClockRecords::passed_at() const {
  std::lock_guard lock{mutex_};
  return {passed_ > 0 && passed_ >= recorded_.load(std::memory_order_acquire), at_};
}

hipError_t HostClockTimestamp::elapsed_since(const Timestamp& start, float* milliseconds) const {
  const auto* begin = dynamic_cast<const HostClockTimestamp*>(&start);
  if (begin == nullptr || !timing_ || !begin->timing_) return hipErrorInvalidHandle;
  const auto [begin_done, begin_at] = begin->records_->passed_at();
  const auto [end_done, end_at] = records_->passed_at();
  if (!begin_done || !end_done) return hipErrorNotReady;
  *milliseconds = std::chrono::duration<float, std::milli>(end_at - begin_at).count();
  return hipSuccess;
}

}  // namespace hipxx::backend
