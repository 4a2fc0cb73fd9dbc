#include "sched/equiv/classes.h"

#include <algorithm>

#include "base/priority.h"
#include "cell/constraints.h"

namespace herd::sched {

bool SharesClass(const cell::Task* t, bool equivalence_classes) { return equivalence_classes && t->avoid().empty(); }

ClassKey ClassKeyOf(const cell::Task* t, bool shared) { return ClassKey{t->job(), shared ? nullptr : t, t->resources()}; }

TaskClass MakeClass(const PassContext& ctx, const cell::Task* t, bool shared) {
  TaskClass c;
  const cell::Job* j = t->job();
  const v1::JobSpec& spec = j->spec;
  c.job = j;
  c.only_task = shared ? nullptr : t;
  c.limit = t->resources();
  c.reservation = t->reservation();
  c.priority = t->priority();
  c.prod = IsProd(c.priority);
  for (const v1::Constraint& k : spec.constraints()) {
    if (k.soft()) {
      c.soft.push_back(&k);
      c.soft_weight_total += std::max(1, k.weight());
    } else {
      c.hard.push_back(&k);
      c.hard_text.push_back(cell::Describe(k));
    }
  }
  if (spec.different_machines()) c.max_per_machine = 1;
  for (const auto& [attr, n] : spec.max_per_domain()) {
    if (attr == "machine") {
      c.max_per_machine = c.max_per_machine > 0 ? std::min(c.max_per_machine, n) : n;
    } else if (int d = ctx.FindDomain(attr); d >= 0) {
      c.domain_max.emplace_back(d, n);
    }
  }
  for (const v1::Package& p : spec.task().packages()) c.packages.push_back(p.sha256());
  c.pending = shared ? j->pending : 1;
  return c;
}

}  // namespace herd::sched
