#include "cell/cell_state.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "base/rng.h"
#include "cell/batch.h"
#include "cell/job_update.h"
#include "cell/rollout.h"
#include "testing/builders.h"

namespace herd::cell {
namespace {

using namespace herd::testing;  // NOLINT
using v1::Event;


class CellStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(MachineBuilder("m1").Cpu(2000).Memory(4LL << 30).Attr("rack", "r1").Build());
    ASSERT_OK(MachineBuilder("m2").Cpu(2000).Memory(4LL << 30).Attr("rack", "r2").Build());
  }
  void ASSERT_OK(const v1::Machine& m) { Apply(Register(m)); }
  // Applies m, expecting success, and checks the invariants.
  void Apply(const v1::Mutation& m) {
    int64_t rev = state_.revision();
    absl::Status st = state_.Apply(m);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(state_.revision(), rev + 1);
    absl::Status inv = state_.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv;
    log_.push_back(m);
  }
  // Applies m, expecting `code`, and checks that nothing changed.
  void Reject(const v1::Mutation& m, absl::StatusCode code, const std::string& msg_part = "") {
    v1::CellSnapshot before = state_.ToSnapshot();
    absl::Status st = state_.Apply(m);
    EXPECT_EQ(st.code(), code) << st;
    if (!msg_part.empty()) EXPECT_NE(std::string(st.message()).find(msg_part), std::string::npos) << st;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, state_.ToSnapshot()));
  }
  const Task& T(const std::string& job, int i) { return *state_.FindTask(job, i); }

  CellState state_;
  std::vector<v1::Mutation> log_;
};

TEST_F(CellStateTest, SubmitCreatesPendingTasks) {
  Apply(Submit(JobBuilder("web").Tasks(3).Build()));
  const Job* j = state_.FindJob("alice/web");
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->state, v1::Job::PENDING);
  EXPECT_EQ(j->pending, 3);
  EXPECT_EQ(state_.pending().size(), 3u);
  EXPECT_EQ(T("alice/web", 2).last_event()->transition, Event::SUBMIT);
  EXPECT_EQ(state_.Usage("alice", Band::kBatch).cpu_millis, 300);
}

TEST_F(CellStateTest, ScheduleRunsTaskAndAllocates) {
  Apply(Submit(JobBuilder("web").Tasks(2).Cpu(500).Build()));
  Apply(Schedule("alice/web", 0, "m1"));
  const Task& t = T("alice/web", 0);
  EXPECT_EQ(t.state(), v1::Task::RUNNING);
  EXPECT_EQ(t.phase(), v1::Task::ASSIGNED);
  EXPECT_EQ(t.incarnation(), 1);
  EXPECT_EQ(t.last_event()->transition, Event::SCHEDULE);
  EXPECT_EQ(t.last_event()->reason, "scheduled on m1");
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 500);
  EXPECT_EQ(state_.FindJob("alice/web")->state, v1::Job::RUNNING);
}

TEST_F(CellStateTest, ScheduleEventNamesTheSchedulerThatPlacedIt) {
  Apply(Submit(JobBuilder("web").Tasks(1).Cpu(500).Build()));
  v1::Mutation m = Schedule("alice/web", 0, "m1");
  m.set_actor("s2");
  Apply(m);
  EXPECT_EQ(T("alice/web", 0).last_event()->reason, "scheduled on m1 by s2");
}

TEST_F(CellStateTest, ScheduleRejectsWhatNoLongerHolds) {
  Apply(Submit(JobBuilder("web").Tasks(2).Cpu(1500).Build()));
  int64_t rev0 = T("alice/web", 0).state_revision();
  Reject(Schedule("alice/web", 0, "m1", {}, rev0 + 100), absl::StatusCode::kFailedPrecondition, "changed");
  Reject(Schedule("alice/web", 0, "nowhere"), absl::StatusCode::kNotFound);
  Reject(Schedule("alice/web", 7, "m1"), absl::StatusCode::kNotFound);
  Apply(Schedule("alice/web", 0, "m1", {}, rev0));
  Reject(Schedule("alice/web", 0, "m2"), absl::StatusCode::kFailedPrecondition, "not PENDING");
  Reject(Schedule("alice/web", 1, "m1"), absl::StatusCode::kFailedPrecondition, "cpu asks 1.5, 500m free");
  Apply(Down("m2"));
  Reject(Schedule("alice/web", 1, "m2"), absl::StatusCode::kFailedPrecondition, "not up");
}

