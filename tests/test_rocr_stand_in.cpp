// The stand-in libhsa-runtime64 (tests/rocr), loaded with dlopen as the ROCr backend loads the real
// one (meson names it in HIPXX_ROCR_LIBRARY and asks for two GPU agents): the documented rules that
// the backend relies on hold, and breaking one is refused, or faults, as on a GPU.
//
// The cases that share memory with another process start this executable again (fork+exec) with
// HIPXX_STAND_IN_PEER set, running only the skipped "stand-in peer" case, which acts the other side.
#include <doctest/doctest.h>

#include "backend/rocr/hsa_runtime.hpp"
#include "support/processes.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace {

using namespace hipxx::backend::rocr;  // NOLINT(google-build-using-namespace): the HSA names, as in C
using namespace std::chrono_literals;

using GetAccess = hsa_status_t (*)(void* va, hsa_access_permission_t* perms, hsa_agent_t agent_handle);
using RetainAllocHandle = hsa_status_t (*)(hsa_amd_vmem_alloc_handle_t* memory_handle, void* addr);

struct Library {
  RuntimeApi api;
  GetAccess get_access = nullptr;
  RetainAllocHandle retain = nullptr;
};

template <typename Pointer>
Pointer look_up(void* library, const char* name) {
  void* symbol = dlsym(library, name);
  REQUIRE_MESSAGE(symbol != nullptr, name, " is not exported");
  return reinterpret_cast<Pointer>(symbol);
}

const Library& library() {
  static const Library loaded = [] {
    const char* path = std::getenv("HIPXX_ROCR_LIBRARY");
    REQUIRE_MESSAGE(path != nullptr, "HIPXX_ROCR_LIBRARY must name the stand-in library (meson sets it)");
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(handle != nullptr, dlerror());
    Library found;
// NOLINTNEXTLINE(bugprone-macro-parentheses): a member's name, which takes no parentheses
#define HIPXX_TEST_LOOK_UP(name, type) found.api.name = look_up<std::type_identity_t<type>>(handle, #name);
    HIPXX_ROCR_ENTRY_POINTS(HIPXX_TEST_LOOK_UP)
    HIPXX_ROCR_OPTIONAL_ENTRY_POINTS(HIPXX_TEST_LOOK_UP)
#undef HIPXX_TEST_LOOK_UP
    found.get_access = look_up<GetAccess>(handle, "hsa_amd_vmem_get_access");
    found.retain = look_up<RetainAllocHandle>(handle, "hsa_amd_vmem_retain_alloc_handle");
    return found;
  }();
  return loaded;
}

const RuntimeApi& hsa() { return library().api; }

std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

std::byte* bytes(void* pointer) { return static_cast<std::byte*>(pointer); }

// Whether host code may read / write the byte at `address`, asked of the kernel (a pipe copies from
// and to it), so that the test itself never faults.
bool host_can_read(const void* address) {
  std::array<int, 2> ends{};
  REQUIRE(pipe(ends.data()) == 0);
  const bool readable = write(ends[1], address, 1) == 1;
  close(ends[0]);
  close(ends[1]);
  return readable;
}

bool host_can_write(void* address) {
  if (!host_can_read(address)) return false;
  std::array<int, 2> ends{};
  REQUIRE(pipe(ends.data()) == 0);
  REQUIRE(write(ends[1], address, 1) == 1);  // the byte it holds goes back unchanged
  const bool writable = read(ends[0], address, 1) == 1;
  close(ends[0]);
  close(ends[1]);
  return writable;
}

// hsa_init for one case, with the agents and pools found, and hsa_shut_down at its end.
struct Session {
  hsa_agent_t cpu{};
  std::vector<hsa_agent_t> gpus;
  hsa_amd_memory_pool_t cpu_pool{};
  std::vector<hsa_amd_memory_pool_t> gpu_pools;

  Session() {
    REQUIRE(hsa().hsa_init() == HSA_STATUS_SUCCESS);
    std::vector<hsa_agent_t> agents;
    REQUIRE(hsa().hsa_iterate_agents(collect<hsa_agent_t>, &agents) == HSA_STATUS_SUCCESS);
    for (const hsa_agent_t agent : agents) {
      hsa_device_type_t type{};
      REQUIRE(hsa().hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS);
      std::vector<hsa_amd_memory_pool_t> pools;
      REQUIRE(hsa().hsa_amd_agent_iterate_memory_pools(agent, collect<hsa_amd_memory_pool_t>, &pools) ==
              HSA_STATUS_SUCCESS);
      REQUIRE(pools.size() == 1);
      if (type == HSA_DEVICE_TYPE_CPU) {
        cpu = agent;
        cpu_pool = pools[0];
      } else {
        gpus.push_back(agent);
        gpu_pools.push_back(pools[0]);
      }
    }
    REQUIRE(gpus.size() == 2);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  Session(Session&&) = delete;
  Session& operator=(Session&&) = delete;
  ~Session() { CHECK(hsa().hsa_shut_down() == HSA_STATUS_SUCCESS); }

  template <typename Handle>
  static hsa_status_t collect(Handle handle, void* found) {
    static_cast<std::vector<Handle>*>(found)->push_back(handle);
    return HSA_STATUS_SUCCESS;
  }
};

struct Signal {
  hsa_signal_t handle{};
  explicit Signal(hsa_signal_value_t value) {
    REQUIRE(hsa().hsa_signal_create(value, 0, nullptr, &handle) == HSA_STATUS_SUCCESS);
  }
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;
  Signal(Signal&&) = delete;
  Signal& operator=(Signal&&) = delete;
  ~Signal() { CHECK(hsa().hsa_signal_destroy(handle) == HSA_STATUS_SUCCESS); }

  [[nodiscard]] hsa_signal_value_t value() const { return hsa().hsa_signal_load_scacquire(handle); }
  void wait_for_zero() const {
    CHECK(hsa().hsa_signal_wait_scacquire(handle, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED) == 0);
  }
};

void* allocate(hsa_amd_memory_pool_t pool, std::size_t size) {
  void* pointer = nullptr;
  REQUIRE(hsa().hsa_amd_memory_pool_allocate(pool, size, 0, &pointer) == HSA_STATUS_SUCCESS);
  return pointer;
}

// Host memory of the CPU pool that `gpu` may reach too, for staging.
void* staging(const Session& session, hsa_agent_t gpu, std::size_t size) {
  void* pointer = allocate(session.cpu_pool, size);
  REQUIRE(hsa().hsa_amd_agents_allow_access(1, &gpu, nullptr, pointer) == HSA_STATUS_SUCCESS);
  return pointer;
}

hsa_status_t copy(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent, std::size_t size) {
  const Signal done{1};
  const hsa_status_t status =
      hsa().hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, size, 0, nullptr, done.handle);
  if (status == HSA_STATUS_SUCCESS) done.wait_for_zero();
  if (status != HSA_STATUS_SUCCESS) CHECK(done.value() == 1);  // a refused copy signals nothing
  return status;
}

// What `gpu` reads at `source` (device memory), through a copy into staging memory.
std::vector<std::byte> read_device(const Session& session, hsa_agent_t gpu, const void* source, std::size_t size) {
  void* stage = staging(session, gpu, size);
  std::memset(stage, 0, size);
  REQUIRE(copy(stage, session.cpu, source, gpu, size) == HSA_STATUS_SUCCESS);
  std::vector<std::byte> seen(bytes(stage), bytes(stage) + size);
  REQUIRE(hsa().hsa_amd_memory_pool_free(stage) == HSA_STATUS_SUCCESS);
  return seen;
}

bool all_equal(const std::vector<std::byte>& seen, std::uint8_t value) {
  return std::all_of(seen.begin(), seen.end(), [value](std::byte each) { return each == std::byte{value}; });
}

