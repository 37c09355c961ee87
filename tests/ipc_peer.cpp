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

// The peer's side of the interprocess event tests: its events, a stream held at a gate (a word of
// signal memory the stream waits for), and a word another stream writes once its wait is over.
struct EventSide {
  std::vector<hipEvent_t> events;
  hipStream_t held = nullptr;
  hipStream_t waiting = nullptr;
  hipStream_t releaser = nullptr;
  void* gate = nullptr;
  void* word = nullptr;

  hipError_t prepare() {
    if (gate != nullptr) return hipSuccess;
    for (hipStream_t* stream : {&held, &waiting, &releaser}) {
      if (const hipError_t error = hipStreamCreateWithFlags(stream, hipStreamNonBlocking); error != hipSuccess) {
        return error;
      }
    }
    if (const hipError_t error = hipExtMallocWithFlags(&gate, sizeof(std::uint64_t), hipMallocSignalMemory);
        error != hipSuccess) {
      return error;
    }
    if (const hipError_t error = hipMalloc(&word, sizeof(std::uint32_t)); error != hipSuccess) return error;
    return hipSuccess;
  }

  hipError_t record_held(hipEvent_t event) {
    if (const hipError_t error = prepare(); error != hipSuccess) return error;
    if (const hipError_t error = hipMemset(gate, 0, sizeof(std::uint64_t)); error != hipSuccess) return error;
    if (const hipError_t error = hipStreamWaitValue32(held, gate, 1, hipStreamWaitValueGte, 0xFFFFFFFFU);
        error != hipSuccess) {
      return error;
    }
    return hipEventRecord(event, held);
  }

  hipError_t release() {
    if (const hipError_t error = hipStreamWriteValue32(releaser, gate, 1, 0); error != hipSuccess) return error;
    if (const hipError_t error = hipStreamSynchronize(releaser); error != hipSuccess) return error;
    return hipStreamSynchronize(held);
  }

  hipError_t wait_then_write(hipEvent_t event) {
    if (const hipError_t error = prepare(); error != hipSuccess) return error;
    if (const hipError_t error = hipMemset(word, 0, sizeof(std::uint32_t)); error != hipSuccess) return error;
    if (const hipError_t error = hipStreamWaitEvent(waiting, event, 0); error != hipSuccess) return error;
    return hipStreamWriteValue32(waiting, word, 1, 0);
  }

  std::uint32_t read_word() const {
    std::uint32_t value = 0;
    return hipMemcpy(&value, word, sizeof value, hipMemcpyDeviceToHost) == hipSuccess ? value : 0xFFFFFFFFU;
  }
};

hipError_t serve_event(EventSide& side, Request const& request, Reply& reply) {
  if (request.op == Op::event_export || request.op == Op::event_open) {
    hipEvent_t event = nullptr;
    hipError_t result = hipSuccess;
    if (request.op == Op::event_export) {
      result = hipEventCreateWithFlags(&event, hipEventInterprocess | hipEventDisableTiming);
      hipIpcEventHandle_t handle{};
      if (result == hipSuccess) result = hipIpcGetEventHandle(&handle, event);
      static_assert(sizeof handle == sizeof reply.handle);
      std::memcpy(&reply.handle, &handle, sizeof handle);
    } else {
      hipIpcEventHandle_t handle{};
      std::memcpy(&handle, &request.handle, sizeof handle);
      result = hipIpcOpenEventHandle(&event, handle);
    }
    if (result == hipSuccess) {
      reply.value = side.events.size();
      side.events.push_back(event);
    }
    return result;
  }
  if (request.slot >= side.events.size()) return hipErrorInvalidValue;
  hipEvent_t const event = side.events[request.slot];
  switch (request.op) {
    case Op::event_record_held: return side.record_held(event);
    case Op::event_release: return side.release();
    case Op::event_query: return hipEventQuery(event);
    case Op::event_synchronize: return hipEventSynchronize(event);
    case Op::event_wait_then_write: return side.wait_then_write(event);
    case Op::event_word: reply.value = side.read_word(); return hipSuccess;
    case Op::event_destroy: return hipEventDestroy(event);
    default: return hipErrorInvalidValue;
  }
}

int serve(int socket) {
  std::vector<Slot> slots;
  EventSide event_side;
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
        case Op::event_export:
        case Op::event_open:
        case Op::event_record_held:
        case Op::event_release:
        case Op::event_query:
        case Op::event_synchronize:
        case Op::event_wait_then_write:
        case Op::event_word:
        case Op::event_destroy: reply.status = serve_event(event_side, request, reply); break;
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
