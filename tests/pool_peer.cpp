// The other process of tests/test_pool_sharing.cpp, started with fork+exec:
//   pool_peer serve <socket fd>   answers pool_test::Request messages on the socket until EOF or Op::exit
#include "pool_protocol.hpp"

#include <hipxx/fd_passing.hpp>
#include <hipxx/pool_sharing.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <vector>

namespace {

using pool_test::Op;
using pool_test::Reply;
using pool_test::Request;

std::vector<unsigned char> pattern_bytes(std::uint64_t seed, std::uint64_t offset, std::uint64_t length) {
  std::vector<unsigned char> bytes(length);
  for (std::uint64_t index = 0; index < length; ++index) bytes[index] = ipc_test::pattern(seed, offset + index);
  return bytes;
}

hipError_t fill(void* base, std::uint64_t offset, std::uint64_t length, std::uint64_t seed) {
  auto const bytes = pattern_bytes(seed, offset, length);
  return hipMemcpy(static_cast<unsigned char*>(base) + offset, bytes.data(), length, hipMemcpyHostToDevice);
}

hipError_t count_mismatches(void const* base, std::uint64_t offset, std::uint64_t length, std::uint64_t seed,
                            std::uint64_t* differ) {
  std::vector<unsigned char> got(length);
  hipError_t const status =
      hipMemcpy(got.data(), static_cast<unsigned char const*>(base) + offset, length, hipMemcpyDeviceToHost);
  auto const want = pattern_bytes(seed, offset, length);
  *differ = 0;
  for (std::uint64_t index = 0; index < length; ++index) *differ += got[index] != want[index] ? 1 : 0;
  return status;
}

class Peer {
 public:
  explicit Peer(int socket) : socket_(socket) {}

  Reply handle(Request const& request) {
    Reply reply{};
    switch (request.op) {
      case Op::pid: reply.value = static_cast<std::uint64_t>(getpid()); break;
      case Op::import_pool: import_pool(reply); break;
      case Op::import_pointer: import_pointer(request, reply); break;
      case Op::fill:
        reply.status =
            pointer(request) == nullptr ? -1 : fill(pointer(request), request.offset, request.length, request.seed);
        break;
      case Op::verify:
        reply.status = pointer(request) == nullptr ? -1
                                                   : count_mismatches(pointer(request), request.offset, request.length,
                                                                      request.seed, &reply.value);
        break;
      case Op::free: reply.status = hipFree(pointer(request)); break;
      case Op::free_async: reply.status = free_async(pointer(request)); break;
      case Op::destroy_pool: reply.status = hipMemPoolDestroy(pool(request)); break;
      case Op::refuse: refuse(request, reply); break;
      case Op::reserved_bytes:
        reply.status = hipMemPoolGetAttribute(pool(request), hipMemPoolAttrReservedMemCurrent, &reply.value);
        break;
      case Op::cpp_roundtrip: cpp_roundtrip(request, reply); break;
      case Op::export_pool: export_pool(request, reply); break;
      case Op::exit: break;
    }
    return reply;
  }

 private:
  void* pointer(Request const& request) const {
    return request.slot < pointers_.size() ? pointers_[request.slot] : nullptr;
  }
  hipMemPool_t pool(Request const& request) const {
    return request.slot < pools_.size() ? pools_[request.slot] : nullptr;
  }

