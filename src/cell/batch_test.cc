// Jobs that wait for others (after:) and scheduled jobs' runs, in the
// cell state machine: JobReleased and ScheduleTriggered, and the decisions
// StepDependencies takes from the state.
#include "cell/batch.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "cell/job_update.h"
#include "testing/builders.h"

namespace herd::cell {
namespace {

using namespace herd::testing;  // NOLINT
using v1::Event;

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override { Apply(Register(MachineBuilder("m1").Cpu(8000).Build())); }
  void Apply(v1::Mutation m) {
    if (m.time_ms() == 0) m.set_time_ms(5000);
    absl::Status st = state_.Apply(m);
    ASSERT_TRUE(st.ok()) << st << "\n" << m.ShortDebugString();
    absl::Status inv = state_.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv;
    log_.push_back(m);
  }
  absl::Status Try(const v1::Mutation& m) {
    v1::CellSnapshot before = state_.ToSnapshot();
    absl::Status st = state_.Apply(m);
    if (!st.ok()) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, state_.ToSnapshot()));
    }
    return st;
  }
  // Runs task i of `job` on m1 and has it exit with `code`.
  void RunToExit(const std::string& job, int32_t i, int32_t code) {
    Apply(Schedule(job, i, "m1"));
    Apply(Exited(Ref(job, i, state_.FindTask(job, i)->incarnation()), code));
  }
  // Applies what the batch controller would decide about dependencies.
  int Step() {
    std::vector<v1::Mutation> ms = StepDependencies(state_);
    for (v1::Mutation& m : ms) Apply(m);
    return static_cast<int>(ms.size());
  }
  bool Queued(const std::string& job, int32_t i) {
    return state_.pending().contains(const_cast<Task*>(state_.FindTask(job, i)));
  }
  const Job& J(const std::string& id) { return *state_.FindJob(id); }
  // The state survives a snapshot and a replay of the log.
  void ExpectRestores() {
    auto back = CellState::FromSnapshot(state_.ToSnapshot());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back->ToSnapshot(), state_.ToSnapshot()));
    CellState replay;
    for (const v1::Mutation& m : log_) ASSERT_TRUE(replay.Apply(m).ok());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(replay.ToSnapshot(), state_.ToSnapshot()));
  }

  CellState state_;
  std::vector<v1::Mutation> log_;
};

TEST_F(BatchTest, AfterWaitsThenReleasesWhenTheDependencyFinished) {
  Apply(Submit(JobBuilder("a").Build()));
  Apply(Submit(JobBuilder("b").Tasks(2).After({"alice/a"}).Build()));
  const Job& b = J("alice/b");
  EXPECT_EQ(b.state, v1::Job::WAITING);
  EXPECT_EQ(b.pending, 2);
  EXPECT_FALSE(Queued("alice/b", 0));  // not for the scheduler yet
  EXPECT_TRUE(Queued("alice/a", 0));
  EXPECT_EQ(state_.FindTask("alice/b", 1)->last_event()->reason,
            "submitted by alice; waiting for alice/a to finish (after:)");
  EXPECT_EQ(WaitingFor(state_, b), std::vector<std::string>{"alice/a"});
  EXPECT_EQ(Step(), 0);  // a has not finished
  // Released by hand before a finished: refused.
  v1::Mutation early;
  early.mutable_job_released()->set_job("alice/b");
  EXPECT_EQ(Try(early).code(), absl::StatusCode::kFailedPrecondition);
  Apply(Schedule("alice/a", 0, "m1"));
  EXPECT_EQ(Step(), 0);  // running is not finished
  Apply(Exited(Ref("alice/a", 0, 1), 0));
  EXPECT_EQ(Step(), 1);
  EXPECT_EQ(b.state, v1::Job::PENDING);
  EXPECT_TRUE(Queued("alice/b", 0));
  EXPECT_TRUE(Queued("alice/b", 1));
  EXPECT_EQ(b.last_event.reason, "released: alice/a finished");
  EXPECT_EQ(state_.FindTask("alice/b", 0)->last_event()->transition, Event::UPDATE);
  EXPECT_TRUE(WaitingFor(state_, b).empty());
  EXPECT_EQ(Step(), 0);  // released once
  ExpectRestores();
}

