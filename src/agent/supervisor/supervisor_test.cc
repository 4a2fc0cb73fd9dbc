// The Supervisor with real processes (runs as root on Linux): starting,
// output capture, restart policies, stopping with grace, process groups,
// and recovery by a new Supervisor (the agent restarting or being killed).
#include "agent/supervisor/supervisor.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/runtime/process.h"
#include "agent/supervisor/run_dir.h"
#include "agent/supervisor/testing.h"
#include "base/log.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

class SupervisorTest : public SupervisorFixture {};

TEST_F(SupervisorTest, StartsActiveInOwnProcessGroupWithEnvironment) {
  sup_ = New();
  v1::TaskRun run = Sh("alice.test.3.1", "echo $HERD_RUN_ID $HERD_JOB $HERD_TASK_INDEX $FOO; pwd; exec sleep 1000");
  (*run.mutable_env())["FOO"] = "bar";
  run.set_workdir("w/x");
  int64_t t0 = NowMs();
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = Find(*sup_, run.run_id());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::STARTING);  // visible at once
  EXPECT_TRUE(s->desired());
  s = WaitFor(*sup_, run.run_id(), IsActive);
  HERD_LOG_INFO("start latency SetDesired -> ACTIVE: {} ms", NowMs() - t0);
  ASSERT_TRUE(s && s->phase() == v1::Task::ACTIVE);
  pid_t pid = static_cast<pid_t>(s->pid());
  EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(getpgid(pid), pid);        // its own process group
  EXPECT_NE(getsid(pid), getsid(0));   // outside the agent's session
  EXPECT_EQ(s->ref().job(), "alice/test");
  EXPECT_EQ(s->restarts(), 0);
  EXPECT_GT(s->started_ms(), 0);

  // Repeating the desired state changes nothing: SetDesired decides at once
  // (a restart or a stop would show in the state version it returns to).
  uint64_t before = 0, after = 0;
  sup_->Observe(&before);
  sup_->SetDesired({run});
  s = Find(*sup_, run.run_id());
  sup_->Observe(&after);
  EXPECT_EQ(after, before);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid(), pid);
  EXPECT_EQ(s->phase(), v1::Task::ACTIVE);
  EXPECT_TRUE(NoSignalPending(pid));

  absl::StatusOr<std::string> out = sup_->LogPath(run.run_id(), false);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(Eventually([&] { return absl::StrContains(Slurp(*out), "/sandbox/w/x\n"); }));
  EXPECT_EQ(Slurp(*out), absl::StrCat("alice.test.3.1 alice/test 3 bar\n", RunDirOf(run.run_id()),
                                      "/sandbox/w/x\n"));
}

TEST_F(SupervisorTest, OutputLandsInFilesAndCleanExitIsTerminal) {
  sup_ = New();
  v1::TaskRun run = Sh("out", "echo to-out; echo to-err >&2; exit 0");
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "out", IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::EXITED);
  EXPECT_EQ(s->exit_code(), 0);
  EXPECT_EQ(s->exit_signal(), 0);
  EXPECT_EQ(s->restarts(), 0);
  EXPECT_EQ(s->pid(), 0);
  EXPECT_TRUE(s->desired());  // reported until the master lets go
  EXPECT_EQ(s->message(), "exited with code 0");
  EXPECT_EQ(Slurp(*sup_->LogPath("out", false)), "to-out\n");
  EXPECT_EQ(Slurp(*sup_->LogPath("out", true)), "to-err\n");
  EXPECT_FALSE(sup_->LogPath("nope", false).ok());
  EXPECT_FALSE(sup_->LogPath("../../etc", false).ok());
}

