#include "pki/grant.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace herd::pki {
namespace {

constexpr int64_t kNowS = 1'800'000'000;
constexpr int64_t kNowMs = kNowS * 1000;
constexpr int64_t kGrantYear = 365LL * 24 * 3600;

class GrantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = CreateAuthority("test", kNowS, 10 * kGrantYear);
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto m = IssueCredential(ca_, {Role::kMaster, "master"}, kNowS, kGrantYear);
    ASSERT_TRUE(m.ok()) << m.status();
    master_ = *m;
  }
  v1::AccessGrant Grant(const Credential& signer, int64_t expires_ms = kNowMs + 60'000) {
    auto g = SignGrant(signer, "alice", "m1", "alice.web.0.1", v1::EXEC, expires_ms);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : v1::AccessGrant{};
  }
  absl::Status Check(const v1::AccessGrant& g, absl::string_view user = "alice", absl::string_view machine = "m1",
                     absl::string_view run = "alice.web.0.1", v1::AccessAction action = v1::EXEC,
                     int64_t now_ms = kNowMs) {
    return CheckGrant(g, ca_.cert_pem, user, machine, run, action, now_ms);
  }
  Authority ca_;
  Credential master_;
};

TEST_F(GrantTest, AMastersGrantOpensExactlyWhatItNames) {
  v1::AccessGrant g = Grant(master_);
  EXPECT_TRUE(Check(g).ok()) << Check(g);
  struct Case {
    const char* what;
    absl::Status st;
    const char* says;
  } cases[] = {
      {"another user", Check(g, "bob"), "for user alice"},
      {"another machine", Check(g, "alice", "m2"), "for machine m1"},
      {"another run", Check(g, "alice", "m1", "alice.web.1.1"), "for run alice.web.0.1"},
      {"another action", Check(g, "alice", "m1", "alice.web.0.1", v1::READ_LOGS), "another action"},
      {"expired", Check(g, "alice", "m1", "alice.web.0.1", v1::EXEC, kNowMs + 61'000), "expired"},
      {"no grant", Check(v1::AccessGrant{}), "no grant"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.st.code(), absl::StatusCode::kPermissionDenied) << c.what;
    EXPECT_TRUE(absl::StrContains(c.st.message(), c.says)) << c.what << ": " << c.st;
  }
}

// Agents date a grant by its expiry (#33: a grant issued before its user's
// revocation is refused).
TEST_F(GrantTest, AGrantIsDatedByItsExpiry) {
  EXPECT_EQ(GrantIssuedMs(Grant(master_, kNowMs + kGrantValidMs)), kNowMs);
  v1::AccessGrant bad;
  bad.set_body("\xff\xff not a body");
  EXPECT_EQ(GrantIssuedMs(bad), 0);
}

TEST_F(GrantTest, OnlyAMasterOfThisCellCanSign) {
  // A user of this cell signing a grant for themselves.
  auto alice = IssueCredential(ca_, {Role::kUser, "alice", true}, kNowS, kGrantYear);
  ASSERT_TRUE(alice.ok());
  absl::Status st = Check(Grant(*alice));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(st.message(), "not signed by a master")) << st;
  // A master of another cell.
  auto other = CreateAuthority("other", kNowS, kGrantYear);
  ASSERT_TRUE(other.ok());
  auto foreign = IssueCredential(*other, {Role::kMaster, "master"}, kNowS, kGrantYear);
  ASSERT_TRUE(foreign.ok());
  st = Check(Grant(*foreign));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(st.message(), "signer")) << st;
}

TEST_F(GrantTest, ATamperedBodyOrSignatureIsRefused) {
  v1::AccessGrant g = Grant(master_);
  v1::AccessGrant::Body body;
  ASSERT_TRUE(body.ParseFromString(g.body()));
  body.set_user("mallory");
  v1::AccessGrant forged = g;
  forged.set_body(body.SerializeAsString());
  absl::Status st = Check(forged, "mallory");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(st.message(), "signature")) << st;
  forged = g;
  std::string sig = forged.signature();
  sig[sig.size() / 2] ^= 1;
  forged.set_signature(sig);
  EXPECT_EQ(Check(forged).code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace herd::pki
