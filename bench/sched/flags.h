// The flags of `herd bench scheduler` (also the standalone sched_bench).
#pragma once

#include <CLI/CLI.hpp>

#include "bench/sched/sched_bench.h"
#include "sched/framework/options.h"

namespace herd::bench {

inline void AddSchedBenchFlags(CLI::App& cmd, SchedBenchOptions& o) {
  cmd.add_option("--mode", o.mode, "scratch, online, packing or all")->capture_default_str();
  cmd.add_option("--machines", o.machines, "Machines in the cell")->capture_default_str();
  cmd.add_option("--tasks", o.tasks, "Tasks to schedule from scratch")->capture_default_str();
  cmd.add_option("--seed", o.seed, "Seed of the cell and workload")->capture_default_str();
  cmd.add_option("--policy", o.policy, "Packing policy: worst, best or hybrid")->capture_default_str();
  cmd.add_option("--order", o.order, "Order of users within a priority: round-robin or drf")->capture_default_str();
  cmd.add_option("--task-order", o.task_order, "Order of one user's tasks within a priority: fifo or largest")
      ->capture_default_str();
  cmd.add_option("--reserve", o.reserve, "Weight of the reserve score (default 4; 0 = off)");
  cmd.add_flag("!--no-equiv", o.equiv, "Switch off equivalence classes");
  cmd.add_flag("!--no-cache", o.cache, "Switch off score caching");
  cmd.add_flag("!--no-random", o.random, "Switch off relaxed randomization");
  cmd.add_flag("--ablations", o.ablations, "Also run with each technique switched off");
  cmd.add_option("--time-limit", o.time_limit_s, "Seconds each ablation may take")->capture_default_str();
  cmd.add_option("--fill", o.fill, "Share of the cell the from-scratch workload asks for")->capture_default_str();
  cmd.add_option("--online-tasks", o.online_tasks, "New pending tasks per online pass")->capture_default_str();
  cmd.add_option("--trials", o.trials, "Online passes measured")->capture_default_str();
  cmd.add_option("--packing-tasks", o.packing_tasks, "Tasks in the packing workload")->capture_default_str();
  cmd.add_option("--packing-fill", o.packing_fill, "Share of the cell the packing workload asks for")
      ->capture_default_str();
  cmd.add_option("--spread-weight", o.spread_weight, "Weight of spreading across failure domains");
  cmd.add_option("--mix-weight", o.mix_weight, "Weight of mixing priorities on a machine");
  cmd.add_option("--trace", o.trace, "Google 2011 machine_events .csv.gz (default: ../shared/data/traces)");
}

}  // namespace herd::bench
