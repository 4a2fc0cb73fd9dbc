#include "sched/plugins/filter/filters.h"

#include "cell/constraints.h"
#include "sched/framework/pass_context.h"

namespace herd::sched {

FilterResult MachineUpFilter::Filter(const PassContext&, const TaskClass&, const MachineView& m) const {
  if (!m.up) return {ReasonCode::kMachineDown, ""};
  return FilterResult::Ok();
}

FilterResult CrashAvoidFilter::Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const {
  if (cls.only_task != nullptr && cls.only_task->AvoidsMachine(m.machine->name(), ctx.now_ms())) {
    return {ReasonCode::kCrashedHere, ""};
  }
  return FilterResult::Ok();
}

FilterResult ConstraintFilter::Filter(const PassContext&, const TaskClass& cls, const MachineView& m) const {
  for (size_t i = 0; i < cls.hard.size(); ++i) {
    if (!cell::Matches(*cls.hard[i], m.machine->attributes())) return {ReasonCode::kConstraint, cls.hard_text[i]};
  }
  return FilterResult::Ok();
}

FilterResult DomainLimitFilter::Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const {
  if (cls.max_per_machine > 0 && ctx.CountIn(cls.job, 0, m.domain[0]) >= cls.max_per_machine) {
    return {ReasonCode::kDifferentMachines, ""};
  }
  for (const auto& [domain, max] : cls.domain_max) {
    if (m.domain[domain] >= 0 && ctx.CountIn(cls.job, domain, m.domain[domain]) >= max) {
      return {ReasonCode::kDomainLimit, ""};
    }
  }
  return FilterResult::Ok();
}

FilterResult InterferenceFilter::Filter(const PassContext&, const TaskClass& cls, const MachineView& m) const {
  if (!cls.prod && m.machine->interference_marked()) return {ReasonCode::kInterference, ""};
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

FilterResult ResourceFilter::Filter(const PassContext&, const TaskClass& cls, const MachineView& m) const {
  FilterResult r = Fit(cls.need(), m.FreeFor(cls));
  if (!r.ok() || m.devices.empty() || cls.need().extended.empty()) return r;
  // Enough in total, but a share must fit on one device and whole devices
  // must be free.
  if (absl::string_view name = m.devices.Shortfall(cls.need()); !name.empty()) {
    return {ReasonCode::kInsufficientExtended, name};
  }
  return r;
}

}  // namespace herd::sched
