#include "sched/plugins/score/scores.h"

#include <gtest/gtest.h>

#include "sched/equiv/classes.h"
#include "sched/framework/pass_context.h"
#include "sched/preempt/preempt.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

class ScoresTest : public ::testing::Test {
 protected:
  void Apply(v1::Mutation m) { ASSERT_TRUE(state_.Apply(m).ok()) << m.DebugString(); }
  void Place(const std::string& name, int32_t prio, int64_t cpu, int64_t mem, const std::string& machine) {
    Apply(Submit(JobBuilder(name).Priority(prio).Cpu(cpu).Memory(mem).Build()));
    Apply(Schedule("alice/" + name, 0, machine));
  }
  TaskClass Class(const v1::JobSpec& spec) {
    if (state_.FindJob(spec.user() + "/" + spec.name()) == nullptr) Apply(Submit(spec));
    ctx_ = std::make_unique<PassContext>(state_, options_, 0);
    return MakeClass(*ctx_, state_.FindTask(spec.user() + "/" + spec.name(), 0), true);
  }
  const MachineView& View(const std::string& name) { return ctx_->views()[state_.FindMachine(name)->order()]; }
  double S(const ScorePlugin& p, const TaskClass& c, const std::string& m) { return p.Score(*ctx_, c, View(m), nullptr); }

  cell::CellState state_;
  Options options_;
  std::unique_ptr<PassContext> ctx_;
};

TEST_F(ScoresTest, PackingPolicies) {
  Apply(Register(MachineBuilder("empty").Cpu(4000).Memory(4LL << 30).Build()));
  Apply(Register(MachineBuilder("half").Cpu(4000).Memory(4LL << 30).Build()));
  Place("filler", 100, 2000, 2LL << 30, "half");
  TaskClass c = Class(JobBuilder("x").Cpu(1000).Memory(1LL << 30).Build());
  PackingScore best(PackingPolicy::kBestFit), worst(PackingPolicy::kWorstFit);
  EXPECT_DOUBLE_EQ(S(best, c, "empty"), 25.0);
  EXPECT_DOUBLE_EQ(S(best, c, "half"), 75.0);
  EXPECT_GT(S(worst, c, "empty"), S(worst, c, "half"));
  EXPECT_LE(S(worst, c, "half"), 100.0);
  EXPECT_GE(S(worst, c, "half"), 0.0);
}

TEST_F(ScoresTest, HybridAvoidsStrandingWhereBestFitDoesNot) {
  // "lopsided" has little memory left: a CPU-light, memory-heavy task there
  // leaves its CPU stranded. "balanced" is emptier but keeps its shape.
  Apply(Register(MachineBuilder("lopsided").Cpu(4000).Memory(4LL << 30).Build()));
  Apply(Register(MachineBuilder("balanced").Cpu(4000).Memory(4LL << 30).Build()));
  Place("memhog", 100, 200, 3LL << 30, "lopsided");
  Place("even", 100, 1200, 1LL << 30, "balanced");
  TaskClass c = Class(JobBuilder("x").Cpu(100).Memory(900LL << 20).Build());
  PackingScore best(PackingPolicy::kBestFit), hybrid(PackingPolicy::kHybrid);
  EXPECT_GT(S(best, c, "lopsided"), S(best, c, "balanced"));
  EXPECT_LT(S(hybrid, c, "lopsided"), S(hybrid, c, "balanced"));
  EXPECT_NEAR(PackingScore::Stranded(0.5, 0.5, 1.0), 0.0, 1e-9);
  EXPECT_NEAR(PackingScore::Stranded(0.9, 0.1, 1.0), 0.8, 1e-9);
  EXPECT_NEAR(PackingScore::Stranded(0.1, 0.9, 1.0), 0.8, 1e-9);
}

