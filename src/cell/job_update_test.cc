// Updating a live job: the diff's classification of each task (DiffJob),
// and CellState applying and checking JobUpdated.
#include "cell/job_update.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "testing/builders.h"

namespace herd::cell {
namespace {

using namespace herd::testing;  // NOLINT
using v1::Event;

constexpr char kWeb[] = "alice/web";

class JobUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Apply(Register(MachineBuilder("m1").Cpu(2000).Memory(4LL << 30).Attr("rack", "r1").Build()));
    Apply(Register(MachineBuilder("m2").Cpu(2000).Memory(4LL << 30).Attr("rack", "r2").Build()));
  }

  void Apply(const v1::Mutation& m) {
    absl::Status st = state_.Apply(m);
    ASSERT_TRUE(st.ok()) << st;
    absl::Status inv = state_.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv;
    log_.push_back(m);
  }
  // Refused with `code` and a message containing `part`; nothing changed.
  void Reject(const v1::Mutation& m, absl::StatusCode code, const std::string& part) {
    v1::CellSnapshot before = state_.ToSnapshot();
    absl::Status st = state_.Apply(m);
    EXPECT_EQ(st.code(), code) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), part)) << st;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, state_.ToSnapshot()));
  }

  // Submits `spec` and places task i on machines[i] (all RUNNING).
  void Run(const v1::JobSpec& spec, const std::vector<std::string>& machines) {
    Apply(Submit(spec));
    for (size_t i = 0; i < machines.size(); ++i) Apply(Schedule(JobId(spec), static_cast<int32_t>(i), machines[i]));
  }
  static std::string JobId(const v1::JobSpec& s) { return s.user() + "/" + s.name(); }

  v1::JobDiff Diff(const v1::JobSpec& next, UpdateOptions o = {}) {
    return DiffJob(state_, state_.FindJob(JobId(next)), next, o);
  }
  // Plans `next` and applies it at once, as the master does.
  v1::JobDiff Update(const v1::JobSpec& next, UpdateOptions o = {}) {
    v1::JobDiff d = Diff(next, o);
    Apply(UpdateMutation(next, d, "updated by test"));
    return d;
  }
  static std::map<int32_t, v1::UpdateClass> Classes(const v1::JobDiff& d) {
    std::map<int32_t, v1::UpdateClass> out;
    for (const v1::TaskUpdate& t : d.tasks()) out[t.index()] = t.update_class();
    return out;
  }
  static std::string Reasons(const v1::JobDiff& d, int32_t index) {
    for (const v1::TaskUpdate& t : d.tasks()) {
      if (t.index() == index) return absl::StrJoin(t.reasons(), "; ");
    }
    return "";
  }
  static const v1::SpecChange* Change(const v1::JobDiff& d, const std::string& field) {
    for (const v1::SpecChange& c : d.changes()) {
      if (c.field() == field) return &c;
    }
    return nullptr;
  }
  const Task& T(int32_t i) { return *state_.FindTask(kWeb, i); }

  CellState state_;
  std::vector<v1::Mutation> log_;
};

JobBuilder Web() { return JobBuilder("web").Tasks(3).Priority(200).Cpu(500).Memory(1LL << 30); }

// ---- classification -----------------------------------------------------

TEST_F(JobUpdateTest, IdenticalSpecChangesNothing) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobSpec same = Web().Build();
  same.set_source("elsewhere.yaml");  // where it came from does not count
  v1::JobDiff d = Diff(same);
  EXPECT_EQ(d.from_version(), 1);
  EXPECT_EQ(d.to_version(), 1);
  EXPECT_EQ(d.unchanged(), 3);
  EXPECT_TRUE(d.changes().empty());
}

TEST_F(JobUpdateTest, ANewJobAddsEveryTask) {
  v1::JobDiff d = Diff(Web().Build());
  EXPECT_EQ(d.from_version(), 0);
  EXPECT_EQ(d.to_version(), 1);
  EXPECT_EQ(d.added(), 3);
}

