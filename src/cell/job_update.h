// Updating a live job by submitting a new spec (Borg §2.3 "update"): what
// the new spec changes, and how each task takes the change, from least to
// most disruptive:
//
//   UPDATE_NONE        nothing to do where it runs (labels, a disruption
//                      budget, a constraint its machine still meets)
//   UPDATE_IN_PLACE    taken where it runs without a restart (priority,
//                      restart policy, grace period, CPU/memory/disk limits
//                      that still fit on its machine)
//   UPDATE_RESTART     restarted on its machine (command, args, env,
//                      packages, ports, health check, isolation, ...)
//   UPDATE_RESCHEDULE  moved: limits or hard constraints its machine no
//                      longer meets, or spreading it now breaks
//
// and UPDATE_ADD / UPDATE_REMOVE for the tasks a new count adds or removes
// (the highest indexes); surviving tasks are never touched by the count
// alone. Fields this file does not know yet count as UPDATE_RESTART.
//
// Pure (no I/O): the master plans an update with DiffJob and commits
// UpdateMutation's JobUpdated; CellState::Check verifies any JobUpdated with
// CheckStaysFit, the same fit rule the planner used.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "cell/cell_state.h"
#include "herd/v1/mutation.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::cell {

// Equal specs but for `source` (where the file came from).
bool SameSpec(const v1::JobSpec& a, const v1::JobSpec& b);

struct UpdateOptions {
  // herd scale: surviving tasks are left as they run, even where the new
  // count changes their resolved template (${task.count}); they see it when
  // they next restart.
  bool keep_survivors = false;
};

// What submitting `next` does to `job`, every task listed with its class
// and reasons. Null or DEAD: `next` creates a new job (versions 0 -> 1, its
// tasks counted as added, not listed). SameSpec: nothing changes
// (to_version == from_version, the tasks counted as unchanged, not listed).
v1::JobDiff DiffJob(const CellState& state, const Job* job, const v1::JobSpec& next, const UpdateOptions& opts = {});

// The JobUpdated that applies `diff` to every task at once (its RUNNING
// tasks of class RESTART restart, RESCHEDULE move; the rest take it in
// place), expecting the job still at diff.from_version().
v1::Mutation UpdateMutation(const v1::JobSpec& next, const v1::JobDiff& diff, std::string reason);

// The JobUpdated that takes `job` to `next` (diff: DiffJob(state, &job,
// next)). A RUNNING task that must restart or move does so at once, or,
// with `strategy` (a rolling update), is held for the rollout controller
// (cell/rollout.h). DiffJob judges a task still on an older version (a
// rollout not finished) by the spec it runs, so one that already runs what
// `next` asks (a rollback to it) takes it in place. `hold_outdated` (herd
// scale, which touches no survivor) also holds the outdated RUNNING tasks
// the diff leaves alone, so none takes a spec it does not run.
v1::Mutation PlanUpdate(const Job& job, const v1::JobSpec& next, const v1::JobDiff& diff, std::string reason,
                        const v1::UpdateStrategy* strategy, bool hold_outdated = false);

// OK iff every RUNNING task of `job` that `u` leaves on its machine with
// the new spec (neither rescheduled, held nor removed) meets the new hard
// constraints there and still fits: a limit that grows must fit in what its
// machine has left once the update's other changes there are made.
// FAILED_PRECONDITION naming the task, the machine and the dimension.
absl::Status CheckStaysFit(const CellState& state, const Job& job, const v1::JobUpdated& u);

// "restart", "in place", ... for people.
std::string UpdateClassText(v1::UpdateClass c);

}  // namespace herd::cell
