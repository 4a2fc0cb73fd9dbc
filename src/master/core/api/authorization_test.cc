// Every handler of the master's API asks the Authorizer before it acts:
// one call per RPC of the Herd service, with the right action and object,
// and a refusal returns PERMISSION_DENIED naming the permission and changes
// nothing. The RPCs are enumerated from the service's descriptor, so an RPC
// added without a handler call here (and an authorization check) fails.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "herd/v1/api.pb.h"
#include "master/core/master_core.h"
#include "store/log_store.h"
#include "testing/builders.h"
#include "testing/fake_agent_link.h"

namespace herd::master {
namespace {

using namespace herd::testing;  // NOLINT

struct Asked {
  Principal who;
  Action action;
  Resource on;
};

// Records every question; refuses everything once `deny` is set.
class RecordingAuthorizer final : public Authorizer {
 public:
  absl::Status Authorize(const Principal& who, Action action, const Resource& on) const override {
    std::lock_guard l(mu_);
    if (who.kind == Principal::Kind::kInternal) return absl::OkStatus();  // the master's own scheduler
    asked_.push_back({who, action, on});
    return deny_ ? Denied(who, action, on, "test-denies-all") : absl::OkStatus();
  }
  void Deny(bool on) {
    std::lock_guard l(mu_);
    deny_ = on;
  }
  std::vector<Asked> Take() {
    std::lock_guard l(mu_);
    return std::exchange(asked_, {});
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<Asked> asked_;
  bool deny_ = false;
};

class AuthorizationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auth_ = std::make_shared<RecordingAuthorizer>();
    MasterOptions o;
    o.authorizer = auth_;
    o.run_scheduler = false;  // nothing changes the cell behind the test's back
    o.run_link = false;
    auto core = MasterCore::Create(&store_, &link_, RealClock::Get(), o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    // A cell with a machine and one job of alice's.
    v1::RegisterMachineRequest reg;
    *reg.mutable_machine() = MachineBuilder("m1").Cpu(4000).Address("m1:1").Build();
    ASSERT_TRUE(core_->machines().RegisterMachine(Principal::Machine("m1"), reg).ok());
    v1::SubmitRequest sub;
    *sub.add_jobs() = JobBuilder("web").Tasks(2).Cpu(100).Build();
    ASSERT_TRUE(core_->jobs().Submit(Principal::User("alice"), sub).ok());
    auth_->Take();
  }

  int64_t Revision() { return core_->committer().revision(); }

