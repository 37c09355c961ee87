// The host backend's check that an allocation could be committed (backend/host/memory_size.hpp), with
// pretend readings: committing shmem past what the machine has would wake the kernel's out-of-memory
// killer, so what the check passes must stay within what it saw free, a burst of requests included.
#include <doctest/doctest.h>

#include "backend/host/memory_size.hpp"

#include <cstdint>

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::int64_t kMillisecond = 1'000'000;

// Free memory is 100 MiB less what was passed so far, as the kernel would show once it is committed.
std::uint64_t passed_total = 0;
std::uint64_t pretend_free() noexcept { return passed_total >= 100 * kMiB ? 0 : 100 * kMiB - passed_total; }

bool ask(hipxx::backend::host::CommitBudget& budget, std::uint64_t bytes, std::int64_t now) {
  const bool passed = budget.allow(bytes, now, pretend_free, pretend_free);
  if (passed) passed_total += bytes;
  return passed;
}

}  // namespace

TEST_CASE("requests close together pass only while they fit in what was free") {
  passed_total = 0;
  hipxx::backend::host::CommitBudget budget;
  CHECK(ask(budget, 45 * kMiB, 0));
  CHECK(ask(budget, 45 * kMiB, 1 * kMillisecond));  // 55 MiB free
  CHECK_FALSE(ask(budget, 45 * kMiB, 2 * kMillisecond));  // 10 MiB free: refused, though within 50 ms
  CHECK(ask(budget, 10 * kMiB, 3 * kMillisecond));
  CHECK(passed_total == 100 * kMiB);
  CHECK_FALSE(ask(budget, 1, 4 * kMillisecond));
}

TEST_CASE("small requests in a burst are counted against the reading they share") {
  passed_total = 0;
  hipxx::backend::host::CommitBudget budget;
  // Each is far below half of the reading; together they may not pass it.
  int passed = 0;
  for (int request = 0; request < 200; ++request) passed += ask(budget, kMiB, request * 100'000) ? 1 : 0;
  CHECK(passed == 100);
  CHECK(passed_total == 100 * kMiB);
}

TEST_CASE("a reading older than 50 ms is taken again") {
  passed_total = 0;
  hipxx::backend::host::CommitBudget budget;
  CHECK(ask(budget, 10 * kMiB, 0));
  passed_total = 95 * kMiB;  // memory taken by someone else meanwhile
  CHECK_FALSE(ask(budget, 10 * kMiB, 60 * kMillisecond));
}