// JobsSubmitted.place_on (the Framework API's accept): submitted and placed
// by one mutation, all or nothing, against the same ledger as TaskScheduled.
TEST_F(CellStateTest, SubmitAndPlaceOnAMachineIsAllOrNothing) {
  auto place_on = [](std::vector<v1::JobSpec> jobs, const std::string& machine) {
    v1::Mutation m = Submit(std::move(jobs));
    m.mutable_jobs_submitted()->set_place_on(machine);
    m.set_actor("framework:f1");
    return m;
  };
  Apply(Submit(JobBuilder("web").Cpu(1000).Build()));
  Apply(Schedule("alice/web", 0, "m1"));  // 1 of m1's 2 CPUs
  // Together they ask 1.2 CPUs of the 1 free: none is placed, none submitted.
  Reject(place_on({JobBuilder("a").Cpu(600).Build(), JobBuilder("b").Cpu(600).Build()}, "m1"),
         absl::StatusCode::kFailedPrecondition, "task alice/b/0 does not fit on m1: cpu asks 600m, 400m free");
  Reject(place_on({JobBuilder("a").Build()}, "m9"), absl::StatusCode::kNotFound, "place_on: no machine m9");
  Reject(place_on({JobBuilder("a").Constraint("rack", v1::Constraint::EQ, {"r2"}).Build()}, "m1"),
         absl::StatusCode::kFailedPrecondition, "rack == r2");
  Reject(place_on({JobBuilder("a").After({"alice/web"}).Build()}, "m1"), absl::StatusCode::kInvalidArgument,
         "place_on places only jobs that run at once");
  Reject(place_on({JobBuilder("web").Build()}, "m1"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(state_.FindJob("alice/a"), nullptr);

  Apply(place_on({JobBuilder("a").Cpu(500).Build(), JobBuilder("b").Cpu(500).Tasks(1).Build()}, "m1"));
  for (const char* job : {"alice/a", "alice/b"}) {
    const Task& t = T(job, 0);
    EXPECT_EQ(t.state(), v1::Task::RUNNING) << job;
    EXPECT_EQ(t.phase(), v1::Task::ASSIGNED);
    EXPECT_EQ(t.incarnation(), 1);
    EXPECT_EQ(t.machine()->name(), "m1");
    EXPECT_EQ(t.last_event()->transition, Event::SCHEDULE);
    EXPECT_EQ(t.last_event()->reason, "scheduled on m1 by framework:f1");
    EXPECT_EQ(state_.FindJob(job)->state, v1::Job::RUNNING);
  }
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 2000);
  EXPECT_TRUE(state_.pending().empty());
  // The machine is full now, for the built-in scheduler too.
  Apply(Submit(JobBuilder("c").Cpu(100).Build()));
  Reject(Schedule("alice/c", 0, "m1"), absl::StatusCode::kFailedPrecondition, "does not fit");
  // A replay from the log and a snapshot agree.
  CellState replayed;
  for (const v1::Mutation& m : log_) ASSERT_TRUE(replayed.Apply(m).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(replayed.ToSnapshot(), state_.ToSnapshot()));
  Apply(Down("m2"));
  Reject(place_on({JobBuilder("d").Build()}, "m2"), absl::StatusCode::kFailedPrecondition, "place_on: machine m2 is not up");
}

TEST_F(CellStateTest, HardConstraintsAreCheckedAtCommit) {
  Apply(Submit(JobBuilder("web").Constraint("rack", v1::Constraint::EQ, {"r2"}).Build()));
  Reject(Schedule("alice/web", 0, "m1"), absl::StatusCode::kFailedPrecondition, "rack == r2");
  Apply(Schedule("alice/web", 0, "m2"));
}

TEST_F(CellStateTest, PreemptionEvictsVictimsToPending) {
  Apply(Submit(JobBuilder("batch").Priority(100).Cpu(2000).Build()));
  Apply(Schedule("alice/batch", 0, "m1"));
  Apply(Submit(JobBuilder("prod", "bob").Priority(200).Cpu(1000).Build()));
  Reject(Schedule("bob/prod", 0, "m1"), absl::StatusCode::kFailedPrecondition, "does not fit");
  Apply(Schedule("bob/prod", 0, "m1", {Ref("alice/batch", 0, 1)}));
  const Task& v = T("alice/batch", 0);
  EXPECT_EQ(v.state(), v1::Task::PENDING);
  EXPECT_EQ(v.last_event()->transition, Event::EVICT);
  EXPECT_EQ(v.last_event()->reason, "preempted by bob/prod/0 (priority 200) on m1");
  EXPECT_EQ(state_.FindJob("alice/batch")->state, v1::Job::PENDING);
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 1000);
}

