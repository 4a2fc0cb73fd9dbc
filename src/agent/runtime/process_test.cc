// Process plumbing and herd-shim, with real processes.
#include "agent/runtime/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/clock.h"
#include "testing/eventually.h"

namespace herd::agent {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ShimPath() {
  const char* dir = getenv("HERD_BIN_DIR");
  if (dir != nullptr) return std::string(dir) + "/herd-shim";
  std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  return exe.substr(0, exe.rfind('/') + 1) + "herd-shim";
}

int WaitExit(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd-process-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs herd-shim DIR -- argv and waits for it.
  int RunShim(std::vector<std::string> argv) {
    SpawnOptions o;
    o.path = ShimPath();
    o.argv = {o.path, dir_, "--"};
    o.argv.insert(o.argv.end(), argv.begin(), argv.end());
    o.env = {{"PATH", "/usr/bin:/bin"}};
    o.cwd = dir_;
    absl::StatusOr<pid_t> pid = Spawn(o);
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? WaitExit(*pid) : -1;
  }

  std::string dir_;
};

TEST_F(ProcessTest, IdentityOfSelf) {
  absl::StatusOr<ProcessId> me = IdentifyProcess(getpid());
  ASSERT_TRUE(me.ok()) << me.status();
  EXPECT_GT(me->start_time, 0u);
  EXPECT_TRUE(IsRunning(*me));
  EXPECT_FALSE(IsRunning(ProcessId{me->pid, me->start_time + 1}));
  EXPECT_FALSE(IsRunning(ProcessId{}));
  EXPECT_TRUE(absl::IsNotFound(IdentifyProcess(999'999'999).status()));
}

TEST_F(ProcessTest, SpawnWithCleanEnvCwdAndOutput) {
  int leaked = open("/dev/null", O_RDONLY);  // no O_CLOEXEC: must still not leak
  ASSERT_GT(leaked, 2);
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c",
            absl::StrCat("echo $FOO $HOME; pwd; test -e /proc/$$/fd/", leaked,
                         " && echo leaked || echo clean; echo oops >&2")};
  o.env = {{"FOO", "bar"}};
  o.cwd = dir_;
  o.stdout_path = dir_ + "/out";
  o.stderr_path = dir_ + "/err";
  absl::StatusOr<pid_t> pid = Spawn(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  int status = WaitExit(*pid);
  close(leaked);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(Slurp(dir_ + "/out"), absl::StrCat("bar\n", dir_, "\nclean\n"));
  EXPECT_EQ(Slurp(dir_ + "/err"), "oops\n");
}

TEST_F(ProcessTest, SpawnFailuresAreReported) {
  SpawnOptions o;
  o.path = "/no/such/program";
  o.argv = {"x"};
  EXPECT_TRUE(absl::IsNotFound(Spawn(o).status()));
  o.path = "/bin/true";
  o.cwd = "/no/such/dir";
  absl::StatusOr<pid_t> pid = Spawn(o);
  ASSERT_FALSE(pid.ok());
  EXPECT_TRUE(absl::StrContains(pid.status().message(), "chdir /no/such/dir")) << pid.status();
  o.cwd = "";
  o.argv = {};
  EXPECT_FALSE(Spawn(o).ok());
  o.path = "relative";
  o.argv = {"x"};
  EXPECT_FALSE(Spawn(o).ok());
}

TEST_F(ProcessTest, PidfdReportsExit) {
  SpawnOptions o;
  o.path = "/bin/sleep";
  o.argv = {"sleep", "0.1"};
  absl::StatusOr<pid_t> pid = Spawn(o);
  ASSERT_TRUE(pid.ok());
  absl::StatusOr<ProcessId> id = IdentifyProcess(*pid);
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(absl::IsNotFound(PidfdOpenChecked(ProcessId{*pid, id->start_time + 5}).status()));
  absl::StatusOr<Fd> fd = PidfdOpenChecked(*id);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_FALSE(PidfdExited(fd->get()));
  struct pollfd p = {fd->get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  EXPECT_TRUE(PidfdExited(fd->get()));
  EXPECT_FALSE(IsRunning(*id));  // a zombie is not running
  ReapIfChild(fd->get());
  EXPECT_FALSE(IdentifyProcess(*pid).ok());
  ReapIfChild(fd->get());  // ECHILD is fine
}

TEST_F(ProcessTest, ExitLines) {
  absl::StatusOr<ExitStatus> e = ParseExitLine("exited 3\n");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, ExitStatus::Kind::kExited);
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_EQ(e->Describe(), "exited with code 3");
  e = ParseExitLine("signaled 9");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->Describe(), "killed by signal 9 (SIGKILL)");
  e = ParseExitLine("failed exec failed: No such file or directory (x)");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->permanent);
  EXPECT_EQ(e->exit_code, 127);
  e = ParseExitLine("failed fork: Resource temporarily unavailable");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->permanent);
  EXPECT_FALSE(ParseExitLine("exited").ok());
  EXPECT_FALSE(ParseExitLine("").ok());
  EXPECT_FALSE(ParseTaskPid("1 2 3").ok());
  absl::StatusOr<TaskPidRecord> r = ParseTaskPid("10 20 30 40\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->task, (ProcessId{10, 20}));
  EXPECT_EQ(r->shim, (ProcessId{30, 40}));
}

