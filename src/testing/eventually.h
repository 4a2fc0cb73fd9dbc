// Waiting in tests for something to happen, the one way every Herd test does
// it (unit tests with threads or real processes, and tests/ with real cells).
//
// A test waits for the event itself, never for a fixed time: `cond` is
// polled until it holds. The timeout only bounds a failure, so it is
// generous (the default is 30 s): a busy machine makes a passing test slower,
// never a failing one. To show that something did NOT happen, do not wait
// and look; inject a ManualClock (base/clock.h) so that the time it would
// need cannot pass, or wait for a later event that would come after it.
//
// Header-only with no dependencies beyond the standard library, so the
// agent's tests (which may not link the cell or the scheduler) can use it.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace herd::testing {

// Calls `cond` until it returns true (-> true) or `timeout` has passed
// (-> false, after one last try). It polls at once, then backs off from 1 ms
// to `max_interval`: quick to notice a cheap condition, and gentle with an
// expensive one (a CLI process per try).
template <typename Cond>
bool Eventually(Cond&& cond, std::chrono::milliseconds timeout = std::chrono::seconds(30),
                std::chrono::milliseconds max_interval = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::chrono::milliseconds interval(1);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(interval);
    interval = std::min(interval * 2, max_interval);
  }
  return cond();
}

}  // namespace herd::testing
