// The exporting side of pool sharing: one thread per process that answers importers.
//
// hipMemPoolExportToShareableHandle hands the application one end of a fresh seqpacket socketpair;
// the broker keeps the other. Because the application may give that one descriptor to several
// processes, the only request the broker answers on it is "open a private channel", answered with
// one end of another socketpair (and the pool's layout): replies are interchangeable, so it does not
// matter which reader takes which. Everything else — the fd of chunk k — goes over a private
// channel, which only its one importer reads.
//
// The broker closes its end of any socket whose peer hung up, so an importer that dies (even by
// SIGKILL) or an exported descriptor closed everywhere leaves nothing open in the exporter. It
// holds pools weakly: a pool destroyed and drained answers with an error, and keeps nothing alive.
// It keeps at most a quarter of the process's descriptors (its soft limit) as channels: importers
// that open more, and keep them, are refused with hipErrorOutOfMemory, so that they cannot take the
// descriptors the exporter's own allocations need.
#pragma once

#include "core/pool_wire.hpp"

#include <poll.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace hipxx::core {

class MemoryPool;
class Runtime;

class PoolBroker {
 public:
  // Starts the thread. Throws std::system_error where no thread or wake-up descriptor can be made.
  explicit PoolBroker(Runtime& runtime);
  PoolBroker(const PoolBroker&) = delete;
  PoolBroker& operator=(const PoolBroker&) = delete;
  PoolBroker(PoolBroker&&) = delete;
  PoolBroker& operator=(PoolBroker&&) = delete;
  // Stops the thread and closes every socket it holds.
  ~PoolBroker();

  // A new exported socket for `pool`: the broker serves one end, *exported gets the other.
  [[nodiscard]] hipError_t serve(const std::shared_ptr<MemoryPool>& pool, const PoolToken& token, OwnedFd* exported);

  // Whether the broker's thread runs in this process: a child made by fork() has the object, not
  // the thread.
  [[nodiscard]] bool runs_here() const noexcept { return process_ == ::getpid(); }
  // In such a child: closes the descriptors the object holds that the child can reach (its wake-up
  // eventfd, shared with the parent's, and sockets not yet handed to the thread), and nothing else.
  // The object must then be left alone: destroying it would join a thread that is not there.
  void abandon_after_fork() noexcept;

 private:
  enum class Kind { exported, channel };
  struct Entry {
    OwnedFd socket;
    Kind kind = Kind::exported;
    std::weak_ptr<MemoryPool> pool;
    PoolToken token;
    // An exported socket whose readers let replies pile up until no more fit: its requests are
    // read and dropped until there is room again, so a process that asks and never reads makes the
    // broker hold at most a queue's worth of channels, and the readers that do read (and so make
    // room) find those replies queued.
    bool backlogged = false;
  };

  // The thread's lists, kept from round to round.
  struct Round {
    std::vector<Entry> entries;
    std::vector<pollfd> watched;
    std::vector<bool> keep;
  };

  void run();
  // Waits for requests and answers them; false once the broker is to stop. May throw std::bad_alloc
  // only where nothing was taken in.
  [[nodiscard]] bool serve_round(Round& round);
  void wake() const noexcept;
  // Moves sockets queued by serve() into `entries`; false once the broker is to stop.
  [[nodiscard]] bool take_queued(std::vector<Entry>& entries);
  // Answers one request; false when the socket should be closed.
  [[nodiscard]] bool answer(std::vector<Entry>& entries, std::size_t index);
  [[nodiscard]] static bool open_channel(std::vector<Entry>& entries, std::size_t index);
  [[nodiscard]] static bool room_for_channel(const std::vector<Entry>& entries) noexcept;
  // Whether `entry` stays after a reply that was `sent` or not. A private channel whose reader
  // does not read is closed; an exported socket is shared, and stays (backlogged) unless its every
  // reader is gone.
  [[nodiscard]] static bool keeps(Entry& entry, bool sent) noexcept;
  [[nodiscard]] bool send_chunk(const Entry& entry, const BrokerRequest& request);

  Runtime& runtime_;
  const pid_t process_ = ::getpid();
  OwnedFd wake_;  // an eventfd: serve() and the destructor poke the thread's poll()
  std::mutex mutex_;
  std::vector<Entry> queued_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hipxx::core
