// Device queues on ROCr. A queue is a chain of ROCr's asynchronous operations, each started with the
// completion signals of the work before it as its dependency signals:
//   copy          hsa_amd_memory_async_copy, one per piece (pieces run side by side, and the next
//                 work waits for them all); a copy that needs the host (application memory, staging)
//                 is refused, and the runtime does it on the stream's host thread
//   prefetch      hsa_amd_svm_prefetch_async
//   wait_queue    nothing on the device: later work also waits for the other queue's last signals
//   host_call     hsa_amd_signal_async_handler on the last signal; the handler runs the call, marks
//                 its number and then lowers a gate signal that later work waits for
//   record        the same with a handler that notes the time (timestamps are host times taken by
//                 ROCr's handler thread, not GPU clocks); without timing, the record is the last signal
//   mark          nothing on the device: the number is remembered with the last step and reported
//                 by progress() once that step's signals have all come down
//   fill          copies too (hsa_amd_memory_fill takes no signals): a block of the value from
//                 the backend's pattern into the start of each piece, then copies within the piece that
//                 double what is filled; a fill of memory no GPU may write is refused
//   write_word    a copy of the word's 4 or 8 bytes from pinned memory that holds the value
//   wait_word     refused (HSA has no operation that waits for a word in memory without a kernel):
//                 the runtime waits on the host, in stream order
// Where a handler needs one signal and the last step has several, a four-byte copy within the
// queue's own eight pinned bytes (one word_source() slot) that waits for them all stands for them.
// A queue keeps a bounded number of steps in flight: wait_for_room holds the thread that would add
// more until the oldest is over, since every step holds signals until it is seen over.
#include "backend/rocr/rocr_queue.hpp"

#include "backend/host_clock_timestamp.hpp"
#include "backend/rocr/hsa_status.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <utility>

namespace hipxx::backend::rocr {
namespace {

// A host-clock timestamp that also knows the signal that comes down once its latest record is passed,
// for queues that wait for it.
class RocrTimestamp final : public HostClockTimestamp {
 public:
  using HostClockTimestamp::HostClockTimestamp;

  // Null before the first record.
  [[nodiscard]] SignalRef point() const {
    std::lock_guard lock{mutex_};
    return point_;
  }
  void set_point(SignalRef point) {
    std::lock_guard lock{mutex_};
    point_ = std::move(point);
  }

 private:
  mutable std::mutex mutex_;
  SignalRef point_;
};

// What an asynchronous handler needs; owned by the step it belongs to, which lasts until the handler
// has lowered the gate, the last thing the handler does.
struct HandlerWork {
  const RuntimeApi* api = nullptr;
  hsa_signal_t gate{};
  // A host call (its queue marks its number afterwards)...
  HostCall* call = nullptr;
  Queue* queue = nullptr;
  std::uint64_t sequence = 0;
  hipError_t status = hipSuccess;
  // ...or a record.
  std::shared_ptr<HostClockRecords> stamp{};
  std::uint64_t record = 0;
};

bool run_handler(hsa_signal_value_t value, void* argument) {
  auto* const work = static_cast<HandlerWork*>(argument);
  if (work->call != nullptr) {
    const hipError_t status = value < 0 && work->status == hipSuccess ? hipErrorIllegalAddress : work->status;
    work->call->run(work->call, status);  // frees the call
    work->queue->complete(work->sequence);
  } else {
    work->stamp->pass(work->record);
  }
  const RuntimeApi* const api = work->api;
  const hsa_signal_t gate = work->gate;
  api->hsa_signal_store_screlease(gate, 0);  // from here on the step, and `work`, may be gone
  return false;
}

class RocrQueue final : public Queue {
 public:
  RocrQueue(QueueSupport& support, int device)
      : support_(support), api_(support.runtime_api()), signals_(support.signal_pool()), device_(device) {}
  RocrQueue(const RocrQueue&) = delete;
  RocrQueue& operator=(const RocrQueue&) = delete;
  RocrQueue(RocrQueue&&) = delete;
  RocrQueue& operator=(RocrQueue&&) = delete;

  // The device may still use the signals and the handlers their arguments: all of it finishes first.
  ~RocrQueue() override {
    std::lock_guard lock{mutex_};
    for (const Step& step : steps_) {
      for (const SignalRef& signal : step.done) wait_for(signal->get());
    }
    steps_.clear();
  }

  [[nodiscard]] std::uint64_t progress() const noexcept override {
    // A poller that finds the lock taken reads what is known; it asks again soon.
    if (std::unique_lock lock{mutex_, std::try_to_lock}; lock.owns_lock()) retire_locked();
    return progress_.load(std::memory_order_acquire);
  }

