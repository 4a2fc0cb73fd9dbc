// What the master exports for Prometheus (docs/monitoring.md lists every
// metric): the committer's, the link shard's and the scheduler loop's hooks
// wired to a registry, and gauges computed from the cell when scraped.
#pragma once

#include "master/core/options.h"
#include "metrics/registry.h"

namespace herd::master {

class MasterCore;

// Sets the hooks of options->committer, ->link and ->scheduler_loop to
// update `registry` (mutations committed and their latency, placements,
// preemptions, poll latency, scheduler pass latency).
void AddMetricHooks(metrics::Registry& registry, MasterOptions* options);

// Registers the gauges read from `core`'s state at each scrape: machines by
// state, pending tasks by band, the revision, whether it leads. `core` must
// outlive every later registry.Text().
void AddCellGauges(metrics::Registry& registry, MasterCore* core);

}  // namespace herd::master
