// Rolling updates: the controller's decisions (StepRollouts) on a cell
// whose agents' reports and clock the test drives, and the mutations that
// carry them out (TasksUpdated, RolloutChanged, a rollback's JobUpdated).
#include "cell/rollout.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "base/clock.h"
#include "cell/job_update.h"
#include "testing/builders.h"

namespace herd::cell {
namespace {

using namespace herd::testing;  // NOLINT

constexpr char kWeb[] = "alice/web";

v1::UpdateStrategy Strategy(int32_t max_unavailable, int64_t min_healthy_ms) {
  v1::UpdateStrategy s;
  s.set_max_unavailable(max_unavailable);
  s.set_min_healthy_time_ms(min_healthy_ms);
  return s;
}

class RolloutTest : public ::testing::Test {
 protected:
  void Apply(const v1::Mutation& in) {
    v1::Mutation m = in;
    m.set_time_ms(clock_.NowMs());
    absl::Status st = state_.Apply(m);
    ASSERT_TRUE(st.ok()) << st << "\n" << m.ShortDebugString();
    absl::Status inv = state_.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv;
  }

  // `n` tasks of `spec` running on machines of their own, active and
  // started now.
  void Run(v1::JobSpec spec, int32_t n) {
    for (int32_t i = 0; i < n; ++i) {
      Apply(Register(MachineBuilder("m" + std::to_string(i)).Cpu(4000).Memory(8LL << 30).Build()));
    }
    spec.set_task_count(n);
    Apply(Submit(spec));
    for (int32_t i = 0; i < n; ++i) {
      Apply(Schedule(kWeb, i, "m" + std::to_string(i)));
      Serve(i);
    }
  }
  // The agent reports task i's current run active, started now.
  void Serve(int32_t i, int32_t restarts = 0) {
    const Task& t = T(i);
    v1::Mutation m;
    v1::TaskObserved* o = m.mutable_task_observed();
    o->mutable_task()->set_job(kWeb);
    o->mutable_task()->set_index(i);
    o->mutable_task()->set_incarnation(t.incarnation());
    o->set_phase(v1::Task::ACTIVE);
    o->set_pid(1000 + i);
    o->set_restarts(restarts);
    o->set_exit_code(restarts > 0 ? 1 : 0);
    o->set_started_ms(clock_.NowMs());
    Apply(m);
  }
  // Submits `next` as the master does (a rolling update if it has `update:`).
  void Update(const v1::JobSpec& next) {
    const Job* job = state_.FindJob(kWeb);
    v1::JobDiff d = DiffJob(state_, job, next);
    Apply(PlanUpdate(*job, next, d, "updated by test", next.has_update() ? &next.update() : nullptr));
  }
  // One controller pass: applies and returns what it decided.
  std::vector<v1::Mutation> Step() {
    std::vector<v1::Mutation> out = StepRollouts(state_, clock_.NowMs());
    for (const v1::Mutation& m : out) {
      Apply(m);
      if (HasFatalFailure()) break;
    }
    return out;
  }
  // Tasks restarted by the step `ms` decided, in order.
  static std::vector<int32_t> Restarted(const std::vector<v1::Mutation>& ms) {
    std::vector<int32_t> out;
    for (const v1::Mutation& m : ms) {
      if (m.has_tasks_updated()) out.insert(out.end(), m.tasks_updated().restart().begin(), m.tasks_updated().restart().end());
    }
    return out;
  }
  int32_t Unavailable(int64_t min_healthy_ms) {
    int32_t n = 0;
    for (const Task& t : state_.FindJob(kWeb)->tasks) n += !TaskAvailable(t, min_healthy_ms, clock_.NowMs());
    return n;
  }
  const Task& T(int32_t i) { return *state_.FindTask(kWeb, i); }
  const Job& J() { return *state_.FindJob(kWeb); }
  // Every task of the job restarted by the steps so far reports active.
  void ServeRestarted() {
    for (const Task& t : J().tasks) {
      if (t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ASSIGNED) Serve(t.index());
    }
  }

