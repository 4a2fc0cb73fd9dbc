#include "cell/batch.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/cron.h"
#include "base/ids.h"
#include "base/status.h"

namespace herd::cell {

using Event = v1::Event;

absl::Status CheckBatchFields(const v1::JobSpec& spec) {
  const std::string id = JobId(spec.user(), spec.name());
  if (!spec.schedule().empty()) {
    if (absl::StatusOr<CronSchedule> c = CronSchedule::Parse(spec.schedule()); !c.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("schedule: ", c.status().message()));
    }
    if (!spec.after().empty()) {
      return absl::InvalidArgumentError(
          "after: a scheduled job does not wait for other jobs (its runs start on schedule)");
    }
    if (spec.name().size() > kMaxScheduledNameLength) {
      return absl::InvalidArgumentError(absl::StrCat("name: a scheduled job's name is at most ",
                                                     kMaxScheduledNameLength,
                                                     " characters (its runs are named NAME-<unix time>)"));
    }
  } else {
    if (!spec.time_zone().empty()) return absl::InvalidArgumentError("time_zone: only for a scheduled job (schedule:)");
    if (spec.concurrency() != v1::CONCURRENCY_UNSPECIFIED) {
      return absl::InvalidArgumentError("concurrency: only for a scheduled job (schedule:)");
    }
  }
  if (!v1::Concurrency_IsValid(spec.concurrency())) {
    return absl::InvalidArgumentError(
        absl::StrCat("concurrency: unknown policy number ", static_cast<int>(spec.concurrency())));
  }
  if (spec.after_size() > kMaxAfter) {
    return absl::InvalidArgumentError(
        absl::StrCat("after: names ", spec.after_size(), " jobs; at most ", kMaxAfter));
  }
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < spec.after_size(); ++i) {
    const std::string& dep = spec.after(i);
    std::vector<std::string> parts = absl::StrSplit(dep, '/');
    if (parts.size() != 2 || !ValidateUserName(parts[0]).ok() || !ValidateJobName(parts[1]).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("after[", i, "]: '", Quote(dep), "' is not a job (USER/NAME)"));
    }
    if (dep == id) return absl::InvalidArgumentError(absl::StrCat("after[", i, "]: a job cannot wait for itself"));
    if (!seen.insert(dep).second) {
      return absl::InvalidArgumentError(absl::StrCat("after[", i, "]: ", dep, " is listed twice"));
    }
  }
  return absl::OkStatus();
}

Dependency DependencyOf(const CellState& state, absl::string_view job_id) {
  const Job* j = state.FindJob(job_id);
  if (j == nullptr) return {Dependency::kFailed, "it does not exist"};
  if (j->scheduled()) return {Dependency::kFailed, "it is a scheduled job (wait for one of its runs)"};
  if (j->state != v1::Job::DEAD) return {Dependency::kNotDone, ""};
  for (const Task& t : j->tasks) {
    const EventRec* e = t.last_event();
    if (e != nullptr && e->transition == Event::FINISH) continue;
    if (e != nullptr && e->transition == Event::KILL) {
      return {Dependency::kFailed, absl::StrCat("it was killed (", e->reason, ")")};
    }
    return {Dependency::kFailed, absl::StrCat("task ", t.index(), ": ", e != nullptr ? e->reason : "dead")};
  }
  return {Dependency::kSucceeded, ""};
}

std::vector<std::string> WaitingFor(const CellState& state, const Job& job) {
  std::vector<std::string> out;
  if (!job.waiting()) return out;
  for (const std::string& dep : job.spec.after()) {
    if (DependencyOf(state, dep).kind != Dependency::kSucceeded) out.push_back(dep);
  }
  return out;
}

std::vector<v1::Mutation> StepDependencies(const CellState& state) {
  std::vector<v1::Mutation> out;
  for (const auto& [id, job] : state.jobs()) {
    if (!job->waiting()) continue;
    bool done = true;
    v1::Mutation m;
    v1::JobReleased* r = m.mutable_job_released();
    r->set_job(id);
    for (const std::string& dep : job->spec.after()) {
      Dependency d = DependencyOf(state, dep);
      if (d.kind == Dependency::kFailed) {
        r->set_failed(dep);
        r->set_reason(d.why);
        break;
      }
      if (d.kind == Dependency::kNotDone) done = false;
    }
    if (done || !r->failed().empty()) out.push_back(std::move(m));
  }
  return out;
}

std::string RunJobId(absl::string_view scheduled_id, int64_t due_ms) {
  return absl::StrCat(scheduled_id, "-", due_ms / 1000);
}

