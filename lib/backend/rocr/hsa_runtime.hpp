// Our own declarations of the ROCr (HSA runtime) types and entry points the ROCr backend uses, so
// that hipxx builds without ROCm headers (Debian's are ROCm 5.2 and lack the virtual memory API) and
// links with no HSA library: libhsa-runtime64.so.1 is opened with dlopen at run time and each entry
// point is looked up with dlsym. The facts come from ../shared/spec/hip-abi.md (hsa.h and
// hsa_ext_amd.h, AMD interface 1.6).
//
// Every handle is a struct of one 64-bit word, passed by value as the C ABI passes such a struct;
// enumerations are int-sized. The stand-in library the tests load (tests/rocr/) defines its entry
// points with these same types, so a signature that drifted would not compile there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace hipxx::backend::rocr {

struct hsa_agent_t {  // NOLINT(readability-identifier-naming): the C API's name
  std::uint64_t handle;
};
struct hsa_signal_t {  // NOLINT(readability-identifier-naming): the C API's name
  std::uint64_t handle;
};
struct hsa_amd_memory_pool_t {  // NOLINT(readability-identifier-naming): the C API's name
  std::uint64_t handle;
};
struct hsa_amd_vmem_alloc_handle_t {  // NOLINT(readability-identifier-naming): the C API's name
  std::uint64_t handle;
};
using hsa_signal_value_t = std::int64_t;
// Called on the runtime's own thread once a signal meets a condition; true keeps it registered.
using hsa_amd_signal_handler = bool (*)(hsa_signal_value_t value, void* arg);

// The 32 bytes that name an allocation to another process.
struct hsa_amd_ipc_memory_t {  // NOLINT(readability-identifier-naming): the C API's name
  std::uint32_t handle[8];  // NOLINT(modernize-avoid-c-arrays): the C layout
};

enum hsa_status_t : int {
  HSA_STATUS_SUCCESS = 0x0,
  HSA_STATUS_INFO_BREAK = 0x1,
  HSA_STATUS_ERROR = 0x1000,
  HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001,
  HSA_STATUS_ERROR_INVALID_ALLOCATION = 0x1003,
  HSA_STATUS_ERROR_INVALID_AGENT = 0x1004,
  HSA_STATUS_ERROR_INVALID_SIGNAL = 0x1006,
  HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008,
  HSA_STATUS_ERROR_RESOURCE_FREE = 0x100A,
  HSA_STATUS_ERROR_NOT_INITIALIZED = 0x100B,
  HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS = 0x100D,
  HSA_STATUS_ERROR_INVALID_MEMORY_POOL = 40,
  HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION = 41,
  HSA_STATUS_ERROR_MEMORY_FAULT = 43,
  HSA_STATUS_ERROR_RESOURCE_BUSY = 46,
};

enum hsa_access_permission_t : int {
  HSA_ACCESS_PERMISSION_NONE = 0,
  HSA_ACCESS_PERMISSION_RO = 1,
  HSA_ACCESS_PERMISSION_WO = 2,
  HSA_ACCESS_PERMISSION_RW = 3,
};

enum hsa_amd_memory_type_t : int {
  MEMORY_TYPE_NONE = 0,
  MEMORY_TYPE_PINNED = 1,
};

enum hsa_agent_info_t : int {
  HSA_AGENT_INFO_NAME = 0,  // char[64]
  HSA_AGENT_INFO_NODE = 16,  // uint32_t
  HSA_AGENT_INFO_DEVICE = 17,  // hsa_device_type_t
  HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT = 0xA002,  // uint32_t
  HSA_AMD_AGENT_INFO_PRODUCT_NAME = 0xA009,  // char[64]
  HSA_AMD_AGENT_INFO_MEMORY_AVAIL = 0xA015,  // uint64_t: free across the agent's global pools
};

enum hsa_device_type_t : int {
  HSA_DEVICE_TYPE_CPU = 0,
  HSA_DEVICE_TYPE_GPU = 1,
  HSA_DEVICE_TYPE_DSP = 2,
  HSA_DEVICE_TYPE_AIE = 3,
};