TEST_F(JobUpdateTest, LabelsAskNothingOfTasks) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobDiff d = Diff(Web().Label("team", "search").Build());
  EXPECT_EQ(d.to_version(), 2);
  EXPECT_EQ(d.unchanged(), 3);
  ASSERT_NE(Change(d, "labels.team"), nullptr);
  EXPECT_EQ(Change(d, "labels.team")->to(), "search");
  EXPECT_EQ(Change(d, "labels.team")->update_class(), v1::UPDATE_NONE);
  EXPECT_TRUE(UpdateMutation(Web().Build(), d, "").job_updated().restart().empty());
}

TEST_F(JobUpdateTest, PriorityAndLimitsThatFitAreInPlace) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobDiff d = Diff(Web().Priority(210).Memory(1536LL << 20).Build());
  for (const auto& [i, c] : Classes(d)) EXPECT_EQ(c, v1::UPDATE_IN_PLACE) << i;
  EXPECT_EQ(Reasons(d, 0), "memory 1Gi -> 1.5Gi; priority 200 -> 210");
  EXPECT_EQ(Change(d, "priority")->update_class(), v1::UPDATE_IN_PLACE);
}

TEST_F(JobUpdateTest, CommandEnvAndPackagesRestart) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  for (const v1::JobSpec& next : {Web().Command({"/bin/sleep", "1"}).Build(), Web().Env("A", "1").Build(),
                                  Web().Package("app", std::string(64, 'a')).Build()}) {
    v1::JobDiff d = Diff(next);
    EXPECT_EQ(d.restart(), 3) << next.ShortDebugString();
    v1::Mutation m = UpdateMutation(next, d, "");
    EXPECT_EQ(m.job_updated().restart_size(), 3);
  }
  EXPECT_EQ(Reasons(Diff(Web().Command({"/bin/sleep", "1"}).Build()), 1), "command changed");
}

TEST_F(JobUpdateTest, LimitsThatNoLongerFitReschedule) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  // m1 holds tasks 0 and 2: 2.5 cores each do not fit on 2.
  v1::JobDiff d = Diff(Web().Cpu(2500).Build());
  EXPECT_EQ(d.reschedule(), 3);
  EXPECT_EQ(Reasons(d, 1), "cpu 500m -> 2.5 does not fit on m2: room for 2");
  // 1 core each: task 1 alone on m2 fits; on m1 both fit (2 x 1 core).
  EXPECT_EQ(Diff(Web().Cpu(1000).Build()).in_place(), 3);
  // 1.5 cores each: m1 cannot hold both; the first that fails moves, the other stays.
  v1::JobDiff half = Diff(Web().Cpu(1500).Build());
  EXPECT_EQ(Classes(half), (std::map<int32_t, v1::UpdateClass>{
                               {0, v1::UPDATE_RESCHEDULE}, {1, v1::UPDATE_IN_PLACE}, {2, v1::UPDATE_IN_PLACE}}));
}

TEST_F(JobUpdateTest, ConstraintsMoveOnlyTasksWhoseMachineFailsThem) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobDiff d = Diff(Web().Constraint("rack", v1::Constraint::EQ, {"r2"}).Build());
  EXPECT_EQ(Classes(d), (std::map<int32_t, v1::UpdateClass>{
                            {0, v1::UPDATE_RESCHEDULE}, {1, v1::UPDATE_NONE}, {2, v1::UPDATE_RESCHEDULE}}));
  EXPECT_EQ(Reasons(d, 0), "machine m1 does not meet rack == r2");
  EXPECT_EQ(Change(d, "constraints")->to(), "rack == r2");
}

TEST_F(JobUpdateTest, SpreadingTurnedOnMovesTheExtraTasks) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobDiff d = Diff(Web().DifferentMachines().Build());
  EXPECT_EQ(Classes(d)[2], v1::UPDATE_RESCHEDULE);
  EXPECT_EQ(d.reschedule(), 1);
  EXPECT_TRUE(absl::StrContains(Reasons(d, 2), "different_machines")) << Reasons(d, 2);
}

TEST_F(JobUpdateTest, BecomingBatchRestartsIntoTheOtherCgroup) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobDiff d = Diff(Web().Priority(100).Build());  // production -> batch, appclass unset
  EXPECT_EQ(d.restart(), 3);
  EXPECT_TRUE(absl::StrContains(Reasons(d, 0), "now batch"));
}

