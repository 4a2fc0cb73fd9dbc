// Helpers for tests that drive a Supervisor with real processes.
#pragma once

#include <sys/stat.h>

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/runtime/process.h"
#include "agent/supervisor/supervisor.h"
#include "base/clock.h"
#include "base/log.h"
#include "testing/eventually.h"

namespace herd::agent::testing {

using ::herd::testing::Eventually;

using Mode = v1::RestartPolicy::Mode;

inline int64_t NowMs() { return SteadyNowMs(); }

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Pids of every live (non-zombie) process in process group `pgid`.
inline std::vector<pid_t> GroupMembers(pid_t pgid) {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc");
  while (struct dirent* e = readdir(dir)) {
    pid_t pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::string stat = Slurp(absl::StrCat("/proc/", pid, "/stat"));
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');
    // f[0] = state, f[1] = ppid, f[2] = pgrp.
    pid_t pgrp;
    if (f.size() > 2 && f[0] != "Z" && absl::SimpleAtoi(f[2], &pgrp) && pgrp == pgid) out.push_back(pid);
  }
  closedir(dir);
  return out;
}

inline bool Alive(pid_t pid) {
  absl::StatusOr<ProcStat> st = ReadProcStat(pid);
  return st.ok() && st->state != 'Z';
}

// True if `pid` is alive and has no signal pending. A signal sent to a
// process is pending until it runs again, which on a busy machine may be a
// while: "alive" alone cannot show that nobody sent it a fatal signal, but
// "alive with nothing pending" can, without waiting.
inline bool NoSignalPending(pid_t pid) {
  if (!Alive(pid)) return false;
  std::istringstream status(Slurp(absl::StrCat("/proc/", pid, "/status")));
  bool seen = false;
  for (std::string line; std::getline(status, line);) {
    if (!absl::StartsWith(line, "SigPnd:") && !absl::StartsWith(line, "ShdPnd:")) continue;
    seen = true;
    uint64_t mask = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line.substr(7)), &mask) || mask != 0) return false;
  }
  return seen && Alive(pid);
}

inline v1::TaskRun MakeRun(const std::string& id, std::vector<std::string> argv, Mode mode = v1::RestartPolicy::NEVER) {
  v1::TaskRun run;
  run.set_run_id(id);
  run.mutable_ref()->set_job("alice/test");
  run.mutable_ref()->set_index(3);
  run.mutable_ref()->set_incarnation(1);
  for (std::string& a : argv) run.add_argv(std::move(a));
  run.mutable_restart()->set_mode(mode);
  run.mutable_restart()->set_backoff_initial_ms(20);
  run.mutable_restart()->set_backoff_max_ms(80);
  run.set_grace_period_ms(2000);
  return run;
}

inline v1::TaskRun Sh(const std::string& id, const std::string& script, Mode mode = v1::RestartPolicy::NEVER) {
  return MakeRun(id, {"/bin/sh", "-c", script}, mode);
}

// Waits until the supervisor's loop has carried out everything asked of it
// before this call (recovery, stops, extensions' kills): it adds a new marker
// run to `desired` and waits for it to be ACTIVE, which the loop does in
// order after earlier work. For tests that check that something was NOT
// done. Markers are production priority (never chosen for eviction) and
// stay desired until the next SetDesired leaves them out.
inline void Barrier(Supervisor& sup, std::vector<v1::TaskRun> desired) {
  static int markers = 0;
  const std::string marker = absl::StrCat("barrier.", ++markers);
  desired.push_back(MakeRun(marker, {"sleep", "1000"}));
  desired.back().set_priority(200);
  sup.SetDesired(desired);
  uint64_t version = 0;
  const int64_t deadline = NowMs() + 30'000;
  while (NowMs() < deadline) {
    for (const v1::RunStatus& s : sup.Observe(&version)) {
      if (s.run_id() == marker && s.phase() == v1::Task::ACTIVE) return;
    }
    sup.WaitForChange(version, 200);
  }
  ADD_FAILURE() << "the supervisor's loop did not start marker run " << marker;
}

