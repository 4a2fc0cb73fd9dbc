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

}  // namespace
}  // namespace herd::master
