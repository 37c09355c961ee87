// What tests/test_pool_sharing.cpp and its peer program (tests/pool_peer.cpp) say to each other over
// a Unix socketpair: fixed-size requests and replies, one reply per request. A request that needs a
// descriptor (import_pool, cpp_roundtrip) is followed by one send_fd message carrying it.
#pragma once

#include "ipc_protocol.hpp"  // read_all, write_all, pattern

#include <hip/hip_runtime_api.h>

#include <cstdint>

namespace pool_test {

enum class Op : std::uint32_t {
  pid,  // reply.value = the peer's pid
  import_pool,  // hipMemPoolImportFromShareableHandle(the fd that follows) -> reply.value = pool slot
  import_pointer,  // hipMemPoolImportPointer(pool `slot`, data) -> reply.value = pointer slot, reply.address
  fill,  // writes pattern `seed` over [offset, offset + length) of pointer `slot` (hipMemcpy)
  verify,  // reads it back; reply.value = bytes that differ from pattern `seed`
  free,  // hipFree(pointer `slot`)
  free_async,  // hipFreeAsync(pointer `slot`) on a new stream, then hipStreamSynchronize
  destroy_pool,  // hipMemPoolDestroy(pool `slot`)
  refuse,  // reply.status = hipMallocFromPoolAsync, reply.second = hipDeviceSetMemPool on pool `slot`
  reserved_bytes,  // reply.value = hipMemPoolAttrReservedMemCurrent of pool `slot`
  cpp_roundtrip,  // C++ handles: open the pool (fd that follows, payload = data), import, verify `seed`
                  // over [0, length), write `seed` + 1, drop both; reply.value = mismatches
  exit,  // replies, then exits 0
  // The other way round: the peer makes an exportable pool with two allocations, of `offset` and
  // `length` bytes, filled with pattern `seed`, and sends its fd (one send_fd message, payload
  // ExportedPair) before its reply.
  export_pool,
};

struct ExportedPair {
  hipMemPoolPtrExportData first{};
  hipMemPoolPtrExportData second{};
};

struct Request {
  Op op = Op::pid;
  std::uint32_t slot = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t seed = 0;
  hipMemPoolPtrExportData data{};
};

struct Reply {
  std::int32_t status = 0;  // a hipError_t
  std::int32_t second = 0;  // a second hipError_t, where an op makes two calls
  std::uint64_t value = 0;
  std::uint64_t address = 0;
};

}  // namespace pool_test
