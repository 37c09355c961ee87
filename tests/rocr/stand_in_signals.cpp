// The stand-in's signals, the worker threads that run asynchronous operations (the "copy engines"), and
// the thread that calls the handlers of hsa_amd_signal_async_handler (ROCr's asynchronous-handler
// thread).
//
// A signal's value lives under the state's one mutex, and every change wakes the one condition
// variable that waiting threads, the workers and the handler thread sleep on: simple, and ordered the
// way the scacquire and screlease orders require, since every load and store takes that mutex.
//
// Each worker takes the first queued job whose dependency signals all read 0 (so that a job waiting
// on a later one never blocks it), runs it without the lock, then decrements its completion signal.
// There are several, as a GPU has several copy engines: jobs that nothing orders run side by side and
// finish in any order, so a backend that leaves out a dependency reads or writes too early (with one
// worker, the order jobs were queued in would hide it). They start with the first job, not with
// hsa_init, so that a process may fork before it copies; a forked child that copies starts its own
// (threads do not survive fork).
//
// The handler thread likewise starts with the first registration (and per process). It calls one
// handler at a time, never on the registering thread (even where the condition holds at once), and
// without the lock, so that a handler may call any entry point. Handlers whose conditions hold are
// called in the order of registration; one that returns true goes behind the others and is called
// again whenever its condition holds, checked after each call and on each change. The last
// hsa_shut_down lets the current call return, joins the thread, and drops (with a complaint) what
// is still registered.
#include "rocr/stand_in.hpp"
#include "rocr/stand_in_exports.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hipxx::backend::rocr::stand_in {
namespace {

constexpr std::size_t kCopyEngines = 3;
std::mutex data_movement;  // held while a job's work runs
std::array<pthread_t, kCopyEngines> worker_threads{};
// The handler threads not yet joined, under the state's mutex: calls on them may outlast hsa_init.
// Not a thread_local: LeakSanitizer misreads the dynamic TLS of a dlopen()ed library (it takes a
// garbage range for it and faults while scanning at exit).
std::vector<pthread_t> unjoined_handler_threads;

bool on_handler_thread() {
  const pthread_t self = pthread_self();
  return std::any_of(unjoined_handler_threads.begin(), unjoined_handler_threads.end(),
                     [&](pthread_t thread) { return pthread_equal(thread, self) != 0; });
}

// For the calls that return no status, where an unknown signal is undefined behaviour in ROCr. A
// handler that the last hsa_shut_down waits for may still use signals: they go only after it returns.
const std::shared_ptr<Signal>& known_signal(State& s, hsa_signal_t signal, const char* call) {
  if (s.opened == 0 && !on_handler_thread()) fatal(std::string{call} + ": the runtime is not open");
  const auto found = s.signals.find(signal.handle);
  if (found == s.signals.end()) fatal(std::string{call} + "(" + hex(signal.handle) + "): no such signal");
  return found->second;
}

bool satisfied(hsa_signal_value_t value, hsa_signal_condition_t condition, hsa_signal_value_t compare) {
  switch (condition) {
    case HSA_SIGNAL_CONDITION_EQ: return value == compare;
    case HSA_SIGNAL_CONDITION_NE: return value != compare;
    case HSA_SIGNAL_CONDITION_LT: return value < compare;
    case HSA_SIGNAL_CONDITION_GTE: return value >= compare;
  }
  fatal("hsa_signal_wait_scacquire: unknown condition " + std::to_string(static_cast<int>(condition)));
}

bool known_condition(hsa_signal_condition_t condition) {
  switch (condition) {
    case HSA_SIGNAL_CONDITION_EQ:
    case HSA_SIGNAL_CONDITION_NE:
    case HSA_SIGNAL_CONDITION_LT:
    case HSA_SIGNAL_CONDITION_GTE: return true;
  }
  return false;
}

bool ready(const Job& job) {
  return std::all_of(job.dependencies.begin(), job.dependencies.end(),
                     [](const std::shared_ptr<Signal>& signal) { return signal->value == 0; });
}

// Gives back what enqueue() counted: busy entries, signal users.
void release_counts(Job& job) {
  for (const auto& busy : job.busy) --busy->operations;
  for (const auto& signal : job.dependencies) --signal->users;
  if (job.completion) --job.completion->users;
}

void finish(State& s, Job& job) {
  if (job.finish) job.finish();
  release_counts(job);
  // As ROCr reports work that failed on the device: its completion signal below zero, for good (work
  // that depends on it waits for zero).
  if (job.completion) {
    job.completion->value = job.fails ? -1 : job.completion->value - 1;
    if (job.lowered_on_host) job.completion->notified_until = std::chrono::steady_clock::now() + kNotifyWindow;
  }
  s.changed.notify_all();
}

// A thread takes its malloc arena at its first allocation, reserving address space that no one may
// touch. A worker that ran no job yet would take it in the middle of whatever the application does
// then (the tests' leak checks count such ranges), so each takes it as it starts. The block's
// address is published so that the allocation cannot be left out.
void take_malloc_arena() {
  static std::atomic<std::string*> published{nullptr};
  const auto block = std::make_unique<std::string>(256, 'x');
  published.store(block.get(), std::memory_order_relaxed);
  published.store(nullptr, std::memory_order_relaxed);
}

// Threads of the stand-in that have taken their arena. The thread that starts some waits for them
// to get that far, so that no arena is taken after the call that started them has returned.
std::atomic<unsigned> threads_started{0};

void thread_starts() {
  take_malloc_arena();
  threads_started.fetch_add(1, std::memory_order_release);
}

void wait_until_started(unsigned count) {
  while (threads_started.load(std::memory_order_acquire) < count) std::this_thread::yield();
}

void* worker_main(void* /*unused*/) {
  thread_starts();
  State& s = state();
  std::unique_lock lock{s.mutex};
  while (!s.worker_stop) {
    const auto next = std::find_if(s.jobs.begin(), s.jobs.end(), ready);
    if (next == s.jobs.end()) {
      s.changed.wait(lock);
      continue;
    }
    Job job = std::move(*next);
    s.jobs.erase(next);
    const auto delay = s.config.copy_delay;
    lock.unlock();
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (job.work) {
      // One job moves bytes at a time: a stream may wait on a word that another stream writes, which
      // copy engines do a word at a time; here the two would be a data race of the stand-in's own.
      const std::lock_guard moving{data_movement};
      job.work();
    }
    lock.lock();
    finish(s, job);
  }
  return nullptr;
}

void start_worker(State& s) {
  if (s.worker_running && s.worker_pid == getpid()) return;
  s.worker_stop = false;
  const unsigned started = threads_started.load(std::memory_order_relaxed);
  for (pthread_t& thread : worker_threads) {
    if (pthread_create(&thread, nullptr, worker_main, nullptr) != 0) {
      fatal("cannot start the threads that run asynchronous copies");
    }
  }
  wait_until_started(started + static_cast<unsigned>(std::size(worker_threads)));
  s.worker_running = true;
  s.worker_pid = getpid();
}

bool due(const Handler& handler) { return satisfied(handler.signal->value, handler.condition, handler.compare); }

void* handler_main(void* thread) {
  thread_starts();
  const HandlerThread& self = *static_cast<const HandlerThread*>(thread);
  State& s = state();
  std::unique_lock lock{s.mutex};
  while (!self.stop) {
    const auto next = std::find_if(s.handlers.begin(), s.handlers.end(), due);
    if (next == s.handlers.end()) {
      s.changed.wait(lock);
      continue;
    }
    Handler handler = std::move(*next);
    s.handlers.erase(next);
    --handler.signal->users;  // see Handler
    const hsa_signal_value_t value = handler.signal->value;
    lock.unlock();
    const bool keep = handler.function(value, handler.arg);
    lock.lock();
    if (!keep) continue;
    const auto found = s.signals.find(handler.handle);
    if (found == s.signals.end() || found->second != handler.signal) {
      fatal("hsa_amd_signal_async_handler: a handler returned true (stay registered) on signal " + hex(handler.handle) +
            ", which was destroyed during its call");
    }
    ++handler.signal->users;
    s.handlers.push_back(std::move(handler));
  }
  return nullptr;
}

void start_handlers(State& s) {
  if (s.handler_thread && s.handler_thread->pid == getpid()) return;
  if (s.handler_thread) unjoined_handler_threads.clear();  // a forked child: the parent's are not here
  auto thread = std::make_unique<HandlerThread>();
  thread->pid = getpid();
  const unsigned started = threads_started.load(std::memory_order_relaxed);
  if (pthread_create(&thread->thread, nullptr, handler_main, thread.get()) != 0) {
    fatal("cannot start the thread that calls signal handlers");
  }
  wait_until_started(started + 1);
  unjoined_handler_threads.push_back(thread->thread);
  s.handler_thread = std::move(thread);
}

std::optional<std::chrono::steady_clock::time_point> deadline_for(std::uint64_t timeout_hint) {
  // The unit is the system timestamp's; the stand-in takes nanoseconds, and any wait longer than a day
  // as no limit (which also keeps the arithmetic from overflowing).
  constexpr std::uint64_t kDay = 86'400'000'000'000;
  if (timeout_hint > kDay) return std::nullopt;
  return std::chrono::steady_clock::now() + std::chrono::nanoseconds{timeout_hint};
}

}  // namespace

