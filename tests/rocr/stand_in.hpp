// The stand-in libhsa-runtime64's own state, shared by its source files (see hsa_stand_in.cpp for what
// the stand-in is and which rules it enforces). Nothing here is exported.
#pragma once

#include "backend/rocr/hsa_runtime.hpp"

#include <pthread.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace hipxx::backend::rocr::stand_in {

// Agent 0 is the CPU, agents 1..gpus the GPUs; each agent owns exactly one pool, of the same index.
constexpr unsigned kCpu = 0;
constexpr unsigned kMaxGpus = 8;
constexpr unsigned kMaxAgents = kMaxGpus + 1;
using AgentMask = std::uint32_t;
constexpr AgentMask bit(unsigned agent) { return AgentMask{1} << agent; }

// Handles are tagged counters, never reused, so that a stale or made-up handle is recognised as such.
constexpr std::uint64_t kAgentTag = 0x4167'0000'0000'0000;
constexpr std::uint64_t kPoolTag = 0x506f'0000'0000'0000;
constexpr std::uint64_t kSignalTag = 0x5369'0000'0000'0000;
constexpr std::uint64_t kVmemTag = 0x566d'0000'0000'0000;

constexpr std::size_t kGpuPoolSize = std::size_t{16} << 30;
constexpr std::size_t kRecommendedGranule = std::size_t{2} << 20;
constexpr std::uint32_t kGpuComputeUnits = 8;

struct Config {
  unsigned gpus = 1;
  bool vmem = true;
  bool xnack = false;
  bool peers = true;  // GPUs may be granted each other's pool memory (HIPXX_STAND_IN_NO_PEER=1: never)
  // vmem set_access replaces the permissions of the agents it does not name with NONE, as ROCr's
  // documentation says (HIPXX_STAND_IN_REPLACE_ACCESS=1); otherwise they keep theirs, as its code does.
  bool replace_access = false;
  std::chrono::microseconds copy_delay{200};
};

// Writes one line to stderr, naming the rule an application broke (HIPXX_STAND_IN_ABORT=1: then aborts).
void complain(const std::string& line);
// Writes one line to stderr about a legal call that may not do what its caller expects.
void note(const std::string& line);
// For breaches that ROCr has no error code for (undefined behaviour there): always aborts.
[[noreturn]] void fatal(const std::string& line);
std::string hex(std::uintptr_t value);

std::size_t page_size();
constexpr std::size_t round_up(std::size_t size, std::size_t granule) {
  return (size + granule - 1) / granule * granule;
}

// What an agent wants of memory; `any`: only that it is there.
enum class Want { any, read, write };
bool permits(hsa_access_permission_t permission, Want want);

// Memory that a GPU owns: a memfd, plus the stand-in's private read-write mapping of it (the "device
// view") through which the stand-in's copies and fills reach it. The application's addresses are
// separate mappings of the same memfd, whose protection follows the CPU agent's rights only.
class DeviceMemory {
 public:
  static std::shared_ptr<DeviceMemory> create(std::size_t size, unsigned owner);
  // Takes ownership of `fd` when it is one of the stand-in's memfds (any process's); else nullptr.
  static std::shared_ptr<DeviceMemory> adopt(int fd);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&&) = delete;
  DeviceMemory& operator=(DeviceMemory&&) = delete;
  ~DeviceMemory();

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] unsigned owner() const { return owner_; }
  [[nodiscard]] std::uint64_t token() const { return token_; }
  [[nodiscard]] std::byte* device_view() const { return view_; }
  // Maps the memory at `va` (which the caller reserved) or anywhere (nullptr), with no host access.
  [[nodiscard]] void* map_host_view(void* va) const;

 private:
  DeviceMemory(int fd, std::size_t size, unsigned owner, std::uint64_t token, std::byte* view)
      : fd_(fd), size_(size), owner_(owner), token_(token), view_(view) {}
  int fd_;
  std::size_t size_;
  unsigned owner_;
  std::uint64_t token_;
  std::byte* view_;
};

// Counts the queued or running asynchronous operations that reach into a book entry: releasing the
// entry meanwhile is the application's error (a GPU would fault), which the stand-in stops on.
struct Busy {
  int operations = 0;
};

