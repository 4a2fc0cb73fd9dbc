#include "sched/preempt/preempt.h"

#include <algorithm>

#include "base/priority.h"

namespace herd::sched {

std::optional<Preemption> FindVictims(int32_t priority, const ResourceVector& need, const ResourceVector& free,
                                      const cell::Machine& machine,
                                      const absl::flat_hash_set<const cell::Task*>& already_evicted) {
  std::vector<const cell::Task*> candidates;
  for (const cell::Task* t : machine.tasks) {
    if (!already_evicted.contains(t) && MayPreempt(priority, t->priority())) candidates.push_back(t);
  }
  if (candidates.empty()) return std::nullopt;
  // Lowest priority first; among equals, larger tasks first (fewer victims).
  std::stable_sort(candidates.begin(), candidates.end(), [](const cell::Task* a, const cell::Task* b) {
    if (a->priority() != b->priority()) return a->priority() < b->priority();
    if (a->resources.memory_bytes != b->resources.memory_bytes) {
      return a->resources.memory_bytes > b->resources.memory_bytes;
    }
    return a->resources.cpu_millis > b->resources.cpu_millis;
  });
  ResourceVector room = free;
  std::vector<const cell::Task*> chosen;
  for (const cell::Task* t : candidates) {
    if (need.FitsIn(room)) break;
    room += t->resources;
    chosen.push_back(t);
  }
  if (!need.FitsIn(room)) return std::nullopt;
  // Give back victims that were not needed, highest priority first.
  for (size_t i = chosen.size(); i-- > 0;) {
    ResourceVector without = room - chosen[i]->resources;
    if (need.FitsIn(without)) {
      room = without;
      chosen.erase(chosen.begin() + static_cast<ptrdiff_t>(i));
    }
  }
  Preemption p;
  p.victims = std::move(chosen);
  for (const cell::Task* t : p.victims) {
    p.max_priority = std::max(p.max_priority, t->priority());
    p.priority_sum += t->priority();
  }
  return p;
}

}  // namespace herd::sched
