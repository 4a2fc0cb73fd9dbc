#include "sim/experiments/compaction.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::sim {
namespace {

using namespace herd::testing;  // NOLINT

// Ten identical machines of 4 cores / 4 GiB, and 24 tasks of 1 core / 1 GiB:
// they fill exactly six machines, whatever the order of removal.
SimWorkload Toy() {
  SimWorkload w;
  w.name = "toy";
  for (int i = 0; i < 10; ++i) w.machines.push_back(MachineBuilder("m" + std::to_string(i)).Cpu(4000).Memory(4LL << 30).Build());
  w.jobs.push_back(JobBuilder("a").Tasks(16).Cpu(1000).Memory(1LL << 30).Build());
  w.jobs.push_back(JobBuilder("b", "bob").Tasks(8).Priority(200).Cpu(1000).Memory(1LL << 30).Build());
  return w;
}

TEST(Compaction, FindsTheKnownAnswer) {
  CompactionOptions o;
  o.seeds = 5;
  o.picky = 0;
  o.scheduler.policy = sched::PackingPolicy::kBestFit;
  auto r = Compact(Toy(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->original, 10);
  EXPECT_EQ(r->needed, (std::vector<int>{6, 6, 6, 6, 6}));
  EXPECT_EQ(r->P90(), 6);
  EXPECT_TRUE(r->fits_original);
  EXPECT_DOUBLE_EQ(r->Percent(6), 60.0);
}

TEST(Compaction, HeterogeneousCellsDependOnTheOrderAndAreDeterministic) {
  SimWorkload w = Toy();
  for (int i = 0; i < 5; ++i) w.machines[static_cast<size_t>(i)].mutable_capacity()->set_cpu_millis(8000);
  w.jobs[0].set_task_count(20);
  CompactionOptions o;
  o.seeds = 6;
  o.picky = 0;
  o.parallel = 1;
  auto a = Compact(w, o), b = Compact(w, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->needed, b->needed);
  for (int n : a->needed) {
    EXPECT_GE(n, 4);  // 28 cores needed; big machines have 8
    EXPECT_LE(n, 10);
  }
  EXPECT_LE(a->Min(), a->P90());
  EXPECT_LE(a->P90(), a->Max());
}

TEST(Compaction, PickyTasksMayStayPendingAndTooMuchDoesNotFit) {
  SimWorkload w = Toy();
  // One task no machine can hold.
  w.jobs.push_back(JobBuilder("huge").Cpu(9000).Build());
  CompactionOptions o;
  o.seeds = 2;
  o.picky = 0;
  auto strict = Compact(w, o);
  ASSERT_TRUE(strict.ok());
  EXPECT_FALSE(strict->fits_original);
  o.picky = 0.05;  // 1 of 25 tasks may stay pending
  auto lenient = Compact(w, o);
  ASSERT_TRUE(lenient.ok());
  EXPECT_TRUE(lenient->fits_original);
  EXPECT_EQ(lenient->P90(), 6);
}

TEST(Compaction, LargeJobsHardConstraintsBecomeSoft) {
  SimWorkload w;
  for (int i = 0; i < 10; ++i) {
    w.machines.push_back(MachineBuilder("m" + std::to_string(i)).Cpu(4000).Attr("ssd", i < 2 ? "yes" : "no").Build());
  }
  // 12 tasks demanding ssd: only 2 machines have it (8 tasks fit there).
  w.jobs.push_back(JobBuilder("big").Tasks(12).Cpu(1000).Constraint("ssd", v1::Constraint::EQ, {"yes"}).Build());
  CompactionOptions o;
  o.seeds = 1;
  o.picky = 0;
  o.soften_large_jobs = false;
  EXPECT_FALSE(Compact(w, o)->fits_original);
  o.soften_large_jobs = true;  // 12 tasks > half of any compacted cell
  EXPECT_TRUE(Compact(w, o)->fits_original);
}

}  // namespace
}  // namespace herd::sim