TEST_F(CellStateTest, ProductionNeverPreemptsProduction) {
  Apply(Submit(JobBuilder("low").Priority(150).Cpu(2000).Build()));
  Apply(Schedule("alice/low", 0, "m1"));
  Apply(Submit(JobBuilder("high").Priority(300).Cpu(1000).Build()));
  Reject(Schedule("alice/high", 0, "m1", {Ref("alice/low", 0, 1)}), absl::StatusCode::kFailedPrecondition,
         "may not preempt");
  // A stale victim (wrong incarnation) is refused too.
  Apply(Submit(JobBuilder("mon").Priority(400).Cpu(1000).Build()));
  Reject(Schedule("alice/mon", 0, "m1", {Ref("alice/low", 0, 7)}), absl::StatusCode::kFailedPrecondition);
  Apply(Schedule("alice/mon", 0, "m1", {Ref("alice/low", 0, 1)}));
}

TEST_F(CellStateTest, AgentReportsAndExits) {
  Apply(Submit(JobBuilder("job").Tasks(2).Build()));
  Apply(Schedule("alice/job", 0, "m1"));
  Apply(Schedule("alice/job", 1, "m2"));
  Apply(Observed(Ref("alice/job", 0, 1), v1::Task::ACTIVE, 1234));
  EXPECT_EQ(T("alice/job", 0).pid(), 1234);
  EXPECT_EQ(T("alice/job", 0).phase(), v1::Task::ACTIVE);
  Reject(Observed(Ref("alice/job", 0, 9), v1::Task::ACTIVE), absl::StatusCode::kFailedPrecondition, "incarnation");
  Apply(Exited(Ref("alice/job", 0, 1), 0));
  EXPECT_EQ(T("alice/job", 0).state(), v1::Task::DEAD);
  EXPECT_EQ(T("alice/job", 0).last_event()->transition, Event::FINISH);
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 0);
  Apply(Exited(Ref("alice/job", 1, 1), 3));
  EXPECT_EQ(T("alice/job", 1).last_event()->transition, Event::FAIL);
  EXPECT_EQ(T("alice/job", 1).last_event()->reason, "exited with code 3");
  const Job* j = state_.FindJob("alice/job");
  EXPECT_EQ(j->state, v1::Job::DEAD);
  EXPECT_EQ(j->last_event.transition, Event::FAIL);
  EXPECT_TRUE(state_.Usage("alice", Band::kBatch).IsZero());
}

