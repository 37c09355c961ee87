// Device queues on CUDA streams:
//   copy / fill            cuMemcpyAsync / cuMemsetD8Async (unified addressing)
//   write_word / wait_word cuStreamWriteValue32/64 / cuStreamWaitValue32/64 (EQ, AND, NOR), and a
//                          one-thread kernel for what those cannot express (wait_kernels.hpp)
//   mark                   cuStreamWriteValue64 to the queue's progress word, which lives in pinned,
//                          portable host memory that the host reads with a plain load
//   wait_queue             cuEventRecord on the other stream, cuStreamWaitEvent on this one
//   wait_timestamp         cuStreamWaitEvent on the timestamp's CUevent
//   host_call              cuStreamAddCallback, which hands the callback the stream's status; the
//                          callback marks its own number, so no mark follows it
//   prefetch               cuMemPrefetchAsync
//   record                 cuEventRecord; timestamps are CUevents
//   wait_for_room          the queue counts what it puts on the stream, has the stream write the
//                          count to a second pinned word every so often, and holds the thread that
//                          would queue more while too much is not known done (the driver would
//                          hold it inside its call instead, with the runtime's lock taken)
// The null stream is CU_STREAM_LEGACY: work other code puts on the legacy default stream (CUDA
// runtime kernels on stream 0) meets HIP's null-stream order. Blocking streams are created with
// CU_STREAM_DEFAULT, so the driver orders them against it too; non-blocking ones with
// CU_STREAM_NON_BLOCKING.
#include "backend/cuda/cuda_queue.hpp"
#include "backend/cuda/entry_points.hpp"
#include "backend/cuda/wait_kernels.hpp"
#include "backend/poll_until.hpp"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace hipxx::backend::cuda {
namespace {

CUdeviceptr address_of(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

// Makes `context` current on the calling thread; every call below acts in the queue's context,
// whatever device the calling thread uses.
hipError_t bind(const QueueDevice& device) noexcept {
  CUcontext current = nullptr;
  if (device.driver->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == device.context) return hipSuccess;
  return to_hip(device.driver->cuCtxSetCurrent(device.context));
}

// The words a queue shares with the host, in pinned memory; a cache line each, so that threads
// polling different streams do not share one.
struct alignas(64) Words {
  std::uint64_t progress = 0;
  std::uint64_t operations_done = 0;  // how many of the queue's operations the stream has got past
};

// Progress words come from pinned pages that are never given back. cuMemFreeHost waits for the
// whole device: freeing a destroyed queue's word would make whoever destroys a stream (a thread
// that exits, taking its per-thread stream with it) wait for every other stream, including one
// that a stream wait holds until that thread moves on. A destroyed queue's word, which its stream
// no longer writes, goes to the next queue instead.
class ProgressWords {
 public:
  // A zeroed word, or null where no pinned memory can be had. The calling thread's current context
  // allocates a new page where none is free; pages are portable, so any context's queues may use them.
  Words* take(const QueueApi& api) {
    std::lock_guard lock{mutex_};
    if (free_.empty() && !add_page(api)) return nullptr;
    Words* const words = free_.back();
    free_.pop_back();
    return std::construct_at(words);
  }

  void give_back(Words* words) noexcept {
    std::lock_guard lock{mutex_};
    free_.push_back(words);  // cannot throw: add_page keeps room for every word there is
  }

 private:
  static constexpr std::size_t kPageBytes = 4096;
  static constexpr std::size_t kWordsPerPage = kPageBytes / sizeof(Words);

  bool add_page(const QueueApi& api) {
    void* page = nullptr;
    if (api.cuMemHostAlloc(&page, kPageBytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS) {
      return false;
    }
    try {
      free_.reserve(++pages_ * kWordsPerPage);
    } catch (...) {
      --pages_;
      (void)api.cuMemFreeHost(page);  // no queue uses this page yet
      return false;
    }
    auto* const words = static_cast<Words*>(page);
    for (std::size_t index = 0; index < kWordsPerPage; ++index) free_.push_back(&words[index]);
    return true;
  }

  std::mutex mutex_;
  std::vector<Words*> free_;
  std::size_t pages_ = 0;
};

ProgressWords& progress_words() {
  // Never destroyed: a thread exiting after static destruction may still give a word back.
  static ProgressWords* const words = std::make_unique<ProgressWords>().release();
  return *words;
}

class CudaTimestamp final : public Timestamp {
 public:
  CudaTimestamp(const QueueDevice& device, CUevent event) : device_(device), event_(event) {}
  CudaTimestamp(const CudaTimestamp&) = delete;
  CudaTimestamp& operator=(const CudaTimestamp&) = delete;
  CudaTimestamp(CudaTimestamp&&) = delete;
  CudaTimestamp& operator=(CudaTimestamp&&) = delete;
  ~CudaTimestamp() override {
    if (bind(device_) == hipSuccess) (void)device_.queues->cuEventDestroy_v2(event_);
  }

  hipError_t elapsed_since(const Timestamp& start, float* milliseconds) const override {
    const auto* begin = dynamic_cast<const CudaTimestamp*>(&start);
    if (begin == nullptr) return hipErrorInvalidHandle;
    if (const hipError_t bound = bind(device_); bound != hipSuccess) return bound;
    const CUresult result = device_.queues->cuEventElapsedTime(milliseconds, begin->event_, event_);
    return result == CUDA_ERROR_NOT_READY ? hipErrorNotReady : to_hip(result);
  }

  [[nodiscard]] CUevent event() const noexcept { return event_; }

 private:
  QueueDevice device_;
  CUevent event_;
};

class CudaQueue final : public Queue {
 public:
  CudaQueue(const QueueDevice& device, CUstream stream, bool owned, Words* words)
      : device_(device), stream_(stream), owned_(owned), words_(words) {}
  CudaQueue(const CudaQueue&) = delete;
  CudaQueue& operator=(const CudaQueue&) = delete;
  CudaQueue(CudaQueue&&) = delete;
  CudaQueue& operator=(CudaQueue&&) = delete;

  // The device may still write the progress word: the stream finishes before the words go.
  ~CudaQueue() override {
    if (bind(device_) != hipSuccess) return;  // the context is gone, and the stream with it
    (void)api().cuStreamSynchronize(stream_);
    if (owned_) (void)api().cuStreamDestroy_v2(stream_);
    progress_words().give_back(words_);
  }

  [[nodiscard]] std::uint64_t progress() const noexcept override {
    return std::atomic_ref<std::uint64_t>{words_->progress}.load(std::memory_order_acquire);
  }

  hipError_t write_mark(std::uint64_t sequence) override {
    return call(api().cuStreamWriteValue64_v2, stream_, address_of(&words_->progress), sequence,
                CU_STREAM_WRITE_VALUE_DEFAULT);
  }

  hipError_t copy(void* dst, const void* src, std::size_t bytes) override {
    return call(api().cuMemcpyAsync, address_of(dst), address_of(src), bytes, stream_);
  }

  hipError_t fill(void* dst, unsigned char value, std::size_t bytes) override {
    return call(api().cuMemsetD8Async, address_of(dst), value, bytes, stream_);
  }

  hipError_t write_word(void* address, std::size_t bytes, std::uint64_t value) override {
    if (bytes == sizeof(std::uint32_t)) {
      return call(api().cuStreamWriteValue32_v2, stream_, address_of(address), static_cast<std::uint32_t>(value),
                  CU_STREAM_WRITE_VALUE_DEFAULT);
    }
    return call(api().cuStreamWriteValue64_v2, stream_, address_of(address), value, CU_STREAM_WRITE_VALUE_DEFAULT);
  }

  // The driver's waits where they compute exactly HIP's condition: Eq under a full mask, And (the
  // mask folded into the value), Nor under a full mask where the device has it. Gte (the driver's GEQ
  // compares the signed difference, HIP unsigned numbers) and masked Eq and Nor go to a wait kernel.
  hipError_t wait_word(const void* address, std::size_t bytes, const WordWait& wait) override {
    const std::uint64_t width_mask = width_mask_of(bytes);
    const bool full_mask = (wait.mask & width_mask) == width_mask;
    unsigned flags = 0;
    std::uint64_t value = wait.value;
    if (wait.condition == WaitCondition::equal && full_mask) {
      flags = CU_STREAM_WAIT_VALUE_EQ;
    } else if (wait.condition == WaitCondition::any_common_bit) {
      flags = CU_STREAM_WAIT_VALUE_AND;
      value &= wait.mask;
    } else if (wait.condition == WaitCondition::some_bit_clear_in_both && full_mask && device_.wait_nor) {
      flags = CU_STREAM_WAIT_VALUE_NOR;
    } else {
      if (device_.wait_kernels == nullptr) return hipErrorNotSupported;
      if (const hipError_t bound = bind(device_); bound != hipSuccess) return bound;
      const hipError_t launched = device_.wait_kernels->launch(stream_, address, bytes, wait);
      if (launched == hipSuccess) count_operation();
      return launched;
    }
    if (bytes == sizeof(std::uint32_t)) {
      return call(api().cuStreamWaitValue32_v2, stream_, address_of(address), static_cast<std::uint32_t>(value), flags);
    }
    return call(api().cuStreamWaitValue64_v2, stream_, address_of(address), value, flags);
  }

  // A fresh event each time: recorded in the other queue's context, waited on in this one's, and
  // destroyed at once (the driver keeps it until the wait is done).
  hipError_t wait_queue(Queue& other) override {
    auto* source = dynamic_cast<CudaQueue*>(&other);
    if (source == nullptr) return hipErrorNotSupported;
    if (const hipError_t bound = bind(source->device_); bound != hipSuccess) return bound;
    CUevent event = nullptr;
    if (const CUresult created = api().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING); created != CUDA_SUCCESS) {
      return to_hip(created);
    }
    hipError_t result = to_hip(api().cuEventRecord(event, source->stream_));
    if (result == hipSuccess) {
      source->count_operation();  // the runtime holds both streams' locks for a queue wait
      result = call(api().cuStreamWaitEvent, stream_, event, 0U);
    }
    (void)bind(source->device_);
    (void)api().cuEventDestroy_v2(event);
    return result;
  }

  hipError_t wait_timestamp(Timestamp& timestamp) override {
    auto* const event = dynamic_cast<CudaTimestamp*>(&timestamp);
    if (event == nullptr) return hipErrorNotSupported;
    return call(api().cuStreamWaitEvent, stream_, event->event(), 0U);
  }

  void complete(std::uint64_t sequence) noexcept override {
    std::atomic_ref<std::uint64_t>{words_->progress}.store(sequence, std::memory_order_release);
  }

  hipError_t queue_host_call(HostCall* host) override {
    return call(api().cuStreamAddCallback, stream_, &run_host_call, static_cast<void*>(host), 0U);
  }

  hipError_t prefetch(const void* ptr, std::size_t bytes, int device) override {
    CUdevice target = CU_DEVICE_CPU;
    if (device >= 0) {
      if (device_.driver->cuDeviceGet(&target, device) != CUDA_SUCCESS) return hipErrorInvalidDevice;
    }
    return call(device_.driver->cuMemPrefetchAsync, address_of(ptr), bytes, target, stream_);
  }

  hipError_t record(Timestamp& timestamp) override {
    auto* event = dynamic_cast<CudaTimestamp*>(&timestamp);
    if (event == nullptr) return hipErrorNotSupported;
    return call(api().cuEventRecord, event->event(), stream_);
  }

  bool finished() override { return bind(device_) == hipSuccess && api().cuStreamQuery(stream_) == CUDA_SUCCESS; }

  // A stream the device gave up on never gets further: its fault ends the wait.
  void wait_for_room() override {
    if (operations_in_flight() < kMaxInFlight) return;
    (void)poll_until([&] { return operations_in_flight() < kMaxInFlight; },
                     {.yielding_rounds = 64, .longest_sleep = std::chrono::microseconds{200}},
                     [&] { return fault() != hipSuccess; });
  }

  hipError_t fault() override {
    if (const hipError_t bound = bind(device_); bound != hipSuccess) return bound;
    const CUresult result = api().cuStreamQuery(stream_);
    return result == CUDA_ERROR_NOT_READY ? hipSuccess : to_hip(result);
  }

  // A fault on a CUDA stream is the context's: the driver runs nothing more of it.
  bool abandoned() override { return fault() != hipSuccess; }

 private:
  // The driver calls back exactly once for each callback it accepted, after all earlier work and
  // before any later work, which waits for this to return: the progress word can take the call's
  // number here rather than from a second stream operation. The queue outlives the call (its
  // destructor synchronises the stream first).
  static void run_host_call(CUstream /*stream*/, CUresult status, void* data) {
    auto* const host = static_cast<HostCall*>(data);
    Queue* const queue = host->queue;  // read first: run() frees the call
    const std::uint64_t sequence = host->sequence;
    host->run(host, to_hip(status));
    queue->complete(sequence);
  }

  [[nodiscard]] const QueueApi& api() const noexcept { return *device_.queues; }

  // Puts one operation on the stream.
  template <class Function, class... Args>
  hipError_t call(Function function, Args... args) {
    if (const hipError_t bound = bind(device_); bound != hipSuccess) return bound;
    const hipError_t result = to_hip(function(args...));
    if (result == hipSuccess) count_operation();
    return result;
  }

  // Counts an operation put on the stream and, every kCheckpointEvery of them, has the stream write
  // the count to operations_done once it gets there (one more operation, counted too). Called
  // under the stream's lock, as all work is queued.
  void count_operation() noexcept {
    const std::uint64_t queued = operations_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (queued - checkpoint_ < kCheckpointEvery) return;
    if (api().cuStreamWriteValue64_v2(stream_, address_of(&words_->operations_done), queued + 1,
                                      CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS) {
      operations_.fetch_add(1, std::memory_order_relaxed);
      checkpoint_ = queued + 1;
    }
  }

  // A thread that did not queue the latest operations may read a count older than the word the
  // device wrote since: that reads as none in flight, and lets one more operation on, within the slack.
  [[nodiscard]] std::uint64_t operations_in_flight() const noexcept {
    const std::uint64_t done = std::atomic_ref<std::uint64_t>{words_->operations_done}.load(std::memory_order_acquire);
    const std::uint64_t queued = operations_.load(std::memory_order_acquire);
    return queued > done ? queued - done : 0;
  }

  // The driver holds a thread whose stream has about a thousand operations queued inside the call
  // that would queue one more (1021 on an H100 with driver 580), and the runtime calls it with its
  // lock held. wait_for_room keeps the count below that where no lock is held: at most
  // kMaxInFlight known not done, plus up to kCheckpointEvery not yet checkpointed, plus what threads
  // that passed the check together add.
  static constexpr std::uint64_t kCheckpointEvery = 128;
  static constexpr std::uint64_t kMaxInFlight = 512;

  QueueDevice device_;
  CUstream stream_;
  bool owned_;  // false for CU_STREAM_LEGACY, which is the context's
  Words* words_;
  std::atomic<std::uint64_t> operations_{0};  // put on the stream so far
  std::uint64_t checkpoint_ = 0;  // operations_ as the last count the stream writes says
};

// The driver's priority range is [greatest, least], greatest the most negative. HIP's high (-1)
// takes the greatest, normal and low the least (the driver's default).
int driver_priority(const QueueApi& api, int priority) {
  int least = 0;
  int greatest = 0;
  if (api.cuCtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS) return 0;
  return priority < 0 ? greatest : least;
}

}  // namespace

std::string load_queue_entry_points(void* library, QueueApi& api) {
  std::string missing;
#define HIPXX_CUDA_RESOLVE_QUEUE_ENTRY_POINT(name, type) resolve_entry_point(library, #name, api.name, missing);
  HIPXX_CUDA_QUEUE_ENTRY_POINTS(HIPXX_CUDA_RESOLVE_QUEUE_ENTRY_POINT)
#undef HIPXX_CUDA_RESOLVE_QUEUE_ENTRY_POINT
  if (void* newer = dlsym(library, "cuEventElapsedTime_v2"); newer != nullptr) {
    api.cuEventElapsedTime = reinterpret_cast<decltype(api.cuEventElapsedTime)>(newer);
  }
  return missing;
}

std::unique_ptr<Queue> make_queue(const QueueDevice& device, bool null_stream, bool blocking, int priority) {
  if (bind(device) != hipSuccess) return nullptr;
  const QueueApi& api = *device.queues;
  Words* const words = progress_words().take(api);
  if (words == nullptr) return nullptr;
  CUstream stream = CU_STREAM_LEGACY;
  if (!null_stream) {
    const unsigned flags = blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
    if (api.cuStreamCreateWithPriority(&stream, flags, driver_priority(api, priority)) != CUDA_SUCCESS) {
      progress_words().give_back(words);
      return nullptr;
    }
  }
  return std::make_unique<CudaQueue>(device, stream, !null_stream, words);
}

std::unique_ptr<Timestamp> make_timestamp(const QueueDevice& device, bool timing) {
  if (bind(device) != hipSuccess) return nullptr;
  unsigned flags = CU_EVENT_DEFAULT;
  if (!timing) flags |= CU_EVENT_DISABLE_TIMING;
  CUevent event = nullptr;
  if (device.queues->cuEventCreate(&event, flags) != CUDA_SUCCESS) return nullptr;
  return std::make_unique<CudaTimestamp>(device, event);
}

}  // namespace hipxx::backend::cuda
