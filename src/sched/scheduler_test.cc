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

Options Plain(PackingPolicy policy = PackingPolicy::kBestFit) {
  Options o;
  o.policy = policy;
  o.weights.Set("spread", 0);
  o.weights.Set("priority-mix", 0);
  return o;
}

void AddMachines(cell::CellState& s, int n, int64_t cpu = 2000, int64_t mem = 2LL << 30) {
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i)).Cpu(cpu).Memory(mem)
                                     .Attr("rack", "r" + std::to_string(i / 2)).Build())).ok());
  }
}

std::string MachineOf(const cell::CellState& s, const std::string& job, int i) {
  const cell::Task* t = s.FindTask(job, i);
  return t->machine() ? t->machine()->name() : "-";
}

TEST(Scheduler, PlacesEverythingThatFitsBestFit) {
  cell::CellState s;
  AddMachines(s, 2);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("web").Tasks(4).Cpu(1000).Memory(1LL << 30).Build())).ok());
  Scheduler sched(Plain());
  PassResult r = sched.RunPass(s);
  EXPECT_EQ(r.proposals.size(), 4u);
  EXPECT_EQ(r.unplaced, 0);
  EXPECT_EQ(r.classes, 1);
  // Best fit fills one machine before the other.
  EXPECT_EQ(r.proposals[0].machine(), r.proposals[1].machine());
  EXPECT_EQ(Commit(s, r), 4);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(Scheduler, WorstFitSpreads) {
  cell::CellState s;
  AddMachines(s, 2);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("web").Tasks(2).Build())).ok());
  PassResult r = Scheduler(Plain(PackingPolicy::kWorstFit)).RunPass(s);
  ASSERT_EQ(r.proposals.size(), 2u);
  EXPECT_NE(r.proposals[0].machine(), r.proposals[1].machine());
}

TEST(Scheduler, SpreadsAJobAcrossFailureDomains) {
  cell::CellState s;
  AddMachines(s, 4, 8000, 8LL << 30);  // racks r0 = {m0, m1}, r1 = {m2, m3}
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("svc").Tasks(4).Build())).ok());
  Options o = Plain();
  o.weights.Set("packing", 0);
  o.weights.Set("spread", 1);
  PassResult r = Scheduler(o).RunPass(s);
  ASSERT_EQ(Commit(s, r), 4);
  std::set<std::string> machines;
  std::map<std::string, int> racks;
  for (int i = 0; i < 4; ++i) {
    machines.insert(MachineOf(s, "alice/svc", i));
    ++racks[s.FindTask("alice/svc", i)->machine()->attributes().at("rack")];
  }
  EXPECT_EQ(machines.size(), 4u);
  EXPECT_EQ(racks["r0"], 2);
  EXPECT_EQ(racks["r1"], 2);
}

TEST(Scheduler, DifferentMachinesAndDomainLimitsAreHard) {
  cell::CellState s;
  AddMachines(s, 3, 8000, 8LL << 30);  // r0 = {m0, m1}, r1 = {m2}
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("dm").Tasks(5).DifferentMachines().Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("rk").Tasks(4).MaxPerDomain("rack", 1).Build())).ok());
  PassResult r = Scheduler(Plain()).RunPass(s);
  ASSERT_EQ(Commit(s, r), 3 + 2);
  std::map<std::string, PendingClass> pending;
  for (auto& p : r.pending) pending[p.job] = p;
  ASSERT_EQ(pending["alice/dm"].indexes.size(), 2u);
  EXPECT_EQ(pending["alice/dm"].why.ToString(), "0/3 machines fit: 3 a task of the job already there");
  ASSERT_EQ(pending["alice/rk"].indexes.size(), 2u);
  EXPECT_EQ(pending["alice/rk"].why.ToString(),
            "0/3 machines fit: 3 job's limit per failure domain reached");
}