  void export_pool(Request const& request, Reply& reply) {
    hipMemPoolProps props{};
    props.allocType = hipMemAllocationTypePinned;
    props.handleTypes = hipMemHandleTypePosixFileDescriptor;
    props.location = {hipMemLocationTypeDevice, 0};
    hipMemPool_t pool = nullptr;
    void* first = nullptr;
    void* second = nullptr;
    int fd = -1;
    pool_test::ExportedPair pair{};
    reply.status = hipMemPoolCreate(&pool, &props);
    if (reply.status == hipSuccess) reply.status = hipMallocFromPoolAsync(&first, request.offset, pool, nullptr);
    if (reply.status == hipSuccess) reply.status = hipMallocFromPoolAsync(&second, request.length, pool, nullptr);
    if (reply.status == hipSuccess) reply.status = fill(first, 0, request.offset, request.seed);
    if (reply.status == hipSuccess) reply.status = fill(second, 0, request.length, request.seed + 1);
    if (reply.status == hipSuccess) reply.status = hipMemPoolExportPointer(&pair.first, first);
    if (reply.status == hipSuccess) reply.status = hipMemPoolExportPointer(&pair.second, second);
    if (reply.status == hipSuccess) {
      reply.status = hipMemPoolExportToShareableHandle(&fd, pool, hipMemHandleTypePosixFileDescriptor, 0);
    }
    // A descriptor always follows, so that the test's receive never waits for nothing.
    hipxx::FileDescriptor const exported{reply.status == hipSuccess ? fd : ::dup(0)};
    if (!hipxx::send_fd<pool_test::ExportedPair>(socket_, exported, pair)) reply.status = -1;
    if (pool != nullptr) pools_.push_back(pool);
  }

  void import_pool(Reply& reply) {
    auto received = hipxx::recv_fd<std::uint64_t>(socket_);
    if (!received) {
      reply.status = -1;
      return;
    }
    hipMemPool_t imported = nullptr;
    auto* const handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(received.value().fd.get()));
    reply.status = hipMemPoolImportFromShareableHandle(&imported, handle, hipMemHandleTypePosixFileDescriptor, 0);
    // The descriptor stays ours after the import; it closes here with `received`.
    if (reply.status == hipSuccess) {
      reply.value = pools_.size();
      pools_.push_back(imported);
    }
  }

  void import_pointer(Request const& request, Reply& reply) {
    void* imported = nullptr;
    auto data = request.data;
    reply.status = hipMemPoolImportPointer(&imported, pool(request), &data);
    if (reply.status == hipSuccess) {
      reply.value = pointers_.size();
      reply.address = reinterpret_cast<std::uintptr_t>(imported);
      pointers_.push_back(imported);
    }
  }

  static hipError_t free_async(void* imported) {
    hipStream_t stream = nullptr;
    hipError_t status = hipStreamCreate(&stream);
    if (status == hipSuccess) status = hipFreeAsync(imported, stream);
    if (status == hipSuccess) status = hipStreamSynchronize(stream);
    if (stream != nullptr) (void)hipStreamDestroy(stream);
    return status;
  }

  void refuse(Request const& request, Reply& reply) const {
    void* allocated = nullptr;
    reply.status = hipMallocFromPoolAsync(&allocated, 4096, pool(request), nullptr);
    reply.second = hipDeviceSetMemPool(0, pool(request));
  }

  void cpp_roundtrip(Request const& request, Reply& reply) {
    auto received = hipxx::recv_fd<hipxx::PoolPtrExportData>(socket_);
    if (!received) {
      reply.status = -1;
      return;
    }
    auto pool = hipxx::ImportedMemPool::open(received.value().fd);
    if (!pool) {
      reply.status = pool.error().value();
      return;
    }
    auto imported = pool.value().import_pointer(received.value().payload);
    if (!imported) {
      reply.status = imported.error().value();
      return;
    }
    void* const data = imported.value().data();
    reply.status = count_mismatches(data, 0, request.length, request.seed, &reply.value);
    if (reply.status == hipSuccess) reply.status = fill(data, 0, request.length, request.seed + 1);
    {
      // The pool goes first: its imported pointer keeps the memory mapped until it is freed too.
      hipxx::ImportedMemPool const dropped = std::move(pool).value();
    }
    if (auto freed = imported.value().free(); !freed && reply.status == hipSuccess)
      reply.status = freed.error().value();
  }

  int socket_;
  std::vector<hipMemPool_t> pools_;
  std::vector<void*> pointers_;
};

int serve(int socket) {
  Peer peer{socket};
  for (;;) {
    Request request{};
    if (!ipc_test::read_all(socket, &request, sizeof request)) break;
    Reply const reply = peer.handle(request);
    if (!ipc_test::write_all(socket, &reply, sizeof reply)) break;
    if (request.op == Op::exit) break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view{argv[1]} == "serve") return serve(std::atoi(argv[2]));
  return 2;
}
