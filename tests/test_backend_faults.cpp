// The runtime over a backend that fails when told to: what a driver's refusal, which the host
// backend never gives on request, leaves in the books. Each runtime here is built around a real
// host backend wrapped in FaultyBackend, apart from the process's own runtime.
#include <doctest/doctest.h>

#include "backend/backend.hpp"
#include "backend/host/host_queue.hpp"
#include "core/event.hpp"
#include "core/imported_pool.hpp"
#include "core/memory_pool.hpp"
#include "core/runtime.hpp"
#include "support/descriptors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using hipxx::backend::AccessGrant;
using hipxx::backend::Backend;
using hipxx::backend::DeviceProperties;
using hipxx::backend::DirectMap;
using hipxx::backend::ImportedAllocation;
using hipxx::backend::PhysicalHandle;
using hipxx::core::Runtime;
using test_support::open_fd_count;

enum class Call { reserve, free_reservation, create, map, unmap, set_access, export_fd, import_fd, set_peer_access };

// The host backend's stand-in device queue, which gives up when told to, as a CUDA stream does after
// a fault that spoils its context: from then on it reports the fault, runs nothing more, and writes
// no more progress.
class GivingUpQueue final : public hipxx::backend::Queue {
 public:
  // The flag is shared: a destroyed stream's worker may still ask after the test's runtime, and
  // its backend, are gone.
  GivingUpQueue(std::unique_ptr<hipxx::backend::Queue> inner, std::shared_ptr<const std::atomic<bool>> given_up)
      : inner_(std::move(inner)), given_up_(std::move(given_up)) {}

  [[nodiscard]] std::uint64_t progress() const noexcept override { return inner_->progress(); }
  hipError_t copy(void* dst, const void* src, std::size_t bytes) override {
    return given_up() ? hipSuccess : inner_->copy(dst, src, bytes);
  }
  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    return given_up() ? hipSuccess : inner_->fill(dst, value, bytes);
  }
  hipError_t write_word(void* address, std::size_t bytes, std::uint64_t value) override {
    return given_up() ? hipSuccess : inner_->write_word(address, bytes, value);
  }
  hipError_t wait_word(const void* address, std::size_t bytes, const hipxx::backend::WordWait& wait) override {
    return given_up() ? hipSuccess : inner_->wait_word(address, bytes, wait);
  }
  hipError_t wait_queue(Queue& other) override {
    auto* const giving_up = dynamic_cast<GivingUpQueue*>(&other);
    return given_up() ? hipSuccess : inner_->wait_queue(giving_up != nullptr ? *giving_up->inner_ : other);
  }
  hipError_t wait_timestamp(hipxx::backend::Timestamp& timestamp) override {
    return given_up() ? hipSuccess : inner_->wait_timestamp(timestamp);
  }
  void complete(std::uint64_t sequence) noexcept override { inner_->complete(sequence); }
  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    return given_up() ? hipSuccess : inner_->prefetch(ptr, bytes, device);
  }
  hipError_t record(hipxx::backend::Timestamp& timestamp) override {
    return given_up() ? hipSuccess : inner_->record(timestamp);
  }
  hipError_t fault() override { return given_up() ? hipErrorLaunchFailure : inner_->fault(); }
  bool abandoned() override { return given_up(); }
  bool finished() override { return !given_up() && inner_->finished(); }
  void wait_for_room() override { inner_->wait_for_room(); }

 protected:
  hipError_t write_mark(std::uint64_t sequence) override { return given_up() ? hipSuccess : inner_->mark(sequence); }
  hipError_t queue_host_call(hipxx::backend::HostCall* call) override {
    // A call the queue took is run once, as a driver runs a callback with the error of the fault.
    if (given_up()) {
      call->run(call, hipErrorLaunchFailure);
      return hipSuccess;
    }
    return inner_->host_call(call, call->sequence);
  }

 private:
  [[nodiscard]] bool given_up() const noexcept { return given_up_->load(std::memory_order_acquire); }

  std::unique_ptr<hipxx::backend::Queue> inner_;
  std::shared_ptr<const std::atomic<bool>> given_up_;
};

// Forwards every call to a host backend, except the one it was told to fail, once; and counts the
// physical allocations and mappings the backend holds, to show what the runtime leaves behind.
class FaultyBackend final : public Backend {
 public:
  // `direct`: offers the runtime a direct map (as the CUDA backend does), which maps through the
  // host backend too.
  explicit FaultyBackend(std::optional<std::size_t> granularity = std::nullopt, int devices = 1, bool direct = false)
      : inner_(hipxx::backend::make_host_backend(devices)), device_(inner_->device(0)), direct_(direct) {
    if (granularity) device_.minimum_granularity = *granularity;
  }

  // The call of kind `call` that comes after `passing` more of its kind returns `error`.
  void fail(Call call, hipError_t error, int passing = 0) {
    failing_ = call;
    error_ = error;
    passing_ = passing;
  }

  // Physical allocations (made or imported) not yet released, and mappings not yet undone.
  [[nodiscard]] int physical() const { return physical_; }
  [[nodiscard]] int mappings() const { return mappings_; }
  // While set, every direct map call answers that it did not map.
  void refuse_direct_maps(bool refuse) { refuse_direct_ = refuse; }
  // Direct map calls of this many bytes answer that they did not map (0: none of them).
  void refuse_direct_maps_of(std::size_t size) { refused_size_ = size; }
  // Runs inside each direct map call, before it maps: where the runtime has let go of its lock.
  void during_direct_maps(std::function<void()> work) { during_direct_map_ = std::move(work); }
  // Runs inside each import, before it imports (set before any thread imports).
  void during_imports(std::function<void()> work) { during_import_ = std::move(work); }
  // Calls of the direct map and of map(), failed ones included.
  [[nodiscard]] int direct_calls() const { return direct_calls_; }
  [[nodiscard]] int map_calls() const { return map_calls_; }

