// Legacy IPC between real processes. The other process is tests/ipc_peer.cpp, a separate executable
// started with fork+exec (a GPU runtime does not survive a bare fork), found through the
// HIPXX_IPC_PEER environment variable that meson sets; handles travel over a socketpair.
//
// Cases in the "host-only" suite check facts of the host backend: every hipMalloc allocation is a
// memfd held open from hipMalloc to hipFree, which a peer opens through /proc/<pid>/fd; an export
// moves nothing, so it waits for nothing and loses no store, and it leaves nothing behind in /dev/shm.
#include "ipc_protocol.hpp"
#include "stream_test_support.hpp"

#include <hipxx/ipc.hpp>
#include <hipxx/ipc_event.hpp>

#include <doctest/doctest.h>

#include "support/bytes.hpp"
#include "support/descriptors.hpp"
#include "support/device_pattern.hpp"
#include "support/processes.hpp"

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using test_support::open_fd_count;

using ipc_test::Op;
using ipc_test::Reply;
using ipc_test::Request;
using namespace std::chrono_literals;

constexpr std::size_t kPage = 4096;

std::string peer_path() { return test_support::peer_path("HIPXX_IPC_PEER"); }

using test_support::spawn;
using test_support::wait_exit_code;

// A peer process in serve mode, spoken to over a socketpair.
class Peer {
 public:
  Peer() {
    std::array<int, 2> ends{};
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) == 0);
    pid_ = spawn({peer_path(), "serve", "3"}, ends[1]);
    close(ends[1]);
    socket_ = ends[0];
  }
  Peer(Peer const&) = delete;
  Peer& operator=(Peer const&) = delete;
  ~Peer() {
    if (pid_ > 0) {
      Request request{};
      request.op = Op::exit;
      Reply reply{};
      bool const said_goodbye = ipc_test::write_all(socket_, &request, sizeof request) &&
                                ipc_test::read_all(socket_, &reply, sizeof reply);
      close(socket_);
      if (!said_goodbye) ::kill(pid_, SIGKILL);
      CHECK_MESSAGE(wait_exit_code(pid_) == 0, "the peer did not exit cleanly");
    } else {
      close(socket_);
    }
  }

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  // Sends a request whose answer is not waited for (the peer may never give it).
  void send(Request const& request) {
    REQUIRE_MESSAGE(pid_ > 0, "the peer is gone");
    REQUIRE_MESSAGE(ipc_test::write_all(socket_, &request, sizeof request), "the peer hung up");
  }

  Reply call(Request const& request) {
    REQUIRE_MESSAGE(pid_ > 0, "the peer is gone");
    Reply reply{};
    REQUIRE_MESSAGE(ipc_test::write_all(socket_, &request, sizeof request), "the peer hung up");
    REQUIRE_MESSAGE(ipc_test::read_all(socket_, &reply, sizeof reply), "the peer died (crashed?) answering");
    return reply;
  }

  Reply open(hipIpcMemHandle_t const& handle, unsigned flags = hipIpcMemLazyEnablePeerAccess) {
    Request request{};
    request.op = Op::open;
    request.handle = handle;
    request.flags = flags;
    return call(request);
  }

  Reply on_slot(Op op, std::uint64_t slot, std::uint64_t offset = 0, std::uint64_t length = 0, std::uint64_t seed = 0) {
    Request request{};
    request.op = op;
    request.slot = static_cast<std::uint32_t>(slot);
    request.offset = offset;
    request.length = length;
    request.seed = seed;
    return call(request);
  }

  // Bytes of slot's [offset, offset + length) that differ from pattern `seed`.
  std::uint64_t mismatches(std::uint64_t slot, std::uint64_t offset, std::uint64_t length, std::uint64_t seed) {
    Reply const reply = on_slot(Op::verify, slot, offset, length, seed);
    REQUIRE(reply.status == hipSuccess);
    return reply.value;
  }

  void kill() {
    REQUIRE(::kill(pid_, SIGKILL) == 0);
    CHECK(wait_exit_code(pid_) == 128 + SIGKILL);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int socket_ = -1;
};

using test_support::fill;
using test_support::mismatches;

// hipMalloc memory filled with pattern `seed`, freed on scope exit unless taken.
struct DeviceBlock {
  void* pointer = nullptr;
  std::size_t size = 0;
  DeviceBlock(std::size_t bytes, std::uint64_t seed) : size(bytes) {
    REQUIRE(hipMalloc(&pointer, bytes) == hipSuccess);
    fill(pointer, 0, bytes, seed);
  }
  DeviceBlock(DeviceBlock const&) = delete;
  DeviceBlock& operator=(DeviceBlock const&) = delete;
  ~DeviceBlock() {
    if (pointer != nullptr) CHECK(hipFree(pointer) == hipSuccess);
  }
  hipIpcMemHandle_t handle() const {
    hipIpcMemHandle_t out{};
    REQUIRE(hipIpcGetMemHandle(&out, pointer) == hipSuccess);
    return out;
  }
  void free() {
    REQUIRE(hipFree(pointer) == hipSuccess);
    pointer = nullptr;
  }
};

