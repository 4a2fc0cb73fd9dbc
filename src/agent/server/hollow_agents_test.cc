// Hollow agents (herd bench cell) over real gRPC and TLS: several machines'
// identities on one port, each reached only as itself (the handshake picks
// the certificate by the name the master asks for), only the master may
// poll, and a poll hands runs to that machine's hollow runtime.
#include "agent/server/hollow_agents.h"

#include <gtest/gtest.h>

#include <time.h>

#include "herd/v1/agent.grpc.pb.h"
#include "rpc/rpc.h"
#include "absl/strings/str_cat.h"
#include "testing/eventually.h"

namespace herd::agent {
namespace {

class HollowAgentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = pki::CreateAuthority("test", time(nullptr), 3600);
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto master = pki::IssueCredential(ca_, rpc::MasterIdentity(), time(nullptr), 3600);
    ASSERT_TRUE(master.ok());
    master_ = *master;
    HollowOptions o;
    o.agents = 3;
    o.agents_per_port = 2;  // hollow-0, hollow-1 on one port; hollow-2 on another
    o.contact_threads = 1;
    o.master = "127.0.0.1:1";  // nobody: registration keeps failing, polls still work
    auto h = HollowAgents::Start(o, ca_);
    ASSERT_TRUE(h.ok()) << h.status();
    hollow_ = std::move(*h);
  }

  grpc::Status Poll(const std::string& port, const std::string& machine, const pki::Credential& as,
                    v1::PollResponse* resp, int runs = 0) {
    auto stub = v1::Agent::NewStub(rpc::Channel(port, as, rpc::MachineIdentity(machine)));
    v1::PollRequest req;
    req.set_machine(machine);
    req.set_revision(7);
    for (int i = 0; i < runs; ++i) {
      v1::TaskRun* r = req.add_desired();
      r->set_run_id(absl::StrCat(machine, ".r", i));
      r->mutable_ref()->set_job("alice/j");
      r->mutable_ref()->set_index(i);
    }
    auto ctx = rpc::Context("", 10'000);
    return stub->Poll(ctx.get(), req, resp);
  }

  pki::Authority ca_;
  pki::Credential master_;
  std::unique_ptr<HollowAgents> hollow_;
};

TEST_F(HollowAgentsTest, EachMachineIsReachedAsItselfOnItsPort) {
  ASSERT_EQ(hollow_->ports().size(), 2u);
  for (const auto& [port, machine] : std::vector<std::pair<std::string, std::string>>{
           {hollow_->ports()[0], "hollow-0"}, {hollow_->ports()[0], "hollow-1"}, {hollow_->ports()[1], "hollow-2"}}) {
    v1::PollResponse resp;
    grpc::Status st = Poll(port, machine, master_, &resp);
    ASSERT_TRUE(st.ok()) << machine << ": " << st.error_message();
    EXPECT_EQ(resp.machine(), machine);
    EXPECT_EQ(resp.desired_revision(), 7);
  }
  // hollow-2's port does not hold hollow-0's certificate: the handshake fails.
  v1::PollResponse resp;
  grpc::Status st = Poll(hollow_->ports()[1], "hollow-0", master_, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
}

TEST_F(HollowAgentsTest, OnlyTheMasterPollsAndRunsStartInTheHollowRuntime) {
  auto user = pki::IssueCredential(ca_, pki::Subject{pki::Role::kUser, "mallory"}, time(nullptr), 3600);
  ASSERT_TRUE(user.ok());
  v1::PollResponse resp;
  EXPECT_EQ(Poll(hollow_->ports()[0], "hollow-1", *user, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Poll(hollow_->ports()[0], "hollow-1", master_, &resp, 5).ok());
  EXPECT_TRUE(herd::testing::Eventually([&] { return hollow_->starts() == 5 && hollow_->live() == 5; }));
}

}  // namespace
}  // namespace herd::agent
