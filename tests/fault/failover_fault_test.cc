// Fault suite, first scenarios (issue #12, deliverable 5): real etcd members
// and masters as processes on loopback, a stream of writes while the control
// plane is hit. Invariants checked after every run: no acknowledged write
// lost (every job whose submit returned 0 exists and runs), no running task
// stopped or started again by a control-plane fault (same pid, incarnation
// 1), every job eventually placed.
//
// Short mode (CTest, label "fault"): a few faults per scenario. Long mode:
// HERD_FAULT_ROUNDS=N runs N faults per scenario; every run prints
// RESULT lines with its counts (runs, kills, lost, restarted).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fault/fault_support.h"
#include "harness/harness.h"
#include "store/etcd/testing.h"

namespace herd {
namespace {

using fault::JobSpec;
using fault::Rounds;
using harness::Cell;
using harness::Eventually;
using harness::Summarize;
using namespace std::chrono_literals;

class FailoverFault : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(cell_.dir().Sub("etcd"));
    etcd_ = std::make_unique<store::etcd::testing::EtcdCluster>(cell_.dir().Sub("etcd"), 3);
    absl::Status st = etcd_->Start();
    ASSERT_TRUE(st.ok()) << st;
    st = cell_.StartReplicas(3, etcd_->Url("/herd/fault/"));
    ASSERT_TRUE(st.ok()) << st << cell_.LogTails();
    ASSERT_TRUE(cell_.StartAgents(2).ok()) << cell_.LogTails();
    cell_.WriteSpec("base.yaml", JobSpec("base", 8));
    ASSERT_EQ(cell_.Herd({"submit", cell_.dir().Sub("base.yaml")}).exit_code, 0);
    base_ = WaitRunning("alice/base", 8);
  }

  std::map<int, int64_t> WaitRunning(const std::string& job, int n) { return cell_.WaitRunning(job, n); }

  // What a process supervisor does: a master that exited (e.g. it lost its
  // lease when its etcd member died) is started again, as a follower.
  void Supervise() {
    for (int i = 0; i < cell_.replica_count(); ++i) {
      if (!cell_.replica(i)->Running()) {
        ASSERT_TRUE(cell_.RestartReplica(i).ok());
      }
    }
  }

  // The invariants; prints the run's RESULT lines.
  void Check(const std::string& scenario, int faults) {
    writes_.Stop();
    Supervise();
    ASSERT_TRUE(Eventually([&] { return cell_.LeaderIndex() >= 0; }, 60s)) << cell_.LogTails();
    const std::vector<std::string> acked = writes_.acked();
    for (const std::string& f : writes_.failures()) std::printf("not acknowledged: %s\n", f.c_str());
    const int lost = fault::CountLost(cell_, acked);
    // Every acknowledged job is placed and runs.
    for (const std::string& j : acked) WaitRunning("alice/" + j, 1);
    int restarted = 0;
    auto now = cell_.Tasks("alice/base");
    EXPECT_TRUE(now.ok()) << now.status();
    if (now.ok()) {
      for (const auto& t : now->tasks()) {
        if (t.pid() != base_[t.index()] || t.incarnation() != 1) {
          ++restarted;
          ADD_FAILURE() << "task " << t.index() << " was touched: " << Summarize(*now);
        }
      }
    }
    std::printf("RESULT %s_faults=%d\nRESULT %s_writes_attempted=%d\nRESULT %s_writes_acknowledged=%zu\n"
                "RESULT %s_lost_acknowledged_writes=%d\nRESULT %s_tasks_restarted=%d\n",
                scenario.c_str(), faults, scenario.c_str(), writes_.attempts(), scenario.c_str(), acked.size(),
                scenario.c_str(), lost, scenario.c_str(), restarted);
    EXPECT_GT(acked.size(), 0u);
  }

  Cell cell_;
  std::unique_ptr<store::etcd::testing::EtcdCluster> etcd_;
  std::map<int, int64_t> base_;
  fault::WriteStream writes_{&cell_};
};

// kill -9 the leader at random points of a stream of submissions; the
// killed replica is started again (as a supervisor would).
TEST_F(FailoverFault, LeaderKilledAtRandomWhileWritesStreamIn) {
  writes_.Start();
  const int rounds = Rounds(3);
  for (int k = 0; k < rounds; ++k) {
    writes_.AfterWrites(writes_.RandomWrites(1, 8));
    int leader = -1;
    ASSERT_TRUE(Eventually([&] { return (leader = cell_.LeaderIndex()) >= 0; }, 60s)) << cell_.LogTails();
    cell_.StopReplica(leader, SIGKILL);
    ASSERT_TRUE(Eventually([&] { return cell_.LeaderIndex() >= 0; }, 60s)) << cell_.LogTails();
    Supervise();
  }
  Check("leader_kill", rounds);
}

// kill -9 an etcd member (then start it again) while writes stream in: the
// quorum holds, the masters switch members, nothing is lost.
TEST_F(FailoverFault, EtcdMemberKilledWhileWritesStreamIn) {
  writes_.Start();
  const int rounds = Rounds(3);
  for (int k = 0; k < rounds; ++k) {
    writes_.AfterWrites(writes_.RandomWrites(1, 8));
    const size_t victim = static_cast<size_t>(k % 3);
    etcd_->Kill(victim);
    writes_.AfterWrites(writes_.RandomWrites(1, 4));  // it stays dead for a few writes
    ASSERT_TRUE(etcd_->Restart(victim).ok());
    ASSERT_TRUE(etcd_->WaitReady().ok());
    Supervise();
  }
  Check("etcd_member_kill", rounds);
}

}  // namespace
}  // namespace herd
