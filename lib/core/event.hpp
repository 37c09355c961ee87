// Events: a marker placed in a stream. Each record starts a new marker, so queries and waits see
// the latest record only, as HIP specifies. An interprocess event keeps its records where every
// process that holds it sees them instead (SharedEventState).
#pragma once

#include "core/handle_numbers.hpp"
#include "core/stream.hpp"

#include <hipxx/hip_runtime_api.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace hipxx::core {

struct EventMarker {
  EventMarker(const std::shared_ptr<Stream>& where, int on_device)
      : null_stream(where->traits().is_null ? where.get() : nullptr), stream(where), device(on_device) {}

  // The stream while it exists. A destroyed stream finished its work first, so its markers are
  // reached; holding it weakly lets its worker thread go when the application destroys it.
  [[nodiscard]] std::shared_ptr<Stream> owner() const {
    if (null_stream != nullptr) return {std::shared_ptr<Stream>{}, null_stream};  // lives for the process
    return stream.lock();
  }
  // The stream's own count, also with a device timestamp: a record held back behind host work is
  // not on the device yet, where the timestamp would read as passed.
  [[nodiscard]] bool reached() const {
    const std::shared_ptr<Stream> where = owner();
    return !where || where->reached(sequence);
  }
  void wait() const {
    if (const std::shared_ptr<Stream> where = owner()) where->wait_for(sequence);
  }
  // Whether the record's stream is on a queue the device gave up on, where it is never reached.
  [[nodiscard]] bool abandoned() const {
    const std::shared_ptr<Stream> where = owner();
    return where && where->abandoned();
  }
  // A failure of the stream's work up to the record, which the event reports once reached, as its
  // stream's synchronize does. A destroyed stream's failures went with it.
  [[nodiscard]] hipError_t failure() const {
    const std::shared_ptr<Stream> where = owner();
    return where ? where->failure_through(sequence) : hipSuccess;
  }

  Stream* null_stream;
  std::weak_ptr<Stream> stream;
  int device;
  std::uint64_t sequence = 0;
  std::chrono::steady_clock::time_point reached_at;  // written by the stream before `sequence` completes
  // Set where the stream has a device queue: the event's own device timestamp, recorded there. It
  // stands for the event's latest record, which is this marker for as long as the event shows it.
  std::shared_ptr<backend::Timestamp> timestamp;
  // Which of the event's records this is, in the order hipEventRecord took them.
  std::uint64_t generation = 0;
};

// The records of an interprocess event, in a memfd that each process holding the event maps. A
// record, in any process, takes the next number when it is made, and is reached once its stream gets
// there. Records on different streams are reached in any order, so each is tracked on its own: the
// event stands for its newest record, as a local event does, and a stream wait for the record that
// was newest when it was queued ends when that record is reached, not a later one. Every record up to
// `settled` is reached; those after it have a slot each (record n in slot n % kSlots, which n takes
// once record n - kSlots is settled), holding who took it and whether it was reached. A record whose
// process is gone (killed, or a forked child that exited) counts as reached, so that it holds
// nothing up for ever. The creating process keeps the memfd's descriptor, which a handle names for
// other processes to open (backend/named_memfd.hpp); the mapping stays while any record of this
// process is still to be reached.
class SharedEventState {
  struct Records;
  struct Made {  // only create() and open() make one
    explicit Made() = default;
  };

 public:
  SharedEventState(Made /*made*/, Records* records, int fd, std::uint64_t serial) noexcept
      : records_(records), fd_(fd), serial_(serial) {}
  SharedEventState(const SharedEventState&) = delete;
  SharedEventState& operator=(const SharedEventState&) = delete;
  SharedEventState(SharedEventState&&) = delete;
  SharedEventState& operator=(SharedEventState&&) = delete;
  ~SharedEventState();

  // A new event's records, made in this process (hipEventInterprocess).
  [[nodiscard]] static hipError_t create(std::shared_ptr<SharedEventState>* out);
  // The records a handle from another process names: hipErrorInvalidContext for this process's own
  // handle, hipErrorInvalidValue for bytes that name no live event.
  [[nodiscard]] static hipError_t open(const hipIpcEventHandle_t& handle, std::shared_ptr<SharedEventState>* out);
  [[nodiscard]] hipIpcEventHandle_t handle() const noexcept;

  // The next record's number, its slot taken for this process (waiting, where every slot is held
  // by a record not yet settled, until the oldest is).
  [[nodiscard]] std::uint64_t take_record();
  void reach(std::uint64_t record) noexcept;
  [[nodiscard]] std::uint64_t newest() const noexcept;
  // Whether `record` was reached, or its process is gone.
  [[nodiscard]] bool reached(std::uint64_t record) const;
  void wait_for(std::uint64_t record) const;

  static constexpr std::size_t kSlots = 1024;