TEST_F(ProcessTest, ShimRecordsExitCodeAndOutput) {
  int status = RunShim({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  absl::StatusOr<ExitStatus> exit = ReadExitFile(dir_);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->kind, ExitStatus::Kind::kExited);
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_EQ(Slurp(dir_ + "/stdout"), "out\n");
  EXPECT_EQ(Slurp(dir_ + "/stderr"), "err\n");
  absl::StatusOr<TaskPidRecord> pids = ReadTaskPidFile(dir_);
  ASSERT_TRUE(pids.ok()) << pids.status();
  EXPECT_GT(pids->task.start_time, 0u);
  EXPECT_NE(pids->task.pid, pids->shim.pid);
  // Output is appended across attempts.
  RunShim({"sh", "-c", "echo again"});
  EXPECT_EQ(Slurp(dir_ + "/stdout"), "out\nagain\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/.exit.tmp"));
}

TEST_F(ProcessTest, ShimRecordsSignalAndExecFailure) {
  RunShim({"sh", "-c", "kill -SEGV $$"});
  absl::StatusOr<ExitStatus> exit = ReadExitFile(dir_);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->kind, ExitStatus::Kind::kSignaled);
  EXPECT_EQ(exit->signal, SIGSEGV);

  RunShim({"definitely-not-a-program"});
  exit = ReadExitFile(dir_);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->kind, ExitStatus::Kind::kFailed);
  EXPECT_TRUE(exit->permanent);
  EXPECT_EQ(exit->message, "exec failed: No such file or directory (definitely-not-a-program)");
}

TEST_F(ProcessTest, ShimIgnoresTermAndTaskDefaultsSignals) {
  // The task gets default dispositions (so TERM kills it) and an empty mask,
  // even though the shim ignores TERM.
  SpawnOptions o;
  o.path = ShimPath();
  o.argv = {o.path, dir_, "--", "sleep", "1000"};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  absl::StatusOr<pid_t> shim = Spawn(o);
  ASSERT_TRUE(shim.ok());
  absl::StatusOr<TaskPidRecord> pids;
  ASSERT_TRUE(::herd::testing::Eventually([&] { return (pids = ReadTaskPidFile(dir_)).ok(); })) << pids.status();
  EXPECT_EQ(pids->shim.pid, *shim);
  EXPECT_EQ(getpgid(pids->task.pid), pids->task.pid);
  EXPECT_EQ(getsid(*shim), *shim);  // the shim leads its own session
  kill(*shim, SIGTERM);
  kill(*shim, SIGHUP);
  kill(*shim, SIGINT);
  // The shim outlives them: it is still there to see its task end (later
  // than the signals) and to exit normally after writing how it ended.
  ASSERT_TRUE(SignalProcessGroup(pids->task.pid, SIGTERM).ok());
  const int status = WaitExit(*shim);
  EXPECT_TRUE(WIFEXITED(status)) << "the shim died of a signal: " << status;
  absl::StatusOr<ExitStatus> exit = ReadExitFile(dir_);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->kind, ExitStatus::Kind::kSignaled);
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_TRUE(absl::IsNotFound(SignalProcessGroup(pids->task.pid, 0)));
  EXPECT_FALSE(SignalProcessGroup(1, 0).ok());
}

