// Batch work in the cell (docs/batch.md): jobs that wait for others
// (spec.after) and scheduled jobs (spec.schedule) that start runs.
//
// A job with `after:` is WAITING: its tasks are PENDING but out of the
// scheduler's queue until JobReleased, which the leader's batch
// controller commits once every dependency finished (all its tasks DEAD by
// FINISH) or one of them did not (then the job's tasks fail, naming it).
// A scheduled job is a template with no tasks (state SCHEDULED); at each
// due time ScheduleTriggered starts a run, a batch job named
// NAME-<unix seconds of the due time> made from its spec, or records why
// it skipped one. Both are decided from committed state alone, so a new
// leader carries on where the log says the last one was.
//
// Pure: no I/O (time and time zones come from the caller).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cell/cell_state.h"
#include "herd/v1/mutation.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::cell {

// The longest name a scheduled job may have: its runs add "-" and ten digits.
inline constexpr size_t kMaxScheduledNameLength = 52;
// The most jobs one job may wait for.
inline constexpr int kMaxAfter = 64;

// What `after`, `schedule`, `time_zone` and `concurrency` ask of a spec on
// their own: a valid cron expression, names of the run within limits, no
// `after` on a scheduled job, `after` entries "user/name" listed once and
// not the job itself, time_zone and concurrency only with a schedule.
// (Whether the time zone exists is the admission's question: it reads
// files.) The message starts with the field.
absl::Status CheckBatchFields(const v1::JobSpec& spec);

// Where a job another waits for stands.
struct Dependency {
  enum Kind { kNotDone, kSucceeded, kFailed };
  Kind kind = kNotDone;
  std::string why;  // kFailed: e.g. "task 0: exited with code 1 after 0 restart(s)"
};
Dependency DependencyOf(const CellState& state, absl::string_view job_id);

// A WAITING job's dependencies not finished yet, in spec order.
std::vector<std::string> WaitingFor(const CellState& state, const Job& job);

// JobReleased for every WAITING job whose dependencies are settled: all
// succeeded, or one failed (the first in spec order).
std::vector<v1::Mutation> StepDependencies(const CellState& state);

// The id of the run of `scheduled` (a "user/name" id) due at due_ms.
std::string RunJobId(absl::string_view scheduled_id, int64_t due_ms);
// The spec of that run: the scheduled job's, named as the run, without
// schedule, time_zone and concurrency.
v1::JobSpec RunSpec(const v1::JobSpec& scheduled, int64_t due_ms);

// The runs of a scheduled job whose jobs are live, oldest first.
std::vector<std::string> LiveRuns(const CellState& state, const Job& scheduled);

}  // namespace herd::cell
