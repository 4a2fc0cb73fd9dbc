#include "cell/cell_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/exhaustive.h"
#include "base/ids.h"
#include "base/status.h"
#include "cell/task_template.h"

namespace herd::cell {

using v1::Event;

// ---- small types -------------------------------------------------------------

void EventRec::ToProto(v1::Event* out) const {
  out->set_transition(transition);
  out->set_reason(reason);
  out->set_time_ms(time_ms);
  out->set_revision(revision);
  out->set_machine(machine);
}

bool Task::AvoidsMachine(absl::string_view machine, int64_t now_ms) const {
  for (const auto& [name, until] : avoid_) {
    if (name == machine && until > now_ms) return true;
  }
  return false;
}

bool Machine::HasPackage(absl::string_view sha256) const {
  return std::binary_search(packages_.begin(), packages_.end(), sha256,
                            [](absl::string_view a, absl::string_view b) { return a < b; });
}

bool Task::outdated() const { return job_version_ < job_->version; }
bool Task::in_alloc() const { return !job_->spec.alloc().empty(); }
bool Task::is_alloc() const { return job_->spec.alloc_set(); }

v1::Task Task::ToProto() const {
  v1::Task t;
  t.set_job(job_->id);
  t.set_index(index_);
  t.set_state(state_);
  t.set_phase(phase_);
  t.set_priority(priority());
  resources_.ToProto(t.mutable_resources());
  t.set_machine(machine_ ? machine_->name() : last_machine_);
  t.set_incarnation(incarnation_);
  t.set_restarts(restarts_);
  t.set_exit_code(exit_code_);
  t.set_exit_signal(exit_signal_);
  t.set_pid(pid_);
  if (!history_.empty()) history_.back().ToProto(t.mutable_last_event());
  for (const EventRec& e : history_) e.ToProto(t.add_history());
  t.set_state_revision(state_revision_);
  t.set_message(message_);
  t.set_started_ms(started_ms_);
  if (agent_info_) {
    for (const auto& [name, port] : agent_info_->ports) (*t.mutable_ports())[name] = port;
    t.set_health(agent_info_->health);
  }
  if (reservation_) reservation_->ToProto(t.mutable_reservation());
  for (const auto& [machine, until] : avoid_) {
    v1::AvoidMachine* a = t.add_avoid();
    a->set_machine(machine);
    a->set_until_ms(until);
  }
  t.set_job_version(job_version_);
  return t;
}

const v1::JobVersion* Job::FindVersion(int64_t v) const {
  for (const v1::JobVersion& rec : versions) {
    if (rec.version() == v) return &rec;
  }
  return nullptr;
}

const v1::JobSpec& Job::SpecAt(int64_t v) const {
  if (v == version) return spec;
  const v1::JobVersion* rec = FindVersion(v);
  return rec ? rec->spec() : spec;
}

v1::Job Job::ToProto(bool with_versions) const {
  v1::Job j;
  j.set_id(id);
  *j.mutable_spec() = spec;
  j.set_state(state);
  j.set_submit_time_ms(submit_time_ms);
  j.set_submit_revision(submit_revision);
  j.set_request_id(request_id);
  j.set_pending(pending);
  j.set_running(running);
  j.set_dead(dead);
  last_event.ToProto(j.mutable_last_event());
  j.set_state_revision(state_revision);
  j.set_version(version);
  j.set_version_revision(version_revision);
  if (rollout.state() != v1::Rollout::ROLLOUT_STATE_UNSPECIFIED) {
    *j.mutable_rollout() = rollout;
    int32_t outdated = 0;
    for (const Task& t : tasks) outdated += t.state() != v1::Task::DEAD && t.job_version() != rollout.version();
    j.mutable_rollout()->set_outdated(outdated);
  }
  if (with_versions) {
    for (const v1::JobVersion& rec : versions) *j.add_versions() = rec;
  }
  for (const v1::ScheduledRun& r : runs) *j.add_runs() = r;
  j.set_last_due_ms(last_due_ms);
  j.set_scheduled_by(scheduled_by);
  return j;
}

v1::Machine Machine::ToProto() const {
  v1::Machine m;
  m.set_name(name_);
  m.set_address(address_);
  m.set_http(http_);
  capacity_.ToProto(m.mutable_capacity());
  *m.mutable_attributes() = attributes_;
  m.set_state(state_);
  m.set_drained(drained_);
  m.set_drain_reason(drain_reason_);
  allocated_.ToProto(m.mutable_allocated());
  m.set_task_count(static_cast<int32_t>(tasks_.size()));
  m.set_reason(reason_);
  m.set_state_revision(state_revision_);
  m.set_state_ms(state_ms_);
  m.set_registered_ms(registered_ms_);
  for (const auto& p : packages_) m.add_packages(p);
  m.set_interference(interference_);
  m.set_interference_reason(interference_reason_);
  return m;
}

bool PendingOrder::operator()(const Task* a, const Task* b) const {
  int32_t pa = a->priority(), pb = b->priority();
  if (pa != pb) return pa > pb;
  if (a->job() != b->job()) return a->job()->id < b->job()->id;
  return a->index() < b->index();
}

bool TaskKeyOrder::operator()(const Task* a, const Task* b) const {
  if (a->job() != b->job()) return a->job()->id < b->job()->id;
  return a->index() < b->index();
}

// ---- CellState: lookups -------------------------------------------------------

CellState::CellState(std::string cell_name) : cell_name_(std::move(cell_name)) {}

const Job* CellState::FindJob(absl::string_view id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

Job* CellState::MutableJob(absl::string_view id) { return const_cast<Job*>(FindJob(id)); }

const Task* CellState::FindTask(absl::string_view job_id, int32_t index) const {
  const Job* j = FindJob(job_id);
  if (j == nullptr || index < 0 || index >= static_cast<int32_t>(j->tasks.size())) return nullptr;
  return &j->tasks[index];
}

Task* CellState::MutableTask(absl::string_view job_id, int32_t index) {
  return const_cast<Task*>(FindTask(job_id, index));
}

const Machine* CellState::FindMachine(absl::string_view name) const {
  auto it = machines_.find(name);
  return it == machines_.end() ? nullptr : it->second.get();
}

Machine* CellState::MutableMachine(absl::string_view name) { return const_cast<Machine*>(FindMachine(name)); }

const v1::Quota* CellState::FindQuota(absl::string_view user, Band band) const {
  auto it = quotas_.find(std::make_pair(std::string(user), std::string(BandName(band))));
  return it == quotas_.end() ? nullptr : &it->second;
}

int64_t CellState::LiveTasks(absl::string_view user) const {
  auto it = live_tasks_.find(user);
  return it == live_tasks_.end() ? 0 : it->second;
}

ResourceVector CellState::Usage(absl::string_view user, Band band) const {
  auto it = usage_.find(std::make_pair(std::string(user), static_cast<int>(band)));
  return it == usage_.end() ? ResourceVector{} : it->second;
}

const std::vector<std::string>* CellState::FindRequest(absl::string_view user, absl::string_view request_id) const {
  auto it = requests_.find(RequestKey(std::string(user), std::string(request_id)));
  return it == requests_.end() ? nullptr : &it->second;
}

const Task* CellState::AllocOf(const Task& t) const {
  if (!t.in_alloc()) return nullptr;
  const Job* set = FindJob(t.job_->spec.alloc());
  if (set == nullptr || !set->alloc_set() || t.index_ >= static_cast<int32_t>(set->tasks.size())) return nullptr;
  return &set->tasks[t.index_];
}

ResourceVector CellState::AllocFree(const Task& alloc) const {
  ResourceVector free = alloc.resources_;
  if (auto it = alloc_used_.find(std::make_pair(alloc.job_->id, alloc.index_)); it != alloc_used_.end()) {
    free -= it->second;
  }
  return free;
}

std::vector<std::string> CellState::AllocMembers(absl::string_view alloc_set) const {
  auto it = alloc_members_.find(alloc_set);
  if (it == alloc_members_.end()) return {};
  return std::vector<std::string>(it->second.begin(), it->second.end());
}

std::vector<const Task*> CellState::TasksInAlloc(const Task& alloc) const {
  std::vector<const Task*> out;
  for (const std::string& id : AllocMembers(alloc.job_->id)) {
    const Task* t = FindTask(id, alloc.index_);
    if (t != nullptr && t->state_ == v1::Task::RUNNING) out.push_back(t);
  }
  return out;
}

int64_t CellState::placed_revision(int32_t priority) const {
  if (priority < 0) return 0;
  return placed_revision_[std::min<int32_t>(priority, kMaxPriority)];
}

int64_t CellState::task_count(v1::Task::State s) const {
  int i = static_cast<int>(s);
  return (i >= 0 && i < 4) ? task_counts_[i] : 0;
}

// ---- Check ------------------------------------------------------------------

absl::Status CellState::CheckRef(const v1::TaskRef& ref, const Task** out) const {
  const Task* t = FindTask(ref.job(), ref.index());
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("no task ", TaskName(ref.job(), ref.index())));
  if (t->state_ != v1::Task::RUNNING || t->incarnation_ != ref.incarnation()) {
    return absl::FailedPreconditionError(absl::StrCat("task ", TaskName(ref.job(), ref.index()), " incarnation ",
                                                      ref.incarnation(), " is not running (state ",
                                                      v1::Task::State_Name(t->state_), ", incarnation ",
                                                      t->incarnation_, ")"));
  }
  if (out) *out = t;
  return absl::OkStatus();
}

absl::Status CellState::Check(const v1::Mutation& m) const {
  if (m.revision() != 0 && m.revision() != revision_ + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("mutation revision ", m.revision(), " does not follow cell revision ", revision_));
  }
  HERD_EXHAUSTIVE_BEGIN
  switch (m.kind_case()) {
    case v1::Mutation::kJobsSubmitted:
      return CheckSubmit(m);
    case v1::Mutation::kJobKilled:
      return CheckKill(m.job_killed());
    case v1::Mutation::kJobUpdated:
      return CheckJobUpdated(m.job_updated());
    case v1::Mutation::kTasksUpdated:
      return CheckTasksUpdated(m.tasks_updated());
    case v1::Mutation::kRolloutChanged:
      return CheckRolloutChanged(m.rollout_changed());
    case v1::Mutation::kJobReleased:
      return CheckJobReleased(m.job_released());
    case v1::Mutation::kScheduleTriggered:
      return CheckScheduleTriggered(m.schedule_triggered());
    case v1::Mutation::kTaskScheduled:
      return CheckScheduled(m.task_scheduled());
    case v1::Mutation::kTaskObserved:
      return CheckRef(m.task_observed().task(), nullptr);
    case v1::Mutation::kTaskExited:
      return CheckRef(m.task_exited().task(), nullptr);
    case v1::Mutation::kTaskLost:
      return CheckRef(m.task_lost().task(), nullptr);
    case v1::Mutation::kTaskRescheduled:
      return CheckRef(m.task_rescheduled().task(), nullptr);
    case v1::Mutation::kReservationsSet:
      return CheckReservations(m.reservations_set());
    case v1::Mutation::kMachineRegistered:
      return CheckMachineRegistered(m.machine_registered());
    case v1::Mutation::kMachineDown: {
      const Machine* mach = FindMachine(m.machine_down().name());
      if (mach == nullptr) return absl::NotFoundError(absl::StrCat("no machine ", m.machine_down().name()));
      if (mach->state_ == v1::Machine::DOWN) {
        return absl::FailedPreconditionError(absl::StrCat("machine ", mach->name_, " is already down"));
      }
      return absl::OkStatus();
    }
    case v1::Mutation::kMachineUp: {
      const Machine* mach = FindMachine(m.machine_up().name());
      if (mach == nullptr) return absl::NotFoundError(absl::StrCat("no machine ", m.machine_up().name()));
      if (mach->state_ == v1::Machine::UP) {
        return absl::FailedPreconditionError(absl::StrCat("machine ", mach->name_, " is already up"));
      }
      return absl::OkStatus();
    }
    case v1::Mutation::kMachineDrained:
      if (FindMachine(m.machine_drained().name()) == nullptr) {
        return absl::NotFoundError(absl::StrCat("no machine ", m.machine_drained().name()));
      }
      return absl::OkStatus();
    case v1::Mutation::kMachineInterference: {
      const v1::MachineInterference& mi = m.machine_interference();
      if (FindMachine(mi.name()) == nullptr) return absl::NotFoundError(absl::StrCat("no machine ", mi.name()));
      const std::string& l = mi.level();
      if (!l.empty() && l != "throttle" && l != "evict" && l != "mark") {
        return absl::InvalidArgumentError(
            absl::StrCat("interference level '", l, "' is none of \"\", throttle, evict, mark"));
      }
      if (mi.reason().size() > 1024) return absl::InvalidArgumentError("interference reason over 1 KiB");
      return absl::OkStatus();
    }
    case v1::Mutation::kMachinePackages:
      if (FindMachine(m.machine_packages().name()) == nullptr) {
        return absl::NotFoundError(absl::StrCat("no machine ", m.machine_packages().name()));
      }
      return absl::OkStatus();
    case v1::Mutation::kQuotaSet:
      return CheckQuota(m.quota_set());
    case v1::Mutation::kUserSet:
      return CheckUser(m.user_set());
    case v1::Mutation::kJoinTokenSet:
      return CheckJoinToken(m.join_token_set());
    case v1::Mutation::KIND_NOT_SET:
      break;
  }
  HERD_EXHAUSTIVE_END
  return absl::InvalidArgumentError("mutation has no kind");
}

