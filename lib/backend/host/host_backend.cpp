// The host backend: real Linux objects stand in for GPU memory. A reservation is a PROT_NONE
// anonymous range (handed out from the address arena's chunks), physical memory is a memfd, mapping
// is mmap(MAP_FIXED|MAP_SHARED) of that fd over the reservation, access is mprotect, and a shareable
// handle is a dup of the memfd that another process can receive over a Unix socket and map for real.
//
// As on a GPU, creating physical memory commits it and mapping it fills the page tables, so a
// shortage the kernel reports is hipErrorOutOfMemory at create rather than a SIGBUS at some later
// first touch, and the first touch of each 4 KiB page does not fault (a fault per page costs several
// times what filling the tables in one call does). Create does both at once: it maps the new memfd
// read-write and populates it with MADV_POPULATE_WRITE (Linux 5.14), over several threads for large
// allocations (page_population.hpp), and leaves that mapping parked. The allocation's first map moves
// the parked mapping into the reservation with mremap, page tables included, and closes it with one
// mprotect until set_access. Later maps (and maps of imported allocations) map the memfd and
// populate afresh. Kernels without MADV_POPULATE_WRITE get fallocate at create and MAP_POPULATE at
// map. Populating writes rather than reads because a read fault on shmem first tries to map the
// 15 pages around it, work that is wasted on pages not yet up to date.
//
// Transparent huge pages for shmem (memfds included) follow
// /sys/kernel/mm/transparent_hugepage/shmem_enabled. With "always", "within_size" or "force" shmem
// allocates 2 MiB pages where it can, and maps them with one page-table entry per 2 MiB wherever
// address and offset line up. With "advise", only a fault in a mapping marked MADV_HUGEPAGE
// allocates them, so create marks its populating mapping so. With "never" (or "deny", or no THP)
// nothing changes. Either way the granularity stays the page size: huge pages are an optimisation
// the kernel makes where sizes and addresses allow, never a rule callers must follow.
#include "backend/address_arena.hpp"
#include "backend/backend.hpp"
#include "backend/host/host_queue.hpp"
#include "backend/host/memfd.hpp"
#include "backend/host/memory_size.hpp"
#include "backend/host/page_population.hpp"
#include "backend/host/plain_allocations.hpp"
#include "backend/page_size.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace hipxx::backend {
namespace {

constexpr std::size_t kRecommendedGranularity = std::size_t{2} << 20;  // one transparent huge page

constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// A PROT_NONE range of `size` bytes starting on a multiple of `alignment`, or 0 with errno set. It
// over-reserves by the alignment and trims both ends: three system calls, which is why ordinary
// reservations come from the arena's chunks instead.
std::uintptr_t reserve_aligned(std::size_t size, std::size_t alignment) noexcept {
  const std::size_t slack = alignment > page_size() ? alignment : 0;
  if (size > SIZE_MAX - slack) {  // size + slack would wrap around
    errno = ENOMEM;
    return 0;
  }
  void* raw = mmap(nullptr, size + slack, PROT_NONE, kReserveFlags, -1, 0);
  if (raw == MAP_FAILED) return 0;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t tail = start + size + slack - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  return aligned;
}

// Address space for ordinary reservations: 64 GiB chunks on 1 GiB boundaries, serving requests up to
// 4 GiB. Larger ones (a growable array's whole capacity, say) are reserved directly.
constexpr AddressArena::Shape kArenaShape{
    .chunk_size = std::size_t{64} << 30, .chunk_alignment = std::size_t{1} << 30, .largest = std::size_t{4} << 30};

int protection_of(std::span<const AccessGrant> grants) noexcept {
  // One host process stands for every device, so a page is as open as the most open device.
  int protection = PROT_NONE;
  for (const AccessGrant& grant : grants) {
    if (grant.flags == hipMemAccessFlagsProtReadWrite)
      protection = PROT_READ | PROT_WRITE;
    else if (grant.flags == hipMemAccessFlagsProtRead && protection == PROT_NONE)
      protection = PROT_READ;
  }
  return protection;
}

// A physical handle of this backend: the memfd in the low 32 bits, and kMayBeParked where create
// left a parked mapping, so that release and map of every other allocation (imported ones, say)
// skip the parked table and its lock. The bit is a hint: once map has taken the mapping, the table
// simply has no entry.
constexpr std::uint64_t kMayBeParked = std::uint64_t{1} << 32;

int fd_of(PhysicalHandle handle) noexcept { return static_cast<int>(handle.value & 0xFFFF'FFFFU); }

bool may_be_parked(PhysicalHandle handle) noexcept { return (handle.value & kMayBeParked) != 0; }

// The bracketed word of /sys/kernel/mm/transparent_hugepage/shmem_enabled ("never", "advise", ...),
// or "" where the kernel has no such file (no transparent huge pages).
std::string host_shmem_thp_setting() {
  std::string text;
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): closed below; the project has no gsl::owner
  if (FILE* file = std::fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re")) {
    std::array<char, 256> buffer{};
    if (std::fgets(buffer.data(), static_cast<int>(buffer.size()), file) != nullptr) text = buffer.data();
    std::fclose(file);  // NOLINT(cppcoreguidelines-owning-memory): see fopen above
  }
  const std::size_t open = text.find('[');
  const std::size_t close = text.find(']', open);
  return open == std::string::npos || close == std::string::npos ? std::string{}
                                                                 : text.substr(open + 1, close - open - 1);
}

class HostBackend final : public Backend {
 public:
  explicit HostBackend(int count) {
    const std::uint64_t total = host::physical_memory();
    const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      devices_.push_back(DeviceProperties{
          .name = "hipxx host device " + std::to_string(ordinal),
          .minimum_granularity = page_size(),
          .recommended_granularity = kRecommendedGranularity,
          .total_memory = total,
          .multiprocessor_count = cores,
          .virtual_memory = true,
          .posix_fd_export = true,
          .integrated = true,
          // The host and every device share one memory, so both may touch managed pages at once.
          .managed_memory = true,
          .concurrent_managed_access = true,
          // A device here is the host itself: any memory of the process is its memory.
          .pageable_memory_access = true,
          .pageable_memory_access_uses_host_page_tables = true,
      });
    }
    (void)arena_.prepare();  // where it cannot, reservations are made directly
  }

  std::string_view name() const noexcept override { return "host"; }
  int device_count() const noexcept override { return static_cast<int>(devices_.size()); }
  const DeviceProperties& device(int ordinal) const override { return devices_.at(static_cast<std::size_t>(ordinal)); }

  // At the hint where it is free, else from the arena, else from the system.
  hipError_t reserve(std::size_t size, std::size_t alignment, std::uintptr_t hint, void** va) override {
    std::uintptr_t at = hint != 0 ? reserve_at(hint, size) : 0;
    if (at == 0 && arena_.serves(size, alignment)) at = arena_.take(size, alignment);
    if (at == 0) at = reserve_aligned(size, alignment);
    if (at == 0) return host::from_errno(errno);
    *va = reinterpret_cast<void*>(at);
    return hipSuccess;
  }

  // The range at `hint`, from the arena where the hint lies in it, else from the system; 0 where it
  // is not free.
  std::uintptr_t reserve_at(std::uintptr_t hint, std::size_t size) {
    if (arena_.holds(hint)) return arena_.take_at(hint, size);
    void* at = mmap(reinterpret_cast<void*>(hint), size, PROT_NONE, kReserveFlags | MAP_FIXED_NOREPLACE, -1, 0);
    return at == MAP_FAILED ? 0 : reinterpret_cast<std::uintptr_t>(at);
  }

  hipError_t free_reservation(void* va, std::size_t size) override {
    // An arena range goes back to the arena still reserved (unmap left its placeholder in place).
    if (arena_.give_back(reinterpret_cast<std::uintptr_t>(va), size)) return hipSuccess;
    return munmap(va, size) == 0 ? hipSuccess : host::from_errno(errno);
  }

  hipError_t create_physical(int device, std::size_t size, bool /*exportable*/, PhysicalHandle* out) override {
    if (!host::within_file_size_limit(size)) return hipErrorOutOfMemory;
    const int fd = host::create_memfd(host::physical_memfd_name(device).data(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return host::from_errno(errno);
    void* parked = nullptr;
    // Sealed at its size: a process it is exported to could otherwise shrink it under every
    // mapping of it, whose next touch would then be a SIGBUS in each process.
    if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        host::commit_pages(fd, size, huge_pages_advised_, &parked) != 0) {
      const int error = errno;
      close(fd);
      return host::from_errno(error);
    }
    const bool kept = parked != nullptr && park(fd, parked, size);
    if (parked != nullptr && !kept) munmap(parked, size);
    out->value = static_cast<std::uint64_t>(fd) | (kept ? kMayBeParked : 0);
    return hipSuccess;
  }

  hipError_t release_physical(PhysicalHandle handle) override {
    if (const std::optional<Parked> parked = unpark(handle)) munmap(parked->at, parked->size);
    return close(fd_of(handle)) == 0 ? hipSuccess : hipErrorInvalidValue;
  }

  hipError_t export_fd(PhysicalHandle handle, int* fd) override {
    const int copy = fcntl(fd_of(handle), F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return host::from_errno(errno);
    *fd = copy;
    return hipSuccess;
  }

  hipError_t import_fd(int fd, PhysicalHandle* out, ImportedAllocation* facts) override {
    struct stat status;  // NOLINT(cppcoreguidelines-pro-type-member-init): fstat fills it or fails
    if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size <= 0 ||
        static_cast<std::size_t>(status.st_size) % page_size() != 0) {
      return hipErrorInvalidValue;
    }
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) return hipErrorInvalidValue;  // not a memfd (shmem): not device memory
    // Memory sealed against writes can never be mapped read-write, so it is no allocation handle:
    // refused here rather than by the map that would come later.
    if ((seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0) return hipErrorInvalidValue;
    // Memory whose size is not sealed, as every allocation's is, could be shrunk under the mapping
    // by whoever else holds it: no allocation handle either. Nor memory whose seals are not sealed
    // themselves, as every allocation's are: a write seal added later would fail every map.
    constexpr int kAllocationSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if ((seals & kAllocationSeals) != kAllocationSeals) return hipErrorInvalidValue;
    // Huge-page memory cannot be mapped at the page granularity this backend offers.
    struct statfs filesystem {};
    if (fstatfs(fd, &filesystem) != 0 || filesystem.f_type == HUGETLBFS_MAGIC) return hipErrorInvalidValue;
    const int mode = fcntl(fd, F_GETFL);
    if (mode < 0 || (mode & O_ACCMODE) != O_RDWR) return hipErrorInvalidValue;
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return host::from_errno(errno);
    out->value = static_cast<std::uint64_t>(copy);
    facts->size = static_cast<std::size_t>(status.st_size);
    facts->device = host::memfd_device(fd);
    return hipSuccess;
  }

  hipError_t map(void* va, std::size_t size, PhysicalHandle handle) override {
    // The first map of a new allocation moves its parked mapping here, page tables and all.
    if (const std::optional<Parked> parked = unpark(handle)) {
      if (parked->size == size &&
          mremap(parked->at, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, va) != MAP_FAILED) {  // NOLINT
        return close_to_devices(va, size);
      }
      munmap(parked->at, parked->size);
    }
    // Populating needs an accessible mapping (the kernel skips PROT_NONE ones), so it is mapped
    // read-write, populated, and then closed to every device until set_access. mprotect keeps the
    // page-table entries, so the grant later is one mprotect and the first touch does not fault.
    void* at = mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_of(handle), 0);
    if (at == MAP_FAILED) return hipErrorMapFailed;
    // Only a kernel without MADV_POPULATE_WRITE needs the older way. Other failures (no memory for
    // page tables) leave the rest to faults: the memory itself was committed at create.
    if (host::populate(va, size) == EINVAL) {
      at = mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd_of(handle), 0);
      if (at == MAP_FAILED) {
        (void)unmap(va, size);
        return hipErrorMapFailed;
      }
    }
    return close_to_devices(va, size);
  }

