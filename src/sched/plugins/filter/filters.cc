#include "sched/plugins/filter/filters.h"

#include "absl/strings/str_cat.h"
#include "cell/constraints.h"

namespace herd::sched {

FilterResult MachineUpFilter::Filter(const TaskRequest& req, const MachineView& m) const {
  if (m.machine->state != v1::Machine::UP) return {ReasonCode::kMachineDown, ""};
  return FilterResult::Ok();
}

FilterResult ConstraintFilter::Filter(const TaskRequest& req, const MachineView& m) const {
  for (const v1::Constraint& c : req.job->spec.constraints()) {
    if (!c.soft() && !cell::Matches(c, m.machine->attributes)) {
      return {ReasonCode::kConstraint, cell::Describe(c)};
    }
  }
  return FilterResult::Ok();
}

FilterResult ResourceFilter::Fit(const ResourceVector& need, const ResourceVector& free) {
  if (need.cpu_millis > free.cpu_millis) return {ReasonCode::kInsufficientCpu, ""};
  if (need.memory_bytes > free.memory_bytes) return {ReasonCode::kInsufficientMemory, ""};
  if (need.disk_bytes > free.disk_bytes) return {ReasonCode::kInsufficientDisk, ""};
  if (need.ports > free.ports) return {ReasonCode::kInsufficientPorts, ""};
  for (const auto& [k, v] : need.extended) {
    if (v > free.Extended(k)) return {ReasonCode::kInsufficientExtended, k};
  }
  return FilterResult::Ok();
}

FilterResult ResourceFilter::Filter(const TaskRequest& req, const MachineView& m) const {
  return Fit(req.resources, m.free);
}

}  // namespace herd::sched
