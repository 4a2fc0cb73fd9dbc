// The framework manager on a real master core (committer, cell state, the
// in-memory store) with a ManualClock: offers by DRF through real commits,
// statuses from the cell, acknowledgements, failover, filters, timeouts and
// the one ledger it shares with everything else that places tasks.
#include "master/core/frameworks/manager.h"

#include <gtest/gtest.h>

#include "base/framework_labels.h"
#include "master/core/testing.h"

namespace herd::master::frameworks {
namespace {

using namespace herd::testing;  // NOLINT

constexpr int64_t kGi = 1ll << 30;

// Only the frameworks place tasks here (the master runs no scheduler).
class ManagerTest : public ManualMasterTest {
 protected:
  void SetUp() override {
    MasterOptions o;
    if (policy_) o.authorizer = std::make_shared<CellPolicy>();
    Open(o);
    mgr_ = std::make_unique<FrameworkManager>(&core_->committer(), &clock_, &core_->options(), opts_);
  }

  using ManualMasterTest::AddMachine;
  void AddMachine(const std::string& name, int64_t cpu, int64_t mem, std::map<std::string, std::string> attrs = {}) {
    MachineBuilder b(name);
    b.Cpu(cpu).Memory(mem).Address(name + ":1");
    for (const auto& [k, v] : attrs) b.Attr(k, v);
    AddMachine(b.Build());
  }

  FrameworkManager::Subscription Subscribe(const std::string& user, const std::string& name, std::string id = "",
                                           int64_t failover_ms = 0, const std::string& role = "") {
    v1::SubscribeRequest req;
    req.mutable_framework()->set_name(name);
    req.mutable_framework()->set_role(role);
    req.mutable_framework()->set_id(id);
    req.mutable_framework()->set_failover_timeout_ms(failover_ms);
    auto sub = mgr_->Subscribe(Principal::User(user), req);
    EXPECT_TRUE(sub.ok()) << sub.status();
    return sub.ok() ? *sub : FrameworkManager::Subscription{};
  }

  // The events waiting on a stream, now.
  static std::vector<v1::FrameworkEvent> Drain(const FrameworkManager::Subscription& s) {
    std::vector<v1::FrameworkEvent> out;
    v1::FrameworkEvent e;
    while (s.events->Next(&e, absl::ZeroDuration())) out.push_back(e);
    return out;
  }
  static std::vector<v1::ResourceOffer> Offers(const std::vector<v1::FrameworkEvent>& events) {
    std::vector<v1::ResourceOffer> out;
    for (const auto& e : events) {
      if (e.has_offers()) out.insert(out.end(), e.offers().offers().begin(), e.offers().offers().end());
    }
    return out;
  }
  static std::vector<v1::FrameworkTaskStatus> Updates(const std::vector<v1::FrameworkEvent>& events) {
    std::vector<v1::FrameworkTaskStatus> out;
    for (const auto& e : events) {
      if (e.has_update()) out.push_back(e.update().status());
    }
    return out;
  }

  // The next allocation round (the offer interval passed).
  void Round() {
    clock_.AdvanceMs(opts_.offer_interval_ms);
    mgr_->Tick();
  }

  absl::StatusOr<v1::AcceptResponse> Accept(const std::string& user, const v1::ResourceOffer& offer,
                                            const std::string& task, int64_t cpu, int64_t mem) {
    v1::AcceptRequest req;
    req.set_framework_id(offer.framework_id());
    req.add_offer_ids(offer.id());
    v1::FrameworkTask* t = req.add_tasks();
    t->set_task_id(task);
    t->add_argv("/bin/true");
    t->mutable_resources()->set_cpu_millis(cpu);
    t->mutable_resources()->set_memory_bytes(mem);
    return mgr_->Accept(Principal::User(user), req);
  }

  // The manager again, with `role` weighted and guaranteed as `r`.
  void SetRole(const std::string& role, RoleOptions r) {
    opts_.roles[role] = r;
    mgr_ = std::make_unique<FrameworkManager>(&core_->committer(), &clock_, &core_->options(), opts_);
  }