// ---- Apply ------------------------------------------------------------------

absl::Status CellState::Apply(const v1::Mutation& m, Effects* effects) {
  HERD_RETURN_IF_ERROR(Check(m));
  Effects local;
  Effects* fx = effects ? effects : &local;
  fx_ = fx;
  ++revision_;
  HERD_EXHAUSTIVE_BEGIN
  switch (m.kind_case()) {
    case v1::Mutation::kJobsSubmitted:
      ApplySubmit(m, fx);
      break;
    case v1::Mutation::kJobKilled:
      ApplyKill(m, fx);
      break;
    case v1::Mutation::kJobUpdated:
      ApplyJobUpdated(m, fx);
      break;
    case v1::Mutation::kTasksUpdated:
      ApplyTasksUpdated(m, fx);
      break;
    case v1::Mutation::kRolloutChanged:
      ApplyRolloutChanged(m);
      break;
    case v1::Mutation::kJobReleased:
      ApplyJobReleased(m, fx);
      break;
    case v1::Mutation::kScheduleTriggered:
      ApplyScheduleTriggered(m, fx);
      break;
    case v1::Mutation::kTaskScheduled:
      ApplyScheduled(m, fx);
      break;
    case v1::Mutation::kTaskObserved:
      ApplyObserved(m);
      break;
    case v1::Mutation::kTaskExited:
      ApplyExited(m, fx);
      break;
    case v1::Mutation::kTaskLost:
      ApplyLost(m, fx);
      break;
    case v1::Mutation::kTaskRescheduled:
      ApplyRescheduled(m, fx);
      break;
    case v1::Mutation::kReservationsSet:
      ApplyReservations(m);
      break;
    case v1::Mutation::kMachineRegistered:
      ApplyMachineRegistered(m, fx);
      break;
    case v1::Mutation::kMachineDown:
      ApplyMachineDown(m, fx);
      break;
    case v1::Mutation::kMachineUp:
      ApplyMachineUp(m);
      break;
    case v1::Mutation::kMachineDrained:
      ApplyMachineDrained(m, fx);
      break;
    case v1::Mutation::kMachinePackages:
      ApplyMachinePackages(m);
      break;
    case v1::Mutation::kMachineInterference:
      ApplyMachineInterference(m);
      break;
    case v1::Mutation::kQuotaSet:
      ApplyQuota(m);
      break;
    case v1::Mutation::kUserSet:
      ApplyUser(m);
      break;
    case v1::Mutation::kJoinTokenSet:
      ApplyJoinToken(m);
      break;
    case v1::Mutation::KIND_NOT_SET:
      break;
  }
  HERD_EXHAUSTIVE_END
  return absl::OkStatus();
}

