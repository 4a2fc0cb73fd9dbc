// The Supervisor's extension seam and the shim's options, with real
// processes: what extensions add to an attempt (environment, ${...}
// substitutions, shim options), waiting on an extension, permanent setup
// failures, attempts ended by the agent (restarted, or evicted), OOM
// reporting, crash loops, log rotation by size, and the shim's namespaces
// and user switch (root only).
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/runtime/shim_protocol.h"
#include "agent/supervisor/extension.h"
#include "agent/supervisor/supervisor.h"
#include "agent/supervisor/testing.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

// An extension that records what the supervisor tells it and does what the
// test asks.
class FakeExtension : public Extension {
 public:
  absl::string_view name() const override { return "fake"; }
  absl::Status Init(SupervisorControl* control) override {
    control_ = control;
    return absl::OkStatus();
  }
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override {
    std::lock_guard<std::mutex> l(mu);
    ++prepares;
    if (!prepare_status.ok()) return prepare_status;
    setup->env["FAKE_PORT"] = "${port.http}";
    setup->substitutions["port.http"] = "4242";
    for (const std::string& a : shim_args) setup->shim_args.push_back(a);
    return absl::OkStatus();
  }
  void Started(const RunView& run, bool recovered) override {
    std::lock_guard<std::mutex> l(mu);
    started.insert(run.spec.run_id());
  }
  void Ended(const RunView& run, ExitStatus* exit) override {
    std::lock_guard<std::mutex> l(mu);
    if (mark_oom) exit->oom = true;
  }
  void Released(const RunView& run) override {
    std::lock_guard<std::mutex> l(mu);
    released.insert(run.spec.run_id());
  }
  void Updated(const RunView& run) override {
    std::lock_guard<std::mutex> l(mu);
    updated.push_back(run.spec);
  }
  void Describe(const RunView& run, v1::RunStatus* status) const override {
    (*status->mutable_ports())["http"] = 4242;
  }

  SupervisorControl* control() { return control_; }

  std::mutex mu;
  absl::Status prepare_status;
  std::vector<std::string> shim_args;
  bool mark_oom = false;
  int prepares = 0;
  std::set<std::string> started, released;
  std::vector<v1::TaskRun> updated;

 private:
  SupervisorControl* control_ = nullptr;
};

class ExtensionTest : public SupervisorFixture {
 protected:
  std::unique_ptr<Supervisor> NewWith(std::shared_ptr<FakeExtension> ext, Supervisor::Options opts = {}) {
    opts.extensions.push_back(std::move(ext));
    return New(opts);
  }
  bool Has(const std::set<std::string>& s, const std::string& id) {
    std::lock_guard<std::mutex> l(fake_->mu);
    return s.contains(id);
  }
  std::shared_ptr<FakeExtension> fake_ = std::make_shared<FakeExtension>();
};

TEST_F(ExtensionTest, SetupReachesTheTaskAndTheRunIsReleased) {
  sup_ = NewWith(fake_);
  v1::TaskRun run = MakeRun("ext.env", {"/bin/sh", "-c", "echo arg=$0 env=$FAKE_PORT; exec sleep 1000", "${port.http}"});
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsActive);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ports().at("http"), 4242);
  EXPECT_TRUE(Has(fake_->started, run.run_id()));
  EXPECT_TRUE(Eventually([&] { return absl::StrContains(Slurp(RunDirOf(run.run_id()) + "/stdout"), "\n"); }));
  EXPECT_EQ(Slurp(RunDirOf(run.run_id()) + "/stdout"), "arg=4242 env=4242\n");
  EXPECT_FALSE(Has(fake_->released, run.run_id()));
  sup_->SetDesired({});
  WaitFor(*sup_, run.run_id(), IsGone);
  EXPECT_TRUE(Has(fake_->released, run.run_id()));
}

// An update in place (the same run with a new job version) changes the
// run's limits, priority, grace and restart policy without a restart, and
// extensions hear of it; anything else it carries is ignored. The new spec
// is what a restarted agent recovers.
TEST_F(ExtensionTest, AnUpdateInPlaceReachesExtensionsWithoutARestart) {
  sup_ = NewWith(fake_);
  v1::TaskRun run = MakeRun("ext.update", {"sleep", "1000"});
  run.set_job_version(1);
  run.mutable_resources()->set_memory_bytes(64 << 20);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsActive);
  ASSERT_TRUE(s);
  sup_->SetDesired({run});  // the same version again: nothing
  v1::TaskRun next = run;
  next.set_job_version(2);
  next.mutable_resources()->set_memory_bytes(128 << 20);
  next.set_priority(210);
  next.set_grace_period_ms(7000);
  next.clear_argv();
  next.add_argv("/bin/false");  // not something an update in place changes
  sup_->SetDesired({next});
  {
    std::lock_guard<std::mutex> l(fake_->mu);
    ASSERT_EQ(fake_->updated.size(), 1u);
    EXPECT_EQ(fake_->updated[0].resources().memory_bytes(), 128 << 20);
    EXPECT_EQ(fake_->updated[0].priority(), 210);
    EXPECT_EQ(fake_->updated[0].grace_period_ms(), 7000);
    EXPECT_EQ(fake_->updated[0].argv(0), "sleep");
    EXPECT_EQ(fake_->prepares, 1);
  }
  Barrier(*sup_, {next});
  std::optional<v1::RunStatus> after = Find(*sup_, run.run_id());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->pid(), s->pid());
  EXPECT_EQ(after->phase(), v1::Task::ACTIVE);
  RunDir dir(RunDirOf(run.run_id()));
  absl::StatusOr<v1::TaskRun> persisted = dir.ReadSpec();
  ASSERT_TRUE(persisted.ok()) << persisted.status();
  EXPECT_EQ(persisted->job_version(), 2);
  EXPECT_EQ(persisted->resources().memory_bytes(), 128 << 20);
}

