// The batch controller inside a master, on a manual clock: dependent jobs
// released or failed, scheduled jobs' runs started on their cron schedule
// (time zones, daylight saving, concurrency policies, quota, catch-up
// after no leader was up), all from committed state, so a master
// recovered from the log carries on.
#include "master/core/batch/batch_controller.h"

#include <gtest/gtest.h>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "master/core/testing.h"

namespace herd::master {
namespace {

using namespace herd::testing;  // NOLINT

int64_t UtcMs(int y, int mo, int d, int h, int mi) {
  return absl::ToUnixMillis(absl::FromCivil(absl::CivilMinute(y, mo, d, h, mi), absl::UTCTimeZone()));
}

class BatchControllerTest : public ManualMasterTest {
 protected:
  void SetUp() override {
    clock_.SetNowMs(UtcMs(2025, 6, 1, 10, 7));
    Open();
    AddMachine(MachineBuilder("m0").Cpu(8000).Address("m0:1").Build());
  }
  absl::Status Submit(const v1::JobSpec& spec) {
    v1::SubmitRequest req;
    *req.add_jobs() = spec;
    return core_->jobs().Submit(Principal::User("alice"), req).status();
  }
  v1::GetJobResponse Get(const std::string& job) {
    v1::GetJobRequest r;
    r.set_job(job);
    auto resp = core_->jobs().GetJob(Principal::User("alice"), r);
    EXPECT_TRUE(resp.ok()) << job << ": " << resp.status();
    return resp.ok() ? *resp : v1::GetJobResponse();
  }
  v1::Job::State State(const std::string& job) { return Get(job).job().state(); }
  // Places task i of `job` and has it exit with `code`.
  void RunToExit(const std::string& job, int32_t i, int32_t code) {
    Commit(Schedule(job, i, "m0"));
    Commit(Exited(Ref(job, i, Get(job).tasks(i).incarnation()), code));
  }
  int Step() {
    absl::StatusOr<int> n = core_->StepBatch();
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }
  std::string RunOf(const char* name, int64_t due_ms) { return absl::StrCat("alice/", name, "-", due_ms / 1000); }
};

TEST_F(BatchControllerTest, AfterReleasesOnSuccessAndFailsOnFailureAcrossAFailover) {
  ASSERT_TRUE(Submit(JobBuilder("build").Build()).ok());
  ASSERT_TRUE(Submit(JobBuilder("test").Tasks(2).After({"build"}).Build()).ok());  // bare name: alice's
  EXPECT_EQ(Get("test").job().spec().after(0), "alice/build");
  EXPECT_EQ(State("test"), v1::Job::WAITING);
  EXPECT_EQ(Get("test").job().waiting_for(0), "alice/build");
  v1::WhyRequest why;
  why.set_job("test");
  EXPECT_EQ(core_->jobs().Why(Principal::User("alice"), why)->note(),
            "the job waits for alice/build to finish (after:); its tasks are placed once it has");
  EXPECT_EQ(Step(), 0);
  RunToExit("alice/build", 0, 0);
  Failover();  // the new leader sees build finished in the log
  EXPECT_EQ(Step(), 1);
  EXPECT_EQ(State("test"), v1::Job::PENDING);
  EXPECT_EQ(Get("test").job().last_event().reason(), "released: alice/build finished");

  // A failed dependency fails the dependents, naming it.
  ASSERT_TRUE(Submit(JobBuilder("deploy").After({"test"}).Build()).ok());
  RunToExit("alice/test", 0, 0);
  RunToExit("alice/test", 1, 2);
  EXPECT_EQ(Step(), 1);
  v1::GetJobResponse deploy = Get("deploy");
  EXPECT_EQ(deploy.job().state(), v1::Job::DEAD);
  EXPECT_EQ(deploy.tasks(0).state(), v1::Task::DEAD);
  const std::string want = "dependency alice/test failed: task 1: exited with code 2";
  EXPECT_EQ(deploy.tasks(0).history().rbegin()->reason().substr(0, want.size()), want);
}

TEST_F(BatchControllerTest, SubmitRefusesMissingDependenciesAndBadSchedules) {
  absl::Status st = Submit(JobBuilder("test").After({"nope"}).Build());
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "job alice/test: after: there is no job alice/nope");
  st = Submit(JobBuilder("s").Schedule("*/15 * * * *", v1::FORBID, "Mars/Olympus").Build());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("time_zone: unknown time zone 'Mars/Olympus'"), std::string::npos) << st;
  st = Submit(JobBuilder("s").Schedule("*/15 * * *").Build());
  EXPECT_NE(st.message().find("schedule: '*/15 * * *' has 4 fields"), std::string::npos) << st;
}