// A reservation with one handle of `size` bytes mapped at its start.
struct VmemMapping {
  void* va = nullptr;
  std::size_t reserved = 0;
  std::size_t size = 0;
  hsa_amd_vmem_alloc_handle_t handle{};

  VmemMapping(hsa_amd_memory_pool_t pool, std::size_t mapped, std::size_t reserve) : reserved(reserve), size(mapped) {
    REQUIRE(hsa().hsa_amd_vmem_address_reserve(&va, reserved, 0, 0) == HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_amd_vmem_handle_create(pool, size, MEMORY_TYPE_PINNED, 0, &handle) == HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_amd_vmem_map(va, size, 0, handle, 0) == HSA_STATUS_SUCCESS);
  }
  VmemMapping(const VmemMapping&) = delete;
  VmemMapping& operator=(const VmemMapping&) = delete;
  VmemMapping(VmemMapping&&) = delete;
  VmemMapping& operator=(VmemMapping&&) = delete;
  ~VmemMapping() {
    CHECK(hsa().hsa_amd_vmem_unmap(va, size) == HSA_STATUS_SUCCESS);
    CHECK(hsa().hsa_amd_vmem_handle_release(handle) == HSA_STATUS_SUCCESS);
    CHECK(hsa().hsa_amd_vmem_address_free(va, reserved) == HSA_STATUS_SUCCESS);
  }

  [[nodiscard]] hsa_status_t grant(std::vector<hsa_amd_memory_access_desc_t> access) const {
    return hsa().hsa_amd_vmem_set_access(va, size, access.data(), access.size());
  }
};

// Starts this executable again as the other process, running the "stand-in peer" case with
// HIPXX_STAND_IN_PEER=`order`, `descriptor` (when not -1) as its descriptor 3; returns its exit code.
int run_peer(const std::string& order, int descriptor = -1, const std::vector<std::string>& more_environment = {}) {
  std::array<char, 4096> self{};
  REQUIRE(readlink("/proc/self/exe", self.data(), self.size() - 1) > 0);
  std::vector<std::string> arguments{self.data(), "--test-case=stand-in peer", "--no-skip=true", "--no-version=true"};
  std::vector<std::string> environment{"HIPXX_STAND_IN_PEER=" + order};
  environment.insert(environment.end(), more_environment.begin(), more_environment.end());
  for (char** variable = environ; *variable != nullptr; ++variable) environment.emplace_back(*variable);
  std::vector<char*> argv;
  std::vector<char*> envp;
  argv.reserve(arguments.size() + 1);
  envp.reserve(environment.size() + 1);
  for (std::string& argument : arguments) argv.push_back(argument.data());
  for (std::string& variable : environment) envp.push_back(variable.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // dup2 gives a descriptor without close-on-exec; one already at 3 just loses the flag.
    if (descriptor >= 0 && (descriptor == 3 ? fcntl(3, F_SETFD, 0) != 0 : dup2(descriptor, 3) != 3)) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return test_support::wait_exit_code(pid);
}

// An IPC handle as text for the peer's environment: its eight words in decimal.
std::string as_words(const hsa_amd_ipc_memory_t& handle) {
  std::ostringstream text;
  for (const std::uint32_t word : handle.handle) text << word << ' ';
  return text.str();
}

hsa_amd_ipc_memory_t from_words(std::istringstream& text) {
  hsa_amd_ipc_memory_t handle{};
  for (std::uint32_t& word : handle.handle) text >> word;
  return handle;
}

// Waits (10 s at most, so that a handler that is never called fails its case rather than hangs it)
// until `signal` reads `value`; returns what it read last.
hsa_signal_value_t wait_for(hsa_signal_t signal, hsa_signal_value_t value) {
  return hsa().hsa_signal_wait_scacquire(signal, HSA_SIGNAL_CONDITION_EQ, value, 10'000'000'000,
                                         HSA_WAIT_STATE_BLOCKED);
}

bool ignore_call(hsa_signal_value_t /*value*/, void* /*arg*/) { return false; }

// What a signal handler saw: written on the handler thread, read by the test once the handler has
// stored `done` (to the number of its calls), which orders the two.
struct HandlerLog {
  hsa_signal_t done{};
  std::vector<hsa_signal_value_t> values{};
  std::vector<std::thread::id> threads{};
};

bool log_call(hsa_signal_value_t value, void* arg) {
  auto& log = *static_cast<HandlerLog*>(arg);
  log.values.push_back(value);
  log.threads.push_back(std::this_thread::get_id());
  hsa().hsa_signal_store_screlease(log.done, static_cast<hsa_signal_value_t>(log.values.size()));
  return false;
}

// Returns once every handler call that was due has returned: the handler thread calls one handler at a
// time, the earliest registered first, so a handler registered now on a condition that holds runs last.
void drain_handlers() {
  const Signal met{0};
  const Signal done{0};
  HandlerLog log{.done = done.handle};
  REQUIRE(hsa().hsa_amd_signal_async_handler(met.handle, HSA_SIGNAL_CONDITION_EQ, 0, log_call, &log) ==
          HSA_STATUS_SUCCESS);
  REQUIRE(wait_for(done.handle, 1) == 1);
}

constexpr std::string_view kParentWords = "written by the parent";
constexpr std::string_view kChildWords = "written by the child";

}  // namespace

