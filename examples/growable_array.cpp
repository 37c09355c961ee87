// Grows a hipxx::GrowableArray<std::uint64_t> step by step to a few hundred MiB, then shrinks it.
//
// What to watch in the output:
//  - data() never changes: the array reserved its whole virtual range up front and maps physical
//    chunks into it as it grows, so nothing is ever copied to a new home;
//  - mapped bytes stay within one chunk of the size (the memory held is the size plus at most one chunk);
//  - every element reads back as written, after growing and after shrinking.
//
// Usage: growable_array [target MiB]   (default 384). Exits non-zero on any error or mismatch.
#include <hipxx/device.hpp>
#include <hipxx/growable_array.hpp>
#include <hipxx/hipxx_ext.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kChunkBytes = 16 * kMiB;  // the unit of growth: a multiple of the granularity
constexpr std::size_t kStepBytes = 24 * kMiB;   // each append: not a whole chunk, so some steps map none

using Element = std::uint64_t;

// The value stored at each index: distinct everywhere, so a chunk mapped at the wrong place shows.
constexpr Element expected_at(std::size_t index) noexcept {
  return (static_cast<Element>(index) * 0x9E3779B97F4A7C15ULL) ^ 0xC0FFEE0000000000ULL;
}

// Stops the program with the error's message; used for failures that are not the point of the example.
template <class T>
T must(hipxx::result<T> outcome, const char* what) {
  if (!outcome) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what, outcome.error().message().c_str());
    std::exit(1);
  }
  if constexpr (!std::is_void_v<T>) return std::move(outcome).value();
}

// Host memory the process holds: on the host backend the array's chunks are counted here too.
std::size_t rss_bytes() {
  std::ifstream status{"/proc/self/status"};
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kMiB); }

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

// Copies [first, first + count) back in slices and compares with `value_at`; reports the first mismatch.
template <class ValueAt>
bool verify(const hipxx::GrowableArray<Element>& array, std::size_t first, std::size_t count, ValueAt value_at) {
  std::vector<Element> slice(kChunkBytes / sizeof(Element));
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(slice.size(), count - done);
    must(array.copy_to_host(std::span<Element>(slice.data(), n), first + done), "copy_to_host");
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t index = first + done + i;
      if (slice[i] != value_at(index)) {
        std::fprintf(stderr, "FAIL: element %zu is 0x%016" PRIx64 ", expected 0x%016" PRIx64 "\n", index, slice[i],
                     value_at(index));
        return false;
      }
    }
    done += n;
  }
  return true;
}

void print_header() {
  std::printf("%-14s %12s %10s %7s %11s %10s  %-18s %s\n", "step", "elements", "size MiB", "chunks", "mapped MiB",
              "RSS MiB", "data()", "moved?");
}

