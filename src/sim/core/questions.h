// The questions an operator asks Fauxmaster (Borg §3.1), answered with the
// real scheduler on a copy of a cell's state:
//  - "how many more of this job would fit?"
//  - "would this change (drain these machines, remove N machines, add this
//    job, update that job to this spec) evict any task at priority >= P?",
//    with the list of victims.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cell/cell_state.h"
#include "sched/scheduler.h"

namespace herd::sim {

// Runs scheduler passes, committing each one's proposals, until a pass
// proposes nothing (or `max_passes`). Returns the last pass.
sched::PassResult ScheduleAll(cell::CellState& state, sched::Scheduler& scheduler, int max_passes = 20,
                              int64_t now_ms = 0);

// A copy of `state`.
absl::StatusOr<cell::CellState> Copy(const cell::CellState& state);

struct FitAnswer {
  int64_t asked = 0;            // copies tried
  int64_t fit = 0;              // placed without evicting anything
  int64_t fit_preempting = 0;   // placed when it may preempt lower priorities
  int64_t victims = 0;          // tasks it would evict for that
  std::string why;              // why the next one would not fit
};

// How many more tasks of `job` (its template, priority and constraints) fit
// in `state`, up to `max_tasks`. The job's name must not exist in the cell.
absl::StatusOr<FitAnswer> HowManyFit(const cell::CellState& state, v1::JobSpec job, const sched::Options& options,
                                     int32_t max_tasks = 100'000);

struct Change {
  std::vector<std::string> drain;   // machines taken out
  int32_t remove_random = 0;        // and this many random machines more
  uint64_t seed = 1;
  std::vector<v1::JobSpec> add;     // jobs submitted
  // New specs of live jobs: each applied as the master applies an update
  // (cell/job_update.h, the same JobUpdated), all at once: the state a
  // rolling update ends in.
  std::vector<v1::JobSpec> update;
};

struct Victim {
  std::string task;      // user/job/index
  int32_t priority = 0;
  std::string machine;   // where it ran
  std::string outcome;   // "moved to m12", "left pending: 0/10 machines fit: ..."
  bool pending = false;
};

struct EvictAnswer {
  std::vector<std::string> removed;  // machines taken out
  int64_t running_before = 0;        // tasks at >= priority running before
  std::vector<Victim> victims;       // of those, the ones the change disturbs
  int64_t added_placed = 0, added_pending = 0;  // tasks of the added jobs
  // The updated jobs' own tasks: by class of change (their diffs), and how
  // many of them run and wait once the scheduler settled. They are not
  // victims: the update means to restart or move them.
  int32_t updated_restart = 0, updated_reschedule = 0, updated_added = 0, updated_removed = 0;
  int64_t updated_running = 0, updated_pending = 0;
};

// Applies `change` to a copy of `state`, lets the scheduler (with
// preemption) settle, and lists every task at priority >= `min_priority`
// that was running before and was moved or left pending (other than the
// updated jobs' own). NOT_FOUND for an update of a job that is not live.
absl::StatusOr<EvictAnswer> WouldEvict(const cell::CellState& state, const Change& change, int32_t min_priority,
                                       const sched::Options& options);

}  // namespace herd::sim