TEST_F(SupervisorTest, OnFailureRestartsWithBackoffUntilMaxRestarts) {
  sup_ = New();
  v1::TaskRun run = Sh("fail", "exit 3", v1::RestartPolicy::ON_FAILURE);
  run.mutable_restart()->set_max_restarts(3);
  int64_t t0 = NowMs();
  sup_->SetDesired({run});
  bool saw_backoff = false;
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "fail", [&](const std::optional<v1::RunStatus>& s) {
    if (s && s->phase() == v1::Task::BACKOFF) saw_backoff = true;
    return IsTerminal(s);
  });
  int64_t elapsed = NowMs() - t0;
  ASSERT_TRUE(s);
  EXPECT_TRUE(saw_backoff);
  EXPECT_EQ(s->phase(), v1::Task::EXITED);
  EXPECT_EQ(s->exit_code(), 3);
  EXPECT_EQ(s->restarts(), 3);
  EXPECT_TRUE(absl::StrContains(s->message(), "gave up after 3 restarts")) << s->message();
  EXPECT_GE(elapsed, 20 + 40 + 80);  // 20ms doubling, capped at 80
}

TEST_F(SupervisorTest, OnFailureDoesNotRestartSuccess) {
  sup_ = New();
  sup_->SetDesired({Sh("ok", "exit 0", v1::RestartPolicy::ON_FAILURE)});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "ok", IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 0);
  EXPECT_EQ(s->exit_code(), 0);
}

TEST_F(SupervisorTest, AlwaysRestartsEvenOnSuccess) {
  sup_ = New();
  v1::TaskRun limited = MakeRun("always-limited", {"true"}, v1::RestartPolicy::ALWAYS);
  limited.mutable_restart()->set_max_restarts(2);
  v1::TaskRun unlimited = MakeRun("always", {"true"}, v1::RestartPolicy::ALWAYS);
  sup_->SetDesired({limited, unlimited});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "always-limited", IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 2);
  EXPECT_EQ(s->exit_code(), 0);
  s = WaitFor(*sup_, "always", [](const std::optional<v1::RunStatus>& s) { return s && s->restarts() >= 4; });
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->terminal());
}

TEST_F(SupervisorTest, ExecFailureIsTerminalWithClearMessage) {
  sup_ = New();
  sup_->SetDesired({MakeRun("noexec", {"/no/such/binary", "x"}, v1::RestartPolicy::ON_FAILURE),
                    MakeRun("nopath", {"no-such-program-anywhere"}, v1::RestartPolicy::ALWAYS)});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "noexec", IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::EXITED);
  EXPECT_EQ(s->restarts(), 0);
  EXPECT_EQ(s->exit_code(), 127);
  EXPECT_TRUE(absl::StrContains(s->message(), "exec failed: No such file or directory (/no/such/binary)"))
      << s->message();
  s = WaitFor(*sup_, "nopath", IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), "(no-such-program-anywhere)")) << s->message();
}

TEST_F(SupervisorTest, InvalidRunsAreReportedTerminal) {
  sup_ = New();
  sup_->SetDesired({MakeRun("../evil", {"true"}), MakeRun("noargv", {})});
  std::optional<v1::RunStatus> s = Find(*sup_, "../evil");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->terminal());
  EXPECT_TRUE(absl::StrContains(s->message(), "bad run id"));
  s = Find(*sup_, "noargv");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->terminal());
  EXPECT_EQ(s->message(), "empty argv");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/evil"));
}

TEST_F(SupervisorTest, StopWithTermHandlerEndsWithinGrace) {
  sup_ = New();
  v1::TaskRun run = Sh("trap", "trap 'exit 0' TERM; touch ready; sleep 1000 & wait");
  run.set_grace_period_ms(5000);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "trap", IsActive);
  ASSERT_TRUE(s);
  WaitForFile(RunDirOf("trap") + "/sandbox/ready");
  pid_t pid = static_cast<pid_t>(s->pid());
  sup_->SetDesired({});
  WaitFor(*sup_, "trap", IsGone);
  // It ended through its handler (exit 0), not by the SIGKILL that would
  // follow the grace period: the shim's record says how, whatever the time.
  absl::StatusOr<ExitStatus> exit = ReadExitFile(RunDirOf("trap"));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->success()) << exit->Describe();
  EXPECT_TRUE(GroupMembers(pid).empty());
  // The directory and logs stay.
  EXPECT_TRUE(std::filesystem::exists(RunDirOf("trap") + "/stdout"));
  EXPECT_TRUE(sup_->LogPath("trap", false).ok());
}

