// The link's rules for declaring machines down (issue #11), on virtual time:
// the master polls every machine by hand (PollAllMachines) and the test
// moves the clock.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "master/core/master_core.h"
#include "testing/builders.h"
#include "testing/fake_agent_link.h"

namespace herd::master {
namespace {

using namespace herd::testing;  // NOLINT

class DownRulesTest : public ::testing::Test {
 protected:
  // A master (recovered from the store: a new one, as after a failover).
  void Open(LinkShard::Options link) {
    MasterOptions o;
    link.poll_interval_ms = 1000;
    link.down_after_misses = 3;
    o.link = link;
    o.run_scheduler = false;
    core_.reset();
    auto core = MasterCore::Create(&store_, &link_, &clock_, o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }
  void Start(int machines, LinkShard::Options link) {
    Open(link);
    for (int i = 0; i < machines; ++i) {
      v1::RegisterMachineRequest r;
      *r.mutable_machine() = MachineBuilder(Name(i)).Address(Name(i) + ":1").Build();
      ASSERT_TRUE(core_->machines().RegisterMachine(Principal::Machine(Name(i)), r).ok());
    }
  }
  static std::string Name(int i) { return absl::StrCat("m", i); }
  // One poll of every machine, a second apart (the poll interval).
  void Round() {
    clock_.AdvanceMs(1000);
    core_->PollAllMachines();
  }
  int Down() {
    return core_->committer().Read([](const cell::CellState& s) {
      int n = 0;
      for (const cell::Machine* m : s.machines()) n += m->state() == v1::Machine::DOWN;
      return n;
    });
  }

  store::MemoryLogStore store_;
  FakeAgentLink link_;
  ManualClock clock_;
  std::unique_ptr<MasterCore> core_;
};

// Before: the 10% rule's window was poll_interval * down_after (3 s here),
// so a 3-machine cell lost its machines one every 3-4 s.
// Issue #33: every poll names the users revoked lately (within a grant's
// validity and a margin), so agents refuse their grants issued before and
// end the streams those opened; older revocations are not sent.
TEST_F(DownRulesTest, PollsNameTheUsersRevokedLately) {
  Start(1, {});
  Round();
  EXPECT_EQ(link_.LastRequest("m0:1").revoked_size(), 0);
  const int64_t now_s = clock_.NowMs() / 1000;
  auto revoke = [&](const std::string& name, int64_t before_s) {
    absl::StatusOr<int64_t> rev =
        core_->committer().Commit("test", [&](const cell::CellState&) -> absl::StatusOr<std::vector<v1::Mutation>> {
          v1::Mutation m;
          v1::User* u = m.mutable_user_set()->mutable_user();
          u->set_name(name);
          u->set_revoked_before_s(before_s);
          return std::vector<v1::Mutation>{m};
        });
    ASSERT_TRUE(rev.ok()) << rev.status();
  };
  revoke("alice", now_s + 1);
  revoke("carol", now_s - kRevocationWindowMs / 1000 - 10);  // long ago
  Round();
  v1::PollRequest req = link_.LastRequest("m0:1");
  ASSERT_EQ(req.revoked_size(), 1) << req.ShortDebugString();
  EXPECT_EQ(req.revoked(0).name(), "alice");
  EXPECT_EQ(req.revoked(0).revoked_before_s(), now_s + 1);
  // Every poll carries it, while it lasts.
  Round();
  EXPECT_EQ(link_.LastRequest("m0:1").revoked_size(), 1);
  // Past the window (no grant issued before can still be used): not sent.
  clock_.AdvanceMs(kRevocationWindowMs);
  Round();
  EXPECT_EQ(link_.LastRequest("m0:1").revoked_size(), 0);
}

// At most the latest kMaxRevokedPerPoll.
TEST(RecentRevocations, AreBoundedKeepingTheLatest) {
  cell::CellState s;
  const int64_t now_s = 1'800'000'000;
  for (size_t i = 0; i < kMaxRevokedPerPoll + 5; ++i) {
    v1::Mutation m;
    v1::User* u = m.mutable_user_set()->mutable_user();
    u->set_name(absl::StrCat("u", i));
    // Within the window, two or three users a second.
    u->set_revoked_before_s(now_s - static_cast<int64_t>(i % 100));
    ASSERT_TRUE(s.Apply(m).ok());
  }
  v1::PollRequest req;
  AddRecentRevocations(s, now_s * 1000, &req);
  ASSERT_EQ(static_cast<size_t>(req.revoked_size()), kMaxRevokedPerPoll);
  // The five left out are of the oldest seconds (99 and 98 ago, two each,
  // and one of 97).
  for (const v1::RevokedUser& r : req.revoked()) EXPECT_GE(r.revoked_before_s(), now_s - 97) << r.name();
}

TEST_F(DownRulesTest, ASmallCellLosesAtMostOneMachineAWindow) {
  LinkShard::Options link;
  link.hold_above_fraction = 1.0;  // this test is about the rate alone
  Start(3, link);
  Round();
  for (int i = 0; i < 3; ++i) link_.SetUp(Name(i) + ":1", false);
  for (int i = 0; i < 3; ++i) Round();  // 3 missed polls: the first goes down at 4 s
  EXPECT_EQ(Down(), 1);
  for (int i = 0; i < 56; ++i) Round();  // 60 s: the others wait for the window to pass
  EXPECT_EQ(Down(), 1);
  for (int i = 0; i < 5; ++i) Round();  // 65 s
  EXPECT_EQ(Down(), 2);
}

// The rate limit holds across a change of leader: a new master counts the
// machines its predecessor marked down in this window (the cell records
// when), instead of starting with a fresh budget in the middle of a
// partition.
TEST_F(DownRulesTest, TheRateHoldsAcrossAChangeOfLeader) {
  LinkShard::Options link;
  link.hold_above_fraction = 1.0;
  Start(3, link);
  Round();
  for (int i = 0; i < 3; ++i) link_.SetUp(Name(i) + ":1", false);
  for (int i = 0; i < 3; ++i) Round();
  ASSERT_EQ(Down(), 1);
  // Another master takes over from the store, 10 s into the window.
  for (int i = 0; i < 10; ++i) Round();
  Open(link);
  for (int i = 0; i < 40; ++i) Round();  // 54 s after the first went down
  EXPECT_EQ(Down(), 1);
  for (int i = 0; i < 10; ++i) Round();  // the window has passed
  EXPECT_EQ(Down(), 2);
}

TEST_F(DownRulesTest, NoneIsMarkedDownWhileMostOfTheCellIsUnreachable) {
  Start(3, LinkShard::Options());
  Round();
  // Two of three unreachable: the master's trouble or a partition.
  link_.SetUp("m0:1", false);
  link_.SetUp("m1:1", false);
  for (int i = 0; i < 200; ++i) Round();
  EXPECT_EQ(Down(), 0);
  // One of three: a machine's trouble, marked down after 3 missed polls.
  link_.SetUp("m1:1", true);
  for (int i = 0; i < 3; ++i) Round();
  EXPECT_EQ(Down(), 1);
  auto m0 = core_->link()->GetHealth("m0");
  ASSERT_TRUE(m0.has_value());
  EXPECT_GE(m0->misses, 3);
}

TEST_F(DownRulesTest, AMachineThatAnswersIsNeverDown) {
  Start(3, LinkShard::Options());
  for (int i = 0; i < 100; ++i) Round();
  EXPECT_EQ(Down(), 0);
}

// A machine that keeps going down and coming back is damped: the second
// time it must answer 2 polls in a row before it is UP again, the third 4.
TEST_F(DownRulesTest, AFlappingMachineWaitsLongerEachTimeBeforeItIsUpAgain) {
  LinkShard::Options link;
  link.hold_above_fraction = 1.0;
  link.min_down_window_ms = 0;
  Start(3, link);
  auto m0_up = [&] {
    return core_->committer().Read(
        [](const cell::CellState& s) { return s.FindMachine("m0")->state() == v1::Machine::UP; });
  };
  Round();
  std::vector<int> polls_to_come_back;
  for (int flap = 0; flap < 3; ++flap) {
    link_.SetUp("m0:1", false);
    for (int i = 0; i < 3; ++i) Round();
    ASSERT_FALSE(m0_up()) << "flap " << flap;
    link_.SetUp("m0:1", true);
    int polls = 0;
    while (!m0_up() && polls < 100) {
      Round();
      ++polls;
    }
    polls_to_come_back.push_back(polls);
  }
  EXPECT_EQ(polls_to_come_back, (std::vector<int>{1, 2, 4}));
  // Half an hour later it is forgiven.
  for (int i = 0; i < 1900; ++i) Round();
  link_.SetUp("m0:1", false);
  for (int i = 0; i < 3; ++i) Round();
  ASSERT_FALSE(m0_up());
  link_.SetUp("m0:1", true);
  Round();
  EXPECT_TRUE(m0_up());
}

// Delta polls (issue #11): after the first poll a machine is sent only what
// changed in its desired state, so a poll's size follows the work, not the
// state; an agent that lost track gets everything at once, and every machine
// gets its whole desired state every full_poll_interval_ms.
class DeltaPollTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterOptions o;
    o.link.poll_interval_ms = 1000;
    o.link.full_poll_interval_ms = 60'000;
    o.scheduler_loop.idle_wait_ms = 0;
    auto core = MasterCore::Create(&store_, &link_, &clock_, o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    v1::RegisterMachineRequest r;
    *r.mutable_machine() = MachineBuilder("m0").Cpu(64000).Address("m0:1").Build();
    ASSERT_TRUE(core_->machines().RegisterMachine(Principal::Machine("m0"), r).ok());
  }
  void Submit(const std::string& name, int tasks) {
    v1::SubmitRequest req;
    *req.add_jobs() = JobBuilder(name).Tasks(tasks).Cpu(100).Build();
    ASSERT_TRUE(core_->jobs().Submit(Principal::User("alice"), req).ok());
    // Until the scheduler has nothing more to do (a pass, then its proposals
    // committed).
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(core_->StepScheduler().ok());
  }
  void Kill(const std::string& name) {
    v1::KillRequest k;
    k.set_job(name);
    ASSERT_TRUE(core_->jobs().Kill(Principal::User("alice"), k).ok());
  }
  void Poll() {
    clock_.AdvanceMs(1000);
    core_->PollAllMachines();
  }
  v1::PollRequest Last() { return link_.LastRequest("m0:1"); }
  // Tasks RUNNING and ACTIVE, and tasks ever placed again (lost, moved).
  std::pair<int, int> ActiveAndReplaced() {
    return core_->committer().Read([](const cell::CellState& s) {
      std::pair<int, int> n{0, 0};
      for (const auto& [id, job] : s.jobs()) {
        for (const cell::Task& t : job->tasks) {
          n.first += t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE;
          n.second += t.incarnation() > 1;
        }
      }
      return n;
    });
  }

