// A Profile: which plugins a scheduler runs, in which order, and the
// weights of the scores.
#pragma once

#include <memory>
#include <vector>

#include "sched/framework/options.h"
#include "sched/framework/plugin.h"

namespace herd::sched {

struct WeightedScore {
  std::unique_ptr<ScorePlugin> plugin;
  double weight = 1.0;
};

struct Profile {
  std::vector<std::unique_ptr<FilterPlugin>> filters;  // static ones first, cheapest first
  std::vector<WeightedScore> scores;
  double total_weight = 0;
  bool scores_depend_on_job = false;  // any score goes stale when the job places a task
};

// machine-up -> crash-avoid -> constraints -> domain-limits -> resources;
// scores: packing (by policy), spread, preemption cost, locality, priority
// mix, soft constraints, each with its weight (weight 0 leaves it out).
Profile DefaultProfile(const Options& options);

}  // namespace herd::sched
