// Fauxmaster on a checkpoint of a live cell (issue #4): a checkpoint exported
// from a running master and loaded into the simulator gives the same state
// as the master had at that revision, and the operator's questions run on it.
#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

std::string SleepSpec(const std::string& name, int tasks) {
  return absl::StrCat("name: ", name, "\nuser: alice\npriority: production\ntasks: ", tasks,
                      "\ncommand: [\"sleep\", \"3600\"]\nresources: {cpu: 100m, memory: 16Mi}\n");
}

TEST(SimIntegration, ACheckpointOfALiveCellLoadsToTheSameState) {
  Cell cell;
  ASSERT_TRUE(cell.StartMaster().ok()) << cell.LogTails();
  ASSERT_TRUE(cell.StartAgents(2).ok()) << cell.LogTails();
  ASSERT_EQ(cell.Herd({"submit", cell.WriteSpec("a.yaml", SleepSpec("web", 3))}).exit_code, 0);
  ASSERT_EQ(cell.Herd({"submit", cell.WriteSpec("b.yaml", SleepSpec("cache", 2))}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    auto t = cell.Tasks("web");
    auto u = cell.Tasks("cache");
    return t.ok() && u.ok() && harness::CountTasks(*t, v1::Task::RUNNING, v1::Task::ACTIVE) == 3 &&
           harness::CountTasks(*u, v1::Task::RUNNING, v1::Task::ACTIVE) == 2;
  }, 20s)) << cell.LogTails();
  ASSERT_EQ(cell.Herd({"kill", "cache"}).exit_code, 0);
  std::string file = cell.dir().Sub("cell.ckpt");
  RunResult ex = cell.Herd({"checkpoint", "export", file});
  ASSERT_EQ(ex.exit_code, 0) << ex.Describe();

  // The state Fauxmaster loads (the real master recovering from the file)...
  RunResult loaded = cell.Herd({"sim", "state", file});
  ASSERT_EQ(loaded.exit_code, 0) << loaded.Describe();
  auto sim = harness::ParseJsonAs<v1::CellSnapshot>(loaded.out);
  ASSERT_TRUE(sim.ok()) << sim.status();
  // ... equals the file replayed by `herd checkpoint show` ...
  auto shown = cell.HerdJson<v1::CellSnapshot>({"checkpoint", "show", file});
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*sim, *shown));
  // ... and what the live master says about that revision.
  const std::string rev = absl::StrCat(sim->revision());
  auto jobs = cell.HerdJson<v1::ListJobsResponse>({"jobs", "--all", "--at-revision", rev});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->jobs_size(), sim->jobs_size());
  for (int i = 0; i < jobs->jobs_size(); ++i) {
    v1::Job in_snapshot = sim->jobs(i);
    EXPECT_EQ(in_snapshot.versions_size(), 1) << "a snapshot keeps each job's version history";
    in_snapshot.clear_versions();  // which job listings leave out
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(jobs->jobs(i), in_snapshot)) << jobs->jobs(i).id();
  }
  auto tasks = cell.HerdJson<v1::ListTasksResponse>({"tasks", "web", "--at-revision", rev});
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  int matched = 0;
  for (const auto& t : sim->tasks()) {
    if (t.job() != "alice/web") continue;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(t, tasks->tasks(t.index())));
    ++matched;
  }
  EXPECT_EQ(matched, 3);
  auto machines = cell.HerdJson<v1::ListMachinesResponse>({"machines", "--at-revision", rev});
  ASSERT_TRUE(machines.ok());
  ASSERT_EQ(machines->machines_size(), sim->machines_size());
  for (int i = 0; i < sim->machines_size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(machines->machines(i), sim->machines(i)));
  }

  // Stepping and scheduling on the loaded cell, and the questions.
  RunResult replay = cell.Herd({"sim", "checkpoint", file, "--revision", "3", "--step", "2", "--schedule"});
  ASSERT_EQ(replay.exit_code, 0) << replay.Describe();
  EXPECT_TRUE(absl::StrContains(replay.out, "loaded: revision 3")) << replay.out;
  EXPECT_TRUE(absl::StrContains(replay.out, "revision 4: ")) << replay.out;
  EXPECT_TRUE(absl::StrContains(replay.out, "scheduled: revision")) << replay.out;
  std::string probe = cell.WriteSpec("probe.yaml", SleepSpec("probe", 1));
  RunResult fit = cell.Herd({"sim", "fit", "--checkpoint", file, "--job", probe});
  ASSERT_EQ(fit.exit_code, 0) << fit.Describe();
  EXPECT_TRUE(absl::StrContains(fit.out, "RESULT fit=")) << fit.out;
  RunResult evict = cell.Herd({"sim", "evict", "--checkpoint", file, "--drain", "m1", "--priority", "120"});
  ASSERT_EQ(evict.exit_code, 0) << evict.Describe();
  EXPECT_TRUE(absl::StrContains(evict.out, "RESULT disturbed=")) << evict.out;
  RunResult bad = cell.Herd({"sim", "evict", "--checkpoint", file, "--drain", "nope"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(bad.err, "no machine nope")) << bad.err;
}

// Issue #13's interface: --policy k8s and --overcommit on compaction, with
// bad values refused by name.
TEST(SimIntegration, CompactionTakesK8sAndOvercommit) {
  const std::vector<std::string> base = {harness::HerdBinary(), "sim", "compaction", "--synthetic",
                                         "machines=60,tasks=2400,fill=0.9,seed=3", "--seeds", "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return harness::Run(argv, 120s);
  };
  RunResult plain = with({"--policy", "k8s"});
  ASSERT_EQ(plain.exit_code, 0) << plain.Describe();
  RunResult more = with({"--policy", "k8s", "--overcommit", "cpu=2,memory=2"});
  ASSERT_EQ(more.exit_code, 0) << more.Describe();
  auto p90 = [](const std::string& out) {
    size_t at = out.find("RESULT machines_p90=");
    return at == std::string::npos ? -1 : std::stoi(out.substr(at + 20));
  };
  // Twice the capacity per machine: fewer machines (the same run otherwise).
  EXPECT_GT(p90(plain.out), 0) << plain.out;
  EXPECT_LT(p90(more.out), p90(plain.out)) << more.out;
  RunResult bad = with({"--overcommit", "disk=2"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "--overcommit: unknown resource 'disk'")) << bad.err;
  RunResult arrival = harness::Run({harness::HerdBinary(), "sim", "arrival", "--synthetic", "machines=10,tasks=50"});
  EXPECT_EQ(arrival.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(arrival.err, "no devices")) << arrival.err;
}

}  // namespace
}  // namespace herd