  // Frameworks that each take one task of `cpu` per offer (declining what
  // is too small) for `rounds` allocation rounds: how many each launched.
  std::vector<int> OnePerOffer(const std::vector<std::pair<FrameworkManager::Subscription*, std::string>>& fws,
                               int64_t cpu, int64_t mem, int rounds) {
    std::vector<int> launched(fws.size());
    for (int round = 0; round < rounds; ++round) {
      Round();
      for (size_t i = 0; i < fws.size(); ++i) {
        const auto& [sub, user] = fws[i];
        for (const v1::ResourceOffer& o : Offers(Drain(*sub))) {
          if (o.resources().cpu_millis() < cpu || o.resources().memory_bytes() < mem) {
            v1::DeclineRequest d;
            d.set_framework_id(o.framework_id());
            d.add_offer_ids(o.id());
            EXPECT_TRUE(mgr_->Decline(Principal::User(user), d).ok());
            continue;
          }
          auto r = Accept(user, o, absl::StrCat("t", round), cpu, mem);
          EXPECT_TRUE(r.ok()) << r.status();
          if (r.ok() && r->statuses(0).state() == v1::TASK_STAGING) ++launched[i];
        }
      }
    }
    return launched;
  }

  const cell::Job* Job(const std::string& id) {
    return core_->committer().Read([&](const cell::CellState& s) { return s.FindJob(id); });
  }
  v1::TaskRef Ref(const std::string& job) {
    v1::TaskRef r;
    r.set_job(job);
    r.set_index(0);
    r.set_incarnation(core_->committer().Read(
        [&](const cell::CellState& s) { return s.FindTask(job, 0)->incarnation(); }));
    return r;
  }
  bool policy_ = false;  // the cell's real policy instead of allow-all
  ManagerOptions opts_;
  std::unique_ptr<FrameworkManager> mgr_;
};

// The Mesos paper's example (seed 002, §4): 9 CPUs and 18 GB; framework A
// runs tasks of <1 CPU, 4 GB>, B of <3 CPUs, 1 GB>; each accepts one task
// per offer. DRF gives A 3 tasks and B 2, through real offers and commits.
TEST_F(ManagerTest, MesosDrfExampleThroughOffers) {
  AddMachine("m1", 9000, 18 * kGi);
  auto a = Subscribe("alice", "a");
  auto b = Subscribe("bob", "b");
  std::map<std::string, int> launched;
  for (int round = 0; round < 20; ++round) {
    Round();
    for (auto* sub : {&a, &b}) {
      const bool is_a = sub == &a;
      for (const v1::ResourceOffer& o : Offers(Drain(*sub))) {
        const int64_t cpu = is_a ? 1000 : 3000, mem = is_a ? 4 * kGi : 1 * kGi;
        if (o.resources().cpu_millis() < cpu || o.resources().memory_bytes() < mem) {
          v1::DeclineRequest d;
          d.set_framework_id(o.framework_id());
          d.add_offer_ids(o.id());
          ASSERT_TRUE(mgr_->Decline(Principal::User(is_a ? "alice" : "bob"), d).ok());
          continue;
        }
        auto r = Accept(is_a ? "alice" : "bob", o, absl::StrCat("t", round), cpu, mem);
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_EQ(r->statuses(0).state(), v1::TASK_STAGING) << r->statuses(0).message();
        ++launched[is_a ? "a" : "b"];
      }
    }
  }
  EXPECT_EQ(launched["a"], 3);
  EXPECT_EQ(launched["b"], 2);
  // The tasks are Herd jobs, placed on m1: the cell's ledger holds them.
  core_->committer().Read([&](const cell::CellState& s) {
    EXPECT_EQ(s.FindMachine("m1")->allocated().cpu_millis, 9000);
    return 0;
  });
}

TEST_F(ManagerTest, StatusUpdatesUntilAcknowledged) {
  AddMachine("m1", 4000, 8 * kGi);
  auto f = Subscribe("alice", "batch");
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  auto r = Accept("alice", offers[0], "hello", 100, 64 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->statuses(0).state(), v1::TASK_STAGING) << r->statuses(0).message();
  const std::string job = r->statuses(0).job();
  const cell::Job* j = Job(job);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->spec.user(), "alice");
  EXPECT_EQ(j->spec.labels().at(std::string(kFrameworkTaskLabel)), "hello");
  EXPECT_EQ(j->spec.restart().mode(), v1::RestartPolicy::NEVER);
  auto staged = Updates(Drain(f));
  ASSERT_EQ(staged.size(), 1u);
  EXPECT_EQ(staged[0].state(), v1::TASK_STAGING);