  store::MemoryLogStore store_;
  FakeAgentLink link_;
  ManualClock clock_;
  std::unique_ptr<MasterCore> core_;
};

TEST_F(DeltaPollTest, PollsAfterTheFirstCarryOnlyWhatChanged) {
  link_.SetDeltas("m0:1", true);
  Submit("a", 5);
  Poll();
  EXPECT_FALSE(Last().delta());
  EXPECT_EQ(Last().desired_size(), 5);
  const int64_t first = Last().revision();
  Poll();
  ASSERT_TRUE(Last().delta());
  EXPECT_EQ(Last().base_revision(), first);
  EXPECT_EQ(Last().desired_size(), 0) << "nothing changed, nothing sent";
  EXPECT_EQ(Last().stop_size(), 0);
  Submit("b", 3);
  Poll();
  ASSERT_TRUE(Last().delta());
  EXPECT_EQ(Last().desired_size(), 3);
  const v1::PollRequest added = Last();
  for (const auto& run : added.desired()) EXPECT_EQ(run.ref().job(), "alice/b");
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(8, 0));
  Kill("a");
  Poll();
  ASSERT_TRUE(Last().delta());
  EXPECT_EQ(Last().desired_size(), 0);
  EXPECT_EQ(Last().stop_size(), 5);
  EXPECT_EQ(link_.Runs("m0:1"), 3);
  EXPECT_EQ(link_.RefusedDeltas("m0:1"), 0);
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(3, 0));
}

