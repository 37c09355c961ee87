// What an exporting process's pool broker and an importing process say to each other, and the
// socket calls both sides use. Messages are fixed-size structs on SOCK_SEQPACKET Unix sockets, so a
// message is never split or merged; a descriptor travels with a reply as SCM_RIGHTS.
//
// Every input from the other side is hostile until checked: sizes are exact, magics match, and a
// descriptor that arrives unasked for is closed.
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace hipxx::core {

// 128 random bits naming one exportable pool of one process, in requests and in pointer export data.
struct PoolToken {
  std::array<std::uint64_t, 2> words{};

  [[nodiscard]] bool empty() const noexcept { return words[0] == 0 && words[1] == 0; }
  friend bool operator==(const PoolToken&, const PoolToken&) noexcept = default;
};

// From getrandom(2); an empty token where the kernel gives no randomness.
[[nodiscard]] PoolToken random_token() noexcept;

enum class BrokerOp : std::uint32_t {
  // The one request allowed on an exported socket, which several processes may share: the reply
  // carries one end of a fresh private channel. Replies are interchangeable, so it does not matter
  // which reader takes which.
  open_channel = 1,
  // On a private channel: the fd of chunk `chunk` of the channel's pool.
  chunk = 2,
};

inline constexpr std::uint32_t kRequestMagic = 0x48505251;  // "HPRQ"
inline constexpr std::uint32_t kReplyMagic = 0x48505250;  // "HPRP"

struct BrokerRequest {
  std::uint32_t magic = kRequestMagic;
  BrokerOp op = BrokerOp::open_channel;
  PoolToken token;  // checked against the channel's pool on chunk requests
  std::uint64_t chunk = 0;
};

// What an importer needs to mirror a pool: its layout and the device it lives on.
struct PoolDescription {
  PoolToken token;
  std::uint64_t chunk_bytes = 0;
  std::uint64_t virtual_bytes = 0;
  std::int32_t device = 0;
  std::uint32_t reserved = 0;
};

struct BrokerReply {
  std::uint32_t magic = kReplyMagic;
  std::int32_t status = hipSuccess;  // a hipError_t; a descriptor comes with success only
  PoolDescription pool;
  std::uint64_t chunk = 0;
  std::uint64_t chunk_bytes = 0;
};

// Both sides may be different builds of this runtime: the layouts are the protocol.
static_assert(sizeof(BrokerRequest) == 32 && sizeof(BrokerReply) == 64);

// hipMemPoolPtrExportData's 64 bytes as this runtime fills them.
struct PointerExportData {
  std::uint64_t magic = 0;
  PoolToken token;
  std::uint64_t offset = 0;  // from the pool's base
  std::uint64_t size = 0;  // the allocation's size class: whole chunks under it are mapped
  std::array<std::uint64_t, 3> reserved{};
};
static_assert(sizeof(PointerExportData) == sizeof(hipMemPoolPtrExportData));

inline constexpr std::uint64_t kPointerMagic = 0x6869707878707470;  // "hipxxptp"

// How long an importer waits for a broker's reply: HIPXX_POOL_BROKER_TIMEOUT_MS where that is a
// whole number from 1 to 3600000, else 10 s. Brokers answer at once; this only bounds the wait on a
// descriptor that is a seqpacket socket but no broker, or on an exporter that has stopped.
[[nodiscard]] std::chrono::milliseconds broker_timeout() noexcept;

// One message, with `fd` attached unless it is -1. Never blocks and never raises SIGPIPE: false
// (with errno set) where the message could not go at once.
[[nodiscard]] bool send_message(int socket, const void* data, std::size_t bytes, int fd) noexcept;

// Exactly `bytes` bytes of one message, and its descriptor if one came (else -1), waiting at most
// `timeout`. hipErrorInvalidValue for anything else: end of file, a short or long message, more
// than one descriptor, a timeout.
[[nodiscard]] hipError_t receive_message(int socket, void* data, std::size_t bytes, int* fd,
                                         std::chrono::milliseconds timeout) noexcept;

// Whether `fd` is an AF_UNIX SOCK_SEQPACKET socket, as every broker socket is.
[[nodiscard]] bool is_seqpacket_socket(int fd) noexcept;

// Closes on destruction; the runtime's own small owner (the public hipxx::FileDescriptor carries
// Boost.Outcome with it, which the runtime does not otherwise need).
class OwnedFd {
 public:
  OwnedFd() noexcept = default;
  explicit OwnedFd(int fd) noexcept : fd_(fd) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  OwnedFd(OwnedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~OwnedFd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void reset() noexcept;

 private:
  int fd_ = -1;
};

// A connected pair of close-on-exec seqpacket sockets; false (errno set) where none could be made.
[[nodiscard]] bool seqpacket_pair(OwnedFd* first, OwnedFd* second) noexcept;

// Asks the broker behind `exported` (a pool's exported socket) for a channel of the asker's own:
// the pool's description comes in `reply`, the channel in `channel`. hipErrorOutOfMemory where the
// broker had no room for another channel; hipErrorInvalidValue for anything else that went wrong.
[[nodiscard]] hipError_t open_channel(int exported, BrokerReply* reply, OwnedFd* channel) noexcept;

}  // namespace hipxx::core
