// An object in storage of its holder's own, built once and never destroyed: for a process-wide
// object that static destructors and atexit handlers may still use, and that the code reaching it
// should find at a fixed address instead of through a pointer.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace hipxx::core {

template <class T>
class Immortal {
 public:
  // `make` returns the object by value; it is built in place (so T needs no copy or move).
  template <class Make>
  requires std::is_same_v<std::invoke_result_t<Make>, T>
  explicit Immortal(Make make) { ::new (static_cast<void*>(storage_)) T(make()); }
  Immortal(const Immortal&) = delete;
  Immortal& operator=(const Immortal&) = delete;
  Immortal(Immortal&&) = delete;
  Immortal& operator=(Immortal&&) = delete;
  ~Immortal() = default;  // leaves the object alive on purpose

  [[nodiscard]] T& operator*() noexcept { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) std::byte storage_[sizeof(T)]{};  // zeroed (static storage is anyway), then built in
};

}  // namespace hipxx::core
