// CellState: the task family of mutations (TaskScheduled, TaskObserved,
// TaskExited, TaskLost, TaskRescheduled): their Check and Apply halves.
#include "cell/cell_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ids.h"
#include "base/status.h"
#include "cell/constraints.h"

namespace herd::cell {

using v1::Event;

absl::Status CellState::CheckScheduled(const v1::TaskScheduled& m) const {
  const Task* t = FindTask(m.job(), m.index());
  std::string name = TaskName(m.job(), m.index());
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("no task ", name));
  if (t->state_ != v1::Task::PENDING) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", name, " is ", v1::Task::State_Name(t->state_), ", not PENDING"));
  }
  if (t->job_->waiting()) {
    return absl::FailedPreconditionError(absl::StrCat("task ", name, " waits for ",
                                                      absl::StrJoin(t->job_->spec.after(), ", "), " (after:)"));
  }
  if (m.expect_state_revision() != 0 && t->state_revision_ != m.expect_state_revision()) {
    return absl::FailedPreconditionError(absl::StrCat("task ", name, " changed at revision ", t->state_revision_,
                                                      " (proposal expected ", m.expect_state_revision(), ")"));
  }
  const Machine* mach = FindMachine(m.machine());
  if (mach == nullptr) return absl::NotFoundError(absl::StrCat("no machine ", m.machine()));
  if (mach->state_ != v1::Machine::UP) {
    return absl::FailedPreconditionError(absl::StrCat("machine ", m.machine(), " is not up"));
  }
  if (t->in_alloc()) {
    const Task* a = AllocOf(*t);
    const std::string alloc = TaskName(t->job_->spec.alloc(), t->index_);
    if (a == nullptr || a->state_ != v1::Task::RUNNING) {
      return absl::FailedPreconditionError(absl::StrCat("task ", name, " runs in alloc ", alloc, ", which is ",
                                                        a == nullptr ? "gone" : v1::Task::State_Name(a->state_)));
    }
    if (a->machine_ != mach) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", name, " runs in alloc ", alloc, " on ", a->machine_->name_, ", not on ", m.machine()));
    }
    if (m.victims_size() > 0) {
      return absl::InvalidArgumentError(absl::StrCat("task ", name, " runs in an alloc: it preempts nothing"));
    }
    const ResourceVector avail = AllocFree(*a);
    if (auto dim = t->resources_.FirstShortfall(avail)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", name, " does not fit in alloc ", alloc, ": ", *dim, " asks ",
          FormatDimension(*dim, t->resources_.Get(*dim)), ", ", FormatDimension(*dim, avail.Get(*dim)), " free"));
    }
    return absl::OkStatus();
  }
  for (const v1::Constraint& c : t->job_->spec.constraints()) {
    if (!c.soft() && !Matches(c, mach->attributes_)) {
      return absl::FailedPreconditionError(
          absl::StrCat("machine ", m.machine(), " does not satisfy constraint ", Describe(c)));
    }
  }
  const bool prod = IsProd(t->priority());
  ResourceVector avail = mach->FreeFor(t->priority());
  absl::flat_hash_set<const Task*> victims;
  for (const v1::TaskRef& ref : m.victims()) {
    const Task* v = nullptr;
    HERD_RETURN_IF_ERROR(CheckRef(ref, &v));
    if (v->machine_ != mach) {
      return absl::FailedPreconditionError(
          absl::StrCat("victim ", TaskName(ref.job(), ref.index()), " does not run on ", m.machine()));
    }
    if (v->in_alloc()) {
      return absl::FailedPreconditionError(absl::StrCat("victim ", TaskName(ref.job(), ref.index()),
                                                        " runs in an alloc: preempting it frees nothing"));
    }
    if (!MayPreempt(t->priority(), v->priority())) {
      return absl::FailedPreconditionError(absl::StrCat("task ", name, " (priority ", t->priority(),
                                                        ") may not preempt ", TaskName(ref.job(), ref.index()),
                                                        " (priority ", v->priority(), ")"));
    }
    if (!victims.insert(v).second) return absl::InvalidArgumentError("victim listed twice");
    avail += prod ? v->resources_ : v->reservation();
  }
  if (auto dim = t->resources_.FirstShortfall(avail)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", name, " does not fit on ", m.machine(), ": ", *dim, " asks ",
        FormatDimension(*dim, t->resources_.Get(*dim)), ", ", FormatDimension(*dim, avail.Get(*dim)), " free"));
  }
  return absl::OkStatus();
}