TEST(Scheduler, AvoidsMachinesATaskCrashedOn) {
  cell::CellState s;
  AddMachines(s, 2);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("x").Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/x", 0, "m0")).ok());
  v1::Mutation m = Rescheduled(Ref("alice/x", 0, 1), "crash loop on m0", 10'000);
  m.set_time_ms(1);
  ASSERT_TRUE(s.Apply(m).ok());
  // Everything else prefers m0 (best fit would pick either; make m0 fuller).
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("filler").Cpu(500).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/filler", 0, "m0")).ok());
  PassResult r = Scheduler(Plain()).RunPass(s, /*now_ms=*/5'000);
  ASSERT_EQ(r.proposals.size(), 1u);
  EXPECT_EQ(r.proposals[0].machine(), "m1");
  // Once the avoidance expires, m0 (fuller) is best again.
  PassResult later = Scheduler(Plain()).RunPass(s, /*now_ms=*/10'000);
  ASSERT_EQ(later.proposals.size(), 1u);
  EXPECT_EQ(later.proposals[0].machine(), "m0");
}

TEST(Scheduler, SoftConstraintsAndLocalityChooseAmongFeasible) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("plain").Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("ssd").Attr("disk", "ssd").Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("cached").Package("feed").Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a").Constraint("disk", v1::Constraint::EQ, {"ssd"}, true, 3).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("b").Package("srv", "feed").Build())).ok());
  Options o = Plain();
  o.weights.Set("packing", 0.1);
  PassResult r = Scheduler(o).RunPass(s);
  ASSERT_EQ(Commit(s, r), 2);
  EXPECT_EQ(MachineOf(s, "alice/a", 0), "ssd");
  EXPECT_EQ(MachineOf(s, "alice/b", 0), "cached");
}

TEST(Scheduler, ExplainsWhyPendingWithSuggestions) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Memory(1LL << 30).Attr("arch", "amd64").Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m2").Memory(2LL << 30).Attr("arch", "amd64").Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m3").Memory(8LL << 30).Attr("arch", "arm64").Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("big").Tasks(2).Memory(4LL << 30)
                                 .Constraint("arch", v1::Constraint::EQ, {"amd64"}).Build())).ok());
  PassResult r = Scheduler().RunPass(s);
  EXPECT_TRUE(r.proposals.empty());
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_EQ(r.pending[0].indexes, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(r.pending[0].why.ToString(), "0/3 machines fit: 2 insufficient memory, 1 constraint arch == amd64");
  ASSERT_FALSE(r.pending[0].why.suggestions.empty());
  EXPECT_EQ(r.pending[0].why.suggestions[0], "memory <= 1Gi (asks 4Gi) fits on 2 machines");
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
  EXPECT_EQ(s.FindTask("bob/batch", 0)->state(), v1::Task::PENDING);
  EXPECT_EQ(s.FindTask("bob/batch", 0)->last_event()->reason, "preempted by alice/prod/0 (priority 200) on m1");
  // The evicted batch task waits: it may not preempt prod back (no cascade).
  PassResult r2 = sched.RunPass(s);
  EXPECT_TRUE(r2.proposals.empty());
  // Another production job cannot evict the first one.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("prod2").Priority(300).Cpu(1500).Build())).ok());
  PassResult r3 = sched.RunPass(s);
  EXPECT_TRUE(r3.proposals.empty());
  bool found = false;
  for (const auto& p : r3.pending) {
    if (p.job == "alice/prod2") {
      found = true;
      EXPECT_TRUE(p.why.preemption_tried);
    }
  }
  EXPECT_TRUE(found);
}

TEST(Scheduler, PreemptionPicksTheCheapestMachine) {
  cell::CellState s;
  AddMachines(s, 3, 2000, 2LL << 30);
  // m0 holds a priority-110 task, m1 two priority-100 tasks, m2 one priority-100 task.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("hi").Priority(110).Cpu(2000).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/hi", 0, "m0")).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("two").Priority(100).Tasks(2).Cpu(1000).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/two", 0, "m1")).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/two", 1, "m1")).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("one").Priority(100).Cpu(2000).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/one", 0, "m2")).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("p").Priority(200).Cpu(2000).Build())).ok());
  PassResult r = Scheduler().RunPass(s);
  ASSERT_EQ(r.proposals.size(), 1u);
  EXPECT_EQ(r.proposals[0].machine(), "m2");  // one victim of the lowest priority
  EXPECT_EQ(r.proposals[0].victims_size(), 1);
}

