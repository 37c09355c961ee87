// The stand-in's pool allocations and legacy IPC, after hsa_ext_amd.h:
//   allocate      size not 0, flags 0, ptr not NULL (INVALID_ARGUMENT); a known pool
//                 (INVALID_MEMORY_POOL); at most ALLOC_MAX_SIZE (INVALID_ALLOCATION); rounded up to
//                 the granule. A GPU pool gives device memory (host view PROT_NONE) that its GPU
//                 reaches; the CPU pool ordinary read-write memory that the CPU reaches.
//   free          NULL is accepted; otherwise an allocation's first byte. ROCr leaves anything else
//                 undefined; the stand-in answers INVALID_ALLOCATION (INVALID_ARGUMENT for an IPC
//                 attachment, as ROCr does) and says so on stderr.
//   allow_access  replaces the agents (besides the owner) that reach an allocation. Device memory is
//                 not host memory: naming the CPU agent for a GPU pool's memory is INVALID_ARGUMENT.
//   IPC           create takes a GPU pool allocation's first byte and its full size; attach maps it
//                 for the named GPUs (none named: all of them), at a new address each time; detach
//                 takes an address that attach returned.
#include "rocr/stand_in.hpp"
#include "rocr/stand_in_exports.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace hipxx::backend::rocr::stand_in {
namespace {

// The 32 bytes of an IPC handle. The other process reaches the memfd through /proc/PID/fd/FD of the
// process that made the handle: that works between unrelated processes of one user on a stock
// kernel (opening it needs only the read-level ptrace check, which Yama does not restrict, unlike
// pidfd_getfd), needs no broker thread, and leaves nothing behind when a process dies, which named
// objects in /dev/shm would. The cost: a handle works while its allocation lives in the process
// that made it; ROCr's stays valid while any process still has the memory attached. The token, also
// in the memfd's name, stops a descriptor number reused for other memory from being taken for it.
struct IpcFields {
  std::uint32_t magic;
  std::int32_t pid;
  std::int32_t fd;
  std::uint32_t owner;
  std::uint64_t token;
  std::uint64_t size;
};
static_assert(sizeof(IpcFields) == sizeof(hsa_amd_ipc_memory_t));
constexpr std::uint32_t kIpcMagic = 0x49504331;  // "IPC1"

std::shared_ptr<DeviceMemory> open_exported(const IpcFields& fields) {
  const std::string path = "/proc/" + std::to_string(fields.pid) + "/fd/" + std::to_string(fields.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  auto memory = DeviceMemory::adopt(fd);
  if (!memory) close(fd);
  if (!memory || memory->token() != fields.token || memory->owner() != fields.owner) return nullptr;
  return memory;
}

// The agents that an attach names (all GPUs when it names none), or the status that refuses them.
hsa_status_t attach_agents(const State& s, std::uint32_t count, const hsa_agent_t* agents, AgentMask& allowed) {
  allowed = 0;
  if (count == 0) {
    for (unsigned agent = 1; agent < agent_count(s); ++agent) allowed |= bit(agent);
    return HSA_STATUS_SUCCESS;
  }
  for (std::uint32_t index = 0; index < count; ++index) {
    const auto agent = agent_index(s, agents[index]);
    if (!agent) return HSA_STATUS_ERROR_INVALID_AGENT;
    allowed |= bit(*agent);
  }
  if ((allowed & bit(kCpu)) != 0) {
    complain("hsa_amd_ipc_memory_attach: the CPU agent cannot reach a GPU's memory");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t allocate_on_gpu(State& s, unsigned pool, std::size_t requested, std::size_t rounded, void** ptr) {
  if (rounded > kGpuPoolSize - s.pool_in_use[pool]) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  auto memory = DeviceMemory::create(rounded, pool);
  void* base = memory ? memory->map_host_view(nullptr) : nullptr;
  if (base == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  s.allocations.emplace(
      reinterpret_cast<std::uintptr_t>(base),
      PoolAllocation{
          .requested = requested, .size = rounded, .pool = pool, .memory = std::move(memory), .allowed = bit(pool)});
  s.pool_in_use[pool] += rounded;
  *ptr = base;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t allocate_on_host(State& s, std::size_t requested, std::size_t rounded, void** ptr) {
  void* base = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  s.allocations.emplace(reinterpret_cast<std::uintptr_t>(base),
                        PoolAllocation{.requested = requested, .size = rounded, .pool = kCpu, .allowed = bit(kCpu)});
  *ptr = base;
  return HSA_STATUS_SUCCESS;
}

// Why freeing `ptr` is refused, for the line on stderr.
hsa_status_t refuse_free(State& s, std::uintptr_t address) {
  if (s.attachments.contains(address)) {
    complain("hsa_amd_memory_pool_free(" + hex(address) + "): IPC memory is released with hsa_amd_ipc_memory_detach");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (entry_holding(s.allocations, address) != s.allocations.end()) {
    complain("hsa_amd_memory_pool_free(" + hex(address) + "): not the first byte of the allocation");
  } else {
    complain("hsa_amd_memory_pool_free(" + hex(address) + "): not memory from hsa_amd_memory_pool_allocate");
  }
  return HSA_STATUS_ERROR_INVALID_ALLOCATION;
}

}  // namespace
}  // namespace hipxx::backend::rocr::stand_in

namespace hipxx::backend::rocr {
using namespace stand_in;  // NOLINT(google-build-using-namespace): the entry points' own namespace

hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool, std::size_t size, std::uint32_t flags,
                                          void** ptr) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (size == 0 || ptr == nullptr || flags != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto index = pool_index(s, pool);
  if (!index) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (size > pool_limit(*index)) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  const std::size_t rounded = round_up(size, pool_granule(*index));
  const hsa_status_t status =
      is_gpu(*index) ? allocate_on_gpu(s, *index, size, rounded, ptr) : allocate_on_host(s, size, rounded, ptr);
  if (status == HSA_STATUS_SUCCESS) {
    const auto base = reinterpret_cast<std::uintptr_t>(*ptr);
    s.svm.forget(base, base + rounded);
  }
  return status;
}

hsa_status_t hsa_amd_memory_pool_free(void* ptr) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (ptr == nullptr) return HSA_STATUS_SUCCESS;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const auto allocation = s.allocations.find(address);
  if (allocation == s.allocations.end()) return refuse_free(s, address);
  if (allocation->second.busy->operations > 0) {
    fatal("hsa_amd_memory_pool_free(" + hex(address) + "): an asynchronous copy using it has not completed");
  }
  munmap(ptr, allocation->second.size);
  if (allocation->second.memory) s.pool_in_use[allocation->second.pool] -= allocation->second.size;
  s.allocations.erase(allocation);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_agents_allow_access(std::uint32_t num_agents, const hsa_agent_t* agents,
                                         const std::uint32_t* flags, const void* ptr) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (num_agents == 0 || agents == nullptr || flags != nullptr || ptr == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  AgentMask listed = 0;
  for (std::uint32_t index = 0; index < num_agents; ++index) {
    const auto agent = agent_index(s, agents[index]);
    if (!agent) return HSA_STATUS_ERROR_INVALID_AGENT;
    listed |= bit(*agent);
  }
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  // ROCr grants an attachment's access at attach time and accepts the call as done.
  if (s.attachments.contains(address)) return HSA_STATUS_SUCCESS;
  const auto allocation = s.allocations.find(address);
  if (allocation == s.allocations.end()) {
    complain("hsa_amd_agents_allow_access(" + hex(address) +
             "): not the first byte of a pool allocation (vmem mappings take hsa_amd_vmem_set_access)");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (allocation->second.memory && (listed & bit(kCpu)) != 0) {
    complain("hsa_amd_agents_allow_access(" + hex(address) + "): the CPU agent cannot reach a GPU pool's memory");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (allocation->second.memory && !s.config.peers && (listed & ~(bit(allocation->second.pool) | bit(kCpu))) != 0) {
    complain("hsa_amd_agents_allow_access(" + hex(address) + "): another GPU cannot reach this GPU's memory" +
             " (HIPXX_STAND_IN_NO_PEER=1)");
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  allocation->second.allowed = bit(allocation->second.pool) | listed;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_ipc_memory_create(void* ptr, std::size_t len, hsa_amd_ipc_memory_t* handle) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (ptr == nullptr || handle == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto allocation = s.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (allocation == s.allocations.end() || allocation->second.requested != len) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const PoolAllocation& memory = allocation->second;
  if (!memory.memory) {
    complain("hsa_amd_ipc_memory_create: the stand-in shares GPU pool memory only");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const IpcFields fields{.magic = kIpcMagic,
                         .pid = getpid(),
                         .fd = memory.memory->fd(),
                         .owner = memory.memory->owner(),
                         .token = memory.memory->token(),
                         .size = len};
  std::memcpy(handle, &fields, sizeof fields);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_ipc_memory_attach(const hsa_amd_ipc_memory_t* handle, std::size_t len, std::uint32_t num_agents,
                                       const hsa_agent_t* mapping_agents, void** mapped_ptr) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (handle == nullptr || mapped_ptr == nullptr || (num_agents != 0 && mapping_agents == nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  AgentMask allowed = 0;
  if (const hsa_status_t status = attach_agents(s, num_agents, mapping_agents, allowed); status != HSA_STATUS_SUCCESS) {
    return status;
  }
  IpcFields fields{};
  std::memcpy(&fields, handle, sizeof fields);
  if (fields.magic != kIpcMagic || fields.size != len || len == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  auto memory = open_exported(fields);
  if (!memory || memory->size() < round_up(len, page_size()) || memory->owner() >= agent_count(s)) {
    complain("hsa_amd_ipc_memory_attach: the handle names no live allocation (freed, or its process gone)");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // ROCr maps the memory for every agent named, and refuses the whole attach when one of them
  // cannot have it (a GPU that can never use the owner's pool).
  if (!s.config.peers && (allowed & ~bit(memory->owner())) != 0) {
    note("hsa_amd_ipc_memory_attach: a GPU named cannot use the memory's pool (HIPXX_STAND_IN_NO_PEER)");
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  void* base = memory->map_host_view(nullptr);
  if (base == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const std::size_t size = memory->size();
  s.attachments.emplace(reinterpret_cast<std::uintptr_t>(base),
                        Attachment{.size = size, .memory = std::move(memory), .allowed = allowed});
  const auto begin = reinterpret_cast<std::uintptr_t>(base);
  s.svm.forget(begin, begin + size);
  *mapped_ptr = base;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_ipc_memory_detach(void* mapped_ptr) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  const auto attachment = s.attachments.find(reinterpret_cast<std::uintptr_t>(mapped_ptr));
  if (mapped_ptr == nullptr || attachment == s.attachments.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (attachment->second.busy->operations > 0) {
    fatal("hsa_amd_ipc_memory_detach(" + hex(attachment->first) + "): an asynchronous copy using it has not completed");
  }
  munmap(mapped_ptr, attachment->second.size);
  s.attachments.erase(attachment);
  return HSA_STATUS_SUCCESS;
}

}  // namespace hipxx::backend::rocr