enum hsa_amd_segment_t : int {
  HSA_AMD_SEGMENT_GLOBAL = 0,
  HSA_AMD_SEGMENT_READONLY = 1,
  HSA_AMD_SEGMENT_PRIVATE = 2,
  HSA_AMD_SEGMENT_GROUP = 3,
};

enum hsa_amd_memory_pool_global_flag_t : std::uint32_t {
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT = 1,
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED = 2,
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED = 4,
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED = 8,
};

enum hsa_amd_memory_pool_info_t : int {
  HSA_AMD_MEMORY_POOL_INFO_SEGMENT = 0,  // hsa_amd_segment_t
  HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS = 1,  // uint32_t
  HSA_AMD_MEMORY_POOL_INFO_SIZE = 2,  // size_t
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED = 5,  // bool
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE = 6,  // size_t
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT = 7,  // size_t
  HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL = 15,  // bool
  HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE = 16,  // size_t
  HSA_AMD_MEMORY_POOL_INFO_LOCATION = 17,
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE = 18,  // size_t
};

// What an agent may do with a pool's memory (hsa_amd_agent_memory_pool_get_info).
enum hsa_amd_agent_memory_pool_info_t : int {
  HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS = 0,  // hsa_amd_memory_pool_access_t
};

enum hsa_amd_memory_pool_access_t : int {
  HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED = 0,
  HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT = 1,
  HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT = 2,  // allowed once hsa_amd_agents_allow_access grants it
};

enum hsa_signal_condition_t : int {
  HSA_SIGNAL_CONDITION_EQ = 0,
  HSA_SIGNAL_CONDITION_NE = 1,
  HSA_SIGNAL_CONDITION_LT = 2,
  HSA_SIGNAL_CONDITION_GTE = 3,
};

enum hsa_wait_state_t : int {
  HSA_WAIT_STATE_BLOCKED = 0,
  HSA_WAIT_STATE_ACTIVE = 1,
};

enum hsa_system_info_t : int {
  HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED = 0x201,  // bool
  HSA_AMD_SYSTEM_INFO_DMABUF_SUPPORTED = 0x204,  // bool
  HSA_AMD_SYSTEM_INFO_VIRTUAL_MEM_API_SUPPORTED = 0x205,  // bool
  HSA_AMD_SYSTEM_INFO_XNACK_ENABLED = 0x206,  // bool
};

enum hsa_amd_svm_attribute_t : std::uint64_t {
  HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG = 0,
  HSA_AMD_SVM_ATTRIB_READ_ONLY = 1,
  HSA_AMD_SVM_ATTRIB_HIVE_LOCAL = 2,
  HSA_AMD_SVM_ATTRIB_MIGRATION_GRANULARITY = 3,
  HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION = 4,  // an hsa_agent_t; handle 0: no preferred location
  HSA_AMD_SVM_ATTRIB_PREFETCH_LOCATION = 5,
  HSA_AMD_SVM_ATTRIB_READ_MOSTLY = 6,  // bool
  HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE = 0x200,  // an hsa_agent_t; may migrate on access
  HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE = 0x201,  // an hsa_agent_t; mapped where it is
  HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS = 0x202,
  HSA_AMD_SVM_ATTRIB_ACCESS_QUERY = 0x203,
};

enum hsa_amd_svm_model_t : std::uint64_t {
  HSA_AMD_SVM_GLOBAL_FLAG_FINE_GRAINED = 0,
  HSA_AMD_SVM_GLOBAL_FLAG_COARSE_GRAINED = 1,
  HSA_AMD_SVM_GLOBAL_FLAG_INDETERMINATE = 2,
};

struct hsa_amd_memory_access_desc_t {  // NOLINT(readability-identifier-naming): the C API's name
  hsa_access_permission_t permissions;
  hsa_agent_t agent_handle;
};

struct hsa_amd_svm_attribute_pair_t {  // NOLINT(readability-identifier-naming): the C API's name
  std::uint64_t attribute;
  std::uint64_t value;
};

