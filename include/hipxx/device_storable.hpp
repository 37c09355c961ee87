// What may live in device memory that the host hands out and copies: no constructor or destructor
// can run there from the host, so an element type must be valid without either, its bytes its
// whole state.
#pragma once

#include <type_traits>

namespace hipxx {

template <class T>
concept device_storable =
    std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T> && !std::is_const_v<T> &&
    !std::is_volatile_v<T>;

}  // namespace hipxx
