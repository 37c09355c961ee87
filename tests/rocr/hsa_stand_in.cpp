// A stand-in for libhsa-runtime64.so.1 (AMD's ROCr), for testing hipxx's ROCr backend where no AMD GPU
// is: the entry points that backend uses, over Linux memfds and mmap, enforcing the rules that the ROCr
// documentation states (shared/seeds/vmem-hsa-rocr.txt, hsa.h and hsa_ext_amd.h), so that a backend
// breaking one fails its tests instead of passing here and faulting on a GPU. Where ROCr's own code is
// looser than its documentation, the stand-in keeps to the documentation (each case says so).
//
// The model:
//   agents   one CPU agent, then HIPXX_STAND_IN_GPUS (1..8, default 1) GPU agents; one pool each.
//   memory   GPU memory (vmem handles, GPU pool allocations, IPC attachments) is a memfd. The
//            application's addresses are mappings of it whose protection follows the CPU agent's
//            rights only, so host code that dereferences device memory faults, as on a GPU. GPU
//            access happens only inside the stand-in (copies, fills), through its own mapping of the
//            memfd, after checking the GPU's rights.
//   copies   hsa_amd_memory_async_copy checks both ranges, then runs on one of three worker threads once its
//            dependency signals read 0 (after HIPXX_STAND_IN_COPY_DELAY_US, default 200, so that a
//            backend that does not wait for the completion signal sees stale memory).
//   prefetch hsa_amd_svm_prefetch_async runs on the same threads; as in ROCr, the runtime lowers its
//            completion signal itself and then notifies the signal's waiters, so destroying that
//            signal within 20 ms (kNotifyWindow) of its coming down aborts: a backend must not destroy
//            a signal as soon as its wait returns.
//   handlers hsa_amd_signal_async_handler's handlers are called on a thread of the stand-in's own,
//            one at a time and without its lock (a handler may call any entry point), once their
//            signal meets their condition; the last hsa_shut_down waits for the current call and
//            drops (with a line on stderr) the handlers still registered.
//   errors   a refused call returns ROCr's code; copies also write a line to stderr. Breaches that
//            ROCr has no error code for (freeing memory an operation still uses, an unknown signal
//            in a call that returns no status) write a line and abort. HIPXX_STAND_IN_ABORT=1 makes
//            every stderr line abort, to find the call in a debugger.
//   options  HIPXX_STAND_IN_NO_VMEM=1 reports no virtual memory API; HIPXX_STAND_IN_XNACK=1 reports
//            XNACK on, which lets GPUs reach any host memory (as retry-on-fault hardware does).
//
// This file: the process-wide state, hsa_init/hsa_shut_down, agents, pools, and the check that each
// exported entry point has exactly the type that hipxx's declarations give it.
#include "rocr/stand_in.hpp"
#include "rocr/stand_in_exports.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace hipxx::backend::rocr::stand_in {
namespace {

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string_view{value} == "1";
}

std::optional<unsigned long> env_number(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long number = std::strtoul(value, &end, 10);
  if (*end != '\0') return std::nullopt;
  return number;
}

// nullopt (after a line on stderr) when a variable holds a value the stand-in cannot honour.
std::optional<Config> read_config() {
  Config config;
  if (std::getenv("HIPXX_STAND_IN_GPUS") != nullptr) {
    const auto gpus = env_number("HIPXX_STAND_IN_GPUS");
    if (!gpus || *gpus < 1 || *gpus > kMaxGpus) {
      complain("HIPXX_STAND_IN_GPUS must be a number from 1 to 8");
      return std::nullopt;
    }
    config.gpus = static_cast<unsigned>(*gpus);
  }
  if (std::getenv("HIPXX_STAND_IN_COPY_DELAY_US") != nullptr) {
    const auto delay = env_number("HIPXX_STAND_IN_COPY_DELAY_US");
    if (!delay) {
      complain("HIPXX_STAND_IN_COPY_DELAY_US must be a number of microseconds");
      return std::nullopt;
    }
    config.copy_delay = std::chrono::microseconds{*delay};
  }
  config.vmem = !env_flag("HIPXX_STAND_IN_NO_VMEM");
  config.xnack = env_flag("HIPXX_STAND_IN_XNACK");
  config.peers = !env_flag("HIPXX_STAND_IN_NO_PEER");
  config.replace_access = env_flag("HIPXX_STAND_IN_REPLACE_ACCESS");
  return config;
}

