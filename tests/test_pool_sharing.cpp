// Pools shared between real processes: hipMemPoolExportToShareableHandle / ImportFromShareableHandle
// and hipMemPoolExportPointer / ImportPointer. The other process is tests/pool_peer.cpp, started with
// fork+exec and found through HIPXX_POOL_PEER (meson sets it); the pool's descriptor travels to it
// with send_fd. Hostile inputs are tried in this process, which may import its own pools.
#include "pool_protocol.hpp"

#include <hipxx/fd_passing.hpp>
#include <hipxx/pool_sharing.hpp>

#include <doctest/doctest.h>

#include "support/device_pattern.hpp"
#include "support/processes.hpp"

#include <hip/hip_runtime_api.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using pool_test::Op;
using pool_test::Reply;
using pool_test::Request;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

std::string peer_path() { return test_support::peer_path("HIPXX_POOL_PEER"); }

using test_support::wait_exit_code;

class Peer {
 public:
  Peer() {
    std::array<int, 2> ends{};
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) == 0);
    pid_ = test_support::spawn({peer_path(), "serve", "3"}, ends[1]);
    close(ends[1]);
    socket_ = hipxx::FileDescriptor{ends[0]};
  }
  Peer(Peer const&) = delete;
  Peer& operator=(Peer const&) = delete;
  ~Peer() {
    if (pid_ <= 0) return;
    Request request{};
    request.op = Op::exit;
    Reply reply{};
    bool const said_goodbye = ipc_test::write_all(socket_.get(), &request, sizeof request) &&
                              ipc_test::read_all(socket_.get(), &reply, sizeof reply);
    (void)socket_.close();
    if (!said_goodbye) ::kill(pid_, SIGKILL);
    CHECK_MESSAGE(wait_exit_code(pid_) == 0, "the peer did not exit cleanly");
  }

  Reply call(Request const& request) {
    REQUIRE_MESSAGE(pid_ > 0, "the peer is gone");
    Reply reply{};
    REQUIRE_MESSAGE(ipc_test::write_all(socket_.get(), &request, sizeof request), "the peer hung up");
    REQUIRE_MESSAGE(ipc_test::read_all(socket_.get(), &reply, sizeof reply), "the peer died (crashed?) answering");
    return reply;
  }

  // hipMemPoolImportFromShareableHandle in the peer; returns its pool slot.
  std::uint32_t import_pool(hipxx::FileDescriptor const& fd) {
    Request request{};
    request.op = Op::import_pool;
    REQUIRE(ipc_test::write_all(socket_.get(), &request, sizeof request));
    REQUIRE(hipxx::send_fd(socket_, fd, std::uint64_t{0}));
    Reply reply{};
    REQUIRE(ipc_test::read_all(socket_.get(), &reply, sizeof reply));
    REQUIRE(reply.status == hipSuccess);
    return static_cast<std::uint32_t>(reply.value);
  }

  Reply import_pointer(std::uint32_t pool, hipMemPoolPtrExportData const& data) {
    Request request{};
    request.op = Op::import_pointer;
    request.slot = pool;
    request.data = data;
    return call(request);
  }

  // Imports and requires success; returns the pointer slot.
  std::uint32_t import_pointer_ok(std::uint32_t pool, hipMemPoolPtrExportData const& data) {
    Reply const reply = import_pointer(pool, data);
    REQUIRE(reply.status == hipSuccess);
    return static_cast<std::uint32_t>(reply.value);
  }

  Reply on_slot(Op op, std::uint32_t slot, std::uint64_t offset = 0, std::uint64_t length = 0, std::uint64_t seed = 0) {
    Request request{};
    request.op = op;
    request.slot = slot;
    request.offset = offset;
    request.length = length;
    request.seed = seed;
    return call(request);
  }

  std::uint64_t mismatches(std::uint32_t slot, std::uint64_t offset, std::uint64_t length, std::uint64_t seed) {
    Reply const reply = on_slot(Op::verify, slot, offset, length, seed);
    REQUIRE(reply.status == hipSuccess);
    return reply.value;
  }

  void fill(std::uint32_t slot, std::uint64_t offset, std::uint64_t length, std::uint64_t seed) {
    REQUIRE(on_slot(Op::fill, slot, offset, length, seed).status == hipSuccess);
  }

  Reply cpp_roundtrip(hipxx::FileDescriptor const& fd, hipMemPoolPtrExportData const& data, std::uint64_t length,
                      std::uint64_t seed) {
    Request request{};
    request.op = Op::cpp_roundtrip;
    request.length = length;
    request.seed = seed;
    REQUIRE(ipc_test::write_all(socket_.get(), &request, sizeof request));
    REQUIRE(hipxx::send_fd<hipMemPoolPtrExportData>(socket_, fd, data));
    Reply reply{};
    REQUIRE(ipc_test::read_all(socket_.get(), &reply, sizeof reply));
    return reply;
  }

  // The peer makes and exports a pool with two allocations (`first` and `second` bytes, patterns
  // `seed` and `seed` + 1); the pool's fd, and both allocations' export data.
  struct Exported {
    hipxx::FileDescriptor fd;
    pool_test::ExportedPair pair;
  };
  Exported export_pool(std::uint64_t first, std::uint64_t second, std::uint64_t seed) {
    Request request{};
    request.op = Op::export_pool;
    request.offset = first;
    request.length = second;
    request.seed = seed;
    REQUIRE(ipc_test::write_all(socket_.get(), &request, sizeof request));
    auto received = hipxx::recv_fd<pool_test::ExportedPair>(socket_);
    Reply reply{};
    REQUIRE(ipc_test::read_all(socket_.get(), &reply, sizeof reply));
    REQUIRE(reply.status == hipSuccess);
    REQUIRE(received);
    return {std::move(received.value().fd), received.value().payload};
  }

  // Stops the peer, and returns once it has stopped; then lets it go on.
  void stop() {
    REQUIRE(::kill(pid_, SIGSTOP) == 0);
    int status = 0;
    REQUIRE(waitpid(pid_, &status, WUNTRACED) == pid_);
    REQUIRE(WIFSTOPPED(status));
  }
  void go_on() {
    REQUIRE(::kill(pid_, SIGCONT) == 0);
    int status = 0;
    REQUIRE(waitpid(pid_, &status, WCONTINUED) == pid_);
  }

  void kill() {
    REQUIRE(::kill(pid_, SIGKILL) == 0);
    CHECK(wait_exit_code(pid_) == 128 + SIGKILL);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  hipxx::FileDescriptor socket_;
};

using test_support::fill;
using test_support::mismatches;

// A pool made with the given handle type, destroyed at scope exit.
class Pool {
 public:
  explicit Pool(hipMemAllocationHandleType type = hipMemHandleTypePosixFileDescriptor) {
    hipMemPoolProps props{};
    props.allocType = hipMemAllocationTypePinned;
    props.handleTypes = type;
    props.location.type = hipMemLocationTypeDevice;
    props.location.id = 0;
    REQUIRE(hipMemPoolCreate(&pool_, &props) == hipSuccess);
  }
  Pool(Pool const&) = delete;
  Pool& operator=(Pool const&) = delete;
  ~Pool() { CHECK(hipMemPoolDestroy(pool_) == hipSuccess); }

  [[nodiscard]] hipMemPool_t get() const noexcept { return pool_; }

  void* allocate(std::size_t bytes) const {
    void* pointer = nullptr;
    REQUIRE(hipMallocFromPoolAsync(&pointer, bytes, pool_, nullptr) == hipSuccess);
    return pointer;
  }