TEST_F(JobUpdateTest, CountTouchesOnlyAddedOrRemovedTasks) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobDiff up = Diff(Web().Tasks(5).Build());
  EXPECT_EQ(Classes(up), (std::map<int32_t, v1::UpdateClass>{{0, v1::UPDATE_NONE},
                                                              {1, v1::UPDATE_NONE},
                                                              {2, v1::UPDATE_NONE},
                                                              {3, v1::UPDATE_ADD},
                                                              {4, v1::UPDATE_ADD}}));
  v1::JobDiff down = Diff(Web().Tasks(1).Build());
  EXPECT_EQ(Classes(down), (std::map<int32_t, v1::UpdateClass>{
                               {0, v1::UPDATE_NONE}, {1, v1::UPDATE_REMOVE}, {2, v1::UPDATE_REMOVE}}));
  EXPECT_EQ(Change(down, "tasks")->from(), "3");
  EXPECT_TRUE(UpdateMutation(Web().Tasks(1).Build(), down, "").job_updated().restart().empty());
}

TEST_F(JobUpdateTest, TaskCountInTheCommandRestartsUnlessScaling) {
  auto spec = [](int n) {
    return Web().Tasks(n).Command({"/bin/sh", "-c", "echo ${task.index} of ${task.count}"}).Build();
  };
  Run(spec(3), {"m1", "m2", "m1"});
  EXPECT_EQ(Diff(spec(4)).restart(), 3);  // a submitted spec: their command changed
  UpdateOptions keep;
  keep.keep_survivors = true;
  v1::JobDiff scaled = Diff(spec(4), keep);  // herd scale leaves them be
  EXPECT_EQ(scaled.unchanged(), 3);
  EXPECT_EQ(scaled.added(), 1);
}

TEST_F(JobUpdateTest, PendingTasksTakeAnyChangeInPlaceAndDeadOnesStayDead) {
  Apply(Submit(Web().Build()));
  Apply(Schedule(kWeb, 0, "m1"));
  Apply(Schedule(kWeb, 1, "m2"));
  Apply(Exited(Ref(kWeb, 1, 1), 0));
  v1::JobDiff d = Diff(Web().Command({"/bin/sleep", "9"}).Build());
  EXPECT_EQ(Classes(d), (std::map<int32_t, v1::UpdateClass>{
                            {0, v1::UPDATE_RESTART}, {1, v1::UPDATE_NONE}, {2, v1::UPDATE_IN_PLACE}}));
  EXPECT_EQ(Reasons(d, 1), "dead: stays dead");
}

// ---- CellState applying JobUpdated -------------------------------------

TEST_F(JobUpdateTest, ALabelChangeBumpsTheVersionAndTouchesNoTask) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  Apply(Observed(Ref(kWeb, 0, 1), v1::Task::ACTIVE, 4242));
  const auto history = T(0).history().size();
  Update(Web().Label("team", "ads").Build());
  const Job& j = *state_.FindJob(kWeb);
  EXPECT_EQ(j.version, 2);
  EXPECT_EQ(j.version_revision, state_.revision());
  EXPECT_EQ(j.last_event.transition, Event::UPDATE);
  EXPECT_EQ(j.last_event.reason, "updated by test (version 2)");
  EXPECT_EQ(T(0).incarnation(), 1);
  EXPECT_EQ(T(0).pid(), 4242);
  EXPECT_EQ(T(0).history().size(), history);
  EXPECT_EQ(T(0).job_version(), 2);
  EXPECT_FALSE(T(0).outdated());
  EXPECT_EQ(T(0).state_revision(), state_.revision()) << "the task record changed";
}

