// Issue #35 item 4: machines join with a token (herd token create, herd
// agent --join TOKEN --master ADDR --ca-hash sha256:HEX), on a real cell:
// the agent makes its key, checks the master's CA against the pinned hash
// before it sends the token, gets a machine credential and runs tasks.
// Tokens expire, are used up, listed, revoked and audited, and never make a
// credential for a name that is already someone else's.
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"
#include "herd/v1/api.grpc.pb.h"
#include "pki/pki.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Child;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

class JoinTest : public ::testing::Test {
 protected:
  JoinTest() : cell_(harness::TenantCellOptions()) {}
  void SetUp() override { ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails(); }

  // herd token create as the admin.
  v1::CreateJoinTokenResponse Create(const std::vector<std::string>& flags = {}) {
    std::vector<std::string> args = {"token", "create", "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    RunResult r = cell_.HerdAs("root", args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    absl::StatusOr<v1::CreateJoinTokenResponse> resp = harness::ParseJsonAs<v1::CreateJoinTokenResponse>(r.out);
    EXPECT_TRUE(resp.ok()) << resp.status() << ": " << r.out;
    return resp.ok() ? *resp : v1::CreateJoinTokenResponse();
  }
  v1::ListJoinTokensResponse List() {
    RunResult r = cell_.HerdAs("root", {"token", "list", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    absl::StatusOr<v1::ListJoinTokensResponse> resp = harness::ParseJsonAs<v1::ListJoinTokensResponse>(r.out);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : v1::ListJoinTokensResponse();
  }
  // `herd agent --join` as machine `name`, with no credential of its own.
  std::unique_ptr<Child> Joiner(const std::string& name, const std::string& token, const std::string& ca_hash) {
    const std::string root = cell_.dir().Sub("joined/" + name);
    cell_.TrackRoot(root);  // its tasks go with the cell's
    // (No containers: what is tested here is the credential.)
    auto child = Child::Spawn(name,
                              {harness::HerdBinary(),
                               "agent",
                               "--master",
                               cell_.master_address(),
                               "--join",
                               token,
                               "--ca-hash",
                               ca_hash,
                               "--name",
                               name,
                               "--root",
                               root,
                               "--listen",
                               "127.0.0.1:0",
                               "--capacity",
                               "cpu=1,memory=1Gi",
                               "--task-uid-file",
                               cell_.dir().Sub("task-uids"),
                               "--cgroup-root",
                               "none"},
                              cell_.dir().Sub("logs/" + name + ".log"));
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? std::move(*child) : nullptr;
  }
  // The agent exits on its own; its log.
  std::string Refused(Child& c) {
    std::optional<int> st = c.Wait(60s);
    EXPECT_TRUE(st.has_value()) << "the agent did not give up";
    if (st) EXPECT_NE(*st, 0);
    return harness::ReadFileOrEmpty(c.log_path());
  }
  std::string TokenId(const v1::CreateJoinTokenResponse& t) { return t.token().substr(0, t.token().find('.')); }

  Cell cell_;
};

TEST_F(JoinTest, AMachineJoinsWithATokenAndRunsTasks) {
  v1::CreateJoinTokenResponse t = Create({"--ttl", "10m", "--uses", "1", "--description", "rack 4"});
  ASSERT_EQ(t.token().size(), 6u + 1 + 16) << t.token();
  ASSERT_TRUE(absl::StartsWith(t.ca_hash(), "sha256:")) << t.ca_hash();
  // The hash is the CA's public key's, as kubeadm pins it.
  absl::StatusOr<pki::Authority> ca = pki::LoadAuthority(cell_.CaDir());
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(t.ca_hash(), *pki::PublicKeyHash(ca->cert_pem));

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Child> j1 = Joiner("j1", t.token(), t.ca_hash());
  ASSERT_NE(j1, nullptr);
  ASSERT_TRUE(Eventually(
      [&] {
        auto m = cell_.Machine("j1");
        return m.ok() && m->state() == v1::Machine::UP;
      },
      60s))
      << harness::ReadFileOrEmpty(j1->log_path());
  std::printf("MEASURE herd agent --join to the machine UP: %.0f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  struct stat st {};
  ASSERT_EQ(stat(cell_.dir().Sub("joined/j1/credentials.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<pki::Credential> cred = pki::LoadCredential(cell_.dir().Sub("joined/j1/credentials.pem"));
  ASSERT_TRUE(cred.ok()) << cred.status();
  EXPECT_EQ(cred->info.subject.role, pki::Role::kMachine);
  EXPECT_EQ(cred->info.subject.name, "j1");

  RunResult r = cell_.Herd({"submit", cell_.WriteSpec("web.yaml",
                                                      "name: web\nuser: alice\ncommand: [\"sleep\", "
                                                      "\"600\"]\nresources: {cpu: 10m, memory: 16Mi}\n")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  cell_.WaitRunning("alice/web", 1);

  v1::ListJoinTokensResponse list = List();
  ASSERT_EQ(list.tokens_size(), 1);
  EXPECT_EQ(list.tokens(0).id(), TokenId(t));
  ASSERT_EQ(list.tokens(0).machines_size(), 1);
  EXPECT_EQ(list.tokens(0).machines(0), "j1");
  EXPECT_EQ(list.tokens(0).description(), "rack 4");
  EXPECT_TRUE(list.tokens(0).secret_sha256().empty()) << "the list shows the secret's hash";

  // Used up: a second machine is refused.
  const auto t1 = std::chrono::steady_clock::now();
  std::unique_ptr<Child> j2 = Joiner("j2", t.token(), t.ca_hash());
  EXPECT_TRUE(absl::StrContains(Refused(*j2), "is used up")) << harness::ReadFileOrEmpty(j2->log_path());
  std::printf("MEASURE a refused join, to the agent's exit: %.0f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
  EXPECT_TRUE(absl::IsNotFound(cell_.Machine("j2").status()));

  // Restarted, the agent keeps its credential (the token is not asked again).
  j1->Kill();
  std::unique_ptr<Child> again = Joiner("j1", t.token(), t.ca_hash());
  // (The log is j1's, appended to: only what follows the new start counts.)
  auto since_restart = [&] {
    const std::string log = harness::ReadFileOrEmpty(again->log_path());
    const size_t banner = log.rfind("==== harness: starting");
    return banner == std::string::npos ? log : log.substr(banner);
  };
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(since_restart(), " listening on "); }, 30s)) << since_restart();
  EXPECT_FALSE(absl::StrContains(since_restart(), "joined the cell")) << since_restart();
}

TEST_F(JoinTest, TheTokenIsSentOnlyToAMasterWithThePinnedCa) {
  v1::CreateJoinTokenResponse t = Create();
  absl::StatusOr<pki::Authority> other = pki::CreateAuthority("elsewhere", absl::ToUnixSeconds(absl::Now()), 3600);
  ASSERT_TRUE(other.ok()) << other.status();
  const std::string wrong = *pki::PublicKeyHash(other->cert_pem);
  std::unique_ptr<Child> j = Joiner("j3", t.token(), wrong);
  const std::string log = Refused(*j);
  EXPECT_TRUE(absl::StrContains(log, "presents a CA whose key hash is")) << log;
  EXPECT_TRUE(absl::StrContains(log, "the token was not sent")) << log;
  // Nothing reached the master: no join was even tried.
  EXPECT_EQ(List().tokens(0).machines_size(), 0);
  EXPECT_FALSE(absl::StrContains(harness::ReadFileOrEmpty(cell_.dir().Sub("master/audit.log")), "join-machine"));
}

TEST_F(JoinTest, RevokedExpiredAndTakenNamesAreRefusedAndAudited) {
  v1::CreateJoinTokenResponse t = Create();
  ASSERT_EQ(cell_.HerdAs("root", {"token", "revoke", TokenId(t)}).exit_code, 0);
  std::unique_ptr<Child> j = Joiner("j4", t.token(), t.ca_hash());
  EXPECT_TRUE(absl::StrContains(Refused(*j), "was revoked"));

  // A wrong secret says nothing more than that.
  v1::CreateJoinTokenResponse live = Create({"--uses", "5"});
  const std::string forged = TokenId(live) + ".aaaaaaaaaaaaaaaa";
  j = Joiner("j5", forged, live.ca_hash());
  EXPECT_TRUE(absl::StrContains(Refused(*j), "unknown join token, or a wrong secret"));

  // A name the cell knows (a machine started with a credential issued for
  // it) cannot be taken with a token, nor can one another token made.
  ASSERT_TRUE(cell_.StartAgent("m1", "r1").ok()) << cell_.LogTails();
  j = Joiner("m1", live.token(), live.ca_hash());
  EXPECT_TRUE(absl::StrContains(Refused(*j), "machine m1 is already in the cell"));

  // Only an admin makes tokens.
  RunResult bob = cell_.HerdAs("bob", {"token", "create"});
  EXPECT_EQ(bob.exit_code, 1) << bob.Describe();
  EXPECT_TRUE(absl::StrContains(bob.err, "may not")) << bob.err;

  // Every try is in the audit log, with its token and the refusal.
  const std::string audit = harness::ReadFileOrEmpty(cell_.dir().Sub("master/audit.log"));
  int joins = 0;
  bool revoked = false, forged_seen = false, taken = false;
  for (absl::string_view line : absl::StrSplit(audit, '\n', absl::SkipEmpty())) {
    nlohmann::json rec = nlohmann::json::parse(std::string(line), nullptr, false);
    if (rec.is_discarded() || rec.value("action", "") != "join-machine") continue;
    ++joins;
    EXPECT_FALSE(rec.value("allowed", true)) << line;
    const std::string why = rec.value("why", "");
    revoked |= absl::StrContains(why, "revoked") && rec.value("on", "") == "machine j4";
    forged_seen |= absl::StrContains(why, "wrong secret") && rec.value("on", "") == "machine j5";
    taken |= absl::StrContains(why, "already in the cell") && rec.value("on", "") == "machine m1";
  }
  EXPECT_EQ(joins, 3) << audit;
  EXPECT_TRUE(revoked && forged_seen && taken) << audit;
  EXPECT_TRUE(absl::StrContains(audit, "\"action\":\"manage-users\"")) << "token changes are not audited: " << audit;
}

// The master's port now takes callers without a certificate, for the two
// join calls only: every other call is refused, and Join itself wants a
// token.
TEST_F(JoinTest, WithoutACertificateOnlyTheJoinCallsAreAnswered) {
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_verify_server_certs(false);
  tls.set_check_call_host(false);
  tls.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  auto stub = v1::Herd::NewStub(grpc::CreateChannel(cell_.master_address(), grpc::experimental::TlsCredentials(tls)));
  auto call = [] {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + 10s);
    return ctx;
  };
  v1::ListJobsResponse jobs;
  grpc::Status st = stub->ListJobs(call().get(), v1::ListJobsRequest(), &jobs);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  v1::CreateJoinTokenResponse made;
  st = stub->CreateJoinToken(call().get(), v1::CreateJoinTokenRequest(), &made);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  v1::GetJoinInfoResponse info;
  st = stub->GetJoinInfo(call().get(), v1::GetJoinInfoRequest(), &info);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(absl::StrContains(info.ca_pem(), "BEGIN CERTIFICATE"));
  v1::JoinRequest req;
  req.set_token("abcdef.0123456789abcdef");
  req.set_machine("sneaky");
  req.set_public_key_pem(pki::GenerateKey()->public_pem);
  v1::JoinResponse joined;
  st = stub->Join(call().get(), req, &joined);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_TRUE(joined.cert_pem().empty());
}

}  // namespace
}  // namespace herd
