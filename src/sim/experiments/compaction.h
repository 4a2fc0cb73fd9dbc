// Cell compaction (Borg §5.1): how small a cell could this workload fit in?
// For each seed, machines are removed in a random order (keeping the cell's
// heterogeneity) and the whole workload is scheduled from scratch on what is
// left; a binary search finds the fewest machines on which at most 0.2% of the
// tasks ("picky" ones) stay pending. Hard constraints of jobs larger than half
// of the (compacted) cell become soft, as in the paper. Seeds run in parallel
// processes. The answer's 90th percentile over seeds, with min and max, is the
// figure the paper reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "herd/v1/objects.pb.h"
#include "sched/framework/options.h"

namespace herd::sim {

// What an experiment runs on: a pool of machines and the jobs to fit.
struct SimWorkload {
  std::string name;
  std::vector<v1::Machine> machines;
  std::vector<v1::JobSpec> jobs;
  // Optional per-task reservations (job id -> reservation of each task), for
  // the reclamation experiment.
  std::vector<std::pair<std::string, v1::Resources>> reservations;  // per job: same for all its tasks
  int64_t tasks() const;
};

struct CompactionOptions {
  sched::Options scheduler;
  int seeds = 11;
  uint64_t first_seed = 1;
  double picky = 0.002;  // share of tasks allowed to stay pending
  int parallel = 2;      // seeds run at once, each in its own process
  bool soften_large_jobs = true;
  bool use_reservations = false;  // schedule non-production against reservations
};

struct CompactionResult {
  int original = 0;          // machines in the workload's cell
  std::vector<int> needed;   // fewest machines found, per seed
  std::vector<int> lower_bound;  // per seed: fewest leading machines whose capacity holds the requests
  bool fits_original = true;  // the workload fits the whole cell at all
  // Per seed, where the cell has devices (GPUs): device capacity allocated
  // / device capacity of the compacted cell (-1 without devices).
  std::vector<double> device_alloc_ratio;
  int64_t tasks = 0;
  int64_t checks = 0;  // from-scratch schedules run
  double wall_s = 0;

  int P90() const;
  int Min() const;
  int Max() const;
  double Percent(int machines) const { return original ? 100.0 * machines / original : 0; }
};

absl::StatusOr<CompactionResult> Compact(const SimWorkload& w, const CompactionOptions& options);

// One check: does `w` fit on machines order[0..k)? Sets *pending.
// `device_ratio`, if set: device capacity allocated / device capacity of
// those machines (-1 when they have no devices).
bool FitsOn(const SimWorkload& w, const std::vector<int32_t>& order, int k, const CompactionOptions& options,
            int64_t* pending, double* device_ratio = nullptr);

// The seed's machine removal order (a permutation of w.machines' indexes).
std::vector<int32_t> RemovalOrder(size_t machines, uint64_t seed);

}  // namespace herd::sim
