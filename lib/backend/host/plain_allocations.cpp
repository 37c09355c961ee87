#include "backend/host/plain_allocations.hpp"

#include "backend/host/memfd.hpp"
#include "backend/host/memory_size.hpp"
#include "backend/host/page_population.hpp"
#include "backend/named_memfd.hpp"
#include "backend/page_size.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <string>

namespace hipxx::backend::host {
namespace {

constexpr std::array<char, 8> kMagic{'h', 'i', 'p', 'x', 'x', 'I', 'P', 'C'};
// Version 1 named a POSIX shared-memory object; its handles are refused as unknown.
constexpr std::uint32_t kVersion = 2;

// Field layout inside the 64 handle bytes.
struct HandleFields {
  std::array<char, 8> magic;
  std::uint32_t version;
  std::int32_t pid;
  std::uint64_t size;
  std::uint64_t process_tag;
  std::uint64_t serial;
  std::int32_t fd;
  std::uint32_t reserved;
  std::uint64_t checksum;
  std::array<std::uint8_t, 8> unused;
};
static_assert(sizeof(HandleFields) == HIP_IPC_HANDLE_SIZE);

std::uint64_t checksum_of(const HandleFields& fields) {
  return fnv1a(&fields, offsetof(HandleFields, checksum));  // everything before the checksum
}

// The unused tail lies outside the checksum, so it is checked apart: a handle whose bytes differ
// from the exported ones anywhere is not that handle.
bool well_formed(const HandleFields& fields) {
  return fields.magic == kMagic && fields.version == kVersion && fields.checksum == checksum_of(fields) &&
         fields.size != 0 && fields.pid > 0 && fields.fd >= 0 && fields.reserved == 0 &&
         fields.unused == std::array<std::uint8_t, 8>{};
}

std::string memfd_name(std::uint64_t process_tag, std::uint64_t serial) {
  return "hipxx-memory-" + hex16(process_tag) + "-" + hex16(serial);
}

// This process's pid. getpid is a system call each time (about a microsecond in a VM), and a pid
// changes only across fork, which updates the copy.
std::atomic<pid_t> cached_pid{0};

pid_t current_pid() {
  static const bool registered = [] {
    cached_pid.store(getpid(), std::memory_order_relaxed);
    return pthread_atfork(nullptr, nullptr, [] { cached_pid.store(getpid(), std::memory_order_relaxed); }) == 0;
  }();
  return registered ? cached_pid.load(std::memory_order_relaxed) : getpid();
}

// `size` rounded up to whole pages, or 0 where that does not fit in a size_t.
std::size_t page_rounded(std::size_t size) {
  const std::size_t page = page_size();
  return size > SIZE_MAX - (page - 1) ? 0 : (size + page - 1) / page * page;
}

}  // namespace

PlainAllocations::PlainAllocations(std::size_t limit, bool advise_huge_pages)
    : process_tag_{draw_process_tag()}, limit_{limit}, advise_huge_pages_{advise_huge_pages} {}

hipError_t PlainAllocations::allocate(std::size_t size, void** out) {
  const std::size_t mapped = page_rounded(size);
  if (mapped == 0 || mapped > limit_ || !within_file_size_limit(mapped)) return hipErrorOutOfMemory;
  const std::uint64_t serial = next_serial_.fetch_add(1, std::memory_order_relaxed);
  const int fd = create_memfd(memfd_name(process_tag_, serial).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return from_errno(errno);
  // Sealed at its size, so that no importer can shrink the file under the exporter's mapping.
  void* at = nullptr;
  int error = 0;
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    error = errno;
  } else {
    error = map_committed(fd, mapped, &at);
  }
  if (error != 0) {
    ::close(fd);
    return from_errno(error);
  }
  try {
    const std::lock_guard lock{mutex_};
    allocations_.emplace(reinterpret_cast<std::uintptr_t>(at), Allocation{.fd = fd, .serial = serial});
  } catch (const std::bad_alloc&) {
    munmap(at, mapped);
    ::close(fd);
    return hipErrorOutOfMemory;
  }
  *out = at;
  return hipSuccess;
}

int PlainAllocations::map_committed(int fd, std::size_t size, void** out) const {
  void* at = nullptr;
  if (commit_pages(fd, size, advise_huge_pages_, &at) != 0) return errno;
  if (at == nullptr) {  // committed without a populated mapping: map it with its tables filled
    at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (at == MAP_FAILED) return errno;
  }
  *out = at;
  return 0;
}

bool PlainAllocations::release(void* ptr, std::size_t size) {
  Allocation allocation;
  {
    const std::lock_guard lock{mutex_};
    const auto found = allocations_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (found == allocations_.end()) return false;
    allocation = found->second;
    allocations_.erase(found);
  }
  // Mappings other processes opened hold the file, and stay.
  munmap(ptr, page_rounded(size));
  ::close(allocation.fd);
  return true;
}

hipError_t PlainAllocations::get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle) const {
  Allocation allocation;
  {
    const std::lock_guard lock{mutex_};
    const auto found = allocations_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (found == allocations_.end()) return hipErrorInvalidValue;
    allocation = found->second;
  }
  HandleFields fields{};
  fields.magic = kMagic;
  fields.version = kVersion;
  fields.pid = static_cast<std::int32_t>(current_pid());
  fields.size = size;
  fields.process_tag = process_tag_;
  fields.serial = allocation.serial;
  fields.fd = allocation.fd;
  fields.checksum = checksum_of(fields);
  std::memcpy(handle, &fields, sizeof fields);
  return hipSuccess;
}

hipError_t PlainAllocations::open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size) {
  HandleFields fields{};
  std::memcpy(&fields, &handle, sizeof fields);
  if (!well_formed(fields)) return hipErrorInvalidValue;
  if (names_this_process(fields.pid)) return hipErrorInvalidContext;
  const std::size_t mapped = page_rounded(fields.size);
  if (mapped == 0) return hipErrorInvalidValue;
  void* const at = map_peer_memfd(fields.pid, fields.fd, memfd_name(fields.process_tag, fields.serial), mapped);
  if (at == MAP_FAILED) return hipErrorInvalidValue;
  *ptr = at;
  *size = fields.size;
  return hipSuccess;
}

hipError_t PlainAllocations::close(void* ptr, std::size_t size) {
  return munmap(ptr, page_rounded(size)) == 0 ? hipSuccess : hipErrorInvalidValue;
}

}  // namespace hipxx::backend::host
