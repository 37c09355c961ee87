// Sharing physical memory between processes: an exportable allocation becomes a POSIX file
// descriptor, the descriptor travels to another process (fd_passing.hpp), and the other process
// imports it as its own PhysicalAllocation of the same memory.
#pragma once

#include <hipxx/error.hpp>
#include <hipxx/physical_allocation.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace hipxx {

// Owns one file descriptor; closes it on destruction.
class FileDescriptor {
 public:
  constexpr FileDescriptor() noexcept = default;
  // Adopts `fd`; -1 means none.
  constexpr explicit FileDescriptor(int fd) noexcept : fd_(fd) {}

  FileDescriptor(FileDescriptor const&) = delete;
  FileDescriptor& operator=(FileDescriptor const&) = delete;

  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }

  ~FileDescriptor() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }

  // A second descriptor of the same open file, close-on-exec like every descriptor we create.
  [[nodiscard]] result<FileDescriptor> dup() const noexcept {
    int const copy = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      return errno_failure();
    }
    return FileDescriptor{copy};
  }

  // Gives up ownership; the caller must close the descriptor.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

  // Closes now and reports close()'s answer, which the destructor has to drop. The descriptor is
  // gone either way: on Linux close() frees it even when it reports EINTR or EIO, so it is never retried.
  [[nodiscard]] result<void> close() noexcept {
    if (fd_ < 0) {
      return outcome::success();
    }
    if (::close(std::exchange(fd_, -1)) != 0) {
      return errno_failure();
    }
    return outcome::success();
  }

 private:
  void reset() noexcept {
    if (fd_ >= 0) {
      (void)::close(std::exchange(fd_, -1));
    }
  }

  int fd_ = -1;
};

// The allocation must have been created with Shareable::posix_fd.
[[nodiscard]] inline result<FileDescriptor> export_handle(PhysicalAllocation const& allocation) noexcept {
  int fd = -1;
  if (auto const error =
          hipMemExportToShareableHandle(&fd, allocation.native_handle(), hipMemHandleTypePosixFileDescriptor, 0);
      error != hipSuccess) {
    return failure(error);
  }
  return FileDescriptor{fd};
}

// A new allocation handle of the exported memory; `fd` stays ours and may be closed at once.
// HIP cannot tell the importer the allocation's size, so the exporter sends it along (the payload of
// send_fd) and it is given here, where map() needs it.
[[nodiscard]] inline result<PhysicalAllocation> import_handle(FileDescriptor const& fd, std::size_t size) noexcept {
  PhysicalAllocation::native_handle_type handle{};
  // HIP passes the descriptor by value inside the pointer argument.
  auto* const os_handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get()));
  if (auto const error = hipMemImportFromShareableHandle(&handle, os_handle, hipMemHandleTypePosixFileDescriptor);
      error != hipSuccess) {
    return failure(error);
  }
  return PhysicalAllocation::adopt(handle, size);
}

}  // namespace hipxx
