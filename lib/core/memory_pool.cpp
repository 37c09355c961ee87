#include "core/memory_pool.hpp"
#include "core/rollback.hpp"

#include "core/runtime.hpp"

#include <algorithm>
#include <bit>
#include <new>
#include <optional>

namespace hipxx::core {
namespace {

constexpr std::size_t kMinimumClass = 256;
constexpr std::size_t kClassesPerDoubling = 8;
constexpr std::size_t kDefaultChunkBytes = std::size_t{32} << 20;
constexpr std::size_t kDefaultVirtualBytes = std::size_t{256} << 30;

std::size_t round_up(std::size_t value, std::size_t multiple) noexcept {
  return (value + multiple - 1) / multiple * multiple;
}

// The chunk size of a pool capped at `cap` bytes, a multiple of `unit`: the largest multiple of
// `unit`, up to the default chunk, that divides the cap, so that the pool can map all of the cap
// and never more.
std::size_t chunk_bytes_within(std::size_t cap, std::size_t unit) noexcept {
  const std::size_t units = cap / unit;
  for (std::size_t per_chunk = std::min(units, kDefaultChunkBytes / unit); per_chunk > 1; --per_chunk) {
    if (units % per_chunk == 0) return per_chunk * unit;
  }
  return unit;
}

bool valid_reuse_flag(const void* value) noexcept {
  const int flag = *static_cast<const int*>(value);
  return flag == 0 || flag == 1;
}

std::atomic<std::uint64_t> next_pool_serial{1};

// The free lists this thread used last: the hot path finds its stream's list without the pool's
// lock. Never-reused serials make a stale entry harmless: a list goes only once its stream is
// destroyed, a destroyed stream is never named again, and a destroyed pool's serial never returns.
struct FreeListMemo {
  std::uint64_t pool = 0;
  std::uint64_t stream = 0;
  StreamFreeList* list = nullptr;
};
// A few, for a thread that takes turns between streams or pools.
struct FreeListMemos {
  std::array<FreeListMemo, 4> entries{};
  std::size_t next = 0;  // replaced in turn
};
// Initial-exec: read on every call, and the runtime is linked, not opened late with dlopen.
__attribute__((tls_model("initial-exec"))) thread_local FreeListMemos free_list_memos;

std::optional<std::uintptr_t> take_newest(StreamFreeList& list, std::size_t size_class) {
  std::lock_guard lock{list.lock};
  std::vector<StreamFreeList::Block>& blocks = list.by_class[size_class];
  if (blocks.empty()) return std::nullopt;
  const std::uintptr_t offset = blocks.back().offset;
  blocks.pop_back();
  return offset;
}

}  // namespace

LiveGranules::LiveGranules(std::size_t virtual_bytes)
    : owned_(round_up(virtual_bytes, kPageSlots << kGranuleShift) >> (kGranuleShift + kPageShift)),
      published_(owned_.size()),
      owned_notes_(owned_.size()),
      published_notes_(owned_.size()) {}

void LiveGranules::prepare(std::uintptr_t offset, std::size_t bytes) {
  constexpr std::size_t kPageBits = kGranuleShift + kPageShift;
  const std::size_t first = offset >> kPageBits;
  if (!owned_[first]) {
    owned_[first] = std::make_unique<Slot[]>(kPageSlots);  // value-initialised: nothing live
    published_[first].store(owned_[first].get(), std::memory_order_release);
  }
  const std::size_t last = (offset + std::max<std::size_t>(bytes, 1) - 1) >> kPageBits;
  for (std::size_t page = first; page <= last && page < owned_notes_.size(); ++page) {
    if (owned_notes_[page]) continue;
    owned_notes_[page] = std::make_unique<SpanNote[]>(kPageSpans);
    published_notes_[page].store(owned_notes_[page].get(), std::memory_order_release);
  }
}

LiveGranules::SpanNote* LiveGranules::span_note(std::uintptr_t offset) const noexcept {
  const std::size_t span = offset >> kSpanShift;
  const std::size_t page = span / kPageSpans;
  if (page >= published_notes_.size()) return nullptr;
  SpanNote* const notes = published_notes_[page].load(std::memory_order_acquire);
  return notes == nullptr ? nullptr : &notes[span % kPageSpans];
}

std::optional<LiveGranules::Held> LiveGranules::nearest_at_or_before(std::uintptr_t offset) const noexcept {
  constexpr std::uintptr_t kGranule = std::uintptr_t{1} << kGranuleShift;
  const std::uintptr_t granule_start = offset & ~(kGranule - 1);
  constexpr std::size_t kLookBack = std::size_t{1} << (kSpanShift - kGranuleShift);
  for (std::size_t back = 0; back < kLookBack && back * kGranule <= granule_start; ++back) {
    const std::uintptr_t start = granule_start - back * kGranule;
    if (const std::optional<std::size_t> size_class = find(start)) return Held{start, *size_class};
  }
  // Nothing starts within a span's length before: only a block that covers the span's start can.
  const SpanNote* const note = span_note(offset);
  const std::uint64_t noted = note == nullptr ? 0 : note->load(std::memory_order_acquire);
  if (noted == 0) return std::nullopt;
  const auto start = static_cast<std::uintptr_t>(noted - 1) << kGranuleShift;
  if (const std::optional<std::size_t> size_class = find(start)) return Held{start, *size_class};
  return std::nullopt;
}

LiveGranules::Slot* LiveGranules::slot(std::uintptr_t offset) const noexcept {
  // Allocations start on granule boundaries; any other offset is inside one, or outside all.
  if ((offset & ((std::uintptr_t{1} << kGranuleShift) - 1)) != 0) return nullptr;
  const std::size_t granule = offset >> kGranuleShift;
  const std::size_t page = granule >> kPageShift;
  if (page >= published_.size()) return nullptr;
  Slot* const slots = published_[page].load(std::memory_order_acquire);
  return slots == nullptr ? nullptr : &slots[granule & (kPageSlots - 1)];
}

void LiveGranules::mark(std::uintptr_t offset, std::size_t size_class, std::size_t bytes) noexcept {
  constexpr std::uintptr_t kSpan = std::uintptr_t{1} << kSpanShift;
  const std::uint64_t noted = (offset >> kGranuleShift) + 1;
  for (std::uintptr_t span = (offset | (kSpan - 1)) + 1; span < offset + bytes; span += kSpan) {
    span_note(span)->store(noted, std::memory_order_relaxed);
  }
  // The release publishes the notes with the block.
  slot(offset)->store(static_cast<std::uint16_t>(size_class + 1), std::memory_order_release);
}

std::optional<std::size_t> LiveGranules::take(std::uintptr_t offset) noexcept {
  Slot* const found = slot(offset);
  if (found == nullptr) return std::nullopt;
  // One exchange, not a load and a store: of two racing frees of one block, only one succeeds.
  const std::uint16_t value = found->exchange(0, std::memory_order_acq_rel);
  if (value == 0) return std::nullopt;
  return std::size_t{value} - 1;
}

std::optional<std::size_t> LiveGranules::find(std::uintptr_t offset) const noexcept {
  const Slot* const found = slot(offset);
  const std::uint16_t value = found == nullptr ? 0 : found->load(std::memory_order_acquire);
  if (value == 0) return std::nullopt;
  return std::size_t{value} - 1;
}

std::size_t LiveGranules::count() const noexcept {
  std::size_t live = 0;
  for (const std::unique_ptr<Slot[]>& page : owned_) {
    if (!page) continue;
    for (std::size_t index = 0; index < kPageSlots; ++index) {
      if (page[index].load(std::memory_order_relaxed) != 0) ++live;
    }
  }
  return live;
}

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

std::size_t pool_class_bytes_at(std::size_t size_class) noexcept {
  if (size_class == 0) return kMinimumClass;
  const std::size_t lower = std::size_t{1} << (size_class / kClassesPerDoubling - 1);
  const std::size_t step = std::max(kMinimumClass, lower / kClassesPerDoubling);
  return lower + (size_class % kClassesPerDoubling + 1) * step;
}

hipError_t MemoryPool::create(Runtime& runtime, const hipMemPoolProps& properties, std::shared_ptr<MemoryPool>* out) {
  hipMemAllocationProp chunk_properties{};
  chunk_properties.type = hipMemAllocationTypePinned;
  chunk_properties.location = properties.location;
  std::size_t granularity = 0;
  std::size_t minimum = 0;
  if (const hipError_t error =
          runtime.granularity(&granularity, &chunk_properties, hipMemAllocationGranularityRecommended);
      error != hipSuccess) {
    return error;
  }
  if (const hipError_t error = runtime.granularity(&minimum, &chunk_properties, hipMemAllocationGranularityMinimum);
      error != hipSuccess) {
    return error;
  }
  std::size_t chunk_bytes = round_up(kDefaultChunkBytes, granularity);
  std::size_t virtual_bytes = kDefaultVirtualBytes;
  if (properties.maxSize != 0) {
    // The pool's range is its cap: it can never map more. Memory is mapped in whole pages, so the
    // cap is maxSize rounded up to one; a maxSize too close to SIZE_MAX to round is refused.
    if (properties.maxSize > SIZE_MAX - (minimum - 1)) return hipErrorInvalidValue;
    virtual_bytes = round_up(properties.maxSize, minimum);
    chunk_bytes = chunk_bytes_within(virtual_bytes, minimum);
  }
  void* base = nullptr;
  if (const hipError_t error = runtime.reserve(&base, virtual_bytes, 0, nullptr, 0, Holder::runtime);
      error != hipSuccess) {
    // Only an address range was asked for: one that cannot be had means a maxSize beyond reach.
    return properties.maxSize != 0 ? hipErrorInvalidValue : error;
  }
  Rollback unreserve{[&] { (void)runtime.free_reservation(base, virtual_bytes, Holder::runtime); }};
  *out = std::make_shared<MemoryPool>(runtime, properties, chunk_bytes, virtual_bytes, base);
  unreserve.keep();
  return hipSuccess;
}

MemoryPool::MemoryPool(Runtime& runtime, const hipMemPoolProps& properties, std::size_t chunk_bytes,
                       std::size_t virtual_bytes, void* base)
    : runtime_(runtime),
      properties_(properties),
      chunk_bytes_(chunk_bytes),
      virtual_bytes_(virtual_bytes),
      base_(reinterpret_cast<std::uintptr_t>(base)),
      serial_(next_pool_serial.fetch_add(1, std::memory_order_relaxed)),
      live_(virtual_bytes),
      access_(runtime.device_count(), properties.location.id),
      chunks_(virtual_bytes / chunk_bytes, chunk_bytes) {
  add_hole(0, virtual_bytes_);
}

MemoryPool::~MemoryPool() {
  // Streams that outlive the pool would otherwise keep it in their lists of pools to trim.
  for (const std::unique_ptr<StreamFreeList>& list : free_lists_) {
    if (const std::shared_ptr<Stream> stream = list->freeing_stream()) stream->forget_pool(serial_);
  }
  runtime_.streams().forget_pool(serial_);
  chunks_.let_go_all([this](std::size_t chunk) { unmap_chunk(chunk); });
  (void)runtime_.free_reservation(reinterpret_cast<void*>(base_), virtual_bytes_, Holder::runtime);
}

hipError_t MemoryPool::allocate(std::size_t bytes, const std::shared_ptr<Stream>& stream, PoolGrant* grant) {
  // Never fits, and would overflow the size classes.
  if (bytes > virtual_bytes_) return hipErrorOutOfMemory;
  const std::size_t size_class = class_of(bytes);
  PoolUsage::enroll_calling_thread();
  StreamFreeList& own = free_list_of(stream);
  std::optional<std::uintptr_t> offset = take_newest(own, size_class);
  if (!offset) {
    std::uintptr_t found = 0;
    std::lock_guard lock{mutex_};
    if (const hipError_t error = allocate_locked(size_class, own, stream, grant, &found); error != hipSuccess) {
      return error;
    }
    offset = found;
  }
  live_.mark(*offset, size_class, block_bytes(size_class));
  usage_.add(block_bytes(size_class));
  grant->address = base_ + *offset;
  return hipSuccess;
}

std::size_t MemoryPool::class_of(std::size_t bytes) const noexcept {
  const std::size_t class_bytes = pool_class_bytes(bytes);
  // A pool of maxSize must hold one allocation of that size, which its class may not fit.
  return class_bytes <= virtual_bytes_ ? pool_class_index(class_bytes) : StreamFreeList::kWholePoolClass;
}

std::size_t MemoryPool::block_bytes(std::size_t size_class) const noexcept {
  return size_class == StreamFreeList::kWholePoolClass ? virtual_bytes_ : pool_class_bytes_at(size_class);
}

StreamFreeList& MemoryPool::free_list_of(const std::shared_ptr<Stream>& stream) {
  FreeListMemos& memos = free_list_memos;
  for (const FreeListMemo& memo : memos.entries) {
    if (memo.pool == serial_ && memo.stream == stream->serial()) return *memo.list;
  }
  StreamFreeList* list = nullptr;
  {
    std::lock_guard lock{mutex_};
    list = &free_list_locked(stream);
  }
  memos.entries[memos.next++ % memos.entries.size()] =
      FreeListMemo{.pool = serial_, .stream = stream->serial(), .list = list};
  return *list;
}

StreamFreeList& MemoryPool::free_list_locked(const std::shared_ptr<Stream>& stream) {
  for (const std::unique_ptr<StreamFreeList>& list : free_lists_) {
    if (list->serial == stream->serial()) return *list;
  }
  // A program that makes a stream per task would otherwise pile up the lists of destroyed ones.
  adopt_lists_of_destroyed_streams();
  // Once per stream and pool, not per free: the stream's synchronisation trims this pool.
  stream->note_pool({.base = base_, .serial = serial_});
  return *free_lists_.emplace_back(std::make_unique<StreamFreeList>(stream));
}

hipError_t MemoryPool::allocate_locked(std::size_t size_class, StreamFreeList& own,
                                       const std::shared_ptr<Stream>& stream, PoolGrant* grant,
                                       std::uintptr_t* offset) {
  // Another thread using this stream may have freed a block of the class since the first look.
  if (const std::optional<std::uintptr_t> mine = take_newest(own, size_class)) {
    *offset = *mine;
    return hipSuccess;
  }
  adopt_lists_of_destroyed_streams();
  if (std::vector<std::uintptr_t>& unowned = unowned_[size_class]; !unowned.empty()) {
    *offset = unowned.back();
    unowned.pop_back();
    return hipSuccess;
  }
  if (take_from_other_streams(size_class, stream, grant, offset)) return hipSuccess;
  hipError_t error = carve(block_bytes(size_class), offset);
  // Free blocks of other sizes kept for reuse may hold the range or the memory this one needs:
  // those no stream can still touch go, as a trim would let them, and the carve is tried again.
  if (error == hipErrorOutOfMemory && trim_locked(0)) error = carve(block_bytes(size_class), offset);
  return error;
}

bool MemoryPool::take_from_other_streams(std::size_t size_class, const std::shared_ptr<Stream>& stream,
                                         PoolGrant* grant, std::uintptr_t* offset) {
  StreamFreeList* waitable = nullptr;
  for (const std::unique_ptr<StreamFreeList>& list : free_lists_) {
    if (list->stream == stream.get()) continue;
    // Null when destroyed meanwhile: all of its work, and so every free queued on it, has happened.
    const std::shared_ptr<Stream> freeing = list->freeing_stream();
    const std::uint64_t known = freeing && attributes_.follow_event_dependencies ? stream->known_point(*freeing) : 0;
    const auto usable = [&](const StreamFreeList::Block& block) {
      if (!freeing) return true;
      if (attributes_.follow_event_dependencies && known >= block.point) return true;
      return attributes_.allow_opportunistic && freeing->reached(block.point);
    };
    std::lock_guard lock{list->lock};
    std::vector<StreamFreeList::Block>& blocks = list->by_class[size_class];
    // Most recently freed first: its pages are the likeliest to be warm.
    if (const auto found = std::find_if(blocks.rbegin(), blocks.rend(), usable); found != blocks.rend()) {
      *offset = found->offset;
      blocks.erase(std::next(found).base());
      return true;
    }
    if (waitable == nullptr && !blocks.empty()) waitable = list.get();
  }
  if (waitable == nullptr || !attributes_.allow_internal_dependencies) return false;
  // The allocating stream waits for the free; null when destroyed: nothing left to wait for.
  std::shared_ptr<Stream> freeing = waitable->freeing_stream();
  std::lock_guard lock{waitable->lock};
  std::vector<StreamFreeList::Block>& blocks = waitable->by_class[size_class];
  if (blocks.empty()) return false;  // its own stream took it back meanwhile
  grant->wait_stream = std::move(freeing);
  grant->wait_point = blocks.back().point;
  *offset = blocks.back().offset;
  blocks.pop_back();
  return true;
}

void MemoryPool::adopt_lists_of_destroyed_streams() {
  const auto adoptable = [](const std::unique_ptr<StreamFreeList>& list) {
    return !list->immortal && list->owner.expired();
  };
  // Its stream finished all of its work before going, so the blocks are free for anyone. Room for
  // them first: past this point nothing allocates, so a lack of memory leaves every list as it was.
  std::vector<StreamFreeList*> adopting;
  std::array<std::size_t, kClassCount> blocks{};
  for (const std::unique_ptr<StreamFreeList>& list : free_lists_) {
    if (!adoptable(list)) continue;
    adopting.push_back(list.get());
    // The lock orders this after the last free pushed onto the list.
    std::lock_guard lock{list->lock};
    for (std::size_t size_class = 0; size_class < kClassCount; ++size_class) {
      blocks[size_class] += list->by_class[size_class].size();
    }
  }
  if (adopting.empty()) return;
  for (std::size_t size_class = 0; size_class < kClassCount; ++size_class) {
    unowned_[size_class].reserve(unowned_[size_class].size() + blocks[size_class]);
  }
  std::erase_if(free_lists_, [&](const std::unique_ptr<StreamFreeList>& list) {
    if (std::find(adopting.begin(), adopting.end(), list.get()) == adopting.end()) return false;
    std::lock_guard lock{list->lock};
    for (std::size_t size_class = 0; size_class < kClassCount; ++size_class) {
      for (const StreamFreeList::Block& block : list->by_class[size_class])
        unowned_[size_class].push_back(block.offset);
    }
    return true;
  });
}

bool MemoryPool::free(std::uintptr_t address, const std::shared_ptr<Stream>& stream) {
  if (!owns(address)) return false;
  const std::uintptr_t offset = address - base_;
  const std::optional<std::size_t> size_class = stream ? free_to_stream(offset, stream) : free_to_pool(offset);
  if (!size_class) return false;
  // Last, and with release: once drained() sees the pool empty, the block is where
  // pending_free_streams() looks.
  usage_.remove(block_bytes(*size_class));
  return true;
}

// Both make room in the list the block goes to before it stops being live, so that a lack of memory
// leaves it live (and the free refused) rather than neither live nor listed.
std::optional<std::size_t> MemoryPool::free_to_stream(std::uintptr_t offset, const std::shared_ptr<Stream>& stream) {
  const std::optional<std::size_t> live_class = live_.find(offset);
  if (!live_class) return std::nullopt;
  StreamFreeList& own = free_list_of(stream);
  // The block is reused once the stream reaches this point, which the queue must then mark.
  stream->mark_tail();
  const std::uint64_t point = stream->tail();
  std::lock_guard lock{own.lock};
  std::vector<StreamFreeList::Block>& blocks = own.by_class[*live_class];
  blocks.reserve(blocks.size() + 1);
  const std::optional<std::size_t> size_class = live_.take(offset);
  // Another class only where the application frees a block another thread frees and reallocates.
  if (size_class) own.by_class[*size_class].push_back({.offset = offset, .point = point});
  return size_class;
}

std::optional<std::size_t> MemoryPool::free_to_pool(std::uintptr_t offset) {
  const std::optional<std::size_t> live_class = live_.find(offset);
  if (!live_class) return std::nullopt;
  std::lock_guard lock{mutex_};
  unowned_[*live_class].reserve(unowned_[*live_class].size() + 1);
  const std::optional<std::size_t> size_class = live_.take(offset);
  if (size_class) unowned_[*size_class].push_back(offset);
  return size_class;
}

std::vector<std::shared_ptr<Stream>> MemoryPool::pending_free_streams() const {
  std::vector<std::shared_ptr<Stream>> pending;
  std::lock_guard lock{mutex_};
  for (const std::unique_ptr<StreamFreeList>& list : free_lists_) {
    std::shared_ptr<Stream> freeing = list->freeing_stream();
    if (!freeing) continue;
    std::lock_guard list_lock{list->lock};
    const bool waiting = std::any_of(list->by_class.begin(), list->by_class.end(), [&](const auto& blocks) {
      return std::any_of(blocks.begin(), blocks.end(),
                         [&](const StreamFreeList::Block& block) { return !freeing->reached(block.point); });
    });
    if (waiting) pending.push_back(std::move(freeing));
  }
  return pending;
}

// Nothing that can fail comes after the chunks are backed: the block's page of the live table is
// made first, and the hole's remainder reuses the hole's own nodes.
hipError_t MemoryPool::carve(std::size_t bytes, std::uintptr_t* offset) {
  const auto hole = holes_by_size_.lower_bound({bytes, 0});
  if (hole == holes_by_size_.end()) return hipErrorOutOfMemory;
  const auto [hole_bytes, hole_offset] = *hole;
  live_.prepare(hole_offset, bytes);
  if (const hipError_t error = chunks_.add(
          hole_offset, bytes, [this](std::size_t chunk) { return map_chunk(chunk); },
          [this](std::size_t chunk) { unmap_chunk(chunk); });
      error != hipSuccess) {
    return error;
  }
  attributes_.reserved_high = std::max<std::uint64_t>(attributes_.reserved_high, chunks_.backed_bytes());
  auto by_size = holes_by_size_.extract(hole);
  auto by_offset = holes_.extract(hole_offset);
  if (hole_bytes > bytes) {
    by_size.value() = {hole_bytes - bytes, hole_offset + bytes};
    by_offset.key() = hole_offset + bytes;
    by_offset.mapped() = hole_bytes - bytes;
    holes_by_size_.insert(std::move(by_size));
    holes_.insert(std::move(by_offset));
  }
  *offset = hole_offset;
  return hipSuccess;
}

// The hole first: if it cannot be booked, the block stays carved and backed, as it was.
void MemoryPool::uncarve(std::uintptr_t offset, std::size_t bytes) {
  add_hole(offset, bytes);
  chunks_.remove(offset, bytes, [this](std::size_t chunk) { unmap_chunk(chunk); });
}

// All or nothing: a neighbouring hole's nodes are reused for the merged one; only a hole with no
// neighbour allocates, and then before anything changes.
void MemoryPool::add_hole(std::uintptr_t offset, std::size_t bytes) {
  const auto next = holes_.lower_bound(offset);
  const bool joins_next = next != holes_.end() && next->first == offset + bytes;
  const bool joins_previous = next != holes_.begin() && std::prev(next)->first + std::prev(next)->second == offset;
  if (!joins_next && !joins_previous) {
    const auto added = holes_.emplace(offset, bytes).first;
    Rollback unbook{[&] { holes_.erase(added); }};
    holes_by_size_.emplace(bytes, offset);
    unbook.keep();
    return;
  }
  std::uintptr_t start = offset;
  std::size_t total = bytes;
  decltype(holes_)::node_type by_offset;
  decltype(holes_by_size_)::node_type by_size;
  if (joins_previous) {
    const auto previous = std::prev(next);
    start = previous->first;
    total += previous->second;
    by_size = holes_by_size_.extract({previous->second, previous->first});
    by_offset = holes_.extract(previous);
  }
  if (joins_next) {
    total += next->second;
    if (by_offset.empty()) {
      by_size = holes_by_size_.extract({next->second, next->first});
      by_offset = holes_.extract(next);
    } else {
      holes_by_size_.erase({next->second, next->first});
      holes_.erase(next);
    }
  }
  by_offset.key() = start;
  by_offset.mapped() = total;
  by_size.value() = {total, start};
  holes_.insert(std::move(by_offset));
  holes_by_size_.insert(std::move(by_size));
}

hipError_t MemoryPool::map_chunk(std::size_t chunk) {
  hipMemAllocationProp chunk_properties{};
  chunk_properties.type = hipMemAllocationTypePinned;
  chunk_properties.location = properties_.location;
  // An exportable pool hands its chunks to other processes one by one, as POSIX fds.
  chunk_properties.requestedHandleType = properties_.handleTypes;
  hipMemGenericAllocationHandle_t handle = nullptr;
  if (const hipError_t error = runtime_.create(&handle, chunk_bytes_, &chunk_properties, 0); error != hipSuccess) {
    return error;
  }
  return access_.map_chunk(runtime_, reinterpret_cast<void*>(base_ + chunk * chunk_bytes_), chunk_bytes_, handle);
}

void MemoryPool::unmap_chunk(std::size_t chunk) {
  (void)runtime_.unmap(reinterpret_cast<void*>(base_ + chunk * chunk_bytes_), chunk_bytes_, Holder::runtime);
}

void MemoryPool::trim_to(std::size_t keep_bytes) {
  std::lock_guard lock{mutex_};
  (void)trim_locked(keep_bytes);
}

bool MemoryPool::trim_locked(std::size_t keep_bytes) {
  if (chunks_.backed_bytes() <= keep_bytes) return false;
  adopt_lists_of_destroyed_streams();
  // Memory whose free its stream has not yet reached may still be in use there: only the rest goes.
  // Taken out of the lists while they are locked, so no allocation can take a block being released.
  struct Releasable {
    std::uintptr_t offset = 0;
    std::size_t size_class = 0;
    StreamFreeList* list = nullptr;  // null: unowned
    std::uint64_t point = 0;
  };
  // Blocks go back where they came from, into room their lists still have, if anything throws
  // from here on: those collected so far while collecting, or from the one whose uncarve threw (an
  // uncarve that throws leaves its block carved). A stream's list may have used its room for frees
  // meanwhile: a block that then finds no room stays out of every list, its range lost to the pool
  // until it is destroyed, but never handed out twice.
  std::vector<Releasable> releasable;
  const auto keep = [&](const Releasable& block) {
    if (block.list == nullptr) {
      unowned_[block.size_class].push_back(block.offset);
    } else {
      std::lock_guard list_lock{block.list->lock};
      block.list->by_class[block.size_class].push_back({.offset = block.offset, .point = block.point});
    }
  };
  std::size_t next = 0;
  Rollback keep_the_rest{[&] {
    for (; next < releasable.size(); ++next) {
      try {
        keep(releasable[next]);
      } catch (const std::bad_alloc&) {
      }
    }
  }};
  std::size_t unowned_count = 0;
  for (const std::vector<std::uintptr_t>& blocks : unowned_) unowned_count += blocks.size();
  releasable.reserve(unowned_count);
  for (std::size_t size_class = 0; size_class < kClassCount; ++size_class) {
    for (const std::uintptr_t offset : unowned_[size_class]) releasable.push_back({offset, size_class, nullptr, 0});
    unowned_[size_class].clear();
  }
  for (const std::unique_ptr<StreamFreeList>& list : free_lists_) {
    const std::shared_ptr<Stream> freeing = list->freeing_stream();
    std::lock_guard list_lock{list->lock};
    // Room for all of the list's blocks before any leaves it, so that none is taken half-way.
    std::size_t listed = 0;
    for (const std::vector<StreamFreeList::Block>& blocks : list->by_class) listed += blocks.size();
    releasable.reserve(releasable.size() + listed);
    for (std::size_t size_class = 0; size_class < kClassCount; ++size_class) {
      std::erase_if(list->by_class[size_class], [&](const StreamFreeList::Block& block) {
        if (freeing && !freeing->reached(block.point)) return false;
        releasable.push_back({block.offset, size_class, list.get(), block.point});
        return true;
      });
    }
  }
  // Highest addresses first, so the pool shrinks from its top and low chunks stay warm.
  std::sort(releasable.begin(), releasable.end(),
            [](const Releasable& left, const Releasable& right) { return left.offset > right.offset; });
  bool released_any = false;
  for (; next < releasable.size(); ++next) {
    const Releasable& block = releasable[next];
    const std::size_t bytes = block_bytes(block.size_class);
    const std::uint64_t reserved = chunks_.backed_bytes();
    // The pool keeps at least `keep_bytes` reserved; what stays goes back where it came from.
    if (reserved > keep_bytes && reserved - chunks_.bytes_let_go_by(block.offset, bytes) >= keep_bytes) {
      uncarve(block.offset, bytes);
      released_any = true;
    } else {
      keep(block);
    }
  }
  keep_the_rest.keep();
  return released_any;
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
    case hipMemPoolAttrReleaseThreshold: attributes_.release_threshold = as_u64(); return hipSuccess;
    // The high-water marks can only be reset, to the current value.
    case hipMemPoolAttrReservedMemHigh:
      if (as_u64() != 0) return hipErrorInvalidValue;
      attributes_.reserved_high = chunks_.backed_bytes();
      return hipSuccess;
    case hipMemPoolAttrUsedMemHigh:
      if (as_u64() != 0) return hipErrorInvalidValue;
      usage_.reset_high();
      return hipSuccess;
    default: return hipErrorInvalidValue;  // the current values are read-only
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
    case hipMemPoolAttrReservedMemCurrent: put_u64(chunks_.backed_bytes()); break;
    case hipMemPoolAttrReservedMemHigh: put_u64(attributes_.reserved_high); break;
    case hipMemPoolAttrUsedMemCurrent: put_u64(usage_.current()); break;
    case hipMemPoolAttrUsedMemHigh: put_u64(usage_.high()); break;
    default: return hipErrorInvalidValue;
  }
  return hipSuccess;
}