  [[nodiscard]] hipxx::FileDescriptor export_fd() const {
    int fd = -1;
    REQUIRE(hipMemPoolExportToShareableHandle(&fd, pool_, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
    REQUIRE(fd >= 0);
    return hipxx::FileDescriptor{fd};
  }

  [[nodiscard]] std::uint64_t reserved() const {
    std::uint64_t bytes = 0;
    REQUIRE(hipMemPoolGetAttribute(pool_, hipMemPoolAttrReservedMemCurrent, &bytes) == hipSuccess);
    return bytes;
  }

 private:
  hipMemPool_t pool_ = nullptr;
};

hipMemPoolPtrExportData export_data(void* pointer) {
  hipMemPoolPtrExportData data{};
  REQUIRE(hipMemPoolExportPointer(&data, pointer) == hipSuccess);
  return data;
}

void* as_handle(int fd) { return reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)); }

hipError_t import_fd(int fd, hipMemPool_t* pool) {
  return hipMemPoolImportFromShareableHandle(pool, as_handle(fd), hipMemHandleTypePosixFileDescriptor, 0);
}

// A pool of this same process, imported: hostile inputs need an imported pool to aim at.
hipMemPool_t import_here(Pool const& pool) {
  auto const fd = pool.export_fd();
  hipMemPool_t imported = nullptr;
  REQUIRE(import_fd(fd.get(), &imported) == hipSuccess);
  return imported;
}

// Open descriptors of this process; with `sockets_only`, those that are sockets.
std::size_t open_fd_count(bool sockets_only = false) {
  DIR* const directory = opendir("/proc/self/fd");
  if (directory == nullptr) return SIZE_MAX;  // never equal to a real count
  std::size_t count = 0;
  while (dirent const* entry = readdir(directory)) {
    if (entry->d_name[0] == '.' || std::atoi(entry->d_name) == dirfd(directory)) continue;
    std::array<char, 64> target{};
    std::string const link = std::string{"/proc/self/fd/"} + entry->d_name;
    ssize_t const length = readlink(link.c_str(), target.data(), target.size() - 1);
    count += !sockets_only || (length > 0 && std::string_view{target.data()}.starts_with("socket:")) ? 1 : 0;
  }
  closedir(directory);
  return count;
}

// Bytes this end sent that its peer has not read yet.
int unread_bytes(int socket) {
  int bytes = -1;
  return ioctl(socket, SIOCOUTQ, &bytes) == 0 ? bytes : -1;
}

// The broker closes its end of a socket when it sees the hang-up, on its own thread: wait for that
// (a bound on a condition, not a guess at a duration).
bool eventually(std::function<bool()> const& condition) {
  auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  return true;
}

// Sockets the process holds before it exports any pool: none on the host backend, the driver's own
// on the CUDA backend (taken after the runtime starts, before the first test case runs).
std::size_t sockets_before_any_export() {
  static std::size_t const count = [] {
    (void)hipInit(0);
    return open_fd_count(true);
  }();
  return count;
}
[[maybe_unused]] std::size_t const kSocketsAtStart = sockets_before_any_export();

// Starts the broker (its eventfd stays for the life of the process) and waits until it has closed
// the sockets of the round trip, so that a count taken now is a baseline.
std::size_t broker_baseline() {
  {
    Pool warm;
    hipMemPool_t imported = import_here(warm);
    REQUIRE(hipMemPoolDestroy(imported) == hipSuccess);
  }
  // Between tests this process holds no socket of its own, so every socket beyond those it started
  // with is one the broker has yet to close (this round trip's, or an earlier test's): wait until
  // there are none. The broker's eventfd (no socket) stays for good.
  REQUIRE(eventually([] { return open_fd_count(true) == sockets_before_any_export(); }));
  return open_fd_count();
}

}  // namespace

TEST_CASE("a peer reads what the exporter wrote, and the exporter sees what the peer wrote") {
  Pool pool;
  void* const pointer = pool.allocate(1 * kMiB);
  fill(pointer, 0, 1 * kMiB, 1);
  Peer peer;
  std::uint32_t const imported_pool = peer.import_pool(pool.export_fd());
  std::uint32_t const slot = peer.import_pointer_ok(imported_pool, export_data(pointer));
  CHECK(peer.mismatches(slot, 0, 1 * kMiB, 1) == 0);

  peer.fill(slot, 4 * kKiB, 64 * kKiB, 2);
  CHECK(mismatches(pointer, 4 * kKiB, 64 * kKiB, 2) == 0);
  CHECK(mismatches(pointer, 0, 4 * kKiB, 1) == 0);
  CHECK(mismatches(pointer, 68 * kKiB, 1 * kMiB - 68 * kKiB, 1) == 0);

  // The documented order: the importer frees first.
  CHECK(peer.on_slot(Op::free, slot).status == hipSuccess);
  CHECK(peer.on_slot(Op::free, slot).status == hipErrorInvalidValue);  // freed already
  CHECK(hipFree(pointer) == hipSuccess);
}

TEST_CASE("an imported pool refuses hipMallocFromPoolAsync and hipDeviceSetMemPool") {
  Pool pool;
  Peer peer;
  std::uint32_t const imported_pool = peer.import_pool(pool.export_fd());
  Reply const reply = peer.on_slot(Op::refuse, imported_pool);
  CHECK(reply.status == hipErrorInvalidValue);
  CHECK(reply.second == hipErrorInvalidValue);

  // The same in this process, with the other pool calls that do apply to an imported pool.
  hipMemPool_t const here = import_here(pool);
  void* pointer = nullptr;
  CHECK(hipMallocFromPoolAsync(&pointer, 256, here, nullptr) == hipErrorInvalidValue);
  CHECK(hipDeviceSetMemPool(0, here) == hipErrorInvalidValue);
  std::uint64_t threshold = 1;
  CHECK(hipMemPoolSetAttribute(here, hipMemPoolAttrReleaseThreshold, &threshold) == hipErrorInvalidValue);
  CHECK(hipMemPoolGetAttribute(here, hipMemPoolAttrReservedMemCurrent, &threshold) == hipSuccess);
  CHECK(threshold == 0);
  hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
  hipMemLocation location{hipMemLocationTypeDevice, 0};
  CHECK(hipMemPoolGetAccess(&flags, here, &location) == hipSuccess);
  CHECK(flags == hipMemAccessFlagsProtReadWrite);
  CHECK(hipMemPoolTrimTo(here, 0) == hipSuccess);
  hipMemPool_t current = nullptr;
  CHECK(hipDeviceGetMemPool(&current, 0) == hipSuccess);
  CHECK(current != here);
  CHECK(hipMemPoolDestroy(here) == hipSuccess);
  CHECK(hipMemPoolDestroy(here) == hipErrorInvalidValue);
}

TEST_CASE("a pointer spanning two chunks, and one exported after the pool mapped another chunk") {
  Pool pool;
  void* const small = pool.allocate(256);
  std::uint64_t const chunk = pool.reserved();  // one chunk is mapped now
  REQUIRE(chunk > 0);
  fill(small, 0, 256, 3);
  Peer peer;
  std::uint32_t const imported_pool = peer.import_pool(pool.export_fd());
  std::uint32_t const small_slot = peer.import_pointer_ok(imported_pool, export_data(small));
  CHECK(peer.mismatches(small_slot, 0, 256, 3) == 0);
  CHECK(peer.on_slot(Op::reserved_bytes, imported_pool).value == chunk);

  // Carved right after `small`: it runs from chunk 0 well into chunk 1, which the pool maps only
  // now, after the peer imported the pool.
  void* const spanning = pool.allocate(chunk + 16 * kKiB);
  CHECK(pool.reserved() == 2 * chunk);
  std::size_t const boundary = chunk - (static_cast<unsigned char*>(spanning) - static_cast<unsigned char*>(small));
  fill(spanning, boundary - 8 * kKiB, 16 * kKiB, 4);
  std::uint32_t const spanning_slot = peer.import_pointer_ok(imported_pool, export_data(spanning));
  CHECK(peer.on_slot(Op::reserved_bytes, imported_pool).value == 2 * chunk);
  CHECK(peer.mismatches(spanning_slot, boundary - 8 * kKiB, 16 * kKiB, 4) == 0);
  peer.fill(spanning_slot, boundary - 4 * kKiB, 8 * kKiB, 5);
  CHECK(mismatches(spanning, boundary - 4 * kKiB, 8 * kKiB, 5) == 0);

  // Chunk 0 stays mapped in the peer while `small` is imported; chunk 1 goes with `spanning`.
  CHECK(peer.on_slot(Op::free, spanning_slot).status == hipSuccess);
  CHECK(peer.on_slot(Op::reserved_bytes, imported_pool).value == chunk);
  CHECK(peer.mismatches(small_slot, 0, 256, 3) == 0);
  CHECK(peer.on_slot(Op::free_async, small_slot).status == hipSuccess);
  CHECK(peer.on_slot(Op::reserved_bytes, imported_pool).value == 0);
  CHECK(hipFree(spanning) == hipSuccess);
  CHECK(hipFree(small) == hipSuccess);
}