  // One call of each RPC, as bob, on alice's job where there is a job.
  std::map<std::string, std::function<absl::Status()>> Calls() {
    const Principal bob = Principal::User("bob");
    std::map<std::string, std::function<absl::Status()>> c;
    c["Submit"] = [=, this] {
      v1::SubmitRequest r;
      *r.add_jobs() = JobBuilder("web2", "alice").Tasks(1).Cpu(100).Build();
      return core_->jobs().Submit(bob, r).status();
    };
    c["Kill"] = [=, this] {
      v1::KillRequest r;
      r.set_job("alice/web");
      return core_->jobs().Kill(bob, r).status();
    };
    c["Scale"] = [=, this] {
      v1::ScaleRequest r;
      r.set_job("alice/web");
      r.set_tasks(3);
      return core_->jobs().Scale(bob, r).status();
    };
    c["Rollback"] = [=, this] {
      v1::RollbackRequest r;
      r.set_job("alice/web");
      return core_->rollouts().Rollback(bob, r).status();
    };
    c["SetRollout"] = [=, this] {
      v1::SetRolloutRequest r;
      r.set_job("alice/web");
      r.set_action(v1::SetRolloutRequest::PAUSE);
      return core_->rollouts().SetRollout(bob, r).status();
    };
    c["History"] = [=, this] {
      v1::HistoryRequest r;
      r.set_job("alice/web");
      return core_->rollouts().History(bob, r).status();
    };
    c["GetJob"] = [=, this] {
      v1::GetJobRequest r;
      r.set_job("alice/web");
      return core_->jobs().GetJob(bob, r).status();
    };
    c["ListJobs"] = [=, this] {
      v1::ListJobsRequest r;
      r.set_user("alice");
      return core_->jobs().ListJobs(bob, r).status();
    };
    c["ListTasks"] = [=, this] {
      v1::ListTasksRequest r;
      r.set_job("alice/web");
      return core_->jobs().ListTasks(bob, r).status();
    };
    c["GetTask"] = [=, this] {
      v1::GetTaskRequest r;
      r.set_job("alice/web");
      r.set_index(0);
      return core_->jobs().GetTask(bob, r).status();
    };
    c["Why"] = [=, this] {
      v1::WhyRequest r;
      r.set_job("alice/web");
      return core_->jobs().Why(bob, r).status();
    };
    c["Propose"] = [=, this] {
      v1::ProposeRequest r;
      r.set_scheduler("bobs-scheduler");
      v1::TaskScheduled* p = r.add_placements();
      p->set_job("alice/web");
      p->set_index(0);
      p->set_machine("m1");
      return core_->jobs().Propose(bob, r).status();
    };
    c["RegisterMachine"] = [=, this] {
      v1::RegisterMachineRequest r;
      *r.mutable_machine() = MachineBuilder("m1").Cpu(64000).Address("evil:1").Build();
      return core_->machines().RegisterMachine(bob, r).status();
    };
    c["MachineChanged"] = [=, this] {
      v1::MachineChangedRequest r;
      r.set_machine("m1");
      return core_->machines().MachineChanged(bob, r).status();
    };
    c["ListMachines"] = [=, this] { return core_->machines().ListMachines(bob, {}).status(); };
    c["SetQuota"] = [=, this] {
      v1::SetQuotaRequest r;
      r.mutable_quota()->set_user("alice");
      r.mutable_quota()->set_band("production");
      r.mutable_quota()->mutable_limit()->set_cpu_millis(1);
      return core_->machines().SetQuota(bob, r).status();
    };
    c["DrainMachines"] = [=, this] {
      v1::DrainMachinesRequest r;
      r.add_machines("m1");
      return core_->machines().DrainMachines(bob, r).status();
    };
    c["ListQuotas"] = [=, this] {
      v1::ListQuotasRequest r;
      r.set_user("alice");
      return core_->machines().ListQuotas(bob, r).status();
    };
    c["GetCell"] = [=, this] { return core_->machines().GetCell(bob).status(); };
    c["Watch"] = [=, this] {
      int calls = 0;
      return core_->stream().Watch(
          bob, 1, [&](const v1::WatchResponse&) { return ++calls < 1; }, [&] { return calls > 0; });
    };
    c["GrantAccess"] = [=, this] {
      v1::GrantAccessRequest r;
      r.set_job("alice/web");
      r.set_index(0);
      r.set_action(v1::EXEC);
      return core_->access().GrantAccess(bob, r).status();
    };
    c["IssueCredential"] = [=, this] {
      v1::IssueCredentialRequest r;
      r.set_name("carol");
      r.set_admin(true);
      return core_->access().IssueCredential(bob, r).status();
    };
    c["UpdateUser"] = [=, this] {
      v1::UpdateUserRequest r;
      r.set_name("carol");
      r.add_grant("admin");
      return core_->access().UpdateUser(bob, r).status();
    };
    c["Resolve"] = [=, this] {
      v1::ResolveRequest r;
      r.set_name("alice/web");
      return core_->names().Resolve(bob, r).status();
    };
    c["WatchNames"] = [=, this] {
      v1::WatchNamesRequest r;
      r.set_name("/local/alice/web/0");
      int calls = 0;
      return core_->names().WatchNames(
          bob, r, [&](const v1::WatchNamesResponse&) { return ++calls < 1; }, [&] { return calls > 0; });
    };
    c["ExportCheckpoint"] = [=, this] {
      return core_->stream().ExportCheckpoint(bob, 0, [](const v1::CheckpointRecord&) { return true; });
    };
    // The gRPC handler asks this before it reads the history.
    c["QueryHistory"] = [=, this] { return core_->access().QueryHistory(bob); };
    c["ListAlerts"] = [=, this] { return core_->access().ListAlerts(bob); };
    c["CreateWebLogin"] = [=, this] { return core_->access().OpenWebUi(bob); };
    c["CreateJoinToken"] = [=, this] { return core_->join().CreateJoinToken(bob, {}).status(); };
    c["ListJoinTokens"] = [=, this] { return core_->join().ListJoinTokens(bob, {}).status(); };
    c["RevokeJoinToken"] = [=, this] {
      v1::RevokeJoinTokenRequest r;
      r.set_id("abcdef");
      return core_->join().RevokeJoinToken(bob, r).status();
    };
    return c;
  }
  // The two calls a machine makes before it has any identity (herd agent
  // --join): no Authorizer to ask; the CA is public and Join's proof is
  // the token (join_test.cc, join_integration_test).
  static std::set<std::string> Unauthenticated() { return {"GetJoinInfo", "Join"}; }