struct VmemHandle {
  std::shared_ptr<DeviceMemory> memory;
  unsigned pool = 0;
  hsa_amd_memory_type_t type = MEMORY_TYPE_NONE;
  std::uint64_t references = 1;  // handle_create / import / retain, less handle_release
  std::uint64_t mappings = 0;
  std::size_t charged = 0;  // bytes counted against the pool's size (none for an import)
  bool imported = false;  // by hsa_amd_vmem_import_shareable_handle
};

struct Mapping {
  std::size_t size = 0;
  std::uint64_t handle = 0;
  std::shared_ptr<DeviceMemory> memory;
  std::array<hsa_access_permission_t, kMaxAgents> permissions{};
  AgentMask ever_set = 0;  // agents named by some set_access on this mapping
  std::shared_ptr<Busy> busy = std::make_shared<Busy>();
};

struct Reservation {
  std::size_t size = 0;
  std::map<std::uintptr_t, Mapping> mappings;
};

struct PoolAllocation {
  std::size_t requested = 0;
  std::size_t size = 0;  // rounded up to the pool's granule
  unsigned pool = 0;
  std::shared_ptr<DeviceMemory> memory{};  // nullptr for the CPU pool's ordinary host memory
  AgentMask allowed = 0;
  std::shared_ptr<Busy> busy = std::make_shared<Busy>();
};

struct Attachment {
  std::size_t size = 0;
  std::shared_ptr<DeviceMemory> memory;
  AgentMask allowed = 0;
  std::shared_ptr<Busy> busy = std::make_shared<Busy>();
};

// What hsa_amd_svm_attributes_set recorded for a page range of ordinary host memory.
struct SvmAttributes {
  AgentMask accessible = 0;
  AgentMask denied = 0;
  bool read_only = false;
  bool read_mostly = false;
  std::uint64_t global_flag = HSA_AMD_SVM_GLOBAL_FLAG_COARSE_GRAINED;
  std::uint64_t preferred_location = 0;
  std::uint64_t prefetched_to = 0;
};

// Page ranges of host memory with their SVM attributes; unrecorded pages have the defaults.
class SvmBook {
 public:
  void update(std::uintptr_t begin, std::uintptr_t end, const std::function<void(SvmAttributes&)>& change);
  [[nodiscard]] bool all(std::uintptr_t begin, std::uintptr_t end,
                         const std::function<bool(const SvmAttributes&)>& holds) const;
  void forget(std::uintptr_t begin, std::uintptr_t end);
  void clear() { ranges_.clear(); }

 private:
  struct Range {
    std::uintptr_t end;
    SvmAttributes attributes;
  };
  void split_at(std::uintptr_t address);
  std::map<std::uintptr_t, Range> ranges_;
};

// How long ROCr's own thread may still be inside a signal's notify after it lowered the signal.
constexpr std::chrono::milliseconds kNotifyWindow{20};

struct Signal {
  hsa_signal_value_t value = 0;
  int users = 0;  // queued operations, waiting threads and registered handlers
  // Until then the runtime's own thread, which lowered the signal, may still be notifying its
  // waiters: destroying it before is a use after free in ROCr.
  std::chrono::steady_clock::time_point notified_until{};
};

// One asynchronous operation: runs once every dependency signal reads 0, then decrements completion.
struct Job {
  std::vector<std::shared_ptr<Signal>> dependencies;
  std::shared_ptr<Signal> completion;  // may be empty (a prefetch without a signal)
  std::vector<std::shared_ptr<Busy>> busy;
  std::vector<std::shared_ptr<DeviceMemory>> memory;  // device views the work reaches through
  std::function<void()> work;  // runs without the lock
  std::function<void()> finish;  // runs under the lock, after work; may be empty
  bool fails = false;  // the engine fails it: no work, and the completion signal goes below zero
  // The runtime lowers the completion signal on a host thread of its own and notifies its waiters
  // after (ROCr's SVM prefetch); a copy's is lowered by the engine.
  bool lowered_on_host = false;
};

