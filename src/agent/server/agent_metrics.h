// What an agent exports for Prometheus (docs/monitoring.md lists every
// metric): task attempts started, failed and killed by the OOM killer,
// counted by an extension that runs after the others (so the container
// extension has marked an OOM kill before it is counted), and each task's
// usage as its last sample says, read when scraped.
#pragma once

#include <memory>

#include "agent/supervisor/extension.h"
#include "agent/supervisor/supervisor.h"
#include "metrics/registry.h"

namespace herd::agent {

class MetricsExtension final : public Extension {
 public:
  explicit MetricsExtension(metrics::Registry& registry);
  absl::string_view name() const override { return "metrics"; }
  void Started(const RunView& run, bool recovered) override;
  void Ended(const RunView& run, ExitStatus* exit) override;

 private:
  metrics::Counter starts_;
  metrics::Counter failures_;
  metrics::Counter ooms_;
};

// Registers the per-task usage gauges (labels job and task), refreshed from
// `sup` at every scrape; series of runs gone are dropped, and at most the
// registry's bound per family are kept. `sup` must outlive later scrapes.
void AddTaskUsageGauges(metrics::Registry& registry, const Supervisor* sup);

}  // namespace herd::agent
