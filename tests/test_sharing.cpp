// Sharing physical memory: between two real processes (fork, a socketpair, the exported fd passed
// with SCM_RIGHTS) and between two mappings in one process. Every case also checks that the
// process's descriptors and memory map are back to what they were.
#include <doctest/doctest.h>

#include "support/books.hpp"
#include "support/descriptors.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

namespace {

using test_support::open_fd_count;

using Handle = hipMemGenericAllocationHandle_t;

using test_support::books;

// ---------------------------------------------------------------------------------------------
// The process's own resources, counted without allocating descriptors that outlive the count.
std::size_t maps_line_count() {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::size_t lines = 0;
  char buffer[4096];
  for (;;) {
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    REQUIRE(got >= 0);
    if (got == 0) break;
    for (ssize_t i = 0; i < got; ++i) lines += buffer[i] == '\n' ? 1 : 0;
  }
  close(fd);
  return lines;
}

// Fails the test case unless the books, the descriptors and the memory map are as they were.
struct ResourceCheck {
  hipxxBookCounts start_books = books();
  std::size_t start_fds = open_fd_count();
  std::size_t start_maps = maps_line_count();
  ResourceCheck() = default;
  ResourceCheck(const ResourceCheck&) = delete;
  ResourceCheck& operator=(const ResourceCheck&) = delete;
  ~ResourceCheck() {
    CHECK_MESSAGE(books() == start_books, "runtime objects leaked");
    CHECK_MESSAGE(open_fd_count() == start_fds, "file descriptors leaked");
    CHECK_MESSAGE(maps_line_count() == start_maps, "memory mappings leaked");
  }
};

// ---------------------------------------------------------------------------------------------
// Descriptor passing over a Unix socket: one fd and a small payload per message.
bool send_fd(int socket, int fd, const void* payload, std::size_t bytes) {
  iovec iov{const_cast<void*>(payload), bytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
  ssize_t sent;
  do {
    sent = sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(bytes);
}

// Returns the received descriptor (close-on-exec), or -1.
int recv_fd(int socket, void* payload, std::size_t bytes) {
  iovec iov{payload, bytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(bytes) || (message.msg_flags & MSG_CTRUNC) != 0) return -1;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS &&
        header->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header), sizeof fd);
      return fd;
    }
  }
  return -1;
}

bool write_all(int fd, const void* data, std::size_t bytes) {
  const char* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t done = write(fd, cursor, bytes);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    cursor += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t bytes) {
  char* cursor = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t done = read(fd, cursor, bytes);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    cursor += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 29 + seed * 13 + (i >> 9)) & 0xff);
  return data;
}

std::size_t granularity() {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  std::size_t value = 0;
  REQUIRE(hipMemGetAllocationGranularity(&value, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
  return value;
}

void* as_os_handle(int fd) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(static_cast<unsigned>(fd))); }

// A view of an allocation in the calling process: reserve, map, ReadWrite. Every step reports.
struct View {
  void* base = nullptr;
  std::size_t size = 0;
};

hipError_t open_view(Handle handle, std::size_t size, View* view) {
  if (const hipError_t e = hipMemAddressReserve(&view->base, size, 0, nullptr, 0); e != hipSuccess) return e;
  view->size = size;
  if (const hipError_t e = hipMemMap(view->base, size, 0, handle, 0); e != hipSuccess) return e;
  hipMemAccessDesc desc{};
  desc.location = {hipMemLocationTypeDevice, 0};
  desc.flags = hipMemAccessFlagsProtReadWrite;
  return hipMemSetAccess(view->base, size, &desc, 1);
}

hipError_t close_view(const View& view) {
  if (const hipError_t e = hipMemUnmap(view.base, view.size); e != hipSuccess) return e;
  return hipMemAddressFree(view.base, view.size);
}

// ---------------------------------------------------------------------------------------------
// The child's side. It reports through its exit status: 0 = every step worked, otherwise the
// number of the step that failed. It never returns into doctest.
struct Offer {
  std::uint64_t size;
  std::uint32_t seed;
  std::uint32_t reply_seed;
};

