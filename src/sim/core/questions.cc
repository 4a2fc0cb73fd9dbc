#include "sim/core/questions.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "cell/job_update.h"
#include "base/ids.h"
#include "base/rng.h"
#include "base/status.h"

namespace herd::sim {

absl::StatusOr<cell::CellState> Copy(const cell::CellState& state) {
  return cell::CellState::FromSnapshot(state.ToSnapshot());
}

sched::PassResult ScheduleAll(cell::CellState& state, sched::Scheduler& scheduler, int max_passes, int64_t now_ms) {
  sched::PassResult last;
  for (int i = 0; i < max_passes; ++i) {
    last = scheduler.RunPass(state, now_ms);
    int64_t committed = 0;
    v1::Mutation m;
    for (const auto& p : last.proposals) {
      *m.mutable_task_scheduled() = p;
      m.set_time_ms(now_ms);
      if (state.Apply(m).ok()) ++committed;
    }
    if (committed < static_cast<int64_t>(last.proposals.size())) scheduler.ForgetFailures();
    if (last.proposals.empty()) break;
  }
  return last;
}

namespace {

absl::Status Apply(cell::CellState& s, v1::Mutation m) {
  return s.Apply(m);
}

// The diagnosis the last pass gave task `index` of `job`, if any.
std::string WhyOf(const sched::PassResult& r, const std::string& job, int32_t index) {
  for (const auto& p : r.pending) {
    if (p.job != job) continue;
    if (std::find(p.indexes.begin(), p.indexes.end(), index) != p.indexes.end()) return p.why.ToString();
  }
  return "not examined";
}

}  // namespace

absl::StatusOr<FitAnswer> HowManyFit(const cell::CellState& state, v1::JobSpec job, const sched::Options& options,
                                     int32_t max_tasks) {
  if (state.FindJob(JobId(job.user(), job.name())) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("the cell already has a job ", JobId(job.user(), job.name()),
                                                 "; give the probe another name"));
  }
  job.set_task_count(max_tasks);
  job.clear_overrides();
  FitAnswer a;
  a.asked = max_tasks;
  std::string id = JobId(job.user(), job.name());
  for (bool preempt : {false, true}) {
    HERD_ASSIGN_OR_RETURN(cell::CellState s, Copy(state));
    std::vector<std::pair<const cell::Task*, int64_t>> running;
    for (const auto& [jid, other] : s.jobs()) {
      for (const cell::Task& t : other->tasks) {
        if (t.state() == v1::Task::RUNNING) running.push_back({&t, t.incarnation()});
      }
    }
    v1::Mutation m;
    *m.mutable_jobs_submitted()->add_jobs() = job;
    HERD_RETURN_IF_ERROR(Apply(s, m));
    sched::Options o = options;
    o.preemption = preempt;
    sched::Scheduler sch(o);
    sched::PassResult last = ScheduleAll(s, sch);
    const cell::Job* j = s.FindJob(id);
    if (!preempt) {
      a.fit = j->running;
      for (const cell::Task& t : j->tasks) {
        if (t.state() == v1::Task::PENDING) {
          a.why = WhyOf(last, id, t.index());
          break;
        }
      }
    } else {
      a.fit_preempting = j->running;
      for (const auto& [t, inc] : running) {
        if (t->state() != v1::Task::RUNNING || t->incarnation() != inc) ++a.victims;
      }
    }
  }
  return a;
}

