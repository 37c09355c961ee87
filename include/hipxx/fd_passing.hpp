// Moving a file descriptor to another process over a Unix domain socket (SCM_RIGHTS), with a small
// trivially copyable payload in the same message: an exported allocation's descriptor means nothing
// to the importer without its size, and sending both at once means they cannot be paired up wrongly.
//
// Works on stream, datagram and seqpacket sockets. Interrupted calls are restarted; a stream that
// delivers the payload in pieces is read to the end, while a datagram or seqpacket message shorter
// or longer than the payload is refused (std::errc::message_size): the two sides disagree on it.
#pragma once

#include <hipxx/detail/scm_rights.hpp>
#include <hipxx/error.hpp>
#include <hipxx/shareable_handle.hpp>

#include <sys/socket.h>
#include <sys/types.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace hipxx {

namespace detail {

// Sends what is left of a payload after a short sendmsg, without the descriptor (it went with the
// first byte).
[[nodiscard]] inline result<void> send_rest(int socket, std::span<std::byte const> bytes) noexcept {
  while (!bytes.empty()) {
    ssize_t const sent = ::send(socket, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_failure();
    }
    bytes = bytes.subspan(static_cast<std::size_t>(sent));
  }
  return outcome::success();
}

// Only a stream delivers one message in pieces; datagram and seqpacket sockets deliver it whole.
[[nodiscard]] inline bool is_stream_socket(int socket) noexcept {
  int type = 0;
  socklen_t length = sizeof type;
  return ::getsockopt(socket, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == SOCK_STREAM;
}

[[nodiscard]] inline result<void> recv_rest(int socket, std::span<std::byte> bytes) noexcept {
  while (!bytes.empty()) {
    ssize_t const got = ::recv(socket, bytes.data(), bytes.size(), 0);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_failure();
    }
    if (got == 0) {
      // The peer closed mid-message.
      return failure(std::errc::connection_reset);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(got));
  }
  return outcome::success();
}

[[nodiscard]] inline result<void> send_fd_bytes(int socket, int fd, std::span<std::byte const> payload) noexcept {
  if (payload.empty()) {
    // Linux drops ancillary data sent with no data byte on a stream socket.
    return failure(std::errc::invalid_argument);
  }
  iovec io{};
  io.iov_base = const_cast<std::byte*>(payload.data());  // sendmsg only reads it
  io.iov_len = payload.size();

  ScmRightsBuffer<1> control{};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  attach_fd(message, control, fd);

  ssize_t sent = 0;
  do {
    // MSG_NOSIGNAL: a vanished peer is an error to return, not a SIGPIPE that kills the sender.
    sent = ::sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    return errno_failure();
  }
  return send_rest(socket, payload.subspan(static_cast<std::size_t>(sent)));
}

[[nodiscard]] inline result<FileDescriptor> recv_fd_bytes(int socket, std::span<std::byte> payload) noexcept {
  iovec io{};
  io.iov_base = payload.data();
  io.iov_len = payload.size();

  // Room for one descriptor and a credentials message (which, where unused, makes room for more
  // descriptors: those are counted below); the kernel closes whatever does not fit and sets
  // MSG_CTRUNC.
  ScmRightsBuffer<1> control{};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  expect_fds(message, control);

  ssize_t got = 0;
  do {
    // MSG_CMSG_CLOEXEC: the descriptor must not leak into a child exec'd by another thread meanwhile.
    got = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    return errno_failure();
  }

  // Take ownership of whatever arrived before looking at anything else, so no error path leaks it.
  FileDescriptor received;
  std::size_t count = 0;
  for_each_received_fd(message, [&received, &count](int fd) {
    FileDescriptor owned{fd};
    if (++count == 1) {
      received = std::move(owned);
    }  // else: a sender that broke the protocol; `owned` closes its extra descriptors.
  });

  // The end of the stream; on a datagram or seqpacket socket also a message of no bytes, which is
  // the end too unless it brought a descriptor (then it is a message shorter than the payload).
  if (got == 0 && (count == 0 || is_stream_socket(socket))) {
    return failure(std::errc::connection_reset);
  }
  if ((message.msg_flags & MSG_TRUNC) != 0) {
    // A datagram longer than the payload we expect: the two sides disagree on the Payload type.
    return failure(std::errc::message_size);
  }
  if ((message.msg_flags & MSG_CTRUNC) != 0 || count > 1) {
    // More descriptors were sent than one (those beyond the room we gave, the kernel closed).
    return failure(std::errc::message_size);
  }
  if (!received) {
    return failure(std::errc::bad_message);
  }
  if (static_cast<std::size_t>(got) < payload.size() && !is_stream_socket(socket)) {
    // A whole message shorter than the payload: reading on would take the next message's bytes.
    return failure(std::errc::message_size);
  }
  if (auto rest = recv_rest(socket, payload.subspan(static_cast<std::size_t>(got))); !rest) {
    return rest.as_failure();
  }
  return received;
}

}  // namespace detail

template <class Payload>
struct ReceivedFd {
  FileDescriptor fd;
  Payload payload;
};

// Sends `fd` and `payload` as one message. Payload is named, not deduced, as recv_fd's is, so that
// `send_fd(socket, fd, 4096)` sends the default uint64_t a default recv_fd waits for, not an int of
// half its size. Every byte of the payload goes to the other process, so a type with padding (bytes
// holding whatever this process left there) is refused.
template <class Payload = std::uint64_t>
requires std::is_trivially_copyable_v<Payload> && std::has_unique_object_representations_v<Payload>
[[nodiscard]] result<void> send_fd(int socket, FileDescriptor const& fd,
                                   std::type_identity_t<Payload> const& payload) noexcept {
  auto const bytes = std::bit_cast<std::array<std::byte, sizeof(Payload)>>(payload);
  return detail::send_fd_bytes(socket, fd.get(), bytes);
}

// Receives one descriptor and its payload; the Payload type must match the sender's.
template <class Payload = std::uint64_t>
requires std::is_trivially_copyable_v<Payload>
[[nodiscard]] result<ReceivedFd<Payload>> recv_fd(int socket) noexcept {
  std::array<std::byte, sizeof(Payload)> bytes{};
  auto fd = detail::recv_fd_bytes(socket, bytes);
  if (!fd) {
    return fd.as_failure();
  }
  return ReceivedFd<Payload>{std::move(fd).value(), std::bit_cast<Payload>(bytes)};
}

// The same, for a socket that is itself owned.
template <class Payload = std::uint64_t>
requires std::is_trivially_copyable_v<Payload> && std::has_unique_object_representations_v<Payload>
[[nodiscard]] result<void> send_fd(FileDescriptor const& socket, FileDescriptor const& fd,
                                   std::type_identity_t<Payload> const& payload) noexcept {
  return send_fd<Payload>(socket.get(), fd, payload);
}

template <class Payload = std::uint64_t>
requires std::is_trivially_copyable_v<Payload>
[[nodiscard]] result<ReceivedFd<Payload>> recv_fd(FileDescriptor const& socket) noexcept {
  return recv_fd<Payload>(socket.get());
}

}  // namespace hipxx
