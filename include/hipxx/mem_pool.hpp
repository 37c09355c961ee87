// The stream-ordered allocator: memory pools and the allocations they hand out.
//
//  - `MemPool` owns a pool made with hipMemPoolCreate; `MemPoolRef` borrows one (a device's default
//    or current pool, or a raw handle). Both offer the same operations.
//  - `PoolAllocation` owns memory from hipMallocAsync / hipMallocFromPoolAsync and frees it with
//    hipFreeAsync when destroyed: in stream order, with no host synchronisation. It frees on the
//    stream it was allocated on unless told otherwise (free_on), because that is the one stream
//    where every use the caller enqueued is known to come before the free. The null stream and
//    the per-thread stream are named by handles whose stream depends on the calling thread's
//    current device (and thread): an allocation freed elsewhere is freed on the null stream of the
//    device where the handle was given, which comes after that device's blocking streams' work,
//    the per-thread streams' included.
//  - `PoolArray<T>` is the same owner counted in elements of T.
//
// A pool need not outlive its allocations: HIP keeps a destroyed pool's memory until the last one
// is freed. The free stream must outlive the allocation (or be replaced with free_on first).
#pragma once

#include <hipxx/access.hpp>
#include <hipxx/device.hpp>
#include <hipxx/device_allocatable.hpp>
#include <hipxx/error.hpp>
#include <hipxx/physical_allocation.hpp>
#include <hipxx/stream.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>

namespace hipxx {

class PoolAllocation {
 public:
  // Takes over memory from hipMallocAsync or hipMallocFromPoolAsync; the way back from release().
  [[nodiscard]] static PoolAllocation adopt(void* data, std::size_t size, StreamRef free_stream) noexcept {
    return PoolAllocation{data, size, free_stream};
  }

  PoolAllocation(PoolAllocation const&) = delete;
  PoolAllocation& operator=(PoolAllocation const&) = delete;

  PoolAllocation(PoolAllocation&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        stream_(std::exchange(other.stream_, StreamRef{})),
        given_(std::exchange(other.given_, HandleContext{})) {}

  PoolAllocation& operator=(PoolAllocation&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      stream_ = std::exchange(other.stream_, StreamRef{});
      given_ = std::exchange(other.given_, HandleContext{});
    }
    return *this;
  }

  ~PoolAllocation() { reset(); }

  // A device address: usable by work enqueued after the allocation, never dereferenced on the host
  // unless the device memory is host-visible. Null for a zero-byte allocation. Not from a temporary,
  // whose memory is freed at the end of the statement and handed to the next allocation.
  [[nodiscard]] void* data() const& noexcept { return data_; }
  void data() const&& = delete;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] explicit operator bool() const noexcept { return data_ != nullptr; }

  // The stream the memory will be freed on.
  [[nodiscard]] StreamRef stream() const noexcept { return stream_; }

  // Frees on `stream` instead: the one whose work is the last to use the memory. Work on other
  // streams must be ordered before that point (an event, for example) by the caller. The null or
  // per-thread stream means that stream of the calling thread and its current device.
  void free_on(StreamRef stream) noexcept {
    stream_ = stream;
    given_ = context_of(stream);
  }

  // Frees now, in stream order, and reports the runtime's answer, which the destructor has to drop.
  // On failure the PoolAllocation still owns the memory.
  [[nodiscard]] result<void> free() noexcept {
    if (data_ == nullptr) {
      return outcome::success();
    }
    if (auto const error = free_in_order(); error != hipSuccess) {
      return failure(error);
    }
    forget();
    return outcome::success();
  }

  // Gives up ownership; the caller must hipFreeAsync (or hipFree) the pointer.
  [[nodiscard]] void* release() noexcept {
    void* const data = data_;
    forget();
    return data;
  }

 private:
  // Where a handle that names a different stream on another thread or device was given: the
  // device then current, and the thread. No device (-1) for a handle that names one stream only.
  struct HandleContext {
    int device = -1;
    std::thread::id thread;
  };

  PoolAllocation(void* data, std::size_t size, StreamRef stream) noexcept
      : data_(data), size_(size), stream_(stream), given_(context_of(stream)) {}