TEST_CASE("free ordering: the importer frees first, the exporter reuses the memory, the peer imports it again") {
  Pool pool;
  void* const first = pool.allocate(64 * kKiB);
  fill(first, 0, 64 * kKiB, 6);
  Peer peer;
  std::uint32_t const imported_pool = peer.import_pool(pool.export_fd());
  Reply const imported = peer.import_pointer(imported_pool, export_data(first));
  REQUIRE(imported.status == hipSuccess);
  auto const slot = static_cast<std::uint32_t>(imported.value);
  CHECK(peer.on_slot(Op::free_async, slot).status == hipSuccess);
  CHECK(hipFreeAsync(first, nullptr) == hipSuccess);
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);

  void* const second = pool.allocate(64 * kKiB);
  CHECK(second == first);  // the same block, reused
  fill(second, 0, 64 * kKiB, 7);
  Reply const again = peer.import_pointer(imported_pool, export_data(second));
  REQUIRE(again.status == hipSuccess);
  CHECK(again.address == imported.address);  // the same offset in the same mirror
  CHECK(peer.mismatches(static_cast<std::uint32_t>(again.value), 0, 64 * kKiB, 7) == 0);
  CHECK(peer.on_slot(Op::free, static_cast<std::uint32_t>(again.value)).status == hipSuccess);
  CHECK(hipFree(second) == hipSuccess);
}

TEST_CASE("importing one pointer twice gives the same address, and each import takes one free") {
  Pool pool;
  void* const pointer = pool.allocate(4 * kKiB);
  fill(pointer, 0, 4 * kKiB, 8);
  Peer peer;
  std::uint32_t const imported_pool = peer.import_pool(pool.export_fd());
  Reply const once = peer.import_pointer(imported_pool, export_data(pointer));
  Reply const twice = peer.import_pointer(imported_pool, export_data(pointer));
  REQUIRE(once.status == hipSuccess);
  REQUIRE(twice.status == hipSuccess);
  CHECK(once.address == twice.address);
  auto const first_slot = static_cast<std::uint32_t>(once.value);
  auto const second_slot = static_cast<std::uint32_t>(twice.value);
  CHECK(peer.on_slot(Op::free, first_slot).status == hipSuccess);
  CHECK(peer.mismatches(second_slot, 0, 4 * kKiB, 8) == 0);  // still mapped for the second import
  CHECK(peer.on_slot(Op::free, second_slot).status == hipSuccess);
  CHECK(peer.on_slot(Op::free, second_slot).status == hipErrorInvalidValue);
  CHECK(peer.on_slot(Op::reserved_bytes, imported_pool).value == 0);
  CHECK(hipFree(pointer) == hipSuccess);
}

namespace {
struct CallbackFree {
  void* pointer = nullptr;
  hipError_t result = hipErrorUnknown;
};
}  // namespace

TEST_CASE("hipFree of an imported pointer in a callback on its device's stream: hipErrorIllegalState, not a hang") {
  Pool pool;
  void* const pointer = pool.allocate(4 * kKiB);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  hipMemPool_t const imported = import_here(pool);
  hipMemPoolPtrExportData data = export_data(pointer);
  void* mirror = nullptr;
  REQUIRE(hipMemPoolImportPointer(&mirror, imported, &data) == hipSuccess);
  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreate(&stream) == hipSuccess);
  CallbackFree freeing{.pointer = mirror};
  REQUIRE(hipLaunchHostFunc(
              stream,
              [](void* work) {
                auto* const free_call = static_cast<CallbackFree*>(work);
                free_call->result = hipFree(free_call->pointer);
              },
              &freeing) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(freeing.result == hipErrorIllegalState);
  // The refused free left the import as it was: its one free is still owed, and works here.
  CHECK(hipFree(mirror) == hipSuccess);
  CHECK(hipFree(mirror) == hipErrorInvalidValue);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
  CHECK(hipFree(pointer) == hipSuccess);
}

TEST_CASE("hipFree of an imported pointer waits for work queued on the calling thread's device, a peer of the pool's" *
          doctest::test_suite("devices-2")) {
  Pool pool;
  hipMemAccessDesc const peer_access{{hipMemLocationTypeDevice, 1}, hipMemAccessFlagsProtReadWrite};
  REQUIRE(hipMemPoolSetAccess(pool.get(), &peer_access, 1) == hipSuccess);
  constexpr std::size_t kBytes = 4 * kMiB;
  void* const pointer = pool.allocate(kBytes);
  REQUIRE(hipMemset(pointer, 0x5A, kBytes) == hipSuccess);
  hipMemPool_t const imported = import_here(pool);
  REQUIRE(hipMemPoolSetAccess(imported, &peer_access, 1) == hipSuccess);
  hipMemPoolPtrExportData data = export_data(pointer);
  void* mirror = nullptr;
  REQUIRE(hipMemPoolImportPointer(&mirror, imported, &data) == hipSuccess);

  REQUIRE(hipSetDevice(1) == hipSuccess);
  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreate(&stream) == hipSuccess);
  std::vector<unsigned char> host(kBytes, 0);
  // The copy waits behind a slow callback, so the free comes while it is still queued.
  REQUIRE(hipLaunchHostFunc(
              stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds{200}); }, nullptr) ==
          hipSuccess);
  REQUIRE(hipMemcpyAsync(host.data(), mirror, kBytes, hipMemcpyDeviceToHost, stream) == hipSuccess);
  CHECK(hipFree(mirror) == hipSuccess);
  CHECK(hipStreamSynchronize(stream) == hipSuccess);
  CHECK(std::all_of(host.begin(), host.end(), [](unsigned char byte) { return byte == 0x5A; }));
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  REQUIRE(hipSetDevice(0) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
  CHECK(hipFree(pointer) == hipSuccess);
}

TEST_CASE("an imported pool destroyed with pointers out: they stay usable until freed") {
  Pool pool;
  void* const pointer = pool.allocate(4 * kKiB);
  fill(pointer, 0, 4 * kKiB, 9);
  Peer peer;
  std::uint32_t const imported_pool = peer.import_pool(pool.export_fd());
  std::uint32_t const slot = peer.import_pointer_ok(imported_pool, export_data(pointer));
  CHECK(peer.on_slot(Op::destroy_pool, imported_pool).status == hipSuccess);
  CHECK(peer.on_slot(Op::destroy_pool, imported_pool).status == hipErrorInvalidValue);
  CHECK(peer.mismatches(slot, 0, 4 * kKiB, 9) == 0);
  CHECK(peer.on_slot(Op::free, slot).status == hipSuccess);
  CHECK(hipFree(pointer) == hipSuccess);
}