bool same(hipIpcMemHandle_t const& a, hipIpcMemHandle_t const& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The links of process `pid`'s descriptors that are hipxx's plain allocations
// ("/memfd:hipxx-memory-<16 hex>-<16 hex> (deleted)").
std::vector<std::string> allocation_links_of(pid_t pid) {
  std::string const directory_path = "/proc/" + std::to_string(pid) + "/fd";
  std::vector<std::string> links;
  DIR* const directory = opendir(directory_path.c_str());
  REQUIRE(directory != nullptr);
  while (dirent const* entry = readdir(directory)) {
    std::array<char, 512> target{};
    std::string const path = directory_path + "/" + static_cast<char const*>(entry->d_name);
    ssize_t const length = readlink(path.c_str(), target.data(), target.size() - 1);
    if (length <= 0) continue;
    std::string const link{target.data(), static_cast<std::size_t>(length)};
    if (link.starts_with("/memfd:hipxx-memory-")) links.push_back(link);
  }
  closedir(directory);
  return links;
}

// Entries of /dev/shm whose name mentions hipxx.
std::size_t hipxx_names_in_dev_shm() {
  std::size_t count = 0;
  DIR* const directory = opendir("/dev/shm");
  if (directory == nullptr) return 0;
  while (dirent const* entry = readdir(directory)) {
    if (std::string_view{static_cast<char const*>(entry->d_name)}.find("hipxx") != std::string_view::npos) ++count;
  }
  closedir(directory);
  return count;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Portable semantics.

TEST_CASE("data written in one process is seen in the other, both ways") {
  stest::LeakCheck leaks;
  // Not a whole number of pages: the tail of the last page must travel too.
  constexpr std::size_t kSize = 3 * kPage + 100;
  Peer peer;

  SUBCASE("exported here, opened by the peer") {
    DeviceBlock block{kSize, 1};
    Reply const opened = peer.open(block.handle());
    REQUIRE(opened.status == hipSuccess);
    CHECK(peer.mismatches(opened.value, 0, kSize, 1) == 0);
    // The peer overwrites the middle; the exporter sees it at once, and the rest unchanged.
    REQUIRE(peer.on_slot(Op::fill, opened.value, kPage - 10, kPage + 20, 2).status == hipSuccess);
    CHECK(mismatches(block.pointer, 0, kPage - 10, 1) == 0);
    CHECK(mismatches(block.pointer, kPage - 10, kPage + 20, 2) == 0);
    CHECK(mismatches(block.pointer, 2 * kPage + 10, kSize - (2 * kPage + 10), 1) == 0);
    // And the other way: the exporter writes, the peer reads.
    fill(block.pointer, 0, kSize, 3);
    CHECK(peer.mismatches(opened.value, 0, kSize, 3) == 0);
    CHECK(peer.on_slot(Op::close, opened.value).status == hipSuccess);
  }

  SUBCASE("exported by the peer, opened here") {
    Request request{};
    request.op = Op::export_new;
    request.length = kSize;
    request.seed = 4;
    Reply const exported = peer.call(request);
    REQUIRE(exported.status == hipSuccess);
    void* mapped = nullptr;
    REQUIRE(hipIpcOpenMemHandle(&mapped, exported.handle, hipIpcMemLazyEnablePeerAccess) == hipSuccess);
    REQUIRE(mapped != nullptr);
    CHECK(mismatches(mapped, 0, kSize, 4) == 0);
    // The books hold the mapping's extent, no more: its last byte is device memory, and this
    // thread's stack (above it, where the stack is at the top of the address space) is not.
    hipPointerAttribute_t attributes{};
    REQUIRE(hipPointerGetAttributes(&attributes, static_cast<char*>(mapped) + kSize - 1) == hipSuccess);
    CHECK(attributes.type == hipMemoryTypeDevice);
    int on_stack = 0;
    REQUIRE(hipPointerGetAttributes(&attributes, &on_stack) == hipSuccess);
    CHECK(attributes.type == hipMemoryTypeUnregistered);
    fill(mapped, 0, kSize, 5);
    CHECK(peer.mismatches(exported.value, 0, kSize, 5) == 0);
    REQUIRE(peer.on_slot(Op::fill, exported.value, 0, kSize, 6).status == hipSuccess);
    CHECK(mismatches(mapped, 0, kSize, 6) == 0);
    // Device-to-device copies between the mapping and local memory work too.
    DeviceBlock local{kSize, 7};
    REQUIRE(hipMemcpy(local.pointer, mapped, kSize, hipMemcpyDeviceToDevice) == hipSuccess);
    CHECK(mismatches(local.pointer, 0, kSize, 6) == 0);
    CHECK(hipIpcCloseMemHandle(mapped) == hipSuccess);
    CHECK(peer.on_slot(Op::free, exported.value).status == hipSuccess);
  }

  SUBCASE("the same handle opened twice gives two working mappings") {
    DeviceBlock block{kSize, 8};
    hipIpcMemHandle_t const handle = block.handle();
    Reply const first = peer.open(handle);
    Reply const second = peer.open(handle, 0);  // 0 is accepted as well as the lazy-peer flag
    REQUIRE(first.status == hipSuccess);
    REQUIRE(second.status == hipSuccess);
    REQUIRE(peer.on_slot(Op::fill, first.value, 0, kSize, 9).status == hipSuccess);
    CHECK(peer.mismatches(second.value, 0, kSize, 9) == 0);
    CHECK(peer.on_slot(Op::close, first.value).status == hipSuccess);
    CHECK(peer.mismatches(second.value, 0, kSize, 9) == 0);
    CHECK(peer.on_slot(Op::close, second.value).status == hipSuccess);
    // Two opens, two closes: a third finds nothing, however the runtime placed the mappings.
    CHECK(peer.on_slot(Op::close, first.value).status == hipErrorInvalidValue);
  }
}

TEST_CASE("repeated export gives the same handle; open in the exporter is hipErrorInvalidContext") {
  stest::LeakCheck leaks;
  DeviceBlock block{kPage, 1};
  hipIpcMemHandle_t const first = block.handle();
  hipIpcMemHandle_t const again = block.handle();
  CHECK(same(first, again));

  DeviceBlock other{kPage, 2};
  CHECK_FALSE(same(first, other.handle()));

  void* mapped = nullptr;
  CHECK(hipIpcOpenMemHandle(&mapped, first, hipIpcMemLazyEnablePeerAccess) == hipErrorInvalidContext);
  CHECK(hipIpcOpenMemHandle(&mapped, first, 0) == hipErrorInvalidContext);
  CHECK(mapped == nullptr);
}

TEST_CASE("bad arguments and memory that cannot be exported are hipErrorInvalidValue") {
  stest::LeakCheck leaks;
  DeviceBlock block{4 * kPage, 1};
  hipIpcMemHandle_t handle{};

  SUBCASE("null arguments") {
    CHECK(hipIpcGetMemHandle(nullptr, block.pointer) == hipErrorInvalidValue);
    CHECK(hipIpcGetMemHandle(&handle, nullptr) == hipErrorInvalidValue);
    CHECK(hipIpcOpenMemHandle(nullptr, block.handle(), 0) == hipErrorInvalidValue);
    CHECK(hipIpcCloseMemHandle(nullptr) == hipErrorInvalidValue);
  }
  SUBCASE("an interior pointer") {
    CHECK(hipIpcGetMemHandle(&handle, static_cast<char*>(block.pointer) + 1) == hipErrorInvalidValue);
    CHECK(hipIpcGetMemHandle(&handle, static_cast<char*>(block.pointer) + kPage) == hipErrorInvalidValue);
  }
  SUBCASE("host memory") {
    std::vector<char> host(kPage);
    CHECK(hipIpcGetMemHandle(&handle, host.data()) == hipErrorInvalidValue);
  }
  SUBCASE("managed memory") {
    void* managed = nullptr;
    REQUIRE(hipMallocManaged(&managed, kPage, hipMemAttachGlobal) == hipSuccess);
    CHECK(hipIpcGetMemHandle(&handle, managed) == hipErrorInvalidValue);
    CHECK(hipFree(managed) == hipSuccess);
  }
  SUBCASE("VMM memory (hipMemCreate + hipMemMap)") {
    hipMemAllocationProp prop{};
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    std::size_t granularity = 0;
    REQUIRE(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum) == hipSuccess);
    hipMemGenericAllocationHandle_t physical{};
    REQUIRE(hipMemCreate(&physical, granularity, &prop, 0) == hipSuccess);
    void* range = nullptr;
    REQUIRE(hipMemAddressReserve(&range, granularity, 0, nullptr, 0) == hipSuccess);
    REQUIRE(hipMemMap(range, granularity, 0, physical, 0) == hipSuccess);
    hipMemAccessDesc access{};
    access.location = prop.location;
    access.flags = hipMemAccessFlagsProtReadWrite;
    REQUIRE(hipMemSetAccess(range, granularity, &access, 1) == hipSuccess);
    CHECK(hipIpcGetMemHandle(&handle, range) == hipErrorInvalidValue);
    CHECK(hipMemUnmap(range, granularity) == hipSuccess);
    CHECK(hipMemAddressFree(range, granularity) == hipSuccess);
    CHECK(hipMemRelease(physical) == hipSuccess);
  }
  SUBCASE("freed memory") {
    void* gone = nullptr;
    REQUIRE(hipMalloc(&gone, kPage) == hipSuccess);
    REQUIRE(hipFree(gone) == hipSuccess);
    CHECK(hipIpcGetMemHandle(&handle, gone) == hipErrorInvalidValue);
  }
  SUBCASE("close of memory that was not opened") {
    CHECK(hipIpcCloseMemHandle(block.pointer) == hipErrorInvalidValue);
    std::vector<char> host(16);
    CHECK(hipIpcCloseMemHandle(host.data()) == hipErrorInvalidValue);
  }
}

TEST_CASE("stream-ordered (pool) memory cannot be exported") {
  // The default pool reserves its address range once, when first used: before the leak count.
  hipMemPool_t pool = nullptr;
  REQUIRE(hipDeviceGetDefaultMemPool(&pool, 0) == hipSuccess);
  void* pooled = nullptr;
  REQUIRE(hipMallocAsync(&pooled, kPage, nullptr) == hipSuccess);
  REQUIRE(hipFreeAsync(pooled, nullptr) == hipSuccess);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  REQUIRE(hipMemPoolTrimTo(pool, 0) == hipSuccess);

  stest::LeakCheck leaks;
  REQUIRE(hipMallocAsync(&pooled, kPage, nullptr) == hipSuccess);
  REQUIRE(hipStreamSynchronize(nullptr) == hipSuccess);
  hipIpcMemHandle_t handle{};
  CHECK(hipIpcGetMemHandle(&handle, pooled) == hipErrorInvalidValue);
  CHECK(hipFreeAsync(pooled, nullptr) == hipSuccess);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  // The pool keeps freed memory for reuse; give it back so the books balance.
  CHECK(hipMemPoolTrimTo(pool, 0) == hipSuccess);
}

// Exports an allocation filled with pattern 1 (its handle in *old_handle), frees it, and allocates
// until the same address comes back; returns that new allocation, filled with pattern 2.
void* reallocate_same_address(std::size_t size, hipIpcMemHandle_t* old_handle) {
  void* first = nullptr;
  REQUIRE(hipMalloc(&first, size) == hipSuccess);
  fill(first, 0, size, 1);
  REQUIRE(hipIpcGetMemHandle(old_handle, first) == hipSuccess);
  REQUIRE(hipFree(first) == hipSuccess);
  // The address comes back soon on every allocator we know; the misses are held meanwhile so that
  // they cannot take it again.
  std::vector<void*> misses;
  void* again = nullptr;
  for (int attempt = 0; attempt < 64 && again == nullptr; ++attempt) {
    void* candidate = nullptr;
    REQUIRE(hipMalloc(&candidate, size) == hipSuccess);
    if (candidate == first) {
      again = candidate;
    } else {
      misses.push_back(candidate);
    }
  }
  for (void* miss : misses) CHECK(hipFree(miss) == hipSuccess);
  REQUIRE_MESSAGE(again != nullptr, "the allocator never returned the freed address");
  fill(again, 0, size, 2);
  return again;
}

TEST_CASE("a handle after hipFree and a new allocation at the same address is a different handle") {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 2 * kPage;
  hipIpcMemHandle_t old_handle{};
  void* const again = reallocate_same_address(kSize, &old_handle);
  hipIpcMemHandle_t new_handle{};
  REQUIRE(hipIpcGetMemHandle(&new_handle, again) == hipSuccess);
  CHECK_FALSE(same(old_handle, new_handle));
  {
    // The new handle names the new memory.
    Peer peer;
    Reply const opened = peer.open(new_handle);
    REQUIRE(opened.status == hipSuccess);
    CHECK(peer.mismatches(opened.value, 0, kSize, 2) == 0);
    CHECK(peer.on_slot(Op::close, opened.value).status == hipSuccess);
  }
  CHECK(hipFree(again) == hipSuccess);
}

// Opens `handle` in the peer, expecting a refusal; closes what a mistaken success mapped.
bool refused(Peer& peer, hipIpcMemHandle_t const& handle, unsigned flags = hipIpcMemLazyEnablePeerAccess) {
  Reply const reply = peer.open(handle, flags);
  if (reply.status == hipSuccess) (void)peer.on_slot(Op::close, reply.value);
  return reply.status != hipSuccess;
}

hipIpcMemHandle_t random_handle(std::mt19937_64& random) {
  hipIpcMemHandle_t garbage{};
  for (char& byte : garbage.reserved) byte = static_cast<char>(random());
  return garbage;
}

// Portable: whatever the runtime makes of them, garbage handles are errors and nothing crashes.
// (The CUDA driver ignores some bytes of its handles and answers hipErrorInvalidHandle for others;
// the host backend's stricter rules are in "host handles are sealed" below.)
TEST_CASE("hostile handles in the importer are errors, never crashes") {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 2 * kPage;
  DeviceBlock block{kSize, 1};
  hipIpcMemHandle_t const valid = block.handle();
  Peer peer;
  std::mt19937_64 random{20240611};

  SUBCASE("1000 random handles") {
    for (int round = 0; round < 1000; ++round) REQUIRE_MESSAGE(refused(peer, random_handle(random)), "round ", round);
  }
  SUBCASE("all zeros and all ones") {
    hipIpcMemHandle_t zeros{};
    CHECK(refused(peer, zeros));
    hipIpcMemHandle_t ones{};
    std::memset(ones.reserved, 0xFF, sizeof ones.reserved);
    CHECK(refused(peer, ones));
  }
  SUBCASE("flags other than 0 and hipIpcMemLazyEnablePeerAccess") {
    for (unsigned const flags : {2U, 3U, 0x80000000U, ~0U}) {
      Reply const reply = peer.open(valid, flags);
      CHECK(reply.status == hipErrorInvalidValue);
    }
  }
  SUBCASE("the same garbage in the exporter") {
    for (int round = 0; round < 1000; ++round) {
      void* mapped = nullptr;
      hipError_t const error = hipIpcOpenMemHandle(&mapped, random_handle(random), 0);
      REQUIRE(error != hipSuccess);
    }
  }
  // After all that the peer is alive and the real handle still works.
  Reply const opened = peer.open(valid);
  REQUIRE(opened.status == hipSuccess);
  CHECK(peer.mismatches(opened.value, 0, kSize, 1) == 0);
  CHECK(peer.on_slot(Op::close, opened.value).status == hipSuccess);
}

TEST_CASE("close: only pointers from hipIpcOpenMemHandle, once each; hipFree refuses them") {
  stest::LeakCheck leaks;
  DeviceBlock block{kPage, 1};
  Peer peer;
  Reply const opened = peer.open(block.handle());
  REQUIRE(opened.status == hipSuccess);
  // hipFree is not how an import ends, and leaves it mapped.
  CHECK(peer.on_slot(Op::free, opened.value).status == hipErrorInvalidValue);
  CHECK(peer.mismatches(opened.value, 0, kPage, 1) == 0);
  CHECK(peer.on_slot(Op::close, opened.value).status == hipSuccess);
  CHECK(peer.on_slot(Op::close, opened.value).status == hipErrorInvalidValue);  // double close

  // The peer's own allocation was not opened, so it cannot be closed.
  Request request{};
  request.op = Op::export_new;
  request.length = kPage;
  Reply const own = peer.call(request);
  REQUIRE(own.status == hipSuccess);
  CHECK(peer.on_slot(Op::close, own.value).status == hipErrorInvalidValue);
  CHECK(peer.on_slot(Op::free, own.value).status == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// The C++ handles.

static_assert(std::is_trivially_copyable_v<hipxx::IpcHandle>);
static_assert(!std::is_default_constructible_v<hipxx::IpcHandle>);
static_assert(!std::is_copy_constructible_v<hipxx::IpcMapping>);
static_assert(!std::is_copy_assignable_v<hipxx::IpcMapping>);
static_assert(std::is_nothrow_move_constructible_v<hipxx::IpcMapping>);
static_assert(std::is_nothrow_move_assignable_v<hipxx::IpcMapping>);

TEST_CASE("close waits for the importer's queued work on the memory, which lands before the mapping goes") {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 2 * kPage + 10;
  Peer peer;
  DeviceBlock block{kSize, 1};
  Reply const opened = peer.open(block.handle());
  REQUIRE(opened.status == hipSuccess);
  // The peer queues a copy into the mapping behind a held stream and closes the handle at once.
  Reply const closed = peer.on_slot(Op::close_behind_copy, opened.value, 10, kSize - 10, 2);
  CHECK(closed.status == hipSuccess);
  CHECK(closed.value == hipSuccess);  // the copy ran before the close unmapped it
  CHECK(mismatches(block.pointer, 0, 10, 1) == 0);
  CHECK(mismatches(block.pointer, 10, kSize - 10, 2) == 0);
  CHECK(peer.on_slot(Op::close, opened.value).status == hipErrorInvalidValue);  // closed once
}

TEST_CASE("IpcHandle: export, bytes and back") {
  stest::LeakCheck leaks;
  DeviceBlock block{kPage, 1};
  auto const handle = hipxx::IpcHandle::export_memory(block.pointer);
  REQUIRE(handle);
  CHECK(same(handle.value().native(), block.handle()));
  CHECK(hipxx::IpcHandle::from_bytes(handle.value().bytes()) == handle.value());
  CHECK(hipxx::IpcHandle::from_native(handle.value().native()) == handle.value());
  CHECK(hipxx::IpcHandle::export_memory(block.pointer).value() == handle.value());

  auto const interior = hipxx::IpcHandle::export_memory(static_cast<char*>(block.pointer) + 8);
  REQUIRE_FALSE(interior);
  CHECK(interior.error() == hipErrorInvalidValue);
  CHECK(interior.error() == std::errc::invalid_argument);

  auto const here = hipxx::IpcMapping::open(handle.value());
  REQUIRE_FALSE(here);
  CHECK(here.error() == hipErrorInvalidContext);

  std::array<std::byte, hipxx::IpcHandle::size> garbage{};
  garbage.fill(std::byte{0x5A});
  auto const forged = hipxx::IpcMapping::open(hipxx::IpcHandle::from_bytes(garbage));
  REQUIRE_FALSE(forged);
  CHECK(forged.error() == hipErrorInvalidValue);
}

TEST_CASE("IpcMapping in another process: open, use, closed by its destructor") {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 5 * kPage;
  DeviceBlock block{kSize, 11};
  auto const handle = hipxx::IpcHandle::export_memory(block.pointer).value();
  Peer peer;

  // The handle travels as its bytes, as any channel would carry it.
  Request request{};
  request.op = Op::open_cpp;
  std::memcpy(&request.handle, handle.bytes().data(), hipxx::IpcHandle::size);
  Reply const opened = peer.call(request);
  REQUIRE(opened.status == hipSuccess);
  CHECK(peer.mismatches(opened.value, 0, kSize, 11) == 0);
  REQUIRE(peer.on_slot(Op::fill, opened.value, 0, kSize, 12).status == hipSuccess);
  CHECK(mismatches(block.pointer, 0, kSize, 12) == 0);

  // Destroying the owner closes the mapping: closing the same pointer again is refused.
  Reply const dropped = peer.on_slot(Op::drop_cpp, opened.value);
  Request close_again{};
  close_again.op = Op::close_raw;
  close_again.value = dropped.value;
  CHECK(peer.call(close_again).status == hipErrorInvalidValue);
  // And the memory stays the exporter's.
  CHECK(mismatches(block.pointer, 0, kSize, 12) == 0);
}

TEST_CASE("IpcMapping in this process: the exporter side of a peer's memory") {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = kPage;
  Peer peer;
  Request request{};
  request.op = Op::export_new;
  request.length = kSize;
  request.seed = 21;
  Reply const exported = peer.call(request);
  REQUIRE(exported.status == hipSuccess);

  auto mapping = hipxx::IpcMapping::open(hipxx::IpcHandle::from_native(exported.handle));
  REQUIRE(mapping);
  void* const data = mapping.value().data();
  REQUIRE(data != nullptr);
  CHECK(mismatches(data, 0, kSize, 21) == 0);

  // Moves carry the mapping; the moved-from owner is empty and its close does nothing.
  hipxx::IpcMapping moved = std::move(mapping).value();
  CHECK(moved.data() == data);
  hipxx::IpcMapping target = hipxx::IpcMapping::adopt(nullptr);
  CHECK_FALSE(target);
  target = std::move(moved);
  CHECK_FALSE(moved);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(moved.close());
  CHECK(target.data() == data);
  fill(target.data(), 0, kSize, 22);
  CHECK(peer.mismatches(exported.value, 0, kSize, 22) == 0);

  REQUIRE(target.close());
  CHECK_FALSE(target);
  CHECK(hipIpcCloseMemHandle(data) == hipErrorInvalidValue);

  // release() hands the pointer back to C code, which closes it.
  auto again = hipxx::IpcMapping::open(hipxx::IpcHandle::from_native(exported.handle));
  REQUIRE(again);
  void* const raw = again.value().release();
  CHECK(hipIpcCloseMemHandle(raw) == hipSuccess);
  CHECK(peer.on_slot(Op::free, exported.value).status == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Interprocess events: hipIpcGetEventHandle in one process, hipIpcOpenEventHandle in the other, and
// then records, queries, synchronizes and stream waits in either.

namespace {

Reply event_call(Peer& peer, Op op, std::uint64_t slot = 0, hipIpcEventHandle_t const* handle = nullptr) {
  Request request{};
  request.op = op;
  request.slot = static_cast<std::uint32_t>(slot);
  if (handle != nullptr) std::memcpy(&request.handle, handle, sizeof *handle);
  return peer.call(request);
}

hipIpcEventHandle_t event_handle_of(Reply const& reply) {
  hipIpcEventHandle_t handle{};
  std::memcpy(&handle, &reply.handle, sizeof handle);
  return handle;
}

hipEvent_t make_interprocess_event() {
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreateWithFlags(&event, hipEventInterprocess | hipEventDisableTiming) == hipSuccess);
  return event;
}

}  // namespace

TEST_CASE("an interprocess event recorded in one process is waited for in the other") {
  stest::LeakCheck leaks;
  Peer peer;

  SUBCASE("exported and recorded here; the peer queries, synchronizes and has a stream wait") {
    hipEvent_t const event = make_interprocess_event();
    hipIpcEventHandle_t handle{};
    REQUIRE(hipIpcGetEventHandle(&handle, event) == hipSuccess);
    Reply const opened = event_call(peer, Op::event_open, 0, &handle);
    REQUIRE(opened.status == hipSuccess);
    CHECK(event_call(peer, Op::event_query, opened.value).status == hipSuccess);  // never recorded: complete
    hipStream_t const held = stest::make_stream(hipStreamNonBlocking);
    {
      stest::Gate gate;
      gate.block(held);
      REQUIRE(hipEventRecord(event, held) == hipSuccess);
      CHECK(hipEventQuery(event) == hipErrorNotReady);
      CHECK(event_call(peer, Op::event_query, opened.value).status == hipErrorNotReady);
      REQUIRE(event_call(peer, Op::event_wait_then_write, opened.value).status == hipSuccess);
      std::this_thread::sleep_for(50ms);
      CHECK(event_call(peer, Op::event_word).value == 0);  // the peer's stream still waits
      gate.open();
      CHECK(event_call(peer, Op::event_synchronize, opened.value).status == hipSuccess);
      CHECK(stest::eventually([&] { return event_call(peer, Op::event_word).value == 1; }));
      CHECK(event_call(peer, Op::event_query, opened.value).status == hipSuccess);
      CHECK(hipEventQuery(event) == hipSuccess);
    }
    CHECK(event_call(peer, Op::event_destroy, opened.value).status == hipSuccess);
    CHECK(hipStreamDestroy(held) == hipSuccess);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }

  SUBCASE("exported by the peer and recorded there; a stream here waits for it") {
    Reply const exported = event_call(peer, Op::event_export);
    REQUIRE(exported.status == hipSuccess);
    hipEvent_t event = nullptr;
    REQUIRE(hipIpcOpenEventHandle(&event, event_handle_of(exported)) == hipSuccess);
    REQUIRE(event_call(peer, Op::event_record_held, exported.value).status == hipSuccess);
    CHECK(hipEventQuery(event) == hipErrorNotReady);
    hipStream_t const waiting = stest::make_stream(hipStreamNonBlocking);
    void* word = nullptr;
    REQUIRE(hipMalloc(&word, sizeof(std::uint32_t)) == hipSuccess);
    REQUIRE(hipMemset(word, 0, sizeof(std::uint32_t)) == hipSuccess);
    REQUIRE(hipStreamWaitEvent(waiting, event, 0) == hipSuccess);
    REQUIRE(hipStreamWriteValue32(waiting, word, 1, 0) == hipSuccess);
    std::this_thread::sleep_for(50ms);
    CHECK(hipStreamQuery(waiting) == hipErrorNotReady);
    REQUIRE(event_call(peer, Op::event_release).status == hipSuccess);
    CHECK(hipEventSynchronize(event) == hipSuccess);
    CHECK(hipEventQuery(event) == hipSuccess);
    CHECK(hipStreamSynchronize(waiting) == hipSuccess);
    std::uint32_t written = 0;
    REQUIRE(hipMemcpy(&written, word, sizeof written, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(written == 1);
    CHECK(hipFree(word) == hipSuccess);
    CHECK(hipStreamDestroy(waiting) == hipSuccess);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }

  SUBCASE("recorded by the process that opened it: the exporter sees the record") {
    hipEvent_t const event = make_interprocess_event();
    hipIpcEventHandle_t handle{};
    REQUIRE(hipIpcGetEventHandle(&handle, event) == hipSuccess);
    Reply const opened = event_call(peer, Op::event_open, 0, &handle);
    REQUIRE(opened.status == hipSuccess);
    REQUIRE(event_call(peer, Op::event_record_held, opened.value).status == hipSuccess);
    CHECK(hipEventQuery(event) == hipErrorNotReady);
    REQUIRE(event_call(peer, Op::event_release).status == hipSuccess);
    CHECK(hipEventSynchronize(event) == hipSuccess);
    CHECK(hipEventQuery(event) == hipSuccess);
    CHECK(event_call(peer, Op::event_destroy, opened.value).status == hipSuccess);
    CHECK(hipEventDestroy(event) == hipSuccess);
  }
}

TEST_CASE("IpcEventHandle and open_ipc_event: the C++ side of interprocess events") {
  stest::LeakCheck leaks;
  Peer peer;
  auto event = hipxx::Event::create(hipxx::EventFlags::interprocess | hipxx::EventFlags::disable_timing);
  REQUIRE(event);
  auto const handle = hipxx::IpcEventHandle::export_event(event.value());
  REQUIRE(handle);
  // Bytes out and back, as they would travel.
  auto const bytes = handle.value().bytes();
  auto const received = hipxx::IpcEventHandle::from_bytes(bytes);
  CHECK(received == handle.value());
  hipIpcEventHandle_t const native = received.native();
  Reply const opened = event_call(peer, Op::event_open, 0, &native);
  REQUIRE(opened.status == hipSuccess);
  REQUIRE(event_call(peer, Op::event_record_held, opened.value).status == hipSuccess);
  auto const pending = event.value().query();
  REQUIRE(pending);
  CHECK_FALSE(pending.value());
  REQUIRE(event_call(peer, Op::event_release).status == hipSuccess);
  CHECK(event.value().synchronize());
  auto const done = event.value().query();
  REQUIRE(done);
  CHECK(done.value());
  // This process's own handle, and an event that is not interprocess, are refused with HIP's codes.
  auto const own = hipxx::open_ipc_event(received);
  REQUIRE_FALSE(own);
  CHECK(own.error() == hipErrorInvalidContext);
  auto timed = hipxx::Event::create();
  REQUIRE(timed);
  auto const refused = hipxx::IpcEventHandle::export_event(timed.value());
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == hipErrorInvalidConfiguration);
  // And the other way: the peer's event opened here is an Event like any other.
  Reply const exported = event_call(peer, Op::event_export);
  REQUIRE(exported.status == hipSuccess);
  auto theirs = hipxx::open_ipc_event(hipxx::IpcEventHandle::from_native(event_handle_of(exported)));
  REQUIRE(theirs);
  CHECK(theirs.value().record());
  CHECK(theirs.value().synchronize());
  CHECK(event_call(peer, Op::event_query, exported.value).status == hipSuccess);
  CHECK(event_call(peer, Op::event_destroy, opened.value).status == hipSuccess);
  CHECK(event_call(peer, Op::event_destroy, exported.value).status == hipSuccess);
}

namespace {
// A stream waits for `event`, recorded on a held stream, then writes a word; meanwhile the event is
// recorded again on an idle stream, whose record is reached first. The wait is for the record that
// was newest when it was queued, so the word stays unwritten until the held stream goes on.
void wait_outlasts_a_later_record(unsigned flags) {
  hipEvent_t event = nullptr;
  REQUIRE(hipEventCreateWithFlags(&event, flags) == hipSuccess);
  hipStream_t const held = stest::make_stream(hipStreamNonBlocking);
  hipStream_t const idle = stest::make_stream(hipStreamNonBlocking);
  hipStream_t const waiting = stest::make_stream(hipStreamNonBlocking);
  void* word = nullptr;
  REQUIRE(hipMalloc(&word, sizeof(std::uint32_t)) == hipSuccess);
  REQUIRE(hipMemset(word, 0, sizeof(std::uint32_t)) == hipSuccess);
  std::uint32_t written = 7;
  {
    stest::Gate gate;
    gate.block(held);
    REQUIRE(hipEventRecord(event, held) == hipSuccess);
    REQUIRE(hipStreamWaitEvent(waiting, event, 0) == hipSuccess);
    REQUIRE(hipStreamWriteValue32(waiting, word, 1, 0) == hipSuccess);
    REQUIRE(hipEventRecord(event, idle) == hipSuccess);
    REQUIRE(hipStreamSynchronize(idle) == hipSuccess);
    CHECK(hipEventQuery(event) == hipSuccess);  // the event is its newest record, which is reached
    std::this_thread::sleep_for(50ms);
    CHECK(hipStreamQuery(waiting) == hipErrorNotReady);
    REQUIRE(hipMemcpy(&written, word, sizeof written, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(written == 0);
    gate.open();
    REQUIRE(hipStreamSynchronize(waiting) == hipSuccess);
    REQUIRE(hipMemcpy(&written, word, sizeof written, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(written == 1);
  }
  CHECK(hipFree(word) == hipSuccess);
  for (hipStream_t const stream : {held, idle, waiting}) CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}

// The 64 handle bytes with another pid and the seal made again over them: a forged handle that
// passes every check of the bytes. Both handle kinds keep the pid at offset 12 and seal the bytes
// before `checksum_at` with FNV-1a.
template <class Handle>
Handle with_pid(Handle handle, std::int32_t pid, std::size_t checksum_at) {
  auto* const bytes = reinterpret_cast<unsigned char*>(&handle);
  std::memcpy(bytes + 12, &pid, sizeof pid);
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (std::size_t index = 0; index < checksum_at; ++index) hash = (hash ^ bytes[index]) * 0x100000001b3ULL;
  std::memcpy(bytes + checksum_at, &hash, sizeof hash);
  return handle;
}

pid_t thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }
}  // namespace

TEST_CASE("a stream wait is for the record newest when it was queued, not a later one reached first") {
  stest::LeakCheck leaks;
  SUBCASE("an event of this process") { wait_outlasts_a_later_record(hipEventDisableTiming); }
  SUBCASE("an interprocess event") { wait_outlasts_a_later_record(hipEventInterprocess | hipEventDisableTiming); }
}

TEST_CASE("a record whose process is gone holds an interprocess event up no longer") {
  stest::LeakCheck leaks;
  hipEvent_t const event = make_interprocess_event();
  hipIpcEventHandle_t handle{};
  REQUIRE(hipIpcGetEventHandle(&handle, event) == hipSuccess);
  {
    Peer peer;
    Reply const opened = event_call(peer, Op::event_open, 0, &handle);
    REQUIRE(opened.status == hipSuccess);
    REQUIRE(event_call(peer, Op::event_record_held, opened.value).status == hipSuccess);
    CHECK(hipEventQuery(event) == hipErrorNotReady);
    // Killed and not yet reaped: a zombie, which will never reach the record either.
    REQUIRE(::kill(peer.pid(), SIGKILL) == 0);
    CHECK(hipEventSynchronize(event) == hipSuccess);  // the wait itself finds the process gone
    CHECK(hipEventQuery(event) == hipSuccess);
    peer.kill();  // reaps it
  }
  // Later records are made and reached as before.
  REQUIRE(hipEventRecord(event, nullptr) == hipSuccess);
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}

TEST_CASE("a process killed while its record waits for one of 1024 slots leaves the interprocess event whole") {
  stest::LeakCheck leaks;
  hipEvent_t const event = make_interprocess_event();
  hipIpcEventHandle_t handle{};
  REQUIRE(hipIpcGetEventHandle(&handle, event) == hipSuccess);
  // Every slot taken by a record of this process's, held on a stream behind a gate.
  hipStream_t held = nullptr;
  REQUIRE(hipStreamCreateWithFlags(&held, hipStreamNonBlocking) == hipSuccess);
  std::uint32_t gate = 0;
  REQUIRE(hipStreamWaitValue32(held, &gate, 1, hipStreamWaitValueEq, 0xFFFFFFFF) == hipSuccess);
  for (std::size_t record = 0; record < 1024; ++record) REQUIRE(hipEventRecord(event, held) == hipSuccess);
  {
    Peer peer;
    Reply const opened = event_call(peer, Op::event_open, 0, &handle);
    REQUIRE(opened.status == hipSuccess);
    // The peer's record waits for the oldest slot to settle; it is killed while it waits.
    Request request{};
    request.op = Op::event_record_held;
    request.slot = static_cast<std::uint32_t>(opened.value);
    peer.send(request);
    std::this_thread::sleep_for(300ms);
    peer.kill();
  }
  std::atomic_ref<std::uint32_t>{gate}.store(1);
  REQUIRE(hipStreamSynchronize(held) == hipSuccess);
  // This process's records are all reached, and nothing of the killed process's holds the event.
  CHECK(stest::eventually([&] { return hipEventQuery(event) == hipSuccess; }, std::chrono::milliseconds{10000}));
  CHECK(hipEventSynchronize(event) == hipSuccess);
  REQUIRE(hipEventRecord(event, nullptr) == hipSuccess);
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipStreamDestroy(held) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}

TEST_CASE("a thread's id names its process: an own handle so named is hipErrorInvalidContext") {
  stest::LeakCheck leaks;
  std::size_t const fds_before = open_fd_count();
  hipEvent_t const event = make_interprocess_event();
  hipIpcEventHandle_t event_handle{};
  REQUIRE(hipIpcGetEventHandle(&event_handle, event) == hipSuccess);
  void* memory = nullptr;
  REQUIRE(hipMalloc(&memory, 4096) == hipSuccess);
  hipIpcMemHandle_t memory_handle{};
  REQUIRE(hipIpcGetMemHandle(&memory_handle, memory) == hipSuccess);
  std::atomic<pid_t> other{0};
  std::atomic<bool> done{false};
  std::thread thread([&] {
    other = thread_id();
    while (!done) std::this_thread::sleep_for(1ms);
  });
  while (other == 0) std::this_thread::yield();
  hipEvent_t opened = nullptr;
  CHECK(hipIpcOpenEventHandle(&opened, with_pid(event_handle, other, 40)) == hipErrorInvalidContext);
  CHECK(opened == nullptr);
  void* mapped = nullptr;
  hipError_t const memory_result = hipIpcOpenMemHandle(&mapped, with_pid(memory_handle, other, 48), 0);
  // The host backend's handles carry the pid (other backends' are the driver's own bytes).
  if (std::string{hipxxGetBackendName()} == "host") CHECK(memory_result == hipErrorInvalidContext);
  CHECK(mapped == nullptr);
  done = true;
  thread.join();
  CHECK(hipFree(memory) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("a forked child's record of an inherited interprocess event, left unreached, ends with the child" *
          doctest::test_suite("host-only") * doctest::test_suite("fork-child")) {
  stest::LeakCheck leaks;
  hipEvent_t const event = make_interprocess_event();
  REQUIRE(hipEventRecord(event, nullptr) == hipSuccess);
  REQUIRE(hipEventSynchronize(event) == hipSuccess);
  std::fflush(nullptr);
  pid_t const child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(hipEventRecord(event, nullptr) == hipSuccess ? 0 : 1);  // no stream thread runs it here
  CHECK(wait_exit_code(child) == 0);
  CHECK(stest::eventually([&] { return hipEventQuery(event) == hipSuccess; }));
  CHECK(hipEventSynchronize(event) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
}

TEST_CASE("interprocess event handles: documented refusals, and nothing left behind by them") {
  stest::LeakCheck leaks;
  Peer peer;
  std::size_t const fds_before = open_fd_count();
  hipEvent_t const event = make_interprocess_event();
  hipIpcEventHandle_t handle{};
  CHECK(hipIpcGetEventHandle(nullptr, event) == hipErrorInvalidValue);
  CHECK(hipIpcGetEventHandle(&handle, nullptr) == hipErrorInvalidValue);
  hipEvent_t plain = nullptr;
  REQUIRE(hipEventCreateWithFlags(&plain, hipEventDisableTiming) == hipSuccess);
  CHECK(hipIpcGetEventHandle(&handle, plain) == hipErrorInvalidConfiguration);  // not made interprocess
  REQUIRE(hipEventDestroy(plain) == hipSuccess);
  CHECK(hipIpcGetEventHandle(&handle, plain) == hipErrorInvalidValue);  // destroyed
  REQUIRE(hipIpcGetEventHandle(&handle, event) == hipSuccess);

  hipEvent_t opened = nullptr;
  CHECK(hipIpcOpenEventHandle(nullptr, handle) == hipErrorInvalidValue);
  CHECK(hipIpcOpenEventHandle(&opened, handle) == hipErrorInvalidContext);  // this process's own
  CHECK(opened == nullptr);
  hipIpcEventHandle_t damaged = handle;
  damaged.reserved[20] = static_cast<char>(damaged.reserved[20] ^ 0x40);
  CHECK(event_call(peer, Op::event_open, 0, &damaged).status == hipErrorInvalidValue);
  hipIpcEventHandle_t garbage{};
  std::mt19937_64 random{7};
  for (char& byte : garbage.reserved) byte = static_cast<char>(random());
  CHECK(event_call(peer, Op::event_open, 0, &garbage).status == hipErrorInvalidValue);
  // A memory handle is no event handle, however alike their bytes.
  void* memory = nullptr;
  REQUIRE(hipMalloc(&memory, 4096) == hipSuccess);
  hipIpcMemHandle_t memory_handle{};
  REQUIRE(hipIpcGetMemHandle(&memory_handle, memory) == hipSuccess);
  hipIpcEventHandle_t posing{};
  std::memcpy(&posing, &memory_handle, sizeof posing);
  CHECK(event_call(peer, Op::event_open, 0, &posing).status == hipErrorInvalidValue);

  // What the peer opened behaves as an event with timing disabled that is not its to export.
  Reply const in_peer = event_call(peer, Op::event_open, 0, &handle);
  REQUIRE(in_peer.status == hipSuccess);
  CHECK(event_call(peer, Op::event_destroy, in_peer.value).status == hipSuccess);

  // Once the exporter destroyed the event, its handle names nothing.
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(event_call(peer, Op::event_open, 0, &handle).status == hipErrorInvalidValue);
  CHECK(hipFree(memory) == hipSuccess);
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("an opened interprocess event cannot be exported again or timed") {
  stest::LeakCheck leaks;
  Peer peer;
  Reply const exported = event_call(peer, Op::event_export);
  REQUIRE(exported.status == hipSuccess);
  hipEvent_t event = nullptr;
  REQUIRE(hipIpcOpenEventHandle(&event, event_handle_of(exported)) == hipSuccess);
  hipIpcEventHandle_t again{};
  CHECK(hipIpcGetEventHandle(&again, event) == hipErrorInvalidConfiguration);
  hipEvent_t timed = nullptr;
  REQUIRE(hipEventCreate(&timed) == hipSuccess);
  REQUIRE(hipEventRecord(timed, nullptr) == hipSuccess);
  REQUIRE(hipEventRecord(event, nullptr) == hipSuccess);
  REQUIRE(hipEventSynchronize(event) == hipSuccess);
  REQUIRE(hipEventSynchronize(timed) == hipSuccess);
  float milliseconds = -1.0F;
  CHECK(hipEventElapsedTime(&milliseconds, timed, event) == hipErrorInvalidHandle);
  CHECK(milliseconds == -1.0F);
  CHECK(hipEventDestroy(timed) == hipSuccess);
  CHECK(hipEventDestroy(event) == hipSuccess);
  CHECK(event_call(peer, Op::event_destroy, exported.value).status == hipSuccess);
}

// ---------------------------------------------------------------------------------------------
// Host-backend facts: the memfd behind a handle.

TEST_CASE("an allocation is a memfd held from hipMalloc to hipFree; exporting it creates nothing" *
          doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  std::size_t const names_before = hipxx_names_in_dev_shm();
  std::size_t const links_before = allocation_links_of(getpid()).size();
  DeviceBlock block{kPage, 1};
  std::vector<std::string> const links = allocation_links_of(getpid());
  REQUIRE(links.size() == links_before + 1);
  // Which link is the new one does not matter: every one has the same form.
  std::string const& link = links.back();
  std::string const prefix = "/memfd:hipxx-memory-";
  std::string const suffix = " (deleted)";
  REQUIRE(link.size() == prefix.size() + 33 + suffix.size());
  CHECK(link.substr(prefix.size(), 16).find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(link[prefix.size() + 16] == '-');
  CHECK(link.substr(prefix.size() + 17, 16).find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(link.ends_with(suffix));

  hipIpcMemHandle_t const first = block.handle();
  CHECK(same(block.handle(), first));
  CHECK(allocation_links_of(getpid()).size() == links_before + 1);  // no second descriptor
  CHECK(hipxx_names_in_dev_shm() == names_before);  // and no name anywhere

  DeviceBlock other{kPage, 2};
  CHECK_FALSE(same(other.handle(), first));
  CHECK(allocation_links_of(getpid()).size() == links_before + 2);
  other.free();
  block.free();
  CHECK(allocation_links_of(getpid()).size() == links_before);
}

TEST_CASE("the exporter's hipFree: mappings already open stay, new opens fail" * doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 2 * kPage;
  DeviceBlock block{kSize, 31};
  hipIpcMemHandle_t const handle = block.handle();
  Peer peer;
  Reply const opened = peer.open(handle);
  REQUIRE(opened.status == hipSuccess);
  block.free();
  CHECK(peer.mismatches(opened.value, 0, kSize, 31) == 0);
  CHECK(peer.open(handle).status == hipErrorInvalidValue);  // no new opens
  CHECK(peer.on_slot(Op::close, opened.value).status == hipSuccess);
}

TEST_CASE("an importer killed with SIGKILL mid-use: the exporter keeps working and cleans up" *
          doctest::test_suite("host-only")) {
  std::size_t const fds_before = open_fd_count();
  {
    stest::LeakCheck leaks;
    constexpr std::size_t kSize = 64 * kPage;
    constexpr std::size_t kHalf = kSize / 2;
    DeviceBlock block{kSize, 41};
    hipIpcMemHandle_t const handle = block.handle();
    {
      Peer peer;
      Reply const opened = peer.open(handle);
      REQUIRE(opened.status == hipSuccess);
      CHECK(peer.mismatches(opened.value, 0, kHalf, 41) == 0);
      // The peer rewrites the second half without pause while it is killed.
      REQUIRE(peer.on_slot(Op::scribble, opened.value, kHalf, kHalf, 100).status == hipSuccess);
      CHECK(stest::eventually([&] { return mismatches(block.pointer, kHalf, kHalf, 100) != 0; }));
      peer.kill();
    }
    // The first half, which only the exporter wrote, is intact.
    CHECK(mismatches(block.pointer, 0, kHalf, 41) == 0);
    // The memory is fully usable: written, read, copied.
    fill(block.pointer, 0, kSize, 42);
    CHECK(mismatches(block.pointer, 0, kSize, 42) == 0);
    DeviceBlock copy{kSize, 43};
    REQUIRE(hipMemcpy(copy.pointer, block.pointer, kSize, hipMemcpyDeviceToDevice) == hipSuccess);
    CHECK(mismatches(copy.pointer, 0, kSize, 42) == 0);
    REQUIRE(hipMemset(block.pointer, 0, kSize) == hipSuccess);
    // Exporting again still answers the same handle, and a new importer can open it.
    hipIpcMemHandle_t again{};
    REQUIRE(hipIpcGetMemHandle(&again, block.pointer) == hipSuccess);
    CHECK(same(handle, again));
    {
      Peer late;
      Reply const opened = late.open(handle);
      REQUIRE(opened.status == hipSuccess);
      CHECK(late.on_slot(Op::close, opened.value).status == hipSuccess);
    }
    block.free();
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE(
    "an exporter that dies, killed or exiting without hipFree: importers keep the data; the handle opens no more" *
    doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 3 * kPage;
  std::size_t const names_before = hipxx_names_in_dev_shm();
  for (bool const killed : {true, false}) {
    CAPTURE(killed);
    std::uint64_t const seed = killed ? 51 : 61;
    void* mapped = nullptr;
    hipIpcMemHandle_t handle{};
    {
      Peer peer;
      Request request{};
      request.op = Op::export_new;
      request.length = kSize;
      request.seed = seed;
      Reply const exported = peer.call(request);
      REQUIRE(exported.status == hipSuccess);
      handle = exported.handle;
      REQUIRE(hipIpcOpenMemHandle(&mapped, handle, 0) == hipSuccess);
      if (killed) peer.kill();  // reaped too
    }  // a peer not killed exits here, its allocation still exported
    CHECK(hipxx_names_in_dev_shm() == names_before);
    CHECK(mismatches(mapped, 0, kSize, seed) == 0);
    fill(mapped, 0, kSize, seed + 1);
    CHECK(mismatches(mapped, 0, kSize, seed + 1) == 0);
    CHECK(hipIpcCloseMemHandle(mapped) == hipSuccess);
    CHECK(hipIpcOpenMemHandle(&mapped, handle, 0) == hipErrorInvalidValue);
  }
}

// A forked child shares the allocation (and its descriptor); its export names the child, so the
// parent, for which the child is another process, can open it.
TEST_CASE("a forked child's export names the child, and the parent opens it" * doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 2 * kPage;
  DeviceBlock block{kSize, 71};
  std::array<int, 2> to_parent{};
  std::array<int, 2> to_child{};
  REQUIRE(pipe2(to_parent.data(), O_CLOEXEC) == 0);
  REQUIRE(pipe2(to_child.data(), O_CLOEXEC) == 0);
  pid_t const child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    hipIpcMemHandle_t handle{};
    bool const sent = hipIpcGetMemHandle(&handle, block.pointer) == hipSuccess &&
                      ipc_test::write_all(to_parent[1], &handle, sizeof handle);
    char done = 0;
    _exit(sent && ipc_test::read_all(to_child[0], &done, 1) ? 0 : 1);  // stay until the parent is done
  }
  close(to_parent[1]);
  close(to_child[0]);
  hipIpcMemHandle_t from_child{};
  REQUIRE(ipc_test::read_all(to_parent[0], &from_child, sizeof from_child));
  CHECK_FALSE(same(from_child, block.handle()));
  void* mapped = nullptr;
  CHECK(hipIpcOpenMemHandle(&mapped, from_child, 0) == hipSuccess);
  if (mapped != nullptr) {
    CHECK(mismatches(mapped, 0, kSize, 71) == 0);
    fill(mapped, 0, kSize, 72);
    CHECK(mismatches(block.pointer, 0, kSize, 72) == 0);  // the same memory
    CHECK(hipIpcCloseMemHandle(mapped) == hipSuccess);
  }
  char const done = 1;
  CHECK(ipc_test::write_all(to_child[1], &done, 1));
  close(to_child[1]);
  close(to_parent[0]);
  CHECK(wait_exit_code(child) == 0);
}

// An export moves nothing: stores a thread makes straight through the pointer while another thread
// makes the allocation's first export all land.
TEST_CASE("stores made during the first export are kept" * doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  constexpr std::size_t kWords = (16U << 20) / sizeof(std::uint64_t);
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    void* pointer = nullptr;
    REQUIRE(hipMalloc(&pointer, kWords * sizeof(std::uint64_t)) == hipSuccess);
    auto* const words = static_cast<std::uint64_t*>(pointer);
    std::atomic<std::size_t> written{0};
    std::thread writer{[&] {
      for (std::size_t index = 0; index < kWords; ++index) {
        std::atomic_ref{words[index]}.store(index * 3 + 1, std::memory_order_relaxed);
        written.store(index + 1, std::memory_order_release);
      }
    }};
    while (written.load(std::memory_order_acquire) < kWords / 8) std::this_thread::yield();
    hipIpcMemHandle_t handle{};
    CHECK(hipIpcGetMemHandle(&handle, pointer) == hipSuccess);
    writer.join();
    std::size_t lost = 0;
    for (std::size_t index = 0; index < kWords; ++index) lost += words[index] != index * 3 + 1 ? 1 : 0;
    CHECK(lost == 0);
    CHECK(hipFree(pointer) == hipSuccess);
  }
}

TEST_CASE("host handles are sealed: random, forged or damaged bytes are hipErrorInvalidValue" *
          doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 2 * kPage;
  DeviceBlock block{kSize, 1};
  hipIpcMemHandle_t const valid = block.handle();
  Peer peer;
  std::mt19937_64 random{20240612};

  SUBCASE("1000 random handles, in the importer and in the exporter") {
    for (int round = 0; round < 1000; ++round) {
      REQUIRE_MESSAGE(peer.open(random_handle(random)).status == hipErrorInvalidValue, "round ", round);
      void* mapped = nullptr;
      REQUIRE(hipIpcOpenMemHandle(&mapped, random_handle(random), 0) == hipErrorInvalidValue);
    }
  }
  SUBCASE("a valid prefix followed by random bytes") {
    for (std::size_t keep = 0; keep < sizeof valid.reserved; ++keep) {
      hipIpcMemHandle_t forged = valid;
      for (std::size_t index = keep; index < sizeof forged.reserved; ++index) {
        forged.reserved[index] = static_cast<char>(random());
      }
      if (same(forged, valid)) continue;
      Reply const reply = peer.open(forged);
      CHECK_MESSAGE(reply.status == hipErrorInvalidValue, "kept ", keep, " bytes");
      if (reply.status == hipSuccess) (void)peer.on_slot(Op::close, reply.value);
    }
  }
  SUBCASE("a valid handle with one byte changed, at every position") {
    for (std::size_t position = 0; position < sizeof valid.reserved; ++position) {
      for (unsigned const flip : {0x01U, 0x80U, 0xFFU}) {
        hipIpcMemHandle_t damaged = valid;
        damaged.reserved[position] = static_cast<char>(static_cast<unsigned char>(damaged.reserved[position]) ^ flip);
        Reply const reply = peer.open(damaged);
        CHECK_MESSAGE(reply.status == hipErrorInvalidValue, "byte ", position, " xor ", flip);
        if (reply.status == hipSuccess) (void)peer.on_slot(Op::close, reply.value);
      }
    }
  }
  Reply const opened = peer.open(valid);
  REQUIRE(opened.status == hipSuccess);
  CHECK(peer.on_slot(Op::close, opened.value).status == hipSuccess);
}

TEST_CASE("after hipFree the old handle names nothing, even once the address is reused" *
          doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 2 * kPage;
  hipIpcMemHandle_t old_handle{};
  void* const again = reallocate_same_address(kSize, &old_handle);
  (void)DeviceBlock{kPage, 3}.handle();  // another export meanwhile changes nothing
  {
    Peer peer;
    CHECK(peer.open(old_handle).status == hipErrorInvalidValue);
  }
  hipIpcMemHandle_t new_handle{};
  REQUIRE(hipIpcGetMemHandle(&new_handle, again) == hipSuccess);
  {
    Peer peer;
    CHECK(peer.open(old_handle).status == hipErrorInvalidValue);
  }
  CHECK(hipFree(again) == hipSuccess);
}

// An export moves nothing, so it waits for no stream work: the work still queued writes the one
// copy of the memory that every process sees.
TEST_CASE("export waits for no stream work, and the work queued before it still lands" *
          doctest::test_suite("host-only")) {
  stest::LeakCheck leaks;
  constexpr std::size_t kSize = 64 * kPage;
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, kSize) == hipSuccess);
  REQUIRE(hipMemset(device, 0, kSize) == hipSuccess);
  hipStream_t const stream = stest::make_stream();
  {
    stest::Gate gate;
    gate.block(stream);
    REQUIRE(hipMemsetAsync(device, 0x7a, kSize, stream) == hipSuccess);
    hipIpcMemHandle_t first{};
    CHECK(hipIpcGetMemHandle(&first, device) == hipSuccess);
    CHECK(hipStreamQuery(stream) == hipErrorNotReady);
    gate.open();
  }
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  std::vector<unsigned char> data(kSize, 0);
  REQUIRE(hipMemcpy(data.data(), device, kSize, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(test_support::all_bytes_are(data, 0x7a));
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  CHECK(hipFree(device) == hipSuccess);
}
