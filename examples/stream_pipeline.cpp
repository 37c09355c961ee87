// A stream-ordered pipeline over two streams and one memory pool, with no host synchronisation
// between batches.
//
// For each batch: pool memory is allocated on the upload stream and the batch is copied into it;
// an event recorded there lets the download stream go on once the upload is done; the download
// stream copies the batch into memory of its own, back to the host, and runs a callback that counts
// the batch as finished. Both blocks are freed on the download stream (the upload block after the
// copy that reads it), so the pool can hand the same memory to later batches: the pool's statistics
// at the end say how much it held at most, against two blocks per batch.
//
// Usage: stream_pipeline [batches]   (default 64). Exits non-zero on any error or mismatch.
#include <hipxx/callback.hpp>
#include <hipxx/copy.hpp>
#include <hipxx/device.hpp>
#include <hipxx/event.hpp>
#include <hipxx/mem_pool.hpp>
#include <hipxx/stream.hpp>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kElements = std::size_t{1} << 18;  // 2 MiB of std::uint64_t per batch
constexpr std::size_t kBatchBytes = kElements * sizeof(std::uint64_t);

int fail(char const* what, std::error_code const& error) {
  std::fprintf(stderr, "FAILED: %s: %s\n", what, error.message().c_str());
  return EXIT_FAILURE;
}

std::vector<std::uint64_t> batch_data(std::size_t batch) {
  std::vector<std::uint64_t> data(kElements);
  for (std::size_t i = 0; i < kElements; ++i) data[i] = (batch << 32U) ^ (i * 0x9E3779B97F4A7C15ULL);
  return data;
}

// One batch's work, queued on both streams; the host returns at once.
hipxx::result<void> queue_batch(hipxx::MemPool const& pool, hipxx::Stream const& upload, hipxx::Stream const& download,
                                std::span<std::uint64_t const> in, std::span<std::uint64_t> out,
                                std::atomic<int>& finished) {
  auto staging = pool.allocate<std::uint64_t>(kElements, upload.ref());
  if (!staging) return staging.as_failure();
  if (auto copied = hipxx::copy_async(staging.value().span(), in, upload.ref()); !copied) return copied;
  auto uploaded = hipxx::Event::create(hipxx::EventFlags::disable_timing);
  if (!uploaded) return uploaded.as_failure();
  if (auto recorded = uploaded.value().record(upload.ref()); !recorded) return recorded;
  if (auto waiting = hipxx::wait(download.ref(), uploaded.value()); !waiting) return waiting;
  auto result = pool.allocate<std::uint64_t>(kElements, download.ref());
  if (!result) return result.as_failure();
  // The download stream reads the staging block last: it frees it after that read.
  staging.value().free_on(download.ref());
  if (auto copied = hipxx::copy_async(result.value().span(), staging.value().span(), download.ref()); !copied) {
    return copied;
  }
  if (auto copied = hipxx::copy_async(out, result.value().span(), download.ref()); !copied) return copied;
  return hipxx::add_callback(download.ref(), [&finished] { finished.fetch_add(1); });
}  // both blocks are freed here, in the download stream's order; `uploaded` may go, HIP keeps the wait

// The pipeline itself; vectors of the batches' host data may throw std::bad_alloc.
int run(int batches) {
  hipxx::Device const gpu{0};
  auto upload = hipxx::Stream::create(hipxx::StreamFlags::non_blocking);
  auto download = hipxx::Stream::create(hipxx::StreamFlags::non_blocking);
  auto pool = hipxx::MemPool::create(gpu);
  if (!upload) return fail("creating the upload stream", upload.error());
  if (!download) return fail("creating the download stream", download.error());
  if (!pool) return fail("creating the pool", pool.error());
  // Keep what the pool reserves between batches rather than giving it back at each synchronisation.
  if (auto kept = pool.value().set_release_threshold(UINT64_MAX); !kept) return fail("release threshold", kept.error());

  std::vector<std::vector<std::uint64_t>> inputs;
  std::vector<std::vector<std::uint64_t>> outputs(static_cast<std::size_t>(batches),
                                                  std::vector<std::uint64_t>(kElements, 0));
  inputs.reserve(static_cast<std::size_t>(batches));
  for (int batch = 0; batch < batches; ++batch) inputs.push_back(batch_data(static_cast<std::size_t>(batch)));

  std::atomic<int> finished{0};
  for (int batch = 0; batch < batches; ++batch) {
    auto const index = static_cast<std::size_t>(batch);
    if (auto queued =
            queue_batch(pool.value(), upload.value(), download.value(), inputs[index], outputs[index], finished);
        !queued) {
      return fail("queueing a batch", queued.error());
    }
  }
  std::printf("queued %d batches of %zu KiB; %d finished so far\n", batches, kBatchBytes >> 10U, finished.load());
  if (auto done = download.value().synchronize(); !done) return fail("synchronize", done.error());

  int wrong = 0;
  for (std::size_t batch = 0; batch < outputs.size(); ++batch) wrong += outputs[batch] == inputs[batch] ? 0 : 1;
  auto const reserved_high = pool.value().reserved_high();
  auto const used_high = pool.value().used_high();
  if (!reserved_high || !used_high)
    return fail("pool statistics", reserved_high ? used_high.error() : reserved_high.error());
  std::printf("finished %d of %d batches, %d read back wrong\n", finished.load(), batches, wrong);
  std::printf("pool: at most %" PRIu64 " KiB in use and %" PRIu64
              " KiB reserved, for %d batches of two %zu KiB blocks\n",
              used_high.value() >> 10U, reserved_high.value() >> 10U, batches, kBatchBytes >> 10U);
  if (wrong != 0 || finished.load() != batches ||
      used_high.value() > 2 * kBatchBytes * static_cast<std::size_t>(batches)) {
    std::fprintf(stderr, "FAILED: every batch must finish and read back as written\n");
    return EXIT_FAILURE;
  }
  std::printf("OK: %d batches through two streams in stream order, every one read back as written\n", batches);
  return EXIT_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  int const batches = argc > 1 ? std::atoi(argv[1]) : 64;
  if (batches <= 0) {
    std::fprintf(stderr, "usage: stream_pipeline [batches > 0]\n");
    return EXIT_FAILURE;
  }
  try {
    return run(batches);
  } catch (std::exception const& error) {
    std::fprintf(stderr, "FAILED: %s\n", error.what());
    return EXIT_FAILURE;
  }
}
