#include "master/core/api/rollouts.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "cell/job_update.h"
#include "cell/rollout.h"
#include "master/core/admission/quota.h"

namespace herd::master {
namespace {

// A reason is kept in the log and the job's history: bounded.
constexpr size_t kMaxReasonBytes = 1024;

// Job `id` as it is now, as `who` may see it (into *out; unset if gone).
void JobNow(const ApiContext& ctx, const Principal& who, const std::string& id, v1::Job* out) {
  ctx.committer->Read([&](const cell::CellState& s) {
    if (const cell::Job* j = s.FindJob(id)) {
      *out = j->ToProto();
      HideSecretsFrom(ctx, who, *j, out->mutable_spec());
    }
    return 0;
  });
}

}  // namespace

absl::StatusOr<v1::RollbackResponse> RolloutsApi::Rollback(const Principal& who, const v1::RollbackRequest& req) {
  if (req.to_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("to_version: ", req.to_version(), " is negative"));
  }
  if (req.reason().size() > kMaxReasonBytes) {
    return absl::InvalidArgumentError(absl::StrCat("reason: longer than ", kMaxReasonBytes, " bytes"));
  }
  std::string id;
  v1::RollbackResponse resp;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    resp.Clear();
    HERD_ASSIGN_OR_RETURN(const cell::Job* job, ctx_.LiveJob(s, who, req.job(), Action::kRollbackJob, &id));
    const int64_t to = req.to_version() > 0 ? req.to_version() : job->version - 1;
    std::string reason = req.reason().empty() ? absl::StrCat("rolled back to version ", to, " by ", who.name)
                                              : req.reason();
    HERD_ASSIGN_OR_RETURN(v1::Mutation m, cell::RollbackMutation(s, *job, to, std::move(reason)));
    *resp.mutable_diff() = cell::DiffJob(s, job, m.job_updated().spec());
    HERD_RETURN_IF_ERROR(CheckQuota(s, {m.job_updated().spec()}, {job}));
    return std::vector<v1::Mutation>{std::move(m)};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  resp.set_revision(rev);
  JobNow(ctx_, who, id, resp.mutable_job());
  return resp;
}

absl::StatusOr<v1::SetRolloutResponse> RolloutsApi::SetRollout(const Principal& who,
                                                              const v1::SetRolloutRequest& req) {
  if (req.action() != v1::SetRolloutRequest::PAUSE && req.action() != v1::SetRolloutRequest::RESUME) {
    return absl::InvalidArgumentError("action: PAUSE or RESUME");
  }
  const bool pause = req.action() == v1::SetRolloutRequest::PAUSE;
  std::string id;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    HERD_ASSIGN_OR_RETURN(const cell::Job* job, ctx_.LiveJob(s, who, req.job(), Action::kControlRollout, &id));
    const v1::Rollout& r = job->rollout;
    if (r.state() == v1::Rollout::ROLLOUT_STATE_UNSPECIFIED || r.state() == v1::Rollout::DONE) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " has no rollout in progress (version ", job->version, ")"));
    }
    if (pause ? r.state() == v1::Rollout::PAUSED : r.state() == v1::Rollout::ROLLING) {
      return std::vector<v1::Mutation>{};  // already so: idempotent
    }
    if (r.state() == v1::Rollout::FAILED) {
      return absl::FailedPreconditionError(absl::StrCat("the rollout of job ", id, " to version ", r.version(),
                                                        " failed (", r.message(),
                                                        "): submit a fixed spec, or herd rollback"));
    }
    v1::Mutation m;
    v1::RolloutChanged* c = m.mutable_rollout_changed();
    c->set_job(id);
    c->set_version(r.version());
    c->set_state(pause ? v1::Rollout::PAUSED : v1::Rollout::ROLLING);
    c->set_message(absl::StrCat(pause ? "paused by " : "resumed by ", who.name));
    c->set_promote(!pause);
    return std::vector<v1::Mutation>{std::move(m)};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  v1::SetRolloutResponse resp;
  resp.set_revision(rev);
  JobNow(ctx_, who, id, resp.mutable_job());
  return resp;
}

absl::StatusOr<v1::HistoryResponse> RolloutsApi::History(const Principal& who, const v1::HistoryRequest& req) {
  return ctx_.committer->Read([&](const cell::CellState& s) -> absl::StatusOr<v1::HistoryResponse> {
    HERD_ASSIGN_OR_RETURN(std::string id, ctx_.ResolveJob(s, who, req.job()));
    const cell::Job* job = s.FindJob(id);
    HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kReadJob, JobResource(*job)));
    v1::HistoryResponse r;
    r.set_job(id);
    r.set_version(job->version);
    for (const v1::JobVersion& v : job->versions) {
      v1::JobVersion* out = r.add_versions();
      *out = v;
      HideSecretsFrom(ctx_, who, *job, out->mutable_spec());
    }
    *r.mutable_rollout() = job->ToProto().rollout();
    return r;
  });
}

}  // namespace herd::master