  [[nodiscard]] std::string_view name() const noexcept override { return "faulty host"; }
  [[nodiscard]] int device_count() const noexcept override { return inner_->device_count(); }
  [[nodiscard]] const DeviceProperties& device(int ordinal) const override {
    return ordinal == 0 ? device_ : inner_->device(ordinal);
  }

  hipError_t reserve(std::size_t size, std::size_t alignment, std::uintptr_t hint, void** va) override {
    if (const auto error = injected(Call::reserve)) return *error;
    return inner_->reserve(size, alignment, hint, va);
  }
  hipError_t free_reservation(void* va, std::size_t size) override {
    if (const auto error = injected(Call::free_reservation)) return *error;
    return inner_->free_reservation(va, size);
  }
  hipError_t create_physical(int device, std::size_t size, bool exportable, PhysicalHandle* out) override {
    if (const auto error = injected(Call::create)) return *error;
    return counted(inner_->create_physical(device, size, exportable, out), physical_, +1);
  }
  hipError_t release_physical(PhysicalHandle handle) override {
    return counted(inner_->release_physical(handle), physical_, -1);
  }
  hipError_t export_fd(PhysicalHandle handle, int* fd) override {
    if (const auto error = injected(Call::export_fd)) return *error;
    return inner_->export_fd(handle, fd);
  }
  hipError_t import_fd(int fd, PhysicalHandle* out, ImportedAllocation* facts) override {
    if (during_import_) during_import_();
    if (const auto error = injected(Call::import_fd)) return *error;
    return counted(inner_->import_fd(fd, out, facts), physical_, +1);
  }
  hipError_t map(void* va, std::size_t size, PhysicalHandle handle) override {
    ++map_calls_;
    if (const auto error = injected(Call::map)) return *error;
    return counted(inner_->map(va, size, handle), mappings_, +1);
  }
  [[nodiscard]] DirectMap direct_map() const noexcept override {
    if (!direct_) return {};
    return {.call = &map_directly, .context = reinterpret_cast<std::uintptr_t>(this)};
  }
  hipError_t unmap(void* va, std::size_t size) override {
    if (const auto error = injected(Call::unmap)) return *error;
    return counted(inner_->unmap(va, size), mappings_, -1);
  }
  hipError_t set_access(void* va, std::size_t size, std::span<const AccessGrant> grants,
                        PhysicalHandle handle) override {
    if (const auto error = injected(Call::set_access)) return *error;
    return inner_->set_access(va, size, grants, handle);
  }
  hipError_t copy(void* dst, const void* src, std::size_t bytes) override { return inner_->copy(dst, src, bytes); }
  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    return inner_->fill(dst, value, bytes);
  }
  hipError_t synchronize(int device) override { return inner_->synchronize(device); }
  hipError_t memory_info(int device, std::uint64_t* free, std::uint64_t* total) override {
    return inner_->memory_info(device, free, total);
  }
  hipError_t set_peer_access(int device, int peer, bool enabled) override {
    if (const auto error = injected(Call::set_peer_access)) return *error;
    return inner_->set_peer_access(device, peer, enabled);
  }
  hipError_t can_access_peer(int device, int peer, bool* can) override {
    return inner_->can_access_peer(device, peer, can);
  }
  hipError_t load_word(const void* address, std::size_t bytes, std::uint64_t* value) override {
    return inner_->load_word(address, bytes, value);
  }
  hipError_t store_word(void* address, std::size_t bytes, std::uint64_t value) override {
    return inner_->store_word(address, bytes, value);
  }
  hipError_t allocate(int device, std::size_t size, void** out) override { return inner_->allocate(device, size, out); }
  hipError_t deallocate(void* ptr, std::size_t size) override { return inner_->deallocate(ptr, size); }
  hipError_t allocate_managed(std::size_t size, unsigned flags, void** out) override {
    return inner_->allocate_managed(size, flags, out);
  }
  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    return inner_->prefetch(ptr, bytes, device);
  }
  hipError_t advise(const void* ptr, std::size_t bytes, hipMemoryAdvise advice, int device) override {
    return inner_->advise(ptr, bytes, advice, device);
  }
  hipError_t ipc_get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle) override {
    return inner_->ipc_get_handle(ptr, size, handle);
  }
  hipError_t ipc_open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size) override {
    return inner_->ipc_open(handle, ptr, size);
  }
  hipError_t ipc_close(void* ptr, std::size_t size) override { return inner_->ipc_close(ptr, size); }
  // The host backend's stand-in device queues where HIPXX_HOST_QUEUES=1 asks for them, as in the
  // process's own runtime.
  std::unique_ptr<hipxx::backend::Queue> create_queue(int device, bool null_stream, bool blocking,
                                                      int priority) override {
    if (giving_up_queues_) return std::make_unique<GivingUpQueue>(hipxx::backend::make_host_queue(*inner_), given_up_);
    return inner_->create_queue(device, null_stream, blocking, priority);
  }
  [[nodiscard]] std::string queues_unavailable() const override {
    return giving_up_queues_ ? std::string{} : inner_->queues_unavailable();
  }
  // Device queues that give up once give_up() is called (set before the runtime is made).
  void use_giving_up_queues() noexcept { giving_up_queues_ = true; }
  void give_up() noexcept { given_up_->store(true, std::memory_order_release); }
  std::unique_ptr<hipxx::backend::Timestamp> create_timestamp(int device, bool timing) override {
    return inner_->create_timestamp(device, timing);
  }

 private:
  bool giving_up_queues_ = false;
  std::shared_ptr<std::atomic<bool>> given_up_ = std::make_shared<std::atomic<bool>>(false);

  std::optional<hipError_t> injected(Call call) {
    if (failing_ != call) return std::nullopt;
    if (passing_-- > 0) return std::nullopt;
    failing_.reset();
    return error_;
  }

  // The host backend's map needs the fd that the physical handle's number stands for there, which
  // the runtime passes on unchanged.
  static int map_directly(std::uintptr_t context, void* va, std::size_t size, std::uint64_t physical) noexcept {
    auto& self = *reinterpret_cast<FaultyBackend*>(context);
    ++self.direct_calls_;
    if (self.during_direct_map_) self.during_direct_map_();
    if (self.refuse_direct_ || size == self.refused_size_) return 1;
    const hipError_t result = self.inner_->map(va, size, PhysicalHandle{.value = physical});
    return counted(result, self.mappings_, +1) == hipSuccess ? 0 : 1;
  }

  static hipError_t counted(hipError_t result, std::atomic<int>& live, int change) {
    if (result == hipSuccess) live += change;
    return result;
  }

  std::unique_ptr<Backend> inner_;
  DeviceProperties device_;
  std::optional<Call> failing_;
  hipError_t error_ = hipSuccess;
  int passing_ = 0;
  // Atomic: the runtime makes direct map calls without its lock, from any thread.
  std::atomic<int> physical_ = 0;
  std::atomic<int> mappings_ = 0;
  bool direct_ = false;
  std::atomic<bool> refuse_direct_ = false;
  std::atomic<std::size_t> refused_size_ = 0;
  std::function<void()> during_direct_map_;
  std::function<void()> during_import_;
  std::atomic<int> direct_calls_ = 0;
  std::atomic<int> map_calls_ = 0;
};