  hipError_t write_mark(std::uint64_t sequence) override {
    std::lock_guard lock{mutex_};
    retire_locked();
    if (steps_.empty()) {
      raise_progress(sequence);
    } else {
      steps_.back().mark = sequence;
    }
    return hipSuccess;
  }

  hipError_t copy(void* dst, const void* src, std::size_t bytes) override {
    const std::optional<std::vector<CopyPiece>> pieces = support_.plan_copy(dst, src, bytes);
    if (!pieces) return hipErrorNotSupported;
    return add_pieces(*pieces, [&](const CopyPiece& piece, const std::vector<hsa_signal_t>& after, Step& step) {
      return add_copy(piece, after, step);
    });
  }

  // Each piece of device memory takes a first block of the value from the backend's pattern, then
  // doubles what it holds with copies within itself: log2(bytes / kFillPatternBytes) copies in a chain.
  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    const std::optional<std::vector<CopyPiece>> pieces = support_.plan_fill(dst, bytes);
    if (!pieces) return hipErrorNotSupported;
    if (pieces->empty()) return hipSuccess;
    const void* const pattern = support_.fill_pattern(value);
    if (pattern == nullptr) return hipErrorNotSupported;  // the host can still fill it
    return add_pieces(*pieces, [&](const CopyPiece& piece, const std::vector<hsa_signal_t>& after, Step& step) {
      auto* const start = static_cast<unsigned char*>(piece.dst);
      std::size_t blocks = 0;
      for (std::size_t filled = 0; filled < piece.bytes; ++blocks) filled += next_fill_block(filled, piece.bytes);
      step.held.reserve(step.held.size() + blocks);
      step.done.reserve(step.done.size() + 1);
      SignalRef last;
      hipError_t result = hipSuccess;
      for (std::size_t filled = 0; filled < piece.bytes;) {
        const std::size_t block = next_fill_block(filled, piece.bytes);
        const CopyPiece part{
            .dst = start + filled, .src = filled == 0 ? pattern : start, .bytes = block, .engine = piece.engine};
        SignalRef done;
        result = start_copy(part, last ? std::vector<hsa_signal_t>{last->get()} : after, done);
        if (result != hipSuccess) break;
        if (last) step.held.push_back(std::move(last));
        last = std::move(done);
        filled += block;
      }
      if (last) step.done.push_back(std::move(last));
      return result;
    });
  }

  // A copy of the word from pinned memory that holds the value until the copy is done; a copy engine
  // writes a naturally aligned word whole.
  hipError_t write_word(void* address, std::size_t bytes, std::uint64_t value) override {
    const std::optional<std::vector<CopyPiece>> pieces = support_.plan_fill(address, bytes);
    if (!pieces || pieces->size() != 1) return hipErrorNotSupported;  // not device memory: the host's
    std::shared_ptr<void> source = support_.word_source();
    if (!source) return hipErrorNotSupported;
    const auto narrow = static_cast<std::uint32_t>(value);
    std::memcpy(source.get(), bytes == sizeof(narrow) ? static_cast<const void*>(&narrow) : &value, bytes);
    const CopyPiece word{.dst = address, .src = source.get(), .bytes = bytes, .engine = pieces->front().engine};
    return add_step([&](const std::vector<hsa_signal_t>& after, Step& step) {
      step.source = std::move(source);
      return add_copy(word, after, step);
    });
  }
  hipError_t wait_word(const void* /*address*/, std::size_t /*bytes*/, const WordWait& /*wait*/) override {
    return hipErrorNotSupported;
  }

  hipError_t wait_queue(Queue& other) override {
    auto* const source = dynamic_cast<RocrQueue*>(&other);
    if (source == nullptr) return hipErrorNotSupported;
    if (source == this) return hipSuccess;
    // The other queue's lock is let go before this one's is taken: two queues waiting for each other
    // at once take them in opposite orders.
    std::vector<SignalRef> theirs;
    {
      std::lock_guard lock{source->mutex_};
      source->retire_locked();
      theirs = source->tail_locked();
    }
    return wait_for_signals(std::move(theirs));
  }

  hipError_t wait_timestamp(Timestamp& timestamp) override {
    auto* const stamp = dynamic_cast<RocrTimestamp*>(&timestamp);
    if (stamp == nullptr) return hipErrorNotSupported;
    SignalRef point = stamp->point();
    if (!point) return hipSuccess;  // never recorded: nothing to wait for
    return wait_for_signals({std::move(point)});
  }

