#include "agent/server/agent_metrics.h"

#include <set>
#include <string>

namespace herd::agent {

MetricsExtension::MetricsExtension(metrics::Registry& registry)
    : starts_(registry.GetCounter("herd_task_starts_total", "Task attempts started on this machine")),
      failures_(registry.GetCounter("herd_task_failures_total",
                                    "Task attempts that ended other than by exiting 0, while still wanted")),
      ooms_(registry.GetCounter("herd_task_ooms_total", "Task attempts the kernel's OOM killer ended")) {}

void MetricsExtension::Started(const RunView&, bool recovered) {
  if (!recovered) starts_.Inc();
}

void MetricsExtension::Ended(const RunView& run, ExitStatus* exit) {
  if (exit->oom) ooms_.Inc();
  const bool clean = exit->kind == ExitStatus::Kind::kExited && exit->exit_code == 0;
  if (run.desired && !clean) failures_.Inc();
}

namespace {

struct UsageGauge {
  const char* name;
  const char* help;
  double (*value)(const v1::Usage&);
};

constexpr UsageGauge kUsage[] = {
    {"herd_task_cpu_cores", "CPU a task used over the last sampling interval, in cores",
     [](const v1::Usage& u) { return static_cast<double>(u.cpu_millis()) / 1000.0; }},
    {"herd_task_memory_working_set_bytes", "A task's memory the kernel would not reclaim first",
     [](const v1::Usage& u) { return static_cast<double>(u.memory_working_set_bytes()); }},
    {"herd_task_memory_rss_bytes", "A task's resident memory",
     [](const v1::Usage& u) { return static_cast<double>(u.memory_rss_bytes()); }},
    {"herd_task_disk_bytes", "A task's run directory (sandbox and logs) on disk",
     [](const v1::Usage& u) { return static_cast<double>(u.disk_bytes()); }},
};

}  // namespace

void AddTaskUsageGauges(metrics::Registry& registry, const Supervisor* sup) {
  registry.OnCollect([&registry, sup] {
    std::set<metrics::Labels> live;
    for (const v1::RunStatus& run : sup->Observe()) {
      if (!run.desired() || run.terminal() || run.usage().sampled_ms() == 0) continue;
      metrics::Labels labels = {{"job", run.ref().job()}, {"task", std::to_string(run.ref().index())}};
      for (const UsageGauge& g : kUsage) registry.GetGauge(g.name, g.help, labels).Set(g.value(run.usage()));
      live.insert(std::move(labels));
    }
    for (const UsageGauge& g : kUsage) {
      registry.RetainGauges(g.name, [&live](const metrics::Labels& l) { return live.contains(l); });
    }
  });
}

}  // namespace herd::agent
