// The move-only core of the owners whose C handle is a pointer the runtime gives back with one call
// (Stream: hipStreamDestroy, Event: hipEventDestroy): each owner keeps its own API and holds one of
// these, so moving, dropping and destroying behave alike everywhere.
#pragma once

#include <hipxx/error.hpp>

#include <utility>

namespace hipxx::detail {

template <class Handle, hipError_t (*Destroy)(Handle)>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle handle) noexcept : handle_(handle) {}

  UniqueHandle(UniqueHandle const&) = delete;
  UniqueHandle& operator=(UniqueHandle const&) = delete;

  UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }

  // A destructor cannot report, so the runtime's answer is dropped here; destroy() reports it.
  ~UniqueHandle() { reset(); }

  [[nodiscard]] Handle get() const noexcept { return handle_; }

  // Gives up ownership; the caller must destroy the handle.
  [[nodiscard]] Handle release() noexcept { return std::exchange(handle_, nullptr); }

  // Destroys now and reports the runtime's answer. On failure the handle is still owned.
  [[nodiscard]] result<void> destroy() noexcept {
    if (handle_ == nullptr) {
      return outcome::success();
    }
    if (auto const error = Destroy(handle_); error != hipSuccess) {
      return failure(error);
    }
    handle_ = nullptr;
    return outcome::success();
  }

 private:
  void reset() noexcept {
    if (handle_ != nullptr) {
      (void)Destroy(handle_);
      handle_ = nullptr;
    }
  }

  Handle handle_ = nullptr;
};

}  // namespace hipxx::detail
