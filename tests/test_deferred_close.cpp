// The backends' deferred close (lib/backend/deferred_close) on its own, over pipes: a pipe's read
// end reports end-of-file exactly when the last copy of its write end is closed, so handing write
// ends over shows when (and whether) each one was really closed.
#include <doctest/doctest.h>

#include "backend/deferred_close.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

using hipxx::backend::DeferredClose;

namespace {

struct Pipe {
  int read_end = -1;
  int write_end = -1;

  Pipe() {
    std::array<int, 2> ends{};
    REQUIRE(pipe(ends.data()) == 0);
    read_end = ends[0];
    write_end = ends[1];
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  Pipe(Pipe&& other) noexcept
      : read_end(std::exchange(other.read_end, -1)), write_end(std::exchange(other.write_end, -1)) {}
  Pipe& operator=(Pipe&&) = delete;
  ~Pipe() {
    if (read_end >= 0) close(read_end);
  }

  // Whether the write end has been closed, waiting up to `patience` for it.
  [[nodiscard]] bool writer_closed(std::chrono::milliseconds patience) const {
    pollfd watched{.fd = read_end, .events = POLLIN, .revents = 0};
    return poll(&watched, 1, static_cast<int>(patience.count())) == 1 && (watched.revents & POLLHUP) != 0;
  }
};

constexpr std::chrono::milliseconds kPatience{5000};
constexpr std::chrono::milliseconds kNoWait{0};

}  // namespace

TEST_CASE("a handed-over descriptor is closed soon, and not on the spot") {
  DeferredClose closer{{.poll_period = std::chrono::seconds{1}, .idle_periods = 10}};
  Pipe warm_up;
  closer.close_later(warm_up.write_end);  // starts the thread, whose first pass closes it at once
  REQUIRE(warm_up.writer_closed(kPatience));
  closer.flush();  // waits for the end of that pass, which may still be looking at later slots

  // The thread's next pass is a second away: the hand-over itself closes nothing.
  Pipe pipe;
  closer.close_later(pipe.write_end);
  CHECK(closer.pending() == 1);
  CHECK_FALSE(pipe.writer_closed(kNoWait));
  CHECK(pipe.writer_closed(kPatience));
  CHECK(closer.pending() == 0);
}

TEST_CASE("flush closes everything handed over before it returns") {
  DeferredClose closer{{.poll_period = std::chrono::milliseconds{200}, .idle_periods = 100}};
  std::vector<Pipe> pipes(20);
  for (Pipe& pipe : pipes) closer.close_later(pipe.write_end);
  closer.flush();
  CHECK(closer.pending() == 0);
  for (const Pipe& pipe : pipes) CHECK(pipe.writer_closed(kNoWait));
}

TEST_CASE("a thread that went to sleep wakes for the next descriptor") {
  DeferredClose closer{{.poll_period = std::chrono::microseconds{100}, .idle_periods = 2}};
  for (int round = 0; round < 5; ++round) {
    Pipe pipe;
    closer.close_later(pipe.write_end);
    CHECK(pipe.writer_closed(kPatience));
    // Long enough for two idle passes: the thread is asleep again by the next round.
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
}

TEST_CASE("destroying the closer closes what still waits") {
  std::vector<Pipe> pipes(10);
  {
    DeferredClose closer{{.poll_period = std::chrono::seconds{1}, .idle_periods = 100}};
    for (Pipe& pipe : pipes) closer.close_later(pipe.write_end);
  }
  for (const Pipe& pipe : pipes) CHECK(pipe.writer_closed(kNoWait));
}

TEST_CASE("a burst beyond the slots closes the overflow on the spot, and loses nothing") {
  DeferredClose closer{{.poll_period = std::chrono::seconds{1}, .idle_periods = 100}};
  Pipe first;
  closer.close_later(first.write_end);
  closer.flush();  // the thread now sleeps a full second between passes
  std::vector<Pipe> pipes(DeferredClose::kSlots + 40);
  for (Pipe& pipe : pipes) closer.close_later(pipe.write_end);
  CHECK(closer.pending() <= DeferredClose::kSlots);
  std::size_t closed_at_once = 0;
  for (const Pipe& pipe : pipes) closed_at_once += pipe.writer_closed(kNoWait) ? 1 : 0;
  CHECK(closed_at_once >= 40);
  closer.flush();
  for (const Pipe& pipe : pipes) CHECK(pipe.writer_closed(kNoWait));
}

TEST_CASE("hand-overs from many threads at once are all closed") {
  DeferredClose closer{{.poll_period = std::chrono::microseconds{200}, .idle_periods = 5}};
  constexpr int kThreads = 8;
  constexpr int kEach = 25;
  std::vector<std::vector<Pipe>> pipes(kThreads);
  for (std::vector<Pipe>& mine : pipes) mine.resize(kEach);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (std::vector<Pipe>& mine : pipes) {
    threads.emplace_back([&closer, &mine] {
      for (Pipe& pipe : mine) {
        closer.close_later(pipe.write_end);
        std::this_thread::yield();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::vector<Pipe>& mine : pipes) {
    for (const Pipe& pipe : mine) CHECK(pipe.writer_closed(kPatience));
  }
}

TEST_CASE("a child after fork gets a thread of its own") {
  DeferredClose closer{{.poll_period = std::chrono::milliseconds{1}, .idle_periods = 1000}};
  Pipe before;
  closer.close_later(before.write_end);  // the parent's thread runs from here on
  REQUIRE(before.writer_closed(kPatience));

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The parent's thread is not in this process: only a thread the child starts can close this.
    std::array<int, 2> ends{};
    if (pipe(ends.data()) != 0) _exit(2);
    closer.close_later(ends[1]);
    pollfd watched{.fd = ends[0], .events = POLLIN, .revents = 0};
    const bool closed = poll(&watched, 1, 5000) == 1 && (watched.revents & POLLHUP) != 0;
    _exit(closed ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // And the parent's thread still works.
  Pipe after;
  closer.close_later(after.write_end);
  CHECK(after.writer_closed(kPatience));
}

namespace {

bool never_start(void (*)(DeferredClose&), DeferredClose&) { return false; }

// Whose start fails after a second hand-over has come in meanwhile, the way another thread's would
// when it sees the thread's start claimed: made here by handing it over from inside the start.
Pipe* racing_pipe = nullptr;
bool fail_after_a_racing_hand_over(void (*)(DeferredClose&), DeferredClose& closer) {
  closer.close_later(racing_pipe->write_end);
  return false;
}

int failed_starts = 0;
bool fail_first_start(void (*body)(DeferredClose&), DeferredClose& closer) {
  if (failed_starts++ == 0) return false;
  return DeferredClose::start_detached(body, closer);
}

}  // namespace

TEST_CASE("where no thread can be started, a handed-over descriptor is closed on the spot") {
  DeferredClose closer{{.poll_period = std::chrono::seconds{1}, .idle_periods = 10}, &never_start};
  Pipe pipe;
  closer.close_later(pipe.write_end);
  CHECK(pipe.writer_closed(kNoWait));
  CHECK(closer.pending() == 0);
}

TEST_CASE("a hand-over that raced a failed thread start is closed with the failing one's") {
  DeferredClose closer{{.poll_period = std::chrono::seconds{1}, .idle_periods = 10}, &fail_after_a_racing_hand_over};
  Pipe pipe;
  Pipe racing;
  racing_pipe = &racing;
  closer.close_later(pipe.write_end);
  CHECK(pipe.writer_closed(kNoWait));
  CHECK(racing.writer_closed(kNoWait));  // it sat in a slot, for a thread that never came
  CHECK(closer.pending() == 0);
}

TEST_CASE("after a failed thread start, the next hand-over tries again") {
  failed_starts = 0;
  DeferredClose closer{{.poll_period = std::chrono::milliseconds{1}, .idle_periods = 10}, &fail_first_start};
  Pipe first;
  closer.close_later(first.write_end);
  CHECK(first.writer_closed(kNoWait));  // closed on the spot: no thread
  Pipe second;
  closer.close_later(second.write_end);
  CHECK(failed_starts == 2);
  CHECK(second.writer_closed(kPatience));  // by the thread the second start gave
}