  ManualClock clock_;
  CellState state_;
};

TEST(RolloutBudgetTest, CountsAndPercentagesRoundDownButAllowOne) {
  EXPECT_EQ(MaxUnavailable(0, 5, 1000), 50);
  EXPECT_EQ(MaxUnavailable(0, 25, 4), 1);
  EXPECT_EQ(MaxUnavailable(0, 10, 5), 1);   // 0.5 rounds down to 0: one still goes
  EXPECT_EQ(MaxUnavailable(2, 50, 10), 2);  // the tighter of the two
  EXPECT_EQ(MaxUnavailable(0, 0, 10), INT32_MAX);
}

TEST_F(RolloutTest, OneTaskAtATimeEachHealthyForMinHealthyTime) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 4);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(4).Build();
  *next.mutable_update() = Strategy(1, 10'000);
  clock_.AdvanceMs(60'000);  // the old tasks have been up for a minute
  Update(next);
  EXPECT_EQ(J().rollout.state(), v1::Rollout::ROLLING);
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(T(i).outdated()) << i;
    EXPECT_EQ(T(i).incarnation(), 1) << "held: not restarted by the update itself";
  }
  std::vector<int32_t> order;
  for (int round = 0; round < 40 && J().rollout.state() == v1::Rollout::ROLLING; ++round) {
    std::vector<int32_t> r = Restarted(Step());
    order.insert(order.end(), r.begin(), r.end());
    EXPECT_LE(Unavailable(10'000), 1) << "round " << round;
    clock_.AdvanceMs(2'000);
    ServeRestarted();
    EXPECT_LE(Unavailable(10'000), 1) << "round " << round;
  }
  EXPECT_EQ(order, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(J().rollout.state(), v1::Rollout::DONE) << J().rollout.message();
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_FALSE(T(i).outdated());
    EXPECT_EQ(J().SpecAt(T(i).job_version()).task().command(0), "v2");
  }
}

TEST_F(RolloutTest, NoNextBatchBeforeMinHealthyTime) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 2);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(2).Build();
  *next.mutable_update() = Strategy(1, 10'000);
  clock_.AdvanceMs(60'000);
  Update(next);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
  Serve(0);
  clock_.AdvanceMs(9'999);
  EXPECT_TRUE(Step().empty()) << "task 0 is not yet healthy for 10s";
  clock_.AdvanceMs(1);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{1});
}

TEST_F(RolloutTest, PercentageSetsTheBatch) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 20);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(20).Build();
  v1::UpdateStrategy s;
  s.set_max_unavailable_percent(25);
  *next.mutable_update() = s;
  Update(next);
  EXPECT_EQ(Restarted(Step()), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Unavailable(0), 5);
  EXPECT_TRUE(Step().empty());
  Serve(2);  // one of the batch is up: one more may go
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{5});
}

TEST_F(RolloutTest, TasksDownForOtherReasonsCountAndGoFirst) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 4);
  // Task 2 crashed and waits to restart in place: it is down already.
  v1::Mutation backoff;
  v1::TaskObserved* o = backoff.mutable_task_observed();
  o->mutable_task()->set_job(kWeb);
  o->mutable_task()->set_index(2);
  o->mutable_task()->set_incarnation(T(2).incarnation());
  o->set_phase(v1::Task::BACKOFF);
  Apply(backoff);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(4).Build();
  *next.mutable_update() = Strategy(1, 0);
  Update(next);
  // Updating the task that is down costs nothing; nothing else may go.
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{2});
  EXPECT_TRUE(Step().empty());
  Serve(2);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
}

TEST_F(RolloutTest, DisruptionBudgetIsTheCeiling) {
  v1::JobSpec spec = JobBuilder("web").Command({"v1"}).Build();
  spec.mutable_disruption_budget()->set_max_unavailable(1);
  Run(spec, 4);
  v1::JobSpec next = spec;
  next.set_task_count(4);
  next.mutable_task()->set_command(0, "v2");
  *next.mutable_update() = Strategy(3, 0);
  Update(next);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
}

TEST_F(RolloutTest, CanaryPausesUntilResumed) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 4);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(4).Build();
  *next.mutable_update() = Strategy(2, 0);
  next.mutable_update()->set_canary(1);
  Update(next);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
  EXPECT_TRUE(Step().empty()) << "the canary is not up yet";
  Serve(0);
  std::vector<v1::Mutation> paused = Step();
  ASSERT_EQ(paused.size(), 1u);
  EXPECT_EQ(J().rollout.state(), v1::Rollout::PAUSED);
  EXPECT_TRUE(absl::StrContains(J().rollout.message(), "canary")) << J().rollout.message();
  EXPECT_TRUE(Step().empty());
  v1::Mutation resume;
  resume.mutable_rollout_changed()->set_job(kWeb);
  resume.mutable_rollout_changed()->set_version(2);
  resume.mutable_rollout_changed()->set_state(v1::Rollout::ROLLING);
  resume.mutable_rollout_changed()->set_promote(true);
  Apply(resume);
  EXPECT_EQ(Restarted(Step()), (std::vector<int32_t>{1, 2}));
}

// herd scale during a paused rollout: the new tasks come, and the rollout
// stays paused (it used to start rolling again).
TEST_F(RolloutTest, AResizeKeepsAPausedRolloutPaused) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 4);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(4).Build();
  *next.mutable_update() = Strategy(2, 0);
  next.mutable_update()->set_canary(1);
  Update(next);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
  Serve(0);
  ASSERT_EQ(Step().size(), 1u);
  ASSERT_EQ(J().rollout.state(), v1::Rollout::PAUSED);
  const std::string why = J().rollout.message();

  v1::JobSpec bigger = J().spec;
  bigger.set_task_count(6);
  UpdateOptions keep;
  keep.keep_survivors = true;
  v1::Mutation scale = PlanUpdate(J(), bigger, DiffJob(state_, &J(), bigger, keep), "scaled by test",
                                  &J().rollout.strategy(), /*hold_outdated=*/true);
  scale.mutable_job_updated()->set_resize(true);
  Apply(scale);
  EXPECT_EQ(J().spec.task_count(), 6);
  EXPECT_EQ(J().rollout.state(), v1::Rollout::PAUSED) << J().rollout.message();
  EXPECT_EQ(J().rollout.message(), why);
  EXPECT_EQ(J().rollout.version(), J().version);
  EXPECT_TRUE(Restarted(Step()).empty()) << "a paused rollout restarts nothing";
  // Without the flag (an update of the spec), the rollout starts anew.
  v1::JobSpec v3 = J().spec;
  v3.mutable_task()->set_command(0, "v3");
  Update(v3);
  EXPECT_EQ(J().rollout.state(), v1::Rollout::ROLLING);
}

