// MasterCore::Propose (optimistic concurrency: each placement re-checked and
// committed on its own) and MasterCore::Why (the pending-diagnosis store),
// with no in-process scheduler: the test plays the external scheduler.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "master/core/master_core.h"
#include "master/core/why_store.h"
#include "testing/builders.h"
#include "testing/fake_agent_link.h"

namespace herd::master {
namespace {

using namespace herd::testing;  // NOLINT

v1::TaskScheduled Placement(const std::string& job, int32_t index, const std::string& machine,
                            int64_t expect_state_revision, std::vector<v1::TaskRef> victims = {}) {
  v1::TaskScheduled p;
  p.set_job(job);
  p.set_index(index);
  p.set_machine(machine);
  p.set_expect_state_revision(expect_state_revision);
  for (auto& v : victims) *p.add_victims() = v;
  return p;
}

v1::PendingDiagnosis Diag(const std::string& job, std::vector<int32_t> indexes, int64_t revision,
                          const std::string& text = "0/2 machines fit: 2 insufficient memory") {
  v1::PendingDiagnosis d;
  d.set_job(job);
  for (int32_t i : indexes) d.add_indexes(i);
  d.set_machines(2);
  d.set_feasible(0);
  (*d.mutable_reasons())["insufficient memory"] = 2;
  d.add_suggestions("memory <= 1Gi fits on 2 machines");
  d.set_text(text);
  d.set_revision(revision);
  return d;
}

class ProposeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterOptions o;
    o.run_scheduler = false;  // --scheduler external
    o.run_link = false;       // machines stay as the test says
    auto core = MasterCore::Create(&store_, &link_, &clock_, o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    core_->Start();
    for (const char* m : {"m1", "m2", "m3"}) {
      v1::RegisterMachineRequest r;
      *r.mutable_machine() = MachineBuilder(m).Cpu(4000).Memory(8LL << 30).Address(std::string(m) + ":1").Build();
      ASSERT_TRUE(core_->machines().RegisterMachine(Principal::Machine(r.machine().name()), r).ok());
    }
  }
  void Submit(const v1::JobSpec& spec) {
    v1::SubmitRequest req;
    *req.add_jobs() = spec;
    auto r = core_->jobs().Submit(Principal::User("alice"), req);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  const v1::Task Task(const std::string& job, int32_t index) {
    v1::GetTaskRequest r;
    r.set_job(job);
    r.set_index(index);
    auto t = core_->jobs().GetTask(Principal::User("alice"), r);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? t->task() : v1::Task();
  }
  v1::ProposeResponse Propose(std::vector<v1::TaskScheduled> placements,
                              std::vector<v1::PendingDiagnosis> pending = {}, const std::string& name = "s1") {
    v1::ProposeRequest req;
    req.set_scheduler(name);
    req.set_based_on_revision(core_->machines().GetCell(Principal::User("alice"))->revision());
    for (auto& p : placements) *req.add_placements() = p;
    for (auto& d : pending) *req.add_pending() = d;
    auto r = core_->jobs().Propose(Principal::User(""), req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::ProposeResponse();
  }
  v1::WhyResponse Why(const std::string& job) {
    v1::WhyRequest r;
    r.set_job(job);
    auto w = core_->jobs().Why(Principal::User("alice"), r);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *w : v1::WhyResponse();
  }
  void CommitMutation(v1::Mutation m) {
    auto r = core_->committer().Commit("test", [&](const cell::CellState&) -> absl::StatusOr<std::vector<v1::Mutation>> {
      return std::vector<v1::Mutation>{m};
    });
    ASSERT_TRUE(r.ok()) << r.status();
  }
  v1::CellSnapshot Snapshot() {
    return core_->committer().Read([](const cell::CellState& s) { return s.ToSnapshot(); });
  }

  store::MemoryLogStore store_;
  FakeAgentLink link_;
  ManualClock clock_;
  std::unique_ptr<MasterCore> core_;
};

TEST_F(ProposeTest, ValidPlacementsAreCommittedStaleOnesRejectedWithTheirReasonAndNothingElseChanges) {
  Submit(JobBuilder("placed").Build());
  Submit(JobBuilder("down").Build());
  Submit(JobBuilder("moved").Build());
  Submit(JobBuilder("low").Priority(100).Cpu(3000).Build());
  Submit(JobBuilder("high").Priority(200).Cpu(3000).Build());
  Submit(JobBuilder("huge").Cpu(3950).Build());
  Submit(JobBuilder("ok").Tasks(2).Build());

  // Setup, as an earlier pass would have done it.
  v1::ProposeResponse first = Propose({Placement("alice/placed", 0, "m2", Task("alice/placed", 0).state_revision()),
                                       Placement("alice/low", 0, "m2", Task("alice/low", 0).state_revision()),
                                       Placement("alice/huge", 0, "m3", 0)});
  for (const auto& r : first.results()) ASSERT_TRUE(r.accepted()) << r.reason();
  const int64_t low_incarnation = Task("alice/low", 0).incarnation();
  // Meanwhile, on the master: m1 goes down; "moved" changes (it is placed,
  // then rescheduled, so it is PENDING again at a later revision); "low" is
  // killed, so it is no longer there to preempt.
  CommitMutation(Down("m1"));
  const int64_t moved_seen = Task("alice/moved", 0).state_revision();
  ASSERT_TRUE(Propose({Placement("alice/moved", 0, "m2", moved_seen)}).results(0).accepted());
  CommitMutation(Rescheduled(Ref("alice/moved", 0, 1), "test"));
  ASSERT_EQ(Task("alice/moved", 0).state(), v1::Task::PENDING);
  v1::KillRequest k;
  k.set_job("alice/low");
  ASSERT_TRUE(core_->jobs().Kill(Principal::User("alice"), k).ok());

  // A scheduler whose replica has seen none of that.
  const int64_t rev = core_->machines().GetCell(Principal::User("alice"))->revision();
  const v1::CellSnapshot before = Snapshot();
  v1::ProposeResponse resp = Propose({
      Placement("alice/placed", 0, "m2", 0),                                         // already RUNNING
      Placement("alice/down", 0, "m1", Task("alice/down", 0).state_revision()),     // machine down
      Placement("alice/moved", 0, "m3", moved_seen),                                 // stale state revision
      Placement("alice/high", 0, "m2", Task("alice/high", 0).state_revision(),
                {Ref("alice/low", 0, low_incarnation)}),                              // victim gone
      Placement("alice/huge", 0, "m2", 0),                                           // already placed
      Placement("alice/ok", 0, "m3", 0),                                             // does not fit (huge is there)
  });
  ASSERT_EQ(resp.results_size(), 6);
  const char* want[] = {"task alice/placed/0 is RUNNING, not PENDING",
                        "machine m1 is not up",
                        "changed at revision",
                        "task alice/low/0 incarnation 1 is not running",
                        "task alice/huge/0 is RUNNING, not PENDING",
                        "does not fit on m3: cpu asks"};
  for (int i = 0; i < 6; ++i) {
    EXPECT_FALSE(resp.results(i).accepted()) << i;
    EXPECT_TRUE(absl::StrContains(resp.results(i).reason(), want[i])) << i << ": " << resp.results(i).reason();
  }
  // Nothing changed: same revision, same state.
  EXPECT_EQ(core_->machines().GetCell(Principal::User("alice"))->revision(), rev);
  EXPECT_EQ(resp.revision(), rev);
  EXPECT_EQ(Snapshot().SerializeAsString(), before.SerializeAsString());

  // A mixed batch: the valid ones are committed, each on its own, in order.
  resp = Propose({Placement("alice/ok", 0, "m2", 0), Placement("alice/ok", 1, "m1", 0),
                  Placement("alice/ok", 1, "m2", 0), Placement("alice/moved", 0, "m2", Task("alice/moved", 0).state_revision())});
  ASSERT_EQ(resp.results_size(), 4);
  EXPECT_TRUE(resp.results(0).accepted()) << resp.results(0).reason();
  EXPECT_FALSE(resp.results(1).accepted());
  EXPECT_TRUE(resp.results(2).accepted()) << resp.results(2).reason();
  EXPECT_TRUE(resp.results(3).accepted()) << resp.results(3).reason();
  EXPECT_EQ(core_->machines().GetCell(Principal::User("alice"))->revision(), rev + 3);
  v1::Task t = Task("alice/ok", 1);
  EXPECT_EQ(t.state(), v1::Task::RUNNING);
  EXPECT_EQ(t.machine(), "m2");
  // The scheduler is recorded in the mutation.
  int64_t found = 0;
  ASSERT_TRUE(store_.ReadLog(rev + 1, rev + 3, [&](const v1::Mutation& m) {
    EXPECT_EQ(m.task_scheduled().scheduler(), "s1");
    EXPECT_EQ(m.actor(), "s1");
    ++found;
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(found, 3);
}

TEST_F(ProposeTest, PreemptionIsAcceptedWhileTheVictimStillRuns) {
  Submit(JobBuilder("low").Priority(100).Cpu(3000).Build());
  Submit(JobBuilder("high").Priority(200).Cpu(3000).Build());
  ASSERT_TRUE(Propose({Placement("alice/low", 0, "m1", 0)}).results(0).accepted());
  v1::ProposeResponse r = Propose({Placement("alice/high", 0, "m1", 0, {Ref("alice/low", 0, 1)})});
  ASSERT_TRUE(r.results(0).accepted()) << r.results(0).reason();
  EXPECT_EQ(Task("alice/low", 0).state(), v1::Task::PENDING);
  EXPECT_EQ(Task("alice/high", 0).machine(), "m1");
}

TEST_F(ProposeTest, WhyReportsTheLatestDiagnosisOfEachPendingTask) {
  Submit(JobBuilder("big").Tasks(3).Memory(16LL << 30).Build());
  Submit(JobBuilder("small").Build());

  // Before any pass.
  v1::WhyResponse w = Why("big");
  EXPECT_EQ(w.job(), "alice/big");
  EXPECT_EQ(w.pending_tasks(), 3);
  EXPECT_EQ(w.pending_size(), 0);
  EXPECT_EQ(w.note(), "no scheduler pass has looked at it yet");

  int64_t rev = core_->machines().GetCell(Principal::User("alice"))->revision();
  Propose({}, {Diag("alice/big", {0, 1, 2}, rev)}, "s1");
  w = Why("alice/big");
  ASSERT_EQ(w.pending_size(), 1);
  EXPECT_EQ(w.pending(0).indexes_size(), 3);
  EXPECT_EQ(w.pending(0).scheduler(), "s1");
  EXPECT_EQ(w.pending(0).reasons().at("insufficient memory"), 2);
  EXPECT_EQ(w.pending(0).suggestions(0), "memory <= 1Gi fits on 2 machines");
  EXPECT_EQ(w.note(), "");
  // GetJob (herd status) reads the same store.
  v1::GetJobRequest g;
  g.set_job("big");
  auto job = core_->jobs().GetJob(Principal::User("alice"), g);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->why_pending_size(), 3);
  EXPECT_EQ(job->why_pending().at(1), "0/2 machines fit: 2 insufficient memory");

  // The latest pass that looked at the job wins, whichever scheduler ran it.
  Propose({}, {Diag("alice/big", {1, 2}, rev, "0/3 machines fit: 3 insufficient memory")}, "s2");
  w = Why("big");
  ASSERT_EQ(w.pending_size(), 1);
  EXPECT_EQ(w.pending(0).scheduler(), "s2");
  EXPECT_EQ(w.pending(0).indexes_size(), 2);
  EXPECT_EQ(w.pending_tasks(), 3);
  EXPECT_TRUE(absl::StrContains(w.note(), "1 pending task not looked at yet")) << w.note();
  // A pass about other jobs leaves it alone.
  Propose({Placement("alice/small", 0, "m1", 0)}, {}, "s1");
  EXPECT_EQ(Why("big").pending_size(), 1);

  // A diagnosed task that got placed drops out; so does one that became
  // pending again after the pass that diagnosed it.
  rev = core_->machines().GetCell(Principal::User("alice"))->revision();
  Propose({}, {Diag("alice/big", {0, 1, 2}, rev)}, "s1");
  CommitMutation([] {
    v1::Mutation m;
    *m.mutable_machine_registered()->mutable_machine() =
        MachineBuilder("fat").Cpu(4000).Memory(64LL << 30).Address("fat:1").Build();
    return m;
  }());
  CommitMutation(Schedule("alice/big", 0, "fat"));  // not through a pass: the store still has 0
  w = Why("big");
  EXPECT_EQ(w.pending_tasks(), 2);
  ASSERT_EQ(w.pending_size(), 1);
  EXPECT_EQ(w.pending(0).indexes_size(), 2);
  EXPECT_EQ(w.pending(0).indexes(0), 1);
  CommitMutation(Schedule("alice/big", 1, "fat"));
  CommitMutation(Rescheduled(Ref("alice/big", 1, 1), "test"));
  w = Why("big");
  EXPECT_EQ(w.pending_tasks(), 2);
  ASSERT_EQ(w.pending_size(), 1);
  ASSERT_EQ(w.pending(0).indexes_size(), 1) << "task 1's diagnosis predates its return to PENDING";
  EXPECT_EQ(w.pending(0).indexes(0), 2);
  EXPECT_TRUE(absl::StrContains(w.note(), "1 pending task not looked at yet")) << w.note();

  // No pending tasks; unknown jobs.
  w = Why("small");
  EXPECT_EQ(w.pending_tasks(), 0);
  EXPECT_EQ(w.note(), "the job has no pending tasks");
  v1::WhyRequest r;
  r.set_job("nope");
  auto missing = core_->jobs().Why(Principal::User("alice"), r);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(missing.status().message()), "no job named nope");
}

TEST(WhyStore, ReplacesPerJobFiltersToPendingAndRetains) {
  WhyStore s;
  s.Record({"a", "b"}, {Diag("a", {0, 1}, 10), Diag("b", {0}, 10)});
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.For("a", {{0, 5}, {1, 5}}).size(), 1u);
  EXPECT_EQ(s.For("a", {{0, 5}, {1, 5}})[0].indexes_size(), 2);
  EXPECT_EQ(s.For("a", {{1, 5}})[0].indexes_size(), 1);  // 0 no longer pending
  EXPECT_TRUE(s.For("a", {{0, 11}}).empty());             // pending again since the pass
  EXPECT_TRUE(s.For("a", {}).empty());
  s.Record({"a"}, {});  // a pass looked at a and left nothing pending
  EXPECT_TRUE(s.For("a", {{0, 5}}).empty());
  EXPECT_EQ(s.For("b", {{0, 5}}).size(), 1u);
  s.Retain([](const std::string& job) { return job != "b"; });
  EXPECT_EQ(s.size(), 0u);
}

}  // namespace
}  // namespace herd::master
