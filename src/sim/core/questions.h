// The questions an operator asks Fauxmaster (Borg §3.1), answered with the
// real scheduler on a copy of a cell's state:
//  - "how many more of this job would fit?"
//  - "would this change (drain these machines, remove N machines, add this
//    job) evict any task at priority >= P?", with the list of victims.
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
};

// Applies `change` to a copy of `state`, lets the scheduler (with
// preemption) settle, and lists every task at priority >= `min_priority`
// that was running before and was moved or left pending.
absl::StatusOr<EvictAnswer> WouldEvict(const cell::CellState& state, const Change& change, int32_t min_priority,
                                       const sched::Options& options);

}  // namespace herd::sim
