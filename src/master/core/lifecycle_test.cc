#include "master/core/lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "master/core/recovery.h"
#include "testing/builders.h"
#include "testing/fake_agent_link.h"

namespace herd::master {
namespace {

using ::testing::ElementsAre;
using namespace herd::testing;  // NOLINT

class LifecycleTest : public ::testing::Test {
 protected:
  // A part that writes "start NAME" / "stop NAME" / "step NAME" into log_.
  MasterPart Part(const std::string& name, absl::Status start = absl::OkStatus()) {
    return {name,
            [this, name, start] {
              log_.push_back("start " + name);
              return start;
            },
            [this, name] { log_.push_back("stop " + name); },
            [this, name] {
              log_.push_back("step " + name);
              return absl::OkStatus();
            }};
  }
  // A replica that follows the (empty) store.
  std::unique_ptr<MasterCore> Follower() {
    auto state = Recover(store_, 0);
    EXPECT_TRUE(state.ok()) << state.status();
    MasterOptions o;
    o.run_scheduler = false;  // threads we do not need here
    o.run_link = false;
    auto core = MasterCore::CreateFollower(&store_, &clock_, o, std::move(*state));
    EXPECT_TRUE(core.ok()) << core.status();
    return std::move(*core);
  }

  ManualClock clock_;
  store::MemoryLogStore store_;
  FakeAgentLink link_;
  std::vector<std::string> log_;
};

// The replica's path: follow, lead, step down, stop -- each list started in
// order and stopped in reverse, leader-only parts only while leading.
TEST_F(LifecycleTest, PhasesStartAndStopEachListInOrder) {
  std::unique_ptr<MasterCore> core = Follower();
  MasterLifecycle life(core.get());
  life.AddPart(Part("history"));
  life.AddPart(Part("api"));
  life.AddLeaderPart(Part("alerts"));
  life.AddLeaderPart(Part("frameworks"));
  EXPECT_EQ(life.phase(), MasterLifecycle::Phase::kNew);

  ASSERT_TRUE(life.Start().ok());
  EXPECT_EQ(life.phase(), MasterLifecycle::Phase::kFollowing);
  EXPECT_THAT(log_, ElementsAre("start history", "start api"));
  EXPECT_FALSE(core->leading());
  EXPECT_TRUE(life.LeaderPartNames().empty());

  log_.clear();
  // A follower cannot lead without the leader's store.
  EXPECT_EQ(life.Promote().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(life.Promote(&store_, &link_).ok());
  EXPECT_EQ(life.phase(), MasterLifecycle::Phase::kLeading);
  EXPECT_TRUE(core->leading());
  // The one list of what runs on the leader only: the core's, then the
  // process's.
  EXPECT_THAT(life.LeaderPartNames(), ElementsAre("rollouts", "batch", "alerts", "frameworks"));
  EXPECT_THAT(log_, ElementsAre("start alerts", "start frameworks"));
  EXPECT_EQ(life.Step().code(), absl::StatusCode::kFailedPrecondition);  // threads run them

  log_.clear();
  life.Demote();
  EXPECT_EQ(life.phase(), MasterLifecycle::Phase::kDemoted);
  EXPECT_THAT(log_, ElementsAre("stop frameworks", "stop alerts"));
  EXPECT_TRUE(life.LeaderPartNames().empty());
  // A demoted master restarts as a follower; it does not take over again.
  EXPECT_EQ(life.Promote(&store_, &link_).code(), absl::StatusCode::kFailedPrecondition);

  log_.clear();
  life.Stop();
  EXPECT_EQ(life.phase(), MasterLifecycle::Phase::kStopped);
  EXPECT_THAT(log_, ElementsAre("stop api", "stop history"));
  life.Stop();  // idempotent
  EXPECT_EQ(log_.size(), 2u);
  EXPECT_EQ(life.Start().code(), absl::StatusCode::kFailedPrecondition);
}

// Stop while leading stops the leader-only parts first, then the rest.
TEST_F(LifecycleTest, StopWhileLeadingStopsLeaderPartsFirst) {
  std::unique_ptr<MasterCore> core = Follower();
  MasterLifecycle life(core.get());
  life.AddPart(Part("api"));
  life.AddLeaderPart(Part("frameworks"));
  ASSERT_TRUE(life.Start().ok());
  ASSERT_TRUE(life.Promote(&store_, &link_).ok());
  log_.clear();
  life.Stop();
  EXPECT_THAT(log_, ElementsAre("stop frameworks", "stop api"));
}

// A part that cannot start fails its phase by name, and the parts started
// before it in that phase are stopped again.
TEST_F(LifecycleTest, APartThatFailsToStartUndoesItsPhase) {
  std::unique_ptr<MasterCore> core = Follower();
  MasterLifecycle life(core.get());
  life.AddPart(Part("history"));
  life.AddPart(Part("api", absl::UnavailableError("cannot listen on :7070: in use")));
  life.AddPart(Part("never"));
  absl::Status st = life.Start();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "api: cannot listen on :7070: in use");
  EXPECT_THAT(log_, ElementsAre("start history", "start api", "stop history"));
  EXPECT_EQ(life.phase(), MasterLifecycle::Phase::kStopped);

  std::unique_ptr<MasterCore> other = Follower();
  MasterLifecycle leader(other.get());
  leader.AddLeaderPart(Part("alerts"));
  leader.AddLeaderPart(Part("frameworks", absl::InternalError("boom")));
  ASSERT_TRUE(leader.Start().ok());
  log_.clear();
  st = leader.Promote(&store_, &link_);
  EXPECT_EQ(st.message(), "frameworks: boom");
  EXPECT_THAT(log_, ElementsAre("start alerts", "start frameworks", "stop alerts"));
  EXPECT_EQ(leader.phase(), MasterLifecycle::Phase::kDemoted);
}

// The simulator's way: nothing starts a thread; Step() runs one round of
// every leader-only part on the caller's thread, the core's first (a
// scheduler pass, then a poll of every machine).
TEST_F(LifecycleTest, SteppedModeRunsTheLeaderPartsOnTheCallersThread) {
  MasterOptions o;
  o.link.max_down_fraction = 1.0;
  auto created = MasterCore::Create(&store_, &link_, &clock_, o);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<MasterCore> core = std::move(*created);
  MasterLifecycle life(core.get(), MasterLifecycle::Mode::kStepped);
  life.AddPart(Part("api"));
  life.AddLeaderPart(Part("alerts"));
  ASSERT_TRUE(life.Start().ok());
  EXPECT_TRUE(log_.empty());                                             // stepped: nothing is started
  EXPECT_EQ(life.Step().code(), absl::StatusCode::kFailedPrecondition);  // not leading yet
  ASSERT_TRUE(life.Promote().ok());                                      // Create's core leads already
  EXPECT_THAT(life.LeaderPartNames(), ElementsAre("scheduler", "link", "rollouts", "batch", "alerts"));

  v1::RegisterMachineRequest reg;
  *reg.mutable_machine() = MachineBuilder("m1").Cpu(4000).Address("m1:1").Build();
  ASSERT_TRUE(core->machines().RegisterMachine(Principal::Machine("m1"), reg).ok());
  v1::SubmitRequest sub;
  *sub.add_jobs() = JobBuilder("web").Tasks(2).Cpu(100).Build();
  ASSERT_TRUE(core->jobs().Submit(Principal::User("alice"), sub).ok());
  auto running = [&] {
    return core->committer().Read([](const cell::CellState& s) { return s.task_count(v1::Task::RUNNING); });
  };
  EXPECT_EQ(running(), 0);
  ASSERT_TRUE(life.Step().ok());
  EXPECT_EQ(running(), 2);  // placed by the scheduler part, on this thread
  EXPECT_THAT(log_, ElementsAre("step alerts"));
  // The agent was polled in the same step and told to start both tasks.
  EXPECT_EQ(link_.Runs("m1:1"), 2);
  life.Stop();
  EXPECT_THAT(log_, ElementsAre("step alerts"));  // stepped parts are never started, so never stopped
}

}  // namespace
}  // namespace herd::master
