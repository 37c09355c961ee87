#include "backend/host/page_population.hpp"

#include "backend/host/memory_size.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack it
#endif

namespace hipxx::backend::host {
namespace {

// Below this a part is not worth a thread: starting one costs tens of microseconds, populating 8 MiB
// a few milliseconds.
constexpr std::size_t kSmallestPart = std::size_t{8} << 20;
constexpr std::size_t kHugePage = std::size_t{2} << 20;  // parts start on huge-page boundaries
constexpr unsigned kMostThreads = 4;  // more gained nothing on the 16-core Xeon (contention in shmem)

int populate_part(char* at, std::size_t size) noexcept {
  // A pending signal can cut the call short; the pages it already populated stay, so it goes on.
  while (madvise(at, size, MADV_POPULATE_WRITE) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

}  // namespace

unsigned population_threads() noexcept {
  // Asked once: the core count comes from sysfs, three system calls that would otherwise go with
  // every map.
  static const unsigned threads = [] {
    if (const char* chosen = std::getenv("HIPXX_HOST_POPULATE_THREADS"); chosen != nullptr && *chosen != '\0') {
      return static_cast<unsigned>(std::clamp<unsigned long>(std::strtoul(chosen, nullptr, 10), 1, 64));
    }
    return std::clamp(std::thread::hardware_concurrency(), 1U, kMostThreads);
  }();
  return threads;
}

int populate_for_writing(void* at, std::size_t size, unsigned threads) noexcept {
  auto* const base = static_cast<char*>(at);
  const std::size_t parts = std::min<std::size_t>(threads, size / kSmallestPart);
  if (parts <= 1) return populate_part(base, size);
  const std::size_t part = (size / parts + kHugePage - 1) & ~(kHugePage - 1);
  std::atomic<int> first_error{0};
  const auto run_part = [&](std::size_t index) {
    const std::size_t offset = index * part;
    if (offset >= size) return;
    if (const int error = populate_part(base + offset, std::min(part, size - offset)); error != 0) {
      int none = 0;
      first_error.compare_exchange_strong(none, error);
    }
  };
  std::vector<std::thread> helpers;
  std::size_t inline_from = parts;  // parts no helper took, done here
  try {
    helpers.reserve(parts - 1);
    for (std::size_t index = 1; index < parts; ++index) helpers.emplace_back(run_part, index);
  } catch (...) {
    inline_from = helpers.size() + 1;  // out of memory or threads: the rest run on this thread
  }
  run_part(0);
  for (std::size_t index = inline_from; index < parts; ++index) run_part(index);
  for (std::thread& helper : helpers) helper.join();
  return first_error.load();
}

namespace {

// Allocates every page of a memfd by fallocate; 0, or -1 with errno set. A signal may interrupt
// shmem's fallocate part-way: the pages it already has are kept, so asking again finishes the job.
int allocate_pages(int fd, std::size_t size) noexcept {
  int result = 0;
  do {
    result = fallocate(fd, 0, 0, static_cast<off_t>(size));
  } while (result != 0 && errno == EINTR);
  return result;
}

std::atomic<bool> populate_unsupported{false};  // the kernel answered MADV_POPULATE_WRITE with EINVAL

bool populate_supported() noexcept { return !populate_unsupported.load(std::memory_order_relaxed); }

}  // namespace

int populate(void* at, std::size_t size) noexcept {
  if (!populate_supported()) return EINVAL;
  const int error = populate_for_writing(at, size, population_threads());
  if (error == EINVAL) populate_unsupported.store(true, std::memory_order_relaxed);
  return error;
}

int commit_pages(int fd, std::size_t size, bool advise_huge_pages, void** mapping) noexcept {
  *mapping = nullptr;
  if (!could_commit(size)) {
    errno = ENOMEM;
    return -1;
  }
  if (populate_supported()) {
    void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    // No room for one more mapping (vm.max_map_count, or address space): commit without one.
    if (at == MAP_FAILED) return allocate_pages(fd, size);
    if (advise_huge_pages && size >= kHugePage) (void)madvise(at, size, MADV_HUGEPAGE);
    const int error = populate(at, size);
    if (error == 0) {
      *mapping = at;
      return 0;
    }
    munmap(at, size);
    if (error != EINVAL) {
      errno = error;
      return -1;
    }
  }
  return allocate_pages(fd, size);
}

}  // namespace hipxx::backend::host
