// herd exec through the real herd binary against a real master and agent:
// the command runs in the task's cgroups, pid and uts namespaces and as its
// user, its output comes back and its exit code is herd's; errors people act
// on (unknown job, task not running, agent unreachable) are one line.
#include <gtest/gtest.h>
#include <pwd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

class ExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "namespaces and users need root";
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(1);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  // Submits `yaml` and waits until `herd exec JOB/0 -- true` works.
  void SubmitAndWait(const std::string& file, const std::string& yaml, const std::string& task) {
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec(file, yaml)});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    ASSERT_TRUE(Eventually([&] { return cell_.Herd({"exec", task, "--", "true"}).exit_code == 0; }, 20s))
        << cell_.Herd({"exec", task, "--", "true"}).Describe() << "\n" << cell_.LogTails();
  }

  Cell cell_;
};

TEST_F(ExecTest, RunsInTheTasksCgroupsNamespacesAndUserAndReturnsItsExitCode) {
  SubmitAndWait("web.yaml",
                "name: web\nuser: alice\npriority: production\ncommand: [\"sleep\", \"3600\"]\n"
                "resources: {cpu: 100m, memory: 32Mi}\nisolation: {namespaces: true, user: nobody}\n",
                "web/0");
  // pid 1 of the task's pid namespace is the task itself.
  RunResult r = cell_.Herd({"exec", "web/0", "--", "/bin/sh", "-c",
                            "echo pid=$$ uid=$(id -u) host=$(hostname) task=$(cat /proc/1/comm); "
                            "cat /proc/1/cgroup > /tmp/herd-exec-task-$$; cat /proc/self/cgroup | "
                            "cmp -s - /tmp/herd-exec-task-$$ && echo same-cgroups; rm -f /tmp/herd-exec-task-$$; "
                            "cat /proc/self/cgroup"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  struct passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat(" uid=", nobody->pw_uid, " host=0.web.alice task=sleep\n")))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "same-cgroups\n")) << r.out;
  int pid = 0;
  ASSERT_TRUE(absl::StartsWith(r.out, "pid="));
  ASSERT_TRUE(absl::SimpleAtoi(r.out.substr(4, r.out.find(' ') - 4), &pid)) << r.out;
  EXPECT_LT(pid, 100) << "not in the task's pid namespace: " << r.out;
  // With containers on, the task (so the command) has its own cgroup.
  std::printf("exec cgroups:\n%s", r.out.substr(r.out.find("same-cgroups")).c_str());

  RunResult code = cell_.Herd({"exec", "web/0", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 7"});
  EXPECT_EQ(code.exit_code, 7) << code.Describe();
  EXPECT_EQ(code.out, "out\n");
  EXPECT_EQ(code.err, "err\n");

  RunResult missing = cell_.Herd({"exec", "web/0", "--", "no-such-command-herd"});
  EXPECT_EQ(missing.exit_code, 127) << missing.Describe();
  EXPECT_TRUE(absl::StrContains(missing.err, "no-such-command-herd")) << missing.err;
}

TEST_F(ExecTest, PackagesReachTheTaskAndTheMachinesCache) {
  // A package archive made here, named by its digest in the spec.
  std::string src = cell_.WriteSpec("pkg/bin/hello.txt", "hello from a package\n");
  std::string dir = src.substr(0, src.rfind("/bin/"));
  std::string tar = dir + ".tar";
  RunResult made = harness::Run({"/usr/bin/tar", "-cf", tar, "-C", dir, "."});
  ASSERT_EQ(made.exit_code, 0) << made.Describe();
  RunResult sum = harness::Run({"/usr/bin/sha256sum", tar});
  ASSERT_EQ(sum.exit_code, 0) << sum.Describe();
  std::string sha = sum.out.substr(0, 64);
  SubmitAndWait("pkg.yaml",
                absl::StrCat("name: pkg\nuser: alice\npriority: production\ncommand: [\"sleep\", \"3600\"]\n"
                             "resources: {cpu: 100m, memory: 32Mi}\n"
                             "packages:\n  - {name: hello, sha256: ", sha, ", url: ", tar, "}\n"),
                "pkg/0");
  RunResult r = cell_.Herd({"exec", "pkg/0", "--", "/bin/sh", "-c", "cat $HERD_PACKAGE_HELLO/bin/hello.txt"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "hello from a package\n");
  // The agent's cache holds it, for the scheduler's package locality.
  EXPECT_TRUE(Eventually(
      [&] {
        auto m = cell_.Machine("m1");
        if (!m.ok()) return false;
        std::string text = m->DebugString();
        return absl::StrContains(text, sha);
      },
      10s))
      << cell_.Machine("m1")->DebugString();
}

TEST_F(ExecTest, ErrorsAreOneLine) {
  RunResult unknown = cell_.Herd({"exec", "nope/0", "--", "true"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(unknown.err, "herd: ")) << unknown.Describe();
  EXPECT_TRUE(absl::StrContains(unknown.err, "nope")) << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;

  // Far too big for the machine: never runs.
  RunResult sub = cell_.Herd({"submit", cell_.WriteSpec("big.yaml",
                                                        "name: big\nuser: alice\ncommand: [\"sleep\", \"3600\"]\n"
                                                        "resources: {cpu: 500, memory: 32Mi}\n")});
  ASSERT_EQ(sub.exit_code, 0) << sub.Describe();
  RunResult pending = cell_.Herd({"exec", "big/0", "--", "true"});
  EXPECT_NE(pending.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(pending.err, "big/0 has not run yet")) << pending.Describe();

  // The agent of a running task is down.
  SubmitAndWait("short.yaml",
                "name: short\nuser: alice\npriority: production\ncommand: [\"sleep\", \"3600\"]\n"
                "resources: {cpu: 100m, memory: 32Mi}\n",
                "short/0");
  cell_.StopAgent("m1");
  RunResult down = cell_.Herd({"exec", "short/0", "--", "true"});
  EXPECT_NE(down.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(down.err, "cannot reach the agent of machine m1")) << down.Describe();
  EXPECT_EQ(std::count(down.err.begin(), down.err.end(), '\n'), 1) << down.err;
}

}  // namespace
}  // namespace herd
