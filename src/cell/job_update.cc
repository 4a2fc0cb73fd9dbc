#include "cell/job_update.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "base/ids.h"
#include "base/priority.h"
#include "base/units.h"
#include "cell/constraints.h"
#include "cell/task_template.h"

namespace herd::cell {
namespace {

using google::protobuf::util::MessageDifferencer;

// What a field's value looks like in a diff: short, on one line.
std::string Brief(std::string text) {
  constexpr size_t kMax = 80;
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  if (text.size() > kMax) text = absl::StrCat(text.substr(0, kMax - 3), "...");
  return text;
}

std::string Argv(const google::protobuf::RepeatedPtrField<std::string>& argv) {
  return Brief(absl::StrJoin(argv, " "));
}

std::string PriorityText(int32_t p) { return absl::StrCat(p, " (", BandNameOf(p), ")"); }

// The cgroup parent an agent puts a task under (agent/cgroup): batch/ or ls/.
bool RunsAsBatch(v1::AppClass appclass, int32_t priority) {
  return appclass == v1::APPCLASS_UNSPECIFIED ? !IsProd(priority) : appclass == v1::BATCH;
}

std::vector<std::string> Dimensions(const ResourceVector& a, const ResourceVector& b) {
  std::vector<std::string> dims = {"cpu", "memory", "disk", "ports"};
  std::set<std::string> ext;
  for (const auto& [k, v] : a.extended) ext.insert(k);
  for (const auto& [k, v] : b.extended) ext.insert(k);
  dims.insert(dims.end(), ext.begin(), ext.end());
  return dims;
}

// CPU, memory and disk limits change in place (cgroup limits); port counts
// and extended resources (devices) are handed out when a task starts.
v1::UpdateClass DimensionClass(const std::string& dim) {
  return dim == "cpu" || dim == "memory" || dim == "disk" ? v1::UPDATE_IN_PLACE : v1::UPDATE_RESTART;
}

// Collects the changed fields of a spec.
class FieldDiff {
 public:
  explicit FieldDiff(v1::JobDiff* out) : out_(out) {}

  void Add(std::string field, std::string from, std::string to, v1::UpdateClass c) {
    v1::SpecChange* ch = out_->add_changes();
    ch->set_field(std::move(field));
    ch->set_from(Brief(std::move(from)));
    ch->set_to(Brief(std::move(to)));
    ch->set_update_class(c);
  }
  template <typename M>
  void Message(std::string field, const M& a, const M& b, v1::UpdateClass c) {
    if (!MessageDifferencer::Equals(a, b)) Add(std::move(field), a.ShortDebugString(), b.ShortDebugString(), c);
  }
  template <typename Map>
  void StringMap(const std::string& prefix, const Map& a, const Map& b, v1::UpdateClass c) {
    std::map<std::string, std::string> sa(a.begin(), a.end()), sb(b.begin(), b.end());
    for (const auto& [k, v] : sa) {
      auto it = sb.find(k);
      if (it == sb.end()) {
        Add(absl::StrCat(prefix, ".", k), v, "", c);
      } else if (it->second != v) {
        Add(absl::StrCat(prefix, ".", k), v, it->second, c);
      }
    }
    for (const auto& [k, v] : sb) {
      if (!sa.contains(k)) Add(absl::StrCat(prefix, ".", k), "", v, c);
    }
  }

