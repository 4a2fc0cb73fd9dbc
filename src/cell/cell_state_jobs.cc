// CellState: the job family of mutations (JobsSubmitted, JobKilled, JobUpdated,
// TasksUpdated, RolloutChanged): their Check and Apply halves.
#include "cell/cell_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ids.h"
#include "base/status.h"
#include "cell/batch.h"
#include "cell/constraints.h"
#include "cell/job_update.h"
#include "cell/task_template.h"

namespace herd::cell {

using v1::Event;

absl::Status CellState::CheckSubmit(const v1::Mutation& mut) const {
  const v1::JobsSubmitted& m = mut.jobs_submitted();
  if (m.jobs().empty()) return absl::InvalidArgumentError("submit with no jobs");
  if (!m.request_id().empty() && FindRequest(RequestUser(mut), m.request_id()) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("request id ", m.request_id(), " was already used"));
  }
  absl::flat_hash_set<std::string> seen;
  for (const v1::JobSpec& s : m.jobs()) {
    HERD_RETURN_IF_ERROR(CheckSpec(s));
    std::string id = JobId(s.user(), s.name());
    if (!seen.insert(id).second) return absl::InvalidArgumentError(absl::StrCat("job ", id, " is submitted twice"));
    const Job* old = FindJob(id);
    if (old != nullptr && old->state != v1::Job::DEAD) {
      return absl::AlreadyExistsError(absl::StrCat("job ", id, " already exists and is not dead"));
    }
  }
  for (const v1::JobSpec& s : m.jobs()) {
    if (!s.alloc().empty()) {
      // The alloc set may come with it, in the same submit.
      const v1::JobSpec* set = nullptr;
      for (const v1::JobSpec& o : m.jobs()) {
        if (JobId(o.user(), o.name()) == s.alloc()) set = &o;
      }
      if (set != nullptr) {
        HERD_RETURN_IF_ERROR(CheckAllocMember(s, set->alloc_set(), set->user(), set->task_count()));
        continue;
      }
    }
    HERD_RETURN_IF_ERROR(CheckAllocFields(s, nullptr));
  }
  HERD_RETURN_IF_ERROR(CheckAfter(m));
  if (!m.place_on().empty()) return CheckPlaceOn(m);
  return absl::OkStatus();
}

