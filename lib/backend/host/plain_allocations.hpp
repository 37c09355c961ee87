// Plain device allocations (hipMalloc) of the host backend, and legacy IPC of them. Each allocation
// is a memfd whose pages are committed at hipMalloc, as a GPU's are (a shortage is
// hipErrorOutOfMemory there, not a SIGBUS at some later first touch), mapped shared from the start
// and held open, so an export moves nothing and waits for nothing: stores other threads or streams
// make at any time land in the one copy every process sees. The 64-byte handle names the
// exporter's pid, the descriptor and the memfd's name (a number drawn once per process and the
// allocation's serial); another process of the same user opens that very file through
// /proc/<pid>/fd/<fd>, and takes it only if the name is the one the handle was made for, since a
// descriptor freed and reused names some other file. A checksum seals the bytes, so that garbage is
// refused, not followed.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace hipxx::backend::host {

class PlainAllocations {
 public:
  // `limit`: the most one allocation may hold (the device's memory); a larger one is refused before
  // any page is committed. `advise_huge_pages`: shmem_enabled is "advise", so allocations of 2 MiB
  // and more are marked MADV_HUGEPAGE before their pages are committed.
  PlainAllocations(std::size_t limit, bool advise_huge_pages);
  PlainAllocations(const PlainAllocations&) = delete;
  PlainAllocations& operator=(const PlainAllocations&) = delete;
  PlainAllocations(PlainAllocations&&) = delete;
  PlainAllocations& operator=(PlainAllocations&&) = delete;
  ~PlainAllocations() = default;

  [[nodiscard]] hipError_t allocate(std::size_t size, void** out);
  // False where `ptr` is not the base of one of these allocations (and nothing is done).
  [[nodiscard]] bool release(void* ptr, std::size_t size);

  [[nodiscard]] hipError_t get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle) const;
  [[nodiscard]] static hipError_t open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size);
  [[nodiscard]] static hipError_t close(void* ptr, std::size_t size);

 private:
  struct Allocation {
    int fd = -1;
    std::uint64_t serial = 0;
  };

  // Maps all `size` bytes of memfd `fd` read-write, every page committed and in the page tables:
  // populated through the mapping where the kernel can (commit_pages), else allocated by fallocate
  // and mapped with MAP_POPULATE. 0, or an errno.
  [[nodiscard]] int map_committed(int fd, std::size_t size, void** out) const;

  const std::uint64_t process_tag_;
  const std::size_t limit_;
  const bool advise_huge_pages_;
  std::atomic<std::uint64_t> next_serial_{1};
  mutable std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Allocation> allocations_;
};

}  // namespace hipxx::backend::host
