#include "master/core/master_core.h"

#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "master/core/admission/quota.h"
#include "master/core/link/reconcile.h"
#include "master/core/recovery.h"
#include "testing/builders.h"
#include "testing/eventually.h"
#include "testing/fake_agent_link.h"

namespace herd::master {
namespace {

using namespace herd::testing;  // NOLINT

class MasterCoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  void Start() {
    MasterOptions o;
    o.link.poll_interval_ms = 50;
    o.link.poll_timeout_ms = 200;
    o.link.down_after_misses = 2;
    o.link.max_down_fraction = 1.0;
    o.committer.snapshot_every = 50;
    o.committer.feed_size = feed_size_;
    auto core = MasterCore::Create(&store_, &link_, RealClock::Get(), o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    core_->Start();
  }
  void Register(const std::string& name, int64_t cpu = 4000) {
    v1::RegisterMachineRequest r;
    *r.mutable_machine() = MachineBuilder(name).Cpu(cpu).Address(name + ":1").Build();
    ASSERT_TRUE(core_->machines().RegisterMachine(Principal::Machine(r.machine().name()), r).ok());
  }
  absl::StatusOr<v1::SubmitResponse> SubmitJob(const v1::JobSpec& spec, const std::string& request_id = "") {
    v1::SubmitRequest req;
    *req.add_jobs() = spec;
    req.set_request_id(request_id);
    return core_->jobs().Submit(Principal::User("alice"), req);
  }
  v1::GetJobResponse Job(const std::string& job) {
    v1::GetJobRequest r;
    r.set_job(job);
    auto resp = core_->jobs().GetJob(Principal::User("alice"), r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : v1::GetJobResponse();
  }
  // Stops the master and rebuilds the cell from the store, which must give
  // exactly the state the master had (returned); the master stays stopped.
  v1::CellSnapshot StopAndRecover() {
    core_->Stop();
    v1::CellSnapshot before = core_->committer().Read([](const cell::CellState& s) { return s.ToSnapshot(); });
    core_.reset();
    auto recovered = Recover(store_);
    EXPECT_TRUE(recovered.ok()) << recovered.status();
    if (recovered.ok()) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, recovered->ToSnapshot()));
    }
    return before;
  }
  bool AllActive(const std::string& job, int n) {
    v1::GetJobResponse r = Job(job);
    int active = 0;
    for (const auto& t : r.tasks()) active += t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE;
    return active == n;
  }

  store::MemoryLogStore store_;
  FakeAgentLink link_;
  size_t feed_size_ = 100'000;  // Committer::Options::feed_size
  std::unique_ptr<MasterCore> core_;
};

TEST_F(MasterCoreTest, SubmittedTasksAreScheduledAndStarted) {
  Register("m1");
  Register("m2");
  auto r = SubmitJob(JobBuilder("web").Tasks(6).Cpu(1000).Build());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->results(0).created());
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 6); }));
  EXPECT_EQ(link_.Runs("m1:1") + link_.Runs("m2:1"), 6);
  v1::GetJobResponse j = Job("alice/web");
  EXPECT_EQ(j.job().state(), v1::Job::RUNNING);
  EXPECT_EQ(j.tasks(0).last_event().transition(), v1::Event::SCHEDULE);
}

// A machine's http endpoint is listed to scrapers and people: HOST:PORT
// only, kept across a restart of the master.
TEST_F(MasterCoreTest, AMachinesHttpEndpointIsHostPortAndKept) {
  auto reg = [&](const std::string& http) {
    v1::RegisterMachineRequest r;
    *r.mutable_machine() = MachineBuilder("m1").Cpu(1000).Address("m1:1").Build();
    r.mutable_machine()->set_http(http);
    return core_->machines().RegisterMachine(Principal::Machine("m1"), r).status();
  };
  for (const char* bad : {"evil.example:443/x?", "10.0.0.5", "10.0.0.5:0", "10.0.0.5:70000", "a b:80", "h\x1b[2J:80",
                          ":80", "[::1:80"}) {
    absl::Status st = reg(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(st.message(), "is not HOST:PORT")) << st;
  }
  for (const char* good : {"10.0.0.5:9471", "m1.example.com:9471", "[::1]:9471"}) {
    ASSERT_TRUE(reg(good).ok()) << good;
  }
  v1::ListMachinesResponse list = *core_->machines().ListMachines(Principal::User("alice"), {});
  ASSERT_EQ(list.machines_size(), 1);
  EXPECT_EQ(list.machines(0).http(), "[::1]:9471");
  v1::CellSnapshot recovered = StopAndRecover();
  ASSERT_EQ(recovered.machines_size(), 1);
  EXPECT_EQ(recovered.machines(0).http(), "[::1]:9471");
}

