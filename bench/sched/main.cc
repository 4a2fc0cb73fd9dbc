// sched_bench: `herd bench scheduler` as its own executable.
#include "bench/sched/flags.h"

int main(int argc, char** argv) {
  CLI::App app("Herd scheduler benchmark", "sched_bench");
  herd::bench::SchedBenchOptions o;
  herd::bench::AddSchedBenchFlags(app, o);
  CLI11_PARSE(app, argc, argv);
  return herd::bench::RunSchedulerBench(o);
}