TEST_F(RolloutTest, MissedProgressDeadlineFailsAndRollsBack) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 3);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(3).Build();
  *next.mutable_update() = Strategy(1, 0);
  next.mutable_update()->set_progress_deadline_ms(60'000);
  next.mutable_update()->set_auto_rollback(true);
  Update(next);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
  clock_.AdvanceMs(60'000);
  EXPECT_TRUE(Step().empty()) << "the deadline has not passed yet";
  clock_.AdvanceMs(1);
  std::vector<v1::Mutation> failed = StepRollouts(state_, clock_.NowMs());
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].rollout_changed().state(), v1::Rollout::FAILED);
  EXPECT_TRUE(absl::StrContains(failed[0].rollout_changed().message(), "not healthy"));
  ASSERT_TRUE(failed[1].has_job_updated());
  EXPECT_TRUE(failed[1].job_updated().rollback());
  EXPECT_EQ(failed[1].job_updated().hold_size(), 1) << failed[1].ShortDebugString();
  // Only the failure is committed (the master stopped): the next pass,
  // from the log alone, rolls back.
  Apply(failed[0]);
  EXPECT_EQ(J().rollout.state(), v1::Rollout::FAILED);
  std::vector<v1::Mutation> back = Step();
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(back[0].job_updated().rollback());
  // Version 3 is version 1's spec: tasks 1 and 2 already run it and take it
  // in place; task 0, down on version 2, goes back at once.
  EXPECT_EQ(J().version, 3);
  EXPECT_EQ(J().spec.task().command(0), "v1");
  EXPECT_TRUE(J().rollout.rollback());
  EXPECT_FALSE(T(1).outdated());
  EXPECT_EQ(T(1).incarnation(), 1);
  EXPECT_TRUE(T(0).outdated());
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
  Serve(0);
  Step();
  EXPECT_EQ(J().rollout.state(), v1::Rollout::DONE);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(J().SpecAt(T(i).job_version()).task().command(0), "v1");
}

TEST_F(RolloutTest, CrashingNewVersionFailsTheRollout) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 3);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(3).Build();
  *next.mutable_update() = Strategy(1, 0);
  Update(next);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
  Serve(0, /*restarts=*/1);
  std::vector<v1::Mutation> failed = Step();
  ASSERT_EQ(failed.size(), 1u) << "no automatic rollback asked for";
  EXPECT_EQ(J().rollout.state(), v1::Rollout::FAILED);
  EXPECT_TRUE(absl::StrContains(J().rollout.message(), "restarted 1 time")) << J().rollout.message();
  EXPECT_TRUE(Step().empty()) << "a failed rollout stays stopped";
  EXPECT_TRUE(T(1).outdated());
  // A manual rollback to version 1 (herd rollback).
  absl::StatusOr<v1::Mutation> back = RollbackMutation(state_, J(), 0, "rolled back by test");
  ASSERT_TRUE(back.ok()) << back.status();
  Apply(*back);
  EXPECT_EQ(Restarted(Step()), std::vector<int32_t>{0});
}

TEST_F(RolloutTest, HeldTasksRunTheirOwnVersionAndHistoryIsBounded) {
  Run(JobBuilder("web").Command({"v1"}).Build(), 2);
  v1::JobSpec next = JobBuilder("web").Command({"v2"}).Tasks(2).Build();
  *next.mutable_update() = Strategy(1, 0);
  Update(next);
  // Many more versions while task 1 is still held on version 1: it keeps it.
  for (int v = 3; v <= 30; ++v) {
    v1::JobSpec more = next;
    more.mutable_task()->set_command(0, "v" + std::to_string(v));
    Update(more);
  }
  EXPECT_EQ(J().version, 30);
  EXPECT_LE(J().versions.size(), Job::kVersions + 1);
  EXPECT_EQ(T(1).job_version(), 1);
  EXPECT_EQ(J().SpecAt(1).task().command(0), "v1");
  EXPECT_EQ(J().versions.back().version(), 30);
  // The snapshot keeps the history and the rollout.
  absl::StatusOr<CellState> back = CellState::FromSnapshot(state_.ToSnapshot());
  ASSERT_TRUE(back.ok()) << back.status();
  const Job* j = back->FindJob(kWeb);
  EXPECT_EQ(j->versions.size(), J().versions.size());
  EXPECT_EQ(j->SpecAt(1).task().command(0), "v1");
  EXPECT_EQ(j->rollout.state(), v1::Rollout::ROLLING);
}

}  // namespace
}  // namespace herd::cell
