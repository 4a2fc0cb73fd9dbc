// The rollout controller inside a master: driven only by committed state,
// so a master recovered from the log mid-update goes on where the first
// stopped; and the rollout API (rollback, pause, resume, history).
#include "master/core/rollout/rollout_controller.h"

#include <gtest/gtest.h>

#include "master/core/testing.h"

namespace herd::master {
namespace {

using namespace herd::testing;  // NOLINT

constexpr char kWeb[] = "alice/web";

class RolloutControllerTest : public ManualMasterTest {
 protected:
  void SetUp() override { Open(); }

  // The agent reports task i's current run active, started now.
  void Serve(int32_t i) {
    const int64_t inc = Task(i).incarnation();
    v1::Mutation m;
    v1::TaskObserved* o = m.mutable_task_observed();
    o->mutable_task()->set_job(kWeb);
    o->mutable_task()->set_index(i);
    o->mutable_task()->set_incarnation(inc);
    o->set_phase(v1::Task::ACTIVE);
    o->set_pid(100 + i);
    o->set_started_ms(clock_.NowMs());
    Commit(m);
  }
  v1::Task Task(int32_t i) {
    v1::GetTaskRequest r;
    r.set_job(kWeb);
    r.set_index(i);
    auto resp = core_->jobs().GetTask(Principal::User("alice"), r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->task() : v1::Task();
  }
  v1::Job Job() {
    v1::GetJobRequest r;
    r.set_job(kWeb);
    auto resp = core_->jobs().GetJob(Principal::User("alice"), r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->job() : v1::Job();
  }
  void Submit(const v1::JobSpec& spec) {
    v1::SubmitRequest req;
    *req.add_jobs() = spec;
    auto resp = core_->jobs().Submit(Principal::User("alice"), req);
    ASSERT_TRUE(resp.ok()) << resp.status();
  }
  // Tasks on version `v`.
  int OnVersion(int64_t v) {
    int n = 0;
    for (int32_t i = 0; i < 3; ++i) n += Task(i).job_version() == v;
    return n;
  }
};

TEST_F(RolloutControllerTest, AMasterRecoveredMidUpdateGoesOnFromTheLog) {
  for (const char* m : {"m0", "m1", "m2"}) {
    AddMachine(MachineBuilder(m).Cpu(4000).Address(std::string(m) + ":1").Build());
  }
  Submit(JobBuilder("web").Tasks(3).Command({"v1"}).Build());
  for (int32_t i = 0; i < 3; ++i) {
    Commit(Schedule(kWeb, i, "m" + std::to_string(i)));
    Serve(i);
  }
  v1::JobSpec next = JobBuilder("web").Tasks(3).Command({"v2"}).Build();
  next.mutable_update()->set_max_unavailable(1);
  next.mutable_update()->set_min_healthy_time_ms(5'000);
  Submit(next);
  EXPECT_EQ(Job().rollout().state(), v1::Rollout::ROLLING);
  EXPECT_EQ(Job().rollout().outdated(), 3);

  ASSERT_EQ(*core_->StepRollouts(), 1);  // task 0
  EXPECT_EQ(OnVersion(2), 1);
  EXPECT_EQ(*core_->StepRollouts(), 0) << "task 0 is down";
  Serve(0);
  clock_.AdvanceMs(5'000);

  // The master stops; another recovers from the log and carries on.
  Failover();
  EXPECT_EQ(Job().rollout().state(), v1::Rollout::ROLLING);
  EXPECT_EQ(Job().rollout().outdated(), 2);
  ASSERT_EQ(*core_->StepRollouts(), 1);  // task 1
  EXPECT_EQ(OnVersion(2), 2);
  EXPECT_EQ(Task(1).incarnation(), 2);

  // herd pause stops it; herd resume goes on.
  v1::SetRolloutRequest pause;
  pause.set_job("web");
  pause.set_action(v1::SetRolloutRequest::PAUSE);
  ASSERT_TRUE(core_->rollouts().SetRollout(Principal::User("alice"), pause).ok());
  Serve(1);
  clock_.AdvanceMs(5'000);
  EXPECT_EQ(*core_->StepRollouts(), 0) << "paused";
  EXPECT_EQ(Job().rollout().state(), v1::Rollout::PAUSED);
  v1::SetRolloutRequest resume = pause;
  resume.set_action(v1::SetRolloutRequest::RESUME);
  ASSERT_TRUE(core_->rollouts().SetRollout(Principal::User("alice"), resume).ok());
  ASSERT_EQ(*core_->StepRollouts(), 1);  // task 2
  Serve(2);
  clock_.AdvanceMs(5'000);
  ASSERT_EQ(*core_->StepRollouts(), 1);  // done
  EXPECT_EQ(Job().rollout().state(), v1::Rollout::DONE);
  EXPECT_EQ(core_->rollouts().SetRollout(Principal::User("alice"), pause).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "nothing left to pause";

  // Someone else may not roll alice's job back; she may.
  v1::RollbackRequest back;
  back.set_job(kWeb);
  EXPECT_EQ(core_->rollouts().Rollback(Principal::User("bob"), back).status().code(),
            absl::StatusCode::kOk) << "AllowAll: the policy itself is tested in policy_test";
  v1::HistoryRequest h;
  h.set_job(kWeb);
  auto history = core_->rollouts().History(Principal::User("alice"), h);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->versions_size(), 3);
  EXPECT_EQ(history->versions(2).spec().task().command(0), "v1");
  EXPECT_TRUE(history->rollout().rollback());
  back.set_to_version(9);
  EXPECT_EQ(core_->rollouts().Rollback(Principal::User("alice"), back).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::master