// An update that changes tasks in place (issue #14) sends their runs again,
// same run ids with the new job version and limits; a restart sends new
// runs and stops the old ones.
TEST_F(DeltaPollTest, UpdatesSendChangedRunsAgain) {
  link_.SetDeltas("m0:1", true);
  Submit("a", 2);
  Poll();
  Poll();
  ASSERT_EQ(Last().desired_size(), 0);
  v1::SubmitRequest bigger;
  *bigger.add_jobs() = JobBuilder("a").Tasks(2).Cpu(300).Build();
  ASSERT_TRUE(core_->jobs().Submit(Principal::User("alice"), bigger).ok());
  Poll();
  ASSERT_TRUE(Last().delta());
  ASSERT_EQ(Last().desired_size(), 2);
  EXPECT_EQ(Last().stop_size(), 0);
  const v1::PollRequest updated = Last();
  for (const auto& run : updated.desired()) {
    EXPECT_EQ(run.ref().incarnation(), 1) << "same run";
    EXPECT_EQ(run.job_version(), 2);
    EXPECT_EQ(run.resources().cpu_millis(), 300);
  }
  Poll();
  EXPECT_EQ(Last().desired_size(), 0) << "held at its new version";
  v1::SubmitRequest other;
  *other.add_jobs() = JobBuilder("a").Tasks(2).Cpu(300).Command({"/bin/sleep", "1"}).Build();
  ASSERT_TRUE(core_->jobs().Submit(Principal::User("alice"), other).ok());
  Poll();
  EXPECT_EQ(Last().desired_size(), 2);
  EXPECT_EQ(Last().stop_size(), 2);
  EXPECT_EQ(link_.Runs("m0:1"), 2);
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(2, 2));
}

