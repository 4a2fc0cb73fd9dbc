// The agent as a process in a real cell (issue #5): it can be SIGKILLed or
// upgraded in place without touching its tasks, crash loops move a task to
// another machine, and ports, health checks and herd exec work end to end.
// Real master, agents, herd-shim, cgroups and task processes on loopback.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using harness::Summarize;
using namespace std::chrono_literals;

class AgentTest : public ::testing::Test {
 protected:
  void Start(int agents) {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(agents);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }
  void Submit(const std::string& name, const std::string& spec) {
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec(name + ".yaml", spec)});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  static bool Alive(int64_t pid) { return kill(static_cast<pid_t>(pid), 0) == 0; }

  Cell cell_;
};

// Tasks 1 and 2 wait for a file, then exit with 3 and 4; task 0 just runs.
std::string WaitersSpec(const std::string& dir) {
  return absl::StrCat(
      "name: waiters\nuser: alice\npriority: production\ntasks: 3\nrestart: never\n",
      "command: [\"/bin/sh\", \"-c\", \"i=${task.index}; while [ ! -e ", dir,
      "/exit$i ]; do sleep 0.05; done; exit $((i + 2))\"]\n",
      "resources: {cpu: 100m, memory: 64Mi}\n");
}

TEST_F(AgentTest, KilledAgentLeavesTasksRunningAndReportsWhatEndedMeanwhile) {
  Start(1);
  std::string dir = cell_.dir().Sub("flags");
  std::filesystem::create_directories(dir);
  Submit("waiters", WaitersSpec(dir));
  v1::ListTasksResponse before = cell_.WaitTasks("waiters", [](const auto& r) { return harness::AllActive(r, 3); }, "all active");
  std::map<int, int64_t> pids;
  for (const auto& t : before.tasks()) pids[t.index()] = t.pid();

  cell_.StopAgent("m1", SIGKILL);
  for (const auto& [i, pid] : pids) EXPECT_TRUE(Alive(pid)) << "task " << i << " died with its agent";
  // Task 2 ends while no agent runs.
  std::ofstream(dir + "/exit2").put('\n');
  ASSERT_TRUE(Eventually([&] { return !Alive(pids[2]); }, 10s)) << "task 2 did not exit";

  ASSERT_TRUE(cell_.RestartAgent("m1").ok()) << cell_.LogTails();
  v1::ListTasksResponse after = cell_.WaitTasks(
      "waiters", [](const auto& r) { return r.tasks(2).state() == v1::Task::DEAD; }, "task 2 reported dead");
  EXPECT_EQ(after.tasks(2).exit_code(), 4) << Summarize(after);
  EXPECT_TRUE(absl::StrContains(after.tasks(2).last_event().reason(), "exited with code 4"))
      << after.tasks(2).last_event().reason();
  for (int i : {0, 1}) {
    const v1::Task& t = after.tasks(i);
    EXPECT_EQ(t.state(), v1::Task::RUNNING) << Summarize(after);
    EXPECT_EQ(t.pid(), pids[i]) << "task " << i << " was restarted: " << Summarize(after);
    EXPECT_EQ(t.restarts(), 0) << Summarize(after);
    EXPECT_TRUE(Alive(pids[i]));
  }

  // A task adopted by the new agent: its later exit is reported with its code.
  std::ofstream(dir + "/exit1").put('\n');
  after = cell_.WaitTasks(
      "waiters", [](const auto& r) { return r.tasks(1).state() == v1::Task::DEAD; }, "task 1 reported dead");
  EXPECT_EQ(after.tasks(1).exit_code(), 3) << Summarize(after);
  EXPECT_EQ(after.tasks(0).pid(), pids[0]);
}

TEST_F(AgentTest, InPlaceUpgradeRestartsNoTask) {
  Start(1);
  std::string dir = cell_.dir().Sub("flags");
  std::filesystem::create_directories(dir);
  Submit("waiters", WaitersSpec(dir));
  v1::ListTasksResponse before = cell_.WaitTasks("waiters", [](const auto& r) { return harness::AllActive(r, 3); }, "all active");

  // The "new release": a copy of herd and herd-shim in another directory.
  std::string bin = cell_.dir().Sub("new-release");
  std::filesystem::create_directories(bin);
  std::string herd = harness::HerdBinary();
  std::filesystem::path from = std::filesystem::path(herd).parent_path();
  std::filesystem::copy_file(herd, bin + "/herd");
  std::filesystem::copy_file(from / "herd-shim", bin + "/herd-shim");

  cell_.StopAgent("m1", SIGTERM);  // as a package manager would
  ASSERT_TRUE(cell_.RestartAgent("m1", true, bin + "/herd").ok()) << cell_.LogTails();
  ASSERT_TRUE(absl::StrContains(harness::ReadFileOrEmpty(cell_.agent("m1")->log_path()), "listening"));

  Submit("after", "name: after\nuser: alice\ncommand: [/bin/sleep, \"3600\"]\nresources: {cpu: 100m, memory: 32Mi}\n");
  cell_.WaitTasks("after", [](const auto& r) { return harness::AllActive(r, 1); }, "started by the new agent");
  v1::ListTasksResponse after = cell_.WaitTasks("waiters", [](const auto& r) { return harness::AllActive(r, 3); }, "still active");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(after.tasks(i).pid(), before.tasks(i).pid()) << "task " << i << " was restarted";
    EXPECT_EQ(after.tasks(i).restarts(), 0);
  }
  std::ofstream(dir + "/exit0").put('\n');
  after = cell_.WaitTasks("waiters", [](const auto& r) { return r.tasks(0).state() == v1::Task::DEAD; }, "task 0 dead");
  EXPECT_EQ(after.tasks(0).exit_code(), 2);
}

