#include "master/server/stream_limits.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/match.h"

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

}  // namespace
}  // namespace herd::master
