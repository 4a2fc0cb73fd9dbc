#include "sim/workload/synthetic.h"

#include <gtest/gtest.h>

#include <set>

#include "base/priority.h"

namespace herd::sim {
namespace {

std::vector<TraceMachine> Shapes() {
  return {{1, "a", 0.5, 0.5}, {2, "a", 0.5, 0.25}, {3, "b", 1.0, 1.0}, {4, "a", 0.5, 0.75}};
}

TEST(Synthetic, MachinesHaveTraceShapesAndDomains) {
  CellOptions o;
  o.machines = 100;
  auto ms = MakeMachines(Shapes(), o);
  ASSERT_EQ(ms.size(), 100u);
  EXPECT_EQ(ms[0].attributes().at("rack"), "r0");
  EXPECT_EQ(ms[99].attributes().at("rack"), "r2");
  EXPECT_EQ(ms[99].attributes().at("power"), "pd0");
  for (const auto& m : ms) {
    int64_t c = m.capacity().cpu_millis();
    EXPECT_TRUE(c == 24'000 || c == 48'000) << c;
  }
}

std::vector<v1::Machine> Cell(int machines) {
  CellOptions co;
  co.machines = machines;
  return MakeMachines(Shapes(), co);
}

TEST(Synthetic, WorkloadFillsTheCellDeterministically) {
  auto ms = Cell(200);
  WorkloadOptions wo;
  wo.tasks = 20'000;
  wo.fill = 0.9;
  Workload a = MakeWorkload(ms, wo), b = MakeWorkload(ms, wo);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) ASSERT_EQ(a.jobs[i].SerializeAsString(), b.jobs[i].SerializeAsString());
  EXPECT_EQ(a.tasks, 20'000);
  double cap_cpu = 0, cap_mem = 0;
  for (const auto& m : ms) {
    cap_cpu += m.capacity().cpu_millis();
    cap_mem += m.capacity().memory_bytes();
  }
  double fill = std::max(a.cpu_millis / cap_cpu, a.memory_bytes / cap_mem);
  EXPECT_NEAR(fill, 0.9, 0.02);
  // Heavy tail: many single-task jobs, a few big ones; every band present;
  // about a tenth constrained; a fifth of non-prod tasks under 0.1 core.
  int single = 0, constrained = 0;
  int64_t nonprod = 0, tiny = 0;
  std::set<Band> bands;
  for (const auto& j : a.jobs) {
    single += j.task_count() == 1;
    constrained += j.constraints_size() > 0;
    bands.insert(BandOf(j.priority()));
    if (!IsProd(j.priority())) {
      nonprod += j.task_count();
      if (j.task().resources().cpu_millis() < 100) tiny += j.task_count();
    }
  }
  EXPECT_GT(single, static_cast<int>(a.jobs.size() * 0.5));
  EXPECT_EQ(bands.size(), 5u);
  EXPECT_NEAR(static_cast<double>(constrained) / a.jobs.size(), 0.10, 0.04);
  EXPECT_NEAR(a.tiny_nonprod_share, 0.20, 0.07);
  EXPECT_NEAR(static_cast<double>(tiny) / nonprod, a.tiny_nonprod_share, 1e-9);
  EXPECT_NEAR(a.prod_cpu_share, 0.70, 0.03);
  EXPECT_NEAR(a.prod_memory_share, 0.55, 0.03);
  WorkloadOptions other = wo;
  other.seed = 2;
  EXPECT_NE(MakeWorkload(ms, other).jobs.size(), a.jobs.size());
}

TEST(Synthetic, The2011ShapesAreBiggerTasksAndFewTinyOnes) {
  // The same cell and fill, ten tasks per machine: tasks as big as the
  // 2011 trace's (median CPU ~3% of the largest machine, docs/sim/calibration.md),
  // 1% of non-prod under 0.1 core, CPU:memory about the trace's.
  WorkloadOptions wo;
  wo.tasks = 5'000;
  wo.shapes = 2011;
  wo.tiny_nonprod_tasks = 0.01;
  Workload a = MakeWorkload(Cell(500), wo);
  std::vector<double> cpu, ratio;  // CPU as a share of the largest machine; CPU:memory in those units
  for (const auto& j : a.jobs) {
    const auto& r = j.task().resources();
    const double c = r.cpu_millis() / 48'000.0, m = static_cast<double>(r.memory_bytes()) / (192.0 * (1LL << 30));
    for (int i = 0; i < j.task_count(); ++i) {
      cpu.push_back(c);
      ratio.push_back(c / m);
    }
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(ratio.begin(), ratio.end());
  EXPECT_GT(cpu[cpu.size() / 2], 0.015);
  EXPECT_LT(cpu[cpu.size() / 2], 0.08);
  EXPECT_GT(ratio[ratio.size() / 2], 1.0);  // the trace's: 2.0
  EXPECT_LT(ratio[ratio.size() / 2], 4.0);
  EXPECT_LT(a.tiny_nonprod_share, 0.03);
  EXPECT_NEAR(a.prod_cpu_share, 0.70, 0.05);
}

}  // namespace
}  // namespace herd::sim