  // The agent reports it running, then exited 0.
  v1::Mutation obs;
  *obs.mutable_task_observed()->mutable_task() = Ref(job);
  obs.mutable_task_observed()->set_phase(v1::Task::ACTIVE);
  Commit(obs);
  mgr_->Tick();
  auto running = Updates(Drain(f));
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].state(), v1::TASK_RUNNING);
  EXPECT_EQ(running[0].machine(), "m1");

  v1::Mutation exited;
  *exited.mutable_task_exited()->mutable_task() = Ref(job);
  exited.mutable_task_exited()->set_exit_code(0);
  Commit(exited);
  mgr_->Tick();
  auto done = Updates(Drain(f));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].state(), v1::TASK_FINISHED);
  // Its resources are no longer the framework's.
  EXPECT_EQ(mgr_->Held(f.framework_id).cpu_millis, 0);

  // Not acknowledged: sent again after the resend interval, with the same uuid.
  clock_.AdvanceMs(opts_.resend_ms);
  mgr_->Tick();
  auto again = Updates(Drain(f));
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(again.back().uuid(), done[0].uuid());
  for (const auto& u : {staged[0], running[0], done[0]}) {
    v1::AcknowledgeRequest ack;
    ack.set_framework_id(f.framework_id);
    ack.set_task_id(u.task_id());
    ack.set_uuid(u.uuid());
    ASSERT_TRUE(mgr_->Acknowledge(Principal::User("alice"), ack).ok());
  }
  clock_.AdvanceMs(opts_.resend_ms);
  mgr_->Tick();
  EXPECT_TRUE(Updates(Drain(f)).empty());
}

TEST_F(ManagerTest, FailoverWithinTimeoutKeepsTasksPastItKillsThem) {
  AddMachine("m1", 4000, 8 * kGi);
  auto f = Subscribe("alice", "batch", "", /*failover_ms=*/60'000);
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  auto r = Accept("alice", offers[0], "long", 100, 64 << 20);
  ASSERT_TRUE(r.ok());
  const std::string job = r->statuses(0).job();

  mgr_->Disconnected(f);
  EXPECT_FALSE(mgr_->connected(f.framework_id));
  clock_.AdvanceMs(59'000);
  mgr_->Tick();
  EXPECT_NE(Job(job)->state, v1::Job::DEAD);
  // Back within its timeout, with its id: the task is still its own, and
  // it hears about what it did not acknowledge.
  auto again = Subscribe("alice", "batch", f.framework_id, 60'000);
  ASSERT_EQ(again.framework_id, f.framework_id);
  auto events = Drain(again);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].subscribed().framework_id(), f.framework_id);
  EXPECT_FALSE(Updates(events).empty());
  v1::ReconcileRequest rec;
  rec.set_framework_id(f.framework_id);
  auto statuses = mgr_->Reconcile(Principal::User("alice"), rec);
  ASSERT_TRUE(statuses.ok());
  ASSERT_EQ(statuses->statuses_size(), 1);
  EXPECT_EQ(statuses->statuses(0).task_id(), "long");
  EXPECT_EQ(statuses->statuses(0).state(), v1::TASK_STAGING);

  // Gone again, past the timeout: its tasks are killed and it is removed.
  mgr_->Disconnected(again);
  clock_.AdvanceMs(60'000);
  mgr_->Tick();
  EXPECT_EQ(Job(job)->state, v1::Job::DEAD);
  EXPECT_EQ(mgr_->frameworks(), 0u);
}

TEST_F(ManagerTest, DeclineFiltersAreHonoured) {
  AddMachine("m1", 4000, 8 * kGi, {{"rack", "a"}});
  AddMachine("m2", 4000, 8 * kGi, {{"rack", "b"}});
  auto f = Subscribe("alice", "picky");
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 2u);
  // Refuse m1 for 10 s; never offer machines outside rack b... then a.
  v1::DeclineRequest d;
  d.set_framework_id(f.framework_id);
  for (const auto& o : offers) d.add_offer_ids(o.id());
  d.mutable_filters()->set_refuse_ms(10'000);
  ASSERT_TRUE(mgr_->Decline(Principal::User("alice"), d).ok());
  EXPECT_EQ(mgr_->outstanding_offers(), 0u);
  for (int i = 0; i < 9; ++i) {
    Round();
    EXPECT_TRUE(Offers(Drain(f)).empty()) << "offered within the refusal, round " << i;
  }
  v1::DeclineRequest only_a;
  only_a.set_framework_id(f.framework_id);
  (*only_a.mutable_filters()->mutable_require_attributes())["rack"] = "a";
  ASSERT_TRUE(mgr_->Decline(Principal::User("alice"), only_a).ok());
  Round();
  Round();
  auto after = Offers(Drain(f));
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].machine(), "m1");
  EXPECT_EQ(after[0].attributes().at("rack"), "a");
}

