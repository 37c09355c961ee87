// A reserved range of device virtual addresses with nothing behind it (hipMemAddressReserve).
// Physical allocations are mapped into it with hipxx::map (mapping.hpp).
//
// Lifetime rule: every Mapping into a range must be destroyed before the range. The runtime refuses
// hipMemAddressFree while anything is mapped, and a destructor cannot report that, so destroying (or
// assigning over) a VirtualRange that still has live Mappings calls std::terminate, as std::thread
// does for a joinable thread: loud and defined, never a leaked or half-freed range. In a class, declare
// the VirtualRange member before the Mappings so that the compiler destroys them first.
#pragma once

#include <hipxx/detail/address.hpp>
#include <hipxx/detail/reservation.hpp>
#include <hipxx/error.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

namespace hipxx {

class Mapping;

class VirtualRange {
 public:
  // `size` and `alignment` must be multiples of the minimum granularity; alignment 0 means the
  // minimum. `hint` is a requested address the runtime may ignore.
  [[nodiscard]] static result<VirtualRange> reserve(std::size_t size, std::size_t alignment = 0,
                                                    void* hint = nullptr) {
    // The book first: if allocating it throws, nothing has been reserved yet.
    auto book = std::make_unique<detail::Reservation>();
    void* base = nullptr;
    if (auto const error = hipMemAddressReserve(&base, size, alignment, hint, 0); error != hipSuccess) {
      return failure(error);
    }
    book->base = base;
    book->size = size;
    return VirtualRange{std::move(book)};
  }

  VirtualRange(VirtualRange const&) = delete;
  VirtualRange& operator=(VirtualRange const&) = delete;
  VirtualRange(VirtualRange&&) noexcept = default;

  VirtualRange& operator=(VirtualRange&& other) noexcept {
    if (this != &other) {
      reset();
      book_ = std::move(other.book_);
    }
    return *this;
  }

  ~VirtualRange() { reset(); }

  [[nodiscard]] void* base() const noexcept { return book_ ? book_->base : nullptr; }
  [[nodiscard]] std::size_t size() const noexcept { return book_ ? book_->size : 0; }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(book_); }

  // Whether [address, address + bytes) lies wholly inside the range.
  [[nodiscard]] bool contains(void const* address, std::size_t bytes = 1) const noexcept {
    if (!book_) {
      return false;
    }
    auto const first = reinterpret_cast<std::uintptr_t>(book_->base);
    auto const at = reinterpret_cast<std::uintptr_t>(address);
    return at >= first && at - first <= book_->size && bytes <= book_->size - (at - first);
  }

  [[nodiscard]] std::size_t mapping_count() const noexcept {
    return book_ ? book_->live_mappings.load(std::memory_order_acquire) : 0;
  }

 private:
  friend class Mapping;

  explicit VirtualRange(std::unique_ptr<detail::Reservation> book) noexcept : book_(std::move(book)) {}

  void reset() noexcept {
    if (!book_) {
      return;
    }
    if (book_->live_mappings.load(std::memory_order_acquire) != 0) {
      // A Mapping would be left pointing into freed address space; see the lifetime rule above.
      std::terminate();
    }
    (void)hipMemAddressFree(book_->base, book_->size);
    book_.reset();
  }

  std::unique_ptr<detail::Reservation> book_;
};

}  // namespace hipxx
