// A step already taken (memory reserved, mapped or opened by the backend) that the operation it
// belongs to must undo unless it completes. The books' containers allocate, so a step can be
// followed by a throw as well as by a returned failure; either leaves nothing of the step behind.
#pragma once

#include <concepts>
#include <utility>

namespace hipxx::core {

template <std::invocable Undo>
class [[nodiscard]] Rollback {
 public:
  explicit Rollback(Undo undo) noexcept(std::is_nothrow_move_constructible_v<Undo>) : undo_(std::move(undo)) {}
  Rollback(const Rollback&) = delete;
  Rollback& operator=(const Rollback&) = delete;
  Rollback(Rollback&&) = delete;
  Rollback& operator=(Rollback&&) = delete;
  ~Rollback() {
    if (armed_) undo_();
  }

  // The operation completed: the step stays.
  void keep() noexcept { armed_ = false; }

 private:
  Undo undo_;
  bool armed_ = true;
};

}  // namespace hipxx::core