TEST_F(ExtensionTest, UnavailableWaitsUntilRetry) {
  fake_->prepare_status = absl::UnavailableError("fetching package web");
  // On a clock that does not move, the once-a-second re-check of waiting
  // runs never comes: only Retry() can start the run.
  Supervisor::Options opts;
  opts.clock = &manual_clock_;
  sup_ = NewWith(fake_, opts);
  v1::TaskRun run = MakeRun("ext.wait", {"sleep", "1000"});
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), [](const std::optional<v1::RunStatus>& s) {
    return s && absl::StartsWith(s->message(), "waiting: ");
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::STARTING);
  EXPECT_EQ(s->message(), "waiting: fetching package web");
  {
    std::lock_guard<std::mutex> l(fake_->mu);
    fake_->prepare_status = absl::OkStatus();
  }
  fake_->control()->Retry();
  s = WaitFor(*sup_, run.run_id(), IsActive);
  ASSERT_TRUE(s) << "Retry() should start the run without the once-a-second re-check";
  EXPECT_EQ(s->restarts(), 0);
}

TEST_F(ExtensionTest, PermanentPrepareFailureIsTerminal) {
  fake_->prepare_status = absl::FailedPreconditionError("package web: sha256 mismatch");
  sup_ = NewWith(fake_);
  v1::TaskRun run = MakeRun("ext.bad", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), "sha256 mismatch")) << s->message();
  EXPECT_EQ(s->restarts(), 0);
}

TEST_F(ExtensionTest, KillAttemptRestartsWithTheReason) {
  sup_ = NewWith(fake_);
  v1::TaskRun run = MakeRun("ext.kill", {"sleep", "1000"}, v1::RestartPolicy::ON_FAILURE);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsActive);
  ASSERT_TRUE(s);
  int64_t first_pid = s->pid();
  fake_->control()->KillAttempt(run.run_id(), "unhealthy: GET /healthz returned 500", false);
  s = WaitFor(*sup_, run.run_id(), [&](const std::optional<v1::RunStatus>& s) {
    return s && s->phase() == v1::Task::ACTIVE && s->pid() != first_pid;
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 1);
  EXPECT_TRUE(absl::StrContains(s->message(), "unhealthy: GET /healthz returned 500")) << s->message();
  EXPECT_FALSE(Alive(static_cast<pid_t>(first_pid)));
}

TEST_F(ExtensionTest, EvictionIsTerminalWhateverThePolicy) {
  sup_ = NewWith(fake_);
  v1::TaskRun run = MakeRun("ext.evict", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  sup_->SetDesired({run});
  ASSERT_TRUE(WaitFor(*sup_, run.run_id(), IsActive));
  fake_->control()->KillAttempt(run.run_id(), "evicted: machine out of memory", true);
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->evicted());
  EXPECT_EQ(s->exit_signal(), SIGKILL);
  EXPECT_TRUE(absl::StartsWith(s->message(), "evicted: machine out of memory")) << s->message();
}

TEST_F(ExtensionTest, OomIsReported) {
  fake_->mark_oom = true;
  sup_ = NewWith(fake_);
  v1::TaskRun run = MakeRun("ext.oom", {"/bin/sh", "-c", "kill -9 $$"});
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->oom_killed());
  EXPECT_TRUE(absl::StartsWith(s->message(), "out of memory")) << s->message();
}

TEST_F(ExtensionTest, QuickFailuresInARowAreACrashLoop) {
  Supervisor::Options opts;
  opts.crash_loop_failures = 3;
  sup_ = New(opts);
  v1::TaskRun run = MakeRun("ext.loop", {"false"}, v1::RestartPolicy::ALWAYS);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s =
      WaitFor(*sup_, run.run_id(), [](const std::optional<v1::RunStatus>& s) { return s && s->crash_looping(); });
  ASSERT_TRUE(s);
  EXPECT_GE(s->restarts(), 3);
  // Not before the threshold: a fresh run is not crash-looping.
  v1::TaskRun once = MakeRun("ext.once", {"false"}, v1::RestartPolicy::NEVER);
  sup_->SetDesired({run, once});
  s = WaitFor(*sup_, once.run_id(), IsTerminal);
  EXPECT_FALSE(s->crash_looping());
}