TEST_F(BatchTest, AfterFailsTheJobWhenADependencyFailed) {
  Apply(Submit(JobBuilder("a").Build()));
  Apply(Submit(JobBuilder("ok").Build()));
  Apply(Submit(JobBuilder("b").Tasks(2).After({"alice/ok", "alice/a"}).Build()));
  RunToExit("alice/a", 0, 3);
  // ok has not finished, but a failed: b fails now.
  EXPECT_EQ(Step(), 1);
  const Job& b = J("alice/b");
  EXPECT_EQ(b.state, v1::Job::DEAD);
  const std::string why = "dependency alice/a failed: task 0: exited with code 3";
  const Task& t = *state_.FindTask("alice/b", 1);
  EXPECT_EQ(t.state(), v1::Task::DEAD);
  EXPECT_EQ(t.last_event()->transition, Event::FAIL);
  EXPECT_EQ(t.last_event()->reason.substr(0, why.size()), why) << t.last_event()->reason;
  EXPECT_EQ(b.last_event.transition, Event::FAIL);
  EXPECT_EQ(b.last_event.reason, t.last_event()->reason);
  EXPECT_TRUE(state_.Usage("alice", Band::kBatch).cpu_millis == 100);  // only ok's task counts
  ExpectRestores();
}

TEST_F(BatchTest, AKilledDependencyFailsItsDependents) {
  Apply(Submit(JobBuilder("a").Build()));
  Apply(Submit(JobBuilder("b").After({"alice/a"}).Build()));
  Apply(Submit(JobBuilder("c").After({"alice/b"}).Build()));
  Apply(Kill("alice/a", "killed by alice"));
  EXPECT_EQ(Step(), 1);  // b fails
  EXPECT_EQ(J("alice/b").last_event.reason, "dependency alice/a failed: it was killed (killed by alice)");
  EXPECT_EQ(Step(), 1);  // then c, naming b
  EXPECT_EQ(J("alice/c").state, v1::Job::DEAD);
  EXPECT_NE(J("alice/c").last_event.reason.find("dependency alice/b failed"), std::string::npos);
}

TEST_F(BatchTest, DependenciesInTheSameSubmitAndAlreadyFinished) {
  Apply(Submit(JobBuilder("done").Build()));
  RunToExit("alice/done", 0, 0);
  Apply(Submit({JobBuilder("a").Build(), JobBuilder("b").After({"alice/a", "alice/done"}).Build()}));
  EXPECT_EQ(J("alice/b").state, v1::Job::WAITING);
  EXPECT_EQ(WaitingFor(state_, J("alice/b")), std::vector<std::string>{"alice/a"});
  RunToExit("alice/a", 0, 0);
  EXPECT_EQ(Step(), 1);
  EXPECT_EQ(J("alice/b").state, v1::Job::PENDING);
  EXPECT_EQ(J("alice/b").last_event.reason, "released: alice/a, alice/done all finished");
}

TEST_F(BatchTest, AfterMustNameExistingJobsAndNeverACycle) {
  Apply(Submit(JobBuilder("a").Build()));
  absl::Status st = Try(Submit(JobBuilder("b").After({"alice/nope"}).Build()));
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "job alice/b: after: there is no job alice/nope");
  st = Try(Submit(JobBuilder("b").After({"alice/b"}).Build()));
  EXPECT_EQ(st.message(), "job alice/b: after[0]: a job cannot wait for itself");
  st = Try(Submit(JobBuilder("b").After({"alice/a", "alice/a"}).Build()));
  EXPECT_EQ(st.message(), "job alice/b: after[1]: alice/a is listed twice");
  st = Try(Submit(JobBuilder("b").After({"a"}).Build()));
  EXPECT_EQ(st.message(), "job alice/b: after[0]: 'a' is not a job (USER/NAME)");
  // Two jobs of one submit waiting for each other.
  st = Try(Submit({JobBuilder("c").After({"alice/d"}).Build(), JobBuilder("d").After({"alice/c"}).Build()}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("a cycle: alice/"), std::string::npos) << st;
  // A dead job submitted again to wait for one that waits for it: existing
  // at submit time is not enough to rule cycles out.
  Apply(Kill("alice/a"));
  Apply(Submit(JobBuilder("w").After({"alice/a"}).Build()));  // waits: a is dead, w not released yet
  st = Try(Submit(JobBuilder("a").After({"alice/w"}).Build()));
  EXPECT_EQ(st.message(), "job alice/a: after: waiting would never end, a cycle: alice/a -> alice/w -> alice/a");
  // Waiting for a scheduled job is refused: it never finishes.
  Apply(Submit(JobBuilder("cron").Schedule("0 * * * *").Build()));
  st = Try(Submit(JobBuilder("x").After({"alice/cron"}).Build()));
  EXPECT_EQ(st.message(), "job alice/x: after: alice/cron is a scheduled job; wait for one of its runs instead");
}