// A runtime of its own over a FaultyBackend, and the backend, to tell it what to fail.
struct FaultyRuntime {
  FaultyBackend* backend = nullptr;
  std::unique_ptr<Runtime> runtime;

  explicit FaultyRuntime(int devices = 1, bool direct_map = false) {
    auto faulty = std::make_unique<FaultyBackend>(std::nullopt, devices, direct_map);
    backend = faulty.get();
    runtime = std::make_unique<Runtime>(std::move(faulty));
    REQUIRE(runtime->status() == hipSuccess);
  }

  [[nodiscard]] std::size_t granularity() const { return backend->device(0).minimum_granularity; }

  [[nodiscard]] void* reserve(std::size_t size) const {
    void* va = nullptr;
    REQUIRE(runtime->reserve(&va, size, 0, nullptr, 0) == hipSuccess);
    return va;
  }

  // Pinned memory on device 0, shareable as `handle_type` asks.
  [[nodiscard]] static hipMemAllocationProp properties(hipMemAllocationHandleType handle_type = hipMemHandleTypeNone) {
    hipMemAllocationProp properties{};
    properties.type = hipMemAllocationTypePinned;
    properties.requestedHandleType = handle_type;
    properties.location = {hipMemLocationTypeDevice, 0};
    return properties;
  }

  [[nodiscard]] hipMemGenericAllocationHandle_t create(
      std::size_t size, hipMemAllocationHandleType handle_type = hipMemHandleTypeNone) const {
    const hipMemAllocationProp wanted = properties(handle_type);
    hipMemGenericAllocationHandle_t handle = nullptr;
    REQUIRE(runtime->create(&handle, size, &wanted, 0) == hipSuccess);
    return handle;
  }

  [[nodiscard]] std::shared_ptr<hipxx::core::MemoryPool> default_pool() const {
    hipMemPool_t handle = nullptr;
    REQUIRE(runtime->pools().default_pool(0, &handle) == hipSuccess);
    std::shared_ptr<hipxx::core::MemoryPool> pool = runtime->pools().resolve(handle);
    REQUIRE(pool != nullptr);
    return pool;
  }

  [[nodiscard]] std::size_t mappings_in(void* base) const {
    std::size_t count = 0;
    REQUIRE(runtime->reservation_mapping_count(base, &count) == hipSuccess);
    return count;
  }

  [[nodiscard]] unsigned long long access_of(void* ptr) const {
    const hipMemLocation device{hipMemLocationTypeDevice, 0};
    unsigned long long flags = 0;
    REQUIRE(runtime->get_access(&flags, &device, ptr) == hipSuccess);
    return flags;
  }
};

void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

constexpr hipMemAccessDesc kReadWrite{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
constexpr hipMemAccessDesc kNoAccess{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtNone};

}  // namespace

TEST_CASE("a backend whose granularity is not a power of two of at most 4 GiB is refused at start-up") {
  for (const std::size_t granularity : {std::size_t{3} << 12, std::size_t{8} << 30, std::size_t{0}}) {
    CAPTURE(granularity);
    const Runtime runtime{std::make_unique<FaultyBackend>(granularity)};
    CHECK(runtime.status() == hipErrorNoDevice);
    CHECK(runtime.device_count() == 0);
    CHECK(runtime.selection_error().find("granularity") != std::string::npos);
  }
  const Runtime runtime{std::make_unique<FaultyBackend>(std::size_t{2} << 20)};
  CHECK(runtime.status() == hipSuccess);
  CHECK(runtime.selection_error().empty());
}

TEST_CASE("a reservation or an allocation the backend refuses is not booked") {
  FaultyRuntime faulty;
  const std::size_t g = faulty.granularity();
  faulty.backend->fail(Call::reserve, hipErrorOutOfMemory);
  void* va = nullptr;
  CHECK(faulty.runtime->reserve(&va, 4 * g, 0, nullptr, 0) == hipErrorOutOfMemory);
  CHECK(va == nullptr);
  CHECK(faulty.runtime->counts().reservations == 0);

  const hipMemAllocationProp properties = FaultyRuntime::properties();
  hipMemGenericAllocationHandle_t handle = nullptr;
  faulty.backend->fail(Call::create, hipErrorOutOfMemory);
  CHECK(faulty.runtime->create(&handle, g, &properties, 0) == hipErrorOutOfMemory);
  CHECK(handle == nullptr);
  CHECK(faulty.runtime->counts().allocations == 0);

  // Both work once the backend does.
  void* const base = faulty.reserve(4 * g);
  hipMemGenericAllocationHandle_t allocation = faulty.create(g);
  CHECK(faulty.runtime->release(allocation) == hipSuccess);
  CHECK(faulty.runtime->free_reservation(base, 4 * g) == hipSuccess);
  CHECK(faulty.runtime->counts().reservations == 0);
  CHECK(faulty.runtime->counts().allocations == 0);
}

