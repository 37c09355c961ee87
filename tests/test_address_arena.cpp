// The backends' address arena (lib/backend/address_arena) on its own, over a pretend address space:
// which ranges it hands out, that freed ranges join up again within a chunk but never across two,
// hints, alignment, and what happens when no chunk can be had.
#include <doctest/doctest.h>

#include "backend/address_arena.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

using hipxx::backend::AddressArena;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Hands out chunks one after another from a fixed base, so that two chunks may well be adjacent
// (the case where the arena must not join free space across them), and records what is live.
struct PretendAddressSpace {
  std::uintptr_t next = std::uintptr_t{1} << 40;
  int chunks_left = 1000;
  std::map<std::uintptr_t, std::size_t> live;

  AddressArena make(std::size_t chunk_size, std::size_t largest, std::size_t alignment = 2 * kMiB) {
    return AddressArena{{.chunk_size = chunk_size, .chunk_alignment = alignment, .largest = largest},
                        [this](std::size_t size, std::size_t align) -> std::uintptr_t {
                          if (chunks_left-- <= 0) return 0;
                          const std::uintptr_t base = (next + align - 1) & ~(std::uintptr_t{align} - 1);
                          next = base + size;
                          live[base] = size;
                          return base;
                        },
                        [this](std::uintptr_t base, std::size_t size) {
                          REQUIRE(live.at(base) == size);
                          live.erase(base);
                        }};
  }
};

}  // namespace

TEST_CASE("address arena: ranges come from one chunk, aligned, and never overlap") {
  PretendAddressSpace space;
  AddressArena arena = space.make(64 * kMiB, 16 * kMiB);
  REQUIRE(arena.prepare());
  CHECK(space.live.size() == 1);
  CHECK(arena.reserved_bytes() == 64 * kMiB);
  const std::uintptr_t chunk = space.live.begin()->first;

  std::set<std::uintptr_t> starts;
  std::uintptr_t previous_end = 0;
  for (int i = 0; i < 8; ++i) {
    const std::uintptr_t at = arena.take(2 * kMiB, 2 * kMiB);
    REQUIRE(at != 0);
    CHECK(at % (2 * kMiB) == 0);
    CHECK(at >= chunk);
    CHECK(at + 2 * kMiB <= chunk + 64 * kMiB);
    CHECK(at >= previous_end);  // best fit in address order out of one extent
    previous_end = at + 2 * kMiB;
    starts.insert(at);
  }
  CHECK(starts.size() == 8);
  CHECK(arena.free_bytes() == 48 * kMiB);
  for (const std::uintptr_t at : starts) CHECK(arena.give_back(at, 2 * kMiB));
  CHECK(arena.free_bytes() == 64 * kMiB);
  // Everything joined up again: the whole chunk's largest request fits at its start.
  CHECK(arena.take(16 * kMiB, 2 * kMiB) == chunk);
}

TEST_CASE("address arena: a freed range is reused, and freeing joins both neighbours") {
  PretendAddressSpace space;
  AddressArena arena = space.make(64 * kMiB, 64 * kMiB);
  const std::uintptr_t a = arena.take(4 * kMiB, 2 * kMiB);
  const std::uintptr_t b = arena.take(4 * kMiB, 2 * kMiB);
  const std::uintptr_t c = arena.take(4 * kMiB, 2 * kMiB);
  REQUIRE((a != 0 && b != 0 && c != 0));
  REQUIRE(arena.give_back(b, 4 * kMiB));
  CHECK(arena.take(4 * kMiB, 2 * kMiB) == b);  // the hole fits exactly: best fit picks it
  REQUIRE(arena.give_back(a, 4 * kMiB));
  REQUIRE(arena.give_back(c, 4 * kMiB));
  REQUIRE(arena.give_back(b, 4 * kMiB));
  CHECK(arena.free_bytes() == 64 * kMiB);
  CHECK(arena.take(64 * kMiB, 2 * kMiB) == a);  // one extent again, the chunk's whole length
}

