// Updating jobs on a real cell (issue #14): submitting a changed spec of a
// live job updates it by class -- a label touches no process, a new command
// restarts every task where it runs -- `herd diff` says so beforehand and
// changes nothing, more memory that fits is taken in place (the cgroup's
// limit changes under the running process), and `herd scale` adds or
// removes tasks without touching the others. Real master, agents and task processes, driven by the CLI.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::ProcInfo;
using harness::RunResult;
using harness::Summarize;
using namespace std::chrono_literals;

// Three tasks that print which version of the command they run, then sleep.
std::string Spec(int command_version, const std::string& team, const std::string& memory = "32Mi") {
  return absl::StrCat("name: web\nuser: alice\npriority: production\ntasks: 3\n",
                      "command: [\"/bin/sh\", \"-c\", \"echo command ", command_version,
                      " task ${task.index}; sleep 3600\"]\n", "resources: {cpu: 200m, memory: ", memory,
                      "}\ngrace_period: 1s\nlabels: {team: ", team, "}\n");
}

// The memory limit of the cgroup `pid` is in, as the kernel has it; "" if
// it is in none of the agent's (no cgroups here).
std::string MemoryLimit(int64_t pid) {
  std::istringstream in(harness::ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/cgroup")));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || !absl::StrContains(f[2], "/ls/")) continue;
    if (f[1] == "memory") return harness::ReadFileOrEmpty("/sys/fs/cgroup/memory" + f[2] + "/memory.limit_in_bytes");
    if (f[1].empty()) return harness::ReadFileOrEmpty("/sys/fs/cgroup" + f[2] + "/memory.max");
  }
  return "";
}

class UpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(3);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  RunResult Herd(const std::vector<std::string>& args) { return cell_.Herd(args); }

  v1::Job Job() {
    absl::StatusOr<v1::Job> j = cell_.Job("alice/web");
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : v1::Job();
  }

  // The task processes behind `pids`, as /proc has them now.
  std::map<int, ProcInfo> Processes(const std::map<int, int64_t>& pids) {
    std::map<int, ProcInfo> out;
    for (const auto& [i, pid] : pids) {
      auto p = harness::ReadProc(static_cast<pid_t>(pid));
      EXPECT_TRUE(p.has_value()) << "task " << i << ": pid " << pid << " is not in /proc";
      if (p) out[i] = *p;
    }
    return out;
  }

  Cell cell_;
};

