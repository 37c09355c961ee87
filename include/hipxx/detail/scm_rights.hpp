// The SCM_RIGHTS control message that carries descriptors over a Unix domain socket: the buffer it
// needs, attaching one descriptor to an outgoing message, and walking those an incoming one brought.
// Shared by hipxx/fd_passing.hpp and the runtime's pool-sharing wire.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstring>

namespace hipxx::detail {

// Room for `Count` descriptors, aligned as the kernel requires, and for the SCM_CREDENTIALS message
// (pid, uid and gid) the kernel puts before them on a socket with SO_PASSCRED set: without that room
// the descriptors would not fit, and the kernel would close them.
template <std::size_t Count>
union ScmRightsBuffer {
  cmsghdr header;
  std::array<unsigned char, CMSG_SPACE(sizeof(int) * Count) + CMSG_SPACE(3 * sizeof(int))> bytes;
};

// Makes `fd` the one control message of `message`, kept in `buffer` (which must outlive the send).
template <std::size_t Count>
void attach_fd(msghdr& message, ScmRightsBuffer<Count>& buffer, int fd) noexcept {
  message.msg_control = buffer.bytes.data();
  message.msg_controllen = CMSG_SPACE(sizeof(int));
  cmsghdr* const header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
}

// Lets `message` receive into `buffer`.
template <std::size_t Count>
void expect_fds(msghdr& message, ScmRightsBuffer<Count>& buffer) noexcept {
  message.msg_control = buffer.bytes.data();
  message.msg_controllen = buffer.bytes.size();
}

// Hands every descriptor a received message carried, in order, to `take(int)`, which owns it from
// then on (the kernel has already installed them all in this process).
template <class Take>
void for_each_received_fd(msghdr& message, Take&& take) noexcept {
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t index = 0; index < count; ++index) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
      take(fd);
    }
  }
}

}  // namespace hipxx::detail
