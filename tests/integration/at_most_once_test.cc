// At-most-once jobs (issue #11, deliverable 5) on a real cell: while an
// agent is down its tasks keep running under their herd-shims -- Borg's
// behaviour, and still the default -- but the tasks of a job that asked for
// at_most_once stop themselves once the machine's lease from the master has
// run out, and the master places their replacements only after that, so no
// task index ever has two processes at once. Real master, agents, shims and
// task processes on loopback; every wait is for an event (meant to pass on a
// machine kept busy by stress-ng --cpu 2).
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using harness::Summarize;
using namespace std::chrono_literals;

// Watches a process that is not our child: records the wall time (ms) at
// which it was seen gone, through a pidfd, as soon as it is.
class ExitWatch {
 public:
  // The process must be `expected` (pid and start time) when the pidfd is
  // opened: otherwise the watch fails at once.
  explicit ExitWatch(const harness::ProcInfo& expected) {
    fd_ = static_cast<int>(syscall(SYS_pidfd_open, expected.pid, 0));
    if (fd_ < 0 || !harness::ProcessAlive(expected)) {
      failed_ = true;
      return;
    }
    thread_ = std::thread([this] {
      while (!stop_) {
        struct pollfd p = {fd_, POLLIN, 0};
        if (poll(&p, 1, 200) == 1) {
          ended_ms_ = WallNowMs();
          return;
        }
      }
    });
  }
  ~ExitWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  bool failed() const { return failed_; }
  // 0 while it runs.
  int64_t ended_ms() const { return ended_ms_; }

 private:
  int fd_ = -1;
  bool failed_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ended_ms_{0};
  std::thread thread_;
};

Cell::Options LeaseCell() {
  Cell::Options o;
  // Polls every 200 ms, a machine is down after 3 missed ones; at-most-once
  // tasks get a 3 s lease (a busy test machine must not stall the master
  // that long for them to stop needlessly).
  o.master_flags = {"--task-lease", "3s"};
  return o;
}

const v1::Task* TaskAt(const v1::ListTasksResponse& r, int index) {
  for (const auto& t : r.tasks()) {
    if (t.index() == index) return &t;
  }
  return nullptr;
}

bool Active(const v1::Task* t) {
  return t != nullptr && t->state() == v1::Task::RUNNING && t->phase() == v1::Task::ACTIVE && t->pid() > 0;
}

class AtMostOnceTest : public ::testing::Test {
 protected:
  AtMostOnceTest() : cell_(LeaseCell()) {}

  void Submit(const std::string& name, const std::string& spec) {
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec(name + ".yaml", spec)});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  Cell cell_;
};

