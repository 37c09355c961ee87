#include "core/stream_registry.hpp"

#include "core/immortal.hpp"
#include "core/rollback.hpp"

#include <algorithm>
#include <forward_list>
#include <map>
#include <new>

namespace hipxx::core {
namespace {

// NOLINTNEXTLINE(cppcoreguidelines-pro-type-cstyle-cast): the cast is HIP's, inside its C macro hipStreamLegacy
bool names_null_stream(hipStream_t stream) noexcept { return stream == nullptr || stream == hipStreamLegacy; }

// Per-thread default streams die with their thread, through the registry that made them, which
// outlives every thread (the process's runtime is never destroyed).
struct PerThreadStreams {
  StreamRegistry* registry = nullptr;
  std::uint64_t registry_serial = 0;
  std::map<int, hipStream_t> by_device;
  PerThreadStreams() = default;
  PerThreadStreams(const PerThreadStreams&) = delete;
  PerThreadStreams& operator=(const PerThreadStreams&) = delete;
  PerThreadStreams(PerThreadStreams&&) = delete;
  PerThreadStreams& operator=(PerThreadStreams&&) = delete;
  ~PerThreadStreams() {
    for (const auto& [device, stream] : by_device) (void)registry->destroy(stream);
  }
};

// The last handle this thread resolved: the allocator's hot path resolves the same stream over and
// over, and this spares it the registry's lock and any atomic operation. It holds the stream: a
// stream destroyed meanwhile changes the registry's generation, so the next resolve on this thread
// lets it go (the destroying thread lets go of its own at once); until then it only delays the end
// of a stream nobody can name any more. The null stream is held without ownership.
struct ResolvedStream {
  std::uint64_t registry = 0;  // the registry's serial; 0: none
  hipStream_t handle = nullptr;
  int device = -1;
  std::uint64_t generation = 0;
  std::shared_ptr<Stream> stream;
};

// Trivially destructible, so it can still be read while the thread's other thread_locals go.
thread_local bool thread_state_gone = false;

struct MarksThreadStateGone {
  MarksThreadStateGone() = default;
  MarksThreadStateGone(const MarksThreadStateGone&) = delete;
  MarksThreadStateGone& operator=(const MarksThreadStateGone&) = delete;
  MarksThreadStateGone(MarksThreadStateGone&&) = delete;
  MarksThreadStateGone& operator=(MarksThreadStateGone&&) = delete;
  ~MarksThreadStateGone() { thread_state_gone = true; }
};

// One object, members destroyed in reverse order: the per-thread streams go first, while the cache
// their destruction uses is still there, and the flag last.
struct ThreadState {
  MarksThreadStateGone gone;
  ResolvedStream last;
  PerThreadStreams per_thread;
};

const std::shared_ptr<Stream> no_stream;

// Where a late call (StreamRegistry::resolve_late) keeps the stream it resolved. A thread_local
// made during the thread's own destruction of its thread_locals (an application's destructor
// calling in) is destroyed after them all, as glibc runs destructors registered meanwhile too: so
// the stream is let go when the thread ends, and a stream that call destroyed does end. On the
// exiting main thread (atexit handlers, static destructors) nothing more is destroyed, which the
// process's end makes moot. A late call made after even that slot went keeps its stream in storage
// that is never destroyed, one slot per such thread.
thread_local bool late_holder_gone = false;  // trivially destructible: readable throughout

struct LateHolder {
  LateHolder() = default;
  LateHolder(const LateHolder&) = delete;
  LateHolder& operator=(const LateHolder&) = delete;
  LateHolder(LateHolder&&) = delete;
  LateHolder& operator=(LateHolder&&) = delete;
  ~LateHolder() { late_holder_gone = true; }
  std::shared_ptr<Stream> stream;
};

std::shared_ptr<Stream>& last_resort_slot() {
  struct LateSlots {
    std::mutex mutex;
    std::forward_list<std::shared_ptr<Stream>> slots;
  };
  static Immortal<LateSlots> late{[] { return LateSlots{}; }};
  thread_local std::shared_ptr<Stream>* mine = nullptr;  // trivially destructible: outlives the state
  if (mine == nullptr) {
    LateSlots& all = *late;
    std::lock_guard lock{all.mutex};
    mine = &all.slots.emplace_front();
  }
  return *mine;
}

std::shared_ptr<Stream>& late_slot() {
  if (late_holder_gone) return last_resort_slot();
  thread_local LateHolder holder;
  return holder.stream;
}

std::atomic<std::uint64_t> registries_made{0};
// Initial-exec: read on every call, and the runtime is linked, not opened late with dlopen.
__attribute__((tls_model("initial-exec"))) thread_local ThreadState thread_state;

}  // namespace

StreamRegistry::StreamRegistry(int device_count, QueueFactory make_queue)
    : make_queue_(std::move(make_queue)),
      serial_(registries_made.fetch_add(1, std::memory_order_relaxed) + 1),
      null_streams_(static_cast<std::size_t>(device_count)),
      null_published_(static_cast<std::size_t>(device_count)) {}

hipError_t StreamRegistry::create(hipStream_t* stream, StreamTraits traits) {
  std::unique_ptr<backend::Queue> queue = make_queue_ ? make_queue_(traits) : nullptr;
  auto created = std::make_shared<Stream>(std::move(traits), std::move(queue));
  std::lock_guard lock{mutex_};
  const std::uintptr_t id = numbers_.take();
  streams_.emplace(id, std::move(created));
  *stream = reinterpret_cast<hipStream_t>(id);
  return hipSuccess;
}

void StreamRegistry::retire(const std::shared_ptr<Stream>& doomed) {
  {
    std::lock_guard lock{mutex_};
    std::erase_if(retiring_, [](const std::weak_ptr<Stream>& retired) { return retired.expired(); });
    retiring_.push_back(doomed);
  }
  // The task gets a copy: the caller's reference lives until enqueue has returned, since the worker
  // may run the final task (and drop its copy) before enqueue's notify, which must not touch a
  // destroyed stream. Whichever reference goes last destroys the stream.
  // The final task leaves the retiring list under the registry's lock, after all of the stream's
  // work: a device synchronisation (or null-stream barrier) that no longer finds the stream there
  // is ordered after that work through the lock, not through an expired weak_ptr.
  doomed->enqueue([this, last = doomed] {
    std::lock_guard lock{mutex_};
    std::erase_if(retiring_, [&](const std::weak_ptr<Stream>& retired) {
      return !retired.owner_before(last) && !last.owner_before(retired);
    });
    return hipSuccess;
  });
}

hipError_t StreamRegistry::destroy(hipStream_t stream) {
  std::shared_ptr<Stream> doomed;
  {
    std::lock_guard lock{mutex_};
    const auto found = streams_.find(reinterpret_cast<std::uintptr_t>(stream));
    if (found == streams_.end()) return hipErrorInvalidHandle;
    // Its frees stay due for trimming: the device's null stream, which device synchronisation
    // covers, takes over the pools it used. First, as it may throw: a refused destroy keeps the
    // stream (a pool the null stream holds as well is only trimmed once more).
    null_stream_locked(found->second->traits().device).adopt_pools_of(*found->second);
    doomed = std::move(found->second);
    doomed->mark_destroyed();
    streams_.erase(found);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  // This thread's cache lets go at once; other threads' caches do at their next resolve.
  if (!thread_state_gone) {
    if (ResolvedStream& last = thread_state.last; last.registry == serial_ && last.handle == stream) {
      last = ResolvedStream{};
    }
  }
  // hipStreamDestroy returns at once, as on a GPU: a stream with work still queued hands its last
  // reference to a final task of its own, so it goes on its worker thread once that work is done.
  // Outside the lock: that work may enqueue elsewhere.
  if (!doomed->idle()) {
    try {
      retire(doomed);
    } catch (const std::bad_alloc&) {
      // No memory for the final task: the stream is destroyed here instead (below), once its work
      // is done, which is what hipStreamDestroy promises all the same.
    }
  }
  doomed.reset();
  return hipSuccess;
}

const std::shared_ptr<Stream>& StreamRegistry::resolve(hipStream_t stream, int current_device) {
  if (thread_state_gone) return resolve_late(stream, current_device);
  if (stream == hipStreamPerThread) {  // NOLINT(cppcoreguidelines-pro-type-cstyle-cast): HIP's C macro
    PerThreadStreams& per_thread = thread_state.per_thread;
    if (per_thread.registry_serial != serial_) {
      // Handles of another registry's (a runtime of a test's own, gone or not) name nothing here.
      per_thread.by_device.clear();
      per_thread.registry = this;
      per_thread.registry_serial = serial_;
    }
    auto entry = per_thread.by_device.find(current_device);
    if (entry == per_thread.by_device.end()) {
      // Booked only once made: a first use that fails leaves the next one to make it.
      hipStream_t created = nullptr;
      if (create(&created, StreamTraits{.device = current_device}) != hipSuccess) return no_stream;
      Rollback unmake{[&] { (void)destroy(created); }};
      entry = per_thread.by_device.emplace(current_device, created).first;
      unmake.keep();
    }
    stream = entry->second;
  }
  const std::uint64_t generation = generation_.load(std::memory_order_acquire);
  ResolvedStream& last = thread_state.last;
  if (last.registry == serial_ && last.handle == stream && last.device == current_device &&
      last.generation == generation && last.stream) {
    return last.stream;
  }
  std::shared_ptr<Stream> found_stream = look_up(stream, current_device);
  if (!found_stream) return no_stream;
  // Outside the lock: replacing the cache may drop the last reference to a destroyed stream.
  last = ResolvedStream{serial_, stream, current_device, generation, std::move(found_stream)};
  return last.stream;
}

bool StreamRegistry::waits_for_running_work(int device, bool null_stream_order) const {
  const std::optional<StreamWorkSource> running = RunningStreamWork::current();
  if (!running) return false;
  // Its own stream is one such: every stream of its device counts, and for the null stream's order
  // the null stream and the blocking streams do (CUDA forbids runtime calls from callbacks anyway).
  if (running->device == device && (!null_stream_order || running->waited_for_by_null_stream)) return true;
  if (running->point == 0) return false;
  const auto waits = [&](const Stream& stream) {
    return stream.traits().device == device && (!null_stream_order || stream.traits().is_null || stream.blocking()) &&
           stream.known_point(running->stream) >= running->point;
  };
  std::lock_guard lock{mutex_};
  const auto slot = static_cast<std::size_t>(device);
  if (slot < null_streams_.size() && null_streams_[slot] && waits(*null_streams_[slot])) return true;
  return std::any_of(streams_.begin(), streams_.end(), [&](const auto& entry) { return waits(*entry.second); });
}

std::shared_ptr<Stream> StreamRegistry::look_up(hipStream_t stream, int current_device) {
  std::lock_guard lock{mutex_};
  if (names_null_stream(stream)) {
    // The null stream is owned by the registry for the life of the process; callers hold it by a
    // non-owning shared_ptr.
    return std::shared_ptr<Stream>{std::shared_ptr<Stream>{}, &null_stream_locked(current_device)};
  }
  const auto found = streams_.find(reinterpret_cast<std::uintptr_t>(stream));
  return found != streams_.end() ? found->second : nullptr;
}

// A call made after this thread's state went: on the exiting thread, an atexit handler or a static
// destructor (glibc destroys that thread's thread_locals first), or a thread_local of the
// application's destroyed later. Explicit streams and the null stream are still found; the
// per-thread streams went with the state. The stream is kept in a slot of the thread's own (see
// late_slot) until the thread's next late call or its end.
const std::shared_ptr<Stream>& StreamRegistry::resolve_late(hipStream_t stream, int current_device) {
  if (stream == hipStreamPerThread) return no_stream;  // NOLINT(cppcoreguidelines-pro-type-cstyle-cast): HIP's C macro
  std::shared_ptr<Stream> found = look_up(stream, current_device);
  std::shared_ptr<Stream>& slot = late_slot();
  slot = std::move(found);
  return slot;
}

void forget_resolved_stream() noexcept {
  if (!thread_state_gone) thread_state.last = ResolvedStream{};
}

Stream& StreamRegistry::null_stream_locked(int device) {
  auto& slot = null_streams_.at(static_cast<std::size_t>(device));
  if (!slot) {
    StreamTraits traits{.device = device, .is_null = true};
    std::unique_ptr<backend::Queue> queue = make_queue_ ? make_queue_(traits) : nullptr;
    slot = std::make_unique<Stream>(std::move(traits), std::move(queue));
    null_published_[static_cast<std::size_t>(device)].store(slot.get(), std::memory_order_release);
  }
  return *slot;
}

std::vector<std::shared_ptr<Stream>> StreamRegistry::blocking_streams_locked(int device) const {
  std::vector<std::shared_ptr<Stream>> blocking;
  for (const auto& [id, stream] : streams_) {
    if (stream->traits().device == device && stream->blocking()) blocking.push_back(stream);
  }
  // A destroyed stream still finishing its queue keeps that work's place in null-stream order.
  for (const std::weak_ptr<Stream>& retired : retiring_) {
    std::shared_ptr<Stream> stream = retired.lock();
    if (stream && stream->traits().device == device && stream->blocking()) blocking.push_back(std::move(stream));
  }
  return blocking;
}

bool StreamRegistry::would_wait_for_others(const Stream& stream) const {
  if (stream.traits().is_null) return true;  // it may: finding out means walking the blocking streams
  if (!stream.blocking()) return false;
  const Stream* const null_stream =
      null_published_[static_cast<std::size_t>(stream.traits().device)].load(std::memory_order_acquire);
  return null_stream != nullptr && !null_stream->idle();
}

void StreamRegistry::order_by_null_stream_locked(Stream& stream) {
  const int device = stream.traits().device;
  if (stream.traits().is_null) {
    for (const std::shared_ptr<Stream>& other : blocking_streams_locked(device)) {
      if (other->idle()) continue;
      stream.enqueue_wait(other, other->tail());
    }
  } else if (stream.blocking()) {
    Stream& null_stream = null_stream_locked(device);
    if (!null_stream.idle()) {
      // The registry owns the null stream for the life of the process.
      stream.enqueue_wait({std::shared_ptr<Stream>{}, &null_stream}, null_stream.tail());
    }
  }
}

std::optional<std::uint64_t> StreamRegistry::enqueue(Stream& stream, StreamTask task) {
  stream.wait_for_room();  // before the lock, as below
  // One lock across the barrier and the work keeps two threads' submissions from interleaving
  // between a barrier and the work it guards.
  std::lock_guard lock{mutex_};
  if (stream.destroyed()) return std::nullopt;  // while this thread waited for room
  order_by_null_stream_locked(stream);
  return stream.enqueue(std::move(task));
}

hipError_t StreamRegistry::enqueue(Stream& stream, QueueWork on_queue, StreamTask on_host, std::uint64_t* sequence) {
  stream.wait_for_room();  // before the lock: a full queue holds up only this thread
  std::lock_guard lock{mutex_};
  if (stream.destroyed()) return hipErrorInvalidHandle;  // while this thread waited for room
  order_by_null_stream_locked(stream);
  return stream.enqueue(std::move(on_queue), std::move(on_host), sequence);
}

bool StreamRegistry::enqueue_wait(Stream& stream, const std::shared_ptr<Stream>& other, std::uint64_t point,
                                  backend::Timestamp* recorded) {
  stream.wait_for_room();  // the wait is one more operation on the stream's queue
  // Under the lock, as destroy marks the stream under it: a wait that passed the check is queued
  // before the stream's final task.
  std::lock_guard lock{mutex_};
  if (stream.destroyed()) return false;
  (void)stream.enqueue_wait(other, point, recorded);
  return true;
}

namespace {
// A stream and the end of the work queued on it when a synchronize began: the synchronize waits
// for that work, not for what other threads queue meanwhile (which may wait for this thread).
struct TailAtStart {
  std::shared_ptr<Stream> stream;
  std::uint64_t tail;
};

void add_tail(std::vector<TailAtStart>& tails, std::shared_ptr<Stream> stream) {
  const std::uint64_t tail = stream->tail();
  tails.push_back({.stream = std::move(stream), .tail = tail});
}
}  // namespace

void StreamRegistry::synchronize(Stream& stream) {
  if (!stream.traits().is_null) {
    stream.synchronize();
    return;
  }
  std::vector<TailAtStart> blocking;
  const std::uint64_t own = stream.tail();
  {
    std::lock_guard lock{mutex_};
    for (std::shared_ptr<Stream>& other : blocking_streams_locked(stream.traits().device)) {
      add_tail(blocking, std::move(other));
    }
  }
  stream.wait_for(own);
  for (const TailAtStart& other : blocking) other.stream->wait_for(other.tail);
}

hipError_t StreamRegistry::synchronize_device(int device) {
  std::vector<TailAtStart> all;
  {
    std::lock_guard lock{mutex_};
    if (Stream* const null_stream = null_streams_.at(static_cast<std::size_t>(device)).get()) {
      add_tail(all, std::shared_ptr<Stream>{std::shared_ptr<Stream>{}, null_stream});  // lives for the process
    }
    for (const auto& [id, stream] : streams_) {
      if (stream->traits().device == device) add_tail(all, stream);
    }
    for (const std::weak_ptr<Stream>& retired : retiring_) {
      std::shared_ptr<Stream> stream = retired.lock();
      if (stream && stream->traits().device == device) add_tail(all, std::move(stream));
    }
  }
  hipError_t failure = hipSuccess;
  for (const TailAtStart& stream : all) {
    stream.stream->wait_for(stream.tail);
    if (failure == hipSuccess) failure = stream.stream->status();
  }
  return failure;
}

namespace {
void add_pools_of(const Stream& stream, std::vector<PoolRef>& pools) {
  for (const PoolRef& pool : stream.pools()) add_pool_once(pools, pool);
}
}  // namespace

std::vector<PoolRef> StreamRegistry::pools_synchronized_by(const Stream& stream) {
  std::vector<PoolRef> pools = stream.pools();
  if (!stream.traits().is_null) return pools;
  std::lock_guard lock{mutex_};
  for (const std::shared_ptr<Stream>& other : blocking_streams_locked(stream.traits().device)) {
    add_pools_of(*other, pools);
  }
  return pools;
}

std::vector<PoolRef> StreamRegistry::pools_synchronized_on(int device) {
  std::vector<PoolRef> pools;
  std::lock_guard lock{mutex_};
  if (const Stream* null_stream = null_streams_.at(static_cast<std::size_t>(device)).get()) {
    add_pools_of(*null_stream, pools);
  }
  for (const auto& [id, stream] : streams_) {
    if (stream->traits().device == device) add_pools_of(*stream, pools);
  }
  return pools;
}

void StreamRegistry::forget_pool(std::uint64_t serial) {
  std::lock_guard lock{mutex_};
  for (const std::unique_ptr<Stream>& null_stream : null_streams_) {
    if (null_stream) null_stream->forget_pool(serial);
  }
}

std::optional<std::uint64_t> StreamRegistry::completed_point(Stream& stream) {
  std::lock_guard lock{mutex_};
  if (!stream.idle()) return std::nullopt;
  const int device = stream.traits().device;
  if (stream.traits().is_null) {
    for (const std::shared_ptr<Stream>& other : blocking_streams_locked(device)) {
      if (!other->idle()) return std::nullopt;
    }
  } else if (stream.blocking() && !null_stream_locked(device).idle()) {
    return std::nullopt;
  }
  return stream.tail();
}

bool StreamRegistry::device_idle(int device) const {
  std::lock_guard lock{mutex_};
  const Stream* null_stream = null_streams_.at(static_cast<std::size_t>(device)).get();
  if (null_stream != nullptr && !null_stream->idle()) return false;
  for (const auto& [id, stream] : streams_) {
    if (stream->traits().device == device && !stream->idle()) return false;
  }
  return std::ranges::all_of(retiring_, [device](const std::weak_ptr<Stream>& retired) {
    const std::shared_ptr<Stream> stream = retired.lock();
    return !stream || stream->traits().device != device || stream->idle();
  });
}

std::size_t StreamRegistry::live_streams() const {
  std::lock_guard lock{mutex_};
  return streams_.size();
}

}  // namespace hipxx::core
