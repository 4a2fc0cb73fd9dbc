#include "master/core/link/reconcile.h"

#include <algorithm>
#include <climits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "cell/rollout.h"
#include "cell/task_template.h"

namespace herd::master {

v1::TaskRun BuildTaskRun(const cell::CellState& state, const cell::Task& t) {
  // An outdated task (held by a rolling update) runs its own version.
  const v1::JobSpec& spec = t.job()->SpecAt(t.job_version());
  v1::TaskRun run;
  run.mutable_ref()->set_job(t.job()->id);
  run.mutable_ref()->set_index(t.index());
  run.mutable_ref()->set_incarnation(t.incarnation());
  run.set_run_id(RunId(t.job()->id, t.index(), t.incarnation()));
  v1::TaskTemplate tt = cell::ResolveTask(spec, t.index(), state.cell_name());
  for (const auto& a : tt.command()) run.add_argv(a);
  for (const auto& a : tt.args()) run.add_argv(a);
  *run.mutable_env() = tt.env();
  t.resources().ToProto(run.mutable_resources());
  run.set_grace_period_ms(spec.grace_period_ms());
  *run.mutable_restart() = spec.restart();
  run.set_priority(t.priority());  // an outdated task's may differ from the spec's
  run.set_appclass(spec.appclass());
  run.set_user(spec.user());
  *run.mutable_port_names() = tt.port_names();
  run.set_workdir(tt.workdir());
  *run.mutable_packages() = tt.packages();
  if (tt.has_health_check()) *run.mutable_health_check() = tt.health_check();
  if (tt.has_isolation()) *run.mutable_isolation() = tt.isolation();
  run.set_at_most_once(spec.at_most_once());
  run.set_job_version(t.job_version());
  if (t.is_alloc()) {
    // Runs nothing of its own: the agent keeps a placeholder in its cgroup
    // for as long as the alloc is on this machine.
    run.set_alloc(true);
    run.clear_argv();
    run.mutable_restart()->set_mode(v1::RestartPolicy::ALWAYS);
    run.mutable_restart()->set_max_restarts(0);
  } else if (const cell::Task* a = state.AllocOf(t); a != nullptr && a->state() == v1::Task::RUNNING) {
    run.set_alloc_run_id(RunId(a->job()->id, a->index(), a->incarnation()));
  }
  return run;
}

v1::PollRequest BuildPollRequest(const cell::CellState& state, const cell::Machine& machine) {
  v1::PollRequest req;
  req.set_machine(machine.name());
  req.set_revision(state.revision());
  for (const cell::Task* t : machine.tasks()) *req.add_desired() = BuildTaskRun(state, *t);
  return req;
}

std::string HealthText(const v1::Health& h) {
  switch (h.state()) {
    case v1::Health::HEALTHY:
      return "healthy";
    case v1::Health::UNHEALTHY:
      return h.message().empty() ? "unhealthy" : absl::StrCat("unhealthy: ", h.message());
    default:
      return "";
  }
}

namespace {
// Moves tasks off a drained machine, as many as their jobs' disruption
// budgets allow now; the rest go on later replies, as replacements become
// active elsewhere.
void DrainSome(const cell::Machine& m, const absl::flat_hash_set<const cell::Task*>& moved,
               std::vector<v1::Mutation>* out);
}  // namespace

std::vector<v1::Mutation> Reconcile(const cell::CellState& state, const std::string& machine,
                                    const absl::flat_hash_set<std::string>& sent,
                                    const v1::PollResponse& observed, int64_t now_ms) {
  std::vector<v1::Mutation> out;
  const cell::Machine* m = state.FindMachine(machine);
  if (m == nullptr) return out;
  {
    // The package cache, for the scheduler's package locality.
    std::vector<std::string> cached;
    for (const v1::CachedPackage& p : observed.packages()) cached.push_back(p.sha256());
    std::sort(cached.begin(), cached.end());
    cached.erase(std::unique(cached.begin(), cached.end()), cached.end());
    if (cached != m->packages()) {
      v1::Mutation mut;
      mut.mutable_machine_packages()->set_name(machine);
      for (auto& p : cached) mut.mutable_machine_packages()->add_packages(std::move(p));
      out.push_back(std::move(mut));
    }
  }
  if (observed.interference().level() != m->interference()) {
    // The agent's interference level moved: at "mark" the scheduler keeps
    // non-production work off the machine. Only moves are committed (the
    // reason of a level is the one it had when it was reached).
    v1::Mutation mut;
    v1::MachineInterference* mi = mut.mutable_machine_interference();
    mi->set_name(machine);
    mi->set_level(observed.interference().level());
    mi->set_reason(observed.interference().reason().substr(0, 1024));
    out.push_back(std::move(mut));
  }
  absl::flat_hash_map<std::string, const v1::RunStatus*> runs;
  for (const v1::RunStatus& r : observed.runs()) runs[r.run_id()] = &r;
  absl::flat_hash_set<const cell::Task*> moved;  // lost, rescheduled or ended by this reply
  for (const cell::Task* t : m->tasks()) {
    std::string run_id = RunId(t->job()->id, t->index(), t->incarnation());
    if (!sent.contains(run_id)) continue;  // placed after this poll was built
    v1::TaskRef ref;
    ref.set_job(t->job()->id);
    ref.set_index(t->index());
    ref.set_incarnation(t->incarnation());
    v1::Mutation mut;
    auto it = runs.find(run_id);
    if (it == runs.end()) {
      *mut.mutable_task_lost()->mutable_task() = ref;
      mut.mutable_task_lost()->set_reason(absl::StrCat("the agent on ", machine, " does not have run ", run_id));
      out.push_back(std::move(mut));
      moved.insert(t);
      continue;
    }
    const v1::RunStatus& r = *it->second;
    if (r.crash_looping() || r.evicted()) {
      // Not this task's fault alone, or not this machine's to fix: place it
      // again, elsewhere. A crash loop keeps it off this machine for a while
      // (no repeated task::machine pairing); an eviction only briefly.
      v1::TaskRescheduled* rs = mut.mutable_task_rescheduled();
      *rs->mutable_task() = ref;
      rs->set_reason(absl::StrCat(r.evicted() ? "evicted from " : "crash loop on ", machine, ": ", r.message()));
      rs->set_avoid_until_ms(now_ms + (r.evicted() ? kAvoidAfterEvictionMs : kAvoidAfterCrashLoopMs));
      out.push_back(std::move(mut));
      moved.insert(t);
      continue;
    }
    if (r.terminal()) {
      v1::TaskExited* e = mut.mutable_task_exited();
      *e->mutable_task() = ref;
      e->set_exit_code(r.exit_code());
      e->set_exit_signal(r.exit_signal());
      e->set_restarts(r.restarts());
      e->set_reason(r.message());
      e->set_oom_killed(r.oom_killed());
      out.push_back(std::move(mut));
      moved.insert(t);
      continue;
    }
    std::string health = HealthText(r.health());
    bool agent_info_changed =
        t->agent_info() ? (health != t->agent_info()->health ||
                         !std::equal(r.ports().begin(), r.ports().end(), t->agent_info()->ports.begin(),
                                     t->agent_info()->ports.end(),
                                     [](const auto& a, const auto& b) { return a.first == b.first && a.second == b.second; }) ||
                         static_cast<size_t>(r.ports().size()) != t->agent_info()->ports.size())
                      : (!health.empty() || !r.ports().empty());
    if (r.phase() != t->phase() || r.pid() != t->pid() || r.restarts() != t->restarts() ||
        r.exit_code() != t->exit_code() || r.exit_signal() != t->exit_signal() || r.message() != t->message() ||
        r.started_ms() != t->started_ms() || agent_info_changed) {
      v1::TaskObserved* o = mut.mutable_task_observed();
      *o->mutable_task() = ref;
      o->set_phase(r.phase());
      o->set_pid(r.pid());
      o->set_restarts(r.restarts());
      o->set_exit_code(r.exit_code());
      o->set_exit_signal(r.exit_signal());
      o->set_message(r.message());
      o->set_started_ms(r.started_ms());
      *o->mutable_ports() = r.ports();
      o->set_health(std::move(health));
      o->set_oom_killed(r.oom_killed());
      out.push_back(std::move(mut));
    }
  }
  if (m->drained()) DrainSome(*m, moved, &out);
  return out;
}

namespace {
int MaxUnavailable(const v1::JobSpec& spec, int tasks) {
  const v1::DisruptionBudget& b = spec.disruption_budget();
  return cell::MaxUnavailable(b.max_unavailable(), b.max_unavailable_percent(), tasks);
}

void DrainSome(const cell::Machine& m, const absl::flat_hash_set<const cell::Task*>& moved,
               std::vector<v1::Mutation>* out) {
  // Unavailable tasks per job: live ones that are not RUNNING and active,
  // counted once per job, plus those this reply already moves.
  absl::flat_hash_map<const cell::Job*, int> unavailable;
  auto count = [&](const cell::Job* job) -> int& {
    auto [it, fresh] = unavailable.try_emplace(job, 0);
    if (fresh) {
      for (const cell::Task& t : job->tasks) {
        const bool live = t.state() == v1::Task::PENDING || t.state() == v1::Task::RUNNING;
        if (live && !(t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE)) ++it->second;
      }
    }
    return it->second;
  };
  for (const cell::Task* t : moved) ++count(t->job());
  for (const cell::Task* t : m.tasks()) {
    // A task in an alloc moves with its alloc, never on its own.
    if (moved.contains(t) || t->state() != v1::Task::RUNNING || t->in_alloc()) continue;
    int& down = count(t->job());
    // An inactive task is already unavailable: moving it costs nothing more.
    const bool active = t->phase() == v1::Task::ACTIVE;
    if (active && down >= MaxUnavailable(t->job()->spec, static_cast<int>(t->job()->tasks.size()))) continue;
    v1::Mutation mut;
    v1::TaskRescheduled* rs = mut.mutable_task_rescheduled();
    rs->mutable_task()->set_job(t->job()->id);
    rs->mutable_task()->set_index(t->index());
    rs->mutable_task()->set_incarnation(t->incarnation());
    rs->set_reason(absl::StrCat("machine ", m.name(), " drained", m.drain_reason().empty() ? "" : ": ",
                                m.drain_reason()));
    out->push_back(std::move(mut));
    if (active) ++down;
  }
}
}  // namespace

}  // namespace herd::master
