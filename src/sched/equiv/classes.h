// Equivalence classes (Borg §3.4): tasks that would get the same answer from
// every filter and score share one feasibility and scoring computation.
//
// Two pending tasks are equivalent when they belong to the same job and ask
// for the same resources (the job fixes their constraints, priority,
// packages and spreading). A task with its own avoid list (machines where it
// recently crash-looped) is a class of its own, as is every task when
// equivalence classes are switched off (the ablation).
#pragma once

#include "base/resources.h"
#include "cell/cell_state.h"
#include "sched/framework/pass_context.h"

namespace herd::sched {

// Identifies an equivalence class within a pass: the job and the resources,
// or one task.
struct ClassKey {
  const cell::Job* job = nullptr;
  const cell::Task* task = nullptr;  // set for classes of one
  ResourceVector resources;

  bool operator==(const ClassKey& o) const { return job == o.job && task == o.task && resources == o.resources; }
  template <typename H>
  friend H AbslHashValue(H h, const ClassKey& k) {
    return H::combine(std::move(h), k.job, k.task, k.resources.cpu_millis, k.resources.memory_bytes,
                      k.resources.disk_bytes, k.resources.ports, k.resources.extended.size());
  }
};

// Whether `t` may share a class (equivalence classes on, no avoid list).
bool SharesClass(const cell::Task* t, bool equivalence_classes);
// The class `t` belongs to.
ClassKey ClassKeyOf(const cell::Task* t, bool shared);

// The equivalence class of `t`: what the filters and scores need of it, shared
// by the tasks of its job with the same resources, or (shared = false) of `t`
// alone.
TaskClass MakeClass(const PassContext& ctx, const cell::Task* t, bool shared);

}  // namespace herd::sched