TEST_F(ProcessTest, ExitLinesOfALeaseExpiry) {
  absl::StatusOr<ExitStatus> e = ParseExitLine("signaled 15\nlease-expired no contact with the master for 3012 ms\n");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, ExitStatus::Kind::kSignaled);
  EXPECT_EQ(e->signal, SIGTERM);
  EXPECT_TRUE(e->lease_expired);
  EXPECT_EQ(e->Describe(), "lease expired: no contact with the master for 3012 ms (killed by signal 15 (SIGTERM))");
  e = ParseExitLine("failed the task was not started\nlease-expired the lease file is malformed\n");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, ExitStatus::Kind::kFailed);
  EXPECT_FALSE(e->permanent);
  EXPECT_TRUE(e->lease_expired);
  EXPECT_EQ(e->Describe(), "lease expired: the lease file is malformed (the task was not started)");
  // Lines a newer shim may add are ignored; the first line still decides.
  e = ParseExitLine("exited 0\nsomething new\n");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->lease_expired);
  EXPECT_TRUE(e->success());
  EXPECT_FALSE(ParseExitLine("lease-expired x\nexited 0\n").ok());
}

// ---- herd-shim's lease (at-most-once runs) ----

std::string BootId() {
  return std::string(absl::StripAsciiWhitespace(Slurp("/proc/sys/kernel/random/boot_id")));
}

class ShimLeaseTest : public ProcessTest {
 protected:
  std::string LeasePath() const { return dir_ + "/lease"; }
  // The lease runs out at `deadline` (CLOCK_MONOTONIC ms), renewed from a
  // contact at `contact`.
  void WriteLease(int64_t deadline, int64_t contact, const std::string& boot = BootId()) {
    ASSERT_TRUE(WriteFileAtomic(LeasePath(), absl::StrCat(deadline, " ", contact, " ", boot, "\n")).ok());
  }
  // Starts herd-shim DIR --lease-file DIR/lease --lease-grace-ms GRACE -- argv.
  pid_t StartShim(int64_t grace_ms, std::vector<std::string> argv) {
    SpawnOptions o;
    o.path = ShimPath();
    o.argv = {o.path, dir_, "--lease-file", LeasePath(), "--lease-grace-ms", absl::StrCat(grace_ms), "--"};
    o.argv.insert(o.argv.end(), argv.begin(), argv.end());
    o.env = {{"PATH", "/usr/bin:/bin"}};
    o.cwd = dir_;
    absl::StatusOr<pid_t> pid = Spawn(o);
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : -1;
  }
  TaskPidRecord WaitTask() {
    absl::StatusOr<TaskPidRecord> pids;
    EXPECT_TRUE(::herd::testing::Eventually([&] { return (pids = ReadTaskPidFile(dir_)).ok(); })) << pids.status();
    return pids.ok() ? *pids : TaskPidRecord{};
  }
  // "no contact with the master for N ms" -> N.
  static int64_t ContactAge(const std::string& why) {
    int64_t n = -1;
    absl::string_view rest = why;
    if (!absl::ConsumePrefix(&rest, "lease expired: no contact with the master for ")) return -1;
    rest = rest.substr(0, rest.find(' '));
    return absl::SimpleAtoi(rest, &n) ? n : -1;
  }
};

TEST_F(ShimLeaseTest, TheTaskIsStoppedOnceTheLeaseRunsOut) {
  const int64_t start = SteadyNowMs();
  WriteLease(start + 600'000, start);
  pid_t shim = StartShim(5000, {"sleep", "1000"});
  ASSERT_GT(shim, 0);
  TaskPidRecord pids = WaitTask();
  ASSERT_TRUE(IsRunning(pids.task));
  // The master's last acknowledged contact was 300 ms before the lease
  // runs out, 100 ms from now.
  const int64_t now = SteadyNowMs();
  WriteLease(now + 100, now - 200);
  const int status = WaitExit(shim);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(IsRunning(pids.task));
  absl::StatusOr<ExitStatus> exit = ReadExitFile(dir_);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->lease_expired);
  EXPECT_EQ(exit->kind, ExitStatus::Kind::kSignaled);
  EXPECT_EQ(exit->signal, SIGTERM) << "sleep ends at the SIGTERM; no SIGKILL was needed";
  // Never before the deadline: it had been out of contact for at least
  // the whole lease.
  EXPECT_GE(ContactAge(exit->killed_because), 300) << exit->killed_because;
  EXPECT_TRUE(absl::StrContains(Slurp(dir_ + "/exit"), "lease-expired no contact with the master for"));
}

