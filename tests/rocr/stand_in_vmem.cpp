// The stand-in's virtual memory API (hsa_amd_vmem_*), after shared/seeds/vmem-hsa-rocr.txt:
//   reserve      size a multiple of the page size; the address a hint; alignment a power of two and a
//                page multiple (0: the page size); flags 0. PROT_NONE anonymous memory.
//   free         va a reservation's base (else INVALID_ALLOCATION) with its exact size (else
//                INVALID_ARGUMENT); RESOURCE_FREE while anything is mapped inside.
//   create       a GPU pool; size a multiple of the pool's granule; type NONE or PINNED; flags 0.
//   release      memory lives on while mapped, and while an exported descriptor is open.
//   map          [va, va+size) inside one reservation, overlapping no mapping, size the handle's
//                size, offset 0, flags 0: all INVALID_ARGUMENT. The memfd is mapped there, PROT_NONE.
//   unmap        exactly one whole mapping (INVALID_ALLOCATION for another va, INVALID_ARGUMENT for
//                another size); the range goes back to reserved PROT_NONE anonymous memory.
//   set_access   exactly one whole mapping; every agent valid; the agents named get the permissions
//                named, and the others keep theirs. That is what ROCr's code does, where its
//                documentation says every agent's permissions are replaced: a backend that leaves an
//                agent out to revoke its access would leave that access in place. With
//                HIPXX_STAND_IN_REPLACE_ACCESS the others get NONE, as documented: a backend that
//                leaves out an agent whose access it keeps would lose that access. Under
//                HIPXX_STAND_IN_NO_PEER, naming a GPU other than the memory's owner (even with NONE) is
//                HSA_STATUS_ERROR: ROCr brings the memory to every GPU named. The host view follows the
//                CPU agent's.
//   get_access   any address of a mapping; a GPU agent that some set_access named.
//   export       a new close-on-exec descriptor of the memfd; INCOMPATIBLE_ARGUMENTS for an imported
//                handle, as ROCr's code refuses (its documentation says nothing of it).
//   import       a stand-in memfd only. Memory this process holds an imported handle to comes back as
//                that handle with one more reference, as older ROCr answers.
//   retain       the first byte of a mapping; counts a reference that handle_release gives back.
#include "rocr/stand_in.hpp"
#include "rocr/stand_in_exports.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace hipxx::backend::rocr::stand_in {
namespace {

bool power_of_two(std::uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// An address range of `size` bytes aligned to `alignment`: at `address` where that is free, else
// anywhere (a larger range trimmed to the alignment).
void* reserve_range(std::size_t size, std::uint64_t address, std::size_t alignment) {
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (address != 0 && address % alignment == 0) {
    void* wanted = reinterpret_cast<void*>(address);
    void* at = mmap(wanted, size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (at == wanted) return at;
    if (at != MAP_FAILED) munmap(at, size);  // a kernel that knows no MAP_FIXED_NOREPLACE
  }
  const std::size_t padded = size + alignment - page_size();
  if (padded < size) return nullptr;
  void* any = mmap(nullptr, padded, PROT_NONE, kFlags, -1, 0);
  if (any == MAP_FAILED) return nullptr;
  const auto first = reinterpret_cast<std::uintptr_t>(any);
  const std::uintptr_t start = round_up(first, alignment);
  if (start > first) munmap(any, start - first);
  if (first + padded > start + size) munmap(reinterpret_cast<void*>(start + size), first + padded - start - size);
  return reinterpret_cast<void*>(start);
}

// The reservation holding all of [begin, begin + size), or end().
auto reservation_holding(State& s, std::uintptr_t begin, std::size_t size) {
  auto reservation = entry_holding(s.reservations, begin);
  if (reservation == s.reservations.end() || size > reservation->second.size) return s.reservations.end();
  return begin - reservation->first <= reservation->second.size - size ? reservation : s.reservations.end();
}

Mapping* mapping_at(State& s, std::uintptr_t base) {
  const auto reservation = entry_holding(s.reservations, base);
  if (reservation == s.reservations.end()) return nullptr;
  const auto mapping = reservation->second.mappings.find(base);
  return mapping == reservation->second.mappings.end() ? nullptr : &mapping->second;
}

Mapping* mapping_holding(State& s, std::uintptr_t address) {
  const auto reservation = entry_holding(s.reservations, address);
  if (reservation == s.reservations.end()) return nullptr;
  const auto mapping = entry_holding(reservation->second.mappings, address);
  return mapping == reservation->second.mappings.end() ? nullptr : &mapping->second;
}

bool overlaps_mapping(const Reservation& reservation, std::uintptr_t begin, std::size_t size) {
  auto next = reservation.mappings.lower_bound(begin);
  if (next != reservation.mappings.end() && next->first - begin < size) return true;
  if (next == reservation.mappings.begin()) return false;
  --next;
  return next->first + next->second.size > begin;
}

// A live handle (not released to zero references), or nullptr.
VmemHandle* live_handle(State& s, hsa_amd_vmem_alloc_handle_t handle) {
  const auto found = s.handles.find(handle.handle);
  return found == s.handles.end() || found->second.references == 0 ? nullptr : &found->second;
}

void forget_if_unused(State& s, std::uint64_t id) {
  const auto found = s.handles.find(id);
  if (found == s.handles.end() || found->second.references > 0 || found->second.mappings > 0) return;
  s.pool_in_use[found->second.pool] -= found->second.charged;
  s.handles.erase(found);
}

int protection_for(hsa_access_permission_t cpu) {
  switch (cpu) {
    case HSA_ACCESS_PERMISSION_NONE: return PROT_NONE;
    case HSA_ACCESS_PERMISSION_RO: return PROT_READ;
    case HSA_ACCESS_PERMISSION_WO:  // the MMU has no write-only pages
    case HSA_ACCESS_PERMISSION_RW: return PROT_READ | PROT_WRITE;
  }
  return PROT_NONE;
}

bool valid_permission(hsa_access_permission_t permission) {
  return permission >= HSA_ACCESS_PERMISSION_NONE && permission <= HSA_ACCESS_PERMISSION_RW;
}

hsa_status_t reserve(void** va, std::size_t size, std::uint64_t address, std::uint64_t alignment, std::uint64_t flags) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (!s.config.vmem || va == nullptr || size == 0 || size % page_size() != 0 || flags != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (alignment == 0) alignment = page_size();
  if (!power_of_two(alignment) || alignment % page_size() != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  void* base = reserve_range(size, address, alignment);
  if (base == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const auto begin = reinterpret_cast<std::uintptr_t>(base);
  s.reservations.emplace(begin, Reservation{.size = size, .mappings = {}});
  s.svm.forget(begin, begin + size);
  *va = base;
  return HSA_STATUS_SUCCESS;
}

// A set_access call's permissions for the agents it names, or the status that refuses it.
hsa_status_t permissions_from(const State& s, const hsa_amd_memory_access_desc_t* desc, std::size_t count,
                              std::array<hsa_access_permission_t, kMaxAgents>& permissions, AgentMask& named) {
  named = 0;
  for (std::size_t index = 0; index < count; ++index) {
    const auto agent = agent_index(s, desc[index].agent_handle);
    if (!agent) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (!valid_permission(desc[index].permissions)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    permissions[*agent] = desc[index].permissions;
    named |= bit(*agent);
  }
  return HSA_STATUS_SUCCESS;
}

}  // namespace
}  // namespace hipxx::backend::rocr::stand_in

namespace hipxx::backend::rocr {
using namespace stand_in;  // NOLINT(google-build-using-namespace): the entry points' own namespace

hsa_status_t hsa_amd_vmem_address_reserve(void** va, std::size_t size, std::uint64_t address, std::uint64_t flags) {
  return reserve(va, size, address, 0, flags);
}

// Left out of the variant that stands in for HSA runtimes before AMD interface 1.6, which lack it
// (tests/rocr/meson.build).
#ifndef HIPXX_STAND_IN_WITHOUT_RESERVE_ALIGN
hsa_status_t hsa_amd_vmem_address_reserve_align(void** va, std::size_t size, std::uint64_t address,
                                                std::uint64_t alignment, std::uint64_t flags) {
  return reserve(va, size, address, alignment, flags);
}
#endif

hsa_status_t hsa_amd_vmem_address_free(void* va, std::size_t size) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto reservation = s.reservations.find(reinterpret_cast<std::uintptr_t>(va));
  if (reservation == s.reservations.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (reservation->second.size != size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!reservation->second.mappings.empty()) return HSA_STATUS_ERROR_RESOURCE_FREE;
  if (munmap(va, size) != 0) return HSA_STATUS_ERROR;
  s.reservations.erase(reservation);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_handle_create(hsa_amd_memory_pool_t pool, std::size_t size, hsa_amd_memory_type_t type,
                                        std::uint64_t flags, hsa_amd_vmem_alloc_handle_t* memory_handle) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (!s.config.vmem || size == 0 || (type != MEMORY_TYPE_NONE && type != MEMORY_TYPE_PINNED)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const auto index = pool_index(s, pool);
  if (!index || flags != 0 || memory_handle == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!is_gpu(*index)) {
    complain("hsa_amd_vmem_handle_create: the stand-in makes virtual memory handles in GPU pools only");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (size % pool_granule(*index) != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (size > kGpuPoolSize - s.pool_in_use[*index]) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  auto memory = DeviceMemory::create(size, *index);
  if (!memory) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const std::uint64_t id = kVmemTag + s.next_id++;
  s.handles.emplace(id, VmemHandle{.memory = std::move(memory), .pool = *index, .type = type, .charged = size});
  s.pool_in_use[*index] += size;
  memory_handle->handle = id;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t memory_handle) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  VmemHandle* handle = live_handle(s, memory_handle);
  if (handle == nullptr) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  --handle->references;
  forget_if_unused(s, memory_handle.handle);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_map(void* va, std::size_t size, std::size_t in_offset,
                              hsa_amd_vmem_alloc_handle_t memory_handle, std::uint64_t flags) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  const auto begin = reinterpret_cast<std::uintptr_t>(va);
  if (va == nullptr || size == 0 || in_offset != 0 || flags != 0 || begin % page_size() != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const auto reservation = reservation_holding(s, begin, size);
  if (reservation == s.reservations.end() || overlaps_mapping(reservation->second, begin, size)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  VmemHandle* handle = live_handle(s, memory_handle);
  if (handle == nullptr || handle->memory->size() != size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (handle->memory->map_host_view(va) == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  reservation->second.mappings.emplace(begin,
                                       Mapping{.size = size, .handle = memory_handle.handle, .memory = handle->memory});
  ++handle->mappings;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_unmap(void* va, std::size_t size) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto begin = reinterpret_cast<std::uintptr_t>(va);
  const auto reservation = entry_holding(s.reservations, begin);
  if (reservation == s.reservations.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  auto& mappings = reservation->second.mappings;
  const auto mapping = mappings.find(begin);
  if (mapping == mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (mapping->second.size != size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (mapping->second.busy->operations > 0) {
    fatal("hsa_amd_vmem_unmap(" + hex(begin) + "): an asynchronous copy using this mapping has not completed");
  }
  void* back = mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (back == MAP_FAILED) return HSA_STATUS_ERROR;
  const std::uint64_t id = mapping->second.handle;
  mappings.erase(mapping);
  --s.handles.at(id).mappings;
  forget_if_unused(s, id);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_set_access(void* va, std::size_t size, const hsa_amd_memory_access_desc_t* desc,
                                     std::size_t desc_cnt) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (va == nullptr || size == 0 || desc == nullptr || desc_cnt == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::array<hsa_access_permission_t, kMaxAgents> permissions{};
  AgentMask named = 0;
  if (const hsa_status_t status = permissions_from(s, desc, desc_cnt, permissions, named);
      status != HSA_STATUS_SUCCESS) {
    return status;
  }
  const auto begin = reinterpret_cast<std::uintptr_t>(va);
  if (reservation_holding(s, begin, size) == s.reservations.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  Mapping* mapping = mapping_at(s, begin);
  if (mapping == nullptr) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (mapping->size != size) {
    // ROCr's code accepts a range of several adjacent mappings; its documentation asks for one.
    if (size > mapping->size) complain("hsa_amd_vmem_set_access(" + hex(begin) + "): the range is not one mapping");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // ROCr brings the memory to every GPU a descriptor names, NONE or not; one that can never use the
  // memory's pool may not have it.
  const AgentMask gpus_named = named & ~bit(kCpu);
  if (!s.config.peers && (gpus_named & ~bit(mapping->memory->owner())) != 0) {
    note("hsa_amd_vmem_set_access(" + hex(begin) +
         "): a GPU named cannot use the memory's pool (HIPXX_STAND_IN_NO_PEER)");
    return HSA_STATUS_ERROR;
  }
  for (unsigned agent = 0; agent < kMaxAgents; ++agent) {
    if ((named & bit(agent)) == 0) {
      permissions[agent] = s.config.replace_access ? HSA_ACCESS_PERMISSION_NONE : mapping->permissions[agent];
    }
  }
  if (mprotect(va, size, protection_for(permissions[kCpu])) != 0) return HSA_STATUS_ERROR;
  mapping->permissions = permissions;
  mapping->ever_set |= named;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_get_access(void* va, hsa_access_permission_t* perms, hsa_agent_t agent_handle) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (va == nullptr || perms == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const Mapping* mapping = mapping_holding(s, reinterpret_cast<std::uintptr_t>(va));
  if (mapping == nullptr) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  const auto agent = agent_index(s, agent_handle);
  if (!agent) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!is_gpu(*agent)) {
    complain("hsa_amd_vmem_get_access: ROCr answers for GPU agents only");
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  // Documented; ROCr's code answers NONE instead, so a backend must not rely on either answer.
  if ((mapping->ever_set & bit(*agent)) == 0) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  *perms = mapping->permissions[*agent];
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_retain_alloc_handle(hsa_amd_vmem_alloc_handle_t* memory_handle, void* addr) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (memory_handle == nullptr || addr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto address = reinterpret_cast<std::uintptr_t>(addr);
  const Mapping* mapping = mapping_at(s, address);
  if (mapping == nullptr) {
    if (mapping_holding(s, address) != nullptr) {
      complain("hsa_amd_vmem_retain_alloc_handle(" + hex(address) + "): ROCr takes a mapping's first byte only");
    }
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  ++s.handles.at(mapping->handle).references;
  memory_handle->handle = mapping->handle;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_export_shareable_handle(int* dmabuf_fd, hsa_amd_vmem_alloc_handle_t handle,
                                                  std::uint64_t flags) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (dmabuf_fd == nullptr || flags != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *dmabuf_fd = -1;
  const VmemHandle* found = live_handle(state(), handle);
  if (found == nullptr) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (found->imported) {
    complain("hsa_amd_vmem_export_shareable_handle: ROCr does not export a handle that was imported");
    return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
  }
  const int fd = fcntl(found->memory->fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  *dmabuf_fd = fd;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_get_alloc_properties_from_handle(hsa_amd_vmem_alloc_handle_t memory_handle,
                                                           hsa_amd_memory_pool_t* pool, hsa_amd_memory_type_t* type) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (pool == nullptr || type == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const VmemHandle* const handle = live_handle(s, memory_handle);
  if (handle == nullptr) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  pool->handle = kPoolTag + handle->pool;
  *type = handle->type;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_vmem_import_shareable_handle(int dmabuf_fd, hsa_amd_vmem_alloc_handle_t* handle) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (dmabuf_fd < 0 || handle == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  // The handle keeps its own descriptor: the caller may close its one at once.
  const int own = fcntl(dmabuf_fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  auto memory = DeviceMemory::adopt(own);
  if (!memory) {
    close(own);
    complain("hsa_amd_vmem_import_shareable_handle(" + std::to_string(dmabuf_fd) +
             "): not a descriptor from hsa_amd_vmem_export_shareable_handle");
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (memory->owner() >= agent_count(s)) {
    complain("hsa_amd_vmem_import_shareable_handle: the memory belongs to GPU " + std::to_string(memory->owner() - 1) +
             ", which this process does not have");
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  for (auto& [id, held] : s.handles) {
    if (held.imported && held.references > 0 && held.memory->token() == memory->token()) {
      ++held.references;
      handle->handle = id;
      return HSA_STATUS_SUCCESS;
    }
  }
  const std::uint64_t id = kVmemTag + s.next_id++;
  const unsigned pool = memory->owner();
  s.handles.emplace(id, VmemHandle{.memory = std::move(memory), .pool = pool, .imported = true});
  handle->handle = id;
  return HSA_STATUS_SUCCESS;
}

}  // namespace hipxx::backend::rocr
