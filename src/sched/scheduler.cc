#include "sched/scheduler.h"

#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "base/priority.h"
#include "sched/plugins/filter/filters.h"
#include "sched/preempt/preempt.h"
#include "sched/queue/queue.h"

namespace herd::sched {

Scheduler::Scheduler(Options options) : options_(std::move(options)), profile_(DefaultProfile(options_.policy)) {}

namespace {

// The pass's working copy of every machine.
struct PassState {
  std::vector<MachineView> views;
  absl::flat_hash_set<const cell::Task*> evicted;
};

// Identifies tasks that are certain to get the same answer in one pass: same
// job and same resources (overrides aside, all tasks of a job are alike).
struct ClassKey {
  const cell::Job* job;
  ResourceVector resources;
  bool operator==(const ClassKey& o) const { return job == o.job && resources == o.resources; }
  template <typename H>
  friend H AbslHashValue(H h, const ClassKey& k) {
    return H::combine(std::move(h), k.job, k.resources.cpu_millis, k.resources.memory_bytes,
                      k.resources.disk_bytes, k.resources.ports);
  }
};

}  // namespace

PassResult Scheduler::RunPass(const cell::CellState& state) {
  PassResult out;
  out.based_on_revision = state.revision();
  PassState ps;
  ps.views.reserve(state.machines().size());
  for (const cell::Machine* m : state.machines()) ps.views.push_back(MachineView{m, m->Free()});

  absl::flat_hash_map<ClassKey, Diagnosis> failed;  // classes that did not fit this pass
  for (const cell::Task* task : OrderPending(state, turn_++)) {
    if (options_.max_tasks_per_pass > 0 && out.tasks_considered >= options_.max_tasks_per_pass) break;
    ++out.tasks_considered;
    TaskRequest req{task, task->job, task->priority(), task->resources};
    ClassKey key{task->job, task->resources};
    if (auto it = failed.find(key); it != failed.end()) {
      out.unplaced.push_back({task->job->id, task->index, it->second});
      continue;
    }

    // Feasibility and scoring without preemption.
    Diagnosis diag;
    MachineView* best = nullptr;
    double best_score = -1;
    std::vector<MachineView*> resource_short;  // pass everything but resources
    for (MachineView& view : ps.views) {
      ++diag.machines;
      ++out.machines_evaluated;
      FilterResult verdict;
      for (const auto& f : profile_.filters) {
        verdict = f->Filter(req, view);
        if (!verdict.ok()) break;
      }
      if (!verdict.ok()) {
        diag.Add(verdict);
        if (IsResourceShortfall(verdict.code)) resource_short.push_back(&view);
        continue;
      }
      ++diag.feasible;
      double score = 0;
      for (const auto& s : profile_.scores) score += s.weight * s.plugin->Score(req, view);
      if (score > best_score) {
        best_score = score;
        best = &view;
      }
    }

    std::optional<Preemption> preemption;
    if (best == nullptr && options_.preemption && !resource_short.empty()) {
      double pre_score = -1;
      for (MachineView* view : resource_short) {
        if (view->machine->tasks.empty()) continue;
        diag.preemption_tried = true;
        std::optional<Preemption> p =
            FindVictims(req.priority, req.resources, view->free, *view->machine, ps.evicted);
        if (!p) continue;
        double score = 0;
        for (const auto& s : profile_.scores) score += s.weight * s.plugin->Score(req, *view);
        if (!preemption || p->BetterThan(*preemption) ||
            (!preemption->BetterThan(*p) && score > pre_score)) {
          preemption = std::move(p);
          pre_score = score;
          best = view;
        }
      }
    }

    if (best == nullptr) {
      failed.emplace(key, diag);
      out.unplaced.push_back({task->job->id, task->index, std::move(diag)});
      continue;
    }

    v1::TaskScheduled p;
    p.set_job(task->job->id);
    p.set_index(task->index);
    p.set_expect_state_revision(task->state_revision);
    p.set_machine(best->machine->name);
    p.set_based_on_revision(state.revision());
    p.set_scheduler(options_.name);
    if (preemption) {
      for (const cell::Task* v : preemption->victims) {
        v1::TaskRef* ref = p.add_victims();
        ref->set_job(v->job->id);
        ref->set_index(v->index);
        ref->set_incarnation(v->incarnation);
        ps.evicted.insert(v);
        best->free += v->resources;
        ++out.preemptions;
      }
    }
    best->free -= req.resources;
    out.proposals.push_back(std::move(p));
  }
  return out;
}

}  // namespace herd::sched