TEST_F(MasterCoreTest, SubmitIsIdempotent) {
  Register("m1");
  auto first = SubmitJob(JobBuilder("web").Build(), "req-1");
  ASSERT_TRUE(first.ok());
  int64_t rev = core_->machines().GetCell(Principal::User("alice"))->revision();
  auto again = SubmitJob(JobBuilder("web").Tasks(9).Build(), "req-1");  // same id: first answer
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->results(0).created());
  auto same = SubmitJob(JobBuilder("web").Build());  // identical spec
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->results(0).created());
  // Only scheduling/agent mutations may have happened since; no new job.
  EXPECT_EQ(Job("web").job().submit_revision(), first->revision());
  // A different spec for a live job is an update of it.
  auto different = SubmitJob(JobBuilder("web").Tasks(2).Build());
  ASSERT_TRUE(different.ok()) << different.status();
  EXPECT_TRUE(different->results(0).updated());
  EXPECT_EQ(Job("web").job().version(), 2);
  EXPECT_GE(core_->machines().GetCell(Principal::User("alice"))->revision(), rev);
}

// #33 L1: bob's request id is not alice's. Before, alice's submit with the id
// bob had used answered "bob/deploy unchanged" and created nothing.
TEST_F(MasterCoreTest, RequestIdsAreScopedPerUser) {
  Register("m1");
  v1::SubmitRequest req;
  *req.add_jobs() = JobBuilder("deploy", "bob").Build();
  req.set_request_id("deploy-42");
  auto bob = core_->jobs().Submit(Principal::User("bob"), req);
  ASSERT_TRUE(bob.ok()) << bob.status();
  ASSERT_TRUE(bob->results(0).created());
  auto alice = SubmitJob(JobBuilder("web").Build(), "deploy-42");
  ASSERT_TRUE(alice.ok()) << alice.status();
  ASSERT_EQ(alice->results_size(), 1);
  EXPECT_EQ(alice->results(0).job(), "alice/web");
  EXPECT_TRUE(alice->results(0).created());
  // Alice's retry is hers: the first answer, nothing new.
  auto retry = SubmitJob(JobBuilder("web").Tasks(3).Build(), "deploy-42");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->results(0).job(), "alice/web");
  EXPECT_FALSE(retry->results(0).created());
  EXPECT_EQ(Job("alice/web").job().spec().task_count(), 1);
  // Both kept across a restart of the master.
  v1::CellSnapshot snap = StopAndRecover();
  int records = 0;
  for (const auto& r : snap.requests()) records += r.request_id() == "deploy-42";
  EXPECT_EQ(records, 2);
}

// Incarnation and pid of each task, by index.
std::map<int, std::pair<int64_t, int64_t>> Runs(const v1::GetJobResponse& j) {
  std::map<int, std::pair<int64_t, int64_t>> out;
  for (const auto& t : j.tasks()) out[t.index()] = {t.incarnation(), t.pid()};
  return out;
}

TEST_F(MasterCoreTest, ChangedSpecsUpdateLiveJobsByClass) {
  Register("m1");
  Register("m2");
  auto web = [] { return JobBuilder("web").Priority(200).Tasks(3).Cpu(500); };
  ASSERT_TRUE(SubmitJob(web().Build()).ok());
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 3); }));
  const auto first = Runs(Job("web"));

  // A label: nothing restarts.
  auto labelled = SubmitJob(web().Label("team", "search").Build());
  ASSERT_TRUE(labelled.ok()) << labelled.status();
  const v1::SubmitResult& r = labelled->results(0);
  EXPECT_FALSE(r.created());
  EXPECT_TRUE(r.updated());
  EXPECT_EQ(r.diff().from_version(), 1);
  EXPECT_EQ(r.diff().to_version(), 2);
  EXPECT_EQ(r.diff().unchanged(), 3);
  EXPECT_EQ(Job("web").job().version(), 2);
  EXPECT_EQ(Runs(Job("web")), first);

  // A dry run says what would happen and changes nothing.
  v1::SubmitRequest dry;
  *dry.add_jobs() = web().Label("team", "search").Cpu(700).Build();
  dry.set_dry_run(true);
  const int64_t before = core_->committer().revision();
  auto said = core_->jobs().Submit(Principal::User("alice"), dry);
  ASSERT_TRUE(said.ok()) << said.status();
  EXPECT_EQ(said->results(0).diff().in_place(), 3);
  EXPECT_TRUE(said->results(0).updated());
  EXPECT_EQ(Job("web").job().version(), 2);
  EXPECT_EQ(Job("web").tasks(0).resources().cpu_millis(), 500);
  EXPECT_LE(core_->committer().revision() - before, 3) << "only agents' reports may have come in";

  // The command: every task restarts where it is, with a new run.
  auto restarted = SubmitJob(web().Label("team", "search").Command({"/bin/sleep", "9"}).Build());
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->results(0).diff().restart(), 3);
  ASSERT_TRUE(Eventually([&] {
    auto now = Runs(Job("web"));
    for (const auto& [i, run] : now) {
      if (run.first != first.at(i).first + 1 || run.second == 0 || run.second == first.at(i).second) return false;
    }
    return AllActive("web", 3);
  }));
  const v1::GetJobResponse after = Job("web");
  for (const auto& t : after.tasks()) EXPECT_EQ(t.job_version(), 3);
  EXPECT_EQ(link_.Runs("m1:1") + link_.Runs("m2:1"), 3) << "the old runs are stopped";
}

