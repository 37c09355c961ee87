// Sharing a memory pool's allocations with other processes.
//
// The exporter creates its pool with Shareable::posix_fd, exports it once (export_handle: a file
// descriptor, sent with send_fd from fd_passing.hpp) and each allocation to share (export_pointer:
// 64 plain bytes, sent any way at all). The importer opens the pool (ImportedMemPool::open) and
// then each pointer (import_pointer), which maps the exporter's memory at an address of its own.
//
// Order matters, as HIP documents: an importer frees (or drops) an imported pointer before the
// exporter frees the allocation. An imported pool allocates nothing.
#pragma once

#include <hipxx/error.hpp>
#include <hipxx/mem_pool.hpp>
#include <hipxx/shareable_handle.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace hipxx {

// Names one allocation of an exported pool. Trivially copyable: any IPC mechanism may carry it.
using PoolPtrExportData = hipMemPoolPtrExportData;

// The pool must have been created with Shareable::posix_fd. Each call makes a new descriptor, which
// may be given to any number of processes; the pool's memory does not depend on it staying open.
[[nodiscard]] inline result<FileDescriptor> export_handle(MemPoolRef pool) noexcept {
  int fd = -1;
  if (auto const error = hipMemPoolExportToShareableHandle(&fd, pool.native(), hipMemHandleTypePosixFileDescriptor, 0);
      error != hipSuccess) {
    return failure(error);
  }
  return FileDescriptor{fd};
}

// `data` must be the start of a live allocation of an exportable pool.
[[nodiscard]] inline result<PoolPtrExportData> export_pointer(void const* data) noexcept {
  PoolPtrExportData exported{};
  if (auto const error = hipMemPoolExportPointer(&exported, const_cast<void*>(data)); error != hipSuccess) {
    return failure(error);
  }
  return exported;
}

[[nodiscard]] inline result<PoolPtrExportData> export_pointer(PoolAllocation const& allocation) noexcept {
  return export_pointer(allocation.data());
}

// Another process's pool memory, mapped here; freed with hipFree when destroyed, which first waits
// for work queued on the pool's device. The exporter must not free the allocation before that.
class ImportedPoolPointer {
 public:
  // Takes over a pointer from hipMemPoolImportPointer; the way back from release().
  [[nodiscard]] static ImportedPoolPointer adopt(void* data) noexcept { return ImportedPoolPointer{data}; }

  ImportedPoolPointer(ImportedPoolPointer const&) = delete;
  ImportedPoolPointer& operator=(ImportedPoolPointer const&) = delete;
  ImportedPoolPointer(ImportedPoolPointer&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
  ImportedPoolPointer& operator=(ImportedPoolPointer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }
  ~ImportedPoolPointer() { reset(); }

  // Not of a temporary: the pointer is closed at the end of the statement.
  [[nodiscard]] void* data() const& noexcept { return data_; }
  void data() const&& = delete;
  [[nodiscard]] explicit operator bool() const noexcept { return data_ != nullptr; }

  // Frees now and reports the runtime's answer, which the destructor has to drop. On failure the
  // owner still holds the pointer.
  [[nodiscard]] result<void> free() noexcept { return free_with(hipFree(data_)); }

  // Frees in `stream`'s order, without waiting: the mapping goes when the stream reaches the free.
  [[nodiscard]] result<void> free_async(StreamRef stream) noexcept {
    return free_with(hipFreeAsync(data_, stream.native()));
  }

  // Gives up ownership; the caller must hipFree (or hipFreeAsync) the pointer.
  [[nodiscard]] void* release() noexcept { return std::exchange(data_, nullptr); }

 private:
  explicit ImportedPoolPointer(void* data) noexcept : data_(data) {}

  [[nodiscard]] result<void> free_with(hipError_t error) noexcept {
    if (data_ == nullptr) {
      return outcome::success();
    }
    if (error != hipSuccess) {
      return failure(error);
    }
    data_ = nullptr;
    return outcome::success();
  }

  void reset() noexcept {
    if (data_ != nullptr) {
      (void)hipFree(std::exchange(data_, nullptr));
    }
  }

  void* data_ = nullptr;
};

// A pool of another process, opened from the descriptor export_handle made there. Destroying it
// unnames the pool; pointers imported from it stay usable until they are freed.
class ImportedMemPool {
 public:
  using native_handle_type = hipMemPool_t;

  // `fd` stays the caller's: it may be closed as soon as this returns.
  [[nodiscard]] static result<ImportedMemPool> open(FileDescriptor const& fd) noexcept {
    hipMemPool_t pool = nullptr;
    // HIP passes the descriptor by value inside the pointer argument.
    auto* const handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get()));
    if (auto const error = hipMemPoolImportFromShareableHandle(&pool, handle, hipMemHandleTypePosixFileDescriptor, 0);
        error != hipSuccess) {
      return failure(error);
    }
    return ImportedMemPool{pool};
  }

  // Takes over a pool from hipMemPoolImportFromShareableHandle; the way back from release().
  [[nodiscard]] static ImportedMemPool adopt(hipMemPool_t pool) noexcept { return ImportedMemPool{pool}; }

  ImportedMemPool(ImportedMemPool const&) = delete;
  ImportedMemPool& operator=(ImportedMemPool const&) = delete;
  ImportedMemPool(ImportedMemPool&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)) {}
  ImportedMemPool& operator=(ImportedMemPool&& other) noexcept {
    if (this != &other) {
      reset();
      pool_ = std::exchange(other.pool_, nullptr);
    }
    return *this;
  }
  ~ImportedMemPool() { reset(); }

  [[nodiscard]] hipMemPool_t native() const noexcept { return pool_; }
  [[nodiscard]] explicit operator bool() const noexcept { return pool_ != nullptr; }

  // The allocation `data` names, mapped here. Importing one allocation twice gives the same address;
  // each owner frees once.
  [[nodiscard]] result<ImportedPoolPointer> import_pointer(PoolPtrExportData const& data) const noexcept {
    void* pointer = nullptr;
    auto exported = data;  // HIP's signature takes a non-const pointer; it only reads it
    if (auto const error = hipMemPoolImportPointer(&pointer, pool_, &exported); error != hipSuccess) {
      return failure(error);
    }
    return ImportedPoolPointer::adopt(pointer);
  }

  [[nodiscard]] result<Access> access(Device device) const noexcept {
    hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
    auto location = device.location();
    if (auto const error = hipMemPoolGetAccess(&flags, pool_, &location); error != hipSuccess) {
      return failure(error);
    }
    auto const access = access_from_native(static_cast<unsigned long long>(flags));
    if (!access) {
      return failure(hipErrorUnknown);
    }
    return *access;
  }

  // Replaces `device`'s access to the imported memory mapped here, now and later.
  [[nodiscard]] result<void> set_access(Device device, Access access) const noexcept {
    auto const desc = AccessDesc{device, access}.native();
    return check(hipMemPoolSetAccess(pool_, &desc, 1));
  }

  // Gives up ownership; the caller must hipMemPoolDestroy the handle.
  [[nodiscard]] hipMemPool_t release() noexcept { return std::exchange(pool_, nullptr); }

 private:
  explicit ImportedMemPool(hipMemPool_t pool) noexcept : pool_(pool) {}

  void reset() noexcept {
    if (pool_ != nullptr) {
      (void)hipMemPoolDestroy(std::exchange(pool_, nullptr));
    }
  }

  hipMemPool_t pool_ = nullptr;
};

}  // namespace hipxx