TEST_CASE("peer access the driver refuses to give or take back is not booked as given or taken back") {
  FaultyRuntime faulty(2);
  hipxx::core::PeerAccess& peers = faulty.runtime->peer_access();
  faulty.backend->fail(Call::set_peer_access, hipErrorOutOfMemory);
  CHECK(peers.enable(*faulty.backend, 0, 1) == hipErrorOutOfMemory);
  CHECK(peers.disable(*faulty.backend, 0, 1) == hipErrorPeerAccessNotEnabled);  // still not given
  CHECK(peers.enable(*faulty.backend, 0, 1) == hipSuccess);
  faulty.backend->fail(Call::set_peer_access, hipErrorUnknown);
  CHECK(peers.disable(*faulty.backend, 0, 1) == hipErrorUnknown);
  CHECK(peers.enable(*faulty.backend, 0, 1) == hipErrorPeerAccessAlreadyEnabled);  // still given
  CHECK(peers.disable(*faulty.backend, 0, 1) == hipSuccess);
  CHECK(peers.disable(*faulty.backend, 0, 1) == hipErrorPeerAccessNotEnabled);
}

TEST_CASE("a map the backend refuses books nothing, and the allocation is as before") {
  FaultyRuntime faulty;
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(4 * g);
  hipMemGenericAllocationHandle_t allocation = faulty.create(2 * g);

  faulty.backend->fail(Call::map, hipErrorOutOfMemory);
  CHECK(faulty.runtime->map(base, 2 * g, 0, allocation, 0) == hipErrorOutOfMemory);
  CHECK(faulty.mappings_in(base) == 0);
  CHECK(faulty.runtime->counts().mappings == 0);

  // The allocation does not count the failed mapping: released now, it is gone at once.
  CHECK(faulty.runtime->release(allocation) == hipSuccess);
  CHECK(faulty.runtime->counts().allocations == 0);

  // And the same place takes a map afterwards, of a new allocation.
  hipMemGenericAllocationHandle_t again = faulty.create(2 * g);
  REQUIRE(faulty.runtime->map(base, 2 * g, 0, again, 0) == hipSuccess);
  CHECK(faulty.mappings_in(base) == 1);
  CHECK(faulty.runtime->release(again) == hipSuccess);
  CHECK(faulty.runtime->counts().allocations == 1);  // the mapping holds it
  CHECK(faulty.runtime->unmap(base, 2 * g) == hipSuccess);
  CHECK(faulty.runtime->counts().allocations == 0);
  CHECK(faulty.runtime->free_reservation(base, 4 * g) == hipSuccess);
}

