// The health extension with a real Supervisor, real ports and real tasks: a
// task serving HTTP is healthy, then unhealthy and restarted; TCP and
// command checks fail; timeouts are honoured; Shutdown is prompt.
#include "agent/health/health_extension.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/ports/ports_extension.h"
#include "agent/supervisor/testing.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

std::string BinDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string exe(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
  return exe.substr(0, exe.rfind('/'));
}

int32_t FreeRange(int32_t n) {
  std::mt19937 rng(static_cast<uint32_t>(getpid() ^ NowMs()));
  for (int attempt = 0; attempt < 100; ++attempt) {
    int32_t base = 61000 + static_cast<int32_t>(rng() % (65000 - 61000 - n));
    bool ok = true;
    for (int32_t p = base; p < base + n && ok; ++p) ok = TcpPortIsFree(p);
    if (ok) return base;
  }
  return 61000;
}

auto HealthIs(v1::Health::State state) {
  return [state](const std::optional<v1::RunStatus>& s) { return s && s->health().state() == state; };
}

class HealthTest : public SupervisorFixture {
 protected:
  void SetUp() override {
    SupervisorFixture::SetUp();
    std::filesystem::permissions(root_, std::filesystem::perms::others_exec, std::filesystem::perm_options::add);
  }
  std::unique_ptr<Supervisor> NewWithHealth(int threads = 2, Clock* health_clock = RealClock::Get()) {
    int32_t base = FreeRange(20);
    auto allocator = std::make_shared<PortAllocator>(base, base + 19);
    auto ports = std::make_shared<PortsExtension>(allocator);
    HealthExtension::Options ho;
    ho.ports = [ports](const std::string& run, const std::string& name) { return ports->PortOf(run, name); };
    ho.threads = threads;
    ho.clock = health_clock;
    ho.slow_checks = slow_;
    health_ = std::make_shared<HealthExtension>(ho);
    Supervisor::Options opts;
    opts.extensions = {ports, health_};
    return New(opts);
  }
  // The test server as a task, serving ${port.http}.
  static v1::TaskRun Server(const std::string& id, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {BinDir() + "/herd-test-http-server", "${port.http}"};
    argv.insert(argv.end(), args.begin(), args.end());
    v1::TaskRun run = MakeRun(id, argv, v1::RestartPolicy::ALWAYS);
    run.add_port_names("http");
    v1::HealthCheck* hc = run.mutable_health_check();
    hc->mutable_http()->set_port("http");
    hc->mutable_http()->set_path("/healthz");
    hc->set_interval_ms(100);
    hc->set_timeout_ms(500);
    hc->set_failure_threshold(2);
    return run;
  }
  std::shared_ptr<HealthExtension> health_;
  std::shared_ptr<SlowChecks> slow_ = std::make_shared<SlowChecks>();
};

TEST_F(HealthTest, HttpServerIsHealthyThenUnhealthyAndRestarted) {
  sup_ = NewWithHealth();
  // Healthy for 5 requests, then 500s: every attempt turns unhealthy.
  v1::TaskRun run = Server("health.http", {"--fail-after", "5"});
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), HealthIs(v1::Health::HEALTHY));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->health().message(), absl::StrCat("HTTP 200 from GET /healthz on port ", s->ports().at("http")));
  EXPECT_EQ(s->health().consecutive_failures(), 0);
  EXPECT_EQ(s->restarts(), 0);
  int64_t first_pid = s->pid();

  // Two 500s in a row: killed and restarted by its policy, with the reason.
  s = WaitFor(*sup_, run.run_id(), [](const std::optional<v1::RunStatus>& s) { return s && s->restarts() >= 1; });
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), "unhealthy: HTTP 500 from GET /healthz")) << s->message();
  EXPECT_FALSE(Alive(static_cast<pid_t>(first_pid)));
  // The new attempt starts with a clean slate and is healthy again.
  s = WaitFor(*sup_, run.run_id(), [&](const std::optional<v1::RunStatus>& s) {
    return s && s->phase() == v1::Task::ACTIVE && s->pid() != first_pid &&
           s->health().state() == v1::Health::HEALTHY;
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(s->health().consecutive_failures(), 0);
}

TEST_F(HealthTest, UnhealthyIsReportedWithItsFailures) {
  sup_ = NewWithHealth();
  v1::TaskRun run = Server("health.report", {"--fail-file", "sick"});
  run.mutable_health_check()->set_failure_threshold(3);
  run.mutable_restart()->set_mode(v1::RestartPolicy::NEVER);
  sup_->SetDesired({run});
  ASSERT_TRUE(WaitFor(*sup_, run.run_id(), HealthIs(v1::Health::HEALTHY)));
  std::ofstream(RunDirOf(run.run_id()) + "/sandbox/sick").put('x');
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->health().state(), v1::Health::UNHEALTHY);
  EXPECT_EQ(s->health().consecutive_failures(), 3);
  EXPECT_TRUE(absl::StartsWith(s->health().message(), "HTTP 500")) << s->health().message();
  EXPECT_TRUE(absl::StartsWith(s->message(), "unhealthy: HTTP 500")) << s->message();
  EXPECT_EQ(s->exit_signal(), SIGKILL);
}

