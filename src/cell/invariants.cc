// CellState::CheckInvariants: the facts every reachable state satisfies.
#include <map>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "cell/cell_state.h"
#include "cell/task_template.h"

namespace herd::cell {

absl::Status CellState::CheckInvariants() const {
  auto fail = [](auto&&... parts) { return absl::InternalError(absl::StrCat("invariant: ", parts...)); };
  int64_t counts[4] = {0, 0, 0, 0};
  size_t pending = 0;
  absl::flat_hash_map<std::pair<std::string, int>, ResourceVector> usage;
  absl::flat_hash_map<std::pair<std::string, int32_t>, ResourceVector> in_allocs;
  absl::flat_hash_map<const Machine*, ResourceVector> alloc, reserved;
  absl::flat_hash_map<const Machine*, size_t> on_machine;
  for (const auto& [id, j] : jobs_) {
    if (j->id != id) return fail("job key ", id, " != id ", j->id);
    const int32_t want_tasks = j->scheduled() ? 0 : j->spec.task_count();
    if (static_cast<int32_t>(j->tasks.size()) != want_tasks) return fail("job ", id, " task count");
    if (j->runs.size() > Job::kRuns) return fail("job ", id, " keeps ", j->runs.size(), " runs");
    if (!j->runs.empty() && !j->scheduled()) return fail("job ", id, " has runs and no schedule");
    int32_t p = 0, r = 0, d = 0;
    for (const Task& t : j->tasks) {
      std::string name = TaskName(id, t.index_);
      if (t.job_ != j.get()) return fail("task ", name, " points at another job");
      if (t.state_ < v1::Task::PENDING || t.state_ > v1::Task::DEAD) return fail("task ", name, " has no state");
      ++counts[t.state_];
      if (t.state_ == v1::Task::PENDING) {
        ++p;
        if (j->waiting()) {
          if (pending_.contains(const_cast<Task*>(&t))) return fail("task ", name, " of a WAITING job is queued");
        } else {
          ++pending;
          if (!pending_.contains(const_cast<Task*>(&t))) return fail("pending task ", name, " not queued");
        }
        if (t.machine_) return fail("pending task ", name, " has a machine");
      } else if (t.state_ == v1::Task::RUNNING) {
        ++r;
        if (t.machine_ == nullptr) return fail("running task ", name, " has no machine");
        if (t.machine_->state_ != v1::Machine::UP) return fail("task ", name, " runs on down machine");
        if (!t.machine_->tasks_.contains(const_cast<Task*>(&t))) return fail("machine does not list ", name);
        ++on_machine[t.machine_];
        if (t.in_alloc()) {
          // Counted against its alloc, which runs on the same machine.
          const Task* a = AllocOf(t);
          if (a == nullptr || a->state_ != v1::Task::RUNNING || a->machine_ != t.machine_) {
            return fail("task ", name, " runs outside its alloc");
          }
          in_allocs[std::make_pair(a->job_->id, a->index_)] += t.resources_;
        } else {
          alloc[t.machine_] += t.resources_;
          reserved[t.machine_] += t.reservation();
        }
      } else {
        ++d;
        if (t.machine_) return fail("dead task ", name, " has a machine");
      }
      if (t.state_ != v1::Task::DEAD && !t.in_alloc()) {
        usage[std::make_pair(j->spec.user(), static_cast<int>(BandOf(t.priority())))] += t.resources_;
      }
      if (t.state_revision_ > revision_) return fail("task ", name, " revision from the future");
      if (t.job_version_ < 1 || t.job_version_ > j->version) {
        return fail("task ", name, " runs job version ", t.job_version_, " of ", j->version);
      }
      if (!t.outdated()) {
        // A task of the current version has the spec's limits and priority.
        if (!(t.resources_ == TaskResources(j->spec, t.index_))) return fail("task ", name, " limits are not its spec's");
        if (t.priority_ != j->spec.priority()) return fail("task ", name, " priority is not its spec's");
      } else if (t.state_ == v1::Task::PENDING) {
        return fail("pending task ", name, " is outdated");
      }
    }
    if (p != j->pending || r != j->running || d != j->dead) return fail("job ", id, " counts");
    v1::Job::State want = d == want_tasks ? v1::Job::DEAD
                          : r > 0         ? v1::Job::RUNNING
                                          : v1::Job::PENDING;
    if (j->scheduled()) {
      want = j->state == v1::Job::DEAD ? v1::Job::DEAD : v1::Job::SCHEDULED;  // no tasks: SCHEDULED until killed
    } else if (j->state == v1::Job::WAITING && want != v1::Job::DEAD) {
      if (r > 0) return fail("WAITING job ", id, " runs tasks");
      want = v1::Job::WAITING;
    }
    if (j->state != want) return fail("job ", id, " state ", v1::Job::State_Name(j->state));
  }
  for (int s = 1; s < 4; ++s) {
    if (counts[s] != task_counts_[s]) return fail("task count for state ", s);
  }
  if (pending != pending_.size()) return fail("pending set has ", pending_.size(), " tasks, expected ", pending);
  for (const Machine* m : machine_list_) {
    ResourceVector a = alloc.count(m) ? alloc[m] : ResourceVector{};
    if (!(a == m->allocated_)) return fail("machine ", m->name_, " allocated ", m->allocated_.ToString(), " != ", a.ToString());
    ResourceVector r = reserved.count(m) ? reserved[m] : ResourceVector{};
    if (!(r == m->reserved_)) return fail("machine ", m->name_, " reserved ", m->reserved_.ToString(), " != ", r.ToString());
    int64_t prod = 0, nonprod = 0;
    std::map<int32_t, int32_t> prios;
    for (const Task* t : m->tasks_) {
      if (t->in_alloc()) continue;
      (IsProd(t->priority()) ? prod : nonprod) += t->resources_.cpu_millis;
      ++prios[t->priority()];
    }
    if (prod != m->prod_cpu_ || nonprod != m->nonprod_cpu_ || prios != m->priorities_) {
      return fail("machine ", m->name_, " per-priority aggregates");
    }
    size_t n = on_machine.count(m) ? on_machine[m] : 0;
    if (n != m->tasks_.size()) return fail("machine ", m->name_, " task list");
  }
  if (machine_list_.size() != machines_.size()) return fail("machine list");
  for (const auto& [key, v] : in_allocs) {
    auto it = alloc_used_.find(key);
    if (it == alloc_used_.end() || !(it->second == v)) return fail("alloc ", TaskName(key.first, key.second), " use");
  }
  for (const auto& [key, v] : alloc_used_) {
    if (!in_allocs.contains(key) && !v.IsZero()) return fail("stale alloc use of ", TaskName(key.first, key.second));
  }
  for (const auto& [key, v] : usage) {
    auto it = usage_.find(key);
    if (it == usage_.end() || !(it->second == v)) return fail("quota usage of ", key.first);
  }
  for (const auto& [key, v] : usage_) {
    if (!usage.contains(key) && !v.IsZero()) return fail("stale quota usage of ", key.first);
  }
  return absl::OkStatus();
}

}  // namespace herd::cell
