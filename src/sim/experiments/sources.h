// Where a simulation's machines and jobs come from:
//   synthetic   "machines=12500,tasks=1000000,fill=0.9,seed=1" (the
//               generator calibrated to the Borg paper; machine shapes from
//               the Google 2011 machine table when found, else built in)
//   google2011  a trace directory (machine_events/, task_events/): the
//               machines and the live tasks at a time
//   openb       the Alibaba GPU trace: a node list and a pod list
//   checkpoint  a `herd checkpoint export` file: its machines and live jobs
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cell/cell_state.h"
#include "sim/experiments/compaction.h"

namespace herd::sim {

absl::StatusOr<SimWorkload> SyntheticWorkload(absl::string_view spec, const std::string& machine_events = "");
// `at_s` < 0: the middle of the task events' window.
absl::StatusOr<SimWorkload> Google2011Workload(const std::string& dir, double at_s = -1);
// `fraction` < 1 keeps only the pods that arrived first (by creation time).
absl::StatusOr<SimWorkload> OpenbWorkload(const std::string& nodes, const std::string& pods, double fraction = 1);
absl::StatusOr<SimWorkload> CheckpointWorkload(const std::string& path, int64_t revision = 0);

// The cell state of a checkpoint (at `revision`, 0 = its last).
absl::StatusOr<cell::CellState> CheckpointState(const std::string& path, int64_t revision = 0);

// A workload's cell with everything placed from scratch (for the questions,
// which ask about a running cell).
absl::StatusOr<cell::CellState> ScheduledState(const SimWorkload& w, const sched::Options& options);

// The Google 2011 machine_events file if it can be found (HERD_TRACES,
// ../shared/data/traces), else "".
std::string FindMachineEvents();

}  // namespace herd::sim
