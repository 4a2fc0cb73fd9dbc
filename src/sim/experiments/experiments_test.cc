#include "sim/experiments/experiments.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include "absl/strings/str_cat.h"

#include "sim/experiments/sources.h"
#include "testing/builders.h"

namespace herd::sim {
namespace {

using namespace herd::testing;  // NOLINT

// 12 machines of 4 cores / 8 GiB; prod and batch tasks of 0.6 cores / 1 GiB
// (bucketing rounds them to 1 core).
SimWorkload ExperimentToy() {
  SimWorkload w;
  w.name = "toy";
  for (int i = 0; i < 12; ++i) {
    w.machines.push_back(MachineBuilder("m" + std::to_string(i)).Cpu(4000).Memory(8LL << 30).Build());
  }
  w.jobs.push_back(JobBuilder("web", "ads").Priority(200).Tasks(12).Cpu(600).Memory(1LL << 30).Build());
  w.jobs.push_back(JobBuilder("crunch", "batch").Priority(100).Tasks(12).Cpu(600).Memory(1LL << 30).Build());
  w.jobs.push_back(JobBuilder("small", "misc").Priority(100).Tasks(3).Cpu(600).Memory(1LL << 30).Build());
  return w;
}

CompactionOptions Opts() {
  CompactionOptions o;
  o.seeds = 3;
  o.picky = 0;
  o.parallel = 1;
  return o;
}

TEST(Experiments, CompactionFigure) {
  auto f = RunCompaction(ExperimentToy(), Opts());
  ASSERT_TRUE(f.ok()) << f.status();
  // 27 tasks x 0.6 cores = 16.2 cores: 5 machines of 4 (6 per machine with 3.6 cores).
  bool found = false;
  for (const auto& [k, v] : f->results) {
    if (k == "machines_p90") {
      EXPECT_EQ(v, 5);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  ASSERT_EQ(f->charts.size(), 1u);
  EXPECT_NE(f->charts[0].second.find("<svg"), std::string::npos);
  std::string dir = (std::filesystem::temp_directory_path() / "herd_fig_test").string();
  ASSERT_TRUE(WriteFigure(*f, dir).ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/compaction.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/compaction.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/compaction-cdf.svg"));
  std::filesystem::remove_all(dir);
}

double Result(const Figure& f, const std::string& key) {
  for (const auto& [k, v] : f.results) {
    if (k == key) return v;
  }
  ADD_FAILURE() << "no result " << key;
  return -1;
}

TEST(Experiments, SegregationAndSubdivisionCostMachines) {
  SimWorkload w = ExperimentToy();
  auto prod = RunSegregateProd(w, Opts());
  ASSERT_TRUE(prod.ok()) << prod.status();
  // Combined 5 machines; prod alone 12 tasks -> 2 machines (7.2 cores: 6 per
  // machine), non-prod 15 -> 3: 5, or more.
  EXPECT_GE(Result(*prod, "extra_machines_pct_p90"), 0);
  auto sub = RunSubdivide(w, Opts(), {3});
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_GE(Result(*sub, "cells_3_extra_machines_pct_p90"), 0);
  // Two jobs of 7 tasks (4.2 cores) need 2 machines each alone, 3 together
  // (6 tasks per machine): subdivision costs a third more if they part.
  SimWorkload two;
  two.machines = w.machines;
  two.jobs = {JobBuilder("a", "u1").Tasks(7).Cpu(600).Memory(1LL << 30).Build(),
              JobBuilder("b", "u2").Tasks(7).Cpu(600).Memory(1LL << 30).Build()};
  auto users2 = RunSegregateUsers(two, Opts(), {1});
  ASSERT_TRUE(users2.ok()) << users2.status();
  EXPECT_NEAR(Result(*users2, "users_1_extra_machines_pct_p90"), 100.0 / 3, 1e-9);
  auto users = RunSegregateUsers(w, Opts(), {1, 2});
  ASSERT_TRUE(users.ok()) << users.status();
  EXPECT_GE(Result(*users, "users_2_extra_machines_pct_p90"), 0);
}

TEST(Experiments, BucketingAndReclamation) {
  SimWorkload w = ExperimentToy();
  v1::JobSpec b = Bucketed(w.jobs[0]);
  EXPECT_EQ(b.task().resources().cpu_millis(), 1000);
  EXPECT_EQ(b.task().resources().memory_bytes(), 1LL << 30);
  auto bucket = RunBucketing(w, Opts());
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  // 27 one-core tasks need 7 machines instead of 5.
  EXPECT_NEAR(Result(*bucket, "extra_machines_pct_p90"), 40.0, 1e-9);
  EXPECT_EQ(RunReclamation(w, Opts()).status().code(), absl::StatusCode::kFailedPrecondition);
  ModelUsage(&w);
  auto recl = RunReclamation(w, Opts());
  ASSERT_TRUE(recl.ok()) << recl.status();
  EXPECT_GT(Result(*recl, "machines_saved_pct_p90"), 0);
}

TEST(Experiments, ReclamationWithRecordedUsage) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/usage.csv", bad = dir + "/bad.csv";
  {
    // Two tasks, 20 minutes of samples every 10 s: one idle at 10% of its
    // limits, one busy at 90%.
    std::ofstream out(good);
    out << "time_ms,job,task_index,cpu_millis,memory_bytes,cpu_limit_millis,memory_limit_bytes\n";
    for (int64_t t = 0; t <= 20 * 60'000; t += 10'000) {
      out << t << ",a/idle,0,100.5,107374182.4,1000,1073741824\n";
      out << t << ",a/busy,0,900,966367641,1000,1073741824\n";
    }
  }
  auto p = ReadUsageProfiles(good);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[1].name, "a/idle/0");
  EXPECT_NEAR((*p)[1].cpu[0], 0.1005, 1e-9);
  auto f = RunReclamationWithUsage(ExperimentToy(), Opts(), *p);
  ASSERT_TRUE(f.ok()) << f.status();
  // Every estimator reclaims something from the idle profile and none from
  // the busy one beyond its margin; usage never rises, so never over.
  for (const char* e : {"baseline", "medium", "aggressive", "histogram"}) {
    EXPECT_GE(Result(*f, absl::StrCat(e, "_machines_saved_pct_p90")), 0) << e;
    EXPECT_EQ(Result(*f, absl::StrCat(e, "_over_reservation_pct")), 0) << e;
    EXPECT_LE(Result(*f, absl::StrCat(e, "_machines_p90")), Result(*f, "off_machines_p90")) << e;
  }
  EXPECT_LT(Result(*f, "aggressive_machines_p90"), Result(*f, "off_machines_p90"));

  auto write = [&](const std::string& text) { std::ofstream(bad) << text; };
  write("time,job\n");
  EXPECT_THAT(std::string(ReadUsageProfiles(bad).status().message()), ::testing::HasSubstr("bad.csv:1: the header"));
  write("time_ms,job,task_index,cpu_millis,memory_bytes,cpu_limit_millis,memory_limit_bytes\n1,a/x,0,5,5,0,5\n");
  EXPECT_THAT(std::string(ReadUsageProfiles(bad).status().message()), ::testing::HasSubstr("bad.csv:2: usage must"));
  write("time_ms,job,task_index,cpu_millis,memory_bytes,cpu_limit_millis,memory_limit_bytes\n1,a/x,zero,5,5,5,5\n");
  EXPECT_THAT(std::string(ReadUsageProfiles(bad).status().message()), ::testing::HasSubstr("bad.csv:2: time_ms"));
  write("time_ms,job,task_index,cpu_millis,memory_bytes,cpu_limit_millis,memory_limit_bytes\n");
  EXPECT_THAT(std::string(ReadUsageProfiles(bad).status().message()), ::testing::HasSubstr("no usage rows"));
  EXPECT_EQ(ReadUsageProfiles(dir + "/nonexistent.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(Experiments, SourcesParseAndValidate) {
  EXPECT_FALSE(SyntheticWorkload("machines=10,flavour=3").ok());
  EXPECT_FALSE(SyntheticWorkload("machines=ten").ok());
  auto w = SyntheticWorkload("machines=50,tasks=2000,fill=0.8,seed=3");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->machines.size(), 50u);
  EXPECT_EQ(w->tasks(), 2000);
  auto s = ScheduledState(*w, sched::Options());
  ASSERT_TRUE(s.ok());
  EXPECT_GT(s->task_count(v1::Task::RUNNING), 1000);
  EXPECT_EQ(Google2011Workload("/nonexistent").status().code(), absl::StatusCode::kNotFound);
}

TEST(Experiments, RealTraces) {
  const char* dir = std::getenv("HERD_TRACES");
  std::string g = std::string(dir ? dir : "") + "/google-2011";
  if (!dir || !std::filesystem::exists(g + "/task_events")) GTEST_SKIP() << "traces not found under " << g;
  auto w = Google2011Workload(g, 8000);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_GT(w->machines.size(), 12400u);  // up at 8,000 s (12,477 at the start)
  EXPECT_GT(w->tasks(), 5000);
  std::string o = std::string(dir) + "/alibaba-openb-2023";
  auto ob = OpenbWorkload(o + "/openb_node_list_all_node.csv", o + "/openb_pod_list_gpuspec20.csv");
  ASSERT_TRUE(ob.ok()) << ob.status();
  EXPECT_EQ(ob->machines.size(), 1523u);
  EXPECT_EQ(ob->jobs.size(), 8152u);
}

// Four machines of 2 GPUs; pods of one GPU, then of half a GPU.
SimWorkload Gpus() {
  SimWorkload w;
  w.name = "gpus";
  for (int i = 0; i < 4; ++i) {
    w.machines.push_back(
        MachineBuilder("g" + std::to_string(i)).Cpu(8000).Memory(32LL << 30).Extended("gpu_milli", 2000).Build());
  }
  for (int i = 0; i < 6; ++i) {
    w.jobs.push_back(JobBuilder("one" + std::to_string(i), "u").Cpu(1000).Memory(1LL << 30)
                         .Extended("gpu_milli", 1000).Build());
  }
  for (int i = 0; i < 4; ++i) {
    w.jobs.push_back(JobBuilder("half" + std::to_string(i), "u").Cpu(500).Memory(1LL << 30)
                         .Extended("gpu_milli", 500).Build());
  }
  return w;
}

TEST(Experiments, CompactionReportsGpuAllocation) {
  // 8 GPUs' worth of pods: 4 machines, all GPUs allocated.
  auto f = RunCompaction(Gpus(), Opts());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Result(*f, "machines_p90"), 4);
  EXPECT_DOUBLE_EQ(Result(*f, "gpu_alloc_ratio"), 1.0);
  // No GPUs, no such figure.
  auto t = RunCompaction(ExperimentToy(), Opts());
  ASSERT_TRUE(t.ok());
  for (const auto& [k, v] : t->results) EXPECT_NE(k, "gpu_alloc_ratio");
}

TEST(Experiments, ArrivalCountsGpusUntilTheFirstFailure) {
  // The workload asks for exactly the cell's 8 GPUs, then random draws
  // until 150%: everything fits until the cell is full, then draws fail.
  CompactionOptions o = Opts();
  o.scheduler.policy = sched::PackingPolicy::kHybrid;
  auto f = RunArrival(Gpus(), o, ArrivalOptions{1, 1.5});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ(Result(*f, "first_failure_gpu_alloc_ratio"), 1.0);
  EXPECT_DOUBLE_EQ(Result(*f, "gpu_alloc_ratio"), 1.0);
  EXPECT_GT(Result(*f, "failed"), 0);
  EXPECT_GE(Result(*f, "first_failure_asked_ratio"), 1.0);
  // A cell without GPUs is refused with a reason.
  auto t = RunArrival(ExperimentToy(), o, ArrivalOptions{});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Experiments, PoliciesIncludeKubernetes) {
  auto f = RunPolicies(ExperimentToy(), Opts());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GT(Result(*f, "k8s_machines_p90"), 0);
}

}  // namespace
}  // namespace herd::sim