  void complete(std::uint64_t sequence) noexcept override { raise_progress(sequence); }

  hipError_t queue_host_call(HostCall* call) override {
    std::lock_guard lock{mutex_};
    return add_handler_step_locked(
        HandlerWork{
            .call = call, .queue = this, .sequence = call->sequence, .status = fault_.load(std::memory_order_acquire)},
        nullptr);
  }

  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    // ROCr's prefetch takes a pointer to non-const memory, though it only moves the pages.
    void* const pages = const_cast<void*>(ptr);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    return add_step([&](const std::vector<hsa_signal_t>& after, Step& step) {
      SignalRef done = signals_.take(1);
      if (!done) return hipErrorOutOfMemory;
      step.done.reserve(step.done.size() + 1);
      const hsa_status_t status = api_.hsa_amd_svm_prefetch_async(pages, bytes, support_.agent_for(device),
                                                                  static_cast<std::uint32_t>(after.size()),
                                                                  after.empty() ? nullptr : after.data(), done->get());
      if (status == HSA_STATUS_SUCCESS) step.done.push_back(std::move(done));
      return to_hip(status);
    });
  }

  hipError_t record(Timestamp& timestamp) override {
    auto* const stamp = dynamic_cast<RocrTimestamp*>(&timestamp);
    if (stamp == nullptr) return hipErrorNotSupported;
    std::lock_guard lock{mutex_};
    if (!stamp->timing()) {
      // No time to note: the record is passed when the work before it is done.
      SignalRef point;
      if (const hipError_t joined = single_tail_locked(point); joined != hipSuccess) return joined;
      stamp->set_point(std::move(point));
      return hipSuccess;
    }
    SignalRef gate;
    if (const hipError_t added = add_handler_step_locked(
            HandlerWork{.stamp = stamp->records(), .record = stamp->records()->begin_record()}, &gate);
        added != hipSuccess) {
      return added;
    }
    stamp->set_point(std::move(gate));
    return hipSuccess;
  }

  hipError_t fault() override {
    std::lock_guard lock{mutex_};
    retire_locked();
    return fault_.load(std::memory_order_acquire);
  }

  bool finished() override {
    std::lock_guard lock{mutex_};
    retire_locked();
    return steps_.empty();
  }

  // retire_locked lets go of a failed signal, so the work behind it runs and every step retires.
  bool abandoned() override { return false; }

  // Waits for the oldest step while the queue holds kMaxSteps, without the queue's lock (progress,
  // finished and other queues' waits need it meanwhile). No step waits for anything but device work
  // and handlers, and a handler must not call the runtime, so the wait ends without the host.
  void wait_for_room() override {
    for (;;) {
      std::vector<SignalRef> oldest;
      {
        std::lock_guard lock{mutex_};
        retire_locked();
        if (steps_.size() < kMaxSteps) return;
        oldest = steps_.front().done;
      }
      for (const SignalRef& signal : oldest) wait_for(signal->get());
    }
  }

 private:
  // Steps a queue keeps before wait_for_room holds the thread that would add more. Each holds one or
  // a few pooled signals, and on ROCr a signal a handler or a wait may watch is an interrupt event
  // of the kernel's, of which a process has a few thousand in all; 128 copies or fills in flight keep
  // a copy engine busy. Threads that passed the check together may each add a step or two beyond it.
  static constexpr std::size_t kMaxSteps = 128;

  // Work put on the queue and not yet seen finished. Each step starts after the one before it is
  // over, so steps are over in order.
  struct Step {
    std::vector<SignalRef> done{};  // the step is over once every one of them is down
    std::vector<SignalRef> held{};  // signals its work waits on or its handler watches, kept till then
    std::unique_ptr<HandlerWork> handler{};  // the argument of its handler, if it has one
    std::shared_ptr<void> source{};  // the memory a written word is copied from
    std::uint64_t mark = 0;  // the number progress() reports once it is over
  };

  [[nodiscard]] static std::vector<hsa_signal_t> handles_of(const std::vector<SignalRef>& signals) {
    std::vector<hsa_signal_t> handles;
    handles.reserve(signals.size());
    for (const SignalRef& signal : signals) handles.push_back(signal->get());
    return handles;
  }

  void wait_for(hsa_signal_t signal) const noexcept { (void)wait_until_down(api_, signal); }

