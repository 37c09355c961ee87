// Every allocation of the host backend is a memfd, and each holds its descriptor for as long as the
// allocation lives, so a program with many allocations can meet its soft RLIMIT_NOFILE long before it
// meets a shortage of memory. Creation raises the soft limit toward the hard one when that happens,
// as a GPU runtime would not run out of handles at a thousand allocations. HIPXX_HOST_RAISE_NOFILE=0
// leaves the limit alone: an allocation past it is then refused as out of memory.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <array>
#include <cerrno>

namespace hipxx::backend::host {

// memfd_create(name, flags), retried once after raising the soft limit on open descriptors where the
// first try fails with EMFILE (unless HIPXX_HOST_RAISE_NOFILE=0, read at that moment). Returns the
// descriptor, or -1 with errno set.
[[nodiscard]] int create_memfd(const char* name, unsigned flags) noexcept;

// The name of a device's physical allocation. The device travels with the descriptor in it, so an
// importer, in this process or another, can tell whose memory it is.
using MemfdName = std::array<char, 32>;
[[nodiscard]] MemfdName physical_memfd_name(int device) noexcept;
// The device a physical allocation's descriptor names, or -1 where it names none.
[[nodiscard]] int memfd_device(int fd) noexcept;

// What a failed system call of the host backend's means: a shortage of memory or descriptors, among
// them EFBIG (a memfd past the file size limit) and EFAULT (a page that could not be had while
// populating: a fault would have raised SIGBUS), or else a refused argument.
[[nodiscard]] inline hipError_t from_errno(int error) noexcept {
  return (error == ENOMEM || error == ENOSPC || error == EMFILE || error == ENFILE || error == EFBIG || error == EFAULT)
             ? hipErrorOutOfMemory
             : hipErrorInvalidValue;
}

}  // namespace hipxx::backend::host
