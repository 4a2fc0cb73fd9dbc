// The built-in filter plugins.
#pragma once

#include "sched/framework/plugin.h"

namespace herd::sched {

// The machine is UP.
class MachineUpFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "machine-up"; }
  FilterResult Filter(const TaskRequest& req, const MachineView& m) const override;
};

// Every hard constraint of the job holds on the machine's attributes.
class ConstraintFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "constraints"; }
  FilterResult Filter(const TaskRequest& req, const MachineView& m) const override;
};

// The task's resource vector fits the machine's free resources (CPU, memory,
// disk, ports and every extended resource).
class ResourceFilter final : public FilterPlugin {
 public:
  absl::string_view Name() const override { return "resources"; }
  FilterResult Filter(const TaskRequest& req, const MachineView& m) const override;
  // The shortfall, if any, of `need` against `free`.
  static FilterResult Fit(const ResourceVector& need, const ResourceVector& free);
};

}  // namespace herd::sched
