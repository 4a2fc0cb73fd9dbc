#include "sched/preempt/preempt.h"

#include <algorithm>

#include "base/priority.h"

namespace herd::sched {

std::optional<Preemption> FindVictims(int32_t priority, bool prod, const ResourceVector& need,
                                      const ResourceVector& free, const cell::Machine& machine,
                                      const absl::flat_hash_set<const cell::Task*>& already_evicted) {
  std::vector<const cell::Task*> candidates;
  for (const cell::Task* t : machine.tasks()) {
    // A task in an alloc holds none of the machine (its alloc does).
    if (!already_evicted.contains(t) && !t->in_alloc() && MayPreempt(priority, t->priority())) {
      candidates.push_back(t);
    }
  }
  if (candidates.empty()) return std::nullopt;
  auto held = [prod](const cell::Task* t) -> const ResourceVector& { return prod ? t->resources() : t->reservation(); };
  // Lowest priority first; among equals, larger tasks first (fewer victims).
  std::stable_sort(candidates.begin(), candidates.end(), [&](const cell::Task* a, const cell::Task* b) {
    if (a->priority() != b->priority()) return a->priority() < b->priority();
    if (held(a).memory_bytes != held(b).memory_bytes) return held(a).memory_bytes > held(b).memory_bytes;
    return held(a).cpu_millis > held(b).cpu_millis;
  });
  ResourceVector room = free;
  std::vector<const cell::Task*> chosen;
  for (const cell::Task* t : candidates) {
    if (need.FitsIn(room)) break;
    room += held(t);
    chosen.push_back(t);
  }
  if (!need.FitsIn(room)) return std::nullopt;
  // Give back victims that were not needed, highest priority first.
  for (size_t i = chosen.size(); i-- > 0;) {
    ResourceVector without = room - held(chosen[i]);
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
    p.freed += held(t);
  }
  return p;
}

}  // namespace herd::sched
