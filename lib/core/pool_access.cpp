#include "core/pool_access.hpp"

#include "core/rollback.hpp"
#include "core/runtime.hpp"

namespace hipxx::core {

PoolAccess::PoolAccess(int device_count, int owner)
    : owner_(owner), flags_(static_cast<std::size_t>(device_count), hipMemAccessFlagsProtNone) {
  flags_.at(static_cast<std::size_t>(owner)) = hipMemAccessFlagsProtReadWrite;
}

hipError_t PoolAccess::check(const hipMemAccessDesc* descriptors, std::size_t count) const {
  if (descriptors == nullptr || count == 0) return hipErrorInvalidValue;
  for (const hipMemAccessDesc& descriptor : std::span{descriptors, count}) {
    const int device = descriptor.location.id;
    if (descriptor.location.type != hipMemLocationTypeDevice || device < 0 ||
        static_cast<std::size_t>(device) >= flags_.size()) {
      return hipErrorInvalidValue;
    }
    const hipMemAccessFlags flags = descriptor.flags;
    if (flags != hipMemAccessFlagsProtNone && flags != hipMemAccessFlagsProtRead &&
        flags != hipMemAccessFlagsProtReadWrite) {
      return hipErrorInvalidValue;
    }
    if (device == owner_ && flags != hipMemAccessFlagsProtReadWrite) return hipErrorInvalidValue;
  }
  return hipSuccess;
}

hipError_t PoolAccess::set(Runtime& runtime, std::span<const hipMemAccessDesc> descriptors,
                           std::span<const std::uint32_t> chunk_users, std::uintptr_t base, std::size_t chunk_bytes) {
  const std::vector<hipMemAccessFlags> before = flags_;
  for (const hipMemAccessDesc& descriptor : descriptors) {
    flags_.at(static_cast<std::size_t>(descriptor.location.id)) = descriptor.flags;
  }
  const auto chunk_at = [&](std::size_t chunk) { return reinterpret_cast<void*>(base + chunk * chunk_bytes); };
  const std::vector<hipMemAccessDesc> wanted = list();
  for (std::size_t chunk = 0; chunk < chunk_users.size(); ++chunk) {
    if (chunk_users[chunk] == 0) continue;
    if (const hipError_t error = runtime.set_access(chunk_at(chunk), chunk_bytes, wanted, Holder::runtime);
        error != hipSuccess) {
      flags_ = before;
      const std::vector<hipMemAccessDesc> restore = list();
      for (std::size_t undo = 0; undo < chunk; ++undo) {
        if (chunk_users[undo] > 0) (void)runtime.set_access(chunk_at(undo), chunk_bytes, restore, Holder::runtime);
      }
      return error;
    }
  }
  return hipSuccess;
}

std::vector<hipMemAccessDesc> PoolAccess::list() const {
  std::vector<hipMemAccessDesc> list;
  list.reserve(flags_.size());
  for (std::size_t device = 0; device < flags_.size(); ++device) {
    hipMemAccessDesc descriptor{};
    descriptor.location = {.type = hipMemLocationTypeDevice, .id = static_cast<int>(device)};
    descriptor.flags = flags_[device];
    list.push_back(descriptor);
  }
  return list;
}

hipError_t PoolAccess::map_chunk(Runtime& runtime, void* at, std::size_t bytes,
                                 hipMemGenericAllocationHandle_t handle) const {
  hipError_t error = hipSuccess;
  {
    // Released whether the map returns, fails or throws.
    const Rollback release{[&] { (void)runtime.release(handle); }};
    // map() refuses an allocation whose size is known and differs from the chunk's.
    error = runtime.map(at, bytes, 0, handle, 0, Holder::runtime);
  }
  if (error != hipSuccess) return error;
  Rollback unmap{[&] { (void)runtime.unmap(at, bytes, Holder::runtime); }};
  if (error = runtime.set_access(at, bytes, list(), Holder::runtime); error != hipSuccess) return error;
  unmap.keep();
  return hipSuccess;
}

}  // namespace hipxx::core
