#include "master/core/api/jobs.h"

#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "base/framework_labels.h"
#include "base/ids.h"
#include "base/status.h"
#include "cell/batch.h"
#include "cell/job_update.h"
#include "master/core/admission/quota.h"
#include "master/core/batch/schedules.h"
#include "spec/limits.h"
#include "spec/validate.h"

namespace herd::master {
namespace {

// The pending tasks of a job: index -> state revision.
std::map<int32_t, int64_t> PendingOf(const cell::Job& job) {
  std::map<int32_t, int64_t> pending;
  for (const cell::Task& t : job.tasks) {
    if (t.state() == v1::Task::PENDING) pending[t.index()] = t.state_revision();
  }
  return pending;
}

// What a listing shows beyond the job's own record: whom a WAITING job
// waits for, when a scheduled job's next run is due, which jobs run in an
// alloc set.
void AddBatchInfo(const cell::CellState& s, const cell::Job& j, v1::Job* out) {
  for (std::string& dep : cell::WaitingFor(s, j)) out->add_waiting_for(std::move(dep));
  if (j.scheduled() && j.state == v1::Job::SCHEDULED) out->set_next_due_ms(NextDueMs(j));
  if (j.alloc_set()) {
    for (std::string& m : s.AllocMembers(j.id)) out->add_alloc_members(std::move(m));
  }
}

}  // namespace

absl::Status PrepareSpec(const ApiContext& ctx, const Principal& who, v1::JobSpec* spec, bool framework_task) {
  if (spec->user().empty()) spec->set_user(who.user());
  spec::NormalizeAfter(spec);
  HERD_RETURN_IF_ERROR(
      ctx.Authorize(who, Action::kSubmitJob, Resource{JobId(spec->user(), spec->name()), spec->user(), ""}));
  // By default tasks run as the unprivileged account the agent maps their
  // owner to; choosing a machine account (root above all) is a capability.
  if (const std::string& account = spec->task().isolation().user(); !account.empty()) {
    HERD_RETURN_IF_ERROR(ctx.Authorize(
        who, Action::kRunTaskAs, Resource{JobId(spec->user(), spec->name()), spec->user(), "", account}));
  }
  // No seccomp filter, all capabilities kept: as much as root, granted alike.
  if (spec->task().isolation().seccomp() == "unconfined") {
    HERD_RETURN_IF_ERROR(ctx.Authorize(
        who, Action::kRunTaskAs, Resource{JobId(spec->user(), spec->name()), spec->user(), "", "root"}));
  }
  std::vector<std::string> problems;
  if (!framework_task) {
    // The built-in scheduler leaves a framework's tasks alone: a job that
    // claimed to be one would wait forever.
    for (const auto& [k, v] : spec->labels()) {
      if (absl::StartsWith(k, kFrameworkLabelPrefix)) {
        problems.push_back(absl::StrCat("labels.", k, ": labels herd.framework* are set by the Framework API only"));
      }
    }
  }
  if (absl::Status st = spec::Validate(*spec); !st.ok()) problems.push_back(std::string(st.message()));
  if (!problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", spec->user(), "/", spec->name(), ": ", absl::StrJoin(problems, "\n")));
  }
  return absl::OkStatus();
}

absl::Status JobsApi::CheckTaskCount(const cell::CellState& s, const Principal& who,
                                     const std::vector<v1::JobSpec>& asking,
                                     const std::vector<const cell::Job*>& releasing) const {
  const int64_t limit = ctx_.options->max_tasks_per_user;
  if (limit <= 0 || who.Has(Capability::kAdmin)) return absl::OkStatus();
  std::map<std::string, int64_t> more;  // by user
  for (const v1::JobSpec& spec : asking) more[spec.user()] += spec.task_count();
  for (const cell::Job* job : releasing) more[job->spec.user()] -= job->pending + job->running;
  for (const auto& [user, n] : more) {
    const int64_t live = s.LiveTasks(user);
    if (n > 0 && live + n > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "user ", user, " has ", live, " tasks and this asks ", n, " more: at most ", limit,
          " per user at any priority (herd master --max-tasks-per-user); kill or scale down some first"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SubmitResponse> JobsApi::Submit(const Principal& who, const v1::SubmitRequest& req) {
  if (req.jobs().empty()) return absl::InvalidArgumentError("nothing to submit: no jobs");
  if (req.jobs_size() > spec::kMaxJobsPerRequest) {
    return absl::InvalidArgumentError(absl::StrCat("a submit holds at most ", spec::kMaxJobsPerRequest, " jobs, not ",
                                                   req.jobs_size(), ": submit them in parts"));
  }
  // Authorization and validation need no state: both outside the lock.
  std::vector<v1::JobSpec> specs;
  std::vector<std::string> problems;
  for (v1::JobSpec spec : req.jobs()) {
    if (absl::Status st = PrepareSpec(ctx_, who, &spec); !st.ok()) {
      if (st.code() != absl::StatusCode::kInvalidArgument) return st;
      problems.push_back(std::string(st.message()));
    }
    specs.push_back(std::move(spec));
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));

  v1::SubmitResponse resp;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    resp.Clear();
    if (!req.request_id().empty()) {
      if (const auto* jobs = s.FindRequest(who.name, req.request_id())) {
        // A retry of a request that already succeeded: same answer, no change.
        for (const std::string& id : *jobs) {
          v1::SubmitResult* r = resp.add_results();
          r->set_job(id);
          r->set_created(false);
          if (const cell::Job* j = s.FindJob(id)) r->set_tasks(j->spec.task_count());
        }
        return std::vector<v1::Mutation>{};
      }
    }
    std::vector<v1::JobSpec> fresh, changed;
    std::vector<const cell::Job*> replaced;
    std::vector<v1::Mutation> updates;
    for (const v1::JobSpec& spec : specs) {
      std::string id = JobId(spec.user(), spec.name());
      v1::SubmitResult* r = resp.add_results();
      r->set_job(id);
      r->set_tasks(spec.task_count());
      const cell::Job* old = s.FindJob(id);
      // A live job of that name is updated (Borg: an update is a new spec
      // submitted); a dead one is submitted anew.
      v1::JobDiff diff = cell::DiffJob(s, old, spec);
      if (old == nullptr || old->state == v1::Job::DEAD) {
        r->set_created(true);
        fresh.push_back(spec);
      } else if (diff.to_version() != diff.from_version()) {
        r->set_updated(true);
        changed.push_back(spec);
        replaced.push_back(old);
        // With `update:` a rolling update: the tasks that must restart or
        // move are held for the rollout controller (cell/rollout.h).
        updates.push_back(cell::PlanUpdate(*old, spec, diff, absl::StrCat("updated by ", who.name),
                                           spec.has_update() ? &spec.update() : nullptr));
      }
      *r->mutable_diff() = std::move(diff);
    }
    if (fresh.empty() && changed.empty()) return std::vector<v1::Mutation>{};  // identical live jobs: nothing to do
    // A scheduled job has no tasks: its runs ask for quota when they start.
    std::vector<v1::JobSpec> asking;
    std::vector<const cell::Job*> releasing;
    for (const v1::JobSpec& spec : fresh) {
      if (spec.schedule().empty()) asking.push_back(spec);
    }
    for (size_t i = 0; i < changed.size(); ++i) {
      if (changed[i].schedule().empty()) {
        asking.push_back(changed[i]);
        releasing.push_back(replaced[i]);
      }
    }
    HERD_RETURN_IF_ERROR(CheckQuota(s, asking, releasing));
    HERD_RETURN_IF_ERROR(CheckTaskCount(s, who, asking, releasing));
    if (req.dry_run()) return std::vector<v1::Mutation>{};
    std::vector<v1::Mutation> out;
    if (!fresh.empty()) {
      v1::Mutation m;
      for (auto& spec : fresh) *m.mutable_jobs_submitted()->add_jobs() = std::move(spec);
      m.mutable_jobs_submitted()->set_request_id(req.request_id());
      out.push_back(std::move(m));
    }
    for (v1::Mutation& m : updates) out.push_back(std::move(m));
    return out;
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  resp.set_revision(rev);
  return resp;
}

absl::StatusOr<v1::ScaleResponse> JobsApi::Scale(const Principal& who, const v1::ScaleRequest& req) {
  if (req.tasks() < 1 || req.tasks() > 100'000) {
    return absl::InvalidArgumentError(absl::StrCat("tasks: ", req.tasks(), " is outside 1..100000"));
  }
  if (req.expect_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("expect_version: ", req.expect_version(), " is negative"));
  }
  std::string id;
  v1::ScaleResponse resp;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    resp.Clear();
    HERD_ASSIGN_OR_RETURN(const cell::Job* job, ctx_.LiveJob(s, who, req.job(), Action::kScaleJob, &id));
    if (job->scheduled()) {
      return absl::FailedPreconditionError(absl::StrCat("job ", id, " is a scheduled job and has no tasks to scale: "
                                                        "change tasks: in its spec and submit it (its next runs "
                                                        "take it), or scale a run"));
    }
    if (req.expect_version() != 0 && req.expect_version() != job->version) {
      return absl::FailedPreconditionError(absl::StrCat("job ", id, " is at version ", job->version, ", not ",
                                                        req.expect_version(), " (it changed meanwhile)"));
    }
    v1::JobSpec next = job->spec;
    next.set_task_count(req.tasks());
    cell::UpdateOptions keep;
    keep.keep_survivors = true;  // Torca's elastic resize: only added and removed tasks change
    *resp.mutable_diff() = cell::DiffJob(s, job, next, keep);
    *resp.mutable_job() = job->ToProto();
    if (resp.diff().to_version() == resp.diff().from_version()) return std::vector<v1::Mutation>{};
    HERD_RETURN_IF_ERROR(CheckQuota(s, {next}, {job}));
    HERD_RETURN_IF_ERROR(CheckTaskCount(s, who, {next}, {job}));
    if (req.dry_run()) return std::vector<v1::Mutation>{};
    // Survivors are not touched: those a rollout has not reached yet stay
    // held, and the rollout goes on with its strategy.
    v1::Mutation m = cell::PlanUpdate(
        *job, next, resp.diff(),
        absl::StrCat("scaled from ", job->spec.task_count(), " to ", req.tasks(), " tasks by ", who.name),
        job->rollout.has_strategy() ? &job->rollout.strategy() : nullptr, /*hold_outdated=*/true);
    m.mutable_job_updated()->set_resize(true);  // a paused or failed rollout stays so
    return std::vector<v1::Mutation>{m};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  resp.set_revision(rev);
  ctx_.committer->Read([&](const cell::CellState& s) {
    if (const cell::Job* j = s.FindJob(id)) *resp.mutable_job() = j->ToProto();
    return 0;
  });
  return resp;
}

absl::StatusOr<v1::KillResponse> JobsApi::Kill(const Principal& who, const v1::KillRequest& req) {
  std::string id;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    HERD_ASSIGN_OR_RETURN(id, ctx_.ResolveJob(s, who, req.job()));
    const cell::Job* job = s.FindJob(id);
    HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kKillJob, JobResource(*job)));
    if (job->state == v1::Job::DEAD) return std::vector<v1::Mutation>{};  // already dead: idempotent
    v1::Mutation m;
    m.mutable_job_killed()->set_job(id);
    m.mutable_job_killed()->set_reason(req.reason().empty() ? absl::StrCat("killed by ", who.name) : req.reason());
    return std::vector<v1::Mutation>{std::move(m)};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  v1::KillResponse resp;
  resp.set_revision(rev);
  ctx_.committer->Read([&](const cell::CellState& s) {
    if (const cell::Job* j = s.FindJob(id)) *resp.mutable_job() = j->ToProto();
    return 0;
  });
  return resp;
}

