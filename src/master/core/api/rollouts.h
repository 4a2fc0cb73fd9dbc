// The master's rollout API (docs/updates.md): roll a job back to an earlier
// version, pause or resume its rolling update, and list its version history.
// Every call asks the Authorizer first and changes nothing if refused; what
// changes goes through the log (JobUpdated, RolloutChanged), and the
// rollout controller (rollout/rollout_controller.h) does the rest.
#pragma once

#include "absl/status/statusor.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"

namespace herd::master {

class RolloutsApi {
 public:
  explicit RolloutsApi(const ApiContext& ctx) : ctx_(ctx) {}

  // The job's spec goes back to an earlier kept version's, as a new
  // version (kRollbackJob), rolled with the job's strategy.
  absl::StatusOr<v1::RollbackResponse> Rollback(const Principal& who, const v1::RollbackRequest& req);
  // Pauses or resumes (and promotes the canaries of) the job's rollout
  // (kControlRollout); a failed one stays failed.
  absl::StatusOr<v1::SetRolloutResponse> SetRollout(const Principal& who, const v1::SetRolloutRequest& req);
  // The job's kept versions (kReadJob; env values hidden without the
  // right to the job's secrets).
  absl::StatusOr<v1::HistoryResponse> History(const Principal& who, const v1::HistoryRequest& req);

 private:
  const ApiContext& ctx_;
};

}  // namespace herd::master