// A task restarted by an update (or placed here again) gets a run with a
// later incarnation while its old run may still be stopping: the new run
// starts only once the old one's processes are gone, never beside them.
TEST_F(SupervisorTest, ALaterRunOfATaskStartsOnceTheEarlierOneHasStopped) {
  sup_ = New();
  const std::string release = root_ + "/release";
  v1::TaskRun old_run = Sh(
      "task.1", absl::StrCat("trap 'while [ ! -e ", release, " ]; do sleep 0.05; done; exit 0' TERM; touch ready; "
                             "sleep 1000 & wait"));
  old_run.set_grace_period_ms(60'000);
  sup_->SetDesired({old_run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "task.1", IsActive);
  ASSERT_TRUE(s);
  WaitForFile(RunDirOf("task.1") + "/sandbox/ready");
  const pid_t old_pid = static_cast<pid_t>(s->pid());
  v1::TaskRun new_run = Sh("task.2", "sleep 1000");
  new_run.mutable_ref()->set_incarnation(2);
  sup_->SetDesired({new_run});
  std::optional<v1::RunStatus> waiting = WaitFor(*sup_, "task.2", [](const std::optional<v1::RunStatus>& st) {
    return st && absl::StartsWith(st->message(), "waiting: the task's previous run");
  });
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->phase(), v1::Task::STARTING);
  EXPECT_FALSE(GroupMembers(old_pid).empty()) << "the old run is still stopping";
  { std::ofstream(release).put('x'); }
  std::optional<v1::RunStatus> active = WaitFor(*sup_, "task.2", IsActive);
  ASSERT_TRUE(active);
  EXPECT_TRUE(GroupMembers(old_pid).empty());
  EXPECT_EQ(active->message(), "");
}

TEST_F(SupervisorTest, StopIgnoringTermIsKilledAfterGrace) {
  sup_ = New();
  v1::TaskRun run = Sh("stubborn", "trap '' TERM; touch ready; sleep 1000");
  run.set_grace_period_ms(500);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "stubborn", IsActive);
  ASSERT_TRUE(s);
  WaitForFile(RunDirOf("stubborn") + "/sandbox/ready");
  pid_t pid = static_cast<pid_t>(s->pid());
  int64_t t0 = NowMs();
  sup_->SetDesired({});
  s = Find(*sup_, "stubborn");  // reported while being stopped
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->desired());
  EXPECT_EQ(s->phase(), v1::Task::STOPPING);
  EXPECT_EQ(s->pid(), pid);
  WaitFor(*sup_, "stubborn", IsGone);
  // Killed, and not before its grace period (a lower bound on elapsed time
  // holds however busy the machine is).
  EXPECT_GE(NowMs() - t0, 500);
  absl::StatusOr<ExitStatus> exit = ReadExitFile(RunDirOf("stubborn"));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->kind, ExitStatus::Kind::kSignaled) << exit->Describe();
  EXPECT_EQ(exit->signal, SIGKILL) << exit->Describe();
  EXPECT_TRUE(GroupMembers(pid).empty());
}

TEST_F(SupervisorTest, StopKillsTheWholeProcessGroup) {
  sup_ = New();
  v1::TaskRun run = Sh("family", "sleep 1000 & sleep 1000");
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "family", IsActive);
  ASSERT_TRUE(s);
  pid_t pid = static_cast<pid_t>(s->pid());
  EXPECT_TRUE(Eventually([&] { return GroupMembers(pid).size() == 3u; }))  // sh and two sleeps
      << GroupMembers(pid).size();
  sup_->SetDesired({});
  WaitFor(*sup_, "family", IsGone);
  EXPECT_TRUE(GroupMembers(pid).empty());
}

