#include "master/core/admission/audit.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace herd::master {
namespace {

std::vector<nlohmann::json> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(AuditLog, RecordsEveryDecisionOnWhatChangesOrOpensATask) {
  char tmpl[] = "/tmp/herd-audit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ManualClock clock(1'800'000'000'123);
  auto log = AuditLog::Open({dir + "/audit.log", 600, 2}, &clock);
  ASSERT_TRUE(log.ok()) << log.status();
  AuditingAuthorizer auth(std::make_shared<CellPolicy>(), std::shared_ptr<AuditLog>(std::move(*log)));
  Principal bob = Principal::User("bob");
  bob.credential = "abc";
  const Resource web{"alice/web", "alice", ""};
  EXPECT_FALSE(auth.Authorize(bob, Action::kKillJob, web).ok());
  EXPECT_TRUE(auth.Authorize(Principal::User("alice"), Action::kExecTask, web).ok());
  EXPECT_TRUE(auth.Authorize(bob, Action::kReadJob, web).ok());  // a read: not recorded
  std::vector<nlohmann::json> got = Lines(dir + "/audit.log");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["time"], "2027-01-15T08:00:00.123Z");
  EXPECT_EQ(got[0]["user"], "bob");
  EXPECT_EQ(got[0]["credential"], "abc");
  EXPECT_EQ(got[0]["action"], "kill-job");
  EXPECT_EQ(got[0]["on"], "job alice/web");
  EXPECT_EQ(got[0]["allowed"], false);
  EXPECT_NE(got[0]["why"].get<std::string>().find("'admin'"), std::string::npos);
  EXPECT_EQ(got[1]["action"], "exec");
  EXPECT_EQ(got[1]["allowed"], true);
  // Past max_bytes it rotates, keeping `keep` old files.
  for (int i = 0; i < 20; ++i) (void)auth.Authorize(bob, Action::kKillJob, web);
  EXPECT_TRUE(std::filesystem::exists(dir + "/audit.log.1"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/audit.log.2"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/audit.log.3"));
  EXPECT_LE(std::filesystem::file_size(dir + "/audit.log"), 600u);
  std::filesystem::remove_all(dir);
}

// Issue #33, L3: a refused export and a refused identity (revoked, act-as)
// were not recorded; one user's flood rotated everyone's records away.
TEST(AuditLog, RecordsEveryRefusalAndLimitsEachUsersRate) {
  char tmpl[] = "/tmp/herd-audit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ManualClock clock(1'800'000'000'123);
  AuditLog::Options o;
  o.path = dir + "/audit.log";
  o.per_user_rate = 1;
  o.per_user_burst = 3;
  auto log = AuditLog::Open(o, &clock);
  ASSERT_TRUE(log.ok()) << log.status();
  AuditingAuthorizer auth(std::make_shared<CellPolicy>(), std::shared_ptr<AuditLog>(std::move(*log)));
  Principal bob = Principal::User("bob");
  EXPECT_FALSE(auth.Authorize(bob, Action::kExportCheckpoint, Resource{}).ok());  // a read, but refused
  auth.Unidentified("carol", "c0ffee", "alice", absl::PermissionDeniedError("carol may not act as user alice"));
  std::vector<nlohmann::json> got = Lines(dir + "/audit.log");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["action"], "export-checkpoint");
  EXPECT_EQ(got[0]["allowed"], false);
  EXPECT_EQ(got[1]["user"], "carol");
  EXPECT_EQ(got[1]["acting_for"], "alice");
  EXPECT_EQ(got[1]["action"], "identify");
  EXPECT_EQ(got[1]["allowed"], false);

  // Bob floods: two more of his (his burst is 3), the rest counted.
  const Resource web{"alice/web", "alice", ""};
  for (int i = 0; i < 50; ++i) (void)auth.Authorize(bob, Action::kKillJob, web);
  // Alice is not held back by bob.
  EXPECT_TRUE(auth.Authorize(Principal::User("alice"), Action::kKillJob, web).ok());
  got = Lines(dir + "/audit.log");
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[4]["user"], "alice");
  // A second later bob may write one more, after the line that says how
  // many of his went unrecorded.
  clock.AdvanceMs(1000);
  (void)auth.Authorize(bob, Action::kKillJob, web);
  got = Lines(dir + "/audit.log");
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[5]["user"], "bob");
  EXPECT_EQ(got[5]["suppressed"], 48);
  EXPECT_EQ(got[6]["action"], "kill-job");
  std::filesystem::remove_all(dir);
}

// Joins without a credential (herd agent --join) are recorded with their
// token and address, and held to a rate by address: a caller who makes up a
// new token id for every try cannot flood the log.
TEST(AuditLog, JoinsAreRecordedAndHeldToARatePerAddress) {
  char tmpl[] = "/tmp/herd-audit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ManualClock clock(1'800'000'000'123);
  AuditLog::Options o;
  o.path = dir + "/audit.log";
  o.per_user_rate = 1;
  o.per_user_burst = 3;
  auto log = AuditLog::Open(o, &clock);
  ASSERT_TRUE(log.ok()) << log.status();
  AuditingAuthorizer auth(std::make_shared<CellPolicy>(), std::shared_ptr<AuditLog>(std::move(*log)));
  auth.Joined("10.0.0.9", "abc123", "node5", absl::OkStatus());
  for (int i = 0; i < 50; ++i) {
    auth.Joined("10.6.6.6", absl::StrCat("id", i), "evil", absl::UnauthenticatedError("unknown join token"));
  }
  std::vector<nlohmann::json> got = Lines(dir + "/audit.log");
  ASSERT_EQ(got.size(), 4u);  // the join, and the flood's burst of 3
  EXPECT_EQ(got[0]["action"], "join-machine");
  EXPECT_EQ(got[0]["who"], "join token abc123 from 10.0.0.9");
  EXPECT_EQ(got[0]["on"], "machine node5");
  EXPECT_EQ(got[0]["allowed"], true);
  EXPECT_EQ(got[3]["allowed"], false);
  EXPECT_EQ(got[3]["why"], "unknown join token");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace herd::master