TEST_F(ManagerTest, OffersExpireAndStaleAcceptsFail) {
  AddMachine("m1", 4000, 8 * kGi);
  auto f = Subscribe("alice", "slow");
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  clock_.AdvanceMs(opts_.offer_timeout_ms);
  mgr_->Tick();
  auto events = Drain(f);
  bool rescinded = false;
  for (const auto& e : events) rescinded |= e.has_rescind() && e.rescind().offer_id() == offers[0].id();
  EXPECT_TRUE(rescinded);
  auto r = Accept("alice", offers[0], "late", 100, 64 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->statuses(0).state(), v1::TASK_ERROR);
  EXPECT_NE(r->statuses(0).message().find("offer no longer valid"), std::string::npos);
}

// One ledger: what was committed after the offer was made (here a job
// placed by another scheduler) makes the accept's commit fail its fit
// check, and nothing of the framework's is committed.
TEST_F(ManagerTest, NoOverCommitWhenTheMachineFilledMeanwhile) {
  AddMachine("m1", 1000, 2 * kGi);
  auto f = Subscribe("alice", "late");
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  v1::SubmitRequest sub;
  *sub.add_jobs() = JobBuilder("hog", "bob").Tasks(1).Cpu(800).Memory(1 * kGi).Build();
  ASSERT_TRUE(core_->jobs().Submit(Principal::User("bob"), sub).ok());
  v1::Mutation place;
  place.mutable_task_scheduled()->set_job("bob/hog");
  place.mutable_task_scheduled()->set_machine("m1");
  Commit(place);
  auto r = Accept("alice", offers[0], "big", 500, 512 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->statuses(0).state(), v1::TASK_ERROR);
  EXPECT_NE(r->statuses(0).message().find("offer no longer valid"), std::string::npos) << r->statuses(0).message();
  EXPECT_EQ(Job("alice/" + FrameworkManager::JobName(f.framework_id, "big")), nullptr);
  core_->committer().Read([&](const cell::CellState& s) {
    EXPECT_LE(s.FindMachine("m1")->allocated().cpu_millis, 1000);
    return 0;
  });
}

TEST_F(ManagerTest, BadInputIsRefusedClearly) {
  AddMachine("m1", 4000, 8 * kGi);
  auto f = Subscribe("alice", "x");
  v1::SubscribeRequest bad;
  bad.mutable_framework()->set_name("Bad Name");
  EXPECT_EQ(mgr_->Subscribe(Principal::User("alice"), bad).status().code(), absl::StatusCode::kInvalidArgument);
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  v1::AcceptRequest req;
  req.set_framework_id(f.framework_id);
  req.add_offer_ids(offers[0].id());
  req.add_tasks()->set_task_id("UPPER");
  req.add_tasks()->set_task_id("noargv");
  v1::FrameworkTask* huge = req.add_tasks();
  huge->set_task_id("huge");
  huge->add_argv("/bin/true");
  huge->mutable_resources()->set_cpu_millis(8000);
  huge->mutable_resources()->set_memory_bytes(64 << 20);
  auto r = mgr_->Accept(Principal::User("alice"), req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->statuses_size(), 3);
  for (const auto& st : r->statuses()) EXPECT_EQ(st.state(), v1::TASK_ERROR) << st.task_id();
  EXPECT_NE(r->statuses(0).message().find("task_id"), std::string::npos);
  EXPECT_NE(r->statuses(1).message().find("argv"), std::string::npos);
  EXPECT_NE(r->statuses(2).message().find("more than the offers hold"), std::string::npos);
  v1::AcceptRequest twice;
  twice.set_framework_id(f.framework_id);
  twice.add_offer_ids("same");
  twice.add_offer_ids("same");
  EXPECT_EQ(mgr_->Accept(Principal::User("alice"), twice).status().code(), absl::StatusCode::kInvalidArgument);
  v1::AcceptRequest many;
  many.set_framework_id(f.framework_id);
  many.add_offer_ids("x");
  for (size_t i = 0; i <= opts_.max_tasks_per_accept; ++i) many.add_tasks();
  EXPECT_EQ(mgr_->Accept(Principal::User("alice"), many).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TeardownRequest td;
  td.set_framework_id("nope");
  EXPECT_EQ(mgr_->Teardown(Principal::User("alice"), td).status().code(), absl::StatusCode::kNotFound);
}

// Only the Framework API makes framework tasks: an ordinary job claiming
// the labels would wait forever (the built-in scheduler skips it).
TEST_F(ManagerTest, SubmitRefusesFrameworkLabels) {
  v1::SubmitRequest sub;
  v1::JobSpec spec = JobBuilder("sneaky", "bob").Tasks(1).Cpu(100).Build();
  (*spec.mutable_labels())["herd.framework"] = "0123abcd";
  *sub.add_jobs() = spec;
  auto r = core_->jobs().Submit(Principal::User("bob"), sub);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("herd.framework"), std::string::npos) << r.status();
}