TEST_F(SupervisorTest, LeftoversOfAnExitedTaskAreKilled) {
  sup_ = New();
  sup_->SetDesired({Sh("leftover", "sleep 1000 & echo $! > bg.pid; exit 0")});
  ASSERT_TRUE(WaitFor(*sup_, "leftover", IsTerminal));
  pid_t bg = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(Slurp(RunDirOf("leftover") + "/sandbox/bg.pid")), &bg));
  EXPECT_FALSE(Alive(bg));
}

TEST_F(SupervisorTest, OrphansThatLeftTheGroupAreKilledToo) {
  // `setsid` takes the sleep out of the task's process group and session;
  // the shim (a child subreaper) still inherits and kills it.
  sup_ = New();
  sup_->SetDesired({Sh("escape", "setsid sleep 1000 & echo $! > bg.pid; sleep 0.1; exit 0")});
  ASSERT_TRUE(WaitFor(*sup_, "escape", IsTerminal));
  pid_t bg = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(Slurp(RunDirOf("escape") + "/sandbox/bg.pid")), &bg));
  EXPECT_FALSE(Alive(bg));
}

TEST_F(SupervisorTest, RecoveryAdoptsRunningTaskWithoutRestart) {
  sup_ = New();
  v1::TaskRun run = MakeRun("adopt", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "adopt", IsActive);
  ASSERT_TRUE(s);
  const int64_t pid = s->pid();
  const int64_t started = s->started_ms();
  sup_.reset();  // the agent goes away; the task does not
  EXPECT_TRUE(NoSignalPending(static_cast<pid_t>(pid)));

  sup_ = New();
  s = Find(*sup_, "adopt");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::ACTIVE);
  EXPECT_EQ(s->pid(), pid);
  EXPECT_EQ(s->started_ms(), started);
  // Once the new loop has done what it would do (a marker run behind it is
  // ACTIVE), the adopted task is untouched.
  Barrier(*sup_, {run});
  s = Find(*sup_, "adopt");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid(), pid);
  EXPECT_EQ(s->restarts(), 0);
  EXPECT_TRUE(NoSignalPending(static_cast<pid_t>(pid)));

  // The adopted task is watched: its exit is noticed and the policy applies.
  kill(static_cast<pid_t>(pid), SIGKILL);
  s = WaitFor(*sup_, "adopt", [&](const std::optional<v1::RunStatus>& s) {
    return s && s->restarts() == 1 && s->phase() == v1::Task::ACTIVE;
  });
  ASSERT_TRUE(s);
  EXPECT_NE(s->pid(), pid);
  EXPECT_EQ(s->exit_signal(), SIGKILL);
}

TEST_F(SupervisorTest, RecoveryReportsExitThatHappenedWhileDown) {
  sup_ = New();
  const std::string wait_go = "while [ ! -e go ]; do sleep 0.02; done; exit 5";
  v1::TaskRun never = Sh("down-never", wait_go);
  v1::TaskRun retry = Sh("down-retry", wait_go, v1::RestartPolicy::ON_FAILURE);
  retry.mutable_restart()->set_max_restarts(1);
  v1::TaskRun killed = MakeRun("down-killed", {"sleep", "1000"});
  sup_->SetDesired({never, retry, killed});
  pid_t killed_pid = 0;
  for (const char* id : {"down-never", "down-retry", "down-killed"}) {
    std::optional<v1::RunStatus> s = WaitFor(*sup_, id, IsActive);
    ASSERT_TRUE(s);
    if (std::string(id) == "down-killed") killed_pid = static_cast<pid_t>(s->pid());
  }
  sup_.reset();

  std::ofstream(RunDirOf("down-never") + "/sandbox/go").put('x');
  std::ofstream(RunDirOf("down-retry") + "/sandbox/go").put('x');
  kill(killed_pid, SIGKILL);
  for (const char* id : {"down-never", "down-retry", "down-killed"}) {
    ASSERT_TRUE(Eventually([&] { return ReadExitFile(RunDirOf(id)).ok(); })) << id;
  }

  sup_ = New();
  std::optional<v1::RunStatus> s = Find(*sup_, "down-never");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->terminal());
  EXPECT_EQ(s->exit_code(), 5);
  s = Find(*sup_, "down-killed");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->terminal());
  EXPECT_EQ(s->exit_signal(), SIGKILL);
  // ON_FAILURE: restarted once on recovery, exits 5 again, gives up.
  s = Find(*sup_, "down-retry");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 1);
  EXPECT_EQ(s->exit_code(), 5);
  s = WaitFor(*sup_, "down-retry", IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 1);
  EXPECT_EQ(s->exit_code(), 5);
}