TEST_F(CellStateTest, MachineDownLosesTasksAndUpRestoresMachine) {
  Apply(Submit(JobBuilder("job").Tasks(3).Build()));
  Apply(Schedule("alice/job", 0, "m1"));
  Apply(Schedule("alice/job", 1, "m1"));
  Apply(Schedule("alice/job", 2, "m2"));
  Apply(Down("m1", "missed 3 polls"));
  EXPECT_EQ(T("alice/job", 0).state(), v1::Task::PENDING);
  EXPECT_EQ(T("alice/job", 0).last_event()->transition, Event::LOST);
  EXPECT_EQ(T("alice/job", 0).last_event()->reason, "machine m1 down: missed 3 polls");
  EXPECT_EQ(T("alice/job", 2).state(), v1::Task::RUNNING);
  Reject(Down("m1"), absl::StatusCode::kFailedPrecondition);
  // Rescheduled elsewhere with a new incarnation; the old one is stale.
  Apply(Schedule("alice/job", 0, "m2"));
  EXPECT_EQ(T("alice/job", 0).incarnation(), 2);
  Reject(Observed(Ref("alice/job", 0, 1), v1::Task::ACTIVE), absl::StatusCode::kFailedPrecondition);
  Apply(Up("m1"));
  EXPECT_EQ(state_.FindMachine("m1")->state(), v1::Machine::UP);
  Apply(Lost(Ref("alice/job", 2, 1), "agent does not know it"));
  EXPECT_EQ(T("alice/job", 2).state(), v1::Task::PENDING);
}

TEST_F(CellStateTest, InterferenceMarksAMachineAndSurvivesASnapshot) {
  const int64_t machines = state_.machines_revision();
  Apply(Interference("m1", "throttle"));
  EXPECT_EQ(state_.FindMachine("m1")->interference(), "throttle");
  EXPECT_FALSE(state_.FindMachine("m1")->interference_marked());
  EXPECT_EQ(state_.machines_revision(), machines);  // placement unchanged
  Apply(Interference("m1", "mark", "run web.0 waited for a CPU 31% of the time"));
  EXPECT_TRUE(state_.FindMachine("m1")->interference_marked());
  EXPECT_EQ(state_.machines_revision(), state_.revision());
  EXPECT_EQ(state_.FindMachine("m1")->ToProto().interference_reason(), "run web.0 waited for a CPU 31% of the time");
  auto restored = CellState::FromSnapshot(state_.ToSnapshot());
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(restored->FindMachine("m1")->interference_marked());
  EXPECT_EQ(restored->FindMachine("m1")->interference_reason(), "run web.0 waited for a CPU 31% of the time");
  Reject(Interference("m1", "panic"), absl::StatusCode::kInvalidArgument, "interference level 'panic'");
  Reject(Interference("m9", "mark"), absl::StatusCode::kNotFound, "no machine m9");
  Reject(Interference("m1", "mark", std::string(2000, 'x')), absl::StatusCode::kInvalidArgument, "over 1 KiB");
  // Calm: unmarked, and whatever could not fit may fit again.
  Apply(Interference("m1", ""));
  EXPECT_FALSE(state_.FindMachine("m1")->interference_marked());
  EXPECT_EQ(state_.FindMachine("m1")->interference_reason(), "");
  EXPECT_EQ(state_.freed_revision(), state_.revision());
}

