// `herd bench scheduler`: the scheduler at Borg scale (issue #3).
//
//   scratch  a cell of --machines machines with the Google 2011 shapes and
//            --tasks pending tasks filling ~90% of it, scheduled from scratch
//            in one pass; with --ablations also with each scalability
//            technique switched off (each under --time-limit);
//   online   --online-tasks new pending tasks into the cell ~85% full:
//            the latency of the pass that places them, over --trials;
//   packing  one workload (--packing-fill of the cell) under worst fit,
//            best fit and hybrid: tasks left pending, stranded CPU and memory.
// Every configuration runs in its own process (so peak memory and time limits
// are its own). Prints tables and one `RESULT name=value` line per figure.
#pragma once

#include <cstdint>
#include <string>

#include "sched/framework/options.h"

namespace herd::bench {

struct SchedBenchOptions {
  std::string mode = "scratch";  // scratch | online | packing | all
  int machines = 12'500;
  int64_t tasks = 1'000'000;
  uint64_t seed = 1;
  // The scheduler as the flags set it (policy, weights, techniques); the
  // seed is --seed above.
  sched::Options scheduler;
  bool ablations = false;
  double time_limit_s = 120;
  double fill = 0.9;
  double online_fill = 0.85;
  int64_t online_tasks = 10'000;
  int trials = 20;
  double packing_fill = 0.97;
  int64_t packing_tasks = 300'000;
  std::string trace;  // machine_events .csv.gz; empty: look in ../shared/data
};

int RunSchedulerBench(const SchedBenchOptions& options);

}  // namespace herd::bench