TEST_CASE("a backend's direct map: the runtime maps through it, and through map() where it does not map") {
  FaultyRuntime faulty{1, true};
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(2 * g);
  hipMemGenericAllocationHandle_t allocation = faulty.create(g);

  SUBCASE("the direct call maps: map() is not asked, and the mapping is booked and usable") {
    REQUIRE(faulty.runtime->map(base, g, 0, allocation, 0) == hipSuccess);
    CHECK(faulty.backend->direct_calls() == 1);
    CHECK(faulty.backend->map_calls() == 0);
    CHECK(faulty.backend->mappings() == 1);
    CHECK(faulty.mappings_in(base) == 1);
    REQUIRE(faulty.runtime->set_access(base, g, {&kReadWrite, 1}) == hipSuccess);
    CHECK(faulty.runtime->fill(base, 0x5a, g) == hipSuccess);
    unsigned char last = 0;
    CHECK(faulty.runtime->copy(&last, at(base, g - 1), 1, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(last == 0x5a);
  }
  SUBCASE("the direct call does not map: map() does, and the mapping is booked once") {
    faulty.backend->refuse_direct_maps(true);
    REQUIRE(faulty.runtime->map(base, g, 0, allocation, 0) == hipSuccess);
    CHECK(faulty.backend->direct_calls() == 1);
    CHECK(faulty.backend->map_calls() == 1);
    CHECK(faulty.backend->mappings() == 1);
    CHECK(faulty.mappings_in(base) == 1);
  }
  SUBCASE("neither maps: map()'s error, nothing booked, and the place still takes a map") {
    faulty.backend->refuse_direct_maps(true);
    faulty.backend->fail(Call::map, hipErrorOutOfMemory);
    CHECK(faulty.runtime->map(base, g, 0, allocation, 0) == hipErrorOutOfMemory);
    CHECK(faulty.backend->direct_calls() == 1);
    CHECK(faulty.backend->map_calls() == 1);
    CHECK(faulty.backend->mappings() == 0);
    CHECK(faulty.mappings_in(base) == 0);
    faulty.backend->refuse_direct_maps(false);
    REQUIRE(faulty.runtime->map(base, g, 0, allocation, 0) == hipSuccess);
    CHECK(faulty.backend->direct_calls() == 2);
    CHECK(faulty.backend->map_calls() == 1);
  }
  // A map the books refuse (larger than the allocation) reaches neither.
  const int direct_before = faulty.backend->direct_calls();
  const int map_before = faulty.backend->map_calls();
  CHECK(faulty.runtime->map(at(base, g), 2 * g, 0, allocation, 0) == hipErrorInvalidValue);
  CHECK(faulty.backend->direct_calls() == direct_before);
  CHECK(faulty.backend->map_calls() == map_before);

  // Each way, the allocation is mapped once: its mapping keeps it until the unmap.
  CHECK(faulty.runtime->release(allocation) == hipSuccess);
  CHECK(faulty.backend->physical() == 1);
  CHECK(faulty.runtime->unmap(base, g) == hipSuccess);
  CHECK(faulty.backend->mappings() == 0);
  CHECK(faulty.backend->physical() == 0);
  CHECK(faulty.runtime->free_reservation(base, 2 * g) == hipSuccess);
}

TEST_CASE("a direct map runs with the books unlocked, booked already, and a failure after it frees what it must") {
  FaultyRuntime faulty{1, true};
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(2 * g);
  hipMemGenericAllocationHandle_t allocation = faulty.create(g);
  // Other calls go through while the driver maps (they would wait for ever on a held lock): the
  // mapping is in the books already, and the application lets go of its allocation meanwhile.
  std::size_t booked_meanwhile = 0;
  hipError_t released_meanwhile = hipErrorUnknown;
  faulty.backend->during_direct_maps([&] {
    booked_meanwhile = faulty.mappings_in(base);
    released_meanwhile = faulty.runtime->release(allocation);
  });

  SUBCASE("the driver maps: the mapping holds the memory until its unmap") {
    REQUIRE(faulty.runtime->map(base, g, 0, allocation, 0) == hipSuccess);
    CHECK(booked_meanwhile == 1);
    CHECK(released_meanwhile == hipSuccess);
    CHECK(faulty.backend->physical() == 1);
    CHECK(faulty.runtime->counts().allocations == 1);
    CHECK(faulty.runtime->unmap(base, g) == hipSuccess);
    CHECK(faulty.backend->physical() == 0);
  }
  SUBCASE("neither the driver nor map() maps: the failed mapping was the memory's last use, so it is freed") {
    faulty.backend->refuse_direct_maps(true);
    faulty.backend->fail(Call::map, hipErrorOutOfMemory);
    CHECK(faulty.runtime->map(base, g, 0, allocation, 0) == hipErrorOutOfMemory);
    CHECK(booked_meanwhile == 1);
    CHECK(released_meanwhile == hipSuccess);
    CHECK(faulty.mappings_in(base) == 0);
    CHECK(faulty.backend->mappings() == 0);
    CHECK(faulty.backend->physical() == 0);
    CHECK(faulty.runtime->counts().allocations == 0);
  }
  faulty.backend->during_direct_maps({});
  CHECK(faulty.runtime->free_reservation(base, 2 * g) == hipSuccess);
}

TEST_CASE("a direct map that fails after another mapping was booked in front of it unbooks its own") {
  FaultyRuntime faulty{1, true};
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(4 * g);
  hipMemGenericAllocationHandle_t front = faulty.create(g);
  hipMemGenericAllocationHandle_t back = faulty.create(2 * g);
  // The map of `back` (two granules, at the third) does not map; while its driver call runs, `front`
  // is mapped at the reservation's start, which moves `back`'s place in the books.
  faulty.backend->refuse_direct_maps_of(2 * g);
  faulty.backend->fail(Call::map, hipErrorOutOfMemory);
  bool armed = true;
  hipError_t front_mapped = hipErrorUnknown;
  faulty.backend->during_direct_maps([&] {
    if (!std::exchange(armed, false)) return;
    front_mapped = faulty.runtime->map(base, g, 0, front, 0);
  });
  CHECK(faulty.runtime->map(at(base, 2 * g), 2 * g, 0, back, 0) == hipErrorOutOfMemory);
  CHECK(front_mapped == hipSuccess);
  CHECK(faulty.mappings_in(base) == 1);
  CHECK(faulty.backend->mappings() == 1);
  // What is left is `front`'s mapping, whole; `back`'s place takes a map again.
  CHECK(faulty.runtime->unmap(at(base, 2 * g), 2 * g) == hipErrorInvalidValue);
  faulty.backend->during_direct_maps({});
  faulty.backend->refuse_direct_maps_of(0);
  REQUIRE(faulty.runtime->map(at(base, 2 * g), 2 * g, 0, back, 0) == hipSuccess);
  CHECK(faulty.mappings_in(base) == 2);
  CHECK(faulty.runtime->unmap(base, g) == hipSuccess);
  CHECK(faulty.runtime->unmap(at(base, 2 * g), 2 * g) == hipSuccess);
  CHECK(faulty.runtime->release(front) == hipSuccess);
  CHECK(faulty.runtime->release(back) == hipSuccess);
  CHECK(faulty.backend->physical() == 0);
  CHECK(faulty.runtime->free_reservation(base, 4 * g) == hipSuccess);
}

TEST_CASE("threads mapping through a direct map, and through map() where it does not map, keep the books whole") {
  FaultyRuntime faulty{1, true};
  const std::size_t g = faulty.granularity();
  // Maps of two granules go through map(), under the lock; the others straight to the "driver".
  faulty.backend->refuse_direct_maps_of(2 * g);
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::atomic<int> failures = 0;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      const std::size_t size = (thread % 2 == 0 ? 1 : 2) * g;
      for (int round = 0; round < kRounds; ++round) {
        void* va = nullptr;
        hipMemGenericAllocationHandle_t allocation = nullptr;
        const hipMemAllocationProp wanted = FaultyRuntime::properties();
        const bool made = faulty.runtime->reserve(&va, size, 0, nullptr, 0) == hipSuccess &&
                          faulty.runtime->create(&allocation, size, &wanted, 0) == hipSuccess &&
                          faulty.runtime->map(va, size, 0, allocation, 0) == hipSuccess &&
                          faulty.runtime->release(allocation) == hipSuccess &&
                          faulty.runtime->unmap(va, size) == hipSuccess &&
                          faulty.runtime->free_reservation(va, size) == hipSuccess;
        if (!made) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(faulty.backend->direct_calls() == kThreads * kRounds);
  CHECK(faulty.backend->map_calls() == kThreads / 2 * kRounds);
  CHECK(faulty.backend->mappings() == 0);
  CHECK(faulty.backend->physical() == 0);
  CHECK(faulty.runtime->counts().allocations == 0);
  CHECK(faulty.runtime->counts().mappings == 0);
  CHECK(faulty.runtime->counts().reservations == 0);
}

TEST_CASE("a failed map into a gap leaves the mappings on both sides as they were") {
  FaultyRuntime faulty;
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(3 * g);
  std::array<hipMemGenericAllocationHandle_t, 3> pieces{};
  for (hipMemGenericAllocationHandle_t& piece : pieces) piece = faulty.create(g);
  REQUIRE(faulty.runtime->map(at(base, 0), g, 0, pieces[0], 0) == hipSuccess);
  REQUIRE(faulty.runtime->map(at(base, 2 * g), g, 0, pieces[2], 0) == hipSuccess);

  faulty.backend->fail(Call::map, hipErrorUnknown);
  CHECK(faulty.runtime->map(at(base, g), g, 0, pieces[1], 0) == hipErrorUnknown);
  CHECK(faulty.mappings_in(base) == 2);
  // The gap is still a gap: a map fills it, and an unmap of all three then needs no other.
  REQUIRE(faulty.runtime->map(at(base, g), g, 0, pieces[1], 0) == hipSuccess);
  CHECK(faulty.mappings_in(base) == 3);
  for (hipMemGenericAllocationHandle_t piece : pieces) CHECK(faulty.runtime->release(piece) == hipSuccess);
  CHECK(faulty.runtime->unmap(base, 3 * g) == hipSuccess);
  CHECK(faulty.runtime->counts().mappings == 0);
  CHECK(faulty.runtime->counts().allocations == 0);
  CHECK(faulty.runtime->free_reservation(base, 3 * g) == hipSuccess);
}

TEST_CASE("an unmap the backend refuses halfway: what it undid is unbooked, the rest still booked") {
  FaultyRuntime faulty;
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(3 * g);
  std::array<hipMemGenericAllocationHandle_t, 3> pieces{};
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    pieces[i] = faulty.create(g);
    REQUIRE(faulty.runtime->map(at(base, i * g), g, 0, pieces[i], 0) == hipSuccess);
    CHECK(faulty.runtime->release(pieces[i]) == hipSuccess);  // the mappings hold them now
  }
  CHECK(faulty.runtime->counts().allocations == 3);

  // The second of the three backend unmaps fails.
  faulty.backend->fail(Call::unmap, hipErrorUnknown, 1);
  CHECK(faulty.runtime->unmap(base, 3 * g) == hipErrorUnknown);
  CHECK(faulty.mappings_in(base) == 2);
  CHECK(faulty.runtime->counts().allocations == 2);  // the first mapping's allocation went with it
  // The first range is free to map again; the other two are still mapped.
  hipMemGenericAllocationHandle_t fresh = faulty.create(g);
  CHECK(faulty.runtime->map(at(base, g), g, 0, fresh, 0) == hipErrorInvalidValue);
  REQUIRE(faulty.runtime->map(base, g, 0, fresh, 0) == hipSuccess);
  CHECK(faulty.runtime->release(fresh) == hipSuccess);

  CHECK(faulty.runtime->unmap(base, 3 * g) == hipSuccess);
  CHECK(faulty.runtime->counts().mappings == 0);
  CHECK(faulty.runtime->counts().allocations == 0);
  CHECK(faulty.runtime->free_reservation(base, 3 * g) == hipSuccess);
}

TEST_CASE("an access change the backend refuses leaves the access as it was") {
  FaultyRuntime faulty;
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(g);
  hipMemGenericAllocationHandle_t allocation = faulty.create(g);
  REQUIRE(faulty.runtime->map(base, g, 0, allocation, 0) == hipSuccess);
  REQUIRE(faulty.runtime->set_access(base, g, {&kReadWrite, 1}) == hipSuccess);
  CHECK(faulty.access_of(base) == hipMemAccessFlagsProtReadWrite);

  faulty.backend->fail(Call::set_access, hipErrorUnknown);
  CHECK(faulty.runtime->set_access(base, g, {&kNoAccess, 1}) == hipErrorUnknown);
  CHECK(faulty.access_of(base) == hipMemAccessFlagsProtReadWrite);
  // Still usable: the memory takes a fill and gives it back.
  REQUIRE(faulty.runtime->fill(base, 0x5a, g) == hipSuccess);
  unsigned char byte = 0;
  REQUIRE(faulty.runtime->copy(&byte, at(base, g - 1), 1, hipMemcpyDeviceToHost) == hipSuccess);
  CHECK(byte == 0x5a);

  CHECK(faulty.runtime->set_access(base, g, {&kNoAccess, 1}) == hipSuccess);
  CHECK(faulty.access_of(base) == hipMemAccessFlagsProtNone);
  CHECK(faulty.runtime->unmap(base, g) == hipSuccess);
  CHECK(faulty.runtime->release(allocation) == hipSuccess);
  CHECK(faulty.runtime->free_reservation(base, g) == hipSuccess);
  CHECK(faulty.runtime->counts().allocations == 0);
}

TEST_CASE("an export or an import the backend refuses leaves no descriptor and no allocation behind") {
  FaultyRuntime faulty;
  Runtime& runtime = *faulty.runtime;
  const std::size_t fds_at_start = open_fd_count();
  hipMemGenericAllocationHandle_t handle = faulty.create(faulty.granularity(), hipMemHandleTypePosixFileDescriptor);

  const std::size_t fds = open_fd_count();  // the host backend's allocation is a memfd
  faulty.backend->fail(Call::export_fd, hipErrorOutOfMemory);
  int fd = -1;
  CHECK(runtime.export_handle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) == hipErrorOutOfMemory);
  CHECK(fd == -1);
  CHECK(open_fd_count() == fds);
  REQUIRE(runtime.export_handle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);

  faulty.backend->fail(Call::import_fd, hipErrorInvalidValue);
  hipMemGenericAllocationHandle_t imported = nullptr;
  void* const os_handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));
  CHECK(runtime.import_handle(&imported, os_handle, hipMemHandleTypePosixFileDescriptor) == hipErrorInvalidValue);
  CHECK(imported == nullptr);
  CHECK(runtime.counts().allocations == 1);
  CHECK(faulty.backend->physical() == 1);
  CHECK(fcntl(fd, F_GETFD) != -1);  // still the caller's, open

  REQUIRE(runtime.import_handle(&imported, os_handle, hipMemHandleTypePosixFileDescriptor) == hipSuccess);
  CHECK(runtime.counts().allocations == 2);
  CHECK(runtime.release(imported) == hipSuccess);
  CHECK(runtime.release(handle) == hipSuccess);
  CHECK(close(fd) == 0);
  CHECK(runtime.counts().allocations == 0);
  CHECK(faulty.backend->physical() == 0);
  CHECK(open_fd_count() == fds_at_start);
}