inline std::optional<v1::RunStatus> Find(const Supervisor& sup, const std::string& id) {
  for (v1::RunStatus& s : sup.Observe()) {
    if (s.run_id() == id) return s;
  }
  return std::nullopt;
}

// Waits until `pred` holds for the run's status (nullopt if the run is
// unknown); returns the last status seen. The timeout only bounds a failure.
inline std::optional<v1::RunStatus> WaitFor(const Supervisor& sup, const std::string& id,
                                     const std::function<bool(const std::optional<v1::RunStatus>&)>& pred,
                                     int64_t timeout_ms = 30'000) {
  int64_t deadline = NowMs() + timeout_ms;
  uint64_t version = 0;
  while (true) {
    std::optional<v1::RunStatus> found;
    for (v1::RunStatus& s : sup.Observe(&version)) {
      if (s.run_id() == id) found = s;
    }
    if (pred(found)) return found;
    int64_t left = deadline - NowMs();
    if (left <= 0) {
      ADD_FAILURE() << "timed out waiting on run " << id << "; last: " << (found ? found->DebugString() : "absent");
      return found;
    }
    sup.WaitForChange(version, std::min<int64_t>(left, 200));
  }
}

// Waits until a task's script created `file` in its sandbox (to know, say,
// that it has installed its signal traps: ACTIVE only means it has exec'd).
inline void WaitForFile(const std::string& path) {
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(path); })) << path;
}

inline auto IsActive = [](const std::optional<v1::RunStatus>& s) { return s && s->phase() == v1::Task::ACTIVE; };
inline auto IsTerminal = [](const std::optional<v1::RunStatus>& s) { return s && s->terminal(); };
inline auto IsGone = [](const std::optional<v1::RunStatus>& s) { return !s.has_value(); };

// Each test gets a fresh root directory; TearDown stops and reaps whatever
// a test left running.
class SupervisorFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { InitLogging("supervisor_test", "", "info"); }

  void SetUp() override {
    char tmpl[] = "/tmp/herd-supervisor-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // As an agent's root is: tasks under their own uids pass through it to
    // their sandboxes (mkdtemp made it 0700).
    chmod(root_.c_str(), 0711);
  }

  void TearDown() override {
    sup_.reset();
    // Kill whatever a test left running, then let a Supervisor reap it.
    for (const auto& entry : std::filesystem::directory_iterator(root_ + "/runs")) {
      absl::StatusOr<TaskPidRecord> pids = ReadTaskPidFile(entry.path().string());
      if (pids.ok() && IsRunning(pids->task)) (void)SignalProcessGroup(pids->task.pid, SIGKILL);
    }
    std::unique_ptr<Supervisor> sup = New();
    sup->SetDesired({});
    int64_t deadline = NowMs() + 10'000;
    while (!sup->Observe().empty() && NowMs() < deadline) sup->WaitForChange(0, 100);
    EXPECT_TRUE(sup->Observe().empty());
    sup.reset();
    std::filesystem::remove_all(root_);
  }

  std::unique_ptr<Supervisor> New(int64_t retention_ms = 24 * 3600 * 1000, int64_t gc_interval_ms = 600'000) {
    Supervisor::Options opts;
    opts.log_retention_ms = retention_ms;
    opts.gc_interval_ms = gc_interval_ms;
    return New(opts);
  }

  std::unique_ptr<Supervisor> New(Supervisor::Options opts) {
    opts.root_dir = root_;
    absl::StatusOr<std::unique_ptr<Supervisor>> sup = Supervisor::Create(opts);
    EXPECT_TRUE(sup.ok()) << sup.status();
    return sup.ok() ? *std::move(sup) : nullptr;
  }

  std::string RunDirOf(const std::string& id) const { return root_ + "/runs/" + id; }

  std::string root_;
  // For tests whose supervisor runs on virtual time (Options.clock): timers
  // (backoff, the once-a-second re-check of waiting runs) fire only when the
  // test advances it. Declared before sup_, so it outlives it.
  ManualClock manual_clock_;
  std::unique_ptr<Supervisor> sup_;
};

}  // namespace herd::agent::testing