TEST_F(SupervisorTest, ReusedPidIsNotAdopted) {
  // An unrelated process whose pid the run directory claims, with a start
  // time that does not match (as after pid reuse or a reboot).
  SpawnOptions spawn;
  spawn.path = "/bin/sleep";
  spawn.argv = {"sleep", "1000"};
  absl::StatusOr<pid_t> stranger = Spawn(spawn);
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  absl::StatusOr<ProcessId> id = IdentifyProcess(*stranger);
  ASSERT_TRUE(id.ok());

  RunDir dir(RunDirOf("reused"));
  std::filesystem::create_directories(root_ + "/runs");
  ASSERT_TRUE(dir.Create().ok());
  ASSERT_TRUE(dir.WriteSpec(MakeRun("reused", {"sleep", "1000"})).ok());
  RunState state;
  state.phase = v1::Task::ACTIVE;
  state.started_ms = 1;
  state.shim = ProcessId{*stranger, id->start_time + 12345};
  ASSERT_TRUE(dir.WriteState(state).ok());
  std::string fake = absl::StrCat(*stranger, " ", id->start_time + 12345, " ", *stranger, " ",
                                  id->start_time + 12345, "\n");
  ASSERT_TRUE(WriteFileAtomic(dir.File("task.pid"), fake).ok());

  sup_ = New();
  std::optional<v1::RunStatus> s = Find(*sup_, "reused");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->terminal());  // NEVER: lost, not restarted
  EXPECT_EQ(s->pid(), 0);
  EXPECT_TRUE(absl::StrContains(s->message(), "lost")) << s->message();
  // The stranger is left alone, also once the loop has done what it would.
  Barrier(*sup_, {MakeRun("reused", {"sleep", "1000"})});
  EXPECT_TRUE(IsRunning(*id));
  EXPECT_TRUE(NoSignalPending(*stranger));
  kill(*stranger, SIGKILL);
  waitpid(*stranger, nullptr, 0);
}

TEST_F(SupervisorTest, RunNoLongerDesiredAfterRecoveryIsStopped) {
  sup_ = New();
  v1::TaskRun keep = MakeRun("keep", {"sleep", "1000"});
  v1::TaskRun drop = MakeRun("drop", {"sleep", "1000"});
  sup_->SetDesired({keep, drop});
  std::optional<v1::RunStatus> k = WaitFor(*sup_, "keep", IsActive);
  std::optional<v1::RunStatus> d = WaitFor(*sup_, "drop", IsActive);
  ASSERT_TRUE(k && d);
  sup_.reset();

  sup_ = New();
  EXPECT_EQ(sup_->Observe().size(), 2u);  // recovered runs count as desired
  sup_->SetDesired({keep});
  WaitFor(*sup_, "drop", IsGone);
  EXPECT_FALSE(Alive(static_cast<pid_t>(d->pid())));
  std::optional<v1::RunStatus> s = Find(*sup_, "keep");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid(), k->pid());

  // A removed run stays removed across another restart.
  sup_.reset();
  sup_ = New();
  EXPECT_EQ(sup_->Observe().size(), 1u);
}

