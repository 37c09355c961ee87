// A pool imported from another process (hipMemPoolImportFromShareableHandle). It mirrors the
// exporter's layout: one virtual range of the same size, reserved through the books, into which the
// exporter's chunks are mapped as imported pointers need them, each at the offset it has in the
// exporter's pool, so an exported pointer's offset names the same bytes here. A chunk is fetched over
// the pool's private channel to the exporter's broker (core/pool_broker.hpp), mapped on first use and
// unmapped when the last imported pointer over it is freed.
//
// An imported pool hands out no memory of its own: HIP forbids allocating from it.
#pragma once

#include "core/chunk_users.hpp"
#include "core/pool_access.hpp"
#include "core/pool_wire.hpp"

#include <hipxx/hip_runtime_api.h>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace hipxx::core {

class Runtime;

class ImportedPool {
 public:
  // Checks a broker's description of its pool (it may come from anyone) and reserves the mirror.
  // `exported` is the pool's own copy of the exporter's socket, for opening another channel.
  [[nodiscard]] static hipError_t create(Runtime& runtime, OwnedFd channel, OwnedFd exported,
                                         const PoolDescription& description, std::shared_ptr<ImportedPool>* out);

  ImportedPool(Runtime& runtime, OwnedFd channel, OwnedFd exported, const PoolDescription& description,
               std::uintptr_t base);
  ImportedPool(const ImportedPool&) = delete;
  ImportedPool& operator=(const ImportedPool&) = delete;
  ImportedPool(ImportedPool&&) = delete;
  ImportedPool& operator=(ImportedPool&&) = delete;
  // Unmaps what is still mapped and gives the mirror range back.
  ~ImportedPool();

  // Whether `data` names memory of this pool: its token, and a range inside it.
  [[nodiscard]] bool accepts(const PointerExportData& data) const noexcept;
  // Maps every chunk under [offset, offset + size) not yet mapped and counts one more user of each.
  // All or nothing: chunks this call mapped are unmapped again if a later one fails.
  [[nodiscard]] hipError_t acquire(std::uint64_t offset, std::uint64_t size);
  // Drops the users acquire() counted; chunks nobody uses any more are unmapped.
  void release(std::uint64_t offset, std::uint64_t size);

  [[nodiscard]] std::uintptr_t base() const noexcept { return base_; }
  [[nodiscard]] int device() const noexcept { return description_.device; }

  [[nodiscard]] hipError_t get_attribute(hipMemPoolAttr attribute, void* value) const;
  [[nodiscard]] hipError_t set_access(const hipMemAccessDesc* descriptors, std::size_t count);
  [[nodiscard]] hipMemAccessFlags access(int device) const;

 private:
  [[nodiscard]] std::size_t chunk_count() const noexcept {
    return static_cast<std::size_t>(description_.virtual_bytes / description_.chunk_bytes);
  }
  [[nodiscard]] void* chunk_address(std::size_t chunk) const noexcept {
    return reinterpret_cast<void*>(base_ + chunk * description_.chunk_bytes);
  }
  [[nodiscard]] bool reopen_channel();
  [[nodiscard]] hipError_t fetch_chunk(std::size_t chunk, OwnedFd* fd);
  [[nodiscard]] hipError_t map_chunk(std::size_t chunk);
  void unmap_chunk(std::size_t chunk);

  Runtime& runtime_;
  const PoolDescription description_;
  const std::uintptr_t base_;

  mutable std::mutex mutex_;  // also keeps requests and replies on the channel in pairs
  OwnedFd channel_;  // closed once a reply was lost or made no sense; the next request opens another
  // The process the channel was opened in: a child made by fork() shares the parent's channel, whose
  // replies either might read, so it opens one of its own.
  pid_t channel_process_ = ::getpid();
  OwnedFd exported_;  // to the exporter's broker, where channels are opened
  ChunkUsers chunks_;
  PoolAccess access_;
  std::uint64_t used_bytes_ = 0;
  std::uint64_t reserved_high_ = 0;
  std::uint64_t used_high_ = 0;
};

}  // namespace hipxx::core
