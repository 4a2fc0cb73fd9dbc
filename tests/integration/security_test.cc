// The attacks of issue #10 against a real cell (master and agents as
// processes, mutual TLS on every port), each of which succeeded before the
// cell had identities: every one must now be refused, with one line naming
// what is missing, and change nothing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"
#include "pki/pki.h"
#include "rpc/rpc.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

int Lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n')) + (!s.empty() && s.back() != '\n');
}

std::string Spec(const std::string& name, const std::string& user, const std::string& extra = "") {
  return absl::StrCat("name: ", name, "\nuser: ", user, "\npriority: production\ncommand: [\"sh\", \"-c\", "
                      "\"echo started; exec sleep 3600\"]\nresources: {cpu: 100m, memory: 16Mi}\n", extra);
}

class SecurityTest : public ::testing::Test {
 protected:
  static Cell::Options CellOptions() {
    Cell::Options o;
    o.user = "alice";
    o.admins = {"root"};  // alice and bob are plain users; root is the admin
    return o;
  }
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    ASSERT_TRUE(cell_.StartAgents(2).ok()) << cell_.LogTails();
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec("web.yaml", Spec("web", "alice",
                                                                         "env: {DB_PASSWORD: hunter2}\n"))});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    ASSERT_TRUE(Eventually([&] { return cell_.Herd({"logs", "web/0"}).out == "started\n"; }, 30s))
        << cell_.Herd({"logs", "web/0"}).Describe() << cell_.LogTails();
  }

  // A refusal as the interface promises: exit 1, one line naming the
  // missing permission.
  static void ExpectRefused(const RunResult& r, const std::string& permission) {
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_EQ(Lines(r.err), 1) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("'", permission, "'"))) << r.err;
  }

  v1::Task::State WebState() {
    auto t = cell_.Tasks("alice/web");
    return t.ok() && t->tasks_size() == 1 ? t->tasks(0).state() : v1::Task::STATE_UNSPECIFIED;
  }

  pki::Credential Load(const std::string& path) {
    auto c = pki::LoadCredential(path);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : pki::Credential{};
  }

  // The agent of `machine`: its address as the master lists it.
  std::string AgentAddress(const std::string& machine) {
    auto m = cell_.Machine(machine);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? m->address() : "";
  }

  Cell cell_{CellOptions()};
};

TEST_F(SecurityTest, UsersChangeOnlyTheirOwnJobs) {
  // bob kills alice's job: refused, and it runs on.
  ExpectRefused(cell_.HerdAs("bob", {"kill", "alice/web"}), "admin");
  EXPECT_EQ(WebState(), v1::Task::RUNNING);
  // bob names alice with --user: he may not act on her behalf.
  ExpectRefused(cell_.HerdAs("bob", {"--user", "alice", "kill", "alice/web"}), "run-as");
  EXPECT_EQ(WebState(), v1::Task::RUNNING);
  // bob submits a job as alice's.
  ExpectRefused(cell_.HerdAs("bob", {"submit", cell_.WriteSpec("evil.yaml", Spec("web2", "alice"))}), "admin");
  EXPECT_FALSE(cell_.HerdAs("root", {"status", "alice/web2"}).exit_code == 0);
  // mallory sets alice's quota.
  ExpectRefused(cell_.HerdAs("mallory", {"quota", "set", "alice", "production", "cpu=1m,memory=1Mi"}), "quota-admin");
  auto quotas = cell_.HerdJson<v1::ListQuotasResponse>({"quota"});
  ASSERT_TRUE(quotas.ok()) << quotas.status();
  for (const v1::QuotaUsage& q : quotas->quotas()) EXPECT_TRUE(q.unlimited()) << quotas->ShortDebugString();
  // bob execs into, or reads the logs of, alice's task.
  ExpectRefused(cell_.HerdAs("bob", {"exec", "alice/web/0", "--", "head", "-2", "/etc/shadow"}), "exec-any");
  ExpectRefused(cell_.HerdAs("bob", {"logs", "alice/web/0"}), "read-all");
  // bob exports the checkpoint (every job's env).
  ExpectRefused(cell_.HerdAs("bob", {"checkpoint", "export", cell_.dir().Sub("stolen.ckpt")}), "read-all");
  // What alice may do, she still can; an admin may do it to her job.
  EXPECT_EQ(cell_.Herd({"logs", "web/0"}).out, "started\n");
  RunResult kill = cell_.HerdAs("root", {"kill", "alice/web"});
  EXPECT_EQ(kill.exit_code, 0) << kill.Describe();
  // Each of those decisions is in the audit log, refused or allowed.
  std::ifstream audit(cell_.dir().Sub("master/audit.log"));
  std::stringstream text;
  text << audit.rdbuf();
  for (const char* want : {R"("action":"kill-job","allowed":false)", R"("on":"job alice/web")",
                           R"("action":"exec","allowed":false)", R"("action":"set-quota","allowed":false)",
                           R"("user":"root")"}) {
    EXPECT_TRUE(absl::StrContains(text.str(), want)) << want << " not in the audit log:\n" << text.str();
  }
}

