// Allocs and alloc sets (Borg §2.4) in the cell state: an alloc holds its
// machine's resources; tasks of several jobs run inside it, counted against
// it and not the machine; they move with it; it stays when they restart.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "cell/cell_state.h"
#include "cell/job_update.h"
#include "testing/builders.h"

namespace herd::cell {
namespace {

using namespace herd::testing;  // NOLINT
using v1::Event;

v1::JobSpec AllocSet(const std::string& name, int32_t allocs, int64_t cpu, int64_t mem,
                     const std::string& user = "alice") {
  v1::JobSpec s = JobBuilder(name, user).Tasks(allocs).Cpu(cpu).Memory(mem).Build();
  s.mutable_task()->clear_command();
  s.set_alloc_set(true);
  return s;
}

v1::JobSpec InAlloc(const std::string& name, const std::string& set, int32_t tasks, int64_t cpu, int64_t mem,
                    const std::string& user = "alice") {
  v1::JobSpec s = JobBuilder(name, user).Tasks(tasks).Cpu(cpu).Memory(mem).Build();
  s.set_alloc(set);
  return s;
}

class AllocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Apply(Register(MachineBuilder("m1").Cpu(4000).Memory(8LL << 30).Build()));
    Apply(Register(MachineBuilder("m2").Cpu(4000).Memory(8LL << 30).Build()));
  }
  void Apply(const v1::Mutation& m) {
    absl::Status st = state_.Apply(m);
    ASSERT_TRUE(st.ok()) << st;
    absl::Status inv = state_.CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv;
  }
  void Reject(const v1::Mutation& m, absl::StatusCode code, const std::string& msg_part) {
    v1::CellSnapshot before = state_.ToSnapshot();
    absl::Status st = state_.Apply(m);
    EXPECT_EQ(st.code(), code) << st;
    EXPECT_NE(std::string(st.message()).find(msg_part), std::string::npos) << st;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, state_.ToSnapshot()));
  }
  const Task& T(const std::string& job, int i) { return *state_.FindTask(job, i); }
  // Two allocs of 1 CPU / 1 GiB, alloc 0 on m1; web (600m) and logsaver
  // (300m) submitted into them.
  void LogsaverCell() {
    Apply(Submit(AllocSet("slots", 2, 1000, 1LL << 30)));
    Apply(Schedule("alice/slots", 0, "m1"));
    Apply(Submit({InAlloc("web", "alice/slots", 2, 600, 512LL << 20),
                  InAlloc("logsaver", "alice/slots", 2, 300, 128LL << 20)}));
  }

  CellState state_;
};

TEST_F(AllocTest, TasksOfSeveralJobsShareAnAllocNotTheMachine) {
  LogsaverCell();
  Apply(Schedule("alice/web", 0, "m1"));
  Apply(Schedule("alice/logsaver", 0, "m1"));
  const Machine& m1 = *state_.FindMachine("m1");
  // The machine holds the alloc's 1 CPU, no more; the alloc has 100m left.
  EXPECT_EQ(m1.allocated().cpu_millis, 1000);
  EXPECT_EQ(m1.tasks().size(), 3u);
  EXPECT_EQ(state_.AllocFree(T("alice/slots", 0)).cpu_millis, 100);
  EXPECT_EQ(state_.TasksInAlloc(T("alice/slots", 0)).size(), 2u);
  // Quota: the alloc set is charged (2 allocs), not the tasks in it.
  EXPECT_EQ(state_.Usage("alice", Band::kBatch).cpu_millis, 2000);
  EXPECT_EQ(state_.AllocMembers("alice/slots"), (std::vector<std::string>{"alice/logsaver", "alice/web"}));

  Apply(Submit(InAlloc("more", "alice/slots", 1, 200, 1LL << 20)));
  Reject(Schedule("alice/more", 0, "m1"), absl::StatusCode::kFailedPrecondition,
         "does not fit in alloc alice/slots/0: cpu asks 200m, 100m free");
}

