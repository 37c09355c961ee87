// What a typed allocation may hold: a device_storable type whose alignment the runtime's
// allocations promise. HIP promises 256 bytes for hipMalloc, hipMallocAsync and hipMallocManaged
// (pool blocks are 256-byte aligned, nothing more), so a more strictly aligned type would be handed
// a misaligned pointer; it is refused at compile time instead.
#pragma once

#include <hipxx/device_storable.hpp>

#include <cstddef>

namespace hipxx {

inline constexpr std::size_t kAllocationAlignment = 256;

template <class T>
concept device_allocatable = device_storable<T> && alignof(T) <= kAllocationAlignment;

}  // namespace hipxx