TEST_F(SecurityTest, OthersSeeAJobsStatusButNotItsSecrets) {
  auto bob = cell_.HerdAs("bob", {"status", "alice/web", "--json"});
  ASSERT_EQ(bob.exit_code, 0) << bob.Describe();
  EXPECT_FALSE(absl::StrContains(bob.out, "hunter2")) << bob.out;
  EXPECT_TRUE(absl::StrContains(bob.out, "DB_PASSWORD")) << bob.out;
  auto alice = cell_.Herd({"status", "web", "--json"});
  ASSERT_EQ(alice.exit_code, 0) << alice.Describe();
  EXPECT_TRUE(absl::StrContains(alice.out, "hunter2")) << alice.out;
  auto jobs = cell_.HerdAs("bob", {"jobs", "--all", "--json"});
  EXPECT_FALSE(absl::StrContains(jobs.out, "hunter2")) << jobs.out;
}

TEST_F(SecurityTest, AnotherCellsOrNoCredentialGetsNowhere) {
  // A credential from another CA, with an admin's name.
  auto other = pki::CreateAuthority("other", time(nullptr), 3600);
  ASSERT_TRUE(other.ok());
  auto forged = pki::IssueCredential(*other, {pki::Role::kUser, "root", true}, time(nullptr), 3600);
  ASSERT_TRUE(forged.ok());
  const std::string path = cell_.dir().Sub("forged.pem");
  ASSERT_TRUE(pki::SaveCredential(path, *forged).ok());
  RunResult r = cell_.HerdWith(path, {"kill", "alice/web"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "TLS handshake")) << r.err;
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  // No credential at all.
  RunResult none = cell_.HerdWith(cell_.dir().Sub("missing.pem"), {"jobs"});
  EXPECT_EQ(none.exit_code, 1) << none.Describe();
  EXPECT_TRUE(absl::StrContains(none.err, "missing.pem")) << none.err;
  EXPECT_EQ(WebState(), v1::Task::RUNNING);
}

TEST_F(SecurityTest, PortsSpeakTlsAndRefuseClientsWithoutACertificate) {
  for (const std::string& addr : {cell_.master_address(), AgentAddress("m1")}) {
    // A TLS handshake with a certificate of the cell succeeds and shows the
    // server's, signed by the cell's CA. (The exit code is not looked at:
    // gRPC hangs up without a TLS close_notify when no HTTP/2 follows.)
    const std::string admin = cell_.UserCredential("root");
    RunResult ok = harness::Run({"/usr/bin/openssl", "s_client", "-connect", addr, "-cert", admin, "-key", admin,
                                 "-CAfile", cell_.CaDir() + "/ca.crt", "-verify_return_error", "-brief"},
                                20s);
    EXPECT_TRUE(absl::StrContains(ok.err, "CONNECTION ESTABLISHED")) << addr << ": " << ok.Describe();
    EXPECT_TRUE(absl::StrContains(ok.err, "Verification: OK")) << addr << ": " << ok.Describe();
    // ...and a gRPC client without one is refused: by the agent's handshake
    // (UNAVAILABLE); the master's port lets it in for the two join calls
    // only (herd agent --join), so there every other call is refused
    // UNAUTHENTICATED (join_integration_test).
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("master.herd");
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = Load(admin).ca_pem;
    auto stub = v1::Herd::NewStub(grpc::CreateCustomChannel(addr, grpc::SslCredentials(tls), args));
    v1::CellInfo info;
    auto ctx = rpc::Context("", 5000);
    grpc::Status st = stub->GetCell(ctx.get(), {}, &info);
    EXPECT_EQ(st.error_code(),
              addr == cell_.master_address() ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::UNAVAILABLE)
        << addr << ": " << st.error_message();
    // Plain text gets nothing either.
    auto plain = v1::Herd::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    auto ctx2 = rpc::Context("", 5000);
    st = plain->GetCell(ctx2.get(), {}, &info);
    EXPECT_FALSE(st.ok()) << addr;
  }
}