absl::Status CellState::CheckPlaceOn(const v1::JobsSubmitted& m) const {
  const Machine* mach = FindMachine(m.place_on());
  if (mach == nullptr) return absl::NotFoundError(absl::StrCat("place_on: no machine ", m.place_on()));
  if (mach->state_ != v1::Machine::UP) {
    return absl::FailedPreconditionError(absl::StrCat("place_on: machine ", m.place_on(), " is not up"));
  }
  // The tasks placed before each one in this submit take from what is free
  // for it (their limits, whatever their priority: never optimistic).
  ResourceVector taken;
  for (const v1::JobSpec& s : m.jobs()) {
    const std::string id = JobId(s.user(), s.name());
    if (!s.after().empty() || !s.schedule().empty() || !s.alloc().empty() || s.alloc_set()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job ", id, ": place_on places only jobs that run at once (no after:, schedule, alloc or alloc_set)"));
    }
    for (const v1::Constraint& c : s.constraints()) {
      if (!c.soft() && !Matches(c, mach->attributes_)) {
        return absl::FailedPreconditionError(
            absl::StrCat("machine ", m.place_on(), " does not satisfy job ", id, "'s constraint ", Describe(c)));
      }
    }
    const ResourceVector free = mach->FreeFor(s.priority());
    for (int32_t i = 0; i < s.task_count(); ++i) {
      const ResourceVector r = TaskResources(s, i);
      ResourceVector avail = free;
      avail -= taken;
      if (auto dim = r.FirstShortfall(avail)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "task ", TaskName(id, i), " does not fit on ", m.place_on(), ": ", *dim, " asks ",
            FormatDimension(*dim, r.Get(*dim)), ", ", FormatDimension(*dim, std::max<int64_t>(avail.Get(*dim), 0)),
            " free"));
      }
      taken += r;
    }
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckAllocMember(const v1::JobSpec& s, bool is_set, const std::string& set_user,
                                         int32_t allocs) const {
  const std::string id = JobId(s.user(), s.name());
  if (!is_set) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, ": alloc: ", s.alloc(), " is not an alloc set (alloc_set: true)"));
  }
  if (set_user != s.user()) {
    return absl::PermissionDeniedError(
        absl::StrCat("job ", id, ": alloc: ", s.alloc(), " belongs to ", set_user, "; only their jobs run in it"));
  }
  if (s.task_count() > allocs) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " has ", s.task_count(), " tasks but alloc set ",
                                                      s.alloc(), " has ", allocs,
                                                      " allocs (task i runs in alloc i)"));
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckAllocFields(const v1::JobSpec& s, const Job* old) const {
  const std::string id = JobId(s.user(), s.name());
  if (s.alloc_set() && !s.alloc().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", id, ": an alloc set cannot run in an alloc set"));
  }
  if (s.alloc_set() && !s.schedule().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", id, ": an alloc set cannot have a schedule"));
  }
  if (old != nullptr) {
    if (old->spec.alloc_set() != s.alloc_set() || old->spec.alloc() != s.alloc()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, ": ", old->spec.alloc_set() != s.alloc_set() ? "alloc_set" : "alloc",
          ": cannot change while the job is live (kill it and submit it again)"));
    }
    if (s.alloc_set()) {
      // Shrinking: every alloc that tasks use must stay, and hold them.
      for (const std::string& member : AllocMembers(old->id)) {
        const Job* mj = FindJob(member);
        if (mj != nullptr && mj->spec.task_count() > s.task_count()) {
          return absl::FailedPreconditionError(absl::StrCat("alloc set ", id, ": job ", member, " runs ",
                                                            mj->spec.task_count(), " tasks in it; it cannot shrink to ",
                                                            s.task_count(), " allocs"));
        }
      }
      for (const auto& [key, used] : alloc_used_) {
        if (key.first != old->id || key.second >= s.task_count()) continue;
        ResourceVector limit = TaskResources(s, key.second);
        if (auto dim = used.FirstShortfall(limit)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "alloc ", TaskName(id, key.second), ": its tasks use ", FormatDimension(*dim, used.Get(*dim)), " ",
              *dim, "; the new limit ", FormatDimension(*dim, limit.Get(*dim)), " cannot hold them"));
        }
      }
    }
  }
  if (s.alloc().empty()) return absl::OkStatus();
  const Job* set = FindJob(s.alloc());
  if (set == nullptr || set->state == v1::Job::DEAD) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, ": alloc: no live alloc set ", s.alloc(), " (submit it first, or with this job)"));
  }
  return CheckAllocMember(s, set->alloc_set(), set->spec.user(), static_cast<int32_t>(set->tasks.size()));
}

