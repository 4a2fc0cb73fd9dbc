// IsolationExtension (with PackagesExtension first, as the agent orders
// them), with real tasks: own namespaces (pid 1, the task's host name), a
// user (nobody), an unknown user, and a root built from a package holding
// only a static probe.
#include "agent/packages/isolation_extension.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/packages/packages_extension.h"
#include "agent/packages/test_util.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

class IsolationTest : public SupervisorFixture {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    SupervisorFixture::SetUp();
    PackagesExtension::Options o;
    o.cache.dir = root_ + "/packages";
    o.cache.local_dirs = {root_};
    auto packages = PackagesExtension::Create(o);
    ASSERT_TRUE(packages.ok()) << packages.status();
    Supervisor::Options opts;
    opts.extensions = {*packages, std::make_shared<IsolationExtension>()};
    sup_ = New(opts);
  }
  void TearDown() override {
    if (geteuid() == 0) SupervisorFixture::TearDown();
  }

  std::string WaitForOutput(const std::string& path) {
    std::string out;
    Eventually([&] { return !(out = Slurp(path)).empty() && out.back() == '\n'; });
    return out;
  }
};

TEST(TaskHostname, IndexJobUser) {
  v1::TaskRun r = MakeRun("alice.web.3.1", {"x"});
  EXPECT_EQ(TaskHostname(r), "3.test.alice");
  r.mutable_ref()->set_job("Bob/My_Job");
  EXPECT_EQ(TaskHostname(r), "3.my-job.bob");
}

TEST_F(IsolationTest, OwnNamespacesTheTaskIsPidOneWithItsOwnHostName) {
  v1::TaskRun r = Sh("iso.ns", "echo pid=$$ host=$(hostname) procs=$(ls /proc | grep -c '^[0-9]'); exec sleep 1000");
  r.mutable_isolation()->set_namespaces(true);
  r.set_grace_period_ms(100);
  sup_->SetDesired({r});
  ASSERT_TRUE(WaitFor(*sup_, r.run_id(), IsActive));
  std::string out = WaitForOutput(RunDirOf(r.run_id()) + "/stdout");
  // pid 1; only its own processes in /proc (the shell and ls, grep).
  EXPECT_TRUE(absl::StartsWith(out, "pid=1 host=3.test.alice procs=")) << out;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  EXPECT_STRNE(host, "3.test.alice") << "the machine's host name must not change";
}

TEST_F(IsolationTest, RunsAsTheUserAndOwnsItsSandbox) {
  struct passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  v1::TaskRun r = Sh("iso.user", "echo uid=$(id -u) gid=$(id -g); touch mine && echo wrote; exec sleep 1000");
  r.mutable_isolation()->set_user("nobody");
  r.set_workdir("work/dir");
  sup_->SetDesired({r});
  ASSERT_TRUE(WaitFor(*sup_, r.run_id(), IsActive));
  std::string out = WaitForOutput(RunDirOf(r.run_id()) + "/stdout");
  out = WaitFor(*sup_, r.run_id(), IsActive) ? Slurp(RunDirOf(r.run_id()) + "/stdout") : out;
  Eventually([&] { return absl::StrContains(out = Slurp(RunDirOf(r.run_id()) + "/stdout"), "wrote"); });
  EXPECT_EQ(out, absl::StrCat("uid=", nobody->pw_uid, " gid=", nobody->pw_gid, "\nwrote\n"));
  struct stat st;
  ASSERT_EQ(stat((RunDirOf(r.run_id()) + "/sandbox/work/dir/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->pw_uid);
}

TEST_F(IsolationTest, UnknownUserEndsTheRunForGood) {
  v1::TaskRun r = MakeRun("iso.nouser", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  r.mutable_isolation()->set_user("no-such-user-herd");
  sup_->SetDesired({r});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, r.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StartsWith(s->message(), "user no-such-user-herd does not exist on this machine")) << s->message();
  EXPECT_EQ(s->restarts(), 0);
}

TEST_F(IsolationTest, RootBuiltFromPackages) {
  // Two layers: the probe, then data (a later package wins on conflicts).
  std::string probe_tar = root_ + "/probe.tar";
  std::string probe_sha = MakeTar(probe_tar, {{"bin/probe", "@" + BinDir() + "/herd-root-probe"}, {"data.txt", "old"}});
  std::string data_tar = root_ + "/data.tar";
  std::string data_sha = MakeTar(data_tar, {{"data.txt", "layered"}});
  v1::TaskRun r = MakeRun("iso.root", {"/bin/probe", "sleep"});
  *r.add_packages() = MakePackage("probe", probe_sha, probe_tar);
  *r.add_packages() = MakePackage("data", data_sha, data_tar);
  r.mutable_isolation()->set_root_from_packages(true);
  r.set_grace_period_ms(100);
  sup_->SetDesired({r});
  ASSERT_TRUE(WaitFor(*sup_, r.run_id(), IsActive));
  // The probe wrote into its working directory, the sandbox, as the host sees it.
  std::string out = WaitForOutput(RunDirOf(r.run_id()) + "/sandbox/probe.out");
  EXPECT_EQ(out, "pid=1 host=3.test.alice cwd=/sandbox root=bin,data.txt,dev,proc,sandbox,tmp data=layered\n");
  EXPECT_EQ(Slurp(RunDirOf(r.run_id()) + "/stdout"), out);
  // Released: the root goes with the run.
  sup_->SetDesired({});
  WaitFor(*sup_, r.run_id(), IsGone);
  Eventually([&] { return !std::filesystem::exists(RunDirOf(r.run_id()) + "/root"); });
  EXPECT_FALSE(std::filesystem::exists(RunDirOf(r.run_id()) + "/root"));
}

TEST_F(IsolationTest, RootWithoutPackagesIsInvalid) {
  v1::TaskRun r = MakeRun("iso.noroot", {"sleep", "1000"});
  r.mutable_isolation()->set_root_from_packages(true);
  sup_->SetDesired({r});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, r.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), "needs packages")) << s->message();
}

}  // namespace
}  // namespace herd::agent