TEST_F(DeltaPollTest, AnAgentThatLostTrackGetsEverythingAndLosesNothing) {
  link_.SetDeltas("m0:1", true);
  Submit("a", 4);
  Poll();
  Poll();
  ASSERT_TRUE(Last().delta());
  link_.Restart("m0:1");  // it no longer knows the revision its deltas build on
  Submit("b", 2);
  Poll();
  ASSERT_TRUE(Last().delta());
  EXPECT_EQ(link_.RefusedDeltas("m0:1"), 1);
  // Nothing was applied: b's tasks are not lost for being missing, a's
  // are not touched.
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(4, 0));
  Poll();
  EXPECT_FALSE(Last().delta()) << "the agent said it holds another revision: it gets the whole state";
  EXPECT_EQ(Last().desired_size(), 6);
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(6, 0));
  Poll();
  EXPECT_TRUE(Last().delta());
}

// A machine that does not answer costs small polls, not its whole desired
// state every time; and a poll the agent applied whose reply was lost is
// recovered by the agent refusing the next delta.
TEST_F(DeltaPollTest, FailedPollsStayDeltasAndALostReplyIsRecovered) {
  link_.SetDeltas("m0:1", true);
  Submit("a", 4);
  Poll();
  Poll();
  link_.SetUp("m0:1", false);
  Poll();
  Poll();
  EXPECT_TRUE(Last().delta()) << "a poll after a failed one built everything again";
  EXPECT_EQ(Last().desired_size(), 0);
  link_.SetUp("m0:1", true);
  Submit("b", 2);
  Poll();
  ASSERT_TRUE(Last().delta());
  EXPECT_EQ(Last().desired_size(), 2);
  EXPECT_EQ(link_.RefusedDeltas("m0:1"), 0);
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(6, 0));
  // Applied, reply lost: the agent now holds a revision the master never
  // heard of, refuses the next delta, and gets everything.
  Submit("c", 1);
  link_.LoseNextReply("m0:1");
  Poll();
  Submit("d", 1);
  Poll();
  EXPECT_EQ(link_.RefusedDeltas("m0:1"), 1);
  Poll();
  EXPECT_FALSE(Last().delta());
  EXPECT_EQ(Last().desired_size(), 8);
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(8, 0));
}

TEST_F(DeltaPollTest, EveryMachineGetsItsWholeStateEveryFullPollInterval) {
  link_.SetDeltas("m0:1", true);
  Submit("a", 2);
  Poll();  // full, at 1 s
  for (int i = 0; i < 59; ++i) {
    Poll();
    ASSERT_TRUE(Last().delta()) << "poll " << i;
  }
  Poll();  // 60 s after the full one
  EXPECT_FALSE(Last().delta());
  EXPECT_EQ(Last().desired_size(), 2);
  auto h = core_->link()->GetHealth("m0");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->full_polls, 2);
  EXPECT_EQ(h->polls, 61);
}