TEST_F(UpdateTest, LabelsTouchNothingLimitsChangeInPlaceCommandsRestartScaleKeepsSurvivors) {
  const std::string v1_file = cell_.WriteSpec("v1.yaml", Spec(1, "search"));
  RunResult r = Herd({"submit", v1_file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::map<int, int64_t> pids = cell_.WaitRunning("web", 3);
  ASSERT_EQ(pids.size(), 3u);
  std::map<int, ProcInfo> procs = Processes(pids);
  EXPECT_EQ(Job().version(), 1);

  // herd diff of a label change: the classification, and nothing changes.
  const std::string label_file = cell_.WriteSpec("label.yaml", Spec(1, "ads"));
  r = Herd({"diff", label_file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "alice/web: version 1 -> 2; tasks: 3 unchanged")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "labels.team")) << r.out;
  auto json = cell_.HerdJson<v1::SubmitResponse>({"diff", label_file});
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_EQ(json->results_size(), 1);
  EXPECT_EQ(json->results(0).diff().unchanged(), 3);
  EXPECT_EQ(json->results(0).diff().changes(0).field(), "labels.team");
  EXPECT_EQ(json->results(0).diff().changes(0).update_class(), v1::UPDATE_NONE);
  EXPECT_EQ(Job().version(), 1) << "herd diff changed the job";

  // The label, submitted: version 2, every task the same process.
  r = Herd({"submit", label_file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "updated alice/web to version 2")) << r.out;
  EXPECT_EQ(Job().version(), 2);
  EXPECT_EQ(Job().spec().labels().at("team"), "ads");
  auto tasks = cell_.Tasks("web");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  for (const v1::Task& t : tasks->tasks()) {
    EXPECT_EQ(t.incarnation(), 1) << Summarize(*tasks);
    EXPECT_EQ(t.pid(), pids.at(t.index())) << Summarize(*tasks);
    EXPECT_EQ(t.job_version(), 2);
    EXPECT_TRUE(harness::ProcessAlive(procs.at(t.index()))) << "task " << t.index() << " was restarted";
  }

  // More memory, which fits: in place, the same processes, and (with
  // cgroups) their groups' limit changes under them.
  const std::string bigger_file = cell_.WriteSpec("bigger.yaml", Spec(1, "ads", "48Mi"));
  const std::string limit_before = MemoryLimit(pids.at(0));
  r = Herd({"submit", bigger_file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "alice/web: version 2 -> 3; tasks: 3 in place")) << r.out;
  EXPECT_EQ(Job().version(), 3);
  if (!limit_before.empty()) {
    EXPECT_EQ(limit_before, absl::StrCat(32 << 20, "\n"));
    for (const auto& [i, pid] : pids) {
      EXPECT_TRUE(Eventually([&] { return MemoryLimit(pid) == absl::StrCat(48 << 20, "\n"); }))
          << "task " << i << ": " << MemoryLimit(pid);
    }
  }
  tasks = cell_.Tasks("web");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  for (const v1::Task& t : tasks->tasks()) {
    EXPECT_EQ(t.incarnation(), 1) << Summarize(*tasks);
    EXPECT_EQ(t.pid(), pids.at(t.index())) << Summarize(*tasks);
    EXPECT_EQ(t.resources().memory_bytes(), 48 << 20);
    EXPECT_TRUE(harness::ProcessAlive(procs.at(t.index()))) << "task " << t.index() << " was restarted";
  }

  // herd diff of a new command says every task restarts; still nothing changes.
  const std::string v2_file = cell_.WriteSpec("v2.yaml", Spec(2, "ads", "48Mi"));
  r = Herd({"diff", v2_file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "alice/web: version 3 -> 4; tasks: 3 restart")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "command")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "0-2")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "command changed")) << r.out;
  EXPECT_EQ(Job().version(), 3);
  for (const auto& [i, p] : procs) EXPECT_TRUE(harness::ProcessAlive(p)) << "herd diff touched task " << i;

  // The command, submitted: each task restarts on its machine with a new
  // process running the new command; the old processes are gone.
  r = Herd({"submit", v2_file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "updated alice/web to version 4")) << r.out;
  v1::ListTasksResponse restarted;
  ASSERT_TRUE(Eventually(
      [&] {
        auto t = cell_.Tasks("web");
        if (!t.ok()) return false;
        restarted = *t;
        for (const v1::Task& task : t->tasks()) {
          if (task.incarnation() != 2 || task.phase() != v1::Task::ACTIVE || task.pid() <= 0 ||
              task.pid() == pids.at(task.index())) {
            return false;
          }
        }
        return t->tasks_size() == 3;
      },
      60s))
      << Summarize(restarted);
  for (const v1::Task& t : restarted.tasks()) {
    EXPECT_EQ(t.machine(), tasks->tasks(t.index()).machine()) << "task " << t.index() << " moved";
    EXPECT_EQ(t.last_event().transition(), v1::Event::UPDATE) << Summarize(restarted);
  }
  for (const auto& [i, p] : procs) {
    EXPECT_TRUE(Eventually([&] { return !harness::ProcessAlive(p); }, 30s)) << "task " << i << "'s old process lives";
  }
  for (int i = 0; i < 3; ++i) {
    const std::string want = absl::StrCat("command 2 task ", i);
    RunResult logs;
    EXPECT_TRUE(Eventually([&] {
      logs = Herd({"logs", absl::StrCat("web/", i)});
      return logs.exit_code == 0 && absl::StrContains(logs.out, want);
    })) << logs.Describe();
  }
  pids = cell_.WaitRunning("web", 3);
  procs = Processes(pids);

  // herd scale 5: two tasks more; the three keep their processes.
  r = Herd({"scale", "web", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "scaled alice/web to 5 tasks (version 5")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "added 3-4")) << r.out;
  std::map<int, int64_t> five = cell_.WaitRunning("web", 5);
  for (const auto& [i, pid] : pids) {
    EXPECT_EQ(five.at(i), pid) << "task " << i << " was touched by the scale";
    EXPECT_TRUE(harness::ProcessAlive(procs.at(i)));
  }
  std::map<int, ProcInfo> extra = Processes({{3, five.at(3)}, {4, five.at(4)}});

  // herd scale 3 (--json): tasks 3 and 4 go, their processes stop; 0-2 stay.
  auto scaled = cell_.HerdJson<v1::ScaleResponse>({"scale", "web", "3"});
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(scaled->diff().removed(), 2);
  EXPECT_EQ(scaled->diff().unchanged(), 3);
  EXPECT_EQ(scaled->job().version(), 6);
  for (const auto& [i, p] : extra) {
    EXPECT_TRUE(Eventually([&] { return !harness::ProcessAlive(p); }, 30s)) << "removed task " << i << " still runs";
  }
  std::map<int, int64_t> three = cell_.WaitRunning("web", 3);
  EXPECT_EQ(three, pids);
  for (const auto& [i, p] : procs) EXPECT_TRUE(harness::ProcessAlive(p)) << "task " << i;
  EXPECT_EQ(Job().spec().task_count(), 3);
  EXPECT_EQ(Job().version(), 6);

  // Scaling to what it is changes nothing; bad counts name the field.
  r = Herd({"scale", "web", "3"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "no change (version 6)")) << r.out;
  r = Herd({"scale", "web", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "tasks: 0 is outside 1..100000")) << r.err;
}

}  // namespace
}  // namespace herd
