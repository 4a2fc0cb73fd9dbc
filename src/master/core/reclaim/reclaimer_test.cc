// Reclamation inside a master, on a manual clock: poll replies' usage
// becomes reservations the leader commits; they let non-production work in
// where production leaves CPU idle; a rise is committed at once; a new
// placement starts from the limit; a master that takes over starts from the
// cell's reservations.
#include "master/core/reclaim/reclaimer.h"

#include <gtest/gtest.h>

#include "master/core/testing.h"
#include "sched/scheduler.h"

namespace herd::master {
namespace {

using namespace herd::testing;  // NOLINT

constexpr int64_t kSec = 1000;

class ReclaimerTest : public ManualMasterTest {
 protected:
  void SetUp() override {
    clock_.SetNowMs(1'700'000'000'000);
    MasterOptions o;
    o.reclaim.enabled = true;
    o.reclaim.estimator.kind = cell::EstimatorOptions::Kind::kBorg;
    o.reclaim.estimator.margin = 0.25;
    o.reclaim.estimator.half_life_ms = 10 * kSec;
    o.reclaim.estimator.startup_ms = 30 * kSec;
    Open(o);
    AddMachine(MachineBuilder("m0").Cpu(2000).Memory(4LL << 30).Address("m0:1").Build());
  }
  const v1::Task Task(const std::string& job, int32_t i) {
    return core_->committer().Read([&](const cell::CellState& s) { return s.FindTask(job, i)->ToProto(); });
  }
  // The agent reports `cpu` millicores and `mem` bytes in use, sampled now.
  void Report(const std::string& job, int32_t i, int64_t cpu, int64_t mem) {
    v1::PollResponse reply;
    v1::RunStatus* r = reply.add_runs();
    r->mutable_ref()->set_job(job);
    r->mutable_ref()->set_index(i);
    r->mutable_ref()->set_incarnation(Task(job, i).incarnation());
    r->set_desired(true);
    r->mutable_usage()->set_cpu_millis(cpu);
    r->mutable_usage()->set_memory_working_set_bytes(mem);
    r->mutable_usage()->set_sampled_ms(clock_.NowMs());
    core_->reclaimer().Observe(reply);
  }
  // `seconds` of samples, one a second, then one reclamation pass.
  void Run(const std::string& job, int32_t i, int64_t cpu, int64_t mem, int seconds) {
    for (int s = 0; s < seconds; ++s) {
      clock_.AdvanceMs(kSec);
      Report(job, i, cpu, mem);
    }
    ASSERT_TRUE(core_->StepReclaim().ok());
  }
  // Whether a pass of the scheduler would place `job`'s task 0.
  bool Fits(const std::string& job) {
    return core_->committer().Read([&](const cell::CellState& s) {
      sched::Scheduler sched{sched::Options{}};
      sched::PassResult r = sched.RunPass(s, clock_.NowMs());
      for (const auto& p : r.proposals) {
        if (p.job() == job) return true;
      }
      return false;
    });
  }
};

TEST_F(ReclaimerTest, IdleProductionCpuIsLentToBatchAndTakenBackAtOnce) {
  Commit(Submit(JobBuilder("web").Priority(200).Cpu(1500).Memory(1LL << 30).Build()));
  Commit(Schedule("alice/web", 0, "m0"));
  Commit(Submit(JobBuilder("crunch").Priority(100).Cpu(1000).Memory(256LL << 20).Build()));
  EXPECT_FALSE(Fits("alice/crunch"));  // 1.5 of 2 cores held by web's limit

  // Startup: the reservation stays at the limit.
  Run("alice/web", 0, 200, 200LL << 20, 20);
  EXPECT_FALSE(Task("alice/web", 0).has_reservation());
  // Past it, it decays toward 250m (200m + 25%).
  Run("alice/web", 0, 200, 200LL << 20, 60);
  v1::Resources r = Task("alice/web", 0).reservation();
  EXPECT_LT(r.cpu_millis(), 400);
  EXPECT_GE(r.cpu_millis(), 250);
  EXPECT_LT(r.memory_bytes(), 300LL << 20);
  EXPECT_TRUE(Fits("alice/crunch"));  // non-prod counts web's reservation, not its limit
  // Production is still placed against limits.
  Commit(Submit(JobBuilder("api").Priority(200).Cpu(1000).Memory(256LL << 20).Build()));
  EXPECT_FALSE(Fits("alice/api"));

  // Usage rises: the next pass raises the reservation to it + margin.
  Run("alice/web", 0, 1100, 200LL << 20, 1);
  EXPECT_EQ(Task("alice/web", 0).reservation().cpu_millis(), 1375);
  EXPECT_FALSE(Fits("alice/crunch"));
}

TEST_F(ReclaimerTest, SmallMovesDownAreNotCommittedAndANewRunStartsFromItsLimit) {
  Commit(Submit(JobBuilder("web").Priority(200).Cpu(1000).Memory(1LL << 30).Build()));
  Commit(Schedule("alice/web", 0, "m0"));
  Run("alice/web", 0, 100, 100LL << 20, 200);
  const int64_t settled = Task("alice/web", 0).reservation().cpu_millis();
  EXPECT_LE(settled, 180);
  const int64_t revision = core_->committer().revision();
  Run("alice/web", 0, 100, 100LL << 20, 5);
  EXPECT_EQ(core_->committer().revision(), revision) << "nothing moved by 5% of the limit";

  // Lost and placed again: the cell forgets the estimate; so does the master.
  Commit(Lost(Ref("alice/web", 0, Task("alice/web", 0).incarnation())));
  Commit(Schedule("alice/web", 0, "m0"));
  EXPECT_FALSE(Task("alice/web", 0).has_reservation());
  Run("alice/web", 0, 100, 100LL << 20, 10);  // within the new run's startup
  EXPECT_FALSE(Task("alice/web", 0).has_reservation());
}

TEST_F(ReclaimerTest, AMasterThatTakesOverGoesOnFromTheCellsReservations) {
  Commit(Submit(JobBuilder("web").Priority(200).Cpu(1000).Memory(1LL << 30).Build()));
  Commit(Schedule("alice/web", 0, "m0"));
  Run("alice/web", 0, 100, 100LL << 20, 200);
  const int64_t before = Task("alice/web", 0).reservation().cpu_millis();
  Failover();
  Run("alice/web", 0, 100, 100LL << 20, 5);
  // No jump back to the limit: it starts where the cell says.
  EXPECT_LE(Task("alice/web", 0).reservation().cpu_millis(), before);
}

}  // namespace
}  // namespace herd::master
