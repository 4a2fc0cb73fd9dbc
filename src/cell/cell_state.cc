#include "cell/cell_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "cell/batch.h"
#include "cell/constraints.h"
#include "cell/job_update.h"
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

ResourceVector CellState::Usage(absl::string_view user, Band band) const {
  auto it = usage_.find(std::make_pair(std::string(user), static_cast<int>(band)));
  return it == usage_.end() ? ResourceVector{} : it->second;
}

const std::vector<std::string>* CellState::FindRequest(absl::string_view request_id) const {
  auto it = requests_.find(request_id);
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

absl::Status CellState::CheckSubmit(const v1::JobsSubmitted& m) const {
  if (m.jobs().empty()) return absl::InvalidArgumentError("submit with no jobs");
  if (!m.request_id().empty() && FindRequest(m.request_id()) != nullptr) {
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

absl::Status CellState::CheckMachineRegistered(const v1::MachineRegistered& m) const {
  HERD_RETURN_IF_ERROR(ValidateMachineName(m.machine().name()));
  if (ResourceVector::FromProto(m.machine().capacity()).AnyNegative()) {
    return absl::InvalidArgumentError(absl::StrCat("machine ", m.machine().name(), ": negative capacity"));
  }
  for (const auto& [k, v] : m.machine().attributes()) HERD_RETURN_IF_ERROR(ValidateAttributeKey(k));
  return absl::OkStatus();
}

absl::Status CellState::CheckQuota(const v1::QuotaSet& m) const {
  HERD_RETURN_IF_ERROR(ValidateUserName(m.quota().user()));
  if (!ParseBand(m.quota().band())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown band '", m.quota().band(),
                                                   "' (free, batch, mid, production, monitoring)"));
  }
  if (ResourceVector::FromProto(m.quota().limit()).AnyNegative()) {
    return absl::InvalidArgumentError("quota must not be negative");
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckUser(const v1::UserSet& m) const {
  HERD_RETURN_IF_ERROR(ValidateUserName(m.user().name()));
  for (const std::string& c : m.user().capabilities()) {
    if (c.empty() || c.size() > 32) return absl::InvalidArgumentError(absl::StrCat("bad capability '", Quote(c), "'"));
  }
  if (m.user().revoked_before_s() < 0) return absl::InvalidArgumentError("revoked_before_s must not be negative");
  return absl::OkStatus();
}

absl::Status CellState::Check(const v1::Mutation& m) const {
  if (m.revision() != 0 && m.revision() != revision_ + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("mutation revision ", m.revision(), " does not follow cell revision ", revision_));
  }
  switch (m.kind_case()) {
    case v1::Mutation::kJobsSubmitted:
      return CheckSubmit(m.jobs_submitted());
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
    case v1::Mutation::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("mutation has no kind");
}

// ---- Apply ------------------------------------------------------------------

absl::Status CellState::Apply(const v1::Mutation& m, Effects* effects) {
  HERD_RETURN_IF_ERROR(Check(m));
  Effects local;
  Effects* fx = effects ? effects : &local;
  fx_ = fx;
  ++revision_;
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
    case v1::Mutation::KIND_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

void CellState::AddUsage(const Task& t, bool add) {
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

void CellState::RecordRequest(const std::string& request_id, std::vector<std::string> jobs) {
  if (request_id.empty()) return;
  requests_[request_id] = std::move(jobs);
  request_order_.push_back(request_id);
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
  RecordRequest(s.request_id(), std::move(ids));
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

absl::Status CellState::CheckReservations(const v1::ReservationsSet& m) const {
  for (const auto& e : m.entries()) {
    const Task* t = FindTask(e.job(), e.index());
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("no task ", TaskName(e.job(), e.index())));
    ResourceVector r = ResourceVector::FromProto(e.reservation());
    if (r.AnyNegative() || !r.FitsIn(t->resources_)) {
      return absl::InvalidArgumentError(absl::StrCat("reservation of ", TaskName(e.job(), e.index()), " (",
                                                     r.ToString(), ") exceeds its limit (", t->resources_.ToString(),
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

void CellState::ApplyReservations(const v1::Mutation& m) {
  for (const auto& e : m.reservations_set().entries()) {
    Task* t = MutableTask(e.job(), e.index());
    if (e.incarnation() != 0 && (t->state_ != v1::Task::RUNNING || t->incarnation_ != e.incarnation())) continue;
    ResourceVector r = ResourceVector::FromProto(e.reservation());
    if (t->machine_ != nullptr && !t->in_alloc()) {
      t->machine_->reserved_ -= t->reservation();
      t->machine_->reserved_ += r;
      if (r.FitsIn(t->reservation()) && !(r == t->reservation())) freed_revision_ = revision_;
    }
    t->reservation_ = r;
    t->state_revision_ = revision_;
  }
}

void CellState::ApplyMachineRegistered(const v1::Mutation& m, Effects* fx) {
  const v1::Machine& in = m.machine_registered().machine();
  Machine* mach = MutableMachine(in.name());
  if (mach == nullptr) {
    auto owned = std::make_unique<Machine>();
    mach = owned.get();
    mach->name_ = in.name();
    mach->order_ = machine_seq_++;
    mach->registered_ms_ = m.time_ms();
    machines_.emplace(in.name(), std::move(owned));
    machine_list_.push_back(mach);
    mach->reason_ = "registered";
  } else {
    mach->reason_ = "re-registered";
  }
  mach->address_ = in.address();
  mach->http_ = in.http();
  mach->capacity_ = ResourceVector::FromProto(in.capacity());
  mach->attributes_ = in.attributes();
  mach->packages_.assign(in.packages().begin(), in.packages().end());
  std::sort(mach->packages_.begin(), mach->packages_.end());
  mach->packages_.erase(std::unique(mach->packages_.begin(), mach->packages_.end()), mach->packages_.end());
  mach->state_ = v1::Machine::UP;
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
  freed_revision_ = revision_;
  machines_revision_ = revision_;
  fx->machines.push_back(mach->name_);
}

void CellState::ApplyMachineDown(const v1::Mutation& m, Effects* fx) {
  Machine* mach = MutableMachine(m.machine_down().name());
  mach->state_ = v1::Machine::DOWN;
  mach->reason_ = m.machine_down().reason();
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
  std::string reason = absl::StrCat("machine ", mach->name_, " down");
  if (!m.machine_down().reason().empty()) absl::StrAppend(&reason, ": ", m.machine_down().reason());
  std::vector<Task*> lost(mach->tasks_.begin(), mach->tasks_.end());
  for (Task* t : lost) {
    Unplace(t, fx);
    t->phase_ = v1::Task::PHASE_UNSPECIFIED;
    t->pid_ = 0;
    Transition(t, v1::Task::PENDING, Event::LOST, reason, m, mach->name_);
    UpdateJobState(t->job_, m);
  }
  if (!lost.empty()) fx->pending_added = true;
  fx->machines.push_back(mach->name_);
}

void CellState::ApplyMachineUp(const v1::Mutation& m) {
  Machine* mach = MutableMachine(m.machine_up().name());
  mach->state_ = v1::Machine::UP;
  mach->reason_ = m.machine_up().reason();
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
  freed_revision_ = revision_;
}

void CellState::ApplyMachineDrained(const v1::Mutation& m, Effects* fx) {
  Machine* mach = MutableMachine(m.machine_drained().name());
  mach->drained_ = m.machine_drained().drained();
  mach->drain_reason_ = mach->drained_ ? m.machine_drained().reason() : "";
  mach->state_revision_ = revision_;
  // Undrained: room to place into again.
  if (!mach->drained_) freed_revision_ = revision_;
  fx->machines.push_back(mach->name_);
}

void CellState::ApplyMachineInterference(const v1::Mutation& m) {
  const v1::MachineInterference& mi = m.machine_interference();
  Machine* mach = MutableMachine(mi.name());
  // Placement on it may change (non-production work avoids a marked machine).
  const bool marked = mi.level() == "mark";
  if (mach->interference_marked() != marked) machines_revision_ = revision_;
  if (mach->interference_marked() && !marked) freed_revision_ = revision_;  // room for non-production work again
  mach->interference_ = mi.level();
  mach->interference_reason_ = mi.level().empty() ? "" : mi.reason();
}

void CellState::ApplyMachinePackages(const v1::Mutation& m) {
  Machine* mach = MutableMachine(m.machine_packages().name());
  mach->packages_.assign(m.machine_packages().packages().begin(), m.machine_packages().packages().end());
  std::sort(mach->packages_.begin(), mach->packages_.end());
  mach->packages_.erase(std::unique(mach->packages_.begin(), mach->packages_.end()), mach->packages_.end());
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
}

void CellState::ApplyUser(const v1::Mutation& m) {
  const v1::User& u = m.user_set().user();
  if (u.capabilities().empty() && u.revoked_before_s() == 0) {
    users_.erase(u.name());
  } else {
    users_[u.name()] = u;
  }
}

void CellState::ApplyQuota(const v1::Mutation& m) {
  const v1::Quota& q = m.quota_set().quota();
  quotas_[std::make_pair(q.user(), q.band())] = q;
}

}  // namespace herd::cell