TEST_F(ScoresTest, PackIsBestFitThatAvoidsStranding) {
  // Where nothing strands, pack is best fit: the fuller machine wins.
  Apply(Register(MachineBuilder("empty").Cpu(4000).Memory(4LL << 30).Build()));
  Apply(Register(MachineBuilder("half").Cpu(4000).Memory(4LL << 30).Build()));
  Place("filler", 100, 2000, 2LL << 30, "half");
  // The same scenario as above: best fit strands "lopsided"'s CPU, pack does not.
  Apply(Register(MachineBuilder("lopsided").Cpu(4000).Memory(4LL << 30).Build()));
  Apply(Register(MachineBuilder("balanced").Cpu(4000).Memory(4LL << 30).Build()));
  Place("memhog", 100, 200, 3LL << 30, "lopsided");
  Place("even", 100, 1200, 1LL << 30, "balanced");
  TaskClass c = Class(JobBuilder("x").Cpu(100).Memory(900LL << 20).Build());
  PackingScore best(PackingPolicy::kBestFit), pack(PackingPolicy::kPack), hybrid(PackingPolicy::kHybrid);
  EXPECT_GT(S(pack, c, "half"), S(pack, c, "empty"));
  EXPECT_LT(S(hybrid, c, "half"), S(hybrid, c, "empty"));  // E-PVM's cost spreads non-production work
  // and, in this cell of non-production work, production too (it packs
  // production only where production is the work: next test).
  TaskClass prod = Class(JobBuilder("p").Priority(200).Cpu(100).Memory(900LL << 20).Build());
  EXPECT_FALSE(ctx_->HybridPacks(prod));
  EXPECT_LT(S(hybrid, prod, "half"), S(hybrid, prod, "empty"));
  EXPECT_GT(S(best, c, "lopsided"), S(best, c, "balanced"));
  EXPECT_LT(S(pack, c, "lopsided"), S(pack, c, "balanced"));
  EXPECT_GE(S(pack, c, "empty"), 0.0);
  EXPECT_LE(S(pack, c, "half"), 100.0);
}

TEST_F(ScoresTest, HybridPacksProductionOnlyWhereItIsTheWork) {
  Apply(Register(MachineBuilder("empty").Cpu(4000).Memory(4LL << 30).Build()));
  Apply(Register(MachineBuilder("half").Cpu(4000).Memory(4LL << 30).Build()));
  Place("filler", 200, 2000, 2LL << 30, "half");
  PackingScore hybrid(PackingPolicy::kHybrid);
  // Production only (2,000 running + 100 pending millicores): packed, like best fit.
  TaskClass prod = Class(JobBuilder("p").Priority(200).Cpu(100).Memory(512LL << 20).Build());
  EXPECT_DOUBLE_EQ(ctx_->nonprod_cpu_share(), 0.0);
  EXPECT_TRUE(ctx_->HybridPacks(prod));
  EXPECT_GT(S(hybrid, prod, "half"), S(hybrid, prod, "empty"));
  // Non-production work pending: 10 x 50 of 2,600 millicores (19%), over
  // the default 10%: production is spread by E-PVM like the rest.
  Apply(Submit(JobBuilder("batch").Tasks(10).Priority(100).Cpu(50).Memory(64LL << 20).Build()));
  prod = Class(JobBuilder("p").Priority(200).Cpu(100).Memory(512LL << 20).Build());
  EXPECT_NEAR(ctx_->nonprod_cpu_share(), 500.0 / 2600.0, 1e-9);
  EXPECT_FALSE(ctx_->HybridPacks(prod));
  EXPECT_LT(S(hybrid, prod, "half"), S(hybrid, prod, "empty"));
  // The threshold is an option: above the share, production packs again;
  // 0 never packs it, even alone. Non-production work is never packed.
  options_.hybrid_pack_below = 0.25;
  prod = Class(JobBuilder("p").Priority(200).Cpu(100).Memory(512LL << 20).Build());
  EXPECT_TRUE(ctx_->HybridPacks(prod));
  EXPECT_GT(S(hybrid, prod, "half"), S(hybrid, prod, "empty"));
  TaskClass batch = Class(JobBuilder("batch").Tasks(10).Priority(100).Cpu(50).Memory(64LL << 20).Build());
  EXPECT_FALSE(ctx_->HybridPacks(batch));
  options_.hybrid_pack_below = 0;
  Apply(Kill("alice/batch"));
  prod = Class(JobBuilder("p").Priority(200).Cpu(100).Memory(512LL << 20).Build());
  EXPECT_DOUBLE_EQ(ctx_->nonprod_cpu_share(), 0.0);
  EXPECT_FALSE(ctx_->HybridPacks(prod));
  EXPECT_LT(S(hybrid, prod, "half"), S(hybrid, prod, "empty"));
}