TEST_F(AgentTest, CrashLoopMovesTheTaskAndKeepsItOffThatMachine) {
  Start(2);
  Submit("crasher",
         "name: crasher\nuser: alice\npriority: production\nrestart: {policy: always, backoff: 50ms, "
         "max_backoff: 100ms}\ncommand: [\"/bin/sh\", \"-c\", \"exit 1\"]\nresources: {cpu: 100m, memory: 32Mi}\n");
  v1::ListTasksResponse r = cell_.WaitTasks(
      "crasher",
      [](const auto& r) { return r.tasks_size() == 1 && r.tasks(0).avoid_size() >= 1; },
      "moved off a machine for crash-looping", 30s);
  ASSERT_EQ(r.tasks_size(), 1);
  const v1::Task& t = r.tasks(0);
  ASSERT_GE(t.avoid_size(), 1);
  bool said = false;
  for (const auto& e : t.history()) {
    said |= absl::StrContains(e.reason(), absl::StrCat("crash loop on ", t.avoid(0).machine()));
  }
  EXPECT_TRUE(said) << Summarize(r);
  // Never placed on an avoided machine again while it is avoided: it moves
  // to the other machine, crash-loops there too, and then, with both
  // machines avoided, stays pending, and `herd why` says why.
  r = cell_.WaitTasks(
      "crasher",
      [](const auto& r) {
        return r.tasks_size() == 1 && r.tasks(0).avoid_size() >= 2 && r.tasks(0).state() == v1::Task::PENDING;
      },
      "moved off both machines and left pending", 60s);
  const v1::Task& p = r.tasks(0);
  EXPECT_NE(p.avoid(0).machine(), p.avoid(1).machine()) << Summarize(r);
  EXPECT_EQ(p.incarnation(), 2) << "placed more than once per machine: " << Summarize(r);
  harness::RunResult why;
  ASSERT_TRUE(harness::Eventually(
      [&] {
        why = cell_.Herd({"why", "crasher"});
        return absl::StrContains(why.out, "2 task crashed there recently");
      },
      30s))
      << why.Describe();
}

TEST_F(AgentTest, PortsHealthAndExecEndToEnd) {
  Start(1);
  // Healthy while the file exists; `herd exec` removes it inside the task.
  Submit("web",
         "name: web\nuser: alice\npriority: production\nrestart: always\n"
         "command: [\"/bin/sh\", \"-c\", \"touch healthy; echo port=$HERD_PORT_HTTP arg=${port.http}; sleep 3600\"]\n"
         "resources: {cpu: 100m, memory: 32Mi, ports: [http]}\n"
         "health_check: {command: [/bin/sh, -c, \"test -e healthy\"], interval: 200ms, timeout: 150ms, "
         "failure_threshold: 2}\n");
  v1::ListTasksResponse r = cell_.WaitTasks(
      "web", [](const auto& r) { return harness::AllActive(r, 1) && r.tasks(0).health() == "healthy"; }, "healthy");
  ASSERT_EQ(r.tasks_size(), 1);
  ASSERT_TRUE(r.tasks(0).ports().contains("http")) << Summarize(r);
  int port = r.tasks(0).ports().at("http");
  EXPECT_GE(port, 20000);
  RunResult logs = cell_.Herd({"logs", "web/0"});
  EXPECT_TRUE(absl::StrContains(logs.out, absl::StrCat("port=", port, " arg=", port))) << logs.Describe();
  RunResult table = cell_.Herd({"tasks", "web"});
  EXPECT_TRUE(absl::StrContains(table.out, absl::StrCat("http=", port))) << table.out;
  EXPECT_TRUE(absl::StrContains(table.out, "healthy")) << table.out;

  RunResult ex = cell_.Herd({"exec", "web/0", "--", "/bin/sh", "-c", "rm healthy && echo removed"});
  ASSERT_EQ(ex.exit_code, 0) << ex.Describe();
  EXPECT_TRUE(absl::StrContains(ex.out, "removed"));
  r = cell_.WaitTasks("web", [](const auto& r) { return r.tasks_size() == 1 && r.tasks(0).restarts() >= 1; },
                "restarted for being unhealthy");
  bool said = false;
  for (const auto& e : r.tasks(0).history()) said |= absl::StrContains(e.reason(), "unhealthy");
  said |= absl::StrContains(r.tasks(0).message(), "unhealthy");
  EXPECT_TRUE(said) << Summarize(r) << " message: " << r.tasks(0).message();
  // The restarted attempt touched the file again: healthy, same port.
  r = cell_.WaitTasks("web", [](const auto& r) { return harness::AllActive(r, 1) && r.tasks(0).health() == "healthy"; },
                "healthy again");
  EXPECT_EQ(r.tasks(0).ports().at("http"), port);
}

}  // namespace
}  // namespace herd
