// CellState <-> CellSnapshot (the snapshot half of a checkpoint).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/status.h"
#include "cell/cell_state.h"

namespace herd::cell {

namespace {
EventRec FromProto(const v1::Event& e) {
  return EventRec{e.transition(), e.time_ms(), e.revision(), e.reason(), e.machine()};
}
}  // namespace

v1::CellSnapshot CellState::ToSnapshot() const {
  v1::CellSnapshot s;
  s.set_revision(revision_);
  s.set_cell(cell_name_);
  for (const auto& [id, job] : jobs_) {
    *s.add_jobs() = job->ToProto(/*with_versions=*/true);
    for (const Task& t : job->tasks) *s.add_tasks() = t.ToProto();
  }
  for (const Machine* m : machine_list_) *s.add_machines() = m->ToProto();
  for (const auto& [key, q] : quotas_) *s.add_quotas() = q;
  for (const auto& [name, u] : users_) *s.add_users() = u;
  for (const auto& [id, t] : join_tokens_) *s.add_join_tokens() = t;
  for (const RequestKey& key : request_order_) {
    v1::SubmitRecord* r = s.add_requests();
    r->set_user(key.first);
    r->set_request_id(key.second);
    for (const std::string& j : requests_.at(key)) r->add_jobs(j);
  }
  return s;
}

absl::StatusOr<CellState> CellState::FromSnapshot(const v1::CellSnapshot& s) {
  CellState c(s.cell());
  c.revision_ = s.revision();
  for (const v1::Machine& pm : s.machines()) {
    auto m = std::make_unique<Machine>();
    m->name_ = pm.name();
    m->address_ = pm.address();
    m->http_ = pm.http();
    m->capacity_ = ResourceVector::FromProto(pm.capacity());
    m->attributes_ = pm.attributes();
    m->state_ = pm.state();
    m->drained_ = pm.drained();
    m->drain_reason_ = pm.drain_reason();
    m->reason_ = pm.reason();
    m->state_revision_ = pm.state_revision();
    m->state_ms_ = pm.state_ms();
    m->registered_ms_ = pm.registered_ms();
    m->packages_.assign(pm.packages().begin(), pm.packages().end());
    std::sort(m->packages_.begin(), m->packages_.end());
    m->interference_ = pm.interference();
    m->interference_reason_ = pm.interference_reason();
    m->order_ = c.machine_seq_++;
    Machine* raw = m.get();
    if (!c.machines_.emplace(pm.name(), std::move(m)).second) {
      return absl::DataLossError(absl::StrCat("snapshot: machine ", pm.name(), " appears twice"));
    }
    c.machine_list_.push_back(raw);
  }
  for (const v1::Job& pj : s.jobs()) {
    auto j = std::make_unique<Job>();
    j->id = pj.id();
    j->spec = pj.spec();
    j->state = pj.state();
    j->submit_time_ms = pj.submit_time_ms();
    j->submit_revision = pj.submit_revision();
    j->state_revision = pj.state_revision();
    j->request_id = pj.request_id();
    j->last_event = FromProto(pj.last_event());
    // Snapshots from before versions read as version 1.
    j->version = std::max<int64_t>(1, pj.version());
    j->version_revision = pj.version_revision();
    j->versions.assign(pj.versions().begin(), pj.versions().end());
    if (j->versions.empty()) {  // a snapshot from before version history
      v1::JobVersion& rec = j->versions.emplace_back();
      rec.set_version(j->version);
      rec.set_revision(j->version_revision);
      *rec.mutable_spec() = j->spec;
    }
    j->rollout = pj.rollout();
    j->rollout.clear_outdated();  // computed
    j->runs.assign(pj.runs().begin(), pj.runs().end());
    j->last_due_ms = pj.last_due_ms();
    j->scheduled_by = pj.scheduled_by();
    if (pj.spec().task_count() < 0 || pj.spec().task_count() > 100'000) {
      return absl::DataLossError(absl::StrCat("snapshot: job ", pj.id(), " has a bad task count"));
    }
    const int32_t count = j->scheduled() ? 0 : pj.spec().task_count();  // a scheduled job has none
    j->tasks.resize(count);
    for (int32_t i = 0; i < count; ++i) {
      j->tasks[i].job_ = j.get();
      j->tasks[i].index_ = i;
      j->tasks[i].priority_ = pj.spec().priority();
      j->tasks[i].state_ = v1::Task::STATE_UNSPECIFIED;
    }
    if (!c.jobs_.emplace(pj.id(), std::move(j)).second) {
      return absl::DataLossError(absl::StrCat("snapshot: job ", pj.id(), " appears twice"));
    }
  }
  for (const v1::Task& pt : s.tasks()) {
    Task* t = c.MutableTask(pt.job(), pt.index());
    if (t == nullptr) {
      return absl::DataLossError(absl::StrCat("snapshot: task ", TaskName(pt.job(), pt.index()), " has no job"));
    }
    t->state_ = pt.state();
    t->phase_ = pt.phase();
    t->resources_ = ResourceVector::FromProto(pt.resources());
    t->last_machine_ = pt.machine();
    t->incarnation_ = pt.incarnation();
    t->restarts_ = pt.restarts();
    t->exit_code_ = pt.exit_code();
    t->exit_signal_ = pt.exit_signal();
    t->pid_ = pt.pid();
    t->started_ms_ = pt.started_ms();
    t->state_revision_ = pt.state_revision();
    t->message_ = pt.message();
    t->SetAgentInfo(pt.ports(), pt.health());
    for (const v1::Event& e : pt.history()) t->history_.push_back(FromProto(e));
    for (const v1::AvoidMachine& a : pt.avoid()) t->avoid_.emplace_back(a.machine(), a.until_ms());
    if (pt.has_reservation()) t->reservation_ = ResourceVector::FromProto(pt.reservation());
    t->job_version_ = pt.job_version() > 0 ? pt.job_version() : t->job_->version;
    t->priority_ = pt.priority();  // an outdated task's may not be the spec's
    if (t->state_ < v1::Task::PENDING || t->state_ > v1::Task::DEAD) {
      return absl::DataLossError(absl::StrCat("snapshot: task ", TaskName(pt.job(), pt.index()), " has no state"));
    }
    ++c.task_counts_[t->state_];
    Job* j = t->job_;
    if (t->state_ == v1::Task::PENDING) {
      ++j->pending;
      c.Enqueue(t);
    } else if (t->state_ == v1::Task::RUNNING) {
      ++j->running;
      Machine* m = c.MutableMachine(pt.machine());
      if (m == nullptr) {
        return absl::DataLossError(absl::StrCat("snapshot: task ", TaskName(pt.job(), pt.index()),
                                                " runs on unknown machine ", pt.machine()));
      }
      c.AttachToMachine(t, m);
    } else {
      ++j->dead;
    }
    if (t->state_ != v1::Task::DEAD) c.AddUsage(*t, true);
  }
  for (const auto& [id, j] : c.jobs_) {
    if (!j->spec.alloc().empty() && j->state != v1::Job::DEAD) c.alloc_members_[j->spec.alloc()].insert(id);
    for (const Task& t : j->tasks) {
      if (t.state_ == v1::Task::STATE_UNSPECIFIED) {
        return absl::DataLossError(absl::StrCat("snapshot: task ", TaskName(id, t.index_), " is missing"));
      }
    }
  }
  for (const v1::Quota& q : s.quotas()) c.quotas_[std::make_pair(q.user(), q.band())] = q;
  for (const v1::User& u : s.users()) c.users_[u.name()] = u;
  for (const v1::JoinToken& t : s.join_tokens()) c.join_tokens_[t.id()] = t;
  for (const v1::SubmitRecord& r : s.requests()) {
    // A record from before request ids were per user (#33) has no user: it
    // belongs to the owner of its first job; one with no jobs is dropped.
    std::string user = r.user();
    if (user.empty() && !r.jobs().empty()) {
      const std::string& job = r.jobs(0);
      if (size_t slash = job.find('/'); slash != std::string::npos) user = job.substr(0, slash);
    }
    if (user.empty()) continue;
    c.RecordRequest(user, r.request_id(), std::vector<std::string>(r.jobs().begin(), r.jobs().end()));
  }
  c.freed_revision_ = c.revision_;
  c.machines_revision_ = c.revision_;
  std::fill(c.placed_revision_.begin(), c.placed_revision_.end(), c.revision_);
  HERD_RETURN_IF_ERROR(c.CheckInvariants());
  return c;
}

}  // namespace herd::cell