  // What each RPC must ask: the action and the object.
  static std::map<std::string, std::pair<Action, Resource>> Expected() {
    const Resource web{"alice/web", "alice", ""};
    return {
        {"Submit", {Action::kSubmitJob, {"alice/web2", "alice", ""}}},
        {"Kill", {Action::kKillJob, web}},
        {"Scale", {Action::kScaleJob, web}},
        {"Rollback", {Action::kRollbackJob, web}},
        {"SetRollout", {Action::kControlRollout, web}},
        {"History", {Action::kReadJob, web}},
        {"GetJob", {Action::kReadJob, web}},
        {"ListJobs", {Action::kListJobs, {"", "alice", ""}}},
        {"ListTasks", {Action::kReadJob, web}},
        {"GetTask", {Action::kReadJob, web}},
        {"Why", {Action::kReadJob, web}},
        {"Propose", {Action::kPropose, {}}},
        {"RegisterMachine", {Action::kRegisterMachine, {"", "", "m1"}}},
        {"MachineChanged", {Action::kNotifyMachine, {"", "", "m1"}}},
        {"ListMachines", {Action::kListMachines, {}}},
        {"SetQuota", {Action::kSetQuota, {"", "alice", ""}}},
        {"DrainMachines", {Action::kDrainMachine, {"", "", "m1"}}},
        {"ListQuotas", {Action::kListQuotas, {"", "alice", ""}}},
        {"GetCell", {Action::kReadCell, {}}},
        {"Watch", {Action::kWatch, {}}},
        {"ExportCheckpoint", {Action::kExportCheckpoint, {}}},
        {"GrantAccess", {Action::kExecTask, web}},
        {"IssueCredential", {Action::kManageUsers, {"", "carol", ""}}},
        {"UpdateUser", {Action::kManageUsers, {"", "carol", ""}}},
        {"QueryHistory", {Action::kQueryHistory, {}}},
        {"ListAlerts", {Action::kListAlerts, {}}},
        {"CreateWebLogin", {Action::kOpenWebUi, {}}},
        {"Resolve", {Action::kResolveName, web}},
        {"WatchNames", {Action::kResolveName, web}},
        {"CreateJoinToken", {Action::kManageUsers, {}}},
        {"ListJoinTokens", {Action::kManageUsers, {}}},
        {"RevokeJoinToken", {Action::kManageUsers, {}}},
    };
  }

  static std::vector<std::string> ServiceMethods() {
    const google::protobuf::ServiceDescriptor* herd =
        v1::SubmitRequest::descriptor()->file()->FindServiceByName("Herd");
    std::vector<std::string> out;
    for (int i = 0; herd != nullptr && i < herd->method_count(); ++i) out.push_back(herd->method(i)->name());
    return out;
  }

