// The process's open file descriptors, as the leak checks see them. They are listed once the
// runtime's deferred closes are done: a backend may close the descriptor an imported handle kept
// a little after the handle's release (the CUDA backend closes it on a thread of its own), and a
// device-wide synchronisation is where every such close has happened.
#pragma once

#include <hip/hip_runtime_api.h>

#include <dirent.h>
#include <fcntl.h>

#include <cstdlib>
#include <vector>

namespace test_support {

inline std::vector<int> open_fds() {
  (void)hipDeviceSynchronize();
  std::vector<int> listed;
  DIR* const directory = opendir("/proc/self/fd");
  if (directory == nullptr) return listed;
  while (const dirent* entry = readdir(directory)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd != dirfd(directory)) listed.push_back(fd);
  }
  closedir(directory);
  return listed;
}

inline std::size_t open_fd_count() { return open_fds().size(); }

}  // namespace test_support