absl::Status CellState::CheckSpec(const v1::JobSpec& s) const {
  HERD_RETURN_IF_ERROR(ValidateJobName(s.name()));
  HERD_RETURN_IF_ERROR(ValidateUserName(s.user()));
  std::string id = JobId(s.user(), s.name());
  if (s.task_count() < 1 || s.task_count() > 100'000) {
    return absl::InvalidArgumentError(absl::StrCat("job ", id, ": task count ", s.task_count(),
                                                   " is outside 1..100000"));
  }
  if (s.priority() < 0 || s.priority() > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat("job ", id, ": priority ", s.priority(),
                                                   " is outside 0..", kMaxPriority));
  }
  for (int32_t i = 0; i < s.task_count(); ++i) {
    if (TaskResources(s, i).AnyNegative()) {
      return absl::InvalidArgumentError(absl::StrCat("job ", id, " task ", i, ": negative resources"));
    }
  }
  if (absl::Status st = CheckBatchFields(s); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", id, ": ", st.message()));
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckJobUpdated(const v1::JobUpdated& u) const {
  HERD_RETURN_IF_ERROR(CheckSpec(u.spec()));
  const std::string id = JobId(u.spec().user(), u.spec().name());
  const Job* j = FindJob(id);
  if (j == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (j->state == v1::Job::DEAD) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is dead: submit it to start it anew"));
  }
  if (u.expect_version() != 0 && u.expect_version() != j->version) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is at version ", j->version, ", not ",
                                                      u.expect_version(), " (it changed meanwhile)"));
  }
  if (j->scheduled() != !u.spec().schedule().empty()) {
    return absl::FailedPreconditionError(
        j->scheduled() ? absl::StrCat("job ", id, " is a scheduled job; a spec without schedule: cannot update it "
                                                  "(kill it first)")
                       : absl::StrCat("job ", id, " is live and not scheduled; kill it before submitting it with "
                                                  "schedule:"));
  }
  if (!std::equal(j->spec.after().begin(), j->spec.after().end(), u.spec().after().begin(),
                  u.spec().after().end())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, ": after: cannot change while the job is live (kill it and submit it again)"));
  }
  HERD_RETURN_IF_ERROR(CheckAllocFields(u.spec(), j));
  if (j->scheduled() && (!u.restart().empty() || !u.reschedule().empty() || !u.hold().empty())) {
    return absl::InvalidArgumentError(absl::StrCat("job ", id, " is a scheduled job: it has no tasks to update"));
  }
  const int32_t survivors = std::min<int32_t>(static_cast<int32_t>(j->tasks.size()), u.spec().task_count());
  absl::flat_hash_set<int32_t> listed;
  for (const auto& [what, list] : {std::pair{"restart", &u.restart()}, std::pair{"reschedule", &u.reschedule()},
                                   std::pair{"hold", &u.hold()}}) {
    for (int32_t i : *list) {
      if (i < 0 || i >= survivors) {
        return absl::InvalidArgumentError(absl::StrCat("job ", id, ": task ", i, " to ", what,
                                                       " does not survive the update (0..", survivors - 1, " do)"));
      }
      if (!listed.insert(i).second) {
        return absl::InvalidArgumentError(absl::StrCat("job ", id, ": task ", i, " is listed twice"));
      }
      if (j->tasks[i].state_ != v1::Task::RUNNING) {
        return absl::FailedPreconditionError(absl::StrCat("task ", TaskName(id, i), " is ",
                                                          v1::Task::State_Name(j->tasks[i].state_),
                                                          ", not RUNNING: nothing to ", what));
      }
    }
  }
  return CheckStaysFit(*this, *j, u);
}

absl::Status CellState::CheckTasksUpdated(const v1::TasksUpdated& m) const {
  const Job* j = FindJob(m.job());
  if (j == nullptr) return absl::NotFoundError(absl::StrCat("no job ", m.job()));
  if (j->state == v1::Job::DEAD) return absl::FailedPreconditionError(absl::StrCat("job ", m.job(), " is dead"));
  if (m.version() != j->version) {
    return absl::FailedPreconditionError(absl::StrCat("job ", m.job(), " is at version ", j->version, ", not ",
                                                      m.version(), " (it changed meanwhile)"));
  }
  // The job's own spec, with every task not listed held where it is: only
  // the listed ones are checked (fit, constraints).
  v1::JobUpdated u;
  *u.mutable_spec() = j->spec;
  absl::flat_hash_set<int32_t> listed;
  for (const auto& [what, list] : {std::pair{"restart", &m.restart()}, std::pair{"reschedule", &m.reschedule()}}) {
    for (int32_t i : *list) {
      if (i < 0 || i >= static_cast<int32_t>(j->tasks.size())) {
        return absl::InvalidArgumentError(absl::StrCat("job ", m.job(), " has no task ", i, " to ", what));
      }
      if (!listed.insert(i).second) {
        return absl::InvalidArgumentError(absl::StrCat("job ", m.job(), ": task ", i, " is listed twice"));
      }
      const Task& t = j->tasks[i];
      if (t.state_ != v1::Task::RUNNING || !t.outdated()) {
        return absl::FailedPreconditionError(absl::StrCat("task ", TaskName(m.job(), i), " is not an outdated RUNNING task: nothing to ", what));
      }
    }
  }
  *u.mutable_restart() = m.restart();
  *u.mutable_reschedule() = m.reschedule();
  for (const Task& t : j->tasks) {
    if (t.state_ == v1::Task::RUNNING && !listed.contains(t.index_)) u.add_hold(t.index_);
  }
  return CheckStaysFit(*this, *j, u);
}