TEST_F(CellStateTest, RescheduleRemembersTheMachineToAvoid) {
  Apply(Submit(JobBuilder("job").Build()));
  Apply(Schedule("alice/job", 0, "m1"));
  v1::Mutation m = Rescheduled(Ref("alice/job", 0, 1), "crash loop on m1", 5000);
  m.set_time_ms(1000);
  Apply(m);
  const cell::Task& t = T("alice/job", 0);
  EXPECT_EQ(t.state(), v1::Task::PENDING);
  EXPECT_EQ(t.last_event()->transition, Event::RESCHEDULE);
  EXPECT_EQ(t.last_event()->reason, "crash loop on m1");
  EXPECT_TRUE(t.AvoidsMachine("m1", 4999));
  EXPECT_FALSE(t.AvoidsMachine("m1", 5000));
  EXPECT_FALSE(t.AvoidsMachine("m2", 0));
  auto restored = CellState::FromSnapshot(state_.ToSnapshot());
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(restored->FindTask("alice/job", 0)->AvoidsMachine("m1", 4999));
  Reject(Rescheduled(Ref("alice/job", 0, 1), "again"), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CellStateTest, ReservationsLetNonProductionUseTheSlack) {
  // A production task whose limit fills m1 but which is estimated to use half.
  Apply(Submit(JobBuilder("svc").Priority(200).Cpu(2000).Memory(4LL << 30).Build()));
  Apply(Schedule("alice/svc", 0, "m1"));
  Apply(Submit(JobBuilder("batch").Priority(100).Cpu(1000).Memory(2LL << 30).Build()));
  Apply(Submit(JobBuilder("prod2").Priority(200).Cpu(1000).Memory(2LL << 30).Build()));
  Reject(Schedule("alice/batch", 0, "m1"), absl::StatusCode::kFailedPrecondition, "does not fit");
  Reject(Reserve("alice/svc", 0, 3000, 1 << 30), absl::StatusCode::kInvalidArgument, "exceeds its limit");
  Apply(Reserve("alice/svc", 0, 1000, 2LL << 30));
  EXPECT_EQ(state_.FindMachine("m1")->reserved().cpu_millis, 1000);
  Apply(Schedule("alice/batch", 0, "m1"));                        // non-prod: against reservations
  Reject(Schedule("alice/prod2", 0, "m1"), absl::StatusCode::kFailedPrecondition, "does not fit");  // prod: limits
  auto restored = CellState::FromSnapshot(state_.ToSnapshot());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->FindMachine("m1")->reserved().cpu_millis, 2000);
}

TEST_F(CellStateTest, KillAndResubmit) {
  Apply(Submit(JobBuilder("job").Tasks(2).Build()));
  Apply(Schedule("alice/job", 0, "m1"));
  Reject(Submit(JobBuilder("job").Build()), absl::StatusCode::kAlreadyExists);
  Apply(Kill("alice/job", "no longer needed"));
  EXPECT_EQ(T("alice/job", 0).state(), v1::Task::DEAD);
  EXPECT_EQ(T("alice/job", 1).last_event()->transition, Event::KILL);
  EXPECT_EQ(T("alice/job", 1).last_event()->reason, "no longer needed");
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 0);
  EXPECT_EQ(state_.FindJob("alice/job")->state, v1::Job::DEAD);
  Reject(Kill("alice/job"), absl::StatusCode::kFailedPrecondition);
  Reject(Kill("alice/none"), absl::StatusCode::kNotFound);
  Apply(Submit(JobBuilder("job").Tasks(5).Build()));
  EXPECT_EQ(state_.FindJob("alice/job")->pending, 5);
  EXPECT_EQ(state_.task_count(v1::Task::DEAD), 0);
}

TEST_F(CellStateTest, RequestIdsAreRemembered) {
  Apply(Submit({JobBuilder("a").Build(), JobBuilder("b").Build()}, "req-1"));
  ASSERT_NE(state_.FindRequest("alice", "req-1"), nullptr);
  EXPECT_EQ(state_.FindRequest("alice", "req-1")->size(), 2u);
  Reject(Submit({JobBuilder("c").Build()}, "req-1"), absl::StatusCode::kAlreadyExists);
  Reject(Submit({JobBuilder("d").Build(), JobBuilder("d").Build()}), absl::StatusCode::kInvalidArgument, "twice");
}

