#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "base/rng.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

// Commits every proposal of a pass to the state, as the master would.
int Commit(cell::CellState& s, const PassResult& r) {
  int ok = 0;
  for (const auto& p : r.proposals) {
    v1::Mutation m;
    *m.mutable_task_scheduled() = p;
    if (s.Apply(m).ok()) ++ok;
  }
  return ok;
}

TEST(Scheduler, PlacesEverythingThatFitsBestFit) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Cpu(2000).Memory(2LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m2").Cpu(2000).Memory(2LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("web").Tasks(4).Cpu(1000).Memory(1LL << 30).Build())).ok());
  Scheduler sched;
  PassResult r = sched.RunPass(s);
  EXPECT_EQ(r.proposals.size(), 4u);
  EXPECT_TRUE(r.unplaced.empty());
  // Best fit fills m1 before m2.
  EXPECT_EQ(r.proposals[0].machine(), r.proposals[1].machine());
  EXPECT_EQ(Commit(s, r), 4);
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_EQ(s.FindMachine("m1")->Free().cpu_millis, 0);
}

TEST(Scheduler, WorstFitSpreads) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m2").Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("web").Tasks(2).Build())).ok());
  Scheduler sched(Options{.policy = PackingPolicy::kWorstFit});
  PassResult r = sched.RunPass(s);
  ASSERT_EQ(r.proposals.size(), 2u);
  EXPECT_NE(r.proposals[0].machine(), r.proposals[1].machine());
}

TEST(Scheduler, ExplainsWhyPending) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Memory(1LL << 30).Attr("arch", "amd64").Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m2").Memory(1LL << 30).Attr("arch", "amd64").Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m3").Memory(8LL << 30).Attr("arch", "arm64").Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("big").Tasks(2).Memory(4LL << 30)
                                 .Constraint("arch", v1::Constraint::EQ, {"amd64"}).Build())).ok());
  Scheduler sched;
  PassResult r = sched.RunPass(s);
  EXPECT_TRUE(r.proposals.empty());
  ASSERT_EQ(r.unplaced.size(), 2u);
  EXPECT_EQ(r.unplaced[0].why.ToString(),
            "0/3 machines fit: 2 insufficient memory, 1 constraint arch == amd64");
}

TEST(Scheduler, PreemptsLowerPriorityAndNeverProdForProd) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Cpu(2000).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("batch", "bob").Priority(100).Cpu(2000).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("bob/batch", 0, "m1")).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("prod").Priority(200).Cpu(1500).Build())).ok());
  Scheduler sched;
  PassResult r = sched.RunPass(s);
  ASSERT_EQ(r.proposals.size(), 1u);
  ASSERT_EQ(r.proposals[0].victims_size(), 1);
  EXPECT_EQ(r.proposals[0].victims(0).job(), "bob/batch");
  EXPECT_EQ(Commit(s, r), 1);
  EXPECT_EQ(s.FindTask("bob/batch", 0)->state, v1::Task::PENDING);
  EXPECT_EQ(s.FindTask("bob/batch", 0)->last_event()->reason, "preempted by alice/prod/0 (priority 200) on m1");
  // The evicted batch task now waits: it may not preempt prod back.
  PassResult r2 = sched.RunPass(s);
  EXPECT_TRUE(r2.proposals.empty());
  // Another production job cannot evict the first one.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("prod2").Priority(300).Cpu(1500).Build())).ok());
  PassResult r3 = sched.RunPass(s);
  EXPECT_TRUE(r3.proposals.empty());
  bool found = false;
  for (const auto& u : r3.unplaced) {
    if (u.job == "alice/prod2") {
      found = true;
      EXPECT_TRUE(u.why.preemption_tried);
    }
  }
  EXPECT_TRUE(found);
}

TEST(Scheduler, StaleProposalsAreRejectedAtCommit) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Cpu(2000).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a").Tasks(2).Cpu(1000).Build())).ok());
  Scheduler sched;
  PassResult r = sched.RunPass(s);  // computed at this revision
  ASSERT_EQ(r.proposals.size(), 2u);
  // Meanwhile the cell changes: another task takes half the machine, and
  // task 1 is killed and resubmitted (its state revision moves).
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("b").Cpu(1000).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/b", 0, "m1")).ok());
  EXPECT_EQ(Commit(s, r), 1);  // the second no longer fits
  EXPECT_TRUE(s.CheckInvariants().ok());
  // The next pass reconsiders it from fresh state.
  PassResult r2 = sched.RunPass(s);
  EXPECT_TRUE(r2.proposals.empty());
  ASSERT_EQ(r2.unplaced.size(), 1u);
}

// Property: whatever the workload, committed placements never over-commit a
// machine, and a fixed input gives the same proposals.
TEST(Scheduler, NeverOvercommitsAndIsDeterministic) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto build = [&](cell::CellState& s) {
      Rng rng(seed);
      for (int i = 0; i < 8; ++i) {
        ASSERT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i))
                                         .Cpu(1000 + 1000 * rng.Uniform(4))
                                         .Memory((1LL + rng.Uniform(4)) << 30)
                                         .Build()))
                        .ok());
      }
      for (int j = 0; j < 12; ++j) {
        ASSERT_TRUE(s.Apply(Submit(JobBuilder("j" + std::to_string(j), j % 2 ? "alice" : "bob")
                                       .Tasks(1 + rng.Uniform(5))
                                       .Priority(static_cast<int32_t>(rng.Uniform(4) * 100))
                                       .Cpu(100 + 100 * rng.Uniform(15))
                                       .Memory((64LL + 64 * rng.Uniform(16)) << 20)
                                       .Build()))
                        .ok());
      }
    };
    cell::CellState a, b;
    build(a);
    build(b);
    Scheduler sa, sb;
    for (int pass = 0; pass < 3; ++pass) {
      PassResult ra = sa.RunPass(a), rb = sb.RunPass(b);
      ASSERT_EQ(ra.proposals.size(), rb.proposals.size());
      for (size_t i = 0; i < ra.proposals.size(); ++i) {
        ASSERT_EQ(ra.proposals[i].SerializeAsString(), rb.proposals[i].SerializeAsString());
      }
      EXPECT_EQ(Commit(a, ra), static_cast<int>(ra.proposals.size())) << "seed " << seed;
      Commit(b, rb);
      for (const cell::Machine* m : a.machines()) {
        ASSERT_TRUE(m->allocated.FitsIn(m->capacity)) << m->name << " over-committed, seed " << seed;
      }
      ASSERT_TRUE(a.CheckInvariants().ok());
    }
  }
}

}  // namespace
}  // namespace herd::sched