static_assert(sizeof(hsa_agent_t) == 8 && std::is_trivially_copyable_v<hsa_agent_t>);
static_assert(sizeof(hsa_amd_ipc_memory_t) == 32);
static_assert(sizeof(hsa_amd_memory_access_desc_t) == 16);
static_assert(offsetof(hsa_amd_memory_access_desc_t, agent_handle) == 8);
static_assert(sizeof(hsa_amd_svm_attribute_pair_t) == 16);

using hsa_agent_callback = hsa_status_t (*)(hsa_agent_t agent, void* data);
using hsa_pool_callback = hsa_status_t (*)(hsa_amd_memory_pool_t pool, void* data);

// The entry points, by the exact symbol each is exported as. hsa_amd_vmem_address_reserve_align
// came a version after the rest of the virtual memory API, so it is looked up separately
// (HIPXX_ROCR_OPTIONAL_ENTRY_POINTS) and reserve() over-reserves to align where it is missing; where
// hsa_amd_signal_async_handler is missing, streams run on host threads rather than on device queues.
#define HIPXX_ROCR_ENTRY_POINTS(X)                                                                                    \
  X(hsa_init, hsa_status_t (*)())                                                                                     \
  X(hsa_shut_down, hsa_status_t (*)())                                                                                \
  X(hsa_system_get_info, hsa_status_t (*)(hsa_system_info_t attribute, void* value))                                  \
  X(hsa_iterate_agents, hsa_status_t (*)(hsa_agent_callback callback, void* data))                                    \
  X(hsa_agent_get_info, hsa_status_t (*)(hsa_agent_t agent, hsa_agent_info_t attribute, void* value))                 \
  X(hsa_amd_agent_iterate_memory_pools, hsa_status_t (*)(hsa_agent_t agent, hsa_pool_callback callback, void* data))  \
  X(hsa_amd_memory_pool_get_info,                                                                                     \
    hsa_status_t (*)(hsa_amd_memory_pool_t pool, hsa_amd_memory_pool_info_t attribute, void* value))                  \
  X(hsa_amd_agent_memory_pool_get_info, hsa_status_t (*)(hsa_agent_t agent, hsa_amd_memory_pool_t pool,               \
                                                         hsa_amd_agent_memory_pool_info_t attribute, void* value))    \
  X(hsa_amd_memory_pool_allocate,                                                                                     \
    hsa_status_t (*)(hsa_amd_memory_pool_t pool, std::size_t size, std::uint32_t flags, void** ptr))                  \
  X(hsa_amd_memory_pool_free, hsa_status_t (*)(void* ptr))                                                            \
  X(hsa_amd_agents_allow_access, hsa_status_t (*)(std::uint32_t num_agents, const hsa_agent_t* agents,                \
                                                  const std::uint32_t* flags, const void* ptr))                       \
  X(hsa_amd_memory_async_copy,                                                                                        \
    hsa_status_t (*)(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent, std::size_t size,      \
                     std::uint32_t num_dep_signals, const hsa_signal_t* dep_signals, hsa_signal_t completion_signal)) \
  X(hsa_amd_memory_fill, hsa_status_t (*)(void* ptr, std::uint32_t value, std::size_t count))                         \
  X(hsa_signal_create, hsa_status_t (*)(hsa_signal_value_t initial_value, std::uint32_t num_consumers,                \
                                        const hsa_agent_t* consumers, hsa_signal_t* signal))                          \
  X(hsa_signal_destroy, hsa_status_t (*)(hsa_signal_t signal))                                                        \
  X(hsa_signal_store_screlease, void (*)(hsa_signal_t signal, hsa_signal_value_t value))                              \
  X(hsa_signal_load_scacquire, hsa_signal_value_t (*)(hsa_signal_t signal))                                           \
  X(hsa_signal_wait_scacquire,                                                                                        \
    hsa_signal_value_t (*)(hsa_signal_t signal, hsa_signal_condition_t condition, hsa_signal_value_t compare_value,   \
                           std::uint64_t timeout_hint, hsa_wait_state_t wait_state_hint))                             \
  X(hsa_amd_vmem_address_reserve,                                                                                     \
    hsa_status_t (*)(void** va, std::size_t size, std::uint64_t address, std::uint64_t flags))                        \
  X(hsa_amd_vmem_address_free, hsa_status_t (*)(void* va, std::size_t size))                                          \
  X(hsa_amd_vmem_handle_create,                                                                                       \
    hsa_status_t (*)(hsa_amd_memory_pool_t pool, std::size_t size, hsa_amd_memory_type_t type, std::uint64_t flags,   \
                     hsa_amd_vmem_alloc_handle_t * memory_handle))                                                    \
  X(hsa_amd_vmem_handle_release, hsa_status_t (*)(hsa_amd_vmem_alloc_handle_t memory_handle))                         \
  X(hsa_amd_vmem_map, hsa_status_t (*)(void* va, std::size_t size, std::size_t in_offset,                             \
                                       hsa_amd_vmem_alloc_handle_t memory_handle, std::uint64_t flags))               \
  X(hsa_amd_vmem_unmap, hsa_status_t (*)(void* va, std::size_t size))                                                 \
  X(hsa_amd_vmem_set_access,                                                                                          \
    hsa_status_t (*)(void* va, std::size_t size, const hsa_amd_memory_access_desc_t* desc, std::size_t desc_cnt))     \
  X(hsa_amd_vmem_export_shareable_handle,                                                                             \
    hsa_status_t (*)(int* dmabuf_fd, hsa_amd_vmem_alloc_handle_t handle, std::uint64_t flags))                        \
  X(hsa_amd_vmem_import_shareable_handle, hsa_status_t (*)(int dmabuf_fd, hsa_amd_vmem_alloc_handle_t* handle))       \
  X(hsa_amd_ipc_memory_create, hsa_status_t (*)(void* ptr, std::size_t len, hsa_amd_ipc_memory_t* handle))            \
  X(hsa_amd_ipc_memory_attach,                                                                                        \
    hsa_status_t (*)(const hsa_amd_ipc_memory_t* handle, std::size_t len, std::uint32_t num_agents,                   \
                     const hsa_agent_t* mapping_agents, void** mapped_ptr))                                           \
  X(hsa_amd_ipc_memory_detach, hsa_status_t (*)(void* mapped_ptr))                                                    \
  X(hsa_amd_svm_attributes_set,                                                                                       \
    hsa_status_t (*)(void* ptr, std::size_t size, hsa_amd_svm_attribute_pair_t* attribute_list,                       \
                     std::size_t attribute_count))                                                                    \
  X(hsa_amd_svm_prefetch_async,                                                                                       \
    hsa_status_t (*)(void* ptr, std::size_t size, hsa_agent_t agent, std::uint32_t num_dep_signals,                   \
                     const hsa_signal_t* dep_signals, hsa_signal_t completion_signal))