absl::StatusOr<v1::GetJobResponse> JobsApi::GetJob(const Principal& who, const v1::GetJobRequest& req) {
  HERD_ASSIGN_OR_RETURN(
      v1::GetJobResponse resp,
      ctx_.AtRevision<v1::GetJobResponse>(
          req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::GetJobResponse> {
            HERD_ASSIGN_OR_RETURN(std::string id, ctx_.ResolveJob(s, who, req.job()));
            const cell::Job* j = s.FindJob(id);
            HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kReadJob, JobResource(*j)));
            v1::GetJobResponse r;
            *r.mutable_job() = j->ToProto();
            AddBatchInfo(s, *j, r.mutable_job());
            HideSecretsFrom(ctx_, who, *j, r.mutable_job()->mutable_spec());
            for (const cell::Task& t : j->tasks) *r.add_tasks() = t.ToProto();
            r.set_revision(s.revision());
            return r;
          }));
  if (req.at_revision() == 0) {
    std::map<int32_t, int64_t> pending;
    for (const v1::Task& t : resp.tasks()) {
      if (t.state() == v1::Task::PENDING) pending[t.index()] = t.state_revision();
    }
    for (const v1::PendingDiagnosis& d : ctx_.why->For(resp.job().id(), pending)) {
      for (int32_t index : d.indexes()) (*resp.mutable_why_pending())[index] = d.text();
    }
  }
  return resp;
}

