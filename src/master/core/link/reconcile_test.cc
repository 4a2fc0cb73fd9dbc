// Drain through Reconcile: a drained machine's tasks are moved off (as
// TaskRescheduled) only as far as their jobs' disruption budgets allow.
#include "master/core/link/reconcile.h"

#include <gtest/gtest.h>

#include "base/ids.h"
#include "testing/builders.h"

namespace herd::master {
namespace {

using namespace herd::testing;

class DrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* m : {"m0", "m1"}) {
      ASSERT_TRUE(state_.Apply(Register(MachineBuilder(m).Cpu(8000).Memory(8LL << 30).Build())).ok());
    }
  }
  // A job of n tasks, all RUNNING and active on m0.
  void RunOnM0(v1::JobSpec spec, int n) {
    spec.set_task_count(n);
    ASSERT_TRUE(state_.Apply(Submit(spec)).ok());
    const std::string job = spec.user() + "/" + spec.name();
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(state_.Apply(Schedule(job, i, "m0")).ok());
      ASSERT_TRUE(state_.Apply(Observed(Ref(job, i, 1), v1::Task::ACTIVE, 100 + i)).ok());
    }
  }
  void Drain(bool on) {
    v1::Mutation m;
    m.mutable_machine_drained()->set_name("m0");
    m.mutable_machine_drained()->set_drained(on);
    m.mutable_machine_drained()->set_reason("kernel upgrade");
    ASSERT_TRUE(state_.Apply(m).ok());
  }
  // One poll reply from m0 reporting every placed run as it is, reconciled
  // and applied; the jobs whose tasks it moved, one entry per task.
  std::vector<std::string> Poll() {
    absl::flat_hash_set<std::string> sent;
    v1::PollResponse observed;
    for (const cell::Task* t : state_.FindMachine("m0")->tasks()) {
      const std::string run = RunId(t->job()->id, t->index(), t->incarnation());
      sent.insert(run);
      v1::RunStatus* r = observed.add_runs();
      r->set_run_id(run);
      r->set_phase(t->phase());
      r->set_pid(t->pid());
    }
    std::vector<std::string> moved;
    for (const v1::Mutation& m : Reconcile(state_, "m0", sent, observed, 1000)) {
      EXPECT_TRUE(state_.Apply(m).ok());
      if (m.has_task_rescheduled()) {
        moved.push_back(m.task_rescheduled().task().job());
        EXPECT_NE(m.task_rescheduled().reason().find("drained: kernel upgrade"), std::string::npos);
      }
    }
    return moved;
  }
  // Brings task `index` of `job` up again on m1 (its replacement is active).
  void ReplaceOnM1(const std::string& job, int index) {
    const cell::Task* t = state_.FindJob(job) ? &state_.FindJob(job)->tasks[index] : nullptr;
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(state_.Apply(Schedule(job, index, "m1")).ok());
    ASSERT_TRUE(state_.Apply(Observed(Ref(job, index, t->incarnation()), v1::Task::ACTIVE, 500 + index)).ok());
  }

  cell::CellState state_{"test"};
};

TEST_F(DrainTest, NothingMovesUntilTheMachineIsDrained) {
  RunOnM0(JobBuilder("web").Build(), 3);
  EXPECT_TRUE(Poll().empty());
}

TEST_F(DrainTest, ABudgetOfOneMovesOneTaskAtATime) {
  v1::JobSpec spec = JobBuilder("web").Build();
  spec.mutable_disruption_budget()->set_max_unavailable(1);
  RunOnM0(spec, 3);
  Drain(true);
  EXPECT_EQ(Poll().size(), 1u);  // one down: the budget is spent
  EXPECT_TRUE(Poll().empty());   // ... and stays spent while it is pending
  // Its replacement runs elsewhere: the next one may go.
  for (const cell::Task& t : state_.FindJob("alice/web")->tasks) {
    if (t.state() == v1::Task::PENDING) ReplaceOnM1("alice/web", t.index());
  }
  EXPECT_EQ(Poll().size(), 1u);
}

TEST_F(DrainTest, WithoutABudgetEverythingMovesAtOnceAndAPercentageRoundsDown) {
  RunOnM0(JobBuilder("batch").Build(), 4);
  v1::JobSpec web = JobBuilder("web").Build();
  web.mutable_disruption_budget()->set_max_unavailable_percent(50);
  RunOnM0(web, 5);  // 50% of 5 = 2
  Drain(true);
  std::vector<std::string> moved = Poll();
  EXPECT_EQ(std::count(moved.begin(), moved.end(), "alice/batch"), 4);
  EXPECT_EQ(std::count(moved.begin(), moved.end(), "alice/web"), 2);
}

TEST_F(DrainTest, AnUndrainedMachineKeepsItsTasksAndIsSnapshotted) {
  RunOnM0(JobBuilder("web").Build(), 2);
  Drain(true);
  EXPECT_TRUE(state_.FindMachine("m0")->drained());
  auto back = cell::CellState::FromSnapshot(state_.ToSnapshot());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->FindMachine("m0")->drained());
  EXPECT_EQ(back->FindMachine("m0")->drain_reason(), "kernel upgrade");
  Drain(false);
  EXPECT_FALSE(state_.FindMachine("m0")->drained());
  // (Tasks moved while drained stay where they went; none move now.)
  RunOnM0(JobBuilder("api").Build(), 1);
  EXPECT_TRUE(Poll().empty());
}

// The agent's interference level reaches the cell only when it moves.
TEST(ReconcileInterference, OnlyAMoveOfTheLevelIsCommitted) {
  cell::CellState state("test");
  ASSERT_TRUE(state.Apply(Register(MachineBuilder("m0").Build())).ok());
  auto poll = [&](const std::string& level, const std::string& reason) {
    v1::PollResponse observed;
    if (!level.empty()) {
      observed.mutable_interference()->set_level(level);
      observed.mutable_interference()->set_reason(reason);
    }
    int committed = 0;
    for (const v1::Mutation& m : Reconcile(state, "m0", {}, observed, 1000)) {
      if (!m.has_machine_interference()) continue;
      EXPECT_TRUE(state.Apply(m).ok());
      ++committed;
    }
    return committed;
  };
  EXPECT_EQ(poll("", ""), 0);
  EXPECT_EQ(poll("mark", "run a waited for a CPU 30% of the time"), 1);
  EXPECT_TRUE(state.FindMachine("m0")->interference_marked());
  EXPECT_EQ(poll("mark", "run a waited for a CPU 35% of the time"), 0);  // same level: nothing
  EXPECT_EQ(state.FindMachine("m0")->interference_reason(), "run a waited for a CPU 30% of the time");
  EXPECT_EQ(poll("", ""), 1);
  EXPECT_EQ(state.FindMachine("m0")->interference(), "");
}

}  // namespace
}  // namespace herd::master
