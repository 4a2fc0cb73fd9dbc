#include "base/signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace herd {
namespace {

// One process, one latch: the cases run in order in one test.
TEST(StopSignal, ATermStopsEveryWaiterAndStaysSet) {
  InstallStopSignalHandlers();
  EXPECT_FALSE(StopSignalReceived());
  EXPECT_EQ(WaitForStopSignal(0), 0);  // nothing yet: times out at once

  // SIGPIPE no longer kills the process.
  ASSERT_EQ(raise(SIGPIPE), 0);

  std::atomic<int> got_a{-1}, got_b{-1};
  std::thread a([&] { got_a = WaitForStopSignal(); });
  std::thread b([&] { got_b = WaitForStopSignal(600'000); });
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  a.join();  // a waiter that does not wake would hang the test here
  b.join();
  EXPECT_EQ(got_a, SIGTERM);
  EXPECT_EQ(got_b, SIGTERM);
  EXPECT_TRUE(StopSignalReceived());
  EXPECT_EQ(WaitForStopSignal(), SIGTERM);  // later waiters return at once
}

}  // namespace
}  // namespace herd
