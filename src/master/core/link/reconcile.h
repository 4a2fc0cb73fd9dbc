// The two pure halves of a poll (Borg §3.3): what the master sends a machine
// (its complete desired state) and what the agent's complete observed state
// changes in the cell (only the differences become mutations).
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "cell/cell_state.h"
#include "herd/v1/agent.pb.h"
#include "herd/v1/mutation.pb.h"

namespace herd::master {

// The task run the agent should execute for a RUNNING task.
v1::TaskRun BuildTaskRun(const cell::CellState& state, const cell::Task& task);

// Every task placed on `machine`, as a PollRequest.
v1::PollRequest BuildPollRequest(const cell::CellState& state, const cell::Machine& machine);

// Mutations that bring the cell in line with `observed`: TaskObserved for
// changed runs, TaskExited for runs that ended for good, TaskLost for runs the
// agent should have (they were in `sent`, the desired set the reply answers)
// but does not report, TaskRescheduled for runs in a crash loop or evicted
// (placed again, avoiding this machine for a while), MachinePackages when the
// package cache changed. Runs placed after the poll was built are left alone.
std::vector<v1::Mutation> Reconcile(const cell::CellState& state, const std::string& machine,
                                    const absl::flat_hash_set<std::string>& sent,
                                    const v1::PollResponse& observed, int64_t now_ms);

// How long a task stays off a machine where it crash-looped or was evicted.
inline constexpr int64_t kAvoidAfterCrashLoopMs = 30 * 60 * 1000;
inline constexpr int64_t kAvoidAfterEvictionMs = 5 * 60 * 1000;

// A RunStatus's health as the cell keeps it: "" (no check yet), "healthy",
// "unhealthy: MESSAGE".
std::string HealthText(const v1::Health& health);

}  // namespace herd::master