absl::StatusOr<v1::ListJobsResponse> JobsApi::ListJobs(const Principal& who, const v1::ListJobsRequest& req) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kListJobs, Resource{"", req.user(), ""}));
  return ctx_.AtRevision<v1::ListJobsResponse>(
      req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::ListJobsResponse> {
        v1::ListJobsResponse r;
        for (const auto& [id, j] : s.jobs()) {
          if (!req.user().empty() && j->spec.user() != req.user()) continue;
          if (!req.include_dead() && j->state == v1::Job::DEAD) continue;
          v1::Job* out = r.add_jobs();
          *out = j->ToProto();
          AddBatchInfo(s, *j, out);
          HideSecretsFrom(ctx_, who, *j, out->mutable_spec());
        }
        r.set_revision(s.revision());
        return r;
      });
}

absl::StatusOr<v1::ListTasksResponse> JobsApi::ListTasks(const Principal& who, const v1::ListTasksRequest& req) {
  return ctx_.AtRevision<v1::ListTasksResponse>(
      req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::ListTasksResponse> {
        HERD_ASSIGN_OR_RETURN(std::string id, ctx_.ResolveJob(s, who, req.job()));
        const cell::Job* j = s.FindJob(id);
        HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kReadJob, JobResource(*j)));
        v1::ListTasksResponse r;
        for (const cell::Task& t : j->tasks) *r.add_tasks() = t.ToProto();
        r.set_revision(s.revision());
        return r;
      });
}

