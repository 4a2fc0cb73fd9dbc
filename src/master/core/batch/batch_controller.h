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
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "master/core/committer.h"

namespace herd::master {

class BatchController {
 public:
  struct Options {
    // How often waiting and scheduled jobs are looked at: a dependent job
    // is released, and a run starts, within this long of being due.
    int64_t interval_ms = 500;
  };

  BatchController(Committer* committer, Clock* clock, Options opts);
  ~BatchController();
  BatchController(const BatchController&) = delete;
  BatchController& operator=(const BatchController&) = delete;

  void Start();
  void Stop();
  // One pass on the calling thread, at the clock's time: the number of
  // mutations committed.
  absl::StatusOr<int> Step();

 private:
  void Loop();

  Committer* const committer_;
  Clock* const clock_;
  const Options opts_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace herd::master