TEST_CASE("a pool whose growth the backend refuses stays usable and keeps nothing of the failed growth") {
  FaultyRuntime faulty;
  Runtime& runtime = *faulty.runtime;
  const std::shared_ptr<hipxx::core::MemoryPool> pool = faulty.default_pool();
  // One small block maps one chunk: its size.
  void* small = nullptr;
  REQUIRE(runtime.allocate_async(&small, 1, nullptr, nullptr) == hipSuccess);
  std::uint64_t chunk = 0;
  REQUIRE(pool->get_attribute(hipMemPoolAttrReservedMemCurrent, &chunk) == hipSuccess);
  REQUIRE(chunk > 0);
  REQUIRE(runtime.free_async(small, nullptr) == hipSuccess);
  REQUIRE(runtime.synchronize() == hipSuccess);
  pool->trim_to(0);
  REQUIRE(faulty.backend->mappings() == 0);
  const auto reserved = [&](hipMemPoolAttr attribute) {
    std::uint64_t bytes = 0;
    REQUIRE(pool->get_attribute(attribute, &bytes) == hipSuccess);
    return bytes;
  };
  const auto reset_reserved_high = [&] {
    const std::uint64_t zero = 0;
    REQUIRE(pool->set_attribute(hipMemPoolAttrReservedMemHigh, &zero) == hipSuccess);
    REQUIRE(reserved(hipMemPoolAttrReservedMemHigh) == 0);
  };
  reset_reserved_high();

  for (const Call call : {Call::create, Call::map, Call::set_access}) {
    CAPTURE(static_cast<int>(call));
    // A block over three chunks, whose second chunk fails at this step: the first is undone too.
    faulty.backend->fail(call, hipErrorOutOfMemory, 1);
    void* block = nullptr;
    CHECK(runtime.allocate_async(&block, 3 * chunk, nullptr, nullptr) == hipErrorOutOfMemory);
    CHECK(block == nullptr);
    CHECK(faulty.backend->mappings() == 0);
    CHECK(faulty.backend->physical() == 0);
    CHECK(runtime.counts().mappings == 0);
    CHECK(runtime.counts().allocations == 0);
    // The chunk mapped before the failure was never the pool's: no mark of it is left.
    CHECK(reserved(hipMemPoolAttrReservedMemCurrent) == 0);
    CHECK(reserved(hipMemPoolAttrReservedMemHigh) == 0);

    // The same request succeeds once the backend does, and its memory works.
    REQUIRE(runtime.allocate_async(&block, 3 * chunk, nullptr, nullptr) == hipSuccess);
    CHECK(faulty.backend->mappings() >= 3);
    REQUIRE(runtime.fill(block, 0x3c, 3 * chunk) == hipSuccess);
    unsigned char last = 0;
    REQUIRE(runtime.copy(&last, at(block, 3 * chunk - 1), 1, hipMemcpyDeviceToHost) == hipSuccess);
    CHECK(last == 0x3c);
    REQUIRE(runtime.free_async(block, nullptr) == hipSuccess);
    REQUIRE(runtime.synchronize() == hipSuccess);
    pool->trim_to(0);
    CHECK(faulty.backend->mappings() == 0);
    CHECK(faulty.backend->physical() == 0);
    CHECK(reserved(hipMemPoolAttrReservedMemHigh) >= 3 * chunk);
    reset_reserved_high();
  }
}

