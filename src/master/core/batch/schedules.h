// When scheduled jobs start runs (docs/batch.md): the leader's decisions,
// read from the committed cell state and the clock alone.
//
// A scheduled job's next due time is the first its cron expression names
// (in its time zone) after the last one acted on. Once it has come, one
// ScheduleTriggered is decided for the latest due time not after now: due
// times missed meanwhile (no leader was up, or the master was behind) are
// not run one by one, they are counted into that single catch-up run
// (like Kubernetes' CronJob starting at most one missed run). The run
// starts, or is skipped (concurrency forbid while an earlier run is live,
// over quota, its name taken), or replaces the live runs (replace).
#pragma once

#include <cstdint>
#include <vector>

#include "cell/cell_state.h"
#include "herd/v1/mutation.pb.h"

namespace herd::master {

// The ScheduleTriggered of every scheduled job due at now_ms, each valid
// on `state`.
std::vector<v1::Mutation> StepSchedules(const cell::CellState& state, int64_t now_ms);

// When `job` (a live scheduled job) next starts a run; 0 if its schedule
// names no time in the next 5 years, or its time zone cannot be loaded.
int64_t NextDueMs(const cell::Job& job);

}  // namespace herd::master