TEST_CASE("one exported descriptor serves two peers, and the exporter may destroy its pool afterwards") {
  void* pointer = nullptr;
  hipxx::FileDescriptor fd;
  Peer first;
  Peer second;
  {
    Pool pool;
    pointer = pool.allocate(8 * kKiB);
    fill(pointer, 0, 8 * kKiB, 10);
    fd = pool.export_fd();
    auto const data = export_data(pointer);
    std::uint32_t const first_pool = first.import_pool(fd);
    std::uint32_t const second_pool = second.import_pool(fd);
    std::uint32_t const first_slot = first.import_pointer_ok(first_pool, data);
    std::uint32_t const second_slot = second.import_pointer_ok(second_pool, data);
    CHECK(first.mismatches(first_slot, 0, 8 * kKiB, 10) == 0);
    second.fill(second_slot, 0, 4 * kKiB, 11);
    CHECK(first.mismatches(first_slot, 0, 4 * kKiB, 11) == 0);
    CHECK(first.on_slot(Op::free, first_slot).status == hipSuccess);
    CHECK(second.on_slot(Op::free, second_slot).status == hipSuccess);
  }
  // Destroyed with an allocation out: the pool lives on, and so does its export.
  std::uint32_t const late_pool = first.import_pool(fd);
  CHECK(first.on_slot(Op::reserved_bytes, late_pool).status == hipSuccess);
  CHECK(hipFree(pointer) == hipSuccess);
  // Now it is gone: the broker refuses to describe it.
  hipMemPool_t refused = nullptr;
  CHECK(import_fd(fd.get(), &refused) == hipErrorInvalidValue);
}