TEST_CASE("calls before hsa_init are refused, and hsa_init and hsa_shut_down are counted") {
  void* va = nullptr;
  CHECK(hsa().hsa_amd_vmem_address_reserve(&va, page(), 0, 0) == HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK(hsa().hsa_amd_signal_async_handler(hsa_signal_t{1}, HSA_SIGNAL_CONDITION_EQ, 0, ignore_call, nullptr) ==
        HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK(hsa().hsa_shut_down() == HSA_STATUS_ERROR_NOT_INITIALIZED);
  REQUIRE(hsa().hsa_init() == HSA_STATUS_SUCCESS);
  REQUIRE(hsa().hsa_init() == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_shut_down() == HSA_STATUS_SUCCESS);
  bool vmem = false;
  CHECK(hsa().hsa_system_get_info(HSA_AMD_SYSTEM_INFO_VIRTUAL_MEM_API_SUPPORTED, &vmem) == HSA_STATUS_SUCCESS);
  CHECK(vmem);
  CHECK(hsa().hsa_shut_down() == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_system_get_info(HSA_AMD_SYSTEM_INFO_VIRTUAL_MEM_API_SUPPORTED, &vmem) ==
        HSA_STATUS_ERROR_NOT_INITIALIZED);
}

TEST_CASE("agents come CPU first, then the GPUs, each with one pool") {
  const Session session;
  std::array<char, 64> name{};
  CHECK(hsa().hsa_agent_get_info(session.gpus[1], HSA_AGENT_INFO_NAME, name.data()) == HSA_STATUS_SUCCESS);
  CHECK(std::string{name.data()} == "gfx942");
  CHECK(hsa().hsa_agent_get_info(session.gpus[1], HSA_AMD_AGENT_INFO_PRODUCT_NAME, name.data()) == HSA_STATUS_SUCCESS);
  CHECK(std::string{name.data()} == "hipxx stand-in GPU 1");
  std::uint32_t units = 0;
  CHECK(hsa().hsa_agent_get_info(session.gpus[0], HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, &units) == HSA_STATUS_SUCCESS);
  CHECK(units == 8);
  CHECK(hsa().hsa_agent_get_info(session.gpus[0], static_cast<hsa_agent_info_t>(12345), &units) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_agent_get_info(hsa_agent_t{42}, HSA_AGENT_INFO_NODE, &units) == HSA_STATUS_ERROR_INVALID_AGENT);

  // The first agent is the CPU; a callback's INFO_BREAK ends the walk and is the answer.
  std::vector<hsa_agent_t> seen;
  const auto first_only = [](hsa_agent_t agent, void* found) {
    static_cast<std::vector<hsa_agent_t>*>(found)->push_back(agent);
    return HSA_STATUS_INFO_BREAK;
  };
  CHECK(hsa().hsa_iterate_agents(first_only, &seen) == HSA_STATUS_INFO_BREAK);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].handle == session.cpu.handle);

  std::size_t granule = 0;
  std::size_t recommended = 0;
  std::uint32_t flags = 0;
  bool by_all = true;
  const hsa_amd_memory_pool_t gpu_pool = session.gpu_pools[0];
  CHECK(hsa().hsa_amd_memory_pool_get_info(gpu_pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE, &granule) ==
        HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_get_info(gpu_pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE,
                                           &recommended) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_get_info(gpu_pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags) ==
        HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_get_info(gpu_pool, HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL, &by_all) ==
        HSA_STATUS_SUCCESS);
  CHECK(granule == page());
  CHECK(recommended == std::size_t{2} << 20);
  CHECK(flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
  CHECK_FALSE(by_all);
  CHECK(hsa().hsa_amd_memory_pool_get_info(session.cpu_pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags) ==
        HSA_STATUS_SUCCESS);
  CHECK(flags == (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT));
  CHECK(hsa().hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t{7}, HSA_AMD_MEMORY_POOL_INFO_SIZE, &granule) ==
        HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  bool xnack = true;
  CHECK(hsa().hsa_system_get_info(HSA_AMD_SYSTEM_INFO_XNACK_ENABLED, &xnack) == HSA_STATUS_SUCCESS);
  CHECK_FALSE(xnack);

  // Who may use which pool: an agent its own, a GPU another's once granted, the CPU never a GPU's.
  const auto access = [](hsa_agent_t agent, hsa_amd_memory_pool_t pool) {
    hsa_amd_memory_pool_access_t answer = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
    REQUIRE(hsa().hsa_amd_agent_memory_pool_get_info(agent, pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &answer) ==
            HSA_STATUS_SUCCESS);
    return answer;
  };
  CHECK(access(session.gpus[0], session.gpu_pools[0]) == HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT);
  CHECK(access(session.gpus[0], session.gpu_pools[1]) == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);
  CHECK(access(session.cpu, session.gpu_pools[1]) == HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED);
  CHECK(access(session.gpus[1], session.cpu_pool) == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);
  hsa_amd_memory_pool_access_t answer{};
  CHECK(hsa().hsa_amd_agent_memory_pool_get_info(hsa_agent_t{42}, gpu_pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
                                                 &answer) == HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK(hsa().hsa_amd_agent_memory_pool_get_info(session.gpus[0], hsa_amd_memory_pool_t{7},
                                                 HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
                                                 &answer) == HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
}

TEST_CASE("an address range is freed whole, with its size, once nothing is mapped in it") {
  const Session session;
  void* va = nullptr;
  CHECK(hsa().hsa_amd_vmem_address_reserve(&va, page() + 1, 0, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_address_reserve(&va, page(), 0, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_address_reserve_align(&va, page(), 0, 3 * page(), 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const std::size_t two_mib = std::size_t{2} << 20;
  REQUIRE(hsa().hsa_amd_vmem_address_reserve_align(&va, 2 * two_mib, 0, two_mib, 0) == HSA_STATUS_SUCCESS);
  CHECK(reinterpret_cast<std::uintptr_t>(va) % two_mib == 0);
  CHECK_FALSE(host_can_read(va));

  CHECK(hsa().hsa_amd_vmem_address_free(bytes(va) + page(), page()) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa().hsa_amd_vmem_address_free(va, two_mib) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_amd_vmem_alloc_handle_t handle{};
  REQUIRE(hsa().hsa_amd_vmem_handle_create(session.gpu_pools[0], page(), MEMORY_TYPE_NONE, 0, &handle) ==
          HSA_STATUS_SUCCESS);
  REQUIRE(hsa().hsa_amd_vmem_map(bytes(va) + two_mib, page(), 0, handle, 0) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_address_free(va, 2 * two_mib) == HSA_STATUS_ERROR_RESOURCE_FREE);
  CHECK(hsa().hsa_amd_vmem_unmap(bytes(va) + two_mib, page()) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_handle_release(handle) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_address_free(va, 2 * two_mib) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_address_free(va, 2 * two_mib) == HSA_STATUS_ERROR_INVALID_ALLOCATION);

  // The requested address is a hint, taken when that range is free.
  void* again = nullptr;
  REQUIRE(hsa().hsa_amd_vmem_address_reserve(&again, page(), reinterpret_cast<std::uint64_t>(va), 0) ==
          HSA_STATUS_SUCCESS);
  CHECK(again == va);
  CHECK(hsa().hsa_amd_vmem_address_free(again, page()) == HSA_STATUS_SUCCESS);
}

TEST_CASE("a handle maps whole, inside one reservation, over nothing else, and unmaps whole") {
  const Session session;
  const hsa_amd_memory_pool_t pool = session.gpu_pools[0];
  hsa_amd_vmem_alloc_handle_t handle{};
  CHECK(hsa().hsa_amd_vmem_handle_create(pool, 100, MEMORY_TYPE_NONE, 0, &handle) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_handle_create(session.cpu_pool, page(), MEMORY_TYPE_NONE, 0, &handle) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_handle_create(pool, page(), MEMORY_TYPE_NONE, 1, &handle) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  REQUIRE(hsa().hsa_amd_vmem_handle_create(pool, 2 * page(), MEMORY_TYPE_NONE, 0, &handle) == HSA_STATUS_SUCCESS);

  void* va = nullptr;
  REQUIRE(hsa().hsa_amd_vmem_address_reserve(&va, 4 * page(), 0, 0) == HSA_STATUS_SUCCESS);
  std::byte* base = bytes(va);
  CHECK(hsa().hsa_amd_vmem_map(base, page(), 0, handle, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_map(base + 3 * page(), 2 * page(), 0, handle, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_map(base, 2 * page(), page(), handle, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_map(base, 2 * page(), 0, handle, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  void* not_reserved = mmap(nullptr, 2 * page(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(not_reserved != MAP_FAILED);
  CHECK(hsa().hsa_amd_vmem_map(not_reserved, 2 * page(), 0, handle, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(munmap(not_reserved, 2 * page()) == 0);
  REQUIRE(hsa().hsa_amd_vmem_map(base + page(), 2 * page(), 0, handle, 0) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_map(base, 2 * page(), 0, handle, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  CHECK(hsa().hsa_amd_vmem_unmap(base + 2 * page(), page()) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa().hsa_amd_vmem_unmap(base + page(), page()) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Released while mapped, the memory lives on until the unmap; the handle is gone at once.
  const hsa_amd_memory_access_desc_t cpu_rw{HSA_ACCESS_PERMISSION_RW, session.cpu};
  REQUIRE(hsa().hsa_amd_vmem_set_access(base + page(), 2 * page(), &cpu_rw, 1) == HSA_STATUS_SUCCESS);
  std::memcpy(base + page(), kParentWords.data(), kParentWords.size());
  CHECK(hsa().hsa_amd_vmem_handle_release(handle) == HSA_STATUS_SUCCESS);
  CHECK(std::memcmp(base + page(), kParentWords.data(), kParentWords.size()) == 0);
  CHECK(hsa().hsa_amd_vmem_handle_release(handle) == HSA_STATUS_ERROR_INVALID_ALLOCATION);

  // Retaining takes the mapping's first byte and counts a reference that a release gives back.
  hsa_amd_vmem_alloc_handle_t retained{};
  CHECK(library().retain(&retained, base + 2 * page()) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  REQUIRE(library().retain(&retained, base + page()) == HSA_STATUS_SUCCESS);
  CHECK(retained.handle == handle.handle);
  CHECK(hsa().hsa_amd_vmem_handle_release(retained) == HSA_STATUS_SUCCESS);

  CHECK(hsa().hsa_amd_vmem_unmap(base + page(), 2 * page()) == HSA_STATUS_SUCCESS);
  CHECK_FALSE(host_can_read(base + page()));
  CHECK(hsa().hsa_amd_vmem_map(base, 2 * page(), 0, handle, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_address_free(va, 4 * page()) == HSA_STATUS_SUCCESS);
}

TEST_CASE("set_access changes the permissions of the agents it names only, and get_access reports them") {
  const Session session;
  const VmemMapping mapping{session.gpu_pools[0], 2 * page(), 4 * page()};
  const hsa_agent_t gpu0 = session.gpus[0];
  const hsa_agent_t gpu1 = session.gpus[1];
  hsa_access_permission_t permission = HSA_ACCESS_PERMISSION_RW;
  CHECK(library().get_access(mapping.va, &permission, gpu0) == HSA_STATUS_ERROR_INVALID_ALLOCATION);

  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, gpu0}, {HSA_ACCESS_PERMISSION_RO, gpu1}}) == HSA_STATUS_SUCCESS);
  CHECK(library().get_access(mapping.va, &permission, gpu0) == HSA_STATUS_SUCCESS);
  CHECK(permission == HSA_ACCESS_PERMISSION_RW);
  CHECK(library().get_access(bytes(mapping.va) + page() + 5, &permission, gpu1) == HSA_STATUS_SUCCESS);
  CHECK(permission == HSA_ACCESS_PERMISSION_RO);

  // As ROCr's code has it: an agent left out keeps what it had; only NONE takes access away.
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, gpu1}}) == HSA_STATUS_SUCCESS);
  CHECK(library().get_access(mapping.va, &permission, gpu0) == HSA_STATUS_SUCCESS);
  CHECK(permission == HSA_ACCESS_PERMISSION_RW);
  CHECK(library().get_access(mapping.va, &permission, gpu1) == HSA_STATUS_SUCCESS);
  CHECK(permission == HSA_ACCESS_PERMISSION_RW);
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_NONE, gpu0}}) == HSA_STATUS_SUCCESS);
  CHECK(library().get_access(mapping.va, &permission, gpu0) == HSA_STATUS_SUCCESS);
  CHECK(permission == HSA_ACCESS_PERMISSION_NONE);
  CHECK(library().get_access(mapping.va, &permission, gpu1) == HSA_STATUS_SUCCESS);
  CHECK(permission == HSA_ACCESS_PERMISSION_RW);

  CHECK(library().get_access(mapping.va, &permission, session.cpu) == HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK(library().get_access(mapping.va, &permission, hsa_agent_t{42}) == HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK(library().get_access(bytes(mapping.va) + 2 * page(), &permission, gpu1) == HSA_STATUS_ERROR_INVALID_ALLOCATION);

  // A refused call changes nothing.
  CHECK(mapping.grant({{HSA_ACCESS_PERMISSION_RW, gpu0}, {HSA_ACCESS_PERMISSION_RW, hsa_agent_t{42}}}) ==
        HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK(library().get_access(mapping.va, &permission, gpu0) == HSA_STATUS_SUCCESS);
  CHECK(permission == HSA_ACCESS_PERMISSION_NONE);

  // Exactly one whole mapping per call.
  const hsa_amd_memory_access_desc_t rw{HSA_ACCESS_PERMISSION_RW, gpu0};
  CHECK(hsa().hsa_amd_vmem_set_access(mapping.va, page(), &rw, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_set_access(bytes(mapping.va) + page(), page(), &rw, 1) ==
        HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa().hsa_amd_vmem_set_access(mapping.va, 8 * page(), &rw, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_amd_vmem_alloc_handle_t next{};
  REQUIRE(hsa().hsa_amd_vmem_handle_create(session.gpu_pools[0], 2 * page(), MEMORY_TYPE_NONE, 0, &next) ==
          HSA_STATUS_SUCCESS);
  REQUIRE(hsa().hsa_amd_vmem_map(bytes(mapping.va) + 2 * page(), 2 * page(), 0, next, 0) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_set_access(mapping.va, 4 * page(), &rw, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_vmem_unmap(bytes(mapping.va) + 2 * page(), 2 * page()) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_handle_release(next) == HSA_STATUS_SUCCESS);
}

TEST_CASE("the host reaches a mapping only as far as the CPU agent's permission goes") {
  const Session session;
  const VmemMapping mapping{session.gpu_pools[0], page(), page()};
  const hsa_agent_t gpu = session.gpus[0];
  CHECK_FALSE(host_can_read(mapping.va));

  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, gpu}}) == HSA_STATUS_SUCCESS);
  CHECK_FALSE(host_can_read(mapping.va));  // device memory is not host memory
  REQUIRE(hsa().hsa_amd_memory_fill(mapping.va, 0x5a5a5a5a, page() / 4) == HSA_STATUS_SUCCESS);

  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, gpu}, {HSA_ACCESS_PERMISSION_RO, session.cpu}}) ==
          HSA_STATUS_SUCCESS);
  CHECK(host_can_read(mapping.va));
  CHECK_FALSE(host_can_write(mapping.va));
  CHECK(*bytes(mapping.va) == std::byte{0x5a});

  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, session.cpu}}) == HSA_STATUS_SUCCESS);
  CHECK(host_can_write(mapping.va));
  *bytes(mapping.va) = std::byte{0x11};
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RO, gpu}}) == HSA_STATUS_SUCCESS);
  CHECK(host_can_write(mapping.va));  // an agent left out keeps its permission
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_NONE, session.cpu}}) == HSA_STATUS_SUCCESS);
  CHECK_FALSE(host_can_read(mapping.va));
  const std::vector<std::byte> seen = read_device(session, gpu, mapping.va, 2);
  CHECK(seen[0] == std::byte{0x11});
  CHECK(seen[1] == std::byte{0x5a});
  // The GPU may read it but not write it now: a fill needs a GPU with write access.
  CHECK(hsa().hsa_amd_memory_fill(mapping.va, 0, 1) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  // And it runs on the GPU whose pool the memory is of: another GPU's write access does not do.
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, session.gpus[1]}}) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_fill(mapping.va, 0, 1) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, gpu}}) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_fill(mapping.va, 0, 1) == HSA_STATUS_SUCCESS);
}

