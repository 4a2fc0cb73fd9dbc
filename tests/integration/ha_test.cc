// Replicated masters on etcd (issue #12) on a real cell: three `herd
// master --store etcd://...` processes on a real etcd, agents and task
// processes on loopback. The leader is killed (-9) again and again: each
// time another replica takes over from its hot state, a write sent through
// the master list is acknowledged by the new leader, nothing acknowledged
// before is lost, and no running task is stopped or started again (same
// pid, incarnation 1). Every wait is for an event.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"
#include "herd/v1/api.grpc.pb.h"
#include "rpc/rpc.h"
#include "store/etcd/testing.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using harness::Summarize;
using namespace std::chrono_literals;

std::string JobSpec(const std::string& name, int tasks) {
  return absl::StrCat("name: ", name, "\nuser: alice\ntasks: ", tasks,
                      "\ncommand: [\"/bin/sleep\", \"3600\"]\nresources: {cpu: 10m, memory: 8Mi}\n");
}

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = std::make_unique<store::etcd::testing::EtcdCluster>(cell_.dir().Sub("etcd"), 3);
    std::filesystem::create_directories(cell_.dir().Sub("etcd"));
    absl::Status st = etcd_->Start();
    ASSERT_TRUE(st.ok()) << st;
    st = cell_.StartReplicas(3, etcd_->Url("/herd/ha-test/"), {"--dns", "127.0.0.1:0"});
    ASSERT_TRUE(st.ok()) << st << cell_.LogTails();
    ASSERT_TRUE(cell_.StartAgents(2).ok()) << cell_.LogTails();
  }

  // pid of every task of `job`, by index, once all `n` run.
  std::map<int, int64_t> WaitRunning(const std::string& job, int n) { return cell_.WaitRunning(job, n); }

  Cell cell_;
  std::unique_ptr<store::etcd::testing::EtcdCluster> etcd_;
};