hipError_t MemoryPool::set_access(const hipMemAccessDesc* descriptors, std::size_t count) {
  if (const hipError_t error = access_.check(descriptors, count); error != hipSuccess) return error;
  std::lock_guard lock{mutex_};
  return access_.set(runtime_, {descriptors, count}, chunks_.counts(), base_, chunk_bytes_);
}

hipMemAccessFlags MemoryPool::access(int device) const {
  std::lock_guard lock{mutex_};
  return access_.of(device);
}

bool MemoryPool::is_live(std::uintptr_t address) const {
  return owns(address) && live_.find(address - base_).has_value();
}

std::size_t MemoryPool::live_bytes(std::uintptr_t address) const {
  const std::optional<std::size_t> size_class = owns(address) ? live_.find(address - base_) : std::nullopt;
  return size_class ? block_bytes(*size_class) : 0;
}

bool MemoryPool::within_one_allocation(std::uintptr_t address, std::size_t bytes) const noexcept {
  if (!owns(address) || bytes > virtual_bytes_ - (address - base_)) return false;
  const std::uintptr_t offset = address - base_;
  const std::optional<LiveGranules::Held> held = live_.nearest_at_or_before(offset);
  return held && offset + bytes <= held->start + block_bytes(held->size_class);
}

std::size_t MemoryPool::live_allocations() const {
  std::lock_guard lock{mutex_};
  return live_.count();
}

}  // namespace hipxx::core
