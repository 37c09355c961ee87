#include "core/pool_wire.hpp"
#include "core/whole_number.hpp"

#include <hipxx/detail/scm_rights.hpp>

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

namespace hipxx::core {
namespace {

// Room for a few descriptors, so a sender that attaches too many is seen (and its extras closed)
// rather than cut off by the kernel mid-array.
constexpr std::size_t kMaxFds = 4;

using ControlBuffer = detail::ScmRightsBuffer<kMaxFds>;

// Takes every descriptor a message carried; returns the first and closes the rest. *count says how
// many there were.
int adopt_fds(msghdr& message, std::size_t* count) noexcept {
  int first = -1;
  *count = 0;
  detail::for_each_received_fd(message, [&](int fd) {
    if (++*count == 1) {
      first = fd;
    } else {
      (void)::close(fd);
    }
  });
  return first;
}

// Waits until `socket` is readable or the deadline has passed (never less: poll's milliseconds are
// rounded up, and the deadline, not poll's return, decides that the wait is over).
bool wait_readable(int socket, std::chrono::steady_clock::time_point deadline) noexcept {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd watched{.fd = socket, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&watched, 1, static_cast<int>(left.count()));
    if ((ready < 0 && errno == EINTR) || ready == 0) continue;
    // A hung-up socket with nothing left to read is not readable: recv would only say end of file.
    return ready > 0 && (watched.revents & POLLIN) != 0;
  }
}

constexpr std::chrono::milliseconds kDefaultBrokerTimeout{10'000};
constexpr long kLongestBrokerTimeoutMs = 3'600'000;

std::chrono::milliseconds chosen_broker_timeout() noexcept {
  const char* const text = std::getenv("HIPXX_POOL_BROKER_TIMEOUT_MS");
  if (text == nullptr) return kDefaultBrokerTimeout;
  const std::optional<long> milliseconds = whole_number(text, 1, kLongestBrokerTimeoutMs);
  return milliseconds ? std::chrono::milliseconds{*milliseconds} : kDefaultBrokerTimeout;
}

}  // namespace

std::chrono::milliseconds broker_timeout() noexcept {
  static const std::chrono::milliseconds chosen = chosen_broker_timeout();
  return chosen;
}

PoolToken random_token() noexcept {
  PoolToken token;
  auto* bytes = reinterpret_cast<unsigned char*>(token.words.data());
  std::size_t filled = 0;
  while (filled < sizeof token.words) {
    const ssize_t got = ::getrandom(bytes + filled, sizeof token.words - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return {};
    filled += static_cast<std::size_t>(got);
  }
  return token;
}

void OwnedFd::reset() noexcept {
  if (fd_ >= 0) (void)::close(std::exchange(fd_, -1));
}

bool seqpacket_pair(OwnedFd* first, OwnedFd* second) noexcept {
  std::array<int, 2> ends{};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends.data()) != 0) return false;
  *first = OwnedFd{ends[0]};
  *second = OwnedFd{ends[1]};
  return true;
}

bool is_seqpacket_socket(int fd) noexcept {
  int domain = 0;
  int type = 0;
  socklen_t length = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 || domain != AF_UNIX) return false;
  length = sizeof type;
  return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == SOCK_SEQPACKET;
}

bool send_message(int socket, const void* data, std::size_t bytes, int fd) noexcept {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): iovec's base is not const; sendmsg only reads it
  iovec io{.iov_base = const_cast<void*>(data), .iov_len = bytes};
  ControlBuffer control{};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  if (fd >= 0) detail::attach_fd(message, control, fd);
  ssize_t sent = 0;
  do {
    // Never blocks: a peer that does not read must not stall the broker (or an importer).
    sent = ::sendmsg(socket, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(bytes);  // seqpacket: all or nothing
}

hipError_t receive_message(int socket, void* data, std::size_t bytes, int* fd,
                           std::chrono::milliseconds timeout) noexcept {
  *fd = -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!wait_readable(socket, deadline)) return hipErrorInvalidValue;
    iovec io{.iov_base = data, .iov_len = bytes};
    ControlBuffer control{};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    detail::expect_fds(message, control);
    // MSG_CMSG_CLOEXEC: no descriptor may leak into a child another thread execs meanwhile.
    const ssize_t got = ::recvmsg(socket, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;  // another reader won
    std::size_t count = 0;
    OwnedFd received{got < 0 ? -1 : adopt_fds(message, &count)};
    // A descriptor sent but none received: this process had no room for it (the kernel drops what
    // it cannot install and says so with MSG_CTRUNC). A sender of too many leaves some installed.
    if (got == static_cast<ssize_t>(bytes) && count == 0 &&
        (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == MSG_CTRUNC) {
      return hipErrorOutOfMemory;
    }
    if (got != static_cast<ssize_t>(bytes) || count > 1 || (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
      return hipErrorInvalidValue;
    }
    *fd = received.release();
    return hipSuccess;
  }
}

hipError_t open_channel(int exported, BrokerReply* reply, OwnedFd* channel) noexcept {
  const BrokerRequest request;  // open_channel
  if (!send_message(exported, &request, sizeof request, -1)) return hipErrorInvalidValue;
  int received = -1;
  if (const hipError_t error = receive_message(exported, reply, sizeof *reply, &received, broker_timeout());
      error != hipSuccess) {
    return error;
  }
  OwnedFd opened{received};
  if (reply->magic != kReplyMagic || reply->status != hipSuccess || !opened || !is_seqpacket_socket(opened.get())) {
    return reply->magic == kReplyMagic && reply->status == hipErrorOutOfMemory ? hipErrorOutOfMemory
                                                                               : hipErrorInvalidValue;
  }
  *channel = std::move(opened);
  return hipSuccess;
}

}  // namespace hipxx::core
