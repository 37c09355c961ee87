#include "core/memory_pool.hpp"

#include "core/runtime.hpp"

#include <algorithm>
#include <bit>

namespace hipxx::core {
namespace {

constexpr std::size_t kMinimumClass = 256;
constexpr std::size_t kClassesPerDoubling = 8;
constexpr std::size_t kDefaultChunkBytes = std::size_t{32} << 20;
constexpr std::size_t kDefaultVirtualBytes = std::size_t{256} << 30;

std::size_t round_up(std::size_t value, std::size_t multiple) noexcept {
  return (value + multiple - 1) / multiple * multiple;
}

bool valid_reuse_flag(const void* value) noexcept {
  const int flag = *static_cast<const int*>(value);
  return flag == 0 || flag == 1;
}

}  // namespace

std::size_t pool_class_bytes(std::size_t bytes) noexcept {
  if (bytes <= kMinimumClass) return kMinimumClass;
  const auto exponent = static_cast<std::size_t>(std::bit_width(bytes - 1));  // 2^(e-1) < bytes <= 2^e
  const std::size_t step = std::max(kMinimumClass, (std::size_t{1} << (exponent - 1)) / kClassesPerDoubling);
  return round_up(bytes, step);
}

std::size_t pool_class_index(std::size_t class_bytes) noexcept {
  if (class_bytes <= kMinimumClass) return 0;
  const auto exponent = static_cast<std::size_t>(std::bit_width(class_bytes - 1));
  const std::size_t lower = std::size_t{1} << (exponent - 1);
  const std::size_t step = std::max(kMinimumClass, lower / kClassesPerDoubling);
  return exponent * kClassesPerDoubling + (class_bytes - lower - 1) / step;
}

hipError_t MemoryPool::create(Runtime& runtime, const hipMemPoolProps& properties, std::shared_ptr<MemoryPool>* out) {
  hipMemAllocationProp chunk_properties{};
  chunk_properties.type = hipMemAllocationTypePinned;
  chunk_properties.location = properties.location;
  std::size_t granularity = 0;
  if (const hipError_t error =
          runtime.granularity(&granularity, &chunk_properties, hipMemAllocationGranularityRecommended);
      error != hipSuccess) {
    return error;
  }
  const std::size_t chunk_bytes = round_up(kDefaultChunkBytes, granularity);
  const std::size_t virtual_bytes =
      properties.maxSize == 0 ? kDefaultVirtualBytes : round_up(properties.maxSize, chunk_bytes);
  void* base = nullptr;
  if (const hipError_t error = runtime.reserve(&base, virtual_bytes, 0, nullptr, 0); error != hipSuccess) return error;
  *out = std::make_shared<MemoryPool>(runtime, properties, chunk_bytes, virtual_bytes, base);
  return hipSuccess;
}

MemoryPool::MemoryPool(Runtime& runtime, const hipMemPoolProps& properties, std::size_t chunk_bytes,
                       std::size_t virtual_bytes, void* base)
    : runtime_(runtime),
      properties_(properties),
      chunk_bytes_(chunk_bytes),
      virtual_bytes_(virtual_bytes),
      base_(reinterpret_cast<std::uintptr_t>(base)),
      access_(static_cast<std::size_t>(runtime.device_count()), hipMemAccessFlagsProtNone),
      chunk_users_(virtual_bytes / chunk_bytes, 0) {
  access_.at(static_cast<std::size_t>(properties.location.id)) = hipMemAccessFlagsProtReadWrite;
  add_hole(0, virtual_bytes_);
}

MemoryPool::~MemoryPool() {
  for (std::size_t chunk = 0; chunk < chunk_users_.size() && mapped_chunks_ > 0; ++chunk) {
    if (chunk_users_[chunk] > 0) unmap_chunk(chunk);
  }
  (void)runtime_.free_reservation(reinterpret_cast<void*>(base_), virtual_bytes_);
}

void MemoryPool::note_used(std::int64_t delta) {
  used_bytes_ = static_cast<std::uint64_t>(static_cast<std::int64_t>(used_bytes_) + delta);
  attributes_.used_high = std::max(attributes_.used_high, used_bytes_);
}

hipError_t MemoryPool::allocate(std::size_t bytes, const std::shared_ptr<Stream>& stream, PoolGrant* grant) {
  const std::size_t class_bytes = pool_class_bytes(bytes);
  std::lock_guard lock{mutex_};
  if (!take_cached(pool_class_index(class_bytes), stream, grant)) {
    std::uintptr_t offset = 0;
    if (const hipError_t error = carve(class_bytes, &offset); error != hipSuccess) return error;
    grant->address = base_ + offset;
  }
  live_.insert(grant->address, class_bytes);
  note_used(static_cast<std::int64_t>(class_bytes));
  return hipSuccess;
}

bool MemoryPool::take_cached(std::size_t size_class, const std::shared_ptr<Stream>& stream, PoolGrant* grant) {
  std::vector<FreeBlock>& blocks = cached_.at(size_class);
  const auto usable = [&](const FreeBlock& block) {
    if (block.freed_on == nullptr || block.freed_on == stream.get()) return true;
    const std::shared_ptr<Stream> freeing = block.freeing_stream();
    if (!freeing) return true;  // destroyed, so every free queued on it has happened
    if (attributes_.follow_event_dependencies && stream->known_point(*freeing) >= block.point) return true;
    return attributes_.allow_opportunistic && freeing->reached(block.point);
  };
  // Most recently freed first: its pages are the likeliest to be warm.
  auto found = std::find_if(blocks.rbegin(), blocks.rend(), usable);
  if (found == blocks.rend()) {
    if (!attributes_.allow_internal_dependencies || blocks.empty()) return false;
    found = blocks.rbegin();
    grant->wait_stream = found->freeing_stream();  // null when destroyed: nothing left to wait for
    grant->wait_point = found->point;
  }
  grant->address = base_ + found->offset;
  blocks.erase(std::next(found).base());
  return true;
}

bool MemoryPool::free(std::uintptr_t address, const std::shared_ptr<Stream>& stream) {
  std::lock_guard lock{mutex_};
  const std::optional<std::size_t> taken = live_.take(address);
  if (!taken) return false;
  const std::size_t class_bytes = *taken;
  note_used(-static_cast<std::int64_t>(class_bytes));
  FreeBlock block{.offset = address - base_,
                  .bytes = class_bytes,
                  .freed_on = stream.get(),
                  .stream = stream,
                  .point = stream ? stream->tail() : 0};
  cached_[pool_class_index(class_bytes)].push_back(std::move(block));
  return true;
}

hipError_t MemoryPool::carve(std::size_t bytes, std::uintptr_t* offset) {
  const auto hole = holes_by_size_.lower_bound({bytes, 0});
  if (hole == holes_by_size_.end()) return hipErrorOutOfMemory;
  const auto [hole_bytes, hole_offset] = *hole;
  const std::size_t first = hole_offset / chunk_bytes_;
  const std::size_t last = (hole_offset + bytes - 1) / chunk_bytes_;
  for (std::size_t chunk = first; chunk <= last; ++chunk) {
    if (chunk_users_[chunk] > 0) continue;
    if (const hipError_t error = map_chunk(chunk); error != hipSuccess) {
      for (std::size_t undo = first; undo < chunk; ++undo) {
        if (chunk_users_[undo] == 0) unmap_chunk(undo);
      }
      return error;
    }
  }
  for (std::size_t chunk = first; chunk <= last; ++chunk) ++chunk_users_[chunk];
  holes_by_size_.erase(hole);
  holes_.erase(hole_offset);
  if (hole_bytes > bytes) add_hole(hole_offset + bytes, hole_bytes - bytes);
  *offset = hole_offset;
  return hipSuccess;
}

void MemoryPool::uncarve(std::uintptr_t offset, std::size_t bytes) {
  const std::size_t first = offset / chunk_bytes_;
  const std::size_t last = (offset + bytes - 1) / chunk_bytes_;
  for (std::size_t chunk = first; chunk <= last; ++chunk) {
    if (--chunk_users_[chunk] == 0) unmap_chunk(chunk);
  }
  add_hole(offset, bytes);
}

void MemoryPool::add_hole(std::uintptr_t offset, std::size_t bytes) {
  auto next = holes_.lower_bound(offset);
  if (next != holes_.end() && next->first == offset + bytes) {
    bytes += next->second;
    holes_by_size_.erase({next->second, next->first});
    next = holes_.erase(next);
  }
  if (next != holes_.begin()) {
    const auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      holes_by_size_.erase({previous->second, previous->first});
      offset = previous->first;
      bytes += previous->second;
      holes_.erase(previous);
    }
  }
  holes_.emplace(offset, bytes);
  holes_by_size_.emplace(bytes, offset);
}