TEST_F(SupervisorTest, StopInterruptedByAgentRestartIsResumed) {
  sup_ = New();
  v1::TaskRun run = Sh("resume-stop", "trap '' TERM; touch ready; sleep 1000");
  run.set_grace_period_ms(300);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "resume-stop", IsActive);
  ASSERT_TRUE(s);
  WaitForFile(RunDirOf("resume-stop") + "/sandbox/ready");
  sup_->SetDesired({});
  sup_.reset();  // dies during the grace period

  sup_ = New();
  s = Find(*sup_, "resume-stop");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->desired());
  WaitFor(*sup_, "resume-stop", IsGone);
}

TEST_F(SupervisorTest, BackoffSurvivesRecoveryWithoutDoubleCounting) {
  sup_ = New();
  v1::TaskRun run = Sh("slow-backoff", "exit 2", v1::RestartPolicy::ON_FAILURE);
  run.mutable_restart()->set_backoff_initial_ms(400);
  run.mutable_restart()->set_backoff_max_ms(400);
  run.mutable_restart()->set_max_restarts(2);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "slow-backoff", [](const std::optional<v1::RunStatus>& s) {
    return s && s->phase() == v1::Task::BACKOFF;
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 1);
  sup_.reset();

  sup_ = New();
  s = Find(*sup_, "slow-backoff");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::BACKOFF);
  EXPECT_EQ(s->restarts(), 1);
  s = WaitFor(*sup_, "slow-backoff", IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 2);
  EXPECT_EQ(s->exit_code(), 2);
}

TEST_F(SupervisorTest, TerminalRunStaysTerminalAcrossRecovery) {
  sup_ = New();
  sup_->SetDesired({MakeRun("done", {"true"})});
  std::optional<v1::RunStatus> before = WaitFor(*sup_, "done", IsTerminal);
  ASSERT_TRUE(before);
  sup_.reset();
  sup_ = New();
  std::optional<v1::RunStatus> after = Find(*sup_, "done");
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->terminal());
  EXPECT_EQ(after->phase(), v1::Task::EXITED);
  EXPECT_EQ(after->started_ms(), before->started_ms());
  EXPECT_EQ(after->message(), before->message());
}

TEST_F(SupervisorTest, TasksSurviveTheAgentBeingSigkilled) {
  // Orphaned shims are re-parented to us (not to an init that may not reap),
  // so nothing is left as a zombie.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    // The "agent": supervises one run, reports its pid, waits to be killed.
    close(pipe_fds[0]);
    Supervisor::Options opts;
    opts.root_dir = root_;
    absl::StatusOr<std::unique_ptr<Supervisor>> sup = Supervisor::Create(opts);
    if (!sup.ok()) _exit(1);
    (*sup)->SetDesired({MakeRun("survivor", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS)});
    int64_t deadline = NowMs() + 10'000;
    while (NowMs() < deadline) {
      std::optional<v1::RunStatus> s = Find(**sup, "survivor");
      if (s && s->phase() == v1::Task::ACTIVE) {
        int64_t pid = s->pid();
        (void)!write(pipe_fds[1], &pid, sizeof(pid));
        while (true) pause();
      }
      (*sup)->WaitForChange(0, 50);
    }
    _exit(2);
  }
  close(pipe_fds[1]);
  int64_t pid = 0;
  ASSERT_EQ(read(pipe_fds[0], &pid, sizeof(pid)), static_cast<ssize_t>(sizeof(pid)));
  close(pipe_fds[0]);
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  int status;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  ASSERT_TRUE(WIFSIGNALED(status));
  // A signal the agent's death sent the task would be pending by now.
  EXPECT_TRUE(NoSignalPending(static_cast<pid_t>(pid)));

  sup_ = New();  // the lock died with the agent
  std::optional<v1::RunStatus> s = Find(*sup_, "survivor");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::ACTIVE);
  EXPECT_EQ(s->pid(), pid);
  EXPECT_EQ(s->restarts(), 0);
  sup_->SetDesired({});
  WaitFor(*sup_, "survivor", IsGone);
  EXPECT_FALSE(Alive(static_cast<pid_t>(pid)));
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_F(SupervisorTest, OneSupervisorPerRoot) {
  sup_ = New();
  Supervisor::Options opts;
  opts.root_dir = root_;
  absl::StatusOr<std::unique_ptr<Supervisor>> second = Supervisor::Create(opts);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SupervisorTest, RetentionDeletesOldRunDirectories) {
  sup_ = New(/*retention_ms=*/300, /*gc_interval_ms=*/50);
  sup_->SetDesired({MakeRun("short", {"true"})});
  ASSERT_TRUE(WaitFor(*sup_, "short", IsTerminal));
  sup_->SetDesired({});
  ASSERT_TRUE(WaitFor(*sup_, "short", IsGone).has_value() == false);
  EXPECT_TRUE(sup_->LogPath("short", false).ok());  // logs outlive the run
  EXPECT_TRUE(Eventually([&] { return !std::filesystem::exists(RunDirOf("short")); }));
  EXPECT_FALSE(sup_->LogPath("short", false).ok());
}

