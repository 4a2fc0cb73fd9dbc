// herd exec through the real herd binary against a real master and agent:
// the command runs in the task's cgroups, pid and uts namespaces and as its
// user, its output comes back and its exit code is herd's; errors people act
// on (unknown job, task not running, agent unreachable) are one line; a
// task's packages reach it, from a file and over https from a server whose
// certificate the cell issued.
#include <gtest/gtest.h>
#include <pwd.h>

#include <fstream>
#include <iterator>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"
#include "pki/pki.h"
#include "testing/http_server.h"

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

  // A package archive made here holding bin/hello.txt = `text`: its path
  // and digest.
  std::pair<std::string, std::string> MakeArchive(const std::string& name, const std::string& text) {
    harness::Archive a = harness::MakeArchive(cell_.dir(), name, text);
    return {a.path, a.sha256};
  }

  // Runs a job with one package from `url` and checks the task sees it.
  void RunWithPackage(const std::string& job, const std::string& sha, const std::string& url,
                      const std::string& text) {
    SubmitAndWait(job + ".yaml",
                  absl::StrCat("name: ", job, "\nuser: alice\npriority: production\ncommand: [\"sleep\", \"3600\"]\n"
                               "resources: {cpu: 100m, memory: 32Mi}\n"
                               "packages:\n  - {name: hello, sha256: ", sha, ", url: \"", url, "\"}\n"),
                  job + "/0");
    RunResult r = cell_.Herd({"exec", job + "/0", "--", "/bin/sh", "-c", "cat $HERD_PACKAGE_HELLO/bin/hello.txt"});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(r.out, text);
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
  auto [tar, sha] = MakeArchive("pkg", "hello from a package\n");
  RunWithPackage("pkg", sha, tar, "hello from a package\n");
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

TEST_F(ExecTest, PackagesOverHttpsFromAServerTheCellCertified) {
  // The package server's certificate comes from the cell's CA: the agent
  // trusts it through its own credential's CA, with nothing configured.
  auto [tar, sha] = MakeArchive("tls", "hello over https\n");
  absl::StatusOr<pki::Authority> ca = pki::LoadAuthority(cell_.CaDir());
  ASSERT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<pki::Credential> cert = pki::IssueCredential(
      *ca, pki::Subject{pki::Role::kMachine, "package-server"}, time(nullptr), 3600, "IP:127.0.0.1");
  ASSERT_TRUE(cert.ok()) << cert.status();
  std::ifstream in(tar, std::ios::binary);
  auto body = std::make_shared<const std::string>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  testing::HttpServer server(testing::ServeBytes("hello.tar", body),
                             testing::HttpServer::Tls{cert->cert_pem, cert->key_pem});
  RunWithPackage("tls", sha, server.Url("hello.tar"), "hello over https\n");
  EXPECT_EQ(server.request_count(), 1);
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