void print_row(const char* step, const hipxx::GrowableArray<Element>& array, const void* first_data) {
  const void* data = array.data();
  std::printf("%-14s %12zu %10.1f %7zu %11.1f %10.1f  %-18p %s\n", step, array.size(),
              mib(array.size() * sizeof(Element)), array.chunks_mapped(), mib(array.mapped_bytes()),
              mib(rss_bytes()), data, data == first_data ? "no" : "MOVED");
  expect(data == first_data, "data() moved");
  // The memory held is the size rounded up to whole chunks: never a chunk or more beyond it.
  const std::size_t used = array.size() * sizeof(Element);
  expect(array.mapped_bytes() >= used && array.mapped_bytes() - used < array.chunk_bytes(),
         "mapped bytes are not the size rounded up to one chunk");
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t target_mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 384;
  if (target_mib == 0) {
    std::fprintf(stderr, "usage: %s [target MiB > 0]\n", argv[0]);
    return 2;
  }
  const std::size_t target_bytes = target_mib * kMiB;

  const char* backend = hipxxGetBackendName();
  if (backend == nullptr) {
    std::fprintf(stderr, "FAIL: no backend: %s\n", hipxxGetBackendError());
    return 1;
  }
  const hipxx::Device device = must(hipxx::device(0), "device 0");
  std::printf("backend %s, device %d, recommended granularity %.1f MiB\n", backend, device.id(),
              mib(must(device.granularity(hipxx::Granularity::recommended), "granularity")));

  // Room for twice the target: address space only, nothing behind it until a chunk is mapped.
  auto array = must(hipxx::GrowableArray<Element>::create(device, 2 * target_bytes, kChunkBytes), "create");
  const void* const first_data = array.data();
  std::printf("reserved %.0f MiB of address space at %p, chunks of %.0f MiB, nothing mapped yet\n\n",
              mib(array.reserved_bytes()), first_data, mib(array.chunk_bytes()));

  // Grow: append a step's worth of elements at a time.
  print_header();
  print_row("created", array, first_data);
  std::vector<Element> step(kStepBytes / sizeof(Element));
  for (int n = 1; array.size() * sizeof(Element) < target_bytes; ++n) {
    const std::size_t first = array.size();
    const std::size_t count = std::min(step.size(), target_bytes / sizeof(Element) - first);
    for (std::size_t i = 0; i < count; ++i) step[i] = expected_at(first + i);
    must(array.append(std::span<const Element>(step.data(), count)), "append");
    const std::string label = "append " + std::to_string(n);
    print_row(label.c_str(), array, first_data);
  }

  // One element at a time works too, and single elements read and write in place.
  must(array.push_back(expected_at(array.size())), "push_back");
  print_row("push_back", array, first_data);
  const std::size_t probe = array.size() / 3;
  expect(must(array.read(probe), "read") == expected_at(probe), "read() of one element");
  must(array.write(probe, ~expected_at(probe)), "write");
  expect(must(array.read(probe), "read") == ~expected_at(probe), "write() then read()");
  must(array.write(probe, expected_at(probe)), "write back");

  std::printf("\nverifying %zu elements by copying them back ... ", array.size());
  std::fflush(stdout);
  const bool grown_ok = verify(array, 0, array.size(), expected_at);
  std::printf("%s\n\n", grown_ok ? "all match" : "MISMATCH");
  expect(grown_ok, "contents after growing");

  // Shrink: chunks past the last element are unmapped and released; what remains is untouched.
  print_header();
  const std::size_t keep = array.size() / 4 + 12345;
  must(array.resize(keep), "resize down");
  print_row("resize 1/4", array, first_data);
  expect(verify(array, 0, array.size(), expected_at), "contents after shrinking");

  // Growing again by resize() zero-fills the new elements, including memory that held old ones.
  const std::size_t regrow = keep * 2;
  must(array.resize(regrow), "resize up");
  print_row("resize 1/2", array, first_data);
  expect(verify(array, 0, keep, expected_at), "old elements after regrowing");
  expect(verify(array, keep, regrow - keep, [](std::size_t) { return Element{0}; }), "new elements are zero");

  array.clear();
  print_row("clear", array, first_data);
  expect(array.chunks_mapped() == 0 && array.mapped_bytes() == 0, "clear() leaves chunks mapped");

  // The runtime's own books must be empty once the array is gone.
  { auto gone = std::move(array); }
  hipxxBookCounts books{};
  if (hipxxGetBookCounts(&books) == hipSuccess) {
    std::printf("\nruntime books after destruction: %zu reservations, %zu mappings, %zu allocations\n",
                books.reservations, books.mappings, books.allocations);
    expect(books.reservations == 0 && books.mappings == 0 && books.allocations == 0, "the array leaked");
  }

  if (failures != 0) {
    std::printf("\n%d check(s) FAILED\n", failures);
    return 1;
  }
  std::printf("\nOK: grew to %zu MiB and shrank again without data() moving\n", target_mib);
  return 0;
}
