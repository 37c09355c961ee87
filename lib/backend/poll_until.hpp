// Waiting for a word that another thread or a device writes (a queue's progress, a stream-wait
// word): yield for a number of rounds, for a latency close to the writer's own, then sleep ever
// longer, up to a bound, so that a long wait costs no CPU. The runtime waits this way wherever no
// wake-up can be had: a device that writes host memory signals nobody.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace hipxx::backend {

struct PollPace {
  unsigned yielding_rounds = 1024;  // rounds of yield() before the first sleep
  std::chrono::microseconds longest_sleep{100};  // sleeps double from 1 us up to this
};

// Polls until `ready()` holds (true) or, once sleeping, `give_up()` does (false).
template <class Ready, class GiveUp>
bool poll_until(Ready&& ready, PollPace pace, GiveUp&& give_up) {
  auto sleep = std::chrono::microseconds{1};
  for (unsigned round = 0; !ready(); ++round) {
    if (round < pace.yielding_rounds) {
      std::this_thread::yield();
      continue;
    }
    if (give_up()) return false;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, pace.longest_sleep);
  }
  return true;
}

template <class Ready>
void poll_until(Ready&& ready, PollPace pace = {}) {
  (void)poll_until(ready, pace, [] { return false; });
}

}  // namespace hipxx::backend
