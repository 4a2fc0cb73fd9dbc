#include "sched/framework/reserve.h"

#include <gtest/gtest.h>

#include "base/rng.h"
#include "sched/framework/pass_context.h"
#include "sched/scheduler.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

TEST(Reservations, FitCountCountsDevicesAndShares) {
  ResourceVector cap;
  cap.cpu_millis = 16'000;
  cap.memory_bytes = 64LL << 30;
  cap.SetExtended("gpu_milli", 2000);
  const Devices dev = Devices::ForCapacity(cap);
  ResourceVector need;
  need.cpu_millis = 1000;
  need.memory_bytes = 1LL << 30;
  need.SetExtended("gpu_milli", 300);
  EXPECT_EQ(Reservations::FitCount(need, cap, dev), 6);  // 3 shares per GPU, 2 GPUs
  need.SetExtended("gpu_milli", 1000);
  EXPECT_EQ(Reservations::FitCount(need, cap, dev), 2);
  need.SetExtended("gpu_milli", 2000);
  EXPECT_EQ(Reservations::FitCount(need, cap, dev), 1);
  need.cpu_millis = 20'000;
  EXPECT_EQ(Reservations::FitCount(need, cap, dev), 0);
}

// A small GPU machine is the only home of a low-priority task pinned to its
// GPU model; a high-priority task that may run anywhere comes first in the
// queue, and best fit prefers the small machine (it is left fullest), which
// leaves the pinned task without room. With the reserve score the first
// task goes to a bigger machine and both run.
void PinnedCell(cell::CellState& s, bool others) {
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("p100").Cpu(16'000).Memory(64LL << 30).Extended("gpu_milli", 2000)
                                   .Attr("gpu_model", "P100").Build()))
                  .ok());
  for (int i = 0; others && i < 2; ++i) {
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("t4-" + std::to_string(i)).Cpu(32'000).Memory(64LL << 30)
                                     .Extended("gpu_milli", 2000).Attr("gpu_model", "T4").Build()))
                    .ok());
  }
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("any", "alice").Priority(200).Cpu(10'000).Memory(1LL << 30)
                                 .Extended("gpu_milli", 500).Build()))
                  .ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("pinned", "bob").Priority(100).Cpu(12'000).Memory(1LL << 30)
                                 .Extended("gpu_milli", 500).Constraint("gpu_model", v1::Constraint::EQ, {"P100"})
                                 .Build()))
                  .ok());
}

PassResult RunWith(const cell::CellState& s, PackingPolicy policy, double reserve) {
  Options o;
  o.policy = policy;
  o.weights.Set("reserve", reserve);
  return Scheduler(o).RunPass(s);
}

TEST(Reservations, KeepsTheOnlyHomeOfPinnedWork) {
  cell::CellState s;
  PinnedCell(s, true);
  EXPECT_EQ(RunWith(s, PackingPolicy::kBestFit, 0).unplaced, 1);  // without it: the pinned task stays pending
  for (PackingPolicy p : {PackingPolicy::kBestFit, PackingPolicy::kHybrid, PackingPolicy::kPack}) {
    PassResult r = RunWith(s, p, 4);
    EXPECT_EQ(r.unplaced, 0) << PackingPolicyName(p);
    for (const auto& prop : r.proposals) {
      if (prop.job() == "alice/any") EXPECT_NE(prop.machine(), "p100") << PackingPolicyName(p);
    }
  }
  // The default policy has it on by default; k8s does not.
  EXPECT_EQ(Scheduler(Options{}).RunPass(s).unplaced, 0);
  Options k8s;
  k8s.policy = PackingPolicy::kK8s;
  EXPECT_EQ(MustBuildProfile(k8s).Weight("reserve"), 0);
  EXPECT_EQ(MustBuildProfile(Options{}).Weight("reserve"), 4);
}

// A reservation is a preference: the higher-priority task with nowhere else
// to go still gets the machine, the pinned one waits.
TEST(Reservations, NeverKeepsATaskPendingForAnother) {
  cell::CellState s;
  PinnedCell(s, false);
  PassResult r = RunWith(s, PackingPolicy::kBestFit, 4);
  ASSERT_EQ(r.proposals.size(), 1u);
  EXPECT_EQ(r.proposals[0].job(), "alice/any");
  EXPECT_EQ(r.unplaced, 1);
}

// The plan packs a scarce shape best fit onto its homes: the machine left
// fullest first, as many as fit there, then the next. Checked against that
// rule written out naively (every home rescanned for every step) on a cell
// whose homes are filled unevenly, one or two tasks fitting on most.
TEST(Reservations, PlansBestFitFullestFirst) {
  cell::CellState s;
  Rng rng(7);
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i)).Cpu(8000).Memory(16LL << 30)
                                     .Attr("zone", i % 3 == 0 ? "a" : "b").Build()))
                    .ok());
    const std::string f = "fill" + std::to_string(i);
    ASSERT_TRUE(s.Apply(Submit(JobBuilder(f).Priority(100).Cpu(500 * static_cast<int64_t>(rng.Uniform(14)) + 100)
                                   .Memory((1LL + static_cast<int64_t>(rng.Uniform(14))) << 30).Build()))
                    .ok());
    ASSERT_TRUE(s.Apply(Schedule("alice/" + f, 0, "m" + std::to_string(i))).ok());
  }
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("pinned").Tasks(45).Priority(100).Cpu(1500).Memory(2LL << 30)
                                 .Constraint("zone", v1::Constraint::EQ, {"a"}).Build()))
                  .ok());
  Options o;
  PassContext ctx(s, o, 0);
  Reservations r;
  r.Build(s, ctx.views());
  ASSERT_EQ(r.shapes().size(), 1u);
  const ResourceVector need = r.shapes()[0].need();

  std::vector<ResourceVector> free;
  std::vector<int32_t> homes;
  for (const MachineView& v : ctx.views()) {
    free.push_back(v.free_nonprod);
    if (v.machine->attributes().at("zone") == "a") homes.push_back(v.index);
  }
  std::vector<int64_t> want(ctx.views().size(), 0);
  int64_t left = 45, planned = 0;
  while (left > 0) {
    int32_t best = -1;
    int64_t best_fit = 0;
    double best_left = 1e9;
    for (int32_t m : homes) {
      const int64_t fit = Reservations::FitCount(need, free[m], Devices{});
      const ResourceVector& cap = ctx.views()[m].machine->capacity();
      const double l = static_cast<double>(free[m].cpu_millis - need.cpu_millis) / cap.cpu_millis +
                       static_cast<double>(free[m].memory_bytes - need.memory_bytes) / cap.memory_bytes;
      if (fit > 0 && l < best_left) best = m, best_fit = fit, best_left = l;
    }
    if (best < 0) break;
    const int64_t n = std::min(left, best_fit);
    for (int64_t i = 0; i < n; ++i) free[best] -= need;
    want[best] += n;
    left -= n;
    planned += n;
  }
  ASSERT_GT(planned, 20);  // most of them fit: the plan is not trivial
  int64_t got_total = 0;
  for (const MachineView& v : ctx.views()) {
    int64_t got = 0;
    for (const auto& [shape, n] : r.PlannedOn(v.index)) got += n;
    EXPECT_EQ(got, want[v.index]) << v.machine->name();
    got_total += got;
  }
  EXPECT_EQ(got_total, planned);
}

}  // namespace
}  // namespace herd::sched
