#include "core/pool_broker.hpp"

#include "core/memory_pool.hpp"
#include "core/rollback.hpp"
#include "core/runtime.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>

namespace hipxx::core {
namespace {

PoolDescription describe(const MemoryPool& pool, const PoolToken& token) {
  return {.token = token,
          .chunk_bytes = pool.chunk_bytes(),
          .virtual_bytes = pool.virtual_bytes(),
          .device = pool.device(),
          .reserved = 0};
}

bool send_status(int socket, hipError_t status) noexcept {
  BrokerReply reply;
  reply.status = status;
  return send_message(socket, &reply, sizeof reply, -1);
}

}  // namespace

PoolBroker::PoolBroker(Runtime& runtime) : runtime_(runtime), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!wake_) throw std::system_error(errno, std::system_category(), "eventfd");
  thread_ = std::thread([this] { run(); });
}

PoolBroker::~PoolBroker() {
  {
    std::lock_guard lock{mutex_};
    stopping_ = true;
  }
  wake();
  thread_.join();
}

void PoolBroker::abandon_after_fork() noexcept {
  wake_.reset();
  // Unless a thread of the parent held the lock at the fork, which the child then never gets back.
  if (const std::unique_lock lock{mutex_, std::try_to_lock}; lock) queued_.clear();
}

void PoolBroker::wake() const noexcept {
  const std::uint64_t one = 1;
  (void)(::write(wake_.get(), &one, sizeof one) < 0);  // a full counter already means "wake up"
}

hipError_t PoolBroker::serve(const std::shared_ptr<MemoryPool>& pool, const PoolToken& token, OwnedFd* exported) {
  OwnedFd served;
  OwnedFd handed_out;
  if (!seqpacket_pair(&served, &handed_out))
    return errno == EMFILE || errno == ENFILE ? hipErrorOutOfMemory : hipErrorInvalidValue;
  {
    std::lock_guard lock{mutex_};
    queued_.push_back({.socket = std::move(served), .kind = Kind::exported, .pool = pool, .token = token});
  }
  wake();
  *exported = std::move(handed_out);
  return hipSuccess;
}

bool PoolBroker::take_queued(std::vector<Entry>& entries) {
  std::uint64_t count = 0;
  (void)(::read(wake_.get(), &count, sizeof count) < 0);
  std::lock_guard lock{mutex_};
  // Room first: the moves below cannot fail, so a throw leaves every socket queued.
  entries.reserve(entries.size() + queued_.size());
  for (Entry& entry : queued_) entries.push_back(std::move(entry));
  queued_.clear();
  return !stopping_;
}

void PoolBroker::run() {
  Round round;
  for (;;) {
    try {
      if (!serve_round(round)) return;
    } catch (const std::bad_alloc&) {
      // No memory for this round's lists. Nothing was taken in: requests stay unread in their
      // sockets, and sockets serve() queued stay queued. A moment later the next round tries again
      // (woken, as the wake-up that queued them may have been read already).
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
      wake();
    }
  }
}

bool PoolBroker::serve_round(Round& round) {
  std::vector<Entry>& entries = round.entries;
  std::vector<pollfd>& watched = round.watched;
  std::vector<bool>& keep = round.keep;
  watched.assign(1, pollfd{.fd = wake_.get(), .events = POLLIN, .revents = 0});
  for (const Entry& entry : entries) {
    const short wanted = entry.backlogged ? POLLIN | POLLOUT : POLLIN;
    watched.push_back({.fd = entry.socket.get(), .events = wanted, .revents = 0});
  }
  if (::poll(watched.data(), watched.size(), -1) < 0) return true;  // EINTR; nothing else can fail here
  // Hang-ups first, so that by the time any reply of this round is sent, every socket whose peer
  // was already gone is closed.
  keep.assign(entries.size(), true);
  for (std::size_t index = 0; index < entries.size(); ++index) {
    const short events = watched[index + 1].revents;
    if ((events & (POLLHUP | POLLERR | POLLNVAL)) != 0) keep[index] = false;
  }
  const std::size_t polled = entries.size();  // open_channel appends; new entries wait for the next round
  for (std::size_t index = 0; index < polled; ++index) {
    const short events = watched[index + 1].revents;
    if ((events & POLLOUT) != 0) entries[index].backlogged = false;  // room for replies again
    if (keep[index] && (events & POLLIN) != 0) keep[index] = answer(entries, index);
  }
  for (std::size_t index = polled; index-- > 0;) {
    if (!keep[index]) entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(index));
  }
  return (watched[0].revents & POLLIN) == 0 || take_queued(entries);
}

