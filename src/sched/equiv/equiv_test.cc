// Equivalence classes and the score cache on their own (the scheduler's
// tests cover them in passes).
#include <gtest/gtest.h>

#include "sched/equiv/classes.h"
#include "sched/equiv/score_cache.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

class EquivTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* m : {"m1", "m2", "m3"}) {
      ASSERT_TRUE(state_.Apply(Register(MachineBuilder(m).Cpu(4000).Memory(8LL << 30).Build())).ok());
    }
  }
  void Apply(const v1::Mutation& m) { ASSERT_TRUE(state_.Apply(m).ok()) << m.ShortDebugString(); }
  const cell::Task* T(const std::string& job, int i) { return state_.FindTask(job, i); }

  cell::CellState state_;
  Options options_;
};

TEST_F(EquivTest, TasksOfAJobWithTheSameResourcesShareAClass) {
  Apply(Submit(JobBuilder("web").Tasks(3).Cpu(500).Build()));
  Apply(Submit(JobBuilder("api").Tasks(1).Cpu(500).Build()));
  const cell::Task* a = T("alice/web", 0);
  const cell::Task* b = T("alice/web", 2);
  ASSERT_TRUE(SharesClass(a, true));
  EXPECT_EQ(ClassKeyOf(a, true), ClassKeyOf(b, true));
  // Same resources, another job: another class (its constraints may differ).
  EXPECT_FALSE(ClassKeyOf(a, true) == ClassKeyOf(T("alice/api", 0), true));
  // Switched off (the ablation): every task alone.
  EXPECT_FALSE(SharesClass(a, false));
  EXPECT_FALSE(ClassKeyOf(a, false) == ClassKeyOf(b, false));

  PassContext ctx(state_, options_, 0);
  TaskClass shared = MakeClass(ctx, a, true);
  EXPECT_EQ(shared.only_task, nullptr);
  EXPECT_EQ(shared.pending, 3);
  EXPECT_EQ(shared.limit.cpu_millis, 500);
  TaskClass alone = MakeClass(ctx, a, false);
  EXPECT_EQ(alone.only_task, a);
  EXPECT_EQ(alone.pending, 1);
}

TEST_F(EquivTest, ATaskWithItsOwnAvoidListIsAClassOfOne) {
  Apply(Submit(JobBuilder("web").Tasks(2).Cpu(500).Build()));
  Apply(Schedule("alice/web", 0, "m1"));
  Apply(Rescheduled(Ref("alice/web", 0, 1), "crash loop on m1", /*avoid_until_ms=*/INT64_MAX / 2));
  const cell::Task* avoiding = T("alice/web", 0);
  ASSERT_FALSE(avoiding->avoid().empty());
  EXPECT_FALSE(SharesClass(avoiding, true));
  EXPECT_TRUE(SharesClass(T("alice/web", 1), true));
  EXPECT_FALSE(ClassKeyOf(avoiding, false) == ClassKeyOf(T("alice/web", 1), true));
}

TEST_F(EquivTest, AFailureHoldsUntilCapacityIsFreed) {
  Apply(Submit(JobBuilder("big").Tasks(1).Cpu(64000).Build()));
  PassContext ctx(state_, options_, 0);
  TaskClass c = MakeClass(ctx, T("alice/big", 0), true);
  ScoreCache cache;
  const ScoreCache::Key key = ScoreCache::KeyOf(c);
  Diagnosis why;
  why.machines = 3;
  cache.Failed(key, state_.revision(), why, /*pass=*/1);
  const Diagnosis* still = cache.StillFailing(key, state_, c.priority, /*may_preempt=*/true, 2);
  ASSERT_NE(still, nullptr);
  EXPECT_EQ(still->machines, 3);

  // Placing work frees nothing: still known not to fit.
  Apply(Submit(JobBuilder("small").Tasks(1).Cpu(100).Priority(200).Build()));
  Apply(Schedule("alice/small", 0, "m1"));
  EXPECT_NE(cache.StillFailing(key, state_, c.priority, true, 3), nullptr);
  // A machine joins: capacity was freed, so it may fit now, and is forgotten.
  Apply(Register(MachineBuilder("m4").Cpu(128000).Memory(8LL << 30).Build()));
  EXPECT_EQ(cache.StillFailing(key, state_, c.priority, true, 4), nullptr);
  EXPECT_EQ(cache.failed_count(), 0u);
}