// One hsa_amd_signal_async_handler registration: function(value, arg) once `signal` meets `condition`
// against `compare`. While its call runs it is in no list and no user of the signal: a handler that
// returns false is done with the signal the moment it returns, so that a thread it wakes may destroy the
// signal at once; one that returns true on a signal destroyed meanwhile stops the process.
struct Handler {
  std::uint64_t handle = 0;
  std::shared_ptr<Signal> signal;
  hsa_signal_condition_t condition = HSA_SIGNAL_CONDITION_EQ;
  hsa_signal_value_t compare = 0;
  hsa_amd_signal_handler function = nullptr;
  void* arg = nullptr;
};

// The thread that calls handlers. Whoever stops it takes it out of the state first, so that nobody
// joins it twice, and a registration while it stops (after another hsa_init) starts a new one rather
// than reviving a thread that is on its way out.
struct HandlerThread {
  pthread_t thread{};
  int pid = 0;
  bool stop = false;
};

// The whole process-wide state, under one mutex. Never destroyed: a process may exit with the
// runtime open, and the worker and handler threads must not outlive the objects they use.
struct State {
  std::mutex mutex;
  // A signal's value, the job queue, the handlers or a thread's orders changed.
  std::condition_variable changed;
  unsigned opened = 0;
  Config config;
  std::map<std::uintptr_t, Reservation> reservations;
  std::map<std::uint64_t, VmemHandle> handles;
  std::map<std::uintptr_t, PoolAllocation> allocations;
  std::map<std::uintptr_t, Attachment> attachments;
  std::array<std::size_t, kMaxAgents> pool_in_use{};
  SvmBook svm;
  std::map<std::uint64_t, std::shared_ptr<Signal>> signals;
  std::deque<Job> jobs;
  std::uint64_t next_id = 1;
  unsigned copies_to_fail = 0;  // hsa_stand_in_fail_copies: the next copies that fail on the engine
  bool worker_running = false;
  bool worker_stop = false;
  int worker_pid = 0;
  std::deque<Handler> handlers;  // registered and not being called now
  std::unique_ptr<HandlerThread> handler_thread;  // none until the first registration
};

State& state();

// The lock of state(); nullopt (and no lock held) when the runtime is not open.
std::optional<std::unique_lock<std::mutex>> lock_open();

[[nodiscard]] unsigned agent_count(const State& s);
[[nodiscard]] bool is_gpu(unsigned agent);
[[nodiscard]] std::optional<unsigned> agent_index(const State& s, hsa_agent_t agent);
[[nodiscard]] std::optional<unsigned> pool_index(const State& s, hsa_amd_memory_pool_t pool);
[[nodiscard]] hsa_agent_t agent_handle(unsigned agent);
[[nodiscard]] std::size_t pool_granule(unsigned pool);
[[nodiscard]] std::size_t pool_limit(unsigned pool);  // HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE

// The entry of a map keyed by base address (values with a `size`) that holds `address`, or end().
template <typename Map>
auto entry_holding(Map& map, std::uintptr_t address) -> decltype(map.begin()) {
  auto entry = map.upper_bound(address);
  if (entry == map.begin()) return map.end();
  --entry;
  return address - entry->first < entry->second.size ? entry : map.end();
}

// Whether every byte of [begin, end) is mapped in this process with a protection that allows `want`.
[[nodiscard]] bool host_pages_allow(std::uintptr_t begin, std::uintptr_t end, Want want);
// Whether [begin, end) overlaps memory the stand-in manages (reservations, allocations, attachments).
[[nodiscard]] bool overlaps_books(const State& s, std::uintptr_t begin, std::uintptr_t end);

// Releases everything (the last hsa_shut_down), with the lock held and the worker stopped.
void release_all(State& s);
// Queues a job, starting the worker thread if this process has none.
void enqueue(State& s, Job job);
// Stops the worker thread (the last hsa_shut_down); takes and gives back the lock.
void stop_worker(std::unique_lock<std::mutex>& lock);
// Stops the handler thread (the last hsa_shut_down, before the worker, which a running handler may wait
// for) once its current call returns, and drops the handlers still registered; takes and gives back the
// lock. Aborts when called on the handler thread, which would wait for itself.
void stop_handlers(std::unique_lock<std::mutex>& lock);

}  // namespace hipxx::backend::rocr::stand_in