TEST_F(MasterCoreTest, ScaleAddsAndRemovesOnlyTheTasksItMust) {
  Register("m1");
  Register("m2");
  ASSERT_TRUE(SubmitJob(JobBuilder("web").Tasks(3).Build()).ok());
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 3); }));
  const auto first = Runs(Job("web"));
  v1::ScaleRequest up;
  up.set_job("web");
  up.set_tasks(5);
  auto r = core_->jobs().Scale(Principal::User("alice"), up);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->diff().added(), 2);
  EXPECT_EQ(r->diff().unchanged(), 3);
  EXPECT_EQ(r->job().version(), 2);
  EXPECT_EQ(r->job().spec().task_count(), 5);
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 5); }));
  v1::ScaleRequest down = up;
  down.set_tasks(2);
  down.set_expect_version(2);
  r = core_->jobs().Scale(Principal::User("alice"), down);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->diff().removed(), 3);
  ASSERT_TRUE(Eventually([&] { return link_.Runs("m1:1") + link_.Runs("m2:1") == 2; }));
  auto now = Runs(Job("web"));
  EXPECT_EQ(now.size(), 2u);
  for (const auto& [i, run] : now) EXPECT_EQ(run, first.at(i)) << "task " << i << " was touched";

  // Bad input names the field; a stale version or a dead job is refused; nothing changes.
  const int64_t rev = core_->committer().revision();
  v1::ScaleRequest bad = up;
  bad.set_tasks(0);
  auto st = core_->jobs().Scale(Principal::User("alice"), bad).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "tasks: 0 is outside 1..100000");
  v1::ScaleRequest stale = up;
  stale.set_expect_version(2);
  st = core_->jobs().Scale(Principal::User("alice"), stale).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "job alice/web is at version 3, not 2 (it changed meanwhile)");
  v1::ScaleRequest nope = up;
  nope.set_job("nope");
  EXPECT_EQ(core_->jobs().Scale(Principal::User("alice"), nope).status().code(), absl::StatusCode::kNotFound);
  v1::ScaleRequest dry = up;
  dry.set_dry_run(true);
  auto said = core_->jobs().Scale(Principal::User("alice"), dry);
  ASSERT_TRUE(said.ok()) << said.status();
  EXPECT_EQ(said->diff().added(), 3);
  EXPECT_LE(core_->committer().revision() - rev, 2) << "only agents' reports may have come in";
  EXPECT_EQ(Job("web").job().version(), 3);
}

TEST_F(MasterCoreTest, UpdatesAskQuotaOnlyForWhatTheyAdd) {
  v1::SetQuotaRequest q;
  q.mutable_quota()->set_user("alice");
  q.mutable_quota()->set_band("production");
  q.mutable_quota()->mutable_limit()->set_cpu_millis(2000);
  q.mutable_quota()->add_limited("cpu");
  ASSERT_TRUE(core_->machines().SetQuota(Principal::User("admin"), q).ok());
  auto web = [] { return JobBuilder("web").Priority(200).Tasks(3); };
  ASSERT_TRUE(SubmitJob(web().Cpu(500).Build()).ok());      // 1.5 of 2 cores
  EXPECT_TRUE(SubmitJob(web().Cpu(600).Build()).ok());      // 1.8: fits
  auto over = SubmitJob(web().Cpu(800).Build());            // 2.4: does not
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_EQ(Job("web").job().version(), 2);
  v1::ScaleRequest more;
  more.set_job("web");
  more.set_tasks(4);
  EXPECT_EQ(core_->jobs().Scale(Principal::User("alice"), more).status().code(),
            absl::StatusCode::kResourceExhausted);
  more.set_tasks(1);  // shrinking always fits
  EXPECT_TRUE(core_->jobs().Scale(Principal::User("alice"), more).ok());
}

