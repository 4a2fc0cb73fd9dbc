// CellPolicy and Identify: who may do what, from the credential on.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "master/core/admission/authorizer.h"
#include "master/core/admission/identity.h"

namespace herd::master {
namespace {

Resource Job(const std::string& owner) { return Resource{owner + "/web", owner, ""}; }

class CellPolicyTest : public ::testing::Test {
 protected:
  bool Allowed(const Principal& who, Action a, const Resource& on) { return policy_.Authorize(who, a, on).ok(); }
  CellPolicy policy_;
};

TEST_F(CellPolicyTest, UsersChangeOnlyTheirOwnJobs) {
  Principal alice = Principal::User("alice"), bob = Principal::User("bob");
  for (Action a : {Action::kSubmitJob, Action::kKillJob, Action::kScaleJob, Action::kRollbackJob,
                   Action::kControlRollout, Action::kExecTask, Action::kReadLogs, Action::kReadSecrets}) {
    EXPECT_TRUE(Allowed(alice, a, Job("alice"))) << ActionName(a);
    EXPECT_FALSE(Allowed(bob, a, Job("alice"))) << ActionName(a);
  }
  absl::Status st = policy_.Authorize(bob, Action::kKillJob, Job("alice"));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(st.message(), "user bob may not kill-job on job alice/web: it needs the permission 'admin'");
}

TEST_F(CellPolicyTest, EveryoneReadsStatusButNotSecretsLogsOrTheWholeCell) {
  Principal bob = Principal::User("bob");
  for (Action a : {Action::kReadJob, Action::kListJobs, Action::kListMachines, Action::kListQuotas, Action::kReadCell,
                   Action::kReadMetrics, Action::kQueryHistory, Action::kListAlerts, Action::kOpenWebUi,
                   Action::kResolveName}) {
    EXPECT_TRUE(Allowed(bob, a, Job("alice"))) << ActionName(a);
  }
  for (Action a : {Action::kWatch, Action::kExportCheckpoint}) {
    absl::Status st = policy_.Authorize(bob, a, Resource{});
    EXPECT_TRUE(absl::StrContains(st.message(), "'read-all'")) << st;
  }
}

TEST_F(CellPolicyTest, CapabilitiesGrantExactlyWhatTheyName) {
  auto with = [](Capability c) {
    Principal p = Principal::User("carol");
    p.capabilities = static_cast<uint32_t>(c);
    return p;
  };
  EXPECT_TRUE(Allowed(with(Capability::kQuotaAdmin), Action::kSetQuota, Resource{"", "alice", ""}));
  EXPECT_FALSE(Allowed(Principal::User("carol"), Action::kSetQuota, Resource{"", "carol", ""}));
  EXPECT_FALSE(Allowed(with(Capability::kQuotaAdmin), Action::kKillJob, Job("alice")));
  EXPECT_TRUE(Allowed(with(Capability::kExecAny), Action::kExecTask, Job("alice")));
  EXPECT_FALSE(Allowed(with(Capability::kExecAny), Action::kReadSecrets, Job("alice")));
  EXPECT_TRUE(Allowed(with(Capability::kReadAll), Action::kReadSecrets, Job("alice")));
  EXPECT_TRUE(Allowed(with(Capability::kReadAll), Action::kExportCheckpoint, Resource{}));
  EXPECT_FALSE(Allowed(with(Capability::kReadAll), Action::kExecTask, Job("alice")));
  // A machine account for one's tasks: run-as; root: run-as-root only.
  Resource nobody{"carol/j", "carol", "", "nobody"}, root{"carol/j", "carol", "", "root"};
  EXPECT_FALSE(Allowed(Principal::User("carol"), Action::kRunTaskAs, nobody));
  EXPECT_TRUE(Allowed(with(Capability::kRunAs), Action::kRunTaskAs, nobody));
  EXPECT_FALSE(Allowed(with(Capability::kRunAs), Action::kRunTaskAs, root));
  EXPECT_TRUE(Allowed(with(Capability::kRunAsRoot), Action::kRunTaskAs, root));
  EXPECT_FALSE(Allowed(with(Capability::kRunAs), Action::kRunTaskAs, Resource{"carol/j", "carol", "", "0"}));
  // Admin is everything a user can be given.
  Principal admin = Principal::Admin("root");
  for (int a = 0; a < static_cast<int>(Action::kCount); ++a) {
    // Only machines register, and ring their own doorbell.
    if (static_cast<Action>(a) == Action::kRegisterMachine || static_cast<Action>(a) == Action::kNotifyMachine) continue;
    EXPECT_TRUE(Allowed(admin, static_cast<Action>(a), Job("alice"))) << ActionName(static_cast<Action>(a));
  }
}

TEST_F(CellPolicyTest, AMachineOnlyRegistersItself) {
  Principal m1 = Principal::Machine("m1");
  EXPECT_TRUE(Allowed(m1, Action::kRegisterMachine, Resource{"", "", "m1"}));
  absl::Status st = policy_.Authorize(m1, Action::kRegisterMachine, Resource{"", "", "m2"});
  EXPECT_EQ(st.message(), "machine m1 may not register-machine on machine m2: it needs the permission 'machine:m2'");
  EXPECT_FALSE(Allowed(m1, Action::kSubmitJob, Job("m1")));
  EXPECT_FALSE(Allowed(m1, Action::kExportCheckpoint, Resource{}));
  EXPECT_FALSE(Allowed(m1, Action::kReadMetrics, Resource{}));
  EXPECT_FALSE(Allowed(m1, Action::kQueryHistory, Resource{}));
  // Nor does a user, an admin included, register as a machine.
  EXPECT_FALSE(Allowed(Principal::Admin("root"), Action::kRegisterMachine, Resource{"", "", "m1"}));
  EXPECT_TRUE(Allowed(m1, Action::kNotifyMachine, Resource{"", "", "m1"}));
  EXPECT_FALSE(Allowed(m1, Action::kNotifyMachine, Resource{"", "", "m2"}));
  EXPECT_FALSE(Allowed(Principal::User("bob"), Action::kNotifyMachine, Resource{"", "", "m1"}));
}

TEST_F(CellPolicyTest, SchedulersProposeAndReadButChangeNoJob) {
  Principal s = Principal::Scheduler("batch");
  EXPECT_TRUE(Allowed(s, Action::kPropose, Resource{}));
  EXPECT_TRUE(Allowed(s, Action::kWatch, Resource{}));
  EXPECT_FALSE(Allowed(s, Action::kKillJob, Job("alice")));
  EXPECT_FALSE(Allowed(s, Action::kSetQuota, Resource{"", "alice", ""}));
  EXPECT_FALSE(Allowed(Principal::User("alice"), Action::kPropose, Resource{}));
}

TEST(Identify, RolesBecomeKindsAndAdminIsACapability) {
  pki::CertInfo c;
  c.serial = "abc";
  c.subject = {pki::Role::kUser, "alice", true};
  auto p = Identify(c, "");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, Principal::Kind::kUser);
  EXPECT_EQ(p->name, "alice");
  EXPECT_TRUE(p->Has(Capability::kAdmin));
  EXPECT_TRUE(p->Has(Capability::kQuotaAdmin));  // admin implies every capability
  EXPECT_EQ(p->credential, "abc");
  c.subject = {pki::Role::kMachine, "m1", false};
  EXPECT_EQ(Identify(c, "")->kind, Principal::Kind::kMachine);
  c.subject = {pki::Role::kScheduler, "batch", false};
  EXPECT_EQ(Identify(c, "")->kind, Principal::Kind::kScheduler);
}

TEST(Identify, ActingAsAnotherUserNeedsRunAsAndCarriesOnlyThatUsersRights) {
  pki::CertInfo bob;
  bob.subject = {pki::Role::kUser, "bob", false};
  // --user naming nobody else is fine; naming someone else is not.
  EXPECT_TRUE(Identify(bob, "bob").ok());
  auto denied = Identify(bob, "alice");
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.status().message(), "user bob may not act as user alice: it needs the permission 'run-as'");

  pki::CertInfo root;
  root.subject = {pki::Role::kUser, "root", true};
  auto as = Identify(root, "alice");
  ASSERT_TRUE(as.ok());
  EXPECT_EQ(as->name, "alice");
  EXPECT_EQ(as->acting_user, "root");
  EXPECT_FALSE(as->Has(Capability::kAdmin));
  CellPolicy policy;
  EXPECT_TRUE(policy.Authorize(*as, Action::kKillJob, Job("alice")).ok());
  absl::Status st = policy.Authorize(*as, Action::kKillJob, Job("bob"));
  EXPECT_EQ(st.message(), "user root, acting as alice, may not kill-job on job bob/web: it needs the permission 'admin'");
}

TEST(Capabilities, NamesRoundTrip) {
  for (Capability c : kAllCapabilities) {
    auto back = ParseCapability(CapabilityName(c));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, c);
  }
  EXPECT_TRUE(absl::StrContains(ParseCapability("superuser").status().message(), "unknown capability 'superuser'"));
}

}  // namespace
}  // namespace herd::master
