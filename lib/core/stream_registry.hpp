// The streams the application can name, and the ordering rules between them. hipStream_t values
// are never-reused numbers, so a destroyed or forged stream is refused rather than dereferenced.
// The null stream (0 or hipStreamLegacy) of each device waits for all blocking streams of that
// device and they wait for it; hipStreamPerThread names a blocking stream owned by the calling thread.
#pragma once

#include "core/handle_numbers.hpp"
#include "core/stream.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace hipxx::core {

// Makes the device queue for a new stream, or gives null (the stream then runs on a host thread).
using QueueFactory = std::function<std::unique_ptr<backend::Queue>(const StreamTraits&)>;

class StreamRegistry {
 public:
  StreamRegistry(int device_count, QueueFactory make_queue);

  [[nodiscard]] hipError_t create(hipStream_t* stream, StreamTraits traits);
  [[nodiscard]] hipError_t destroy(hipStream_t stream);
  // The stream a handle names for the calling thread, or null for an unknown handle. The reference
  // is to this thread's cache: good until the thread's next resolve, so a caller that resolves again
  // meanwhile (or keeps the stream) takes a copy.
  [[nodiscard]] const std::shared_ptr<Stream>& resolve(hipStream_t stream, int current_device);
  // Whether waiting, from stream work the calling thread runs, for the streams of `device` (with
  // `null_stream_order`, only the null stream and the blocking streams, which synchronous work on the
  // null stream waits for) would wait for that work itself: it runs on one of them, or one of them
  // has queued a wait, for an event or in null-stream order, for that work or a later point of its
  // stream.
  [[nodiscard]] bool waits_for_running_work(int device, bool null_stream_order) const;

  // Work offered by the application's calls: each first waits for room on the stream, holding no
  // lock, and a stream destroyed meanwhile by another thread refuses the work rather than running
  // it behind its final task (nothing is queued).
  // Queues work with the null-stream rules; the number names the point after it, none: refused.
  [[nodiscard]] std::optional<std::uint64_t> enqueue(Stream& stream, StreamTask task);
  // Device work with the null-stream rules (Stream::enqueue with a QueueWork); hipErrorInvalidHandle:
  // refused as above.
  [[nodiscard]] hipError_t enqueue(Stream& stream, QueueWork on_queue, StreamTask on_host,
                                   std::uint64_t* sequence = nullptr);
  // Later work on `stream` runs after `other` reached `point` (Stream::enqueue_wait), without the
  // null-stream rules (a stream wait orders nothing else); false: refused as above.
  [[nodiscard]] bool enqueue_wait(Stream& stream, const std::shared_ptr<Stream>& other, std::uint64_t point,
                                  backend::Timestamp* recorded = nullptr);
  // Whether work queued on `stream` now would first wait for other streams (a null-stream barrier).
  // Without the lock; a barrier queued meanwhile by another thread orders its work after this call.
  [[nodiscard]] bool would_wait_for_others(const Stream& stream) const;
  // hipStreamSynchronize: the null stream also waits for the blocking streams of its device.
  void synchronize(Stream& stream);
  // Waits for every stream of `device`; the first failure any of them holds (hipSuccess if none).
  [[nodiscard]] hipError_t synchronize_device(int device);
  // The pools whose freed memory synchronize(stream) may have made safe to release: those the
  // stream used, and for a null stream those of the blocking streams it waits for too.
  [[nodiscard]] std::vector<PoolRef> pools_synchronized_by(const Stream& stream);
  // The same for synchronize_device: the pools every stream of the device used.
  [[nodiscard]] std::vector<PoolRef> pools_synchronized_on(int device);
  // A pool going away: the null streams, which hold the pools of destroyed streams, let it go.
  void forget_pool(std::uint64_t serial);
  // The point a marker placed now would complete at, if it is complete already: the stream and
  // the streams it implicitly waits for (null-stream rules) have no pending work.
  [[nodiscard]] std::optional<std::uint64_t> completed_point(Stream& stream);
  // No queued or running work on any stream of the device, the null stream included.
  [[nodiscard]] bool device_idle(int device) const;
  [[nodiscard]] std::size_t live_streams() const;

 private:
  // Hands a destroyed stream that still has work its own last reference, as a final task.
  void retire(const std::shared_ptr<Stream>& doomed);
  // The stream a handle other than hipStreamPerThread names, under the lock; null where none.
  [[nodiscard]] std::shared_ptr<Stream> look_up(hipStream_t stream, int current_device);
  [[nodiscard]] const std::shared_ptr<Stream>& resolve_late(hipStream_t stream, int current_device);
  [[nodiscard]] Stream& null_stream_locked(int device);
  // Puts HIP's implicit waits between the null stream and blocking streams in front of new work.
  void order_by_null_stream_locked(Stream& stream);
  [[nodiscard]] std::vector<std::shared_ptr<Stream>> blocking_streams_locked(int device) const;

  QueueFactory make_queue_;
  mutable std::mutex mutex_;
  // Which registry a thread's cached resolution came from: unique in the process, where an address
  // is not (a registry made where a destroyed one was, as tests of several runtimes do).
  const std::uint64_t serial_;
  // Bumped by every destroy: a thread's cached resolution is good while it is unchanged.
  std::atomic<std::uint64_t> generation_{0};
  HandleNumbers numbers_{HandleKind::stream, 0x5000};
  std::unordered_map<std::uintptr_t, std::shared_ptr<Stream>> streams_;
  // Destroyed streams still finishing queued work: device synchronisation waits for them too.
  std::vector<std::weak_ptr<Stream>> retiring_;
  std::vector<std::unique_ptr<Stream>> null_streams_;
  std::vector<std::atomic<const Stream*>> null_published_;  // the same, read without the lock
};

}  // namespace hipxx::core