TEST_F(MasterCoreTest, UpdatesSurviveARestartOfTheMaster) {
  Register("m1");
  ASSERT_TRUE(SubmitJob(JobBuilder("web").Tasks(2).Build()).ok());
  ASSERT_TRUE(SubmitJob(JobBuilder("web").Tasks(2).Label("v", "2").Build()).ok());
  v1::ScaleRequest up;
  up.set_job("web");
  up.set_tasks(4);
  ASSERT_TRUE(core_->jobs().Scale(Principal::User("alice"), up).ok());
  StopAndRecover();
  Start();
  v1::GetJobResponse j = Job("web");
  EXPECT_EQ(j.job().version(), 3);
  EXPECT_EQ(j.tasks_size(), 4);
}

TEST_F(MasterCoreTest, InvalidSpecChangesNothing) {
  int64_t rev = core_->machines().GetCell(Principal::User("alice"))->revision();
  v1::JobSpec bad = JobBuilder("web").Build();
  bad.mutable_task()->mutable_resources()->set_cpu_millis(-5);
  auto r = SubmitJob(bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("resources.cpu"), std::string::npos) << r.status();
  EXPECT_EQ(core_->machines().GetCell(Principal::User("alice"))->revision(), rev);
}

TEST_F(MasterCoreTest, QuotaRejectionSaysWhatAndHowMuch) {
  v1::SetQuotaRequest q;
  q.mutable_quota()->set_user("alice");
  q.mutable_quota()->set_band("production");
  q.mutable_quota()->mutable_limit()->set_cpu_millis(2000);
  q.mutable_quota()->mutable_limit()->set_memory_bytes(1LL << 30);
  ASSERT_TRUE(core_->machines().SetQuota(Principal::User("admin"), q).ok());
  ASSERT_TRUE(SubmitJob(JobBuilder("a").Priority(200).Tasks(2).Memory(256LL << 20).Build()).ok());
  int64_t rev = core_->machines().GetCell(Principal::User("alice"))->revision();
  auto r = SubmitJob(JobBuilder("b").Priority(200).Tasks(3).Memory(256LL << 20).Build());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(r.status().message()),
            "over quota: user alice asks 768Mi memory in band production, 512Mi left of 1Gi "
            "(job alice/b: 3 task(s) of cpu=100m memory=256Mi)");
  EXPECT_EQ(core_->machines().GetCell(Principal::User("alice"))->revision(), rev);
  // Priority 0 is never limited; another band is unlimited without quota.
  EXPECT_TRUE(SubmitJob(JobBuilder("free").Priority(0).Tasks(100).Memory(1LL << 30).Build()).ok());
  EXPECT_TRUE(SubmitJob(JobBuilder("batch").Priority(100).Tasks(10).Memory(1LL << 30).Build()).ok());
}

TEST_F(MasterCoreTest, KillStopsEveryTask) {
  Register("m1");
  ASSERT_TRUE(SubmitJob(JobBuilder("web").Tasks(3).Build()).ok());
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 3); }));
  v1::KillRequest k;
  k.set_job("web");
  auto r = core_->jobs().Kill(Principal::User("alice"), k);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job().state(), v1::Job::DEAD);
  v1::GetJobResponse killed = Job("web");
  for (const auto& t : killed.tasks()) EXPECT_EQ(t.last_event().transition(), v1::Event::KILL);
  EXPECT_TRUE(Eventually([&] { return link_.Runs("m1:1") == 0; }));
  k.set_job("nope");
  EXPECT_EQ(core_->jobs().Kill(Principal::User("alice"), k).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MasterCoreTest, DownMachineTasksMoveAndDuplicatesAreKilledOnReturn) {
  Register("m1");
  Register("m2");
  ASSERT_TRUE(SubmitJob(JobBuilder("web").Tasks(4).Cpu(1000).Build()).ok());
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 4); }));
  // Take away the machine holding the most tasks; remember which moved.
  std::string victim = link_.Runs("m1:1") >= link_.Runs("m2:1") ? "m1" : "m2";
  std::string other = victim == "m1" ? "m2" : "m1";
  std::set<int> moved;
  v1::GetJobResponse before = Job("web");
  for (const auto& t : before.tasks()) {
    if (t.machine() == victim) moved.insert(t.index());
  }
  ASSERT_FALSE(moved.empty());
  const int on_victim = static_cast<int>(moved.size());
  link_.SetUp(victim + ":1", false);
  ASSERT_TRUE(Eventually([&] {
    auto machines = core_->machines().ListMachines(Principal::User("alice"), v1::ListMachinesRequest());
    for (const auto& m : machines->machines()) {
      if (m.name() == victim) return m.state() == v1::Machine::DOWN;
    }
    return false;
  }));
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 4) && link_.Runs(other + ":1") == 4; }));
  v1::GetJobResponse after = Job("web");
  for (const auto& t : after.tasks()) {
    EXPECT_EQ(t.machine(), other);
    if (moved.count(t.index())) {
      EXPECT_EQ(t.incarnation(), 2);
      EXPECT_EQ(t.history(t.history_size() - 2).transition(), v1::Event::LOST);
    } else {
      EXPECT_EQ(t.incarnation(), 1);  // undisturbed
    }
  }
  EXPECT_EQ(link_.Runs(victim + ":1"), on_victim);  // still running there, unseen
  link_.SetUp(victim + ":1", true);
  ASSERT_TRUE(Eventually([&] { return link_.Runs(victim + ":1") == 0; }));  // duplicates killed
  EXPECT_EQ(link_.Runs(other + ":1"), 4);
}

