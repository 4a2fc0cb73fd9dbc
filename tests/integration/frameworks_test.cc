// The Framework API on a real cell (issue #17): herd-example-framework, a
// separate process, subscribes to the master, accepts offers with tasks
// that real agents run, acknowledges their updates and exits 0 once all of
// them finished; with a command that fails it retries, then gives up and
// exits non-zero. The tasks are ordinary jobs every tool sees.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"
#include "herd/v1/frameworks.grpc.pb.h"
#include "pki/pki.h"
#include "rpc/rpc.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

std::string FrameworkBinary() { return harness::BinaryBesideHerd("herd-example-framework"); }

class FrameworksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }
  RunResult Framework(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {FrameworkBinary(), "--master", cell_.master_address(), "--credentials",
                                     cell_.UserCredential("alice")};
    argv.insert(argv.end(), args.begin(), args.end());
    // The bound only limits a failure; the run ends when its tasks do.
    return harness::Run(argv, 180s);
  }
  // The framework tasks' jobs, as herd jobs lists them.
  std::vector<v1::Job> FrameworkJobs() {
    std::vector<v1::Job> out;
    auto jobs = cell_.Jobs(/*include_dead=*/true);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (!jobs.ok()) return out;
    for (const v1::Job& j : jobs->jobs()) {
      if (j.spec().labels().contains("herd.framework")) out.push_back(j);
    }
    return out;
  }

  // The job's state, dead or alive (STATE_UNSPECIFIED if it is unknown).
  v1::Job::State JobState(const std::string& id) {
    auto jobs = cell_.Jobs(/*include_dead=*/true);
    if (!jobs.ok()) return v1::Job::STATE_UNSPECIFIED;
    for (const v1::Job& j : jobs->jobs()) {
      if (j.id() == id) return j.state();
    }
    return v1::Job::STATE_UNSPECIFIED;
  }

  Cell cell_;
};