namespace {

// What a child made by fork() checks, reported through its exit status (doctest belongs to the
// parent): an import through a pool imported before the fork, then a pool of its own exported and
// imported in the child itself.
// Imports and frees a pointer of `pool` `rounds` times, checking its first byte; how many failed.
int import_rounds(hipMemPool_t pool, hipMemPoolPtrExportData data, std::uint64_t seed, int rounds) {
  int failed = 0;
  for (int round = 0; round < rounds; ++round) {
    void* mirror = nullptr;
    unsigned char seen = 0;
    bool const good = hipMemPoolImportPointer(&mirror, pool, &data) == hipSuccess &&
                      hipMemcpy(&seen, mirror, 1, hipMemcpyDeviceToHost) == hipSuccess &&
                      seen == ipc_test::pattern(seed, 0) && hipFree(mirror) == hipSuccess;
    failed += good ? 0 : 1;
  }
  return failed;
}

constexpr int kImportRounds = 300;

// In a child made by fork(), without doctest: a new pool whose first `bytes` hold `value`, exported
// (the fd and the pointer's export data); false where any step fails.
bool export_filled_pool(std::size_t bytes, unsigned char value, int* fd, hipMemPoolPtrExportData* data) {
  hipMemPoolProps props{};
  props.allocType = hipMemAllocationTypePinned;
  props.handleTypes = hipMemHandleTypePosixFileDescriptor;
  props.location = {hipMemLocationTypeDevice, 0};
  hipMemPool_t pool = nullptr;
  hipStream_t stream = nullptr;
  void* block = nullptr;
  return hipMemPoolCreate(&pool, &props) == hipSuccess &&
         hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess &&
         hipMallocFromPoolAsync(&block, bytes, pool, stream) == hipSuccess &&
         hipMemsetAsync(block, value, bytes, stream) == hipSuccess && hipStreamSynchronize(stream) == hipSuccess &&
         hipMemPoolExportToShareableHandle(fd, pool, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess &&
         hipMemPoolExportPointer(data, block) == hipSuccess;
}

int child_shares_pools(hipMemPool_t inherited, hipMemPoolPtrExportData data, std::uint64_t seed) {
  // While the parent imports through the same pool: each process's requests get its own replies.
  if (import_rounds(inherited, data, seed, kImportRounds) != 0) return 10;
  int fd = -1;
  hipMemPoolPtrExportData own_data{};
  if (!export_filled_pool(1 * kMiB, 0x3C, &fd, &own_data)) return 13;
  hipMemPool_t again = nullptr;
  if (import_fd(fd, &again) != hipSuccess) return 15;
  void* own_mirror = nullptr;
  if (hipMemPoolImportPointer(&own_mirror, again, &own_data) != hipSuccess) return 16;
  unsigned char seen = 0;
  if (hipMemcpy(&seen, own_mirror, 1, hipMemcpyDeviceToHost) != hipSuccess || seen != 0x3C) return 17;
  return 0;
}

}  // namespace

// ThreadSanitizer cannot follow threads started in a child of a threaded process (it takes a new
// thread for one of the parent's that it still counts), and this child starts a broker and a
// stream: the case runs in the plain and AddressSanitizer builds only.
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

TEST_CASE("a child made by fork() exports pools of its own and imports through a pool it inherited" *
          doctest::test_suite("fork-child") * doctest::skip(kThreadSanitizer)) {
  Pool pool;
  hipStream_t stream = nullptr;  // not the null stream, which the child could not use after that
  REQUIRE(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess);
  void* pointer = nullptr;
  REQUIRE(hipMallocFromPoolAsync(&pointer, 1 * kMiB, pool.get(), stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  fill(pointer, 0, 1 * kMiB, 31);
  // One that runs into the pool's second chunk: the child asks for other chunks than the parent.
  std::uint64_t const chunk = pool.reserved();
  void* spanning = nullptr;
  REQUIRE(hipMallocFromPoolAsync(&spanning, chunk, pool.get(), stream) == hipSuccess);
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  fill(spanning, 0, 1 * kKiB, 32);
  auto const fd = pool.export_fd();  // the parent's broker runs from here on
  hipMemPool_t inherited = nullptr;
  REQUIRE(import_fd(fd.get(), &inherited) == hipSuccess);
  hipMemPoolPtrExportData data = export_data(pointer);
  void* mirror = nullptr;
  REQUIRE(hipMemPoolImportPointer(&mirror, inherited, &data) == hipSuccess);  // its channel in use
  REQUIRE(hipFree(mirror) == hipSuccess);

  pid_t const child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(child_shares_pools(inherited, export_data(spanning), 32));
  CHECK(import_rounds(inherited, data, 31, kImportRounds) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  // The parent's own channel still answers it alone.
  REQUIRE(hipMemPoolImportPointer(&mirror, inherited, &data) == hipSuccess);
  CHECK(mismatches(mirror, 0, 1 * kMiB, 31) == 0);
  CHECK(hipFree(mirror) == hipSuccess);
  CHECK(hipMemPoolDestroy(inherited) == hipSuccess);
  CHECK(hipFreeAsync(pointer, stream) == hipSuccess);
  CHECK(hipFreeAsync(spanning, stream) == hipSuccess);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("a peer killed with SIGKILL: the exporter keeps working and its descriptors return to the baseline") {
  std::size_t const baseline = broker_baseline();
  {
    Pool pool;
    void* const pointer = pool.allocate(1 * kMiB);
    fill(pointer, 0, 1 * kMiB, 12);
    // What the pool itself holds now (on the host backend its mapped chunk's memfd; on CUDA nothing).
    std::size_t const with_pool = open_fd_count();
    {
      Peer peer;
      std::uint32_t const imported_pool = peer.import_pool(pool.export_fd());
      std::uint32_t const slot = peer.import_pointer_ok(imported_pool, export_data(pointer));
      CHECK(peer.mismatches(slot, 0, 1 * kMiB, 12) == 0);
      peer.kill();
    }
    // The exported descriptor was closed here right after sending; the peer's copies and its private
    // channel died with it. The broker closes its ends; the pool's own chunk stays.
    CHECK(eventually([&] { return open_fd_count() == with_pool; }));
    fill(pointer, 0, 1 * kMiB, 13);
    CHECK(mismatches(pointer, 0, 1 * kMiB, 13) == 0);
    void* const more = pool.allocate(2 * kMiB);
    CHECK(hipFreeAsync(more, nullptr) == hipSuccess);
    // And it can still be shared.
    Peer next;
    std::uint32_t const again = next.import_pool(pool.export_fd());
    std::uint32_t const slot = next.import_pointer_ok(again, export_data(pointer));
    CHECK(next.mismatches(slot, 0, 1 * kMiB, 13) == 0);
    CHECK(next.on_slot(Op::free, slot).status == hipSuccess);
    CHECK(hipFree(pointer) == hipSuccess);
  }
  CHECK(eventually([&] { return open_fd_count() == baseline; }));
}

TEST_CASE("exporting: only a live allocation of a pool made for the POSIX fd handle type") {
  Pool exportable;
  Pool plain{hipMemHandleTypeNone};
  int fd = -1;
  CHECK(hipMemPoolExportToShareableHandle(&fd, plain.get(), hipMemHandleTypePosixFileDescriptor, 0) ==
        hipErrorInvalidValue);
  hipMemPool_t default_pool = nullptr;
  REQUIRE(hipDeviceGetDefaultMemPool(&default_pool, 0) == hipSuccess);
  CHECK(hipMemPoolExportToShareableHandle(&fd, default_pool, hipMemHandleTypePosixFileDescriptor, 0) ==
        hipErrorInvalidValue);
  // HIP documents hipSuccess, hipErrorInvalidValue and hipErrorOutOfMemory only for the export.
  CHECK(hipMemPoolExportToShareableHandle(&fd, exportable.get(), hipMemHandleTypeWin32, 0) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportToShareableHandle(&fd, exportable.get(), hipMemHandleTypeWin32Kmt, 0) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportToShareableHandle(&fd, exportable.get(), hipMemHandleTypeNone, 0) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportToShareableHandle(&fd, exportable.get(), hipMemHandleTypePosixFileDescriptor, 1) ==
        hipErrorInvalidValue);
  CHECK(hipMemPoolExportToShareableHandle(nullptr, exportable.get(), hipMemHandleTypePosixFileDescriptor, 0) ==
        hipErrorInvalidValue);
  CHECK(hipMemPoolExportToShareableHandle(&fd, nullptr, hipMemHandleTypePosixFileDescriptor, 0) ==
        hipErrorInvalidValue);
  CHECK(fd == -1);  // nothing was written by a refused call
  hipMemPool_t const imported = import_here(exportable);
  CHECK(hipMemPoolExportToShareableHandle(&fd, imported, hipMemHandleTypePosixFileDescriptor, 0) ==
        hipErrorInvalidValue);

  hipMemPoolPtrExportData data{};
  void* const live = exportable.allocate(4 * kKiB);
  void* const unshareable = plain.allocate(4 * kKiB);
  void* linear = nullptr;
  REQUIRE(hipMalloc(&linear, 4 * kKiB) == hipSuccess);
  int on_stack = 0;
  CHECK(hipMemPoolExportPointer(&data, unshareable) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportPointer(&data, linear) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportPointer(&data, &on_stack) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportPointer(&data, static_cast<unsigned char*>(live) + 256) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportPointer(&data, nullptr) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportPointer(nullptr, live) == hipErrorInvalidValue);
  CHECK(hipMemPoolExportPointer(&data, live) == hipSuccess);
  CHECK(hipFree(live) == hipSuccess);
  CHECK(hipMemPoolExportPointer(&data, live) == hipErrorInvalidValue);  // freed
  CHECK(hipFree(unshareable) == hipSuccess);
  CHECK(hipFree(linear) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
}

TEST_CASE("importing a pool: descriptors that are no pool handle are refused") {
  hipMemPool_t pool = nullptr;
  SUBCASE("closed, negative and huge descriptors") {
    std::array<int, 2> ends{};
    REQUIRE(pipe2(ends.data(), O_CLOEXEC) == 0);
    close(ends[0]);
    close(ends[1]);
    CHECK(import_fd(ends[0], &pool) == hipErrorInvalidValue);
    CHECK(import_fd(-1, &pool) == hipErrorInvalidValue);
    CHECK(hipMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(std::uintptr_t{1} << 40),
                                              hipMemHandleTypePosixFileDescriptor, 0) == hipErrorInvalidValue);
  }
  SUBCASE("a regular file, a pipe and a memfd") {
    hipxx::FileDescriptor const file{open("/proc/self/exe", O_RDONLY | O_CLOEXEC)};
    CHECK(import_fd(file.get(), &pool) == hipErrorInvalidValue);
    std::array<int, 2> ends{};
    REQUIRE(pipe2(ends.data(), O_CLOEXEC) == 0);
    hipxx::FileDescriptor const read_end{ends[0]};
    hipxx::FileDescriptor const write_end{ends[1]};
    CHECK(import_fd(write_end.get(), &pool) == hipErrorInvalidValue);
    hipxx::FileDescriptor const memory{memfd_create("not-a-pool", MFD_CLOEXEC)};
    CHECK(import_fd(memory.get(), &pool) == hipErrorInvalidValue);
  }
  SUBCASE("sockets that lead to no broker") {
    std::array<int, 2> ends{};
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) == 0);
    hipxx::FileDescriptor const stream_a{ends[0]};
    hipxx::FileDescriptor const stream_b{ends[1]};
    CHECK(import_fd(stream_a.get(), &pool) == hipErrorInvalidValue);
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends.data()) == 0);
    hipxx::FileDescriptor const lonely{ends[0]};
    close(ends[1]);  // nobody on the other end
    CHECK(import_fd(lonely.get(), &pool) == hipErrorInvalidValue);
  }
  SUBCASE("wrong handle types and flags") {
    Pool exportable;
    auto const fd = exportable.export_fd();
    CHECK(hipMemPoolImportFromShareableHandle(&pool, as_handle(fd.get()), hipMemHandleTypeNone, 0) ==
          hipErrorInvalidValue);
    CHECK(hipMemPoolImportFromShareableHandle(&pool, as_handle(fd.get()), hipMemHandleTypeWin32, 0) ==
          hipErrorInvalidValue);
    CHECK(hipMemPoolImportFromShareableHandle(&pool, as_handle(fd.get()), hipMemHandleTypePosixFileDescriptor, 1) ==
          hipErrorInvalidValue);
    CHECK(hipMemPoolImportFromShareableHandle(nullptr, as_handle(fd.get()), hipMemHandleTypePosixFileDescriptor, 0) ==
          hipErrorInvalidValue);
    // The refusals left the handle as it was.
    CHECK(import_fd(fd.get(), &pool) == hipSuccess);
    CHECK(hipMemPoolDestroy(pool) == hipSuccess);
  }
}

namespace {

// Answers one request on `socket` with `reply` (and `fd` attached unless it is -1), then keeps the
// socket until destroyed: a broker impostor.
class FakeBroker {
 public:
  FakeBroker(hipxx::FileDescriptor socket, std::vector<unsigned char> reply, int fd = -1)
      : socket_(std::move(socket)), thread_([this, reply = std::move(reply), fd] { answer(reply, fd); }) {}
  FakeBroker(FakeBroker const&) = delete;
  FakeBroker& operator=(FakeBroker const&) = delete;
  ~FakeBroker() { thread_.join(); }

