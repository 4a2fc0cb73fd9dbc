// Dependencies and scheduled jobs on a real cell (issue #14 item 4): a job
// with `after:` is not placed while the job it waits for runs, starts once
// that one finished, and fails (naming it) when it failed; herd submit
// points at the line of a dependency that does not exist. A scheduled job
// (`schedule: "* * * * *"`) starts a run at the next minute, which runs to
// completion and shows in herd runs. Real master, agents and task
// processes, driven by the CLI.
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

std::string Spec(const std::string& name, const std::string& command, const std::string& extra = "") {
  return absl::StrCat("name: ", name, "\nuser: alice\n", extra, "command: [\"/bin/sh\", \"-c\", \"", command,
                      "\"]\nresources: {cpu: 100m, memory: 32Mi}\ngrace_period: 1s\nrestart: {policy: never}\n");
}

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }
  void Submit(const std::string& file, const std::string& yaml) {
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec(file, yaml)});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  // The job (live or dead) and its tasks, as herd status --json says.
  v1::GetJobResponse Status(const std::string& job) {
    absl::StatusOr<v1::GetJobResponse> s = cell_.HerdJson<v1::GetJobResponse>({"status", job});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::GetJobResponse();
  }
  bool Dead(const std::string& job) { return Status(job).job().state() == v1::Job::DEAD; }

  Cell cell_;
};

TEST_F(BatchTest, AfterStartsAJobOnlyOnceTheOtherFinishedAndFailsItWhenTheOtherFailed) {
  // fetch runs until the test lets it finish (a file appears).
  const std::string gate = cell_.dir().Sub("gate");
  Submit("fetch.yaml", Spec("fetch", absl::StrCat("while [ ! -e ", gate, " ]; do sleep 0.1; done; echo fetched")));
  Submit("train.yaml", Spec("train", "echo trained", "tasks: 2\nafter: [fetch]\n"));
  ASSERT_EQ(cell_.WaitRunning("fetch", 1).size(), 1u) << cell_.LogTails();
  // A job submitted after train, with nothing to wait for, gets placed:
  // the scheduler has passed over train since, and left it alone.
  Submit("probe.yaml", Spec("probe", "sleep 3600"));
  ASSERT_EQ(cell_.WaitRunning("probe", 1).size(), 1u) << cell_.LogTails();
  v1::GetJobResponse train = Status("train");
  EXPECT_EQ(train.job().state(), v1::Job::WAITING);
  ASSERT_EQ(train.job().waiting_for_size(), 1);
  EXPECT_EQ(train.job().waiting_for(0), "alice/fetch");
  for (const v1::Task& t : train.tasks()) {
    EXPECT_EQ(t.state(), v1::Task::PENDING);
    EXPECT_EQ(t.incarnation(), 0) << "never placed";
  }
  RunResult why = cell_.Herd({"why", "train"});
  EXPECT_TRUE(absl::StrContains(why.out, "waits for alice/fetch to finish (after:)")) << why.Describe();

  // fetch finishes: train is released, placed, and finishes too.
  cell_.WriteSpec("gate", "");
  ASSERT_TRUE(Eventually([&] { return Dead("train"); }, 60s)) << Status("train").ShortDebugString() << "\n"
                                                             << cell_.LogTails();
  v1::GetJobResponse fetch = Status("fetch");
  EXPECT_EQ(fetch.job().last_event().transition(), v1::Event::FINISH);
  train = Status("train");
  EXPECT_EQ(train.job().last_event().transition(), v1::Event::FINISH) << train.ShortDebugString();
  for (const v1::Task& t : train.tasks()) {
    // Placed (SCHEDULE) only after fetch ended, and released before that.
    int64_t placed = 0, released = 0;
    for (const v1::Event& e : t.history()) {
      if (e.transition() == v1::Event::SCHEDULE) placed = e.time_ms();
      if (e.transition() == v1::Event::UPDATE && absl::StartsWith(e.reason(), "released: alice/fetch")) {
        released = e.time_ms();
      }
    }
    EXPECT_GE(released, fetch.job().last_event().time_ms()) << t.ShortDebugString();
    EXPECT_GE(placed, released) << "task " << t.index() << " placed before it was released: " << t.ShortDebugString();
    EXPECT_EQ(t.history().rbegin()->transition(), v1::Event::FINISH) << t.ShortDebugString();
  }

  // A dependency that fails fails the job waiting for it, naming it.
  Submit("bad.yaml", Spec("bad", "exit 3"));
  Submit("report.yaml", Spec("report", "echo never", "after: [bad]\n"));
  ASSERT_TRUE(Eventually([&] { return Dead("report"); }, 60s)) << cell_.LogTails();
  v1::GetJobResponse report = Status("report");
  EXPECT_EQ(report.job().last_event().transition(), v1::Event::FAIL);
  EXPECT_TRUE(absl::StartsWith(report.job().last_event().reason(),
                               "dependency alice/bad failed: task 0: exited with code 3"))
      << report.job().last_event().reason();
  EXPECT_EQ(report.tasks(0).incarnation(), 0) << "never placed";

  // A job named in after: that does not exist: refused, at its line.
  RunResult r = cell_.Herd({"submit", cell_.WriteSpec("typo.yaml", Spec("deploy", "true", "after: [trian]\n"))});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "typo.yaml:3:9: after[0]: there is no job alice/trian")) << r.Describe();
}

TEST_F(BatchTest, AScheduledJobStartsARunWhenDue) {
  Submit("tick.yaml", Spec("tick", "echo tick", "schedule: \"* * * * *\"\nconcurrency: forbid\n"));
  absl::StatusOr<v1::Job> tick = cell_.HerdJson<v1::Job>({"runs", "tick"});
  ASSERT_TRUE(tick.ok()) << tick.status();
  EXPECT_EQ(tick->state(), v1::Job::SCHEDULED);
  const int64_t due = tick->next_due_ms();
  ASSERT_GT(due, 0);
  EXPECT_EQ(due % 60'000, 0) << "on a minute";
  const std::string run = absl::StrCat("alice/tick-", due / 1000);
  // The next minute starts it (at most 60 s away); it runs and finishes.
  ASSERT_TRUE(Eventually(
      [&] {
        tick = cell_.HerdJson<v1::Job>({"runs", "tick"});
        return tick.ok() && tick->runs_size() > 0 && tick->runs(0).outcome() == v1::ScheduledRun::SUCCEEDED;
      },
      100s))
      << (tick.ok() ? tick->ShortDebugString() : tick.status().ToString()) << "\n" << cell_.LogTails();
  EXPECT_EQ(tick->runs(0).due_ms(), due);
  EXPECT_EQ(tick->runs(0).job(), run);
  EXPECT_GE(tick->runs(0).time_ms(), due) << "not before it was due";
  EXPECT_GT(tick->next_due_ms(), due);
  v1::GetJobResponse r = Status(run);
  EXPECT_EQ(r.job().scheduled_by(), "alice/tick");
  EXPECT_EQ(r.job().last_event().transition(), v1::Event::FINISH);
  RunResult table = cell_.Herd({"runs", "tick"});
  EXPECT_EQ(table.exit_code, 0) << table.Describe();
  EXPECT_TRUE(absl::StrContains(table.out, run + "  succeeded")) << table.out;
  // herd kill stops the schedule.
  EXPECT_EQ(cell_.Herd({"kill", "tick"}).exit_code, 0);
  tick = cell_.HerdJson<v1::Job>({"runs", "tick"});
  ASSERT_TRUE(tick.ok()) << tick.status();
  EXPECT_EQ(tick->state(), v1::Job::DEAD);
}

}  // namespace
}  // namespace herd