  [[nodiscard]] static HandleContext context_of(StreamRef stream) noexcept {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-cstyle-cast): hipStreamLegacy is HIP's C macro
    StreamRef const legacy{hipStreamLegacy};
    bool const contextual = stream == StreamRef::null() || stream == legacy || stream == StreamRef::per_thread();
    int device = -1;
    if (!contextual || hipGetDevice(&device) != hipSuccess) {
      return {};
    }
    return {.device = device, .thread = std::this_thread::get_id()};
  }

  // hipFreeAsync on the free stream as it was named where it was given. Where its handle names
  // another stream here, the null stream of the device it was given on frees instead: HIP orders
  // that after the work of every blocking stream of the device, per-thread streams included.
  [[nodiscard]] hipError_t free_in_order() const noexcept {
    int current = -1;
    if (given_.device < 0 || hipGetDevice(&current) != hipSuccess) {
      return hipFreeAsync(data_, stream_.native());
    }
    if (current == given_.device) {
      bool const other_thread = stream_ == StreamRef::per_thread() && std::this_thread::get_id() != given_.thread;
      return hipFreeAsync(data_, other_thread ? nullptr : stream_.native());
    }
    if (auto const error = hipSetDevice(given_.device); error != hipSuccess) {
      return error;
    }
    auto const error = hipFreeAsync(data_, nullptr);
    (void)hipSetDevice(current);
    return error;
  }

  void forget() noexcept {
    data_ = nullptr;
    size_ = 0;
    stream_ = StreamRef{};
    given_ = HandleContext{};
  }

  void reset() noexcept {
    if (data_ == nullptr) {
      return;
    }
    // The free stream should outlive the allocation. Where it did not, hipFreeAsync refuses it with
    // hipErrorInvalidValue (hipxx's runtime, like AMD's, which may also not detect a dead handle at
    // all); hipxx finishes a stream's queued work before its handle goes invalid, so nothing of that
    // stream can still use the memory, and the null stream frees it rather than leak it. (The
    // memory is this owner's, so the refusal is not about the pointer.)
    if (free_in_order() == hipErrorInvalidValue) {
      (void)hipFreeAsync(data_, nullptr);
    }
    forget();
  }

  void* data_ = nullptr;
  std::size_t size_ = 0;
  StreamRef stream_;
  HandleContext given_;
};

// Pool memory for `size()` elements of T. The memory is uninitialised, as from hipMallocAsync.
template <device_allocatable T>
class PoolArray {
 public:
  using value_type = T;

  [[nodiscard]] static PoolArray adopt(PoolAllocation allocation) noexcept { return PoolArray{std::move(allocation)}; }

  // Views of the memory, so not of a temporary array: it is freed at the end of the statement, and
  // the view would write into whatever is allocated there next.
  [[nodiscard]] T* data() const& noexcept { return static_cast<T*>(bytes_.data()); }
  void data() const&& = delete;
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size() / sizeof(T); }
  // The elements as a span of device memory, for copies and fills (copy.hpp); not for the host to touch.
  [[nodiscard]] std::span<T> span() const& noexcept { return {data(), size()}; }
  void span() const&& = delete;
  [[nodiscard]] std::size_t size_bytes() const noexcept { return bytes_.size(); }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(bytes_); }

  [[nodiscard]] StreamRef stream() const noexcept { return bytes_.stream(); }
  void free_on(StreamRef stream) noexcept { bytes_.free_on(stream); }
  [[nodiscard]] result<void> free() noexcept { return bytes_.free(); }

  // The untyped owner, for code that deals in bytes.
  [[nodiscard]] PoolAllocation const& allocation() const& noexcept { return bytes_; }
  void allocation() const&& = delete;  // into_allocation() takes it over instead
  [[nodiscard]] PoolAllocation into_allocation() && noexcept { return std::move(bytes_); }

  [[nodiscard]] T* release() noexcept { return static_cast<T*>(bytes_.release()); }

 private:
  explicit PoolArray(PoolAllocation bytes) noexcept : bytes_(std::move(bytes)) {}

  PoolAllocation bytes_;
};

namespace detail {

// count * sizeof(T), or nothing where that does not fit in a size_t.
template <class T>
[[nodiscard]] constexpr bool array_bytes(std::size_t count, std::size_t* bytes) noexcept {
  if (count > SIZE_MAX / sizeof(T)) {
    return false;
  }
  *bytes = count * sizeof(T);
  return true;
}

}  // namespace detail

// From the current pool of the stream's device (hipMallocAsync), freed on `stream` by default.
[[nodiscard]] inline result<PoolAllocation> allocate_async(std::size_t bytes, StreamRef stream) noexcept {
  void* data = nullptr;
  if (auto const error = hipMallocAsync(&data, bytes, stream.native()); error != hipSuccess) {
    return failure(error);
  }
  return PoolAllocation::adopt(data, bytes, stream);
}

