// Prints a workload exactly as `herd sim` loads it (the same SyntheticWorkload
// and Google2011Workload calls, each task's request resolved with the
// master's cell::TaskResources), for bench/calibrate_synthetic.sh, which
// computes the statistics. herd has no command that dumps a loaded workload.
//
// Usage:
//   workload_dump synthetic 'machines=1250,tasks=100000,fill=0.9,seed=1'
//   workload_dump google2011 DIR [AT_SECONDS]   (default: the middle of the task events)
//
// Output (tab-separated): comment lines start with '#'; then one line per
// group of a job's tasks with the same request:
//   job  tasks_in_job  herd_priority  trace_priority(-1 if none)  cpu  memory  tasks
// cpu and memory are shares of the workload's largest machine in that
// resource (the 2011 trace's normalisation: 1.0 = the largest machine).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "cell/task_template.h"
#include "sim/experiments/sources.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: workload_dump synthetic SPEC\n"
               "       workload_dump google2011 DIR [AT_SECONDS]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string kind = argv[1];
  absl::StatusOr<herd::sim::SimWorkload> w;
  if (kind == "synthetic" && argc == 3) {
    w = herd::sim::SyntheticWorkload(argv[2]);
  } else if (kind == "google2011" && (argc == 3 || argc == 4)) {
    double at_s = -1;
    if (argc == 4 && !absl::SimpleAtod(argv[3], &at_s)) return Usage();
    w = herd::sim::Google2011Workload(argv[2], at_s);
  } else {
    return Usage();
  }
  if (!w.ok()) {
    std::fprintf(stderr, "workload_dump: %s\n", std::string(w.status().message()).c_str());
    return 1;
  }
  int64_t max_cpu = 0, max_mem = 0;
  double cell_cpu = 0, cell_mem = 0;
  for (const auto& m : w->machines) {
    max_cpu = std::max<int64_t>(max_cpu, m.capacity().cpu_millis());
    max_mem = std::max<int64_t>(max_mem, m.capacity().memory_bytes());
  }
  for (const auto& m : w->machines) {
    cell_cpu += static_cast<double>(m.capacity().cpu_millis()) / static_cast<double>(max_cpu);
    cell_mem += static_cast<double>(m.capacity().memory_bytes()) / static_cast<double>(max_mem);
  }
  std::printf("# workload\t%s\n", w->name.c_str());
  std::printf("# machines\t%zu\n# largest_cpu_millis\t%" PRId64 "\n# largest_memory_bytes\t%" PRId64
              "\n# cell_cpu\t%.3f\n# cell_memory\t%.3f\n",
              w->machines.size(), max_cpu, max_mem, cell_cpu, cell_mem);
  for (const herd::v1::JobSpec& job : w->jobs) {
    int trace_priority = -1;
    auto it = job.labels().find("trace-priority");
    if (it != job.labels().end() && !absl::SimpleAtoi(it->second, &trace_priority)) trace_priority = -1;
    std::map<std::pair<int64_t, int64_t>, int64_t> groups;
    for (int32_t i = 0; i < job.task_count(); ++i) {
      herd::ResourceVector r = herd::cell::TaskResources(job, i);
      ++groups[{r.cpu_millis, r.memory_bytes}];
    }
    for (const auto& [req, n] : groups) {
      std::printf("%s\t%d\t%d\t%d\t%.9g\t%.9g\t%" PRId64 "\n", job.name().c_str(), job.task_count(), job.priority(),
                  trace_priority, static_cast<double>(req.first) / static_cast<double>(max_cpu),
                  static_cast<double>(req.second) / static_cast<double>(max_mem), n);
    }
  }
  return 0;
}