TEST_CASE("an asynchronous copy is refused where its agents may not reach, with the signal untouched") {
  const Session session;
  const hsa_agent_t gpu0 = session.gpus[0];
  const hsa_agent_t gpu1 = session.gpus[1];
  const std::size_t size = page();
  void* device0 = allocate(session.gpu_pools[0], size);
  void* device1 = allocate(session.gpu_pools[1], size);
  void* stage = staging(session, gpu0, size);

  // Ordinary host memory is out of a GPU's reach; pool memory allowed to it is not.
  std::vector<std::byte> pageable(size, std::byte{1});
  CHECK(copy(device0, gpu0, pageable.data(), session.cpu, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(copy(device0, gpu0, stage, session.cpu, size) == HSA_STATUS_SUCCESS);
  // Device memory is named with an agent that reaches it, and the CPU reaches none.
  CHECK(copy(stage, session.cpu, device0, session.cpu, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // Another GPU's memory needs hsa_amd_agents_allow_access first.
  CHECK(copy(device1, gpu1, device0, gpu0, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  REQUIRE(hsa().hsa_amd_agents_allow_access(1, &gpu0, nullptr, device1) == HSA_STATUS_SUCCESS);
  CHECK(copy(device1, gpu1, device0, gpu0, size) == HSA_STATUS_SUCCESS);

  // A vmem mapping: only as set_access allows, and never past its end.
  const VmemMapping mapping{session.gpu_pools[0], size, 2 * size};
  CHECK(copy(mapping.va, gpu0, stage, session.cpu, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RO, gpu0}}) == HSA_STATUS_SUCCESS);
  CHECK(copy(mapping.va, gpu0, stage, session.cpu, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(copy(stage, session.cpu, mapping.va, gpu0, size) == HSA_STATUS_SUCCESS);
  REQUIRE(mapping.grant({{HSA_ACCESS_PERMISSION_RW, gpu0}}) == HSA_STATUS_SUCCESS);
  CHECK(copy(mapping.va, gpu0, stage, session.cpu, size) == HSA_STATUS_SUCCESS);
  CHECK(copy(mapping.va, gpu0, stage, session.cpu, size + 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  const Signal done{1};
  CHECK(hsa().hsa_amd_memory_async_copy(device0, hsa_agent_t{42}, stage, session.cpu, size, 0, nullptr, done.handle) ==
        HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK(hsa().hsa_amd_memory_async_copy(device0, gpu0, stage, session.cpu, size, 0, nullptr, hsa_signal_t{0}) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_memory_async_copy(device0, gpu0, stage, session.cpu, size, 0, nullptr, hsa_signal_t{42}) ==
        HSA_STATUS_ERROR_INVALID_SIGNAL);
  CHECK(done.value() == 1);
  // Documented: 0 bytes is a success that copies nothing and leaves the completion signal as it is.
  CHECK(hsa().hsa_amd_memory_async_copy(device0, gpu0, stage, session.cpu, 0, 0, nullptr, done.handle) ==
        HSA_STATUS_SUCCESS);
  std::this_thread::sleep_for(5ms);
  CHECK(done.value() == 1);
  for (void* memory : {device0, device1, stage}) CHECK(hsa().hsa_amd_memory_pool_free(memory) == HSA_STATUS_SUCCESS);
}

TEST_CASE("an asynchronous copy starts after its dependencies and completes later, on its signal") {
  const Session session;
  const hsa_agent_t gpu = session.gpus[0];
  const std::size_t size = 4 * page();
  void* device = allocate(session.gpu_pools[0], size);
  REQUIRE(hsa().hsa_amd_memory_fill(device, 0xa5a5a5a5, size / 4) == HSA_STATUS_SUCCESS);
  void* stage = staging(session, gpu, size);
  std::memset(stage, 0, size);

  const Signal gate{1};
  const Signal done{1};
  REQUIRE(hsa().hsa_amd_memory_async_copy(stage, session.cpu, device, gpu, size, 1, &gate.handle, done.handle) ==
          HSA_STATUS_SUCCESS);
  std::this_thread::sleep_for(20ms);
  CHECK(done.value() == 1);
  CHECK(*bytes(stage) == std::byte{0});
  hsa().hsa_signal_store_screlease(gate.handle, 0);
  done.wait_for_zero();
  CHECK(all_equal({bytes(stage), bytes(stage) + size}, 0xa5));
  CHECK(hsa().hsa_amd_memory_pool_free(stage) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_free(device) == HSA_STATUS_SUCCESS);
}

TEST_CASE("signals: conditions, timeouts, and destroy's codes") {
  const Session session;
  const Signal signal{5};
  CHECK(hsa().hsa_signal_wait_scacquire(signal.handle, HSA_SIGNAL_CONDITION_GTE, 5, UINT64_MAX,
                                        HSA_WAIT_STATE_ACTIVE) == 5);
  hsa().hsa_signal_store_screlease(signal.handle, 2);
  CHECK(hsa().hsa_signal_wait_scacquire(signal.handle, HSA_SIGNAL_CONDITION_LT, 3, UINT64_MAX,
                                        HSA_WAIT_STATE_BLOCKED) == 2);
  CHECK(hsa().hsa_signal_wait_scacquire(signal.handle, HSA_SIGNAL_CONDITION_NE, 5, UINT64_MAX,
                                        HSA_WAIT_STATE_BLOCKED) == 2);
  const auto start = std::chrono::steady_clock::now();
  CHECK(hsa().hsa_signal_wait_scacquire(signal.handle, HSA_SIGNAL_CONDITION_EQ, 0, 2'000'000, HSA_WAIT_STATE_BLOCKED) ==
        2);
  CHECK(std::chrono::steady_clock::now() - start >= 2ms);

  std::thread storer{[&signal] {
    std::this_thread::sleep_for(10ms);
    hsa().hsa_signal_store_screlease(signal.handle, 0);
  }};
  CHECK(hsa().hsa_signal_wait_scacquire(signal.handle, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX,
                                        HSA_WAIT_STATE_BLOCKED) == 0);
  storer.join();

  hsa_signal_t created{};
  const std::array<hsa_agent_t, 2> twice{session.cpu, session.cpu};
  CHECK(hsa().hsa_signal_create(0, 2, twice.data(), &created) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_signal_destroy(hsa_signal_t{0}) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_signal_destroy(hsa_signal_t{42}) == HSA_STATUS_ERROR_INVALID_SIGNAL);
}

TEST_CASE("signal handlers run on the runtime's thread once their condition holds, and may call the runtime") {
  const Session session;
  const Signal done{0};
  HandlerLog log{.done = done.handle};
  CHECK(hsa().hsa_amd_signal_async_handler(hsa_signal_t{0}, HSA_SIGNAL_CONDITION_EQ, 0, log_call, &log) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_signal_async_handler(done.handle, HSA_SIGNAL_CONDITION_EQ, 0, nullptr, &log) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_signal_async_handler(done.handle, static_cast<hsa_signal_condition_t>(4), 0, log_call, &log) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_signal_async_handler(hsa_signal_t{42}, HSA_SIGNAL_CONDITION_EQ, 0, log_call, &log) ==
        HSA_STATUS_ERROR_INVALID_SIGNAL);

  // A condition that holds at registration: the handler runs all the same, on the runtime's thread.
  const Signal met{3};
  REQUIRE(hsa().hsa_amd_signal_async_handler(met.handle, HSA_SIGNAL_CONDITION_GTE, 3, log_call, &log) ==
          HSA_STATUS_SUCCESS);
  CHECK(wait_for(done.handle, 1) == 1);
  CHECK(log.values == std::vector<hsa_signal_value_t>{3});
  CHECK(log.threads.at(0) != std::this_thread::get_id());

  // One that holds only later: not called before the store that meets it, then with the value stored.
  const Signal later{0};
  REQUIRE(hsa().hsa_amd_signal_async_handler(later.handle, HSA_SIGNAL_CONDITION_LT, -1, log_call, &log) ==
          HSA_STATUS_SUCCESS);
  drain_handlers();
  CHECK(log.values.size() == 1);
  hsa().hsa_signal_store_screlease(later.handle, -5);
  CHECK(wait_for(done.handle, 2) == 2);
  CHECK(log.values == std::vector<hsa_signal_value_t>{3, -5});

  // A handler is called without the runtime's lock: it may register another handler.
  const auto register_log_call = [](hsa_signal_value_t value, void* arg) {
    auto& again = *static_cast<std::pair<hsa_signal_t, HandlerLog*>*>(arg);
    CHECK(value == 3);
    CHECK(hsa().hsa_amd_signal_async_handler(again.first, HSA_SIGNAL_CONDITION_EQ, 3, log_call, again.second) ==
          HSA_STATUS_SUCCESS);
    return false;
  };
  std::pair<hsa_signal_t, HandlerLog*> again{met.handle, &log};
  REQUIRE(hsa().hsa_amd_signal_async_handler(met.handle, HSA_SIGNAL_CONDITION_NE, 0, register_log_call, &again) ==
          HSA_STATUS_SUCCESS);
  CHECK(wait_for(done.handle, 3) == 3);
  CHECK(log.values == std::vector<hsa_signal_value_t>{3, -5, 3});
  CHECK(log.threads.at(2) == log.threads.at(0));
}

TEST_CASE("a signal handler that returns true is called again each time its condition holds again") {
  const Session session;
  const Signal signal{0};
  const Signal done{0};
  // Takes the value it is called for (stores 0, so that its condition no longer holds), logs it, and
  // stays registered for one more call.
  struct Taker {
    hsa_signal_t signal{};
    HandlerLog log;
  };
  const auto take = [](hsa_signal_value_t value, void* arg) {
    auto& taker = *static_cast<Taker*>(arg);
    hsa().hsa_signal_store_screlease(taker.signal, 0);
    log_call(value, &taker.log);
    return taker.log.values.size() < 2;
  };
  Taker taker{.signal = signal.handle, .log = {.done = done.handle}};
  REQUIRE(hsa().hsa_amd_signal_async_handler(signal.handle, HSA_SIGNAL_CONDITION_NE, 0, take, &taker) ==
          HSA_STATUS_SUCCESS);
  hsa().hsa_signal_store_screlease(signal.handle, 5);
  CHECK(wait_for(done.handle, 1) == 1);
  CHECK(signal.value() == 0);
  hsa().hsa_signal_store_screlease(signal.handle, 7);
  CHECK(wait_for(done.handle, 2) == 2);
  CHECK(taker.log.values == std::vector<hsa_signal_value_t>{5, 7});

  // The second call returned false: the handler is gone, and holds the signal no more (destroyed below).
  hsa().hsa_signal_store_screlease(signal.handle, 9);
  drain_handlers();
  CHECK(taker.log.values.size() == 2);
  CHECK(signal.value() == 9);
}

TEST_CASE("a registered handler holds its signal; the last hsa_shut_down waits for a running one, drops the rest") {
  // As for a queued copy, destroying the signal stops the process.
  CHECK(run_peer("destroy-handled-signal") == 128 + SIGABRT);

  struct Slow {
    hsa_signal_t signal{};
    std::atomic<bool> started{false};
    std::atomic<bool> finished{false};
    std::atomic<bool> dropped_called{false};
  } slow;
  {
    const Session session;
    // Both left to hsa_shut_down, which releases every signal.
    hsa_signal_t dropped{};
    REQUIRE(hsa().hsa_signal_create(0, 0, nullptr, &slow.signal) == HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_signal_create(0, 0, nullptr, &dropped) == HSA_STATUS_SUCCESS);
    const auto slow_call = [](hsa_signal_value_t /*value*/, void* arg) {
      auto& called = *static_cast<Slow*>(arg);
      called.started = true;
      std::this_thread::sleep_for(100ms);
      // hsa_shut_down has begun meanwhile; the signals go only once this call returns.
      hsa().hsa_signal_store_screlease(called.signal, 1);
      called.finished = true;
      return false;
    };
    const auto dropped_call = [](hsa_signal_value_t /*value*/, void* arg) {
      static_cast<Slow*>(arg)->dropped_called = true;
      return false;
    };
    REQUIRE(hsa().hsa_amd_signal_async_handler(slow.signal, HSA_SIGNAL_CONDITION_EQ, 0, slow_call, &slow) ==
            HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_amd_signal_async_handler(dropped, HSA_SIGNAL_CONDITION_NE, 0, dropped_call, &slow) ==
            HSA_STATUS_SUCCESS);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!slow.started && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    REQUIRE(slow.started);
  }  // the last hsa_shut_down, while slow_call sleeps
  CHECK(slow.finished);
  CHECK_FALSE(slow.dropped_called);

  // The next session starts a handler thread of its own.
  const Session session;
  drain_handlers();
}

TEST_CASE("pool allocations: the documented codes, device memory out of the host's reach, and fills") {
  const Session session;
  const hsa_amd_memory_pool_t pool = session.gpu_pools[0];
  void* pointer = nullptr;
  CHECK(hsa().hsa_amd_memory_pool_allocate(pool, 0, 0, &pointer) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_memory_pool_allocate(pool, page(), 1, &pointer) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t{7}, page(), 0, &pointer) ==
        HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  CHECK(hsa().hsa_amd_memory_pool_allocate(pool, (std::size_t{16} << 30) + 1, 0, &pointer) ==
        HSA_STATUS_ERROR_INVALID_ALLOCATION);

  // 100 bytes round up to the granule: a page-sized fill stays inside.
  void* device = allocate(pool, 100);
  CHECK_FALSE(host_can_read(device));
  CHECK(hsa().hsa_amd_memory_fill(device, 0x01020304, page() / 4) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_fill(device, 0, page() / 4 + 1) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa().hsa_amd_memory_fill(bytes(device) + 2, 0, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  std::vector<std::uint32_t> pageable(16);
  CHECK(hsa().hsa_amd_memory_fill(pageable.data(), 0, 16) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  const std::vector<std::byte> seen = read_device(session, session.gpus[0], bytes(device) + page() - 4, 4);
  CHECK(seen == std::vector<std::byte>{std::byte{4}, std::byte{3}, std::byte{2}, std::byte{1}});

  CHECK(hsa().hsa_amd_agents_allow_access(1, &session.cpu, nullptr, device) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_agents_allow_access(1, &session.gpus[1], nullptr, bytes(device) + 4) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const std::uint32_t flag = 0;
  CHECK(hsa().hsa_amd_agents_allow_access(1, &session.gpus[1], &flag, device) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  void* host = allocate(session.cpu_pool, 100);
  CHECK(host_can_write(host));
  CHECK(hsa().hsa_amd_memory_pool_free(bytes(device) + 4) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa().hsa_amd_memory_pool_free(pageable.data()) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa().hsa_amd_memory_pool_free(nullptr) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_free(device) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_free(device) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa().hsa_amd_memory_pool_free(host) == HSA_STATUS_SUCCESS);
}

TEST_CASE("SVM: host memory is a GPU's to reach only once made accessible to that GPU") {
  const Session session;
  const hsa_agent_t gpu0 = session.gpus[0];
  const std::size_t size = 2 * page();
  void* host = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(host != MAP_FAILED);
  std::memset(host, 0x3c, size);
  void* device = allocate(session.gpu_pools[0], size);
  CHECK(copy(device, gpu0, host, session.cpu, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  std::array<hsa_amd_svm_attribute_pair_t, 2> attributes{
      {{HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE, gpu0.handle}, {HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION, 0}}};
  REQUIRE(hsa().hsa_amd_svm_attributes_set(host, size, attributes.data(), attributes.size()) == HSA_STATUS_SUCCESS);
  CHECK(copy(device, gpu0, host, session.cpu, size) == HSA_STATUS_SUCCESS);
  CHECK(all_equal(read_device(session, gpu0, device, size), 0x3c));
  void* device1 = allocate(session.gpu_pools[1], size);
  CHECK(copy(device1, session.gpus[1], host, session.cpu, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Read-only for GPUs: gpu0's engine may read it but not write it.
  attributes[0] = {HSA_AMD_SVM_ATTRIB_READ_ONLY, 1};
  REQUIRE(hsa().hsa_amd_svm_attributes_set(host, size, attributes.data(), 1) == HSA_STATUS_SUCCESS);
  CHECK(copy(host, session.cpu, device, gpu0, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(copy(device, gpu0, host, session.cpu, size) == HSA_STATUS_SUCCESS);
  attributes[0] = {HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS, gpu0.handle};
  REQUIRE(hsa().hsa_amd_svm_attributes_set(host, size, attributes.data(), 1) == HSA_STATUS_SUCCESS);
  CHECK(copy(device, gpu0, host, session.cpu, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  for (const std::uint64_t refused :
       {std::uint64_t{HSA_AMD_SVM_ATTRIB_PREFETCH_LOCATION}, std::uint64_t{HSA_AMD_SVM_ATTRIB_ACCESS_QUERY}}) {
    attributes[0] = {refused, gpu0.handle};
    CHECK(hsa().hsa_amd_svm_attributes_set(host, size, attributes.data(), 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  }
  attributes[0] = {HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE, 42};
  CHECK(hsa().hsa_amd_svm_attributes_set(host, size, attributes.data(), 1) == HSA_STATUS_ERROR_INVALID_AGENT);
  attributes[0] = {HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG, HSA_AMD_SVM_GLOBAL_FLAG_INDETERMINATE};
  CHECK(hsa().hsa_amd_svm_attributes_set(host, size, attributes.data(), 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  attributes[0] = {HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE, gpu0.handle};
  CHECK(hsa().hsa_amd_svm_attributes_set(device, size, attributes.data(), 1) == HSA_STATUS_ERROR);

  const Signal done{1};
  CHECK(hsa().hsa_amd_svm_prefetch_async(host, size, hsa_agent_t{42}, 0, nullptr, done.handle) ==
        HSA_STATUS_ERROR_INVALID_AGENT);
  REQUIRE(hsa().hsa_amd_svm_prefetch_async(host, size, gpu0, 0, nullptr, done.handle) == HSA_STATUS_SUCCESS);
  done.wait_for_zero();
  // The runtime may still be notifying the signal it lowered (see "destroy-after-prefetch").
  std::this_thread::sleep_for(std::chrono::milliseconds{50});
  CHECK(hsa().hsa_amd_memory_pool_free(device1) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_free(device) == HSA_STATUS_SUCCESS);
  CHECK(munmap(host, size) == 0);
}

TEST_CASE("an exported handle is imported by another process, and keeps the memory alive") {
  const Session session;
  const std::size_t size = 2 * page();
  void* va = nullptr;
  REQUIRE(hsa().hsa_amd_vmem_address_reserve(&va, size, 0, 0) == HSA_STATUS_SUCCESS);
  hsa_amd_vmem_alloc_handle_t handle{};
  REQUIRE(hsa().hsa_amd_vmem_handle_create(session.gpu_pools[1], size, MEMORY_TYPE_NONE, 0, &handle) ==
          HSA_STATUS_SUCCESS);
  REQUIRE(hsa().hsa_amd_vmem_map(va, size, 0, handle, 0) == HSA_STATUS_SUCCESS);
  const hsa_amd_memory_access_desc_t cpu_rw{HSA_ACCESS_PERMISSION_RW, session.cpu};
  REQUIRE(hsa().hsa_amd_vmem_set_access(va, size, &cpu_rw, 1) == HSA_STATUS_SUCCESS);
  std::memcpy(va, kParentWords.data(), kParentWords.size());

  int fd = -1;
  CHECK(hsa().hsa_amd_vmem_export_shareable_handle(&fd, handle, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  REQUIRE(hsa().hsa_amd_vmem_export_shareable_handle(&fd, handle, 0) == HSA_STATUS_SUCCESS);
  CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(run_peer("import", fd) == 0);
  CHECK(std::memcmp(bytes(va) + page(), kChildWords.data(), kChildWords.size()) == 0);

  // Unmapped and released here, the memory lives on in the open descriptor.
  CHECK(hsa().hsa_amd_vmem_unmap(va, size) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_handle_release(handle) == HSA_STATUS_SUCCESS);
  hsa_amd_vmem_alloc_handle_t imported{};
  REQUIRE(hsa().hsa_amd_vmem_import_shareable_handle(fd, &imported) == HSA_STATUS_SUCCESS);
  // Imported again while held: the same handle, counted once more, as older ROCr answers.
  hsa_amd_vmem_alloc_handle_t again{};
  REQUIRE(hsa().hsa_amd_vmem_import_shareable_handle(fd, &again) == HSA_STATUS_SUCCESS);
  CHECK(again.handle == imported.handle);
  CHECK(hsa().hsa_amd_vmem_handle_release(again) == HSA_STATUS_SUCCESS);
  // ROCr does not export an imported handle.
  int re_exported = -1;
  CHECK(hsa().hsa_amd_vmem_export_shareable_handle(&re_exported, imported, 0) ==
        HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  CHECK(close(fd) == 0);
  REQUIRE(hsa().hsa_amd_vmem_map(va, size, 0, imported, 0) == HSA_STATUS_SUCCESS);
  REQUIRE(hsa().hsa_amd_vmem_set_access(va, size, &cpu_rw, 1) == HSA_STATUS_SUCCESS);
  CHECK(std::memcmp(va, kParentWords.data(), kParentWords.size()) == 0);
  CHECK(hsa().hsa_amd_vmem_unmap(va, size) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_handle_release(imported) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_vmem_address_free(va, size) == HSA_STATUS_SUCCESS);

  // Only the stand-in's own descriptors are memory handles.
  std::array<int, 2> ends{};
  REQUIRE(pipe(ends.data()) == 0);
  CHECK(hsa().hsa_amd_vmem_import_shareable_handle(ends[0], &imported) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  close(ends[0]);
  close(ends[1]);
  const int other = memfd_create("not-the-stand-in", MFD_CLOEXEC);
  REQUIRE(other >= 0);
  REQUIRE(ftruncate(other, static_cast<off_t>(page())) == 0);
  CHECK(hsa().hsa_amd_vmem_import_shareable_handle(other, &imported) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  close(other);
  CHECK(hsa().hsa_amd_vmem_import_shareable_handle(-1, &imported) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("IPC: a GPU allocation is attached here and in another process, for the named GPUs only") {
  const Session session;
  const hsa_agent_t gpu0 = session.gpus[0];
  const hsa_agent_t gpu1 = session.gpus[1];
  const std::size_t size = 3 * page() + 100;
  void* device = allocate(session.gpu_pools[0], size);
  REQUIRE(hsa().hsa_amd_memory_fill(device, 0xa5a5a5a5, size / 4) == HSA_STATUS_SUCCESS);

  hsa_amd_ipc_memory_t handle{};
  CHECK(hsa().hsa_amd_ipc_memory_create(device, size - 1, &handle) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_ipc_memory_create(bytes(device) + page(), page(), &handle) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  REQUIRE(hsa().hsa_amd_ipc_memory_create(device, size, &handle) == HSA_STATUS_SUCCESS);

  void* attached = nullptr;
  CHECK(hsa().hsa_amd_ipc_memory_attach(&handle, size, 1, &session.cpu, &attached) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_ipc_memory_attach(&handle, size + 1, 1, &gpu1, &attached) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_amd_ipc_memory_t garbage{};
  CHECK(hsa().hsa_amd_ipc_memory_attach(&garbage, size, 1, &gpu1, &attached) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  REQUIRE(hsa().hsa_amd_ipc_memory_attach(&handle, size, 1, &gpu1, &attached) == HSA_STATUS_SUCCESS);
  CHECK(attached != device);
  CHECK_FALSE(host_can_read(attached));
  CHECK(all_equal(read_device(session, gpu1, attached, 3 * page()), 0xa5));
  void* stage = staging(session, gpu0, page());
  CHECK(copy(stage, session.cpu, attached, gpu0, page()) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_memory_pool_free(attached) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa().hsa_amd_ipc_memory_detach(attached) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_ipc_memory_detach(attached) == HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // The other process attaches for all its GPUs and fills the memory.
  CHECK(run_peer("ipc " + std::to_string(size) + " " + as_words(handle)) == 0);
  CHECK(all_equal(read_device(session, gpu0, device, 3 * page()), 0x11));

  CHECK(hsa().hsa_amd_memory_pool_free(stage) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_memory_pool_free(device) == HSA_STATUS_SUCCESS);
  CHECK(hsa().hsa_amd_ipc_memory_attach(&handle, size, 1, &gpu1, &attached) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("what ROCr leaves undefined stops the process: freeing memory a queued copy still uses") {
  CHECK(run_peer("free-while-copying") == 128 + SIGABRT);
  // ROCr lowers a prefetch's signal on its own thread and notifies the signal's waiters after: a
  // destroy as soon as the wait returns may free the signal under that notify.
  CHECK(run_peer("destroy-after-prefetch") == 128 + SIGABRT);
  // HIPXX_STAND_IN_ABORT=1 makes a refused call stop the process too, where a debugger shows the caller.
  CHECK(run_peer("refused-copy", -1, {"HIPXX_STAND_IN_ABORT=1"}) == 128 + SIGABRT);
}

TEST_CASE("threads allocate, fill, copy and free at once") {
  const Session session;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (unsigned index = 0; index < 4; ++index) {
    threads.emplace_back([&session, &failures, index] {
      const hsa_agent_t gpu = session.gpus[index % 2];
      for (int round = 0; round < 10; ++round) {
        void* device = nullptr;
        void* host = nullptr;
        hsa_signal_t done{};
        const auto value = static_cast<std::uint32_t>(0x01010101U * (index + 1));
        bool good = hsa().hsa_amd_memory_pool_allocate(session.gpu_pools[index % 2], page(), 0, &device) ==
                        HSA_STATUS_SUCCESS &&
                    hsa().hsa_amd_memory_pool_allocate(session.cpu_pool, page(), 0, &host) == HSA_STATUS_SUCCESS &&
                    hsa().hsa_amd_agents_allow_access(1, &gpu, nullptr, host) == HSA_STATUS_SUCCESS &&
                    hsa().hsa_amd_memory_fill(device, value, page() / 4) == HSA_STATUS_SUCCESS &&
                    hsa().hsa_signal_create(1, 0, nullptr, &done) == HSA_STATUS_SUCCESS &&
                    hsa().hsa_amd_memory_async_copy(host, session.cpu, device, gpu, page(), 0, nullptr, done) ==
                        HSA_STATUS_SUCCESS;
        good = good && hsa().hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX,
                                                       HSA_WAIT_STATE_BLOCKED) == 0;
        good = good && *static_cast<std::uint32_t*>(host) == value;
        good = good && hsa().hsa_signal_destroy(done) == HSA_STATUS_SUCCESS &&
               hsa().hsa_amd_memory_pool_free(device) == HSA_STATUS_SUCCESS &&
               hsa().hsa_amd_memory_pool_free(host) == HSA_STATUS_SUCCESS;
        if (!good) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
}

// The other process of the cases above, started by run_peer(); skipped in a plain run.
TEST_CASE("stand-in peer" * doctest::skip()) {
  const char* order_text = std::getenv("HIPXX_STAND_IN_PEER");
  REQUIRE(order_text != nullptr);
  std::istringstream order{order_text};
  std::string what;
  order >> what;
  const Session session;
  // The abort cases end by SIGABRT itself: doctest's crash report, which would run in the signal
  // handler (ThreadSanitizer rightly objects to that), is not wanted here.
  if (what == "free-while-copying" || what == "refused-copy" || what == "destroy-handled-signal" ||
      what == "destroy-after-prefetch") {
    std::signal(SIGABRT, SIG_DFL);
  }

  if (what == "import") {
    hsa_amd_vmem_alloc_handle_t handle{};
    REQUIRE(hsa().hsa_amd_vmem_import_shareable_handle(3, &handle) == HSA_STATUS_SUCCESS);
    close(3);
    const std::size_t size = 2 * page();
    void* va = nullptr;
    REQUIRE(hsa().hsa_amd_vmem_address_reserve(&va, size, 0, 0) == HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_amd_vmem_map(va, size, 0, handle, 0) == HSA_STATUS_SUCCESS);
    const hsa_amd_memory_access_desc_t cpu_rw{HSA_ACCESS_PERMISSION_RW, session.cpu};
    REQUIRE(hsa().hsa_amd_vmem_set_access(va, size, &cpu_rw, 1) == HSA_STATUS_SUCCESS);
    CHECK(std::memcmp(va, kParentWords.data(), kParentWords.size()) == 0);
    std::memcpy(bytes(va) + page(), kChildWords.data(), kChildWords.size());
    CHECK(hsa().hsa_amd_vmem_unmap(va, size) == HSA_STATUS_SUCCESS);
    CHECK(hsa().hsa_amd_vmem_handle_release(handle) == HSA_STATUS_SUCCESS);
    CHECK(hsa().hsa_amd_vmem_address_free(va, size) == HSA_STATUS_SUCCESS);
  } else if (what == "ipc") {
    std::size_t size = 0;
    order >> size;
    const hsa_amd_ipc_memory_t handle = from_words(order);
    void* attached = nullptr;
    REQUIRE(hsa().hsa_amd_ipc_memory_attach(&handle, size, 0, nullptr, &attached) == HSA_STATUS_SUCCESS);
    CHECK(hsa().hsa_amd_memory_fill(attached, 0x11111111, size / 4) == HSA_STATUS_SUCCESS);
    CHECK(hsa().hsa_amd_ipc_memory_detach(attached) == HSA_STATUS_SUCCESS);
  } else if (what == "free-while-copying") {
    void* device = allocate(session.gpu_pools[0], page());
    void* stage = staging(session, session.gpus[0], page());
    const Signal gate{1};
    const Signal done{1};
    REQUIRE(hsa().hsa_amd_memory_async_copy(stage, session.cpu, device, session.gpus[0], page(), 1, &gate.handle,
                                            done.handle) == HSA_STATUS_SUCCESS);
    hsa().hsa_amd_memory_pool_free(device);  // aborts: the copy waits on the gate
    FAIL("freeing memory that a queued copy uses did not stop the process");
  } else if (what == "destroy-handled-signal") {
    hsa_signal_t signal{};
    REQUIRE(hsa().hsa_signal_create(1, 0, nullptr, &signal) == HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_amd_signal_async_handler(signal, HSA_SIGNAL_CONDITION_EQ, 0, ignore_call, nullptr) ==
            HSA_STATUS_SUCCESS);
    hsa().hsa_signal_destroy(signal);  // aborts: the handler still waits on it
    FAIL("destroying a signal with a registered handler did not stop the process");
  } else if (what == "destroy-after-prefetch") {
    const std::size_t size = page();
    void* host = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(host != MAP_FAILED);
    hsa_signal_t done{};
    REQUIRE(hsa().hsa_signal_create(1, 0, nullptr, &done) == HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_amd_svm_prefetch_async(host, size, session.gpus[0], 0, nullptr, done) == HSA_STATUS_SUCCESS);
    REQUIRE(hsa().hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED) == 0);
    hsa().hsa_signal_destroy(done);  // aborts: the runtime may still be notifying it
    FAIL("destroying a prefetch's signal as soon as its wait returned did not stop the process");
  } else if (what == "refused-copy") {
    std::vector<std::byte> pageable(page());
    void* device = allocate(session.gpu_pools[0], page());
    copy(device, session.gpus[0], pageable.data(), session.cpu, page());  // aborts
    FAIL("a refused copy did not stop the process under HIPXX_STAND_IN_ABORT=1");
  } else {
    FAIL("unknown order ", what);
  }
}
