// The rollout controller's decisions (docs/updates.md): what moves a
// rolling update on, read from the committed cell state alone, so a master
// that takes over mid-update (or the simulator replaying the log) carries
// on from where the log says it is.
//
// A job's rollout (Job::rollout) is ROLLING while some of its RUNNING tasks
// are outdated (they run an older version than the job's: JobUpdated held
// them). Each step updates the next batch (TasksUpdated) so that at most
// MaxUnavailable tasks of the job are unavailable at once: not RUNNING,
// active, passing their health check (if they have one) and running for
// min_healthy_time (asked of the tasks on the new version; the others
// have served all along). Tasks already unavailable go first and cost nothing
// (as Kubernetes counts it). With `canary: N` it updates N tasks and pauses
// once they are healthy, until `herd resume`. A task of the new version
// that exits (it restarts in place, or fails) or is not healthy within
// progress_deadline fails the rollout; with auto_rollback the job goes
// back to the version it replaced, rolled the same way (decided again from
// a FAILED rollout until that is committed).
//
// Pure: no I/O, time passed in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cell/cell_state.h"
#include "herd/v1/mutation.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::cell {

// How many tasks of `tasks` may be down at once under a limit of this
// shape: the tighter of a count and a percentage (rounded down, at least
// one); INT32_MAX when neither is set.
int32_t MaxUnavailable(int32_t count, int32_t percent, int32_t tasks);

// The rollout's limit (one when the strategy sets none), within the job's
// disruption budget.
int32_t RolloutBudget(const Job& job);

// Whether the task serves: RUNNING, active, not unhealthy, healthy if its
// spec has a health check, and started at least min_healthy_ms ago.
bool TaskAvailable(const Task& t, int64_t min_healthy_ms, int64_t now_ms);

// The mutations that move every rolling job on at now_ms: TasksUpdated for
// the next batches, RolloutChanged when one is done, pauses after its
// canaries or fails, and the JobUpdated of an automatic rollback. Each is
// valid on `state` in order.
std::vector<v1::Mutation> StepRollouts(const CellState& state, int64_t now_ms);
std::vector<v1::Mutation> StepRollout(const CellState& state, const Job& job, int64_t now_ms);

// The JobUpdated that puts `job` back at `to`'s spec (0: the version before
// the current one), as a new version, rolled with the job's strategy.
// NOT_FOUND if that version is not kept.
absl::StatusOr<v1::Mutation> RollbackMutation(const CellState& state, const Job& job, int64_t to,
                                              std::string reason);

}  // namespace herd::cell