// Issue #11: an agent with a backlog of starts kept its lock for the whole
// backlog, so poll replies (Observe) missed their deadlines and a stop
// waited for every start. Starts now go a few per pass of the loop: while
// the backlog is worked off, observations see it progress, and a stop
// drops the starts not yet made.
TEST_F(SupervisorTest, ABacklogOfStartsStaysObservableAndStoppable) {
  Supervisor::Options opts;
  opts.max_starts_per_pass = 2;
  sup_ = New(opts);
  constexpr int kRuns = 300;
  std::vector<v1::TaskRun> runs;
  for (int i = 0; i < kRuns; ++i) runs.push_back(MakeRun(absl::StrCat("alice.b.", i, ".1"), {"sleep", "1000"}));
  sup_->SetDesired(runs);
  // Observations interleave with the starts: some started, some not yet.
  // (Before, every start was made in one pass and the runs went from all
  // waiting to all active at once.)
  bool seen_midway = false;
  bool all_active = false;
  uint64_t version = 0;
  while (!seen_midway && !all_active) {
    int active = 0, waiting = 0;
    for (const v1::RunStatus& r : sup_->Observe(&version)) {
      active += r.phase() == v1::Task::ACTIVE;
      waiting += r.phase() == v1::Task::STARTING && r.pid() == 0;
    }
    seen_midway = active > 0 && waiting > 0;
    all_active = active == kRuns;
    if (!seen_midway && !all_active) version = sup_->WaitForChange(version, 60'000);
  }
  ASSERT_TRUE(seen_midway);
  // Stopping now: what was started is stopped, the rest never starts.
  sup_->SetDesired({});
  EXPECT_TRUE(Eventually([&] { return sup_->Observe().empty(); }));
  int started = 0;
  for (const auto& r : runs) started += std::filesystem::exists(RunDirOf(r.run_id()) + "/stdout");
  EXPECT_GT(started, 0);
  EXPECT_LT(started, kRuns);
}

// At-most-once runs (issue #11) live under the machine's lease from the
// master: they start only while it is valid, their shim stops them once it
// runs out -- also while no agent runs -- and they start again (not before)
// when a poll renews it.
TEST_F(SupervisorTest, AtMostOnceRunsStartStopAndStartAgainWithTheLease) {
  sup_ = New();
  v1::TaskRun run = MakeRun("once", {"sleep", "1000"}, v1::RestartPolicy::NEVER);
  run.set_at_most_once(true);
  run.set_grace_period_ms(500);
  auto message_has = [](const std::string& text) {
    return [text](const std::optional<v1::RunStatus>& s) { return s && absl::StrContains(s->message(), text); };
  };
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "once", message_has("no lease from the master yet"));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::STARTING);
  EXPECT_EQ(s->pid(), 0);

  sup_->RenewLease(0, 600'000);
  EXPECT_TRUE(sup_->LeaseValid());
  s = WaitFor(*sup_, "once", IsActive);
  ASSERT_TRUE(s);
  const pid_t first = static_cast<pid_t>(s->pid());
  absl::StatusOr<TaskPidRecord> pids = ReadTaskPidFile(RunDirOf("once"));
  ASSERT_TRUE(pids.ok());
  EXPECT_TRUE(absl::StrContains(Slurp(absl::StrCat("/proc/", pids->shim.pid, "/cmdline")), sup_->LeasePath()))
      << "the shim was not told of the lease";

  // The master's last acknowledged contact was 2 s ago, and the lease 2.1 s.
  sup_->RenewLease(2000, 2100);
  s = WaitFor(*sup_, "once", [](const std::optional<v1::RunStatus>& s) {
    return s && s->phase() == v1::Task::BACKOFF && s->pid() == 0;
  });
  ASSERT_TRUE(s);
  EXPECT_FALSE(Alive(first));
  EXPECT_TRUE(absl::StrContains(s->message(), "lease expired: no contact with the master for")) << s->message();
  EXPECT_FALSE(s->terminal()) << "not the task's failure, whatever its restart policy";
  EXPECT_FALSE(sup_->LeaseValid());
  // Not started again while the lease is out (the loop has caught up once
  // a marker run behind it is active).
  Barrier(*sup_, {run});
  s = Find(*sup_, "once");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::BACKOFF);
  EXPECT_EQ(s->pid(), 0);

  sup_->RenewLease(0, 600'000);
  s = WaitFor(*sup_, "once", IsActive);
  ASSERT_TRUE(s);
  EXPECT_NE(s->pid(), first);
  EXPECT_EQ(s->restarts(), 1);
}