TEST_F(MasterCoreTest, ExitsAndLostRunsAreReported) {
  Register("m1");
  ASSERT_TRUE(SubmitJob(JobBuilder("batch").Tasks(2).Build()).ok());
  ASSERT_TRUE(Eventually([&] { return AllActive("batch", 2); }));
  link_.Exit("m1:1", "alice.batch.0.1", 0);
  link_.Exit("m1:1", "alice.batch.1.1", 7);
  ASSERT_TRUE(Eventually([&] { return Job("batch").job().state() == v1::Job::DEAD; }));
  auto j = Job("batch");
  EXPECT_EQ(j.tasks(0).last_event().transition(), v1::Event::FINISH);
  EXPECT_EQ(j.tasks(1).last_event().transition(), v1::Event::FAIL);
  EXPECT_EQ(j.tasks(1).exit_code(), 7);
}

TEST_F(MasterCoreTest, RecoveryRestoresEverythingAcknowledged) {
  Register("m1");
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(SubmitJob(JobBuilder("j" + std::to_string(i)).Build()).ok());
  ASSERT_TRUE(Eventually([&] { return core_->machines().GetCell(Principal::User("alice"))->tasks_running() == 30; }));
  const v1::CellSnapshot before = StopAndRecover();
  // A snapshot was written along the way (snapshot_every = 50).
  EXPECT_TRUE(store_.ReadSnapshot(before.revision())->has_value());
  Start();
  EXPECT_EQ(core_->machines().GetCell(Principal::User("alice"))->tasks_running(), 30);
}

TEST_F(MasterCoreTest, ReadsAsOfAnyRevisionAndCheckpoint) {
  Register("m1");
  auto r1 = SubmitJob(JobBuilder("a").Build());
  ASSERT_TRUE(r1.ok());
  auto r2 = SubmitJob(JobBuilder("b").Build());
  ASSERT_TRUE(r2.ok());
  v1::ListJobsRequest lj;
  lj.set_at_revision(r1->revision());
  auto past = core_->jobs().ListJobs(Principal::User("alice"), lj);
  ASSERT_TRUE(past.ok()) << past.status();
  ASSERT_EQ(past->jobs_size(), 1);
  EXPECT_EQ(past->jobs(0).id(), "alice/a");
  lj.set_at_revision(0);
  EXPECT_EQ(core_->jobs().ListJobs(Principal::User("alice"), lj)->jobs_size(), 2);

  std::vector<v1::CheckpointRecord> recs;
  ASSERT_TRUE(core_->stream().ExportCheckpoint(Principal::User("alice"), 0, [&](const v1::CheckpointRecord& r) {
    recs.push_back(r);
    return true;
  }).ok());
  ASSERT_GE(recs.size(), 2u);
  ASSERT_TRUE(recs[0].has_header());
  auto state = cell::CellState::FromSnapshot(recs[1].snapshot());
  ASSERT_TRUE(state.ok());
  for (size_t i = 2; i < recs.size(); ++i) ASSERT_TRUE(state->Apply(recs[i].mutation()).ok());
  EXPECT_EQ(state->revision(), recs[0].header().last_revision());
  auto now = Recover(store_, state->revision());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(now->ToSnapshot(), state->ToSnapshot()));
}