void enqueue(State& s, Job job) {
  for (const auto& busy : job.busy) ++busy->operations;
  for (const auto& signal : job.dependencies) ++signal->users;
  if (job.completion) ++job.completion->users;
  s.jobs.push_back(std::move(job));
  start_worker(s);
  s.changed.notify_all();
}

void stop_worker(std::unique_lock<std::mutex>& lock) {
  State& s = state();
  if (!s.worker_running || s.worker_pid != getpid()) return;
  s.worker_stop = true;
  s.changed.notify_all();
  const std::array<pthread_t, kCopyEngines> threads = worker_threads;
  lock.unlock();
  for (const pthread_t thread : threads) pthread_join(thread, nullptr);
  lock.lock();
  s.worker_running = false;
  s.worker_stop = false;
  if (!s.jobs.empty()) {
    complain("hsa_shut_down: " + std::to_string(s.jobs.size()) +
             " asynchronous operations still wait for their dependency signals; they are dropped");
    for (Job& job : s.jobs) release_counts(job);
    s.jobs.clear();
  }
}

void stop_handlers(std::unique_lock<std::mutex>& lock) {
  State& s = state();
  if (on_handler_thread()) fatal("hsa_shut_down: the last one, from a signal handler, would wait for that handler");
  if (s.handler_thread && s.handler_thread->pid == getpid()) {
    const std::unique_ptr<HandlerThread> stopping = std::move(s.handler_thread);
    stopping->stop = true;
    s.changed.notify_all();
    lock.unlock();
    pthread_join(stopping->thread, nullptr);
    lock.lock();
    std::erase_if(unjoined_handler_threads,
                  [&](pthread_t thread) { return pthread_equal(thread, stopping->thread) != 0; });
  }
  // Another thread may have opened the runtime again while this one waited: what is registered then
  // stays, on a thread of its own.
  if (s.opened > 0) {
    if (!s.handlers.empty()) start_handlers(s);
    return;
  }
  if (!s.handlers.empty()) {
    complain("hsa_shut_down: " + std::to_string(s.handlers.size()) +
             " signal handlers are still registered; they are dropped uncalled");
    for (const Handler& handler : s.handlers) --handler.signal->users;
    s.handlers.clear();
  }
}

}  // namespace hipxx::backend::rocr::stand_in