TEST_F(BatchControllerTest, RunsStartWhenDueAndForbidSkipsWhileOneIsLive) {
  ASSERT_TRUE(Submit(JobBuilder("s").Tasks(2).Schedule("*/15 * * * *", v1::FORBID, "Europe/Berlin").Build()).ok());
  EXPECT_EQ(State("s"), v1::Job::SCHEDULED);
  const int64_t t1 = UtcMs(2025, 6, 1, 10, 15);
  EXPECT_EQ(Get("s").job().next_due_ms(), t1);
  EXPECT_EQ(Step(), 0);
  clock_.SetNowMs(t1 - 1);
  EXPECT_EQ(Step(), 0) << "not due yet";
  clock_.SetNowMs(t1 + 300);
  EXPECT_EQ(Step(), 1);
  EXPECT_EQ(Step(), 0) << "a due time starts one run";
  const std::string run1 = RunOf("s", t1);
  EXPECT_EQ(State(run1), v1::Job::PENDING);
  EXPECT_EQ(Get(run1).tasks_size(), 2);
  EXPECT_EQ(Get(run1).job().scheduled_by(), "alice/s");

  // The next due time, the first run still live: skipped.
  const int64_t t2 = UtcMs(2025, 6, 1, 10, 30);
  clock_.SetNowMs(t2);
  EXPECT_EQ(Step(), 1);
  v1::Job s = Get("s").job();
  ASSERT_EQ(s.runs_size(), 2);
  EXPECT_EQ(s.runs(1).outcome(), v1::ScheduledRun::SKIPPED);
  EXPECT_EQ(s.runs(1).message(), "the previous run " + run1 + " is still live (concurrency: forbid)");
  EXPECT_EQ(s.runs(1).due_ms(), t2);

  // Once it finished, the next one starts.
  RunToExit(run1, 0, 0);
  RunToExit(run1, 1, 0);
  EXPECT_EQ(Get("s").job().runs(0).outcome(), v1::ScheduledRun::SUCCEEDED);
  const int64_t t3 = UtcMs(2025, 6, 1, 10, 45);
  clock_.SetNowMs(t3);
  EXPECT_EQ(Step(), 1);
  EXPECT_EQ(State(RunOf("s", t3)), v1::Job::PENDING);
}

TEST_F(BatchControllerTest, ReplaceKillsTheLiveRunAllowKeepsBoth) {
  ASSERT_TRUE(Submit(JobBuilder("r").Schedule("0 * * * *", v1::REPLACE).Build()).ok());
  ASSERT_TRUE(Submit(JobBuilder("a").Schedule("0 * * * *", v1::ALLOW).Build()).ok());
  const int64_t t1 = UtcMs(2025, 6, 1, 11, 0), t2 = UtcMs(2025, 6, 1, 12, 0);
  clock_.SetNowMs(t1);
  EXPECT_EQ(Step(), 2);
  Commit(Schedule(RunOf("r", t1), 0, "m0"));
  clock_.SetNowMs(t2);
  EXPECT_EQ(Step(), 2);
  EXPECT_EQ(State(RunOf("r", t1)), v1::Job::DEAD);
  EXPECT_EQ(Get(RunOf("r", t1)).job().last_event().reason(),
            "replaced by " + RunOf("r", t2) + " (concurrency: replace)");
  EXPECT_EQ(Get("r").job().runs(0).outcome(), v1::ScheduledRun::KILLED);
  EXPECT_EQ(State(RunOf("r", t2)), v1::Job::PENDING);
  EXPECT_EQ(State(RunOf("a", t1)), v1::Job::PENDING);
  EXPECT_EQ(State(RunOf("a", t2)), v1::Job::PENDING);
}

TEST_F(BatchControllerTest, MissedRunsWhileNoLeaderBecomeOneCatchUpRun) {
  ASSERT_TRUE(Submit(JobBuilder("c").Schedule("*/15 * * * *").Build()).ok());
  core_->Stop();
  core_.reset();
  // Two hours without a leader: 10:15 .. 12:00 were due (eight times).
  clock_.SetNowMs(UtcMs(2025, 6, 1, 12, 7));
  Open();
  EXPECT_EQ(Step(), 1);
  EXPECT_EQ(Step(), 0);
  v1::Job c = Get("c").job();
  ASSERT_EQ(c.runs_size(), 1);
  EXPECT_EQ(c.runs(0).due_ms(), UtcMs(2025, 6, 1, 12, 0));
  EXPECT_EQ(c.runs(0).message(), "catch-up run: 7 earlier due times were missed while no master led");
  EXPECT_EQ(c.next_due_ms(), UtcMs(2025, 6, 1, 12, 15));
}

TEST_F(BatchControllerTest, DaylightSavingTimeInTheJobsZone) {
  // 02:30 in Berlin does not exist on 2025-03-30: the run starts at the
  // change (03:00 CEST, 01:00 UTC), once.
  clock_.SetNowMs(UtcMs(2025, 3, 29, 12, 0));
  ASSERT_TRUE(Submit(JobBuilder("d").Schedule("30 2 * * *", v1::ALLOW, "Europe/Berlin").Build()).ok());
  clock_.SetNowMs(UtcMs(2025, 3, 30, 0, 59));
  EXPECT_EQ(Step(), 0);
  clock_.SetNowMs(UtcMs(2025, 3, 30, 1, 0));
  EXPECT_EQ(Step(), 1);
  EXPECT_EQ(Get("d").job().runs(0).job(), RunOf("d", UtcMs(2025, 3, 30, 1, 0)));
  clock_.SetNowMs(UtcMs(2025, 3, 30, 23, 0));
  EXPECT_EQ(Step(), 0);
  EXPECT_EQ(Get("d").job().next_due_ms(), UtcMs(2025, 3, 31, 0, 30));  // 02:30 CEST
}

TEST_F(BatchControllerTest, ARunOverQuotaIsSkippedWithTheReason) {
  Commit(SetQuota("alice", "batch", 150, 1LL << 30));
  ASSERT_TRUE(Submit(JobBuilder("q").Tasks(2).Schedule("0 * * * *", v1::ALLOW).Build()).ok())
      << "a scheduled job itself uses no quota";
  clock_.SetNowMs(UtcMs(2025, 6, 1, 11, 0));
  EXPECT_EQ(Step(), 1);
  v1::Job q = Get("q").job();
  ASSERT_EQ(q.runs_size(), 1);
  EXPECT_EQ(q.runs(0).outcome(), v1::ScheduledRun::SKIPPED);
  EXPECT_NE(q.runs(0).message().find("over quota: user alice asks 200m cpu"), std::string::npos)
      << q.runs(0).message();
}

}  // namespace
}  // namespace herd::master
