#include "sched/loop/scheduler_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "testing/builders.h"
#include "testing/eventually.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

// A master in miniature: the true state and its log. The change source can
// be made to lag (`visible`: how far the feed has got) or to lose the
// caller's position (OUT_OF_RANGE); the sink commits like the committer:
// each proposal checked against the true state, independently.
class FakeMaster : public ChangeSource, public ProposalSink {
 public:
  FakeMaster() : state_("test") {}

  // Applies m to the true state; visible to the feed unless `hidden`.
  void Commit(v1::Mutation m, bool hidden = false) {
    m.set_revision(state_.revision() + 1);
    if (m.time_ms() == 0) m.set_time_ms(1000);
    absl::Status st = state_.Apply(m);
    ASSERT_TRUE(st.ok()) << st << " " << m.ShortDebugString();
    log_.push_back(m);
    if (!hidden) visible_ = state_.revision();
  }
  void Reveal() { visible_ = state_.revision(); }

  absl::StatusOr<cell::CellState> Bootstrap() override {
    ++bootstraps_;
    if (fail_bootstrap_) return absl::UnavailableError("master down");
    auto s = cell::CellState::FromSnapshot(state_.ToSnapshot());
    if (!s.ok()) return s.status();
    // Only what the feed has shown so far.
    auto copy = cell::CellState::FromSnapshot(snapshot_at_visible());
    return copy;
  }

  absl::StatusOr<std::vector<v1::Mutation>> Next(int64_t after, int64_t) override {
    ++nexts_;
    if (out_of_range_) {
      out_of_range_ = false;
      return absl::OutOfRangeError("revision gone");
    }
    if (fail_next_) return absl::UnavailableError("stream broken");
    std::vector<v1::Mutation> out;
    for (const auto& m : log_) {
      if (m.revision() > after && m.revision() <= visible_) out.push_back(m);
    }
    return out;
  }

  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& req) override {
    ++proposes_;
    if (fail_propose_) return absl::UnavailableError("master down");
    last_request_ = req;
    v1::ProposeResponse resp;
    for (const auto& p : req.placements()) {
      v1::Mutation m;
      *m.mutable_task_scheduled() = p;
      absl::Status st = state_.Check(m);
      v1::ProposalResult* r = resp.add_results();
      r->set_accepted(st.ok());
      r->set_reason(std::string(st.message()));
      if (st.ok()) Commit(m);
      if (!st.ok()) reasons_.push_back(std::string(st.message()));
    }
    resp.set_revision(state_.revision());
    return resp;
  }

  // The state as of `visible_`: replay the log.
  v1::CellSnapshot snapshot_at_visible() {
    cell::CellState s("test");
    for (const auto& m : log_) {
      if (m.revision() > visible_) break;
      EXPECT_TRUE(s.Apply(m).ok());
    }
    return s.ToSnapshot();
  }

  cell::CellState state_;
  std::vector<v1::Mutation> log_;
  int64_t visible_ = 0;
  bool out_of_range_ = false;
  bool fail_next_ = false;
  bool fail_propose_ = false;
  bool fail_bootstrap_ = false;
  int bootstraps_ = 0, nexts_ = 0, proposes_ = 0;
  std::vector<std::string> reasons_;
  v1::ProposeRequest last_request_;
};

class LoopTest : public ::testing::Test {
 protected:
  LoopTest() : loop_(&master_, &master_, &clock_, MakeOptions(), MakeLoopOptions()) {}
  static Options MakeOptions() {
    Options o;
    o.name = "test-sched";
    return o;
  }
  static LoopOptions MakeLoopOptions() {
    LoopOptions o;
    o.idle_wait_ms = 0;
    o.retry_wait_ms = 0;
    return o;
  }
  int Running(const std::string& job) {
    const cell::Job* j = master_.state_.FindJob(job);
    return j == nullptr ? 0 : j->running;
  }
  void StepOk() {
    absl::Status st = loop_.Step();
    ASSERT_TRUE(st.ok()) << st;
  }

  FakeMaster master_;
  ManualClock clock_;
  SchedulerLoop loop_;
};