std::vector<hipMemAccessDesc> MemoryPool::access_list() const {
  std::vector<hipMemAccessDesc> list;
  for (std::size_t device = 0; device < access_.size(); ++device) {
    hipMemAccessDesc descriptor{};
    descriptor.location.type = hipMemLocationTypeDevice;
    descriptor.location.id = static_cast<int>(device);
    descriptor.flags = access_[device];
    list.push_back(descriptor);
  }
  return list;
}

hipError_t MemoryPool::map_chunk(std::size_t chunk) {
  hipMemAllocationProp chunk_properties{};
  chunk_properties.type = hipMemAllocationTypePinned;
  chunk_properties.location = properties_.location;
  hipMemGenericAllocationHandle_t handle = nullptr;
  if (const hipError_t error = runtime_.create(&handle, chunk_bytes_, &chunk_properties, 0); error != hipSuccess) {
    return error;
  }
  void* at = reinterpret_cast<void*>(base_ + chunk * chunk_bytes_);
  hipError_t error = runtime_.map(at, chunk_bytes_, 0, handle, 0);
  // The mapping keeps the physical memory alive; the pool needs no handle of its own.
  (void)runtime_.release(handle);
  if (error != hipSuccess) return error;
  const std::vector<hipMemAccessDesc> access = access_list();
  error = runtime_.set_access(at, chunk_bytes_, access);
  if (error != hipSuccess) {
    (void)runtime_.unmap(at, chunk_bytes_);
    return error;
  }
  ++mapped_chunks_;
  attributes_.reserved_high = std::max<std::uint64_t>(attributes_.reserved_high, mapped_chunks_ * chunk_bytes_);
  return hipSuccess;
}