namespace hipxx::backend::rocr {
using namespace stand_in;  // NOLINT(google-build-using-namespace): the entry points' own namespace

hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value, std::uint32_t num_consumers,
                               const hsa_agent_t* consumers, hsa_signal_t* signal) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (signal == nullptr || (num_consumers > 0 && consumers == nullptr)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (std::uint32_t first = 0; first < num_consumers; ++first) {
    for (std::uint32_t second = first + 1; second < num_consumers; ++second) {
      if (consumers[first].handle == consumers[second].handle) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
  }
  const std::uint64_t id = kSignalTag + s.next_id++;
  s.signals.emplace(id, std::make_shared<Signal>(Signal{.value = initial_value}));
  signal->handle = id;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_signal_destroy(hsa_signal_t signal) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (signal.handle == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto found = s.signals.find(signal.handle);
  if (found == s.signals.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (found->second->users > 0) {
    fatal("hsa_signal_destroy(" + hex(signal.handle) +
          "): a queued copy, a waiting thread or a registered handler still uses it");
  }
  if (std::chrono::steady_clock::now() < found->second->notified_until) {
    fatal("hsa_signal_destroy(" + hex(signal.handle) +
          "): the runtime lowered it on its own thread moments ago and may still be notifying its waiters");
  }
  s.signals.erase(found);
  return HSA_STATUS_SUCCESS;
}

void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
  State& s = state();
  const std::lock_guard lock{s.mutex};
  known_signal(s, signal, "hsa_signal_store_screlease")->value = value;
  s.changed.notify_all();
}

hsa_signal_value_t hsa_signal_load_scacquire(hsa_signal_t signal) {
  State& s = state();
  const std::lock_guard lock{s.mutex};
  return known_signal(s, signal, "hsa_signal_load_scacquire")->value;
}

hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal, hsa_signal_condition_t condition,
                                             hsa_signal_value_t compare_value, std::uint64_t timeout_hint,
                                             hsa_wait_state_t /*wait_state_hint*/) {
  State& s = state();
  std::unique_lock lock{s.mutex};
  // A copy of the pointer: the signal outlives a shut-down that another thread makes meanwhile.
  const std::shared_ptr<Signal> waited = known_signal(s, signal, "hsa_signal_wait_scacquire");
  const auto deadline = deadline_for(timeout_hint);
  ++waited->users;
  while (!satisfied(waited->value, condition, compare_value)) {
    if (!deadline) {
      s.changed.wait(lock);
    } else if (s.changed.wait_until(lock, *deadline) == std::cv_status::timeout) {
      break;
    }
  }
  --waited->users;
  return waited->value;
}

hsa_status_t hsa_amd_signal_async_handler(hsa_signal_t signal, hsa_signal_condition_t cond, hsa_signal_value_t value,
                                          hsa_amd_signal_handler handler, void* arg) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (handler == nullptr || signal.handle == 0 || !known_condition(cond)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto found = s.signals.find(signal.handle);
  if (found == s.signals.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  ++found->second->users;
  s.handlers.push_back(Handler{.handle = signal.handle,
                               .signal = found->second,
                               .condition = cond,
                               .compare = value,
                               .function = handler,
                               .arg = arg});
  // Even a condition that holds already is the handler thread's to act on, never this caller's.
  start_handlers(s);
  s.changed.notify_all();
  return HSA_STATUS_SUCCESS;
}

}  // namespace hipxx::backend::rocr