TEST(Scheduler, StaleProposalsAreRejectedAtCommit) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Cpu(2000).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a").Tasks(2).Cpu(1000).Build())).ok());
  Scheduler sched;
  PassResult r = sched.RunPass(s);  // computed at this revision
  ASSERT_EQ(r.proposals.size(), 2u);
  // Meanwhile another task takes half the machine.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("b").Cpu(1000).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/b", 0, "m1")).ok());
  EXPECT_EQ(Commit(s, r), 1);  // the second no longer fits
  EXPECT_TRUE(s.CheckInvariants().ok());
  PassResult r2 = sched.RunPass(s);
  EXPECT_TRUE(r2.proposals.empty());
  EXPECT_EQ(r2.unplaced, 1);
}

TEST(Scheduler, EquivalenceClassesShareWork) {
  cell::CellState s;
  AddMachines(s, 50, 16'000, 16LL << 30);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("many").Tasks(200).Cpu(500).Memory(256LL << 20).Build())).ok());
  Options with = Plain(), without = Plain();
  without.equivalence_classes = false;
  PassResult a = Scheduler(with).RunPass(s), b = Scheduler(without).RunPass(s);
  EXPECT_EQ(a.classes, 1);
  EXPECT_EQ(b.classes, 200);
  EXPECT_EQ(a.proposals.size(), 200u);
  EXPECT_EQ(b.proposals.size(), 200u);
  EXPECT_LT(a.machines_evaluated * 5, b.machines_evaluated);
}

TEST(Scheduler, RelaxedRandomizationExaminesFewerMachines) {
  cell::CellState s;
  AddMachines(s, 400, 16'000, 16LL << 30);
  for (int j = 0; j < 20; ++j) {
    ASSERT_TRUE(s.Apply(Submit(JobBuilder("j" + std::to_string(j)).Tasks(3).Build())).ok());
  }
  Options relaxed = Plain(), exhaustive = Plain();
  exhaustive.relaxed_randomization = false;
  PassResult a = Scheduler(relaxed).RunPass(s), b = Scheduler(exhaustive).RunPass(s);
  EXPECT_EQ(a.proposals.size(), 60u);
  EXPECT_EQ(b.proposals.size(), 60u);
  EXPECT_LT(a.machines_evaluated * 3, b.machines_evaluated);
}

TEST(Scheduler, FullestCandidatesShowBestFitWhereThePassPacked) {
  // 200 machines, one of them half full; every class samples one random
  // feasible machine. With the fullest machines examined too, best fit finds
  // the half-full one for every new job; without them, only by luck.
  auto run = [](int32_t fullest) {
    cell::CellState s;
    AddMachines(s, 200);
    EXPECT_TRUE(s.Apply(Submit(JobBuilder("filler").Cpu(1000).Memory(1LL << 30).Build())).ok());
    EXPECT_TRUE(s.Apply(Schedule("alice/filler", 0, "m17")).ok());
    for (int j = 0; j < 4; ++j) {
      EXPECT_TRUE(s.Apply(Submit(JobBuilder("j" + std::to_string(j)).Cpu(200).Memory(200LL << 20).Build())).ok());
    }
    Options o = Plain();
    o.enough_feasible = 1;
    o.fullest_candidates = fullest;
    Scheduler sched(o);
    PassResult r = sched.RunPass(s);
    int on_m17 = 0;
    for (const auto& p : r.proposals) on_m17 += p.machine() == "m17";
    EXPECT_EQ(r.unplaced, 0);
    return on_m17;
  };
  EXPECT_EQ(run(1), 4);
  EXPECT_LT(run(0), 4);
}

TEST(Scheduler, HybridSamplesWiderWhereItPacks) {
  // 200 machines, one of them half full of production work; each of 4
  // production jobs is a class of its own and the sample is one feasible
  // machine. Where hybrid packs (production is all the work), its classes
  // seek Options::hybrid_pack_sample feasible machines instead and find the
  // half-full one; with that sample at 1, only by luck. Where
  // non-production work is pending too, hybrid spreads and keeps the sample.
  auto run = [](int32_t pack_sample, bool batch, int64_t* evaluated) {
    cell::CellState s;
    AddMachines(s, 200);
    EXPECT_TRUE(s.Apply(Submit(JobBuilder("filler").Priority(200).Cpu(1000).Memory(1LL << 30).Build())).ok());
    EXPECT_TRUE(s.Apply(Schedule("alice/filler", 0, "m17")).ok());
    for (int j = 0; j < 4; ++j) {
      EXPECT_TRUE(
          s.Apply(Submit(JobBuilder("j" + std::to_string(j)).Priority(200).Cpu(200).Memory(200LL << 20).Build()))
              .ok());
    }
    if (batch) {
      EXPECT_TRUE(s.Apply(Submit(JobBuilder("batch").Tasks(20).Priority(100).Cpu(100).Memory(64LL << 20).Build())).ok());
    }
    Options o = Plain(PackingPolicy::kHybrid);
    o.enough_feasible = 1;
    o.hybrid_pack_sample = pack_sample;
    PassResult r = Scheduler(o).RunPass(s);
    int on_m17 = 0;
    for (const auto& p : r.proposals) on_m17 += p.machine() == "m17" && p.job() != "alice/batch";
    EXPECT_EQ(r.unplaced, 0);
    *evaluated = r.machines_evaluated;
    return on_m17;
  };
  int64_t wide = 0, narrow = 0, mixed_wide = 0, mixed_narrow = 0;
  EXPECT_EQ(run(0, false, &wide), 4);
  EXPECT_EQ(run(200, false, &wide), 4);  // as many as fit: all of them
  EXPECT_LT(run(1, false, &narrow), 4);
  EXPECT_GT(wide, 10 * narrow);
  // Mixed: the production jobs are spread, and the pack sample is not used.
  EXPECT_LT(run(0, true, &mixed_wide), 4);
  run(1, true, &mixed_narrow);
  EXPECT_EQ(mixed_wide, mixed_narrow);
}

TEST(Scheduler, ScoreCacheComputesFewerScores) {
  cell::CellState s;
  AddMachines(s, 100, 16'000, 16LL << 30);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("many").Tasks(300).Cpu(100).Memory(64LL << 20).Build())).ok());
  Options cached = Plain(), uncached = Plain();
  uncached.score_cache = false;
  PassResult a = Scheduler(cached).RunPass(s), b = Scheduler(uncached).RunPass(s);
  EXPECT_EQ(a.proposals.size(), 300u);
  EXPECT_EQ(b.proposals.size(), 300u);
  EXPECT_LT(a.scores_computed * 5, b.scores_computed);
}

TEST(Scheduler, CandidatesCarryOverBetweenPasses) {
  cell::CellState s;
  AddMachines(s, 100, 16'000, 16LL << 30);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("many").Tasks(100).Cpu(100).Memory(64LL << 20).Build())).ok());
  Options o = Plain();
  o.max_tasks_per_pass = 10;
  Scheduler sched(o);
  PassResult first = sched.RunPass(s);
  ASSERT_EQ(Commit(s, first), 10);
  PassResult second = sched.RunPass(s);
  ASSERT_EQ(Commit(s, second), 10);
  // The second pass resumed from the kept candidates instead of scanning.
  EXPECT_LT(second.machines_evaluated, first.machines_evaluated);
  for (int pass = 0; pass < 10; ++pass) Commit(s, sched.RunPass(s));
  EXPECT_EQ(s.FindJob("alice/many")->running, 100);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// Property: for every combination of the scale techniques and policies, over
// random workloads, committed placements never over-commit a machine (for
// production tasks: limits never exceed capacity), every proposal commits,
// and a fixed input gives the same proposals.
TEST(Scheduler, NeverOvercommitsAndIsDeterministic) {
  for (int combo = 0; combo < 8 * 3; ++combo) {
    Options o;
    o.equivalence_classes = combo & 1;
    o.score_cache = combo & 2;
    o.relaxed_randomization = combo & 4;
    o.policy = static_cast<PackingPolicy>(combo / 8);
    o.enough_feasible = 3;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      o.seed = seed;
      auto build = [&](cell::CellState& s) {
        Rng rng(seed);
        for (int i = 0; i < 10; ++i) {
          ASSERT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i))
                                           .Cpu(1000 + 1000 * rng.Uniform(4))
                                           .Memory((1LL + rng.Uniform(4)) << 30)
                                           .Attr("rack", "r" + std::to_string(i % 3))
                                           .Build()))
                          .ok());
        }
        for (int j = 0; j < 14; ++j) {
          JobBuilder b("j" + std::to_string(j), j % 3 == 0 ? "alice" : (j % 3 == 1 ? "bob" : "carol"));
          b.Tasks(1 + rng.Uniform(6))
              .Priority(static_cast<int32_t>(rng.Uniform(4) * 100))
              .Cpu(100 + 100 * rng.Uniform(15))
              .Memory((64LL + 64 * rng.Uniform(16)) << 20);
          if (rng.Uniform(4) == 0) b.DifferentMachines();
          if (rng.Uniform(5) == 0) b.MaxPerDomain("rack", 1);
          ASSERT_TRUE(s.Apply(Submit(b.Build())).ok());
        }
      };
      cell::CellState a, b;
      build(a);
      build(b);
      Scheduler sa(o), sb(o);
      for (int pass = 0; pass < 3; ++pass) {
        PassResult ra = sa.RunPass(a), rb = sb.RunPass(b);
        ASSERT_EQ(ra.proposals.size(), rb.proposals.size());
        for (size_t i = 0; i < ra.proposals.size(); ++i) {
          ASSERT_EQ(ra.proposals[i].SerializeAsString(), rb.proposals[i].SerializeAsString());
        }
        EXPECT_EQ(Commit(a, ra), static_cast<int>(ra.proposals.size())) << "combo " << combo << " seed " << seed;
        Commit(b, rb);
        for (const cell::Machine* m : a.machines()) {
          ASSERT_TRUE(m->allocated().FitsIn(m->capacity())) << m->name() << " over-committed, combo " << combo;
        }
        ASSERT_TRUE(a.CheckInvariants().ok());
        for (const auto& [id, j] : a.jobs()) {
          if (!j->spec.different_machines()) continue;
          std::set<std::string> used;
          for (const auto& t : j->tasks) {
            if (t.machine()) ASSERT_TRUE(used.insert(t.machine()->name()).second) << id << " shares a machine";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace herd::sched

namespace herd::sched {
namespace {

TEST(Scheduler, FailedClassesAreSkippedUntilCapacityIsFreed) {
  cell::CellState s;
  AddMachines(s, 20, 2000, 2LL << 30);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("fill").Tasks(20).Cpu(2000).Build())).ok());
  Scheduler sched(Plain());
  ASSERT_EQ(Commit(s, sched.RunPass(s)), 20);
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("waiting").Tasks(5).Cpu(1000).Build())).ok());
  PassResult first = sched.RunPass(s);
  EXPECT_EQ(first.unplaced, 5);
  EXPECT_EQ(first.classes_skipped, 0);
  // Nothing freed: the next pass does not look at the machines again.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("other").Cpu(100).Build())).ok());
  PassResult second = sched.RunPass(s);
  EXPECT_EQ(second.unplaced, 6);
  EXPECT_EQ(second.classes_skipped, 1);
  EXPECT_EQ(second.pending.size(), 2u);
  // A task finishes: capacity freed, the class is examined again and fits.
  ASSERT_TRUE(s.Apply(Exited(Ref("alice/fill", 0, 1), 0)).ok());
  PassResult third = sched.RunPass(s);
  EXPECT_EQ(third.classes_skipped, 0);
  EXPECT_EQ(Commit(s, third), 2);  // the freed 2000m takes "other" (100m) and one 1000m task
}


// Issue #15: a class that could not fit is skipped on later passes with the
// diagnosis the score cache kept; the pass used to move its diagnosis into
// the result before the cache copied it, so later passes said "0/3 machines
// fit" with no reasons.
TEST(Scheduler, WhyKeepsItsReasonsOnLaterPasses) {
  cell::CellState s;
  AddMachines(s, 3, 8000, 8LL << 30);  // racks r0 = {m0, m1}, r1 = {m2}; no gpu
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("gpu").Tasks(2).Extended("gpu", 1).Build())).ok());
  Scheduler sched(Plain());
  PassResult first = sched.RunPass(s);
  ASSERT_EQ(first.pending.size(), 1u);
  const std::string want = first.pending[0].why.ToString();
  ASSERT_FALSE(first.pending[0].why.reasons.empty()) << want;
  for (int pass = 2; pass <= 4; ++pass) {
    PassResult later = sched.RunPass(s);
    EXPECT_EQ(later.classes_skipped, 1) << "pass " << pass;
    ASSERT_EQ(later.pending.size(), 1u) << "pass " << pass;
    EXPECT_EQ(later.pending[0].indexes, (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(later.pending[0].why.ToString(), want) << "pass " << pass;
    EXPECT_EQ(later.pending[0].why.reasons, first.pending[0].why.reasons) << "pass " << pass;
  }
}

TEST(Scheduler, WhyKeepsItsReasonsOnLaterPassesForSpreadLimits) {
  cell::CellState s;
  AddMachines(s, 3, 8000, 8LL << 30);  // two racks
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("rk").Tasks(4).MaxPerDomain("rack", 1).Build())).ok());
  Scheduler sched(Plain());
  PassResult first = sched.RunPass(s);
  ASSERT_EQ(Commit(s, first), 2);
  ASSERT_EQ(first.pending.size(), 1u);
  const std::string want = "0/3 machines fit: 3 job's limit per failure domain reached";
  EXPECT_EQ(first.pending[0].why.ToString(), want);
  for (int pass = 2; pass <= 3; ++pass) {
    PassResult later = sched.RunPass(s);
    ASSERT_EQ(later.pending.size(), 1u) << "pass " << pass;
    EXPECT_EQ(later.pending[0].why.ToString(), want) << "pass " << pass;
  }
}

}  // namespace
}  // namespace herd::sched

