// The built-in score plugins.
#pragma once

#include "sched/framework/plugin.h"

namespace herd::sched {

// Mean utilisation of CPU and memory after the placement, as a fraction of
// capacity: 0 on an empty machine, 1 when full.
double UtilisationAfter(const TaskRequest& req, const MachineView& m);

// Best fit: prefers the machine left fullest (packs tightly, keeps whole
// machines free for large tasks).
class BestFitScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "best-fit"; }
  double Score(const TaskRequest& req, const MachineView& m) const override;
};

// Worst fit (E-PVM-like): prefers the emptiest machine (spreads load, leaves
// headroom for spikes, fragments more).
class WorstFitScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "worst-fit"; }
  double Score(const TaskRequest& req, const MachineView& m) const override;
};

}  // namespace herd::sched
