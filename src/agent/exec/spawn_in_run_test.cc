// SpawnInRun / RunInRun with real tasks started by a Supervisor through
// herd-shim: the command lands in the task's cgroups (cgroups made by the
// test), its pid and uts namespaces, as its user, with its environment and
// working directory; exit codes and signals come back; a timeout kills it.
#include "agent/exec/spawn_in_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/runtime/shim_protocol.h"
#include "agent/supervisor/extension.h"
#include "agent/supervisor/testing.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

// Adds the shim options a test asks for to every attempt.
class ShimArgs : public Extension {
 public:
  absl::string_view name() const override { return "shim-args"; }
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override {
    std::lock_guard<std::mutex> l(mu);
    setup->shim_args.insert(setup->shim_args.end(), args.begin(), args.end());
    // The task enters its sandbox as itself (as IsolationExtension arranges).
    auto uid = std::find(args.begin(), args.end(), std::string(shim::kOptUid));
    if (uid != args.end() && uid + 1 != args.end()) {
      const uid_t id = static_cast<uid_t>(std::stoul(*(uid + 1)));
      if (chown(run.dir.Sandbox().c_str(), id, id) != 0) return absl::InternalError("chown sandbox");
    }
    return absl::OkStatus();
  }
  std::mutex mu;
  std::vector<std::string> args;
};


struct Output {
  std::string out, err;
  InRunResult result;
};

class SpawnInRunTest : public SupervisorFixture {
 protected:
  void Start(const v1::TaskRun& run) {
    Supervisor::Options opts;
    opts.extensions.push_back(ext_);
    sup_ = New(opts);
    ASSERT_TRUE(sup_);
    sup_->SetDesired({run});
    ASSERT_TRUE(WaitFor(*sup_, run.run_id(), IsActive));
    absl::StatusOr<ProcessId> task = sup_->TaskOf(run.run_id());
    ASSERT_TRUE(task.ok()) << task.status();
    task_ = *task;
  }

  Output Exec(std::vector<std::string> argv, int64_t timeout_ms = 10'000, std::map<std::string, std::string> env = {}) {
    InRunOptions o;
    o.task = task_;
    o.argv = std::move(argv);
    o.env = std::move(env);
    Output out;
    absl::StatusOr<InRunResult> r = RunInRun(o, timeout_ms, [&](bool is_stderr, absl::string_view data) {
      (is_stderr ? out.err : out.out).append(data.data(), data.size());
      return true;
    });
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) out.result = *r;
    return out;
  }

  std::shared_ptr<ShimArgs> ext_ = std::make_shared<ShimArgs>();
  ProcessId task_;
};

TEST_F(SpawnInRunTest, ExitCodeEnvironmentAndWorkingDirectoryAreTheTasks) {
  v1::TaskRun run = MakeRun("exec.plain", {"sleep", "1000"});
  (*run.mutable_env())["GREETING"] = "hello";
  Start(run);
  Output o = Exec({"/bin/sh", "-c", "echo $GREETING $HERD_RUN_ID $EXTRA; pwd; echo oops >&2; exit 3"}, 10'000,
                  {{"EXTRA", "more"}});
  EXPECT_TRUE(o.result.exited);
  EXPECT_EQ(o.result.exit_code, 3);
  EXPECT_EQ(o.out, absl::StrCat("hello exec.plain more\n", RunDirOf("exec.plain"), "/sandbox\n"));
  EXPECT_EQ(o.err, "oops\n");

  o = Exec({"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_FALSE(o.result.exited);
  EXPECT_EQ(o.result.signal, SIGKILL);

  o = Exec({"no-such-command-xyz"});
  EXPECT_EQ(o.result.exit_code, shim::kEnterNotFoundExit);
  EXPECT_TRUE(absl::StrContains(o.err, "no-such-command-xyz")) << o.err;
}

TEST_F(SpawnInRunTest, TimeoutKillsTheCommandAndWhatItStarted) {
  Start(MakeRun("exec.timeout", {"sleep", "1000"}));
  // Would run for 1000 s; the 300 ms timeout ends it (had it not, this
  // test would wait 1000 s, far beyond any load's slowness, and time out).
  Output o = Exec({"/bin/sh", "-c", "sleep 1000 & echo $! > bg.pid; wait"}, 300);
  EXPECT_TRUE(o.result.timed_out);
  EXPECT_EQ(o.result.signal, SIGKILL);
  pid_t bg = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(Slurp(RunDirOf("exec.timeout") + "/sandbox/bg.pid")), &bg));
  EXPECT_TRUE(Eventually([&] { return !Alive(bg); }));
}

