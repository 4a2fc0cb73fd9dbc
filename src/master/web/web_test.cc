#include <gtest/gtest.h>

#include "master/web/session.h"
#include "master/web/web_ui.h"

namespace herd::master::web {
namespace {

pki::CertInfo Alice(int64_t not_after_s = 2'000'000'000) {
  pki::CertInfo c;
  c.subject = {pki::Role::kUser, "alice", false};
  c.serial = "1a2b";
  c.not_before_s = 1'000;
  c.not_after_s = not_after_s;
  return c;
}

constexpr int64_t kNow = 1'700'000'000'000;

TEST(WebSessions, ALoginLinkBecomesASessionOnce) {
  WebSessions s;
  const std::string login = s.MintLogin(Alice(), "", kNow);
  absl::StatusOr<std::string> session = s.Redeem(login, kNow + 1000);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<SessionClaims> c = s.Check(*session, kNow + 2000);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cert.subject.name, "alice");
  EXPECT_EQ(c->cert.serial, "1a2b");
  EXPECT_EQ(c->cert.not_before_s, 1'000);
  // Used once only.
  absl::StatusOr<std::string> again = s.Redeem(login, kNow + 3000);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(again.status().message().find("used already"), std::string::npos) << again.status();
}

TEST(WebSessions, ExpiredForgedOrConfusedTokensAreRefused) {
  WebSessions s;
  const std::string login = s.MintLogin(Alice(), "", kNow);
  EXPECT_EQ(s.Redeem(login, kNow + WebSessions::kLoginValidMs).status().code(), absl::StatusCode::kUnauthenticated);
  // A login link is not a session, and a session cannot be redeemed.
  EXPECT_FALSE(s.Check(login, kNow).ok());
  absl::StatusOr<std::string> session = s.Redeem(s.MintLogin(Alice(), "", kNow), kNow);
  ASSERT_TRUE(session.ok());
  EXPECT_FALSE(s.Redeem(*session, kNow).ok());
  EXPECT_FALSE(s.Check(*session, kNow + WebSessions::kSessionValidMs + 1).ok());
  // Another master's (or a restarted one's) tokens.
  WebSessions other;
  EXPECT_FALSE(other.Check(*session, kNow).ok());
  // A changed payload (the name) fails the signature.
  std::string tampered = *session;
  tampered[3] = tampered[3] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(s.Check(tampered, kNow).ok());
  EXPECT_FALSE(s.Check("", kNow).ok());
  EXPECT_FALSE(s.Check("no-dot", kNow).ok());
  EXPECT_FALSE(s.Check(std::string(5000, 'a') + ".b", kNow).ok());
}

TEST(WebSessions, NeverOutlivesItsCredential) {
  WebSessions s;
  const int64_t cert_end_s = kNow / 1000 + 60;
  absl::StatusOr<std::string> session = s.Redeem(s.MintLogin(Alice(cert_end_s), "", kNow), kNow);
  ASSERT_TRUE(session.ok());
  EXPECT_TRUE(s.Check(*session, kNow + 30'000).ok());
  EXPECT_FALSE(s.Check(*session, kNow + 61'000).ok());
}

TEST(WebSessions, CookieHeader) {
  EXPECT_EQ(WebSessions::FromCookie("a=b; herd_session=xyz.abc; c=d"), "xyz.abc");
  EXPECT_EQ(WebSessions::FromCookie("herd_session=t"), "t");
  EXPECT_EQ(WebSessions::FromCookie("herd_sessionx=t; other=1"), "");
  EXPECT_EQ(WebSessions::FromCookie(""), "");
}

TEST(WebSessions, OneUsersLoginsCannotLockOutOthers) {
  WebSessions s;
  for (size_t i = 0; i < WebSessions::kMaxRedeemedPerUser; ++i) {
    ASSERT_TRUE(s.Redeem(s.MintLogin(Alice(), "", kNow), kNow).ok()) << i;
  }
  absl::StatusOr<std::string> more = s.Redeem(s.MintLogin(Alice(), "", kNow), kNow);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(more.status().message().find("logged in 100 times"), std::string::npos) << more.status();
  pki::CertInfo bob = Alice();
  bob.subject.name = "bob";
  EXPECT_TRUE(s.Redeem(s.MintLogin(bob, "", kNow), kNow).ok()) << "bob is not held back by alice";
  // Once alice's links have expired, she logs in again.
  const int64_t later = kNow + WebSessions::kLoginValidMs + 1;
  EXPECT_TRUE(s.Redeem(s.MintLogin(Alice(), "", later), later).ok());
}

TEST(WebSessions, LoggingOutEndsTheSession) {
  WebSessions s;
  absl::StatusOr<std::string> session = s.Redeem(s.MintLogin(Alice(), "", kNow), kNow);
  ASSERT_TRUE(session.ok());
  absl::StatusOr<std::string> other = s.Redeem(s.MintLogin(Alice(), "", kNow), kNow);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(s.LogOut(*session, kNow + 1));
  EXPECT_EQ(s.Check(*session, kNow + 2).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(s.Check(*other, kNow + 2).ok()) << "another session of hers goes on";
  EXPECT_FALSE(s.LogOut("garbage", kNow));
  // A login link can be looked at (for the confirmation page), not used as a session.
  const std::string login = s.MintLogin(Alice(), "", kNow);
  EXPECT_TRUE(s.CheckLogin(login, kNow).ok());
  EXPECT_FALSE(s.CheckLogin(*other, kNow).ok());
}

TEST(WebPages, EscapesMarkup) {
  EXPECT_EQ(HtmlEscape("<script>alert('x')</script>&\""), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;");
}

TEST(WebPages, ChartsScaleToTheLargestSample) {
  const std::string none = SvgChart({}, "CPU", [](double v) { return std::to_string(v); });
  EXPECT_NE(none.find("no samples yet"), std::string::npos);
  const std::string two = SvgChart({{1000, 5}, {61000, 10}}, "CPU <x>", [](double v) { return absl::StrCat(v, "m"); });
  EXPECT_NE(two.find("<polyline"), std::string::npos);
  EXPECT_NE(two.find(">10m<"), std::string::npos);  // the axis label is the maximum
  EXPECT_NE(two.find("CPU &lt;x&gt;"), std::string::npos);
  EXPECT_EQ(two.find("CPU <x>"), std::string::npos);
}

}  // namespace
}  // namespace herd::master::web