 private:
  void answer(std::vector<unsigned char> const& reply, int fd) {
    std::array<unsigned char, 256> request{};
    if (recv(socket_.get(), request.data(), request.size(), 0) <= 0) return;
    if (fd < 0) {
      (void)send(socket_.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
    } else {
      (void)hipxx::detail::send_fd_bytes(socket_.get(), fd,
                                         std::span{reinterpret_cast<std::byte const*>(reply.data()), reply.size()});
    }
  }

  hipxx::FileDescriptor socket_;
  std::thread thread_;
};

// Our broker's reply layout (lib/core/pool_wire.hpp), written out so the impostor can be nearly right.
struct WireReply {
  std::uint32_t magic = 0x48505250;
  std::int32_t status = 0;
  std::array<std::uint64_t, 2> token{1, 2};
  std::uint64_t chunk_bytes = 0;
  std::uint64_t virtual_bytes = 0;
  std::int32_t device = 0;
  std::uint32_t reserved = 0;
  std::uint64_t chunk = 0;
  std::uint64_t reply_chunk_bytes = 0;
};

// And its request layout: an open-channel request, as an import sends one on an exported descriptor.
struct WireRequest {
  std::uint32_t magic = 0x48505251;
  std::uint32_t op = 1;  // open a channel
  std::array<std::uint64_t, 2> token{};
  std::uint64_t chunk = 0;
};

std::vector<unsigned char> bytes_of(WireReply const& reply) {
  std::vector<unsigned char> bytes(sizeof reply);
  std::memcpy(bytes.data(), &reply, sizeof reply);
  return bytes;
}

std::pair<hipxx::FileDescriptor, hipxx::FileDescriptor> seqpacket_pair() {
  std::array<int, 2> ends{};
  REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends.data()) == 0);
  return {hipxx::FileDescriptor{ends[0]}, hipxx::FileDescriptor{ends[1]}};
}

hipError_t import_from_impostor(std::vector<unsigned char> reply, int fd = -1) {
  auto [ours, theirs] = seqpacket_pair();
  FakeBroker const impostor{std::move(theirs), std::move(reply), fd};
  hipMemPool_t pool = nullptr;
  return import_fd(ours.get(), &pool);
}

}  // namespace

TEST_CASE("importing a pool: impostor brokers and their garbage are refused") {
  std::vector<unsigned char> const garbage(17, 0xA5);
  CHECK(import_from_impostor(garbage) == hipErrorInvalidValue);
  CHECK(import_from_impostor(std::vector<unsigned char>(sizeof(WireReply), 0)) == hipErrorInvalidValue);
  hipxx::FileDescriptor const file{open("/proc/self/exe", O_RDONLY | O_CLOEXEC)};
  WireReply plausible;
  plausible.chunk_bytes = 32 * kMiB;
  plausible.virtual_bytes = 64 * kMiB;
  // A plausible layout, but what comes with it is a file, not a channel.
  CHECK(import_from_impostor(bytes_of(plausible), file.get()) == hipErrorInvalidValue);
  // A channel, but layouts no pool has.
  auto [channel, channel_peer] = seqpacket_pair();
  for (auto [chunk, total] : {std::pair<std::uint64_t, std::uint64_t>{0, 64 * kMiB},
                              {32 * kMiB, 48 * kMiB},
                              {2 * kMiB, std::uint64_t{1} << 62},
                              {4096 + 1, 2 * (4096 + 1)}}) {
    WireReply absurd = plausible;
    absurd.chunk_bytes = chunk;
    absurd.virtual_bytes = total;
    CHECK(import_from_impostor(bytes_of(absurd), channel.get()) == hipErrorInvalidValue);
  }
  WireReply elsewhere = plausible;
  elsewhere.device = 7;
  CHECK(import_from_impostor(bytes_of(elsewhere), channel.get()) == hipErrorInvalidValue);
  WireReply refusing = plausible;
  refusing.status = hipErrorOutOfMemory;
  CHECK(import_from_impostor(bytes_of(refusing)) == hipErrorOutOfMemory);
}

TEST_CASE("importing a pointer from an impostor's pool: wrong chunks are refused, nothing is mapped") {
  auto [ours, theirs] = seqpacket_pair();
  auto [channel, channel_peer] = seqpacket_pair();
  WireReply description;
  description.chunk_bytes = 32 * kMiB;
  description.virtual_bytes = 64 * kMiB;
  hipMemPool_t pool = nullptr;
  {
    FakeBroker const impostor{std::move(theirs), bytes_of(description), channel.get()};
    REQUIRE(import_fd(ours.get(), &pool) == hipSuccess);  // nothing shows it is an impostor yet
  }
  channel.close().value();
  struct {
    std::uint64_t magic = 0x6869707878707470;
    std::array<std::uint64_t, 2> token{1, 2};
    std::uint64_t offset = 0;
    std::uint64_t size = 4096;
    std::array<std::uint64_t, 3> reserved{};
  } wanted;
  hipMemPoolPtrExportData data{};
  std::memcpy(&data, &wanted, sizeof data);
  void* pointer = nullptr;
  {
    // A memfd of the wrong size for a chunk: the mapping refuses it.
    hipxx::FileDescriptor const small{memfd_create("small", MFD_CLOEXEC)};
    REQUIRE(ftruncate(small.get(), 4096) == 0);
    WireReply chunk_reply;
    chunk_reply.reply_chunk_bytes = 32 * kMiB;
    FakeBroker const impostor{std::move(channel_peer), bytes_of(chunk_reply), small.get()};
    CHECK(hipMemPoolImportPointer(&pointer, pool, &data) == hipErrorInvalidValue);
  }
  // Its channel is gone now: every later import fails, at once.
  CHECK(hipMemPoolImportPointer(&pointer, pool, &data) == hipErrorInvalidValue);
  std::uint64_t reserved = 1;
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &reserved) == hipSuccess);
  CHECK(reserved == 0);
  CHECK(hipMemPoolDestroy(pool) == hipSuccess);
}

