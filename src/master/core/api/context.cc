#include "master/core/api/context.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ids.h"

namespace herd::master {

absl::StatusOr<std::string> ApiContext::ResolveJob(const cell::CellState& s, const Principal& caller,
                                                   const std::string& ref_text) const {
  HERD_ASSIGN_OR_RETURN(JobRef ref, ParseJobRef(ref_text));
  if (!ref.user.empty()) {
    if (s.FindJob(ref.Id()) == nullptr) return absl::NotFoundError(absl::StrCat("no job ", ref.Id()));
    return ref.Id();
  }
  if (!caller.user().empty() && s.FindJob(JobId(caller.user(), ref.name)) != nullptr) {
    return JobId(caller.user(), ref.name);
  }
  std::vector<std::string> matches;
  for (const auto& [id, job] : s.jobs()) {
    if (job->spec.name() == ref.name) matches.push_back(id);
  }
  if (matches.empty()) return absl::NotFoundError(absl::StrCat("no job named ", ref.name));
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job name ", ref.name, " is ambiguous: ", absl::StrJoin(matches, ", "), "; use USER/NAME"));
  }
  return matches[0];
}

absl::StatusOr<const cell::Job*> ApiContext::LiveJob(const cell::CellState& s, const Principal& who,
                                                     const std::string& ref, Action action, std::string* id) const {
  HERD_ASSIGN_OR_RETURN(*id, ResolveJob(s, who, ref));
  const cell::Job* job = s.FindJob(*id);
  HERD_RETURN_IF_ERROR(Authorize(who, action, JobResource(*job)));
  if (job->state == v1::Job::DEAD) {
    return absl::FailedPreconditionError(absl::StrCat("job ", *id, " is dead: submit it to start it anew"));
  }
  return job;
}

Resource JobResource(const cell::Job& job) { return Resource{job.id, job.spec.user(), ""}; }

namespace {
// What a reader without the right to a job's secrets sees of its env values.
constexpr char kHiddenValue[] = "(hidden)";
}  // namespace

void HideSecretsFrom(const ApiContext& ctx, const Principal& who, const cell::Job& job, v1::JobSpec* spec) {
  if (ctx.Authorize(who, Action::kReadSecrets, JobResource(job)).ok()) return;
  for (auto& [k, v] : *spec->mutable_task()->mutable_env()) v = kHiddenValue;
  for (v1::TaskOverride& o : *spec->mutable_overrides()) {
    for (auto& [k, v] : *o.mutable_env()) v = kHiddenValue;
  }
}

}  // namespace herd::master