  store::MemoryLogStore store_;
  FakeAgentLink link_;
  std::shared_ptr<RecordingAuthorizer> auth_;
  std::unique_ptr<MasterCore> core_;
};

TEST_F(AuthorizationTest, EveryRpcOfTheServiceIsCoveredHere) {
  const std::vector<std::string> methods = ServiceMethods();
  ASSERT_FALSE(methods.empty());
  auto calls = Calls();
  auto expected = Expected();
  int unauthenticated = 0;
  for (const std::string& m : methods) {
    if (Unauthenticated().contains(m)) {
      ++unauthenticated;
      continue;
    }
    EXPECT_TRUE(calls.contains(m)) << "RPC " << m << " has no handler call in this test: add one, and make its "
                                   << "handler ask the Authorizer";
    EXPECT_TRUE(expected.contains(m)) << "RPC " << m << ": say which action it asks";
  }
  EXPECT_EQ(unauthenticated, static_cast<int>(Unauthenticated().size()));
  EXPECT_EQ(calls.size() + Unauthenticated().size(), methods.size());
  // Every action is asked by some RPC (reads ask for secrets too; a grant
  // is for exec or for logs).
  std::set<Action> used;
  for (auto& [m, call] : calls) (void)call();
  v1::GrantAccessRequest logs;
  logs.set_job("alice/web");
  logs.set_action(v1::READ_LOGS);
  (void)core_->access().GrantAccess(Principal::User("bob"), logs);
  v1::SubmitRequest as_root;
  v1::JobSpec* spec = as_root.add_jobs();
  *spec = JobBuilder("rooty", "bob").Tasks(1).Cpu(100).Build();
  spec->mutable_task()->mutable_isolation()->set_user("root");
  (void)core_->jobs().Submit(Principal::User("bob"), as_root);
  // Not an RPC: the master's /metrics (herd master --metrics).
  (void)core_->access().ReadMetrics(Principal::User("bob"));
  for (const Asked& a : auth_->Take()) used.insert(a.action);
  EXPECT_EQ(used.size(), static_cast<size_t>(Action::kCount));
}

TEST_F(AuthorizationTest, EachHandlerAsksWithItsActionAndObject) {
  auto expected = Expected();
  for (auto& [method, call] : Calls()) {
    (void)call();
    std::vector<Asked> asked = auth_->Take();
    ASSERT_FALSE(asked.empty()) << method << " did not ask the Authorizer";
    const Asked& a = asked.front();
    EXPECT_EQ(a.who.name, "bob") << method;
    EXPECT_EQ(a.action, expected[method].first) << method << " asked for " << ActionName(a.action);
    EXPECT_EQ(a.on.job, expected[method].second.job) << method;
    EXPECT_EQ(a.on.owner, expected[method].second.owner) << method;
    EXPECT_EQ(a.on.machine, expected[method].second.machine) << method;
  }
}

TEST_F(AuthorizationTest, ARefusalIsPermissionDeniedNamingThePermissionAndChangesNothing) {
  auth_->Deny(true);
  const int64_t before = Revision();
  const v1::CellSnapshot state = core_->committer().Read([](const cell::CellState& s) { return s.ToSnapshot(); });
  for (auto& [method, call] : Calls()) {
    absl::Status st = call();
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << method << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "user bob may not ")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "'test-denies-all'")) << st;
    EXPECT_EQ(Revision(), before) << method << " changed the cell although refused";
  }
  const v1::CellSnapshot after = core_->committer().Read([](const cell::CellState& s) { return s.ToSnapshot(); });
  EXPECT_EQ(after.SerializeAsString(), state.SerializeAsString());
  // The default policy allows (today's behaviour).
  auth_->Deny(false);
  v1::KillRequest k;
  k.set_job("alice/web");
  EXPECT_TRUE(core_->jobs().Kill(Principal::User("bob"), k).ok());
  EXPECT_GT(Revision(), before);
}

TEST(DefaultAuthorizer, AllowsEverything) {
  AllowAll allow;
  EXPECT_TRUE(allow.Authorize(Principal::User("x"), Action::kExportCheckpoint, Resource{}).ok());
  EXPECT_EQ(Denied(Principal::Machine("m9"), Action::kRegisterMachine, Resource{"", "", "m1"}, "machine:m1").message(),
            "machine m9 may not register-machine on machine m1: it needs the permission 'machine:m1'");
}

}  // namespace
}  // namespace herd::master

namespace herd::master {
namespace {

// A disk below its reserve: every change is refused saying so, nothing is
// applied, and reads go on; when space comes back, so do changes.
TEST(DiskReserve, ChangesStopAndReadsGoOnWhileTheDiskIsFull) {
  store::MemoryLogStore store;
  FakeAgentLink link;
  std::atomic<int64_t> free_bytes{1ll << 30};
  MasterOptions o;
  o.run_scheduler = false;
  o.run_link = false;
  o.committer.free_bytes = [&] { return free_bytes.load(); };
  auto core = MasterCore::Create(&store, &link, RealClock::Get(), o);
  ASSERT_TRUE(core.ok()) << core.status();
  v1::SubmitRequest sub;
  *sub.add_jobs() = JobBuilder("web").Tasks(1).Cpu(100).Build();
  ASSERT_TRUE((*core)->jobs().Submit(Principal::User("alice"), sub).ok());
  const int64_t before = (*core)->committer().revision();
  free_bytes = 10ll << 20;
  v1::SubmitRequest more;
  *more.add_jobs() = JobBuilder("db").Tasks(1).Cpu(100).Build();
  absl::Status st = (*core)->jobs().Submit(Principal::User("alice"), more).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "10 MiB free, below its reserve of 64 MiB")) << st;
  EXPECT_EQ((*core)->committer().revision(), before);
  v1::ListJobsRequest list;
  auto jobs = (*core)->jobs().ListJobs(Principal::User("alice"), list);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs_size(), 1);
  free_bytes = 1ll << 30;
  EXPECT_TRUE((*core)->jobs().Submit(Principal::User("alice"), more).ok());
}