absl::StatusOr<EvictAnswer> WouldEvict(const cell::CellState& state, const Change& change, int32_t min_priority,
                                       const sched::Options& options) {
  HERD_ASSIGN_OR_RETURN(cell::CellState s, Copy(state));
  EvictAnswer a;
  // Who runs where before.
  struct Before {
    std::string job;
    int32_t index;
    int64_t incarnation;
    std::string machine;
    int32_t priority;
  };
  std::vector<Before> before;
  std::set<std::string> updated;
  for (const v1::JobSpec& u : change.update) updated.insert(JobId(u.user(), u.name()));
  for (const auto& [id, j] : s.jobs()) {
    if (updated.contains(id)) continue;
    for (const cell::Task& t : j->tasks) {
      if (t.state() == v1::Task::RUNNING && t.priority() >= min_priority) {
        before.push_back({id, t.index(), t.incarnation(), t.machine()->name(), t.priority()});
      }
    }
  }
  a.running_before = static_cast<int64_t>(before.size());
  // The change.
  std::vector<std::string> out = change.drain;
  for (const std::string& name : out) {
    if (s.FindMachine(name) == nullptr) return absl::NotFoundError(absl::StrCat("no machine ", name));
  }
  if (change.remove_random > 0) {
    std::vector<std::string> up;
    for (const cell::Machine* m : s.machines()) {
      if (m->state() == v1::Machine::UP && std::find(out.begin(), out.end(), m->name()) == out.end()) up.push_back(m->name());
    }
    Rng rng(change.seed);
    std::shuffle(up.begin(), up.end(), rng.engine());
    for (int32_t i = 0; i < change.remove_random && i < static_cast<int32_t>(up.size()); ++i) out.push_back(up[i]);
  }
  for (const std::string& name : out) {
    if (s.FindMachine(name)->state() != v1::Machine::UP) continue;
    v1::Mutation m;
    m.mutable_machine_down()->set_name(name);
    m.mutable_machine_down()->set_reason("taken out (simulated)");
    HERD_RETURN_IF_ERROR(Apply(s, m));
  }
  a.removed = out;
  if (!change.add.empty()) {
    v1::Mutation m;
    for (const auto& j : change.add) *m.mutable_jobs_submitted()->add_jobs() = j;
    HERD_RETURN_IF_ERROR(Apply(s, m));
  }
  for (const v1::JobSpec& next : change.update) {
    const std::string id = JobId(next.user(), next.name());
    const cell::Job* job = s.FindJob(id);
    if (job == nullptr || job->state == v1::Job::DEAD) {
      return absl::NotFoundError(absl::StrCat("no live job ", id, " to update (a new job is --add)"));
    }
    const v1::JobDiff diff = cell::DiffJob(s, job, next);
    a.updated_restart += diff.restart();
    a.updated_reschedule += diff.reschedule();
    a.updated_added += diff.added();
    a.updated_removed += diff.removed();
    if (diff.to_version() == diff.from_version()) continue;  // the same spec: nothing to do
    HERD_RETURN_IF_ERROR(Apply(s, cell::PlanUpdate(*job, next, diff, "updated (simulated)", nullptr)));
  }
  sched::Options o = options;
  o.preemption = true;
  sched::Scheduler sch(o);
  sched::PassResult last = ScheduleAll(s, sch);
  for (const Before& b : before) {
    const cell::Task* t = s.FindTask(b.job, b.index);
    if (t->state() == v1::Task::RUNNING && t->incarnation() == b.incarnation) continue;
    Victim v;
    v.task = TaskName(b.job, b.index);
    v.priority = b.priority;
    v.machine = b.machine;
    std::string cause = t->history().size() >= 2 ? t->history()[t->history().size() - 2].reason : "";
    if (t->state() == v1::Task::RUNNING) {
      v.outcome = absl::StrCat("moved to ", t->machine()->name());
      if (!cause.empty()) absl::StrAppend(&v.outcome, " (", cause, ")");
    } else {
      v.pending = true;
      const std::string& why = t->last_event() ? t->last_event()->reason : std::string();
      v.outcome = absl::StrCat("left pending (", why, "): ", WhyOf(last, b.job, b.index));
    }
    a.victims.push_back(std::move(v));
  }
  for (const std::string& id : updated) {
    if (const cell::Job* job = s.FindJob(id)) {
      a.updated_running += job->running;
      a.updated_pending += job->pending;
    }
  }
  for (const auto& j : change.add) {
    if (const cell::Job* job = s.FindJob(JobId(j.user(), j.name()))) {
      a.added_placed += job->running;
      a.added_pending += job->pending;
    }
  }
  return a;
}

}  // namespace herd::sim