TEST_F(BatchTest, AWaitingJobCanBeKilledAndUpdatedButNotItsAfter) {
  Apply(Submit(JobBuilder("a").Build()));
  Apply(Submit(JobBuilder("b").Tasks(1).After({"alice/a"}).Build()));
  // Growing a waiting job adds waiting tasks.
  v1::JobSpec next = JobBuilder("b").Tasks(3).After({"alice/a"}).Build();
  Apply(UpdateMutation(next, DiffJob(state_, &J("alice/b"), next), "grown"));
  EXPECT_EQ(J("alice/b").state, v1::Job::WAITING);
  EXPECT_FALSE(Queued("alice/b", 2));
  v1::JobSpec other = JobBuilder("b").Tasks(3).Build();
  absl::Status st = Try(UpdateMutation(other, DiffJob(state_, &J("alice/b"), other), "x"));
  EXPECT_EQ(st.message(), "job alice/b: after: cannot change while the job is live (kill it and submit it again)");
  Apply(Kill("alice/b"));
  EXPECT_EQ(J("alice/b").state, v1::Job::DEAD);
  EXPECT_EQ(Step(), 0);
  ExpectRestores();
}

TEST_F(BatchTest, AScheduledJobIsATemplateThatStartsRuns) {
  Apply(Submit(JobBuilder("nightly").Tasks(2).Schedule("0 3 * * *").Build()));
  const Job& s = J("alice/nightly");
  EXPECT_EQ(s.state, v1::Job::SCHEDULED);
  EXPECT_TRUE(s.tasks.empty());
  EXPECT_TRUE(state_.pending().empty());
  EXPECT_EQ(state_.Usage("alice", Band::kBatch).cpu_millis, 0);
  EXPECT_EQ(s.last_due_ms, 1000);  // its submit time
  Apply(Triggered("alice/nightly", 3'600'000));
  const Job& run = J("alice/nightly-3600");
  EXPECT_EQ(run.scheduled_by, "alice/nightly");
  EXPECT_EQ(run.spec.schedule(), "");
  EXPECT_EQ(run.state, v1::Job::PENDING);
  EXPECT_EQ(run.tasks.size(), 2u);
  EXPECT_EQ(state_.FindTask("alice/nightly-3600", 0)->last_event()->reason,
            "started by the schedule of alice/nightly (due 1970-01-01T01:00:00Z)");
  ASSERT_EQ(s.runs.size(), 1u);
  EXPECT_EQ(s.runs[0].outcome(), v1::ScheduledRun::STARTED);
  EXPECT_EQ(s.runs[0].job(), "alice/nightly-3600");
  EXPECT_EQ(LiveRuns(state_, s), std::vector<std::string>{"alice/nightly-3600"});
  // The same due time again, or an earlier one: refused.
  EXPECT_EQ(Try(Triggered("alice/nightly", 3'600'000)).code(), absl::StatusCode::kFailedPrecondition);
  RunToExit("alice/nightly-3600", 0, 0);
  RunToExit("alice/nightly-3600", 1, 0);
  EXPECT_EQ(s.runs[0].outcome(), v1::ScheduledRun::SUCCEEDED);
  EXPECT_EQ(s.runs[0].message(), "every task finished");
  EXPECT_GT(s.runs[0].end_ms(), 0);
  // A skipped run is recorded with its reason.
  Apply(Triggered("alice/nightly", 7'200'000, "still running"));
  EXPECT_EQ(s.runs[1].outcome(), v1::ScheduledRun::SKIPPED);
  EXPECT_EQ(s.runs[1].message(), "still running");
  EXPECT_EQ(s.last_due_ms, 7'200'000);
  ExpectRestores();
}

