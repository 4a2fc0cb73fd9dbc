// herd master's reclamation flags (issue #16; docs/scheduler.md,
// "Reclamation"): a preset and overrides of its settings.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "master/core/reclaim/reclaimer.h"

namespace herd {

struct ReclaimFlags {
  std::string preset = "baseline";
  std::string estimator = "borg";
  std::string margin, half_life, startup, interval, percentile;
};

void AddReclaimFlags(CLI::App* cmd, ReclaimFlags* f);
absl::Status ApplyReclaimFlags(const ReclaimFlags& f, master::Reclaimer::Options* out);

}  // namespace herd
