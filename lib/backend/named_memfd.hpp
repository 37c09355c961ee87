// A memfd that another process of the same user opens by name: the exporter keeps the descriptor
// open, and a 64-byte handle names its pid, the descriptor's number and the memfd's name, which
// holds a number drawn once per process. The importer opens /proc/<pid>/fd/<fd> and keeps the file
// only if its name is the one the handle was made for, read before the open and again through its
// own descriptor: a descriptor closed and reused meanwhile names some other file. Used by the host
// backend's legacy IPC memory and by interprocess events, on every backend.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace hipxx::backend {

// Not a secret, only a guard against a reused pid: where no random bytes can be had, the clock will do.
inline std::uint64_t draw_process_tag() noexcept {
  std::uint64_t tag = 0;
  if (getrandom(&tag, sizeof tag, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof tag)) {
    tag = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
          (static_cast<std::uint64_t>(getpid()) << 32);
  }
  return tag;
}

// Sixteen hexadecimal digits, for names.
inline std::string hex16(std::uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(16, '0');
  for (auto digit = text.rbegin(); digit != text.rend(); ++digit, value >>= 4) *digit = kHex[value & 0xF];
  return text;
}

// FNV-1a over `count` bytes: enough to tell a handle from random bytes, which is all a seal must do.
inline std::uint64_t fnv1a(const void* bytes, std::size_t count) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* byte = static_cast<const unsigned char*>(bytes);
  for (std::size_t index = 0; index < count; ++index) hash = (hash ^ byte[index]) * 0x100000001b3ULL;
  return hash;
}

// A memfd's name as /proc shows it: memfds live on no mounted filesystem, so their link reads
// "/memfd:<name> (deleted)".
inline std::string memfd_link(const std::string& name) { return "/memfd:" + name + " (deleted)"; }

inline bool link_reads(const char* path, const std::string& expected) noexcept {
  std::array<char, 512> target{};
  const ssize_t length = readlink(path, target.data(), target.size());
  return length > 0 && static_cast<std::size_t>(length) == expected.size() &&
         std::memcmp(target.data(), expected.data(), expected.size()) == 0;
}

// Whether `pid` names this process: its own pid, or that of one of its threads, which /proc serves
// the same descriptors under.
inline bool names_this_process(int pid) {
  if (pid == getpid()) return true;
  const std::string task = "/proc/self/task/" + std::to_string(pid);
  return ::access(task.c_str(), F_OK) == 0;
}

// Maps, read-write and shared, all `bytes` of the memfd named `name` that process `pid` holds as
// descriptor `fd`; MAP_FAILED where the descriptor names anything else, or a file of another size.
inline void* map_peer_memfd(int pid, int fd, const std::string& name, std::size_t bytes) {
  // The name is read before the open too, so that a handle naming some other kind of file (a
  // device, say) never opens it.
  const std::string expected = memfd_link(name);
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  if (!link_reads(path.c_str(), expected)) return MAP_FAILED;
  const int own = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (own < 0) return MAP_FAILED;
  // Nothing from here to the close may throw: the path of the descriptor just opened is written
  // into a buffer of its own rather than a string that may need memory.
  constexpr std::string_view kSelf = "/proc/self/fd/";
  std::array<char, kSelf.size() + 16> own_path{};
  const auto written = std::to_chars(own_path.data() + kSelf.size(), own_path.data() + own_path.size() - 1, own);
  kSelf.copy(own_path.data(), kSelf.size());
  struct stat status {};
  void* at = MAP_FAILED;
  if (written.ec == std::errc{} && link_reads(own_path.data(), expected) && fstat(own, &status) == 0 &&
      static_cast<std::size_t>(status.st_size) == bytes) {
    at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  }
  ::close(own);
  return at;
}

}  // namespace hipxx::backend
