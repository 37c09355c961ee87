// How much of a mapping has page-table entries, as the host backend's tests of committing and
// populating memory see it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

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

}  // namespace test_support