TEST_F(MasterCoreTest, WatchStreamsDurableMutations) {
  std::vector<int64_t> revs;
  std::atomic<bool> done{false};
  absl::Status watched;
  std::thread watcher([&] {
    watched = core_->stream().Watch(Principal::User("alice"), 1, [&](const v1::WatchResponse& r) {
      for (const auto& m : r.mutations()) revs.push_back(m.revision());
      if (revs.size() >= 3) done = true;
      return !done;
    }, [&] { return done.load(); });
  });
  Register("m1");
  ASSERT_TRUE(SubmitJob(JobBuilder("a").Build()).ok());
  ASSERT_TRUE(SubmitJob(JobBuilder("b").Build()).ok());
  watcher.join();
  EXPECT_TRUE(watched.ok()) << watched;
  ASSERT_GE(revs.size(), 3u);
  for (size_t i = 0; i < revs.size(); ++i) EXPECT_EQ(revs[i], static_cast<int64_t>(i) + 1);
}

// The cursor the server drives without a thread per stream: revisions older
// than the in-memory feed come from the store in order and without a gap,
// then it parks (kWait) and resumes with the next change.
TEST_F(MasterCoreTest, AWatchCursorReadsTheStoreThenParksAndResumes) {
  core_.reset();
  feed_size_ = 3;
  Start();
  Register("m1");
  for (const char* name : {"a", "b", "c", "d"}) ASSERT_TRUE(SubmitJob(JobBuilder(name).Build()).ok());
  auto cursor = core_->stream().OpenWatch(Principal::User("alice"), 1);
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  std::vector<int64_t> revs;
  v1::WatchResponse msg;
  using Step = Cursor<v1::WatchResponse>::Step;
  Step step = Step::kMessage;
  // Everything up to the durable revision, then nothing (the cell keeps
  // changing meanwhile: its scheduler places the jobs).
  ASSERT_TRUE(Eventually([&] {
    while ((step = (*cursor)->Next(&msg)) == Step::kMessage) {
      for (const auto& m : msg.mutations()) revs.push_back(m.revision());
    }
    return step == Step::kWait && !revs.empty() && revs.back() == core_->committer().durable_revision();
  })) << (*cursor)->status();
  for (size_t i = 0; i < revs.size(); ++i) ASSERT_EQ(revs[i], static_cast<int64_t>(i) + 1);
  ASSERT_TRUE(SubmitJob(JobBuilder("e").Build()).ok());
  ASSERT_TRUE(Eventually([&] { return (*cursor)->Next(&msg) == Step::kMessage; }));
  ASSERT_GT(msg.mutations_size(), 0);
  EXPECT_EQ(msg.mutations(0).revision(), revs.back() + 1);
}

