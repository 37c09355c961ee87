// Sharing stream-ordered pools between processes (hipMemPoolExportToShareableHandle and friends).
//
// Exporting: a pool created with handleTypes = hipMemHandleTypePosixFileDescriptor makes its chunks
// exportable, gets a random token on first export, and is served by the process's broker
// (core/pool_broker.hpp); the shareable handle is a socket to that broker. A pointer's export data
// is {magic, token, offset, size}: not a handle, so any IPC may carry it.
//
// Importing: the importer asks the broker for a private channel and the pool's layout, and mirrors
// the pool (core/imported_pool.hpp). A chunk mapped in the mirror is the exporter's physical memory
// as it was when fetched; HIP's free ordering (importers free before the exporter) is what keeps the
// exporter from unmapping it (and mapping new memory in its place) while an importer still uses it. Imported pools get
// hipMemPool_t values of their own, never equal to the pool registry's (core/handle_numbers.hpp), so
// every pool call can tell which books to ask. Imported pointers are freed with hipFree or hipFreeAsync: the runtime
// asks here only when an address is no allocation of its own pools, so ordinary frees pay nothing.
#pragma once

#include "core/handle_numbers.hpp"
#include "core/pool_wire.hpp"
#include "core/stream.hpp"

#include <hipxx/hip_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace hipxx::core {

class ImportedPool;
class MemoryPool;
class PoolBroker;
class Runtime;

class PoolSharing {
 public:
  explicit PoolSharing(Runtime& runtime) noexcept;
  PoolSharing(const PoolSharing&) = delete;
  PoolSharing& operator=(const PoolSharing&) = delete;
  PoolSharing(PoolSharing&&) = delete;
  PoolSharing& operator=(PoolSharing&&) = delete;
  ~PoolSharing();

  // Exporting side.
  [[nodiscard]] hipError_t export_pool(void* shared_handle, hipMemPool_t pool, hipMemAllocationHandleType type,
                                       unsigned flags);
  [[nodiscard]] hipError_t export_pointer(hipMemPoolPtrExportData* data, void* ptr);

  // Importing side.
  [[nodiscard]] hipError_t import_pool(hipMemPool_t* pool, void* shared_handle, hipMemAllocationHandleType type,
                                       unsigned flags);
  [[nodiscard]] hipError_t import_pointer(void** ptr, hipMemPool_t pool, const hipMemPoolPtrExportData* data);
  // The imported pool a handle names, or null.
  [[nodiscard]] std::shared_ptr<ImportedPool> imported(hipMemPool_t pool) const;
  // Unnames an imported pool; its mirror goes once its last imported pointer is freed.
  [[nodiscard]] hipError_t destroy_imported(hipMemPool_t pool);
  // nullopt where `address` is not the start of an imported pointer. A null `stream` is hipFree:
  // queued work of the pool's device finishes first, and the chunks go at once; otherwise they go
  // when `stream` reaches the free.
  [[nodiscard]] std::optional<hipError_t> free_imported(std::uintptr_t address, const std::shared_ptr<Stream>& stream);

 private:
  struct ExportedPool {
    std::weak_ptr<MemoryPool> pool;
    PoolToken token;
  };
  struct ImportedPointer {
    std::shared_ptr<ImportedPool> pool;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    int imports = 0;  // each hipMemPoolImportPointer of the same pointer takes one free
  };

  [[nodiscard]] PoolToken token_of(const std::shared_ptr<MemoryPool>& pool);
  [[nodiscard]] PoolBroker& broker();
  // Counts one more import of a pointer already imported; false where there is none at `address`.
  [[nodiscard]] bool import_again(std::uintptr_t address, std::uint64_t size, hipError_t* result);
  // Counts one more import of `pointer`, booked already (import_mutex_ held).
  [[nodiscard]] static hipError_t count_import_locked(ImportedPointer& pointer, std::uint64_t size) noexcept;

  Runtime& runtime_;

  std::mutex export_mutex_;
  std::unordered_map<const MemoryPool*, ExportedPool> exported_;
  std::unique_ptr<PoolBroker> broker_;  // started by the first export (in this process)
  // Brokers of the parent, inherited by a child made by fork(): never destroyed (their threads are
  // not in this process to be joined), and kept reachable, so that leak checkers see no leak.
  std::vector<PoolBroker*> brokers_left_by_fork_;

  mutable std::mutex import_mutex_;
  HandleNumbers numbers_{HandleKind::imported_pool, 0x7000};
  std::unordered_map<std::uintptr_t, std::shared_ptr<ImportedPool>> imported_;
  std::unordered_map<std::uintptr_t, ImportedPointer> pointers_;  // by address in this process
  std::atomic<std::size_t> pointer_count_{0};  // pointers_.size(), read without the lock
};

}  // namespace hipxx::core
