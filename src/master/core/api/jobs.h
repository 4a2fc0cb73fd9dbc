// The master's job API: submit, kill, read jobs and tasks, why tasks are
// pending, and schedulers' placements (Propose). Every call asks the
// Authorizer first (ApiContext::Authorize) and changes nothing if refused.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"

namespace herd::master {

// What Submit checks of each spec before it looks at the state (shared with
// the Framework API, which submits a job per framework task): a spec
// without a user is the caller's; normalizes it; the caller must be allowed
// to submit it (kSubmitJob) and to run as its isolation.user (kRunTaskAs);
// the spec must validate. Labels herd.framework* are the Framework API's:
// refused unless `framework_task`.
absl::Status PrepareSpec(const ApiContext& ctx, const Principal& who, v1::JobSpec* spec,
                         bool framework_task = false);

class JobsApi {
 public:
  explicit JobsApi(const ApiContext& ctx) : ctx_(ctx) {}

  // Validates every spec (a job without a user is the caller's), checks
  // quota, and commits all of it at once: the new jobs in one mutation, and
  // a JobUpdated per live job whose spec changed (cell/job_update.h says
  // what each task does). Identical live jobs and repeated request ids
  // change nothing. Every result carries the job's diff; with dry_run
  // nothing is committed.
  absl::StatusOr<v1::SubmitResponse> Submit(const Principal& who, const v1::SubmitRequest& req);
  absl::StatusOr<v1::KillResponse> Kill(const Principal& who, const v1::KillRequest& req);
  // Changes a live job's task count (kScaleJob): tasks are added or the
  // highest indexes removed; surviving tasks are not touched.
  absl::StatusOr<v1::ScaleResponse> Scale(const Principal& who, const v1::ScaleRequest& req);
  absl::StatusOr<v1::GetJobResponse> GetJob(const Principal& who, const v1::GetJobRequest& req);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const Principal& who, const v1::ListJobsRequest& req);
  absl::StatusOr<v1::ListTasksResponse> ListTasks(const Principal& who, const v1::ListTasksRequest& req);
  absl::StatusOr<v1::GetTaskResponse> GetTask(const Principal& who, const v1::GetTaskRequest& req);
  // Why the job's pending tasks are pending, as the schedulers last said.
  absl::StatusOr<v1::WhyResponse> Why(const Principal& who, const v1::WhyRequest& req);
  // A scheduler's placements, each committed on its own if still valid
  // (CellState::Check: task still PENDING at its expected state revision,
  // machine up, constraints, victims, fit); a result per placement, with the
  // check's message when refused. The pending diagnoses are kept for Why.
  absl::StatusOr<v1::ProposeResponse> Propose(const Principal& who, const v1::ProposeRequest& req);

 private:
  // Forgets, now and then, why-pending entries of jobs with nothing pending.
  void PruneWhy();
  // RESOURCE_EXHAUSTED if `asking` (replacing `releasing`) would give a user
  // more live tasks than MasterOptions::max_tasks_per_user.
  absl::Status CheckTaskCount(const cell::CellState& s, const Principal& who, const std::vector<v1::JobSpec>& asking,
                              const std::vector<const cell::Job*>& releasing) const;

  const ApiContext& ctx_;
  std::atomic<int64_t> why_pruned_ms_{0};
};

}  // namespace herd::master