TEST_F(EquivTest, LowerPriorityWorkPlacedSinceMayBePreempted) {
  Apply(Submit(JobBuilder("prod").Tasks(1).Cpu(64000).Priority(200).Build()));
  PassContext ctx(state_, options_, 0);
  TaskClass c = MakeClass(ctx, T("alice/prod", 0), true);
  ScoreCache cache;
  const ScoreCache::Key key = ScoreCache::KeyOf(c);
  cache.Failed(key, state_.revision(), Diagnosis(), 1);
  Apply(Submit(JobBuilder("batch").Tasks(1).Cpu(100).Priority(100).Build()));
  Apply(Schedule("alice/batch", 0, "m2"));
  // Without preemption that changes nothing; with it, a victim appeared.
  EXPECT_NE(cache.StillFailing(key, state_, c.priority, /*may_preempt=*/false, 2), nullptr);
  EXPECT_EQ(cache.StillFailing(key, state_, c.priority, /*may_preempt=*/true, 3), nullptr);
}

TEST_F(EquivTest, KeptCandidatesSkipMachinesThatChanged) {
  Apply(Submit(JobBuilder("web").Tasks(1).Cpu(500).Build()));
  auto views = [&] { return PassContext(state_, options_, 0).views(); };
  PassContext ctx(state_, options_, 0);
  const ScoreCache::Key key = ScoreCache::KeyOf(MakeClass(ctx, T("alice/web", 0), true));
  ScoreCache cache;
  std::vector<ScoreCache::Entry> entries;
  for (const MachineView& m : ctx.views()) {
    entries.push_back({m.index, 50.0f + m.index, m.machine->state_revision(), 4000, 8LL << 30});
  }
  cache.Keep(key, entries, ctx.views().size(), 1);
  EXPECT_EQ(cache.candidate_count(), 3u);
  EXPECT_EQ(cache.Candidates(key, views()).size(), 3u);
  // m2 goes down and comes back: its state changed, so it is scanned afresh.
  Apply(Down("m2"));
  Apply(Up("m2"));
  std::vector<ScoreCache::Entry> kept = cache.Candidates(key, views());
  ASSERT_EQ(kept.size(), 2u);
  for (const auto& e : kept) EXPECT_NE(views()[e.machine].machine->name(), "m2");
  // A machine joins: the indexes no longer line up, nothing is reused.
  Apply(Register(MachineBuilder("m4").Cpu(4000).Memory(8LL << 30).Build()));
  EXPECT_TRUE(cache.Candidates(key, views()).empty());
}

TEST_F(EquivTest, WhatIsNotUsedForAFewPassesIsForgotten) {
  Apply(Submit(JobBuilder("web").Tasks(1).Cpu(500).Build()));
  PassContext ctx(state_, options_, 0);
  const ScoreCache::Key key = ScoreCache::KeyOf(MakeClass(ctx, T("alice/web", 0), true));
  ScoreCache cache;
  cache.Keep(key, {{0, 1.0f, ctx.views()[0].machine->state_revision(), 0, 0}}, ctx.views().size(), 1);
  cache.Failed(ScoreCache::Key{"alice/other", 1, {}}, state_.revision(), Diagnosis(), 1);
  cache.Expire(1 + ScoreCache::kForgetAfterPasses);
  EXPECT_EQ(cache.candidate_count(), 1u);
  EXPECT_EQ(cache.failed_count(), 1u);
  cache.Expire(2 + ScoreCache::kForgetAfterPasses);
  EXPECT_EQ(cache.candidate_count(), 0u);
  EXPECT_EQ(cache.failed_count(), 0u);
  EXPECT_TRUE(cache.Candidates(key, ctx.views()).empty());
}

}  // namespace
}  // namespace herd::sched