void CellState::AddUsage(const Task& t, bool add) {
  {
    int64_t& n = live_tasks_[t.job_->spec.user()];
    n += add ? 1 : -1;
    if (n <= 0) live_tasks_.erase(t.job_->spec.user());
  }
  if (t.in_alloc()) return;  // its alloc set's tasks are charged
  auto key = std::make_pair(t.job_->spec.user(), static_cast<int>(BandOf(t.priority())));
  ResourceVector& u = usage_[key];
  if (add) {
    u += t.resources_;
  } else {
    u -= t.resources_;
    if (u.IsZero()) usage_.erase(key);
  }
}

void CellState::Transition(Task* t, v1::Task::State to, Event::Transition why, absl::string_view reason,
                           const v1::Mutation& m, absl::string_view machine) {
  v1::Task::State from = t->state_;
  if (from != to) {
    --task_counts_[from];
    ++task_counts_[to];
    Job* j = t->job_;
    auto bump = [&](v1::Task::State s, int d) {
      if (s == v1::Task::PENDING) j->pending += d;
      if (s == v1::Task::RUNNING) j->running += d;
      if (s == v1::Task::DEAD) j->dead += d;
    };
    bump(from, -1);
    bump(to, +1);
    if (from == v1::Task::PENDING) pending_.erase(t);
    if (to == v1::Task::PENDING) {
      // Placed again, it runs the job's current spec: an outdated task
      // (held back by a rolling update) catches up now.
      if (t->outdated()) TakeSpec(t);
      Enqueue(t);
    }
    if (to == v1::Task::DEAD) AddUsage(*t, false);
  }
  t->state_ = to;
  t->state_revision_ = revision_;
  t->history_.push_back(EventRec{why, m.time_ms(), revision_, std::string(reason), std::string(machine)});
  if (t->history_.size() > Task::kHistory) t->history_.erase(t->history_.begin());
  // An alloc that leaves its machine takes its tasks with it.
  if (from == v1::Task::RUNNING && to != v1::Task::RUNNING && t->is_alloc()) EvictFromAlloc(*t, m, fx_);
}