TEST_F(DeltaPollTest, AnAgentThatPredatesDeltasGetsWholeStatesOnly) {
  Submit("a", 3);
  for (int i = 0; i < 3; ++i) {
    Poll();
    EXPECT_FALSE(Last().delta());
    EXPECT_EQ(Last().desired_size(), 3);
  }
  EXPECT_EQ(ActiveAndReplaced(), std::make_pair(3, 0));
}

// At-most-once jobs (issue #11): a machine that holds one of their tasks is
// marked down only once the task has stopped itself -- the lease after the
// master's last contact, then the task's grace period, then a margin -- so
// its replacement never runs beside it. Other machines go down as before.
class LeaseTest : public ::testing::Test {
 protected:
  void Start(LinkShard::Options link = {}) {
    link.poll_interval_ms = 1000;
    link.down_after_misses = 3;
    link.hold_above_fraction = 1.0;  // these tests are about the lease alone
    link.min_down_window_ms = 0;
    options_.link = link;
    options_.scheduler_loop.idle_wait_ms = 0;
    Restart();
    for (const std::string name : {"m0", "m1", "m2"}) {
      v1::RegisterMachineRequest r;
      *r.mutable_machine() = MachineBuilder(name).Cpu(64000).Attr("host", name).Address(name + ":1").Build();
      ASSERT_TRUE(core_->machines().RegisterMachine(Principal::Machine(name), r).ok());
    }
  }
  // A new master over the same store (its link starts afresh).
  void Restart() {
    core_.reset();
    auto core = MasterCore::Create(&store_, &link_, &clock_, options_);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }
  void Submit(const v1::JobSpec& spec) {
    v1::SubmitRequest req;
    *req.add_jobs() = spec;
    ASSERT_TRUE(core_->jobs().Submit(Principal::User("alice"), req).ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(core_->StepScheduler().ok());
  }
  void Round() {
    clock_.AdvanceMs(1000);
    core_->PollAllMachines();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(core_->StepScheduler().ok());
  }
  // Where task 0 of `job` runs ("" if it does not), and its incarnation.
  std::pair<std::string, int64_t> Where(const std::string& job) {
    return core_->committer().Read([&](const cell::CellState& s) {
      const cell::Task* t = s.FindTask("alice/" + job, 0);
      if (t == nullptr || t->machine() == nullptr) return std::make_pair(std::string(), int64_t{0});
      return std::make_pair(t->machine()->name(), t->incarnation());
    });
  }
  bool IsDown(const std::string& machine) {
    return core_->committer().Read(
        [&](const cell::CellState& s) { return s.FindMachine(machine)->state() == v1::Machine::DOWN; });
  }
  // Polls until `machine` is marked down; how many rounds that took.
  int RoundsUntilDown(const std::string& machine) {
    int rounds = 0;
    while (!IsDown(machine) && rounds < 100) {
      Round();
      ++rounds;
    }
    return rounds;
  }

  MasterOptions options_;
  store::MemoryLogStore store_;
  FakeAgentLink link_;
  ManualClock clock_;
  std::unique_ptr<MasterCore> core_;
};

TEST_F(LeaseTest, EveryPollRenewsTheLeaseAcknowledgingTheLastReply) {
  Start();
  EXPECT_EQ(core_->link()->task_lease_ms(), 3000) << "default: poll interval x down-after";
  Round();
  const v1::PollRequest first = link_.LastRequest("m0:1");
  EXPECT_EQ(first.lease_ms(), 3000);
  EXPECT_NE(first.lease_token(), 0u);
  EXPECT_EQ(first.lease_ack(), 0u) << "nothing to acknowledge yet";
  Round();
  const v1::PollRequest second = link_.LastRequest("m0:1");
  EXPECT_NE(second.lease_token(), first.lease_token());
  EXPECT_EQ(second.lease_ack(), first.lease_token());
  // Polls that get no reply are never acknowledged: the agent may have
  // taken them, but the master does not count them as contact either.
  link_.SetUp("m0:1", false);
  Round();
  Round();
  EXPECT_EQ(link_.LastRequest("m0:1").lease_ack(), second.lease_token());
  link_.SetUp("m0:1", true);
  Round();
  const v1::PollRequest back = link_.LastRequest("m0:1");
  EXPECT_EQ(back.lease_ack(), second.lease_token());
  Round();
  EXPECT_EQ(link_.LastRequest("m0:1").lease_ack(), back.lease_token());
}

TEST_F(LeaseTest, AMachineWithAnAtMostOnceTaskIsMarkedDownAfterLeaseGraceAndMargin) {
  Start();
  Submit(JobBuilder("once").AtMostOnce().Grace(2000).Build());
  Round();
  auto [machine, incarnation] = Where("once");
  ASSERT_FALSE(machine.empty());
  ASSERT_EQ(incarnation, 1);
  EXPECT_EQ(link_.LastRequest(machine + ":1").desired(0).at_most_once(), true);
  link_.SetUp(machine + ":1", false);
  // Last contact at 0; 3 missed polls by 3 s, but the lease (3 s), the grace
  // period (2 s) and the margin (1 s) run until 6 s.
  for (int i = 0; i < 5; ++i) Round();
  EXPECT_FALSE(IsDown(machine)) << "marked down before its at-most-once task stopped itself";
  EXPECT_EQ(Where("once"), std::make_pair(machine, int64_t{1}));
  auto h = core_->link()->GetHealth(machine);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->misses, 5);
  EXPECT_EQ(h->lease_hold_ms, 3000 + 2000 + LinkShard::kLeaseMarginMs);
  Round();
  EXPECT_TRUE(IsDown(machine)) << "6 s after the last contact";
  auto [now_on, now_incarnation] = Where("once");
  EXPECT_NE(now_on, machine);
  EXPECT_EQ(now_incarnation, 2) << "placed again once the machine was down";
}

