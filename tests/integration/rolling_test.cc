// Rolling updates on a real cell (issue #14 item 2): a 4-task service
// updated with `max_unavailable: 1` never has more than one task down (as
// the master's job status says, sampled every 100 ms) and ends with every
// task on the new version; a version whose command crashes stops the
// update, which rolls back by itself (auto_rollback) to the old spec, every
// task running it; herd history lists the versions, herd rollback --to, herd
// pause and herd resume do what they say. Real master, agents and task
// processes, driven by the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

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

constexpr int kTasks = 4;

// Four tasks running `command` (one shell line), rolled one at a time.
std::string Spec(const std::string& command) {
  return absl::StrCat("name: web\nuser: alice\npriority: production\ntasks: ", kTasks, "\n",
                      "command: [\"/bin/sh\", \"-c\", \"", command, "\"]\n",
                      "resources: {cpu: 100m, memory: 32Mi}\ngrace_period: 1s\n",
                      "restart: {policy: on-failure, backoff: 200ms}\n",
                      "update: {max_unavailable: 1, min_healthy_time: 1s, auto_rollback: true, "
                      "progress_deadline: 1m}\n");
}

class RollingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  v1::Job Job() {
    absl::StatusOr<v1::Job> j = cell_.Job("alice/web");
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : v1::Job();
  }

  // Samples the job's tasks every 100 ms until `done` holds (or `timeout`):
  // the most tasks seen down at once (not RUNNING and active).
  template <typename Done>
  int WatchUntil(Done&& done, std::chrono::seconds timeout, bool* reached) {
    int most = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    *reached = false;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto next = std::chrono::steady_clock::now() + 100ms;
      auto tasks = cell_.Tasks("web");
      if (tasks.ok()) {
        ++samples_;
        int down = 0;
        for (const v1::Task& t : tasks->tasks()) {
          down += !(t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE);
        }
        if (down > most) {
          most = down;
          last_ = Summarize(*tasks);
        }
        if (done(*tasks)) {
          *reached = true;
          return most;
        }
      }
      std::this_thread::sleep_until(next);  // the sampling period, not a wait for an event
    }
    return most;
  }

  // Every task RUNNING, active and on `version`.
  static bool AllOn(const v1::ListTasksResponse& tasks, int64_t version) {
    if (tasks.tasks_size() != kTasks) return false;
    return std::all_of(tasks.tasks().begin(), tasks.tasks().end(), [&](const v1::Task& t) {
      return t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE && t.job_version() == version;
    });
  }

  Cell cell_;
  std::string last_;  // the tasks when the most were down
  int samples_ = 0;
};

TEST_F(RollingTest, OneTaskDownAtATimeThenACrashingVersionRollsBackByItself) {
  RunResult r = cell_.Herd({"submit", cell_.WriteSpec("v1.yaml", Spec("echo v1; sleep 3600"))});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_EQ(cell_.WaitRunning("web", kTasks).size(), static_cast<size_t>(kTasks)) << cell_.LogTails();

  // Version 2: a new command, rolled one task at a time.
  r = cell_.Herd({"submit", cell_.WriteSpec("v2.yaml", Spec("echo v2; sleep 3600"))});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  bool reached = false;
  int most = WatchUntil(
      [&](const v1::ListTasksResponse& t) { return AllOn(t, 2) && Job().rollout().state() == v1::Rollout::DONE; },
      120s, &reached);
  ASSERT_TRUE(reached) << Summarize(*cell_.Tasks("web")) << "\n" << Job().rollout().ShortDebugString() << "\n"
                       << cell_.LogTails();
  EXPECT_LE(most, 1) << "at most one task down at once; the worst moment:\n" << last_;
  std::printf("rolled to version 2 in %d samples, at most %d task(s) down at once\n", samples_, most);
  auto after = cell_.Tasks("web");
  ASSERT_TRUE(after.ok()) << after.status();
  for (const v1::Task& t : after->tasks()) EXPECT_EQ(t.incarnation(), 2) << "restarted once";

  // Version 3 crashes: the first task restarted into it exits, the rollout
  // fails and goes back by itself to version 2's spec (version 4).
  r = cell_.Herd({"submit", cell_.WriteSpec("v3.yaml", Spec("echo v3; exit 3"))});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  most = WatchUntil(
      [&](const v1::ListTasksResponse& t) {
        v1::Job j = Job();
        return j.version() == 4 && j.rollout().state() == v1::Rollout::DONE && AllOn(t, 4);
      },
      120s, &reached);
  ASSERT_TRUE(reached) << Summarize(*cell_.Tasks("web")) << "\n" << Job().ShortDebugString() << "\n"
                       << cell_.LogTails();
  EXPECT_LE(most, 1) << "the worst moment:\n" << last_;
  std::printf("rolled back to version 2's spec (version 4) in %d samples in all, at most %d down at once\n",
              samples_, most);
  v1::Job j = Job();
  EXPECT_TRUE(j.rollout().rollback());
  EXPECT_TRUE(absl::StrContains(j.spec().task().command(2), "echo v2")) << j.spec().ShortDebugString();

  // herd history: the four versions, the third the one that failed.
  auto history = cell_.HerdJson<v1::HistoryResponse>({"history", "web"});
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->versions_size(), 4);
  EXPECT_TRUE(absl::StrContains(history->versions(2).spec().task().command(2), "exit 3"));
  EXPECT_TRUE(absl::StrContains(history->versions(3).reason(), "rolled back automatically")) <<
      history->versions(3).reason();
  r = cell_.Herd({"history", "web"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "rolled back automatically")) << r.out;

  // Only alice (or an admin) rolls her job back.
  r = cell_.HerdAs("bob", {"rollback", "alice/web", "--to", "1"});
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "may not rollback-job")) << r.Describe();
  // herd rollback --to 1, paused on the way and resumed: version 5, version
  // 1's spec, rolled one task at a time like any update.
  r = cell_.Herd({"rollback", "web", "--to", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "rolled back alice/web (version 5")) << r.out;
  r = cell_.Herd({"pause", "web"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "paused")) << r.out;
  EXPECT_EQ(Job().rollout().state(), v1::Rollout::PAUSED);
  r = cell_.Herd({"resume", "web"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  most = WatchUntil(
      [&](const v1::ListTasksResponse& t) { return AllOn(t, 5) && Job().rollout().state() == v1::Rollout::DONE; },
      120s, &reached);
  ASSERT_TRUE(reached) << Summarize(*cell_.Tasks("web")) << "\n" << Job().rollout().ShortDebugString();
  EXPECT_LE(most, 1) << "the worst moment:\n" << last_;
  EXPECT_TRUE(absl::StrContains(Job().spec().task().command(2), "echo v1"));
  r = cell_.Herd({"pause", "web"});
  EXPECT_NE(r.exit_code, 0) << "nothing to pause: " << r.Describe();
}

}  // namespace
}  // namespace herd