TEST_F(ExtensionTest, ShimSetupFailureIsReportedAndRetried) {
  fake_->shim_args = {shim::kOptCgroup, "/nonexistent/cgroup.procs"};
  sup_ = NewWith(fake_);
  v1::TaskRun run = MakeRun("ext.setup", {"sleep", "1000"}, v1::RestartPolicy::ON_FAILURE);
  run.mutable_restart()->set_max_restarts(2);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 2) << "a setup failure is not permanent";
  EXPECT_TRUE(absl::StrContains(s->message(), "setup failed: cgroup: No such file or directory")) << s->message();
}

TEST_F(ExtensionTest, LogsRotateBySize) {
  Supervisor::Options opts;
  opts.log_max_bytes = 10'000;
  opts.log_keep = 2;
  sup_ = New(opts);
  // 1,000 numbered lines of 100 bytes to stdout (100 KB), a line to stderr.
  v1::TaskRun run = MakeRun("ext.logs", {"/bin/sh", "-c",
                                         "i=0; while [ $i -lt 1000 ]; do printf '%099d\\n' $i; i=$((i+1)); done; "
                                         "echo done >&2"});
  sup_->SetDesired({run});
  ASSERT_TRUE(WaitFor(*sup_, run.run_id(), IsTerminal));
  std::string dir = RunDirOf(run.run_id());
  std::string current = Slurp(dir + "/stdout"), r1 = Slurp(dir + "/stdout.1"), r2 = Slurp(dir + "/stdout.2");
  EXPECT_LE(current.size(), 10'000u);
  EXPECT_GT(r1.size(), 0u);
  EXPECT_LE(r1.size(), 10'000u);
  EXPECT_GT(r2.size(), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/stdout.3"));
  // The newest output is in `stdout`, and the rotated files hold what came
  // right before it, without gaps.
  std::string tail = r2 + r1 + current;
  EXPECT_TRUE(absl::EndsWith(tail, absl::StrCat(std::string(96, '0'), "999\n")));
  std::vector<std::string> lines = absl::StrSplit(tail, '\n', absl::SkipEmpty());
  for (size_t i = 1; i < lines.size(); ++i) {
    int64_t a = 0, b = 0;
    ASSERT_TRUE(absl::SimpleAtoi(lines[i - 1], &a) && absl::SimpleAtoi(lines[i], &b));
    ASSERT_EQ(b, a + 1) << "gap in the rotated logs at line " << i;
  }
  EXPECT_EQ(Slurp(dir + "/stderr"), "done\n");
}

TEST_F(ExtensionTest, PumpedLogsSurviveTheAgent) {
  Supervisor::Options opts;
  opts.log_max_bytes = 1 << 20;
  sup_ = New(opts);
  std::string flag = root_ + "/go";
  v1::TaskRun run = Sh("ext.pump", "echo before; while [ ! -e " + flag + " ]; do sleep 0.02; done; echo after");
  sup_->SetDesired({run});
  ASSERT_TRUE(WaitFor(*sup_, run.run_id(), IsActive));
  sup_.reset();  // the agent goes away; the shim keeps carrying output
  std::ofstream(flag).put('x');
  sup_ = New(opts);
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->exit_code(), 0);
  EXPECT_EQ(Slurp(RunDirOf(run.run_id()) + "/stdout"), "before\nafter\n");
}

TEST_F(ExtensionTest, NamespacesAndUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  fake_->shim_args = {shim::kOptNamespaces, shim::kOptHostname, "task-7", shim::kOptUid, "65534", shim::kOptGid,
                      "65534"};
  sup_ = NewWith(fake_);
  std::filesystem::permissions(root_, std::filesystem::perms::others_exec, std::filesystem::perm_options::add);
  v1::TaskRun run = MakeRun("ext.ns", {"/bin/sh", "-c",
                                       "echo pid=$$ host=$(hostname) uid=$(id -u) gid=$(id -g) "
                                       "procs=$(ls /proc | grep -c '^[0-9]')"});
  run.set_workdir("/");
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->exit_code(), 0) << s->message();
  std::string out = Slurp(RunDirOf(run.run_id()) + "/stdout");
  EXPECT_TRUE(absl::StartsWith(out, "pid=1 host=task-7 uid=65534 gid=65534 procs=")) << out;
  int procs = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(out.substr(out.rfind('=') + 1)), &procs)) << out;
  EXPECT_LE(procs, 4) << "its /proc shows only its own processes: " << out;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_STRNE(host, "task-7") << "the machine's host name is untouched";
}

}  // namespace
}  // namespace herd::agent
