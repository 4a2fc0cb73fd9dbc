// Issue #33, item 7 on the agent: a grant issued before its user's
// revocation is refused, and the streams such grants opened end, as soon
// as a poll names the user (before, a grant lived out its 60 s).
#include "agent/server/revocations.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "base/clock.h"

namespace herd::agent {
namespace {

constexpr int64_t kRevokedS = 1'800'000'000;
constexpr int64_t kRevokedMs = kRevokedS * 1000;

google::protobuf::RepeatedPtrField<v1::RevokedUser> Revoked(
    std::initializer_list<std::pair<std::string, int64_t>> users) {
  google::protobuf::RepeatedPtrField<v1::RevokedUser> out;
  for (const auto& [name, before] : users) {
    v1::RevokedUser* u = out.Add();
    u->set_name(name);
    u->set_revoked_before_s(before);
  }
  return out;
}

class RevocationsTest : public ::testing::Test {
 protected:
  ManualClock clock_{kRevokedMs + 2'000};
  Revocations rev_{&clock_};
};

TEST_F(RevocationsTest, AGrantOrCredentialIssuedBeforeTheRevocationIsRefused) {
  // Nothing known yet: everything passes (the master has not said).
  EXPECT_TRUE(rev_.Check("alice", kRevokedMs - 1'000, kRevokedS - 10).ok());
  rev_.Update(Revoked({{"alice", kRevokedS}}));
  absl::Status old_grant = rev_.Check("alice", kRevokedMs - 1, kRevokedS + 5);
  EXPECT_EQ(old_grant.code(), absl::StatusCode::kPermissionDenied) << old_grant;
  EXPECT_TRUE(absl::StrContains(old_grant.message(), "credentials of user alice were revoked")) << old_grant;
  // A fresh grant presented with the revoked credential: refused too.
  EXPECT_EQ(rev_.Check("alice", kRevokedMs + 500, kRevokedS - 1).code(), absl::StatusCode::kPermissionDenied);
  // Both issued after: alice's new credential works.
  EXPECT_TRUE(rev_.Check("alice", kRevokedMs, kRevokedS).ok());
  // Others are not touched.
  EXPECT_TRUE(rev_.Check("bob", kRevokedMs - 1'000, kRevokedS - 10).ok());
}

TEST_F(RevocationsTest, APollNamingTheUserFlagsTheirOpenStreams) {
  auto alice_old = rev_.Open("alice", kRevokedMs - 5'000, kRevokedS - 100, nullptr);
  auto alice_new = rev_.Open("alice", kRevokedMs + 100, kRevokedS + 1, nullptr);
  auto bob = rev_.Open("bob", kRevokedMs - 5'000, kRevokedS - 100, nullptr);
  EXPECT_EQ(rev_.open_streams(), 3u);
  rev_.Update(Revoked({}));
  EXPECT_FALSE(alice_old->revoked());
  rev_.Update(Revoked({{"alice", kRevokedS}}));
  EXPECT_TRUE(alice_old->revoked());
  EXPECT_TRUE(absl::StrContains(alice_old->Why(), "user alice were revoked")) << alice_old->Why();
  EXPECT_FALSE(alice_new->revoked()) << "opened by a grant issued after the revocation";
  EXPECT_FALSE(bob->revoked());
  // A stream that passed its check just before the poll is flagged as it
  // registers.
  auto late = rev_.Open("alice", kRevokedMs - 1'000, kRevokedS - 100, nullptr);
  EXPECT_TRUE(late->revoked());
  // Later polls (past the cancel delay) leave the flagged ones flagged.
  clock_.AdvanceMs(Revocations::kCancelAfterMs);
  rev_.Update(Revoked({{"alice", kRevokedS}}));
  EXPECT_TRUE(alice_old->revoked());
  late.reset();
  alice_old.reset();
  EXPECT_EQ(rev_.open_streams(), 2u);
}

TEST_F(RevocationsTest, TheLaterRevocationWinsAndOldOnesAreForgotten) {
  rev_.Update(Revoked({{"alice", kRevokedS}}));
  rev_.Update(Revoked({{"alice", kRevokedS - 50}}));  // an older record (another master's poll)
  EXPECT_FALSE(rev_.Check("alice", kRevokedMs - 10, kRevokedS + 1).ok());
  rev_.Update(Revoked({{"alice", kRevokedS + 60}}));
  EXPECT_FALSE(rev_.Check("alice", kRevokedMs + 10, kRevokedS + 1).ok());
  EXPECT_EQ(rev_.users(), 1u);
  // Once no grant issued before it can still be valid, it is forgotten.
  clock_.AdvanceMs(60'000 + Revocations::kKeepMs);
  rev_.Update(Revoked({}));
  EXPECT_EQ(rev_.users(), 0u);
  // Nonsense from a poll is ignored.
  rev_.Update(Revoked({{"", kRevokedS}, {"carol", 0}}));
  EXPECT_EQ(rev_.users(), 0u);
}

TEST_F(RevocationsTest, TheTableIsBoundedKeepingTheLatest) {
  google::protobuf::RepeatedPtrField<v1::RevokedUser> many;
  for (size_t i = 0; i < Revocations::kMaxUsers + 10; ++i) {
    v1::RevokedUser* u = many.Add();
    u->set_name("u" + std::to_string(i));
    u->set_revoked_before_s(kRevokedS + static_cast<int64_t>(i));
  }
  rev_.Update(many);
  EXPECT_EQ(rev_.users(), Revocations::kMaxUsers);
  EXPECT_TRUE(rev_.Check("u0", kRevokedMs - 1, kRevokedS - 1).ok()) << "the oldest went";
  EXPECT_FALSE(rev_.Check("u" + std::to_string(Revocations::kMaxUsers + 9), kRevokedMs, kRevokedS).ok());
}

}  // namespace
}  // namespace herd::agent
