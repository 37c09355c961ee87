// What tests/test_ipc.cpp and its peer program (tests/ipc_peer.cpp) say to each other over a Unix
// socketpair: fixed-size requests and replies, one reply per request. The peer is a separate
// executable started with fork+exec, because a GPU runtime does not survive a bare fork.
#pragma once

#include <hip/hip_runtime_api.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <unistd.h>

namespace ipc_test {

enum class Op : std::uint32_t {
  pid,  // reply.value = the peer's pid
  open,  // hipIpcOpenMemHandle(handle, flags) -> reply.status, reply.value = slot
  open_cpp,  // hipxx::IpcMapping::open(handle) -> reply.status, reply.value = slot
  drop_cpp,  // destroys the IpcMapping in `slot` (its destructor closes); reply.value = the old pointer
  close,  // hipIpcCloseMemHandle(slot's pointer), even if already closed
  close_raw,  // hipIpcCloseMemHandle((void*)value)
  free,  // hipFree(slot's pointer)
  export_new,  // hipMalloc(length), fill with `seed`, hipIpcGetMemHandle -> reply.handle, reply.value = slot
  fill,  // writes pattern `seed` over [offset, offset + length) of slot (hipMemcpy)
  verify,  // reads it back (hipMemcpy); reply.value = bytes that differ from pattern `seed`
  scribble,  // a thread rewrites [offset, offset + length) of slot forever; replies after one pass
  exit,  // replies, then exits 0 (normally, with exit(), unless scribblers run)
  // Queues a copy of pattern `seed` over [offset, offset + length) of slot on a stream that a
  // callback holds for a while, closes the slot's handle (hipIpcCloseMemHandle) while the copy waits,
  // then synchronizes the stream: reply.status = the close's result, reply.value = the synchronize's.
  close_behind_copy,
  // Interprocess events. The event handle travels in `handle`'s 64 bytes; events have slots of
  // their own (`slot` names one).
  event_export,  // hipEventCreateWithFlags(interprocess), hipIpcGetEventHandle -> reply.handle, value = slot
  event_open,  // hipIpcOpenEventHandle(handle) -> reply.status, reply.value = slot
  event_record_held,  // records the event on a stream held at a gate until event_release -> the record's status
  event_release,  // opens the gate (and waits for the held stream)
  event_query,  // hipEventQuery -> reply.status
  event_synchronize,  // hipEventSynchronize -> reply.status
  // A stream waits for the event (hipStreamWaitEvent), then writes 1 to a word of device memory:
  // reply.status = the wait's result. event_word reads the word back into reply.value.
  event_wait_then_write,
  event_word,
  event_destroy,  // hipEventDestroy -> reply.status
};

struct Request {
  Op op = Op::pid;
  std::uint32_t slot = 0;
  std::uint32_t flags = 0;
  std::uint32_t reserved = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t seed = 0;
  std::uint64_t value = 0;
  hipIpcMemHandle_t handle{};
};

struct Reply {
  std::int32_t status = 0;  // a hipError_t
  std::int32_t reserved = 0;
  std::uint64_t value = 0;
  hipIpcMemHandle_t handle{};
};

// The byte at `index` of a buffer filled with pattern `seed`: differs between seeds at every index
// and does not repeat with the page size, so a page mapped at the wrong offset shows.
inline unsigned char pattern(std::uint64_t seed, std::uint64_t index) {
  return static_cast<unsigned char>((seed * 131U + index * 7U + (index >> 9U) + 1U) & 0xFFU);
}

// Whole-message I/O on a stream socket; false on EOF or error.
inline bool write_all(int fd, void const* data, std::size_t bytes) {
  auto const* at = static_cast<unsigned char const*>(data);
  while (bytes > 0) {
    ssize_t const done = ::write(fd, at, bytes);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    at += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

inline bool read_all(int fd, void* data, std::size_t bytes) {
  auto* at = static_cast<unsigned char*>(data);
  while (bytes > 0) {
    ssize_t const done = ::read(fd, at, bytes);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    at += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

}  // namespace ipc_test