template <typename T>
hsa_status_t put(void* value, T answer) {
  std::memcpy(value, &answer, sizeof answer);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t put_name(void* value, const std::string& name) {
  std::array<char, 64> buffer{};
  std::copy_n(name.begin(), std::min(name.size(), buffer.size() - 1), buffer.begin());
  std::memcpy(value, buffer.data(), buffer.size());
  return HSA_STATUS_SUCCESS;
}

std::string product_name(unsigned agent) {
  return is_gpu(agent) ? "hipxx stand-in GPU " + std::to_string(agent - 1) : "hipxx stand-in CPU";
}

std::uint32_t compute_units(unsigned agent) {
  if (is_gpu(agent)) return kGpuComputeUnits;
  return static_cast<std::uint32_t>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

std::size_t host_memory_size() { return static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page_size(); }

hsa_status_t gpu_pool_info(hsa_amd_memory_pool_info_t attribute, void* value) {
  switch (attribute) {
    case HSA_AMD_MEMORY_POOL_INFO_SEGMENT: return put(value, HSA_AMD_SEGMENT_GLOBAL);
    case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS:
      return put(value, std::uint32_t{HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED});
    case HSA_AMD_MEMORY_POOL_INFO_SIZE:
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE: return put(value, kGpuPoolSize);
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: return put(value, true);
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE:
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: return put(value, page_size());
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: return put(value, false);
    case HSA_AMD_MEMORY_POOL_INFO_LOCATION: return put(value, 1);  // HSA_AMD_MEMORY_POOL_LOCATION_GPU
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE: return put(value, kRecommendedGranule);
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t cpu_pool_info(hsa_amd_memory_pool_info_t attribute, void* value) {
  switch (attribute) {
    case HSA_AMD_MEMORY_POOL_INFO_SEGMENT: return put(value, HSA_AMD_SEGMENT_GLOBAL);
    case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS:
      return put(value, std::uint32_t{HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED |
                                      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT});
    case HSA_AMD_MEMORY_POOL_INFO_SIZE:
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE: return put(value, host_memory_size());
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED:
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: return put(value, true);
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE:
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT:
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE: return put(value, page_size());
    case HSA_AMD_MEMORY_POOL_INFO_LOCATION: return put(value, 0);  // HSA_AMD_MEMORY_POOL_LOCATION_CPU
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

}  // namespace

void complain(const std::string& line) {
  std::fprintf(stderr, "hipxx stand-in libhsa-runtime64: %s\n", line.c_str());
  if (env_flag("HIPXX_STAND_IN_ABORT")) std::abort();
}

void note(const std::string& line) { std::fprintf(stderr, "hipxx stand-in libhsa-runtime64: %s\n", line.c_str()); }

void fatal(const std::string& line) {
  std::fprintf(stderr, "hipxx stand-in libhsa-runtime64: %s (undefined behaviour in ROCr; aborting)\n", line.c_str());
  std::abort();
}

std::string hex(std::uintptr_t value) {
  std::array<char, 24> text{};
  std::snprintf(text.data(), text.size(), "0x%jx", static_cast<std::uintmax_t>(value));
  return text.data();
}

std::size_t page_size() {
  static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

bool permits(hsa_access_permission_t permission, Want want) {
  if (want == Want::any) return true;
  if (want == Want::read) return permission == HSA_ACCESS_PERMISSION_RO || permission == HSA_ACCESS_PERMISSION_RW;
  return permission == HSA_ACCESS_PERMISSION_WO || permission == HSA_ACCESS_PERMISSION_RW;
}

State& state() {
  static auto* const everything = new State;  // NOLINT(cppcoreguidelines-owning-memory): see State
  return *everything;
}

std::optional<std::unique_lock<std::mutex>> lock_open() {
  std::unique_lock lock{state().mutex};
  if (state().opened == 0) return std::nullopt;
  return lock;
}

unsigned agent_count(const State& s) { return s.config.gpus + 1; }
bool is_gpu(unsigned agent) { return agent != kCpu; }
hsa_agent_t agent_handle(unsigned agent) { return hsa_agent_t{kAgentTag + agent}; }
std::size_t pool_granule(unsigned /*pool*/) { return page_size(); }
std::size_t pool_limit(unsigned pool) { return is_gpu(pool) ? kGpuPoolSize : host_memory_size(); }

std::optional<unsigned> agent_index(const State& s, hsa_agent_t agent) {
  if (agent.handle < kAgentTag || agent.handle - kAgentTag >= agent_count(s)) return std::nullopt;
  return static_cast<unsigned>(agent.handle - kAgentTag);
}

std::optional<unsigned> pool_index(const State& s, hsa_amd_memory_pool_t pool) {
  if (pool.handle < kPoolTag || pool.handle - kPoolTag >= agent_count(s)) return std::nullopt;
  return static_cast<unsigned>(pool.handle - kPoolTag);
}

}  // namespace hipxx::backend::rocr::stand_in

namespace hipxx::backend::rocr {
using namespace stand_in;  // NOLINT(google-build-using-namespace): the entry points' own namespace

hsa_status_t hsa_init() {
  State& s = state();
  const std::lock_guard lock{s.mutex};
  if (s.opened == 0) {
    const auto config = read_config();
    if (!config) return HSA_STATUS_ERROR;
    s.config = *config;
  }
  ++s.opened;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_shut_down() {
  State& s = state();
  std::unique_lock lock{s.mutex};
  if (s.opened == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (--s.opened > 0) return HSA_STATUS_SUCCESS;
  stop_handlers(lock);
  stop_worker(lock);
  // Another thread may have opened the runtime again while the threads stopped.
  if (s.opened == 0) release_all(s);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void* value) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const Config& config = state().config;
  // HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT (not in hsa_runtime.hpp): whether a GPU reaches host
  // memory without hsa_amd_svm_attributes_set, which is so exactly when XNACK is on.
  constexpr int kSvmAccessibleByDefault = 0x202;
  if (attribute == kSvmAccessibleByDefault) return put(value, config.xnack);
  switch (attribute) {
    case HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED:
    case HSA_AMD_SYSTEM_INFO_DMABUF_SUPPORTED: return put(value, true);
    case HSA_AMD_SYSTEM_INFO_VIRTUAL_MEM_API_SUPPORTED: return put(value, config.vmem);
    case HSA_AMD_SYSTEM_INFO_XNACK_ENABLED: return put(value, config.xnack);
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t hsa_iterate_agents(hsa_agent_callback callback, void* data) {
  unsigned agents = 0;
  {
    const auto lock = lock_open();
    if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
    if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    agents = agent_count(state());
  }
  // The callback runs without the lock: it may well call back into the runtime.
  for (unsigned agent = 0; agent < agents; ++agent) {
    const hsa_status_t status = callback(agent_handle(agent), data);
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const auto index = agent_index(state(), agent);
  if (!index) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attribute) {
    case HSA_AGENT_INFO_NAME: return put_name(value, is_gpu(*index) ? "gfx942" : "hipxx stand-in CPU");
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME: return put_name(value, product_name(*index));
    case HSA_AGENT_INFO_NODE: return put(value, std::uint32_t{*index});
    case HSA_AGENT_INFO_DEVICE: return put(value, is_gpu(*index) ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU);
    case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: return put(value, compute_units(*index));
    case HSA_AMD_AGENT_INFO_MEMORY_AVAIL: {
      const std::size_t in_use = state().pool_in_use[*index];
      return put(value, std::uint64_t{pool_limit(*index) - std::min(in_use, pool_limit(*index))});
    }
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t hsa_amd_agent_iterate_memory_pools(hsa_agent_t agent, hsa_pool_callback callback, void* data) {
  unsigned pool = 0;
  {
    const auto lock = lock_open();
    if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
    const auto index = agent_index(state(), agent);
    if (!index) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    pool = *index;
  }
  return callback(hsa_amd_memory_pool_t{kPoolTag + pool}, data);
}

// An agent's own pool is its memory; the CPU never reaches a GPU's pool; a GPU reaches another
// agent's pool once granted, unless peers are off (then not another GPU's).
hsa_status_t hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t pool,
                                                hsa_amd_agent_memory_pool_info_t attribute, void* value) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const State& s = state();
  const auto agent_at = agent_index(s, agent);
  if (!agent_at) return HSA_STATUS_ERROR_INVALID_AGENT;
  const auto pool_at = pool_index(s, pool);
  if (!pool_at) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (value == nullptr || attribute != HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (*agent_at == *pool_at) return put(value, HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT);
  if (!is_gpu(*agent_at) && is_gpu(*pool_at)) return put(value, HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED);
  if (is_gpu(*agent_at) && is_gpu(*pool_at) && !s.config.peers)
    return put(value, HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED);
  return put(value, HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);
}

hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t pool, hsa_amd_memory_pool_info_t attribute,
                                          void* value) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const auto index = pool_index(state(), pool);
  if (!index) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return is_gpu(*index) ? gpu_pool_info(attribute, value) : cpu_pool_info(attribute, value);
}

// Each exported entry point has exactly the type under which the backend looks it up.
#define HIPXX_STAND_IN_CHECK_TYPE(name, type)                                  \
  static_assert(std::is_same_v<decltype(&(name)), decltype(RuntimeApi::name)>, \
                #name " differs from its declaration in hsa_runtime.hpp");
HIPXX_ROCR_ENTRY_POINTS(HIPXX_STAND_IN_CHECK_TYPE)
HIPXX_ROCR_OPTIONAL_ENTRY_POINTS(HIPXX_STAND_IN_CHECK_TYPE)
#undef HIPXX_STAND_IN_CHECK_TYPE

}  // namespace hipxx::backend::rocr