TEST_CASE("address arena: a full chunk brings a new one, and free space never joins across chunks") {
  PretendAddressSpace space;
  AddressArena arena = space.make(8 * kMiB, 8 * kMiB);
  const std::uintptr_t first = arena.take(8 * kMiB, 2 * kMiB);
  const std::uintptr_t second = arena.take(8 * kMiB, 2 * kMiB);
  REQUIRE((first != 0 && second != 0));
  CHECK(space.live.size() == 2);
  REQUIRE(second == first + 8 * kMiB);  // the pretend space put the chunks side by side
  REQUIRE(arena.give_back(first, 8 * kMiB));
  REQUIRE(arena.give_back(second, 8 * kMiB));
  CHECK(arena.free_bytes() == 16 * kMiB);
  // 16 MiB of free space in a row, but in two chunks: a 16 MiB request is not the arena's to serve,
  // and an 8 MiB one fits in either chunk without a third.
  CHECK_FALSE(arena.serves(16 * kMiB, 2 * kMiB));
  CHECK(arena.take(8 * kMiB, 2 * kMiB) != 0);
  CHECK(arena.take(8 * kMiB, 2 * kMiB) != 0);
  CHECK(space.live.size() == 2);
}

TEST_CASE("address arena: stricter alignment skips ahead and keeps the gap") {
  PretendAddressSpace space;
  AddressArena arena = space.make(64 * kMiB, 32 * kMiB, 32 * kMiB);
  const std::uintptr_t small = arena.take(2 * kMiB, 2 * kMiB);
  REQUIRE(small != 0);
  const std::uintptr_t aligned = arena.take(4 * kMiB, 16 * kMiB);
  REQUIRE(aligned != 0);
  CHECK(aligned % (16 * kMiB) == 0);
  CHECK(aligned >= small + 2 * kMiB);
  // The gap between the two is still free and is handed out next.
  const std::uintptr_t gap = arena.take(2 * kMiB, 2 * kMiB);
  CHECK(gap == small + 2 * kMiB);
  CHECK_FALSE(arena.serves(2 * kMiB, 64 * kMiB));  // aligned beyond the chunks: reserved directly
}

TEST_CASE("address arena: a hint is honoured where the range is free, and only there") {
  PretendAddressSpace space;
  AddressArena arena = space.make(64 * kMiB, 64 * kMiB);
  REQUIRE(arena.prepare());
  const std::uintptr_t chunk = space.live.begin()->first;
  CHECK(arena.holds(chunk + 10 * kMiB));
  CHECK_FALSE(arena.holds(chunk + 64 * kMiB));
  CHECK(arena.take_at(chunk + 10 * kMiB, 4 * kMiB) == chunk + 10 * kMiB);
  CHECK(arena.take_at(chunk + 12 * kMiB, 4 * kMiB) == 0);  // overlaps the range just taken
  CHECK(arena.take_at(chunk + 62 * kMiB, 4 * kMiB) == 0);  // runs past the chunk's end
  const std::size_t free_before = arena.free_bytes();
  CHECK(free_before == 60 * kMiB);
  // The pieces on both sides of the hinted range are still handed out.
  CHECK(arena.take_at(chunk, 10 * kMiB) == chunk);
  CHECK(arena.take_at(chunk + 14 * kMiB, 50 * kMiB) == chunk + 14 * kMiB);
  CHECK(arena.free_bytes() == 0);
}

TEST_CASE("address arena: no chunk to be had is a plain failure, and foreign ranges are not taken back") {
  PretendAddressSpace space;
  space.chunks_left = 0;
  AddressArena arena = space.make(64 * kMiB, 64 * kMiB);
  CHECK_FALSE(arena.prepare());
  CHECK(arena.take(2 * kMiB, 2 * kMiB) == 0);
  CHECK(arena.reserved_bytes() == 0);
  CHECK_FALSE(arena.give_back(std::uintptr_t{1} << 44, 2 * kMiB));
  CHECK_FALSE(arena.holds(std::uintptr_t{1} << 44));
}

