// The Borg paper's evaluations (§5), each run as the paper ran it, by cell
// compaction: how many machines a workload needs, and how many more when the
// cell is run differently. Each returns a Figure: a table (text, CSV, JSON),
// SVG charts and the RESULT figures.
//
//   compaction      Fig. 4: the compacted size over seeds (90th percentile, min, max)
//   policies        §5.2: worst fit, best fit and hybrid compared
//   segregate-prod  Fig. 5: prod and non-prod in separate cells
//   segregate-users Fig. 6: users above a memory threshold in cells of their own
//   subdivide       Fig. 7: the cell split into N smaller cells
//   bucketing       Fig. 9: requests rounded up to powers of two from 0.5 core and 1 GiB
//   reclamation     Fig. 10: non-prod scheduled against reservations, on and off
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/experiments/compaction.h"
#include "sim/report/table.h"

namespace herd::sim {

struct Figure {
  std::string id;
  std::string title;
  report::Table table{{}};
  std::vector<std::pair<std::string, std::string>> charts;  // (file name without .svg, svg)
  std::vector<std::pair<std::string, double>> results;      // RESULT name=value
  std::string notes;
};

// Writes <dir>/<id>.{txt,csv,json} and each chart as <dir>/<name>.svg.
absl::Status WriteFigure(const Figure& f, const std::string& dir);

absl::StatusOr<Figure> RunCompaction(const SimWorkload& w, const CompactionOptions& o);
absl::StatusOr<Figure> RunPolicies(const SimWorkload& w, const CompactionOptions& o);
absl::StatusOr<Figure> RunSegregateProd(const SimWorkload& w, const CompactionOptions& o);
// `users`: how many of the biggest users (by memory requested) get their own
// cells, for each point (default 1, 2, 4).
absl::StatusOr<Figure> RunSegregateUsers(const SimWorkload& w, const CompactionOptions& o,
                                         std::vector<int> users = {1, 2, 4});
absl::StatusOr<Figure> RunSubdivide(const SimWorkload& w, const CompactionOptions& o, std::vector<int> cells = {2, 5, 10});
absl::StatusOr<Figure> RunBucketing(const SimWorkload& w, const CompactionOptions& o);
// Needs reservations (usage data): FAILED_PRECONDITION otherwise.
absl::StatusOr<Figure> RunReclamation(const SimWorkload& w, const CompactionOptions& o);

// Usage recorded from a real cell (bench/reservation_trace.sh writes it):
// one task's samples over time, as shares of its limits.
struct UsageProfile {
  std::string name;  // job/index
  std::vector<int64_t> t_ms;
  std::vector<double> cpu, memory;  // usage / limit
};
// Reads a CSV with the header
//   time_ms,job,task_index,cpu_millis,memory_bytes,cpu_limit_millis,memory_limit_bytes
// (rows in any order; at most 1,000,000). Errors name the file and line.
absl::StatusOr<std::vector<UsageProfile>> ReadUsageProfiles(const std::string& path);

// Fig. 10 with the master's own estimators (cell/reclaim.h): each job of the
// workload takes a recorded profile (by a stable hash of its name), scaled
// to its limits; each estimator (Borg's baseline, medium, aggressive
// presets, and seed 004's histogram) replays the profile and gives the
// reservation at its end; the cell is compacted with non-production work
// scheduled against those reservations. Also reports how often usage went
// above the reservation after startup (the estimator's risk).
absl::StatusOr<Figure> RunReclamationWithUsage(const SimWorkload& w, const CompactionOptions& o,
                                               const std::vector<UsageProfile>& profiles);

// FGD's evaluation (Weng et al., ATC '23): on the whole cell, tasks arrive
// `batch` per scheduling pass (the workload's in order, then drawn from it
// at random) until the GPUs they asked for reach `demand` x the cell's; one
// that does not fit leaves. RESULT first_failure_gpu_alloc_ratio (GPUs
// allocated / the cell's when the first task failed), gpu_alloc_ratio (at
// the end), failed. FAILED_PRECONDITION on a cell without devices.
struct ArrivalOptions {
  int batch = 1;
  double demand = 1.2;
};
absl::StatusOr<Figure> RunArrival(const SimWorkload& w, const CompactionOptions& o, const ArrivalOptions& a);

// Requests rounded up to powers of two: CPU from 0.5 core, memory from 1 GiB.
v1::JobSpec Bucketed(v1::JobSpec job);

// Reservations from a usage model (Borg §5.5): each job uses a share of its
// limit (CPU 20-70%, memory 60-95%, seeded by the job's name) and is reserved
// that plus a 15% margin.
void ModelUsage(SimWorkload* w);

}  // namespace herd::sim