// A follower (another replica on the same log) serves reads and the change
// feed from its hot state, refuses changes itself, and, promoted when the
// leader goes, catches up with what it had not followed yet and leads
// without touching a running task.
TEST_F(MasterCoreTest, FollowerServesReadsAndTakesOverWhenPromoted) {
  Register("m1");
  ASSERT_TRUE(SubmitJob(JobBuilder("web").Tasks(2).Cpu(100).Build()).ok());
  ASSERT_TRUE(Eventually([&] { return AllActive("alice/web", 2); }));

  auto state = Recover(store_, 0);
  ASSERT_TRUE(state.ok()) << state.status();
  const int64_t followed_from = state->revision();
  MasterOptions o;
  o.link.poll_interval_ms = 50;
  auto follower = MasterCore::CreateFollower(&store_, RealClock::Get(), o, std::move(*state));
  ASSERT_TRUE(follower.ok()) << follower.status();
  MasterCore& f = **follower;
  EXPECT_FALSE(f.leading());
  v1::GetJobRequest get;
  get.set_job("alice/web");
  auto web = f.jobs().GetJob(Principal::User("alice"), get);
  ASSERT_TRUE(web.ok()) << web.status();
  EXPECT_EQ(web->tasks_size(), 2);
  // It changes nothing itself.
  v1::SubmitRequest sub;
  *sub.add_jobs() = JobBuilder("nope").Build();
  EXPECT_EQ(f.jobs().Submit(Principal::User("alice"), sub).status().code(), absl::StatusCode::kFailedPrecondition);

  // It follows the leader's log; its feed serves watchers.
  ASSERT_TRUE(SubmitJob(JobBuilder("db").Cpu(100).Build()).ok());
  const int64_t head = *store_.LastRevision();
  std::vector<v1::Mutation> tail;
  ASSERT_TRUE(store_.ReadLog(followed_from + 1, head, [&](const v1::Mutation& m) {
    tail.push_back(m);
    return absl::OkStatus();
  }).ok());
  ASSERT_TRUE(f.committer().Follow(tail).ok());
  EXPECT_EQ(f.committer().revision(), head);
  EXPECT_EQ(f.committer().durable_revision(), head);
  get.set_job("alice/db");
  EXPECT_TRUE(f.jobs().GetJob(Principal::User("alice"), get).ok());
  auto fed = f.committer().WaitForMutations(followed_from, 0, 100);
  ASSERT_TRUE(fed.ok()) << fed.status();
  ASSERT_FALSE(fed->empty());
  EXPECT_EQ(fed->front().revision(), followed_from + 1);
  EXPECT_EQ(fed->back().revision(), head);
  // A gap in what it is given is data loss, not silently skipped.
  v1::Mutation ahead = tail.back();
  ahead.set_revision(head + 2);
  EXPECT_EQ(f.committer().Follow({ahead}).code(), absl::StatusCode::kDataLoss);

  // The leader changes more, then goes away; the follower is promoted.
  ASSERT_TRUE(Eventually([&] { return AllActive("alice/db", 1); }));
  ASSERT_TRUE(SubmitJob(JobBuilder("late").Cpu(100).Build()).ok());
  const v1::GetJobResponse before = Job("alice/web");
  core_->Stop();
  core_.reset();
  ASSERT_TRUE(f.Promote(&store_, &link_).ok());
  EXPECT_TRUE(f.leading());
  f.Start();
  get.set_job("alice/late");
  EXPECT_TRUE(f.jobs().GetJob(Principal::User("alice"), get).ok());  // caught up at promotion
  EXPECT_EQ(f.Promote(&store_, &link_).code(), absl::StatusCode::kFailedPrecondition);
  *sub.mutable_jobs(0) = JobBuilder("after").Cpu(100).Build();
  ASSERT_TRUE(f.jobs().Submit(Principal::User("alice"), sub).ok());
  auto active = [&](const std::string& job, int n) {
    get.set_job(job);
    auto r = f.jobs().GetJob(Principal::User("alice"), get);
    int k = 0;
    if (r.ok()) {
      for (const auto& t : r->tasks()) k += t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE;
    }
    return k == n;
  };
  ASSERT_TRUE(Eventually([&] { return active("alice/after", 1) && active("alice/late", 1); }));
  // The running tasks were not touched by the change of leader.
  get.set_job("alice/web");
  auto after = f.jobs().GetJob(Principal::User("alice"), get);
  ASSERT_TRUE(after.ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(after->tasks(i).machine(), before.tasks(i).machine());
    EXPECT_EQ(after->tasks(i).incarnation(), before.tasks(i).incarnation());
  }
  f.Stop();
}

TEST_F(MasterCoreTest, AmbiguousJobNamesNeedAUser) {
  v1::SubmitRequest req;
  *req.add_jobs() = JobBuilder("web", "bob").Build();
  ASSERT_TRUE(core_->jobs().Submit(Principal::User("bob"), req).ok());
  *req.mutable_jobs(0) = JobBuilder("web", "carol").Build();
  ASSERT_TRUE(core_->jobs().Submit(Principal::User("carol"), req).ok());
  v1::GetJobRequest g;
  g.set_job("web");
  EXPECT_EQ(core_->jobs().GetJob(Principal::User("dave"), g).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->jobs().GetJob(Principal::User("bob"), g)->job().id(), "bob/web");  // the caller's own first
  g.set_job("carol/web");
  EXPECT_EQ(core_->jobs().GetJob(Principal::User("bob"), g)->job().id(), "carol/web");
}

TEST(Reconcile, OnlyDifferencesBecomeMutations) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a").Tasks(3).Build())).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.Apply(Schedule("alice/a", i, "m1")).ok());
  v1::PollRequest req = BuildPollRequest(s, *s.FindMachine("m1"));
  ASSERT_EQ(req.desired_size(), 3);
  EXPECT_EQ(req.desired(0).run_id(), "alice.a.0.1");
  absl::flat_hash_set<std::string> sent = {"alice.a.0.1", "alice.a.1.1"};  // task 2 placed after the poll
  v1::PollResponse resp;
  v1::RunStatus* r0 = resp.add_runs();
  r0->set_run_id("alice.a.0.1");
  r0->set_phase(v1::Task::ACTIVE);
  r0->set_pid(42);
  auto ms = Reconcile(s, "m1", sent, resp, 0);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_TRUE(ms[0].has_task_observed());
  EXPECT_EQ(ms[0].task_observed().pid(), 42);
  EXPECT_TRUE(ms[1].has_task_lost());  // task 1 was sent but the agent lacks it
  ASSERT_TRUE(s.Apply(ms[0]).ok());
  EXPECT_TRUE(Reconcile(s, "m1", {"alice.a.0.1"}, resp, 0).empty());  // nothing new
}