TEST_CASE("address arena: its chunks are released when it goes") {
  PretendAddressSpace space;
  {
    AddressArena arena = space.make(8 * kMiB, 8 * kMiB);
    REQUIRE(arena.take(8 * kMiB, 2 * kMiB) != 0);
    REQUIRE(arena.take(8 * kMiB, 2 * kMiB) != 0);
    CHECK(space.live.size() == 2);
  }
  CHECK(space.live.empty());
}

TEST_CASE("address arena: random takes and frees keep every range disjoint and account for every byte") {
  PretendAddressSpace space;
  AddressArena arena = space.make(256 * kMiB, 64 * kMiB);
  std::mt19937 random{12345};
  std::map<std::uintptr_t, std::size_t> taken;
  for (int step = 0; step < 20000; ++step) {
    // Takes and frees at random, up to 64 ranges live (up to 2 GiB: several chunks' worth).
    if (taken.empty() || (taken.size() < 64 && random() % 2 == 0)) {
      const std::size_t size = (1 + random() % 16) * 2 * kMiB;
      const std::size_t alignment = std::size_t{2} * kMiB << (random() % 3);
      const std::uintptr_t at = arena.take(size, alignment);
      REQUIRE(at != 0);
      REQUIRE(at % alignment == 0);
      const auto after = taken.lower_bound(at);
      if (after != taken.end()) REQUIRE(at + size <= after->first);
      if (after != taken.begin()) REQUIRE(std::prev(after)->first + std::prev(after)->second <= at);
      taken[at] = size;
    } else {
      auto victim = taken.begin();
      std::advance(victim, static_cast<std::ptrdiff_t>(random() % taken.size()));
      REQUIRE(arena.give_back(victim->first, victim->second));
      taken.erase(victim);
    }
    if (step % 1000 == 0) {
      std::size_t live = 0;
      for (const auto& entry : taken) live += entry.second;
      REQUIRE(arena.reserved_bytes() - arena.free_bytes() == live);
    }
  }
  for (const auto& [at, size] : taken) REQUIRE(arena.give_back(at, size));
  CHECK(arena.free_bytes() == arena.reserved_bytes());
}

TEST_CASE("address arena: requests outside its size band are not its to serve") {
  PretendAddressSpace space;
  AddressArena arena{{.chunk_size = 64 * kMiB, .chunk_alignment = 2 * kMiB, .largest = 16 * kMiB, .smallest = 4 * kMiB},
                     [](std::size_t, std::size_t) -> std::uintptr_t { return std::uintptr_t{1} << 40; },
                     [](std::uintptr_t, std::size_t) {}};
  CHECK_FALSE(arena.serves(2 * kMiB, 2 * kMiB));
  CHECK(arena.serves(4 * kMiB, 2 * kMiB));
  CHECK(arena.serves(16 * kMiB, 2 * kMiB));
  CHECK_FALSE(arena.serves(18 * kMiB, 2 * kMiB));
  CHECK_FALSE(arena.serves(0, 2 * kMiB));
}

TEST_CASE("address arena: past its most chunks it refuses, and what it gave out still comes back") {
  PretendAddressSpace space;
  AddressArena arena = space.make(4 * kMiB, 4 * kMiB);
  std::vector<std::uintptr_t> taken;
  for (std::uintptr_t at = arena.take(4 * kMiB, 2 * kMiB); at != 0; at = arena.take(4 * kMiB, 2 * kMiB)) {
    taken.push_back(at);
    REQUIRE(taken.size() <= 1000);
  }
  CHECK(taken.size() == space.live.size());  // one range per chunk, until no chunk more may be had
  CHECK(space.chunks_left > 0);  // the arena stopped, not the address space
  for (const std::uintptr_t at : taken) CHECK(arena.give_back(at, 4 * kMiB));
  CHECK(arena.take(4 * kMiB, 2 * kMiB) != 0);
}