bool child_quiet = false;  // set in a child that is meant to fail

[[noreturn]] void child_exit(int code) {
  std::fflush(nullptr);
  _exit(code);
}

#define CHILD_STEP(number, condition)                                                       \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      if (!child_quiet) std::fprintf(stderr, "child step %d failed: %s\n", number, #condition); \
      child_exit(number);                                                                   \
    }                                                                                       \
  } while (0)

[[noreturn]] void run_importer(int socket, bool reply) {
  const hipxxBookCounts start = [] {
    hipxxBookCounts counts{};
    (void)hipxxGetBookCounts(&counts);
    return counts;
  }();
  Offer offer{};
  const int fd = recv_fd(socket, &offer, sizeof offer);
  CHILD_STEP(1, fd >= 0);
  Handle handle = nullptr;
  CHILD_STEP(2, hipMemImportFromShareableHandle(&handle, as_os_handle(fd), hipMemHandleTypePosixFileDescriptor) ==
                    hipSuccess);
  CHILD_STEP(3, close(fd) == 0);
  hipMemAllocationProp prop{};
  CHILD_STEP(4, hipMemGetAllocationPropertiesFromHandle(&prop, handle) == hipSuccess);
  CHILD_STEP(5, prop.requestedHandleType == hipMemHandleTypePosixFileDescriptor);
  View view;
  CHILD_STEP(6, open_view(handle, offer.size, &view) == hipSuccess);
  std::vector<unsigned char> seen(offer.size, 0);
  CHILD_STEP(7, hipMemcpy(seen.data(), view.base, offer.size, hipMemcpyDeviceToHost) == hipSuccess);
  CHILD_STEP(8, seen == pattern(offer.size, offer.seed));
  if (reply) {
    const std::vector<unsigned char> answer = pattern(offer.size, offer.reply_seed);
    CHILD_STEP(9, hipMemcpy(view.base, answer.data(), offer.size, hipMemcpyHostToDevice) == hipSuccess);
  }
  CHILD_STEP(10, close_view(view) == hipSuccess);
  CHILD_STEP(11, hipMemRelease(handle) == hipSuccess);
  hipxxBookCounts end{};
  CHILD_STEP(12, hipxxGetBookCounts(&end) == hipSuccess);
  CHILD_STEP(13, end.allocations == start.allocations && end.mappings == start.mappings &&
                     end.reservations == start.reservations);
  const char done = 'k';
  CHILD_STEP(14, write_all(socket, &done, 1));
  child_exit(0);
}

struct Child {
  pid_t pid = -1;
  int socket = -1;  // the parent's end
};

// Forks an importer; the parent keeps one end of a fresh socketpair.
Child spawn_importer(bool reply, bool quiet = false) {
  int ends[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(ends[0]);
    child_quiet = quiet;
    run_importer(ends[1], reply);
  }
  close(ends[1]);
  return {pid, ends[0]};
}

int finish(Child& child) {
  close(child.socket);
  int status = 0;
  REQUIRE(waitpid(child.pid, &status, 0) == child.pid);
  if (!WIFEXITED(status)) return 1000 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return WEXITSTATUS(status);
}

Handle create_shareable(std::size_t size) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  prop.location = {hipMemLocationTypeDevice, 0};
  Handle handle = nullptr;
  REQUIRE(hipMemCreate(&handle, size, &prop, 0) == hipSuccess);
  return handle;
}

// Runs a case twice and checks the second run: the first warms everything that allocates lazily
// (the runtime, stdio, doctest's buffers, the allocator's size classes, the fork and socket
// paths), so the counts around the second see only what the case itself leaves behind.
void run_checked(void (*body)()) {
  body();
  ResourceCheck resources;
  body();
}

}  // namespace

// =============================================================================================
TEST_SUITE_BEGIN("sharing");