#define HIPXX_ROCR_OPTIONAL_ENTRY_POINTS(X)                                                                  \
  X(hsa_amd_vmem_address_reserve_align, hsa_status_t (*)(void** va, std::size_t size, std::uint64_t address, \
                                                         std::uint64_t alignment, std::uint64_t flags))      \
  X(hsa_amd_signal_async_handler,                                                                            \
    hsa_status_t (*)(hsa_signal_t signal, hsa_signal_condition_t cond, hsa_signal_value_t value,             \
                     hsa_amd_signal_handler handler, void* arg))                                             \
  X(hsa_amd_vmem_get_alloc_properties_from_handle,                                                           \
    hsa_status_t (*)(hsa_amd_vmem_alloc_handle_t memory_handle, hsa_amd_memory_pool_t * pool,                \
                     hsa_amd_memory_type_t * type))

// One function pointer per entry point, named as the symbol.
struct RuntimeApi {
#define HIPXX_ROCR_DECLARE_ENTRY_POINT(name, type) std::type_identity_t<type> name = nullptr;
  HIPXX_ROCR_ENTRY_POINTS(HIPXX_ROCR_DECLARE_ENTRY_POINT)
  HIPXX_ROCR_OPTIONAL_ENTRY_POINTS(HIPXX_ROCR_DECLARE_ENTRY_POINT)
#undef HIPXX_ROCR_DECLARE_ENTRY_POINT
};

}  // namespace hipxx::backend::rocr