  hipError_t unmap(void* va, std::size_t size) override {
    // Put the reservation's PROT_NONE placeholder back so the range stays ours.
    void* at = mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return at == MAP_FAILED ? hipErrorUnmapFailed : hipSuccess;
  }

  hipError_t set_access(void* va, std::size_t size, std::span<const AccessGrant> grants,
                        PhysicalHandle /*handle*/) override {
    return mprotect(va, size, protection_of(grants)) == 0 ? hipSuccess : host::from_errno(errno);
  }

  hipError_t copy(void* dst, const void* src, std::size_t bytes) override {
    // A naturally aligned word goes as one atomic transfer, as it does through a GPU's copy engine:
    // a stream polling that word (hipStreamWaitValue) may be reading it on another thread right now.
    if (is_word(dst, bytes) && is_word(src, bytes)) {
      std::uint64_t value = 0;
      (void)load_word(src, bytes, &value);
      return store_word(dst, bytes, value);
    }
    const auto ordered = memory_order();
    std::memmove(dst, src, bytes);
    return hipSuccess;
  }

  // With stand-in device queues, the data movement of all streams (their queues' threads and their
  // host threads) goes one operation at a time, as a device's memory orders it: work that follows
  // other work in time then also follows it in the memory model, which is what code that orders
  // work by waiting (a callback that sleeps) relies on. Without queues there is nothing to order.
  [[nodiscard]] std::unique_lock<std::mutex> memory_order() {
    return queues_ ? std::unique_lock{memory_order_} : std::unique_lock<std::mutex>{};
  }

