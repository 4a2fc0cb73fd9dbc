// The flags of `herd bench scheduler` (also the standalone sched_bench).
#pragma once

#include <CLI/CLI.hpp>

#include "bench/sched/sched_bench.h"
#include "sched/config/flags.h"

namespace herd::bench {

// `flags` must outlive the parse; its Apply() fills o.scheduler.
inline void AddSchedBenchFlags(CLI::App& cmd, SchedBenchOptions& o, sched::SchedulerFlags& flags) {
  cmd.add_option("--mode", o.mode, "scratch, online, packing or all")->capture_default_str();
  cmd.add_option("--machines", o.machines, "Machines in the cell")->capture_default_str();
  cmd.add_option("--tasks", o.tasks, "Tasks to schedule from scratch")->capture_default_str();
  cmd.add_option("--seed", o.seed, "Seed of the cell and workload")->capture_default_str();
  cmd.add_flag("--ablations", o.ablations, "Also run with each technique switched off");
  cmd.add_option("--time-limit", o.time_limit_s, "Seconds each ablation may take")->capture_default_str();
  cmd.add_option("--fill", o.fill, "Share of the cell the from-scratch workload asks for")->capture_default_str();
  cmd.add_option("--online-tasks", o.online_tasks, "New pending tasks per online pass")->capture_default_str();
  cmd.add_option("--trials", o.trials, "Online passes measured")->capture_default_str();
  cmd.add_option("--packing-tasks", o.packing_tasks, "Tasks in the packing workload")->capture_default_str();
  cmd.add_option("--packing-fill", o.packing_fill, "Share of the cell the packing workload asks for")
      ->capture_default_str();
  cmd.add_option("--trace", o.trace, "Google 2011 machine_events .csv.gz (default: ../shared/data/traces)");
  // Policy, orders, profile, weights, --no-equiv/--no-cache/--no-random: the
  // flags herd master takes (sched/config/knobs.h).
  flags.AddTo(&cmd);
}

}  // namespace herd::bench
