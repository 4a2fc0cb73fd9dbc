// The master's access API: grants that let a user exec into or read the
// logs of a task on its machine, and user credentials signed by the cell's
// CA (herd user add). Every call asks the Authorizer first.
//
// An agent serves a user's exec or log read only with a grant: a short
// statement "USER may ACTION run RUN on MACHINE until T" signed with the
// master's key, which the agent checks against the cell's CA. So the master
// alone decides who may touch a task, agents need no copy of the policy,
// and a grant is useless to anyone but the user it names (the agent checks
// it against the certificate of the connection presenting it).
#pragma once

#include "absl/status/statusor.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"
#include "pki/grant.h"

namespace herd::master {

// How long a grant may be used to start an exec or a log read (the stream
// then lasts as long as it lasts; agents end it when its user is revoked).
using pki::kGrantValidMs;

class AccessApi {
 public:
  explicit AccessApi(const ApiContext& ctx) : ctx_(ctx) {}

  // kExecTask or kReadLogs on the task's job, then a grant for its current
  // (or last) run. FAILED_PRECONDITION if this master has no credential to
  // sign with; NOT_FOUND if the task never ran.
  absl::StatusOr<v1::GrantAccessResponse> GrantAccess(const Principal& who, const v1::GrantAccessRequest& req);
  // kManageUsers; signs the request's public key for user NAME (admin if
  // asked). FAILED_PRECONDITION if this master holds no CA key.
  absl::StatusOr<v1::IssueCredentialResponse> IssueCredential(const Principal& who,
                                                              const v1::IssueCredentialRequest& req);
  // kManageUsers; grants or takes away capabilities, or revokes every
  // credential of the user issued until now (UserSet).
  absl::StatusOr<v1::UpdateUserResponse> UpdateUser(const Principal& who, const v1::UpdateUserRequest& req);
  // kReadMetrics on the cell: may `who` scrape this master's /metrics.
  absl::Status ReadMetrics(const Principal& who);
  // kQueryHistory on the cell: may `who` run herd query on the history.
  absl::Status QueryHistory(const Principal& who);
  // kListAlerts on the cell: may `who` list the alarms (herd alerts).
  absl::Status ListAlerts(const Principal& who);
  // kOpenWebUi on the cell: may `who` have a login link for the web UI (herd
  // ui). Each page then asks for what it shows, as the gRPC reads do.
  absl::Status OpenWebUi(const Principal& who);

 private:
  const ApiContext& ctx_;
};

}  // namespace herd::master
