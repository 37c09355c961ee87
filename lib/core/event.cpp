#include "core/event.hpp"

#include "backend/named_memfd.hpp"
#include "backend/poll_until.hpp"
#include "core/rollback.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace hipxx::core {
namespace {

constexpr std::array<char, 8> kEventMagic{'h', 'i', 'p', 'x', 'x', 'E', 'V', 'T'};
constexpr std::uint32_t kEventHandleVersion = 2;  // 2: records claimed with their pid in one word
// Whole pages holding an event's records: what the creator sizes its memfd to, and what an importer
// finds, or refuses the file.
constexpr std::size_t kRecordsBytes = std::size_t{32} * 1024;

// Field layout inside the 64 handle bytes.
struct EventHandleFields {
  std::array<char, 8> magic;
  std::uint32_t version;
  std::int32_t pid;
  std::uint64_t process_tag;
  std::uint64_t serial;
  std::int32_t fd;
  std::uint32_t reserved;
  std::uint64_t checksum;
  std::array<std::uint8_t, 16> unused;
};
static_assert(sizeof(EventHandleFields) == sizeof(hipIpcEventHandle_t));

std::uint64_t checksum_of(const EventHandleFields& fields) {
  return backend::fnv1a(&fields, offsetof(EventHandleFields, checksum));  // everything before the checksum
}

// The unused tail lies outside the checksum, so it is checked apart.
bool well_formed(const EventHandleFields& fields) {
  return fields.magic == kEventMagic && fields.version == kEventHandleVersion &&
         fields.checksum == checksum_of(fields) && fields.pid > 0 && fields.fd >= 0 && fields.reserved == 0 &&
         fields.unused == std::array<std::uint8_t, 16>{};
}

// Drawn once per process: with the serial, it tells this process's events from those of an
// earlier process that had the same pid.
std::uint64_t event_process_tag() {
  static const std::uint64_t tag = backend::draw_process_tag();
  return tag;
}

std::string event_memfd_name(std::uint64_t process_tag, std::uint64_t serial) {
  return "hipxx-event-" + backend::hex16(process_tag) + "-" + backend::hex16(serial);
}

std::atomic<std::uint64_t> next_event_serial{1};

// A process that took a record and will never reach it: gone, or a zombie its parent has yet to reap.
bool process_gone(std::int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::array<char, 64> path{};
  (void)std::snprintf(path.data(), path.size(), "/proc/%lld/stat", static_cast<long long>(pid));
  std::array<char, 512> stat{};
  const int fd = ::open(path.data(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t length = ::read(fd, stat.data(), stat.size() - 1);
  (void)::close(fd);
  if (length <= 0) return false;
  // "pid (name) S ...": the state follows the last ')', as the name may hold one.
  const char* const name_end = std::strrchr(stat.data(), ')');
  return name_end != nullptr && (name_end[2] == 'Z' || name_end[2] == 'X');
}

}  // namespace

SharedEventState::~SharedEventState() {
  (void)munmap(records_, kRecordsBytes);
  if (fd_ >= 0) (void)::close(fd_);
}

hipError_t SharedEventState::create(std::shared_ptr<SharedEventState>* out) {
  static_assert(sizeof(Records) <= kRecordsBytes);
  const std::uint64_t serial = next_event_serial.fetch_add(1, std::memory_order_relaxed);
  const int fd = memfd_create(event_memfd_name(event_process_tag(), serial).c_str(), MFD_CLOEXEC);
  if (fd < 0) return hipErrorOutOfMemory;  // out of descriptors or memory
  void* at = MAP_FAILED;
  if (ftruncate(fd, kRecordsBytes) == 0) at = mmap(nullptr, kRecordsBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED) {
    (void)::close(fd);
    return hipErrorOutOfMemory;
  }
  // A new memfd reads as zeros: no record taken, none reached.
  Rollback release{[&] {
    (void)munmap(at, kRecordsBytes);
    (void)::close(fd);
  }};
  *out = std::make_shared<SharedEventState>(Made{}, static_cast<Records*>(at), fd, serial);
  release.keep();
  return hipSuccess;
}

hipError_t SharedEventState::open(const hipIpcEventHandle_t& handle, std::shared_ptr<SharedEventState>* out) {
  EventHandleFields fields{};
  std::memcpy(&fields, &handle, sizeof fields);
  if (!well_formed(fields)) return hipErrorInvalidValue;
  if (backend::names_this_process(fields.pid)) return hipErrorInvalidContext;
  void* const at = backend::map_peer_memfd(fields.pid, fields.fd, event_memfd_name(fields.process_tag, fields.serial),
                                           kRecordsBytes);
  if (at == MAP_FAILED) return hipErrorInvalidValue;
  Rollback unmap{[&] { (void)munmap(at, kRecordsBytes); }};
  *out = std::make_shared<SharedEventState>(Made{}, static_cast<Records*>(at), -1, fields.serial);
  unmap.keep();
  return hipSuccess;
}

hipIpcEventHandle_t SharedEventState::handle() const noexcept {
  EventHandleFields fields{};
  fields.magic = kEventMagic;
  fields.version = kEventHandleVersion;
  fields.pid = static_cast<std::int32_t>(getpid());
  fields.process_tag = event_process_tag();
  fields.serial = serial_;
  fields.fd = fd_;
  fields.checksum = checksum_of(fields);
  hipIpcEventHandle_t handle{};
  std::memcpy(&handle, &fields, sizeof handle);
  return handle;
}

std::uint64_t SharedEventState::take_record() {
  const auto self = static_cast<std::uint64_t>(getpid());
  for (;;) {
    std::uint64_t taken = records_->taken.load(std::memory_order_acquire);
    const std::uint64_t record = taken + 1;
    // The slot's last record must be settled before this one takes it over.
    if (record > kSlots && records_->settled.load(std::memory_order_acquire) < record - kSlots) {
      backend::poll_until([&] {
        settle();
        return records_->settled.load(std::memory_order_acquire) >= record - kSlots ||
               records_->taken.load(std::memory_order_acquire) != taken;
      });
      continue;
    }
    // The slot is claimed for the record first, and only its claimant moves `taken` on to it. A
    // claim of this record or a later one is another's: where this record's claimant is gone before
    // it took the number, the number is taken for it (and counts as reached, being abandoned).
    Slot& slot = slot_of(record);
    std::uint64_t previous = slot.claim.load(std::memory_order_acquire);
    if (claimed_record(previous) >= record) {
      if (claimed_record(previous) == record && process_gone(claiming_process(previous))) {
        records_->taken.compare_exchange_strong(taken, record, std::memory_order_acq_rel);
      } else {
        std::this_thread::yield();
      }
      continue;
    }
    if (!slot.claim.compare_exchange_strong(previous, claim_of(record, self), std::memory_order_acq_rel)) continue;
    records_->taken.compare_exchange_strong(taken, record, std::memory_order_acq_rel);
    return record;
  }
}

void SharedEventState::reach(std::uint64_t record) noexcept {
  slot_of(record).done.store(record, std::memory_order_release);
  settle();
}

std::uint64_t SharedEventState::newest() const noexcept { return records_->taken.load(std::memory_order_acquire); }

bool SharedEventState::reached_here(std::uint64_t record) const noexcept {
  return record <= records_->settled.load(std::memory_order_acquire) ||
         slot_of(record).done.load(std::memory_order_acquire) == record;
}

bool SharedEventState::reached(std::uint64_t record) const {
  if (reached_here(record)) return true;
  settle();  // records of processes that are gone count from here on
  return reached_here(record);
}

void SharedEventState::settle() const {
  std::uint64_t settled = records_->settled.load(std::memory_order_acquire);
  while (settled < records_->taken.load(std::memory_order_acquire)) {
    const std::uint64_t next = settled + 1;
    const Slot& slot = slot_of(next);
    const bool reached = slot.done.load(std::memory_order_acquire) == next;
    // A slot not yet taken over by `next` belongs to a record still being made: it is not abandoned.
    const std::uint64_t claim = slot.claim.load(std::memory_order_acquire);
    const bool abandoned = !reached && claimed_record(claim) == next && process_gone(claiming_process(claim));
    if (!reached && !abandoned) return;
    // Another process or thread may move it on meanwhile: then start again from where it got to.
    records_->settled.compare_exchange_weak(settled, next, std::memory_order_acq_rel);
    settled = records_->settled.load(std::memory_order_acquire);
  }
}

void SharedEventState::wait_for(std::uint64_t record) const {
  // Whether the record's process is gone is asked every few milliseconds, not at every look; one
  // poll throughout, so that a long wait keeps sleeping rather than yielding again at each ask.
  constexpr std::chrono::milliseconds kLivenessPeriod{5};
  auto next_ask = std::chrono::steady_clock::now() + kLivenessPeriod;
  backend::poll_until([&] {
    if (reached_here(record)) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_ask) return false;
    next_ask = now + kLivenessPeriod;
    return reached(record);
  });
}

void Event::set_marker(std::shared_ptr<EventMarker> marker) {
  std::lock_guard lock{mutex_};
  if (!marker_ || marker->generation > marker_->generation) marker_ = std::move(marker);
}

hipError_t Event::record_unless_superseded(backend::Queue& queue, backend::Timestamp& timestamp,
                                           std::uint64_t generation) {
  std::lock_guard lock{record_mutex_};
  // Superseded: the stream's own count still marks where the record was; nothing reads its time.
  if (generation < newest_on_queue_) return hipSuccess;
  const hipError_t recorded = queue.record(timestamp);
  if (recorded == hipSuccess) newest_on_queue_ = generation;
  return recorded;
}

std::shared_ptr<EventMarker> Event::marker() const {
  std::lock_guard lock{mutex_};
  return marker_;
}

hipError_t Event::query() const {
  if (shared_) return shared_->reached(shared_->newest()) ? hipSuccess : hipErrorNotReady;
  const std::shared_ptr<EventMarker> current = marker();
  if (!current) return hipSuccess;  // never recorded: nothing to wait for
  // A record on a queue the device gave up on is never reached: the queue's fault is the answer.
  return current->reached() || current->abandoned() ? current->failure() : hipErrorNotReady;
}

hipError_t Event::synchronize() const {
  if (shared_) {
    shared_->wait_for(shared_->newest());
    return hipSuccess;
  }
  const std::shared_ptr<EventMarker> current = marker();
  if (!current) return hipSuccess;
  current->wait();
  return current->failure();
}

hipError_t EventRegistry::create(hipEvent_t* event, unsigned flags) {
  std::shared_ptr<SharedEventState> shared;
  if ((flags & hipEventInterprocess) != 0) {
    if (const hipError_t error = SharedEventState::create(&shared); error != hipSuccess) return error;
  }
  return adopt(event, std::make_shared<Event>(flags, std::move(shared)));
}

hipError_t EventRegistry::adopt(hipEvent_t* event, std::shared_ptr<Event> opened) {
  std::lock_guard lock{mutex_};
  const std::uintptr_t id = numbers_.take();
  events_.emplace(id, std::move(opened));
  *event = reinterpret_cast<hipEvent_t>(id);
  return hipSuccess;
}

hipError_t EventRegistry::destroy(hipEvent_t event) {
  std::lock_guard lock{mutex_};
  return events_.erase(reinterpret_cast<std::uintptr_t>(event)) == 1 ? hipSuccess : hipErrorInvalidHandle;
}

std::shared_ptr<Event> EventRegistry::resolve(hipEvent_t event) const {
  std::lock_guard lock{mutex_};
  const auto found = events_.find(reinterpret_cast<std::uintptr_t>(event));
  return found == events_.end() ? nullptr : found->second;
}

std::size_t EventRegistry::live_events() const {
  std::lock_guard lock{mutex_};
  return events_.size();
}

hipError_t elapsed_milliseconds(const Event& start, const Event& stop, float* milliseconds) {
  if (!start.timing() || !stop.timing()) return hipErrorInvalidHandle;
  const std::shared_ptr<EventMarker> first = start.marker();
  const std::shared_ptr<EventMarker> second = stop.marker();
  if (!first || !second) return hipErrorInvalidHandle;
  if (!first->reached() || !second->reached()) {
    return hipErrorNotReady;
  }
  if (first->timestamp && second->timestamp) return second->timestamp->elapsed_since(*first->timestamp, milliseconds);
  if (first->timestamp || second->timestamp) return hipErrorInvalidHandle;  // a device time and a host time
  const std::chrono::duration<float, std::milli> span = second->reached_at - first->reached_at;
  *milliseconds = span.count();
  return hipSuccess;
}

}  // namespace hipxx::core