absl::Status CellState::CheckRolloutChanged(const v1::RolloutChanged& m) const {
  const Job* j = FindJob(m.job());
  if (j == nullptr) return absl::NotFoundError(absl::StrCat("no job ", m.job()));
  if (j->state == v1::Job::DEAD) return absl::FailedPreconditionError(absl::StrCat("job ", m.job(), " is dead"));
  if (j->rollout.state() == v1::Rollout::ROLLOUT_STATE_UNSPECIFIED || j->rollout.version() != m.version()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", m.job(), " has no rollout of version ", m.version(), " (at version ", j->version, ")"));
  }
  if (m.state() == v1::Rollout::ROLLOUT_STATE_UNSPECIFIED || !v1::Rollout::State_IsValid(m.state())) {
    return absl::InvalidArgumentError("rollout state missing");
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckKill(const v1::JobKilled& m) const {
  const Job* j = FindJob(m.job());
  if (j == nullptr) return absl::NotFoundError(absl::StrCat("no job ", m.job()));
  if (j->state == v1::Job::DEAD) return absl::FailedPreconditionError(absl::StrCat("job ", m.job(), " is already dead"));
  if (std::vector<std::string> members = AllocMembers(j->id); !members.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("alloc set ", j->id, " has live jobs running in it (",
                                                      absl::StrJoin(members, ", "), "): kill them first"));
  }
  return absl::OkStatus();
}

void CellState::ApplySubmit(const v1::Mutation& m, Effects* fx) {
  const v1::JobsSubmitted& s = m.jobs_submitted();
  std::vector<std::string> ids;
  Machine* mach = s.place_on().empty() ? nullptr : MutableMachine(s.place_on());
  for (const v1::JobSpec& spec : s.jobs()) {
    std::string reason = absl::StrCat("submitted by ", m.actor().empty() ? spec.user() : m.actor());
    Job* j = CreateJob(spec, m, s.request_id(), reason, fx);
    ids.push_back(j->id);
    if (mach == nullptr) continue;
    // Submitted and placed at once (CheckPlaceOn): as a TaskScheduled would.
    std::string placed = absl::StrCat("scheduled on ", mach->name_);
    if (!m.actor().empty()) absl::StrAppend(&placed, " by ", m.actor());
    for (Task& t : j->tasks) {
      Place(&t, mach, fx);
      NewRun(&t);
      Transition(&t, v1::Task::RUNNING, Event::SCHEDULE, placed, m, mach->name_);
    }
    UpdateJobState(j, m);
  }
  RecordRequest(RequestUser(m), s.request_id(), std::move(ids));
}

void CellState::KillTasks(Job* j, const std::string& reason, const v1::Mutation& m, Effects* fx) {
  for (Task& t : j->tasks) {
    if (t.state_ == v1::Task::DEAD) continue;
    std::string machine = t.machine_ ? t.machine_->name_ : "";
    Unplace(&t, fx);
    t.phase_ = t.phase_ == v1::Task::PHASE_UNSPECIFIED ? t.phase_ : v1::Task::STOPPING;
    t.pid_ = 0;
    Transition(&t, v1::Task::DEAD, Event::KILL, reason, m, machine);
  }
  UpdateJobState(j, m, &reason);
}

void CellState::ApplyKill(const v1::Mutation& m, Effects* fx) {
  Job* j = MutableJob(m.job_killed().job());
  std::string reason = m.job_killed().reason().empty()
                           ? absl::StrCat("killed by ", m.actor().empty() ? "user" : m.actor())
                           : m.job_killed().reason();
  KillTasks(j, reason, m, fx);
}

void CellState::ResizeTasks(Job* j, int32_t count) {
  const size_t n = static_cast<size_t>(count);
  if (n > j->tasks.capacity()) {
    for (Task& t : j->tasks) {
      if (t.state_ == v1::Task::PENDING) pending_.erase(&t);
      if (t.machine_ != nullptr) t.machine_->tasks_.erase(&t);
    }
    j->tasks.reserve(n);
    for (Task& t : j->tasks) {
      if (t.state_ == v1::Task::PENDING) Enqueue(&t);
      if (t.machine_ != nullptr) t.machine_->tasks_.insert(&t);
    }
  }
  j->tasks.resize(n);
}

void CellState::NewRun(Task* t) {
  ++t->incarnation_;
  t->phase_ = v1::Task::ASSIGNED;
  t->restarts_ = 0;
  t->exit_code_ = 0;
  t->exit_signal_ = 0;
  t->pid_ = 0;
  t->started_ms_ = 0;
  t->message_.clear();
  t->agent_info_.reset();  // ports and health were the old run's
}

void CellState::TakeSpec(Task* t) {
  const bool live = t->state_ != v1::Task::DEAD;
  if (live) AddUsage(*t, false);
  ResourceVector r = TaskResources(t->job_->spec, t->index_);
  if (!(r == t->resources_)) {
    t->resources_ = std::move(r);
    t->reservation_.reset();  // estimated for the old limits
  }
  t->priority_ = t->job_->spec.priority();
  t->job_version_ = t->job_->version;
  t->state_revision_ = revision_;  // a scheduler's proposal or why-pending from before is stale
  if (live) AddUsage(*t, true);
}

void CellState::ApplyJobUpdated(const v1::Mutation& m, Effects* fx) {
  const v1::JobUpdated& u = m.job_updated();
  Job* j = MutableJob(JobId(u.spec().user(), u.spec().name()));
  const int32_t old_count = static_cast<int32_t>(j->tasks.size());
  // A scheduled job has no tasks: the new spec reaches its next runs.
  const int32_t new_count = j->scheduled() ? 0 : u.spec().task_count();
  const int64_t version = j->version + 1;
  const std::string by = m.actor().empty() ? "" : absl::StrCat(" by ", m.actor());
  // Removed tasks (the highest indexes) leave their machines, whose agents
  // stop them on the next poll, and are gone.
  for (int32_t i = new_count; i < old_count; ++i) {
    Task& t = j->tasks[i];
    Unplace(&t, fx);
    if (t.state_ == v1::Task::PENDING) pending_.erase(&t);
    if (t.state_ != v1::Task::DEAD) AddUsage(t, false);
    --task_counts_[t.state_];
    (t.state_ == v1::Task::PENDING ? j->pending : t.state_ == v1::Task::RUNNING ? j->running : j->dead) -= 1;
  }
  j->spec = u.spec();
  j->version = version;
  j->version_revision = revision_;
  ResizeTasks(j, new_count);
  for (int32_t i = old_count; i < new_count; ++i) {
    Task& t = j->tasks[i];
    t.job_ = j;
    t.index_ = i;
    t.state_ = v1::Task::PENDING;
    t.state_revision_ = revision_;
    // A task of this index removed earlier may still be stopping on its
    // machine: start above any incarnation it can have had (each was a
    // mutation of its own), so run ids never repeat.
    t.incarnation_ = revision_;
    t.resources_ = TaskResources(j->spec, i);
    t.priority_ = j->spec.priority();
    t.job_version_ = version;
    t.history_.push_back(EventRec{Event::SUBMIT, m.time_ms(), revision_,
                                  absl::StrCat("added with job version ", version, by), ""});
    ++task_counts_[v1::Task::PENDING];
    ++j->pending;
    Enqueue(&t);
    AddUsage(t, true);
    fx->pending_added = !j->waiting();
  }
  const absl::flat_hash_set<int32_t> restart(u.restart().begin(), u.restart().end());
  const absl::flat_hash_set<int32_t> reschedule(u.reschedule().begin(), u.reschedule().end());
  const absl::flat_hash_set<int32_t> hold(u.hold().begin(), u.hold().end());
  for (int32_t i = 0; i < std::min(old_count, new_count); ++i) {
    Task* t = &j->tasks[i];
    if (hold.contains(i)) continue;  // outdated until a later step reaches it
    if (reschedule.contains(i)) {
      MoveForUpdate(t, m, absl::StrCat("moved for job version ", version, ": it needs another machine"), fx);
      continue;
    }
    if (t->state_ == v1::Task::PENDING) {
      pending_.erase(t);  // its priority orders it there
      TakeSpec(t);
      Enqueue(t);
      fx->pending_added = !j->waiting();
      continue;
    }
    if (t->state_ == v1::Task::DEAD) {
      TakeSpec(t);
      continue;
    }
    UpdateOnMachine(t, restart.contains(i), m, absl::StrCat("job version ", version), fx);
  }
  std::string reason = u.reason().empty() ? absl::StrCat("updated to version ", version, by)
                                          : absl::StrCat(u.reason(), " (version ", version, ")");
  AddVersion(j, m, u.reason().empty() ? absl::StrCat("updated", by) : u.reason());
  const v1::Rollout before = j->rollout;
  j->rollout.Clear();
  j->rollout.set_version(version);
  j->rollout.set_from_version(version - 1);
  j->rollout.set_started_ms(m.time_ms());
  j->rollout.set_step_ms(m.time_ms());
  j->rollout.set_rollback(u.rollback());
  if (u.has_strategy()) *j->rollout.mutable_strategy() = u.strategy();
  j->rollout.set_state(u.hold().empty() ? v1::Rollout::DONE : v1::Rollout::ROLLING);
  if (u.resize() && !u.hold().empty() &&
      (before.state() == v1::Rollout::PAUSED || before.state() == v1::Rollout::FAILED)) {
    // A resize during a stopped rollout: it stays stopped, where it was.
    j->rollout.set_state(before.state());
    j->rollout.set_message(before.message());
    j->rollout.set_promoted(before.promoted());
    j->rollout.set_from_version(before.from_version());
    j->rollout.set_started_ms(before.started_ms());
    j->rollout.set_step_ms(before.step_ms());
    j->rollout.set_rollback(before.rollback());
  }
  j->last_event = EventRec{Event::UPDATE, m.time_ms(), revision_, std::move(reason), ""};
  j->state_revision = revision_;
  UpdateJobState(j, m);
}

void CellState::UpdateOnMachine(Task* t, bool restart, const v1::Mutation& m, absl::string_view why,
                                Effects* fx) {
  Machine* mach = t->machine_;
  const ResourceVector limits = t->resources_;
  const int32_t priority = t->priority_;
  DetachFromMachine(t);
  TakeSpec(t);
  AttachToMachine(t, mach);
  if (restart) {
    NewRun(t);  // on the same machine: the agent stops the old run first
    Transition(t, v1::Task::RUNNING, Event::UPDATE, absl::StrCat("restarted for ", why), m, mach->name_);
    fx->machines.push_back(mach->name_);
  } else if (!(limits == t->resources_) || priority != t->priority_) {
    Transition(t, v1::Task::RUNNING, Event::UPDATE, absl::StrCat("updated in place to ", why), m, mach->name_);
    freed_revision_ = revision_;  // limits may have shrunk
    fx->machines.push_back(mach->name_);
  }
}

void CellState::MoveForUpdate(Task* t, const v1::Mutation& m, absl::string_view why, Effects* fx) {
  std::string machine = t->machine_->name_;
  Unplace(t, fx);
  t->phase_ = v1::Task::PHASE_UNSPECIFIED;
  t->pid_ = 0;
  // Transition makes it take the new spec (it is outdated now).
  Transition(t, v1::Task::PENDING, Event::RESCHEDULE, why, m, machine);
  fx->pending_added = true;
}

void CellState::AddVersion(Job* j, const v1::Mutation& m, std::string reason) {
  v1::JobVersion rec;
  rec.set_version(j->version);
  rec.set_revision(revision_);
  rec.set_time_ms(m.time_ms());
  rec.set_actor(m.actor());
  rec.set_reason(std::move(reason));
  *rec.mutable_spec() = j->spec;
  j->versions.push_back(std::move(rec));
  if (j->versions.size() <= Job::kVersions) return;
  absl::flat_hash_set<int64_t> running;
  for (const Task& t : j->tasks) {
    if (t.state_ != v1::Task::DEAD) running.insert(t.job_version_);
  }
  for (auto it = j->versions.begin(); j->versions.size() > Job::kVersions && it + 1 != j->versions.end();) {
    it = running.contains(it->version()) ? it + 1 : j->versions.erase(it);
  }
}

void CellState::ApplyTasksUpdated(const v1::Mutation& m, Effects* fx) {
  const v1::TasksUpdated& u = m.tasks_updated();
  Job* j = MutableJob(u.job());
  const std::string why = absl::StrCat("job version ", j->version, " (rolling update)");
  for (int32_t i : u.restart()) UpdateOnMachine(&j->tasks[i], true, m, why, fx);
  for (int32_t i : u.reschedule()) {
    MoveForUpdate(&j->tasks[i], m, absl::StrCat("moved for ", why, ": it needs another machine"), fx);
  }
  j->state_revision = revision_;
  UpdateJobState(j, m);
}

void CellState::ApplyRolloutChanged(const v1::Mutation& m) {
  const v1::RolloutChanged& c = m.rollout_changed();
  Job* j = MutableJob(c.job());
  j->rollout.set_state(c.state());
  j->rollout.set_message(c.message());
  if (c.promote()) j->rollout.set_promoted(true);
  if (c.state() == v1::Rollout::ROLLING) j->rollout.set_step_ms(m.time_ms());  // the deadline counts anew
  j->state_revision = revision_;
}

}  // namespace herd::cell