TEST_F(HaTest, KillingTheLeaderLosesNothingAndTouchesNoTask) {
  cell_.WriteSpec("web.yaml", JobSpec("web", 6));
  RunResult r = cell_.Herd({"submit", cell_.dir().Sub("web.yaml")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const std::map<int, int64_t> before = WaitRunning("alice/web", 6);

  std::set<int> leaders;
  for (int kill = 0; kill < 3; ++kill) {
    const int leader = cell_.LeaderIndex();
    ASSERT_GE(leader, 0) << cell_.LogTails();
    leaders.insert(leader);
    cell_.StopReplica(leader, SIGKILL);
    // A write through the list lands once another replica leads.
    const std::string job = absl::StrCat("after-kill-", kill);
    cell_.WriteSpec(job + ".yaml", JobSpec(job, 1));
    ASSERT_TRUE(Eventually([&] {
      return (r = cell_.Herd({"submit", cell_.dir().Sub(job + ".yaml")}, 5s)).exit_code == 0;
    }, 60s)) << r.Describe() << cell_.LogTails();
    const int next = cell_.LeaderIndex();
    ASSERT_GE(next, 0);
    EXPECT_NE(next, leader);
    // The killed replica comes back as a follower.
    ASSERT_TRUE(cell_.RestartReplica(leader).ok());
  }
  EXPECT_GE(leaders.size(), 2u);  // leadership really moved around

  // Nothing acknowledged was lost: every job is there and runs.
  for (int kill = 0; kill < 3; ++kill) WaitRunning(absl::StrCat("alice/after-kill-", kill), 1);
  // No task of the first job was stopped or started again.
  auto tasks = cell_.Tasks("alice/web");
  ASSERT_TRUE(tasks.ok());
  for (const auto& t : tasks->tasks()) {
    EXPECT_EQ(t.pid(), before.at(t.index())) << Summarize(*tasks);
    EXPECT_EQ(t.incarnation(), 1) << Summarize(*tasks);
    EXPECT_EQ(t.restarts(), 0) << Summarize(*tasks);
  }
  // And no machine was marked down by a new leader.
  auto machines = cell_.Machines();
  ASSERT_TRUE(machines.ok());
  for (const auto& m : machines->machines()) EXPECT_EQ(m.state(), v1::Machine::UP) << m.name();
}

// herd drain: nothing new goes to the drained machine, its tasks move off
// within the job's disruption budget (never more than one down at once here,
// checked on every mutation of the job through the leader's log), and the
// drain goes on across a failover; herd machines shows it; undrain.
TEST_F(HaTest, ADrainMovesTasksWithinTheBudgetAcrossAFailover) {
  cell_.WriteSpec("web.yaml", JobSpec("web", 4) + "disruption_budget: {max_unavailable: 1}\n");
  RunResult r = cell_.Herd({"submit", cell_.dir().Sub("web.yaml")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  WaitRunning("alice/web", 4);
  // Drain the machine with the most of them.
  auto tasks = cell_.Tasks("alice/web");
  ASSERT_TRUE(tasks.ok());
  std::map<std::string, int> per;
  for (const auto& t : tasks->tasks()) ++per[t.machine()];
  std::string victim = per.begin()->first;
  for (const auto& [m, n] : per) {
    if (n > per[victim]) victim = m;
  }
  // Not an admin: refused, naming the permission.
  r = cell_.HerdAs("bob", {"drain", victim});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("drain-machine"), std::string::npos) << r.Describe();

  r = cell_.Herd({"drain", victim, "--reason", "kernel upgrade"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  cell_.StopReplica(cell_.LeaderIndex(), SIGKILL);  // mid-drain

  // Sample the job until nothing runs on the victim; at no sample are more
  // than one of its tasks unavailable.
  int worst = 0;
  ASSERT_TRUE(Eventually([&] {
    auto t = cell_.Tasks("alice/web");
    if (!t.ok()) return false;
    int down = 0, on_victim = 0;
    for (const auto& task : t->tasks()) {
      down += !(task.state() == v1::Task::RUNNING && task.phase() == v1::Task::ACTIVE);
      on_victim += task.machine() == victim && task.state() == v1::Task::RUNNING;
    }
    worst = std::max(worst, down);
    return on_victim == 0 && down == 0;
  }, 90s)) << cell_.LogTails();
  EXPECT_LE(worst, 1);
  r = cell_.Herd({"machines"});
  EXPECT_NE(r.out.find("DRAINED (kernel upgrade)"), std::string::npos) << r.out;
  // New work avoids it.
  cell_.WriteSpec("more.yaml", JobSpec("more", 3));
  ASSERT_EQ(cell_.Herd({"submit", cell_.dir().Sub("more.yaml")}).exit_code, 0);
  for (const auto& [index, pid] : WaitRunning("alice/more", 3)) {
    (void)pid;
    auto t = cell_.Tasks("alice/more");
    ASSERT_TRUE(t.ok());
    EXPECT_NE(t->tasks(index).machine(), victim);
  }
  r = cell_.Herd({"undrain", victim});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  r = cell_.Herd({"machines"});
  EXPECT_EQ(r.out.find("DRAINED"), std::string::npos) << r.out;
}

// Any replica serves: a follower answers reads from its hot state (saying
// it is a follower, who leads and at which revision) and forwards changes to
// the leader on behalf of the caller, answering once it has applied them
// itself (read-your-writes through one replica).
TEST_F(HaTest, AFollowerAnswersReadsAndForwardsChanges) {
  const int leader = cell_.LeaderIndex();
  ASSERT_GE(leader, 0) << cell_.LogTails();
  std::vector<std::string> list = absl::StrSplit(cell_.master_address(), ',');
  for (int i = 0; i < cell_.replica_count(); ++i) {
    if (i == leader) continue;
    auto info = cell_.HerdJson<v1::CellInfo>({"--master", list[i], "cell"});
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->role(), "follower");
    EXPECT_EQ(info->replica(), list[i]);
    EXPECT_EQ(info->leader(), list[leader]);
    EXPECT_NE(info->store().find("etcd://"), std::string::npos) << info->store();

    const std::string job = absl::StrCat("via-", i);
    cell_.WriteSpec(job + ".yaml", JobSpec(job, 2));
    RunResult r = cell_.Herd({"--master", list[i], "submit", cell_.dir().Sub(job + ".yaml")});
    ASSERT_EQ(r.exit_code, 0) << r.Describe() << cell_.LogTails();
    // Read back at once from the same follower: it is there.
    auto tasks = cell_.HerdJson<v1::ListTasksResponse>({"--master", list[i], "tasks", "alice/" + job});
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    EXPECT_EQ(tasks->tasks_size(), 2);
    WaitRunning("alice/" + job, 2);
    // Names come from the follower's own state: Resolve and its DNS
    // responder answer there too.
    ASSERT_TRUE(Eventually([&] {
      auto names = cell_.HerdJson<v1::ResolveResponse>({"--master", list[i], "resolve", "alice/" + job});
      return names.ok() && names->records_size() == 2 && names->records(0).address() == "127.0.0.1" &&
             names->records(1).address() == "127.0.0.1";
    })) << cell_.LogTails();
    const std::string dns = info->dns();
    ASSERT_FALSE(dns.empty());
    RunResult dig = harness::Run({"/usr/bin/dig", "@127.0.0.1", "-p", dns.substr(dns.rfind(':') + 1), "+short",
                                  absl::StrCat("1.", job, ".alice.local.herd")});
    EXPECT_EQ(dig.out, "127.0.0.1\n") << dig.Describe();
    // The leader has it too (it made the change).
    auto at_leader = cell_.HerdJson<v1::ListTasksResponse>({"--master", list[leader], "tasks", "alice/" + job});
    ASSERT_TRUE(at_leader.ok()) << at_leader.status();
    // Authorization is the caller's, not the forwarding master's: bob may
    // not drain through a follower either.
    r = cell_.HerdAs("bob", {"--master", list[i], "drain", "m1"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("drain-machine"), std::string::npos) << r.Describe();
    // Kill through the follower.
    r = cell_.Herd({"--master", list[i], "kill", "alice/" + job});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
}

// A change sent to a follower while the leader is dead waits for the
// election and is made by the new leader: one try, no client retry.
TEST_F(HaTest, AChangeThroughAFollowerWaitsOutAnElection) {
  const int leader = cell_.LeaderIndex();
  ASSERT_GE(leader, 0) << cell_.LogTails();
  std::vector<std::string> list = absl::StrSplit(cell_.master_address(), ',');
  const int follower = (leader + 1) % cell_.replica_count();
  cell_.WriteSpec("during.yaml", JobSpec("during", 1));
  cell_.StopReplica(leader, SIGKILL);
  RunResult r = cell_.Herd({"--master", list[follower], "submit", cell_.dir().Sub("during.yaml")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << cell_.LogTails();
  const int next = cell_.LeaderIndex();
  ASSERT_GE(next, 0);
  EXPECT_NE(next, leader);
  WaitRunning("alice/during", 1);
}

// Only a master may forward on behalf of someone else: a user who sends the
// forwarding header with an admin's certificate is refused, and nothing
// changes.
TEST_F(HaTest, OnlyAMasterMayForwardForSomeoneElse) {
  const int leader = cell_.LeaderIndex();
  ASSERT_GE(leader, 0) << cell_.LogTails();
  std::vector<std::string> list = absl::StrSplit(cell_.master_address(), ',');
  auto bob = pki::LoadCredential(cell_.UserCredential("bob"));
  auto alice = pki::LoadCredential(cell_.UserCredential("alice"));  // an admin in the harness
  ASSERT_TRUE(bob.ok() && alice.ok());
  auto stub = v1::Herd::NewStub(rpc::Channel(list[leader], *bob, rpc::MasterIdentity()));
  grpc::ClientContext ctx;
  ctx.AddMetadata(rpc::kForwardedForKey, alice->cert_pem);
  v1::DrainMachinesRequest req;
  req.add_machines("m1");
  v1::DrainMachinesResponse resp;
  grpc::Status st = stub->DrainMachines(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("may not forward"), std::string::npos) << st.error_message();
  RunResult r = cell_.Herd({"machines"});
  EXPECT_EQ(r.out.find("DRAINED"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace herd