// The agent is down when the lease runs out: the shim stops the task on its
// own, and the next agent neither restarts it nor loses why it ended until
// a poll renews the lease.
TEST_F(SupervisorTest, AnAtMostOnceTaskStopsWhileNoAgentRunsAndWaitsForALease) {
  sup_ = New();
  v1::TaskRun run = MakeRun("once", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  run.set_at_most_once(true);
  run.set_grace_period_ms(500);
  sup_->RenewLease(0, 600'000);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, "once", IsActive);
  ASSERT_TRUE(s);
  const pid_t task = static_cast<pid_t>(s->pid());
  sup_->RenewLease(0, 300);
  sup_.reset();  // the agent dies; its lease runs out 300 ms later
  ASSERT_TRUE(Eventually([&] { return ReadExitFile(RunDirOf("once")).ok(); }));
  EXPECT_FALSE(Alive(task));

  sup_ = New();
  EXPECT_FALSE(sup_->LeaseValid()) << "the lease is read back from ROOT/lease";
  Barrier(*sup_, {run});
  s = Find(*sup_, "once");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::BACKOFF);
  EXPECT_EQ(s->pid(), 0);
  EXPECT_TRUE(absl::StrContains(s->message(), "lease expired")) << s->message();
  sup_->RenewLease(0, 600'000);
  s = WaitFor(*sup_, "once", IsActive);
  ASSERT_TRUE(s);
  EXPECT_NE(s->pid(), task);

  // A new agent takes over a valid lease as it is: the task runs on.
  const pid_t second = static_cast<pid_t>(s->pid());
  sup_.reset();
  sup_ = New();
  EXPECT_TRUE(sup_->LeaseValid());
  Barrier(*sup_, {run});
  s = Find(*sup_, "once");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid(), second);
  EXPECT_TRUE(NoSignalPending(second));
}

}  // namespace
}  // namespace herd::agent