TEST_F(HealthTest, TcpCheckOnAPortNobodyListensOn) {
  sup_ = NewWithHealth();
  v1::TaskRun run = MakeRun("health.tcp", {"sleep", "1000"}, v1::RestartPolicy::ON_FAILURE);
  run.mutable_restart()->set_max_restarts(1);
  run.add_port_names("svc");
  run.mutable_health_check()->mutable_tcp()->set_port("svc");
  run.mutable_health_check()->set_interval_ms(50);
  run.mutable_health_check()->set_failure_threshold(2);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 1);
  EXPECT_EQ(s->health().state(), v1::Health::UNHEALTHY);
  EXPECT_TRUE(absl::StartsWith(s->message(), absl::StrCat("unhealthy: connect to 127.0.0.1:", s->ports().at("svc"),
                                                          ": Connection refused (killed by signal 9")))
      << s->message();
}

TEST_F(HealthTest, CommandCheckRunsInTheTaskAndItsExitCodeDecides) {
  sup_ = NewWithHealth();
  // Healthy while the task's marker file exists in its directory (the
  // check runs there, with the task's environment).
  v1::TaskRun run = Sh("health.cmd", "touch ready; exec sleep 1000", v1::RestartPolicy::NEVER);
  run.mutable_health_check()->mutable_command()->add_argv("sh");
  run.mutable_health_check()->mutable_command()->add_argv("-c");
  run.mutable_health_check()->mutable_command()->add_argv(
      "test -e ready && test \"$HERD_RUN_ID\" = health.cmd || { echo not ready; exit 1; }");
  run.mutable_health_check()->set_interval_ms(50);
  run.mutable_health_check()->set_failure_threshold(2);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), HealthIs(v1::Health::HEALTHY));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->health().message(), "command sh exited with code 0");
  std::filesystem::remove(RunDirOf(run.run_id()) + "/sandbox/ready");
  s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StartsWith(s->message(), "unhealthy: command sh exited with code 1: not ready (")) << s->message();
}

TEST_F(HealthTest, AChecksLatencyOverItsBoundMarksTheRunSlowUntilAFastCheck) {
  sup_ = NewWithHealth();
  // The check sleeps 2 s while the task's "slow" file exists; the bound is
  // 1 s (wide: a plain check may take a while on a loaded machine).
  v1::TaskRun run = Sh("health.slow", "touch slow; exec sleep 1000", v1::RestartPolicy::NEVER);
  run.mutable_health_check()->mutable_command()->add_argv("sh");
  run.mutable_health_check()->mutable_command()->add_argv("-c");
  run.mutable_health_check()->mutable_command()->add_argv("if test -e slow; then sleep 2; fi; exit 0");
  run.mutable_health_check()->set_interval_ms(300);
  run.mutable_health_check()->set_timeout_ms(5000);
  run.mutable_health_check()->set_latency_bound_ms(1000);
  sup_->SetDesired({run});
  ASSERT_TRUE(Eventually([&] { return slow_->Slowest().first == run.run_id(); }, std::chrono::seconds(60)));
  EXPECT_GE(slow_->Slowest().second, 2000);
  // Still healthy: slow is not unhealthy.
  EXPECT_TRUE(HealthIs(v1::Health::HEALTHY)(Find(*sup_, run.run_id())));
  std::filesystem::remove(RunDirOf(run.run_id()) + "/sandbox/slow");
  ASSERT_TRUE(Eventually([&] { return slow_->Slowest().first.empty(); }, std::chrono::seconds(60)));
  // A run that ends is forgotten.
  slow_->Record(run.run_id(), 5000, 1000);
  sup_->SetDesired({});
  ASSERT_TRUE(Eventually([&] { return slow_->Slowest().first.empty(); }, std::chrono::seconds(60)));
}

TEST_F(HealthTest, TimeoutIsHonoured) {
  sup_ = NewWithHealth();
  std::string hang = root_ + "/hang";
  std::ofstream(hang).put('x');
  v1::TaskRun run = Server("health.hang", {"--hang-file", hang});
  run.mutable_restart()->set_mode(v1::RestartPolicy::NEVER);
  run.mutable_health_check()->set_timeout_ms(300);
  run.mutable_health_check()->set_interval_ms(50);
  run.mutable_health_check()->set_failure_threshold(3);
  int64_t t0 = NowMs();
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  int64_t took = NowMs() - t0;
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), "timed out after 300ms (")) << s->message();
  // Three probes of 300ms, 50ms apart (the first may be refused at once if
  // the server is not listening yet): not sooner than two timeouts.
  EXPECT_GE(took, 600);
}