TEST_F(LoopTest, PlacesPendingTasksThroughTheSink) {
  master_.Commit(Register(MachineBuilder("m1").Build()));
  master_.Commit(Submit(JobBuilder("web").Tasks(3).Build()));
  StepOk();
  EXPECT_EQ(Running("alice/web"), 3);
  SchedulerLoop::Stats s = loop_.stats();
  EXPECT_EQ(s.passes, 1);
  EXPECT_EQ(s.proposed, 3);
  EXPECT_EQ(s.accepted, 3);
  EXPECT_EQ(s.rejected, 0);
  EXPECT_EQ(s.bootstraps, 1);
  EXPECT_EQ(master_.last_request_.scheduler(), "test-sched");
  EXPECT_EQ(master_.last_request_.based_on_revision(), 2);
  for (const auto& p : master_.last_request_.placements()) {
    EXPECT_EQ(p.based_on_revision(), 2);
    EXPECT_EQ(p.scheduler(), "test-sched");
  }
  // The replica follows its own accepted placements through the feed.
  StepOk();
  EXPECT_EQ(loop_.replica().revision(), master_.state_.revision());
  EXPECT_EQ(loop_.replica().task_count(v1::Task::RUNNING), 3);
}

TEST_F(LoopTest, StaleProposalsAreRejectedThenRetriedAfterCatchingUp) {
  master_.Commit(Register(MachineBuilder("m1").Build()));
  master_.Commit(Submit(JobBuilder("web").Tasks(2).Build()));
  // The master has moved on, but the feed has not shown it yet: m1 went
  // down and m2 arrived.
  master_.Commit(Down("m1"), /*hidden=*/true);
  master_.Commit(Register(MachineBuilder("m2").Build()), /*hidden=*/true);

  StepOk();
  SchedulerLoop::Stats s = loop_.stats();
  EXPECT_EQ(s.proposed, 2);
  EXPECT_EQ(s.rejected, 2);
  EXPECT_EQ(s.accepted, 0);
  ASSERT_EQ(master_.reasons_.size(), 2u);
  EXPECT_TRUE(absl::StrContains(master_.reasons_[0], "machine m1 is not up")) << master_.reasons_[0];
  EXPECT_EQ(Running("alice/web"), 0);

  // Nothing new yet: the retry is rejected again, and nothing is lost.
  StepOk();
  EXPECT_EQ(loop_.stats().rejected, 4);

  // The feed catches up: the next step applies it and retries at once.
  master_.Reveal();
  StepOk();
  s = loop_.stats();
  EXPECT_EQ(s.accepted, 2);
  EXPECT_EQ(Running("alice/web"), 2);
  for (const auto& t : master_.state_.FindJob("alice/web")->tasks) EXPECT_EQ(t.machine()->name(), "m2");
  // Caught up and nothing pending: no more passes.
  int64_t passes = s.passes;
  StepOk();
  StepOk();
  EXPECT_EQ(loop_.stats().passes, passes);
}

TEST_F(LoopTest, ARejectedPlacementGivesItsRoomBackToClassesThatFailedForLackOfIt) {
  master_.Commit(Register(MachineBuilder("m1").Cpu(1000).Build()));
  master_.Commit(Submit(JobBuilder("first").Priority(200).Cpu(1000).Build()));
  master_.Commit(Submit(JobBuilder("second").Priority(100).Cpu(1000).Build()));
  master_.Commit(Kill("alice/first"), /*hidden=*/true);
  // The pass gives m1 to "first" (stale: it was killed) and finds no room
  // for "second".
  StepOk();
  EXPECT_EQ(loop_.stats().rejected, 1);
  ASSERT_EQ(master_.last_request_.pending_size(), 1);
  EXPECT_EQ(master_.last_request_.pending(0).job(), "alice/second");
  // Once caught up, the room is free again: "second" must not be skipped
  // as "known not to fit".
  master_.Reveal();
  StepOk();
  EXPECT_EQ(Running("alice/second"), 1);
}

TEST_F(LoopTest, OutOfRangeReloadsTheReplica) {
  master_.Commit(Register(MachineBuilder("m1").Cpu(1000).Build()));
  StepOk();
  EXPECT_EQ(loop_.stats().bootstraps, 1);
  // The feed loses our position while a job arrives.
  master_.Commit(Submit(JobBuilder("web").Tasks(2).Cpu(500).Build()));
  master_.out_of_range_ = true;
  StepOk();  // OUT_OF_RANGE: drop the replica
  EXPECT_EQ(loop_.stats().bootstraps, 1);
  StepOk();  // reload from a fresh copy, then schedule
  EXPECT_EQ(loop_.stats().bootstraps, 2);
  EXPECT_EQ(Running("alice/web"), 2);
  StepOk();
  EXPECT_EQ(loop_.replica().revision(), master_.state_.revision());
  EXPECT_TRUE(loop_.replica().CheckInvariants().ok());
}