  void raise_progress(std::uint64_t sequence) const noexcept {
    std::uint64_t known = progress_.load(std::memory_order_relaxed);
    while (known < sequence &&
           !progress_.compare_exchange_weak(known, sequence, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }

  // One step after all work so far: `start(after, step)` starts its work waiting for the signals
  // `after` and puts those that come down when it is done in step.done. Work already started when
  // start fails part-way stays in the chain, so that later work still waits for it.
  // The step is in the chain before its work starts, and `start` makes room for the signals it
  // keeps before it starts anything: a lack of memory never drops the signal of work in flight
  // (which would go back to the pool and be reused while ROCr still lowers it).
  template <class Start>
  hipError_t add_step(Start&& start) {
    std::lock_guard lock{mutex_};
    retire_locked();
    Step& step = steps_.emplace_back(Step{.held = tail_locked()});
    try {
      const hipError_t result = start(handles_of(step.held), step);
      if (step.done.empty()) steps_.pop_back();
      return result;
    } catch (...) {
      if (step.done.empty()) steps_.pop_back();
      throw;
    }
  }

  // One step for the pieces of a copy or fill, each started by `start(piece, after, step)`; the
  // pieces run side by side.
  template <class StartPiece>
  hipError_t add_pieces(const std::vector<CopyPiece>& pieces, StartPiece&& start) {
    if (pieces.empty()) return hipSuccess;
    return add_step([&](const std::vector<hsa_signal_t>& after, Step& step) {
      step.done.reserve(step.done.size() + pieces.size());
      for (const CopyPiece& piece : pieces) {
        if (const hipError_t started = start(piece, after, step); started != hipSuccess) return started;
      }
      return hipSuccess;
    });
  }

  // A copy of one piece after `after`, its signal among the step's.
  hipError_t add_copy(const CopyPiece& piece, const std::vector<hsa_signal_t>& after, Step& step) {
    step.done.reserve(step.done.size() + 1);
    SignalRef done;
    const hipError_t started = start_copy(piece, after, done);
    if (started == hipSuccess) step.done.push_back(std::move(done));
    return started;
  }

  // Starts one copy after `dependencies`, with a fresh signal that comes down when it is done.
  hipError_t start_copy(const CopyPiece& piece, const std::vector<hsa_signal_t>& dependencies, SignalRef& done) {
    done = signals_.take(1);
    if (!done) return hipErrorOutOfMemory;
    const hsa_status_t status = api_.hsa_amd_memory_async_copy(
        piece.dst, piece.engine, piece.src, piece.engine, piece.bytes, static_cast<std::uint32_t>(dependencies.size()),
        dependencies.empty() ? nullptr : dependencies.data(), done->get());
    if (status != HSA_STATUS_SUCCESS) done.reset();
    return to_hip(status);
  }

  // Drops the steps that are over, front first, taking their marks and any failure they report
  // (ROCr lowers a signal below zero where the work failed). Work queued after a failed step waits
  // for its signal to reach zero, which ROCr never lets it do: the failure is kept here, for the
  // next synchronize to report, and the signal is set to zero so that the queue drains.
  void retire_locked() const noexcept {
    while (!steps_.empty()) {
      const Step& front = steps_.front();
      bool failed = false;
      for (const SignalRef& signal : front.done) {
        const hsa_signal_value_t value = api_.hsa_signal_load_scacquire(signal->get());
        if (value > 0) return;
        if (value < 0) {
          failed = true;
          api_.hsa_signal_store_screlease(signal->get(), 0);
        }
      }
      if (failed) fault_.store(hipErrorIllegalAddress, std::memory_order_release);
      const std::uint64_t mark = front.mark;
      steps_.pop_front();
      raise_progress(mark);
    }
  }

  // The signals later work waits for: those of the last step not yet seen over.
  [[nodiscard]] std::vector<SignalRef> tail_locked() const {
    return steps_.empty() ? std::vector<SignalRef>{} : steps_.back().done;
  }

  // Later work also waits for `signals` (another queue's, a record's): one step that is over when
  // they and this queue's last step are.
  hipError_t wait_for_signals(std::vector<SignalRef> signals) {
    if (signals.empty()) return hipSuccess;
    std::lock_guard lock{mutex_};
    retire_locked();
    std::vector<SignalRef> done = tail_locked();
    done.insert(done.end(), std::make_move_iterator(signals.begin()), std::make_move_iterator(signals.end()));
    steps_.push_back(Step{.done = std::move(done)});
    return hipSuccess;
  }

  // One signal that comes down once all work so far is done: the last step's own where it has one,
  // a signal already down where nothing is pending, else a copy of four bytes that waits for them all.
  hipError_t single_tail_locked(SignalRef& single) {
    retire_locked();
    std::vector<SignalRef> after = tail_locked();
    if (after.size() == 1) {
      single = std::move(after.front());
      return hipSuccess;
    }
    if (after.empty()) {
      single = signals_.take(0);
      return single ? hipSuccess : hipErrorOutOfMemory;
    }
    // The queue's own bytes: its barrier copies are ordered one after another, never side by side.
    if (!scratch_) scratch_ = support_.word_source();
    if (!scratch_) return hipErrorOutOfMemory;
    auto* const scratch = static_cast<unsigned char*>(scratch_.get());
    const CopyPiece barrier{.dst = scratch + 4, .src = scratch, .bytes = 4, .engine = support_.agent_for(device_)};
    const std::vector<hsa_signal_t> handles = handles_of(after);
    // In the chain before the copy starts, as add_step's steps are.
    Step& step = steps_.emplace_back(Step{.done = {}, .held = std::move(after)});
    step.done.reserve(1);
    if (const hipError_t started = start_copy(barrier, handles, single); started != hipSuccess) {
      steps_.pop_back();
      return started;
    }
    step.done.push_back(single);
    return hipSuccess;
  }

  // A step whose handler runs once all work so far is done and then lowers the step's gate. The
  // gate is given to `gate` where asked for.
  hipError_t add_handler_step_locked(HandlerWork work, SignalRef* gate) {
    SignalRef watched;
    if (const hipError_t joined = single_tail_locked(watched); joined != hipSuccess) return joined;
    SignalRef lowered = signals_.take(1);
    if (!lowered) return hipErrorOutOfMemory;
    auto handler = std::make_unique<HandlerWork>(std::move(work));
    handler->api = &api_;
    handler->gate = lowered->get();
    // In the chain, owning the handler's argument, before ROCr is given it.
    HandlerWork* const argument = handler.get();
    steps_.push_back(Step{.done = {lowered}, .held = {std::move(watched)}, .handler = std::move(handler)});
    if (const hsa_status_t status = api_.hsa_amd_signal_async_handler(
            steps_.back().held.front()->get(), HSA_SIGNAL_CONDITION_LT, 1, &run_handler, argument);
        status != HSA_STATUS_SUCCESS) {
      steps_.pop_back();
      return to_hip(status);
    }
    if (gate != nullptr) *gate = std::move(lowered);
    return hipSuccess;
  }

  QueueSupport& support_;
  const RuntimeApi& api_;
  SignalPool& signals_;
  const int device_;
  mutable std::mutex mutex_;
  mutable std::deque<Step> steps_;
  std::shared_ptr<void> scratch_;  // eight bytes for barrier copies, taken at the first one
  mutable std::atomic<std::uint64_t> progress_{0};
  mutable std::atomic<hipError_t> fault_{hipSuccess};
};

}  // namespace

SignalPool::~SignalPool() {
  for (const hsa_signal_t signal : free_) (void)api_.hsa_signal_destroy(signal);
}

std::shared_ptr<SignalPool::Held> SignalPool::take(hsa_signal_value_t initial) {
  hsa_signal_t signal{};
  {
    std::lock_guard lock{mutex_};
    if (!free_.empty()) {
      signal = free_.back();
      free_.pop_back();
    } else {
      // Room for it to come back is made before it exists: a signal that could not be kept would
      // have to be destroyed, perhaps while ROCr still notifies it.
      free_.reserve(made_ + 1);
      ++made_;
    }
  }
  if (signal.handle == 0 && api_.hsa_signal_create(initial, 0, nullptr, &signal) != HSA_STATUS_SUCCESS) {
    std::lock_guard lock{mutex_};
    --made_;
    return nullptr;
  }
  api_.hsa_signal_store_screlease(signal, initial);
  try {
    return std::make_shared<Held>(*this, signal);
  } catch (...) {
    give_back(signal);
    throw;
  }
}

void SignalPool::give_back(hsa_signal_t signal) noexcept {
  std::lock_guard lock{mutex_};
  free_.push_back(signal);  // within the capacity take() reserved
}

std::unique_ptr<Queue> make_queue(QueueSupport& support, int device) {
  return std::make_unique<RocrQueue>(support, device);
}

std::unique_ptr<Timestamp> make_timestamp(bool timing) { return std::make_unique<RocrTimestamp>(timing); }

hsa_signal_value_t wait_until_down(const RuntimeApi& api, hsa_signal_t signal) noexcept {
  hsa_signal_value_t value = 1;
  while (value >= 1) {
    value = api.hsa_signal_wait_scacquire(signal, HSA_SIGNAL_CONDITION_LT, 1, std::numeric_limits<std::uint64_t>::max(),
                                          HSA_WAIT_STATE_BLOCKED);
  }
  return value;
}

}  // namespace hipxx::backend::rocr
