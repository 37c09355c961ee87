#include "core/imported_pool.hpp"
#include "core/rollback.hpp"

#include "core/runtime.hpp"

#include <algorithm>

namespace hipxx::core {
namespace {

// No pool of ours has more chunks than this (256 GiB of 32 MiB chunks is 8192); a description that
// claims more is refused before anything is sized by it.
constexpr std::uint64_t kMaxChunks = std::uint64_t{1} << 20;

// Imports made on behalf of a pool carry the pool's device, whatever the calling thread's current
// device is, so hipPointerGetAttributes reports the device the memory lives on.
class DeviceScope {
 public:
  DeviceScope(Runtime& runtime, int device) : runtime_(runtime), previous_(Runtime::current_device()) {
    (void)runtime_.set_current_device(device);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  DeviceScope(DeviceScope&&) = delete;
  DeviceScope& operator=(DeviceScope&&) = delete;
  ~DeviceScope() { (void)runtime_.set_current_device(previous_); }

 private:
  Runtime& runtime_;
  int previous_;
};

// A broker's error becomes one HIP documents for hipMemPoolImportPointer.
hipError_t remote_status(std::int32_t status) noexcept {
  return status == hipErrorOutOfMemory ? hipErrorOutOfMemory : hipErrorInvalidValue;
}

}  // namespace

hipError_t ImportedPool::create(Runtime& runtime, OwnedFd channel, OwnedFd exported, const PoolDescription& description,
                                std::shared_ptr<ImportedPool>* out) {
  const std::uint64_t chunk = description.chunk_bytes;
  const std::uint64_t total = description.virtual_bytes;
  if (description.token.empty() || chunk == 0 || total == 0 || total % chunk != 0 || total / chunk > kMaxChunks ||
      description.reserved != 0 || !runtime.valid_device(description.device)) {
    return hipErrorInvalidValue;
  }
  hipMemAllocationProp properties{};
  properties.type = hipMemAllocationTypePinned;
  properties.location = {.type = hipMemLocationTypeDevice, .id = description.device};
  std::size_t granularity = 0;
  if (const hipError_t error = runtime.granularity(&granularity, &properties, hipMemAllocationGranularityMinimum);
      error != hipSuccess) {
    return error;
  }
  // Chunks are mapped whole at multiples of their size: they must be granular here too.
  if (chunk % granularity != 0) return hipErrorInvalidValue;
  void* base = nullptr;
  if (const hipError_t error = runtime.reserve(&base, static_cast<std::size_t>(total), 0, nullptr, 0, Holder::runtime);
      error != hipSuccess) {
    return error;
  }
  Rollback unreserve{[&] { (void)runtime.free_reservation(base, static_cast<std::size_t>(total), Holder::runtime); }};
  *out = std::make_shared<ImportedPool>(runtime, std::move(channel), std::move(exported), description,
                                        reinterpret_cast<std::uintptr_t>(base));
  unreserve.keep();
  return hipSuccess;
}

ImportedPool::ImportedPool(Runtime& runtime, OwnedFd channel, OwnedFd exported, const PoolDescription& description,
                           std::uintptr_t base)
    : runtime_(runtime),
      description_(description),
      base_(base),
      channel_(std::move(channel)),
      exported_(std::move(exported)),
      chunks_(chunk_count(), description.chunk_bytes),
      // As a pool made here: read-write from its own device until hipMemPoolSetAccess says otherwise.
      access_(runtime.device_count(), description.device) {}

ImportedPool::~ImportedPool() {
  chunks_.let_go_all([this](std::size_t chunk) { unmap_chunk(chunk); });
  (void)runtime_.free_reservation(reinterpret_cast<void*>(base_), static_cast<std::size_t>(description_.virtual_bytes),
                                  Holder::runtime);
}

bool ImportedPool::accepts(const PointerExportData& data) const noexcept {
  const bool reserved_clear =
      std::all_of(data.reserved.begin(), data.reserved.end(), [](auto word) { return word == 0; });
  return data.magic == kPointerMagic && data.token == description_.token && reserved_clear && data.size > 0 &&
         data.offset < description_.virtual_bytes && data.size <= description_.virtual_bytes - data.offset;
}

// A channel whose reply was lost is closed (its requests and replies are out of step); this opens
// another through the exporter's socket, for the same pool only.
bool ImportedPool::reopen_channel() {
  BrokerReply reply;
  OwnedFd channel;
  if (!exported_ || open_channel(exported_.get(), &reply, &channel) != hipSuccess) return false;
  if (reply.pool.token != description_.token) return false;
  channel_ = std::move(channel);
  channel_process_ = ::getpid();
  return true;
}

hipError_t ImportedPool::fetch_chunk(std::size_t chunk, OwnedFd* fd) {
  if (channel_process_ != ::getpid()) channel_.reset();  // the parent's: this process's copy goes
  if (!channel_ && !reopen_channel()) return hipErrorInvalidValue;
  BrokerRequest request;
  request.op = BrokerOp::chunk;
  request.token = description_.token;
  request.chunk = chunk;
  BrokerReply reply;
  int received = -1;
  hipError_t error = send_message(channel_.get(), &request, sizeof request, -1) ? hipSuccess : hipErrorInvalidValue;
  if (error == hipSuccess) error = receive_message(channel_.get(), &reply, sizeof reply, &received, broker_timeout());
  OwnedFd owned{received};
  if (error == hipSuccess && reply.magic == kReplyMagic && reply.status != hipSuccess && !owned) {
    return remote_status(reply.status);  // a refusal in good order: the channel stays usable
  }
  // The reply came whole, and only its descriptor found no room here: requests and replies are
  // still in step.
  if (error == hipErrorOutOfMemory) return error;
  if (error != hipSuccess || reply.magic != kReplyMagic || reply.status != hipSuccess || !owned ||
      reply.chunk != chunk || reply.chunk_bytes != description_.chunk_bytes) {
    // A lost or senseless reply leaves requests and replies out of step: no later reply can be trusted.
    channel_.reset();
    return hipErrorInvalidValue;
  }
  *fd = std::move(owned);
  return hipSuccess;
}

hipError_t ImportedPool::map_chunk(std::size_t chunk) {
  OwnedFd fd;
  if (const hipError_t error = fetch_chunk(chunk, &fd); error != hipSuccess) return error;
  hipMemGenericAllocationHandle_t handle = nullptr;
  {
    const DeviceScope scope{runtime_, description_.device};
    // The runtime's ordinary import checks the descriptor (the host backend: a memfd of the right
    // mode; CUDA: an exported allocation) and dups it; ours is closed right after.
    auto* const os_handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get()));
    if (const hipError_t error = runtime_.import_handle(&handle, os_handle, hipMemHandleTypePosixFileDescriptor);
        error != hipSuccess) {
      return error;
    }
  }
  fd.reset();
  return access_.map_chunk(runtime_, chunk_address(chunk), static_cast<std::size_t>(description_.chunk_bytes), handle);
}