TEST(Reconcile, PortsHealthAndPackagesReachTheCell) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a").Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/a", 0, "m1")).ok());
  v1::PollResponse resp;
  v1::RunStatus* r = resp.add_runs();
  r->set_run_id("alice.a.0.1");
  r->set_phase(v1::Task::ACTIVE);
  (*r->mutable_ports())["http"] = 20001;
  r->mutable_health()->set_state(v1::Health::UNHEALTHY);
  r->mutable_health()->set_message("HTTP 500");
  resp.add_packages()->set_sha256("bb");
  resp.add_packages()->set_sha256("aa");
  auto ms = Reconcile(s, "m1", {"alice.a.0.1"}, resp, 0);
  ASSERT_EQ(ms.size(), 2u);
  ASSERT_TRUE(ms[0].has_machine_packages());
  EXPECT_THAT(ms[0].machine_packages().packages(), ::testing::ElementsAre("aa", "bb"));
  ASSERT_TRUE(ms[1].has_task_observed());
  for (const auto& m : ms) ASSERT_TRUE(s.Apply(m).ok());
  v1::Task t = s.FindTask("alice/a", 0)->ToProto();
  EXPECT_EQ(t.ports().at("http"), 20001);
  EXPECT_EQ(t.health(), "unhealthy: HTTP 500");
  EXPECT_THAT(s.FindMachine("m1")->packages(), ::testing::ElementsAre("aa", "bb"));
  EXPECT_TRUE(Reconcile(s, "m1", {"alice.a.0.1"}, resp, 0).empty());  // nothing new
  r->mutable_health()->set_state(v1::Health::HEALTHY);
  ms = Reconcile(s, "m1", {"alice.a.0.1"}, resp, 0);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].task_observed().health(), "healthy");
}

TEST(Reconcile, CrashLoopsAndEvictionsArePlacedAgainElsewhere) {
  for (bool evicted : {false, true}) {
    cell::CellState s;
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Build())).ok());
    ASSERT_TRUE(s.Apply(Submit(JobBuilder("a").Build())).ok());
    ASSERT_TRUE(s.Apply(Schedule("alice/a", 0, "m1")).ok());
    v1::PollResponse resp;
    v1::RunStatus* r = resp.add_runs();
    r->set_run_id("alice.a.0.1");
    r->set_phase(v1::Task::STARTING);
    r->set_message(evicted ? "evicted: machine out of memory" : "exited with code 1");
    (evicted ? r->set_evicted(true) : r->set_crash_looping(true));
    r->set_terminal(evicted);
    auto ms = Reconcile(s, "m1", {"alice.a.0.1"}, resp, 1000);
    ASSERT_EQ(ms.size(), 1u);
    ASSERT_TRUE(ms[0].has_task_rescheduled()) << ms[0].DebugString();
    EXPECT_EQ(ms[0].task_rescheduled().avoid_until_ms(),
              1000 + (evicted ? kAvoidAfterEvictionMs : kAvoidAfterCrashLoopMs));
    EXPECT_THAT(ms[0].task_rescheduled().reason(), ::testing::HasSubstr(evicted ? "evicted from m1" : "crash loop on m1"));
    ms[0].set_time_ms(1000);
    ASSERT_TRUE(s.Apply(ms[0]).ok());
    v1::Task t = s.FindTask("alice/a", 0)->ToProto();
    EXPECT_EQ(t.state(), v1::Task::PENDING);
    ASSERT_EQ(t.avoid_size(), 1);
    EXPECT_EQ(t.avoid(0).machine(), "m1");
  }
}

TEST(Reconcile, TaskRunCarriesPackagesHealthAndIsolation) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m1").Build())).ok());
  v1::JobSpec spec = JobBuilder("a").Build();
  v1::Package* p = spec.mutable_task()->add_packages();
  p->set_name("web");
  p->set_sha256("ab");
  spec.mutable_task()->mutable_health_check()->mutable_tcp()->set_port("http");
  spec.mutable_task()->mutable_isolation()->set_user("nobody");
  ASSERT_TRUE(s.Apply(Submit(spec)).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/a", 0, "m1")).ok());
  v1::TaskRun run = BuildTaskRun(s, *s.FindTask("alice/a", 0));
  ASSERT_EQ(run.packages_size(), 1);
  EXPECT_EQ(run.packages(0).name(), "web");
  EXPECT_EQ(run.health_check().tcp().port(), "http");
  EXPECT_EQ(run.isolation().user(), "nobody");
}

}  // namespace
}  // namespace herd::master
