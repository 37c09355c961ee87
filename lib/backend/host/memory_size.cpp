#include "backend/host/memory_size.hpp"

#include <sys/sysinfo.h>

#include <array>
#include <cstdio>

namespace hipxx::backend::host {
namespace {

std::uint64_t free_memory() noexcept {
  struct sysinfo info {};
  sysinfo(&info);
  return static_cast<std::uint64_t>(info.freeram) * info.mem_unit;
}

}  // namespace

std::uint64_t available_memory() noexcept {
  std::uint64_t kib = 0;
  bool found = false;
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): closed below; the project has no gsl::owner
  if (FILE* file = std::fopen("/proc/meminfo", "re")) {
    std::array<char, 256> line{};
    while (!found && std::fgets(line.data(), static_cast<int>(line.size()), file) != nullptr) {
      unsigned long long value = 0;
      found = std::sscanf(line.data(), "MemAvailable: %llu kB", &value) == 1;
      kib = value;
    }
    std::fclose(file);  // NOLINT(cppcoreguidelines-owning-memory): see fopen above
  }
  if (found) return kib * 1024;
  return free_memory();
}

std::uint64_t physical_memory() noexcept {
  struct sysinfo info {};
  sysinfo(&info);
  return static_cast<std::uint64_t>(info.totalram) * info.mem_unit;
}

bool could_commit(std::size_t bytes) noexcept { return bytes <= free_memory() || bytes <= available_memory(); }

}  // namespace hipxx::backend::host
