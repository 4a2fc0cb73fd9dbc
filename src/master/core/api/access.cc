#include "master/core/api/access.h"

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/status.h"

#include <set>

namespace herd::master {

namespace {

Action ActionOf(v1::AccessAction a) { return a == v1::EXEC ? Action::kExecTask : Action::kReadLogs; }

}  // namespace

absl::StatusOr<v1::GrantAccessResponse> AccessApi::GrantAccess(const Principal& who,
                                                               const v1::GrantAccessRequest& req) {
  if (req.action() != v1::EXEC && req.action() != v1::READ_LOGS) {
    return absl::InvalidArgumentError("action: must be EXEC or READ_LOGS");
  }
  v1::GrantAccessResponse resp;
  HERD_RETURN_IF_ERROR(ctx_.committer->Read([&](const cell::CellState& s) -> absl::Status {
    HERD_ASSIGN_OR_RETURN(std::string id, ctx_.ResolveJob(s, who, req.job()));
    const cell::Job* j = s.FindJob(id);
    HERD_RETURN_IF_ERROR(ctx_.Authorize(who, ActionOf(req.action()), JobResource(*j)));
    const cell::Task* t = s.FindTask(id, req.index());
    if (t == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("job ", id, " has no task ", req.index(), " (it has ", j->tasks.size(), ")"));
    }
    v1::GetTaskResponse* r = resp.mutable_task();
    *r->mutable_task() = t->ToProto();
    std::string machine = t->machine() ? t->machine()->name() : t->last_machine();
    if (const cell::Machine* m = s.FindMachine(machine)) *r->mutable_machine() = m->ToProto();
    if (t->incarnation() > 0) r->set_run_id(RunId(id, t->index(), t->incarnation()));
    return absl::OkStatus();
  }));
  const v1::GetTaskResponse& task = resp.task();
  if (task.run_id().empty() || task.machine().name().empty()) return resp;  // nothing to open; the CLI says why
  const std::optional<pki::Credential>& self = ctx_.options->credential;
  if (!self.has_value()) {
    return absl::FailedPreconditionError("this master has no credential to sign access grants with");
  }
  HERD_ASSIGN_OR_RETURN(*resp.mutable_grant(),
                        pki::SignGrant(*self, who.acting_user.empty() ? who.name : who.acting_user,
                                       task.machine().name(), task.run_id(), req.action(),
                                       ctx_.clock->NowMs() + kGrantValidMs));
  return resp;
}

absl::StatusOr<v1::IssueCredentialResponse> AccessApi::IssueCredential(const Principal& who,
                                                                       const v1::IssueCredentialRequest& req) {
  HERD_RETURN_IF_ERROR(ValidateUserName(req.name()));
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kManageUsers, Resource{"", req.name(), ""}));
  const std::optional<pki::Authority>& ca = ctx_.options->authority;
  if (!ca.has_value()) {
    return absl::FailedPreconditionError(
        "this master holds no CA key (herd master --ca DIR); issue the credential where the CA is, with "
        "'herd ca issue --ca DIR --user NAME'");
  }
  if (req.public_key_pem().size() > 4096) return absl::InvalidArgumentError("public_key_pem: longer than 4096 bytes");
  constexpr int64_t kYear = 365ll * 24 * 3600;
  int64_t valid_s = req.valid_seconds() == 0 ? kYear : req.valid_seconds();
  if (valid_s < 60 || valid_s > 10 * kYear) {
    return absl::InvalidArgumentError("valid_seconds: must be between 60 and ten years");
  }
  pki::Subject subject{pki::Role::kUser, req.name(), req.admin()};
  absl::StatusOr<std::string> cert =
      pki::Issue(*ca, req.public_key_pem(), subject, ctx_.clock->NowMs() / 1000, valid_s);
  if (!cert.ok()) return absl::InvalidArgumentError(absl::StrCat("public_key_pem: ", cert.status().message()));
  v1::IssueCredentialResponse resp;
  resp.set_cert_pem(std::move(*cert));
  resp.set_ca_pem(ca->cert_pem);
  return resp;
}

absl::StatusOr<v1::UpdateUserResponse> AccessApi::UpdateUser(const Principal& who,
                                                             const v1::UpdateUserRequest& req) {
  HERD_RETURN_IF_ERROR(ValidateUserName(req.name()));
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kManageUsers, Resource{"", req.name(), ""}));
  for (const auto* list : {&req.grant(), &req.ungrant()}) {
    for (const std::string& c : *list) {
      if (absl::Status st = ParseCapability(c).status(); !st.ok()) return st;
    }
  }
  v1::User user;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    user = v1::User();
    if (const v1::User* have = s.FindUser(req.name())) user = *have;
    user.set_name(req.name());
    std::set<std::string> caps(user.capabilities().begin(), user.capabilities().end());
    for (const std::string& c : req.grant()) caps.insert(c);
    for (const std::string& c : req.ungrant()) caps.erase(c);
    user.clear_capabilities();
    for (const std::string& c : caps) user.add_capabilities(c);
    if (req.revoke_credentials()) user.set_revoked_before_s(ctx_.clock->NowMs() / 1000 + 1);
    v1::Mutation m;
    *m.mutable_user_set()->mutable_user() = user;
    return std::vector<v1::Mutation>{m};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  v1::UpdateUserResponse r;
  *r.mutable_user() = user;
  r.set_revision(rev);
  return r;
}

absl::Status AccessApi::ReadMetrics(const Principal& who) {
  return ctx_.Authorize(who, Action::kReadMetrics, Resource{});
}

absl::Status AccessApi::QueryHistory(const Principal& who) {
  return ctx_.Authorize(who, Action::kQueryHistory, Resource{});
}

absl::Status AccessApi::ListAlerts(const Principal& who) {
  return ctx_.Authorize(who, Action::kListAlerts, Resource{});
}

absl::Status AccessApi::OpenWebUi(const Principal& who) {
  return ctx_.Authorize(who, Action::kOpenWebUi, Resource{});
}

}  // namespace herd::master