TEST_CASE("importing a pointer: export data that names nothing in the pool is refused") {
  Pool pool;
  void* const live = pool.allocate(4 * kKiB);
  hipMemPool_t const imported = import_here(pool);
  hipMemPoolPtrExportData const good = export_data(live);
  void* pointer = nullptr;

  std::mt19937_64 random{20240611};
  for (int round = 0; round < 200; ++round) {
    hipMemPoolPtrExportData junk{};
    for (unsigned char& byte : junk.reserved) byte = static_cast<unsigned char>(random());
    CHECK(hipMemPoolImportPointer(&pointer, imported, &junk) == hipErrorInvalidValue);
  }
  // One field wrong at a time: the magic, the token, the offset, the size, the reserved words.
  for (std::size_t word : {0U, 1U, 2U, 3U, 4U, 5U, 6U, 7U}) {
    hipMemPoolPtrExportData bad = good;
    std::uint64_t value = 0;
    std::memcpy(&value, bad.reserved + word * 8, 8);
    value = word == 3 ? (std::uint64_t{1} << 40) : word == 4 ? 0 : value ^ 0x10000;
    std::memcpy(bad.reserved + word * 8, &value, 8);
    CHECK(hipMemPoolImportPointer(&pointer, imported, &bad) == hipErrorInvalidValue);
  }
  hipMemPoolPtrExportData overflow = good;
  std::uint64_t const huge = ~std::uint64_t{0} - 100;
  std::memcpy(overflow.reserved + 32, &huge, 8);
  CHECK(hipMemPoolImportPointer(&pointer, imported, &overflow) == hipErrorInvalidValue);

  // The pool of this process is not an imported one; null arguments.
  hipMemPoolPtrExportData copy = good;
  CHECK(hipMemPoolImportPointer(&pointer, pool.get(), &copy) == hipErrorInvalidValue);
  CHECK(hipMemPoolImportPointer(&pointer, nullptr, &copy) == hipErrorInvalidValue);
  CHECK(hipMemPoolImportPointer(nullptr, imported, &copy) == hipErrorInvalidValue);
  CHECK(hipMemPoolImportPointer(&pointer, imported, nullptr) == hipErrorInvalidValue);
  CHECK(pointer == nullptr);

  // The good data still works, in this same process: a second mapping of the same memory.
  REQUIRE(hipMemPoolImportPointer(&pointer, imported, &copy) == hipSuccess);
  CHECK(pointer != live);
  fill(live, 0, 4 * kKiB, 14);
  CHECK(mismatches(pointer, 0, 4 * kKiB, 14) == 0);
  CHECK(hipFree(static_cast<unsigned char*>(pointer) + 256) == hipErrorInvalidValue);
  CHECK(hipFreeAsync(static_cast<unsigned char*>(pointer) + 256, nullptr) == hipErrorInvalidValue);
  CHECK(hipFreeAsync(pointer, nullptr) == hipSuccess);
  CHECK(hipFreeAsync(pointer, nullptr) == hipErrorInvalidValue);
  CHECK(hipStreamSynchronize(nullptr) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
  CHECK(hipFree(live) == hipSuccess);
}

TEST_CASE("garbage sent to an exported descriptor does not break the broker") {
  Pool pool;
  auto const fd = pool.export_fd();
  std::array<unsigned char, 40> garbage{};
  garbage.fill(0x5A);
  REQUIRE(send(fd.get(), garbage.data(), garbage.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(garbage.size()));
  REQUIRE(send(fd.get(), garbage.data(), 3, MSG_NOSIGNAL) == 3);
  // An empty message, which a seqpacket socket carries as one: not the end of the stream.
  REQUIRE(send(fd.get(), garbage.data(), 0, MSG_NOSIGNAL) == 0);
  // Its three error replies are still queued; an import reads one of them and is refused, as any
  // reader of a descriptor someone else scribbled on may be. The broker itself carries on.
  hipMemPool_t imported = nullptr;
  CHECK(import_fd(fd.get(), &imported) == hipErrorInvalidValue);
  CHECK(import_fd(fd.get(), &imported) == hipErrorInvalidValue);
  CHECK(import_fd(fd.get(), &imported) == hipErrorInvalidValue);
  REQUIRE(import_fd(fd.get(), &imported) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
}

namespace {

// While it lives, this process can open no more descriptors: the soft limit is set just above the
// highest one open, and every number below it is taken by /dev/null.
class NoDescriptorsLeft {
 public:
  NoDescriptorsLeft() {
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved_) == 0);
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) highest = fcntl(fd, F_GETFD) != -1 ? fd : highest;
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(highest) + 1;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    for (int fd = open("/dev/null", O_RDONLY | O_CLOEXEC); fd >= 0; fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) {
      fillers_.emplace_back(fd);
    }
    CHECK(errno == EMFILE);
  }
  NoDescriptorsLeft(NoDescriptorsLeft const&) = delete;
  NoDescriptorsLeft& operator=(NoDescriptorsLeft const&) = delete;
  ~NoDescriptorsLeft() {
    fillers_.clear();
    CHECK(setrlimit(RLIMIT_NOFILE, &saved_) == 0);
  }

 private:
  rlimit saved_{};
  std::vector<hipxx::FileDescriptor> fillers_;
};

// The exporting side of the next case, in a child made by fork(): its broker, not this process's,
// must have the descriptors to send. Exports a pool whose pointer holds 0x5D, sends the fd and the
// pointer's export data over `socket`, and waits for a byte back (or the socket's end).
int export_from_child(int socket) {
  int fd = -1;
  hipMemPoolPtrExportData data{};
  if (!export_filled_pool(64 * kKiB, 0x5D, &fd, &data)) return 10;
  if (!hipxx::send_fd<hipMemPoolPtrExportData>(socket, hipxx::FileDescriptor{fd}, data)) return 11;
  char done = 0;
  while (recv(socket, &done, 1, 0) < 0 && errno == EINTR) {
  }
  return 0;
}

}  // namespace