absl::StatusOr<v1::GetTaskResponse> JobsApi::GetTask(const Principal& who, const v1::GetTaskRequest& req) {
  return ctx_.committer->Read([&](const cell::CellState& s) -> absl::StatusOr<v1::GetTaskResponse> {
    HERD_ASSIGN_OR_RETURN(std::string id, ctx_.ResolveJob(s, who, req.job()));
    const cell::Job* j = s.FindJob(id);
    HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kReadJob, JobResource(*j)));
    const cell::Task* t = s.FindTask(id, req.index());
    if (t == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("job ", id, " has no task ", req.index(), " (it has ", j->tasks.size(), ")"));
    }
    v1::GetTaskResponse r;
    *r.mutable_task() = t->ToProto();
    std::string machine = t->machine() ? t->machine()->name() : t->last_machine();
    if (const cell::Machine* m = s.FindMachine(machine)) *r.mutable_machine() = m->ToProto();
    if (t->incarnation() > 0) r.set_run_id(RunId(id, t->index(), t->incarnation()));
    return r;
  });
}

absl::StatusOr<v1::WhyResponse> JobsApi::Why(const Principal& who, const v1::WhyRequest& req) {
  std::string id;
  std::map<int32_t, int64_t> pending;  // index -> state revision
  std::vector<std::string> waiting_for;
  HERD_RETURN_IF_ERROR(ctx_.committer->Read([&](const cell::CellState& s) -> absl::Status {
    HERD_ASSIGN_OR_RETURN(id, ctx_.ResolveJob(s, who, req.job()));
    const cell::Job* j = s.FindJob(id);
    HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kReadJob, JobResource(*j)));
    pending = PendingOf(*j);
    waiting_for = cell::WaitingFor(s, *j);
    return absl::OkStatus();
  }));
  v1::WhyResponse resp;
  resp.set_job(id);
  resp.set_pending_tasks(static_cast<int32_t>(pending.size()));
  if (!waiting_for.empty()) {
    // Not for the scheduler yet: nothing to diagnose.
    resp.set_note(absl::StrCat("the job waits for ", absl::StrJoin(waiting_for, ", "),
                               " to finish (after:); its tasks are placed once ",
                               waiting_for.size() == 1 ? "it has" : "they have"));
    return resp;
  }
  size_t explained = 0;
  for (v1::PendingDiagnosis& d : ctx_.why->For(id, pending)) {
    explained += d.indexes_size();
    *resp.add_pending() = std::move(d);
  }
  if (pending.empty()) {
    resp.set_note("the job has no pending tasks");
  } else if (explained == 0) {
    resp.set_note("no scheduler pass has looked at it yet");
  } else if (explained < pending.size()) {
    size_t n = pending.size() - explained;
    resp.set_note(absl::StrCat(n, " pending task", n == 1 ? "" : "s",
                               " not looked at yet by a scheduler pass (being placed, or pending again since)"));
  }
  return resp;
}

