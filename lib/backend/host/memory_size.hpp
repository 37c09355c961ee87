// How much memory the machine has, and how much it could give out now: the host backend's device
// memory is the machine's own.
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace hipxx::backend::host
