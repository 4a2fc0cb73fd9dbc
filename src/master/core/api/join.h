// Machines that join with a token (docs/operating.md, "Adding machines"):
// an admin makes a join token (herd token create), and a new machine
// presents it once, with a public key of its own, to get a machine
// credential signed by the cell's CA (herd agent --join), as kubeadm's
// bootstrap tokens. Tokens expire, may be limited to a number of machines,
// are listed and revoked, and live in the cell state (a new leader honours
// them). A token never makes a credential for a machine the cell already
// knows or another token already made one for.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"

namespace herd::master {

class JoinApi {
 public:
  // Live (not expired, not revoked) tokens the cell keeps at most.
  static constexpr int kMaxLiveTokens = 1000;

  explicit JoinApi(const ApiContext& ctx) : ctx_(ctx) {}

  // kManageUsers (issuing credentials). The token is in the answer only.
  absl::StatusOr<v1::CreateJoinTokenResponse> CreateJoinToken(const Principal& who,
                                                              const v1::CreateJoinTokenRequest& req);
  absl::StatusOr<v1::ListJoinTokensResponse> ListJoinTokens(const Principal& who, const v1::ListJoinTokensRequest& req);
  absl::StatusOr<v1::RevokeJoinTokenResponse> RevokeJoinToken(const Principal& who,
                                                              const v1::RevokeJoinTokenRequest& req);
  // Anyone: the CA's certificate (public), for the joiner to check against
  // the hash it was given.
  absl::StatusOr<v1::GetJoinInfoResponse> GetJoinInfo();
  // No identity: the token is the proof. `peer` (the caller's address) is
  // for the audit log. UNAUTHENTICATED for a token that does not work
  // (saying why only to a caller that knows its secret), ALREADY_EXISTS for
  // a machine name that is taken.
  absl::StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& req, const std::string& peer);

 private:
  const ApiContext& ctx_;
};

}  // namespace herd::master
