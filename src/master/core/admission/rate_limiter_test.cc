#include "master/core/admission/rate_limiter.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace herd::master {
namespace {

TEST(RateLimiter, EachUserHasABucketThatRefillsWithTime) {
  ManualClock clock;
  RateLimiter limiter(&clock, {.per_second = 10, .burst = 3});
  const Principal bob = Principal::User("bob"), alice = Principal::User("alice");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit(bob).ok()) << i;
  absl::Status st = limiter.Admit(bob);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(), "user bob is sending more than 10 requests a second; retry in 100 ms");
  // Others are not slowed by bob.
  EXPECT_TRUE(limiter.Admit(alice).ok());
  // Acting as alice, bob still pays.
  Principal bob_as_alice = Principal::User("alice");
  bob_as_alice.acting_user = "bob";
  EXPECT_FALSE(limiter.Admit(bob_as_alice).ok());
  clock.AdvanceMs(100);
  EXPECT_TRUE(limiter.Admit(bob).ok());
  EXPECT_FALSE(limiter.Admit(bob).ok());
  // Machines, schedulers, admins and the master itself are not limited here.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(limiter.Admit(Principal::Admin("root")).ok());
    ASSERT_TRUE(limiter.Admit(Principal::Machine("m1")).ok());
    ASSERT_TRUE(limiter.Admit(Principal::Scheduler("s")).ok());
  }
}

}  // namespace
}  // namespace herd::master
