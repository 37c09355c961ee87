#include "core/pool_sharing.hpp"

#include "core/imported_pool.hpp"
#include "core/memory_pool.hpp"
#include "core/pool_broker.hpp"
#include "core/rollback.hpp"
#include "core/runtime.hpp"

#include <fcntl.h>

#include <bit>
#include <cerrno>
#include <climits>
#include <new>

namespace hipxx::core {
namespace {

// Only POSIX fds are shared here. HIP documents no hipErrorNotSupported for these two calls (unlike
// hipMemPoolCreate, which refuses a Win32 pool with it): a Win32 type is as invalid as no type.
hipError_t check_handle_type(hipMemAllocationHandleType type) noexcept {
  return type == hipMemHandleTypePosixFileDescriptor ? hipSuccess : hipErrorInvalidValue;
}

}  // namespace

PoolSharing::PoolSharing(Runtime& runtime) noexcept : runtime_(runtime) {}

// Imported pools go first (their mirrors are unmapped through the still-whole runtime), then the
// broker, whose destructor stops and joins its thread.
PoolSharing::~PoolSharing() {
  pointers_.clear();
  imported_.clear();
  broker_.reset();
}

PoolToken PoolSharing::token_of(const std::shared_ptr<MemoryPool>& pool) {
  std::lock_guard lock{export_mutex_};
  if (const auto found = exported_.find(pool.get()); found != exported_.end() && !found->second.pool.expired()) {
    return found->second.token;
  }
  // A pool gone since its export may have left its address to this one; its entry is stale.
  std::erase_if(exported_, [](const auto& entry) { return entry.second.pool.expired(); });
  const PoolToken token = random_token();
  if (!token.empty()) exported_[pool.get()] = {.pool = pool, .token = token};
  return token;
}

PoolBroker& PoolSharing::broker() {
  std::lock_guard lock{export_mutex_};
  if (broker_ && !broker_->runs_here()) {
    // A child made by fork() after the parent's first export: the parent's broker does not run
    // here, and the child's exports need one of the child's own.
    brokers_left_by_fork_.push_back(broker_.get());
    broker_.release()->abandon_after_fork();
  }
  if (!broker_) broker_ = std::make_unique<PoolBroker>(runtime_);
  return *broker_;
}

hipError_t PoolSharing::export_pool(void* shared_handle, hipMemPool_t pool, hipMemAllocationHandleType type,
                                    unsigned flags) {
  if (shared_handle == nullptr || flags != 0) return hipErrorInvalidValue;
  const std::shared_ptr<MemoryPool> exported = runtime_.pools().resolve(pool);
  if (!exported) return hipErrorInvalidValue;  // also an imported pool: it cannot be passed on
  if (const hipError_t error = check_handle_type(type); error != hipSuccess) return error;
  // As with CUDA, only a pool created for this handle type may be exported as it.
  if (exported->properties().handleTypes != type) return hipErrorInvalidValue;
  const PoolToken token = token_of(exported);
  if (token.empty()) return hipErrorNotInitialized;  // no randomness to name the pool with
  OwnedFd handed_out;
  if (const hipError_t error = broker().serve(exported, token, &handed_out); error != hipSuccess) return error;
  *static_cast<int*>(shared_handle) = handed_out.release();
  return hipSuccess;
}

hipError_t PoolSharing::export_pointer(hipMemPoolPtrExportData* data, void* ptr) {
  if (data == nullptr || ptr == nullptr) return hipErrorInvalidValue;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const std::shared_ptr<MemoryPool> pool = runtime_.pools().owner_of(address);
  if (!pool || pool->properties().handleTypes != hipMemHandleTypePosixFileDescriptor) return hipErrorInvalidValue;
  const std::size_t size = pool->live_bytes(address);
  if (size == 0) return hipErrorInvalidValue;  // not the start of a live allocation
  PointerExportData exported;
  exported.magic = kPointerMagic;
  exported.token = token_of(pool);
  exported.offset = address - pool->base();
  exported.size = size;
  if (exported.token.empty()) return hipErrorNotInitialized;
  *data = std::bit_cast<hipMemPoolPtrExportData>(exported);
  return hipSuccess;
}

hipError_t PoolSharing::import_pool(hipMemPool_t* pool, void* shared_handle, hipMemAllocationHandleType type,
                                    unsigned flags) {
  if (pool == nullptr || flags != 0) return hipErrorInvalidValue;
  if (const hipError_t error = check_handle_type(type); error != hipSuccess) return error;
  // The descriptor comes by value inside the pointer, as for hipMemImportFromShareableHandle, and
  // stays the caller's, as there (and as CUDA's cuMemPoolImportFromShareableHandle leaves it): it is
  // never closed here, so the caller may close it at once, import it again or pass it on.
  const auto bits = reinterpret_cast<std::uintptr_t>(shared_handle);
  if (bits > static_cast<std::uintptr_t>(INT_MAX)) return hipErrorInvalidValue;
  const auto socket = static_cast<int>(bits);
  // Anything but a seqpacket Unix socket (a file, a pipe, a closed descriptor) is no pool handle.
  if (!is_seqpacket_socket(socket)) return hipErrorInvalidValue;
  BrokerReply reply;
  OwnedFd channel;
  if (const hipError_t error = open_channel(socket, &reply, &channel); error != hipSuccess) return error;
  // The pool keeps a socket of its own to the broker, to open another channel should a reply be
  // lost on this one (an exporter stopped for a while, say).
  OwnedFd exported{fcntl(socket, F_DUPFD_CLOEXEC, 0)};
  if (!exported) return errno == EMFILE || errno == ENFILE ? hipErrorOutOfMemory : hipErrorInvalidValue;
  std::shared_ptr<ImportedPool> created;
  if (const hipError_t error =
          ImportedPool::create(runtime_, std::move(channel), std::move(exported), reply.pool, &created);
      error != hipSuccess) {
    return error;
  }
  std::lock_guard lock{import_mutex_};
  const std::uintptr_t id = numbers_.take();
  imported_.emplace(id, std::move(created));
  *pool = reinterpret_cast<hipMemPool_t>(id);
  return hipSuccess;
}

std::shared_ptr<ImportedPool> PoolSharing::imported(hipMemPool_t pool) const {
  std::lock_guard lock{import_mutex_};
  const auto found = imported_.find(id_of(pool));
  return found == imported_.end() ? nullptr : found->second;
}

hipError_t PoolSharing::destroy_imported(hipMemPool_t pool) {
  std::shared_ptr<ImportedPool> doomed;
  {
    std::lock_guard lock{import_mutex_};
    const auto found = imported_.find(id_of(pool));
    if (found == imported_.end()) return hipErrorInvalidValue;
    doomed = std::move(found->second);
    imported_.erase(found);
  }
  // Imported pointers still out keep it; otherwise this unmaps the mirror, outside the lock.
  doomed.reset();
  return hipSuccess;
}

hipError_t PoolSharing::count_import_locked(ImportedPointer& pointer, std::uint64_t size) noexcept {
  // The same allocation again, as the CUDA driver answers (and as hipIpcOpenMemHandle does here):
  // the same address, one more free owed. Another size at that offset means the exporter freed
  // the allocation while this process still held it, which HIP forbids.
  if (pointer.size != size) return hipErrorInvalidValue;
  ++pointer.imports;
  return hipSuccess;
}

bool PoolSharing::import_again(std::uintptr_t address, std::uint64_t size, hipError_t* result) {
  std::lock_guard lock{import_mutex_};
  const auto found = pointers_.find(address);
  if (found == pointers_.end()) return false;
  *result = count_import_locked(found->second, size);
  return true;
}

hipError_t PoolSharing::import_pointer(void** ptr, hipMemPool_t pool, const hipMemPoolPtrExportData* data) {
  if (ptr == nullptr || data == nullptr) return hipErrorInvalidValue;
  const std::shared_ptr<ImportedPool> source = imported(pool);
  if (!source) return hipErrorInvalidValue;  // no pool, or one of this process's own
  const auto wanted = std::bit_cast<PointerExportData>(*data);
  if (!source->accepts(wanted)) return hipErrorInvalidValue;
  const std::uintptr_t address = source->base() + wanted.offset;
  hipError_t result = hipSuccess;
  if (!import_again(address, wanted.size, &result)) {
    if (const hipError_t error = source->acquire(wanted.offset, wanted.size); error != hipSuccess) return error;
    // Another thread may have imported the same pointer meanwhile: then this call's chunk users go;
    // and so they do if the pointer cannot be booked.
    Rollback let_go{[&] { source->release(wanted.offset, wanted.size); }};
    // Looked up again and booked under one lock: a thread that booked the pointer since the first
    // look took these chunk users' place, and this import counts as one more of its imports.
    std::lock_guard lock{import_mutex_};
    const auto [found, booked] = pointers_.try_emplace(
        address, ImportedPointer{.pool = source, .offset = wanted.offset, .size = wanted.size, .imports = 1});
    if (booked) {
      pointer_count_.store(pointers_.size(), std::memory_order_release);
      let_go.keep();
    } else {
      result = count_import_locked(found->second, wanted.size);
    }
  }
  if (result == hipSuccess) *ptr = reinterpret_cast<void*>(address);
  return result;
}

std::optional<hipError_t> PoolSharing::free_imported(std::uintptr_t address, const std::shared_ptr<Stream>& stream) {
  if (pointer_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
  ImportedPointer freed;
  {
    std::lock_guard lock{import_mutex_};
    const auto found = pointers_.find(address);
    if (found == pointers_.end()) return std::nullopt;
    // As for a pool of this process: hipFree waits for the device's streams, which from one of
    // their own callbacks would wait for itself.
    if (!stream && runtime_.device_wait_reaches_running_work(found->second.pool->device())) {
      return hipErrorIllegalState;
    }
    if (--found->second.imports > 0) return hipSuccess;  // still held by another import
    freed = std::move(found->second);
    pointers_.erase(found);
    pointer_count_.store(pointers_.size(), std::memory_order_release);
  }
  if (stream) {
    // Unmapped when the stream reaches the free, after every use queued before it; the task holds
    // the pool, so its mirror stays even if hipMemPoolDestroy unnames it first.
    try {
      if (runtime_.streams().enqueue(*stream, [pool = freed.pool, offset = freed.offset, size = freed.size] {
            pool->release(offset, size);
            return hipSuccess;
          })) {
        return hipSuccess;
      }
    } catch (const std::bad_alloc&) {
      // No memory to queue the free: below.
    }
    // Not queued (no memory, or another thread destroyed the stream while this one waited for room
    // on it): the pointer has left the books already, so the free is done here, after the stream's
    // work, as if it had come before the destroy.
    stream->synchronize();
    freed.pool->release(freed.offset, freed.size);
    return hipSuccess;
  }
  // Like hipFree of pool memory: queued work that may still use it finishes first, on its device
  // and on the calling thread's.
  runtime_.finish_streams_before_pool_free(freed.pool->device());
  freed.pool->release(freed.offset, freed.size);
  return hipSuccess;
}

}  // namespace hipxx::core