  [[nodiscard]] static bool is_word(const void* address, std::size_t bytes) noexcept {
    return (bytes == sizeof(std::uint32_t) || bytes == sizeof(std::uint64_t)) &&
           reinterpret_cast<std::uintptr_t>(address) % bytes == 0;
  }

  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    const auto ordered = memory_order();
    std::memset(dst, value, bytes);
    return hipSuccess;
  }

  hipError_t synchronize(int /*device*/) override { return hipSuccess; }

  // Every device's memory is the machine's: what is free of it is free for all of them.
  hipError_t memory_info(int device, std::uint64_t* free, std::uint64_t* total) override {
    *total = devices_[static_cast<std::size_t>(device)].total_memory;
    *free = std::min(host::available_memory(), *total);
    return hipSuccess;
  }

  hipError_t load_word(const void* address, std::size_t bytes, std::uint64_t* value) override {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): std::atomic_ref takes no const object; only loads
    void* const word = const_cast<void*>(address);
    if (bytes == sizeof(std::uint32_t)) {
      *value = std::atomic_ref{*static_cast<std::uint32_t*>(word)}.load(std::memory_order_acquire);
    } else {
      *value = std::atomic_ref{*static_cast<std::uint64_t*>(word)}.load(std::memory_order_acquire);
    }
    return hipSuccess;
  }

  hipError_t store_word(void* address, std::size_t bytes, std::uint64_t value) override {
    if (bytes == sizeof(std::uint32_t)) {
      std::atomic_ref{*static_cast<std::uint32_t*>(address)}.store(static_cast<std::uint32_t>(value),
                                                                   std::memory_order_release);
    } else {
      std::atomic_ref{*static_cast<std::uint64_t*>(address)}.store(value, std::memory_order_release);
    }
    return hipSuccess;
  }

  hipError_t allocate(int /*device*/, std::size_t size, void** out) override {
    return plain_allocations_.allocate(size, out);
  }

  hipError_t deallocate(void* ptr, std::size_t size) override {
    if (plain_allocations_.release(ptr, size)) return hipSuccess;
    return munmap(ptr, size) == 0 ? hipSuccess : hipErrorInvalidValue;  // managed memory
  }

  hipError_t allocate_managed(std::size_t size, unsigned /*flags*/, void** out) override {
    // Shared, so that a fork()ed child sees the same managed memory, as it would see a GPU's.
    void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) return host::from_errno(errno);
    *out = at;
    return hipSuccess;
  }

  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    // Every device is this host, so there is nothing to migrate; a prefetch to the CPU still asks
    // the kernel to fault the pages in, which is what such a prefetch is for.
    if (device != hipCpuDeviceId) return hipSuccess;
    const std::uintptr_t page = page_size();
    const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(ptr) / page * page;
    const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(ptr) + bytes + page - 1) / page * page;
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_WILLNEED) == 0) return hipSuccess;
    // ENOMEM here is a range no longer mapped (freed behind a queued prefetch), not a lack of memory.
    return errno == ENOMEM ? hipErrorIllegalAddress : host::from_errno(errno);
  }

  // Advice changes placement, and the host backend has one place: the books keep the advice so
  // range queries answer as HIP documents, and nothing here needs to move.
  hipError_t advise(const void* /*ptr*/, std::size_t /*bytes*/, hipMemoryAdvise /*advice*/, int /*device*/) override {
    return hipSuccess;
  }

  hipError_t ipc_get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle) override {
    return plain_allocations_.get_handle(ptr, size, handle);
  }

  hipError_t ipc_open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size) override {
    return host::PlainAllocations::open(handle, ptr, size);
  }

  hipError_t ipc_close(void* ptr, std::size_t size) override { return host::PlainAllocations::close(ptr, size); }

  std::unique_ptr<Queue> create_queue(int /*device*/, bool /*null_stream*/, bool /*blocking*/,
                                      int /*priority*/) override {
    return queues_ ? make_host_queue(*this) : nullptr;
  }

  std::string queues_unavailable() const override {
    return queues_ ? "" : "the host backend runs stream work on host threads unless HIPXX_HOST_QUEUES=1";
  }

  std::unique_ptr<Timestamp> create_timestamp(int /*device*/, bool timing) override {
    return queues_ ? make_host_timestamp(timing) : nullptr;
  }

 private:
  // A new allocation's pages, committed at create through a read-write mapping of the memfd that
  // stays in place (parked) until the allocation's first map moves it into the reservation.
  struct Parked {
    void* at = nullptr;
    std::size_t size = 0;
  };

  // False where the table cannot grow: the caller unmaps the mapping, and map populates afresh.
  bool park(int fd, void* at, std::size_t size) noexcept {
    try {
      std::lock_guard lock{parked_mutex_};
      parked_.insert_or_assign(fd, Parked{.at = at, .size = size});
      return true;
    } catch (...) {
      return false;
    }
  }

  std::optional<Parked> unpark(PhysicalHandle handle) {
    if (!may_be_parked(handle)) return std::nullopt;
    std::lock_guard lock{parked_mutex_};
    const auto found = parked_.find(fd_of(handle));
    if (found == parked_.end()) return std::nullopt;
    const Parked parked = found->second;
    parked_.erase(found);
    return parked;
  }

  hipError_t close_to_devices(void* va, std::size_t size) {
    if (mprotect(va, size, PROT_NONE) == 0) return hipSuccess;
    (void)unmap(va, size);
    return hipErrorMapFailed;
  }

  // Device queues are a stand-in, for running the runtime's queue path without a GPU.
  static bool queues_requested() {
    const char* const choice = std::getenv("HIPXX_HOST_QUEUES");
    return choice != nullptr && std::string_view{choice} == "1";
  }

  const bool queues_ = queues_requested();
  std::mutex memory_order_;
  std::vector<DeviceProperties> devices_;
  std::mutex parked_mutex_;
  std::unordered_map<int, Parked> parked_;  // memfd -> its parked mapping, until the first map
  const bool huge_pages_advised_ = host_shmem_thp_setting() == "advise";
  host::PlainAllocations plain_allocations_{static_cast<std::size_t>(host::physical_memory()), huge_pages_advised_};
  AddressArena arena_{kArenaShape, reserve_aligned,
                      [](std::uintptr_t base, std::size_t size) { munmap(reinterpret_cast<void*>(base), size); }};
};

}  // namespace

std::unique_ptr<Backend> make_host_backend(int device_count) { return std::make_unique<HostBackend>(device_count); }

}  // namespace hipxx::backend
