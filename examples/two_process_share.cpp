// Two processes, one piece of physical memory.
//
// The parent creates an exportable allocation, maps it and writes a message into it, exports it as a
// POSIX file descriptor and sends the descriptor (with the allocation's size) to its child over a Unix
// socket with hipxx::send_fd. The child imports the descriptor, maps the same memory at an address of
// its own, reads the parent's message, and writes an answer into the second half. The parent then
// reads the answer through its own mapping. Nothing is copied between the processes: both map the
// same memory.
//
// Exits non-zero if either side sees anything other than what the other wrote.
#include <hipxx/access.hpp>
#include <hipxx/device.hpp>
#include <hipxx/fd_passing.hpp>
#include <hipxx/mapping.hpp>
#include <hipxx/physical_allocation.hpp>
#include <hipxx/shareable_handle.hpp>
#include <hipxx/virtual_range.hpp>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// Sent along with the descriptor: the importer cannot learn the allocation's size from HIP.
struct Shared {
  std::uint64_t size;
  std::uint64_t words;  // pattern words following the message in each half
};

constexpr std::size_t kMessageBytes = 64;

template <class T>
T must(hipxx::result<T> outcome, const char* who, const char* what) {
  if (!outcome) {
    std::fprintf(stderr, "[%s] FAIL: %s: %s\n", who, what, outcome.error().message().c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  if constexpr (!std::is_void_v<T>) return std::move(outcome).value();
}

void must_hip(hipError_t error, const char* who, const char* what) {
  must(hipxx::check(error), who, what);
}

constexpr std::uint64_t pattern(std::uint64_t seed, std::size_t index) noexcept {
  return (seed + index) * 0x9E3779B97F4A7C15ULL;
}

void* at(void* base, std::size_t offset) {
  return static_cast<void*>(static_cast<char*>(base) + offset);
}

// Writes a message and `words` pattern words at `offset` of the mapping, through hipMemcpy.
void write_half(const hipxx::Mapping& mapping, std::size_t offset, const std::string& message, std::uint64_t seed,
                std::size_t words, const char* who) {
  std::array<char, kMessageBytes> text{};
  std::snprintf(text.data(), text.size(), "%s", message.c_str());
  std::vector<std::uint64_t> data(words);
  for (std::size_t i = 0; i < words; ++i) data[i] = pattern(seed, i);
  must_hip(hipMemcpy(at(mapping.address(), offset), text.data(), text.size(), hipMemcpyHostToDevice), who, "write message");
  must_hip(hipMemcpy(at(mapping.address(), offset + kMessageBytes), data.data(), words * sizeof(std::uint64_t),
                     hipMemcpyHostToDevice),
           who, "write pattern");
}

// Reads back what the other process wrote at `offset`; prints it and returns whether it is intact.
bool read_half(const hipxx::Mapping& mapping, std::size_t offset, std::uint64_t seed, std::size_t words,
               const char* who) {
  std::array<char, kMessageBytes> text{};
  std::vector<std::uint64_t> data(words);
  must_hip(hipMemcpy(text.data(), at(mapping.address(), offset), text.size(), hipMemcpyDeviceToHost), who, "read message");
  must_hip(hipMemcpy(data.data(), at(mapping.address(), offset + kMessageBytes), words * sizeof(std::uint64_t),
                     hipMemcpyDeviceToHost),
           who, "read pattern");
  text.back() = '\0';
  std::size_t bad = 0;
  for (std::size_t i = 0; i < words; ++i) bad += data[i] != pattern(seed, i) ? 1 : 0;
  std::printf("[%s] read at offset %zu: \"%s\", first word 0x%016" PRIx64 ", %zu of %zu pattern words %s\n", who,
              offset, text.data(), data.empty() ? 0 : data[0], words - bad, words, bad == 0 ? "match" : "MISMATCH");
  return bad == 0;
}

// One byte over the socket, again where a signal of the application's interrupted the call.
bool one_byte(int socket, char* byte, bool sending) {
  for (;;) {
    const ssize_t done = sending ? ::write(socket, byte, 1) : ::read(socket, byte, 1);
    if (done == 1) return true;
    if (done < 0 && errno == EINTR) continue;
    return false;
  }
}

int child(int socket) {
  const char* const who = "child ";
  auto received = must(hipxx::recv_fd<Shared>(socket), who, "recv_fd");
  const Shared shared = received.payload;
  std::printf("[%s] pid %d received fd %d for %" PRIu64 " bytes\n", who, static_cast<int>(getpid()),
              received.fd.get(), shared.size);

  const hipxx::Device device{0};
  auto allocation = must(hipxx::import_handle(received.fd, shared.size), who, "import_handle");
  must(received.fd.close(), who, "close the received fd");  // the imported handle keeps the memory alive
  auto range = must(hipxx::VirtualRange::reserve(shared.size), who, "reserve");
  auto mapping = must(hipxx::map(range, 0, allocation), who, "map");
  must(mapping.set_access(device, hipxx::Access::read_write), who, "set_access");
  std::printf("[%s] mapped the parent's memory at %p\n", who, mapping.address());

  const bool ok = read_half(mapping, 0, 1, shared.words, who);
  write_half(mapping, shared.size / 2, "hello back from the child, pid " + std::to_string(getpid()), 2, shared.words,
             who);
  std::printf("[%s] wrote an answer at offset %" PRIu64 "\n", who, shared.size / 2);
  std::fflush(stdout);

  // Tell the parent the answer is there.
  char answer = ok ? 'y' : 'n';
  if (!one_byte(socket, &answer, true)) return 1;
  return ok ? 0 : 1;
}

int parent(int socket, pid_t child_pid) {
  const char* const who = "parent";
  const hipxx::Device device{0};
  const std::size_t granularity = must(device.granularity(hipxx::Granularity::minimum), who, "granularity");
  const std::size_t size = 64 * granularity;
  const Shared shared{.size = size, .words = (size / 2 - kMessageBytes) / sizeof(std::uint64_t)};

  auto range = must(hipxx::VirtualRange::reserve(size), who, "reserve");
  auto allocation = must(hipxx::PhysicalAllocation::create(device, size, hipxx::Shareable::posix_fd), who, "create");
  auto mapping = must(hipxx::map(range, 0, allocation), who, "map");
  must(mapping.set_access(device, hipxx::Access::read_write), who, "set_access");
  std::printf("[%s] pid %d mapped %zu bytes at %p\n", who, static_cast<int>(getpid()), size, mapping.address());

  write_half(mapping, 0, "hello from the parent, pid " + std::to_string(getpid()), 1, shared.words, who);
  // Nothing for the second half yet: the child's answer must overwrite these zeros.
  must_hip(hipMemset(at(mapping.address(), size / 2), 0, size / 2), who, "clear the second half");

  auto fd = must(hipxx::export_handle(allocation), who, "export_handle");
  must(hipxx::send_fd<Shared>(socket, fd, shared), who, "send_fd");
  std::printf("[%s] sent fd %d to the child\n", who, fd.get());
  std::fflush(stdout);
  must(fd.close(), who, "close the exported fd");

  char done = 'n';
  const bool answered = one_byte(socket, &done, false);
  int status = 0;
  while (waitpid(child_pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool child_ok = answered && done == 'y' && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!child_ok) {
    std::printf("[%s] the child failed (answered: %s, exit status %d)\n", who, answered ? "yes" : "no",
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  // The child has exited and unmapped: what it wrote lives on in the memory we still map.
  const bool ok = read_half(mapping, size / 2, 2, shared.words, who);
  return ok && child_ok ? 0 : 1;
}

}  // namespace

int main() {
  std::array<int, 2> sockets{};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets.data()) != 0) {
    std::perror("socketpair");
    return 1;
  }
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid == 0) {
    close(sockets[0]);
    const int code = child(sockets[1]);
    std::fflush(stdout);
    std::_Exit(code);  // the child's handles are already gone; skip the parent's atexit work
  }
  close(sockets[1]);
  const int code = parent(sockets[0], pid);
  close(sockets[0]);
  std::printf("%s\n", code == 0 ? "OK: both processes saw each other's data" : "FAILED");
  return code;
}