TEST_F(AtMostOnceTest, TasksOfALostMachineStopBeforeTheirReplacementsStartAndOthersRunOn) {
  ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
  ASSERT_TRUE(cell_.StartAgents(2).ok()) << cell_.LogTails();
  Submit("once",
         "name: once\nuser: alice\npriority: production\nat_most_once: true\ngrace_period: 1s\n"
         "command: [/bin/sleep, \"3600\"]\nresources: {cpu: 100m, memory: 32Mi}\n");
  // One ordinary task on each machine: one of them shares the machine of
  // the at-most-once task.
  Submit("plain",
         "name: plain\nuser: alice\npriority: production\ntasks: 2\ndifferent_machines: true\ngrace_period: 1s\n"
         "command: [/bin/sleep, \"3600\"]\nresources: {cpu: 100m, memory: 32Mi}\n");
  v1::ListTasksResponse once =
      cell_.WaitTasks("once", [](const auto& r) { return Active(TaskAt(r, 0)); }, "active");
  v1::ListTasksResponse plain = cell_.WaitTasks(
      "plain", [](const auto& r) { return Active(TaskAt(r, 0)) && Active(TaskAt(r, 1)); }, "all active");
  ASSERT_TRUE(Active(TaskAt(once, 0)));
  const v1::Task old_once = *TaskAt(once, 0);
  const std::string lost = old_once.machine();
  const v1::Task* plain_there = nullptr;
  for (const auto& t : plain.tasks()) {
    if (t.machine() == lost) plain_there = &t;
  }
  ASSERT_NE(plain_there, nullptr) << Summarize(plain);
  const v1::Task old_plain = *plain_there;
  std::optional<harness::ProcInfo> once_proc = harness::ReadProc(static_cast<pid_t>(old_once.pid()));
  std::optional<harness::ProcInfo> plain_proc = harness::ReadProc(static_cast<pid_t>(old_plain.pid()));
  ASSERT_TRUE(once_proc && plain_proc);
  ExitWatch once_watch(*once_proc);
  ExitWatch plain_watch(*plain_proc);
  ASSERT_FALSE(once_watch.failed());
  ASSERT_FALSE(plain_watch.failed());

  // The agent dies; its shims and tasks do not.
  const int64_t killed_ms = WallNowMs();
  cell_.StopAgent(lost, SIGKILL);
  ASSERT_TRUE(harness::ProcessAlive(*once_proc)) << "the task died with its agent";

  // (a) The at-most-once task ends by itself, and its shim says why.
  ASSERT_TRUE(Eventually([&] { return once_watch.ended_ms() > 0; }, 60s))
      << "the at-most-once task never stopped\n" << cell_.LogTails();
  const std::string exit_file = absl::StrCat(cell_.AgentRoot(lost), "/runs/alice.once.0.", old_once.incarnation(),
                                             "/exit");
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(exit_file); }, 30s)) << exit_file;
  EXPECT_TRUE(absl::StrContains(harness::ReadFileOrEmpty(exit_file), "lease-expired no contact with the master for"))
      << harness::ReadFileOrEmpty(exit_file);

  // (b) Its replacement runs on the other machine, started only after the
  // old process was gone.
  once = cell_.WaitTasks(
      "once",
      [&](const auto& r) {
        const v1::Task* t = TaskAt(r, 0);
        return Active(t) && t->machine() != lost && t->incarnation() > old_once.incarnation();
      },
      "placed again on the other machine");
  const v1::Task* now_once = TaskAt(once, 0);
  ASSERT_TRUE(Active(now_once));
  EXPECT_GT(now_once->started_ms(), once_watch.ended_ms())
      << "the replacement started at " << now_once->started_ms() << ", before the old process ended at "
      << once_watch.ended_ms();
  bool lost_for_lease = false;
  for (const auto& e : now_once->history()) {
    lost_for_lease |= e.transition() == v1::Event::LOST &&
                      absl::StrContains(e.reason(), "past its at-most-once tasks' lease and grace period");
  }
  EXPECT_TRUE(lost_for_lease) << Summarize(once);
  std::printf("agent %s killed at +0 ms; its at-most-once task ended at +%lld ms; the replacement started on %s at "
              "+%lld ms\n",
              lost.c_str(), static_cast<long long>(once_watch.ended_ms() - killed_ms), now_once->machine().c_str(),
              static_cast<long long>(now_once->started_ms() - killed_ms));

  // (c) The ordinary task on the lost machine ran on all along (the
  // default): it is still the same process now that the at-most-once
  // task's replacement runs, well after the machine was marked down.
  EXPECT_EQ(plain_watch.ended_ms(), 0) << "the ordinary task stopped while its agent was down";
  EXPECT_TRUE(harness::ProcessAlive(*plain_proc));
  auto machine = cell_.Machine(lost);
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_EQ(machine->state(), v1::Machine::DOWN);

  // The agent comes back: the master kills the stale ordinary copy, and
  // the at-most-once task is not started there again.
  ASSERT_TRUE(cell_.RestartAgent(lost).ok()) << cell_.LogTails();
  ASSERT_TRUE(Eventually([&] { return plain_watch.ended_ms() > 0; }, 60s))
      << "the stale copy of the ordinary task was never killed\n" << cell_.LogTails();
  plain = cell_.WaitTasks(
      "plain", [](const auto& r) { return Active(TaskAt(r, 0)) && Active(TaskAt(r, 1)); }, "all active again");
  for (const auto& t : plain.tasks()) EXPECT_NE(t.pid(), old_plain.pid()) << Summarize(plain);
  once = cell_.WaitTasks("once", [](const auto& r) { return Active(TaskAt(r, 0)); }, "still active");
  EXPECT_EQ(TaskAt(once, 0)->pid(), now_once->pid()) << Summarize(once);
  // No process of the old at-most-once run came back on the lost machine.
  for (const harness::ProcInfo& p : harness::ProcessesUnder(cell_.AgentRoot(lost))) {
    EXPECT_FALSE(absl::StrContains(p.cwd, "/runs/alice.once.")) << "pid " << p.pid << " in " << p.cwd;
  }
}

}  // namespace
}  // namespace herd
