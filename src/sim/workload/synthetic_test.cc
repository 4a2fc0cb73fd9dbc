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

TEST(Synthetic, WorkloadFillsTheCellDeterministically) {
  CellOptions co;
  co.machines = 200;
  auto ms = MakeMachines(Shapes(), co);
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

}  // namespace
}  // namespace herd::sim
