// Starting and reaping the peer processes of the multi-process tests: the peer executable named by
// an environment variable (meson sets it), fork+exec with a socket as the child's descriptor 3, and
// the child's exit code.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

namespace test_support {

inline std::string peer_path(char const* variable) {
  char const* const path = std::getenv(variable);
  REQUIRE_MESSAGE(path != nullptr, variable, " must name the peer executable (meson sets it)");
  return path;
}

// fork+exec of `args`; the child gets `socket` as descriptor 3 when it is not -1. Everything the
// child does between fork and exec is async-signal-safe, as it must be in a threaded process.
inline pid_t spawn(std::vector<std::string> const& args, int socket = -1) {
  std::vector<char*> argv;
  for (std::string const& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t const pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (socket >= 0) {
      // dup2 gives a descriptor without close-on-exec; an fd already at 3 just loses the flag.
      if (socket == 3 ? fcntl(3, F_SETFD, 0) != 0 : dup2(socket, 3) != 3) _exit(126);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// The child's exit code, or 128 + the signal that ended it.
inline int wait_exit_code(pid_t pid) {
  int status = 0;
  pid_t got = 0;
  do {
    got = waitpid(pid, &status, 0);
  } while (got < 0 && errno == EINTR);
  REQUIRE(got == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace test_support
