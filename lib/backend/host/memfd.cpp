#include "backend/host/memfd.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace hipxx::backend::host {
namespace {

constexpr std::string_view kPhysicalPrefix = "hipxx-physical-d";

bool raising_allowed() noexcept {
  const char* const choice = std::getenv("HIPXX_HOST_RAISE_NOFILE");
  return choice == nullptr || std::string_view{choice} != "0";
}

// Doubles the soft limit on open descriptors, never past the hard limit; false where it cannot grow.
bool raise_descriptor_limit() noexcept {
  static std::mutex mutex;
  const std::lock_guard lock{mutex};
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  const rlim_t doubled = limit.rlim_cur > limit.rlim_max / 2 ? limit.rlim_max : limit.rlim_cur * 2;
  limit.rlim_cur = std::max<rlim_t>(doubled, limit.rlim_cur + 1);
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

}  // namespace

int create_memfd(const char* name, unsigned flags) noexcept {
  const int fd = memfd_create(name, flags);
  if (fd >= 0 || errno != EMFILE) return fd;
  if (!raising_allowed() || !raise_descriptor_limit()) {
    errno = EMFILE;
    return -1;
  }
  return memfd_create(name, flags);
}

MemfdName physical_memfd_name(int device) noexcept {
  MemfdName name{};
  std::snprintf(name.data(), name.size(), "%.*s%d", static_cast<int>(kPhysicalPrefix.size()), kPhysicalPrefix.data(),
                device);
  return name;
}

int memfd_device(int fd) noexcept {
  // The kernel shows a memfd's name in its /proc link: "/memfd:NAME (deleted)".
  std::array<char, 64> path{};
  std::snprintf(path.data(), path.size(), "/proc/self/fd/%d", fd);
  std::array<char, 128> target{};
  const ssize_t length = readlink(path.data(), target.data(), target.size());
  if (length <= 0) return -1;
  const std::string_view link{target.data(), static_cast<std::size_t>(length)};
  const std::string_view expected = "/memfd:";
  if (!link.starts_with(expected) || !link.substr(expected.size()).starts_with(kPhysicalPrefix)) return -1;
  const std::string_view digits = link.substr(expected.size() + kPhysicalPrefix.size());
  int device = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), device);
  const bool whole = error == std::errc{} && (end == digits.data() + digits.size() || *end == ' ');
  return whole && device >= 0 ? device : -1;
}

}  // namespace hipxx::backend::host
