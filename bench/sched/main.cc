// sched_bench: `herd bench scheduler` as its own executable.
#include <cstdio>

#include "bench/sched/flags.h"

int main(int argc, char** argv) {
  CLI::App app("Herd scheduler benchmark", "sched_bench");
  herd::bench::SchedBenchOptions o;
  herd::sched::SchedulerFlags flags;
  herd::bench::AddSchedBenchFlags(app, o, flags);
  CLI11_PARSE(app, argc, argv);
  if (absl::Status st = flags.Apply(&o.scheduler); !st.ok()) {
    std::fprintf(stderr, "sched_bench: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  return herd::bench::RunSchedulerBench(o);
}