// `count` elements of T. A count whose size in bytes overflows is hipErrorOutOfMemory: no pool could
// ever hold it.
template <device_allocatable T>
[[nodiscard]] result<PoolArray<T>> allocate_async(std::size_t count, StreamRef stream) noexcept {
  std::size_t bytes = 0;
  if (!detail::array_bytes<T>(count, &bytes)) {
    return failure(hipErrorOutOfMemory);
  }
  auto allocation = allocate_async(bytes, stream);
  if (!allocation) {
    return allocation.as_failure();
  }
  return PoolArray<T>::adopt(std::move(allocation).value());
}

// Whether a pool releases memory freed on one stream to allocations on another, and how.
// Every policy is on by default, as in HIP.
struct ReusePolicy {
  // Reuse across streams where an event wait or null-stream barrier already orders the free first.
  bool follow_event_dependencies = true;
  // Reuse memory whose free has already completed, with no ordering needed.
  bool allow_opportunistic = true;
  // Reuse memory whose free is still pending by making the allocating stream wait for it.
  bool allow_internal_dependencies = true;

  friend constexpr bool operator==(ReusePolicy, ReusePolicy) noexcept = default;
};

namespace detail {

// The operations a borrowed and an owned pool share, written once over `native()`.
template <class Derived>
class MemPoolOperations {
 public:
  // Reserved memory above this is returned to the system at the next synchronisation.
  [[nodiscard]] result<std::uint64_t> release_threshold() const noexcept {
    return get_u64(hipMemPoolAttrReleaseThreshold);
  }

  [[nodiscard]] result<void> set_release_threshold(std::uint64_t bytes) const noexcept {
    return check(hipMemPoolSetAttribute(native_of(), hipMemPoolAttrReleaseThreshold, &bytes));
  }

  [[nodiscard]] result<ReusePolicy> reuse_policy() const noexcept {
    ReusePolicy policy{};
    for (auto const& [attribute, field] : reuse_fields(policy)) {
      auto const value = get_flag(attribute);
      if (!value) {
        return value.as_failure();
      }
      *field = value.value();
    }
    return policy;
  }

  // All three or none: where the runtime refuses one, those already set are put back.
  [[nodiscard]] result<void> set_reuse_policy(ReusePolicy policy) const noexcept {
    auto const before = reuse_policy();
    if (!before) {
      return before.as_failure();
    }
    ReusePolicy old = before.value();
    auto const wanted = reuse_fields(policy);
    auto const previous = reuse_fields(old);
    for (std::size_t index = 0; index < wanted.size(); ++index) {
      if (auto const done = set_flag(wanted[index].attribute, *wanted[index].field); !done) {
        for (std::size_t undo = 0; undo < index; ++undo) {
          (void)set_flag(previous[undo].attribute, *previous[undo].field);
        }
        return done;
      }
    }
    return outcome::success();
  }

  // Memory the pool holds from the system, in use or cached for reuse.
  [[nodiscard]] result<std::uint64_t> reserved_current() const noexcept {
    return get_u64(hipMemPoolAttrReservedMemCurrent);
  }
  [[nodiscard]] result<std::uint64_t> reserved_high() const noexcept { return get_u64(hipMemPoolAttrReservedMemHigh); }
  // Memory handed out and not yet freed (a hipFreeAsync counts at once, before its stream reaches it).
  // Exact when no allocation or free into the pool runs meanwhile; while other threads allocate and
  // free, a sum of per-thread counts read one after another.
  [[nodiscard]] result<std::uint64_t> used_current() const noexcept { return get_u64(hipMemPoolAttrUsedMemCurrent); }
  // The largest used_current() since creation or the last reset: exact for a pool used from one
  // thread at a time. Under concurrent use never below the true peak, and above it only by blocks
  // that other threads freed while an allocation was setting a new mark.
  [[nodiscard]] result<std::uint64_t> used_high() const noexcept { return get_u64(hipMemPoolAttrUsedMemHigh); }

  // The high-water marks can only be reset, to the current value (HIP takes 0 to mean that).
  [[nodiscard]] result<void> reset_reserved_high() const noexcept { return reset(hipMemPoolAttrReservedMemHigh); }
  [[nodiscard]] result<void> reset_used_high() const noexcept { return reset(hipMemPoolAttrUsedMemHigh); }

