// JoinApi with a clock of its own: tokens expire, are used up and revoked,
// a name is joined once, and the secret is kept only as a hash.
#include "master/core/api/join.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "cell/cell_state.h"
#include "pki/pki.h"
#include "store/log_store.h"

namespace herd::master {
namespace {

class JoinApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<pki::Authority> ca = pki::CreateAuthority("test", clock_.NowMs() / 1000 - 60, 10 * 86400);
    ASSERT_TRUE(ca.ok()) << ca.status();
    options_.authority = *ca;
    options_.authorizer = std::make_shared<CellPolicy>();
    committer_ = std::make_unique<Committer>(cell::CellState("test"), &store_, &clock_, Committer::Options{});
    ctx_.committer = committer_.get();
    ctx_.store = &store_;
    ctx_.clock = &clock_;
    ctx_.options = &options_;
    api_ = std::make_unique<JoinApi>(ctx_);
  }
  v1::CreateJoinTokenResponse Create(int64_t ttl_s = 600, int uses = 0) {
    v1::CreateJoinTokenRequest req;
    req.set_ttl_seconds(ttl_s);
    req.set_max_uses(uses);
    auto r = api_->CreateJoinToken(admin_, req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::CreateJoinTokenResponse();
  }
  absl::StatusOr<v1::JoinResponse> Join(const std::string& token, const std::string& machine) {
    v1::JoinRequest req;
    req.set_token(token);
    req.set_machine(machine);
    req.set_public_key_pem(pki::GenerateKey()->public_pem);
    return api_->Join(req, "10.0.0.9");
  }

  ManualClock clock_;
  store::MemoryLogStore store_;
  MasterOptions options_;
  std::unique_ptr<Committer> committer_;
  ApiContext ctx_;
  std::unique_ptr<JoinApi> api_;
  const Principal admin_ = Principal::Admin("root");
};

TEST_F(JoinApiTest, ATokenMakesMachineCredentialsUntilItExpires) {
  v1::CreateJoinTokenResponse t = Create(/*ttl_s=*/120);
  EXPECT_EQ(t.ca_hash(), *pki::PublicKeyHash(options_.authority->cert_pem));
  absl::StatusOr<v1::JoinResponse> a = Join(t.token(), "m1");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<pki::CertInfo> info = pki::Inspect(a->cert_pem());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->subject.role, pki::Role::kMachine);
  EXPECT_EQ(info->subject.name, "m1");
  EXPECT_TRUE(pki::Verify(a->cert_pem(), options_.authority->cert_pem, clock_.NowMs() / 1000).ok());
  // The cell keeps a hash of the secret, never the secret.
  committer_->Read([&](const cell::CellState& s) {
    const v1::JoinToken* kept = s.FindJoinToken(t.info().id());
    ASSERT_NE(kept, nullptr);
    EXPECT_EQ(kept->secret_sha256(), pki::Sha256Hex(t.token().substr(7)));
    EXPECT_FALSE(absl::StrContains(kept->DebugString(), t.token().substr(7)));
  });
  clock_.AdvanceMs(121'000);
  absl::StatusOr<v1::JoinResponse> late = Join(t.token(), "m2");
  EXPECT_TRUE(absl::IsUnauthenticated(late.status())) << late.status();
  EXPECT_TRUE(absl::StrContains(late.status().message(), "has expired")) << late.status();
}

TEST_F(JoinApiTest, UsesRevocationAndNamesAreHeld) {
  v1::CreateJoinTokenResponse t = Create(600, /*uses=*/2);
  ASSERT_TRUE(Join(t.token(), "m1").ok());
  // A name gets one credential this way, with this token or another.
  absl::StatusOr<v1::JoinResponse> again = Join(t.token(), "m1");
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  v1::CreateJoinTokenResponse other = Create();
  EXPECT_TRUE(absl::IsAlreadyExists(Join(other.token(), "m1").status()));
  ASSERT_TRUE(Join(t.token(), "m2").ok());
  EXPECT_TRUE(absl::StrContains(Join(t.token(), "m3").status().message(), "is used up"));
  v1::RevokeJoinTokenRequest revoke;
  revoke.set_id(other.info().id());
  ASSERT_TRUE(api_->RevokeJoinToken(admin_, revoke).ok());
  EXPECT_TRUE(absl::StrContains(Join(other.token(), "m4").status().message(), "was revoked"));
  // A wrong secret learns nothing about the token.
  const std::string forged = other.info().id() + ".0000000000000000";
  EXPECT_EQ(Join(forged, "m5").status().message(), "unknown join token, or a wrong secret");
  // Nobody but an admin makes, lists or revokes tokens.
  v1::CreateJoinTokenRequest req;
  EXPECT_TRUE(absl::IsPermissionDenied(api_->CreateJoinToken(Principal::User("bob"), req).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(api_->ListJoinTokens(Principal::User("bob"), {}).status()));
  absl::StatusOr<v1::ListJoinTokensResponse> list = api_->ListJoinTokens(admin_, {});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->tokens_size(), 2);
  for (const v1::JoinToken& tok : list->tokens()) EXPECT_TRUE(tok.secret_sha256().empty());
}

TEST_F(JoinApiTest, BadRequestsAreRefusedWithWhatIsWrong) {
  v1::CreateJoinTokenRequest req;
  req.set_ttl_seconds(40 * 86400);
  EXPECT_TRUE(absl::StrContains(api_->CreateJoinToken(admin_, req).status().message(), "ttl"));
  req.set_ttl_seconds(0);
  req.set_max_uses(-1);
  EXPECT_TRUE(absl::StrContains(api_->CreateJoinToken(admin_, req).status().message(), "uses"));
  v1::CreateJoinTokenResponse t = Create();
  EXPECT_TRUE(absl::StrContains(Join("nonsense", "m1").status().message(), "not a join token"));
  EXPECT_TRUE(absl::StrContains(Join(t.token(), "bad name!").status().message(), "machine"));
  v1::JoinRequest no_key;
  no_key.set_token(t.token());
  no_key.set_machine("m1");
  no_key.set_public_key_pem("not a key");
  EXPECT_TRUE(absl::StrContains(api_->Join(no_key, "peer").status().message(), "public_key_pem"));
  // None of those spent the token.
  EXPECT_TRUE(Join(t.token(), "m1").ok());
}

}  // namespace
}  // namespace herd::master
