#include "cell/rollout.h"

#include <algorithm>
#include <climits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/units.h"
#include "cell/job_update.h"

namespace herd::cell {

int32_t MaxUnavailable(int32_t count, int32_t percent, int32_t tasks) {
  int32_t limit = INT32_MAX;
  if (count > 0) limit = count;
  if (percent > 0) {
    limit = std::min<int32_t>(limit, std::max<int64_t>(1, int64_t{tasks} * percent / 100));
  }
  return limit;
}

int32_t RolloutBudget(const Job& job) {
  const int32_t n = static_cast<int32_t>(job.tasks.size());
  const v1::UpdateStrategy& s = job.rollout.strategy();
  int32_t limit = MaxUnavailable(s.max_unavailable(), s.max_unavailable_percent(), n);
  if (limit == INT32_MAX) limit = 1;
  const v1::DisruptionBudget& b = job.spec.disruption_budget();
  return std::min(limit, MaxUnavailable(b.max_unavailable(), b.max_unavailable_percent(), n));
}

bool TaskAvailable(const Task& t, int64_t min_healthy_ms, int64_t now_ms) {
  if (t.state() != v1::Task::RUNNING || t.phase() != v1::Task::ACTIVE) return false;
  const std::string& health = t.agent_info() ? t.agent_info()->health : "";
  if (absl::StartsWith(health, "unhealthy")) return false;
  const v1::HealthCheck& check = t.job()->SpecAt(t.job_version()).task().health_check();
  if (check.kind_case() != v1::HealthCheck::KIND_NOT_SET && health != "healthy") return false;
  if (min_healthy_ms > 0 && (t.started_ms() == 0 || now_ms - t.started_ms() < min_healthy_ms)) return false;
  return true;
}

namespace {

v1::Mutation Changed(const Job& job, v1::Rollout::State state, std::string message) {
  v1::Mutation m;
  v1::RolloutChanged* c = m.mutable_rollout_changed();
  c->set_job(job.id);
  c->set_version(job.rollout.version());
  c->set_state(state);
  c->set_message(std::move(message));
  return m;
}

// Since the version was made, the task was started with it: placed, or
// restarted on its machine (not merely given new limits in place).
bool TouchedSince(const Task& t, const Job& job) {
  const EventRec* e = t.last_event();
  if (e == nullptr || e->revision < job.version_revision) return false;
  return e->transition == v1::Event::SCHEDULE || e->transition == v1::Event::RESCHEDULE ||
         e->transition == v1::Event::FAIL || e->transition == v1::Event::LOST ||
         (e->transition == v1::Event::UPDATE && absl::StartsWith(e->reason, "restarted"));
}

// Why the rollout fails now ("" if it does not): a task of the new version
// exited since it took it, or is not healthy within the deadline.
std::string Failure(const Job& job, int64_t now_ms) {
  const v1::Rollout& r = job.rollout;
  const v1::UpdateStrategy& s = r.strategy();
  for (const Task& t : job.tasks) {
    if (t.job_version() != r.version() || !TouchedSince(t, job)) continue;
    const std::string name = TaskName(job.id, t.index());
    if (t.state() == v1::Task::DEAD) {
      if (t.last_event()->transition == v1::Event::FAIL) {
        return absl::StrCat("task ", name, " of version ", r.version(), " failed: ", t.last_event()->reason);
      }
      continue;
    }
    if (t.state() == v1::Task::RUNNING && t.restarts() > 0) {
      return absl::StrCat("task ", name, " of version ", r.version(), " exited (code ", t.exit_code(),
                          t.exit_signal() ? absl::StrCat(", signal ", t.exit_signal()) : "", ") and restarted ",
                          t.restarts(), " time", t.restarts() == 1 ? "" : "s");
    }
    if (s.progress_deadline_ms() > 0 && !TaskAvailable(t, s.min_healthy_time_ms(), now_ms)) {
      const int64_t since = std::max(t.last_event()->time_ms, r.step_ms());
      if (now_ms - since > s.progress_deadline_ms()) {
        return absl::StrCat("task ", name, " of version ", r.version(), " is not healthy ",
                            FormatDurationMs(now_ms - since), " after it was updated (progress_deadline ",
                            FormatDurationMs(s.progress_deadline_ms()), ")");
      }
    }
  }
  return "";
}

// The TasksUpdated for `picks`: each restarts on its machine if it fits
// there with the new spec, else moves.
v1::Mutation Step(const CellState& state, const Job& job, const std::vector<const Task*>& picks) {
  v1::Mutation m;
  v1::TasksUpdated* u = m.mutable_tasks_updated();
  u->set_job(job.id);
  u->set_version(job.version);
  for (const Task* t : picks) u->add_restart(t->index());
  if (state.Check(m).ok()) return m;
  // Some do not fit: add them one at a time, moving those that do not.
  u->clear_restart();
  for (const Task* t : picks) {
    u->add_restart(t->index());
    if (!state.Check(m).ok()) {
      u->mutable_restart()->RemoveLast();
      u->add_reschedule(t->index());
    }
  }
  return m;
}

}  // namespace

std::vector<v1::Mutation> StepRollout(const CellState& state, const Job& job, int64_t now_ms) {
  const v1::Rollout& r = job.rollout;
  std::vector<v1::Mutation> out;
  if (job.state == v1::Job::DEAD || r.version() != job.version) return out;
  const v1::UpdateStrategy& s = r.strategy();
  const int64_t min_healthy = s.min_healthy_time_ms();
  // A failed rollout that asked for it goes back (again on the next pass,
  // should this one not be committed).
  auto rollback = [&](const std::string& why) {
    if (!s.auto_rollback() || r.rollback()) return;
    absl::StatusOr<v1::Mutation> back =
        RollbackMutation(state, job, r.from_version(), absl::StrCat("rolled back automatically: ", why));
    if (back.ok()) out.push_back(*std::move(back));
  };
  if (r.state() == v1::Rollout::FAILED) {
    rollback(r.message());
    return out;
  }
  if (r.state() != v1::Rollout::ROLLING) return out;

  if (std::string why = Failure(job, now_ms); !why.empty()) {
    out.push_back(Changed(job, v1::Rollout::FAILED, why));
    rollback(why);
    return out;
  }

  // min_healthy_time is asked of the tasks that took the new version; the
  // others have been serving all along.
  auto up = [&](const Task& t) { return TaskAvailable(t, t.job_version() == r.version() ? min_healthy : 0, now_ms); };
  int32_t unavailable = 0, new_down = 0, on_new = 0;
  std::vector<const Task*> outdated;
  for (const Task& t : job.tasks) {
    if (t.state() == v1::Task::DEAD) continue;
    const bool up_now = up(t);
    unavailable += !up_now;
    if (t.job_version() == r.version()) {
      ++on_new;
      new_down += !up_now;
    } else if (t.state() == v1::Task::RUNNING && t.outdated()) {
      outdated.push_back(&t);
    }
  }
  if (outdated.empty()) {
    if (new_down == 0) {
      out.push_back(Changed(job, v1::Rollout::DONE,
                            absl::StrCat("all ", on_new, " tasks on version ", r.version(), " and healthy")));
    }
    return out;
  }
  size_t most = outdated.size();
  if (s.canary() > 0 && !r.promoted() && !r.rollback()) {
    if (on_new >= s.canary()) {
      if (new_down == 0) {
        out.push_back(Changed(job, v1::Rollout::PAUSED,
                              absl::StrCat("canary: ", on_new, " task", on_new == 1 ? "" : "s", " on version ",
                                           r.version(), " healthy; herd resume ", job.id, " rolls out the rest")));
      }
      return out;
    }
    most = static_cast<size_t>(s.canary() - on_new);
  }
  // Tasks already down first: updating them costs nothing.
  std::stable_partition(outdated.begin(), outdated.end(), [&](const Task* t) { return !up(*t); });
  const int32_t budget = RolloutBudget(job);
  std::vector<const Task*> picks;
  for (const Task* t : outdated) {
    if (picks.size() >= most) break;
    if (!up(*t)) {
      picks.push_back(t);
    } else if (unavailable < budget) {
      picks.push_back(t);
      ++unavailable;
    } else {
      break;
    }
  }
  if (!picks.empty()) out.push_back(Step(state, job, picks));
  return out;
}

std::vector<v1::Mutation> StepRollouts(const CellState& state, int64_t now_ms) {
  std::vector<v1::Mutation> out;
  for (const auto& [id, job] : state.jobs()) {
    const v1::Rollout::State st = job->rollout.state();
    if (st != v1::Rollout::ROLLING && !(st == v1::Rollout::FAILED && job->rollout.strategy().auto_rollback())) continue;
    std::vector<v1::Mutation> more = StepRollout(state, *job, now_ms);
    for (v1::Mutation& m : more) out.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<v1::Mutation> RollbackMutation(const CellState& state, const Job& job, int64_t to,
                                              std::string reason) {
  if (to == 0) to = job.version - 1;
  if (to < 1 || to >= job.version) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job.id, " is at version ", job.version,
                     job.version == 1 ? ": there is no earlier version" : absl::StrCat(": roll back to 1..", job.version - 1)));
  }
  const v1::JobVersion* rec = job.FindVersion(to);
  if (rec == nullptr) {
    return absl::NotFoundError(absl::StrCat("version ", to, " of job ", job.id,
                                            " is no longer kept (herd history lists the kept ones)"));
  }
  v1::JobSpec next = rec->spec();
  const v1::JobDiff diff = DiffJob(state, &job, next);
  if (diff.to_version() == diff.from_version()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id, " at version ", job.version, " already has version ", to, "'s spec"));
  }
  const v1::UpdateStrategy* strategy = job.rollout.has_strategy() ? &job.rollout.strategy()
                                       : next.has_update()        ? &next.update()
                                                                  : nullptr;
  v1::Mutation m = PlanUpdate(job, next, diff, std::move(reason), strategy);
  m.mutable_job_updated()->set_rollback(true);
  return m;
}

}  // namespace herd::cell