void CellState::EvictFromAlloc(const Task& alloc, const v1::Mutation& m, Effects* fx) {
  const std::string name = TaskName(alloc.job_->id, alloc.index_);
  const std::string why = alloc.last_event() ? alloc.last_event()->reason : "";
  for (const std::string& id : AllocMembers(alloc.job_->id)) {
    Task* t = MutableTask(id, alloc.index_);
    if (t == nullptr || t->state_ != v1::Task::RUNNING) continue;
    std::string machine = t->machine_->name_;
    Unplace(t, fx);
    t->phase_ = v1::Task::PHASE_UNSPECIFIED;
    t->pid_ = 0;
    Transition(t, v1::Task::PENDING, Event::RESCHEDULE,
               absl::StrCat("its alloc ", name, " left ", machine, why.empty() ? "" : ": ", why), m, machine);
    fx->pending_added = true;
    UpdateJobState(t->job_, m);
  }
}

void CellState::AttachToMachine(Task* t, Machine* mach) {
  t->machine_ = mach;
  if (t->in_alloc()) {
    mach->tasks_.insert(t);
    alloc_used_[std::make_pair(t->job_->spec.alloc(), t->index_)] += t->resources_;
    return;
  }
  mach->allocated_ += t->resources_;
  mach->reserved_ += t->reservation();
  mach->tasks_.insert(t);
  (IsProd(t->priority()) ? mach->prod_cpu_ : mach->nonprod_cpu_) += t->resources_.cpu_millis;
  ++mach->priorities_[t->priority()];
}

