// The entry points the stand-in libhsa-runtime64 exports, spelled out by hand with the types of
// lib/backend/rocr/hsa_runtime.hpp: each source file that defines one includes this, so a definition
// that differs does not compile, and hsa_stand_in.cpp checks each declaration against RuntimeApi.
#pragma once

#include "backend/rocr/hsa_runtime.hpp"

#include <cstddef>
#include <cstdint>

// The library is built with hidden visibility; only these symbols are exported.
#define HIPXX_STAND_IN_EXPORT __attribute__((visibility("default")))

namespace hipxx::backend::rocr {
extern "C" {

HIPXX_STAND_IN_EXPORT hsa_status_t hsa_init();
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_shut_down();
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void* value);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_iterate_agents(hsa_agent_callback callback, void* data);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_agent_iterate_memory_pools(hsa_agent_t agent, hsa_pool_callback callback,
                                                                      void* data);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t pool,
                                                                hsa_amd_memory_pool_info_t attribute, void* value);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t pool,
                                                                      hsa_amd_agent_memory_pool_info_t attribute,
                                                                      void* value);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool, std::size_t size,
                                                                std::uint32_t flags, void** ptr);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_memory_pool_free(void* ptr);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_agents_allow_access(std::uint32_t num_agents, const hsa_agent_t* agents,
                                                               const std::uint32_t* flags, const void* ptr);
// The stand-in's own, for tests: the next `count` copies that hsa_amd_memory_async_copy accepts fail
// on the engine (nothing is copied; the completion signal goes to -1), as a copy that faults on a GPU
// does. Only while the runtime is open.
HIPXX_STAND_IN_EXPORT void hsa_stand_in_fail_copies(unsigned count);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                                             hsa_agent_t src_agent, std::size_t size,
                                                             std::uint32_t num_dep_signals,
                                                             const hsa_signal_t* dep_signals,
                                                             hsa_signal_t completion_signal);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_memory_fill(void* ptr, std::uint32_t value, std::size_t count);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value, std::uint32_t num_consumers,
                                                     const hsa_agent_t* consumers, hsa_signal_t* signal);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_signal_destroy(hsa_signal_t signal);
HIPXX_STAND_IN_EXPORT void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value);
HIPXX_STAND_IN_EXPORT hsa_signal_value_t hsa_signal_load_scacquire(hsa_signal_t signal);
HIPXX_STAND_IN_EXPORT hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal,
                                                                   hsa_signal_condition_t condition,
                                                                   hsa_signal_value_t compare_value,
                                                                   std::uint64_t timeout_hint,
                                                                   hsa_wait_state_t wait_state_hint);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_signal_async_handler(hsa_signal_t signal, hsa_signal_condition_t cond,
                                                                hsa_signal_value_t value,
                                                                hsa_amd_signal_handler handler, void* arg);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_address_reserve(void** va, std::size_t size, std::uint64_t address,
                                                                std::uint64_t flags);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_address_reserve_align(void** va, std::size_t size,
                                                                      std::uint64_t address, std::uint64_t alignment,
                                                                      std::uint64_t flags);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_address_free(void* va, std::size_t size);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_handle_create(hsa_amd_memory_pool_t pool, std::size_t size,
                                                              hsa_amd_memory_type_t type, std::uint64_t flags,
                                                              hsa_amd_vmem_alloc_handle_t* memory_handle);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t memory_handle);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_map(void* va, std::size_t size, std::size_t in_offset,
                                                    hsa_amd_vmem_alloc_handle_t memory_handle, std::uint64_t flags);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_unmap(void* va, std::size_t size);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_set_access(void* va, std::size_t size,
                                                           const hsa_amd_memory_access_desc_t* desc,
                                                           std::size_t desc_cnt);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_export_shareable_handle(int* dmabuf_fd,
                                                                        hsa_amd_vmem_alloc_handle_t handle,
                                                                        std::uint64_t flags);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_import_shareable_handle(int dmabuf_fd,
                                                                        hsa_amd_vmem_alloc_handle_t* handle);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_get_alloc_properties_from_handle(
    hsa_amd_vmem_alloc_handle_t memory_handle, hsa_amd_memory_pool_t* pool, hsa_amd_memory_type_t* type);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_ipc_memory_create(void* ptr, std::size_t len, hsa_amd_ipc_memory_t* handle);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_ipc_memory_attach(const hsa_amd_ipc_memory_t* handle, std::size_t len,
                                                             std::uint32_t num_agents,
                                                             const hsa_agent_t* mapping_agents, void** mapped_ptr);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_ipc_memory_detach(void* mapped_ptr);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_svm_attributes_set(void* ptr, std::size_t size,
                                                              hsa_amd_svm_attribute_pair_t* attribute_list,
                                                              std::size_t attribute_count);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_svm_prefetch_async(void* ptr, std::size_t size, hsa_agent_t agent,
                                                              std::uint32_t num_dep_signals,
                                                              const hsa_signal_t* dep_signals,
                                                              hsa_signal_t completion_signal);

// Not (yet) in hsa_runtime.hpp's lists; the types are those of shared/spec/hip-abi.md.
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_get_access(void* va, hsa_access_permission_t* perms,
                                                           hsa_agent_t agent_handle);
HIPXX_STAND_IN_EXPORT hsa_status_t hsa_amd_vmem_retain_alloc_handle(hsa_amd_vmem_alloc_handle_t* memory_handle,
                                                                    void* addr);

}  // extern "C"
}  // namespace hipxx::backend::rocr
