#include "core/pool_usage.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace hipxx::core {
namespace {

// Which shard each live thread counts on. A thread takes the least used index when it first counts
// and gives it back when it exits, so the indices of a process's threads stay few and dense: a
// pool's slow path visits every shard it has ever seen used, and a program that starts thread after
// thread would otherwise spread over all of them.
class ShardSlots {
 public:
  std::size_t take() {
    std::lock_guard lock{mutex_};
    auto* const least = std::min_element(users_.begin(), users_.end());
    ++*least;
    return static_cast<std::size_t>(least - users_.begin());
  }
  void give_back(std::size_t index) {
    std::lock_guard lock{mutex_};
    --users_[index];
  }

 private:
  std::mutex mutex_;
  std::array<std::uint32_t, PoolUsage::kShardCount> users_{};
};

ShardSlots& shard_slots() {
  // Never destroyed: threads may still exit, and give their index back, after static destructors.
  static auto* const slots = new ShardSlots;  // NOLINT(cppcoreguidelines-owning-memory): leaked on purpose
  return *slots;
}

// Gives the thread's index back when the thread exits. Touched once per thread, when it first
// counts; the hot path reads the trivially destructible copy below instead, which needs no guard.
struct ShardLease {
  std::size_t index = PoolUsage::kShardCount;
  ShardLease() = default;
  ShardLease(const ShardLease&) = delete;
  ShardLease& operator=(const ShardLease&) = delete;
  ShardLease(ShardLease&&) = delete;
  ShardLease& operator=(ShardLease&&) = delete;
  ~ShardLease() {
    if (index < PoolUsage::kShardCount) shard_slots().give_back(index);
  }
};
thread_local ShardLease shard_lease;
// Initial-exec: read on every call, and the runtime is linked, not opened late with dlopen.
__attribute__((tls_model("initial-exec"))) thread_local std::size_t shard_of_thread = PoolUsage::kShardCount;

std::size_t thread_shard() {
  if (shard_of_thread == PoolUsage::kShardCount) {
    shard_lease.index = shard_slots().take();
    shard_of_thread = shard_lease.index;
  }
  return shard_of_thread;
}

}  // namespace

void PoolUsage::enroll_calling_thread() { (void)thread_shard(); }

void PoolUsage::add(std::uint64_t bytes) {
  Shard& shard = shards_[thread_shard()];
  // Only this thread (or the few sharing its index) writes here, so the line stays in this core's
  // cache; the compare-and-swap keeps the allowance from going below zero.
  std::uint64_t allowance = shard.allowance.load(std::memory_order_relaxed);
  while (allowance >= bytes) {
    if (shard.allowance.compare_exchange_weak(allowance, allowance - bytes, std::memory_order_relaxed)) return;
  }
  add_slow(shard, bytes);
}

void PoolUsage::remove(std::uint64_t bytes) {
  Shard& shard = shards_[thread_shard()];
  // A shard the slow path does not know of would keep its allowance out of the exact total.
  if (!shard.known.load(std::memory_order_acquire)) {
    std::lock_guard lock{mutex_};
    know_locked(shard);
  }
  shard.allowance.fetch_add(bytes, std::memory_order_release);
}

void PoolUsage::know_locked(Shard& shard) {
  known_ |= std::uint64_t{1} << static_cast<std::size_t>(&shard - shards_.data());
  shard.known.store(true, std::memory_order_release);
}

void PoolUsage::add_slow(Shard& shard, std::uint64_t bytes) {
  std::lock_guard lock{mutex_};
  know_locked(shard);
  if (spare_ < bytes) reclaim_allowances();
  if (spare_ < bytes) {
    // Every allowance is back here, so the used bytes are exactly the sum of the limits, high_ -
    // spare_; this allocation takes them past the mark, to exactly that sum plus `bytes`.
    high_ += bytes - spare_;
    spare_ = bytes;
  }
  spare_ -= bytes;
  shard.limit += static_cast<std::int64_t>(bytes);
  // Half of what is left goes with it, so that this thread's next allocations take the fast path;
  // the other half stays here for other threads, which then need not take it back from this one.
  const std::uint64_t grant = spare_ / 2;
  spare_ -= grant;
  shard.limit += static_cast<std::int64_t>(grant);
  shard.allowance.fetch_add(grant, std::memory_order_relaxed);
}

void PoolUsage::reclaim_allowances() {
  for (std::uint64_t rest = known_; rest != 0; rest &= rest - 1) {
    Shard& shard = shards_[static_cast<std::size_t>(std::countr_zero(rest))];
    // Acquire: a free counted in the allowance taken here happened before whatever follows.
    const std::uint64_t taken = shard.allowance.exchange(0, std::memory_order_acq_rel);
    shard.limit -= static_cast<std::int64_t>(taken);
    spare_ += taken;
  }
}

std::uint64_t PoolUsage::current_locked() const {
  std::int64_t used = 0;
  for (std::uint64_t rest = known_; rest != 0; rest &= rest - 1) {
    const Shard& shard = shards_[static_cast<std::size_t>(std::countr_zero(rest))];
    used += shard.limit - static_cast<std::int64_t>(shard.allowance.load(std::memory_order_acquire));
  }
  // Below zero only when an allocation and its free on another thread race the reading, the free
  // being read and the allocation not.
  return used < 0 ? 0 : static_cast<std::uint64_t>(used);
}

std::uint64_t PoolUsage::current() const {
  std::lock_guard lock{mutex_};
  return current_locked();
}

std::uint64_t PoolUsage::high() const {
  std::lock_guard lock{mutex_};
  return high_;
}

void PoolUsage::reset_high() {
  std::lock_guard lock{mutex_};
  reclaim_allowances();
  // With every allowance back, the used bytes are the sum of the limits.
  high_ -= spare_;
  spare_ = 0;
}

}  // namespace hipxx::core
