#include "backend/host/memfd.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace hipxx::backend::host {
namespace {

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

}  // namespace hipxx::backend::host
