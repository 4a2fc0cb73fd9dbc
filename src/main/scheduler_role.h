// `herd scheduler` (a scheduler in its own process) and the scheduler flags
// it shares with `herd master` (which runs the same loop in-process).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "sched/framework/options.h"

namespace herd {

struct SchedulerFlags {
  std::string policy = "hybrid";
  std::string order = "round-robin";
  std::string task_order = "fifo";
  bool no_equiv = false;
  bool no_cache = false;
  bool no_random = false;
};

// --policy, --order, --task-order, --no-equiv, --no-cache, --no-random.
void AddSchedulerFlags(CLI::App* cmd, SchedulerFlags* flags);
// INVALID_ARGUMENT naming the flag if a value is unknown.
absl::Status ApplySchedulerFlags(const SchedulerFlags& flags, sched::Options* options);

// The `herd scheduler` role.
void AddScheduler(CLI::App& app, int& rc);

}  // namespace herd
