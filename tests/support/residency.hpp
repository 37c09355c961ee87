// The host backend's tests of committing and populating memory: how much of a mapping has
// page-table entries, and a process with little address space left.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace test_support {

// Kilobytes of the mapping starting at `base` that have page-table entries (smaps "Rss"), or -1.
inline long resident_kib(const void* base) {
  std::FILE* smaps = std::fopen("/proc/self/smaps", "re");
  if (smaps == nullptr) return -1;
  char line[512];
  bool inside = false;
  long kib = -1;
  while (std::fgets(line, sizeof line, smaps) != nullptr) {
    unsigned long start = 0;
    unsigned long end = 0;
    if (std::sscanf(line, "%lx-%lx ", &start, &end) == 2 && std::strchr(line, ':') != nullptr &&
        std::strncmp(line, "Rss:", 4) != 0) {
      inside = start == reinterpret_cast<std::uintptr_t>(base);
      continue;
    }
    if (inside && std::sscanf(line, "Rss: %ld kB", &kib) == 1) break;
  }
  std::fclose(smaps);
  return kib;
}

// Lowers the address-space limit, soft and hard, to what this process maps now plus `headroom`
// bytes; false where that cannot be read or set. For a forked child: without privilege the hard
// limit cannot be raised again.
inline bool limit_address_space(std::size_t headroom) {
  long size_kib = 0;
  std::ifstream status{"/proc/self/status"};
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) size_kib = std::strtol(line.c_str() + 7, nullptr, 10);
  }
  const rlim_t limit = static_cast<rlim_t>(size_kib) * 1024 + headroom;
  const rlimit lowered{limit, limit};
  return size_kib != 0 && setrlimit(RLIMIT_AS, &lowered) == 0;
}

}  // namespace test_support
