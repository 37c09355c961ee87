// Legacy IPC on the host backend. An exported allocation moves, at the same address and with its
// contents, onto a POSIX shared-memory object whose name carries 128 random bits and is created
// 0600: only the same user can open it, and nobody can guess it. The 64-byte handle holds that name,
// the size and the exporter's pid, sealed with a checksum so that garbage is refused, not followed.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace hipxx::backend::host {

class IpcExports {
 public:
  IpcExports();  // removes objects left behind by exporters that died without cleaning up
  IpcExports(const IpcExports&) = delete;
  IpcExports& operator=(const IpcExports&) = delete;
  IpcExports(IpcExports&&) = delete;
  IpcExports& operator=(IpcExports&&) = delete;
  ~IpcExports();

  [[nodiscard]] hipError_t get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle);
  // Called before the allocation is unmapped: the name goes, mappings in other processes stay.
  void forget(void* ptr);

  [[nodiscard]] static hipError_t open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size);
  [[nodiscard]] static hipError_t close(void* ptr, std::size_t size);

 private:
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, hipIpcMemHandle_t> exported_;
};

}  // namespace hipxx::backend::host