void CellState::DetachFromMachine(Task* t) {
  Machine* mach = t->machine_;
  if (t->in_alloc()) {
    mach->tasks_.erase(t);
    auto key = std::make_pair(t->job_->spec.alloc(), t->index_);
    ResourceVector& used = alloc_used_[key];
    used -= t->resources_;
    if (used.IsZero()) alloc_used_.erase(key);
    t->machine_ = nullptr;
    return;
  }
  mach->allocated_ -= t->resources_;
  mach->reserved_ -= t->reservation();
  mach->tasks_.erase(t);
  (IsProd(t->priority()) ? mach->prod_cpu_ : mach->nonprod_cpu_) -= t->resources_.cpu_millis;
  if (auto it = mach->priorities_.find(t->priority()); it != mach->priorities_.end() && --it->second == 0) {
    mach->priorities_.erase(it);
  }
  t->machine_ = nullptr;
}

void CellState::Place(Task* t, Machine* mach, Effects* fx) {
  AttachToMachine(t, mach);
  t->last_machine_ = mach->name_;
  placed_revision_[std::clamp<int32_t>(t->priority(), 0, kMaxPriority)] = revision_;
  // A new alloc is room for the tasks that run in it.
  if (t->is_alloc()) freed_revision_ = revision_;
  fx->machines.push_back(mach->name_);
}