  // Returns cached memory to the system until at most `bytes` stay reserved, as far as memory still
  // in use (or freed on a stream that has not reached the free) allows.
  [[nodiscard]] result<void> trim_to(std::size_t bytes) const noexcept {
    return check(hipMemPoolTrimTo(native_of(), bytes));
  }

  // Replaces the access of the listed devices to all of the pool's memory, present and future.
  [[nodiscard]] result<void> set_access(std::span<hipMemAccessDesc const> descs) const noexcept {
    return check(hipMemPoolSetAccess(native_of(), descs.data(), descs.size()));
  }

  [[nodiscard]] result<void> set_access(AccessDesc desc) const noexcept {
    auto const native = desc.native();
    return set_access(std::span<hipMemAccessDesc const>(&native, 1));
  }

  [[nodiscard]] result<void> set_access(Device device, Access access) const noexcept {
    return set_access(AccessDesc{device, access});
  }

  template <device_range R>
  [[nodiscard]] result<void> set_access(R&& devices, Access access) const {
    auto const native = access_for(std::forward<R>(devices), access);
    return set_access(std::span<hipMemAccessDesc const>(native));
  }

  template <access_desc_range R>
  [[nodiscard]] result<void> set_access(R&& descs) const {
    auto const native = to_native(std::forward<R>(descs));
    return set_access(std::span<hipMemAccessDesc const>(native));
  }

  [[nodiscard]] result<Access> access(Device device) const noexcept {
    hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
    auto location = device.location();
    if (auto const error = hipMemPoolGetAccess(&flags, native_of(), &location); error != hipSuccess) {
      return failure(error);
    }
    auto const access = access_from_native(static_cast<unsigned long long>(flags));
    if (!access) {
      return failure(hipErrorUnknown);
    }
    return *access;
  }

  // `bytes` from this pool, in `stream`'s order, freed on `stream` by default.
  [[nodiscard]] result<PoolAllocation> allocate(std::size_t bytes, StreamRef stream) const noexcept {
    void* data = nullptr;
    if (auto const error = hipMallocFromPoolAsync(&data, bytes, native_of(), stream.native()); error != hipSuccess) {
      return failure(error);
    }
    return PoolAllocation::adopt(data, bytes, stream);
  }

  // `count` elements of T: with a type, the size is a count, as in allocate_async<T>.
  template <device_allocatable T>
  [[nodiscard]] result<PoolArray<T>> allocate(std::size_t count, StreamRef stream) const noexcept {
    std::size_t bytes = 0;
    if (!detail::array_bytes<T>(count, &bytes)) {
      return failure(hipErrorOutOfMemory);
    }
    auto allocation = allocate(bytes, stream);
    if (!allocation) {
      return allocation.as_failure();
    }
    return PoolArray<T>::adopt(std::move(allocation).value());
  }

  // Makes this the pool that hipMallocAsync (and allocate_async) use on `device`.
  [[nodiscard]] result<void> make_current_for(Device device) const noexcept {
    return check(hipDeviceSetMemPool(device.id(), native_of()));
  }

 private:
  struct ReuseField {
    hipMemPoolAttr attribute;
    bool* field;
  };

  [[nodiscard]] static std::array<ReuseField, 3> reuse_fields(ReusePolicy& policy) noexcept {
    return {{{hipMemPoolReuseFollowEventDependencies, &policy.follow_event_dependencies},
             {hipMemPoolReuseAllowOpportunistic, &policy.allow_opportunistic},
             {hipMemPoolReuseAllowInternalDependencies, &policy.allow_internal_dependencies}}};
  }

  [[nodiscard]] hipMemPool_t native_of() const noexcept { return static_cast<Derived const&>(*this).native(); }

  // The runtime writes a uint64_t for sizes and an int for reuse flags; each getter reads its own type.
  [[nodiscard]] result<std::uint64_t> get_u64(hipMemPoolAttr attribute) const noexcept {
    std::uint64_t value = 0;
    if (auto const error = hipMemPoolGetAttribute(native_of(), attribute, &value); error != hipSuccess) {
      return failure(error);
    }
    return value;
  }

  [[nodiscard]] result<bool> get_flag(hipMemPoolAttr attribute) const noexcept {
    int value = 0;
    if (auto const error = hipMemPoolGetAttribute(native_of(), attribute, &value); error != hipSuccess) {
      return failure(error);
    }
    return value != 0;
  }

  [[nodiscard]] result<void> set_flag(hipMemPoolAttr attribute, bool on) const noexcept {
    int value = on ? 1 : 0;
    return check(hipMemPoolSetAttribute(native_of(), attribute, &value));
  }