absl::StatusOr<v1::ProposeResponse> JobsApi::Propose(const Principal& who, const v1::ProposeRequest& req) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kPropose, Resource{}));
  std::string scheduler = req.scheduler();
  if (scheduler.empty()) {
    scheduler = who.kind == Principal::Kind::kInternal ? who.name
                : who.name.empty()                      ? "external"
                                                        : absl::StrCat("scheduler:", who.name);
  }
  std::vector<v1::Mutation> ms;
  ms.reserve(req.placements_size());
  absl::flat_hash_set<std::string> looked_at;
  for (const v1::TaskScheduled& p : req.placements()) {
    v1::Mutation m;
    v1::TaskScheduled* ts = m.mutable_task_scheduled();
    *ts = p;
    if (ts->scheduler().empty()) ts->set_scheduler(scheduler);
    if (ts->based_on_revision() == 0) ts->set_based_on_revision(req.based_on_revision());
    looked_at.insert(p.job());
    ms.push_back(std::move(m));
  }
  std::vector<absl::Status> st =
      ms.empty() ? std::vector<absl::Status>{} : ctx_.committer->CommitEach(scheduler, std::move(ms));
  v1::ProposeResponse resp;
  for (const absl::Status& s : st) {
    v1::ProposalResult* r = resp.add_results();
    r->set_accepted(s.ok());
    if (!s.ok()) r->set_reason(std::string(s.message()));
  }
  resp.set_revision(ctx_.committer->revision());

  // Why the rest is pending: latest per job, from whichever scheduler.
  std::vector<v1::PendingDiagnosis> pending(req.pending().begin(), req.pending().end());
  for (v1::PendingDiagnosis& d : pending) {
    if (d.scheduler().empty()) d.set_scheduler(scheduler);
    if (d.revision() == 0) d.set_revision(req.based_on_revision());
    looked_at.insert(d.job());
  }
  ctx_.why->Record(looked_at, pending);
  PruneWhy();
  return resp;
}

void JobsApi::PruneWhy() {
  const int64_t now = ctx_.clock->MonotonicMs();
  int64_t last = why_pruned_ms_.load();
  if (now - last < 1000 || !why_pruned_ms_.compare_exchange_strong(last, now)) return;
  std::vector<std::string> jobs = ctx_.why->Jobs();
  absl::flat_hash_set<std::string> keep = ctx_.committer->Read([&](const cell::CellState& s) {
    absl::flat_hash_set<std::string> k;
    for (const std::string& id : jobs) {
      const cell::Job* j = s.FindJob(id);
      if (j != nullptr && j->pending > 0) k.insert(id);
    }
    return k;
  });
  ctx_.why->Retain([&](const std::string& id) { return keep.contains(id); });
}

}  // namespace herd::master