 private:
  struct Slot {
    // The record that took the slot last and its process's pid, in one word (claim_of): a record is
    // claimed before its number is taken, so a process that dies at any point leaves a record that
    // names it, which counts as reached once it is gone.
    std::atomic<std::uint64_t> claim;
    std::atomic<std::uint64_t> done;  // the record reached in it last
  };
  struct Records {
    std::atomic<std::uint64_t> taken;
    std::atomic<std::uint64_t> settled;
    std::array<Slot, kSlots> slots;
  };
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared between processes");
  // A pid takes at most 22 bits (Linux's PID_MAX_LIMIT); the record number the other 42.
  static constexpr unsigned kPidBits = 22;
  [[nodiscard]] static constexpr std::uint64_t claim_of(std::uint64_t record, std::uint64_t pid) noexcept {
    return (record << kPidBits) | pid;
  }
  [[nodiscard]] static constexpr std::uint64_t claimed_record(std::uint64_t claim) noexcept {
    return claim >> kPidBits;
  }
  [[nodiscard]] static constexpr std::int64_t claiming_process(std::uint64_t claim) noexcept {
    return static_cast<std::int64_t>(claim & ((std::uint64_t{1} << kPidBits) - 1));
  }

  [[nodiscard]] Slot& slot_of(std::uint64_t record) const noexcept { return records_->slots[record % kSlots]; }
  // Reached, without asking whether its process lives.
  [[nodiscard]] bool reached_here(std::uint64_t record) const noexcept;
  // Moves `settled` past every record reached or abandoned right after it.
  void settle() const;

  Records* records_;
  int fd_;  // the creator's descriptor of the memfd; -1 in a process that opened a handle
  std::uint64_t serial_;
};

class Event {
 public:
  explicit Event(unsigned flags, std::shared_ptr<SharedEventState> shared = nullptr)
      : flags_(flags), shared_(std::move(shared)) {}
  [[nodiscard]] unsigned flags() const noexcept { return flags_; }
  [[nodiscard]] bool timing() const noexcept { return (flags_ & hipEventDisableTiming) == 0; }
  // Set for an interprocess event, made here or opened from another process's handle.
  [[nodiscard]] const std::shared_ptr<SharedEventState>& shared() const noexcept { return shared_; }

  // The number of the next record, taken when hipEventRecord is called.
  [[nodiscard]] std::uint64_t next_generation() noexcept { return generations_.fetch_add(1) + 1; }
  // Shows `marker` unless a later record is shown already (two threads recording at once).
  void set_marker(std::shared_ptr<EventMarker> marker);
  [[nodiscard]] std::shared_ptr<EventMarker> marker() const;
  // Records record `generation` in `timestamp` on `queue`, unless a later record of the event is on
  // a device queue already. A record held back behind a stream's host work reaches its queue when
  // that work is done, possibly after a later record went straight onto another stream's queue:
  // recorded then, it would take the timestamp back from the later record, and the event's waits
  // and elapsed times would follow the earlier one.
  [[nodiscard]] hipError_t record_unless_superseded(backend::Queue& queue, backend::Timestamp& timestamp,
                                                    std::uint64_t generation);
  // The event's device timestamp on `device`, made by `make` the first time (or after a record on
  // another device). Null if `make` fails.
  template <class Make>
  [[nodiscard]] std::shared_ptr<backend::Timestamp> timestamp_on(int device, Make&& make) {
    std::lock_guard lock{mutex_};
    if (!timestamp_ || timestamp_device_ != device) {
      timestamp_ = make();
      timestamp_device_ = device;
    }
    return timestamp_;
  }

  [[nodiscard]] hipError_t query() const;
  // Waits for the latest record; hipSuccess, or the failure of the stream it was recorded on.
  [[nodiscard]] hipError_t synchronize() const;

 private:
  unsigned flags_;
  std::shared_ptr<SharedEventState> shared_;
  mutable std::mutex mutex_;
  std::shared_ptr<EventMarker> marker_;
  std::shared_ptr<backend::Timestamp> timestamp_;
  int timestamp_device_ = -1;
  std::atomic<std::uint64_t> generations_{0};
  // Held across the driver's record, so that two records reach their queues in the order checked.
  std::mutex record_mutex_;
  std::uint64_t newest_on_queue_ = 0;
};

class EventRegistry {
 public:
  [[nodiscard]] hipError_t create(hipEvent_t* event, unsigned flags);
  // Names an event opened from another process's handle.
  [[nodiscard]] hipError_t adopt(hipEvent_t* event, std::shared_ptr<Event> opened);
  [[nodiscard]] hipError_t destroy(hipEvent_t event);
  [[nodiscard]] std::shared_ptr<Event> resolve(hipEvent_t event) const;
  [[nodiscard]] std::size_t live_events() const;

 private:
  mutable std::mutex mutex_;
  HandleNumbers numbers_{HandleKind::event, 0x6000};
  std::unordered_map<std::uintptr_t, std::shared_ptr<Event>> events_;
};

// The elapsed time between two completed markers, in milliseconds.
[[nodiscard]] hipError_t elapsed_milliseconds(const Event& start, const Event& stop, float* milliseconds);

}  // namespace hipxx::core
