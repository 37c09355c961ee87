// The process's memory mappings that could be the runtime's, as the leak checks count them. On the
// host backend a reservation is a private mapping with no access and a mapping of physical memory is
// a shared one, so a leaked range shows among these. Private mappings that can be read or written
// are the process's heap and stacks, which the allocator maps and unmaps at its own pace
// (AddressSanitizer keeps freed large blocks mapped in its quarantine for a while), so they are
// left out.
#pragma once

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

namespace test_support {

inline std::size_t runtime_like_mapping_count() {
  std::ifstream maps("/proc/self/maps");
  std::size_t count = 0;
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields{line};
    std::string range;
    std::string permissions;
    fields >> range >> permissions;
    const bool shared = permissions.size() == 4 && permissions[3] == 's';
    const bool no_access = permissions.starts_with("---");
    if (shared || no_access) ++count;
  }
  return count;
}

}  // namespace test_support