TEST_F(SecurityTest, AgentsObeyOnlyTheMaster) {
  const std::string m1 = AgentAddress("m1");
  ASSERT_FALSE(m1.empty());
  auto tasks = cell_.Tasks("alice/web");
  ASSERT_TRUE(tasks.ok());
  const std::string machine = tasks->tasks(0).machine();
  const std::string addr = AgentAddress(machine);
  // A user (even an admin) and another machine call the agent's Poll
  // directly: an empty desired list would stop every task there; one with
  // an argv would run it as root.
  for (const std::string& cred : {cell_.UserCredential("root"), cell_.MachineCredential(machine == "m1" ? "m2" : "m1")}) {
    auto stub = v1::Agent::NewStub(rpc::Channel(addr, Load(cred), rpc::MachineIdentity(machine)));
    v1::PollRequest poll;
    poll.set_machine(machine);
    v1::TaskRun* run = poll.add_desired();
    run->set_run_id("evil.run.0.1");
    run->add_argv("/bin/sh");
    run->add_argv("-c");
    run->add_argv("touch " + cell_.dir().Sub("pwned"));
    v1::PollResponse resp;
    auto ctx = rpc::Context("", 10'000);
    grpc::Status st = stub->Poll(ctx.get(), poll, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << cred << ": " << st.error_message();
    EXPECT_TRUE(absl::StrContains(st.error_message(), "only the master")) << st.error_message();
    // Exec and logs without the master's grant.
    v1::ExecRequest exec;
    exec.set_run_id(std::string(absl::StrCat("alice.web.0.", tasks->tasks(0).incarnation())));
    exec.add_argv("id");
    auto ectx = rpc::Context("", 10'000);
    auto reader = stub->Exec(ectx.get(), exec);
    v1::ExecOutput out;
    while (reader->Read(&out)) {
    }
    st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    EXPECT_TRUE(absl::StrContains(st.error_message(), "no grant")) << st.error_message();
  }
  EXPECT_FALSE(std::ifstream(cell_.dir().Sub("pwned")).good());
  EXPECT_EQ(WebState(), v1::Task::RUNNING);

  // A grant the master gave bob for his own task does not open alice's.
  ASSERT_EQ(cell_.HerdAs("bob", {"submit", cell_.WriteSpec("b.yaml", Spec("b", "bob"))}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return cell_.HerdAs("bob", {"logs", "b/0"}).out == "started\n"; }, 30s));
  auto bob_stub = v1::Herd::NewStub(rpc::Channel(cell_.master_address(), Load(cell_.UserCredential("bob")),
                                                 rpc::MasterIdentity()));
  v1::GrantAccessRequest greq;
  greq.set_job("bob/b");
  greq.set_action(v1::READ_LOGS);
  v1::GrantAccessResponse grant;
  auto gctx = rpc::Context("", 10'000);
  ASSERT_TRUE(bob_stub->GrantAccess(gctx.get(), greq, &grant).ok());
  const std::string bob_machine = grant.task().machine().name();
  auto agent = v1::Agent::NewStub(rpc::Channel(AgentAddress(bob_machine), Load(cell_.UserCredential("bob")),
                                               rpc::MachineIdentity(bob_machine)));
  for (const std::string& run : {grant.task().run_id(), std::string(absl::StrCat("alice.web.0.",
                                                                                 tasks->tasks(0).incarnation()))}) {
    v1::ReadLogsRequest lr;
    lr.set_run_id(run);
    *lr.mutable_grant() = grant.grant();
    auto lctx = rpc::Context("", 10'000);
    auto reader = agent->ReadLogs(lctx.get(), lr);
    std::string got;
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) got += chunk.data();
    grpc::Status st = reader->Finish();
    if (run == grant.task().run_id()) {
      EXPECT_TRUE(st.ok()) << st.error_message();
      EXPECT_EQ(got, "started\n");
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
      EXPECT_EQ(got, "");
    }
  }
}

TEST_F(SecurityTest, NoOneRegistersAsAnotherMachineOrPosesAsOne) {
  auto before = cell_.Machine("m1");
  ASSERT_TRUE(before.ok());
  // m2's credential, and a user's, registering "m1" with a fake address and
  // 64 CPUs.
  for (const std::string& cred : {cell_.MachineCredential("m2"), cell_.UserCredential("bob")}) {
    auto stub = v1::Herd::NewStub(rpc::Channel(cell_.master_address(), Load(cred), rpc::MasterIdentity()));
    v1::RegisterMachineRequest req;
    req.mutable_machine()->set_name("m1");
    req.mutable_machine()->set_address("127.0.0.1:1");
    req.mutable_machine()->mutable_capacity()->set_cpu_millis(64000);
    req.mutable_machine()->mutable_capacity()->set_memory_bytes(64ll << 30);
    v1::RegisterMachineResponse resp;
    auto ctx = rpc::Context("", 10'000);
    grpc::Status st = stub->RegisterMachine(ctx.get(), req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << cred << ": " << st.error_message();
  }
  auto after = cell_.Machine("m1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->address(), before->address());
  EXPECT_EQ(after->capacity().cpu_millis(), before->capacity().cpu_millis());
  // An agent started with another machine's credential refuses to start.
  RunResult wrong = harness::Run({harness::HerdBinary(), "agent", "--master", cell_.master_address(), "--name", "m1",
                                  "--credentials", cell_.MachineCredential("m2"), "--root", cell_.dir().Sub("rogue"),
                                  "--listen", "127.0.0.1:0"},
                                 30s);
  EXPECT_EQ(wrong.exit_code, 1) << wrong.Describe();
  EXPECT_TRUE(absl::StrContains(wrong.err, "is for machine m2")) << wrong.err;
  // Whoever listens at a machine's address gets nothing unless it holds
  // that machine's certificate: the master's channel to m1 pinned on m1
  // does not talk to m2's agent.
  auto master_cred = Load(cell_.dir().Sub("master/credentials.pem"));
  auto stub = v1::Agent::NewStub(rpc::Channel(AgentAddress("m2"), master_cred, rpc::MachineIdentity("m1")));
  v1::PollRequest poll;
  poll.set_machine("m1");
  v1::PollResponse resp;
  auto ctx = rpc::Context("", 10'000);
  grpc::Status st = stub->Poll(ctx.get(), poll, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
}

TEST_F(SecurityTest, TasksRunUnprivilegedAndRootIsACapability) {
  const std::string id = "name: who\nuser: alice\npriority: batch\ncommand: [\"sh\", \"-c\", \"id -u; exec sleep "
                         "3600\"]\nresources: {cpu: 10m, memory: 8Mi}\n";
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("who.yaml", id)}).exit_code, 0);
  std::string out;
  ASSERT_TRUE(Eventually([&] { return !(out = cell_.Herd({"logs", "who/0"}).out).empty(); }, 30s)) << cell_.LogTails();
  if (geteuid() == 0) {
    EXPECT_EQ(out, "200000\n") << "alice's first task on its machine runs as the first uid of the range";
  } else {
    EXPECT_EQ(out, absl::StrCat(geteuid(), "\n")) << "an agent that is not root runs tasks as itself";
  }
  // Asking for root, or another machine account, is a capability.
  const std::string as_root = "name: r\nuser: bob\npriority: batch\ncommand: [\"id\"]\nresources: {cpu: 10m, "
                              "memory: 8Mi}\nisolation: {user: root}\n";
  ExpectRefused(cell_.HerdAs("bob", {"submit", cell_.WriteSpec("r.yaml", as_root)}), "run-as-root");
  std::string as_nobody = as_root;
  as_nobody.replace(as_nobody.find("root"), 4, "nobody");
  ExpectRefused(cell_.HerdAs("bob", {"submit", cell_.WriteSpec("n.yaml", as_nobody)}), "run-as");
  RunResult admin = cell_.HerdAs("root", {"submit", cell_.WriteSpec("r.yaml", as_root)});
  EXPECT_EQ(admin.exit_code, 0) << admin.Describe();
}

TEST_F(SecurityTest, AdminsGrantCapabilitiesAndRevokeCredentials) {
  ExpectRefused(cell_.HerdAs("bob", {"logs", "alice/web/0"}), "read-all");
  ExpectRefused(cell_.HerdAs("bob", {"user", "grant", "bob", "read-all"}), "admin");
  RunResult grant = cell_.HerdAs("root", {"user", "grant", "bob", "read-all"});
  ASSERT_EQ(grant.exit_code, 0) << grant.Describe();
  EXPECT_TRUE(absl::StrContains(grant.out, "user bob: capabilities read-all")) << grant.out;
  EXPECT_EQ(cell_.HerdAs("bob", {"logs", "alice/web/0"}).out, "started\n");
  ExpectRefused(cell_.HerdAs("bob", {"kill", "alice/web"}), "admin");  // read-all is not more
  // Revoked: every credential bob holds stops working at once.
  RunResult revoke = cell_.HerdAs("root", {"user", "revoke", "bob"});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.Describe();
  RunResult after = cell_.HerdAs("bob", {"jobs"});
  EXPECT_EQ(after.exit_code, 1) << after.Describe();
  EXPECT_TRUE(absl::StrContains(after.err, "the credential of user bob")) << after.err;
  EXPECT_TRUE(absl::StrContains(after.err, "was revoked")) << after.err;
  // A new credential works again (and keeps the grant).
  const std::string fresh = cell_.dir().Sub("bob2.pem");
  // Revocation covers the second it was made in: a credential issued in a
  // later second works.
  ASSERT_TRUE(Eventually(
      [&] {
        return cell_.HerdAs("root", {"user", "add", "bob", "--out", fresh}).exit_code == 0 &&
               cell_.HerdWith(fresh, {"jobs"}).exit_code == 0;
      },
      10s));
  EXPECT_EQ(cell_.HerdWith(fresh, {"logs", "alice/web/0"}).out, "started\n");
}

TEST_F(SecurityTest, AnAdminIssuesUserCredentialsAndOnlyAnAdmin) {
  const std::string carol = cell_.dir().Sub("carol.pem");
  ExpectRefused(cell_.HerdAs("bob", {"user", "add", "carol", "--admin", "--out", carol}), "admin");
  EXPECT_FALSE(std::ifstream(carol).good());
  RunResult add = cell_.HerdAs("root", {"user", "add", "carol", "--out", carol});
  ASSERT_EQ(add.exit_code, 0) << add.Describe();
  EXPECT_TRUE(absl::StrContains(add.out, "user carol")) << add.out;
  // carol is herself, and only herself.
  RunResult sub = cell_.HerdWith(carol, {"submit", cell_.WriteSpec("c.yaml", Spec("c", "carol"))});
  EXPECT_EQ(sub.exit_code, 0) << sub.Describe();
  ExpectRefused(cell_.HerdWith(carol, {"kill", "alice/web"}), "admin");
}

}  // namespace
}  // namespace herd

namespace herd {
namespace {

// A user in a loop gets RESOURCE_EXHAUSTED with when to retry; others are
// served as before.
TEST(SecurityRateTest, AUserPastTheRateIsToldToWaitAndOthersAreServed) {
  Cell::Options o;
  o.master_flags = {"--user-rate", "0.5"};  // bursts of one request
  Cell cell(o);
  ASSERT_TRUE(cell.StartMaster().ok()) << cell.LogTails();
  int refused = 0;
  std::string err;
  for (int i = 0; i < 5; ++i) {
    RunResult r = cell.HerdAs("bob", {"jobs"});
    if (r.exit_code != 0) {
      ++refused;
      err = r.err;
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_TRUE(absl::StrContains(err, "user bob is sending more than 0.5 requests a second; retry in")) << err;
  EXPECT_EQ(Lines(err), 1) << err;
  RunResult carol = cell.HerdAs("carol", {"jobs"});
  EXPECT_EQ(carol.exit_code, 0) << carol.Describe();
}

}  // namespace
}  // namespace herd

namespace herd {
namespace {

// The input attacks, through the real CLI and straight over gRPC.
TEST_F(SecurityTest, InputsAreBoundedAndErrorsCarryNoOneElsesData) {
  // A package naming a host file: refused by the agent, no digest shown.
  const std::string pkg = "name: pkg\nuser: alice\npriority: batch\ncommand: [\"true\"]\nresources: {cpu: 10m, "
                          "memory: 8Mi}\npackages:\n  - {name: s, sha256: " + std::string(64, 'a') +
                          ", url: /etc/shadow}\n";
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("pkg.yaml", pkg)}).exit_code, 0);
  std::string status;
  ASSERT_TRUE(Eventually(
      [&] {
        status = cell_.Herd({"status", "pkg"}).out;
        return absl::StrContains(status, "local package files are allowed");
      },
      30s))
      << status;
  // Jsonnet reading a host file: refused by name, its text never shown.
  RunResult jn = cell_.Herd({"submit", cell_.WriteSpec("steal.jsonnet", "{ name: importstr '/etc/shadow' }\n")});
  EXPECT_EQ(jn.exit_code, 2) << jn.Describe();
  EXPECT_TRUE(absl::StrContains(jn.err, "imports are allowed only beside the spec")) << jn.err;
  EXPECT_FALSE(absl::StrContains(jn.err, "root:")) << jn.err;
  // Strict JSON, and a 10 KB name that is not echoed whole.
  RunResult comma = cell_.Herd({"submit", cell_.WriteSpec("c.json", "{\"name\": \"c\", \"user\": \"alice\", "
                                                                     "\"command\": [\"x\"], \"resources\": "
                                                                     "{\"cpu\": \"10m\", \"memory\": \"8Mi\"},}")});
  EXPECT_EQ(comma.exit_code, 2) << comma.Describe();
  EXPECT_TRUE(absl::StrContains(comma.err, "not valid JSON")) << comma.err;
  RunResult longname = cell_.Herd({"status", std::string(10'000, 'n')});
  EXPECT_EQ(longname.exit_code, 1) << longname.Describe();
  EXPECT_LT(longname.err.size(), 400u) << longname.err.size();
  // Straight to the API: a 1 MB env value is refused by validation, a 100 MB
  // request by the server's size limit; the master stays up for others.
  auto stub = v1::Herd::NewStub(rpc::Channel(cell_.master_address(), Load(cell_.UserCredential("bob")),
                                             rpc::MasterIdentity()));
  for (size_t size : {size_t{1} << 20, size_t{100} << 20}) {
    v1::SubmitRequest req;
    v1::JobSpec* s = req.add_jobs();
    s->set_name("big");
    s->set_user("bob");
    s->set_priority(100);
    s->set_task_count(1);
    s->mutable_task()->add_command("true");
    s->mutable_task()->mutable_resources()->set_cpu_millis(10);
    s->mutable_task()->mutable_resources()->set_memory_bytes(8 << 20);
    (*s->mutable_task()->mutable_env())["X"] = std::string(size, 'v');
    v1::SubmitResponse resp;
    auto ctx = rpc::Context("", 30'000);
    grpc::Status st = stub->Submit(ctx.get(), req, &resp);
    EXPECT_FALSE(st.ok()) << size;
    EXPECT_TRUE(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << size << ": " << st.error_code() << " " << st.error_message().substr(0, 200);
    EXPECT_LT(st.error_message().size(), 2000u);
  }
  EXPECT_EQ(cell_.Herd({"cell"}).exit_code, 0);
  EXPECT_EQ(WebState(), v1::Task::RUNNING);
}

}  // namespace
}  // namespace herd