void CellState::ApplyScheduled(const v1::Mutation& m, Effects* fx) {
  const v1::TaskScheduled& s = m.task_scheduled();
  Task* t = MutableTask(s.job(), s.index());
  Machine* mach = MutableMachine(s.machine());
  std::string me = TaskName(s.job(), s.index());
  for (const v1::TaskRef& ref : s.victims()) {
    Task* v = MutableTask(ref.job(), ref.index());
    Unplace(v, fx);
    v->phase_ = v1::Task::PHASE_UNSPECIFIED;
    v->pid_ = 0;
    Transition(v, v1::Task::PENDING, Event::EVICT,
               absl::StrCat("preempted by ", me, " (priority ", t->priority(), ") on ", mach->name_), m, mach->name_);
    fx->pending_added = true;
    UpdateJobState(v->job_, m);
  }
  // Placed again, it starts from its limit: the estimate was of its last
  // run (Borg §5.5: the initial reservation is the limit). A task never
  // placed keeps one set ahead (the simulator's modelled reservations).
  if (t->incarnation_ > 0) t->reservation_.reset();
  Place(t, mach, fx);
  NewRun(t);
  // Who placed it (the scheduler's name) when several schedulers may race.
  std::string reason = absl::StrCat("scheduled on ", mach->name_);
  if (!m.actor().empty()) absl::StrAppend(&reason, " by ", m.actor());
  if (s.victims_size() > 0) absl::StrAppend(&reason, ", preempting ", s.victims_size(), " task(s)");
  Transition(t, v1::Task::RUNNING, Event::SCHEDULE, reason, m, mach->name_);
  UpdateJobState(t->job_, m);
}

void CellState::ApplyObserved(const v1::Mutation& m) {
  const v1::TaskObserved& o = m.task_observed();
  Task* t = MutableTask(o.task().job(), o.task().index());
  t->phase_ = o.phase();
  t->pid_ = o.pid();
  t->restarts_ = o.restarts();
  t->exit_code_ = o.exit_code();
  t->exit_signal_ = o.exit_signal();
  t->message_ = o.message();
  t->started_ms_ = o.started_ms();
  t->SetAgentInfo(o.ports(), o.health());
  t->state_revision_ = revision_;
}

void CellState::ApplyExited(const v1::Mutation& m, Effects* fx) {
  const v1::TaskExited& e = m.task_exited();
  Task* t = MutableTask(e.task().job(), e.task().index());
  std::string machine = t->machine_->name_;
  Unplace(t, fx);
  t->phase_ = v1::Task::EXITED;
  t->exit_code_ = e.exit_code();
  t->exit_signal_ = e.exit_signal();
  t->restarts_ = e.restarts();
  t->pid_ = 0;
  bool ok = e.exit_code() == 0 && e.exit_signal() == 0;
  std::string reason = e.reason();
  if (reason.empty()) {
    reason = e.exit_signal() != 0 ? absl::StrCat("killed by signal ", e.exit_signal())
                                  : absl::StrCat("exited with code ", e.exit_code());
    if (e.restarts() > 0) absl::StrAppend(&reason, " after ", e.restarts(), " restart(s)");
  }
  Transition(t, v1::Task::DEAD, ok ? Event::FINISH : Event::FAIL, reason, m, machine);
  UpdateJobState(t->job_, m);
}

void CellState::ApplyLost(const v1::Mutation& m, Effects* fx) {
  const v1::TaskLost& l = m.task_lost();
  Task* t = MutableTask(l.task().job(), l.task().index());
  std::string machine = t->machine_->name_;
  Unplace(t, fx);
  t->phase_ = v1::Task::PHASE_UNSPECIFIED;
  t->pid_ = 0;
  Transition(t, v1::Task::PENDING, Event::LOST, l.reason().empty() ? "lost" : l.reason(), m, machine);
  fx->pending_added = true;
  UpdateJobState(t->job_, m);
}

void CellState::ApplyRescheduled(const v1::Mutation& m, Effects* fx) {
  const v1::TaskRescheduled& r = m.task_rescheduled();
  Task* t = MutableTask(r.task().job(), r.task().index());
  std::string machine = t->machine_->name_;
  Unplace(t, fx);
  t->phase_ = v1::Task::PHASE_UNSPECIFIED;
  t->pid_ = 0;
  if (r.avoid_until_ms() > 0) {
    // Keep the list short: drop expired entries and any older one for this machine.
    auto& av = t->avoid_;
    av.erase(std::remove_if(av.begin(), av.end(),
                            [&](const auto& e) { return e.second <= m.time_ms() || e.first == machine; }),
             av.end());
    av.emplace_back(machine, r.avoid_until_ms());
  }
  Transition(t, v1::Task::PENDING, Event::RESCHEDULE, r.reason().empty() ? "rescheduled" : r.reason(), m, machine);
  fx->pending_added = true;
  UpdateJobState(t->job_, m);
}

}  // namespace herd::cell
