// The built-in filter plugins, cheapest first.
#pragma once

#include "base/resources.h"
#include "sched/framework/plugin.h"

namespace herd::sched {

// The machine is UP (and schedulable).
class MachineUpFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "machine-up"; }
  bool IsStatic() const override { return true; }
  FilterResult Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const override;
};

// Not a machine this task crashed on recently (no repeated task::machine
// pairing). Only classes of one task carry an avoid list.
class CrashAvoidFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "crash-avoid"; }
  bool IsStatic() const override { return true; }
  FilterResult Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const override;
};

// Every hard constraint holds on the machine's attributes.
class ConstraintFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "constraints"; }
  bool IsStatic() const override { return true; }
  FilterResult Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const override;
};

// "Different machines" and at most K tasks of the job per failure domain.
class DomainLimitFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "domain-limits"; }
  bool IsStatic() const override { return false; }
  FilterResult Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const override;
};

// Non-production work stays off a machine whose agent marked it for
// interference with its latency-sensitive tasks (Machine::interference
// "mark"); production work may go. Not static: the mark comes and goes.
class InterferenceFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "interference"; }
  bool IsStatic() const override { return false; }
  FilterResult Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const override;
};

// The task's resource vector fits the machine's free vector in every
// dimension (CPU, memory, disk, ports, extended): production against the
// others' limits, non-production against their reservations.
class ResourceFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "resources"; }
  bool IsStatic() const override { return false; }
  FilterResult Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const override;
  static FilterResult Fit(const ResourceVector& need, const ResourceVector& free);
};

}  // namespace herd::sched