TEST_F(AllocTest, ATaskGoesOnlyWhereItsAllocRuns) {
  LogsaverCell();
  Reject(Schedule("alice/web", 0, "m2"), absl::StatusCode::kFailedPrecondition,
         "runs in alloc alice/slots/0 on m1, not on m2");
  Reject(Schedule("alice/web", 1, "m1"), absl::StatusCode::kFailedPrecondition,
         "runs in alloc alice/slots/1, which is PENDING");
}

TEST_F(AllocTest, TasksMoveWithTheirAlloc) {
  LogsaverCell();
  Apply(Schedule("alice/web", 0, "m1"));
  Apply(Schedule("alice/logsaver", 0, "m1"));
  Apply(Lost(Ref("alice/slots", 0, 1), "vanished"));
  for (const char* job : {"alice/web", "alice/logsaver"}) {
    const Task& t = T(job, 0);
    EXPECT_EQ(t.state(), v1::Task::PENDING) << job;
    EXPECT_EQ(t.last_event()->transition, Event::RESCHEDULE);
    EXPECT_EQ(t.last_event()->reason, "its alloc alice/slots/0 left m1: vanished");
  }
  EXPECT_EQ(state_.FindMachine("m1")->tasks().size(), 0u);
  // The alloc placed again, on m2: its tasks follow it there.
  Apply(Schedule("alice/slots", 0, "m2"));
  Apply(Schedule("alice/web", 0, "m2"));
  EXPECT_EQ(state_.AllocFree(T("alice/slots", 0)).cpu_millis, 400);
  // A machine going down takes the alloc, and so its tasks.
  Apply(Down("m2"));
  EXPECT_EQ(T("alice/web", 0).state(), v1::Task::PENDING);
  EXPECT_EQ(T("alice/slots", 0).state(), v1::Task::PENDING);
}

TEST_F(AllocTest, TheAllocKeepsItsMachineWhenItsTasksEnd) {
  LogsaverCell();
  Apply(Schedule("alice/web", 0, "m1"));
  Apply(Exited(Ref("alice/web", 0, 1), 1));  // failed for good
  EXPECT_EQ(T("alice/web", 0).state(), v1::Task::DEAD);
  EXPECT_EQ(T("alice/slots", 0).state(), v1::Task::RUNNING);
  EXPECT_EQ(T("alice/slots", 0).machine()->name(), "m1");
  EXPECT_EQ(state_.AllocFree(T("alice/slots", 0)).cpu_millis, 1000);
  // Killed and submitted again, it goes back into the same alloc.
  Apply(Kill("alice/web"));
  Apply(Submit(InAlloc("web", "alice/slots", 1, 600, 512LL << 20)));
  Apply(Schedule("alice/web", 0, "m1"));
  EXPECT_EQ(T("alice/web", 0).machine()->name(), "m1");
}

TEST_F(AllocTest, SubmitChecksTheAllocSet) {
  Apply(Submit(AllocSet("slots", 2, 1000, 1LL << 30)));
  Apply(Submit(JobBuilder("plain").Build()));
  Reject(Submit(InAlloc("web", "alice/slots", 3, 100, 1LL << 20)), absl::StatusCode::kFailedPrecondition,
         "has 3 tasks but alloc set alice/slots has 2 allocs");
  Reject(Submit(InAlloc("web", "alice/none", 1, 100, 1LL << 20)), absl::StatusCode::kFailedPrecondition,
         "no live alloc set alice/none");
  Reject(Submit(InAlloc("web", "alice/plain", 1, 100, 1LL << 20)), absl::StatusCode::kFailedPrecondition,
         "is not an alloc set");
  Reject(Submit(InAlloc("web", "alice/slots", 1, 100, 1LL << 20, "bob")), absl::StatusCode::kPermissionDenied,
         "belongs to alice");
  // Both in one submit, the tasks' job first.
  Apply(Submit({InAlloc("w2", "alice/s2", 1, 100, 1LL << 20), AllocSet("s2", 1, 500, 1LL << 30)}));
  EXPECT_EQ(state_.AllocMembers("alice/s2"), (std::vector<std::string>{"alice/w2"}));
}