class ManagerPolicyTest : public ManagerTest {
 protected:
  void SetUp() override {
    policy_ = true;
    ManagerTest::SetUp();
  }
};

// Under the cell's policy a framework acts as its user: another user can
// neither register as that user nor touch its framework (every call asks
// the Authorizer); an admin can.
TEST_F(ManagerPolicyTest, OnlyItsUserOrAnAdminActsForAFramework) {
  AddMachine("m1", 4000, 8 * kGi);
  v1::SubscribeRequest as_alice;
  as_alice.mutable_framework()->set_name("x");
  as_alice.mutable_framework()->set_user("alice");
  EXPECT_EQ(mgr_->Subscribe(Principal::User("bob"), as_alice).status().code(), absl::StatusCode::kPermissionDenied);
  auto f = Subscribe("alice", "mine");
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  const Principal bob = Principal::User("bob");
  auto bob_accept = Accept("bob", offers[0], "t", 100, 64 << 20);
  EXPECT_EQ(bob_accept.status().code(), absl::StatusCode::kPermissionDenied);
  v1::DeclineRequest d;
  d.set_framework_id(f.framework_id);
  EXPECT_EQ(mgr_->Decline(bob, d).status().code(), absl::StatusCode::kPermissionDenied);
  v1::KillTaskRequest k;
  k.set_framework_id(f.framework_id);
  k.set_task_id("t");
  EXPECT_EQ(mgr_->KillTask(bob, k).status().code(), absl::StatusCode::kPermissionDenied);
  v1::AcknowledgeRequest a;
  a.set_framework_id(f.framework_id);
  EXPECT_EQ(mgr_->Acknowledge(bob, a).status().code(), absl::StatusCode::kPermissionDenied);
  v1::ReconcileRequest r;
  r.set_framework_id(f.framework_id);
  EXPECT_EQ(mgr_->Reconcile(bob, r).status().code(), absl::StatusCode::kPermissionDenied);
  v1::TeardownRequest t;
  t.set_framework_id(f.framework_id);
  EXPECT_EQ(mgr_->Teardown(bob, t).status().code(), absl::StatusCode::kPermissionDenied);
  v1::SubscribeRequest steal;
  steal.mutable_framework()->set_id(f.framework_id);
  EXPECT_EQ(mgr_->Subscribe(bob, steal).status().code(), absl::StatusCode::kPermissionDenied);
  // The offer is still alice's to use; an admin may act for her.
  auto ok = mgr_->Accept(Principal::User("alice"), [&] {
    v1::AcceptRequest req;
    req.set_framework_id(f.framework_id);
    req.add_offer_ids(offers[0].id());
    v1::FrameworkTask* task = req.add_tasks();
    task->set_task_id("t");
    task->add_argv("/bin/true");
    task->mutable_resources()->set_cpu_millis(100);
    task->mutable_resources()->set_memory_bytes(64 << 20);
    return req;
  }());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->statuses(0).state(), v1::TASK_STAGING) << ok->statuses(0).message();
  EXPECT_TRUE(mgr_->Reconcile(Principal::Admin("root"), r).ok());
  // Each sees only the frameworks it may act for.
  EXPECT_EQ(mgr_->ListFrameworks(bob, {})->frameworks_size(), 0);
  EXPECT_EQ(mgr_->ListFrameworks(Principal::User("alice"), {})->frameworks_size(), 1);
  EXPECT_EQ(mgr_->ListFrameworks(Principal::Admin("root"), {})->frameworks_size(), 1);
  EXPECT_TRUE(mgr_->Teardown(Principal::Admin("root"), t).ok());
  const cell::Job* job = Job("alice/" + FrameworkManager::JobName(f.framework_id, "t"));
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->state, v1::Job::DEAD);
}

