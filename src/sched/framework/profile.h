// A Profile: which plugins a scheduler runs, in which order, and the
// weights of the scores (docs/scheduler.md, "Plugins and profiles").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sched/framework/options.h"
#include "sched/framework/plugin.h"

namespace herd::sched {

struct WeightedScore {
  std::string name;  // as registered (framework/registry.h)
  std::unique_ptr<ScorePlugin> plugin;
  double weight = 1.0;
};

struct Profile {
  std::vector<std::unique_ptr<FilterPlugin>> filters;  // static ones first, cheapest first
  std::vector<WeightedScore> scores;
  double total_weight = 0;
  bool scores_depend_on_job = false;  // any score goes stale when the job places a task

  // The weight of the score registered as `name` (0: not in the profile).
  double Weight(absl::string_view name) const;
};

// The profile `options` asks for: the filters it names (every registered
// one, in the registry's order, if none), and every registered score with
// its weight from options.weights or else its default; a weight of 0 leaves
// it out. INVALID_ARGUMENT naming the plugin for an unknown name, a
// duplicate, a negative weight or a required filter left out.
absl::StatusOr<Profile> BuildProfile(const Options& options);
// BuildProfile for options already validated (by the flags or a profile
// file): a bad name is a bug and aborts, naming it.
Profile MustBuildProfile(const Options& options);

}  // namespace herd::sched