TEST_F(AllocTest, AnAllocSetWithJobsInItIsNotKilled) {
  LogsaverCell();
  Reject(Kill("alice/slots"), absl::StatusCode::kFailedPrecondition,
         "has live jobs running in it (alice/logsaver, alice/web): kill them first");
  Apply(Kill("alice/web"));
  Apply(Kill("alice/logsaver"));
  EXPECT_TRUE(state_.AllocMembers("alice/slots").empty());
  Apply(Kill("alice/slots"));
}

TEST_F(AllocTest, UpdatesRespectTheAlloc) {
  LogsaverCell();
  Apply(Schedule("alice/web", 0, "m1"));
  // The alloc set cannot shrink below what runs in it, in count or limits.
  v1::JobSpec fewer = AllocSet("slots", 1, 1000, 1LL << 30);
  Reject(Update(fewer), absl::StatusCode::kFailedPrecondition, "runs 2 tasks in it; it cannot shrink to 1 allocs");
  v1::JobSpec smaller = AllocSet("slots", 2, 500, 1LL << 30);
  Reject(Update(smaller), absl::StatusCode::kFailedPrecondition,
         "alloc alice/slots/0: its tasks use 600m cpu; the new limit 500m cannot hold them");
  v1::JobSpec bigger = AllocSet("slots", 2, 2000, 1LL << 30);
  Apply(Update(bigger));
  EXPECT_EQ(state_.FindMachine("m1")->allocated().cpu_millis, 2000);
  EXPECT_EQ(state_.AllocFree(T("alice/slots", 0)).cpu_millis, 1400);
  // A task whose new limits fit its alloc changes in place; one that does
  // not is moved (and waits for room in its alloc).
  v1::JobSpec web = InAlloc("web", "alice/slots", 2, 1200, 512LL << 20);
  v1::JobDiff d = DiffJob(state_, state_.FindJob("alice/web"), web);
  EXPECT_EQ(d.tasks(0).update_class(), v1::UPDATE_IN_PLACE);
  web.mutable_task()->mutable_resources()->set_cpu_millis(2500);
  d = DiffJob(state_, state_.FindJob("alice/web"), web);
  ASSERT_EQ(d.tasks(0).update_class(), v1::UPDATE_RESCHEDULE);
  EXPECT_NE(d.tasks(0).reasons(0).find("does not fit in alloc alice/slots/0"), std::string::npos) << d.tasks(0).reasons(0);
  // alloc: cannot change while the job is live.
  v1::JobSpec moved = InAlloc("web", "alice/other", 2, 600, 512LL << 20);
  Reject(Update(moved), absl::StatusCode::kFailedPrecondition, "alloc: cannot change while the job is live");
}

TEST_F(AllocTest, TasksInAnAllocAreNeverVictims) {
  LogsaverCell();
  Apply(Schedule("alice/web", 0, "m1"));
  Apply(Submit(JobBuilder("urgent").Priority(300).Cpu(3500).Build()));
  Reject(Schedule("alice/urgent", 0, "m1", {Ref("alice/web", 0, 1)}), absl::StatusCode::kFailedPrecondition,
         "runs in an alloc: preempting it frees nothing");
  // The alloc itself may be preempted; its tasks go with it.
  Apply(Schedule("alice/urgent", 0, "m1", {Ref("alice/slots", 0, 1)}));
  EXPECT_EQ(T("alice/web", 0).state(), v1::Task::PENDING);
  EXPECT_EQ(T("alice/slots", 0).last_event()->transition, Event::EVICT);
}

TEST_F(AllocTest, SnapshotsKeepWhatAllocsHold) {
  LogsaverCell();
  Apply(Schedule("alice/web", 0, "m1"));
  Apply(Schedule("alice/logsaver", 0, "m1"));
  absl::StatusOr<CellState> back = CellState::FromSnapshot(state_.ToSnapshot());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->AllocFree(*back->FindTask("alice/slots", 0)).cpu_millis, 100);
  EXPECT_EQ(back->AllocMembers("alice/slots"), state_.AllocMembers("alice/slots"));
  EXPECT_EQ(back->FindMachine("m1")->allocated().cpu_millis, 1000);
}

}  // namespace
}  // namespace herd::cell
