// The chunks of a pool's virtual range that are backed by memory, and how many carved blocks touch
// each: a chunk is backed when its first block comes and let go when its last one goes. Pools made
// here and pools imported from another process keep their chunks this way; what backing a chunk
// means (a new allocation, or one fetched from the exporter) is theirs to say.
#pragma once

#include "core/rollback.hpp"

#include <hipxx/hip_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hipxx::core {

template <class Call>
concept BackChunk =
    std::invocable<Call, std::size_t> && std::same_as<std::invoke_result_t<Call, std::size_t>, hipError_t>;

template <class Call>
concept LetGoChunk = std::invocable<Call, std::size_t>;

class ChunkUsers {
 public:
  ChunkUsers(std::size_t chunk_count, std::uint64_t chunk_bytes) : users_(chunk_count, 0), chunk_bytes_(chunk_bytes) {}

  // One more user of every chunk [offset, offset + bytes) of the range touches, backing with
  // back(chunk) those that had none. All or nothing: if a chunk cannot be backed, those this call
  // backed are let go and no count changes.
  template <BackChunk Back, LetGoChunk LetGo>
  [[nodiscard]] hipError_t add(std::uint64_t offset, std::uint64_t bytes, Back&& back, LetGo&& let_go) {
    const Span span = span_of(offset, bytes);
    std::size_t chunk = span.first;
    // Those backed before a chunk that failed, whether back() returned the failure or threw it.
    Rollback let_go_backed{[&] {
      for (std::size_t undo = span.first; undo < chunk; ++undo) {
        if (users_[undo] == 0) let_go(undo);
      }
    }};
    for (; chunk <= span.last; ++chunk) {
      if (users_[chunk] > 0) continue;
      if (const hipError_t error = back(chunk); error != hipSuccess) return error;
    }
    let_go_backed.keep();
    for (chunk = span.first; chunk <= span.last; ++chunk) {
      if (users_[chunk]++ == 0) ++backed_;
    }
    return hipSuccess;
  }

  // One user fewer of every chunk [offset, offset + bytes) touches; chunks left with none are let go.
  template <LetGoChunk LetGo>
  void remove(std::uint64_t offset, std::uint64_t bytes, LetGo&& let_go) {
    const Span span = span_of(offset, bytes);
    for (std::size_t chunk = span.first; chunk <= span.last; ++chunk) {
      if (--users_[chunk] == 0) {
        let_go(chunk);
        --backed_;
      }
    }
  }

  // Lets go of every backed chunk, users or not: for a pool that is going away.
  template <LetGoChunk LetGo>
  void let_go_all(LetGo&& let_go) {
    for (std::size_t chunk = 0; chunk < users_.size() && backed_ > 0; ++chunk) {
      if (users_[chunk] == 0) continue;
      let_go(chunk);
      users_[chunk] = 0;
      --backed_;
    }
  }

  // The bytes a remove() of [offset, offset + bytes) would let go.
  [[nodiscard]] std::uint64_t bytes_let_go_by(std::uint64_t offset, std::uint64_t bytes) const noexcept {
    const Span span = span_of(offset, bytes);
    std::uint64_t count = 0;
    for (std::size_t chunk = span.first; chunk <= span.last; ++chunk) {
      if (users_[chunk] == 1) ++count;
    }
    return count * chunk_bytes_;
  }

  // The bytes of the chunks that are backed: the pool's reserved memory.
  [[nodiscard]] std::uint64_t backed_bytes() const noexcept { return backed_ * chunk_bytes_; }
  [[nodiscard]] std::span<const std::uint32_t> counts() const noexcept { return users_; }

 private:
  // The chunks a byte range of the pool touches, first to last.
  struct Span {
    std::size_t first = 0;
    std::size_t last = 0;
  };
  [[nodiscard]] Span span_of(std::uint64_t offset, std::uint64_t bytes) const noexcept {
    return {.first = static_cast<std::size_t>(offset / chunk_bytes_),
            .last = static_cast<std::size_t>((offset + bytes - 1) / chunk_bytes_)};
  }

  std::vector<std::uint32_t> users_;
  const std::uint64_t chunk_bytes_;
  std::size_t backed_ = 0;  // chunks with a user: kept, not counted, since attributes read it often
};

}  // namespace hipxx::core