  [[nodiscard]] result<void> reset(hipMemPoolAttr attribute) const noexcept {
    std::uint64_t zero = 0;
    return check(hipMemPoolSetAttribute(native_of(), attribute, &zero));
  }
};

}  // namespace detail

class MemPoolRef : public detail::MemPoolOperations<MemPoolRef> {
 public:
  using native_handle_type = hipMemPool_t;

  // Explicit, unlike StreamRef: a null hipMemPool_t names no pool, so no conversion should make one.
  constexpr explicit MemPoolRef(hipMemPool_t pool) noexcept : pool_(pool) {}

  [[nodiscard]] constexpr hipMemPool_t native() const noexcept { return pool_; }

  friend constexpr bool operator==(MemPoolRef a, MemPoolRef b) noexcept { return a.pool_ == b.pool_; }

 private:
  hipMemPool_t pool_;
};

static_assert(std::is_trivially_copyable_v<MemPoolRef>);

// How a new pool's memory is made. The pool lives on the device given to MemPool::create.
struct MemPoolProperties {
  // posix_fd makes the pool exportable to other processes.
  Shareable shareable = Shareable::no;
  // Most the pool may ever reserve; 0 lets the runtime choose.
  std::size_t max_size = 0;
};

class MemPool : public detail::MemPoolOperations<MemPool> {
 public:
  using native_handle_type = hipMemPool_t;

  // Accessible read-write from `device` only, until set_access says otherwise.
  [[nodiscard]] static result<MemPool> create(Device device, MemPoolProperties properties = {}) noexcept {
    hipMemPoolProps props{};
    props.allocType = hipMemAllocationTypePinned;
    props.handleTypes =
        properties.shareable == Shareable::posix_fd ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
    props.location = device.location();
    props.maxSize = properties.max_size;
    hipMemPool_t pool = nullptr;
    if (auto const error = hipMemPoolCreate(&pool, &props); error != hipSuccess) {
      return failure(error);
    }
    return MemPool{pool};
  }

  // The pool every device starts with. It belongs to the runtime, so only a reference is handed out.
  [[nodiscard]] static result<MemPoolRef> default_for(Device device) noexcept {
    hipMemPool_t pool = nullptr;
    if (auto const error = hipDeviceGetDefaultMemPool(&pool, device.id()); error != hipSuccess) {
      return failure(error);
    }
    return MemPoolRef{pool};
  }

  // The pool hipMallocAsync uses on `device` now (see make_current_for).
  [[nodiscard]] static result<MemPoolRef> current_for(Device device) noexcept {
    hipMemPool_t pool = nullptr;
    if (auto const error = hipDeviceGetMemPool(&pool, device.id()); error != hipSuccess) {
      return failure(error);
    }
    return MemPoolRef{pool};
  }

  // Takes over a pool created through the C API; the way back from release().
  [[nodiscard]] static MemPool adopt(hipMemPool_t pool) noexcept { return MemPool{pool}; }

  MemPool(MemPool const&) = delete;
  MemPool& operator=(MemPool const&) = delete;

  MemPool(MemPool&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)) {}

  MemPool& operator=(MemPool&& other) noexcept {
    if (this != &other) {
      reset();
      pool_ = std::exchange(other.pool_, nullptr);
    }
    return *this;
  }

  // Allocations still out keep the memory alive; a device whose current pool this was goes back to
  // its default pool.
  ~MemPool() { reset(); }

  [[nodiscard]] hipMemPool_t native() const noexcept { return pool_; }
  [[nodiscard]] explicit operator bool() const noexcept { return pool_ != nullptr; }

  [[nodiscard]] MemPoolRef ref() const noexcept { return MemPoolRef{pool_}; }
  // NOLINTNEXTLINE(google-explicit-constructor): an owner is usable wherever a borrower is.
  operator MemPoolRef() const noexcept { return ref(); }

  // Gives up ownership; the caller must hipMemPoolDestroy the handle.
  [[nodiscard]] hipMemPool_t release() noexcept { return std::exchange(pool_, nullptr); }

 private:
  explicit MemPool(hipMemPool_t pool) noexcept : pool_(pool) {}

  void reset() noexcept {
    if (pool_ != nullptr) {
      (void)hipMemPoolDestroy(pool_);
      pool_ = nullptr;
    }
  }

  hipMemPool_t pool_ = nullptr;
};

}  // namespace hipxx
