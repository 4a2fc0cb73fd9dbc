// Choosing victims to make room for a task on one machine (Borg §3.2):
// lower-priority tasks are taken lowest priority first (larger first among
// equals) until the task fits, then any victim not actually needed is given
// back, highest priority first, so the set is small and low. Production-band
// tasks never preempt one another (base/priority.h MayPreempt).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "base/resources.h"
#include "cell/cell_state.h"

namespace herd::sched {

struct Preemption {
  std::vector<const cell::Task*> victims;
  int32_t max_priority = -1;  // highest victim priority
  int64_t priority_sum = 0;
  ResourceVector freed;       // what evicting the victims frees (in the preemptor's accounting)
  // Lower is better: first the highest priority hurt, then how many.
  bool BetterThan(const Preemption& o) const {
    if (max_priority != o.max_priority) return max_priority < o.max_priority;
    if (victims.size() != o.victims.size()) return victims.size() < o.victims.size();
    return priority_sum < o.priority_sum;
  }
};

// Victims on `machine` that make `need` fit into `free` for a task of
// `priority` (`prod` says whether the preemptor counts limits or
// reservations), or nullopt if evicting every preemptible task is not enough.
// Tasks in `already_evicted` are gone already (their room is in `free`).
std::optional<Preemption> FindVictims(int32_t priority, bool prod, const ResourceVector& need,
                                      const ResourceVector& free, const cell::Machine& machine,
                                      const absl::flat_hash_set<const cell::Task*>& already_evicted);

}  // namespace herd::sched
