// The ROCr backend: AMD's HSA runtime, reached through dlopen("libhsa-runtime64.so.1") so that hipxx
// needs no ROCm to build, and runs (on another backend) where ROCm is absent or too old.
//
// How each backend operation maps onto ROCr:
//   reserve / free_reservation  hsa_amd_vmem_address_reserve_align (or _reserve) / _address_free,
//                               once per arena chunk; ordinary reservations are ranges of chunks
//   create_physical / release   hsa_amd_vmem_handle_create in the device's coarse-grained global
//                               pool / hsa_amd_vmem_handle_release
//   export_fd / import_fd       hsa_amd_vmem_export_shareable_handle / _import_shareable_handle
//                               (dmabuf fds); ROCr refuses to export an imported handle, so an
//                               import keeps a copy of its fd, and copies of that are its exports
//   map / unmap                 hsa_amd_vmem_map(va, size, 0, handle, 0) / hsa_amd_vmem_unmap
//   set_access                  hsa_amd_vmem_set_access with a descriptor for each GPU whose access
//                               changes: the grants, and NONE for a GPU that loses what it had
//   copy / fill                 hsa_amd_memory_async_copy, waited for; application host memory is
//                               staged through a buffer of the CPU agent's pool that every GPU may
//                               use / hsa_amd_memory_fill for the aligned words of a pool allocation,
//                               staged bytes at the ends; mappings and IPC memory by copies, as the
//                               queues fill (rocr_queue.cpp)
//   allocate / deallocate       hsa_amd_memory_pool_allocate / _free (the device's pool)
//   managed memory              anonymous host memory made shared virtual memory with
//                               hsa_amd_svm_attributes_set; prefetch is hsa_amd_svm_prefetch_async
//   legacy IPC                  hsa_amd_ipc_memory_create / _attach / _detach
//   device queues               chains of ROCr's asynchronous operations ordered by signals
//                               (rocr_queue.hpp), where ROCr has hsa_amd_signal_async_handler
//
// Every operation of the backend's own is finished when it returns, so synchronize has nothing to
// wait for (the runtime waits for the streams' queues itself).
//
// The backend never dereferences device memory on the host: where a copy or fill needs to know
// whether an address is device memory it asks its own table of the device memory it made (mappings,
// pool allocations, IPC attachments); anything else is application host memory.
#include "backend/address_arena.hpp"
#include "backend/backend.hpp"
#include "backend/page_size.hpp"
#include "backend/rocr/hsa_runtime.hpp"
#include "backend/rocr/hsa_status.hpp"
#include "backend/rocr/rocr_queue.hpp"
#include "core/runtime.hpp"  // only for the calling thread's current HIP device

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hipxx::backend {
namespace {

using rocr::hsa_agent_t;
using rocr::hsa_amd_memory_pool_t;
using rocr::hsa_amd_vmem_alloc_handle_t;
using rocr::hsa_signal_t;
using rocr::hsa_status_t;
using rocr::RuntimeApi;

using rocr::to_hip;

std::uintptr_t address_of(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

void* pointer_to(std::uintptr_t address) noexcept { return reinterpret_cast<void*>(address); }

// ROCr's SVM calls take a plain pointer to a range whose contents they do not write; HIP's advice and
// prefetch take a const one.
void* writable(const void* ptr) noexcept {
  return const_cast<void*>(ptr);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
}

rocr::hsa_access_permission_t permission_of(hipMemAccessFlags flags) noexcept {
  switch (flags) {
    case hipMemAccessFlagsProtRead: return rocr::HSA_ACCESS_PERMISSION_RO;
    case hipMemAccessFlagsProtReadWrite: return rocr::HSA_ACCESS_PERMISSION_RW;
    default: return rocr::HSA_ACCESS_PERMISSION_NONE;
  }
}

// A GPU agent with the pool its device memory comes from.
struct GpuAgent {
  hsa_agent_t agent{};
  hsa_amd_memory_pool_t pool{};
};

// The ABI of hipIpcMemHandle_t's 64 bytes on this backend: ROCr's 32-byte handle, the allocation's
// size (attach needs it), the exporting process (HIP refuses to open a handle in the process that
// made it) and a tag that tells a handle of this backend from anything else.
struct IpcHandleBytes {
  rocr::hsa_amd_ipc_memory_t rocr_handle;
  std::uint64_t size;
  std::int32_t process;
  std::uint32_t tag;
  std::array<unsigned char, 16> unused;
};
static_assert(sizeof(IpcHandleBytes) == sizeof(hipIpcMemHandle_t));
constexpr std::uint32_t kIpcTag = 0x72637278;  // "xrcr"

// What kind of device memory a range of the backend's table is, for choosing the agent that copies it.
enum class DeviceMemory { mapping, pool_allocation, ipc_attachment };

struct DeviceRange {
  std::size_t size = 0;
  DeviceMemory kind = DeviceMemory::mapping;
  int owner = 0;  // the device whose pool it came from; for a mapping, its allocation's, where known
  std::vector<hipMemAccessFlags> granted;  // a mapping's grants, one per device; empty: none yet
  std::uint64_t attached_for = 0;  // an IPC attachment's devices, a bit each
};

// Where one side of a copy is: host memory, or device memory and the devices that may reach it (a
// bit each); and how many bytes from there are of the same piece of memory. ROCr copies and fills
// within one allocation or mapping, so a range over several (a growable array's chunks) goes piece
// by piece.
struct Place {
  bool device = false;
  std::uint64_t reachable_by = 0;
  std::size_t length = 0;
  bool pool_allocation = false;
};

class RocrBackend final : public Backend, public rocr::QueueSupport {
 public:
  RocrBackend(const RuntimeApi& api, hsa_agent_t cpu, hsa_amd_memory_pool_t cpu_pool, std::vector<GpuAgent> gpus,
              std::vector<DeviceProperties> devices)
      : api_(api), cpu_(cpu), cpu_pool_(cpu_pool), gpus_(std::move(gpus)), devices_(std::move(devices)) {
    (void)arena_.prepare();  // where it cannot, reservations go to ROCr one by one
  }

  RocrBackend(const RocrBackend&) = delete;
  RocrBackend& operator=(const RocrBackend&) = delete;
  RocrBackend(RocrBackend&&) = delete;
  RocrBackend& operator=(RocrBackend&&) = delete;

  // The runtime lives until the process ends; what ROCr holds for it goes with the process.
  ~RocrBackend() override {
    if (bounce_ != nullptr) (void)api_.hsa_amd_memory_pool_free(bounce_);
    if (patterns_ != nullptr) (void)api_.hsa_amd_memory_pool_free(patterns_);
    for (void* page : word_pages_) (void)api_.hsa_amd_memory_pool_free(page);
  }

  std::string_view name() const noexcept override { return "rocr"; }
  int device_count() const noexcept override { return static_cast<int>(devices_.size()); }
  const DeviceProperties& device(int ordinal) const override { return devices_.at(static_cast<std::size_t>(ordinal)); }
  std::string queues_unavailable() const override {
    return api_.hsa_amd_signal_async_handler != nullptr ? "" : "the HSA runtime lacks hsa_amd_signal_async_handler";
  }
  std::unique_ptr<Queue> create_queue(int device, bool /*null_stream*/, bool /*blocking*/, int /*priority*/) override {
    if (!valid(device) || api_.hsa_amd_signal_async_handler == nullptr) return nullptr;
    return rocr::make_queue(*this, device);
  }
  std::unique_ptr<Timestamp> create_timestamp(int /*device*/, bool timing) override {
    return rocr::make_timestamp(timing);
  }

  // What the queues ask of the backend.
  const RuntimeApi& runtime_api() const noexcept override { return api_; }
  rocr::SignalPool& signal_pool() noexcept override { return signals_; }
  std::optional<std::vector<rocr::CopyPiece>> plan_copy(void* dst, const void* src, std::size_t bytes) override {
    std::vector<rocr::CopyPiece> pieces;
    const bool direct = each_copy_stretch(
        dst, src, bytes,
        [&](unsigned char* into, const Place& to, const unsigned char* out_of, const Place& from, std::size_t length) {
          const std::uint64_t both = to.reachable_by & from.reachable_by;
          if (!to.device || !from.device || both == 0) return false;
          pieces.push_back({.dst = into, .src = out_of, .bytes = length, .engine = engine_of(both)});
          return true;
        });
    return direct ? std::optional{std::move(pieces)} : std::nullopt;
  }
  std::optional<std::vector<rocr::CopyPiece>> plan_fill(void* dst, std::size_t bytes) override {
    std::vector<rocr::CopyPiece> pieces;
    const bool direct = each_fill_stretch(dst, bytes, [&](unsigned char* into, const Place& to) {
      if (!to.device || to.reachable_by == 0) return false;
      pieces.push_back({.dst = into, .bytes = to.length, .engine = engine_of(to.reachable_by)});
      return true;
    });
    return direct ? std::optional{std::move(pieces)} : std::nullopt;
  }
  // A block of each byte value, made at the first fill on a queue: kFillPatternBytes * 256 of the
  // CPU agent's pool, which the host may write.
  const void* fill_pattern(unsigned char value) override {
    std::lock_guard lock{bounce_mutex_};
    if (patterns_ == nullptr) {
      void* made = nullptr;
      if (make_shared_host_buffer(rocr::kFillPatternBytes * 256, &made) != hipSuccess) return nullptr;
      for (unsigned byte = 0; byte < 256; ++byte) {
        std::memset(static_cast<unsigned char*>(made) + byte * rocr::kFillPatternBytes, static_cast<int>(byte),
                    rocr::kFillPatternBytes);
      }
      patterns_ = made;
    }
    return static_cast<const unsigned char*>(patterns_) + value * rocr::kFillPatternBytes;
  }
  std::shared_ptr<void> word_source() override {
    std::lock_guard lock{bounce_mutex_};
    if (free_words_.empty() && !add_word_page_locked()) return nullptr;
    void* const word = free_words_.back();
    free_words_.pop_back();
    return {word, [this](void* returned) {
              std::lock_guard returning{bounce_mutex_};
              free_words_.push_back(returned);  // cannot throw: add_word_page_locked kept room for it
            }};
  }
  hsa_agent_t agent_for(int device) const noexcept override {
    if (device == hipCpuDeviceId || !valid(device)) return cpu_;
    return gpus_[static_cast<std::size_t>(device)].agent;
  }

  hipError_t reserve(std::size_t size, std::size_t alignment, std::uintptr_t hint, void** va) override {
    if (hint != 0 ? arena_.holds(hint) : arena_.serves(size, alignment)) {
      if (const std::uintptr_t at = hint != 0 ? arena_.take_at(hint, size) : arena_.take(size, alignment); at != 0) {
        *va = pointer_to(at);
        return hipSuccess;
      }
    }
    const std::uintptr_t at = reserve_directly(size, alignment, hint);
    if (at == 0) return hipErrorOutOfMemory;
    *va = pointer_to(at);
    return hipSuccess;
  }

  hipError_t free_reservation(void* va, std::size_t size) override {
    if (arena_.give_back(address_of(va), size)) return hipSuccess;
    return free_directly(address_of(va), size);
  }

  hipError_t create_physical(int device, std::size_t size, bool exportable, PhysicalHandle* out) override {
    if (!valid(device)) return hipErrorInvalidDevice;
    const DeviceProperties& properties = devices_[static_cast<std::size_t>(device)];
    if (!properties.virtual_memory || (exportable && !properties.posix_fd_export)) return hipErrorNotSupported;
    hsa_amd_vmem_alloc_handle_t handle{};
    if (const hsa_status_t status = api_.hsa_amd_vmem_handle_create(gpus_[static_cast<std::size_t>(device)].pool, size,
                                                                    rocr::MEMORY_TYPE_NONE, 0, &handle);
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    try {
      book_handle(handle, device);
    } catch (...) {
      (void)api_.hsa_amd_vmem_handle_release(handle);
      throw;
    }
    out->value = handle.handle;
    return hipSuccess;
  }

  hipError_t release_physical(PhysicalHandle handle) override {
    if (const hsa_status_t status = api_.hsa_amd_vmem_handle_release({handle.value});
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    if (handle.kept_fd >= 0) close(handle.kept_fd);
    std::lock_guard lock{mutex_};
    if (const auto found = handle_books_.find(handle.value);
        found != handle_books_.end() && --found->second.references == 0) {
      handle_books_.erase(found);
    }
    return hipSuccess;
  }

  // ROCr refuses to export a handle that was imported; the fd it came from names the same memory,
  // so a copy of that fd is its export, as on the CUDA backend.
  hipError_t export_fd(PhysicalHandle handle, int* fd) override {
    if (handle.kept_fd >= 0) {
      *fd = fcntl(handle.kept_fd, F_DUPFD_CLOEXEC, 0);
      return *fd >= 0 ? hipSuccess : hipErrorOutOfMemory;
    }
    int exported = -1;
    if (const hsa_status_t status = api_.hsa_amd_vmem_export_shareable_handle(&exported, {handle.value}, 0);
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    *fd = exported;
    return hipSuccess;
  }

  // The ordinal of the GPU whose pool an allocation came from, or -1 where ROCr does not say.
  [[nodiscard]] int device_of_allocation(hsa_amd_vmem_alloc_handle_t handle) const noexcept {
    if (api_.hsa_amd_vmem_get_alloc_properties_from_handle == nullptr) return -1;
    hsa_amd_memory_pool_t pool{};
    rocr::hsa_amd_memory_type_t type{};
    if (api_.hsa_amd_vmem_get_alloc_properties_from_handle(handle, &pool, &type) != rocr::HSA_STATUS_SUCCESS) return -1;
    for (std::size_t device = 0; device < gpus_.size(); ++device) {
      if (gpus_[device].pool.handle == pool.handle) return static_cast<int>(device);
    }
    return -1;
  }

  // A dmabuf's size is the file's; where fstat does not give it, the books learn it at the first map.
  // The handle keeps a copy of the fd for its exports, closed at its release. ROCr may answer an fd
  // whose memory this process imported already with that same handle, counted once more.
  hipError_t import_fd(int fd, PhysicalHandle* out, ImportedAllocation* facts) override {
    const int kept = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (kept < 0) return errno == EBADF ? hipErrorInvalidValue : hipErrorOutOfMemory;  // closed, or out of fds
    hsa_amd_vmem_alloc_handle_t handle{};
    if (const hsa_status_t status = api_.hsa_amd_vmem_import_shareable_handle(kept, &handle);
        status != rocr::HSA_STATUS_SUCCESS) {
      close(kept);
      // An fd that is no allocation's is, for HIP, an invalid value.
      return status == rocr::HSA_STATUS_ERROR_OUT_OF_RESOURCES ? hipErrorOutOfMemory : hipErrorInvalidValue;
    }
    const int device = device_of_allocation(handle);
    try {
      book_handle(handle, device);
    } catch (...) {
      (void)api_.hsa_amd_vmem_handle_release(handle);
      close(kept);
      throw;
    }
    struct stat status {};
    facts->size = fstat(kept, &status) == 0 && status.st_size > 0 ? static_cast<std::size_t>(status.st_size) : 0;
    facts->device = device;
    *out = PhysicalHandle{.value = handle.handle, .kept_fd = kept};
    return hipSuccess;
  }

  hipError_t map(void* va, std::size_t size, PhysicalHandle handle) override {
    std::lock_guard lock{mutex_};
    // Booked before the call, so that nothing can fail once ROCr has mapped.
    const auto [entry, inserted] = device_ranges_.insert_or_assign(
        address_of(va),
        DeviceRange{.size = size, .kind = DeviceMemory::mapping, .owner = owner_of(handle), .granted = {}});
    if (const hsa_status_t status = api_.hsa_amd_vmem_map(va, size, 0, {handle.value}, 0);
        status != rocr::HSA_STATUS_SUCCESS) {
      device_ranges_.erase(entry);
      return to_hip(status);
    }
    return hipSuccess;
  }

  hipError_t unmap(void* va, std::size_t size) override {
    if (const hsa_status_t status = api_.hsa_amd_vmem_unmap(va, size); status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    std::lock_guard lock{mutex_};
    device_ranges_.erase(address_of(va));
    return hipSuccess;
  }

  // Where anything changes, every GPU that has access or is to have it is named, with what it is to
  // have: ROCr's documentation says a call replaces every agent's permissions (so a GPU left out
  // would lose its access), and its code changes only the agents a call names (so a GPU left out
  // would keep access it is to lose); these descriptors come out the same either way. A GPU that
  // neither has access nor is to have it is not named: ROCr imports the memory into every GPU a
  // descriptor names, NONE or not, which a GPU that cannot reach it may refuse.
  hipError_t set_access(void* va, std::size_t size, std::span<const AccessGrant> grants,
                        PhysicalHandle /*handle*/) override {
    std::vector<hipMemAccessFlags> wanted(devices_.size(), hipMemAccessFlagsProtNone);
    for (const AccessGrant& grant : grants) {
      if (!valid(grant.device)) return hipErrorInvalidDevice;
      wanted[static_cast<std::size_t>(grant.device)] = grant.flags;
    }
    std::lock_guard lock{mutex_};
    const auto found = device_ranges_.find(address_of(va));
    const std::vector<hipMemAccessFlags> no_grants;
    const std::vector<hipMemAccessFlags>& had = found != device_ranges_.end() ? found->second.granted : no_grants;
    std::vector<rocr::hsa_amd_memory_access_desc_t> descriptors;
    descriptors.reserve(gpus_.size());
    bool changes = false;
    for (std::size_t device = 0; device < gpus_.size(); ++device) {
      const hipMemAccessFlags before = device < had.size() ? had[device] : hipMemAccessFlagsProtNone;
      changes = changes || wanted[device] != before;
      if (wanted[device] != hipMemAccessFlagsProtNone || before != hipMemAccessFlagsProtNone) {
        descriptors.push_back({.permissions = permission_of(wanted[device]), .agent_handle = gpus_[device].agent});
      }
    }
    if (changes) {
      if (const hsa_status_t status = api_.hsa_amd_vmem_set_access(va, size, descriptors.data(), descriptors.size());
          status != rocr::HSA_STATUS_SUCCESS) {
        return to_hip(status);
      }
    }
    if (found != device_ranges_.end()) found->second.granted = std::move(wanted);
    return hipSuccess;
  }

  hipError_t copy(void* dst, const void* src, std::size_t bytes) override {
    hipError_t result = hipSuccess;
    each_copy_stretch(
        dst, src, bytes,
        [&](unsigned char* into, const Place& to, const unsigned char* out_of, const Place& from, std::size_t length) {
          result = copy_piece(into, to, out_of, from, length);
          return result == hipSuccess;
        });
    return result;
  }

  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    hipError_t result = hipSuccess;
    each_fill_stretch(dst, bytes, [&](unsigned char* into, const Place& to) {
      if (!to.device) {
        std::memset(into, value, to.length);
      } else if (to.pool_allocation) {
        result = fill_device(into, to, value);
      } else {
        result = fill_by_copies(into, to, value);
      }
      return result == hipSuccess;
    });
    return result;
  }

  hipError_t synchronize(int device) override { return valid(device) ? hipSuccess : hipErrorInvalidDevice; }

  // ROCr counts what the kernel driver has given out of the GPU's memory, to any process.
  hipError_t memory_info(int device, std::uint64_t* free, std::uint64_t* total) override {
    if (!valid(device)) return hipErrorInvalidDevice;
    std::uint64_t available = 0;
    if (const hsa_status_t status = api_.hsa_agent_get_info(gpus_[static_cast<std::size_t>(device)].agent,
                                                            rocr::HSA_AMD_AGENT_INFO_MEMORY_AVAIL, &available);
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    *total = devices_[static_cast<std::size_t>(device)].total_memory;
    *free = std::min(available, *total);
    return hipSuccess;
  }

  // A word of device memory moves by a copy of its 4 or 8 bytes, which a copy engine does not tear.
  hipError_t load_word(const void* address, std::size_t bytes, std::uint64_t* value) override {
    if (bytes != sizeof(std::uint32_t) && bytes != sizeof(std::uint64_t)) return hipErrorInvalidValue;
    std::uint64_t word = 0;
    std::uint32_t narrow = 0;
    void* into = bytes == sizeof(std::uint32_t) ? static_cast<void*>(&narrow) : &word;
    if (place_of(address, bytes, false).device) {
      if (const hipError_t error = copy(into, address, bytes); error != hipSuccess) return error;
    } else if (bytes == sizeof(std::uint32_t)) {
      narrow = __atomic_load_n(static_cast<const std::uint32_t*>(address), __ATOMIC_SEQ_CST);
    } else {
      word = __atomic_load_n(static_cast<const std::uint64_t*>(address), __ATOMIC_SEQ_CST);
    }
    *value = bytes == sizeof(std::uint32_t) ? narrow : word;
    return hipSuccess;
  }

  hipError_t store_word(void* address, std::size_t bytes, std::uint64_t value) override {
    if (bytes != sizeof(std::uint32_t) && bytes != sizeof(std::uint64_t)) return hipErrorInvalidValue;
    const auto narrow = static_cast<std::uint32_t>(value);
    if (place_of(address, bytes, true).device) {
      return copy(address, bytes == sizeof(std::uint32_t) ? static_cast<const void*>(&narrow) : &value, bytes);
    }
    if (bytes == sizeof(std::uint32_t)) {
      std::atomic_ref{*static_cast<std::uint32_t*>(address)}.store(narrow);
    } else {
      std::atomic_ref{*static_cast<std::uint64_t*>(address)}.store(value);
    }
    return hipSuccess;
  }

  hipError_t allocate(int device, std::size_t size, void** out) override {
    if (!valid(device)) return hipErrorInvalidDevice;
    void* at = nullptr;
    if (const hsa_status_t status =
            api_.hsa_amd_memory_pool_allocate(gpus_[static_cast<std::size_t>(device)].pool, size, 0, &at);
        status != rocr::HSA_STATUS_SUCCESS) {
      // ROCr refuses a size beyond the pool's largest allocation as an invalid allocation: for HIP,
      // as for any size the device cannot hold, that is out of memory.
      return status == rocr::HSA_STATUS_ERROR_INVALID_ALLOCATION ? hipErrorOutOfMemory : to_hip(status);
    }
    try {
      std::lock_guard lock{mutex_};
      // Devices given peer access to this one reach its new memory too.
      if (const hsa_status_t status = peers_of_[static_cast<std::size_t>(device)] == 0 ? rocr::HSA_STATUS_SUCCESS
                                                                                       : allow_peers_locked(at, device);
          status != rocr::HSA_STATUS_SUCCESS) {
        (void)api_.hsa_amd_memory_pool_free(at);
        return to_hip(status);
      }
      device_ranges_[address_of(at)] =
          DeviceRange{.size = size, .kind = DeviceMemory::pool_allocation, .owner = device, .granted = {}};
    } catch (...) {
      (void)api_.hsa_amd_memory_pool_free(at);
      throw;
    }
    *out = at;
    return hipSuccess;
  }

  // A GPU can be given another's plain allocations unless ROCr says that agent may never use that pool.
  hipError_t can_access_peer(int device, int peer, bool* can) override {
    if (!valid(device) || !valid(peer)) return hipErrorInvalidDevice;
    if (device == peer) {
      *can = false;
      return hipSuccess;
    }
    rocr::hsa_amd_memory_pool_access_t access = rocr::HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
    if (const hsa_status_t status = api_.hsa_amd_agent_memory_pool_get_info(
            gpus_[static_cast<std::size_t>(device)].agent, gpus_[static_cast<std::size_t>(peer)].pool,
            rocr::HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access);
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    *can = access != rocr::HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
    return hipSuccess;
  }

  // ROCr gives a pool allocation's access to the agents listed, its own pool's agent and no other:
  // every allocation of `peer` is granted again with the new set. Where one refuses, those granted
  // so far are put back as they were.
  hipError_t set_peer_access(int device, int peer, bool enabled) override {
    if (!valid(device) || !valid(peer)) return hipErrorInvalidDevice;
    std::lock_guard lock{mutex_};
    std::uint64_t& peers = peers_of_[static_cast<std::size_t>(peer)];
    const std::uint64_t before = peers;
    peers = enabled ? before | bit_of(device) : before & ~bit_of(device);
    std::vector<void*> granted;
    for (const auto& [base, range] : device_ranges_) {
      if (range.kind != DeviceMemory::pool_allocation || range.owner != peer) continue;
      void* const at = reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr): our own allocation
      if (const hsa_status_t status = allow_peers_locked(at, peer); status != rocr::HSA_STATUS_SUCCESS) {
        peers = before;
        for (void* undo : granted) (void)allow_peers_locked(undo, peer);
        return to_hip(status);
      }
      granted.push_back(at);
    }
    return hipSuccess;
  }

  hipError_t deallocate(void* ptr, std::size_t /*size*/) override {
    std::unique_lock lock{mutex_};
    if (const auto managed = managed_.find(address_of(ptr)); managed != managed_.end()) {
      const std::size_t length = managed->second;
      managed_.erase(managed);
      lock.unlock();
      return munmap(ptr, length) == 0 ? hipSuccess : hipErrorInvalidValue;
    }
    if (const hsa_status_t status = api_.hsa_amd_memory_pool_free(ptr); status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    device_ranges_.erase(address_of(ptr));
    return hipSuccess;
  }

  // Host memory that every GPU may use as shared virtual memory, fine-grained as HIP's managed
  // memory starts out on AMD GPUs. It is host memory to this backend's copies: the host may always
  // touch it (ROCr migrates it back on demand).
  hipError_t allocate_managed(std::size_t size, unsigned /*flags*/, void** out) override {
    if (!devices_.front().managed_memory) return hipErrorNotSupported;
    const std::size_t length = round_up(size, page_size());
    void* at = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (at == MAP_FAILED) return hipErrorOutOfMemory;
    std::vector<rocr::hsa_amd_svm_attribute_pair_t> attributes{
        {.attribute = rocr::HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG, .value = rocr::HSA_AMD_SVM_GLOBAL_FLAG_FINE_GRAINED}};
    for (const GpuAgent& gpu : gpus_) {
      attributes.push_back({.attribute = rocr::HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE, .value = gpu.agent.handle});
    }
    hsa_status_t status = api_.hsa_amd_svm_attributes_set(at, length, attributes.data(), attributes.size());
    if (status == rocr::HSA_STATUS_SUCCESS) {
      try {
        std::lock_guard lock{mutex_};
        managed_[address_of(at)] = length;
      } catch (...) {
        munmap(at, length);
        throw;
      }
      *out = at;
      return hipSuccess;
    }
    munmap(at, length);
    return to_hip(status);
  }

  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    if (device != hipCpuDeviceId && !valid(device)) return hipErrorInvalidDevice;
    const hsa_agent_t target = agent_for(device);
    return with_completion([&](hsa_signal_t done) {
      return api_.hsa_amd_svm_prefetch_async(writable(ptr), bytes, target, 0, nullptr, done);
    });
  }

  hipError_t advise(const void* ptr, std::size_t bytes, hipMemoryAdvise advice, int device) override {
    rocr::hsa_amd_svm_attribute_pair_t attribute{};
    switch (advice) {
      case hipMemAdviseSetReadMostly:
      case hipMemAdviseUnsetReadMostly:
        attribute = {.attribute = rocr::HSA_AMD_SVM_ATTRIB_READ_MOSTLY,
                     .value = advice == hipMemAdviseSetReadMostly ? 1U : 0U};
        break;
      case hipMemAdviseSetPreferredLocation:
        attribute = {.attribute = rocr::HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION, .value = agent_for(device).handle};
        break;
      case hipMemAdviseUnsetPreferredLocation:
        attribute = {.attribute = rocr::HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION, .value = 0};  // no agent: none
        break;
      // Accessed-by asks for the device to map the memory where it is rather than migrate it on
      // access; taking that back leaves the device access that may migrate, as the memory started.
      case hipMemAdviseSetAccessedBy:
        attribute = {.attribute = rocr::HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE,
                     .value = agent_for(device).handle};
        break;
      case hipMemAdviseUnsetAccessedBy:
        attribute = {.attribute = rocr::HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE, .value = agent_for(device).handle};
        break;
      case hipMemAdviseSetCoarseGrain:
      case hipMemAdviseUnsetCoarseGrain:
        attribute = {.attribute = rocr::HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG,
                     .value = advice == hipMemAdviseSetCoarseGrain ? rocr::HSA_AMD_SVM_GLOBAL_FLAG_COARSE_GRAINED
                                                                   : rocr::HSA_AMD_SVM_GLOBAL_FLAG_FINE_GRAINED};
        break;
      default: return hipErrorInvalidValue;
    }
    if (attribute.attribute != rocr::HSA_AMD_SVM_ATTRIB_READ_MOSTLY &&
        attribute.attribute != rocr::HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG && device != hipCpuDeviceId && !valid(device)) {
      return hipErrorInvalidDevice;
    }
    return to_hip(api_.hsa_amd_svm_attributes_set(writable(ptr), bytes, &attribute, 1));
  }

  hipError_t ipc_get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle) override {
    IpcHandleBytes bytes{};
    if (const hsa_status_t status = api_.hsa_amd_ipc_memory_create(ptr, size, &bytes.rocr_handle);
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    bytes.size = size;
    bytes.process = static_cast<std::int32_t>(getpid());
    bytes.tag = kIpcTag;
    std::memcpy(handle, &bytes, sizeof bytes);
    return hipSuccess;
  }

  // Attached for every GPU, as HIP's opened memory may be used from any device. ROCr maps it for
  // every GPU named and refuses the whole attach if one cannot have it (no path to the exporter's
  // GPU), so that attach is tried again for the calling thread's device alone.
  hipError_t ipc_open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size) override {
    IpcHandleBytes bytes{};
    std::memcpy(&bytes, &handle, sizeof bytes);
    if (bytes.tag != kIpcTag || bytes.size == 0) return hipErrorInvalidValue;
    if (bytes.process == static_cast<std::int32_t>(getpid())) return hipErrorInvalidContext;
    void* at = nullptr;
    std::uint64_t attached_for = every_device();
    const std::vector<hsa_agent_t> agents = gpu_agents();
    hsa_status_t status = api_.hsa_amd_ipc_memory_attach(&bytes.rocr_handle, bytes.size,
                                                         static_cast<std::uint32_t>(agents.size()), agents.data(), &at);
    if ((status == rocr::HSA_STATUS_ERROR_OUT_OF_RESOURCES || status == rocr::HSA_STATUS_ERROR) && agents.size() > 1) {
      const int device = current_device();
      const hsa_agent_t own = gpus_[static_cast<std::size_t>(device)].agent;
      attached_for = bit_of(device);
      status = api_.hsa_amd_ipc_memory_attach(&bytes.rocr_handle, bytes.size, 1, &own, &at);
    }
    if (status != rocr::HSA_STATUS_SUCCESS) {
      return status == rocr::HSA_STATUS_ERROR_OUT_OF_RESOURCES ? hipErrorOutOfMemory : hipErrorInvalidValue;
    }
    try {
      std::lock_guard lock{mutex_};
      device_ranges_[address_of(at)] = DeviceRange{.size = bytes.size,
                                                   .kind = DeviceMemory::ipc_attachment,
                                                   .owner = current_device(),
                                                   .granted = {},
                                                   .attached_for = attached_for};
    } catch (...) {
      (void)api_.hsa_amd_ipc_memory_detach(at);
      throw;
    }
    *ptr = at;
    *size = bytes.size;
    return hipSuccess;
  }

  hipError_t ipc_close(void* ptr, std::size_t /*size*/) override {
    if (const hsa_status_t status = api_.hsa_amd_ipc_memory_detach(ptr); status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    std::lock_guard lock{mutex_};
    device_ranges_.erase(address_of(ptr));
    return hipSuccess;
  }

 private:
  static constexpr std::size_t kBounceBytes = std::size_t{1} << 20;
  static constexpr std::size_t kWordPageBytes = 4096;

  [[nodiscard]] static std::size_t round_up(std::size_t value, std::size_t multiple) noexcept {
    return (value + multiple - 1) / multiple * multiple;
  }

  [[nodiscard]] bool valid(int device) const noexcept { return device >= 0 && device < device_count(); }

  [[nodiscard]] int current_device() const noexcept {
    const int device = core::Runtime::current_device();
    return valid(device) ? device : 0;
  }

  [[nodiscard]] std::vector<hsa_agent_t> gpu_agents() const {
    std::vector<hsa_agent_t> agents;
    agents.reserve(gpus_.size());
    for (const GpuAgent& gpu : gpus_) agents.push_back(gpu.agent);
    return agents;
  }

  // The device a handle's memory is on; where ROCr does not tell an imported handle's, the calling
  // thread's device stands for it.
  [[nodiscard]] int owner_of(PhysicalHandle handle) const {
    const auto found = handle_books_.find(handle.value);
    return found != handle_books_.end() && found->second.device >= 0 ? found->second.device : current_device();
  }

  // One more hold on `handle`, of `device` (-1: not known).
  void book_handle(hsa_amd_vmem_alloc_handle_t handle, int device) {
    std::lock_guard lock{mutex_};
    HandleBooks& books = handle_books_[handle.handle];
    if (device >= 0) books.device = device;
    ++books.references;
  }

  // Device memory is reached through an agent allowed to: a pool allocation through its own device;
  // a mapping through the calling thread's device where that has the access the copy needs (the
  // books checked it), else through any device that has. At most `most` bytes: to the end of the
  // device memory at `ptr`, or, for host memory, to the start of the next device memory.
  [[nodiscard]] Place place_of(const void* ptr, std::size_t most, bool writing) {
    const std::uintptr_t address = address_of(ptr);
    std::lock_guard lock{mutex_};
    const auto after = device_ranges_.upper_bound(address);
    // Host memory: up to the next device memory, if any.
    const auto host = [&] {
      return Place{.length = after == device_ranges_.end() ? most : std::min(most, after->first - address)};
    };
    if (after == device_ranges_.begin()) return host();
    const auto& [base, range] = *std::prev(after);
    if (address >= base + range.size) return host();
    Place place{.device = true, .length = std::min(most, base + range.size - address)};
    switch (range.kind) {
      case DeviceMemory::pool_allocation:
        place.reachable_by = bit_of(range.owner) | peers_of_[static_cast<std::size_t>(range.owner)];
        place.pool_allocation = true;
        break;
      case DeviceMemory::ipc_attachment: place.reachable_by = range.attached_for; break;
      case DeviceMemory::mapping:
        for (std::size_t device = 0; device < range.granted.size(); ++device) {
          const hipMemAccessFlags flags = range.granted[device];
          if (writing ? flags == hipMemAccessFlagsProtReadWrite : flags != hipMemAccessFlagsProtNone) {
            place.reachable_by |= bit_of(static_cast<int>(device));
          }
        }
        break;
    }
    return place;
  }

  // Walks a copy in stretches that each lie in one piece of memory on both sides (ROCr copies within
  // one allocation or mapping): visit(into, to, out_of, from, length) for each, until it says false.
  template <class Visit>
  bool each_copy_stretch(void* dst, const void* src, std::size_t bytes, Visit&& visit) {
    auto* const into = static_cast<unsigned char*>(dst);
    const auto* const out_of = static_cast<const unsigned char*>(src);
    for (std::size_t done = 0; done < bytes;) {
      const Place to = place_of(into + done, bytes - done, true);
      const Place from = place_of(out_of + done, bytes - done, false);
      const std::size_t length = std::min(to.length, from.length);
      if (!visit(into + done, to, out_of + done, from, length)) return false;
      done += length;
    }
    return true;
  }

  // The same for a fill: visit(into, to) for each piece of memory, to.length bytes of it.
  template <class Visit>
  bool each_fill_stretch(void* dst, std::size_t bytes, Visit&& visit) {
    auto* const into = static_cast<unsigned char*>(dst);
    for (std::size_t done = 0; done < bytes;) {
      const Place to = place_of(into + done, bytes - done, true);
      if (!visit(into + done, to)) return false;
      done += to.length;
    }
    return true;
  }

  [[nodiscard]] static std::uint64_t bit_of(int device) noexcept { return std::uint64_t{1} << device; }

  // Grants the pool allocation at `at`, of device `owner`, to the owner and the devices given peer
  // access to it (only the owner, where none are: the call takes the whole list each time).
  hsa_status_t allow_peers_locked(void* at, int owner) {
    const std::uint64_t reach = bit_of(owner) | peers_of_[static_cast<std::size_t>(owner)];
    std::vector<hsa_agent_t> agents;
    for (std::size_t device = 0; device < gpus_.size(); ++device) {
      if ((reach & bit_of(static_cast<int>(device))) != 0) agents.push_back(gpus_[device].agent);
    }
    return api_.hsa_amd_agents_allow_access(static_cast<std::uint32_t>(agents.size()), agents.data(), nullptr, at);
  }

  [[nodiscard]] std::uint64_t every_device() const noexcept {
    return gpus_.size() >= 64 ? ~std::uint64_t{0} : bit_of(static_cast<int>(gpus_.size())) - 1;
  }

  // The agent to copy with, of the devices in `devices`: the calling thread's where it is one of them
  // (the books checked its access), else the first. Where there is none, the calling thread's; the
  // books refuse such copies before they get here, and it matters, since ROCr does not check that
  // its engine reaches the memory (a GPU fault ends the process).
  [[nodiscard]] hsa_agent_t engine_of(std::uint64_t devices) const noexcept {
    const int current = current_device();
    if (devices == 0 || (devices & bit_of(current)) != 0) return gpus_[static_cast<std::size_t>(current)].agent;
    return gpus_[static_cast<std::size_t>(std::countr_zero(devices))].agent;
  }

  hipError_t copy_piece(void* dst, const Place& to, const void* src, const Place& from, std::size_t bytes) {
    if (!to.device && !from.device) {
      std::memmove(dst, src, bytes);
      return hipSuccess;
    }
    // ROCr's copy agents must each reach both buffers: device to device needs a device that reaches
    // both, or the copy goes through the staging buffer, which every device reaches.
    if (to.device && from.device && (to.reachable_by & from.reachable_by) != 0) {
      const hsa_agent_t engine = engine_of(to.reachable_by & from.reachable_by);
      return copy_and_wait(dst, engine, src, engine, bytes);
    }
    return staged_copy(dst, to, src, from, bytes);
  }

  // hsa_amd_memory_fill runs on the GPU that ROCr's pointer lookup names as the memory's owner: for
  // a mapping that is the GPU of its allocation's pool, which may not have been granted the mapping
  // (its fill then faults and ROCr ends the process), and for an imported allocation newer ROCr's
  // lookup finds no owner at all. So mappings and IPC memory are filled as the queues fill: a block
  // of the value from the pattern, then copies within the memory that double what is filled, each
  // on a GPU that may write it.
  hipError_t fill_by_copies(unsigned char* start, const Place& to, unsigned char value) {
    const void* const pattern = fill_pattern(value);
    if (pattern == nullptr) return hipErrorOutOfMemory;
    const hsa_agent_t engine = engine_of(to.reachable_by);
    for (std::size_t filled = 0; filled < to.length;) {
      const std::size_t block = rocr::next_fill_block(filled, to.length);
      const void* const from = filled == 0 ? pattern : start;
      if (const hipError_t error = copy_and_wait(start + filled, engine, from, engine, block); error != hipSuccess) {
        return error;
      }
      filled += block;
    }
    return hipSuccess;
  }

  // A pool allocation, which its owner, where ROCr's fill runs, always reaches. hsa_amd_memory_fill
  // writes whole aligned 32-bit words; the bytes before the first such word and after the last (all
  // of them, where the range holds no whole word) are copied in from a buffer of the value.
  // [begin, words) head, [words, words_end) words, [words_end, end) tail: each at most 3 bytes but
  // the words.
  hipError_t fill_device(unsigned char* start, const Place& to, unsigned char value) {
    const std::uintptr_t begin = address_of(start);
    const std::uintptr_t end = begin + to.length;
    const std::uintptr_t words = std::min((begin + 3) & ~std::uintptr_t{3}, end);
    const std::uintptr_t words_end = std::max(words, end & ~std::uintptr_t{3});
    if (words_end > words) {
      const std::uint32_t pattern = 0x01010101U * value;
      if (const hsa_status_t status = api_.hsa_amd_memory_fill(pointer_to(words), pattern, (words_end - words) / 4);
          status != rocr::HSA_STATUS_SUCCESS) {
        return to_hip(status);
      }
    }
    const std::array<unsigned char, 4> pattern_bytes{value, value, value, value};
    if (words > begin) {
      if (const hipError_t error = staged_copy(start, to, pattern_bytes.data(), Place{}, words - begin);
          error != hipSuccess) {
        return error;
      }
    }
    if (end > words_end) {
      return staged_copy(pointer_to(words_end), to, pattern_bytes.data(), Place{}, end - words_end);
    }
    return hipSuccess;
  }

  // Runs `start(signal)`, which queues work that decrements the signal once, and waits for it. The
  // signal is the pool's, never destroyed: ROCr may still be notifying it when the wait returns.
  template <class Start>
  hipError_t with_completion(Start&& start) {
    const rocr::SignalRef done = signals_.take(1);
    if (!done) return hipErrorOutOfMemory;
    hipError_t result = to_hip(start(done->get()));
    // ROCr lowers the signal below zero where the work failed on the device.
    if (result == hipSuccess && rocr::wait_until_down(api_, done->get()) < 0) result = hipErrorIllegalAddress;
    return result;
  }

  hipError_t copy_and_wait(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent,
                           std::size_t bytes) {
    return with_completion([&](hsa_signal_t done) {
      return api_.hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, bytes, 0, nullptr, done);
    });
  }

  // Application host memory is not the GPUs' to reach (it is pageable), and device memory of one
  // device may not be another's, so such copies go through the staging buffer, a piece at a time:
  // in with a device that reaches the source, out with one that reaches the destination.
  hipError_t staged_copy(void* dst, const Place& to, const void* src, const Place& from, std::size_t bytes) {
    std::lock_guard lock{bounce_mutex_};
    if (const hipError_t error = make_bounce_locked(); error != hipSuccess) return error;
    auto* const into = static_cast<unsigned char*>(dst);
    const auto* const out_of = static_cast<const unsigned char*>(src);
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t piece = std::min(kBounceBytes, bytes - done);
      hipError_t moved = hipSuccess;
      if (from.device) {
        const hsa_agent_t engine = engine_of(from.reachable_by);
        moved = copy_and_wait(bounce_, engine, out_of + done, engine, piece);
      } else {
        std::memcpy(bounce_, out_of + done, piece);
      }
      if (moved == hipSuccess && to.device) {
        const hsa_agent_t engine = engine_of(to.reachable_by);
        moved = copy_and_wait(into + done, engine, bounce_, engine, piece);
      } else if (moved == hipSuccess) {
        std::memcpy(into + done, bounce_, piece);
      }
      if (moved != hipSuccess) return moved;
      done += piece;
    }
    return hipSuccess;
  }

  // Made at the first staged copy and kept.
  hipError_t make_bounce_locked() {
    return bounce_ != nullptr ? hipSuccess : make_shared_host_buffer(kBounceBytes, &bounce_);
  }

  // Memory of the CPU agent's pool that every GPU may use.
  hipError_t make_shared_host_buffer(std::size_t bytes, void** out) {
    void* buffer = nullptr;
    if (const hsa_status_t status = api_.hsa_amd_memory_pool_allocate(cpu_pool_, bytes, 0, &buffer);
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    const std::vector<hsa_agent_t> agents = gpu_agents();
    if (const hsa_status_t status =
            api_.hsa_amd_agents_allow_access(static_cast<std::uint32_t>(agents.size()), agents.data(), nullptr, buffer);
        status != rocr::HSA_STATUS_SUCCESS) {
      (void)api_.hsa_amd_memory_pool_free(buffer);
      return to_hip(status);
    }
    *out = buffer;
    return hipSuccess;
  }

  // Another page of eight-byte words for word_source(), with room kept for every word there is.
  bool add_word_page_locked() {
    constexpr std::size_t kWordsPerPage = kWordPageBytes / sizeof(std::uint64_t);
    void* page = nullptr;
    if (make_shared_host_buffer(kWordPageBytes, &page) != hipSuccess) return false;
    try {
      free_words_.reserve((word_pages_.size() + 1) * kWordsPerPage);
      word_pages_.push_back(page);
    } catch (...) {
      (void)api_.hsa_amd_memory_pool_free(page);
      return false;
    }
    for (std::size_t index = 0; index < kWordsPerPage; ++index) {
      free_words_.push_back(static_cast<std::uint64_t*>(page) + index);
    }
    return true;
  }

  // Requests the arena does not serve: ROCr reserves them, aligned by ROCr where it can align, else
  // over-reserved and the aligned part handed out (a reservation is freed whole, so the rest stays).
  std::uintptr_t reserve_directly(std::size_t size, std::size_t alignment, std::uintptr_t hint) {
    void* at = nullptr;
    if (api_.hsa_amd_vmem_address_reserve_align != nullptr) {
      return api_.hsa_amd_vmem_address_reserve_align(&at, size, hint, alignment, 0) == rocr::HSA_STATUS_SUCCESS
                 ? address_of(at)
                 : 0;
    }
    const std::size_t slack = alignment > page_size() ? alignment : 0;
    if (size > std::numeric_limits<std::size_t>::max() - slack) return 0;
    if (api_.hsa_amd_vmem_address_reserve(&at, size + slack, hint, 0) != rocr::HSA_STATUS_SUCCESS) return 0;
    const std::uintptr_t aligned = (address_of(at) + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    if (slack != 0) {
      try {
        std::lock_guard lock{mutex_};
        widened_[aligned] = {address_of(at), size + slack};
      } catch (...) {
        (void)api_.hsa_amd_vmem_address_free(at, size + slack);
        throw;
      }
    }
    return aligned;
  }

  hipError_t free_directly(std::uintptr_t base, std::size_t size) {
    std::pair<std::uintptr_t, std::size_t> reserved{base, size};
    {
      std::lock_guard lock{mutex_};
      if (const auto found = widened_.find(base); found != widened_.end()) reserved = found->second;
    }
    if (const hsa_status_t status = api_.hsa_amd_vmem_address_free(pointer_to(reserved.first), reserved.second);
        status != rocr::HSA_STATUS_SUCCESS) {
      return to_hip(status);
    }
    std::lock_guard lock{mutex_};
    widened_.erase(base);
    return hipSuccess;
  }

  [[nodiscard]] AddressArena::ReserveChunk reserve_chunk() {
    return [this](std::size_t size, std::size_t alignment) { return reserve_directly(size, alignment, 0); };
  }

  [[nodiscard]] AddressArena::ReleaseChunk release_chunk() {
    return [this](std::uintptr_t base, std::size_t size) { (void)free_directly(base, size); };
  }

  [[nodiscard]] AddressArena::Shape arena_shape() const {
    std::size_t alignment = std::size_t{2} << 20;
    for (const DeviceProperties& device : devices_) alignment = std::max(alignment, device.recommended_granularity);
    return {.chunk_size = std::size_t{64} << 30,
            .chunk_alignment = std::bit_ceil(alignment),
            .largest = std::size_t{4} << 30};
  }

  const RuntimeApi api_;
  const hsa_agent_t cpu_;
  const hsa_amd_memory_pool_t cpu_pool_;
  const std::vector<GpuAgent> gpus_;
  const std::vector<DeviceProperties> devices_;
  std::mutex mutex_;  // guards the tables below; taken after the books' lock, never before it
  std::map<std::uintptr_t, DeviceRange> device_ranges_;  // base -> the device memory there
  // For each device, the devices given peer access to its plain allocations (hipDeviceEnablePeerAccess).
  std::vector<std::uint64_t> peers_of_ = std::vector<std::uint64_t>(gpus_.size(), 0);
  // A handle's device and the holds on it: ROCr may give one handle to several imports.
  struct HandleBooks {
    int device = -1;
    std::size_t references = 0;
  };
  std::unordered_map<std::uint64_t, HandleBooks> handle_books_;
  std::unordered_map<std::uintptr_t, std::size_t> managed_;  // managed base -> mapped length
  std::unordered_map<std::uintptr_t, std::pair<std::uintptr_t, std::size_t>> widened_;  // aligned -> reserved
  std::mutex bounce_mutex_;
  void* bounce_ = nullptr;  // kBounceBytes of the CPU agent's pool, under bounce_mutex_
  void* patterns_ = nullptr;  // fill_pattern's blocks of it, under bounce_mutex_
  std::vector<void*> word_pages_;  // word_source's pages of it, under bounce_mutex_
  std::vector<void*> free_words_;  // their words not in use, under bounce_mutex_
  rocr::SignalPool signals_{api_};  // declared after api_, which it uses
  AddressArena arena_{arena_shape(), reserve_chunk(), release_chunk()};
};

// What the HSA runtime reports, collected with its iterate calls.
struct Discovery {
  const RuntimeApi* api = nullptr;
  std::optional<hsa_agent_t> cpu;
  std::optional<hsa_amd_memory_pool_t> cpu_pool;
  std::vector<hsa_agent_t> gpus;
};

template <class Value>
std::optional<Value> pool_info(const RuntimeApi& api, hsa_amd_memory_pool_t pool,
                               rocr::hsa_amd_memory_pool_info_t what) {
  Value value{};
  if (api.hsa_amd_memory_pool_get_info(pool, what, &value) != rocr::HSA_STATUS_SUCCESS) return std::nullopt;
  return value;
}

// A global pool the runtime may allocate from, with any of `flags` (fine- or coarse-grained).
bool allocatable_global(const RuntimeApi& api, hsa_amd_memory_pool_t pool, std::uint32_t flags) {
  return pool_info<rocr::hsa_amd_segment_t>(api, pool, rocr::HSA_AMD_MEMORY_POOL_INFO_SEGMENT) ==
             rocr::HSA_AMD_SEGMENT_GLOBAL &&
         pool_info<bool>(api, pool, rocr::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED).value_or(false) &&
         (pool_info<std::uint32_t>(api, pool, rocr::HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS).value_or(0) & flags) != 0;
}

std::optional<hsa_amd_memory_pool_t> pool_of(const RuntimeApi& api, hsa_agent_t agent, std::uint32_t flags) {
  struct Search {
    const RuntimeApi* api = nullptr;
    std::uint32_t flags = 0;
    std::optional<hsa_amd_memory_pool_t> found;
  } search{.api = &api, .flags = flags, .found = std::nullopt};
  (void)api.hsa_amd_agent_iterate_memory_pools(
      agent,
      [](hsa_amd_memory_pool_t pool, void* data) {
        auto& state = *static_cast<Search*>(data);
        if (!allocatable_global(*state.api, pool, state.flags)) return rocr::HSA_STATUS_SUCCESS;
        state.found = pool;
        return rocr::HSA_STATUS_INFO_BREAK;
      },
      &search);
  return search.found;
}

bool system_flag(const RuntimeApi& api, rocr::hsa_system_info_t which) {
  bool value = false;
  return api.hsa_system_get_info(which, &value) == rocr::HSA_STATUS_SUCCESS && value;
}

std::string agent_name(const RuntimeApi& api, hsa_agent_t agent, int ordinal) {
  std::array<char, 64> name{};
  for (const auto which : {rocr::HSA_AMD_AGENT_INFO_PRODUCT_NAME, rocr::HSA_AGENT_INFO_NAME}) {
    if (api.hsa_agent_get_info(agent, which, name.data()) == rocr::HSA_STATUS_SUCCESS && name.front() != '\0') {
      name.back() = '\0';
      return name.data();
    }
  }
  return "ROCr GPU " + std::to_string(ordinal);
}

DeviceProperties properties_of(const RuntimeApi& api, hsa_agent_t agent, hsa_amd_memory_pool_t pool, int ordinal) {
  DeviceProperties properties;
  properties.name = agent_name(api, agent, ordinal);
  std::uint32_t units = 0;
  if (api.hsa_agent_get_info(agent, rocr::HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, &units) == rocr::HSA_STATUS_SUCCESS) {
    properties.multiprocessor_count = static_cast<int>(units);
  }
  properties.total_memory = pool_info<std::size_t>(api, pool, rocr::HSA_AMD_MEMORY_POOL_INFO_SIZE).value_or(0);
  const std::size_t granule =
      pool_info<std::size_t>(api, pool, rocr::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE).value_or(page_size());
  properties.minimum_granularity = std::max(granule, page_size());
  properties.recommended_granularity =
      std::max(properties.minimum_granularity,
               pool_info<std::size_t>(api, pool, rocr::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE).value_or(0));
  properties.virtual_memory = true;  // the backend exists only where ROCr says so
  properties.posix_fd_export = system_flag(api, rocr::HSA_AMD_SYSTEM_INFO_DMABUF_SUPPORTED);
  properties.managed_memory = system_flag(api, rocr::HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED);
  // With XNACK on, the GPU takes page faults: managed memory may be touched by host and device at
  // once, and memory the system allocated is reached through the host's own page tables (HMM).
  const bool xnack = system_flag(api, rocr::HSA_AMD_SYSTEM_INFO_XNACK_ENABLED);
  properties.concurrent_managed_access = properties.managed_memory && xnack;
  properties.pageable_memory_access = xnack;
  properties.pageable_memory_access_uses_host_page_tables = xnack;
  return properties;
}

std::string load_entry_points(void* library, RuntimeApi& api) {
  std::string missing;
  const auto resolve = [&](const char* name, auto& slot, bool required) {
    if (void* symbol = dlsym(library, name); symbol != nullptr) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
    } else if (required) {
      missing += (missing.empty() ? "" : ", ") + std::string{name};
    }
  };
#define HIPXX_ROCR_RESOLVE(name, type) resolve(#name, api.name, true);
  HIPXX_ROCR_ENTRY_POINTS(HIPXX_ROCR_RESOLVE)
#undef HIPXX_ROCR_RESOLVE
#define HIPXX_ROCR_RESOLVE_OPTIONAL(name, type) resolve(#name, api.name, false);
  HIPXX_ROCR_OPTIONAL_ENTRY_POINTS(HIPXX_ROCR_RESOLVE_OPTIONAL)
#undef HIPXX_ROCR_RESOLVE_OPTIONAL
  return missing;
}

// HIPXX_ROCR_LIBRARY names the library to use; otherwise the loader's search, then ROCm's usual place.
void* open_runtime(std::string& error) {
  if (const char* path = std::getenv("HIPXX_ROCR_LIBRARY"); path != nullptr && *path != '\0') {
    if (void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL); library != nullptr) return library;
    const char* why = dlerror();
    error = "HIPXX_ROCR_LIBRARY names " + std::string{path} +
            ", which could not be loaded: " + std::string{why != nullptr ? why : "no reason given"};
    return nullptr;
  }
  for (const char* name : {"libhsa-runtime64.so.1", "/opt/rocm/lib/libhsa-runtime64.so.1"}) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL); library != nullptr) return library;
  }
  error = "the ROCr backend needs ROCm's libhsa-runtime64.so.1, which could not be loaded";
  return nullptr;
}

// Finds the CPU agent and its pool and the GPU agents; "" or why the backend cannot run.
std::string discover(const RuntimeApi& api, Discovery& found) {
  found.api = &api;
  const hsa_status_t status = api.hsa_iterate_agents(
      [](hsa_agent_t agent, void* data) {
        auto& state = *static_cast<Discovery*>(data);
        rocr::hsa_device_type_t type{};
        if (state.api->hsa_agent_get_info(agent, rocr::HSA_AGENT_INFO_DEVICE, &type) != rocr::HSA_STATUS_SUCCESS) {
          return rocr::HSA_STATUS_SUCCESS;
        }
        if (type == rocr::HSA_DEVICE_TYPE_GPU) state.gpus.push_back(agent);
        if (type == rocr::HSA_DEVICE_TYPE_CPU && !state.cpu) state.cpu = agent;
        return rocr::HSA_STATUS_SUCCESS;
      },
      &found);
  if (status != rocr::HSA_STATUS_SUCCESS) return "hsa_iterate_agents failed (status " + std::to_string(status) + ")";
  if (found.gpus.empty()) return "ROCr reports no GPU agent";
  if (!found.cpu) return "ROCr reports no CPU agent";
  found.cpu_pool =
      pool_of(api, *found.cpu,
              rocr::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | rocr::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT);
  if (!found.cpu_pool) return "the CPU agent has no fine-grained global memory pool";
  return "";
}

}  // namespace

std::unique_ptr<Backend> make_rocr_backend(std::string& error) {
  void* library = open_runtime(error);
  if (library == nullptr) return nullptr;
  RuntimeApi api;
  if (const std::string missing = load_entry_points(library, api); !missing.empty()) {
    dlclose(library);  // nothing of it has run yet
    error = "libhsa-runtime64.so.1 lacks " + missing +
            " (the ROCr backend needs an HSA runtime with the virtual memory API, AMD interface 1.4 or later)";
    return nullptr;
  }
  // From here on the library stays loaded: hsa_init may have started threads of its own.
  if (const hsa_status_t status = api.hsa_init(); status != rocr::HSA_STATUS_SUCCESS) {
    error = "hsa_init failed (status " + std::to_string(status) + ")";
    return nullptr;
  }
  const auto give_up = [&](std::string why) -> std::unique_ptr<Backend> {
    (void)api.hsa_shut_down();
    error = std::move(why);
    return nullptr;
  };
  if (!system_flag(api, rocr::HSA_AMD_SYSTEM_INFO_VIRTUAL_MEM_API_SUPPORTED)) {
    return give_up("ROCr reports no virtual memory API (HSA_AMD_SYSTEM_INFO_VIRTUAL_MEM_API_SUPPORTED is false)");
  }
  Discovery found;
  if (std::string why = discover(api, found); !why.empty()) return give_up(std::move(why));
  std::vector<GpuAgent> gpus;
  std::vector<DeviceProperties> devices;
  for (std::size_t ordinal = 0; ordinal < found.gpus.size(); ++ordinal) {
    const std::optional<hsa_amd_memory_pool_t> pool =
        pool_of(api, found.gpus[ordinal], rocr::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
    if (!pool) return give_up("GPU agent " + std::to_string(ordinal) + " has no coarse-grained global memory pool");
    gpus.push_back({.agent = found.gpus[ordinal], .pool = *pool});
    devices.push_back(properties_of(api, found.gpus[ordinal], *pool, static_cast<int>(ordinal)));
  }
  return std::make_unique<RocrBackend>(api, *found.cpu, *found.cpu_pool, std::move(gpus), std::move(devices));
}

}  // namespace hipxx::backend