TEST_F(ScoresTest, PackFillsGpuFragmentsRatherThanMakingThem) {
  // Most pending tasks take one whole GPU. A half-GPU task on "small" (one
  // free GPU) would leave half a GPU no such task can use; on "big" it fills
  // the half GPU already broken. Best fit over GPUs alone prefers "small"
  // (fuller afterwards), FGD prefers "big".
  Apply(Register(MachineBuilder("big").Cpu(64000).Memory(256LL << 30).Extended("gpu_milli", 8000).Build()));
  Apply(Register(MachineBuilder("small").Cpu(8000).Memory(32LL << 30).Extended("gpu_milli", 1000).Build()));
  Apply(Submit(JobBuilder("half").Cpu(800).Memory(3LL << 30).Extended("gpu_milli", 500).Build()));
  Apply(Schedule("alice/half", 0, "big"));
  Apply(Submit(JobBuilder("whole").Tasks(10).Cpu(800).Memory(3LL << 30).Extended("gpu_milli", 1000).Build()));
  TaskClass c = Class(JobBuilder("x").Cpu(800).Memory(3LL << 30).Extended("gpu_milli", 500).Build());
  ASSERT_EQ(ctx_->extended_shapes().size(), 2u);
  EXPECT_GT(ctx_->extended_shapes()[0].share, 0.8);  // the whole-GPU tasks (10 of 12, running ones counted)
  ResourceVector free_big = View("big").FreeFor(c), free_small = View("small").FreeFor(c);
  EXPECT_GT(PackingScore::Fragmentation(*ctx_, View("big"), free_big, View("big").devices), 0.0);  // the broken half GPU
  EXPECT_EQ(PackingScore::Fragmentation(*ctx_, View("small"), free_small, View("small").devices), 0.0);
  PackingScore pack(PackingPolicy::kPack), hybrid(PackingPolicy::kHybrid);
  EXPECT_GT(S(pack, c, "big"), S(pack, c, "small"));
  // The default policy on a cell with GPUs follows FGD too.
  EXPECT_GT(S(hybrid, c, "big"), S(hybrid, c, "small"));
}

TEST_F(ScoresTest, K8sPrefersLeastAllocatedAndBalanced) {
  Apply(Register(MachineBuilder("empty").Cpu(4000).Memory(4LL << 30).Build()));
  Apply(Register(MachineBuilder("half").Cpu(4000).Memory(4LL << 30).Build()));
  Apply(Register(MachineBuilder("lopsided").Cpu(4000).Memory(4LL << 30).Build()));
  Place("filler", 100, 2000, 2LL << 30, "half");
  Place("cpuhog", 100, 2000, 256LL << 20, "lopsided");
  TaskClass c = Class(JobBuilder("x").Cpu(500).Memory(512LL << 20).Build());
  PackingScore k8s(PackingPolicy::kK8s);
  EXPECT_GT(S(k8s, c, "empty"), S(k8s, c, "half"));
  // About as much left free on both, but a CPU-heavy task leaves the CPU
  // hog unbalanced.
  Apply(Register(MachineBuilder("memhog").Cpu(4000).Memory(4LL << 30).Build()));
  Place("memload", 100, 256, 2LL << 30, "memhog");
  TaskClass heavy = Class(JobBuilder("y").Cpu(2000).Memory(128LL << 20).Build());
  EXPECT_GT(S(k8s, heavy, "memhog"), S(k8s, heavy, "lopsided"));
  EXPECT_LE(S(k8s, c, "empty"), 100.0);
}

TEST_F(ScoresTest, PackKeepsGpuMachinesForGpuTasks) {
  // A CPU-only task would leave the GPU machine (half its GPUs in use, so
  // fuller: best fit's choice) without the CPU its pending GPU tasks need,
  // stranding two GPUs: pack sends it to the CPU machine.
  Apply(Register(MachineBuilder("gpu").Cpu(8000).Memory(32LL << 30).Extended("gpu_milli", 4000).Build()));
  Apply(Register(MachineBuilder("cpu").Cpu(8000).Memory(32LL << 30).Build()));
  Apply(Submit(JobBuilder("busy").Cpu(1000).Memory(4LL << 30).Extended("gpu_milli", 2000).Build()));
  Apply(Schedule("alice/busy", 0, "gpu"));
  Apply(Submit(JobBuilder("train").Tasks(4).Cpu(4000).Memory(4LL << 30).Extended("gpu_milli", 1000).Build()));
  TaskClass c = Class(JobBuilder("x").Cpu(6000).Memory(4LL << 30).Build());
  PackingScore best(PackingPolicy::kBestFit), pack(PackingPolicy::kPack), hybrid(PackingPolicy::kHybrid);
  EXPECT_GT(S(best, c, "gpu"), S(best, c, "cpu"));
  EXPECT_GT(S(pack, c, "cpu"), S(pack, c, "gpu"));
  EXPECT_GT(S(hybrid, c, "cpu"), S(hybrid, c, "gpu"));  // the default on a cell with GPUs
}