TEST_F(FrameworksTest, ExampleFrameworkRunsFiveTasksToCompletion) {
  RunResult r = Framework({"--tasks", "5", "--cpu", "100m", "--memory", "32Mi", "--", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << cell_.LogTails();
  EXPECT_TRUE(absl::StrContains(r.err, "(5/5)")) << r.err;
  std::vector<v1::Job> jobs = FrameworkJobs();
  ASSERT_EQ(jobs.size(), 5u);
  for (const v1::Job& j : jobs) {
    EXPECT_EQ(j.state(), v1::Job::DEAD) << j.id();
    EXPECT_EQ(j.spec().user(), "alice");
    EXPECT_EQ(j.spec().task_count(), 1);
  }
}

TEST_F(FrameworksTest, ExampleFrameworkRetriesThenGivesUp) {
  RunResult r = Framework({"--tasks", "1", "--retries", "1", "--", "/bin/false"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "failed 2 times")) << r.err;
  // Two attempts, each its own job, both failed.
  EXPECT_EQ(FrameworkJobs().size(), 2u);
}

// One subscription over gRPC, read on the test's thread.
struct Subscription {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReader<v1::FrameworkEvent>> reader;
  // The next event the predicate accepts (the others are skipped, updates
  // acknowledged); false if the stream ended first.
  template <typename Pred>
  bool ReadUntil(v1::Frameworks::Stub& stub, const std::string& id, Pred pred, v1::FrameworkEvent* out) {
    while (reader->Read(out)) {
      if (out->has_update() && !out->update().status().uuid().empty()) {
        v1::AcknowledgeRequest ack;
        ack.set_framework_id(id);
        ack.set_task_id(out->update().status().task_id());
        ack.set_uuid(out->update().status().uuid());
        v1::AcknowledgeResponse resp;
        auto c = rpc::Context("", 10'000);
        EXPECT_TRUE(stub.Acknowledge(c.get(), ack, &resp).ok());
      }
      if (pred(*out)) return true;
    }
    return false;
  }
};

// A framework's stream breaks (its scheduler died); it subscribes again
// with its id within its failover timeout and finds its task still
// running. Then it goes away for longer than its (shortened) timeout, and
// the master kills its task.
TEST_F(FrameworksTest, FailoverWithinTheTimeoutKeepsTheTaskPastItKillsIt) {
  auto cred = pki::LoadCredential(cell_.UserCredential("alice"));
  ASSERT_TRUE(cred.ok()) << cred.status();
  auto stub = v1::Frameworks::NewStub(rpc::Channel(cell_.master_address(), *cred, rpc::MasterIdentity()));
  auto subscribe = [&](const std::string& id, int64_t failover_ms) {
    Subscription s;
    s.ctx = rpc::Context("", 0);
    v1::SubscribeRequest req;
    req.mutable_framework()->set_id(id);
    req.mutable_framework()->set_name("probe");
    req.mutable_framework()->set_failover_timeout_ms(failover_ms);
    s.reader = stub->Subscribe(s.ctx.get(), req);
    return s;
  };
  Subscription first = subscribe("", 60'000);
  v1::FrameworkEvent e;
  ASSERT_TRUE(first.ReadUntil(*stub, "", [](const auto& ev) { return ev.has_subscribed(); }, &e))
      << first.reader->Finish().error_message();
  const std::string id = e.subscribed().framework_id();
  ASSERT_TRUE(first.ReadUntil(*stub, id, [](const auto& ev) { return ev.has_offers(); }, &e));
  v1::AcceptRequest accept;
  accept.set_framework_id(id);
  accept.add_offer_ids(e.offers().offers(0).id());
  v1::FrameworkTask* task = accept.add_tasks();
  task->set_task_id("sleeper");
  task->add_argv("/bin/sleep");
  task->add_argv("3600");
  task->mutable_resources()->set_cpu_millis(100);
  task->mutable_resources()->set_memory_bytes(32 << 20);
  v1::AcceptResponse accepted;
  {
    auto c = rpc::Context("", 10'000);
    grpc::Status st = stub->Accept(c.get(), accept, &accepted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  ASSERT_EQ(accepted.statuses(0).state(), v1::TASK_STAGING) << accepted.statuses(0).message();
  const std::string job = accepted.statuses(0).job();
  ASSERT_TRUE(first.ReadUntil(
      *stub, id, [](const auto& ev) { return ev.has_update() && ev.update().status().state() == v1::TASK_RUNNING; },
      &e))
      << cell_.LogTails();

  // The scheduler "dies": its stream ends.
  first.ctx->TryCancel();
  first.reader->Finish();
  Subscription second = subscribe(id, 2'000);
  ASSERT_TRUE(second.ReadUntil(*stub, id, [](const auto& ev) { return ev.has_subscribed(); }, &e));
  EXPECT_EQ(e.subscribed().framework_id(), id);
  v1::ReconcileRequest rec;
  rec.set_framework_id(id);
  v1::ReconcileResponse statuses;
  {
    auto c = rpc::Context("", 10'000);
    ASSERT_TRUE(stub->Reconcile(c.get(), rec, &statuses).ok());
  }
  ASSERT_EQ(statuses.statuses_size(), 1);
  EXPECT_EQ(statuses.statuses(0).state(), v1::TASK_RUNNING);
  EXPECT_EQ(JobState(job), v1::Job::RUNNING);

  // Gone for longer than its failover timeout (now 2 s): its task is killed.
  second.ctx->TryCancel();
  second.reader->Finish();
  ASSERT_TRUE(Eventually([&] { return JobState(job) == v1::Job::DEAD; }, 60s)) << cell_.LogTails();
}

// Two example frameworks (one with a weighted role, set by a master flag)
// and the built-in scheduler place work on the same two machines at once.
// The cell never holds more than a machine has (one ledger); `herd
// frameworks` shows both frameworks while they run; all of it finishes.
TEST(FrameworksCellTest, TwoFrameworksAndTheBuiltInSchedulerShareTheCellWithoutOverCommit) {
  Cell::Options o;
  o.master_flags = {"--framework-offer-interval=200ms", "--framework-role=heavy=2,users=alice"};
  Cell cell(o);
  ASSERT_TRUE(cell.StartMaster().ok()) << cell.LogTails();
  absl::Status st = cell.StartAgents(2);
  ASSERT_TRUE(st.ok()) << st << "\n" << cell.LogTails();
  std::atomic<int> done{0};
  auto framework = [&](const std::string& name, const std::string& role, RunResult* out) {
    std::vector<std::string> argv = {FrameworkBinary(), "--master", cell.master_address(), "--credentials",
                                     cell.UserCredential("alice"), "--name", name, "--tasks", "12", "--per-offer",
                                     "1", "--cpu", "400m", "--memory", "64Mi"};
    if (!role.empty()) argv.insert(argv.end(), {"--role", role});
    argv.insert(argv.end(), {"--", "/bin/sleep", "1"});
    *out = harness::Run(argv, 180s);
    ++done;
  };
  RunResult a, b;
  std::thread ta(framework, "fa", "", &a);
  std::thread tb(framework, "fb", "heavy", &b);
  // The built-in scheduler's job, submitted while the frameworks run.
  RunResult sub = cell.Herd({"submit", cell.WriteSpec("builtin.yaml",
                                                      "name: builtin\nuser: alice\ntasks: 3\ncommand: [\"/bin/sleep\", "
                                                      "\"2\"]\nresources: {cpu: 500m, memory: 64Mi}\n")});
  EXPECT_EQ(sub.exit_code, 0) << sub.Describe();
  // Both frameworks are listed, with the role's weight.
  v1::ListFrameworksResponse listed;
  EXPECT_TRUE(Eventually(
      [&] {
        auto l = cell.HerdJson<v1::ListFrameworksResponse>({"frameworks"});
        if (!l.ok() || l->frameworks_size() < 2) return false;
        listed = *l;
        return true;
      },
      60s))
      << cell.LogTails();
  for (const auto& f : listed.frameworks()) {
    EXPECT_DOUBLE_EQ(f.role_weight(), f.info().name() == "fb" ? 2.0 : 1.0) << f.info().name();
    EXPECT_EQ(f.info().user(), "alice");
  }
  // Until both are done: no machine ever holds more than its capacity.
  int samples = 0;
  while (done.load() < 2) {
    auto m = cell.Machines();
    EXPECT_TRUE(m.ok()) << m.status();  // (no ASSERT: the threads must be joined)
    if (!m.ok()) break;
    for (const v1::Machine& mach : m->machines()) {
      EXPECT_LE(mach.allocated().cpu_millis(), mach.capacity().cpu_millis()) << mach.name();
      EXPECT_LE(mach.allocated().memory_bytes(), mach.capacity().memory_bytes()) << mach.name();
    }
    ++samples;
  }
  ta.join();
  tb.join();
  EXPECT_GT(samples, 1);
  EXPECT_EQ(a.exit_code, 0) << a.Describe() << "\n" << cell.LogTails();
  EXPECT_EQ(b.exit_code, 0) << b.Describe();
  EXPECT_TRUE(Eventually(
      [&] {
        auto j = cell.Jobs(/*include_dead=*/true);
        if (!j.ok()) return false;
        for (const v1::Job& job : j->jobs()) {
          if (job.id() == "alice/builtin") return job.state() == v1::Job::DEAD;
        }
        return false;
      },
      60s))
      << cell.LogTails();
  RunResult table = cell.Herd({"frameworks"});
  EXPECT_EQ(table.exit_code, 0) << table.Describe();
  EXPECT_TRUE(absl::StrContains(table.out, "no frameworks registered")) << table.out;
}

}  // namespace
}  // namespace herd