bool PoolBroker::answer(std::vector<Entry>& entries, std::size_t index) {
  // One byte more than a request, so a longer message shows as one (seqpacket keeps boundaries).
  std::array<unsigned char, sizeof(BrokerRequest) + 1> buffer{};
  // Descriptors a hostile sender attaches are dropped by the kernel: there is no room for them.
  Entry& entry = entries[index];
  const ssize_t got = ::recv(entry.socket.get(), buffer.data(), buffer.size(), MSG_DONTWAIT);
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  // No room for its reply: the request goes unanswered, and its asker takes one of the replies
  // already queued, which are as good (the queue is full of them).
  if (entry.backlogged) return true;
  // Hang-ups were seen before this: a length of 0 is an empty message (seqpacket has those), which
  // is refused as any other malformed request is, not taken for the end of the stream.
  BrokerRequest request;
  if (got != static_cast<ssize_t>(sizeof request))
    return keeps(entry, send_status(entry.socket.get(), hipErrorInvalidValue));
  std::memcpy(&request, buffer.data(), sizeof request);
  if (request.magic != kRequestMagic) return keeps(entry, send_status(entry.socket.get(), hipErrorInvalidValue));
  try {
    if (entry.kind == Kind::exported && request.op == BrokerOp::open_channel) return open_channel(entries, index);
    if (entry.kind == Kind::channel && request.op == BrokerOp::chunk) return send_chunk(entry, request);
  } catch (const std::bad_alloc&) {
    // The request was read: its asker is told, as for any other shortage. (open_channel may have
    // moved the entries.)
    return keeps(entries[index], send_status(entries[index].socket.get(), hipErrorOutOfMemory));
  }
  return keeps(entry, send_status(entry.socket.get(), hipErrorInvalidValue));
}

bool PoolBroker::keeps(Entry& entry, bool sent) noexcept {
  if (sent) return true;
  if (entry.kind != Kind::exported || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
  entry.backlogged = true;  // this reply is dropped, as are the next requests until there is room
  return true;
}

bool PoolBroker::room_for_channel(const std::vector<Entry>& entries) noexcept {
  // Read at each request: the application, or the host backend short of descriptors, may raise it.
  constexpr rlim_t kFewest = 16;
  constexpr rlim_t kMost = rlim_t{1} << 20;
  rlimit limit{};
  const rlim_t allowed = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                             ? std::clamp(limit.rlim_cur / 4, kFewest, kMost)
                             : kMost;
  const auto channels =
      std::count_if(entries.begin(), entries.end(), [](const Entry& entry) { return entry.kind == Kind::channel; });
  return static_cast<rlim_t>(channels) < allowed;
}

bool PoolBroker::open_channel(std::vector<Entry>& entries, std::size_t index) {
  // Room for the channel before it is handed out: once sent, it must be kept.
  entries.reserve(entries.size() + 1);
  Entry& exported = entries[index];
  const std::shared_ptr<MemoryPool> pool = exported.pool.lock();
  if (!pool) return keeps(exported, send_status(exported.socket.get(), hipErrorInvalidValue));
  if (!room_for_channel(entries)) return keeps(exported, send_status(exported.socket.get(), hipErrorOutOfMemory));
  OwnedFd kept;
  OwnedFd given;
  if (!seqpacket_pair(&kept, &given)) return keeps(exported, send_status(exported.socket.get(), hipErrorOutOfMemory));
  BrokerReply reply;
  reply.pool = describe(*pool, exported.token);
  // `given` is closed here once sent: the reader now holds the only other end. Unsent, the pair
  // goes with this function.
  if (!send_message(exported.socket.get(), &reply, sizeof reply, given.get())) return keeps(exported, false);
  // Copied out before push_back (which has room, so neither throws nor moves `exported`).
  Entry channel{.socket = std::move(kept), .kind = Kind::channel, .pool = exported.pool, .token = exported.token};
  entries.push_back(std::move(channel));
  return true;
}

bool PoolBroker::send_chunk(const Entry& entry, const BrokerRequest& request) {
  const int socket = entry.socket.get();
  const std::shared_ptr<MemoryPool> pool = entry.pool.lock();
  if (!pool || request.token != entry.token || request.chunk >= pool->virtual_bytes() / pool->chunk_bytes()) {
    return send_status(socket, hipErrorInvalidValue);
  }
  // Exported in the pool's device's context (this thread's current device is its own to set).
  (void)runtime_.set_current_device(pool->device());
  // The chunk's physical allocation, found by address as hipMemRetainAllocationHandle does: a chunk
  // that is not mapped now has none, and the importer is told so.
  void* const at = reinterpret_cast<void*>(pool->base() + request.chunk * pool->chunk_bytes());
  hipMemGenericAllocationHandle_t handle = nullptr;
  if (const hipError_t error = runtime_.retain(&handle, at, Holder::runtime); error != hipSuccess)
    return send_status(socket, error);
  int fd = -1;
  hipError_t exported = hipErrorUnknown;
  {
    const Rollback let_go{[&] { (void)runtime_.release(handle); }};
    exported = runtime_.export_handle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0);
  }
  if (exported != hipSuccess) return send_status(socket, exported);
  const OwnedFd chunk_fd{fd};
  BrokerReply reply;
  reply.chunk = request.chunk;
  reply.chunk_bytes = pool->chunk_bytes();
  return send_message(socket, &reply, sizeof reply, chunk_fd.get());
}

}  // namespace hipxx::core
