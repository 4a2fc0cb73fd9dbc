#include "sched/framework/reserve.h"

#include <gtest/gtest.h>

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
  o.weights.reserve = reserve;
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
  EXPECT_EQ(ReserveWeight(k8s), 0);
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

}  // namespace
}  // namespace herd::sched
