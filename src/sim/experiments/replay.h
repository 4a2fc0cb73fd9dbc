// Replaying a window of the Google 2011 trace through Fauxmaster: the real
// master (admission, scheduler loop, link shard) on simulated machines and
// virtual time. The cell starts as the trace's at `from` (its machines, its
// live tasks); the trace's submissions in [from, to) are submitted at their
// times; each task ends when the trace says it ended (finish, fail, kill,
// evict, lost), counted from when Herd started it. The result: a timeline
// (running and pending tasks, CPU and memory allocated), how long tasks
// waited to start, and how much faster than real time it ran.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "sched/framework/options.h"
#include "sim/experiments/experiments.h"

namespace herd::sim {

struct ReplayOptions {
  double from_s = -1;  // < 0: the start of the task events' window
  double to_s = -1;    // < 0: the end of the window
  int64_t tick_ms = 30'000;  // the simulated poll interval
  sched::Options scheduler;
};

absl::StatusOr<Figure> ReplayGoogle2011(const std::string& dir, const ReplayOptions& options);

}  // namespace herd::sim
