#include "master/server/stream_limits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/strings/match.h"
#include "testing/eventually.h"

namespace herd::master {
namespace {

// #33 H3: one user may not hold every stream (and so every server thread).
TEST(StreamLimitsTest, CapsEachUserAndTheCell) {
  StreamLimits limits({.per_user = 2, .total = 3});
  std::vector<StreamLimits::Slot> bob;
  for (int i = 0; i < 2; ++i) {
    auto s = limits.Acquire(Principal::User("bob"), "WatchNames");
    ASSERT_TRUE(s.ok()) << s.status();
    bob.push_back(std::move(*s));
  }
  auto third = limits.Acquire(Principal::User("bob"), "WatchNames");
  ASSERT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(third.status().message(), "--max-streams-per-user 2")) << third.status();
  // Acting as another user gives bob no more streams.
  Principal as_carol = Principal::User("carol");
  as_carol.acting_user = "bob";
  EXPECT_EQ(limits.Acquire(as_carol, "Watch").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(limits.open_by("bob"), 2);

  auto alice = limits.Acquire(Principal::User("alice"), "Watch");
  ASSERT_TRUE(alice.ok()) << alice.status();
  auto carol = limits.Acquire(Principal::User("carol"), "Watch");
  ASSERT_EQ(carol.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(carol.status().message(), "--max-streams 3")) << carol.status();

  bob.pop_back();  // a stream ends: its slot is free again
  EXPECT_EQ(limits.open(), 2);
  EXPECT_TRUE(limits.Acquire(Principal::User("carol"), "Watch").ok());
  EXPECT_EQ(limits.open(), 2);  // that slot went with the temporary
  // Machines count toward the cell only.
  StreamLimits machines({.per_user = 1, .total = 0});
  auto m1 = machines.Acquire(Principal::Machine("m1"), "Watch");
  auto m2 = machines.Acquire(Principal::Machine("m1"), "Watch");
  EXPECT_TRUE(m1.ok() && m2.ok());
}

// #33 item 4: each user's unary requests in flight are counted the same
// way (HerdService holds a slot while it serves one), and a refusal says so.
TEST(StreamLimitsTest, RequestsInFlightPerUser) {
  StreamLimits calls({.per_user = 2,
                      .total = 0,
                      .counted = "requests in flight",
                      .per_user_flag = "--max-requests-per-user",
                      .total_flag = ""});
  std::vector<StreamLimits::Slot> held;
  for (int i = 0; i < 2; ++i) held.push_back(std::move(*calls.Acquire(Principal::User("bob"), "QueryHistory")));
  auto refused = calls.Acquire(Principal::User("bob"), "GetJob");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "GetJob: bob has 2 requests in flight, the limit per user (--max-requests-per-user 2); wait for one to end");
  // Others are not held up by bob, and no cell-wide cap applies.
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(calls.Acquire(Principal::User("alice"), "GetJob").ok());
  held.pop_back();  // one of bob's answered
  EXPECT_TRUE(calls.Acquire(Principal::User("bob"), "GetJob").ok());
}

// #33 L4: an open stream outlived its credential's revocation.
TEST(StreamLimitsTest, ARevokedCredentialsStreamsEnd) {
  StreamLimits limits({.per_user = 4, .total = 8});
  std::atomic<int> bob_ended{0}, alice_ended{0};
  Principal bob = Principal::User("bob");
  bob.credential_issued_s = 100;
  auto b = limits.Acquire(bob, "WatchNames", [&] { ++bob_ended; });
  auto a = limits.Acquire(Principal::User("alice"), "Watch", [&] { ++alice_ended; });
  ASSERT_TRUE(a.ok() && b.ok());
  std::atomic<int64_t> bob_revoked_before{0};
  auto revoked = [&](const Principal& p) { return p.name == "bob" && p.credential_issued_s < bob_revoked_before; };
  EXPECT_EQ(limits.EndRevoked(revoked), 0);
  limits.SweepRevoked(revoked, 10);
  bob_revoked_before = 200;  // the admin revokes bob's credentials issued before 200
  ASSERT_TRUE(herd::testing::Eventually([&] { return bob_ended.load() == 1; }));
  EXPECT_EQ(limits.EndRevoked(revoked), 0) << "ended once";
  EXPECT_EQ(alice_ended.load(), 0);
  EXPECT_EQ(bob_ended.load(), 1);
}

}  // namespace
}  // namespace herd::master
