// Resource reclamation on a real cell (issue #16, Borg §5.5): a production
// task that holds 1.5 of a machine's 2 cores but idles. Its reservation,
// estimated by the master from the agent's cgroup usage, comes down; a
// batch task that did not fit against the limit is then placed into the
// reclaimed CPU, while a production task of the same size still is not
// (production counts limits). Real master, agent, cgroups and processes;
// the master's estimator is set to react in seconds (flags), not minutes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

Cell::Options Fast() {
  Cell::Options o;
  o.master_flags = {"--reclaim",          "aggressive", "--reclaim-startup", "2s", "--reclaim-half-life", "2s",
                    "--reclaim-interval", "500ms"};
  return o;
}

std::string Job(const std::string& name, const std::string& priority, const std::string& cpu) {
  return absl::StrCat("name: ", name, "\nuser: alice\npriority: ", priority,
                      "\ncommand: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\nresources: {cpu: ", cpu,
                      ", memory: 32Mi}\ngrace_period: 1s\n");
}

TEST(ReclaimTest, IdleProductionCpuIsReclaimedForBatchOnly) {
  Cell cell(Fast());
  ASSERT_TRUE(cell.StartMaster().ok()) << cell.LogTails();
  ASSERT_TRUE(cell.StartAgents(1).ok()) << cell.LogTails();
  auto submit = [&](const std::string& name, const std::string& priority, const std::string& cpu) {
    RunResult r = cell.Herd({"submit", cell.WriteSpec(name + ".yaml", Job(name, priority, cpu))});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  };
  submit("idle", "production", "1500m");
  ASSERT_EQ(cell.WaitRunning("idle", 1).size(), 1u) << cell.LogTails();
  submit("api", "production", "1");
  submit("crunch", "batch", "1");
  // The batch task goes in once the idle task's reservation has come down.
  ASSERT_EQ(cell.WaitRunning("crunch", 1, 120s).size(), 1u) << cell.LogTails();
  absl::StatusOr<v1::GetJobResponse> idle = cell.HerdJson<v1::GetJobResponse>({"status", "idle"});
  ASSERT_TRUE(idle.ok()) << idle.status();
  ASSERT_EQ(idle->tasks_size(), 1);
  EXPECT_TRUE(idle->tasks(0).has_reservation()) << idle->ShortDebugString();
  // Room for crunch's core beside it: at most 1 of the 2 cores reserved.
  EXPECT_LE(idle->tasks(0).reservation().cpu_millis(), 1000) << idle->ShortDebugString();
  EXPECT_EQ(idle->tasks(0).resources().cpu_millis(), 1500);
  // And it goes on down toward what a sleeping process uses.
  EXPECT_TRUE(Eventually(
      [&] {
        auto s = cell.HerdJson<v1::GetJobResponse>({"status", "idle"});
        return s.ok() && s->tasks_size() == 1 && s->tasks(0).reservation().cpu_millis() < 200;
      },
      60s))
      << cell.Herd({"status", "idle", "--json"}).out;
  // herd status shows it beside the task.
  RunResult status = cell.Herd({"status", "idle"});
  EXPECT_TRUE(absl::StrContains(status.out, "RESERVED")) << status.Describe();
  EXPECT_TRUE(absl::StrContains(status.out, " cpu, ")) << status.Describe();
  // Production is placed against limits: api (1 core) still waits.
  absl::StatusOr<v1::GetJobResponse> api = cell.HerdJson<v1::GetJobResponse>({"status", "api"});
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ(api->job().state(), v1::Job::PENDING) << api->ShortDebugString();
  RunResult why = cell.Herd({"why", "api"});
  EXPECT_TRUE(absl::StrContains(why.out, "insufficient cpu")) << why.Describe();
}

}  // namespace
}  // namespace herd
