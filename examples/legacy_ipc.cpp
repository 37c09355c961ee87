// Two processes, one hipMalloc allocation, shared by a 64-byte handle (legacy IPC).
//
// The parent allocates device memory with hipMalloc, writes a message and a pattern into it, exports
// it with hipxx::IpcHandle::export_memory and sends the handle's bytes, with the allocation's size, to
// its child over a socket. The child opens the handle with hipxx::IpcMapping::open, reads the
// parent's data, writes an answer into the second half and lets the mapping's destructor close it.
// The parent reads the answer through its own pointer, and only then frees the memory: HIP leaves an
// importer's mapping undefined once the exporter has freed it.
//
// The processes part before either calls HIP (a GPU runtime does not survive fork). Exits non-zero if
// either side sees anything other than what the other wrote.
#include <hipxx/error.hpp>
#include <hipxx/ipc.hpp>

#include <hip/hip_runtime_api.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// What travels from the parent to the child: the handle and what HIP does not tell the importer.
struct Offer {
  hipxx::IpcHandle handle;
  std::uint64_t size = 0;
};
static_assert(std::is_trivially_copyable_v<Offer>);

constexpr std::size_t kMessageBytes = 64;
constexpr std::size_t kSize = std::size_t{4} << 20;
constexpr std::size_t kWords = (kSize / 2 - kMessageBytes) / sizeof(std::uint64_t);

template <class T>
T must(hipxx::result<T> outcome, const char* who, const char* what) {
  if (!outcome) {
    std::fprintf(stderr, "[%s] FAIL: %s: %s\n", who, what, outcome.error().message().c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  if constexpr (!std::is_void_v<T>) return std::move(outcome).value();
}

void must_hip(hipError_t error, const char* who, const char* what) { must(hipxx::check(error), who, what); }

bool transfer(int socket, void* data, std::size_t bytes, bool sending) {
  auto* at = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t done = sending ? ::write(socket, at, bytes) : ::read(socket, at, bytes);
    if (done < 0 && errno == EINTR) continue;  // a signal of the application's came first
    if (done <= 0) return false;
    at += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

constexpr std::uint64_t pattern(std::uint64_t seed, std::size_t index) noexcept {
  return (seed + index) * 0x9E3779B97F4A7C15ULL;
}

void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

// Writes a message and the pattern of `seed` into the half of `base` at `offset`, with hipMemcpy.
void write_half(void* base, std::size_t offset, const std::string& message, std::uint64_t seed, const char* who) {
  std::array<char, kMessageBytes> text{};
  std::snprintf(text.data(), text.size(), "%s", message.c_str());
  std::vector<std::uint64_t> words(kWords);
  for (std::size_t i = 0; i < kWords; ++i) words[i] = pattern(seed, i);
  must_hip(hipMemcpy(at(base, offset), text.data(), text.size(), hipMemcpyHostToDevice), who, "write message");
  must_hip(
      hipMemcpy(at(base, offset + kMessageBytes), words.data(), kWords * sizeof(std::uint64_t), hipMemcpyHostToDevice),
      who, "write pattern");
}

// Reads the half at `offset` back, prints it, and says whether it holds the pattern of `seed`.
bool read_half(void* base, std::size_t offset, std::uint64_t seed, const char* who) {
  std::array<char, kMessageBytes> text{};
  std::vector<std::uint64_t> words(kWords);
  must_hip(hipMemcpy(text.data(), at(base, offset), text.size(), hipMemcpyDeviceToHost), who, "read message");
  must_hip(
      hipMemcpy(words.data(), at(base, offset + kMessageBytes), kWords * sizeof(std::uint64_t), hipMemcpyDeviceToHost),
      who, "read pattern");
  text.back() = '\0';
  std::size_t bad = 0;
  for (std::size_t i = 0; i < kWords; ++i) bad += words[i] != pattern(seed, i) ? 1 : 0;
  std::printf("[%s] read at offset %zu: \"%s\", %zu of %zu pattern words %s\n", who, offset, text.data(), kWords - bad,
              kWords, bad == 0 ? "match" : "MISMATCH");
  return bad == 0;
}

int child(int socket) {
  const char* const who = "child ";
  Offer offer{hipxx::IpcHandle::from_bytes(std::array<std::byte, hipxx::IpcHandle::size>{}), 0};
  if (!transfer(socket, &offer, sizeof offer, false)) return 1;
  bool ok = false;
  {
    auto mapping = must(hipxx::IpcMapping::open(offer.handle), who, "IpcMapping::open");
    std::printf("[%s] pid %d opened %" PRIu64 " bytes of the parent's memory at %p\n", who, static_cast<int>(getpid()),
                offer.size, mapping.data());
    ok = read_half(mapping.data(), 0, 1, who);
    write_half(mapping.data(), offer.size / 2, "hello back from the child, pid " + std::to_string(getpid()), 2, who);
    must_hip(hipDeviceSynchronize(), who, "synchronize");
  }  // the mapping's destructor closes it here, before the parent is told
  std::printf("[%s] wrote an answer and closed the mapping\n", who);
  std::fflush(stdout);
  char done = ok ? 'y' : 'n';
  return transfer(socket, &done, 1, true) && ok ? 0 : 1;
}

int parent(int socket, pid_t child_pid) {
  const char* const who = "parent";
  void* memory = nullptr;
  must_hip(hipMalloc(&memory, kSize), who, "hipMalloc");
  std::printf("[%s] pid %d allocated %zu bytes at %p\n", who, static_cast<int>(getpid()), kSize, memory);
  write_half(memory, 0, "hello from the parent, pid " + std::to_string(getpid()), 1, who);
  must_hip(hipMemset(at(memory, kSize / 2), 0, kSize / 2), who, "clear the second half");  // for the answer

  Offer offer{must(hipxx::IpcHandle::export_memory(memory), who, "IpcHandle::export_memory"), kSize};
  const bool sent = transfer(socket, &offer, sizeof offer, true);
  std::printf("[%s] sent the %zu-byte handle to the child\n", who, hipxx::IpcHandle::size);
  std::fflush(stdout);

  char done = 'n';
  const bool answered = sent && transfer(socket, &done, 1, false);
  int status = 0;
  while (waitpid(child_pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool child_ok = answered && done == 'y' && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!child_ok) std::printf("[%s] the child failed (answered: %s)\n", who, answered ? "yes" : "no");
  const bool ok = read_half(memory, kSize / 2, 2, who);
  must_hip(hipFree(memory), who, "hipFree");  // every importer has closed
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
    std::_Exit(code);
  }
  close(sockets[1]);
  const int code = parent(sockets[0], pid);
  close(sockets[0]);
  std::printf("%s\n",
              code == 0 ? "OK: the child read the parent's memory by handle and the parent read its answer" : "FAILED");
  return code;
}