TEST_F(HealthTest, InitialDelayAndNoCheckMeansNoHealth) {
  // Checks fall due on a ManualClock: "early" (no initial delay) is probed
  // each time the test moves time on by its interval, which shows the
  // workers at work; "late" must not be probed until its delay has passed.
  sup_ = NewWithHealth(2, &manual_clock_);
  auto tcp_check = [](v1::TaskRun run, int64_t delay_ms) {
    run.add_port_names("svc");  // nothing listens on it: every probe fails
    run.mutable_health_check()->mutable_tcp()->set_port("svc");
    run.mutable_health_check()->set_interval_ms(10'000);
    run.mutable_health_check()->set_failure_threshold(1000);
    run.mutable_health_check()->set_initial_delay_ms(delay_ms);
    return run;
  };
  v1::TaskRun early = tcp_check(MakeRun("health.early", {"sleep", "1000"}), 0);
  v1::TaskRun late = tcp_check(MakeRun("health.late", {"sleep", "1000"}), 60'000);
  v1::TaskRun none = MakeRun("health.none", {"sleep", "1000"});
  sup_->SetDesired({early, late, none});
  for (const v1::TaskRun* r : {&early, &late, &none}) ASSERT_TRUE(WaitFor(*sup_, r->run_id(), IsActive));
  auto failures = [&](const v1::TaskRun& run) { return Find(*sup_, run.run_id())->health().consecutive_failures(); };
  ASSERT_TRUE(Eventually([&] { return failures(early) >= 1; }));
  for (int step = 1; step <= 3; ++step) {  // 30 s of checks, all within late's delay
    const int before = failures(early);
    manual_clock_.AdvanceMs(10'000);
    ASSERT_TRUE(Eventually([&] { return failures(early) > before; })) << "step " << step;
  }
  std::optional<v1::RunStatus> s = Find(*sup_, late.run_id());
  EXPECT_EQ(s->health().state(), v1::Health::STATE_UNSPECIFIED);
  EXPECT_EQ(s->health().consecutive_failures(), 0) << "probed during its initial delay";
  EXPECT_EQ(s->phase(), v1::Task::ACTIVE);
  EXPECT_FALSE(Find(*sup_, none.run_id())->has_health());
  // Past its delay, it is probed.
  manual_clock_.AdvanceMs(30'001);
  EXPECT_TRUE(Eventually([&] { return failures(late) >= 1; }));
  EXPECT_FALSE(Find(*sup_, none.run_id())->has_health());
}

TEST_F(HealthTest, CheckOnAPortTheTaskDoesNotAskForIsRefused) {
  sup_ = NewWithHealth();
  v1::TaskRun run = MakeRun("health.badport", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  run.mutable_health_check()->mutable_http()->set_port("web");
  std::optional<v1::RunStatus> s = (sup_->SetDesired({run}), WaitFor(*sup_, run.run_id(), IsTerminal));
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StartsWith(s->message(), "health check uses port \"web\", which the task does not ask for"))
      << s->message();
  EXPECT_EQ(s->restarts(), 0);
}

TEST_F(HealthTest, ShutdownDoesNotWaitForAHangingProbe) {
  sup_ = NewWithHealth(/*threads=*/1);
  v1::TaskRun run = Sh("health.slow", "exec sleep 1000");
  // The probe says it has started (in the task's directory), then takes ten
  // minutes.
  run.mutable_health_check()->mutable_command()->add_argv("sh");
  run.mutable_health_check()->mutable_command()->add_argv("-c");
  run.mutable_health_check()->mutable_command()->add_argv("touch probing; exec sleep 600");
  run.mutable_health_check()->set_timeout_ms(600'000);
  sup_->SetDesired({run});
  ASSERT_TRUE(WaitFor(*sup_, run.run_id(), IsActive));
  WaitForFile(RunDirOf(run.run_id()) + "/sandbox/probing");
  // Shutting down ends the probe instead of waiting out its ten minutes (the
  // bound on this wait only bounds a failure).
  std::atomic<bool> done{false};
  std::thread shutdown([&] {
    sup_.reset();
    done = true;
  });
  const bool prompt = Eventually([&] { return done.load(); }, std::chrono::seconds(60));
  EXPECT_TRUE(prompt) << "Shutdown waited for a hanging probe";
  shutdown.join();
}

}  // namespace
}  // namespace herd::agent