TEST(SpawnInRun, TaskNotRunningIsFailedPrecondition) {
  InRunOptions o;
  o.task = ProcessId{getpid(), 12345};  // our pid, a wrong start time
  o.argv = {"true"};
  absl::StatusOr<InRunProcess> p = SpawnInRun(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(p.status())) << p.status();
}

// Cgroups (v1: one per hierarchy; v2: one) made for the test and removed after.
class TestCgroups {
 public:
  TestCgroups() {
    const std::string name = absl::StrCat("herd-exec-test-", getpid());
    if (std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) {
      dirs_.push_back("/sys/fs/cgroup/" + name);
    } else {
      for (const char* h : {"pids", "cpu", "memory"}) {
        if (std::filesystem::exists(absl::StrCat("/sys/fs/cgroup/", h, "/cgroup.procs"))) {
          dirs_.push_back(absl::StrCat("/sys/fs/cgroup/", h, "/", name));
        }
      }
    }
    for (const std::string& d : dirs_) std::filesystem::create_directory(d);
  }
  ~TestCgroups() {
    for (const std::string& d : dirs_) {
      Eventually([&] { return rmdir(d.c_str()) == 0 || errno != EBUSY; });
    }
  }
  std::vector<std::string> ShimArgs() const {
    std::vector<std::string> out;
    for (const std::string& d : dirs_) out.insert(out.end(), {shim::kOptCgroup, d + "/cgroup.procs"});
    return out;
  }
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  std::vector<std::string> dirs_;
};

TEST_F(SpawnInRunTest, LandsInTheTasksCgroupsPidNamespaceAndUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  TestCgroups cgroups;
  ASSERT_FALSE(cgroups.dirs().empty());
  {
    std::lock_guard<std::mutex> l(ext_->mu);
    ext_->args = cgroups.ShimArgs();
    ext_->args.insert(ext_->args.end(), {shim::kOptNamespaces, shim::kOptHostname, "exec-test-host",
                                         shim::kOptUid, "65534", shim::kOptGid, "65534"});
  }
  v1::TaskRun run = MakeRun("exec.isolated", {"sleep", "1000"});
  run.set_grace_period_ms(100);  // pid 1 of its namespace: SIGTERM does not end sleep
  Start(run);
  const std::string task_cgroup = Slurp(absl::StrCat("/proc/", task_.pid, "/cgroup"));
  for (const std::string& d : cgroups.dirs()) {
    EXPECT_TRUE(absl::StrContains(task_cgroup, d.substr(d.rfind('/')))) << task_cgroup;
  }
  Output o = Exec({"/bin/sh", "-c", "cat /proc/self/cgroup; echo pid=$$ host=$(hostname) uid=$(id -u) gid=$(id -g); "
                                    "tr '\\0' ' ' < /proc/1/cmdline; echo"});
  ASSERT_TRUE(o.result.exited) << o.err;
  ASSERT_EQ(o.result.exit_code, 0) << o.err;
  std::vector<std::string> lines = absl::StrSplit(o.out, '\n');
  // Every hierarchy of the task, the same cgroup.
  std::string exec_cgroup;
  for (const std::string& l : lines) {
    if (absl::StrContains(l, ":/") && !absl::StartsWith(l, "pid=")) absl::StrAppend(&exec_cgroup, l, "\n");
  }
  EXPECT_EQ(exec_cgroup, task_cgroup);
  EXPECT_TRUE(absl::StrContains(o.out, "host=exec-test-host uid=65534 gid=65534")) << o.out;
  // In the task's pid namespace: pid 1 is the task.
  EXPECT_TRUE(absl::StrContains(o.out, "sleep 1000")) << o.out;
  EXPECT_FALSE(absl::StrContains(o.out, absl::StrCat("pid=", getpid())));
  for (const std::string& l : lines) {
    int pid = 0;
    if (absl::StartsWith(l, "pid=") && absl::SimpleAtoi(l.substr(4, l.find(' ') - 4), &pid)) {
      EXPECT_LT(pid, 100) << "expected a small pid inside the task's namespace: " << l;
    }
  }
  sup_->SetDesired({});
  WaitFor(*sup_, run.run_id(), IsGone);
}

}  // namespace
}  // namespace herd::agent