TEST_F(BatchTest, ReplaceKillsTheLiveRunAndFailedRunsAreRecorded) {
  Apply(Submit(JobBuilder("r").Schedule("* * * * *", v1::REPLACE).Build()));
  Apply(Triggered("alice/r", 60'000));
  Apply(Schedule("alice/r-60", 0, "m1"));
  // Only live runs of this job can be replaced.
  Apply(Submit(JobBuilder("other").Build()));
  EXPECT_EQ(Try(Triggered("alice/r", 120'000, "", {"alice/other"})).code(), absl::StatusCode::kFailedPrecondition);
  Apply(Triggered("alice/r", 120'000, "", {"alice/r-60"}));
  const Job& s = J("alice/r");
  EXPECT_EQ(J("alice/r-60").state, v1::Job::DEAD);
  EXPECT_EQ(s.runs[0].outcome(), v1::ScheduledRun::KILLED);
  EXPECT_EQ(s.runs[0].message(), "replaced by alice/r-120 (concurrency: replace)");
  EXPECT_EQ(s.runs[1].outcome(), v1::ScheduledRun::STARTED);
  RunToExit("alice/r-120", 0, 1);
  EXPECT_EQ(s.runs[1].outcome(), v1::ScheduledRun::FAILED);
  // A catch-up run says how many it stands for.
  Apply(Triggered("alice/r", 600'000, "", {}, 7));
  EXPECT_EQ(s.runs[2].message(), "catch-up run: 7 earlier due times were missed while no master led");
  ExpectRestores();
}

TEST_F(BatchTest, RunHistoryIsBoundedAndKillingTheScheduleStopsIt) {
  Apply(Submit(JobBuilder("s").Schedule("* * * * *", v1::ALLOW).Build()));
  for (int i = 1; i <= 25; ++i) Apply(Triggered("alice/s", i * 60'000));
  EXPECT_EQ(J("alice/s").runs.size(), Job::kRuns);
  EXPECT_EQ(J("alice/s").runs.front().job(), "alice/s-360");
  EXPECT_EQ(LiveRuns(state_, J("alice/s")).size(), Job::kRuns);
  Apply(Kill("alice/s"));
  EXPECT_EQ(J("alice/s").state, v1::Job::DEAD);
  EXPECT_EQ(J("alice/s-60").state, v1::Job::PENDING);  // its runs are jobs of their own
  EXPECT_EQ(Try(Triggered("alice/s", 99 * 60'000)).code(), absl::StatusCode::kFailedPrecondition);
  ExpectRestores();
}

TEST_F(BatchTest, UpdatingAScheduledJobChangesItsNextRunsOnly) {
  Apply(Submit(JobBuilder("s").Schedule("0 * * * *").Build()));
  v1::JobSpec next = JobBuilder("s").Tasks(4).Schedule("*/5 * * * *").Build();
  v1::JobDiff diff = DiffJob(state_, &J("alice/s"), next);
  EXPECT_EQ(diff.tasks_size(), 0);
  EXPECT_EQ(diff.added(), 0);
  Apply(UpdateMutation(next, diff, "updated"));
  EXPECT_EQ(J("alice/s").state, v1::Job::SCHEDULED);
  EXPECT_EQ(J("alice/s").version, 2);
  EXPECT_TRUE(J("alice/s").tasks.empty());
  Apply(Triggered("alice/s", 300'000));
  EXPECT_EQ(J("alice/s-300").tasks.size(), 4u);
  // A live scheduled job does not become a plain one by an update, nor back.
  v1::JobSpec plain = JobBuilder("s").Build();
  EXPECT_EQ(Try(UpdateMutation(plain, DiffJob(state_, &J("alice/s"), plain), "x")).code(),
            absl::StatusCode::kFailedPrecondition);
  v1::JobSpec cron = JobBuilder("s-300").Schedule("* * * * *").Build();
  EXPECT_EQ(Try(UpdateMutation(cron, DiffJob(state_, &J("alice/s-300"), cron), "x")).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(BatchTest, BatchFieldsAreChecked) {
  auto msg = [](const v1::JobSpec& s) { return std::string(CheckBatchFields(s).message()); };
  EXPECT_EQ(msg(JobBuilder("s").Schedule("61 * * * *").Build()), "schedule: minute field '61': 61 is outside 0-59");
  EXPECT_EQ(msg(JobBuilder("s").Schedule("* * * * *").After({"alice/a"}).Build()),
            "after: a scheduled job does not wait for other jobs (its runs start on schedule)");
  EXPECT_EQ(msg(JobBuilder(std::string(53, 'a')).Schedule("* * * * *").Build()),
            "name: a scheduled job's name is at most 52 characters (its runs are named NAME-<unix time>)");
  EXPECT_EQ(msg(JobBuilder("s").Schedule("", v1::ALLOW).Build()), "concurrency: only for a scheduled job (schedule:)");
  EXPECT_EQ(msg(JobBuilder("s").Schedule("", v1::CONCURRENCY_UNSPECIFIED, "UTC").Build()),
            "time_zone: only for a scheduled job (schedule:)");
  EXPECT_TRUE(CheckBatchFields(JobBuilder("s").Schedule("@daily", v1::FORBID, "Europe/Berlin").Build()).ok());
}

}  // namespace
}  // namespace herd::cell
