// A pool's used bytes and their high-water mark (hipMemPoolAttrUsedMemCurrent and UsedMemHigh),
// counted so that allocation and free from many threads do not share a cache line.
//
// One counter that every allocation and free updated, with a compare-and-swap on the high mark
// beside it, kept one cache line moving between cores: the pool's throughput fell as threads were
// added. Here each thread counts on a shard of its own (a cache line), and the high mark stays exact
// through allowances:
//
//   - Each shard holds a `limit` and an `allowance`. Its share of the used bytes is limit - allowance;
//     it may be negative, when the thread frees what another thread allocated.
//   - An allocation takes its bytes from its shard's allowance when there are enough; a free gives
//     them back to its own shard's allowance. Neither touches anything another thread writes.
//   - The limits together never exceed the high mark, so the used bytes (sum of limit - allowance
//     with every allowance >= 0) cannot pass it unseen: an allocation that finds too little
//     allowance takes the lock and either moves spare allowance to its shard or, having taken every
//     shard's allowance, knows the exact total and raises the mark to it.
//
// What this guarantees:
//   - UsedMemCurrent is exact whenever no allocation or free runs at the same time; while they do,
//     it is the sum of each shard's count read one after another.
//   - UsedMemHigh is exact for a pool used from one thread at a time (the existing tests check this
//     after every step). With concurrent use it is never below the true peak; it can be above it
//     only by the bytes of frees that ran on other threads during the few instructions in which an
//     allocation gathered the allowances to set a new mark (those frees are counted as coming after
//     that allocation).
//   - Setting UsedMemHigh to 0 sets it to the current use, as above.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace hipxx::core {

class PoolUsage {
 public:
  // Gives the calling thread its shard (which allocates, the first time): called before anything
  // an allocation changes, so that add() cannot fail once a block is taken.
  static void enroll_calling_thread();
  // Allocation and free of `bytes` by the calling thread.
  void add(std::uint64_t bytes);
  // Release: whoever later sees the pool drained also sees what the freeing thread did before.
  void remove(std::uint64_t bytes);

  [[nodiscard]] std::uint64_t current() const;
  [[nodiscard]] std::uint64_t high() const;
  // hipMemPoolSetAttribute(UsedMemHigh, 0): the mark becomes the current use.
  void reset_high();
  // No bytes in use. Exact while only frees run concurrently: a free only lowers the shards read
  // after it, so a zero sum means the pool really was empty by the time the sum was done.
  [[nodiscard]] bool empty() const { return current() == 0; }

  // Shards, one bit each in known_: threads beyond this many share them, which stays correct and
  // only costs contention.
  static constexpr std::size_t kShardCount = 64;

 private:
  struct alignas(64) Shard {
    std::atomic<std::uint64_t> allowance{0};
    std::int64_t limit = 0;  // under mutex_; only the lock holder reads it
    std::atomic<bool> known{false};  // set once its bit is in known_
  };

  void add_slow(Shard& shard, std::uint64_t bytes);
  void know_locked(Shard& shard);
  void reclaim_allowances();
  [[nodiscard]] std::uint64_t current_locked() const;

  // Guards every limit, high_ and spare_, and serialises the slow path; off the hot path.
  mutable std::mutex mutex_;
  std::uint64_t high_ = 0;
  std::uint64_t spare_ = 0;  // high_ - sum of limits: room not yet handed to any shard
  // The shards this pool has counted on, one bit each: the slow path and the sum visit only these.
  std::uint64_t known_ = 0;
  std::array<Shard, kShardCount> shards_{};
};

}  // namespace hipxx::core