void CellState::Unplace(Task* t, Effects* fx) {
  Machine* mach = t->machine_;
  if (mach == nullptr) return;
  DetachFromMachine(t);
  t->agent_info_.reset();  // its ports and health were of that machine's run
  freed_revision_ = revision_;
  fx->machines.push_back(mach->name_);
}

void CellState::UpdateJobState(Job* j, const v1::Mutation& m, const std::string* kill_reason) {
  v1::Job::State s;
  const int32_t total = static_cast<int32_t>(j->tasks.size());
  if (j->scheduled()) {
    // No tasks: SCHEDULED until killed.
    s = kill_reason != nullptr ? v1::Job::DEAD : j->state;
  } else if (j->dead == total) {
    s = v1::Job::DEAD;
  } else if (j->waiting()) {
    s = v1::Job::WAITING;  // until JobReleased
  } else if (j->running > 0) {
    s = v1::Job::RUNNING;
  } else {
    s = v1::Job::PENDING;
  }
  if (s == j->state) return;
  j->state = s;
  j->state_revision = revision_;
  Event::Transition why = Event::UPDATE;
  std::string reason;
  if (s == v1::Job::RUNNING) {
    why = Event::SCHEDULE;
    reason = "a task started";
  } else if (s == v1::Job::PENDING) {
    why = Event::RESCHEDULE;
    reason = "no task running";
  } else {
    // Dead: killed if any task was killed last, else finished or failed.
    bool any_failed = false;
    std::string failed_reason;
    for (const Task& t : j->tasks) {
      if (t.last_event() && t.last_event()->transition == Event::FAIL) {
        if (!any_failed) failed_reason = t.last_event()->reason;
        any_failed = true;
      }
    }
    if (kill_reason != nullptr) {
      why = Event::KILL;
      reason = kill_reason->empty() ? "killed" : *kill_reason;
    } else if (m.has_job_released()) {
      why = Event::FAIL;
      reason = failed_reason;  // "dependency D failed: ..."
    } else {
      why = any_failed ? Event::FAIL : Event::FINISH;
      reason = any_failed ? "every task is dead; some failed" : "every task finished";
    }
  }
  j->last_event = EventRec{why, m.time_ms(), revision_, std::move(reason), ""};
  if (s == v1::Job::DEAD && !j->scheduled_by.empty()) RecordRunOutcome(*j);
  if (s == v1::Job::DEAD && !j->spec.alloc().empty()) {
    if (auto it = alloc_members_.find(j->spec.alloc()); it != alloc_members_.end()) {
      it->second.erase(j->id);
      if (it->second.empty()) alloc_members_.erase(it);
    }
  }
}

