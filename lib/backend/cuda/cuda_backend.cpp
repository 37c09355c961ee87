// The CUDA backend: the CUDA driver API, reached through dlopen("libcuda.so.1") so that hipxx needs
// no CUDA to build, and runs (on another backend) where no NVIDIA driver is installed.
//
// How each backend operation maps onto the driver:
//   reserve / free_reservation  cuMemAddressReserve / cuMemAddressFree
//   create_physical / release   cuMemCreate (pinned, on the device; POSIX fd handle type when exportable)
//                               / cuMemRelease
//   export_fd / import_fd       cuMemExportToShareableHandle / cuMemImportFromShareableHandle
//   map / unmap                 cuMemMap(va, size, 0, handle, 0) / cuMemUnmap
//   set_access                  cuMemSetAccess, one descriptor per device granted access (see below)
//   copy / fill                 cuMemcpy / cuMemsetD8_v2 (unified addressing), then cuStreamSynchronize
//                               of the legacy default stream
//   load_word / store_word      cuMemcpy of one word (the word may be device memory)
//   synchronize                 cuCtxSynchronize
//   allocate / deallocate       cuMemAlloc_v2 / cuMemFree_v2
//
// Contexts: every device's primary context is retained once, when the backend starts, and is the one
// the CUDA runtime uses too, so memory and kernels of an application mixing hipxx with CUDA code meet
// in the same context. Before each driver call the backend makes the right one current on the calling
// thread: the named device's for per-device operations, else the thread's current HIP device's.
#include "backend/address_arena.hpp"
#include "backend/backend.hpp"
#include "backend/cuda/cuda_driver.hpp"
#include "backend/cuda/cuda_queue.hpp"
#include "backend/cuda/entry_points.hpp"
#include "backend/cuda/wait_kernels.hpp"
#include "backend/deferred_close.hpp"
#include "core/runtime.hpp"  // only for the calling thread's current HIP device

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hipxx::backend {

namespace {

using cuda::CUcontext;
using cuda::CUdevice;
using cuda::CUdeviceptr;
using cuda::CUmemAccess_flags;
using cuda::CUmemGenericAllocationHandle;
using cuda::CUresult;
using cuda::DriverApi;
using cuda::QueueApi;
using cuda::to_hip;

// Used where the driver cannot tell us a granularity (a device without virtual memory management):
// the books divide by it, so it must never be zero. 2 MiB is what every VMM-capable NVIDIA GPU reports.
constexpr std::size_t kFallbackGranularity = std::size_t{2} << 20;

// The address arenas' chunks, aligned to the largest granularity any device recommends, in two
// tiers. On an H100 (driver 580) cuMemSetAccess and cuMemUnmap of a 2 MiB mapping took 19 and
// 14 us in a reservation of 16 MiB or less, whether other mappings shared it or not, but 32 and
// 21 us when it was the only mapping in a reservation of 32 MiB or more; from 32 MiB up a mapping
// costs the same in any reservation (bench/RESULTS.md). So requests of up to 8 MiB share 16 MiB
// chunks, requests from 32 MiB to 4 GiB share 64 GiB chunks, and those in between, or larger, get
// a reservation of their own.
AddressArena::Shape arena_shape(const std::vector<DeviceProperties>& devices, bool small) {
  std::size_t alignment = kFallbackGranularity;
  for (const DeviceProperties& device : devices) alignment = std::max(alignment, device.recommended_granularity);
  alignment = std::bit_ceil(alignment);
  if (small) {
    return {.chunk_size = std::size_t{16} << 20, .chunk_alignment = alignment, .largest = std::size_t{8} << 20};
  }
  return {.chunk_size = std::size_t{64} << 30,
          .chunk_alignment = alignment,
          .largest = std::size_t{4} << 30,
          .smallest = std::size_t{32} << 20};
}

// "CUDA_ERROR_NO_DEVICE (100)", for the messages hipxxGetBackendError returns.
std::string describe(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  if (api.cuGetErrorName != nullptr && api.cuGetErrorName(result, &name) == cuda::CUDA_SUCCESS && name != nullptr) {
    return std::string{name} + " (" + std::to_string(result) + ")";
  }
  return "CUresult " + std::to_string(result);
}

CUdeviceptr address_of(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

void* pointer_to(CUdeviceptr address) noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

CUmemAccess_flags driver_flags(hipMemAccessFlags flags) noexcept {
  switch (flags) {
    case hipMemAccessFlagsProtRead: return cuda::CU_MEM_ACCESS_FLAGS_PROT_READ;
    case hipMemAccessFlagsProtReadWrite: return cuda::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    default: return cuda::CU_MEM_ACCESS_FLAGS_PROT_NONE;
  }
}

struct DeviceHandles {
  CUdevice device = 0;
  CUcontext context = nullptr;  // the retained primary context
};

// The driver's map, reached from the runtime with the entry point as its context (DirectMap).
int map_directly(std::uintptr_t driver_map, void* va, std::size_t size, std::uint64_t physical) noexcept {
  return static_cast<int>(
      reinterpret_cast<decltype(DriverApi::cuMemMap)>(driver_map)(address_of(va), size, 0, physical, 0));
}

class CudaBackend final : public Backend {
 public:
  // Takes over the library handle and one retained primary context per device. Neither is given
  // back: the runtime lives until the process ends, and unloading libcuda after cuInit is unsafe.
  // `queue_api` null: the driver lacks what device queues need, and streams run on host threads.
  CudaBackend(const DriverApi& api, std::unique_ptr<QueueApi> queue_api, std::string queues_missing,
              std::vector<DeviceHandles> handles, std::vector<DeviceProperties> devices)
      : api_(api),
        queue_api_(std::move(queue_api)),
        queues_unavailable_(std::move(queues_missing)),
        handles_(std::move(handles)),
        devices_(std::move(devices)) {
    spare_mapping_nodes_.reserve(kSpareMappingNodes);  // so that keeping a node never allocates
    if (bind(0) == hipSuccess) {
      for (AddressArena& arena : arenas_) (void)arena.prepare();  // where one cannot, the driver reserves
    }
    if (queue_api_) {
      for (const DeviceHandles& device : handles_) {
        // Progress words are 64-bit: a device without 64-bit stream memory operations gets none.
        if (attribute(cuda::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device.device) == 0) {
          queue_devices_.clear();
          queues_unavailable_ = "CUDA device " + std::to_string(device.device) +
                                " cannot wait on 64-bit words (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0)";
          break;
        }
        queue_devices_.push_back(
            {.driver = &api_,
             .queues = queue_api_.get(),
             .context = device.context,
             .wait_nor = attribute(cuda::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, device.device) != 0,
             .wait_kernels = &wait_kernels_.emplace_back(*queue_api_)});
      }
    }
  }

  std::unique_ptr<Queue> create_queue(int device, bool null_stream, bool blocking, int priority) override {
    if (!valid(device) || queue_devices_.empty()) return nullptr;
    return cuda::make_queue(queue_devices_[static_cast<std::size_t>(device)], null_stream, blocking, priority);
  }

  std::string queues_unavailable() const override { return queues_unavailable_; }

  std::unique_ptr<Timestamp> create_timestamp(int device, bool timing) override {
    if (!valid(device) || queue_devices_.empty()) return nullptr;
    return cuda::make_timestamp(queue_devices_[static_cast<std::size_t>(device)], timing);
  }

  std::string_view name() const noexcept override { return "cuda"; }
  int device_count() const noexcept override { return static_cast<int>(devices_.size()); }
  const DeviceProperties& device(int ordinal) const override { return devices_.at(static_cast<std::size_t>(ordinal)); }

  // Ordinary reservations come from the arenas' chunks, each one cuMemAddressReserve made once:
  // sub-ranges of a reservation map like reservations of their own, as long as no mapping
  // straddles two (an arena never hands out such a range).
  // A hint inside a chunk is its arena's to honour; any other hint goes to the driver with the request.
  hipError_t reserve(std::size_t size, std::size_t alignment, std::uintptr_t hint, void** va) override {
    if (AddressArena* const arena = hint != 0 ? arena_holding(hint) : arena_serving(size, alignment)) {
      if (const std::uintptr_t at = hint != 0 ? arena->take_at(hint, size) : arena->take(size, alignment); at != 0) {
        *va = pointer_to(at);
        return hipSuccess;
      }
    }
    CUdeviceptr at = 0;
    if (const CUresult result =
            without_binding([&] { return api_.cuMemAddressReserve(&at, size, alignment, hint, 0); });
        result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    *va = pointer_to(at);
    return hipSuccess;
  }

  hipError_t free_reservation(void* va, std::size_t size) override {
    for (AddressArena& arena : arenas_) {
      if (arena.give_back(address_of(va), size)) return hipSuccess;
    }
    return to_hip(without_binding([&] { return api_.cuMemAddressFree(address_of(va), size); }));
  }

  hipError_t create_physical(int device, std::size_t size, bool exportable, PhysicalHandle* out) override {
    if (!valid(device)) return hipErrorInvalidDevice;
    const DeviceProperties& properties = devices_[static_cast<std::size_t>(device)];
    if (!properties.virtual_memory || (exportable && !properties.posix_fd_export)) return hipErrorNotSupported;
    if (const hipError_t error = bind(device); error != hipSuccess) return error;
    cuda::CUmemAllocationProp prop{};
    prop.type = cuda::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes =
        exportable ? cuda::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : cuda::CU_MEM_HANDLE_TYPE_NONE;
    prop.location = {.type = cuda::CU_MEM_LOCATION_TYPE_DEVICE, .id = handle_of(device)};
    CUmemGenericAllocationHandle handle = 0;
    CUresult result = api_.cuMemCreate(&handle, size, &prop, 0);
    if (result == cuda::CUDA_ERROR_OUT_OF_MEMORY) {
      // Fds of released imports still waiting to be closed may be all that keeps other memory
      // alive (an exported allocation goes when its last handle and its last fd do).
      import_fd_closer_.flush();
      result = api_.cuMemCreate(&handle, size, &prop, 0);
    }
    if (result != cuda::CUDA_SUCCESS) return to_hip(result);
    out->value = handle;
    return hipSuccess;
  }

  // The close of an imported handle's kept fd goes to import_fd_closer_: it is a system call of a
  // quarter of a microsecond on a release that the driver does in six.
  hipError_t release_physical(PhysicalHandle handle) override {
    if (const CUresult result = without_binding([&] { return api_.cuMemRelease(handle.value); });
        result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    if (handle.kept_fd >= 0) import_fd_closer_.close_later(handle.kept_fd);
    return hipSuccess;
  }

  hipError_t export_fd(PhysicalHandle handle, int* fd) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    // The driver refuses to export an imported handle again; the fd it came from names the same
    // allocation, so a copy of that fd is the export (as on the host backend, where it is the memfd).
    if (handle.kept_fd >= 0) {
      *fd = fcntl(handle.kept_fd, F_DUPFD_CLOEXEC, 0);
      return *fd >= 0 ? hipSuccess : hipErrorOutOfMemory;
    }
    int exported = -1;
    if (const CUresult result = api_.cuMemExportToShareableHandle(&exported, handle.value,
                                                                  cuda::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    *fd = exported;
    return hipSuccess;
  }

  hipError_t import_fd(int fd, PhysicalHandle* out, ImportedAllocation* facts) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    // The copy the handle keeps is made first and is what the driver reads: the driver takes the fd
    // inside a pointer and refuses a null one, which is what descriptor 0 is (the copy is never 0).
    // The driver leaves it open, and the caller still owns its own fd, as the interface says.
    const int kept = fcntl(fd, F_DUPFD_CLOEXEC, 1);
    if (kept < 0) return errno == EBADF ? hipErrorInvalidValue : hipErrorOutOfMemory;  // closed, or out of fds
    CUmemGenericAllocationHandle handle = 0;
    if (const CUresult result =
            api_.cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<std::intptr_t>(kept)),
                                                cuda::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        result != cuda::CUDA_SUCCESS) {
      close(kept);
      // An fd that names no exported allocation (a file, a directory, a closed fd) makes the driver
      // answer with assorted codes; HIP documents one: the handle is an invalid value.
      return result == cuda::CUDA_ERROR_OUT_OF_MEMORY ? hipErrorOutOfMemory : hipErrorInvalidValue;
    }
    *out = PhysicalHandle{.value = handle, .kept_fd = kept};
    facts->size = 0;  // the driver has no query for an allocation's size; the books learn it at the first map
    facts->device = device_of_allocation(handle);
    return hipSuccess;
  }

  // A new mapping grants no device anything, which is what the table says of a mapping it lacks: the
  // mapping is booked here at its first set_access, so map itself is the driver call alone.
  hipError_t map(void* va, std::size_t size, PhysicalHandle handle) override {
    if (const CUresult result =
            without_binding([&] { return api_.cuMemMap(address_of(va), size, 0, handle.value, 0); });
        result != cuda::CUDA_SUCCESS) {
      // The driver answers a size that is not the allocation's (which the books cannot check for an
      // imported handle before its first map) with "not supported"; HIP calls that an invalid value.
      return result == cuda::CUDA_ERROR_NOT_SUPPORTED ? hipErrorInvalidValue : to_hip(result);
    }
    return hipSuccess;
  }

  // map() is the driver's call alone when it succeeds, so the runtime may make that call itself. A
  // failure of any kind (a thread that needs a context bound, a size that is not the allocation's)
  // leaves nothing mapped, and map() then binds, asks again and translates the answer.
  DirectMap direct_map() const noexcept override {
    return {.call = &map_directly, .context = reinterpret_cast<std::uintptr_t>(api_.cuMemMap)};
  }

  hipError_t unmap(void* va, std::size_t size) override {
    std::lock_guard lock{mutex_};
    const auto found = mappings_.find(address_of(va));
    // A mapping whose re-map failed during a revocation (set_access) is already unmapped.
    if (found == mappings_.end() || found->second.mapped) {
      if (const CUresult result = without_binding([&] { return api_.cuMemUnmap(address_of(va), size); });
          result != cuda::CUDA_SUCCESS) {
        return to_hip(result);
      }
    }
    if (found != mappings_.end()) forget_mapping_locked(found);
    return hipSuccess;
  }

  // CUDA grants access with cuMemSetAccess, but does not promise that it takes access away again:
  // PROT_NONE is documented only as a new mapping's default. So the backend remembers what the driver
  // grants each device for each mapping, and:
  //  - where every device keeps at least what it has (only grants are added or raised), it passes one
  //    descriptor per device whose access is not none, and the driver adds them;
  //  - where any device would lose access (to none, or from read-write to read), it unmaps the range
  //    and maps the same physical allocation again at the same address - the contents live in the
  //    allocation, so they survive - which leaves no device any access, then grants the devices whose
  //    access is not none. If no device keeps any access, no cuMemSetAccess is needed at all.
  // The books already refuse hipMemcpy/hipMemset through a device without access; the re-map is what
  // makes a kernel's access fault as well, as it does on AMD. Like the host backend, revoking access
  // while kernels still use the range is the application's race.
  hipError_t set_access(void* va, std::size_t size, std::span<const AccessGrant> grants,
                        PhysicalHandle handle) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    std::lock_guard lock{mutex_};
    const auto found = book_mapping_locked(
        address_of(va), MappingState{.size = size, .handle = handle.value, .mapped = true, .granted = {}});
    MappingState& mapping = found->second;

    std::vector<CUmemAccess_flags> wanted = no_access();
    for (const AccessGrant& grant : grants) {
      if (!valid(grant.device)) return hipErrorInvalidDevice;
      wanted[static_cast<std::size_t>(grant.device)] = driver_flags(grant.flags);
    }
    bool narrows = !mapping.mapped;
    for (std::size_t device = 0; device < wanted.size(); ++device) {
      if ((granted_to(mapping, device) & ~wanted[device]) != 0) narrows = true;
    }
    if (narrows) {
      if (const hipError_t error = remap_locked(address_of(va), mapping); error != hipSuccess) return error;
    }

    std::vector<cuda::CUmemAccessDesc> descriptors;
    for (std::size_t device = 0; device < wanted.size(); ++device) {
      if (wanted[device] == cuda::CU_MEM_ACCESS_FLAGS_PROT_NONE) continue;
      descriptors.push_back(
          {.location = {.type = cuda::CU_MEM_LOCATION_TYPE_DEVICE, .id = handle_of(static_cast<int>(device))},
           .flags = wanted[device]});
    }
    if (!descriptors.empty()) {
      if (const CUresult result = api_.cuMemSetAccess(address_of(va), size, descriptors.data(), descriptors.size());
          result != cuda::CUDA_SUCCESS) {
        return to_hip(result);  // `granted` still says what the driver grants: unchanged, or none after a re-map
      }
    }
    mapping.granted = std::move(wanted);
    return hipSuccess;
  }

  // The books assume that a copy or fill is over when it returns (an unmap, a revocation or a free
  // may follow at once), so both wait for the device. cuMemcpy alone would not: device-to-device and
  // pageable host-to-device copies may still be in flight.
  // cuMemcpy / cuMemsetD8 on the legacy default stream, then that stream: the runtime's
  // synchronous copies when its streams are idle, ordered after kernels other code put on the legacy
  // stream. A stream's host thread calls these for work its queue could not take, while later work
  // of that stream (perhaps a blocking one, or the legacy one) is held back on the host: they then
  // go on the device's own non-blocking stream, which waits for nothing else (see side_stream).
  hipError_t copy(void* dst, const void* src, std::size_t bytes) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    if (use_side_stream()) return side_copy(dst, src, bytes);
    if (const CUresult result = api_.cuMemcpy(address_of(dst), address_of(src), bytes); result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    return finish_legacy_stream();
  }

  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    if (use_side_stream()) {
      if (pageable(dst)) {
        std::memset(dst, value, bytes);
        return hipSuccess;
      }
      return on_side_stream(
          [&](cuda::CUstream stream) { return queue_api_->cuMemsetD8Async(address_of(dst), value, bytes, stream); });
    }
    if (const CUresult result = api_.cuMemsetD8_v2(address_of(dst), value, bytes); result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    return finish_legacy_stream();
  }

  // The word may be device memory, which the host cannot dereference, so it moves by a copy: one
  // naturally aligned 4- or 8-byte transfer, which the copy engines do not tear (the driver makes no
  // formal promise). Without device queues that copy is cuMemcpy on the legacy default stream, so a
  // load waits for kernels queued there before it - including the one expected to write the word.
  // A stream's host thread makes these calls for waits the device cannot do itself: they go on the
  // side stream, as copy does.
  hipError_t load_word(const void* address, std::size_t bytes, std::uint64_t* value) override {
    if (bytes != sizeof(std::uint32_t) && bytes != sizeof(std::uint64_t)) return hipErrorInvalidValue;
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    std::uint64_t word = 0;
    std::uint32_t narrow = 0;
    void* into = bytes == sizeof(std::uint32_t) ? static_cast<void*>(&narrow) : &word;
    if (const hipError_t error = copy_word(into, address, bytes); error != hipSuccess) return error;
    *value = bytes == sizeof(std::uint32_t) ? narrow : word;
    return hipSuccess;
  }

  hipError_t store_word(void* address, std::size_t bytes, std::uint64_t value) override {
    if (bytes != sizeof(std::uint32_t) && bytes != sizeof(std::uint64_t)) return hipErrorInvalidValue;
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    const auto narrow = static_cast<std::uint32_t>(value);
    const void* source = bytes == sizeof(std::uint32_t) ? static_cast<const void*>(&narrow) : &value;
    return copy_word(address, source, bytes);
  }

  hipError_t synchronize(int device) override {
    // A device-wide synchronisation also finishes the releases deferred so far: by the time it
    // returns, the fd every released import kept is closed.
    import_fd_closer_.flush();
    if (const hipError_t error = bind(device); error != hipSuccess) return error;
    return to_hip(api_.cuCtxSynchronize());
  }

  // Plain allocations are cuMemAlloc memory, which a context reaches in its peers once it has been
  // given peer access to them.
  hipError_t set_peer_access(int device, int peer, bool enabled) override {
    if (!valid(peer)) return hipErrorInvalidDevice;
    if (const hipError_t error = bind(device); error != hipSuccess) return error;
    const CUcontext peer_context = handles_[static_cast<std::size_t>(peer)].context;
    return to_hip(enabled ? api_.cuCtxEnablePeerAccess(peer_context, 0) : api_.cuCtxDisablePeerAccess(peer_context));
  }

  hipError_t can_access_peer(int device, int peer, bool* can) override {
    if (!valid(device) || !valid(peer)) return hipErrorInvalidDevice;
    int answer = 0;
    if (const hipError_t error =
            to_hip(api_.cuDeviceCanAccessPeer(&answer, handles_[static_cast<std::size_t>(device)].device,
                                              handles_[static_cast<std::size_t>(peer)].device));
        error != hipSuccess) {
      return error;
    }
    *can = answer != 0;
    return hipSuccess;
  }

  hipError_t memory_info(int device, std::uint64_t* free, std::uint64_t* total) override {
    if (const hipError_t error = bind(device); error != hipSuccess) return error;
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    if (const hipError_t error = to_hip(api_.cuMemGetInfo_v2(&free_bytes, &total_bytes)); error != hipSuccess) {
      return error;
    }
    *free = free_bytes;
    *total = total_bytes;
    return hipSuccess;
  }

  hipError_t allocate(int device, std::size_t size, void** out) override {
    if (const hipError_t error = bind(device); error != hipSuccess) return error;
    CUdeviceptr at = 0;
    if (const CUresult result = api_.cuMemAlloc_v2(&at, size); result != cuda::CUDA_SUCCESS) return to_hip(result);
    {
      std::lock_guard lock{mutex_};
      linear_[at] = device;
    }
    *out = pointer_to(at);
    return hipSuccess;
  }

  hipError_t deallocate(void* ptr, std::size_t /*size*/) override {
    std::lock_guard lock{mutex_};
    const auto found = linear_.find(address_of(ptr));
    const int device = found != linear_.end() ? found->second : current_device();
    if (const hipError_t error = bind(device); error != hipSuccess) return error;
    if (const CUresult result = api_.cuMemFree_v2(address_of(ptr)); result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    if (found != linear_.end()) linear_.erase(found);
    return hipSuccess;
  }

  hipError_t allocate_managed(std::size_t size, unsigned flags, void** out) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    CUdeviceptr at = 0;
    const unsigned attach = flags == hipMemAttachHost ? cuda::CU_MEM_ATTACH_HOST : cuda::CU_MEM_ATTACH_GLOBAL;
    if (const CUresult result = api_.cuMemAllocManaged(&at, size, attach); result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    *out = pointer_to(at);
    return hipSuccess;
  }

  // The runtime's streams run their work in order on host threads, so the prefetch completes here.
  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    if (device != hipCpuDeviceId && !valid(device)) return hipErrorInvalidDevice;
    const CUdevice target = device == hipCpuDeviceId ? cuda::CU_DEVICE_CPU : handle_of(device);
    // On a stream's host thread, as copies and fills there: the legacy stream could wait for work
    // of that stream held back behind this prefetch.
    if (use_side_stream()) {
      return on_side_stream(
          [&](cuda::CUstream stream) { return api_.cuMemPrefetchAsync(address_of(ptr), bytes, target, stream); });
    }
    if (const CUresult result = api_.cuMemPrefetchAsync(address_of(ptr), bytes, target, nullptr);
        result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    return finish_legacy_stream();
  }

  hipError_t advise(const void* ptr, std::size_t bytes, hipMemoryAdvise advice, int device) override {
    cuda::CUmem_advise driver_advice{};
    switch (advice) {
      case hipMemAdviseSetReadMostly: driver_advice = cuda::CU_MEM_ADVISE_SET_READ_MOSTLY; break;
      case hipMemAdviseUnsetReadMostly: driver_advice = cuda::CU_MEM_ADVISE_UNSET_READ_MOSTLY; break;
      case hipMemAdviseSetPreferredLocation: driver_advice = cuda::CU_MEM_ADVISE_SET_PREFERRED_LOCATION; break;
      case hipMemAdviseUnsetPreferredLocation: driver_advice = cuda::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION; break;
      case hipMemAdviseSetAccessedBy: driver_advice = cuda::CU_MEM_ADVISE_SET_ACCESSED_BY; break;
      case hipMemAdviseUnsetAccessedBy: driver_advice = cuda::CU_MEM_ADVISE_UNSET_ACCESSED_BY; break;
      // Coarse grain is AMD's coherence model; NVIDIA managed memory has one model, so the advice is
      // kept by the books for range queries and there is nothing to tell the driver.
      default: return hipSuccess;
    }
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    // Read-mostly ignores the device (HIP lets it be anything); the books have checked it for the rest.
    const bool device_ignored =
        driver_advice == cuda::CU_MEM_ADVISE_SET_READ_MOSTLY || driver_advice == cuda::CU_MEM_ADVISE_UNSET_READ_MOSTLY;
    if (!device_ignored && device != hipCpuDeviceId && !valid(device)) return hipErrorInvalidDevice;
    const CUdevice target = device_ignored || device == hipCpuDeviceId ? cuda::CU_DEVICE_CPU : handle_of(device);
    return to_hip(api_.cuMemAdvise(address_of(ptr), bytes, driver_advice, target));
  }

  hipError_t ipc_get_handle(void* ptr, std::size_t /*size*/, hipIpcMemHandle_t* handle) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    cuda::CUipcMemHandle driver_handle{};
    if (const CUresult result = api_.cuIpcGetMemHandle(&driver_handle, address_of(ptr)); result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    static_assert(sizeof(driver_handle) == sizeof(*handle));
    std::memcpy(handle, &driver_handle, sizeof driver_handle);
    return hipSuccess;
  }

  hipError_t ipc_open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    cuda::CUipcMemHandle driver_handle{};
    std::memcpy(&driver_handle, &handle, sizeof driver_handle);
    CUdeviceptr at = 0;
    if (const CUresult result =
            api_.cuIpcOpenMemHandle_v2(&at, driver_handle, cuda::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        result != cuda::CUDA_SUCCESS) {
      return to_hip(result);
    }
    // The books need the mapping's extent: the exporter's allocation, which the driver knows.
    CUdeviceptr base = 0;
    std::size_t bytes = 0;
    if (const CUresult result = api_.cuMemGetAddressRange_v2(&base, &bytes, at); result != cuda::CUDA_SUCCESS) {
      (void)api_.cuIpcCloseMemHandle(at);
      return to_hip(result);
    }
    *ptr = pointer_to(at);
    *size = base + bytes - at;
    return hipSuccess;
  }

  hipError_t ipc_close(void* ptr, std::size_t /*size*/) override {
    if (const hipError_t error = bind_calling_thread(); error != hipSuccess) return error;
    return to_hip(api_.cuIpcCloseMemHandle(address_of(ptr)));
  }

 private:
  // What the driver grants for one mapping, as far as this backend has told it.
  struct MappingState {
    std::size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
    bool mapped = true;  // false only after a revocation's re-map failed: the range is then bare
    std::vector<CUmemAccess_flags> granted;  // one per device, or empty where none is granted anything
  };
  using MappingTable = std::unordered_map<CUdeviceptr, MappingState>;

  // Map and unmap are sub-microsecond driver calls, so their bookkeeping here reuses the table nodes
  // of earlier mappings instead of allocating one per map.
  static constexpr std::size_t kSpareMappingNodes = 64;

  [[nodiscard]] static CUmemAccess_flags granted_to(const MappingState& mapping, std::size_t device) noexcept {
    return mapping.granted.empty() ? cuda::CU_MEM_ACCESS_FLAGS_PROT_NONE : mapping.granted[device];
  }

  // The entry of the mapping at `va`, booked as `fresh` where there is none yet. May throw std::bad_alloc.
  // An entry of another allocation or size is left from a map that failed: the runtime maps through
  // the driver with its books unlocked, so another thread's set_access may book a mapping here whose
  // map then fails and is unbooked, which this table does not hear of. The runtime's books, which
  // `fresh` comes from, are right, and such an entry never had access granted (the driver refuses a
  // grant on a range it has not mapped), so it is simply replaced.
  MappingTable::iterator book_mapping_locked(CUdeviceptr va, const MappingState& fresh) {
    if (const auto found = mappings_.find(va); found != mappings_.end()) {
      if (found->second.handle != fresh.handle || found->second.size != fresh.size) found->second = fresh;
      return found;
    }
    if (spare_mapping_nodes_.empty()) return mappings_.emplace(va, fresh).first;
    MappingTable::node_type node = std::move(spare_mapping_nodes_.back());
    spare_mapping_nodes_.pop_back();
    node.key() = va;
    node.mapped() = fresh;
    return mappings_.insert(std::move(node)).position;
  }

  void forget_mapping_locked(MappingTable::iterator mapping) {
    MappingTable::node_type node = mappings_.extract(mapping);
    if (spare_mapping_nodes_.size() < kSpareMappingNodes) spare_mapping_nodes_.push_back(std::move(node));
  }

  [[nodiscard]] bool valid(int device) const noexcept { return device >= 0 && device < device_count(); }

  [[nodiscard]] AddressArena* arena_serving(std::size_t size, std::size_t alignment) noexcept {
    for (AddressArena& arena : arenas_) {
      if (arena.serves(size, alignment)) return &arena;
    }
    return nullptr;
  }

  [[nodiscard]] AddressArena* arena_holding(std::uintptr_t address) noexcept {
    for (AddressArena& arena : arenas_) {
      if (arena.holds(address)) return &arena;
    }
    return nullptr;
  }

  [[nodiscard]] AddressArena::ReserveChunk reserve_chunk() {
    return [this](std::size_t size, std::size_t alignment) -> std::uintptr_t {
      CUdeviceptr at = 0;
      if (bind_calling_thread() != hipSuccess) return 0;
      return api_.cuMemAddressReserve(&at, size, alignment, 0, 0) == cuda::CUDA_SUCCESS ? at : 0;
    };
  }

  [[nodiscard]] AddressArena::ReleaseChunk release_chunk() {
    return [this](std::uintptr_t base, std::size_t size) { (void)api_.cuMemAddressFree(base, size); };
  }

  [[nodiscard]] CUdevice handle_of(int device) const noexcept {
    return handles_[static_cast<std::size_t>(device)].device;
  }

  // The ordinal of the device whose memory an allocation is, or -1 where the driver does not say.
  [[nodiscard]] int device_of_allocation(CUmemGenericAllocationHandle handle) const noexcept {
    cuda::CUmemAllocationProp properties{};
    if (api_.cuMemGetAllocationPropertiesFromHandle(&properties, handle) != cuda::CUDA_SUCCESS ||
        properties.location.type != cuda::CU_MEM_LOCATION_TYPE_DEVICE) {
      return -1;
    }
    for (int device = 0; device < device_count(); ++device) {
      if (handle_of(device) == properties.location.id) return device;
    }
    return -1;
  }

  [[nodiscard]] std::vector<CUmemAccess_flags> no_access() const {
    // NOLINTNEXTLINE(modernize-return-braced-init-list): {count, value} would read as a two-element list
    return std::vector<CUmemAccess_flags>(devices_.size(), cuda::CU_MEM_ACCESS_FLAGS_PROT_NONE);
  }

  [[nodiscard]] int current_device() const noexcept {
    const int device = core::Runtime::current_device();
    return valid(device) ? device : 0;
  }

  // Makes `device`'s primary context current on the calling thread. The driver's own per-thread
  // current context is the cache: asking it costs a thread-local read, and unlike a copy kept here it
  // cannot go stale when the application calls cudaSetDevice or cuCtxSetCurrent on the same thread.
  hipError_t bind(int device) noexcept {
    if (!valid(device)) return hipErrorInvalidDevice;
    const CUcontext wanted = handles_[static_cast<std::size_t>(device)].context;
    CUcontext current = nullptr;
    if (api_.cuCtxGetCurrent(&current) == cuda::CUDA_SUCCESS && current == wanted) return hipSuccess;
    return to_hip(api_.cuCtxSetCurrent(wanted));
  }

  // For operations on the unified address space, which any of our contexts can perform: the calling
  // thread's current HIP device, whose access the books have checked for copy and fill.
  hipError_t bind_calling_thread() noexcept { return bind(current_device()); }

  // The sub-microsecond VMM calls (reserve, free, map, unmap, release) need no current context: the
  // H100's driver (580) ran each on a thread with none. So they skip the bind, whose context query
  // costs a tenth of them; a driver that does ask for a context (CUDA_ERROR_INVALID_CONTEXT) gets the
  // calling thread's device's and is asked again.
  template <class Call>
  CUresult without_binding(Call&& call) noexcept {
    const CUresult result = call();
    if (result != cuda::CUDA_ERROR_INVALID_CONTEXT || bind_calling_thread() != hipSuccess) return result;
    return call();
  }

  // One word, finished when this returns (a store from pageable memory may otherwise still be in
  // flight, and the source is the caller's).
  hipError_t copy_word(void* dst, const void* src, std::size_t bytes) {
    if (!use_side_stream()) {
      if (const CUresult result = api_.cuMemcpy(address_of(dst), address_of(src), bytes);
          result != cuda::CUDA_SUCCESS) {
        return to_hip(result);
      }
      return finish_legacy_stream();
    }
    return side_copy(dst, src, bytes);
  }

  // Application host memory the driver does not know (not pinned, not managed): a copy to or from
  // it would be staged by the driver, which may wait for the legacy default stream, so the side
  // stream moves it through a pinned buffer of its own instead.
  [[nodiscard]] bool pageable(const void* ptr) const noexcept {
    unsigned type = 0;
    return queue_api_->cuPointerGetAttribute(&type, cuda::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address_of(ptr)) !=
           cuda::CUDA_SUCCESS;
  }

  hipError_t side_copy(void* dst, const void* src, std::size_t bytes) {
    const bool host_dst = pageable(dst);
    const bool host_src = pageable(src);
    if (host_dst && host_src) {
      std::memmove(dst, src, bytes);
      return hipSuccess;
    }
    if (!host_dst && !host_src) {
      return on_side_stream([&](cuda::CUstream stream) {
        return queue_api_->cuMemcpyAsync(address_of(dst), address_of(src), bytes, stream);
      });
    }
    std::lock_guard lock{bounce_mutex_};
    if (bounce_ == nullptr &&
        queue_api_->cuMemHostAlloc(&bounce_, kBounceBytes, cuda::CU_MEMHOSTALLOC_PORTABLE) != cuda::CUDA_SUCCESS) {
      bounce_ = nullptr;
      return hipErrorOutOfMemory;
    }
    auto* const to = static_cast<unsigned char*>(dst);
    const auto* const from = static_cast<const unsigned char*>(src);
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t piece = std::min(kBounceBytes, bytes - done);
      if (host_src) std::memcpy(bounce_, from + done, piece);
      const hipError_t moved = on_side_stream([&](cuda::CUstream stream) {
        return host_src ? queue_api_->cuMemcpyAsync(address_of(to + done), address_of(bounce_), piece, stream)
                        : queue_api_->cuMemcpyAsync(address_of(bounce_), address_of(from + done), piece, stream);
      });
      if (moved != hipSuccess) return moved;
      if (host_dst) std::memcpy(to + done, bounce_, piece);
      done += piece;
    }
    return hipSuccess;
  }

  // Waits for what the calling thread just put on the legacy default stream (and, by that stream's
  // rules, for the blocking streams' earlier work), not for the whole context: a non-blocking stream
  // of the application's own (a kernel waiting for the host, say) is none of a synchronous copy's
  // business, as in HIP. Without the stream entry points, the context.
  hipError_t finish_legacy_stream() {
    if (queue_api_) return to_hip(queue_api_->cuStreamSynchronize(cuda::CU_STREAM_LEGACY));
    return to_hip(api_.cuCtxSynchronize());
  }

  [[nodiscard]] bool use_side_stream() const noexcept {
    return !queue_devices_.empty() && core::Runtime::on_stream_thread();
  }

  // Queues `work` on the calling thread's device's side stream and waits for it.
  template <class Work>
  hipError_t on_side_stream(Work&& work) {
    cuda::CUstream stream = nullptr;
    if (const hipError_t error = side_stream(current_device(), &stream); error != hipSuccess) return error;
    if (const CUresult result = work(stream); result != cuda::CUDA_SUCCESS) return to_hip(result);
    return to_hip(queue_api_->cuStreamSynchronize(stream));
  }

  // The device's stream for work a stream's host thread does (see copy), made on first use and kept
  // for the life of the process.
  hipError_t side_stream(int device, cuda::CUstream* stream) {
    std::lock_guard lock{mutex_};
    if (side_streams_.empty()) side_streams_.resize(devices_.size(), nullptr);
    cuda::CUstream& slot = side_streams_[static_cast<std::size_t>(device)];
    if (slot == nullptr) {
      if (const CUresult result = queue_api_->cuStreamCreateWithPriority(&slot, cuda::CU_STREAM_NON_BLOCKING, 0);
          result != cuda::CUDA_SUCCESS) {
        slot = nullptr;
        return to_hip(result);
      }
    }
    *stream = slot;
    return hipSuccess;
  }

  // Takes every device's access to one mapping away by mapping its allocation afresh.
  // NOLINTNEXTLINE(readability-make-member-function-const): it changes `mapping`, an entry of this backend's table
  hipError_t remap_locked(CUdeviceptr va, MappingState& mapping) {
    if (mapping.mapped) {
      if (const CUresult result = api_.cuMemUnmap(va, mapping.size); result != cuda::CUDA_SUCCESS) {
        return to_hip(result);
      }
      mapping.mapped = false;
      mapping.granted.clear();
    }
    if (const CUresult result = api_.cuMemMap(va, mapping.size, 0, mapping.handle, 0); result != cuda::CUDA_SUCCESS) {
      return to_hip(result);  // still booked; the next set_access tries again, unmap succeeds at once
    }
    mapping.mapped = true;
    return hipSuccess;
  }

  [[nodiscard]] int attribute(cuda::CUdevice_attribute which, CUdevice device) const noexcept {
    int value = 0;
    return api_.cuDeviceGetAttribute(&value, which, device) == cuda::CUDA_SUCCESS ? value : 0;
  }

  const DriverApi api_;
  const std::unique_ptr<QueueApi> queue_api_;
  std::vector<cuda::QueueDevice> queue_devices_;  // empty: no device queues
  std::deque<cuda::WaitKernels> wait_kernels_;  // one per device, at stable addresses for queue_devices_
  std::string queues_unavailable_;  // why queue_devices_ is empty
  std::vector<cuda::CUstream> side_streams_;  // per device, under mutex_; see copy
  static constexpr std::size_t kBounceBytes = std::size_t{1} << 20;
  std::mutex bounce_mutex_;
  void* bounce_ = nullptr;  // pinned, kBounceBytes, for side_copy; kept for the life of the process
  const std::vector<DeviceHandles> handles_;
  const std::vector<DeviceProperties> devices_;
  std::mutex mutex_;  // guards the tables below; taken after the books' lock, never before it
  MappingTable mappings_;
  std::vector<MappingTable::node_type> spare_mapping_nodes_;  // capacity kSpareMappingNodes, from the start
  std::unordered_map<CUdeviceptr, int> linear_;  // hipMalloc'd address -> device
  DeferredClose import_fd_closer_;
  std::array<AddressArena, 2> arenas_{AddressArena{arena_shape(devices_, true), reserve_chunk(), release_chunk()},
                                      AddressArena{arena_shape(devices_, false), reserve_chunk(), release_chunk()}};
};

int attribute(const DriverApi& api, cuda::CUdevice_attribute which, CUdevice device) {
  int value = 0;
  return api.cuDeviceGetAttribute(&value, which, device) == cuda::CUDA_SUCCESS ? value : 0;
}

// The largest granularity the device asks for, over the handle types the backend may request.
std::size_t granularity_of(const DriverApi& api, CUdevice device, bool posix_fd,
                           cuda::CUmemAllocationGranularity_flags option) {
  std::size_t largest = 0;
  for (const auto type : {cuda::CU_MEM_HANDLE_TYPE_NONE, cuda::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}) {
    if (type == cuda::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && !posix_fd) continue;
    cuda::CUmemAllocationProp prop{};
    prop.type = cuda::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = type;
    prop.location = {.type = cuda::CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
    std::size_t granularity = 0;
    if (api.cuMemGetAllocationGranularity(&granularity, &prop, option) == cuda::CUDA_SUCCESS) {
      largest = std::max(largest, granularity);
    }
  }
  return largest != 0 ? largest : kFallbackGranularity;
}

DeviceProperties properties_of(const DriverApi& api, CUdevice device, int ordinal) {
  DeviceProperties properties;
  std::array<char, 256> name{};
  properties.name = api.cuDeviceGetName(name.data(), static_cast<int>(name.size()) - 1, device) == cuda::CUDA_SUCCESS
                        ? std::string{name.data()}
                        : "CUDA device " + std::to_string(ordinal);
  std::size_t total = 0;
  if (api.cuDeviceTotalMem_v2(&total, device) == cuda::CUDA_SUCCESS) properties.total_memory = total;
  properties.multiprocessor_count = attribute(api, cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  properties.virtual_memory =
      attribute(api, cuda::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != 0;
  properties.posix_fd_export =
      properties.virtual_memory &&
      attribute(api, cuda::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device) != 0;
  properties.integrated = attribute(api, cuda::CU_DEVICE_ATTRIBUTE_INTEGRATED, device) != 0;
  properties.managed_memory = attribute(api, cuda::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, device) != 0;
  properties.concurrent_managed_access =
      attribute(api, cuda::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device) != 0;
  properties.pageable_memory_access = attribute(api, cuda::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, device) != 0;
  properties.pageable_memory_access_uses_host_page_tables =
      attribute(api, cuda::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, device) != 0;
  if (properties.virtual_memory) {
    properties.minimum_granularity =
        granularity_of(api, device, properties.posix_fd_export, cuda::CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    properties.recommended_granularity =
        std::max(properties.minimum_granularity,
                 granularity_of(api, device, properties.posix_fd_export, cuda::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  } else {
    properties.minimum_granularity = kFallbackGranularity;
    properties.recommended_granularity = kFallbackGranularity;
  }
  return properties;
}

// Resolves every entry point, or names the ones this libcuda lacks.
std::string load_entry_points(void* library, DriverApi& api) {
  std::string missing;
#define HIPXX_CUDA_RESOLVE_ENTRY_POINT(name, type) cuda::resolve_entry_point(library, #name, api.name, missing);
  HIPXX_CUDA_DRIVER_ENTRY_POINTS(HIPXX_CUDA_RESOLVE_ENTRY_POINT)
#undef HIPXX_CUDA_RESOLVE_ENTRY_POINT
  return missing;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::string& error) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    error = "the CUDA backend needs the NVIDIA driver's libcuda.so.1, which could not be loaded: " +
            std::string{why != nullptr ? why : "no reason given"};
    return nullptr;
  }
  DriverApi api;
  if (const std::string missing = load_entry_points(library, api); !missing.empty()) {
    dlclose(library);  // nothing of it has run yet
    error = "libcuda.so.1 lacks " + missing + " (the CUDA backend needs a driver for CUDA 10.2 or later)";
    return nullptr;
  }
  // From here on the library stays loaded even on failure: a driver that ran cuInit may have started
  // threads or registered exit handlers that would then point into unmapped code.
  if (const CUresult result = api.cuInit(0); result != cuda::CUDA_SUCCESS) {
    error = "cuInit failed with " + describe(api, result);
    if (result == cuda::CUDA_ERROR_NO_DEVICE) error += ": the CUDA driver sees no device";
    if (result == cuda::CUDA_ERROR_STUB_LIBRARY) {
      error += ": the libcuda.so.1 found is the CUDA toolkit's link stub, not the NVIDIA driver";
    }
    return nullptr;
  }
  int count = 0;
  if (const CUresult result = api.cuDeviceGetCount(&count); result != cuda::CUDA_SUCCESS) {
    error = "cuDeviceGetCount failed with " + describe(api, result);
    return nullptr;
  }
  if (count <= 0) {
    error = "the CUDA driver loaded but reports no devices";
    return nullptr;
  }

  std::vector<DeviceHandles> handles;
  std::vector<DeviceProperties> devices;
  const auto release_retained = [&] {
    for (const DeviceHandles& retained : handles) (void)api.cuDevicePrimaryCtxRelease_v2(retained.device);
  };
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    DeviceHandles device;
    if (const CUresult result = api.cuDeviceGet(&device.device, ordinal); result != cuda::CUDA_SUCCESS) {
      release_retained();
      error = "cuDeviceGet(" + std::to_string(ordinal) + ") failed with " + describe(api, result);
      return nullptr;
    }
    if (const CUresult result = api.cuDevicePrimaryCtxRetain(&device.context, device.device);
        result != cuda::CUDA_SUCCESS) {
      release_retained();
      error = "could not retain the primary context of CUDA device " + std::to_string(ordinal) + ": " +
              describe(api, result) + " (is it in exclusive-process mode and used by another process?)";
      return nullptr;
    }
    handles.push_back(device);
    devices.push_back(properties_of(api, device.device, ordinal));
  }
  auto queue_api = std::make_unique<QueueApi>();
  std::string queues_missing = cuda::load_queue_entry_points(library, *queue_api);
  if (!queues_missing.empty()) {
    queue_api.reset();
    queues_missing = "libcuda.so.1 lacks " + queues_missing;
  }
  return std::make_unique<CudaBackend>(api, std::move(queue_api), std::move(queues_missing), std::move(handles),
                                       std::move(devices));
}

}  // namespace hipxx::backend