void MemoryPool::unmap_chunk(std::size_t chunk) {
  (void)runtime_.unmap(reinterpret_cast<void*>(base_ + chunk * chunk_bytes_), chunk_bytes_);
  --mapped_chunks_;
}

void MemoryPool::trim_to(std::size_t keep_bytes) {
  std::lock_guard lock{mutex_};
  // Memory whose free its stream has not yet reached may still be in use there: only the rest goes.
  std::vector<FreeBlock> releasable;
  for (std::vector<FreeBlock>& blocks : cached_) {
    for (const FreeBlock& block : blocks) {
      const std::shared_ptr<Stream> freeing = block.freeing_stream();
      if (!freeing || freeing->reached(block.point)) releasable.push_back(block);
    }
  }
  // Highest addresses first, so the pool shrinks from its top and low chunks stay warm.
  std::sort(releasable.begin(), releasable.end(),
            [](const FreeBlock& left, const FreeBlock& right) { return left.offset > right.offset; });
  for (const FreeBlock& block : releasable) {
    const std::size_t reserved = mapped_chunks_ * chunk_bytes_;
    if (reserved <= keep_bytes) break;
    // The pool keeps at least `keep_bytes` reserved.
    if (reserved - chunks_released_by(block.offset, block.bytes) * chunk_bytes_ < keep_bytes) continue;
    std::vector<FreeBlock>& blocks = cached_[pool_class_index(block.bytes)];
    blocks.erase(std::find_if(blocks.begin(), blocks.end(),
                              [&](const FreeBlock& cached) { return cached.offset == block.offset; }));
    uncarve(block.offset, block.bytes);
  }
}

std::size_t MemoryPool::chunks_released_by(std::uintptr_t offset, std::size_t bytes) const {
  std::size_t released = 0;
  for (std::size_t chunk = offset / chunk_bytes_; chunk <= (offset + bytes - 1) / chunk_bytes_; ++chunk) {
    if (chunk_users_[chunk] == 1) ++released;
  }
  return released;
}

void MemoryPool::trim_to_threshold() {
  std::uint64_t threshold = 0;
  {
    std::lock_guard lock{mutex_};
    threshold = attributes_.release_threshold;
  }
  trim_to(static_cast<std::size_t>(std::min<std::uint64_t>(threshold, SIZE_MAX)));
}

hipError_t MemoryPool::set_attribute(hipMemPoolAttr attribute, const void* value) {
  if (value == nullptr) return hipErrorInvalidValue;
  std::lock_guard lock{mutex_};
  const auto as_u64 = [&] { return *static_cast<const std::uint64_t*>(value); };
  switch (attribute) {
    case hipMemPoolReuseFollowEventDependencies:
      if (!valid_reuse_flag(value)) return hipErrorInvalidValue;
      attributes_.follow_event_dependencies = *static_cast<const int*>(value) != 0;
      return hipSuccess;
    case hipMemPoolReuseAllowOpportunistic:
      if (!valid_reuse_flag(value)) return hipErrorInvalidValue;
      attributes_.allow_opportunistic = *static_cast<const int*>(value) != 0;
      return hipSuccess;
    case hipMemPoolReuseAllowInternalDependencies:
      if (!valid_reuse_flag(value)) return hipErrorInvalidValue;
      attributes_.allow_internal_dependencies = *static_cast<const int*>(value) != 0;
      return hipSuccess;
    case hipMemPoolAttrReleaseThreshold:
      attributes_.release_threshold = as_u64();
      return hipSuccess;
    // The high-water marks can only be reset, to the current value.
    case hipMemPoolAttrReservedMemHigh:
      if (as_u64() != 0) return hipErrorInvalidValue;
      attributes_.reserved_high = mapped_chunks_ * chunk_bytes_;
      return hipSuccess;
    case hipMemPoolAttrUsedMemHigh:
      if (as_u64() != 0) return hipErrorInvalidValue;
      attributes_.used_high = used_bytes_;
      return hipSuccess;
    default:
      return hipErrorInvalidValue;  // the current values are read-only
  }
}