TEST_CASE("two threads importing one pool pointer at once book it once, and each import takes one free") {
  FaultyRuntime faulty;
  Runtime& runtime = *faulty.runtime;
  hipMemPoolProps properties{};
  properties.allocType = hipMemAllocationTypePinned;
  properties.handleTypes = hipMemHandleTypePosixFileDescriptor;
  properties.location = {hipMemLocationTypeDevice, 0};
  hipMemPool_t pool = nullptr;
  REQUIRE(runtime.pools().create(&pool, &properties) == hipSuccess);
  void* block = nullptr;
  REQUIRE(runtime.allocate_async(&block, 4096, pool, nullptr) == hipSuccess);
  REQUIRE(runtime.synchronize() == hipSuccess);
  hipxx::core::PoolSharing& sharing = runtime.pool_sharing();
  hipMemPoolPtrExportData data{};
  REQUIRE(sharing.export_pointer(&data, block) == hipSuccess);
  int fd = -1;
  REQUIRE(sharing.export_pool(&fd, pool, hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);
  hipMemPool_t imported = nullptr;
  REQUIRE(sharing.import_pool(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                              hipMemHandleTypePosixFileDescriptor, 0) == hipSuccess);

  // The first import maps the pointer's chunk, which imports its memory: there a second thread
  // starts importing the same pointer, finds it not yet booked, and waits for the chunk.
  std::atomic<bool> started = false;
  std::thread second;
  void* second_pointer = nullptr;
  hipError_t second_result = hipErrorUnknown;
  faulty.backend->during_imports([&] {
    if (started.exchange(true)) return;
    second = std::thread{[&] { second_result = sharing.import_pointer(&second_pointer, imported, &data); }};
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  });
  void* first_pointer = nullptr;
  CHECK(sharing.import_pointer(&first_pointer, imported, &data) == hipSuccess);
  second.join();
  CHECK(second_result == hipSuccess);
  CHECK(second_pointer == first_pointer);
  const auto used = [&] {
    std::uint64_t bytes = 0;
    REQUIRE(sharing.imported(imported)->get_attribute(hipMemPoolAttrUsedMemCurrent, &bytes) == hipSuccess);
    return bytes;
  };
  CHECK(used() == 4096);
  // Each import owes one free; once both are made, nothing of the pointer is left.
  CHECK(runtime.deallocate(first_pointer) == hipSuccess);
  CHECK(runtime.deallocate(first_pointer) == hipSuccess);
  CHECK(runtime.deallocate(first_pointer) == hipErrorInvalidValue);
  CHECK(used() == 0);
  CHECK(sharing.destroy_imported(imported) == hipSuccess);
  CHECK(close(fd) == 0);
  CHECK(runtime.deallocate(block) == hipSuccess);
  CHECK(runtime.pools().destroy(pool) == hipSuccess);
}

TEST_CASE("a reservation the backend will not free stays booked, and can be freed later") {
  FaultyRuntime faulty;
  const std::size_t g = faulty.granularity();
  void* const base = faulty.reserve(2 * g);
  faulty.backend->fail(Call::free_reservation, hipErrorUnknown);
  CHECK(faulty.runtime->free_reservation(base, 2 * g) == hipErrorUnknown);
  CHECK(faulty.runtime->counts().reservations == 1);
  CHECK(faulty.mappings_in(base) == 0);
  // Still a reservation: it takes a mapping.
  hipMemGenericAllocationHandle_t allocation = faulty.create(g);
  REQUIRE(faulty.runtime->map(base, g, 0, allocation, 0) == hipSuccess);
  // Each way, the allocation is mapped once: its mapping keeps it until the unmap.
  CHECK(faulty.runtime->release(allocation) == hipSuccess);
  CHECK(faulty.backend->physical() == 1);
  CHECK(faulty.runtime->unmap(base, g) == hipSuccess);
  CHECK(faulty.runtime->free_reservation(base, 2 * g) == hipSuccess);
  CHECK(faulty.runtime->counts().reservations == 0);
}

TEST_CASE("a pool access change the backend refuses at one chunk puts the chunks before it back") {
  FaultyRuntime faulty{2};
  Runtime& runtime = *faulty.runtime;
  const std::shared_ptr<hipxx::core::MemoryPool> pool = faulty.default_pool();
  const std::size_t chunk = pool->chunk_bytes();
  void* block = nullptr;
  REQUIRE(runtime.allocate_async(&block, 3 * chunk, nullptr, nullptr) == hipSuccess);
  REQUIRE(pool->access(1) == hipMemAccessFlagsProtNone);
  const hipMemLocation second{hipMemLocationTypeDevice, 1};
  const auto second_device_access = [&](std::size_t at_chunk) {
    unsigned long long flags = 0;
    REQUIRE(runtime.get_access(&flags, &second, at(block, at_chunk * chunk)) == hipSuccess);
    return flags;
  };

  // The first chunk takes the change; the second refuses it.
  const hipMemAccessDesc read_write{{hipMemLocationTypeDevice, 1}, hipMemAccessFlagsProtReadWrite};
  faulty.backend->fail(Call::set_access, hipErrorUnknown, 1);
  CHECK(pool->set_access(&read_write, 1) == hipErrorUnknown);
  CHECK(pool->access(1) == hipMemAccessFlagsProtNone);
  for (std::size_t index = 0; index < 3; ++index) {
    CAPTURE(index);
    CHECK(second_device_access(index) == hipMemAccessFlagsProtNone);
  }

  REQUIRE(pool->set_access(&read_write, 1) == hipSuccess);
  CHECK(pool->access(1) == hipMemAccessFlagsProtReadWrite);
  for (std::size_t index = 0; index < 3; ++index) {
    CAPTURE(index);
    CHECK(second_device_access(index) == hipMemAccessFlagsProtReadWrite);
  }
  REQUIRE(runtime.free_async(block, nullptr) == hipSuccess);
  REQUIRE(runtime.synchronize() == hipSuccess);
  pool->trim_to(0);
  CHECK(faulty.backend->mappings() == 0);
  CHECK(faulty.backend->physical() == 0);
}

// A CUDA stream whose context a fault spoiled runs nothing more and never writes its progress word
// again: queries of its stream and events must report the fault (as its synchronize does) rather
// than hipErrorNotReady for ever. Here the host backend's stand-in queue gives up on request.
TEST_CASE("a device queue the device gave up on: stream and event queries report its fault, waits end") {
  auto made = std::make_unique<FaultyBackend>();
  FaultyBackend& backend = *made;
  backend.use_giving_up_queues();
  Runtime runtime{std::move(made)};
  REQUIRE(runtime.status() == hipSuccess);
  hipStream_t handle = nullptr;
  REQUIRE(runtime.streams().create(&handle, {.device = 0, .flags = hipStreamNonBlocking}) == hipSuccess);
  std::shared_ptr<hipxx::core::Stream> stream = runtime.streams().resolve(handle, 0);
  REQUIRE(stream);
  REQUIRE(stream->queue() != nullptr);
  void* memory = nullptr;
  REQUIRE(runtime.allocate(&memory, 4096) == hipSuccess);
  REQUIRE(runtime.fill_async(memory, 1, 4096, handle) == hipSuccess);
  stream->synchronize();
  CHECK(stream->query() == hipSuccess);

  backend.give_up();
  REQUIRE(runtime.fill_async(memory, 2, 4096, handle) == hipSuccess);  // taken, and never run
  hipxx::core::Event event{hipEventDisableTiming};
  auto marker = std::make_shared<hipxx::core::EventMarker>(stream, 0);
  marker->sequence = stream->tail();
  event.set_marker(marker);
  CHECK_FALSE(stream->reached(stream->tail()));
  CHECK(stream->query() == hipErrorLaunchFailure);
  CHECK(event.query() == hipErrorLaunchFailure);
  stream->synchronize();  // ends at the fault
  CHECK(event.synchronize() == hipErrorLaunchFailure);
  CHECK(runtime.streams().destroy(handle) == hipSuccess);
  CHECK(runtime.deallocate(memory) == hipSuccess);
  // The destroyed stream's worker lets go of it on its own: gone before the runtime is.
  const std::weak_ptr<hipxx::core::Stream> watched = stream;
  stream.reset();
  marker.reset();
  for (int waited = 0; waited < 5000 && !watched.expired(); ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  CHECK(watched.expired());
}