TEST_CASE("imports in a process out of descriptors are refused with hipErrorOutOfMemory, and work once there is room" *
          doctest::test_suite("fork-child") * doctest::skip(kThreadSanitizer)) {
  auto [ours, theirs] = seqpacket_pair();
  pid_t const child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    (void)ours.close();
    ::_exit(export_from_child(theirs.get()));
  }
  REQUIRE(theirs.close());
  auto offer = hipxx::recv_fd<hipMemPoolPtrExportData>(ours.get());
  REQUIRE(offer);
  int const fd = offer.value().fd.get();
  hipMemPoolPtrExportData data = offer.value().payload;
  hipMemPool_t imported = nullptr;
  {
    NoDescriptorsLeft const full;
    // The broker's reply carries a channel this process has no room for.
    CHECK(import_fd(fd, &imported) == hipErrorOutOfMemory);
  }
  REQUIRE(import_fd(fd, &imported) == hipSuccess);
  void* mirror = nullptr;
  {
    NoDescriptorsLeft const full;
    // Now it is the chunk's descriptor; the channel stays in step with the broker.
    CHECK(hipMemPoolImportPointer(&mirror, imported, &data) == hipErrorOutOfMemory);
  }
  REQUIRE(hipMemPoolImportPointer(&mirror, imported, &data) == hipSuccess);
  unsigned char seen = 0;
  CHECK(hipMemcpy(&seen, mirror, 1, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(seen == 0x5D);
  CHECK(hipFree(mirror) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
  char const done = 'd';
  CHECK(send(ours.get(), &done, 1, MSG_NOSIGNAL) == 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a reader of an exported descriptor that asks for channels and never reads the replies") {
  std::size_t const baseline = broker_baseline();
  {
    Pool pool;
    void* const pointer = pool.allocate(1 * kMiB);
    fill(pointer, 0, 1 * kMiB, 21);
    std::size_t const with_pool = open_fd_count();
    auto const fd = pool.export_fd();
    // Requests for channels, as an import sends them, far more than the replies' queue holds; the
    // broker reads them all, and answers until its replies fill the queue.
    WireRequest const request;
    for (int sent = 0; sent < 5000;) {
      if (send(fd.get(), &request, sizeof request, MSG_NOSIGNAL | MSG_DONTWAIT) > 0) {
        ++sent;
      } else {
        REQUIRE((errno == EAGAIN || errno == EWOULDBLOCK));  // the broker reads on
        std::this_thread::sleep_for(std::chrono::microseconds{100});
      }
    }
    REQUIRE(eventually([&] { return unread_bytes(fd.get()) == 0; }));
    // The broker holds one end of a channel per queued reply: no more than a queue's worth.
    CHECK(open_fd_count() - with_pool < 1000);
    // Another reader of the same descriptor is served: it reads a queued reply, a channel as good as
    // any, and imports through it.
    hipMemPool_t imported = nullptr;
    REQUIRE(import_fd(fd.get(), &imported) == hipSuccess);
    void* mirror = nullptr;
    hipMemPoolPtrExportData data = export_data(pointer);
    REQUIRE(hipMemPoolImportPointer(&mirror, imported, &data) == hipSuccess);
    CHECK(mismatches(mirror, 0, 1 * kMiB, 21) == 0);
    CHECK(hipFree(mirror) == hipSuccess);
    CHECK(hipMemPoolDestroy(imported) == hipSuccess);
    CHECK(hipFree(pointer) == hipSuccess);
  }
  // The descriptor closed, the unread replies go with it, and so do the broker's ends of them.
  CHECK(eventually([&] { return open_fd_count() == baseline; }));
}

namespace {

// While it lives, the soft limit on descriptors is `room` above the highest one open.
class SoftLimitAboveOpen {
 public:
  explicit SoftLimitAboveOpen(rlim_t room) {
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved_) == 0);
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) highest = fcntl(fd, F_GETFD) != -1 ? fd : highest;
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min(static_cast<rlim_t>(highest) + 1 + room, saved_.rlim_max);
    REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    soft_ = lowered.rlim_cur;
  }
  SoftLimitAboveOpen(SoftLimitAboveOpen const&) = delete;
  SoftLimitAboveOpen& operator=(SoftLimitAboveOpen const&) = delete;
  ~SoftLimitAboveOpen() { CHECK(setrlimit(RLIMIT_NOFILE, &saved_) == 0); }

  [[nodiscard]] rlim_t soft() const noexcept { return soft_; }

 private:
  rlimit saved_{};
  rlim_t soft_ = 0;
};

// One reply of the broker to an open-channel request on `socket`, and the channel's descriptor
// where it sent one; waits at most 10 s.
WireReply ask_for_channel(int socket, hipxx::FileDescriptor& channel) {
  WireRequest const request;
  REQUIRE(send(socket, &request, sizeof request, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof request));
  pollfd readable{.fd = socket, .events = POLLIN, .revents = 0};
  REQUIRE(poll(&readable, 1, 10'000) == 1);
  WireReply reply;
  iovec bytes{.iov_base = &reply, .iov_len = sizeof reply};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
  msghdr message{};
  message.msg_iov = &bytes;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  REQUIRE(recvmsg(socket, &message, MSG_CMSG_CLOEXEC) == static_cast<ssize_t>(sizeof reply));
  if (cmsghdr const* const header = CMSG_FIRSTHDR(&message);
      header != nullptr && header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(header), sizeof fd);
    channel = hipxx::FileDescriptor{fd};
  }
  return reply;
}

}  // namespace

TEST_CASE("an importer that keeps channels is refused once the broker holds a quarter of the descriptors") {
  Pool pool;
  void* const pointer = pool.allocate(64 * kKiB);
  fill(pointer, 0, 64 * kKiB, 0x3C);
  auto const fd = pool.export_fd();
  // A soft limit 256 above the highest descriptor open, so the broker's share is small.
  SoftLimitAboveOpen const limit{256};
  std::size_t const share = limit.soft() / 4;

  // Channels asked for and kept, as a leaking importer keeps them: refused before the share is passed.
  std::vector<hipxx::FileDescriptor> kept;
  std::int32_t refusal = hipSuccess;
  while (refusal == hipSuccess && kept.size() <= share) {
    hipxx::FileDescriptor channel;
    WireReply const reply = ask_for_channel(fd.get(), channel);
    refusal = reply.status;
    if (refusal == hipSuccess) {
      REQUIRE(channel);
      kept.push_back(std::move(channel));
    }
  }
  CHECK(refusal == hipErrorOutOfMemory);
  CHECK(kept.size() <= share);
  CHECK(kept.size() >= share - 2);  // the broker may still hold channels of earlier cases
  hipMemPool_t imported = nullptr;
  CHECK(import_fd(fd.get(), &imported) == hipErrorOutOfMemory);
  // The exporter itself still has descriptors to allocate with (on the host backend each hipMalloc
  // holds one).
  void* more = nullptr;
  CHECK(hipMalloc(&more, 64 * kKiB) == hipSuccess);

  // The leaking importer lets go of half: the broker closes its ends, and imports work again.
  kept.resize(kept.size() / 2);
  REQUIRE(eventually([&] { return import_fd(fd.get(), &imported) == hipSuccess; }));
  void* mirror = nullptr;
  hipMemPoolPtrExportData data = export_data(pointer);
  REQUIRE(hipMemPoolImportPointer(&mirror, imported, &data) == hipSuccess);
  CHECK(mismatches(mirror, 0, 64 * kKiB, 0x3C) == 0);
  CHECK(hipFree(mirror) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
  CHECK(hipFree(more) == hipSuccess);
  CHECK(hipFree(pointer) == hipSuccess);
}

TEST_CASE("C++ handles: export_handle, export_pointer, ImportedMemPool and ImportedPoolPointer") {
  auto pool = hipxx::MemPool::create(hipxx::Device{0}, {.shareable = hipxx::Shareable::posix_fd}).value();
  auto allocation = pool.allocate(64 * kKiB, hipxx::StreamRef{}).value();
  fill(allocation.data(), 0, 64 * kKiB, 15);
  auto const fd = hipxx::export_handle(pool).value();
  auto const data = hipxx::export_pointer(allocation).value();

  SUBCASE("in a peer") {
    Peer peer;
    Reply const reply = peer.cpp_roundtrip(fd, data, 64 * kKiB, 15);
    CHECK(reply.status == hipSuccess);
    CHECK(reply.value == 0);
    CHECK(mismatches(allocation.data(), 0, 64 * kKiB, 16) == 0);
  }
  SUBCASE("in this process") {
    auto imported = hipxx::ImportedMemPool::open(fd).value();
    CHECK(imported.access(hipxx::Device{0}).value() == hipxx::Access::read_write);
    auto pointer = imported.import_pointer(data).value();
    CHECK(mismatches(pointer.data(), 0, 64 * kKiB, 15) == 0);
    auto again = imported.import_pointer(data).value();
    CHECK(again.data() == pointer.data());
    CHECK(again.free_async(hipxx::StreamRef{}));
    CHECK(!again);
    CHECK(pointer.free());
    CHECK(pointer.free());  // nothing left: success
  }
  SUBCASE("refusals") {
    auto plain = hipxx::MemPool::create(hipxx::Device{0}).value();
    CHECK(hipxx::export_handle(plain).error() == hipErrorInvalidValue);
    CHECK(hipxx::export_pointer(static_cast<unsigned char*>(allocation.data()) + 256).error() == hipErrorInvalidValue);
    CHECK(hipxx::ImportedMemPool::open(hipxx::FileDescriptor{}).error() == hipErrorInvalidValue);
  }
  CHECK(allocation.free());
}

TEST_CASE("an importer whose broker reply was lost (the exporter stopped) maps new chunks again once it goes on") {
  Peer peer;
  // The second allocation reaches into the pool's second chunk, which nothing has mapped here yet.
  Peer::Exported exported = peer.export_pool(kMiB, 40 * kMiB, 0x77);
  hipMemPool_t imported = nullptr;
  REQUIRE(hipMemPoolImportFromShareableHandle(&imported,
                                              reinterpret_cast<void*>(static_cast<std::intptr_t>(exported.fd.get())),
                                              hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  void* first = nullptr;
  REQUIRE(hipMemPoolImportPointer(&first, imported, &exported.pair.first) == hipSuccess);
  CHECK(mismatches(first, 0, kMiB, 0x77) == 0);

  // Stopped, the exporter does not answer: the import gives up after the broker's timeout, which
  // HIPXX_POOL_BROKER_TIMEOUT_MS sets (meson sets 2 s for this test; 10 s without it).
  peer.stop();
  void* second = nullptr;
  const auto asked = std::chrono::steady_clock::now();
  CHECK(hipMemPoolImportPointer(&second, imported, &exported.pair.second) == hipErrorInvalidValue);
  const auto waited = std::chrono::steady_clock::now() - asked;
  const char* const chosen = std::getenv("HIPXX_POOL_BROKER_TIMEOUT_MS");
  const std::chrono::milliseconds timeout{chosen != nullptr ? std::atol(chosen) : 10'000};
  CHECK(waited >= timeout);
  if (timeout < std::chrono::seconds{10}) CHECK(waited < std::chrono::seconds{10});
  peer.go_on();
  // Going on, it answers a new channel: the same import now succeeds, with the exporter's data.
  REQUIRE(hipMemPoolImportPointer(&second, imported, &exported.pair.second) == hipSuccess);
  CHECK(mismatches(second, 0, 40 * kMiB, 0x78) == 0);

  CHECK(hipFree(second) == hipSuccess);
  CHECK(hipFree(first) == hipSuccess);
  CHECK(hipMemPoolDestroy(imported) == hipSuccess);
}