hipError_t MemoryPool::get_attribute(hipMemPoolAttr attribute, void* value) const {
  if (value == nullptr) return hipErrorInvalidValue;
  std::lock_guard lock{mutex_};
  const auto put_flag = [&](bool flag) { *static_cast<int*>(value) = flag ? 1 : 0; };
  const auto put_u64 = [&](std::uint64_t number) { *static_cast<std::uint64_t*>(value) = number; };
  switch (attribute) {
    case hipMemPoolReuseFollowEventDependencies: put_flag(attributes_.follow_event_dependencies); break;
    case hipMemPoolReuseAllowOpportunistic: put_flag(attributes_.allow_opportunistic); break;
    case hipMemPoolReuseAllowInternalDependencies: put_flag(attributes_.allow_internal_dependencies); break;
    case hipMemPoolAttrReleaseThreshold: put_u64(attributes_.release_threshold); break;
    case hipMemPoolAttrReservedMemCurrent: put_u64(mapped_chunks_ * chunk_bytes_); break;
    case hipMemPoolAttrReservedMemHigh: put_u64(attributes_.reserved_high); break;
    case hipMemPoolAttrUsedMemCurrent: put_u64(used_bytes_); break;
    case hipMemPoolAttrUsedMemHigh: put_u64(attributes_.used_high); break;
    default: return hipErrorInvalidValue;
  }
  return hipSuccess;
}

hipError_t MemoryPool::set_access(const hipMemAccessDesc* descriptors, std::size_t count) {
  if (descriptors == nullptr || count == 0) return hipErrorInvalidValue;
  for (std::size_t index = 0; index < count; ++index) {
    const hipMemAccessDesc& descriptor = descriptors[index];
    if (descriptor.location.type != hipMemLocationTypeDevice || !runtime_.valid_device(descriptor.location.id)) {
      return hipErrorInvalidValue;
    }
    const hipMemAccessFlags flags = descriptor.flags;
    if (flags != hipMemAccessFlagsProtNone && flags != hipMemAccessFlagsProtRead &&
        flags != hipMemAccessFlagsProtReadWrite) {
      return hipErrorInvalidValue;
    }
    // The owning device always keeps read-write access to its own pool.
    if (descriptor.location.id == device() && flags != hipMemAccessFlagsProtReadWrite) return hipErrorInvalidValue;
  }
  std::lock_guard lock{mutex_};
  const std::vector<hipMemAccessFlags> before = access_;
  for (std::size_t index = 0; index < count; ++index) {
    access_.at(static_cast<std::size_t>(descriptors[index].location.id)) = descriptors[index].flags;
  }
  const std::vector<hipMemAccessDesc> list = access_list();
  for (std::size_t chunk = 0; chunk < chunk_users_.size(); ++chunk) {
    if (chunk_users_[chunk] == 0) continue;
    if (const hipError_t error =
            runtime_.set_access(reinterpret_cast<void*>(base_ + chunk * chunk_bytes_), chunk_bytes_, list);
        error != hipSuccess) {
      access_ = before;
      const std::vector<hipMemAccessDesc> restore = access_list();
      for (std::size_t undo = 0; undo < chunk; ++undo) {
        if (chunk_users_[undo] > 0) {
          (void)runtime_.set_access(reinterpret_cast<void*>(base_ + undo * chunk_bytes_), chunk_bytes_, restore);
        }
      }
      return error;
    }
  }
  return hipSuccess;
}

hipMemAccessFlags MemoryPool::access(int device) const {
  std::lock_guard lock{mutex_};
  return access_.at(static_cast<std::size_t>(device));
}

bool MemoryPool::is_live(std::uintptr_t address) const {
  std::lock_guard lock{mutex_};
  return owns(address) && live_.contains(address);
}

std::size_t MemoryPool::live_allocations() const {
  std::lock_guard lock{mutex_};
  return live_.size();
}

}  // namespace hipxx::core
