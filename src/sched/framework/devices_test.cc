#include "sched/framework/devices.h"

#include <gtest/gtest.h>

#include "sched/equiv/classes.h"
#include "sched/framework/pass_context.h"
#include "sched/plugins/filter/filters.h"
#include "sched/scheduler.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

ResourceVector Gpu(int64_t milli) {
  ResourceVector r;
  r.SetExtended("gpu_milli", milli);
  return r;
}

TEST(Devices, OnlyMilliResourcesAreDevices) {
  EXPECT_TRUE(IsDeviceResource("gpu_milli"));
  EXPECT_FALSE(IsDeviceResource("gpu"));
  EXPECT_FALSE(IsDeviceResource("_milli"));
  ResourceVector cap;
  cap.SetExtended("gpu_milli", 4000);
  cap.SetExtended("fpga", 2);
  Devices d = Devices::ForCapacity(cap);
  ASSERT_EQ(d.sets.size(), 1u);
  EXPECT_EQ(d.sets[0].free.size(), 4u);
  EXPECT_EQ(d.Capacity(), 4000);
}

TEST(Devices, AShareFitsOnOneDeviceOnly) {
  DeviceSet s{"gpu_milli", {300, 300}};
  EXPECT_FALSE(s.Fits(500));  // 600 free in all, but no device has 500
  EXPECT_TRUE(s.Fits(300));
  EXPECT_FALSE(s.Take(500));
  EXPECT_EQ(s.TotalFree(), 600);
}

TEST(Devices, WholeDevicesMustBeEmptyAndSharesGoBestFit) {
  DeviceSet s{"gpu_milli", {1000, 800, 1000, 500}};
  EXPECT_TRUE(s.Fits(2000));
  EXPECT_FALSE(s.Fits(3000));  // 3,300 free, two empty devices
  ASSERT_TRUE(s.Take(400));    // best fit: the device with 500 left
  EXPECT_EQ(s.free, (std::vector<int32_t>{1000, 800, 1000, 100}));
  ASSERT_TRUE(s.Take(1500));   // rounds up to two whole devices
  EXPECT_EQ(s.free, (std::vector<int32_t>{0, 800, 0, 100}));
}

TEST(Devices, CanonicalPlacementAndOvercommit) {
  Devices d = Devices::ForCapacity(Gpu(2000));
  d.PlaceAll({Gpu(300), Gpu(1000), Gpu(600)});
  EXPECT_EQ(d.sets[0].free, (std::vector<int32_t>{0, 100}));
  Devices over = Devices::ForCapacity(Gpu(1000));
  over.PlaceAll({Gpu(600), Gpu(600)});  // no packing holds both: nothing is free
  EXPECT_EQ(over.TotalFree(), 0);
}

TEST(Devices, TheSchedulerNeverSplitsAShareOrPutsTwoOnOneFullDevice) {
  // Two machines of two GPUs, each GPU 70% taken: 60% free per machine in
  // all, but no GPU can hold half of one. Pooled counting would place both.
  cell::CellState state;
  ASSERT_TRUE(state.Apply(Register(MachineBuilder("g1").Cpu(8000).Memory(8LL << 30).Extended("gpu_milli", 2000).Build())).ok());
  ASSERT_TRUE(state.Apply(Register(MachineBuilder("g2").Cpu(8000).Memory(8LL << 30).Extended("gpu_milli", 2000).Build())).ok());
  ASSERT_TRUE(state.Apply(Submit(JobBuilder("busy").Tasks(4).Cpu(100).Memory(1 << 20).Extended("gpu_milli", 700).Build())).ok());
  Options o;
  Scheduler sch(o);
  PassResult r = sch.RunPass(state, 0);
  ASSERT_EQ(r.proposals.size(), 4u);
  v1::Mutation m;
  for (const auto& p : r.proposals) {
    *m.mutable_task_scheduled() = p;
    ASSERT_TRUE(state.Apply(m).ok());
  }
  ASSERT_TRUE(state.Apply(Submit(JobBuilder("half").Cpu(100).Memory(1 << 20).Extended("gpu_milli", 500).Build())).ok());
  r = sch.RunPass(state, 0);
  EXPECT_TRUE(r.proposals.empty());
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_NE(r.pending[0].why.ToString().find("gpu_milli"), std::string::npos) << r.pending[0].why.ToString();
  // A third of a GPU fits on each machine's leftovers.
  ASSERT_TRUE(state.Apply(Submit(JobBuilder("third").Tasks(2).Cpu(100).Memory(1 << 20).Extended("gpu_milli", 300).Build())).ok());
  r = sch.RunPass(state, 0);
  EXPECT_EQ(r.proposals.size(), 2u);
}

}  // namespace
}  // namespace herd::sched