TEST_F(ScoresTest, SpreadPrefersDomainsWithFewerOfTheJob) {
  Apply(Register(MachineBuilder("a1").Attr("rack", "ra").Build()));
  Apply(Register(MachineBuilder("a2").Attr("rack", "ra").Build()));
  Apply(Register(MachineBuilder("b1").Attr("rack", "rb").Build()));
  Apply(Submit(JobBuilder("svc").Tasks(3).Build()));
  Apply(Schedule("alice/svc", 0, "a1"));
  TaskClass c = Class(state_.FindJob("alice/svc")->spec);
  ctx_->Placements(c.job);
  SpreadScore s;
  EXPECT_GT(S(s, c, "b1"), S(s, c, "a2"));  // other rack
  EXPECT_GT(S(s, c, "a2"), S(s, c, "a1"));  // other machine
  EXPECT_TRUE(s.DependsOnJobPlacements());
}

TEST_F(ScoresTest, PreemptCostPrefersFewerAndLowerVictims) {
  Apply(Register(MachineBuilder("m").Build()));
  TaskClass c = Class(JobBuilder("x").Priority(300).Build());
  PreemptCostScore s;
  Preemption none, low, high, many;
  cell::Task t0;
  low.max_priority = 10;
  low.victims = {&t0};
  high.max_priority = 200;
  high.victims = {&t0};
  many.max_priority = 10;
  many.victims = {&t0, &t0, &t0, &t0, &t0, &t0, &t0, &t0};
  const MachineView& m = View("m");
  EXPECT_EQ(s.Score(*ctx_, c, m, nullptr), 100.0);
  EXPECT_EQ(s.Score(*ctx_, c, m, &none), 100.0);
  EXPECT_GT(s.Score(*ctx_, c, m, &low), s.Score(*ctx_, c, m, &high));
  EXPECT_GT(s.Score(*ctx_, c, m, &low), s.Score(*ctx_, c, m, &many));
}

TEST_F(ScoresTest, LocalityMixAndSoftConstraints) {
  Apply(Register(MachineBuilder("cached").Package("abc").Attr("ssd", "yes").Build()));
  Apply(Register(MachineBuilder("cold").Build()));
  Place("batch", 100, 1000, 1 << 20, "cold");
  Place("svc", 200, 1000, 1 << 20, "cached");
  TaskClass c = Class(JobBuilder("x").Priority(200).Package("server", "abc")
                          .Constraint("ssd", v1::Constraint::EXISTS, {}, /*soft=*/true, 5)
                          .Build());
  LocalityScore loc;
  PriorityMixScore mix;
  SoftConstraintScore soft;
  EXPECT_EQ(S(loc, c, "cached"), 100.0);
  EXPECT_EQ(S(loc, c, "cold"), 0.0);
  EXPECT_GT(S(mix, c, "cold"), S(mix, c, "cached"));  // prod likes batch neighbours
  EXPECT_EQ(S(soft, c, "cached"), 100.0);
  EXPECT_EQ(S(soft, c, "cold"), 0.0);
  TaskClass plain = Class(JobBuilder("y").Build());
  EXPECT_EQ(S(loc, plain, "cold"), 100.0);  // neutral without packages
  EXPECT_EQ(S(soft, plain, "cold"), 100.0);
  // An empty machine is no better than one holding only the same kind: the
  // score must not spread a single-kind workload over empty machines.
  Apply(Register(MachineBuilder("empty").Build()));
  TaskClass prod = Class(JobBuilder("z").Priority(200).Build());
  EXPECT_EQ(S(mix, prod, "empty"), S(mix, prod, "cached"));
  EXPECT_GT(S(mix, prod, "cold"), S(mix, prod, "empty"));
}

}  // namespace
}  // namespace herd::sched