v1::JobSpec RunSpec(const v1::JobSpec& scheduled, int64_t due_ms) {
  v1::JobSpec spec = scheduled;
  spec.set_name(absl::StrCat(scheduled.name(), "-", due_ms / 1000));
  spec.clear_schedule();
  spec.clear_time_zone();
  spec.clear_concurrency();
  return spec;
}

std::vector<std::string> LiveRuns(const CellState& state, const Job& scheduled) {
  std::vector<std::string> out;
  for (const v1::ScheduledRun& r : scheduled.runs) {
    if (r.job().empty()) continue;
    const Job* j = state.FindJob(r.job());
    if (j != nullptr && j->state != v1::Job::DEAD && j->scheduled_by == scheduled.id) out.push_back(r.job());
  }
  return out;
}

// ---- CellState: checks and effects of the batch mutations ------------------

absl::Status CellState::CheckAfter(const v1::JobsSubmitted& m) const {
  absl::flat_hash_map<std::string, const v1::JobSpec*> submitted;
  for (const v1::JobSpec& s : m.jobs()) submitted[JobId(s.user(), s.name())] = &s;
  for (const v1::JobSpec& s : m.jobs()) {
    const std::string id = JobId(s.user(), s.name());
    for (const std::string& dep : s.after()) {
      bool scheduled = false;
      if (auto it = submitted.find(dep); it != submitted.end()) {
        scheduled = !it->second->schedule().empty();
      } else if (const Job* d = FindJob(dep); d == nullptr) {
        return absl::NotFoundError(absl::StrCat("job ", id, ": after: there is no job ", dep));
      } else {
        scheduled = d->scheduled();
      }
      if (scheduled) {
        return absl::InvalidArgumentError(absl::StrCat("job ", id, ": after: ", dep,
                                                       " is a scheduled job; wait for one of its runs instead"));
      }
    }
  }
  // Who waits for whom once this is applied: the jobs submitted, and the
  // WAITING jobs already there (a job that runs or is dead waits for no
  // one). The graph was acyclic before, so a cycle passes through a job
  // submitted now: look for a path from each back to itself.
  auto edges = [&](const std::string& id) -> const google::protobuf::RepeatedPtrField<std::string>* {
    if (auto it = submitted.find(id); it != submitted.end()) return &it->second->after();
    const Job* j = FindJob(id);
    return j != nullptr && j->waiting() ? &j->spec.after() : nullptr;
  };
  for (const auto& [start, spec] : submitted) {
    // Depth first, keeping the path for the message.
    std::vector<std::pair<std::string, int>> path{{start, 0}};
    absl::flat_hash_set<std::string> seen{start};
    while (!path.empty()) {
      auto& [node, next] = path.back();
      const auto* out = edges(node);
      if (out == nullptr || next >= out->size()) {
        path.pop_back();
        continue;
      }
      const std::string& dep = (*out)[next++];
      if (dep == start) {
        std::vector<std::string> names;
        for (const auto& p : path) names.push_back(p.first);
        names.push_back(start);
        return absl::InvalidArgumentError(
            absl::StrCat("job ", start, ": after: waiting would never end, a cycle: ", absl::StrJoin(names, " -> ")));
      }
      if (seen.insert(dep).second) path.emplace_back(dep, 0);
    }
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckJobReleased(const v1::JobReleased& m) const {
  const Job* j = FindJob(m.job());
  if (j == nullptr) return absl::NotFoundError(absl::StrCat("no job ", m.job()));
  if (!j->waiting()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", m.job(), " is ", v1::Job::State_Name(j->state), ", not WAITING"));
  }
  if (m.failed().empty()) {
    for (const std::string& dep : j->spec.after()) {
      if (DependencyOf(*this, dep).kind != Dependency::kSucceeded) {
        return absl::FailedPreconditionError(
            absl::StrCat("job ", m.job(), " waits for ", dep, ", which has not finished successfully"));
      }
    }
    return absl::OkStatus();
  }
  if (std::find(j->spec.after().begin(), j->spec.after().end(), m.failed()) == j->spec.after().end()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", m.job(), " does not wait for ", m.failed()));
  }
  if (DependencyOf(*this, m.failed()).kind != Dependency::kFailed) {
    return absl::FailedPreconditionError(absl::StrCat("job ", m.failed(), " has not failed"));
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckScheduleTriggered(const v1::ScheduleTriggered& m) const {
  const Job* s = FindJob(m.job());
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("no job ", m.job()));
  if (!s->scheduled() || s->state != v1::Job::SCHEDULED) {
    return absl::FailedPreconditionError(absl::StrCat("job ", m.job(), " is not a live scheduled job"));
  }
  if (m.due_ms() <= s->last_due_ms) {
    return absl::FailedPreconditionError(absl::StrCat("job ", m.job(), ": due time ", m.due_ms(),
                                                      " is not after the last one acted on (", s->last_due_ms, ")"));
  }
  if (m.missed() < 0) return absl::InvalidArgumentError("missed must not be negative");
  if (!m.skipped().empty()) {
    if (!m.run().empty() || !m.replace().empty()) {
      return absl::InvalidArgumentError("a skipped run starts and replaces nothing");
    }
    return absl::OkStatus();
  }
  const std::string run = RunJobId(m.job(), m.due_ms());
  if (m.run() != run) {
    return absl::InvalidArgumentError(absl::StrCat("the run of ", m.job(), " due at ", m.due_ms(), " is ", run,
                                                   ", not '", Quote(m.run()), "'"));
  }
  if (const Job* old = FindJob(run); old != nullptr && old->state != v1::Job::DEAD) {
    return absl::AlreadyExistsError(absl::StrCat("job ", run, " already exists and is not dead"));
  }
  absl::flat_hash_set<std::string> listed;
  for (const std::string& id : m.replace()) {
    const Job* r = FindJob(id);
    if (r == nullptr || r->scheduled_by != m.job() || r->state == v1::Job::DEAD) {
      return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not a live run of ", m.job()));
    }
    if (!listed.insert(id).second) return absl::InvalidArgumentError(absl::StrCat(id, " is listed twice"));
  }
  return CheckSpec(RunSpec(s->spec, m.due_ms()));
}

void CellState::ApplyJobReleased(const v1::Mutation& m, Effects* fx) {
  const v1::JobReleased& r = m.job_released();
  Job* j = MutableJob(r.job());
  if (r.failed().empty()) {
    const std::string reason = absl::StrCat("released: ", absl::StrJoin(j->spec.after(), ", "),
                                            j->spec.after_size() == 1 ? " finished" : " all finished");
    j->state = v1::Job::PENDING;
    j->state_revision = revision_;
    j->last_event = EventRec{Event::UPDATE, m.time_ms(), revision_, reason, ""};
    for (Task& t : j->tasks) {
      if (t.state_ != v1::Task::PENDING) continue;
      Transition(&t, v1::Task::PENDING, Event::UPDATE, reason, m);  // records the event
      Enqueue(&t);
      fx->pending_added = true;
    }
    UpdateJobState(j, m);
    return;
  }
  const std::string reason =
      absl::StrCat("dependency ", r.failed(), " failed", r.reason().empty() ? "" : ": ", r.reason());
  for (Task& t : j->tasks) {
    if (t.state_ != v1::Task::DEAD) Transition(&t, v1::Task::DEAD, Event::FAIL, reason, m);
  }
  UpdateJobState(j, m);
}

void CellState::ApplyScheduleTriggered(const v1::Mutation& m, Effects* fx) {
  const v1::ScheduleTriggered& st = m.schedule_triggered();
  Job* s = MutableJob(st.job());
  s->last_due_ms = st.due_ms();
  v1::ScheduledRun rec;
  rec.set_due_ms(st.due_ms());
  rec.set_time_ms(m.time_ms());
  if (!st.skipped().empty()) {
    rec.set_outcome(v1::ScheduledRun::SKIPPED);
    rec.set_message(st.skipped());
  } else {
    for (const std::string& id : st.replace()) {
      KillTasks(MutableJob(id), absl::StrCat("replaced by ", st.run(), " (concurrency: replace)"), m, fx);
    }
    const std::string due = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(st.due_ms()),
                                             absl::UTCTimeZone());
    Job* run = CreateJob(RunSpec(s->spec, st.due_ms()), m, "",
                         absl::StrCat("started by the schedule of ", s->id, " (due ", due, ")"), fx);
    run->scheduled_by = s->id;
    rec.set_job(run->id);
    rec.set_outcome(v1::ScheduledRun::STARTED);
    if (st.missed() > 0) {
      rec.set_message(absl::StrCat("catch-up run: ", st.missed(), " earlier due time",
                                   st.missed() == 1 ? " was" : "s were", " missed while no master led"));
    }
  }
  s->runs.push_back(std::move(rec));
  while (s->runs.size() > Job::kRuns) s->runs.pop_front();
}

}  // namespace herd::cell