// #33 L1: a request id is the submitting user's; another user's same id is
// another request, and snapshots keep (and old ones infer) the user.
TEST_F(CellStateTest, RequestIdsArePerUser) {
  v1::Mutation bob = Submit({JobBuilder("deploy", "bob").Build()}, "deploy-42");
  bob.set_actor("bob");
  Apply(bob);
  EXPECT_EQ(state_.FindRequest("alice", "deploy-42"), nullptr);
  v1::Mutation alice = Submit({JobBuilder("web").Build()}, "deploy-42");
  alice.set_actor("alice");
  Apply(alice);
  ASSERT_NE(state_.FindRequest("alice", "deploy-42"), nullptr);
  EXPECT_EQ(*state_.FindRequest("alice", "deploy-42"), std::vector<std::string>{"alice/web"});
  EXPECT_EQ(*state_.FindRequest("bob", "deploy-42"), std::vector<std::string>{"bob/deploy"});
  v1::Mutation again = Submit({JobBuilder("other").Build()}, "deploy-42");
  again.set_actor("alice");
  Reject(again, absl::StatusCode::kAlreadyExists);

  v1::CellSnapshot snap = state_.ToSnapshot();
  auto restored = CellState::FromSnapshot(snap);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored->FindRequest("bob", "deploy-42"), std::vector<std::string>{"bob/deploy"});
  // A snapshot from before: no user in the records. Each belongs to the
  // owner of its jobs; a record with no job is dropped.
  for (auto& r : *snap.mutable_requests()) r.clear_user();
  snap.add_requests()->set_request_id("orphan");
  restored = CellState::FromSnapshot(snap);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored->FindRequest("bob", "deploy-42"), std::vector<std::string>{"bob/deploy"});
  EXPECT_EQ(*restored->FindRequest("alice", "deploy-42"), std::vector<std::string>{"alice/web"});
  EXPECT_EQ(restored->FindRequest("", "orphan"), nullptr);
}

TEST_F(CellStateTest, RevisionMustFollow) {
  v1::Mutation m = Submit(JobBuilder("a").Build());
  m.set_revision(state_.revision() + 5);
  Reject(m, absl::StatusCode::kFailedPrecondition, "does not follow");
  m.set_revision(state_.revision() + 1);
  Apply(m);
}

