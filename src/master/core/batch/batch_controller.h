// BatchController: the leader's driver of batch work (docs/batch.md).
// Every interval it reads the committed cell state and commits what moves
// it on: JobReleased for WAITING jobs whose dependencies (after:) are
// settled (cell::StepDependencies), and ScheduleTriggered for scheduled
// jobs that are due (StepSchedules). Like the rollout controller it keeps
// no state of its own, so a master that takes over carries on from the
// log: a due time is acted on once (the log records the last one), and due
// times missed while no leader was up become one catch-up run.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "master/core/committer.h"
#include "master/core/controller/step_controller.h"

namespace herd::master {

class BatchController : public StepController {
 public:
  struct Options {
    // How often waiting and scheduled jobs are looked at: a dependent job
    // is released, and a run starts, within this long of being due.
    int64_t interval_ms = 500;
  };

  BatchController(Committer* committer, Clock* clock, Options opts);
};

}  // namespace herd::master