static void child_reads_and_replies() {
  const std::size_t size = 4 * granularity() + (std::size_t{2} << 20);  // not a power of two
  constexpr std::uint32_t kSeed = 7;
  constexpr std::uint32_t kReply = 8;

  // Fork first, so the child inherits none of the memory it is about to be sent.
  Child child = spawn_importer(true);

  Handle handle = create_shareable(size);
  View view;
  REQUIRE(open_view(handle, size, &view) == hipSuccess);
  const std::vector<unsigned char> data = pattern(size, kSeed);
  REQUIRE(hipMemcpy(view.base, data.data(), size, hipMemcpyHostToDevice) == hipSuccess);

  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  const Offer offer{size, kSeed, kReply};
  CHECK(send_fd(child.socket, fd, &offer, sizeof offer));
  CHECK(close(fd) == 0);

  char done = 0;
  CHECK(read_all(child.socket, &done, 1));
  CHECK(done == 'k');
  CHECK(finish(child) == 0);

  // The reply arrived through the parent's own mapping.
  std::vector<unsigned char> seen(size, 0);
  REQUIRE(hipMemcpy(seen.data(), view.base, size, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(seen == pattern(size, kReply));

  CHECK(close_view(view) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
}
TEST_CASE("two processes: the child reads the parent's pattern and the parent sees the reply" * doctest::test_suite("fork-child")) {
  run_checked(child_reads_and_replies);
}

static void memory_outlives_exporter() {
  const std::size_t size = 2 * granularity();
  Child child = spawn_importer(false);

  Handle handle = create_shareable(size);
  View view;
  REQUIRE(open_view(handle, size, &view) == hipSuccess);
  const std::vector<unsigned char> data = pattern(size, 21);
  REQUIRE(hipMemcpy(view.base, data.data(), size, hipMemcpyHostToDevice) == hipSuccess);
  int fd = -1;
  REQUIRE(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  // Drop every reference of our own before the child even receives the descriptor.
  CHECK(close_view(view) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
  const Offer offer{size, 21, 0};
  CHECK(send_fd(child.socket, fd, &offer, sizeof offer));
  CHECK(close(fd) == 0);
  char done = 0;
  CHECK(read_all(child.socket, &done, 1));
  CHECK(finish(child) == 0);
}
TEST_CASE("two processes: the memory outlives everything the exporter held" * doctest::test_suite("fork-child")) {
  run_checked(memory_outlives_exporter);
}

static void several_children() {
  const std::size_t size = granularity();
  Handle handle = create_shareable(size);
  View view;
  REQUIRE(open_view(handle, size, &view) == hipSuccess);
  for (std::uint32_t round = 0; round < 3; ++round) {
    CAPTURE(round);
    const std::vector<unsigned char> data = pattern(size, 30 + round);
    REQUIRE(hipMemcpy(view.base, data.data(), size, hipMemcpyHostToDevice) == hipSuccess);
    Child child = spawn_importer(true);
    int fd = -1;
    REQUIRE(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
    const Offer offer{size, 30 + round, 40 + round};
    CHECK(send_fd(child.socket, fd, &offer, sizeof offer));
    CHECK(close(fd) == 0);
    char done = 0;
    CHECK(read_all(child.socket, &done, 1));
    CHECK(finish(child) == 0);
    std::vector<unsigned char> seen(size);
    REQUIRE(hipMemcpy(seen.data(), view.base, size, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(seen == pattern(size, 40 + round));
  }
  CHECK(close_view(view) == hipSuccess);
  CHECK(hipMemRelease(handle) == hipSuccess);
}
TEST_CASE("two processes: several children share one allocation" * doctest::test_suite("fork-child")) {
  run_checked(several_children);
}

static void child_refuses_a_pipe() {
  // A pipe is not device memory: the child's import must refuse it (step 2).
  Child child = spawn_importer(false, true);
  int pipe_fds[2];
  REQUIRE(pipe2(pipe_fds, O_CLOEXEC) == 0);
  const Offer offer{granularity(), 1, 0};
  CHECK(send_fd(child.socket, pipe_fds[0], &offer, sizeof offer));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  CHECK(finish(child) == 2);
}
TEST_CASE("two processes: a child that gets a non-exportable fd fails cleanly" * doctest::test_suite("fork-child")) {
  run_checked(child_refuses_a_pipe);
}

static void same_handle_two_views() {
  const std::size_t size = 3 * granularity();
  {
    Handle handle = create_shareable(size);
    View first;
    View second;
    REQUIRE(open_view(handle, size, &first) == hipSuccess);
    REQUIRE(open_view(handle, size, &second) == hipSuccess);
    CHECK(first.base != second.base);
    const std::vector<unsigned char> data = pattern(size, 51);
    REQUIRE(hipMemcpy(first.base, data.data(), size, hipMemcpyHostToDevice) == hipSuccess);
    std::vector<unsigned char> seen(size);
    REQUIRE(hipMemcpy(seen.data(), second.base, size, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(seen == data);
    // And back the other way, with a memset through the second view.
    REQUIRE(hipMemset(second.base, 0x6d, size / 2) == hipSuccess);
    REQUIRE(hipMemcpy(seen.data(), first.base, size, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(std::vector<unsigned char>(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(size / 2)) ==
          std::vector<unsigned char>(size / 2, 0x6d));
    CHECK(close_view(first) == hipSuccess);
    CHECK(close_view(second) == hipSuccess);
    CHECK(hipMemRelease(handle) == hipSuccess);
  }
}
TEST_CASE("one process: the same handle mapped twice, written through one view, read through the other") {
  run_checked(same_handle_two_views);
}

static void reimported_handle_two_views() {
  const std::size_t size = 3 * granularity();
  {
    Handle handle = create_shareable(size);
    int fd = -1;
    REQUIRE(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
    Handle imported = nullptr;
    REQUIRE(hipMemImportFromShareableHandle(&imported, as_os_handle(fd), hipMemHandleTypePosixFileDescriptor) ==
            hipSuccess);
    CHECK(close(fd) == 0);
    View first;
    View second;
    REQUIRE(open_view(handle, size, &first) == hipSuccess);
    REQUIRE(open_view(imported, size, &second) == hipSuccess);
    const std::vector<unsigned char> data = pattern(size, 52);
    REQUIRE(hipMemcpy(second.base, data.data(), size, hipMemcpyHostToDevice) == hipSuccess);
    std::vector<unsigned char> seen(size);
    REQUIRE(hipMemcpy(seen.data(), first.base, size, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(seen == data);
    // Releasing one handle leaves the other's view working.
    CHECK(close_view(first) == hipSuccess);
    CHECK(hipMemRelease(handle) == hipSuccess);
    REQUIRE(hipMemcpy(seen.data(), second.base, size, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(seen == data);
    CHECK(close_view(second) == hipSuccess);
    CHECK(hipMemRelease(imported) == hipSuccess);
  }
}
TEST_CASE("one process: an exported and re-imported handle, written through one view, read through the other") {
  run_checked(reimported_handle_two_views);
}

static void descriptor_helpers() {
  int ends[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) == 0);
  int pipe_fds[2];
  REQUIRE(pipe2(pipe_fds, O_CLOEXEC) == 0);
  const std::uint64_t sent_value = 0x1122334455667788ULL;
  REQUIRE(send_fd(ends[0], pipe_fds[1], &sent_value, sizeof sent_value));
  std::uint64_t got_value = 0;
  const int received = recv_fd(ends[1], &got_value, sizeof got_value);
  REQUIRE(received >= 0);
  CHECK(got_value == sent_value);
  CHECK(received != pipe_fds[1]);
  CHECK((fcntl(received, F_GETFD) & FD_CLOEXEC) != 0);
  // The received descriptor is the same pipe.
  const char byte = 'x';
  CHECK(write(received, &byte, 1) == 1);
  char back = 0;
  CHECK(read(pipe_fds[0], &back, 1) == 1);
  CHECK(back == 'x');
  for (const int fd : {received, pipe_fds[0], pipe_fds[1], ends[0], ends[1]}) close(fd);
}
TEST_CASE("the descriptor helpers themselves: payload and fd arrive together") {
  run_checked(descriptor_helpers);
}

TEST_SUITE_END();