TEST_F(JobUpdateTest, PendingTasksTakeTheSpecAndStaleProposalsFail) {
  Apply(Submit(Web().Build()));
  const int64_t seen = T(0).state_revision();
  Update(Web().Cpu(700).Priority(300).Build());
  EXPECT_EQ(T(0).resources().cpu_millis, 700);
  EXPECT_EQ(T(0).priority(), 300);
  EXPECT_EQ(state_.pending().size(), 3u);
  EXPECT_EQ((*state_.pending().begin())->priority(), 300);
  // A placement computed before the update expected the old task.
  Reject(Schedule(kWeb, 0, "m1", {}, seen), absl::StatusCode::kFailedPrecondition, "changed at revision");
}

TEST_F(JobUpdateTest, RestartKeepsTheMachineWithANewIncarnation) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  cell::Effects fx;
  v1::JobSpec next = Web().Command({"/bin/sleep", "9"}).Build();
  ASSERT_TRUE(state_.Apply(UpdateMutation(next, Diff(next), ""), &fx).ok());
  ASSERT_TRUE(state_.CheckInvariants().ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(T(i).state(), v1::Task::RUNNING);
    EXPECT_EQ(T(i).incarnation(), 2) << i;
    EXPECT_EQ(T(i).phase(), v1::Task::ASSIGNED);
    EXPECT_EQ(T(i).last_event()->transition, Event::UPDATE);
    EXPECT_EQ(T(i).last_event()->reason, "restarted for job version 2");
  }
  EXPECT_EQ(T(1).machine()->name(), "m2");
  EXPECT_NE(std::find(fx.machines.begin(), fx.machines.end(), "m2"), fx.machines.end());
}

TEST_F(JobUpdateTest, InPlaceLimitsChangeTheMachinesSums) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  Update(Web().Cpu(800).Priority(210).Build());
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 1600);
  EXPECT_EQ(T(0).incarnation(), 1);
  EXPECT_EQ(T(0).priority(), 210);
  EXPECT_EQ(T(0).last_event()->reason, "updated in place to job version 2");
  EXPECT_EQ(state_.Usage("alice", Band::kProduction).cpu_millis, 2400);
}

TEST_F(JobUpdateTest, RescheduledTasksGoBackToPendingWithTheNewSpec) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobDiff d = Update(Web().Cpu(1500).Build());
  ASSERT_EQ(d.reschedule(), 1);
  EXPECT_EQ(T(0).state(), v1::Task::PENDING);
  EXPECT_EQ(T(0).last_event()->transition, Event::RESCHEDULE);
  EXPECT_EQ(T(0).resources().cpu_millis, 1500);
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 1500);  // task 2 alone, grown
  EXPECT_EQ(state_.pending().size(), 1u);
}

TEST_F(JobUpdateTest, ScalingUpAndDownKeepsSurvivorsAndNeverReusesARunId) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  Apply(Observed(Ref(kWeb, 2, 1), v1::Task::ACTIVE, 77));
  UpdateOptions keep;
  keep.keep_survivors = true;
  Update(Web().Tasks(1).Build(), keep);
  EXPECT_EQ(state_.FindJob(kWeb)->tasks.size(), 1u);
  EXPECT_EQ(state_.FindMachine("m1")->tasks().size(), 1u);
  EXPECT_EQ(state_.FindMachine("m2")->tasks().size(), 0u);
  EXPECT_EQ(T(0).incarnation(), 1);
  // Up to 300: the task list grows (and moves in memory) under running and
  // pending tasks; the invariants check every link.
  Update(Web().Tasks(300).Build(), keep);
  EXPECT_EQ(state_.FindJob(kWeb)->pending, 299);
  EXPECT_EQ(T(0).incarnation(), 1);
  EXPECT_EQ(T(0).state(), v1::Task::RUNNING);
  Apply(Schedule(kWeb, 2, "m2"));
  EXPECT_GT(T(2).incarnation(), 1) << "task 2's first run was web.2.1; its new one must differ";
  EXPECT_EQ(T(2).last_event()->transition, Event::SCHEDULE);
  EXPECT_EQ(state_.FindJob(kWeb)->version, 3);
}

TEST_F(JobUpdateTest, ShrinkingAwayEveryLiveTaskLeavesTheJobDead) {
  Apply(Submit(Web().Tasks(2).Build()));
  Apply(Schedule(kWeb, 0, "m1"));
  Apply(Exited(Ref(kWeb, 0, 1), 0));
  Update(Web().Tasks(1).Build());
  EXPECT_EQ(state_.FindJob(kWeb)->state, v1::Job::DEAD);
}

