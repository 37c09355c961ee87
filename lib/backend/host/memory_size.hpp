// How much memory the machine has, and how much it could give out now: the host backend's device
// memory is the machine's own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace hipxx::backend::host {

// The machine's memory: what each host device reports as its own.
[[nodiscard]] std::uint64_t physical_memory() noexcept;

// What the kernel could give out now without swapping (MemAvailable: free pages, and caches it
// can drop), or sysinfo's free memory where /proc/meminfo does not say.
[[nodiscard]] std::uint64_t available_memory() noexcept;

// Whether `bytes` more could be committed now. Committing shmem past what the machine has does not
// fail: the kernel's out-of-memory killer ends this process, or another, instead. A GPU refuses
// what it lacks, so the host backend refuses it too. The free pages (one system call, its answer
// reused for 50 ms) answer for most requests; /proc/meminfo is read only for those larger.
[[nodiscard]] bool could_commit(std::size_t bytes) noexcept;

// could_commit's bookkeeping, with its readings and clock given (tests give their own). A reading of
// the free pages serves the next 50 ms for requests that, with those it passed since, come to at
// most half of what it saw; any other request takes a new reading, and one larger than the free
// pages asks MemAvailable too.
class CommitBudget {
 public:
  using Reading = std::uint64_t (*)() noexcept;
  [[nodiscard]] bool allow(std::size_t bytes, std::int64_t now_ns, Reading free_pages, Reading available) noexcept;

 private:
  std::atomic<std::uint64_t> free_seen_{0};
  std::atomic<std::int64_t> seen_at_{std::numeric_limits<std::int64_t>::min() / 2};
  std::atomic<std::uint64_t> passed_since_{0};
};

// Whether a memfd of `bytes` stays within the process's limit on file sizes (RLIMIT_FSIZE), which
// memfds count against: sizing one past it sends SIGXFSZ, which ends the process unless handled.
[[nodiscard]] bool within_file_size_limit(std::size_t bytes) noexcept;

}  // namespace hipxx::backend::host
