// The other process of tests/test_ipc.cpp, started with fork+exec:
//   ipc_peer serve <socket fd>   answers ipc_test::Request messages on the socket until EOF or Op::exit
#include "ipc_protocol.hpp"

#include <hipxx/ipc.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using ipc_test::Op;
using ipc_test::Reply;
using ipc_test::Request;

struct Slot {
  void* pointer = nullptr;
  std::optional<hipxx::IpcMapping> mapping;  // set for open_cpp
};

std::vector<unsigned char> pattern_bytes(std::uint64_t seed, std::uint64_t offset, std::uint64_t length) {
  std::vector<unsigned char> bytes(length);
  for (std::uint64_t index = 0; index < length; ++index) bytes[index] = ipc_test::pattern(seed, offset + index);
  return bytes;
}

hipError_t fill(void* base, std::uint64_t offset, std::uint64_t length, std::uint64_t seed) {
  auto const bytes = pattern_bytes(seed, offset, length);
  return hipMemcpy(static_cast<unsigned char*>(base) + offset, bytes.data(), length, hipMemcpyHostToDevice);
}

int serve(int socket) {
  std::vector<Slot> slots;
  std::vector<std::thread> scribblers;  // never joined: the test kills this process while they run
  for (;;) {
    Request request{};
    if (!ipc_test::read_all(socket, &request, sizeof request)) break;
    Reply reply{};
    Slot* slot = request.slot < slots.size() ? &slots[request.slot] : nullptr;
    bool const needs_slot = request.op == Op::drop_cpp || request.op == Op::close || request.op == Op::free ||
                            request.op == Op::close_behind_copy || request.op == Op::fill || request.op == Op::verify ||
                            request.op == Op::scribble;
    if (needs_slot && slot == nullptr) {
      reply.status = -1;
    } else {
      switch (request.op) {
        case Op::pid:
          reply.value = static_cast<std::uint64_t>(getpid());
          break;
        case Op::open: {
          void* at = nullptr;
          reply.status = hipIpcOpenMemHandle(&at, request.handle, request.flags);
          if (reply.status == hipSuccess) {
            reply.value = slots.size();
            slots.push_back(Slot{at, std::nullopt});
          }
          break;
        }
        case Op::open_cpp: {
          auto mapping = hipxx::IpcMapping::open(hipxx::IpcHandle::from_native(request.handle));
          if (!mapping) {
            reply.status = mapping.error().value();
          } else {
            reply.value = slots.size();
            void* const at = mapping.value().data();
            slots.push_back(Slot{at, std::move(mapping).value()});
          }
          break;
        }
        case Op::drop_cpp:
          reply.value = reinterpret_cast<std::uintptr_t>(slot->pointer);
          slot->mapping.reset();
          break;
        case Op::close:
          reply.status = hipIpcCloseMemHandle(slot->pointer);
          break;
        case Op::close_raw:
          reply.status = hipIpcCloseMemHandle(reinterpret_cast<void*>(static_cast<std::uintptr_t>(request.value)));
          break;
        case Op::free:
          reply.status = hipFree(slot->pointer);
          break;
        case Op::export_new: {
          void* at = nullptr;
          reply.status = hipMalloc(&at, request.length);
          if (reply.status == hipSuccess) reply.status = fill(at, 0, request.length, request.seed);
          if (reply.status == hipSuccess) reply.status = hipIpcGetMemHandle(&reply.handle, at);
          if (at != nullptr) {
            reply.value = slots.size();
            slots.push_back(Slot{at, std::nullopt});
          }
          break;
        }
        case Op::fill:
          reply.status = fill(slot->pointer, request.offset, request.length, request.seed);
          break;
        case Op::verify: {
          std::vector<unsigned char> got(request.length);
          reply.status = hipMemcpy(got.data(), static_cast<unsigned char*>(slot->pointer) + request.offset,
                                   request.length, hipMemcpyDeviceToHost);
          auto const want = pattern_bytes(request.seed, request.offset, request.length);
          for (std::uint64_t index = 0; index < request.length; ++index) reply.value += got[index] != want[index] ? 1 : 0;
          break;
        }
        case Op::scribble: {
          reply.status = fill(slot->pointer, request.offset, request.length, request.seed);
          scribblers.emplace_back([pointer = slot->pointer, request] {
            for (std::uint64_t round = 1;; ++round) (void)fill(pointer, request.offset, request.length, request.seed + round);
          });
          break;
        }
        case Op::close_behind_copy: {
          auto const bytes = pattern_bytes(request.seed, request.offset, request.length);
          hipStream_t stream = nullptr;
          reply.status = hipStreamCreate(&stream);
          if (reply.status != hipSuccess) break;
          // From the application's memory, so the copy runs on the stream's host thread on every
          // engine, behind the callback.
          (void)hipStreamAddCallback(
              stream,
              [](hipStream_t, hipError_t, void*) { std::this_thread::sleep_for(std::chrono::milliseconds{200}); },
              nullptr, 0);
          reply.status = hipMemcpyAsync(static_cast<unsigned char*>(slot->pointer) + request.offset, bytes.data(),
                                        request.length, hipMemcpyHostToDevice, stream);
          if (reply.status == hipSuccess) reply.status = hipIpcCloseMemHandle(slot->pointer);
          reply.value = static_cast<std::uint64_t>(hipStreamSynchronize(stream));
          (void)hipStreamDestroy(stream);
          break;
        }
        case Op::exit:
          (void)ipc_test::write_all(socket, &reply, sizeof reply);
          // A normal end of a program (static destructors run) where nothing else runs; without them
          // where scribblers still run, since they are not joinable here.
          if (scribblers.empty()) std::exit(0);
          std::_Exit(0);
      }
    }
    if (!ipc_test::write_all(socket, &reply, sizeof reply)) break;
  }
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view{argv[1]} == "serve") return serve(std::atoi(argv[2]));
  return 2;
}