TEST_F(JobUpdateTest, HeldTasksStayOutdatedUntilTheyMove) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  v1::JobSpec next = Web().Command({"/bin/sleep", "9"}).Cpu(600).Build();
  Apply(testing::Update(next, /*restart=*/{0}, {}, /*hold=*/{1, 2}));
  EXPECT_EQ(T(0).job_version(), 2);
  EXPECT_EQ(T(0).resources().cpu_millis, 600);
  EXPECT_TRUE(T(1).outdated());
  EXPECT_EQ(T(1).resources().cpu_millis, 500);  // as it runs
  EXPECT_EQ(T(1).incarnation(), 1);
  // Lost, it is placed again with the spec of today.
  Apply(Lost(Ref(kWeb, 1, 1)));
  EXPECT_FALSE(T(1).outdated());
  EXPECT_EQ(T(1).resources().cpu_millis, 600);
  // A later diff judges the held one by the spec it runs (version 1's).
  v1::JobDiff d = Diff(Web().Command({"/bin/sleep", "9"}).Cpu(600).Label("x", "y").Build());
  EXPECT_EQ(Classes(d)[2], v1::UPDATE_RESTART);
  EXPECT_TRUE(absl::StrContains(Reasons(d, 2), "command changed")) << Reasons(d, 2);
  // One that asks for what it runs takes it in place (a rollback).
  d = Diff(Web().Label("x", "y").Build());
  EXPECT_EQ(Classes(d)[2], v1::UPDATE_NONE) << Reasons(d, 2);
}

TEST_F(JobUpdateTest, CheckRefusesWhatWouldBreak) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  Reject(testing::Update(Web().Label("a", "b").Build(), {}, {}, {}, /*expect_version=*/7),
         absl::StatusCode::kFailedPrecondition, "is at version 1, not 7");
  Reject(testing::Update(Web().Build(), {0}, {0}), absl::StatusCode::kInvalidArgument, "listed twice");
  Reject(testing::Update(Web().Tasks(2).Build(), {2}), absl::StatusCode::kInvalidArgument, "does not survive");
  Reject(testing::Update(Web().Cpu(1500).Build()), absl::StatusCode::kFailedPrecondition,
         "cpu 500m -> 1.5 does not fit on m1");
  Reject(testing::Update(Web().Constraint("rack", v1::Constraint::EQ, {"r9"}).Build()),
         absl::StatusCode::kFailedPrecondition, "machine m1 does not meet rack == r9");
  v1::JobSpec other = Web().Build();
  other.set_name("nope");
  Reject(testing::Update(other), absl::StatusCode::kNotFound, "no job alice/nope");
  Apply(Kill(kWeb));
  Reject(testing::Update(Web().Build()), absl::StatusCode::kFailedPrecondition, "is dead");
}

TEST_F(JobUpdateTest, PendingTasksCannotBeListed) {
  Apply(Submit(Web().Build()));
  Reject(testing::Update(Web().Build(), {0}), absl::StatusCode::kFailedPrecondition, "not RUNNING");
}

TEST_F(JobUpdateTest, UpdatesSurviveSnapshotAndReplay) {
  Run(Web().Build(), {"m1", "m2", "m1"});
  Apply(testing::Update(Web().Tasks(5).Command({"/bin/sleep", "9"}).Build(), {1}, {}, {0, 2}));
  Apply(testing::Update(Web().Tasks(2).Command({"/bin/sleep", "9"}).Build(), {}, {}, {0}));
  auto restored = CellState::FromSnapshot(state_.ToSnapshot());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(state_.ToSnapshot(), restored->ToSnapshot()));
  EXPECT_TRUE(restored->FindTask(kWeb, 0)->outdated());
  CellState replay;
  for (const v1::Mutation& m : log_) ASSERT_TRUE(replay.Apply(m).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(state_.ToSnapshot(), replay.ToSnapshot()));
}

}  // namespace
}  // namespace herd::cell