// A framework registered with an earlier leader and without live tasks is
// unknown to this one: it subscribes again with its id and keeps it.
TEST_F(ManagerTest, UnknownIdReRegistersWithIt) {
  auto f = Subscribe("alice", "old", "0123abcd");
  EXPECT_EQ(f.framework_id, "0123abcd");
  v1::SubscribeRequest bad;
  bad.mutable_framework()->set_id("much-too-long-an-id");
  EXPECT_EQ(mgr_->Subscribe(Principal::User("alice"), bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// A new leader rebuilds the registry from the cell: the framework is known,
// disconnected, and holds what its live tasks use.
TEST_F(ManagerTest, RecoveredFromTheCellOnTakeover) {
  AddMachine("m1", 4000, 8 * kGi);
  auto f = Subscribe("alice", "survivor", "", 120'000);
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  ASSERT_TRUE(Accept("alice", offers[0], "t1", 300, 64 << 20).ok());
  FrameworkManager next(&core_->committer(), &clock_, &core_->options(), opts_);
  next.Recover();
  EXPECT_EQ(next.frameworks(), 1u);
  EXPECT_FALSE(next.connected(f.framework_id));
  EXPECT_EQ(next.Held(f.framework_id).cpu_millis, 300);
  v1::SubscribeRequest req;
  req.mutable_framework()->set_id(f.framework_id);
  req.mutable_framework()->set_name("survivor");
  auto again = next.Subscribe(Principal::User("alice"), req);
  ASSERT_TRUE(again.ok()) << again.status();
  v1::ReconcileRequest rec;
  rec.set_framework_id(f.framework_id);
  auto statuses = next.Reconcile(Principal::User("alice"), rec);
  ASSERT_TRUE(statuses.ok());
  ASSERT_EQ(statuses->statuses_size(), 1);
  EXPECT_EQ(statuses->statuses(0).task_id(), "t1");
}

// Role weights (herd master --framework-role b=3): B's dominant share counts
// a third, so it holds three times what A holds. Ties go to the framework
// registered first: A 1, B 1-3, A 2, B 4-6, A 3, B 7.
TEST_F(ManagerTest, RoleWeightsDivideTheDominantShare) {
  SetRole("heavy", RoleOptions{3, {}, {"bob"}});
  AddMachine("m1", 10'000, 100 * kGi);
  auto a = Subscribe("alice", "a");
  auto b = Subscribe("bob", "b", "", 0, "heavy");
  std::vector<int> n = OnePerOffer({{&a, "alice"}, {&b, "bob"}}, 1000, 1 * kGi, 15);
  EXPECT_EQ(n[0], 3);
  EXPECT_EQ(n[1], 7);
  auto list = mgr_->ListFrameworks(Principal::Admin("root"), {});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->frameworks_size(), 2);
  std::map<std::string, v1::FrameworkSummary> by_name;
  for (const auto& f : list->frameworks()) by_name[f.info().name()] = f;
  EXPECT_DOUBLE_EQ(by_name["a"].role_weight(), 1);
  EXPECT_DOUBLE_EQ(by_name["b"].role_weight(), 3);
  EXPECT_DOUBLE_EQ(by_name["a"].dominant_share(), 0.3);
  EXPECT_EQ(by_name["a"].dominant_resource(), "cpu");
  EXPECT_DOUBLE_EQ(by_name["b"].dominant_share(), 0.7);
  EXPECT_EQ(by_name["b"].tasks(), 7);
  EXPECT_TRUE(by_name["b"].connected());
  EXPECT_EQ(list->total().cpu_millis(), 10'000);
}

// A guarantee puts its role first until it holds it, whatever its share:
// G takes 6 CPUs before A is offered anything; DRF shares out the rest.
TEST_F(ManagerTest, GuaranteedRoleIsOfferedFirstUntilItHoldsItsGuarantee) {
  ResourceVector six;
  six.cpu_millis = 6000;
  SetRole("guaranteed", RoleOptions{1, six, {"bob"}});
  AddMachine("m1", 10'000, 100 * kGi);
  auto a = Subscribe("alice", "a");
  auto g = Subscribe("bob", "g", "", 0, "guaranteed");
  std::vector<int> first = OnePerOffer({{&a, "alice"}, {&g, "bob"}}, 1000, 1 * kGi, 6);
  EXPECT_EQ(first[0], 0);
  EXPECT_EQ(first[1], 6);
  std::vector<int> rest = OnePerOffer({{&a, "alice"}, {&g, "bob"}}, 1000, 1 * kGi, 10);
  EXPECT_EQ(rest[0], 4);
  EXPECT_EQ(rest[1], 0);
}

// #33 M2: one user may not take the cell's frameworks (bob registered 997
// with a 7-day failover timeout and alice could register none), nor ask
// for a failover timeout past the users' cap unless an admin registers it.
TEST_F(ManagerTest, FrameworksPerUserAndTheirFailoverTimeoutAreCapped) {
  opts_.max_frameworks = 10;
  opts_.max_frameworks_per_user = 3;
  mgr_ = std::make_unique<FrameworkManager>(&core_->committer(), &clock_, &core_->options(), opts_);
  auto try_subscribe = [&](const Principal& who, const std::string& user, const std::string& name,
                           int64_t failover_ms) {
    v1::SubscribeRequest req;
    req.mutable_framework()->set_user(user);
    req.mutable_framework()->set_name(name);
    req.mutable_framework()->set_failover_timeout_ms(failover_ms);
    return mgr_->Subscribe(who, req);
  };
  auto week = try_subscribe(Principal::User("bob"), "bob", "squat", 7 * 86'400'000ll);
  ASSERT_EQ(week.status().code(), absl::StatusCode::kPermissionDenied) << week.status();
  EXPECT_NE(week.status().message().find("--framework-max-user-failover"), std::string::npos) << week.status();
  for (int i = 0; i < 3; ++i) {
    auto ok = try_subscribe(Principal::User("bob"), "bob", absl::StrCat("f", i), opts_.max_user_failover_ms);
    ASSERT_TRUE(ok.ok()) << ok.status();
    mgr_->Disconnected(*ok);  // gone, but held for its failover timeout
  }
  auto fourth = try_subscribe(Principal::User("bob"), "bob", "f3", 0);
  ASSERT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted) << fourth.status();
  EXPECT_NE(fourth.status().message().find("--framework-max-per-user 3"), std::string::npos) << fourth.status();
  // Others are not held back by bob's.
  EXPECT_TRUE(try_subscribe(Principal::User("alice"), "alice", "a", 0).ok());
  // An admin may ask for the longest failover timeout.
  EXPECT_TRUE(try_subscribe(Principal::Admin("root"), "carol", "long", 7 * 86'400'000ll).ok());
}

// #33 M3: a role the operator named is reserved for its users (bob took
// "gold", weight 3 and a guarantee set for alice), and a priority in a band
// where the user's quota is zero is refused, as a job's would be.
TEST_F(ManagerTest, ReservedRolesAndPrioritiesNeedPermission) {
  ResourceVector six;
  six.cpu_millis = 6000;
  SetRole("gold", RoleOptions{3, six, {"alice"}});
  auto try_subscribe = [&](const Principal& who, const std::string& user, const std::string& role,
                           int32_t priority) {
    v1::SubscribeRequest req;
    req.mutable_framework()->set_user(user);
    req.mutable_framework()->set_name(absl::StrCat(user, role, priority));
    req.mutable_framework()->set_role(role);
    req.mutable_framework()->set_priority(priority);
    return mgr_->Subscribe(who, req);
  };
  auto gold = try_subscribe(Principal::User("bob"), "bob", "gold", 0);
  ASSERT_EQ(gold.status().code(), absl::StatusCode::kPermissionDenied) << gold.status();
  EXPECT_NE(gold.status().message().find("role gold is reserved: user bob"), std::string::npos) << gold.status();
  EXPECT_TRUE(try_subscribe(Principal::User("alice"), "alice", "gold", 0).ok());
  EXPECT_TRUE(try_subscribe(Principal::Admin("root"), "bob", "gold", 0).ok());
  EXPECT_TRUE(try_subscribe(Principal::User("bob"), "bob", "anyone", 0).ok());  // not named: weight 1

  v1::SetQuotaRequest q;
  q.mutable_quota()->set_user("bob");
  q.mutable_quota()->set_band("monitoring");
  q.mutable_quota()->mutable_limit()->set_cpu_millis(0);
  q.mutable_quota()->mutable_limit()->set_memory_bytes(0);
  ASSERT_TRUE(core_->machines().SetQuota(Principal::Admin("root"), q).ok());
  auto top = try_subscribe(Principal::User("bob"), "bob", "", 450);
  ASSERT_EQ(top.status().code(), absl::StatusCode::kPermissionDenied) << top.status();
  EXPECT_NE(top.status().message().find("priority 450: user bob has no quota in band monitoring"), std::string::npos)
      << top.status();
  EXPECT_TRUE(try_subscribe(Principal::User("bob"), "bob", "", 100).ok());
  EXPECT_TRUE(try_subscribe(Principal::User("alice"), "alice", "", 450).ok());  // no quota set: open, as for jobs
}

// A new leader does not know which updates the old one had acknowledged:
// each task's latest status (live, or ended within resend_ended_within_ms)
// is delivered again and re-sent until acknowledged. At least once.
TEST_F(ManagerTest, NewLeaderDeliversEachTasksLatestStatusUntilAcknowledged) {
  AddMachine("m1", 4000, 8 * kGi);
  auto f = Subscribe("alice", "steady", "", 120'000);
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  v1::AcceptRequest req;
  req.set_framework_id(f.framework_id);
  req.add_offer_ids(offers[0].id());
  for (const char* id : {"old", "done", "live"}) {
    v1::FrameworkTask* t = req.add_tasks();
    t->set_task_id(id);
    t->add_argv("/bin/true");
    t->mutable_resources()->set_cpu_millis(100);
    t->mutable_resources()->set_memory_bytes(64 << 20);
  }
  auto r = mgr_->Accept(Principal::User("alice"), req);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& st : r->statuses()) ASSERT_EQ(st.state(), v1::TASK_STAGING) << st.message();
  auto exit0 = [&](const std::string& task) {
    v1::Mutation exited;
    *exited.mutable_task_exited()->mutable_task() = Ref("alice/" + FrameworkManager::JobName(f.framework_id, task));
    exited.mutable_task_exited()->set_exit_code(0);
    Commit(exited);
  };
  exit0("old");
  clock_.AdvanceMs(opts_.resend_ended_within_ms + 1);
  exit0("done");
  mgr_->Tick();
  // The old leader's stream saw everything (and it was acknowledged there,
  // for all the new leader knows).
  EXPECT_FALSE(Updates(Drain(f)).empty());

  FrameworkManager next(&core_->committer(), &clock_, &core_->options(), opts_);
  next.Recover();
  v1::SubscribeRequest again;
  again.mutable_framework()->set_id(f.framework_id);
  again.mutable_framework()->set_name("steady");
  auto sub = next.Subscribe(Principal::User("alice"), again);
  ASSERT_TRUE(sub.ok()) << sub.status();
  std::map<std::string, v1::FrameworkTaskStatus> got;
  for (const auto& u : Updates(Drain(*sub))) got[u.task_id()] = u;
  ASSERT_EQ(got.size(), 2u) << "the task that ended long ago is not sent again";
  EXPECT_EQ(got["done"].state(), v1::TASK_FINISHED);
  EXPECT_EQ(got["live"].state(), v1::TASK_STAGING);
  EXPECT_FALSE(got["done"].uuid().empty());
  EXPECT_EQ(next.Held(f.framework_id).cpu_millis, 100);  // only the live one
  // Re-sent until acknowledged; then not.
  clock_.AdvanceMs(opts_.resend_ms);
  next.Tick();
  EXPECT_EQ(Updates(Drain(*sub)).size(), 2u);
  for (const auto& [task, u] : got) {
    v1::AcknowledgeRequest ack;
    ack.set_framework_id(f.framework_id);
    ack.set_task_id(task);
    ack.set_uuid(u.uuid());
    ASSERT_TRUE(next.Acknowledge(Principal::User("alice"), ack).ok());
  }
  clock_.AdvanceMs(opts_.resend_ms);
  next.Tick();
  EXPECT_TRUE(Updates(Drain(*sub)).empty());
}

// What a task frees is offered again at once (after min_round_gap_ms), not
// at the next offer interval.
TEST_F(ManagerTest, WhatATaskFreesIsOfferedBeforeTheNextInterval) {
  AddMachine("m1", 1000, 4 * kGi);
  auto f = Subscribe("alice", "quick");
  Round();
  auto offers = Offers(Drain(f));
  ASSERT_EQ(offers.size(), 1u);
  auto r = Accept("alice", offers[0], "all", 1000, 1 * kGi);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->statuses(0).state(), v1::TASK_STAGING) << r->statuses(0).message();
  Drain(f);
  clock_.AdvanceMs(opts_.min_round_gap_ms);
  mgr_->Tick();
  EXPECT_TRUE(Offers(Drain(f)).empty()) << "no CPU left to offer";
  v1::Mutation exited;
  *exited.mutable_task_exited()->mutable_task() = Ref(r->statuses(0).job());
  exited.mutable_task_exited()->set_exit_code(0);
  Commit(exited);
  mgr_->Tick();  // its end is seen; the last round was just now
  EXPECT_TRUE(Offers(Drain(f)).empty()) << "rounds come at most every min_round_gap_ms";
  clock_.AdvanceMs(opts_.min_round_gap_ms);
  mgr_->Tick();
  auto again = Offers(Drain(f));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].resources().cpu_millis(), 1000);
  ASSERT_LT(2 * opts_.min_round_gap_ms, opts_.offer_interval_ms);  // so it came before the interval
}

// Removed while connected (teardown, or by an operator): the stream's last
// event says why.
TEST_F(ManagerTest, TeardownEndsTheStreamWithAnError) {
  auto f = Subscribe("alice", "gone");
  Drain(f);
  v1::TeardownRequest t;
  t.set_framework_id(f.framework_id);
  ASSERT_TRUE(mgr_->Teardown(Principal::Admin("root"), t).ok());
  auto events = Drain(f);
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().has_error());
  EXPECT_NE(events.back().error().message().find("torn down by root"), std::string::npos)
      << events.back().error().message();
  EXPECT_TRUE(f.events->closed());
}

}  // namespace
}  // namespace herd::master::frameworks