TEST_F(LeaseTest, AMachineWithoutOneIsMarkedDownAsBefore) {
  Start();
  Submit(JobBuilder("ordinary").Grace(2000).Build());
  Round();
  auto [machine, incarnation] = Where("ordinary");
  ASSERT_FALSE(machine.empty());
  link_.SetUp(machine + ":1", false);
  EXPECT_EQ(RoundsUntilDown(machine), 3) << "down_after_misses polls, lease or not";
  EXPECT_EQ(Where("ordinary").second, 2);
  auto h = core_->link()->GetHealth(machine);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->lease_hold_ms, 0);
}

// The lease is --task-lease, and the wait the longest grace period of the
// at-most-once tasks there (a task that asks for none gets the agent's 10 s);
// ordinary tasks beside them do not count.
TEST_F(LeaseTest, TheWaitFollowsTheLeaseAndTheLongestGracePeriod) {
  LinkShard::Options link;
  link.task_lease_ms = 5000;
  Start(link);
  Submit(JobBuilder("short").AtMostOnce().Grace(1000).Constraint("host", v1::Constraint::EQ, {"m0"}).Build());
  Submit(JobBuilder("long").AtMostOnce().Grace(0).Constraint("host", v1::Constraint::EQ, {"m0"}).Build());
  Submit(JobBuilder("slow").Grace(60'000).Constraint("host", v1::Constraint::EQ, {"m0"}).Build());
  Round();
  ASSERT_EQ(Where("short").first, "m0");
  ASSERT_EQ(Where("long").first, "m0");
  ASSERT_EQ(Where("slow").first, "m0");
  link_.SetUp("m0:1", false);
  EXPECT_EQ(RoundsUntilDown("m0"), 5 + 10 + 1);
}

// A master that starts (or restarts) counts its start as the last contact:
// the agent's lease cannot have been renewed later than that.
TEST_F(LeaseTest, ARestartedMasterWaitsTheWholeLeaseFromItsStart) {
  Start();
  Submit(JobBuilder("once").AtMostOnce().Grace(2000).Build());
  Round();
  const std::string machine = Where("once").first;
  ASSERT_FALSE(machine.empty());
  link_.SetUp(machine + ":1", false);
  for (int i = 0; i < 4; ++i) Round();
  ASSERT_FALSE(IsDown(machine));
  Restart();
  // Polled by hand, the new master first meets the machine at its first
  // poll (1 s after the restart): 6 s from then.
  for (int i = 0; i < 6; ++i) Round();
  EXPECT_FALSE(IsDown(machine)) << "the new master must count its own start as the last contact";
  Round();
  EXPECT_TRUE(IsDown(machine));
}

}  // namespace
}  // namespace herd::master
