// The scheduler's plugins by name (docs/scheduler.md, "Plugins and
// profiles"). As kube-scheduler's in-tree registry does, the built-in
// plugins are listed once (plugins/builtin.cc); a profile names the ones
// it runs, and `herd master`, `herd scheduler`, `herd sim` and `herd bench
// scheduler` take a --weight-NAME flag for every score registered here.
//
// A new score is a new file (the plugin and its ScoreEntry) and one line in
// plugins/builtin.cc; CONTRIBUTING.md walks through one
// (plugins/score/example_score_test.cc).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sched/framework/options.h"
#include "sched/framework/plugin.h"

namespace herd::sched {

struct FilterEntry {
  std::string name;  // as in --filters and profile files: "machine-up"
  std::string help;
  // Every profile runs it: leaving it out would place tasks where they
  // cannot run (a machine that is down, resources it does not have).
  bool required = false;
  std::function<std::unique_ptr<FilterPlugin>(const Options&)> make;
};

struct ScoreEntry {
  std::string name;  // as in --weight-NAME and profile files: "spread"
  std::string help;
  // Its weight when no profile or flag sets one (0: off unless asked for).
  std::function<double(const Options&)> default_weight;
  std::function<std::unique_ptr<ScorePlugin>(const Options&)> make;
};

class Registry {
 public:
  // Every built-in plugin, in the default profile's order.
  static const Registry& BuiltIn();

  // ALREADY_EXISTS if the name is taken; INVALID_ARGUMENT if it is not a
  // lower-case name of letters, digits and '-', or `make` is missing.
  absl::Status AddFilter(FilterEntry entry);
  absl::Status AddScore(ScoreEntry entry);

  const FilterEntry* FindFilter(absl::string_view name) const;
  const ScoreEntry* FindScore(absl::string_view name) const;
  const std::vector<FilterEntry>& filters() const { return filters_; }
  const std::vector<ScoreEntry>& scores() const { return scores_; }
  // "machine-up, crash-avoid, ..." for error messages.
  std::string FilterNames() const;
  std::string ScoreNames() const;

 private:
  std::vector<FilterEntry> filters_;
  std::vector<ScoreEntry> scores_;
};

// Adds the built-in plugins to `r` (plugins/builtin.cc).
void RegisterBuiltinPlugins(Registry& r);

}  // namespace herd::sched