void CellState::RecordRunOutcome(const Job& run) {
  Job* parent = MutableJob(run.scheduled_by);
  if (parent == nullptr || !parent->scheduled()) return;
  for (v1::ScheduledRun& r : parent->runs) {
    if (r.job() != run.id || r.outcome() != v1::ScheduledRun::STARTED) continue;
    const Event::Transition why = run.last_event.transition;
    r.set_outcome(why == Event::FINISH ? v1::ScheduledRun::SUCCEEDED
                  : why == Event::KILL ? v1::ScheduledRun::KILLED
                                       : v1::ScheduledRun::FAILED);
    r.set_message(run.last_event.reason);
    r.set_end_ms(run.last_event.time_ms);
  }
}

std::string CellState::RequestUser(const v1::Mutation& m) {
  if (!m.actor().empty()) return m.actor();
  const auto& jobs = m.jobs_submitted().jobs();
  return jobs.empty() ? std::string() : jobs[0].user();
}

void CellState::RecordRequest(const std::string& user, const std::string& request_id, std::vector<std::string> jobs) {
  if (request_id.empty()) return;
  RequestKey key(user, request_id);
  if (requests_.contains(key)) return;  // recorded once; CheckSubmit refuses a reuse
  requests_[key] = std::move(jobs);
  request_order_.push_back(std::move(key));
  while (request_order_.size() > kMaxRequestIds) {
    requests_.erase(request_order_.front());
    request_order_.pop_front();
  }
}

void CellState::Enqueue(Task* t) {
  if (!t->job_->waiting()) pending_.insert(t);
}

Job* CellState::CreateJob(const v1::JobSpec& spec, const v1::Mutation& m, const std::string& request_id,
                          const std::string& reason, Effects* fx) {
  std::string id = JobId(spec.user(), spec.name());
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    // A dead job being submitted again (Figure 2: DEAD -> submit -> PENDING).
    task_counts_[v1::Task::DEAD] -= static_cast<int64_t>(it->second->tasks.size());
    jobs_.erase(it);
  }
  auto job = std::make_unique<Job>();
  job->id = id;
  job->spec = spec;
  job->state = spec.schedule().empty() ? (spec.after().empty() ? v1::Job::PENDING : v1::Job::WAITING)
                                       : v1::Job::SCHEDULED;
  job->submit_time_ms = m.time_ms();
  job->submit_revision = revision_;
  job->state_revision = revision_;
  job->request_id = request_id;
  job->version = 1;
  job->version_revision = revision_;
  job->last_due_ms = job->scheduled() ? m.time_ms() : 0;
  std::string event = reason;
  if (job->waiting()) {
    absl::StrAppend(&event, "; waiting for ", absl::StrJoin(spec.after(), ", "), " to finish (after:)");
  }
  job->last_event = EventRec{Event::SUBMIT, m.time_ms(), revision_, event, ""};
  const int32_t count = job->scheduled() ? 0 : spec.task_count();
  job->tasks.resize(count);
  AddVersion(job.get(), m, reason);
  Job* j = job.get();
  jobs_.emplace(id, std::move(job));
  if (!spec.alloc().empty()) alloc_members_[spec.alloc()].insert(id);
  for (int32_t i = 0; i < count; ++i) {
    Task& t = j->tasks[i];
    t.job_ = j;
    t.index_ = i;
    t.priority_ = spec.priority();
    t.state_ = v1::Task::PENDING;
    t.resources_ = TaskResources(spec, i);
    t.job_version_ = 1;
    t.state_revision_ = revision_;
    t.history_.push_back(EventRec{Event::SUBMIT, m.time_ms(), revision_, event, ""});
    ++task_counts_[v1::Task::PENDING];
    Enqueue(&t);
    AddUsage(t, true);
  }
  j->pending = count;
  if (count > 0 && !j->waiting()) fx->pending_added = true;
  return j;
}

}  // namespace herd::cell