void ImportedPool::unmap_chunk(std::size_t chunk) {
  (void)runtime_.unmap(chunk_address(chunk), static_cast<std::size_t>(description_.chunk_bytes), Holder::runtime);
}

hipError_t ImportedPool::acquire(std::uint64_t offset, std::uint64_t size) {
  std::lock_guard lock{mutex_};
  if (const hipError_t error = chunks_.add(
          offset, size, [this](std::size_t chunk) { return map_chunk(chunk); },
          [this](std::size_t chunk) { unmap_chunk(chunk); });
      error != hipSuccess) {
    return error;
  }
  reserved_high_ = std::max<std::uint64_t>(reserved_high_, chunks_.backed_bytes());
  used_bytes_ += size;
  used_high_ = std::max(used_high_, used_bytes_);
  return hipSuccess;
}

void ImportedPool::release(std::uint64_t offset, std::uint64_t size) {
  std::lock_guard lock{mutex_};
  chunks_.remove(offset, size, [this](std::size_t chunk) { unmap_chunk(chunk); });
  used_bytes_ -= size;
}

hipError_t ImportedPool::get_attribute(hipMemPoolAttr attribute, void* value) const {
  if (value == nullptr) return hipErrorInvalidValue;
  std::lock_guard lock{mutex_};
  const auto put_u64 = [&](std::uint64_t number) { *static_cast<std::uint64_t*>(value) = number; };
  switch (attribute) {
    // Nothing is allocated here, so nothing is reused: the policies read as HIP's defaults.
    case hipMemPoolReuseFollowEventDependencies:
    case hipMemPoolReuseAllowOpportunistic:
    case hipMemPoolReuseAllowInternalDependencies: *static_cast<int*>(value) = 1; break;
    case hipMemPoolAttrReleaseThreshold: put_u64(0); break;
    // What this process maps of the exporter's memory, and the imported pointers it holds.
    case hipMemPoolAttrReservedMemCurrent: put_u64(chunks_.backed_bytes()); break;
    case hipMemPoolAttrReservedMemHigh: put_u64(reserved_high_); break;
    case hipMemPoolAttrUsedMemCurrent: put_u64(used_bytes_); break;
    case hipMemPoolAttrUsedMemHigh: put_u64(used_high_); break;
    default: return hipErrorInvalidValue;
  }
  return hipSuccess;
}

hipError_t ImportedPool::set_access(const hipMemAccessDesc* descriptors, std::size_t count) {
  if (const hipError_t error = access_.check(descriptors, count); error != hipSuccess) return error;
  std::lock_guard lock{mutex_};
  return access_.set(runtime_, {descriptors, count}, chunks_.counts(), base_,
                     static_cast<std::size_t>(description_.chunk_bytes));
}

hipMemAccessFlags ImportedPool::access(int device) const {
  std::lock_guard lock{mutex_};
  return access_.of(device);
}

}  // namespace hipxx::core
