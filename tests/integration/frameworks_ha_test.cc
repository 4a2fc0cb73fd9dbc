// The Framework API across a master failover (issue #17) on a real cell:
// three `herd master --store etcd://...` replicas on a real etcd, two
// agents. herd-example-framework, given the master list, subscribes to the
// leader and launches its tasks; the leader is killed -9 while they run.
// The new leader rebuilds the framework's registry from the cell; the
// framework finds it, subscribes again with its id, and hears how its
// tasks ended (the new leader re-delivers every task's latest status until
// acknowledged). Nothing is launched twice and the framework exits 0.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "harness/harness.h"
#include "store/etcd/testing.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Child;
using harness::Eventually;
using namespace std::chrono_literals;

std::string FrameworkBinary() { return harness::BinaryBesideHerd("herd-example-framework"); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FrameworksHaTest, AFrameworkFollowsAMasterFailoverAndKeepsItsTasks) {
  Cell cell;
  store::etcd::testing::EtcdCluster etcd(cell.dir().Sub("etcd"), 3);
  std::filesystem::create_directories(cell.dir().Sub("etcd"));
  absl::Status st = etcd.Start();
  ASSERT_TRUE(st.ok()) << st;
  st = cell.StartReplicas(3, etcd.Url("/herd/fw-ha-test/"));
  ASSERT_TRUE(st.ok()) << st << cell.LogTails();
  ASSERT_TRUE(cell.StartAgents(2).ok()) << cell.LogTails();

  // Tasks long enough to outlive the failover; each may be tried once only
  // (--retries 0), so a relaunch would fail the run.
  const std::string log = cell.dir().Sub("logs/framework.log");
  auto fw = Child::Spawn("framework",
                         {FrameworkBinary(), "--master", cell.master_address(), "--credentials",
                          cell.UserCredential("alice"), "--name", "survivor", "--tasks", "3", "--retries", "0",
                          "--cpu", "100m", "--memory", "32Mi", "--timeout", "5m", "--", "/bin/sleep", "15"},
                         log);
  ASSERT_TRUE(fw.ok()) << fw.status();
  // Its three tasks run.
  auto framework_jobs = [&](v1::Job::State state) {
    auto jobs = cell.Jobs(/*include_dead=*/true);
    int n = 0;
    if (!jobs.ok()) return -1;
    for (const v1::Job& j : jobs->jobs()) {
      if (j.spec().labels().contains("herd.framework")) n += state == v1::Job::STATE_UNSPECIFIED || j.state() == state;
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return framework_jobs(v1::Job::RUNNING) == 3; }, 60s))
      << ReadFile(log) << cell.LogTails();

  const int leader = cell.LeaderIndex();
  ASSERT_GE(leader, 0) << cell.LogTails();
  cell.StopReplica(leader, SIGKILL);

  // The framework finishes: all three succeeded, each launched once.
  std::optional<int> status = (*fw)->Wait(240s);
  ASSERT_TRUE(status.has_value()) << "the framework did not finish\n" << ReadFile(log) << cell.LogTails();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << ReadFile(log) << cell.LogTails();
  const std::string out = ReadFile(log);
  EXPECT_NE(out.find("(3/3)"), std::string::npos) << out;
  EXPECT_NE(out.find("subscribing again"), std::string::npos) << "its stream never broke?\n" << out;
  EXPECT_EQ(framework_jobs(v1::Job::STATE_UNSPECIFIED), 3) << out;
  EXPECT_EQ(framework_jobs(v1::Job::DEAD), 3) << out;
  const int next = cell.LeaderIndex();
  EXPECT_GE(next, 0);
  EXPECT_NE(next, leader);
}

}  // namespace
}  // namespace herd
