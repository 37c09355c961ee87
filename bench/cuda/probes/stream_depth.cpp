// How deep a stream gets behind a callback that holds it: one thread queues small operations
// (64-byte fills, device-to-device copies or stream word writes) on a held stream, the probe prints
// how many it has queued every 100 ms, then asks the runtime for a hipMemcpy on another thread and
// reports whether that finished while the stream was still held.
// Built by bench/cuda/probes/build.sh; run as ./stream-depth [fill|copy|write]
#include <hipxx/hip_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace {

struct Hold {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false;
  bool released = false;
};

void held_callback(hipStream_t /*stream*/, hipError_t /*status*/, void* data) {
  auto& hold = *static_cast<Hold*>(data);
  std::unique_lock lock{hold.mutex};
  hold.entered = true;
  hold.changed.notify_all();
  hold.changed.wait(lock, [&] { return hold.released; });
}

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const std::string kind = argc > 1 ? argv[1] : "fill";
  constexpr int kOperations = 200000;
  constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
  void* buffer = nullptr;
  hipStream_t stream = nullptr;
  if (hipMalloc(&buffer, kBufferBytes) != hipSuccess ||
      hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) != hipSuccess) {
    std::fprintf(stderr, "no device memory or stream\n");
    return 1;
  }
  auto* const bytes = static_cast<unsigned char*>(buffer);
  Hold hold;
  if (hipStreamAddCallback(stream, held_callback, &hold, 0) != hipSuccess) return 1;
  {
    std::unique_lock lock{hold.mutex};
    hold.changed.wait(lock, [&] { return hold.entered; });
  }
  std::atomic<int> queued{0};
  std::thread producer([&] {
    for (int i = 0; i < kOperations; ++i) {
      unsigned char* const slot = bytes + static_cast<std::size_t>(i % 1024) * 64;
      const hipError_t result =
          kind == "copy"    ? hipMemcpyAsync(slot, bytes + kBufferBytes / 2, 64, hipMemcpyDeviceToDevice, stream)
          : kind == "write" ? hipStreamWriteValue32(stream, slot, static_cast<std::uint32_t>(i), 0)
                            : hipMemsetAsync(slot, i & 0xFF, 64, stream);
      if (result != hipSuccess) {
        std::printf("operation %d refused: %s\n", i, hipGetErrorName(result));
        return;
      }
      queued.fetch_add(1);
    }
  });
  for (int tick = 1; tick <= 10 && queued.load() < kOperations; ++tick) {
    std::this_thread::sleep_for(100ms);
    std::printf("%4d ms: %d queued\n", tick * 100, queued.load());
  }
  std::atomic<bool> copied{false};
  std::thread other([&] {
    int value = 0;
    (void)hipMemcpy(&value, buffer, sizeof value, hipMemcpyDeviceToHost);
    copied = true;
  });
  std::this_thread::sleep_for(500ms);
  std::printf("another thread's hipMemcpy finished while the stream was held: %s\n", copied ? "yes" : "no");
  {
    std::lock_guard lock{hold.mutex};
    hold.released = true;
  }
  hold.changed.notify_all();
  producer.join();
  other.join();
  const hipError_t synced = hipStreamSynchronize(stream);
  std::printf("after release: %d queued, synchronize %s\n", queued.load(), hipGetErrorName(synced));
  (void)hipStreamDestroy(stream);
  (void)hipFree(buffer);
  return 0;
}