 private:
  v1::JobDiff* out_;
};

std::string ConstraintsText(const v1::JobSpec& s) {
  std::vector<std::string> cs;
  for (const v1::Constraint& c : s.constraints()) {
    cs.push_back(c.soft() ? absl::StrCat(Describe(c), " (soft)") : Describe(c));
  }
  return absl::StrJoin(cs, "; ");
}

template <typename List>
bool SameList(const List& a, const List& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

bool SamePackages(const v1::TaskTemplate& a, const v1::TaskTemplate& b) {
  return std::equal(a.packages().begin(), a.packages().end(), b.packages().begin(), b.packages().end(),
                    [](const auto& x, const auto& y) { return MessageDifferencer::Equals(x, y); });
}

std::string PackagesText(const v1::TaskTemplate& t) {
  std::vector<std::string> ps;
  for (const v1::Package& p : t.packages()) ps.push_back(absl::StrCat(p.name(), "@", p.sha256().substr(0, 12)));
  return absl::StrJoin(ps, ", ");
}

// The job-level changes, field by field. Fields named here are cleared from
// copies of both specs afterwards; anything still different is a field this
// code does not know, which restarts tasks to be safe.
void DiffFields(const v1::JobSpec& a, const v1::JobSpec& b, v1::JobDiff* out) {
  FieldDiff d(out);
  if (a.priority() != b.priority()) {
    d.Add("priority", PriorityText(a.priority()), PriorityText(b.priority()), v1::UPDATE_IN_PLACE);
  }
  if (a.task_count() != b.task_count()) {
    d.Add("tasks", absl::StrCat(a.task_count()), absl::StrCat(b.task_count()), v1::UPDATE_NONE);
  }
  const v1::TaskTemplate& ta = a.task();
  const v1::TaskTemplate& tb = b.task();
  if (!SameList(ta.command(), tb.command())) {
    d.Add("command", Argv(ta.command()), Argv(tb.command()), v1::UPDATE_RESTART);
  }
  if (!SameList(ta.args(), tb.args())) {
    d.Add("args", Argv(ta.args()), Argv(tb.args()), v1::UPDATE_RESTART);
  }
  d.StringMap("env", ta.env(), tb.env(), v1::UPDATE_RESTART);
  ResourceVector ra = ResourceVector::FromProto(ta.resources()), rb = ResourceVector::FromProto(tb.resources());
  for (const std::string& dim : Dimensions(ra, rb)) {
    if (ra.Get(dim) != rb.Get(dim)) {
      d.Add(absl::StrCat("resources.", dim), FormatDimension(dim, ra.Get(dim)), FormatDimension(dim, rb.Get(dim)),
            DimensionClass(dim));
    }
  }
  if (!SameList(ta.port_names(), tb.port_names())) {
    d.Add("ports", absl::StrJoin(ta.port_names(), ","), absl::StrJoin(tb.port_names(), ","), v1::UPDATE_RESTART);
  }
  if (ta.workdir() != tb.workdir()) d.Add("workdir", ta.workdir(), tb.workdir(), v1::UPDATE_RESTART);
  if (!SamePackages(ta, tb)) {
    d.Add("packages", PackagesText(ta), PackagesText(tb), v1::UPDATE_RESTART);
  }
  d.Message("health_check", ta.health_check(), tb.health_check(), v1::UPDATE_RESTART);
  d.Message("isolation", ta.isolation(), tb.isolation(), v1::UPDATE_RESTART);
  if (ConstraintsText(a) != ConstraintsText(b)) {
    // Tasks on machines that no longer meet them move (per task).
    d.Add("constraints", ConstraintsText(a), ConstraintsText(b), v1::UPDATE_NONE);
  }
  d.Message("restart", a.restart(), b.restart(), v1::UPDATE_IN_PLACE);
  if (a.grace_period_ms() != b.grace_period_ms()) {
    d.Add("grace_period", FormatDurationMs(a.grace_period_ms()), FormatDurationMs(b.grace_period_ms()),
          v1::UPDATE_IN_PLACE);
  }
  if (a.appclass() != b.appclass()) {
    d.Add("appclass", v1::AppClass_Name(a.appclass()), v1::AppClass_Name(b.appclass()), v1::UPDATE_RESTART);
  }
  d.StringMap("labels", a.labels(), b.labels(), v1::UPDATE_NONE);
  if (a.different_machines() != b.different_machines()) {
    d.Add("different_machines", a.different_machines() ? "true" : "false", b.different_machines() ? "true" : "false",
          v1::UPDATE_NONE);
  }
  std::map<std::string, std::string> da, db;
  for (const auto& [k, v] : a.max_per_domain()) da[k] = absl::StrCat(v);
  for (const auto& [k, v] : b.max_per_domain()) db[k] = absl::StrCat(v);
  d.StringMap("max_per_domain", da, db, v1::UPDATE_NONE);
  if (a.at_most_once() != b.at_most_once()) {
    d.Add("at_most_once", a.at_most_once() ? "true" : "false", b.at_most_once() ? "true" : "false",
          v1::UPDATE_RESTART);
  }
  d.Message("disruption_budget", a.disruption_budget(), b.disruption_budget(), v1::UPDATE_NONE);
  d.Message("update", a.update(), b.update(), v1::UPDATE_NONE);
  // A scheduled job's: they reach its next runs, not tasks.
  if (a.schedule() != b.schedule()) d.Add("schedule", a.schedule(), b.schedule(), v1::UPDATE_NONE);
  if (a.time_zone() != b.time_zone()) d.Add("time_zone", a.time_zone(), b.time_zone(), v1::UPDATE_NONE);
  if (a.concurrency() != b.concurrency()) {
    d.Add("concurrency", v1::Concurrency_Name(a.concurrency()), v1::Concurrency_Name(b.concurrency()),
          v1::UPDATE_NONE);
  }
  if (!SameList(a.after(), b.after())) {
    d.Add("after", absl::StrJoin(a.after(), ","), absl::StrJoin(b.after(), ","), v1::UPDATE_NONE);
  }
  // Overrides: their class is that of the tasks they name (set later).
  bool overrides_differ = a.overrides_size() != b.overrides_size();
  for (int i = 0; !overrides_differ && i < a.overrides_size(); ++i) {
    overrides_differ = !MessageDifferencer::Equals(a.overrides(i), b.overrides(i));
  }
  if (overrides_differ) {
    d.Add("overrides", absl::StrCat(a.overrides_size(), " override(s)"),
          absl::StrCat(b.overrides_size(), " override(s)"), v1::UPDATE_NONE);
  }
  // Whatever else differs.
  v1::JobSpec ca = a, cb = b;
  for (v1::JobSpec* s : {&ca, &cb}) {
    s->clear_priority();
    s->clear_task_count();
    s->clear_constraints();
    s->clear_restart();
    s->clear_grace_period_ms();
    s->clear_overrides();
    s->clear_appclass();
    s->clear_labels();
    s->clear_source();
    s->clear_different_machines();
    s->clear_max_per_domain();
    s->clear_at_most_once();
    s->clear_disruption_budget();
    s->clear_update();
    s->clear_schedule();
    s->clear_time_zone();
    s->clear_concurrency();
    s->clear_after();
    v1::TaskTemplate* t = s->mutable_task();
    t->clear_command();
    t->clear_args();
    t->clear_env();
    t->clear_resources();
    t->clear_port_names();
    t->clear_workdir();
    t->clear_packages();
    t->clear_health_check();
    t->clear_isolation();
  }
  if (!MessageDifferencer::Equals(ca, cb)) {
    d.Add("other", ca.ShortDebugString(), cb.ShortDebugString(), v1::UPDATE_RESTART);
  }
}

// One task's classification, growing as reasons are found.
struct Verdict {
  v1::UpdateClass cls = v1::UPDATE_NONE;
  std::vector<std::string> reasons;
  void Raise(v1::UpdateClass c, std::string why) {
    cls = std::max(cls, c);
    reasons.push_back(std::move(why));
  }
};

// What a surviving task's own resolved template asks for (ignoring whether
// its machine still fits: see FirstMisfit).
Verdict ClassifyTask(const CellState& state, const Task& t, const v1::JobSpec& a, const v1::JobSpec& b) {
  Verdict v;
  const int32_t i = t.index();
  const v1::TaskTemplate ta = ResolveTask(a, i, state.cell_name());
  const v1::TaskTemplate tb = ResolveTask(b, i, state.cell_name());
  if (!SameList(ta.command(), tb.command()) || !SameList(ta.args(), tb.args())) {
    v.Raise(v1::UPDATE_RESTART, "command changed");
  }
  if (!MessageDifferencer::Equals(ta, tb)) {
    std::map<std::string, std::string> ea(ta.env().begin(), ta.env().end()), eb(tb.env().begin(), tb.env().end());
    if (ea != eb) v.Raise(v1::UPDATE_RESTART, "env changed");
    if (!SameList(ta.port_names(), tb.port_names())) v.Raise(v1::UPDATE_RESTART, "ports changed");
    if (ta.workdir() != tb.workdir()) v.Raise(v1::UPDATE_RESTART, "workdir changed");
    if (!SamePackages(ta, tb)) v.Raise(v1::UPDATE_RESTART, "packages changed");
    if (!MessageDifferencer::Equals(ta.health_check(), tb.health_check())) {
      v.Raise(v1::UPDATE_RESTART, "health check changed");
    }
    if (!MessageDifferencer::Equals(ta.isolation(), tb.isolation())) v.Raise(v1::UPDATE_RESTART, "isolation changed");
  }
  const ResourceVector next = TaskResources(b, i);
  for (const std::string& dim : Dimensions(t.resources(), next)) {
    int64_t x = t.resources().Get(dim), y = next.Get(dim);
    if (x != y) {
      v.Raise(DimensionClass(dim), absl::StrCat(dim, " ", FormatDimension(dim, x), " -> ", FormatDimension(dim, y)));
    }
  }
  if (t.priority() != b.priority()) {
    v.Raise(v1::UPDATE_IN_PLACE, absl::StrCat("priority ", t.priority(), " -> ", b.priority()));
  }
  if (RunsAsBatch(a.appclass(), t.priority()) != RunsAsBatch(b.appclass(), b.priority())) {
    v.Raise(v1::UPDATE_RESTART, RunsAsBatch(b.appclass(), b.priority()) ? "now batch" : "now latency-sensitive");
  } else if (a.appclass() != b.appclass()) {
    v.Raise(v1::UPDATE_NONE, "appclass changed");
  }
  if (!MessageDifferencer::Equals(a.restart(), b.restart())) v.Raise(v1::UPDATE_IN_PLACE, "restart policy changed");
  if (a.grace_period_ms() != b.grace_period_ms()) v.Raise(v1::UPDATE_IN_PLACE, "grace period changed");
  if (a.at_most_once() != b.at_most_once()) v.Raise(v1::UPDATE_RESTART, "at_most_once changed");
  // `a` is the spec of the version it runs, if that is still kept; if not,
  // what it runs is unknown here, so it restarts.
  if (t.outdated() && t.job()->FindVersion(t.job_version()) == nullptr) {
    v.Raise(v1::UPDATE_RESTART, absl::StrCat("runs job version ", t.job_version(), " (outdated)"));
  }
  return v;
}

// The first hard constraint of `spec` that `m` does not meet.
std::optional<std::string> UnmetConstraint(const v1::JobSpec& spec, const Machine& m) {
  for (const v1::Constraint& c : spec.constraints()) {
    if (!c.soft() && !Matches(c, m.attributes())) {
      return absl::StrCat("machine ", m.name(), " does not meet ", Describe(c));
    }
  }
  return std::nullopt;
}

// A RUNNING task that stays on its machine with these limits and priority.
struct Stay {
  const Task* task;
  ResourceVector limits;
  int32_t priority;
};

// The first dimension in which `next` asks more than `old` (or any, with
// `all`) and more than `room`.
std::optional<std::string> GrowthShortfall(const ResourceVector& old, const ResourceVector& next,
                                           const ResourceVector& room, bool all) {
  for (const std::string& dim : Dimensions(old, next)) {
    int64_t v = next.Get(dim);
    if ((all || v > old.Get(dim)) && v > room.Get(dim)) return dim;
  }
  return std::nullopt;
}

// The first of `stays` (tasks of one job on `m`) that does not fit once all
// of them have their new limits and priorities and `leaving` (tasks of the
// job that go away) are gone: its position and why. The rule is the
// scheduler's commit check (CellState::CheckScheduled) -- production limits
// against the others' limits, the rest against their reservations -- asked
// only of dimensions that grow (shrinking never makes a task not fit, also
// on a machine where reclaimed resources are lent out), or of every
// dimension for a task that becomes production.
std::optional<std::pair<size_t, std::string>> FirstMisfit(const Machine& m, const std::vector<Stay>& stays,
                                                          const std::vector<const Task*>& leaving) {
  ResourceVector alloc = m.allocated(), reserved = m.reserved();
  for (const Task* t : leaving) {
    alloc -= t->resources();
    reserved -= t->reservation();
  }
  std::vector<ResourceVector> res(stays.size());  // reservations after: reset to the limit when it changes
  for (size_t k = 0; k < stays.size(); ++k) {
    const Task* t = stays[k].task;
    alloc -= t->resources();
    reserved -= t->reservation();
    res[k] = stays[k].limits == t->resources() ? t->reservation() : stays[k].limits;
    alloc += stays[k].limits;
    reserved += res[k];
  }
  for (size_t k = 0; k < stays.size(); ++k) {
    const Stay& s = stays[k];
    const bool prod = IsProd(s.priority);
    ResourceVector room = m.capacity() - (prod ? alloc - s.limits : reserved - res[k]);
    if (auto dim = GrowthShortfall(s.task->resources(), s.limits, room, prod && !IsProd(s.task->priority()))) {
      return std::make_pair(
          k, absl::StrCat(*dim, " ", FormatDimension(*dim, s.task->resources().Get(*dim)), " -> ",
                          FormatDimension(*dim, s.limits.Get(*dim)), " does not fit on ", m.name(), ": room for ",
                          FormatDimension(*dim, std::max<int64_t>(0, room.Get(*dim)))));
    }
  }
  return std::nullopt;
}

// A task in an alloc (one per job in each) stays if its new limits fit in
// what its alloc has left: why not, if they do not.
std::optional<std::string> AllocMisfit(const CellState& state, const Task& t, const ResourceVector& next) {
  const Task* a = state.AllocOf(t);
  if (a == nullptr) return std::nullopt;
  ResourceVector room = state.AllocFree(*a);
  room += t.resources();
  if (auto dim = GrowthShortfall(t.resources(), next, room, false)) {
    return absl::StrCat(*dim, " ", FormatDimension(*dim, t.resources().Get(*dim)), " -> ",
                        FormatDimension(*dim, next.Get(*dim)), " does not fit in alloc ",
                        TaskName(a->job()->id, a->index()), ": room for ",
                        FormatDimension(*dim, std::max<int64_t>(0, room.Get(*dim))));
  }
  return std::nullopt;
}

// Tasks that staying would put beyond the job's new spreading rules: all
// but the first on a machine (different_machines), or beyond N per value of
// an attribute (max_per_domain). `stay` is in index order.
void Overspread(const v1::JobSpec& b, const std::vector<const Task*>& stay,
                absl::flat_hash_map<const Task*, std::string>* out) {
  if (b.different_machines()) {
    absl::flat_hash_set<const Machine*> used;
    for (const Task* t : stay) {
      if (!used.insert(t->machine()).second) {
        out->emplace(t,
                     absl::StrCat("another task of the job runs on ", t->machine()->name(), " (different_machines)"));
      }
    }
  }
  for (const auto& [attr, limit] : b.max_per_domain()) {
    std::map<std::string, int32_t> count;
    for (const Task* t : stay) {
      if (out->contains(t)) continue;
      auto it = t->machine()->attributes().find(attr);
      if (it == t->machine()->attributes().end()) continue;
      if (++count[it->second] > limit) {
        out->emplace(t, absl::StrCat("more than ", limit, " task(s) of the job in ", attr, "=", it->second,
                                     " (max_per_domain)"));
      }
    }
  }
}

v1::TaskUpdate* AddTask(v1::JobDiff* d, int32_t index, v1::UpdateClass c, const Task* t) {
  v1::TaskUpdate* u = d->add_tasks();
  u->set_index(index);
  u->set_update_class(c);
  if (t != nullptr) {
    u->set_state(t->state());
    if (t->machine() != nullptr) u->set_machine(t->machine()->name());
  }
  return u;
}

// The counts of tasks per class, from its tasks.
void SetCounts(v1::JobDiff* d) {
  int32_t n[v1::UpdateClass_ARRAYSIZE] = {};
  for (const v1::TaskUpdate& t : d->tasks()) ++n[t.update_class()];
  d->set_unchanged(n[v1::UPDATE_NONE]);
  d->set_in_place(n[v1::UPDATE_IN_PLACE]);
  d->set_restart(n[v1::UPDATE_RESTART]);
  d->set_reschedule(n[v1::UPDATE_RESCHEDULE]);
  d->set_added(n[v1::UPDATE_ADD]);
  d->set_removed(n[v1::UPDATE_REMOVE]);
}

}  // namespace

bool SameSpec(const v1::JobSpec& a, const v1::JobSpec& b) {
  MessageDifferencer md;
  md.IgnoreField(v1::JobSpec::descriptor()->FindFieldByName("source"));
  return md.Compare(a, b);
}

std::string UpdateClassText(v1::UpdateClass c) {
  static constexpr const char* kText[] = {"?", "unchanged", "in place", "restart", "reschedule", "add", "remove"};
  return c >= 0 && c < static_cast<int>(std::size(kText)) ? kText[c] : "?";
}

v1::JobDiff DiffJob(const CellState& state, const Job* job, const v1::JobSpec& next, const UpdateOptions& opts) {
  v1::JobDiff d;
  d.set_job(JobId(next.user(), next.name()));
  if (job == nullptr || job->state == v1::Job::DEAD) {
    d.set_from_version(0);
    d.set_to_version(1);
    d.set_added(next.task_count());  // counted, not listed: nothing exists to compare
    return d;
  }
  const v1::JobSpec& prev = job->spec;
  const int32_t old_count = static_cast<int32_t>(job->tasks.size());
  d.set_from_version(job->version);
  if (SameSpec(prev, next)) {
    d.set_to_version(job->version);
    d.set_unchanged(static_cast<int32_t>(job->tasks.size()));  // counted, not listed
    return d;
  }
  d.set_to_version(job->version + 1);
  DiffFields(prev, next, &d);
  if (job->scheduled()) return d;  // a template, no tasks: the change reaches its next runs

  const int32_t survivors = std::min(old_count, next.task_count());
  std::vector<Verdict> verdicts(survivors);
  if (!opts.keep_survivors) {
    // A task still on an older version (a rolling update has not reached
    // it) is judged by the spec it runs.
    for (int32_t i = 0; i < survivors; ++i) {
      const Task& t = job->tasks[i];
      verdicts[i] = ClassifyTask(state, t, job->SpecAt(t.job_version()), next);
    }
  }
  // Where RUNNING tasks go: moved for constraints or spreading, else they
  // stay if they still fit.
  std::vector<const Task*> staying;
  for (int32_t i = 0; i < survivors && !opts.keep_survivors; ++i) {
    const Task& t = job->tasks[i];
    if (t.state() != v1::Task::RUNNING) continue;
    if (auto why = UnmetConstraint(next, *t.machine())) {
      verdicts[i].Raise(v1::UPDATE_RESCHEDULE, *why);
    } else {
      staying.push_back(&t);
    }
  }
  std::map<std::string, int32_t> mpd_a(prev.max_per_domain().begin(), prev.max_per_domain().end());
  std::map<std::string, int32_t> mpd_b(next.max_per_domain().begin(), next.max_per_domain().end());
  if (prev.different_machines() != next.different_machines() || mpd_a != mpd_b) {
    absl::flat_hash_map<const Task*, std::string> over;
    Overspread(next, staying, &over);
    for (const auto& [t, why] : over) verdicts[t->index()].Raise(v1::UPDATE_RESCHEDULE, why);
    std::erase_if(staying, [&](const Task* t) { return over.contains(t); });
  }
  // Limits: per machine, with every change the update makes there.
  std::map<std::string, std::pair<std::vector<Stay>, std::vector<const Task*>>> per_machine;
  for (const Task* t : staying) {
    if (t->in_alloc()) {
      // Its alloc, not the machine, holds it.
      if (auto why = AllocMisfit(state, *t, TaskResources(next, t->index()))) {
        Verdict& v = verdicts[t->index()];
        std::erase_if(v.reasons, [&](const std::string& r) { return absl::StartsWith(*why, r); });
        v.Raise(v1::UPDATE_RESCHEDULE, *why);
      }
      continue;
    }
    per_machine[t->machine()->name()].first.push_back(Stay{t, TaskResources(next, t->index()), next.priority()});
  }
  for (int32_t i = 0; i < old_count; ++i) {
    const Task& t = job->tasks[i];
    if (t.state() != v1::Task::RUNNING || t.in_alloc()) continue;
    const bool leaves = i >= survivors || verdicts[i].cls == v1::UPDATE_RESCHEDULE;
    if (leaves && per_machine.contains(t.machine()->name())) per_machine[t.machine()->name()].second.push_back(&t);
  }
  for (auto& [name, change] : per_machine) {
    auto& [stays, leaving] = change;
    const Machine& m = *state.FindMachine(name);
    while (auto misfit = FirstMisfit(m, stays, leaving)) {
      const Task* t = stays[misfit->first].task;
      Verdict& v = verdicts[t->index()];
      // "cpu 500m -> 2.5 does not fit on m2: ..." says "cpu 500m -> 2.5" again.
      std::erase_if(v.reasons, [&](const std::string& r) { return absl::StartsWith(misfit->second, r); });
      v.Raise(v1::UPDATE_RESCHEDULE, misfit->second);
      leaving.push_back(t);
      stays.erase(stays.begin() + static_cast<std::ptrdiff_t>(misfit->first));
    }
  }

  for (int32_t i = 0; i < std::max(old_count, next.task_count()); ++i) {
    if (i >= old_count) {
      AddTask(&d, i, v1::UPDATE_ADD, nullptr);
      continue;
    }
    const Task& t = job->tasks[i];
    if (i >= next.task_count()) {
      AddTask(&d, i, v1::UPDATE_REMOVE, &t);
      continue;
    }
    Verdict& v = verdicts[i];
    v1::UpdateClass c = v.cls;
    if (t.state() == v1::Task::PENDING && c != v1::UPDATE_NONE) {
      c = v1::UPDATE_IN_PLACE;  // nothing runs: it takes the new spec when placed
      v.reasons.push_back("pending: placed with the new spec");
    } else if (t.state() == v1::Task::DEAD && c != v1::UPDATE_NONE) {
      c = v1::UPDATE_NONE;
      v.reasons = {"dead: stays dead"};
    }
    v1::TaskUpdate* u = AddTask(&d, i, c, &t);
    for (std::string& r : v.reasons) u->add_reasons(std::move(r));
  }
  // Overrides ask what the tasks they name get.
  for (v1::SpecChange& ch : *d.mutable_changes()) {
    if (ch.field() != "overrides") continue;
    std::set<int32_t> named;
    for (const auto* s : {&prev, &next}) {
      for (const v1::TaskOverride& o : s->overrides()) named.insert(o.indexes().begin(), o.indexes().end());
    }
    v1::UpdateClass c = v1::UPDATE_NONE;
    for (const v1::TaskUpdate& u : d.tasks()) {
      if (named.contains(u.index()) && u.update_class() <= v1::UPDATE_RESCHEDULE) c = std::max(c, u.update_class());
    }
    ch.set_update_class(c);
  }
  SetCounts(&d);
  return d;
}

v1::Mutation UpdateMutation(const v1::JobSpec& next, const v1::JobDiff& diff, std::string reason) {
  v1::Mutation m;
  v1::JobUpdated* u = m.mutable_job_updated();
  *u->mutable_spec() = next;
  u->set_expect_version(diff.from_version());
  u->set_reason(std::move(reason));
  for (const v1::TaskUpdate& t : diff.tasks()) {
    if (t.state() != v1::Task::RUNNING) continue;
    if (t.update_class() == v1::UPDATE_RESTART) u->add_restart(t.index());
    if (t.update_class() == v1::UPDATE_RESCHEDULE) u->add_reschedule(t.index());
  }
  return m;
}

v1::Mutation PlanUpdate(const Job& job, const v1::JobSpec& next, const v1::JobDiff& diff, std::string reason,
                        const v1::UpdateStrategy* strategy, bool hold_outdated) {
  v1::Mutation m = UpdateMutation(next, diff, std::move(reason));
  v1::JobUpdated* u = m.mutable_job_updated();
  std::vector<int32_t> hold;
  if (strategy != nullptr) {
    *u->mutable_strategy() = *strategy;
    hold.assign(u->restart().begin(), u->restart().end());
    hold.insert(hold.end(), u->reschedule().begin(), u->reschedule().end());
    u->clear_restart();
    u->clear_reschedule();
  }
  if (hold_outdated) {
    const absl::flat_hash_set<int32_t> listed(hold.begin(), hold.end());
    for (const v1::TaskUpdate& t : diff.tasks()) {
      const int32_t i = t.index();
      if (t.state() == v1::Task::RUNNING && i < static_cast<int32_t>(job.tasks.size()) &&
          i < next.task_count() && job.tasks[i].outdated() && !listed.contains(i)) {
        hold.push_back(i);
      }
    }
  }
  std::sort(hold.begin(), hold.end());
  for (int32_t i : hold) u->add_hold(i);
  return m;
}

absl::Status CheckStaysFit(const CellState& state, const Job& job, const v1::JobUpdated& u) {
  const v1::JobSpec& next = u.spec();
  const int32_t old_count = static_cast<int32_t>(job.tasks.size());
  const absl::flat_hash_set<int32_t> reschedule(u.reschedule().begin(), u.reschedule().end());
  const absl::flat_hash_set<int32_t> hold(u.hold().begin(), u.hold().end());
  // By name: the same error on every replica.
  std::map<std::string, std::pair<std::vector<Stay>, std::vector<const Task*>>> per_machine;
  for (int32_t i = 0; i < old_count; ++i) {
    const Task& t = job.tasks[i];
    if (t.state() != v1::Task::RUNNING || hold.contains(i)) continue;
    if (t.in_alloc()) {
      // Its alloc, not the machine, holds it (one task of a job per alloc).
      if (i >= next.task_count() || reschedule.contains(i)) continue;
      if (auto why = AllocMisfit(state, t, TaskResources(next, i))) {
        return absl::FailedPreconditionError(absl::StrCat("task ", TaskName(job.id, i), " cannot stay: ", *why));
      }
      continue;
    }
    auto& [stays, leaving] = per_machine[t.machine()->name()];
    if (i >= next.task_count() || reschedule.contains(i)) {
      leaving.push_back(&t);
      continue;
    }
    if (auto why = UnmetConstraint(next, *t.machine())) {
      return absl::FailedPreconditionError(absl::StrCat("task ", TaskName(job.id, i), " cannot stay: ", *why));
    }
    stays.push_back(Stay{&t, TaskResources(next, i), next.priority()});
  }
  for (const auto& [name, change] : per_machine) {
    if (change.first.empty()) continue;
    if (auto misfit = FirstMisfit(*state.FindMachine(name), change.first, change.second)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", TaskName(job.id, change.first[misfit->first].task->index()), " cannot stay: ", misfit->second));
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::cell
