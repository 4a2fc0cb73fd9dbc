// A Profile: which plugins a scheduler runs and the weights of the scores.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sched/framework/plugin.h"

namespace herd::sched {

enum class PackingPolicy { kBestFit, kWorstFit };

absl::StatusOr<PackingPolicy> ParsePackingPolicy(absl::string_view name);

struct WeightedScore {
  std::unique_ptr<ScorePlugin> plugin;
  double weight = 1.0;
};

struct Profile {
  std::vector<std::unique_ptr<FilterPlugin>> filters;  // cheapest first
  std::vector<WeightedScore> scores;
};

// The default pipeline: machine up -> constraints -> resources; score by the
// packing policy.
Profile DefaultProfile(PackingPolicy policy = PackingPolicy::kBestFit);

}  // namespace herd::sched