TEST_F(ShimLeaseTest, ATaskThatIgnoresTermIsKilledAfterTheGracePeriod) {
  const int64_t start = SteadyNowMs();
  WriteLease(start + 600'000, start);
  // SIG_IGN survives exec: the sleeps ignore TERM too.
  pid_t shim = StartShim(300, {"sh", "-c", "trap '' TERM; touch ready; while :; do sleep 0.05; done"});
  ASSERT_GT(shim, 0);
  TaskPidRecord pids = WaitTask();
  ASSERT_TRUE(::herd::testing::Eventually([&] { return std::filesystem::exists(dir_ + "/ready"); }));
  const int64_t expired = SteadyNowMs();
  WriteLease(expired - 1, expired - 1000);
  WaitExit(shim);
  const int64_t ended = SteadyNowMs();
  EXPECT_FALSE(IsRunning(pids.task));
  EXPECT_GE(ended - expired, 300) << "SIGKILL came before the grace period was over";
  absl::StatusOr<ExitStatus> exit = ReadExitFile(dir_);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->lease_expired);
  EXPECT_EQ(exit->kind, ExitStatus::Kind::kSignaled);
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_TRUE(absl::StrContains(Slurp(dir_ + "/shim.log") + exit->killed_because, "no contact with the master"));
}

TEST_F(ShimLeaseTest, WithoutAValidLeaseTheTaskIsNotStarted) {
  const int64_t now = SteadyNowMs();
  struct Case {
    std::string what;
    std::function<void()> lease;
    std::string why;
  };
  std::vector<Case> cases = {
      {"expired", [&] { WriteLease(now - 10, now - 3010); }, "no contact with the master for"},
      {"missing", [&] { std::filesystem::remove(LeasePath()); }, "cannot read the lease file"},
      {"an earlier boot's", [&] { WriteLease(now + 600'000, now, "00000000-0000-0000-0000-000000000000"); },
       "from before the machine restarted"},
      {"malformed", [&] { ASSERT_TRUE(WriteFileAtomic(LeasePath(), "soon\n").ok()); }, "malformed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::filesystem::remove(dir_ + "/exit");
    c.lease();
    pid_t shim = StartShim(1000, {"sh", "-c", "touch started; sleep 1000"});
    ASSERT_GT(shim, 0);
    WaitExit(shim);
    absl::StatusOr<ExitStatus> exit = ReadExitFile(dir_);
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_TRUE(exit->lease_expired);
    EXPECT_EQ(exit->kind, ExitStatus::Kind::kFailed);
    EXPECT_TRUE(absl::StrContains(exit->Describe(), c.why)) << exit->Describe();
    EXPECT_TRUE(absl::StrContains(exit->Describe(), "the task was not started")) << exit->Describe();
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/started"));
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/task.pid"));
  }
}

TEST_F(ShimLeaseTest, ARenewedLeaseKeepsTheTaskRunning) {
  const int64_t first = SteadyNowMs() + 2000;
  WriteLease(first, first - 2000);
  pid_t shim = StartShim(1000, {"sleep", "1000"});
  ASSERT_GT(shim, 0);
  TaskPidRecord pids = WaitTask();
  // Renewed (as polls would) until well past the first deadline.
  std::atomic<bool> renew{true};
  std::thread renewer([&] {
    while (renew) {
      const int64_t now = SteadyNowMs();
      WriteLease(now + 2000, now);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  ASSERT_TRUE(::herd::testing::Eventually([&] { return SteadyNowMs() > first + 1000; }, std::chrono::seconds(30)));
  EXPECT_TRUE(IsRunning(pids.task)) << "stopped although the lease was renewed";
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/exit"));
  renew = false;
  renewer.join();
  WaitExit(shim);  // the last renewal runs out
  absl::StatusOr<ExitStatus> exit = ReadExitFile(dir_);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->lease_expired);
  EXPECT_GE(ContactAge(exit->killed_because), 2000) << exit->killed_because;
}

}  // namespace
}  // namespace herd::agent
