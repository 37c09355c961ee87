// Filling a mapping's pages and page tables up front (MADV_POPULATE_WRITE), split across threads
// for large ranges. On the host backend this is what committing device memory costs: each 4 KiB
// page is allocated, zeroed and entered in the page tables one by one, and for large allocations
// that work dominates growth. Faults on different pages of one shmem file run in parallel in the
// kernel, so a 64 MiB commit over four threads takes about 40% of its one-thread time on a 16-core
// Xeon (bench/RESULTS.md), much as a JVM pre-touches its heap with several threads.
#pragma once

#include <cstddef>

namespace hipxx::backend::host {

// How many threads populate one large range: HIPXX_HOST_POPULATE_THREADS where set when first asked
// (1 turns the splitting off), else up to four, fewer on a machine with fewer cores.
[[nodiscard]] unsigned population_threads() noexcept;

// Populates [at, at + size) for writing; `at` must be a read-write mapping. Returns 0, or the errno
// of the first part that failed (EINVAL: the kernel lacks MADV_POPULATE_WRITE, Linux 5.14).
// Ranges under 16 MiB, or where a thread cannot be started, are populated on the calling thread.
[[nodiscard]] int populate_for_writing(void* at, std::size_t size, unsigned threads) noexcept;

// populate_for_writing over population_threads() threads; 0, or an errno. EINVAL (no
// MADV_POPULATE_WRITE) is remembered, so later calls, and commit_pages, go straight to the older
// ways.
[[nodiscard]] int populate(void* at, std::size_t size) noexcept;

// Commits every page of a new memfd of `size` bytes; 0, or -1 with errno set. Where the kernel can,
// it populates them through a new read-write shared mapping, left in `*mapping`, which commits and
// fills the page tables in one pass that several threads share; else (no MADV_POPULATE_WRITE, or no
// room for one more mapping) fallocate commits them and `*mapping` is null. `advise_huge_pages`
// (shmem_enabled "advise") marks the mapping MADV_HUGEPAGE first, so shmem allocates 2 MiB pages
// where it can; the other settings need no asking. More than the machine could give out now fails
// at once with ENOMEM (could_commit), not with the out-of-memory killer halfway.
[[nodiscard]] int commit_pages(int fd, std::size_t size, bool advise_huge_pages, void** mapping) noexcept;

}  // namespace hipxx::backend::host