// Random walk over valid and invalid mutations: after each the invariants
// hold; replaying the accepted ones gives the same state; a snapshot taken at
// any point restores to an equal state.
TEST(CellStateProperty, RandomWalkKeepsInvariantsAndReplays) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Rng rng(seed);
    CellState state;
    std::vector<v1::Mutation> accepted;
    std::vector<std::string> machines, jobs;
    for (int i = 0; i < 6; ++i) {
      machines.push_back("m" + std::to_string(i));
      v1::Mutation m = Register(MachineBuilder(machines.back()).Cpu(2000 + 1000 * (i % 3)).Build());
      ASSERT_TRUE(state.Apply(m).ok());
      accepted.push_back(m);
    }
    for (int step = 0; step < 1500; ++step) {
      v1::Mutation m;
      int kind = rng.Uniform(13);
      bool planned = false;
      if (kind == 0 || jobs.empty()) {
        std::string name = "j" + std::to_string(rng.Uniform(12));
        v1::JobSpec spec = JobBuilder(name, rng.Uniform(2) ? "alice" : "bob")
                               .Tasks(1 + rng.Uniform(4))
                               .Priority(static_cast<int32_t>(rng.Uniform(3) * 100 + rng.Uniform(2) * 150))
                               .Cpu(100 + 100 * rng.Uniform(10))
                               .Build();
        // Some wait for another job (perhaps a missing one, or in a
        // cycle: refused); some are scheduled jobs.
        if (rng.Uniform(2) == 0) {
          if (state.jobs().empty() || rng.Uniform(8) == 0) {
            spec.add_after("alice/j0");  // perhaps missing
          } else {
            auto it = state.jobs().begin();
            std::advance(it, rng.Uniform(state.jobs().size()));
            spec.add_after(it->first);
          }
        }
        if (rng.Uniform(8) == 0) spec.set_schedule("* * * * *");
        m = Submit(spec);
        jobs.push_back(m.jobs_submitted().jobs(0).user() + "/" + name);
      } else if (kind == 11) {
        // The batch controller's dependency decisions always pass, in order.
        for (v1::Mutation& r : StepDependencies(state)) {
          r.set_time_ms(step);
          ASSERT_TRUE(state.Apply(r).ok()) << "seed " << seed << " step " << step << ": " << r.ShortDebugString();
          accepted.push_back(r);
        }
        m = Up(machines[0]);
      } else if (kind == 12) {
        // A scheduled job's due time: a run, a skip or a replacement (or
        // an invalid one: a due time not after the last).
        std::vector<std::string> scheduled;
        for (const auto& [id, j] : state.jobs()) {
          if (j->scheduled()) scheduled.push_back(id);
        }
        const std::string job = scheduled.empty() || rng.Uniform(8) == 0 ? jobs[rng.Uniform(jobs.size())]
                                                                         : scheduled[rng.Uniform(scheduled.size())];
        const Job* j = state.FindJob(job);
        const int64_t due = (j ? j->last_due_ms : 0) + 60'000 * (static_cast<int64_t>(rng.Uniform(3)) - 0);
        std::vector<std::string> live = j ? LiveRuns(state, *j) : std::vector<std::string>{};
        m = Triggered(job, due, rng.Uniform(4) == 0 ? "skipped" : "",
                      rng.Uniform(2) == 0 ? live : std::vector<std::string>{});
        if (m.schedule_triggered().run().empty()) m.mutable_schedule_triggered()->clear_replace();
        if (!m.schedule_triggered().run().empty()) jobs.push_back(m.schedule_triggered().run());
        m.set_time_ms(step);
      } else {
        const std::string& job = jobs[rng.Uniform(jobs.size())];
        const std::string& mach = machines[rng.Uniform(machines.size())];
        int32_t idx = static_cast<int32_t>(rng.Uniform(4));
        const Task* t = state.FindTask(job, idx);
        int64_t inc = t ? t->incarnation() : 1;
        switch (kind) {
          case 1:
          case 2:
          case 3: {
            std::vector<v1::TaskRef> victims;
            if (const Machine* mm = state.FindMachine(mach); mm && !mm->tasks().empty() && rng.Uniform(2)) {
              const Task* v = *mm->tasks().begin();
              victims.push_back(Ref(v->job()->id, v->index(), v->incarnation()));
            }
            m = Schedule(job, idx, mach, victims);
            break;
          }
          case 4:
            m = Observed(Ref(job, idx, inc), v1::Task::ACTIVE, 100 + step);
            break;
          case 5:
            m = Exited(Ref(job, idx, inc), static_cast<int32_t>(rng.Uniform(2)));
            break;
          case 6:
            m = rng.Uniform(4) == 0   ? Kill(job)
                : rng.Uniform(2) == 0 ? Lost(Ref(job, idx, inc))
                                      : Rescheduled(Ref(job, idx, inc), "moved", step + 100);
            break;
          case 7:
            m = Down(mach);
            break;
          case 8:
            m = Up(mach);
            break;
          case 9: {
            // An update: a new count, CPU or command; planned as the master
            // does, or (sometimes) with tasks listed at random.
            const Job* j = state.FindJob(job);
            if (j == nullptr) break;
            v1::JobSpec next = j->spec;
            next.set_task_count(1 + static_cast<int32_t>(rng.Uniform(5)));
            if (rng.Uniform(2)) next.mutable_task()->mutable_resources()->set_cpu_millis(100 + 100 * rng.Uniform(15));
            if (rng.Uniform(3) == 0) next.mutable_task()->add_args(std::to_string(step));
            if (rng.Uniform(4) == 0) {
              m = Update(next, {idx}, {}, {static_cast<int32_t>(rng.Uniform(4))});
            } else if (rng.Uniform(3) == 0) {
              // A rolling update: what must restart or move is held.
              v1::UpdateStrategy rolling;
              rolling.set_max_unavailable(1 + static_cast<int32_t>(rng.Uniform(2)));
              rolling.set_canary(static_cast<int32_t>(rng.Uniform(2)));
              rolling.set_progress_deadline_ms(50);
              rolling.set_auto_rollback(rng.Uniform(2) == 0);
              m = PlanUpdate(*j, next, DiffJob(state, j, next), "walk", &rolling);
              planned = j->state != v1::Job::DEAD;
            } else {
              UpdateOptions o;
              o.keep_survivors = rng.Uniform(2) == 0;
              // As herd scale plans it: a new count only (keeping survivors
              // as they run skips the fit check, so limits must not grow).
              if (o.keep_survivors) *next.mutable_task()->mutable_resources() = j->spec.task().resources();
              m = UpdateMutation(next, DiffJob(state, j, next, o), "walk");
              // What the planner says always passes the check.
              planned = j->state != v1::Job::DEAD;
            }
            break;
          }
          case 10: {
            // The rollout controller's decisions always pass the check, in
            // order; or, sometimes, a step listing a task at random.
            if (rng.Uniform(3) == 0) {
              m.mutable_tasks_updated()->set_job(job);
              m.mutable_tasks_updated()->set_version(state.FindJob(job) ? state.FindJob(job)->version : 1);
              m.mutable_tasks_updated()->add_restart(idx);
              break;
            }
            for (v1::Mutation& r : StepRollouts(state, step)) {
              r.set_time_ms(step);
              ASSERT_TRUE(state.Apply(r).ok()) << "seed " << seed << " step " << step << ": " << r.ShortDebugString();
              accepted.push_back(r);
            }
            m = Up(mach);
            break;
          }
          default:
            m = Up(mach);
            break;
        }
      }
      m.set_time_ms(step);
      absl::Status check = state.Check(m);
      absl::Status st = state.Apply(m);
      ASSERT_EQ(check.ok(), st.ok()) << "Check and Apply disagree: " << check << " vs " << st;
      if (planned) ASSERT_TRUE(st.ok()) << "seed " << seed << " step " << step << ": a planned update failed: " << st;
      if (st.ok()) accepted.push_back(m);
      absl::Status inv = state.CheckInvariants();
      ASSERT_TRUE(inv.ok()) << "seed " << seed << " step " << step << ": " << inv;
      if (step % 300 == 0) {
        auto restored = CellState::FromSnapshot(state.ToSnapshot());
        ASSERT_TRUE(restored.ok()) << restored.status();
        ASSERT_TRUE(google::protobuf::util::MessageDifferencer::Equals(state.ToSnapshot(), restored->ToSnapshot()));
      }
    }
    CellState replay;
    for (const auto& m : accepted) ASSERT_TRUE(replay.Apply(m).ok());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(state.ToSnapshot(), replay.ToSnapshot()))
        << "seed " << seed;
    EXPECT_GT(state.revision(), 100);
    EXPECT_GT(std::count_if(accepted.begin(), accepted.end(), [](const auto& m) { return m.has_job_updated(); }), 10)
        << "seed " << seed;
    EXPECT_GT(std::count_if(accepted.begin(), accepted.end(), [](const auto& m) { return m.has_job_released(); }), 3)
        << "seed " << seed;
    EXPECT_GT(std::count_if(accepted.begin(), accepted.end(), [](const auto& m) { return m.has_schedule_triggered(); }), 3)
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace herd::cell

namespace herd::cell {
namespace {

class UserSetTest : public ::testing::Test {};

TEST_F(UserSetTest, RecordsGrantsAndRevocationsAndSurvivesASnapshot) {
  CellState s;
  v1::Mutation m;
  v1::User* u = m.mutable_user_set()->mutable_user();
  u->set_name("bob");
  u->add_capabilities("read-all");
  u->set_revoked_before_s(1'800'000'000);
  ASSERT_TRUE(s.Apply(m).ok());
  ASSERT_NE(s.FindUser("bob"), nullptr);
  EXPECT_EQ(s.FindUser("bob")->capabilities(0), "read-all");
  auto back = CellState::FromSnapshot(s.ToSnapshot());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_NE(back->FindUser("bob"), nullptr);
  EXPECT_EQ(back->FindUser("bob")->revoked_before_s(), 1'800'000'000);
  // A record with nothing left in it goes.
  u->clear_capabilities();
  u->set_revoked_before_s(0);
  ASSERT_TRUE(s.Apply(m).ok());
  EXPECT_EQ(s.FindUser("bob"), nullptr);
  // Bad names are refused, nothing changed.
  u->set_name("Bad Name");
  EXPECT_EQ(s.Apply(m).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::cell