TEST_F(LoopTest, TransientErrorsAreReturnedAndThePassIsRetried) {
  master_.Commit(Register(MachineBuilder("m1").Build()));
  master_.fail_bootstrap_ = true;
  EXPECT_EQ(loop_.Step().code(), absl::StatusCode::kUnavailable);
  master_.fail_bootstrap_ = false;
  StepOk();
  master_.Commit(Submit(JobBuilder("web").Tasks(1).Build()));
  master_.fail_next_ = true;
  EXPECT_EQ(loop_.Step().code(), absl::StatusCode::kUnavailable);
  master_.fail_next_ = false;
  master_.fail_propose_ = true;
  EXPECT_EQ(loop_.Step().code(), absl::StatusCode::kUnavailable);  // the pass ran; its proposal did not get through
  EXPECT_EQ(Running("alice/web"), 0);
  master_.fail_propose_ = false;
  StepOk();  // no new mutation, but the undecided pass is run again
  EXPECT_EQ(Running("alice/web"), 1);
  EXPECT_EQ(loop_.stats().errors, 3);
  EXPECT_EQ(loop_.stats().bootstraps, 1);
}

TEST_F(LoopTest, OnlyChangesThatMatterCauseAPassAndPendingTasksAreDiagnosed) {
  master_.Commit(Register(MachineBuilder("m1").Cpu(1000).Build()));
  master_.Commit(Submit(JobBuilder("web").Tasks(1).Cpu(500).Build()));
  master_.Commit(Submit(JobBuilder("big").Tasks(2).Cpu(4000).Build()));
  StepOk();
  EXPECT_EQ(Running("alice/web"), 1);
  ASSERT_EQ(master_.last_request_.pending_size(), 1);
  const v1::PendingDiagnosis& d = master_.last_request_.pending(0);
  EXPECT_EQ(d.job(), "alice/big");
  EXPECT_EQ(d.indexes_size(), 2);
  EXPECT_EQ(d.machines(), 1);
  EXPECT_EQ(d.feasible(), 0);
  EXPECT_EQ(d.scheduler(), "test-sched");
  EXPECT_GT(d.revision(), 0);
  EXPECT_TRUE(absl::StartsWith(d.text(), "0/1 machines fit")) << d.text();
  StepOk();  // its own placement comes back through the feed: one more pass
  int64_t passes = loop_.stats().passes;
  int proposes = master_.proposes_;

  // An agent's report about a running task changes nothing for placement.
  const cell::Task& t = master_.state_.FindJob("alice/web")->tasks[0];
  master_.Commit(Observed(Ref("alice/web", 0, t.incarnation()), v1::Task::ACTIVE, 42));
  StepOk();
  StepOk();
  EXPECT_EQ(loop_.stats().passes, passes);
  EXPECT_EQ(master_.proposes_, proposes);

  // A new machine does: the big job fits there.
  master_.Commit(Register(MachineBuilder("m2").Cpu(8000).Build()));
  StepOk();
  EXPECT_EQ(loop_.stats().passes, passes + 1);
  EXPECT_EQ(Running("alice/big"), 2);
}

TEST_F(LoopTest, PassesUseTheClocksTime) {
  // A task that crashed on m1 avoids it until clock time 5000.
  master_.Commit(Register(MachineBuilder("m1").Build()));
  master_.Commit(Submit(JobBuilder("web").Tasks(1).Build()));
  v1::Mutation s = Schedule("alice/web", 0, "m1");
  master_.Commit(s);
  master_.Commit(Rescheduled(Ref("alice/web", 0, 1), "crashed", /*avoid_until_ms=*/5000));
  clock_.SetNowMs(4000);
  StepOk();
  EXPECT_EQ(Running("alice/web"), 0);
  ASSERT_EQ(master_.last_request_.pending_size(), 1);
  clock_.SetNowMs(6000);
  master_.Commit(Register(MachineBuilder("m0").Cpu(1).Build()));  // something changes: a pass
  StepOk();
  EXPECT_EQ(Running("alice/web"), 1);
}

TEST_F(LoopTest, RunsOnItsOwnThreadUntilStopped) {
  master_.Commit(Register(MachineBuilder("m1").Build()));
  master_.Commit(Submit(JobBuilder("web").Tasks(2).Build()));
  loop_.Start();
  EXPECT_TRUE(Eventually([&] { return loop_.stats().accepted >= 2; }));
  loop_.Stop();
  EXPECT_EQ(loop_.stats().accepted, 2);
}

}  // namespace
}  // namespace herd::sched