// A master core alone (no scheduler, no link) for admission tests.
struct BareCore {
  explicit BareCore(MasterOptions o) {
    o.run_scheduler = false;
    o.run_link = false;
    auto c = MasterCore::Create(&store, &link, RealClock::Get(), std::move(o));
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) core = std::move(*c);
  }
  store::MemoryLogStore store;
  FakeAgentLink link;
  std::unique_ptr<MasterCore> core;
};

// Issue #33, M6: no quota held priority 0 (300k tasks in three submits). A
// user's live tasks are capped at every priority; admins are not.
TEST(TaskCount, EachUsersLiveTasksAreCappedAtEveryPriority) {
  MasterOptions o;
  o.max_tasks_per_user = 10;
  BareCore bare(o);
  ASSERT_TRUE(bare.core);
  std::unique_ptr<MasterCore>* core = &bare.core;
  auto submit = [&](const Principal& who, v1::JobSpec spec) {
    v1::SubmitRequest req;
    *req.add_jobs() = std::move(spec);
    return (*core)->jobs().Submit(who, req).status();
  };
  const Principal bob = Principal::User("bob");
  EXPECT_TRUE(submit(bob, JobBuilder("a", "bob").Tasks(8).Priority(0).Build()).ok());
  absl::Status st = submit(bob, JobBuilder("b", "bob").Tasks(3).Priority(0).Build());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "--max-tasks-per-user")) << st;
  EXPECT_TRUE(submit(bob, JobBuilder("b", "bob").Tasks(2).Priority(0).Build()).ok());
  // Scaling up past it is refused too; an update that keeps the count is not.
  v1::ScaleRequest up;
  up.set_job("bob/a");
  up.set_tasks(9);
  EXPECT_EQ((*core)->jobs().Scale(bob, up).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(submit(bob, JobBuilder("a", "bob").Tasks(8).Priority(0).Cpu(200).Build()).ok());
  // Other users have their own count; admins are not held to it.
  EXPECT_TRUE(submit(Principal::User("alice"), JobBuilder("c", "alice").Tasks(10).Priority(0).Build()).ok());
  Principal admin = Principal::User("root");
  admin.capabilities |= static_cast<uint32_t>(Capability::kAdmin);
  EXPECT_TRUE(submit(admin, JobBuilder("d", "root").Tasks(50).Build()).ok());
  // Killing frees room.
  v1::KillRequest kill;
  kill.set_job("bob/b");
  ASSERT_TRUE((*core)->jobs().Kill(bob, kill).ok());
  EXPECT_TRUE(submit(bob, JobBuilder("e", "bob").Tasks(2).Priority(0).Build()).ok());
}

// Issue #33, M5: below the reserve, what frees space still goes through --
// the admin's kill, a scale-down -- while growing is refused; only in the
// last quarter of the reserve is every change refused.
TEST(DiskReserve, KillsAndScaleDownsFreeAFullDisk) {
  std::atomic<int64_t> free_bytes{1ll << 30};
  MasterOptions o;
  o.committer.free_bytes = [&] { return free_bytes.load(); };
  BareCore bare(o);
  ASSERT_TRUE(bare.core);
  std::unique_ptr<MasterCore>* core = &bare.core;
  v1::SubmitRequest sub;
  *sub.add_jobs() = JobBuilder("web").Tasks(3).Cpu(100).Build();
  *sub.add_jobs() = JobBuilder("filler").Tasks(1).Cpu(100).Build();
  *sub.add_jobs() = JobBuilder("db").Tasks(1).Cpu(100).Build();
  ASSERT_TRUE((*core)->jobs().Submit(Principal::User("alice"), sub).ok());
  free_bytes = 40ll << 20;  // below the 64 MiB reserve, above its last quarter
  v1::ScaleRequest up;
  up.set_job("web");
  up.set_tasks(5);
  EXPECT_EQ((*core)->jobs().Scale(Principal::User("alice"), up).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::ScaleRequest down = up;
  down.set_tasks(1);
  auto scaled = (*core)->jobs().Scale(Principal::User("alice"), down);
  EXPECT_TRUE(scaled.ok()) << scaled.status();
  v1::KillRequest kill;
  kill.set_job("filler");
  auto killed = (*core)->jobs().Kill(Principal::User("alice"), kill);
  EXPECT_TRUE(killed.ok()) << killed.status();
  free_bytes = 10ll << 20;  // the last quarter: nothing
  kill.set_job("db");
  absl::Status st = (*core)->jobs().Kill(Principal::User("alice"), kill).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
}

}  // namespace
}  // namespace herd::master
