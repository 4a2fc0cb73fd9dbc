// The agent's half of the poll protocol (PollServer) over hollow runs
// (HollowRunTable) on virtual time: full and delta polls, a delta on the
// wrong base applies nothing, a busy agent answers at once and says how far
// behind it is, a stopping agent refuses polls.
#include "agent/server/agent_protocol.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/hollow/hollow_runtime.h"

namespace herd::agent {
namespace {

v1::TaskRun MakeRun(const std::string& id) {
  v1::TaskRun r;
  r.set_run_id(id);
  r.mutable_ref()->set_job("alice/j");
  return r;
}

class PollServerTest : public ::testing::Test {
 protected:
  PollServerTest()
      : runtime_(HollowRuntime::Options{.start_ms = 10, .max_parallel_starts = 8}, &clock_),
        table_(&runtime_),
        polls_(&table_, MachineFacts{"m1", ResourceVector(), {}}, &clock_, /*start_wait_ms=*/0) {}

  v1::PollResponse Full(int64_t revision, std::vector<std::string> ids) {
    v1::PollRequest req;
    req.set_machine("m1");
    req.set_revision(revision);
    for (const auto& id : ids) *req.add_desired() = MakeRun(id);
    return Answer(req);
  }
  v1::PollResponse Delta(int64_t base, int64_t revision, std::vector<std::string> add, std::vector<std::string> stop) {
    v1::PollRequest req;
    req.set_machine("m1");
    req.set_delta(true);
    req.set_base_revision(base);
    req.set_revision(revision);
    for (const auto& id : add) *req.add_desired() = MakeRun(id);
    for (const auto& id : stop) req.add_stop(id);
    return Answer(req);
  }
  v1::PollResponse Answer(const v1::PollRequest& req) {
    v1::PollResponse resp;
    grpc::Status st = polls_.Answer(req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }
  std::set<std::string> Ids(const v1::PollResponse& r) {
    std::set<std::string> out;
    for (const auto& run : r.runs()) out.insert(run.run_id());
    return out;
  }
  void Settle() {
    clock_.AdvanceMs(10);
    runtime_.RunDue();
  }

  ManualClock clock_;
  HollowRuntime runtime_;
  HollowRunTable table_;
  PollServer polls_;
};

TEST_F(PollServerTest, FullThenDeltasKeepTheWholeDesiredState) {
  v1::PollResponse r = Full(5, {"a", "b", "c"});
  EXPECT_EQ(r.desired_revision(), 5);
  EXPECT_EQ(Ids(r), (std::set<std::string>{"a", "b", "c"}));
  r = Delta(5, 9, {"d"}, {"a"});
  EXPECT_EQ(r.desired_revision(), 9);
  EXPECT_EQ(Ids(r), (std::set<std::string>{"b", "c", "d"}));
  r = Delta(9, 12, {}, {});
  EXPECT_EQ(r.desired_revision(), 12);
  EXPECT_EQ(Ids(r), (std::set<std::string>{"b", "c", "d"}));
  // A full poll replaces whatever was held.
  r = Full(20, {"x"});
  EXPECT_EQ(r.desired_revision(), 20);
  EXPECT_EQ(Ids(r), (std::set<std::string>{"x"}));
}

// A run sent again with another job version (an update in place) is
// handed to the run table again; the same version is not.
TEST_F(PollServerTest, ARunWithANewJobVersionIsHandedOverAgain) {
  class Recording : public RunTable {
   public:
    void SetDesired(const std::vector<v1::TaskRun>& desired) override { calls.push_back(desired); }
    std::vector<v1::RunStatus> Observe(uint64_t* version) const override { return {}; }
    void DescribeMachine(v1::PollResponse*) const override {}
    uint64_t WaitForChange(uint64_t last, int64_t) const override { return last; }
    uint64_t Version() const override { return 0; }
    int64_t started_ms() const override { return 0; }
    void RenewLease(int64_t, int64_t) override {}
    std::vector<std::vector<v1::TaskRun>> calls;
  } table;
  PollServer polls(&table, MachineFacts{"m1", ResourceVector(), {}}, &clock_, 0);
  auto poll = [&](bool delta, int64_t base, int64_t revision, int64_t version) {
    v1::PollRequest req;
    req.set_machine("m1");
    req.set_delta(delta);
    req.set_base_revision(base);
    req.set_revision(revision);
    v1::TaskRun run = MakeRun("a");
    run.set_job_version(version);
    *req.add_desired() = run;
    v1::PollResponse resp;
    ASSERT_TRUE(polls.Answer(req, &resp).ok());
  };
  poll(false, 0, 1, 1);
  poll(false, 0, 2, 1);
  ASSERT_EQ(table.calls.size(), 1u) << "nothing changed";
  poll(true, 2, 3, 2);
  ASSERT_EQ(table.calls.size(), 2u);
  EXPECT_EQ(table.calls.back()[0].job_version(), 2);
  poll(false, 0, 4, 3);
  ASSERT_EQ(table.calls.size(), 3u);
  EXPECT_EQ(table.calls.back()[0].job_version(), 3);
}

TEST_F(PollServerTest, ADeltaOnAnotherBaseAppliesNothingAndSaysWhatIsHeld) {
  Full(5, {"a", "b"});
  v1::PollResponse r = Delta(4, 9, {"c"}, {"a"});
  EXPECT_EQ(r.desired_revision(), 5);
  EXPECT_EQ(Ids(r), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(table_.Observe().size(), 2u);
}

TEST_F(PollServerTest, AnAgentThatHoldsNothingRefusesDeltas) {
  // A restarted agent: its tasks were re-adopted, but it does not know the
  // revision a delta builds on.
  v1::PollResponse r = Delta(5, 9, {"c"}, {});
  EXPECT_EQ(r.desired_revision(), 0);
  EXPECT_TRUE(Ids(r).empty());
}

TEST_F(PollServerTest, ABusyAgentAnswersAtOnceAndSaysHowManyStartsArePending) {
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(absl::StrCat("r", i));
  v1::PollResponse r = Full(1, ids);
  EXPECT_EQ(r.starts_pending(), 20);
  for (const auto& run : r.runs()) EXPECT_EQ(run.phase(), v1::Task::STARTING);
  Settle();  // 8 at a time
  r = Delta(1, 2, {}, {});
  EXPECT_EQ(r.starts_pending(), 12);
  Settle();
  Settle();
  r = Delta(2, 3, {}, {});
  EXPECT_EQ(r.starts_pending(), 0);
  int active = 0;
  for (const auto& run : r.runs()) active += run.phase() == v1::Task::ACTIVE && run.pid() > 0;
  EXPECT_EQ(active, 20);
  EXPECT_EQ(table_.starts(), 20);
}

TEST_F(PollServerTest, AStoppingAgentRefusesPollsAndAPollForAnotherMachineIsRefused) {
  v1::PollRequest other;
  other.set_machine("m2");
  v1::PollResponse resp;
  EXPECT_EQ(polls_.Answer(other, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  polls_.Drain();
  v1::PollRequest req;
  req.set_machine("m1");
  EXPECT_EQ(polls_.Answer(req, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A run table that only records lease renewals.
class LeaseRecorder : public RunTable {
 public:
  void SetDesired(const std::vector<v1::TaskRun>&) override {}
  std::vector<v1::RunStatus> Observe(uint64_t* version) const override {
    if (version != nullptr) *version = 1;
    return {};
  }
  uint64_t WaitForChange(uint64_t, int64_t) const override { return 1; }
  uint64_t Version() const override { return 1; }
  void DescribeMachine(v1::PollResponse*) const override {}
  int64_t started_ms() const override { return 0; }
  void RenewLease(int64_t contact_age_ms, int64_t lease_ms) override { renewals.emplace_back(contact_age_ms, lease_ms); }
  std::vector<std::pair<int64_t, int64_t>> renewals;  // (age, lease)
};

// At-most-once (issue #11): a poll renews the lease from when the poll it
// acknowledges arrived -- the master saw our reply to that one, so it counts
// the same contact -- never from a poll whose reply the master may not have
// had.
TEST(PollServerLease, APollRenewsTheLeaseFromTheContactItAcknowledges) {
  ManualClock clock;
  LeaseRecorder table;
  PollServer polls(&table, MachineFacts{"m1", ResourceVector(), {}}, &clock, /*start_wait_ms=*/0);
  auto poll = [&](uint64_t token, uint64_t ack, int64_t lease_ms = 3000) {
    v1::PollRequest req;
    req.set_machine("m1");
    req.set_revision(1);
    req.set_lease_ms(lease_ms);
    req.set_lease_token(token);
    req.set_lease_ack(ack);
    v1::PollResponse resp;
    EXPECT_TRUE(polls.Answer(req, &resp).ok());
  };
  poll(11, 0);
  EXPECT_TRUE(table.renewals.empty()) << "nothing acknowledged yet: no lease";
  clock.AdvanceMs(700);
  poll(12, 11);
  ASSERT_EQ(table.renewals.size(), 1u);
  EXPECT_EQ(table.renewals[0], std::make_pair(int64_t{700}, int64_t{3000})) << "from when poll 11 arrived";
  clock.AdvanceMs(500);
  poll(13, 99);  // a token this agent never saw (another master's)
  EXPECT_EQ(table.renewals.size(), 1u);
  clock.AdvanceMs(200);
  poll(14, 12);  // the master did not get 13's reply; 12 still counts
  ASSERT_EQ(table.renewals.size(), 2u);
  EXPECT_EQ(table.renewals[1], std::make_pair(int64_t{700}, int64_t{3000}));
  poll(15, 14, /*lease_ms=*/0);  // a master that grants no lease
  EXPECT_EQ(table.renewals.size(), 2u);
  // A stopping agent refuses polls: no renewal either.
  polls.Drain();
  v1::PollRequest req;
  req.set_machine("m1");
  req.set_lease_ms(3000);
  req.set_lease_token(16);
  req.set_lease_ack(14);
  v1::PollResponse resp;
  EXPECT_FALSE(polls.Answer(req, &resp).ok());
  EXPECT_EQ(table.renewals.size(), 2u);
}

TEST(HollowRunTable, RunsEndByThemselvesWhenGivenARunTimeAndStoppedOnesVanish) {
  ManualClock clock;
  HollowRuntime runtime(HollowRuntime::Options{.start_ms = 0, .max_parallel_starts = 2, .run_ms = 100}, &clock);
  HollowRunTable table(&runtime);
  table.SetDesired({MakeRun("a"), MakeRun("b"), MakeRun("c")});
  runtime.RunDue();  // a and b start; c waits for a slot
  runtime.RunDue();  // c
  EXPECT_EQ(table.starts(), 3);
  EXPECT_EQ(table.live(), 3);
  clock.AdvanceMs(100);
  runtime.RunDue();
  EXPECT_EQ(table.live(), 0);
  for (const auto& s : table.Observe()) {
    EXPECT_TRUE(s.terminal());
    EXPECT_EQ(s.exit_code(), 0);
  }
  table.SetDesired({MakeRun("a")});
  EXPECT_EQ(table.Observe().size(), 1u);
}

}  // namespace
}  // namespace herd::agent