namespace herd::sched {
namespace {

// Allocs (docs/allocs.md): a task in an alloc goes where its alloc is, in
// the same pass as the alloc if need be, while the alloc has room; the
// others stay pending with the alloc named in the reason.
TEST(Scheduler, TasksInAnAllocFollowItAndFitInIt) {
  cell::CellState s;
  AddMachines(s, 4);
  v1::JobSpec set = JobBuilder("slots").Priority(200).Tasks(2).Cpu(1000).Memory(1LL << 30).Build();
  set.mutable_task()->clear_command();
  set.set_alloc_set(true);
  v1::JobSpec web = JobBuilder("web").Priority(200).Tasks(2).Cpu(700).Memory(256LL << 20).Build();
  web.set_alloc("alice/slots");
  v1::JobSpec saver = JobBuilder("saver").Priority(200).Tasks(2).Cpu(300).Memory(64LL << 20).Build();
  saver.set_alloc("alice/slots");
  v1::JobSpec extra = JobBuilder("extra").Priority(100).Tasks(1).Cpu(100).Memory(1LL << 20).Build();
  extra.set_alloc("alice/slots");
  ASSERT_TRUE(s.Apply(Submit({set, web, saver, extra})).ok());
  Scheduler sched(Plain(PackingPolicy::kWorstFit));
  PassResult r = sched.RunPass(s);
  ASSERT_EQ(Commit(s, r), 6);  // 2 allocs, web and saver in both; extra has no room
  ASSERT_TRUE(s.CheckInvariants().ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(MachineOf(s, "alice/web", i), MachineOf(s, "alice/slots", i));
    EXPECT_EQ(MachineOf(s, "alice/saver", i), MachineOf(s, "alice/slots", i));
  }
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_EQ(r.pending[0].job, "alice/extra");
  EXPECT_EQ(r.pending[0].why.ToString(), "0/1 machines fit: 1 insufficient cpu in alloc alice/slots/0");
  // The alloc machines hold only the allocs' limits.
  const cell::Machine* m = s.FindTask("alice/slots", 0)->machine();
  EXPECT_EQ(m->allocated().cpu_millis, 1000);
  // The saver leaves: extra now fits in alloc 0.
  ASSERT_TRUE(s.Apply(Exited(Ref("alice/saver", 0, 1), 0)).ok());
  r = sched.RunPass(s);
  ASSERT_EQ(Commit(s, r), 1);
  EXPECT_EQ(MachineOf(s, "alice/extra", 0), MachineOf(s, "alice/slots", 0));
}

}  // namespace
}  // namespace herd::sched
